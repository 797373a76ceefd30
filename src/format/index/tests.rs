use super::*;
use crate::format::segments::{SegmentRec, StreamRec};
use crate::format::Storage;

fn sample() -> Vec<u8> {
    let mut b = IndexBuilder::new();
    let f = |offset, len| FrameRec {
        offset,
        jpeg_len: len,
        crc: 7,
        width: 4,
        height: 2,
        channels: 3,
        pad: super::super::pad_for(len as u64),
    };
    b.push_video("a", b"[{\"x\": 1}]", &[f(0, 10), f(12, 8)])
        .unwrap();
    b.push_video("é/b", b"[{}]", &[]).unwrap();
    b.push_video("c", b"[{}]", &[f(20, 5)]).unwrap();
    b.encode(28, 1, 100, 2)
}

/// The same chunk with restart markers in two frames (a version 2 index).
fn sample_v2() -> Vec<u8> {
    let mut b = IndexBuilder::new();
    let f = |offset, len| FrameRec {
        offset,
        jpeg_len: len,
        crc: 7,
        width: 4,
        height: 2,
        channels: 3,
        pad: super::super::pad_for(len as u64),
    };
    b.push_video_with_restarts("a", b"[{\"x\": 1}]", &[f(0, 10), f(12, 8)], &[&[2, 5], &[]])
        .unwrap();
    b.push_video("é/b", b"[{}]", &[]).unwrap();
    b.push_video_with_restarts("c", b"[{}]", &[f(20, 5)], &[&[1]])
        .unwrap();
    b.encode(28, 1, 100, 2)
}

#[test]
fn version_2_keeps_restart_markers_and_version_1_stays_without() {
    let v1 = Index::parse(Storage::Owned(sample())).unwrap();
    assert_eq!(v1.header().version, 1);
    assert_eq!(v1.restarts(0), None);
    let idx = Index::parse(Storage::Owned(sample_v2())).unwrap();
    idx.verify_full().unwrap();
    assert_eq!(idx.header().version, 2);
    assert_eq!(idx.restarts(0), Some(vec![2, 5]));
    assert_eq!(idx.restarts(1), None);
    assert_eq!(idx.restarts(2), Some(vec![1]));
    assert_eq!(idx.restarts(3), None);
    assert_eq!(idx.meta(0), b"[{\"x\": 1}]");
    assert_eq!(idx.frame(2).frame_info(), (20, 3, 8));
    // A marker past its frame's end is refused by the full check.
    let mut b = IndexBuilder::new();
    let f = FrameRec {
        jpeg_len: 4,
        ..Default::default()
    };
    b.push_video_with_restarts("a", b"[{}]", &[f], &[&[3]])
        .unwrap();
    let bad = Index::parse(Storage::Owned(b.encode(4, 0, 0, 0))).unwrap();
    assert!(bad.verify_full().is_err());
}

#[test]
fn every_single_byte_corruption_of_a_version_2_index_is_detected() {
    let good = sample_v2();
    assert_every_bit_flip_is_detected(&good);
    for len in 0..good.len() {
        assert!(Index::parse(Storage::Owned(good[..len].to_vec())).is_err());
    }
}

/// A JPEG video, then a video stored as two segments (a version 3 index).
fn sample_v3() -> (Vec<u8>, Vec<SegmentRec>) {
    use super::super::segments::{FLAG_KEYFRAME, MATRIX_BT709};
    let mut b = IndexBuilder::new();
    let jpeg = FrameRec {
        offset: 0,
        jpeg_len: 10,
        crc: 7,
        width: 4,
        height: 2,
        channels: 3,
        pad: 2,
    };
    b.push_video("a", b"[{}]", &[jpeg]).unwrap();
    let segment = |offset: u64, first: u32, n: u16, bytes: &[u8]| SegmentRec {
        offset,
        len: bytes.len() as u32,
        crc: crc32fast::hash(bytes),
        first_frame: first,
        frame_count: n,
        flags: FLAG_KEYFRAME,
        pad: super::super::pad_for(bytes.len() as u64),
    };
    let (one, two) = ([9u8; 21], [5u8; 10]);
    let segments = vec![segment(12, 0, 3, &one), segment(36, 3, 2, &two)];
    let mut frames = segments[0].tiles(64, 48, &one).unwrap();
    frames.extend(segments[1].tiles(64, 48, &two).unwrap());
    let stream = StreamRec {
        codec: 1,
        chroma: 1,
        depth: 8,
        matrix: MATRIX_BT709,
        range: 1,
        width: 64,
        height: 48,
        segment_count: 0,
        segment_start: 0,
        gop: 3,
    };
    b.push_segment_video("v", b"[{\"y\": 2}]", &frames, stream, &segments)
        .unwrap();
    b.push_video("c", b"[]", &[]).unwrap();
    (b.encode(48, 1, 100, 2), segments)
}

#[test]
fn version_3_holds_streams_and_segments() {
    let (bytes, segments) = sample_v3();
    let idx = Index::parse(Storage::Owned(bytes)).unwrap();
    idx.verify_full().unwrap();
    let h = idx.header();
    assert_eq!((h.version, h.stream_count, h.segment_count), (3, 1, 2));
    assert_eq!(idx.stream_of(0), None);
    assert_eq!(idx.stream_of(2), None);
    let s = idx.stream_of(1).unwrap();
    assert_eq!((s.width, s.height, s.matrix, s.range), (64, 48, 1, 1));
    assert_eq!((s.segment_start, s.segment_count, s.gop), (0, 2, 3));
    assert_eq!(idx.segment(0), segments[0]);
    assert_eq!(idx.segment(1), segments[1]);
    assert_eq!(idx.frame(1 + 2).frame_info(), (20, 3, 16));
    assert_eq!(idx.meta(1), b"[{\"y\": 2}]");
    assert_eq!(idx.restarts(0), None);
}

#[test]
fn every_single_byte_corruption_of_a_version_3_index_is_detected() {
    let (good, _) = sample_v3();
    assert_every_bit_flip_is_detected(&good);
    for len in 0..good.len() {
        assert!(Index::parse(Storage::Owned(good[..len].to_vec())).is_err());
    }
}

#[test]
fn segments_that_do_not_tile_their_video_are_refused_when_written() {
    let (_, segments) = sample_v3();
    let mut b = IndexBuilder::new();
    let stream = StreamRec {
        codec: 1,
        chroma: 1,
        depth: 8,
        matrix: 6,
        range: 0,
        width: 64,
        height: 48,
        segment_count: 0,
        segment_start: 0,
        gop: 3,
    };
    let frames = segments[0].tiles(64, 48, &[9u8; 21]).unwrap();
    // Two segments for the first one's three frames.
    let r = b.push_segment_video("v", b"[]", &frames, stream, &segments);
    assert!(r.is_err());
    assert_eq!(b.video_count(), 0);
}

#[test]
fn round_trip() {
    let idx = Index::parse(Storage::Owned(sample())).unwrap();
    idx.verify_full().unwrap();
    assert_eq!(idx.video_count(), 3);
    assert_eq!(idx.frame_count(), 3);
    assert_eq!(idx.id(1), "é/b");
    assert_eq!(idx.meta(0), b"[{\"x\": 1}]");
    assert_eq!(idx.video(2).frame_start, 2);
    assert_eq!(idx.frame(1).frame_info(), (12, 0, 8));
    assert_eq!(idx.header().gulp_len, 28);
}

/// Every flip of a low or high bit of any byte of `good` fails to parse or to verify.
fn assert_every_bit_flip_is_detected(good: &[u8]) {
    for at in 0..good.len() {
        for bit in [0x01u8, 0x80] {
            let mut bad = good.to_vec();
            bad[at] ^= bit;
            let r = Index::parse(Storage::Owned(bad)).and_then(|i| i.verify_full());
            assert!(
                r.is_err(),
                "flip of bit {bit:#x} at byte {at} went unnoticed"
            );
        }
    }
}

#[test]
fn every_single_byte_corruption_is_detected() {
    assert_every_bit_flip_is_detected(&sample());
}

#[test]
fn every_truncation_and_extension_is_detected() {
    let good = sample();
    for len in 0..good.len() {
        assert!(Index::parse(Storage::Owned(good[..len].to_vec())).is_err());
    }
    let mut longer = good.clone();
    longer.push(0);
    assert!(Index::parse(Storage::Owned(longer)).is_err());
}

#[test]
fn overlapping_and_out_of_range_frames_are_rejected() {
    let f = |offset, len| FrameRec {
        offset,
        jpeg_len: len,
        ..Default::default()
    };
    assert!(check_frames([f(0, 8), f(4, 8)].into_iter(), 2, 100).is_err());
    assert!(check_frames([f(0, 8), f(96, 8)].into_iter(), 2, 100).is_err());
    assert!(check_frames([f(u64::MAX - 2, 8)].into_iter(), 1, 100).is_err());
    assert!(check_frames([f(8, 8), f(0, 8)].into_iter(), 2, 16).is_ok());
}
