//! `NativeDirectory`: a dataset directory, read side.

use std::sync::{Arc, OnceLock};

use pyo3::exceptions::{PyIndexError, PyKeyError};
use pyo3::prelude::*;

use super::chunk::Chunk;
use super::errors::Class;
use crate::directory::Directory;

#[pyclass(frozen, module = "gulpio_rs._native")]
pub struct NativeDirectory {
    inner: Arc<Directory>,
    /// One Python `Chunk` per chunk position, made on first use and handed out again.
    chunk_objs: Vec<OnceLock<Py<Chunk>>>,
}

impl NativeDirectory {
    fn chunk_obj(&self, py: Python<'_>, pos: usize) -> PyResult<Py<Chunk>> {
        let cell = self
            .chunk_objs
            .get(pos)
            .ok_or_else(|| PyIndexError::new_err(pos))?;
        if let Some(c) = cell.get() {
            return Ok(c.clone_ref(py));
        }
        // Opening may do I/O (and fails the same way every time for a damaged chunk).
        let reader = py.detach(|| self.inner.reader(pos))?;
        if let Some(why) = reader.index_problem() {
            // Found only now: the full index check runs before a chunk's first read.
            PyErr::warn(
                py,
                Class::BrokenChunkWarning.get(py)?,
                &std::ffi::CString::new(why.replace('\0', " "))?,
                2,
            )?;
        }
        let obj = Py::new(py, Chunk::new(reader))?;
        Ok(cell.get_or_init(|| obj).clone_ref(py))
    }
}

#[pymethods]
impl NativeDirectory {
    #[new]
    fn new(py: Python<'_>, path: &str) -> PyResult<Self> {
        let dir = py.detach(|| Directory::open(path))?;
        let chunk_objs = (0..dir.chunks().len()).map(|_| OnceLock::new()).collect();
        Ok(NativeDirectory {
            inner: Arc::new(dir),
            chunk_objs,
        })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn ids(&self) -> Vec<&str> {
        self.inner.ids().iter().collect()
    }

    fn lookup(&self, id: &str) -> Option<usize> {
        self.inner.lookup(id)
    }

    /// `(chunk position, video position in chunk)` of global video `g`.
    fn location(&self, g: usize) -> PyResult<(usize, usize)> {
        self.inner
            .location(g)
            .ok_or_else(|| PyIndexError::new_err(g))
    }

    /// `[(number, data_path, meta_path, index_path, first_video, video_count), ...]`
    fn chunk_table(&self) -> Vec<(u64, String, String, String, usize, usize)> {
        self.inner
            .chunks()
            .iter()
            .map(|c| {
                (
                    c.number,
                    c.paths.data.display().to_string(),
                    c.paths.meta.display().to_string(),
                    c.paths.index.display().to_string(),
                    c.first,
                    c.video_count,
                )
            })
            .collect()
    }

    /// The reader of chunk position `pos`, opened (and fully checked) on first use.
    fn chunk(&self, py: Python<'_>, pos: usize) -> PyResult<Py<Chunk>> {
        self.chunk_obj(py, pos)
    }

    /// `(chunk, video position)` of a video id; KeyError if unknown.
    fn resolve(&self, py: Python<'_>, id: &str) -> PyResult<(Py<Chunk>, usize)> {
        let (pos, video) = self
            .inner
            .lookup(id)
            .and_then(|g| self.inner.location(g))
            .ok_or_else(|| PyKeyError::new_err(id.to_owned()))?;
        Ok((self.chunk_obj(py, pos)?, video))
    }

    /// `[(path, message, chunk_skipped), ...]`: chunks that could not be (fully) used.
    fn problems(&self) -> Vec<(String, String, bool)> {
        self.inner
            .problems()
            .iter()
            .map(|p| {
                (
                    p.path.display().to_string(),
                    p.message.clone(),
                    p.chunk_skipped,
                )
            })
            .collect()
    }
}
