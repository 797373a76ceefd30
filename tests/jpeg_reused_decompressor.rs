//! A thread's libjpeg-turbo decompressor was reused from frame to frame, and libjpeg-turbo 3.1.0
//! (the copy turbojpeg-sys builds) leaves a pointer into the previous image's freed memory
//! when a fast decode uses its merged upsampler; skipping rows above a crop then wrote through
//! it (now every frame gets a decompressor of its own: `jpeg::turbo::with_decompressor`). In DataLoader workers that crashed or failed valid
//! frames every few hundred batches of fused random-resized crops, depending on where malloc
//! had put the next image's state: a plain run of the sequence below passes with the bug as
//! well. So the sequence runs in a child process under valgrind's memcheck, which keeps freed
//! memory unusable and fails the child on the first touch of it. `.ci/run` installs valgrind
//! and sets `GULPIO_REQUIRE_VALGRIND=1`; elsewhere, without valgrind, the child runs bare (the
//! pixel checks only) and the test says so.
#![cfg(all(feature = "turbo", target_os = "linux", target_env = "gnu"))]

use std::process::Command;

use gulpio_rs::jpeg::encode::{encode, EncodeSettings, Subsampling};
use gulpio_rs::jpeg::{
    decode_into_with, decode_reframed_with, Colorspace, CropBox, Precision, Reframe,
};
use gulpio_rs::pixels::resize::Pixels;

const CHILD: &str = "GULPIO_TEST_REUSED_DECOMPRESSOR_CHILD";
const NAME: &str = "fast_crops_after_scaled_decodes_touch_no_freed_memory";
const H: usize = 256;
const W: usize = 456;

fn frame() -> Vec<u8> {
    // Smooth colour gradients with some texture: chroma that upsampling has to work on.
    let mut px = vec![0u8; H * W * 3];
    for y in 0..H {
        for x in 0..W {
            let i = (y * W + x) * 3;
            px[i] = (x * 255 / W) as u8;
            px[i + 1] = (y * 255 / H) as u8;
            px[i + 2] = ((x ^ y) & 0xFF) as u8;
        }
    }
    let settings = EncodeSettings {
        quality: 90,
        subsampling: Subsampling::S420,
        restart_rows: false,
    };
    encode(Pixels::new(&px, H, W, 3).expect("shape"), settings).expect("encodes")
}

fn reframe(top: f64, left: f64, height: f64, width: f64, size: Option<(usize, usize)>) -> Reframe {
    Reframe {
        crop: Some(CropBox {
            top,
            left,
            height,
            width,
        }),
        size,
        flip: false,
        dct_scaling: true,
    }
}

/// A scaled decode (chroma reconstructed at double scale: no merged upsampler) and then
/// full-scale crops starting below the top row (merged upsampler, rows skipped), on this
/// thread's decompressor; each crop must equal the same rows of a whole fast decode.
fn sequence() {
    let jpeg = frame();
    let mut whole = vec![0u8; H * W * 3];
    decode_into_with(&jpeg, Colorspace::Rgb, Precision::Fast, &mut whole).expect("whole frame");
    for top in [1usize, 17, 34, 99] {
        let mut small = vec![0u8; 112 * 200 * 3];
        let scaled = reframe(0.0, 0.0, H as f64, W as f64, Some((112, 200)));
        decode_reframed_with(
            &jpeg,
            Colorspace::Rgb,
            &scaled,
            None,
            Precision::Fast,
            &mut small,
        )
        .expect("scaled decode");
        let (ch, cw, left) = (120usize, 120usize, 48usize);
        let mut crop = vec![0u8; ch * cw * 3];
        let spec = reframe(top as f64, left as f64, ch as f64, cw as f64, None);
        decode_reframed_with(
            &jpeg,
            Colorspace::Rgb,
            &spec,
            None,
            Precision::Fast,
            &mut crop,
        )
        .expect("crop");
        for y in 0..ch {
            let row = &whole[((top + y) * W + left) * 3..((top + y) * W + left + cw) * 3];
            assert_eq!(
                &crop[y * cw * 3..(y + 1) * cw * 3],
                row,
                "top {top}, row {y}"
            );
        }
    }
}

#[test]
fn fast_crops_after_scaled_decodes_touch_no_freed_memory() {
    if std::env::var_os(CHILD).is_some() {
        sequence();
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let args = ["--exact", NAME, "--test-threads=1", "--nocapture"];
    let valgrind = Command::new("valgrind").arg("--version").output().is_ok();
    let mut cmd = if valgrind {
        let mut c = Command::new("valgrind");
        c.args(["--quiet", "--error-exitcode=86", "--leak-check=no"])
            .arg(&exe)
            .args(args);
        c
    } else {
        let required = std::env::var_os("GULPIO_REQUIRE_VALGRIND").is_some_and(|v| v == "1");
        assert!(
            !required,
            "GULPIO_REQUIRE_VALGRIND=1 but valgrind is not on PATH"
        );
        eprintln!("valgrind is not on PATH: the sequence runs without the memory check");
        let mut c = Command::new(&exe);
        c.args(args);
        c
    };
    let out = cmd
        .env(CHILD, "1")
        .output()
        .expect("runs the test binary again");
    assert!(
        out.status.success(),
        "the child ended with {} (86: valgrind found invalid memory accesses):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The child ran the sequence (a filter that matched nothing would also succeed).
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}
