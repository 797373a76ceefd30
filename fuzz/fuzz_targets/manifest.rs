//! Dataset manifest bytes (docs/FORMAT.md §7): a table file (a commit, a snapshot, a body) ->
//! the reader every open goes through (`TableFile::open`, then each accessor, as the view and
//! the state call them), and the same bytes as `LATEST` (`decode_hint`) and as a pinned state
//! (`Pin::from_bytes`, what a pickled `GulpDirectory` carries).
//!
//! Invariants beyond "no panic": accessors that succeed agree with each other (the record at
//! a rank is the one its number finds, at that rank; the id at a position is found at that
//! position, in the chunk whose record holds it), and `LATEST` and pins that parse re-encode to
//! the same bytes. Mutations rarely get past the page CRCs; the seeds are real files, so the
//! accessors run over every page of them.
#![no_main]

use gulpio_rs::format::manifest::{decode_hint, encode_hint, TableFile};
use gulpio_rs::manifest::Pin;
use libfuzzer_sys::fuzz_target;

/// Entries visited per table: the seeds are small, and a header can claim billions.
const MAX_VISITED: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    if let Ok(hint) = decode_hint(data) {
        assert_eq!(&encode_hint(&hint)[..], data, "LATEST is not canonical");
    }
    if let Ok(pin) = Pin::from_bytes(data) {
        assert_eq!(pin.to_bytes(), data, "a pin is not canonical");
    }
    let Ok(file) = TableFile::open(data) else {
        return;
    };
    let _ = (file.header(), file.pending());
    for i in 0..file.chunk_count().min(MAX_VISITED) {
        let Ok(record) = file.chunk_at(i) else {
            continue;
        };
        if let Ok(found) = file.chunk_indexed(record.number) {
            let (rank, again) = found.expect("a chunk's number does not find it");
            assert_eq!((rank, &again), (i, &record), "rank and number disagree");
        }
    }
    let _ = file.chunks();
    for p in 0..file.video_count().min(MAX_VISITED) {
        let _ = file.row(p);
        if let (Ok(id), Ok((_, record))) = (file.id_at(p), file.chunk_of_indexed(p)) {
            assert!(record.first <= p && p < record.first + u64::from(record.video_count));
            if let Ok(found) = file.find(&id) {
                let (_, at) = found.expect("an id of the file is not found");
                assert_eq!(file.id_at(at).ok().as_deref(), Some(id.as_str()));
            }
        }
    }
});
