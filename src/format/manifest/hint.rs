//! `_gulpio/LATEST` (docs/FORMAT.md §7.4): 96 bytes naming the base a reader starts from. A
//! hint only: a missing, damaged or stale one costs a listing, never a wrong state.

use super::super::bytes::{u32_at, u64_at};

pub const HINT_MAGIC: [u8; 8] = *b"GULPHNT\0";
pub const HINT_LEN: usize = 96;
const HINT_CRC_AT: usize = 92;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// The base's version.
    pub version: u64,
    /// 1: a snapshot; 2: the genesis commit.
    pub kind: u8,
    /// The snapshot's `{id}`, or the genesis commit's body's (zero when the commit holds its
    /// tables).
    pub file_id: [u8; 16],
    pub front_len: u64,
    pub file_len: u64,
    pub dataset_id: [u8; 16],
}

pub fn encode_hint(h: &Hint) -> [u8; HINT_LEN] {
    let mut b = [0u8; HINT_LEN];
    b[0..8].copy_from_slice(&HINT_MAGIC);
    b[8..16].copy_from_slice(&h.version.to_le_bytes());
    b[16] = h.kind;
    b[24..40].copy_from_slice(&h.file_id);
    b[40..48].copy_from_slice(&h.front_len.to_le_bytes());
    b[48..56].copy_from_slice(&h.file_len.to_le_bytes());
    b[56..72].copy_from_slice(&h.dataset_id);
    let crc = crc32fast::hash(&b[..HINT_CRC_AT]);
    b[HINT_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    b
}

pub fn decode_hint(b: &[u8]) -> Result<Hint, String> {
    if b.len() != HINT_LEN {
        return Err(format!("LATEST is {} bytes, not {HINT_LEN}", b.len()));
    }
    if b[0..8] != HINT_MAGIC {
        return Err("LATEST has a bad magic".into());
    }
    let crc = crc32fast::hash(&b[..HINT_CRC_AT]);
    if crc != u32_at(b, HINT_CRC_AT) {
        return Err("LATEST's CRC does not match".into());
    }
    if !(1..=2).contains(&b[16]) || b[17..24].iter().chain(&b[72..92]).any(|&x| x != 0) {
        return Err("LATEST has an unknown kind or non-zero reserved bytes".into());
    }
    let id16 = |at: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[at..at + 16]);
        a
    };
    Ok(Hint {
        version: u64_at(b, 8),
        kind: b[16],
        file_id: id16(24),
        front_len: u64_at(b, 40),
        file_len: u64_at(b, 48),
        dataset_id: id16(56),
    })
}
