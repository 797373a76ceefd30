//! Helpers shared by the fuzz targets: the chunk target's input framing and the CRC fix-up that
//! lets mutated indexes get past their checksums, so the fuzzer also reaches the structural
//! checks behind them (a CRC32 over a section is a gate coverage guidance cannot open alone).

use gulpio_rs::format::index::{FRAME_ENTRY_LEN, HEADER_LEN, VIDEO_ENTRY_LEN};

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Rewrites the section CRCs and then the header CRC of `.gidx` bytes so that they match the
/// content, following the layout the header declares (docs/FORMAT.md §3). Leaves the bytes
/// alone when the declared sections do not fit: the length check must reject those anyway.
pub fn fix_index_crcs(b: &mut [u8]) {
    if b.len() < HEADER_LEN {
        return;
    }
    let sections = (|| {
        let videos = u64_at(b, 16).checked_mul(VIDEO_ENTRY_LEN as u64)?;
        let frames = u64_at(b, 24).checked_mul(FRAME_ENTRY_LEN as u64)?;
        let ids_len = u64_at(b, 32);
        let ids_at = (HEADER_LEN as u64).checked_add(videos)?;
        let frames_at = ids_at
            .checked_add(ids_len)?
            .checked_add((8 - ids_len % 8) % 8)?;
        let meta_at = frames_at.checked_add(frames)?;
        let end = meta_at.checked_add(u64_at(b, 40))?;
        (end <= b.len() as u64).then_some((
            ids_at as usize,
            (ids_at + ids_len) as usize,
            frames_at as usize,
            meta_at as usize,
            end as usize,
        ))
    })();
    if let Some((ids_at, ids_end, frames_at, meta_at, end)) = sections {
        let crc = |r: std::ops::Range<usize>| crc32fast::hash(&b[r]);
        let (v, i, f, m) = (
            crc(HEADER_LEN..ids_at),
            crc(ids_at..ids_end),
            crc(frames_at..meta_at),
            crc(meta_at..end),
        );
        put_u32(b, 72, v);
        put_u32(b, 76, i);
        put_u32(b, 80, f);
        put_u32(b, 84, m);
        // Version 2: the restart table, from the padding after the meta blob to the end.
        let table_at = end + (8 - end % 8) % 8;
        if u32::from_le_bytes(b[8..12].try_into().unwrap()) >= 2 && table_at <= b.len() {
            let t = crc32fast::hash(&b[table_at..]);
            put_u32(b, 96, t);
        }
    }
    let h = crc32fast::hash(&b[..124]);
    put_u32(b, 124, h);
}

/// The three files of a chunk, as carried in one fuzz input.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ChunkFiles {
    pub meta: Vec<u8>,
    /// `None`: the chunk has no `.gidx` (a gulpio/gulpio2 "legacy" chunk).
    pub index: Option<Vec<u8>>,
    pub data: Vec<u8>,
}

/// Input framing of the `chunk` target: a flags byte (bit 0: an index is present; bit 1:
/// recompute the index's CRCs, see [`fix_index_crcs`]), the `.gmeta` length and the `.gidx`
/// length as u32 LE, then the `.gmeta`, the `.gidx` and the `.gulp` bytes. Lengths larger
/// than what is left are clamped, so every input decodes to some chunk.
pub fn split_chunk_input(input: &[u8]) -> ChunkFiles {
    let flags = input.first().copied().unwrap_or(0);
    let len_at = |at: usize| {
        input
            .get(at..at + 4)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()) as usize)
    };
    let (meta_len, index_len) = (len_at(1), len_at(5));
    let rest = input.get(9..).unwrap_or(&[]);
    let (meta, rest) = rest.split_at(meta_len.min(rest.len()));
    let (index, data) = rest.split_at(index_len.min(rest.len()));
    let index = (flags & 1 != 0).then(|| {
        let mut index = index.to_vec();
        if flags & 2 != 0 {
            fix_index_crcs(&mut index);
        }
        index
    });
    ChunkFiles {
        meta: meta.to_vec(),
        index,
        data: data.to_vec(),
    }
}

/// The inverse of [`split_chunk_input`] (without the CRC fix-up flag), for making seeds.
pub fn join_chunk_input(files: &ChunkFiles) -> Vec<u8> {
    let index = files.index.as_deref().unwrap_or(&[]);
    let mut out = vec![files.index.is_some() as u8];
    out.extend_from_slice(&(files.meta.len() as u32).to_le_bytes());
    out.extend_from_slice(&(index.len() as u32).to_le_bytes());
    out.extend_from_slice(&files.meta);
    out.extend_from_slice(index);
    out.extend_from_slice(&files.data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_input_round_trips() {
        let files = ChunkFiles {
            meta: b"{}".to_vec(),
            index: Some(vec![1, 2, 3]),
            data: vec![9; 10],
        };
        assert_eq!(split_chunk_input(&join_chunk_input(&files)), files);
        let legacy = ChunkFiles {
            index: None,
            ..files
        };
        assert_eq!(split_chunk_input(&join_chunk_input(&legacy)), legacy);
        assert_eq!(split_chunk_input(&[]), ChunkFiles::default());
    }
}

/// libfuzzer-sys aborts on every panic, even one the code under test catches. Our zune-jpeg
/// backend catches zune-jpeg's own panics on damaged data (`jpeg::zune`), so those may unwind;
/// any other panic still aborts and is reported as a crash.
pub fn let_zune_panics_unwind() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let libfuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_zune = info
                .location()
                .is_some_and(|l| l.file().contains("zune-jpeg") || l.file().contains("zune-core"));
            if !in_zune {
                libfuzzer_hook(info);
            }
        }));
    });
}
