//! The dataset manifest's table files (docs/FORMAT.md §7): snapshots, commits and bodies share
//! one layout, a checksummed 256-byte header, a front (directories and page CRCs, read whole)
//! and three paged tables (chunks, sorted ids, video rows). This module is the layout's only
//! implementation: [`build_table_file`] writes one, [`TableFile`] reads one through any
//! [`Source`] of byte ranges (a mapped file, a range-fetching cache) a page at a time, checking
//! each page's CRC before believing it. `hint` is the `LATEST` file. What the files mean
//! together (commits, the state at a version, rule M3) belongs to the dataset layer, not here.
//!
//! Each part has a file of its own: `header` (the fixed header, limits, section layout), `front`
//! (the directories a reader holds), `build` (the writer), `read` (pages and lookups).

mod build;
mod front;
mod header;
mod hint;
mod read;

pub use build::{build_table_file, ChunkInput, TableMeta, VideoInput};
pub use header::{
    decode_header, encode_header, header_crc, Header, Kind, CHUNK_RECORD_LEN, HEADER_LEN,
    MAX_CHUNK_VIDEOS, NONE, PAGE_SHIFT, VIDEO_ROW_LEN,
};
pub use hint::{decode_hint, encode_hint, Hint, HINT_LEN};
pub use read::{Source, TableFile};

/// What a chunk record says happens to its chunk (`op`, docs/FORMAT.md §7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Snapshots and full bodies: the chunk as it is.
    State = 0,
    Add = 1,
    Replace = 2,
    Remove = 3,
    Abort = 4,
}

impl Op {
    fn from_u8(v: u8) -> Option<Op> {
        Some(match v {
            0 => Op::State,
            1 => Op::Add,
            2 => Op::Replace,
            3 => Op::Remove,
            4 => Op::Abort,
            _ => return None,
        })
    }
    /// Remove and abort records describe no files and no videos.
    pub fn has_files(self) -> bool {
        !matches!(self, Op::Remove | Op::Abort)
    }
}

/// One record of the chunk table (64 bytes on disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRecord {
    pub number: u64,
    /// Position of its first video in the file's video table.
    pub first: u64,
    pub video_count: u32,
    pub op: Op,
    /// 1 to 3; 0: no index, the chunk is read through its `.gmeta`.
    pub index_version: u8,
    pub gidx_len: u64,
    pub gidx_header_crc: u32,
    pub gmeta_crc: u32,
    pub gmeta_len: u64,
    pub gulp_len: u64,
    pub frame_count: u64,
}

impl ChunkRecord {
    /// A record that describes no files (remove and abort records, §7.2: every field after
    /// `op` zero), at position `first`.
    pub fn without_files(number: u64, op: Op, first: u64) -> ChunkRecord {
        ChunkRecord {
            number,
            first,
            video_count: 0,
            op,
            index_version: 0,
            gidx_len: 0,
            gidx_header_crc: 0,
            gmeta_crc: 0,
            gmeta_len: 0,
            gulp_len: 0,
            frame_count: 0,
        }
    }
}

impl ChunkInput {
    /// An operation on chunk `number` that describes no files: a remove or an abort.
    pub fn without_files(number: u64, op: Op) -> ChunkInput {
        ChunkInput {
            record: ChunkRecord::without_files(number, op, 0),
            videos: Vec::new(),
        }
    }
}

/// One row of the video table (16 bytes on disk): what `video_shapes()` reports, and the
/// slot of the video's id in the sorted id table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VideoRow {
    pub frame_count: u32,
    pub height: u16,
    pub width: u16,
    pub channels: u8,
    /// Stored as segments (docs/FORMAT.md §6).
    pub segments: bool,
    pub slot: u32,
}

#[cfg(test)]
mod tests;
