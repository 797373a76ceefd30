//! Unit tests of a directory: pairing and ordering chunks, global positions, problems of
//! damaged chunks, shapes from the indexes (or the JPEG headers) and resolving ids.

use std::fs;

use super::*;
use crate::chunk::probe::KnownSizes;
use crate::chunk::testing::{fake_jpeg, flip, gray_jpeg, write_chunk};
use crate::chunk::writer::{ChunkWriter, WriteMode};
use crate::format::paths::ChunkPaths;

fn slots(d: &Directory) -> Vec<Arc<ChunkSlot>> {
    (0..d.chunk_count()).map(|c| d.chunk(c).unwrap()).collect()
}

fn all_ids(d: &Directory) -> Vec<String> {
    d.ids_in(0, usize::MAX).unwrap()
}

#[test]
fn chunks_are_ordered_by_number_and_ids_by_chunk() {
    let dir = tempfile::tempdir().unwrap();
    // Numbered so that name order (data_10 before data_2) and number order differ.
    write_chunk(dir.path(), 10, &[("d", 1)]);
    write_chunk(dir.path(), 2, &[("c", 3)]);
    write_chunk(dir.path(), 0, &[("a", 1), ("b", 2)]);
    let d = Directory::open(dir.path()).unwrap();
    assert!(d.problems().is_empty(), "{:?}", d.problems());
    let numbers: Vec<u64> = slots(&d).iter().map(|c| c.number).collect();
    assert_eq!(numbers, [0, 2, 10]);
    let firsts: Vec<(usize, usize)> = slots(&d).iter().map(|c| (c.first, c.video_count)).collect();
    assert_eq!(firsts, [(0, 2), (2, 1), (3, 1)]);
    assert_eq!(all_ids(&d), ["a", "b", "c", "d"]);
    assert_eq!(d.ids_in(1, 3).unwrap(), ["b", "c"]);
    assert_eq!((d.len(), d.is_empty()), (4, false));
    assert_eq!(d.lookup("c").unwrap(), Some(2));
    assert_eq!(d.lookup("e").unwrap(), None);
    assert_eq!(d.location(1).unwrap(), Some((0, 1)));
    assert_eq!(d.location(2).unwrap(), Some((1, 0)));
    assert_eq!(d.location(3).unwrap(), Some((2, 0)));
    assert_eq!(d.location(4).unwrap(), None);
    assert!(matches!(d.opened(), Opened::Listing { warned: false, .. }));
    // Indexed chunks are opened on first use only.
    assert!(!d.chunk(1).unwrap().is_loaded());
    let r = d.reader(1).unwrap();
    assert!(d.chunk(1).unwrap().is_loaded());
    assert_eq!((r.id(0), r.frame_count(0)), ("c", 3));
    assert!(matches!(d.reader(3), Err(Error::InvalidArgument(_))));
}

#[test]
fn ids_resolve_to_their_chunk_and_unknown_ones_are_named() {
    let dir = tempfile::tempdir().unwrap();
    write_chunk(dir.path(), 0, &[("a", 1)]);
    write_chunk(dir.path(), 1, &[("b", 2), ("c", 1)]);
    let d = Directory::open(dir.path()).unwrap();
    let (r, v) = d.resolve("c").unwrap();
    assert_eq!((r.paths(), v), (&ChunkPaths::numbered(dir.path(), 1), 1));
    assert_eq!(r.id(v), "c");
    match d.resolve("zz") {
        Err(Error::UnknownId(id)) => assert_eq!(id, "zz"),
        other => panic!("{:?}", other.map(|(_, v)| v)),
    }
}

#[test]
fn damaged_chunks_are_reported_and_readable_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    write_chunk(dir.path(), 0, &[("a", 1)]);
    // An index whose header is damaged: read through the `.gmeta`, with a warning.
    let bad_index = write_chunk(dir.path(), 1, &[("b", 1)]);
    flip(&bad_index.index, 20, 0x01);
    // A data file without its `.gmeta`, and an unparsable `.gmeta` without an index.
    let orphan = write_chunk(dir.path(), 2, &[("c", 1)]);
    fs::remove_file(&orphan.meta).unwrap();
    let broken = write_chunk(dir.path(), 3, &[("d", 1)]);
    fs::remove_file(&broken.index).unwrap();
    fs::write(&broken.meta, b"{\"d\": {\"frame_info\": [[0, 0").unwrap();
    let d = Directory::open(dir.path()).unwrap();
    assert_eq!(all_ids(&d), ["a", "b"]);
    let problems: Vec<(&Path, bool)> = d
        .problems()
        .iter()
        .map(|p| (p.path.as_path(), p.chunk_skipped))
        .collect();
    assert_eq!(
        problems,
        [
            (orphan.data.as_path(), true),
            (bad_index.index.as_path(), false),
            (broken.meta.as_path(), true),
        ]
    );
    assert!(d.problems()[0].message.contains("no meta file"));
    assert!(d.problems()[1]
        .message
        .contains("through its .gmeta instead"));
    assert!(d.problems()[2].message.contains("videos are unavailable"));
    let (r, _) = d.resolve("b").unwrap();
    assert_eq!(r.kind(), crate::chunk::reader::IndexKind::Legacy);
}

#[test]
fn a_duplicate_id_names_both_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_chunk(dir.path(), 0, &[("a", 1), ("x", 1)]);
    let second = write_chunk(dir.path(), 1, &[("x", 1)]);
    match Directory::open(dir.path()) {
        Err(Error::DuplicateId {
            id,
            first: f,
            second: s,
        }) => assert_eq!((id.as_str(), f, s), ("x", first.meta, second.meta)),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened"),
    }
}

#[test]
fn video_shapes_come_from_the_index_or_with_headers_from_the_jpegs() {
    let dir = tempfile::tempdir().unwrap();
    write_chunk(dir.path(), 0, &[("a", 2), ("empty", 0)]);
    // A chunk without index (as gulpio writes them), one colour and one gray video.
    let legacy = ChunkPaths::numbered(dir.path(), 1);
    let mut w = ChunkWriter::open(&legacy, WriteMode::Create).unwrap();
    w.append("rgb", b"{}", &[&fake_jpeg(20, 10, 0)]).unwrap();
    w.append("gray", b"{}", &[&gray_jpeg(6, 5), &gray_jpeg(6, 5)])
        .unwrap();
    w.close().unwrap();
    fs::remove_file(&legacy.index).unwrap();
    let d = Directory::open(dir.path()).unwrap();
    let (counts, shapes) = d.video_shapes(None, false).unwrap();
    assert_eq!(counts, [2, 0, 1, 2]);
    assert_eq!(shapes, [[4, 8, 3], [0, 0, 0], [0, 0, 0], [0, 0, 0]]);
    let (counts, shapes) = d.video_shapes(None, true).unwrap();
    assert_eq!(counts, [2, 0, 1, 2]);
    assert_eq!(shapes, [[4, 8, 3], [0, 0, 0], [10, 20, 3], [5, 6, 1]]);
    let (counts, shapes) = d.video_shapes(Some(&[3, 0]), true).unwrap();
    assert_eq!((counts, shapes), (vec![2, 2], vec![[5, 6, 1], [4, 8, 3]]));
    match d.video_shapes(Some(&[4]), false) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("position 4"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_id_table_keeps_order_and_refuses_repeats() {
    let mut t = IdTable::default();
    assert!(t.is_empty());
    assert_eq!(t.insert("b"), Ok(0));
    assert_eq!(t.insert("a"), Ok(1));
    assert_eq!(t.insert("é/x"), Ok(2));
    assert_eq!(t.insert("a"), Err(1));
    assert_eq!(t.len(), 3);
    assert_eq!((t.get(0), t.get(2)), ("b", "é/x"));
    assert_eq!(t.lookup("é/x"), Some(2));
    assert_eq!(t.lookup("x"), None);
    assert_eq!(t.iter().collect::<Vec<_>>(), ["b", "a", "é/x"]);
}

#[test]
fn only_plain_file_names_are_read_from_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    write_chunk(dir.path(), 0, &[("a", 1)]);
    fs::write(dir.path().join("labels.json"), b"{}").unwrap();
    let d = Directory::open(dir.path()).unwrap();
    assert_eq!(
        d.read_file("labels.json").unwrap().as_deref(),
        Some(&b"{}"[..])
    );
    assert_eq!(d.read_file("missing.json").unwrap(), None);
    for bad in ["", ".", "..", "../x", "a/b", "a\\b"] {
        assert!(
            matches!(d.read_file(bad), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
}

/// A dataset of three chunks with a manifest (made by `gulpio index`'s core).
fn with_manifest(dir: &Path) {
    write_chunk(dir, 0, &[("a", 1), ("b", 2)]);
    write_chunk(dir, 1, &[("c", 3)]);
    write_chunk(dir, 2, &[("d", 1), ("e", 0)]);
    crate::manifest::index(dir, false).unwrap();
}

/// What a directory answers (ids, chunks, counts, shapes), to compare one opened through the
/// manifest with one listed.
type Answers = (
    Vec<String>,
    Vec<(u64, usize, usize)>,
    Vec<u32>,
    Vec<[u16; 3]>,
);

fn answers(d: &Directory) -> Answers {
    let chunks = slots(d)
        .iter()
        .map(|c| (c.number, c.first, c.video_count))
        .collect();
    let (counts, shapes) = d.video_shapes(None, false).unwrap();
    (all_ids(d), chunks, counts, shapes)
}

#[test]
fn a_directory_opens_through_its_manifest_and_answers_as_a_listing_does() {
    let dir = tempfile::tempdir().unwrap();
    with_manifest(dir.path());
    // A chunk published after the manifest was made: the writer committed it.
    write_chunk(dir.path(), 3, &[("f", 2)]);
    let d = Directory::open(dir.path()).unwrap();
    match d.opened() {
        Opened::Manifest { version, tail, .. } => assert_eq!((*version, *tail), (1, 1)),
        other => panic!("{other:?}"),
    }
    // Nothing is opened per chunk until it is read.
    assert!(!d.chunk(1).unwrap().is_loaded());
    assert_eq!(d.chunk(1).unwrap().sizes, KnownSizes::default());
    let listed = Directory::open_with(Store::default(), dir.path(), ManifestMode::Off).unwrap();
    assert!(matches!(listed.opened(), Opened::Listing { .. }));
    assert_eq!(answers(&d), answers(&listed));
    for (g, id) in all_ids(&listed).iter().enumerate() {
        assert_eq!(d.lookup(id).unwrap(), Some(g));
        assert_eq!(d.location(g).unwrap(), listed.location(g).unwrap());
        let (r, v) = d.resolve(id).unwrap();
        assert_eq!(r.id(v), id);
        assert!(r.index_problem().is_none());
    }
    assert_eq!(d.lookup("zz").unwrap(), None);
    assert!(matches!(d.resolve("zz"), Err(Error::UnknownId(_))));
    assert!(d.chunk(1).unwrap().is_loaded());
    assert!(d.chunk(4).is_err());
    for mode in [ManifestMode::Require, ManifestMode::Verify] {
        let again = Directory::open_with(Store::default(), dir.path(), mode).unwrap();
        assert_eq!(answers(&again), answers(&listed));
    }
}

#[test]
fn without_a_usable_manifest_a_directory_opens_by_listing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    write_chunk(dir.path(), 0, &[("a", 1)]);
    let d = Directory::open(dir.path()).unwrap();
    match d.opened() {
        Opened::Listing { reason, warned } => {
            assert!(reason.contains("no manifest"), "{reason}");
            assert!(!warned);
        }
        other => panic!("{other:?}"),
    }
    match Directory::open_with(Store::default(), dir.path(), ManifestMode::Require) {
        Err(Error::Format { msg, .. }) => assert!(msg.contains("no manifest"), "{msg}"),
        other => panic!("{:?}", other.map(|d| d.len())),
    }
    assert!("sometimes".parse::<ManifestMode>().is_err());

    // The canary: a chunk added by a tool that does not keep the manifest.
    let dir = tempfile::tempdir().unwrap();
    with_manifest(dir.path());
    let keep = tempfile::tempdir().unwrap();
    let foreign = write_chunk(keep.path(), 3, &[("x", 1)]);
    for p in [&foreign.data, &foreign.index, &foreign.meta] {
        fs::copy(p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let d = Directory::open(dir.path()).unwrap();
    match d.opened() {
        Opened::Listing { reason, warned } => {
            assert!(reason.contains("meta_3.gmeta"), "{reason}");
            assert!(warned);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(d.len(), 6);
    let err = Directory::open_with(Store::default(), dir.path(), ManifestMode::Require)
        .err()
        .unwrap();
    assert!(err.to_string().contains("meta_3.gmeta"), "{err}");

    // A damaged base: listed, with a warning naming the file.
    let dir = tempfile::tempdir().unwrap();
    with_manifest(dir.path());
    // `gulpio index` made the genesis commit the base.
    let genesis = dir.path().join(crate::manifest::log_name(0));
    flip(&genesis, 300, 0x40);
    let d = Directory::open(dir.path()).unwrap();
    match d.opened() {
        Opened::Listing { reason, warned } => {
            assert!(reason.contains(".glog"), "{reason}");
            assert!(warned);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(all_ids(&d), ["a", "b", "c", "d", "e"]);
}

#[test]
fn a_chunk_changed_behind_the_manifest_is_read_only_if_it_still_holds_its_recorded_videos() {
    let dir = tempfile::tempdir().unwrap();
    with_manifest(dir.path());
    // Another tool appends to chunk 1 (no commit): its first video is still the recorded one.
    let paths = ChunkPaths::numbered(dir.path(), 1);
    let keep = tempfile::tempdir().unwrap();
    let grown = write_chunk(keep.path(), 1, &[("c", 3), ("c2", 1)]);
    fs::copy(&grown.data, &paths.data).unwrap();
    fs::copy(&grown.index, &paths.index).unwrap();
    fs::copy(&grown.meta, &paths.meta).unwrap();
    // And replaces chunk 2 with other videos.
    let other = write_chunk(keep.path(), 2, &[("q", 1)]);
    let two = ChunkPaths::numbered(dir.path(), 2);
    fs::copy(&other.data, &two.data).unwrap();
    fs::copy(&other.index, &two.index).unwrap();
    fs::copy(&other.meta, &two.meta).unwrap();
    let d = Directory::open(dir.path()).unwrap();
    assert!(
        matches!(d.opened(), Opened::Manifest { .. }),
        "{:?}",
        d.opened()
    );
    assert_eq!(d.len(), 5);
    let (r, v) = d.resolve("c").unwrap();
    assert_eq!((r.id(v), r.frame_count(v)), ("c", 3));
    let why = r.index_problem().unwrap();
    assert!(
        why.contains("manifest") && why.contains("gulpio index"),
        "{why}"
    );
    assert_eq!(d.lookup("c2").unwrap(), None);
    match d.resolve("d") {
        Err(Error::StaleIndex { path, msg }) => {
            assert_eq!(path, two.meta);
            assert!(msg.contains("manifest=\"off\""), "{msg}");
        }
        other => panic!("{:?}", other.map(|(_, v)| v)),
    }
    // The same failure every time, and `verify` finds both at open.
    assert!(matches!(d.resolve("e"), Err(Error::StaleIndex { .. })));
    let err = Directory::open_with(Store::default(), dir.path(), ManifestMode::Verify)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("files differ"), "{err}");
}

#[test]
fn at_most_the_bound_of_chunk_readers_stays_open_and_a_dropped_one_opens_again() {
    let dir = tempfile::tempdir().unwrap();
    for k in 0..6u64 {
        write_chunk(dir.path(), k, &[(&format!("v{k}"), 2)]);
    }
    for manifest in [false, true] {
        if manifest {
            crate::manifest::index(dir.path(), false).unwrap();
        }
        let mut d = Directory::open(dir.path()).unwrap();
        assert_eq!(matches!(d.opened(), Opened::Manifest { .. }), manifest);
        d.set_max_open_chunks(2);
        for round in 0..2 {
            for c in 0..6 {
                let r = d.reader(c).unwrap();
                assert_eq!((r.id(0), r.frame_count(0)), (format!("v{c}").as_str(), 2));
                let open = (0..6).filter(|&i| d.chunk(i).unwrap().is_loaded()).count();
                assert!(open <= 2, "round {round}: {open} readers open");
            }
        }
        // A reader handed out stays usable after its slot dropped it.
        let kept = d.reader(0).unwrap();
        for c in 1..6 {
            d.reader(c).unwrap();
        }
        assert!(!d.chunk(0).unwrap().is_loaded());
        assert_eq!(kept.id(0), "v0");
        // Through a manifest the slots made for chunks are bounded too (twice the readers).
        if let Catalog::Recorded(r) = &d.catalog {
            assert!(r.slots_held() <= 4, "{} slots held", r.slots_held());
        }
    }
}

#[test]
fn frame_counts_come_from_the_manifest_without_opening_a_chunk() {
    let dir = tempfile::tempdir().unwrap();
    for k in 0..3u64 {
        write_chunk(
            dir.path(),
            k,
            &[(&format!("a{k}"), 2), (&format!("b{k}"), 5)],
        );
    }
    let listed = Directory::open(dir.path()).unwrap();
    crate::manifest::index(dir.path(), false).unwrap();
    let recorded = Directory::open(dir.path()).unwrap();
    assert!(matches!(recorded.opened(), Opened::Manifest { .. }));
    for g in 0..6 {
        assert_eq!(
            recorded.frame_count(g).unwrap(),
            listed.frame_count(g).unwrap()
        );
    }
    assert_eq!(recorded.frame_count(3).unwrap(), 5);
    assert!((0..3).all(|c| !recorded.chunk(c).unwrap().is_loaded()));
    assert!(listed.chunk(1).unwrap().is_loaded());
    for d in [&listed, &recorded] {
        assert!(matches!(d.frame_count(6), Err(Error::InvalidArgument(_))));
    }
}
