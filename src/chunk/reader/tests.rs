//! Unit tests of the reader: which index a chunk reads through, frame lookups and their
//! errors, CRC checks, fetching several frames, videos stored as segments, and judging a
//! `.gmeta` that differs from its index.

use std::fs;

use super::*;
use crate::chunk::testing::{fake_jpeg, flip, frames_of, write_chunk, write_segment_chunk};
use crate::error::{At, Error};
use crate::format::index::HEADER_LEN;

fn open(paths: &ChunkPaths) -> ChunkReader {
    let (r, warning) = ChunkReader::open(paths).unwrap();
    assert!(warning.is_none(), "{warning:?}");
    r
}

#[test]
fn a_written_chunk_reads_through_its_binary_index() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 3), ("b", 0), ("c", 2)]);
    let r = open(&paths);
    assert_eq!(r.kind(), IndexKind::Binary);
    assert_eq!((r.index_problem(), r.meta_problem()), (None, None));
    assert_eq!(r.video_count(), 3);
    assert_eq!((r.id(0), r.id(1), r.id(2)), ("a", "b", "c"));
    assert_eq!(
        (r.frame_count(0), r.frame_count(1), r.frame_count(2)),
        (3, 0, 2)
    );
    assert_eq!(r.meta_data(2), br#"[{"n": 2}]"#);
    // The index records each frame's shape and CRC, unlike a `.gmeta`.
    let f = r.frames(2).nth(1).unwrap();
    assert_eq!((f.width, f.height, f.channels), (8, 4, 3));
    assert_eq!(f.crc, crc32fast::hash(&fake_jpeg(8, 4, 1)));
    assert_eq!(r.published_len(), fs::metadata(&paths.data).unwrap().len());
    // Opened with positional reads, not mapped.
    assert!(r.mapped().is_none());
}

#[test]
fn ids_are_looked_up_and_frames_resolved_python_style() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 3), ("b", 0), ("c", 2)]);
    let r = open(&paths);
    assert_eq!(r.lookup("c"), Some(2));
    assert_eq!(r.lookup("a"), Some(0));
    assert_eq!(r.lookup("zz"), None);
    let frames = frames_of(3);
    for (asked, k) in [(0i64, 0usize), (2, 2), (-1, 2), (-3, 0)] {
        let (got, rec) = r.frame(0, asked).unwrap();
        assert_eq!(got, k, "frame {asked}");
        assert_eq!(rec.jpeg_len as usize, frames[k].len());
        assert_eq!(
            &*r.read_frame(0, asked, true).unwrap(),
            frames[k].as_slice()
        );
    }
}

#[test]
fn a_frame_out_of_range_names_the_file_the_video_and_the_frame() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 3), ("b", 0)]);
    let r = open(&paths);
    for (video, asked, count) in [(0, 3i64, 3usize), (0, -4, 3), (1, 0, 0), (1, -1, 0)] {
        match r.frame(video, asked) {
            Err(Error::FrameOutOfRange {
                path,
                id,
                frame,
                count: n,
            }) => {
                assert_eq!(path, paths.data);
                assert_eq!(id, r.id(video));
                assert_eq!((frame, n), (asked, count));
            }
            other => panic!("video {video} frame {asked}: {other:?}"),
        }
    }
    let e = r.read_frame(0, 7, true).map(|_| ()).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("\"a\"") && text.contains('7'), "{text}");
}

#[test]
fn a_crc_failure_names_the_video_the_frame_and_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 1), ("c", 2)]);
    let rec = open(&paths).frame(1, 1).unwrap().1;
    flip(&paths.data, rec.offset + 3, 0x01);
    let r = open(&paths);
    assert_eq!(
        &*r.read_frame(1, 0, true).unwrap(),
        fake_jpeg(8, 4, 0).as_slice()
    );
    match r.read_frame(1, -1, true).map(|_| ()) {
        Err(Error::Crc {
            path,
            id,
            frame,
            offset,
            end,
            expected,
            actual,
        }) => {
            assert_eq!((path, id.as_str(), frame), (paths.data.clone(), "c", 1));
            assert_eq!((offset, end), (rec.offset, rec.jpeg_end()));
            assert_eq!(expected, rec.crc);
            assert_ne!(actual, expected);
        }
        other => panic!("expected a CRC error, got {other:?}"),
    }
    // Unchecked, the damaged bytes are handed out as they are.
    let raw = r.read_frame(1, 1, false).unwrap();
    assert_eq!(raw.len(), fake_jpeg(8, 4, 1).len());
    assert_ne!(&*raw, fake_jpeg(8, 4, 1).as_slice());
}

#[test]
fn a_chunk_without_index_reads_through_its_gmeta_without_crcs() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 2), ("b", 1)]);
    let published = fs::metadata(&paths.data).unwrap().len();
    fs::remove_file(&paths.index).unwrap();
    let r = open(&paths);
    assert_eq!(r.kind(), IndexKind::Legacy);
    assert_eq!(r.index_problem(), None);
    assert_eq!((r.video_count(), r.lookup("b")), (2, Some(1)));
    assert_eq!(r.meta_data(0), br#"[{"n": 2}]"#);
    // A `.gmeta` records where frames are, not their shape or CRC.
    let f = r.frames(0).nth(1).unwrap();
    assert_eq!((f.width, f.height, f.crc), (0, 0, 0));
    assert_eq!(f.jpeg_len as usize, fake_jpeg(8, 4, 1).len());
    assert_eq!(r.published_len(), published);
    // With no CRC to check, a damaged frame reads as it is.
    flip(&paths.data, f.offset + 3, 0x01);
    let r = open(&paths);
    let got = r.read_frame(0, 1, true).unwrap();
    assert_ne!(&*got, fake_jpeg(8, 4, 1).as_slice());
}

#[test]
fn a_damaged_index_is_not_used_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 2)]);
    // A byte of the frame table, right after the header, the video table and the ids.
    flip(&paths.index, HEADER_LEN as u64 + 40 + 8 + 4, 0x40);
    let (r, warning) = ChunkReader::open(&paths).unwrap();
    assert!(matches!(warning, Some(Error::Format { .. })), "{warning:?}");
    assert_eq!(r.kind(), IndexKind::Legacy);
    let why = r.index_problem().unwrap();
    assert!(why.contains("frame table CRC mismatch"), "{why}");
    assert_eq!(
        &*r.read_frame(0, 1, true).unwrap(),
        fake_jpeg(8, 4, 1).as_slice()
    );
}

#[test]
fn a_truncated_data_file_loses_only_the_frames_it_cut() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 2), ("c", 2)]);
    let last = open(&paths).frame(1, 1).unwrap().1;
    let file = fs::OpenOptions::new()
        .write(true)
        .open(&paths.data)
        .unwrap();
    file.set_len(last.offset + 2).unwrap();
    let r = open(&paths);
    assert_eq!(
        &*r.read_frame(1, 0, true).unwrap(),
        fake_jpeg(8, 4, 0).as_slice()
    );
    match r.read_frame(1, 1, true).map(|_| ()) {
        Err(Error::Format { path, at, msg }) => {
            assert_eq!(path, paths.data);
            assert_eq!(at, Some(At::frame("c", 1)));
            assert!(
                msg.contains(&format!("the file has {}", last.offset + 2)),
                "{msg}"
            );
        }
        other => panic!("expected a truncation error, got {other:?}"),
    }
}

#[test]
fn frames_of_several_videos_are_fetched_in_merged_requests() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 3), ("c", 2)]);
    let r = open(&paths);
    // Adjacent records: one request.
    let wanted = [(0, 2), (1, 0), (0, 0), (1, 1)];
    assert_eq!(r.plan_frames(&wanted).requests().len(), 1);
    let end = r.frame(1, 1).unwrap().1.jpeg_end();
    assert_eq!(r.plan_frames(&wanted).requests()[0], 0..end);
    // A frame that does not exist is no request.
    let first = r.frame(0, 0).unwrap().1;
    let planned = r.plan_frames(&[(0, 0), (0, 9)]);
    assert_eq!(planned.requests().len(), 1);
    assert_eq!(planned.requests()[0], first.offset..first.jpeg_end());
    let mut got = vec![None; 5];
    r.read_frames(&[(0, 2), (1, 5), (1, 1), (0, 0)], true, |i, bytes| {
        got[i] = Some(bytes.map(FrameData::into_bytes));
    })
    .unwrap();
    let ok = |i: usize| got[i].clone().unwrap().unwrap().to_vec();
    assert_eq!(ok(0), fake_jpeg(8, 4, 2));
    assert_eq!(ok(2), fake_jpeg(8, 4, 1));
    assert_eq!(ok(3), fake_jpeg(8, 4, 0));
    assert!(matches!(
        got[1],
        Some(Err(Error::FrameOutOfRange { frame: 5, .. }))
    ));
    assert!(got[4].is_none());
}

#[test]
fn videos_stored_as_segments_have_no_jpeg_bytes_to_return() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_segment_chunk(dir.path(), 0);
    let r = open(&paths);
    assert_eq!(r.frame_count(1), 16);
    assert!(r.stream(0).is_none());
    let (rec, segments) = r.stream(1).unwrap();
    assert_eq!((rec.width, rec.height, segments.len()), (128, 72, 2));
    assert_eq!(segments[1].frames(), 8..16);
    assert!(r.segments_json(1).is_some());
    r.refuse_segments(0).unwrap();
    match r.refuse_segments(1) {
        Err(Error::InvalidFor { path, at, msg }) => {
            assert_eq!((path, at), (paths.data.clone(), At::video("seg")));
            assert!(msg.contains("AV1 segments"), "{msg}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let stream = r.segment_stream(1, 1).unwrap();
    assert_eq!(crc32fast::hash(&stream), segments[1].crc);
}

#[test]
fn segments_without_their_index_are_refused_until_it_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_segment_chunk(dir.path(), 0);
    fs::remove_file(&paths.index).unwrap();
    let r = open(&paths);
    assert_eq!(r.kind(), IndexKind::Legacy);
    assert!(r.has_unindexed_segments());
    assert!(r.unindexed_json(0).is_none());
    assert!(r.unindexed_json(1).is_some());
    r.check_readable(0).unwrap();
    r.refuse_segments(0).unwrap();
    for e in [r.check_readable(1), r.refuse_segments(1)] {
        match e {
            Err(Error::Format { at, msg, .. }) => {
                assert_eq!(at, Some(At::video("seg")));
                assert!(msg.contains("there is none"), "{msg}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn a_gmeta_that_differs_from_its_index_is_judged() {
    let dir = tempfile::tempdir().unwrap();
    let small = write_chunk(dir.path(), 0, &[("a", 2)]);
    let big = write_chunk(dir.path(), 1, &[("a", 2), ("b", 1)]);
    let r = open(&small);
    let (index, meta) = (r.index(), fs::read(&small.meta).unwrap());
    let len = r.published_len();
    // Other bytes, the same entries.
    let mut spaced = meta.clone();
    spaced.extend_from_slice(b"\n ");
    assert_eq!(judge_meta(index, &spaced, len), MetaVerdict::Same);
    // Everything the index describes, and a video more in new bytes: written later.
    let appended = fs::read(&big.meta).unwrap();
    let big_len = fs::metadata(&big.data).unwrap().len();
    assert!(matches!(
        judge_meta(index, &appended, big_len),
        MetaVerdict::Newer(_)
    ));
    // Another id where the index has "a": damage.
    let renamed = String::from_utf8(meta.clone())
        .unwrap()
        .replace("\"a\"", "\"x\"");
    match judge_meta(index, renamed.as_bytes(), len) {
        MetaVerdict::Damaged(how) => assert!(how.contains("\"x\""), "{how}"),
        other => panic!("{other:?}"),
    }
    match judge_meta(index, b"{", len) {
        MetaVerdict::Damaged(how) => assert!(how.starts_with("it does not parse"), "{how}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn metadata_lists_extend_only_by_appended_elements() {
    assert!(trust::extends_meta(b"[1]", b"[1]"));
    assert!(trust::extends_meta(b"[1]", b"[1, 2]"));
    assert!(trust::extends_meta(b"[]", b"[2]"));
    assert!(!trust::extends_meta(b"[1]", b"[12]"));
    assert!(!trust::extends_meta(b"[1, 2]", b"[1]"));
}

#[test]
fn legacy_index_describes_the_gmeta_entries() {
    let text = br#"{"v": {"frame_info": [[0, 2, 10], [12, 0, 4]], "meta_data": [{}]}}"#;
    let index = legacy_index(text).unwrap();
    assert_eq!((index.video_count(), index.id(0)), (1, "v"));
    let f = index.frame(0);
    assert_eq!((f.offset, f.jpeg_len, f.pad), (0, 8, 2));
    assert_eq!(index.frame(1).frame_info(), (12, 0, 4));
    // Overlapping records are refused, as in a binary index.
    let overlap = br#"{"v": {"frame_info": [[0, 0, 8], [4, 0, 8]], "meta_data": []}}"#;
    assert!(legacy_index(overlap)
        .map(|_| ())
        .unwrap_err()
        .to_string()
        .contains("overlap"));
    assert!(legacy_index(b"{").is_err());
}
