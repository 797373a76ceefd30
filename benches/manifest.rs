//! Criterion benchmarks of the dataset manifest's paged view (issue 36, docs/FORMAT.md §7.5;
//! no Python): opening the state of a dataset of `GULPIO_BENCH_VIDEOS` videos (1,000,000; 100
//! per chunk, 24-byte ids as docs/DECISIONS.md's manifest sizes assume) whose base is a
//! snapshot, with a tail of 16 commits; a lookup of a random id, warm; the video at a random
//! position; `len()`. The targets: a local open <= 50 ms and a lookup <= 50 us at 10M
//! videos. RSS growth from one open is printed (VmRSS; the snapshot is mapped, so only the
//! front and the pages touched count).
//!
//! The records describe chunks that do not exist: a view checks files only for the chunks
//! the tail names, which here do.
//!
//!     cargo bench --bench manifest -- --warm-up-time 1 --measurement-time 3
//!     GULPIO_BENCH_VIDEOS=10000000 cargo bench --bench manifest

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use gulpio_rs::format::manifest::{ChunkInput, ChunkRecord, Op, VideoInput};
use gulpio_rs::manifest::{compact, load_state, write_genesis, View};
use gulpio_rs::{ChunkPaths, ChunkWriter, WriteMode};

const PER_CHUNK: u64 = 100;

fn id_of(v: u64) -> String {
    format!("video-{v:018}")
}

fn videos() -> u64 {
    std::env::var("GULPIO_BENCH_VIDEOS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000)
}

fn record(k: u64) -> ChunkRecord {
    ChunkRecord {
        number: k,
        first: 0,
        video_count: 0,
        op: Op::State,
        index_version: 2,
        gidx_len: 4096,
        gidx_header_crc: k as u32,
        gmeta_crc: 7,
        gmeta_len: 2048,
        gulp_len: 1 << 20,
        frame_count: 0,
    }
}

fn dataset(dir: &Path, n: u64) {
    let chunks: Vec<ChunkInput> = (0..n.div_ceil(PER_CHUNK))
        .map(|k| ChunkInput {
            record: record(k),
            videos: (k * PER_CHUNK..((k + 1) * PER_CHUNK).min(n))
                .map(|v| VideoInput {
                    id: id_of(v),
                    frame_count: 30,
                    height: 256,
                    width: 456,
                    channels: 3,
                    segments: false,
                })
                .collect(),
        })
        .collect();
    write_genesis(dir, &chunks).expect("genesis");
    // A snapshot base, as every dataset compacted once has: the genesis is not.
    let state = load_state(dir).expect("state");
    compact(dir, &state).expect("snapshot");
    // A tail of real chunks, published through the writer as any ingest does.
    for t in 0..16 {
        let paths = ChunkPaths::numbered(dir, n.div_ceil(PER_CHUNK) + t);
        let mut w = ChunkWriter::open(&paths, WriteMode::Create).expect("writer");
        w.append(&format!("tail-{t}"), b"{}", &[&tiny_jpeg()])
            .expect("append");
        w.close().expect("publish");
    }
}

/// A JPEG header the writer accepts (SOI, SOF0 8x8 colour, EOI).
fn tiny_jpeg() -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0, 8, 0, 8];
    v.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1, 0xFF, 0xD9]);
    v
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn bench(c: &mut Criterion) {
    let n = videos();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let start = std::time::Instant::now();
    dataset(dir, n);
    eprintln!(
        "{n} videos: manifest written in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let before = rss_kb();
    let view = View::open(dir).expect("open");
    eprintln!(
        "one open: {} videos, version {}, RSS +{:.1} MB",
        view.len(),
        view.version,
        (rss_kb().saturating_sub(before)) as f64 / 1024.0
    );
    let mut group = c.benchmark_group(format!("manifest view, {n} videos"));
    group.bench_function("open (base mapped, tail of 16 commits)", |b| {
        b.iter(|| black_box(View::open(dir).expect("open").len()))
    });
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let ids: Vec<String> = (0..4096).map(|_| id_of(next() % n)).collect();
    let mut i = 0;
    group.bench_function("lookup of a random id, warm", |b| {
        b.iter(|| {
            i = (i + 1) % ids.len();
            black_box(view.lookup(&ids[i]).expect("lookup"))
        })
    });
    group.bench_function("the video at a random position", |b| {
        b.iter(|| black_box(view.video(next() % n).expect("video").frame_count))
    });
    group.bench_function("len()", |b| b.iter(|| black_box(view.len())));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
