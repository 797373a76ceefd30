//! Fixtures for the core's unit tests: minimal JPEG headers (all the writer reads of a frame),
//! the AV1 segments of tests/segments, and chunks written with them.

use std::path::{Path, PathBuf};

use crate::chunk::writer::{ChunkWriter, StreamSpec, WriteMode};
use crate::format::paths::ChunkPaths;
use crate::video::Codec;

/// A JPEG header (SOI, SOF0 of `w`x`h` in colour, EOI) with `extra` filler bytes, so that
/// frames differ in length and content.
pub(crate) fn fake_jpeg(w: u16, h: u16, extra: usize) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08];
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
    v.extend(std::iter::repeat_n(0x55, extra));
    v.extend_from_slice(&[0xFF, 0xD9]);
    v
}

/// [`fake_jpeg`] with one (gray) component.
pub(crate) fn gray_jpeg(w: u16, h: u16) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x0B, 0x08];
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&[1, 1, 0x11, 0, 0xFF, 0xD9]);
    v
}

/// The frames [`write_chunk`] stores for a video of `n` frames (8x4, colour).
pub(crate) fn frames_of(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|j| fake_jpeg(8, 4, j)).collect()
}

pub(crate) fn refs(frames: &[Vec<u8>]) -> Vec<&[u8]> {
    frames.iter().map(Vec::as_slice).collect()
}

/// Chunk `k` of `dir` with videos `(id, frames)`, each frame from [`frames_of`] and each
/// `meta_data` `[{"n": frames}]`.
pub(crate) fn write_chunk(dir: &Path, k: u64, videos: &[(&str, usize)]) -> ChunkPaths {
    let paths = ChunkPaths::numbered(dir, k);
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    for &(id, n) in videos {
        let frames = frames_of(n);
        w.append(id, format!("{{\"n\": {n}}}").as_bytes(), &refs(&frames))
            .unwrap();
    }
    w.close().unwrap()
}

fn segment_fixture(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/segments");
    std::fs::read(dir.join(name)).unwrap()
}

/// Two real AV1 segments of 8 frames of 128x72 each, and how they are coded.
pub(crate) fn segments() -> (Vec<Vec<u8>>, StreamSpec) {
    let streams = vec![
        segment_fixture("bt601-128x72-0.av1"),
        segment_fixture("bt601-128x72-1.av1"),
    ];
    let spec = StreamSpec {
        codec: Codec::Av1,
        matrix: 6,
        full_range: false,
        width: 128,
        height: 72,
        gop: 8,
    };
    (streams, spec)
}

/// Chunk `k` of `dir` with video "jpeg" (2 JPEG frames), then video "seg" stored as the two
/// segments of [`segments`] (16 frames).
pub(crate) fn write_segment_chunk(dir: &Path, k: u64) -> ChunkPaths {
    let paths = ChunkPaths::numbered(dir, k);
    let (streams, spec) = segments();
    let segs: Vec<(&[u8], usize)> = streams.iter().map(|s| (s.as_slice(), 8)).collect();
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    w.append("jpeg", b"{}", &refs(&frames_of(2))).unwrap();
    w.append_segments("seg", b"{}", &spec, &segs).unwrap();
    w.close().unwrap()
}

/// XORs byte `at` of the file at `path` with `bits`.
pub(crate) fn flip(path: &Path, at: u64, bits: u8) {
    let mut raw = std::fs::read(path).unwrap();
    raw[at as usize] ^= bits;
    std::fs::write(path, raw).unwrap();
}
