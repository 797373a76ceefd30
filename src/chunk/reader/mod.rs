//! Reading a chunk: the `.gulp` is memory-mapped and frames are located through the index,
//! either the binary `.gidx` (checksummed) or one built in memory from a legacy `.gmeta`.

//!
//! This file holds the reader and its plain accessors; each other job has a file: `open`
//! (which index to trust when a chunk is opened), `trust` (judging a `.gmeta` that differs
//! from its index), `legacy` (an in-memory index from a `.gmeta`), `lookup` (frames by video
//! and index, bounds and CRC checks), `fetch` (planning merged byte ranges and fetching them,
//! for one chunk or many) and `segments` (videos stored as AV1 segments).

mod fetch;
mod legacy;
mod lookup;
mod open;
mod segments;
mod trust;

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::format::index::Index;
use crate::format::paths::ChunkPaths;
use crate::io::DataSource;

pub use fetch::{read_many, FrameData, FramePlan};
pub use legacy::{legacy_index, legacy_index_of};
pub use open::ExpectedIndex;
pub use trust::{judge_meta, MetaVerdict};

/// Where a chunk's index came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// The checksummed `.gidx`: frame CRCs are verified on read.
    Binary,
    /// Built from the `.gmeta` (legacy gulpio data, or an index that could not be trusted).
    Legacy,
}

pub struct ChunkReader {
    paths: ChunkPaths,
    data: DataSource,
    index: Index,
    kind: IndexKind,
    /// Why an existing index was not used (the chunk then reads through its `.gmeta`).
    index_problem: Option<String>,
    /// Why the `.gmeta` was not believed although the chunk reads through its index (the
    /// `.gmeta` contradicts the checksummed index: damaged, or edited by hand).
    meta_problem: Option<String>,
    by_id: OnceLock<HashMap<String, usize>>,
    /// Read through the `.gmeta` only: the videos whose entry says they are stored as
    /// segments (docs/FORMAT.md §6.2), which cannot be read without the index, in video
    /// order, with the text of their entry's `segments` object.
    unindexed_segments: Vec<(usize, Vec<u8>)>,
}

impl std::fmt::Debug for ChunkReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkReader")
            .field("paths", &self.paths)
            .field("kind", &self.kind)
            .field("videos", &self.index.video_count())
            .finish()
    }
}

impl ChunkReader {
    pub fn paths(&self) -> &ChunkPaths {
        &self.paths
    }
    pub fn kind(&self) -> IndexKind {
        self.kind
    }
    /// Why an existing index was not used, if one exists and was not.
    pub fn index_problem(&self) -> Option<&str> {
        self.index_problem.as_deref()
    }
    /// Why the `.gmeta` was not believed, when the chunk reads through its index although
    /// the `.gmeta` does not match it.
    pub fn meta_problem(&self) -> Option<&str> {
        self.meta_problem.as_deref()
    }
    pub(crate) fn set_index_problem(&mut self, why: String) {
        self.index_problem = Some(why);
    }
    /// Adds to what is said about the chunk's index (a first read warns with it).
    pub(crate) fn add_index_problem(&mut self, why: String) {
        self.index_problem = Some(match self.index_problem.take() {
            Some(before) => format!("{before}; {why}"),
            None => why,
        });
    }
    pub fn index(&self) -> &Index {
        &self.index
    }
    /// Where the `.gulp`'s bytes come from.
    pub fn source(&self) -> &DataSource {
        &self.data
    }
    /// The mapped `.gulp`, when it is mapped (local files read with mmap).
    pub fn mapped(&self) -> Option<&[u8]> {
        self.data.mapped()
    }
    pub fn video_count(&self) -> usize {
        self.index.video_count()
    }
    pub fn id(&self, video: usize) -> &str {
        self.index.id(video)
    }
    /// The JSON text of the video's `meta_data` list.
    pub fn meta_data(&self, video: usize) -> &[u8] {
        self.index.meta(video)
    }
    pub fn frame_count(&self, video: usize) -> usize {
        self.index.video(video).frame_count as usize
    }

    /// Where published data ends: the index's recorded length, or for legacy chunks the end of
    /// the last record.
    pub fn published_len(&self) -> u64 {
        match self.kind {
            IndexKind::Binary => self.index.header().gulp_len,
            IndexKind::Legacy => (0..self.index.frame_count())
                .map(|j| self.index.frame(j).record_end())
                .max()
                .unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests;
