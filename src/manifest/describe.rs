//! A chunk's record and videos (docs/FORMAT.md §7.2) from its index and `.gmeta` bytes: what a
//! writer commits before its commit point, and what `gulpio index` records for a chunk.

use crate::error::{Error, Result};
use crate::format::bytes::u32_at;
use crate::format::index::Index;
use crate::format::manifest::{ChunkInput, ChunkRecord, Op, VideoInput};
use crate::format::paths::ChunkPaths;
use crate::format::Storage;

/// The record (op `op`) of chunk `number` whose index and `.gmeta` are these bytes. The index
/// must be the one written with this `.gmeta` (its header names the `.gmeta`'s length and
/// CRC): a record is only ever made from a consistent pair.
pub fn describe(number: u64, op: Op, index: &[u8], meta: &[u8]) -> Result<ChunkInput, String> {
    let parsed = Index::parse(Storage::Owned(index.to_vec()))?;
    let h = parsed.header();
    let gmeta_crc = crc32fast::hash(meta);
    if h.gmeta_len != meta.len() as u64 || h.gmeta_crc != gmeta_crc {
        return Err(format!(
            "the index describes a .gmeta of {} bytes (CRC {:#010x}), not this one of {} \
             (CRC {gmeta_crc:#010x})",
            h.gmeta_len,
            h.gmeta_crc,
            meta.len()
        ));
    }
    let index_version =
        u8::try_from(h.version).map_err(|_| format!("index version {}", h.version))?;
    Ok(ChunkInput {
        record: record_of(
            number,
            op,
            meta,
            gmeta_crc,
            h.gulp_len,
            Some((index_version, index)),
        ),
        videos: videos_of(&parsed, |i| parsed.stream_of(i).is_some()),
    })
}

/// The videos of `parsed` (the first frame's shape for each; zero where unknown), each
/// `segmented(i)` or not.
fn videos_of(parsed: &Index, segmented: impl Fn(usize) -> bool) -> Vec<VideoInput> {
    (0..parsed.video_count())
        .map(|i| {
            let v = parsed.video(i);
            let first = (v.frame_count > 0).then(|| parsed.frame(v.frame_start as usize));
            VideoInput {
                id: parsed.id(i).to_owned(),
                frame_count: v.frame_count,
                height: first.map_or(0, |f| f.height),
                width: first.map_or(0, |f| f.width),
                channels: first.map_or(0, |f| f.channels),
                segments: segmented(i),
            }
        })
        .collect()
}

/// The record of chunk `number` with this `.gmeta` (and its CRC), `.gulp` length and index
/// (its version and bytes; `None`: read through the `.gmeta`, version 0).
fn record_of(
    number: u64,
    op: Op,
    meta: &[u8],
    gmeta_crc: u32,
    gulp_len: u64,
    index: Option<(u8, &[u8])>,
) -> ChunkRecord {
    ChunkRecord {
        number,
        first: 0,
        video_count: 0,
        op,
        index_version: index.map_or(0, |(v, _)| v),
        gidx_len: index.map_or(0, |(_, b)| b.len() as u64),
        gidx_header_crc: index.map_or(0, |(_, b)| u32_at(b, 124)),
        gmeta_crc,
        gmeta_len: meta.len() as u64,
        gulp_len,
        // `first`, `video_count` and `frame_count` follow from `videos` when written.
        frame_count: 0,
    }
}

/// The record (op `op`) of chunk `number` that has no index, from its `.gmeta` bytes and its
/// `.gulp`'s length (a gulpio2 chunk on an object store, where `gulpio index` writes no
/// `.gidx`): `index_version` 0, the `.gmeta`'s length and CRC (what rule M3 compares), ids and
/// frame counts from the entries, shapes unknown (zero) as in the index a reader builds from
/// the same text.
pub fn describe_unindexed(
    number: u64,
    op: Op,
    meta: &[u8],
    gulp_len: u64,
) -> Result<ChunkInput, String> {
    // The reader's own parse: what it will read is what is recorded, and it refuses the same.
    let (parsed, segmented) =
        crate::chunk::reader::legacy_index_of(meta).map_err(|p| p.to_string())?;
    // The index built from the text knows no frame sizes: shapes are zero.
    Ok(ChunkInput {
        record: record_of(number, op, meta, crc32fast::hash(meta), gulp_len, None),
        // `segmented` lists the videos stored as segments, in order.
        videos: videos_of(&parsed, |i| {
            segmented.binary_search_by_key(&i, |(v, _)| *v).is_ok()
        }),
    })
}

/// The record of the chunk at `paths` as its files are now (its index must exist: `gulpio
/// index` writes one first).
pub fn describe_files(number: u64, op: Op, paths: &ChunkPaths) -> Result<ChunkInput> {
    let index = crate::io::local::read_whole(&paths.index)?;
    let meta = crate::io::local::read_whole(&paths.meta)?;
    describe(number, op, &index, &meta).map_err(|m| Error::format(&paths.index, m))
}

/// True when chunk `k`'s files are the ones `r` describes (rule M3's comparison, and "took
/// effect" when two records have the same `.gmeta` length): the index's length and header CRC,
/// or without an index the `.gmeta`'s length and CRC. Remotely a `HEAD` and a 4-byte range of
/// the index (or the whole `.gmeta` for a record without index).
pub(super) fn files_match_in(io: super::ManifestIo<'_>, k: u64, r: &ChunkRecord) -> bool {
    use crate::format::paths::FileKind;
    if r.index_version == 0 {
        return io
            .read(&FileKind::Meta.file_name(k))
            .ok()
            .flatten()
            .is_some_and(|m| m.len() as u64 == r.gmeta_len && crc32fast::hash(&m) == r.gmeta_crc);
    }
    let name = FileKind::Index.file_name(k);
    io.size(&name).ok().flatten() == Some(r.gidx_len)
        && io
            .read_range(&name, 124..128)
            .ok()
            .flatten()
            .is_some_and(|b| b == r.gidx_header_crc.to_le_bytes())
}
