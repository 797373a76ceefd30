//! Core (no Python) tests: writing and reading chunks, publication, append, legacy upgrade,
//! and property tests of the index encoding.

use std::fs;
use std::path::Path;

use gulpio_rs::chunk::reader::{ChunkReader, IndexKind};
use gulpio_rs::chunk::writer::write_index;
use gulpio_rs::format::index::{FrameRec, Index, IndexBuilder};
use gulpio_rs::format::Storage;
use gulpio_rs::{ChunkPaths, ChunkWriter, Directory, Error, WriteMode};
use proptest::prelude::*;

/// A minimal JPEG header (SOI, SOF0 w×h×3, EOI) padded with `extra` bytes so records differ in
/// length; enough for the writer, which reads the SOF but does not decode.
fn fake_jpeg(w: u16, h: u16, extra: usize) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08];
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
    v.extend(std::iter::repeat_n(0x55, extra));
    v.extend_from_slice(&[0xFF, 0xD9]);
    v
}

fn write_chunk(dir: &Path, k: u64, videos: &[(&str, usize)]) -> ChunkPaths {
    let paths = ChunkPaths::numbered(dir, k);
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    for (id, n) in videos {
        let frames: Vec<Vec<u8>> = (0..*n).map(|j| fake_jpeg(8, 4, j)).collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        w.append(id, br#"{"label": "x"}"#, &refs).unwrap();
    }
    w.close().unwrap();
    paths
}

#[test]
fn written_chunk_reads_back_with_crc() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 3), ("b", 0), ("c", 2)]);
    let (r, warning) = ChunkReader::open_mapped(&paths).unwrap();
    assert!(warning.is_none());
    assert_eq!(r.kind(), IndexKind::Binary);
    assert_eq!(r.video_count(), 3);
    assert_eq!(r.lookup("c"), Some(2));
    assert_eq!(
        r.frame_bytes(0, 2, true).unwrap(),
        fake_jpeg(8, 4, 2).as_slice()
    );
    assert_eq!(
        r.frame_bytes(2, -1, true).unwrap(),
        fake_jpeg(8, 4, 1).as_slice()
    );
    assert!(matches!(
        r.frame_bytes(1, 0, true),
        Err(Error::FrameOutOfRange { .. })
    ));
    let f = r.frames(0).next().unwrap();
    assert_eq!((f.width, f.height, f.channels), (8, 4, 3));
    assert_eq!(r.meta_data(0), br#"[{"label": "x"}]"#);
    // Records are padded to 4 bytes, exactly as gulpio writes them.
    for rec in r.frames(0) {
        assert_eq!(rec.record_end() % 4, 0);
    }
    assert_eq!(fs::metadata(&paths.data).unwrap().len(), r.published_len());
}

#[test]
fn flipped_data_byte_is_a_crc_error_naming_video_and_frame() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 2)]);
    let mut data = fs::read(&paths.data).unwrap();
    let (r, _) = ChunkReader::open_mapped(&paths).unwrap();
    let second = r.frames(0).nth(1).unwrap();
    drop(r);
    data[second.offset as usize + 5] ^= 0x10;
    fs::write(&paths.data, &data).unwrap();
    let (r, _) = ChunkReader::open_mapped(&paths).unwrap();
    assert!(r.frame_bytes(0, 0, true).is_ok());
    match r.frame_bytes(0, 1, true) {
        Err(Error::Crc { id, frame, .. }) => assert_eq!((id.as_str(), frame), ("a", 1)),
        other => panic!("expected a CRC error, got {other:?}"),
    }
    assert!(r.frame_bytes(0, 1, false).is_ok());
}

#[test]
fn aborted_writer_leaves_nothing_and_append_keeps_published_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let paths = ChunkPaths::numbered(dir.path(), 0);
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    w.append("a", b"{}", &[&fake_jpeg(4, 4, 0)]).unwrap();
    w.abort().unwrap();
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);

    let paths = write_chunk(dir.path(), 0, &[("a", 2)]);
    let before = fs::read(&paths.data).unwrap();
    let mut w = ChunkWriter::open(&paths, WriteMode::Append).unwrap();
    w.append("b", b"{}", &[&fake_jpeg(4, 4, 9)]).unwrap();
    w.append("a", br#"{"again": true}"#, &[&fake_jpeg(4, 4, 1)])
        .unwrap();
    w.close().unwrap();
    let after = fs::read(&paths.data).unwrap();
    assert_eq!(&after[..before.len()], before.as_slice());
    let (r, _) = ChunkReader::open_mapped(&paths).unwrap();
    assert_eq!(r.kind(), IndexKind::Binary);
    assert_eq!(r.frame_count(0), 3);
    assert_eq!(r.meta_data(0), br#"[{"label": "x"}, {"again": true}]"#);
    assert_eq!(
        r.frame_bytes(0, 2, true).unwrap(),
        fake_jpeg(4, 4, 1).as_slice()
    );

    // An append that is aborted cuts only its own unpublished tail.
    let mut w = ChunkWriter::open(&paths, WriteMode::Append).unwrap();
    w.append("c", b"{}", &[&fake_jpeg(4, 4, 3)]).unwrap();
    w.abort().unwrap();
    assert_eq!(fs::read(&paths.data).unwrap(), after);
}

#[test]
fn unpublished_tail_is_ignored_and_cut_by_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 1)]);
    let published = fs::read(&paths.data).unwrap();
    let mut torn = published.clone();
    torn.extend_from_slice(b"half a frame from a crashed writer");
    fs::write(&paths.data, &torn).unwrap();
    let (r, warning) = ChunkReader::open_mapped(&paths).unwrap();
    assert!(warning.is_none());
    assert_eq!(
        r.frame_bytes(0, 0, true).unwrap(),
        fake_jpeg(8, 4, 0).as_slice()
    );
    drop(r);
    let mut w = ChunkWriter::open(&paths, WriteMode::Append).unwrap();
    w.append("b", b"{}", &[&fake_jpeg(4, 4, 0)]).unwrap();
    w.close().unwrap();
    let (r, _) = ChunkReader::open_mapped(&paths).unwrap();
    assert_eq!(
        r.frame_bytes(1, 0, true).unwrap(),
        fake_jpeg(4, 4, 0).as_slice()
    );
}

#[test]
fn legacy_chunk_is_read_through_gmeta_and_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_chunk(dir.path(), 0, &[("a", 2), ("b", 1)]);
    fs::remove_file(&paths.index).unwrap();
    let (data, meta) = (
        fs::read(&paths.data).unwrap(),
        fs::read(&paths.meta).unwrap(),
    );
    let (r, _) = ChunkReader::open_mapped(&paths).unwrap();
    assert_eq!(r.kind(), IndexKind::Legacy);
    assert_eq!(
        r.frame_bytes(1, 0, true).unwrap(),
        fake_jpeg(8, 4, 0).as_slice()
    );
    drop(r);
    assert_eq!(write_index(&paths).unwrap(), 2);
    assert_eq!(fs::read(&paths.data).unwrap(), data);
    assert_eq!(fs::read(&paths.meta).unwrap(), meta);
    let (r, _) = ChunkReader::open_mapped(&paths).unwrap();
    assert_eq!(r.kind(), IndexKind::Binary);
    let f = r.frames(0).next().unwrap();
    assert_eq!((f.width, f.height), (8, 4));
}

#[test]
fn index_of_another_chunk_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_chunk(dir.path(), 0, &[("a", 2)]);
    let b = write_chunk(dir.path(), 1, &[("b", 3)]);
    fs::copy(&a.index, &b.index).unwrap();
    let (r, warning) = ChunkReader::open_mapped(&b).unwrap();
    assert!(
        matches!(warning, Some(Error::StaleIndex { .. })),
        "{warning:?}"
    );
    assert_eq!(r.kind(), IndexKind::Legacy);
    assert_eq!(r.id(0), "b");
}

#[test]
fn directory_skips_broken_chunks_and_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    write_chunk(dir.path(), 0, &[("a", 1)]);
    write_chunk(dir.path(), 2, &[("b", 1)]);
    let orphan = write_chunk(dir.path(), 10, &[("c", 1)]);
    fs::remove_file(&orphan.meta).unwrap();
    let bad = write_chunk(dir.path(), 11, &[("d", 1)]);
    fs::write(&bad.meta, b"{\"d\": {\"frame_info\": [[0, 0").unwrap();
    fs::remove_file(&bad.index).unwrap();
    let d = Directory::open(dir.path()).unwrap();
    assert_eq!(d.len(), 2);
    let numbers: Vec<u64> = (0..d.chunk_count())
        .map(|c| d.chunk(c).unwrap().number)
        .collect();
    assert_eq!(numbers, vec![0, 2]);
    assert_eq!(d.problems().len(), 2);
    assert!(d.problems().iter().all(|p| p.chunk_skipped));
    let (r, v) = d.resolve("b").unwrap();
    assert_eq!(r.id(v), "b");
    assert!(matches!(d.resolve("zz"), Err(Error::UnknownId(_))));
}

#[test]
fn video_shapes_come_from_the_indexes() {
    let dir = tempfile::tempdir().unwrap();
    write_chunk(dir.path(), 0, &[("a", 2), ("empty", 0)]);
    write_chunk(dir.path(), 1, &[("b", 3)]);
    let d = Directory::open(dir.path()).unwrap();
    let (counts, shapes) = d.video_shapes(None, false).unwrap();
    assert_eq!(counts, vec![2, 0, 3]);
    assert_eq!(shapes, vec![[4, 8, 3], [0, 0, 0], [4, 8, 3]]);
    let (counts, _) = d.video_shapes(Some(&[2, 0]), false).unwrap();
    assert_eq!(counts, vec![3, 2]);
    assert!(matches!(
        d.video_shapes(Some(&[3]), false),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn new_chunks_never_replace_one_another() {
    let dir = tempfile::tempdir().unwrap();
    let guess = ChunkPaths::numbered(dir.path(), 0);
    let frame = fake_jpeg(8, 4, 3);
    // Two writers guessed chunk 0; each publishes a chunk of its own.
    let mut first = ChunkWriter::open(&guess, WriteMode::Next).unwrap();
    let mut second = ChunkWriter::open(&guess, WriteMode::Next).unwrap();
    first.append("first", b"{}", &[&frame]).unwrap();
    second.append("second", b"{}", &[&frame]).unwrap();
    let second = second.close().unwrap();
    let first = first.close().unwrap();
    assert_eq!(second, guess);
    assert_eq!(first, ChunkPaths::numbered(dir.path(), 1));
    let d = Directory::open(dir.path()).unwrap();
    assert_eq!(d.ids_in(0, usize::MAX).unwrap(), ["second", "first"]);
    assert!(d.problems().is_empty());
    // A chunk created by explicit paths that another writer published first: a conflict, and
    // nothing of the late writer is left behind.
    let explicit = ChunkPaths::numbered(dir.path(), 5);
    let mut late = ChunkWriter::open(&explicit, WriteMode::Create).unwrap();
    late.append("late", b"{}", &[&frame]).unwrap();
    write_chunk(dir.path(), 5, &[("early", 1)]);
    assert!(matches!(late.close(), Err(Error::Conflict { .. })));
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".gulpio-tmp.")),
        "{names:?}"
    );
    // One writer per chunk: a second one is refused while the first is open.
    let holder = ChunkWriter::open(&explicit, WriteMode::Append).unwrap();
    for mode in [WriteMode::Append, WriteMode::Create] {
        assert!(matches!(
            ChunkWriter::open(&explicit, mode),
            Err(Error::Conflict { .. })
        ));
    }
    holder.abort().unwrap();
    ChunkWriter::open(&explicit, WriteMode::Append)
        .unwrap()
        .abort()
        .unwrap();
}

#[test]
fn duplicate_ids_across_chunks_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_chunk(dir.path(), 0, &[("a", 1)]);
    write_chunk(dir.path(), 1, &[("a", 1)]);
    assert!(matches!(
        Directory::open(dir.path()),
        Err(Error::DuplicateId { .. })
    ));
}

fn arb_frame() -> impl Strategy<Value = FrameRec> {
    (
        0u64..1 << 40,
        0u32..1 << 20,
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        prop::sample::select(vec![1u8, 3, 4]),
    )
        .prop_map(
            |(offset, jpeg_len, crc, width, height, channels)| FrameRec {
                offset: offset * 4,
                jpeg_len,
                crc,
                width,
                height,
                channels,
                pad: gulpio_rs::format::pad_for(jpeg_len as u64),
            },
        )
}

proptest! {
    #[test]
    fn index_round_trips(
        videos in prop::collection::vec(
            ("\\PC{0,12}", "\\PC{0,20}", prop::collection::vec(arb_frame(), 0..5)),
            0..8,
        ),
        gulp_crc in any::<u32>(),
    ) {
        let mut b = IndexBuilder::new();
        let mut ids = std::collections::HashSet::new();
        let mut kept = Vec::new();
        for (i, (id, meta, frames)) in videos.iter().enumerate() {
            let id = format!("{id}#{i}");
            if ids.insert(id.clone()) {
                b.push_video(&id, meta.as_bytes(), frames).unwrap();
                kept.push((id, meta.clone(), frames.clone()));
            }
        }
        let bytes = b.encode(1 << 47, gulp_crc, 77, 5);
        let idx = Index::parse(Storage::Owned(bytes)).unwrap();
        prop_assert_eq!(idx.video_count(), kept.len());
        let mut j = 0;
        for (i, (id, meta, frames)) in kept.iter().enumerate() {
            prop_assert_eq!(idx.id(i), id.as_str());
            prop_assert_eq!(idx.meta(i), meta.as_bytes());
            for f in frames {
                prop_assert_eq!(idx.frame(j), *f);
                j += 1;
            }
        }
        prop_assert_eq!(idx.header().gulp_crc, gulp_crc);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(idx) = Index::parse(Storage::Owned(bytes)) {
            let _ = idx.verify_full();
        }
    }

    #[test]
    fn random_gmeta_never_panics(text in "\\PC{0,200}") {
        let _ = gulpio_rs::format::gmeta::parse(text.as_bytes());
    }
}
