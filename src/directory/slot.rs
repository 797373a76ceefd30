//! One chunk of an open directory: where it is, which videos it holds, and its reader, opened
//! (and fully checked) the first time it is read from.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::chunk::probe::KnownSizes;
use crate::chunk::reader::ChunkReader;
use crate::error::{Error, Result};
use crate::format::index::HEADER_LEN;
use crate::format::manifest::ChunkRecord;
use crate::format::paths::ChunkPaths;

/// What the directory knew of a chunk when it registered its videos, which its first read
/// checks the files against.
#[derive(Debug, Clone)]
pub enum HowOpened {
    /// The header of the index probed at open (listing).
    Probed([u8; HEADER_LEN]),
    /// The manifest's record (rule M3, docs/FORMAT.md §7.7).
    Recorded(ChunkRecord),
    /// Opened whole at open: a legacy chunk, or one whose `.gmeta` changed size.
    AtOpen,
}

pub struct ChunkSlot {
    pub number: u64,
    pub paths: ChunkPaths,
    /// Global position of the chunk's first video.
    pub first: usize,
    pub video_count: usize,
    /// File sizes the listing (or the manifest's record) gave, saving a request per file.
    pub sizes: KnownSizes,
    pub how: HowOpened,
    pub(super) reader: Mutex<Option<Result<Arc<ChunkReader>>>>,
}

impl ChunkSlot {
    /// A slot whose reader opens on first use.
    pub(super) fn unopened() -> Mutex<Option<Result<Arc<ChunkReader>>>> {
        Mutex::new(None)
    }

    fn held(&self) -> MutexGuard<'_, Option<Result<Arc<ChunkReader>>>> {
        self.reader
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True once the reader was opened (or failed to open): `reader()` then does no I/O.
    pub fn is_loaded(&self) -> bool {
        self.held().is_some()
    }

    /// The chunk's reader, opened with `open` on first use (then true). A failure is
    /// remembered and reported on every later use, so a damaged chunk fails the same way each
    /// time; a remote fault that outlasted the retries is not remembered (the next use tries
    /// again).
    pub(super) fn reader_with(
        &self,
        open: impl FnOnce(&ChunkSlot) -> Result<ChunkReader>,
    ) -> (Result<Arc<ChunkReader>>, bool) {
        if let Some(done) = self.held().as_ref() {
            return (done.clone(), false);
        }
        // Opened without the lock: it may wait on an object store.
        let opened = open(self).map(Arc::new);
        if matches!(opened, Err(Error::Remote { .. })) {
            return (opened, false);
        }
        // Another thread may have opened it meanwhile: every caller gets the same reader.
        let mut held = self.held();
        match held.as_ref() {
            Some(done) => (done.clone(), false),
            None => {
                *held = Some(opened.clone());
                (opened, true)
            }
        }
    }

    /// Drops the slot's reader (it opens again, checked again, on next use) unless it was
    /// opened with the directory, which cannot open it again.
    pub(super) fn forget(&self) {
        if !matches!(self.how, HowOpened::AtOpen) {
            *self.held() = None;
        }
    }
}
