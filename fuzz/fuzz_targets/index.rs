//! `.gidx` bytes -> the two read paths of an index: the directory-open probe (header, then
//! the front sections read with the real file length) and the chunk-read path (`Index::parse`
//! then `verify_full`), then every accessor. Each input is tried as it is and with its CRCs
//! recomputed (`fix_index_crcs`), so mutations also reach the checks behind the checksums.
//!
//! Invariants beyond "no panic": the two paths agree on the header and the ids, and an index
//! that passes every check is canonical: re-encoding what it describes gives the same bytes.
#![no_main]

use gulpio_rs::format::index::{
    check_front, decode_header, front_ids, front_len, Index, IndexBuilder, FRAME_ENTRY_LEN,
};
use gulpio_rs::format::Storage;
use gulpio_rs_fuzz::fix_index_crcs;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut fixed = data.to_vec();
    fix_index_crcs(&mut fixed);
    if fixed != data {
        check(&fixed);
    }
});

fn check(data: &[u8]) {
    // What `probe_index` does when a directory is opened.
    let probed = decode_header(data).ok().and_then(|h| {
        let need = front_len(&h).ok()?;
        let front = data.get(..need)?;
        let h = check_front(front, data.len() as u64).ok()?;
        let ids: Vec<String> = front_ids(front, &h).ok()?.map(str::to_owned).collect();
        assert_eq!(ids.len() as u64, h.video_count);
        Some((h, ids))
    });

    let parsed = Index::parse(Storage::Owned(data.to_vec()));
    let idx = match (parsed, &probed) {
        (Ok(idx), Some((h, ids))) => {
            assert_eq!(idx.header(), h, "probe and parse disagree on the header");
            let parsed_ids: Vec<&str> = (0..idx.video_count()).map(|i| idx.id(i)).collect();
            assert_eq!(&parsed_ids, ids, "probe and parse disagree on the ids");
            idx
        }
        (Err(_), None) => return,
        (Ok(_), None) => panic!("Index::parse accepted an index the open-time probe refuses"),
        (Err(e), Some(_)) => panic!("the probe accepted an index Index::parse refuses: {e}"),
    };

    // Accessors must be safe on a front-checked index even when the frame table is damaged:
    // readers call them before `verify_full` only through validated positions, but a
    // corrupted table must not turn into an out-of-bounds read.
    let full = idx.verify_full();
    for i in 0..idx.video_count() {
        let v = idx.video(i);
        let _ = (idx.id(i), idx.meta(i));
        for j in v.frame_start..v.frame_start + v.frame_count as u64 {
            let _ = idx.frame(j as usize);
        }
    }
    if full.is_err() {
        return;
    }

    let h = *idx.header();
    let mut builder = IndexBuilder::new();
    for i in 0..idx.video_count() {
        let v = idx.video(i);
        let frames: Vec<_> = (0..v.frame_count as usize)
            .map(|k| {
                let f = idx.frame(v.frame_start as usize + k);
                assert!(f.record_end() <= h.gulp_len && f.pad <= 3);
                f
            })
            .collect();
        let restarts: Vec<Vec<u32>> = (0..v.frame_count as usize)
            .map(|k| idx.restarts(v.frame_start as usize + k).unwrap_or_default())
            .collect();
        let restarts: Vec<&[u32]> = restarts.iter().map(Vec::as_slice).collect();
        builder
            .push_video_with_restarts(idx.id(i), idx.meta(i), &frames, &restarts)
            .expect("a verified index re-encodes");
    }
    let again = builder.encode(h.gulp_len, h.gulp_crc, h.gmeta_len, h.gmeta_crc);
    assert_eq!(again.len(), data.len());
    assert!(
        again == data,
        "a verified index is not canonical ({} frame entries of {FRAME_ENTRY_LEN} bytes)",
        idx.frame_count()
    );
}
