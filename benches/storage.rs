//! Criterion benchmarks of the storage core (no Python): opening an indexed chunk and a
//! directory of chunks, reading a frame's bytes with and without CRC verification, and the
//! CRC's cost next to a JPEG decode.
//!
//! All data is written to a temporary directory at bench time, so results reflect a warm page
//! cache. Frames for the structural benchmarks are hand-made JPEGs (SOI, a COM segment that
//! sets the size, a baseline SOF0, EOI): the writer only parses the SOF, and a decodable image
//! would not change what is measured. The decode comparison needs a real JPEG and reads
//! `ljt_testorig.jpg` from the shared test data; that group is skipped if it is missing.
//!
//!     cargo bench --bench storage -- --warm-up-time 1 --measurement-time 2

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gulpio_rs::chunk::probe::probe_index;
use gulpio_rs::decode::decode_frame;
use gulpio_rs::jpeg::{decode, Colorspace};
use gulpio_rs::{ChunkPaths, ChunkReader, ChunkWriter, Directory, WriteMode};

const VIDEOS_PER_CHUNK: usize = 100;
const FRAMES_PER_VIDEO: usize = 30;
const DIRECTORY_CHUNKS: u64 = 100;
const TEST_JPEG: &str = "/work/shared/data/jpeg-conformance/ljt_testorig.jpg";

/// A JPEG the writer accepts, of exactly `len` bytes: a COM segment's length is what makes a
/// frame "16 KB" without needing an encoder.
fn sized_jpeg(len: usize) -> Vec<u8> {
    const SOF0_8X8_RGB: [u8; 19] = [
        0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x08, 0x00, 0x08, 0x03, 0x01, 0x11, 0x00, 0x02, 0x11,
        0x01, 0x03, 0x11, 0x01,
    ];
    // SOI, COM marker and length, SOF0, EOI; one COM segment holds at most 65533 bytes.
    let fixed = 2 + 4 + SOF0_8X8_RGB.len() + 2;
    assert!(
        (fixed..=fixed + 65533).contains(&len),
        "unsupported frame size {len}"
    );
    let filler = len - fixed;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&[0xFF, 0xD8, 0xFF, 0xFE]);
    out.extend_from_slice(&((filler + 2) as u16).to_be_bytes());
    // A byte pattern rather than zeros, so the CRC does not meet a degenerate input.
    out.extend((0..filler).map(|i| (i * 31 % 251) as u8));
    out.extend_from_slice(&SOF0_8X8_RGB);
    out.extend_from_slice(&[0xFF, 0xD9]);
    debug_assert_eq!(out.len(), len);
    out
}

/// Writes chunk `k` of `dir`: `VIDEOS_PER_CHUNK` videos of `FRAMES_PER_VIDEO` copies of
/// `jpeg`, with gulpio-style metadata, and returns its paths.
fn write_chunk(dir: &Path, k: u64, jpeg: &[u8]) -> ChunkPaths {
    let paths = ChunkPaths::numbered(dir, k);
    let frames = vec![jpeg; FRAMES_PER_VIDEO];
    let mut writer = ChunkWriter::open(&paths, WriteMode::Create).expect("open writer");
    for v in 0..VIDEOS_PER_CHUNK {
        let i = k as usize * VIDEOS_PER_CHUNK + v;
        let meta = format!(r#"{{"label": "class_{}", "idx": {i}}}"#, i % 100);
        writer
            .append(&i.to_string(), meta.as_bytes(), &frames)
            .expect("append");
    }
    writer.close().expect("close writer");
    paths
}

/// (i) Opening one indexed chunk: what a directory open does per chunk (`probe_index`), the
/// deferred full check a first read adds (`from_index`), and the legacy JSON path for contrast.
fn open_chunk(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = write_chunk(dir.path(), 0, &sized_jpeg(600));
    let mut g = c.benchmark_group("open_chunk_100v_30f");
    g.bench_function("probe_index", |b| {
        b.iter(|| probe_index(black_box(&paths)).expect("probe"))
    });
    g.bench_function("probe_index+from_index", |b| {
        b.iter(|| {
            let probe = probe_index(black_box(&paths)).expect("probe");
            ChunkReader::from_index(&paths, &probe.header_bytes).expect("open")
        })
    });
    g.bench_function("open_legacy(.gmeta)", |b| {
        b.iter(|| ChunkReader::open_legacy(black_box(&paths)).expect("open legacy"))
    });
    g.finish();
}

/// (ii) `Directory::open` of 100 chunks (10,000 videos), through indexes and, for data written
/// by gulpio/gulpio2, through the `.gmeta` files alone.
fn open_directory(c: &mut Criterion) {
    let indexed = tempfile::tempdir().expect("tempdir");
    let legacy = tempfile::tempdir().expect("tempdir");
    let jpeg = sized_jpeg(600);
    for k in 0..DIRECTORY_CHUNKS {
        let p = write_chunk(indexed.path(), k, &jpeg);
        let q = ChunkPaths::numbered(legacy.path(), k);
        std::fs::copy(&p.data, &q.data).expect("copy data");
        std::fs::copy(&p.meta, &q.meta).expect("copy meta");
    }
    let mut g = c.benchmark_group("open_directory_100_chunks");
    g.throughput(Throughput::Elements(
        DIRECTORY_CHUNKS * VIDEOS_PER_CHUNK as u64,
    ));
    g.bench_function("indexed", |b| {
        b.iter(|| Directory::open(black_box(indexed.path())).expect("open"))
    });
    g.bench_function("legacy", |b| {
        b.iter(|| Directory::open(black_box(legacy.path())).expect("open"))
    });
    g.finish();
}

/// (iii) One frame's bytes, with and without CRC verification, walking the chunk in file order
/// so the checked variant streams through more data than fits in the CPU caches (3,000
/// frames of 16 KB are 48 MB), as reading a dataset does.
fn frame_bytes(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame_bytes");
    for size in [600usize, 16 * 1024] {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = write_chunk(dir.path(), 0, &sized_jpeg(size));
        let (reader, _) = ChunkReader::open_mapped(&paths).expect("open");
        g.throughput(Throughput::Bytes(size as u64));
        for check in [true, false] {
            let name = if check { "check" } else { "no_check" };
            g.bench_with_input(BenchmarkId::new(name, size), &check, |b, &check| {
                let mut n = 0usize;
                b.iter(|| {
                    let (v, k) = (n / FRAMES_PER_VIDEO, n % FRAMES_PER_VIDEO);
                    n = (n + 1) % (VIDEOS_PER_CHUNK * FRAMES_PER_VIDEO);
                    reader.frame_bytes(v, k as i64, check).expect("frame").len()
                })
            });
        }
    }
    g.finish();
}

/// (iv) CRC32 of a real JPEG next to decoding it, per frame: the verification the reader does
/// by default must stay a small fraction of the decode it precedes.
fn crc_vs_decode(c: &mut Criterion) {
    let Ok(jpeg) = std::fs::read(TEST_JPEG) else {
        eprintln!("skipping crc_vs_decode: {TEST_JPEG} not found");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = write_chunk(dir.path(), 0, &jpeg);
    let (reader, _) = ChunkReader::open_mapped(&paths).expect("open");
    let mut g = c.benchmark_group("crc_vs_decode_ljt_testorig_227x149");
    g.throughput(Throughput::Elements(1));
    g.bench_function("crc32fast", |b| {
        b.iter(|| crc32fast::hash(black_box(&jpeg)))
    });
    g.bench_function("frame_bytes_check", |b| {
        b.iter(|| {
            reader
                .frame_bytes(black_box(0), 0, true)
                .expect("frame")
                .len()
        })
    });
    g.bench_function("frame_bytes_no_check", |b| {
        b.iter(|| {
            reader
                .frame_bytes(black_box(0), 0, false)
                .expect("frame")
                .len()
        })
    });
    g.bench_function("decode_rgb", |b| {
        b.iter(|| decode(black_box(&jpeg), Colorspace::Rgb).expect("decode"))
    });
    g.bench_function("decode_frame_check", |b| {
        b.iter(|| decode_frame(&reader, black_box(0), 0, true, Colorspace::Rgb).expect("decode"))
    });
    g.finish();
}

criterion_group!(
    benches,
    open_chunk,
    open_directory,
    frame_bytes,
    crc_vs_decode
);
criterion_main!(benches);
