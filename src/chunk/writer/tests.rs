//! Unit tests of the writer: publication and reopening, what an unpublished writer leaves
//! behind, validation before any byte is written, append mode and unpublished tails.

use std::fs;

use super::*;
use crate::chunk::testing::{
    fake_jpeg, flip, frames_of, refs, segments, write_chunk, write_segment_chunk,
};

fn reader(paths: &ChunkPaths) -> ChunkReader {
    let (r, warning) = ChunkReader::open(paths).unwrap();
    assert!(warning.is_none(), "{warning:?}");
    r
}

fn ids(r: &ChunkReader) -> Vec<&str> {
    (0..r.video_count()).map(|v| r.id(v)).collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn published_videos_are_read_back_and_later_ones_follow_them() {
    let dir = tempfile::tempdir().unwrap();
    let paths = ChunkPaths::numbered(dir.path(), 0);
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    let frames = frames_of(3);
    w.append("a", br#"{"x": 1}"#, &refs(&frames[..2])).unwrap();
    w.append("b", b"[]", &refs(&frames[2..])).unwrap();
    assert_eq!(w.video_count(), 2);
    w.publish().unwrap();
    let r = reader(&paths);
    assert_eq!(ids(&r), ["a", "b"]);
    assert_eq!(r.meta_data(0), br#"[{"x": 1}]"#);
    let rec = r.frames(1).next().unwrap();
    assert_eq!(rec.crc, crc32fast::hash(&frames[2]));
    assert_eq!((rec.width, rec.height, rec.channels), (8, 4, 3));
    drop(r);
    // A repeated id adds frames and one more metadata element to its video (gulpio's rule).
    w.append("a", br#"{"x": 2}"#, &refs(&frames[2..])).unwrap();
    w.append("c", b"null", &[]).unwrap();
    assert_eq!(w.close().unwrap(), paths);
    let r = reader(&paths);
    assert_eq!(ids(&r), ["a", "b", "c"]);
    assert_eq!((r.frame_count(0), r.frame_count(2)), (3, 0));
    assert_eq!(r.meta_data(0), br#"[{"x": 1}, {"x": 2}]"#);
    assert_eq!(&*r.read_frame(0, -1, true).unwrap(), frames[2].as_slice());
    // Records are padded to 4 bytes, as gulpio writes them.
    assert!(r.frames(0).all(|f| f.record_end() % 4 == 0));
    assert_eq!(
        fs::read(&paths.meta).unwrap(),
        gmeta_of(&r),
        "the .gmeta lists what the index does"
    );
}

/// The `.gmeta` text of the videos a reader holds, as a writer writes it.
fn gmeta_of(r: &ChunkReader) -> Vec<u8> {
    let mut text = Vec::new();
    gmeta::begin(&mut text);
    for v in 0..r.video_count() {
        let infos = r.frames(v).map(|f| f.frame_info());
        gmeta::write_entry(&mut text, v == 0, r.id(v), infos, r.meta_data(v), None);
    }
    gmeta::finish(&mut text);
    text
}

#[test]
fn a_writer_dropped_before_publishing_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let paths = ChunkPaths::numbered(dir.path(), 0);
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    w.append("a", b"{}", &refs(&frames_of(2))).unwrap();
    assert_eq!(names(dir.path()).len(), 1, "only the temporary data file");
    drop(w);
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    assert!(ChunkReader::open(&paths).is_err());
}

#[test]
fn an_append_dropped_before_publishing_leaves_the_published_chunk_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 2)]);
    let before: Vec<Vec<u8>> = [&paths.data, &paths.meta, &paths.index]
        .iter()
        .map(|p| fs::read(p).unwrap())
        .collect();
    let mut w = ChunkWriter::open(&paths, WriteMode::Append).unwrap();
    w.append("b", b"{}", &refs(&frames_of(3))).unwrap();
    w.append("a", b"{}", &refs(&frames_of(1))).unwrap();
    drop(w);
    for (p, was) in [&paths.data, &paths.meta, &paths.index].iter().zip(&before) {
        assert_eq!(&fs::read(p).unwrap(), was, "{}", p.display());
    }
    assert_eq!(ids(&reader(&paths)), ["a"]);
}

#[test]
fn append_mode_keeps_the_earlier_videos_and_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 2), ("b", 1)]);
    let before = fs::read(&paths.data).unwrap();
    let mut w = ChunkWriter::open(&paths, WriteMode::Append).unwrap();
    assert_eq!(w.video_count(), 2);
    w.append("c", b"{}", &[&fake_jpeg(16, 16, 5)]).unwrap();
    w.close().unwrap();
    let after = fs::read(&paths.data).unwrap();
    assert_eq!(&after[..before.len()], before.as_slice());
    let r = reader(&paths);
    assert_eq!(ids(&r), ["a", "b", "c"]);
    assert_eq!(r.meta_data(1), br#"[{"n": 1}]"#);
    let c = r.frames(2).next().unwrap();
    assert_eq!((c.offset, c.width), (before.len() as u64, 16));
    // 'wb' on an existing chunk starts it over.
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    assert_eq!(w.video_count(), 0);
    w.append("z", b"{}", &[&fake_jpeg(4, 4, 0)]).unwrap();
    w.close().unwrap();
    assert_eq!(ids(&reader(&paths)), ["z"]);
}

#[test]
fn a_crashed_writers_tail_is_cut_when_the_chunk_is_reopened_for_appending() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 1)]);
    let published = fs::metadata(&paths.data).unwrap().len();
    let mut torn = fs::read(&paths.data).unwrap();
    torn.extend_from_slice(b"half a frame");
    fs::write(&paths.data, &torn).unwrap();
    // Readers ignore the tail; an append starts at the published end.
    assert_eq!(reader(&paths).published_len(), published);
    let w = ChunkWriter::open(&paths, WriteMode::Append).unwrap();
    assert_eq!(fs::metadata(&paths.data).unwrap().len(), published);
    w.abort().unwrap();
    // `cut_tail` (repair) cuts it too, and says how much.
    fs::write(&paths.data, &torn).unwrap();
    assert_eq!(cut_tail(&paths).unwrap(), 12);
    assert_eq!(fs::metadata(&paths.data).unwrap().len(), published);
    assert_eq!(cut_tail(&paths).unwrap(), 0);
}

#[test]
fn refused_input_leaves_the_chunk_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let paths = ChunkPaths::numbered(dir.path(), 0);
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    let good = fake_jpeg(8, 4, 0);
    match w.append("a", b"{not json", &[&good]) {
        Err(Error::InvalidFor { at, msg, .. }) => {
            assert_eq!(at, At::video("a"));
            assert!(msg.contains("not valid JSON"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    match w.append("a", b"{}", &[&good, b"not a jpeg"]) {
        Err(Error::InvalidFor { at, .. }) => assert_eq!(at, At::frame("a", 1)),
        other => panic!("{other:?}"),
    }
    // Over the frame size limit: no reader could decode it.
    match w.append("a", b"{}", &[&fake_jpeg(65_000, 65_000, 0)]) {
        Err(Error::InvalidFor { at, msg, .. }) => {
            assert_eq!(at, At::frame("a", 0));
            assert!(msg.ends_with("not stored"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.video_count(), 0);
    w.append("b", b"{}", &[&good]).unwrap();
    w.close().unwrap();
    let r = reader(&paths);
    assert_eq!(ids(&r), ["b"]);
    // Nothing of the refused calls was written: the data is the one frame, padded.
    let len = good.len() as u64;
    assert_eq!(r.published_len(), len + pad_for(len) as u64);
}

#[test]
fn a_video_stored_as_segments_is_written_once_and_never_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_segment_chunk(dir.path(), 0);
    let published = fs::read(&paths.data).unwrap();
    let (streams, spec) = segments();
    let segs: Vec<(&[u8], usize)> = streams.iter().map(|s| (s.as_slice(), 8)).collect();
    let mut w = ChunkWriter::open(&paths, WriteMode::Append).unwrap();
    // A duplicate id, whether its video holds JPEG frames or segments.
    for id in ["jpeg", "seg"] {
        match w.append_segments(id, b"{}", &spec, &segs) {
            Err(Error::InvalidFor { at, msg, .. }) => {
                assert_eq!(at, At::video(id));
                assert!(msg.contains("already in the chunk"), "{msg}");
            }
            other => panic!("{id}: {other:?}"),
        }
    }
    match w.append("seg", b"{}", &[&fake_jpeg(8, 4, 0)]) {
        Err(Error::InvalidFor { at, msg, .. }) => {
            assert_eq!(at, At::video("seg"));
            assert!(msg.contains("stored as segments"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    // One more metadata element, without frames, is allowed.
    w.append("seg", br#"{"t": 1}"#, &[]).unwrap();
    w.close().unwrap();
    assert_eq!(fs::read(&paths.data).unwrap(), published);
    let r = reader(&paths);
    assert_eq!(r.meta_data(1), br#"[{}, {"t": 1}]"#);
    assert_eq!(r.stream(1).unwrap().1.len(), 2);
}

#[test]
fn a_damaged_gmeta_is_restored_from_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 2), ("b", 1)]);
    let good = fs::read(&paths.meta).unwrap();
    assert!(!restore_meta(&paths).unwrap(), "nothing to restore");
    let at = good.windows(3).position(|w| w == b"\"b\"").unwrap() + 1;
    flip(&paths.meta, at as u64, 0x01);
    let (r, _) = ChunkReader::open(&paths).unwrap();
    assert!(r.meta_problem().is_some());
    drop(r);
    assert!(restore_meta(&paths).unwrap());
    assert_eq!(fs::read(&paths.meta).unwrap(), good);
    assert_eq!(reader(&paths).meta_problem(), None);
}
