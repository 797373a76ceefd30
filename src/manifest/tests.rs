use std::path::Path;

use super::*;
use crate::chunk::testing::{frames_of, refs, write_chunk};
use crate::chunk::writer::{ChunkWriter, WriteMode};
use crate::format::manifest::{ChunkInput, ChunkRecord, Op, VideoInput};
use crate::format::paths::ChunkPaths;

/// Every chunk of the state: (number, ids in position order).
fn summary(state: &State) -> Vec<(u64, Vec<String>)> {
    state
        .chunks
        .iter()
        .map(|c| {
            (
                c.input.record.number,
                c.input.videos.iter().map(|v| v.id.clone()).collect(),
            )
        })
        .collect()
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The commit point of a chunk staged elsewhere: its files copied in as chunk `k`, the
/// `.gmeta` last.
fn publish_at(staged: &ChunkPaths, dir: &Path, k: u64) {
    let target = ChunkPaths::numbered(dir, k);
    for (from, to) in [
        (&staged.data, &target.data),
        (&staged.index, &target.index),
        (&staged.meta, &target.meta),
    ] {
        std::fs::copy(from, to).unwrap();
    }
}

/// Chunk 5 (video "x") staged in a folder of its own and its add committed to `dir`'s
/// manifest, not published: the folder (kept alive), the staged files and the version.
fn commit_unpublished(dir: &Path) -> (tempfile::TempDir, ChunkPaths, u64) {
    let elsewhere = tempfile::tempdir().unwrap();
    let staged = write_chunk(elsewhere.path(), 5, &[("x", 2)]);
    let v = commit_ops(dir, &[describe_files(5, Op::Add, &staged).unwrap()]).unwrap();
    (elsewhere, staged, v)
}

/// A dataset of two chunks with a manifest made from them, as `gulpio index` makes it.
fn indexed_dataset(dir: &Path) {
    write_chunk(dir, 0, &[("a", 2), ("b", 3)]);
    write_chunk(dir, 1, &[("c", 1)]);
    let chunks: Vec<ChunkInput> = (0..2)
        .map(|k| describe_files(k, Op::State, &ChunkPaths::numbered(dir, k)).unwrap())
        .collect();
    assert!(write_genesis(dir, &chunks).unwrap());
}

#[test]
fn the_genesis_holds_the_chunks_and_their_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    indexed_dataset(tmp.path());
    let state = load_state(tmp.path()).unwrap();
    assert_eq!(state.version, 0);
    assert_eq!(
        summary(&state),
        vec![(0, ids(&["a", "b"])), (1, ids(&["c"]))]
    );
    let b = &state.chunks[0].input.videos[1];
    assert_eq!((b.frame_count, b.height, b.width, b.channels), (3, 4, 8, 3));
    assert!(state.pending.is_empty() && state.unrecorded.is_empty());
    // A second genesis is refused: the first stays.
    assert!(!write_genesis(tmp.path(), &[]).unwrap());
}

#[test]
fn writers_commit_new_chunks_and_appends_before_publishing_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    // A new chunk (the next free number) and an append to chunk 0.
    let mut w = ChunkWriter::open(&ChunkPaths::numbered(dir, 0), WriteMode::Next).unwrap();
    let frames = frames_of(2);
    w.append("d", b"{}", &refs(&frames)).unwrap();
    assert_eq!(w.close().unwrap(), ChunkPaths::numbered(dir, 2));
    let mut a = ChunkWriter::open(&ChunkPaths::numbered(dir, 0), WriteMode::Append).unwrap();
    a.append("e", b"{}", &refs(&frames)).unwrap();
    a.close().unwrap();
    let state = load_state(dir).unwrap();
    assert_eq!(state.version, 2);
    // Base chunks kept first, then the tail's in version order.
    assert_eq!(
        summary(&state),
        vec![
            (1, ids(&["c"])),
            (2, ids(&["d"])),
            (0, ids(&["a", "b", "e"])),
        ]
    );
    assert!(state.chunks.iter().all(|c| !c.changed));
    // The snapshot puts them back in number order and becomes the base.
    compact(dir, &state).unwrap();
    let again = load_state(dir).unwrap();
    assert!(again.base_is_snapshot);
    assert_eq!((again.version, again.tail), (2, 0));
    assert_eq!(
        summary(&again),
        vec![
            (0, ids(&["a", "b", "e"])),
            (1, ids(&["c"])),
            (2, ids(&["d"])),
        ]
    );
}

#[test]
fn an_operation_whose_commit_point_did_not_come_stays_pending_until_it_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    let (_elsewhere, paths, v) = commit_unpublished(dir);
    let state = load_state(dir).unwrap();
    assert_eq!(state.pending, vec![(5, v)]);
    assert!(!summary(&state).iter().any(|(k, _)| *k == 5));
    // Compacted while pending: the snapshot carries it, and it takes effect after.
    compact(dir, &state).unwrap();
    publish_at(&paths, dir, 5);
    let state = load_state(dir).unwrap();
    assert!(state.base_is_snapshot);
    assert!(state.pending.is_empty());
    assert_eq!(summary(&state).last().unwrap(), &(5, ids(&["x"])));
}

#[test]
fn an_abort_cancels_the_operation_it_follows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    let elsewhere = tempfile::tempdir().unwrap();
    let paths = write_chunk(elsewhere.path(), 1, &[("y", 2)]);
    commit_ops(dir, &[describe_files(1, Op::Replace, &paths).unwrap()]).unwrap();
    assert_eq!(load_state(dir).unwrap().pending.len(), 1);
    abort_op(dir, 1).unwrap();
    let state = load_state(dir).unwrap();
    assert!(state.pending.is_empty());
    assert_eq!(summary(&state)[1], (1, ids(&["c"])));
}

#[test]
fn a_chunk_changed_by_another_tool_is_marked_and_one_added_is_unrecorded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    // Chunk 1 rewritten without the manifest (as gulpio2 would), named by no operation: it
    // keeps its record (judged at its first read). One named by an operation that did not
    // take effect, whose files match neither, is marked changed.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = write_chunk(elsewhere.path(), 1, &[("z", 4), ("zz", 1)]);
    commit_ops(dir, &[describe_files(1, Op::Replace, &other).unwrap()]).unwrap();
    std::fs::write(ChunkPaths::numbered(dir, 1).meta, b"[]").unwrap();
    let state = load_state(dir).unwrap();
    let one = state
        .chunks
        .iter()
        .find(|c| c.input.record.number == 1)
        .unwrap();
    assert!(one.changed);
    // A chunk named by an add that did not take effect, with a `.gmeta` of other bytes.
    commit_ops(dir, &[describe_files(9, Op::Add, &other).unwrap()]).unwrap();
    std::fs::write(ChunkPaths::numbered(dir, 9).meta, b"[]").unwrap();
    assert_eq!(load_state(dir).unwrap().unrecorded, vec![9]);
}

#[test]
fn concurrent_writers_get_distinct_versions_and_every_chunk_is_in_the_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    indexed_dataset(&dir);
    let per_thread = 12;
    std::thread::scope(|s| {
        for t in 0..4 {
            let dir = &dir;
            s.spawn(move || {
                for i in 0..per_thread {
                    let mut w =
                        ChunkWriter::open(&ChunkPaths::numbered(dir, 2), WriteMode::Next).unwrap();
                    let frames = frames_of(1);
                    w.append(&format!("t{t}-{i}"), b"{}", &refs(&frames))
                        .unwrap();
                    w.close().unwrap();
                }
            });
        }
    });
    let state = load_state(&dir).unwrap();
    assert_eq!(state.version, 4 * per_thread);
    assert!(state.pending.is_empty(), "{:?}", state.pending);
    assert_eq!(state.video_count(), 3 + 4 * per_thread);
    let mut numbers: Vec<u64> = state.chunks.iter().map(|c| c.input.record.number).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, (0..2 + 4 * per_thread).collect::<Vec<_>>());
}

#[test]
fn a_large_commit_is_written_as_a_body_and_read_back_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Over 8 MiB of tables: 160,000 videos of 48-byte ids over 1,600 chunks.
    let chunks: Vec<ChunkInput> = (0..1600u64)
        .map(|k| ChunkInput {
            record: ChunkRecord {
                number: k,
                first: 0,
                video_count: 0,
                op: Op::State,
                index_version: 2,
                gidx_len: 1000,
                gidx_header_crc: 1,
                gmeta_crc: 2,
                gmeta_len: 300,
                gulp_len: 4000,
                frame_count: 0,
            },
            videos: (0..100)
                .map(|i| VideoInput {
                    id: format!("{k:08}-{i:04}-{}", "v".repeat(34)),
                    frame_count: 16,
                    height: 256,
                    width: 456,
                    channels: 3,
                    segments: false,
                })
                .collect(),
        })
        .collect();
    assert!(write_genesis(dir, &chunks).unwrap());
    let genesis = std::fs::metadata(dir.join(log_name(0))).unwrap();
    assert_eq!(genesis.len(), 256, "a kind 3 commit is its header alone");
    let commit = read_commit(dir, 0).unwrap().unwrap();
    assert_eq!(commit.ops.len(), 1600);
    assert_eq!(commit.ops[1599].videos[99].id, chunks[1599].videos[99].id);
    let state = load_state(dir).unwrap();
    assert_eq!(state.video_count(), 160_000);
}

#[test]
fn damaged_manifest_files_are_format_errors_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    let mut w = ChunkWriter::open(&ChunkPaths::numbered(dir, 0), WriteMode::Next).unwrap();
    let frames = frames_of(1);
    w.append("d", b"{}", &refs(&frames)).unwrap();
    w.close().unwrap();
    let commit = dir.join(log_name(1));
    let good = std::fs::read(&commit).unwrap();
    for at in [0, 100, 255, 256, good.len() / 2, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        std::fs::write(&commit, &bad).unwrap();
        let err = load_state(dir).unwrap_err().to_string();
        assert!(
            err.contains("00000000000000000001.glog"),
            "byte {at}: {err}"
        );
    }
    std::fs::write(&commit, &good[..good.len() - 8]).unwrap();
    assert!(load_state(dir).is_err());
    std::fs::write(&commit, &good).unwrap();
    assert_eq!(load_state(dir).unwrap().version, 1);
}

#[test]
fn a_chunk_under_another_name_is_refused_in_a_dataset_with_a_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    let paths = ChunkPaths::new(dir.join("data-old_7.gulp"), dir.join("meta-old_7.gmeta"));
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    let frames = frames_of(1);
    w.append("q", b"{}", &refs(&frames)).unwrap();
    let err = w.close().unwrap_err().to_string();
    assert!(err.contains("data_{k}.gulp"), "{err}");
    assert!(!paths.meta.exists());
}

#[test]
fn the_manifest_is_never_written_through_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_chunk(dir, 0, &[("a", 1)]);
    std::os::unix::fs::symlink(outside.path(), dir.join(DIR)).unwrap();
    let chunks = vec![describe_files(0, Op::State, &ChunkPaths::numbered(dir, 0)).unwrap()];
    let err = write_genesis(dir, &chunks).unwrap_err();
    assert!(matches!(err, crate::error::Error::Unsafe { .. }), "{err}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

/// The view answers as the materialised state does: every position's id and chunk, every id's
/// position, nothing for ids that left.
fn assert_view_matches_state(dir: &Path, gone: &[String]) {
    let state = load_state(dir).unwrap();
    let view = View::open(dir).unwrap();
    assert_eq!(view.version, state.version);
    assert_eq!(view.len(), state.video_count());
    assert_eq!(view.chunk_count(), state.chunks.len());
    let mut p = 0u64;
    for (cpos, c) in state.chunks.iter().enumerate() {
        let chunk = view.chunk(cpos).unwrap();
        assert_eq!(
            (
                chunk.record.number,
                chunk.first,
                chunk.video_count,
                chunk.changed
            ),
            (
                c.input.record.number,
                p,
                c.input.videos.len() as u64,
                c.changed
            ),
            "chunk position {cpos}"
        );
        for (i, v) in c.input.videos.iter().enumerate() {
            let at = view.video(p).unwrap();
            assert_eq!(
                (at.id.as_str(), at.chunk, at.index as usize, at.frame_count),
                (v.id.as_str(), c.input.record.number, i, v.frame_count),
                "position {p}"
            );
            assert_eq!(view.lookup(&v.id).unwrap(), Some(p), "id {}", v.id);
            let located = Located {
                position: p,
                chunk: cpos,
                index: i as u32,
            };
            assert_eq!(view.locate(&v.id).unwrap(), Some(located), "id {}", v.id);
            assert_eq!(view.locate_position(p).unwrap(), located);
            assert_eq!(view.id(p).unwrap(), v.id);
            assert_eq!(
                view.shape(p).unwrap(),
                (v.frame_count, (v.height, v.width, v.channels))
            );
            p += 1;
        }
    }
    assert!(view.video(p).is_err());
    assert!(view.locate_position(p).is_err());
    assert!(view.chunk(state.chunks.len()).is_err());
    assert_eq!(
        view.max_chunk().unwrap(),
        state
            .max_chunk()
            .max(state.unrecorded.iter().copied().max())
    );
    for id in gone {
        assert_eq!(view.lookup(id).unwrap(), None, "id {id}");
        assert_eq!(view.locate(id).unwrap(), None, "id {id}");
    }
    let mut pending = view.pending.clone();
    pending.sort_unstable();
    let mut expected = state.pending.clone();
    expected.sort_unstable();
    assert_eq!(pending, expected);
}

#[test]
fn the_paged_view_answers_as_the_materialised_state_through_any_history() {
    for seed in 1..=4u64 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for k in 0..4 {
            let ids: Vec<String> = (0..3).map(|v| format!("s{seed}c{k}v{v}")).collect();
            let refs_: Vec<(&str, usize)> = ids.iter().map(|i| (i.as_str(), 2)).collect();
            write_chunk(dir, k, &refs_);
        }
        let chunks: Vec<ChunkInput> = (0..4)
            .map(|k| describe_files(k, Op::State, &ChunkPaths::numbered(dir, k)).unwrap())
            .collect();
        write_genesis(dir, &chunks).unwrap();
        let mut rng = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = || {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) as usize
        };
        let mut gone: Vec<String> = Vec::new();
        let mut made = 0;
        for step in 0..24 {
            let state = load_state(dir).unwrap();
            let numbers: Vec<u64> = state.chunks.iter().map(|c| c.input.record.number).collect();
            let frames = frames_of(1);
            match next() % 5 {
                0 | 1 => {
                    let mut w =
                        ChunkWriter::open(&ChunkPaths::numbered(dir, 0), WriteMode::Next).unwrap();
                    made += 1;
                    w.append(&format!("s{seed}new{made}"), b"{}", &refs(&frames))
                        .unwrap();
                    w.close().unwrap();
                }
                2 if !numbers.is_empty() => {
                    let k = numbers[next() % numbers.len()];
                    let mut w = ChunkWriter::open(&ChunkPaths::numbered(dir, k), WriteMode::Append)
                        .unwrap();
                    made += 1;
                    w.append(&format!("s{seed}app{made}"), b"{}", &refs(&frames))
                        .unwrap();
                    w.close().unwrap();
                }
                3 if numbers.len() > 1 => {
                    // A removal as repair commits it: the operation, then the files.
                    let k = numbers[next() % numbers.len()];
                    let c = state
                        .chunks
                        .iter()
                        .find(|c| c.input.record.number == k)
                        .unwrap();
                    gone.extend(c.input.videos.iter().map(|v| v.id.clone()));
                    let mut rm = describe_files(k, Op::Add, &ChunkPaths::numbered(dir, k)).unwrap();
                    rm.record.op = Op::Remove;
                    rm.videos.clear();
                    commit_ops(dir, &[rm]).unwrap();
                    let paths = ChunkPaths::numbered(dir, k);
                    for f in [&paths.meta, &paths.data, &paths.index] {
                        std::fs::remove_file(f).unwrap();
                    }
                }
                _ => {
                    compact(dir, &state).unwrap();
                }
            }
            if step % 6 == 5 {
                // A writer killed after its commit: an add that never takes effect.
                let elsewhere = tempfile::tempdir().unwrap();
                let k = 1000 + step as u64;
                let id = format!("s{seed}dead{step}");
                let paths = write_chunk(elsewhere.path(), k, &[(&id, 1)]);
                commit_ops(dir, &[describe_files(k, Op::Add, &paths).unwrap()]).unwrap();
                gone.push(id);
            }
            assert_view_matches_state(dir, &gone);
        }
    }
}

#[test]
fn a_damaged_page_of_the_base_fails_the_lookups_that_need_it_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    let mut w = ChunkWriter::open(&ChunkPaths::numbered(dir, 0), WriteMode::Next).unwrap();
    let frames = frames_of(1);
    w.append("d", b"{}", &refs(&frames)).unwrap();
    w.close().unwrap();
    compact(dir, &load_state(dir).unwrap()).unwrap();
    let snap = std::fs::read_dir(dir.join(DIR).join("snap"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "gman"))
        .unwrap();
    let mut bytes = std::fs::read(&snap).unwrap();
    let h = crate::format::manifest::decode_header(&bytes).unwrap();
    bytes[h.id_table_off as usize + 12] ^= 0x01;
    std::fs::write(&snap, &bytes).unwrap();
    let view = View::open(dir).unwrap();
    let err = view.lookup("a").unwrap_err().to_string();
    assert!(err.contains(".gman") && err.contains("CRC"), "{err}");
    // The video table is intact: rows still read, ids do not.
    assert!(view.video(0).is_err());
    // The front itself damaged: the open fails, naming the file.
    bytes[300] ^= 0x01;
    std::fs::write(&snap, &bytes).unwrap();
    let err = View::open(dir).err().unwrap().to_string();
    assert!(err.contains(".gman"), "{err}");
}

#[test]
fn exactly_one_commit_reaches_each_multiple_of_the_compaction_policy() {
    let at = |version, base, before, after| Committed {
        version,
        base,
        videos_before: before,
        videos_after: after,
    };
    assert!(!at(1, 0, 0, 10).compaction_due());
    assert!(at(COMPACT_EVERY_COMMITS, 0, 0, 10).compaction_due());
    assert!(!at(COMPACT_EVERY_COMMITS + 1, 0, 0, 10).compaction_due());
    // The tail counts from the base its writer started from.
    assert!(at(700 + COMPACT_EVERY_COMMITS, 700, 0, 10).compaction_due());
    assert!(!at(700, 0, 0, 10).compaction_due());
    // Crossing a multiple of the videos, not landing after one.
    let v = COMPACT_EVERY_VIDEOS;
    assert!(at(3, 0, v - 1, v + 5).compaction_due());
    assert!(at(3, 0, v - 1, v).compaction_due());
    assert!(!at(3, 0, v, 2 * v - 1).compaction_due());
}

#[test]
fn the_writer_whose_commit_reaches_the_policys_multiple_compacts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert!(create_if_new(ManifestIo::Local(dir)).unwrap());
    // A second writer creating the same dataset adopts the first's manifest.
    assert!(!create_if_new(ManifestIo::Local(dir)).unwrap());
    let io = ManifestIo::Local(dir);
    let mut compacted = Vec::new();
    for k in 0..COMPACT_EVERY_COMMITS + 3 {
        let c = abort_op_in(io, k).unwrap();
        if compact_if_due(io, &c).unwrap() {
            compacted.push(c.version);
        }
    }
    assert_eq!(compacted, vec![COMPACT_EVERY_COMMITS]);
    let state = load_state(dir).unwrap();
    assert_eq!(state.base_version, COMPACT_EVERY_COMMITS);
    assert!(state.base_is_snapshot);
    assert_eq!(state.tail, 3);
    // At the end of a run: the tail goes, and again is nothing to do.
    assert_eq!(
        compact_if_tail(io).unwrap(),
        Some(COMPACT_EVERY_COMMITS + 3)
    );
    assert_eq!(compact_if_tail(io).unwrap(), None);
}

#[test]
fn a_folder_with_chunk_files_and_no_manifest_gets_none_by_itself() {
    let tmp = tempfile::tempdir().unwrap();
    write_chunk(tmp.path(), 0, &[("a", 1)]);
    assert!(!create_if_new(ManifestIo::Local(tmp.path())).unwrap());
    assert!(!has_manifest(tmp.path()));
    // Nor does a folder that does not exist: there is nothing to put it in.
    let missing = tmp.path().join("missing");
    assert!(create_if_new(ManifestIo::Local(&missing)).is_err());
}

/// Every id of a view, in position order.
fn view_ids(view: &View) -> Vec<String> {
    (0..view.len()).map(|p| view.id(p).unwrap()).collect()
}

fn open_pinned(dir: &Path, pin: &Pin) -> crate::error::Result<View> {
    let at = OpenAt {
        pin: Some(pin),
        max_tail: None,
    };
    match View::open_at(ManifestIo::Local(dir), None, None, at)? {
        Opening::Ready(v) => Ok(*v),
        Opening::TailTooLong(_) => panic!("no limit was set"),
    }
}

#[test]
fn a_pinned_open_sees_the_state_of_its_pin_whatever_was_committed_since() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    // Chunk 5 committed, not yet published, when the original opens; chunk 2 published.
    let (_elsewhere, staged, v5) = commit_unpublished(dir);
    add_chunk(dir, "d");
    let original = View::open(dir).unwrap();
    assert_eq!(original.pending, vec![(5, v5)]);
    let pin = original.pin();
    assert_eq!(Pin::from_bytes(&pin.to_bytes()).unwrap(), pin);
    // Chunk 5 is published (it would come before chunk 2 in a new open: its commit is older)
    // and chunk 3 is added.
    publish_at(&staged, dir, 5);
    add_chunk(dir, "e");
    let fresh = View::open(dir).unwrap();
    assert_eq!(view_ids(&fresh), ids(&["a", "b", "c", "x", "d", "e"]));
    let copy = open_pinned(dir, &pin).unwrap();
    assert_eq!(view_ids(&copy), view_ids(&original));
    assert_eq!(view_ids(&copy), ids(&["a", "b", "c", "d"]));
    assert_eq!(
        (copy.lookup("x").unwrap(), copy.lookup("e").unwrap()),
        (None, None)
    );
    assert_eq!(copy.lookup("d").unwrap(), Some(3));
    // A copy of the copy is the same pin.
    assert_eq!(copy.pin(), pin);
    // Compaction since does not move it: its base is still there.
    compact(dir, &load_state(dir).unwrap()).unwrap();
    assert_eq!(
        view_ids(&open_pinned(dir, &pin).unwrap()),
        ids(&["a", "b", "c", "d"])
    );
}

#[test]
fn a_pinned_state_that_is_gone_is_a_stale_index_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    add_chunk(dir, "d");
    let pin = View::open(dir).unwrap().pin();
    // The tail's chunk removed by another tool: fewer videos than the pin's.
    let two = ChunkPaths::numbered(dir, 2);
    for p in [&two.data, &two.index, &two.meta] {
        std::fs::remove_file(p).unwrap();
    }
    let err = open_pinned(dir, &pin).err().unwrap();
    assert!(
        matches!(err, crate::error::Error::StaleIndex { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("open the dataset again"), "{err}");
    // Replaced by another tool instead: its files are no record of the pin's.
    write_chunk(dir, 2, &[("z", 3)]);
    let err = open_pinned(dir, &pin).err().unwrap();
    assert!(
        err.to_string().contains("chunk 2 was replaced or removed"),
        "{err}"
    );
    // The base the pin names deleted.
    let mut gone = pin.clone();
    gone.base_name = snap_name(0, &[7; 16]);
    gone.is_snapshot = true;
    let err = open_pinned(dir, &gone).err().unwrap();
    assert!(
        matches!(err, crate::error::Error::StaleIndex { .. }),
        "{err}"
    );
}

#[test]
fn pin_bytes_are_checked_whole() {
    let tmp = tempfile::tempdir().unwrap();
    indexed_dataset(tmp.path());
    let bytes = View::open(tmp.path()).unwrap().pin().to_bytes();
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        assert!(
            Pin::from_bytes(&damaged).is_err(),
            "a flip at byte {at} was accepted"
        );
    }
    for len in 0..bytes.len() {
        assert!(
            Pin::from_bytes(&bytes[..len]).is_err(),
            "{len} bytes were accepted"
        );
    }
    let mut bad = View::open(tmp.path()).unwrap().pin();
    bad.base_name = "_gulpio/snap/../../etc/passwd".into();
    assert!(Pin::from_bytes(&bad.to_bytes()).is_err());
}

#[test]
fn a_tail_longer_than_the_limit_is_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    for k in 0..3 {
        let mut w = ChunkWriter::open(&ChunkPaths::numbered(dir, 0), WriteMode::Next).unwrap();
        w.append(&format!("n{k}"), b"{}", &refs(&frames_of(1)))
            .unwrap();
        w.close().unwrap();
    }
    // Commit 2 is damaged: a limit below the tail's length reads none of its commits.
    std::fs::write(dir.join(log_name(2)), b"garbage").unwrap();
    let at = OpenAt {
        pin: None,
        max_tail: Some(2),
    };
    match View::open_at(ManifestIo::Local(dir), None, None, at).unwrap() {
        Opening::TailTooLong(n) => assert_eq!(n, 3),
        Opening::Ready(_) => panic!("the tail was read"),
    }
}

/// One more chunk, holding video `id`, by a writer that keeps the manifest.
fn add_chunk(dir: &Path, id: &str) {
    let mut w = ChunkWriter::open(&ChunkPaths::numbered(dir, 0), WriteMode::Next).unwrap();
    w.append(id, b"{}", &refs(&frames_of(1))).unwrap();
    w.close().unwrap();
}

fn manifest_names(dir: &Path, sub: &str) -> Vec<String> {
    ManifestIo::Local(dir)
        .names_in(&format!("{DIR}/{sub}"))
        .unwrap()
}

fn far_future() -> u64 {
    super::now_ms() + 3_600_000
}

#[test]
fn clean_up_deletes_replaced_bases_and_the_commits_only_they_needed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    let io = ManifestIo::Local(dir);
    // Nothing to judge before the first snapshot.
    assert_eq!(prune_in(io, 0, far_future()).unwrap(), Pruned::default());
    add_chunk(dir, "d");
    compact(dir, &load_state(dir).unwrap()).unwrap();
    let old_pin = View::open(dir).unwrap().pin();
    add_chunk(dir, "e");
    add_chunk(dir, "f");
    compact(dir, &load_state(dir).unwrap()).unwrap();
    let before = view_ids(&View::open(dir).unwrap());
    // Within the retention nothing goes.
    assert_eq!(
        prune_in(io, KEEP_FOR_MS, super::now_ms()).unwrap(),
        Pruned::default()
    );
    assert_eq!(manifest_names(dir, "snap").len(), 2);
    // Past it: the first snapshot, and commits 1 and 2 that only it and the genesis needed.
    let pruned = prune_in(io, 0, far_future()).unwrap();
    assert_eq!((pruned.snapshots, pruned.commits, pruned.bodies), (1, 2, 0));
    assert_eq!(manifest_names(dir, "snap").len(), 1);
    let logs = manifest_names(dir, "log");
    assert_eq!(
        logs,
        vec![format!("{:020}.glog", 0), format!("{:020}.glog", 3)]
    );
    // The dataset reads as before, writers go on from the current version, and a copy of
    // an open on the deleted base says it is gone.
    assert_eq!(view_ids(&View::open(dir).unwrap()), before);
    add_chunk(dir, "g");
    let state = load_state(dir).unwrap();
    assert_eq!(state.version, 4);
    assert_eq!(summary(&state).last().unwrap().1, ids(&["g"]));
    let err = open_pinned(dir, &old_pin).err().unwrap();
    assert!(
        matches!(err, crate::error::Error::StaleIndex { .. }),
        "{err}"
    );
    // Again: nothing more to delete.
    assert_eq!(prune_in(io, 0, far_future()).unwrap(), Pruned::default());
}

#[test]
fn clean_up_keeps_the_commits_a_kept_snapshot_still_waits_for() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    indexed_dataset(dir);
    // Chunk 5 committed (version 1) and not published through two compactions.
    let (_elsewhere, staged, v) = commit_unpublished(dir);
    compact(dir, &load_state(dir).unwrap()).unwrap();
    add_chunk(dir, "d");
    compact(dir, &load_state(dir).unwrap()).unwrap();
    assert_eq!(load_state(dir).unwrap().pending, vec![(5, v)]);
    let pruned = prune_in(ManifestIo::Local(dir), 0, far_future()).unwrap();
    assert_eq!((pruned.snapshots, pruned.commits), (1, 0));
    assert!(dir.join(log_name(v)).is_file());
    // Its commit point comes: the chunk is in the state.
    publish_at(&staged, dir, 5);
    let state = load_state(dir).unwrap();
    assert!(state.pending.is_empty());
    assert!(summary(&state)
        .iter()
        .any(|(k, ids)| *k == 5 && ids == &["x"]));
}

#[test]
fn a_chunk_without_index_is_described_from_its_gmeta_as_a_reader_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    write_chunk(dir.path(), 0, &[("a", 3), ("b", 0), ("c", 1)]);
    let paths = ChunkPaths::numbered(dir.path(), 0);
    let meta = std::fs::read(&paths.meta).unwrap();
    let gulp_len = std::fs::metadata(&paths.data).unwrap().len();
    let indexed = describe_files(0, Op::Add, &paths).unwrap();
    let plain = describe_unindexed(0, Op::Add, &meta, gulp_len).unwrap();
    let counts = |c: &ChunkInput| -> Vec<(String, u32)> {
        c.videos
            .iter()
            .map(|v| (v.id.clone(), v.frame_count))
            .collect()
    };
    assert_eq!(counts(&plain), counts(&indexed));
    assert!(plain
        .videos
        .iter()
        .all(|v| (v.height, v.width, v.channels) == (0, 0, 0)));
    let r = &plain.record;
    assert_eq!((r.index_version, r.gidx_len, r.gulp_len), (0, 0, gulp_len));
    assert_eq!(
        (r.gmeta_len, r.gmeta_crc),
        (meta.len() as u64, crc32fast::hash(&meta))
    );
    // What a reader refuses is refused: text that is not a gulpio .gmeta, a cut one.
    assert!(describe_unindexed(0, Op::Add, b"{\"a\": 1}", gulp_len).is_err());
    assert!(describe_unindexed(0, Op::Add, &meta[..meta.len() / 2], gulp_len).is_err());
    // A video stored as segments says so, as its index would.
    let seg = crate::chunk::testing::write_segment_chunk(dir.path(), 1);
    let plain = describe_unindexed(1, Op::Add, &std::fs::read(&seg.meta).unwrap(), 0).unwrap();
    let indexed = describe_files(1, Op::Add, &seg).unwrap();
    let flags = |c: &ChunkInput| -> Vec<(u32, bool)> {
        c.videos
            .iter()
            .map(|v| (v.frame_count, v.segments))
            .collect()
    };
    assert_eq!(flags(&plain), vec![(2, false), (16, true)]);
    assert_eq!(flags(&plain), flags(&indexed));
}
