//! The `Chunk` Python class itself (an open chunk, read side) and the checks of a video
//! position every entry point makes. Its Python methods are in `chunk`, which calls `decode`;
//! kept apart so that `decode` can take a `Chunk` without the two files needing each other.

use std::sync::{Arc, OnceLock};

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;

use crate::chunk::reader::ChunkReader;

/// An open chunk (read side).
#[pyclass(frozen, module = "gulpio_rs._native")]
pub struct Chunk {
    pub(super) inner: Arc<ChunkReader>,
    /// A memoryview of the whole mapped `.gulp`; frame views are slices of it (one object per
    /// frame instead of two).
    pub(super) base_view: OnceLock<Py<PyAny>>,
}

impl Chunk {
    pub(super) fn new(inner: Arc<ChunkReader>) -> Self {
        Chunk {
            inner,
            base_view: OnceLock::new(),
        }
    }

    pub(super) fn reader(&self) -> &Arc<ChunkReader> {
        &self.inner
    }

    /// IndexError unless `video` is a position in this chunk.
    pub(super) fn check(&self, video: usize) -> PyResult<()> {
        if video < self.inner.video_count() {
            Ok(())
        } else {
            Err(PyIndexError::new_err(format!(
                "video position {video} out of range ({} videos)",
                self.inner.video_count()
            )))
        }
    }

    /// `None` selects every frame; indices may be negative (checked when used).
    pub(super) fn selection(&self, video: usize, frames: Option<Vec<i64>>) -> Vec<i64> {
        frames.unwrap_or_else(|| (0..self.inner.frame_count(video) as i64).collect())
    }
}
