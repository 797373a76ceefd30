//! `.gmeta` text -> `gmeta::parse` and `legacy_index` (how a gulpio/gulpio2 chunk without a
//! `.gidx` is opened), plus the JSON scanner on its own.
//!
//! Invariants beyond "no panic": whatever parses is written back by `write_entry` (the writer
//! that must match Python's `json.dump`) into text that parses to the same entries, and
//! `legacy_index` describes exactly the parsed entries when it accepts them.
#![no_main]

use gulpio_rs::chunk::reader::legacy_index;
use gulpio_rs::format::gmeta;
use gulpio_rs::format::json::{write_str, Scanner};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut s = Scanner::new(data);
    if s.skip_value(0).is_ok() {
        assert!(s.pos <= data.len());
    }

    let parsed = gmeta::parse(data);
    let legacy = legacy_index(data);
    let entries = match parsed {
        Ok(entries) => entries,
        Err(_) => {
            assert!(
                legacy.is_err(),
                "legacy_index accepted text gmeta::parse refuses"
            );
            return;
        }
    };

    let mut out = Vec::new();
    gmeta::begin(&mut out);
    for (i, e) in entries.iter().enumerate() {
        gmeta::write_entry(
            &mut out,
            i == 0,
            &e.id,
            e.frame_info.iter().copied(),
            &e.meta_data,
            e.segments.as_deref(),
        );
        let mut quoted = Vec::new();
        write_str(&e.id, &mut quoted);
        assert_eq!(Scanner::new(&quoted).string().as_deref(), Ok(e.id.as_str()));
    }
    gmeta::finish(&mut out);
    let again = gmeta::parse(&out).expect("what we write parses");
    assert_eq!(again, entries, "write/parse round trip changed the entries");

    if let Ok(idx) = legacy {
        assert_eq!(idx.video_count(), entries.len());
        let mut j = 0;
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(idx.id(i), e.id);
            assert_eq!(idx.meta(i), e.meta_data.as_slice());
            for &info in &e.frame_info {
                assert_eq!(idx.frame(j).frame_info(), info);
                j += 1;
            }
        }
        assert_eq!(j, idx.frame_count());
    }
});
