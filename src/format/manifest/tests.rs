use proptest::prelude::*;

use super::*;

fn meta(kind: Kind, page_shift: u8) -> TableMeta {
    TableMeta {
        kind,
        full: kind == Kind::Snapshot,
        page_shift,
        dataset_version: 7,
        base_version: NONE,
        dataset_id: [0xAB; 16],
        created_ms: 1_764_400_000_000,
        tail_videos: 0,
        pending: Vec::new(),
    }
}

fn record(number: u64, op: Op) -> ChunkRecord {
    ChunkRecord {
        number,
        first: 0,
        video_count: 0,
        op,
        index_version: if op.has_files() { 2 } else { 0 },
        gidx_len: if op.has_files() { 1000 + number } else { 0 },
        gidx_header_crc: if op.has_files() {
            number as u32 ^ 0x5555
        } else {
            0
        },
        gmeta_crc: if op.has_files() { 77 } else { 0 },
        gmeta_len: if op.has_files() { 500 } else { 0 },
        gulp_len: if op.has_files() { 9000 } else { 0 },
        frame_count: 0,
    }
}

fn video(id: String, frames: u32) -> VideoInput {
    VideoInput {
        id,
        frame_count: frames,
        height: 72,
        width: 128,
        channels: 3,
        segments: frames.is_multiple_of(2),
    }
}

/// Chunks numbered from `sizes`' order (with gaps), each of `sizes[i]` videos with ids that
/// interleave across chunks, so the sorted id order differs from the position order.
fn dataset(sizes: &[usize], op: Op) -> Vec<ChunkInput> {
    let mut n = 0;
    sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| ChunkInput {
            record: record(3 * i as u64 + 1, op),
            videos: (0..size)
                .map(|_| {
                    n += 1;
                    video(
                        format!("v{:07}-{i}", (n * 7919) % 1_000_003),
                        (n % 40) as u32,
                    )
                })
                .collect(),
        })
        .collect()
}

/// Every lookup answers as the inputs say.
fn check_all(file: &TableFile<Vec<u8>>, chunks: &[ChunkInput]) {
    let mut position = 0u64;
    let mut all: Vec<&str> = chunks
        .iter()
        .flat_map(|c| c.videos.iter().map(|v| v.id.as_str()))
        .collect();
    all.sort_unstable();
    for c in chunks {
        let got = file.chunk(c.record.number).unwrap().expect("recorded");
        assert_eq!(got.first, position);
        assert_eq!(got.video_count as usize, c.videos.len());
        assert_eq!(got.gidx_header_crc, c.record.gidx_header_crc);
        for v in &c.videos {
            let (slot, pos) = file.find(&v.id).unwrap().expect("found");
            assert_eq!(pos, position);
            assert_eq!(all[slot as usize], v.id);
            let row = file.row(position).unwrap();
            assert_eq!(
                (
                    row.frame_count,
                    row.height,
                    row.width,
                    row.channels,
                    row.segments
                ),
                (v.frame_count, v.height, v.width, v.channels, v.segments)
            );
            assert_eq!(row.slot, slot);
            assert_eq!(file.id_at(position).unwrap(), v.id);
            assert_eq!(file.chunk_of(position).unwrap().number, c.record.number);
            position += 1;
        }
    }
    assert_eq!(file.video_count(), position);
    assert_eq!(file.find("").unwrap(), None);
    assert_eq!(file.find("zzzz-not-there").unwrap(), None);
    assert_eq!(file.find("a").unwrap(), None);
    assert!(file.row(position).is_err());
    assert_eq!(file.chunks().unwrap().len(), chunks.len());
}

#[test]
fn a_snapshot_of_many_pages_answers_every_lookup() {
    let chunks = dataset(&[100, 0, 1, 250, 37, 0, 512, 3], Op::State);
    // 4 KiB pages: 64 chunk records, 256 rows and a few dozen ids per page.
    let bytes = build_table_file(&meta(Kind::Snapshot, 12), &chunks).unwrap();
    let file = TableFile::open(bytes).unwrap();
    assert!(file.header().id_page_count > 3);
    assert!(file.header().video_page_count() > 2);
    assert_eq!(file.header().chunk_table_off % 4096, 0);
    assert_eq!(file.header().max_chunk, 22);
    check_all(&file, &chunks);
}

#[test]
fn an_empty_genesis_commit_opens_with_nothing_in_it() {
    let mut m = meta(Kind::Commit, PAGE_SHIFT);
    m.full = true;
    m.dataset_version = 0;
    let file = TableFile::open(build_table_file(&m, &[]).unwrap()).unwrap();
    assert_eq!((file.video_count(), file.chunk_count()), (0, 0));
    assert_eq!(file.header().max_chunk, NONE);
    assert_eq!(file.find("x").unwrap(), None);
    assert!(file.chunk_of(0).is_err());
    assert_eq!(file.chunk(1).unwrap(), None);
}

#[test]
fn a_commit_holds_operations_and_a_snapshot_its_pending_table() {
    let mut chunks = dataset(&[2, 3], Op::Add);
    chunks[1].record.op = Op::Replace;
    chunks.push(ChunkInput {
        record: record(40, Op::Remove),
        videos: vec![],
    });
    chunks.push(ChunkInput {
        record: record(41, Op::Abort),
        videos: vec![],
    });
    let file =
        TableFile::open(build_table_file(&meta(Kind::Commit, 12), &chunks).unwrap()).unwrap();
    check_all(&file, &chunks);
    let removed = file.chunk(40).unwrap().unwrap();
    assert_eq!(
        (removed.op, removed.gmeta_len, removed.first),
        (Op::Remove, 0, 5)
    );
    let mut m = meta(Kind::Snapshot, 12);
    m.pending = vec![(5, 9), (50, 8)];
    let snap = TableFile::open(build_table_file(&m, &dataset(&[1], Op::State)).unwrap()).unwrap();
    assert_eq!(snap.pending(), &[(5, 9), (50, 8)]);
    assert_eq!(snap.header().max_chunk, 50);
}

#[test]
fn what_a_file_cannot_hold_is_refused_when_it_is_built() {
    let snap = meta(Kind::Snapshot, 12);
    let mut twice = dataset(&[2, 2], Op::State);
    twice[1].videos[0].id = twice[0].videos[1].id.clone();
    assert!(build_table_file(&snap, &twice)
        .unwrap_err()
        .contains("appears twice"));
    let mut order = dataset(&[1, 1], Op::State);
    order.swap(0, 1);
    assert!(build_table_file(&snap, &order)
        .unwrap_err()
        .contains("increasing"));
    assert!(build_table_file(&snap, &dataset(&[1], Op::Add))
        .unwrap_err()
        .contains("op Add"));
    let mut with_videos = dataset(&[1], Op::Add);
    with_videos[0].record.op = Op::Remove;
    assert!(build_table_file(&meta(Kind::Commit, 12), &with_videos).is_err());
    let mut empty_id = dataset(&[1], Op::State);
    empty_id[0].videos[0].id.clear();
    assert!(build_table_file(&snap, &empty_id).is_err());
    let mut pending = meta(Kind::Commit, 12);
    pending.pending = vec![(1, 1)];
    assert!(build_table_file(&pending, &[]).is_err());
}

#[test]
fn the_hint_round_trips_and_refuses_damage() {
    let h = Hint {
        version: 12,
        kind: 1,
        file_id: [7; 16],
        front_len: 4096,
        file_len: 1 << 20,
        dataset_id: [9; 16],
    };
    let b = encode_hint(&h);
    assert_eq!(decode_hint(&b).unwrap(), h);
    for i in 0..HINT_LEN {
        let mut d = b;
        d[i] ^= 0x10;
        assert!(decode_hint(&d).is_err(), "byte {i}");
    }
    assert!(decode_hint(&b[..95]).is_err());
}

/// Every lookup's answer, or `None` where it failed.
type Answers = Vec<Option<String>>;

fn answers(file: &TableFile<Vec<u8>>, ids: &[String]) -> Answers {
    let mut out = Vec::new();
    for id in ids {
        out.push(file.find(id).ok().map(|r| format!("{r:?}")));
    }
    for pos in 0..file.video_count() {
        out.push(file.row(pos).ok().map(|r| format!("{r:?}")));
        out.push(file.id_at(pos).ok());
        out.push(file.chunk_of(pos).ok().map(|r| format!("{r:?}")));
    }
    out.push(file.chunks().ok().map(|r| format!("{r:?}")));
    out
}

/// A damaged byte anywhere is refused (at open, or by the lookups that read it) and never
/// changes an answer: the header, the front and every page are under a CRC; only padding is
/// not, and it changes nothing.
#[test]
fn a_damaged_byte_is_an_error_never_a_different_answer() {
    let chunks = dataset(&[10, 0, 25, 5], Op::State);
    let ids: Vec<String> = chunks
        .iter()
        .flat_map(|c| c.videos.iter().map(|v| v.id.clone()))
        .collect();
    let bytes = build_table_file(&meta(Kind::Commit, 12).clone_full(), &chunks).unwrap();
    let good = answers(&TableFile::open(bytes.clone()).unwrap(), &ids);
    assert!(good.iter().all(Option::is_some));
    let mut refused = 0;
    for at in (0..bytes.len()).step_by(5) {
        let mut d = bytes.clone();
        d[at] ^= 0x04;
        let Ok(file) = TableFile::open(d) else {
            refused += 1;
            continue;
        };
        let got = answers(&file, &ids);
        for (g, o) in got.iter().zip(&good) {
            assert!(g.is_none() || g == o, "byte {at}: {g:?} instead of {o:?}");
        }
        if got.iter().any(Option::is_none) {
            refused += 1;
        }
    }
    assert!(refused > bytes.len() / 5 / 2, "{refused}");
    // Cut short anywhere: refused at open or by the pages it lost.
    for len in [0, 100, 255, 256, 300, bytes.len() / 2, bytes.len() - 1] {
        if let Ok(file) = TableFile::open(bytes[..len].to_vec()) {
            assert!(
                answers(&file, &ids).iter().any(Option::is_none),
                "cut at {len}"
            );
        }
    }
}

impl TableMeta {
    fn clone_full(&self) -> TableMeta {
        TableMeta {
            full: true,
            kind: Kind::Body,
            ..self.clone()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Any chunks of any ids: built, opened, every lookup right, at any page size.
    #[test]
    fn any_dataset_round_trips(
        sizes in proptest::collection::vec(0usize..40, 0..10),
        shift in 12u8..=14,
        long in any::<bool>(),
    ) {
        let mut chunks = dataset(&sizes, Op::State);
        if long {
            // Ids near a page's size: pages of one id.
            for c in &mut chunks {
                for v in &mut c.videos {
                    v.id = format!("{}{}", v.id, "x".repeat((1usize << shift) - 40));
                }
            }
        }
        let bytes = build_table_file(&meta(Kind::Snapshot, shift), &chunks).unwrap();
        let file = TableFile::open(bytes).unwrap();
        check_all(&file, &chunks);
    }
}

/// A kind 3 commit is a header alone that names its body; it has no tables to open.
#[test]
fn a_commit_in_a_body_is_its_header_alone() {
    let mut h = decode_header(&build_table_file(&meta(Kind::Commit, 12), &[]).unwrap()).unwrap();
    h.kind = Kind::CommitInBody;
    (h.front_len, h.file_len) = (HEADER_LEN as u64, HEADER_LEN as u64);
    (h.chunk_table_off, h.id_table_off, h.video_table_off) = (0, 0, 0);
    h.body_id = [3; 16];
    h.body_len = 4096;
    h.body_header_crc = 0xDEAD_BEEF;
    let b = encode_header(&h);
    assert_eq!(decode_header(&b).unwrap(), h);
    assert!(matches!(TableFile::open(b.to_vec()), Err(e) if e.contains("body")));
    let mut no_body = h.clone();
    no_body.body_len = 0;
    assert!(decode_header(&encode_header(&no_body)).is_err());
    let mut stray =
        decode_header(&build_table_file(&meta(Kind::Commit, 12), &[]).unwrap()).unwrap();
    stray.body_id = [1; 16];
    assert!(decode_header(&encode_header(&stray)).is_err());
}
