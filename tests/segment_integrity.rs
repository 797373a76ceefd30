//! Damage to a chunk of videos stored as segments (docs/FORMAT.md §6), through the Rust core:
//! a `.gmeta` `segments` object that contradicts the index is a meta problem restored from the
//! index; `check` CRCs each segment and names its frames, as reads do; a lost index is rebuilt
//! for every video but one whose segment does not decode. Real AV1 segments from
//! tests/segments/ (8 frames of 128x72 each).

use std::fs;
use std::path::{Path, PathBuf};

use gulpio_rs::chunk::rebuild::{stored_segments, unrebuildable};
use gulpio_rs::chunk::writer::{restore_meta, StreamSpec};
use gulpio_rs::pool::Runner;
use gulpio_rs::verify::verify_chunk;
use gulpio_rs::video::Codec;
use gulpio_rs::{ChunkPaths, ChunkReader, ChunkWriter, Error, WriteMode};

fn fixture(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/segments");
    fs::read(dir.join(name)).expect("tests/segments")
}

/// Videos "a" and "b", each two 8-frame segments (frames 0..8 and 8..16); returns the paths
/// and each video's segment streams.
fn write_chunk(dir: &Path) -> (ChunkPaths, Vec<Vec<u8>>) {
    let paths = ChunkPaths::new(dir.join("data_0.gulp"), dir.join("meta_0.gmeta"));
    let streams = vec![fixture("bt601-128x72-0.av1"), fixture("bt601-128x72-1.av1")];
    let spec = StreamSpec {
        codec: Codec::Av1,
        matrix: 6,
        full_range: false,
        width: 128,
        height: 72,
        gop: 8,
    };
    let segments: Vec<(&[u8], usize)> = streams.iter().map(|s| (s.as_slice(), 8)).collect();
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    w.append_segments("a", b"{}", &spec, &segments).unwrap();
    w.append_segments("b", b"{}", &spec, &segments).unwrap();
    w.close().unwrap();
    (paths, streams)
}

/// Where segment `number` of video `video` starts in the `.gulp`.
fn segment_offset(paths: &ChunkPaths, video: usize, number: usize) -> u64 {
    let (reader, _) = ChunkReader::open(paths).unwrap();
    reader.stream(video).unwrap().1[number].offset
}

fn flip(path: &Path, at: u64, bits: u8) {
    let mut raw = fs::read(path).unwrap();
    raw[at as usize] ^= bits;
    fs::write(path, raw).unwrap();
}

#[test]
fn a_segments_object_that_contradicts_the_index_is_restored_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, _) = write_chunk(dir.path());
    let original = fs::read(&paths.meta).unwrap();
    let text = String::from_utf8(original.clone()).unwrap();
    // b's frame counts moved (the same total, the same size): it still parses.
    let b_at = text.find("\"b\": ").unwrap();
    let damaged = text[..b_at].to_owned()
        + &text[b_at..].replacen("\"frames\": [8, 8]", "\"frames\": [9, 7]", 1);
    assert_ne!(damaged, text);
    fs::write(&paths.meta, &damaged).unwrap();
    let (reader, _) = ChunkReader::open(&paths).unwrap();
    let problem = reader.meta_problem().expect("a meta problem");
    assert!(
        problem.contains("video \"b\"") && problem.contains("[9, 7]"),
        "{problem}"
    );
    // Still read through the index: b's segments are its.
    assert_eq!(reader.stream(1).unwrap().1[1].first_frame, 8);
    drop(reader);
    assert!(restore_meta(&paths).unwrap());
    assert_eq!(fs::read(&paths.meta).unwrap(), original);
    let (reader, _) = ChunkReader::open(&paths).unwrap();
    assert!(reader.meta_problem().is_none());
}

#[test]
fn a_damaged_segment_is_named_by_its_frames_in_reads_and_in_check() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, streams) = write_chunk(dir.path());
    let start = segment_offset(&paths, 0, 1);
    let end = start + streams[1].len() as u64;
    // In the last tile (frame 15's): the old error named frame 15 and that tile's bytes.
    flip(&paths.data, end - 20, 0x10);
    let (reader, _) = ChunkReader::open(&paths).unwrap();
    match reader.segment_stream(0, 1) {
        Err(Error::SegmentCrc {
            id,
            segment,
            frames,
            offset,
            end: to,
            ..
        }) => assert_eq!(
            (id.as_str(), segment, frames, offset, to),
            ("a", 1, 8..16, start, end)
        ),
        other => panic!("{other:?}"),
    }
    let report = verify_chunk(&reader, false, &Runner::Caller);
    let named = format!("frames 8..16 (segment 1, bytes {start}..{end})");
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    let f = &report.findings[0];
    assert_eq!(
        (f.kind, f.video.as_deref(), f.frame),
        ("crc", Some("a"), Some(8))
    );
    assert!(f.message.contains(&named), "{}", f.message);
}

#[test]
fn a_cut_segment_is_named_by_its_frames_in_reads_and_in_check() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, _) = write_chunk(dir.path());
    let start = segment_offset(&paths, 1, 1);
    let data = fs::read(&paths.data).unwrap();
    fs::write(&paths.data, &data[..start as usize + 40]).unwrap();
    let (reader, _) = ChunkReader::open(&paths).unwrap();
    let e = reader.segment_stream(1, 1).unwrap_err();
    let at = e.at().unwrap();
    assert_eq!((at.id.as_str(), at.frame), ("b", Some(8)));
    assert!(
        e.to_string().contains("truncated: frames 8..16 (segment 1"),
        "{e}"
    );
    let report = verify_chunk(&reader, false, &Runner::Caller);
    let cut: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.kind == "truncated")
        .map(|f| (f.video.as_deref(), f.frame))
        .collect();
    assert_eq!(cut, [(Some("b"), Some(8))]);
}

#[test]
fn a_lost_index_is_rebuilt_for_every_video_but_the_one_that_does_not_decode() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, streams) = write_chunk(dir.path());
    let start = segment_offset(&paths, 1, 1);
    fs::remove_file(&paths.index).unwrap();
    flip(&paths.data, start, 0x80); // the forbidden bit of the first OBU header
    let reader = ChunkReader::open_legacy(&paths).unwrap();
    let failed = unrebuildable(&reader).unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    let at = failed[0].at().unwrap();
    assert_eq!((at.id.as_str(), at.frame), ("b", Some(8)));
    assert!(failed[0].to_string().contains("segment 1 (frames 8..16)"));
    // The other video, as stored, for a rewrite of the chunk without "b".
    let (stream, kept) = stored_segments(&reader, 0).unwrap().unwrap();
    assert_eq!((stream.width, stream.height, stream.gop), (128, 72, 8));
    let bytes: Vec<&Vec<u8>> = kept.iter().map(|(_, b)| b).collect();
    assert_eq!(bytes, streams.iter().collect::<Vec<_>>());
    assert!(stored_segments(&reader, 1).is_err());
}
