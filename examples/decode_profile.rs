//! Decodes one JPEG file N times with the crate's built-in decoder, for profiling
//! (`perf record`, `valgrind --tool=callgrind`) and quick per-frame timings.
//!
//! ```text
//! cargo build --release --example decode_profile
//! target/release/examples/decode_profile frame.jpg 20000
//! ```

use std::hint::black_box;
use std::time::Instant;

use gulpio_rs::jpeg::{decode, Colorspace};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), iterations) = (args.next(), args.next()) else {
        eprintln!("usage: decode_profile FILE.jpg [ITERATIONS (default 10000)]");
        std::process::exit(2);
    };
    let iterations: usize = match iterations.map(|s| s.parse()) {
        None => 10_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("ITERATIONS must be a positive integer");
            std::process::exit(2);
        }
    };
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        eprintln!("cannot read {path}: {e}");
        std::process::exit(1);
    });

    // One decode outside the clock: fails early on a bad file and warms caches.
    let (pixels, h, w, c) = decode(&bytes, Colorspace::Rgb).unwrap_or_else(|e| {
        eprintln!("cannot decode {path}: {}", e.message());
        std::process::exit(1);
    });
    let checksum: u64 = pixels.iter().map(|&p| u64::from(p)).sum();

    let t0 = Instant::now();
    for _ in 0..iterations {
        let out = decode(black_box(&bytes), Colorspace::Rgb).expect("decoded once already");
        black_box(out);
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{path}: {w}x{h}x{c}, {} bytes, {iterations} decodes in {secs:.3} s: \
         {:.1} us/frame, {:.0} frames/s (pixel sum {checksum})",
        bytes.len(),
        secs / iterations as f64 * 1e6,
        iterations as f64 / secs,
    );
}
