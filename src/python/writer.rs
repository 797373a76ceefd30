//! `NativeWriter` (one chunk, write side) and `write_index`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::chunk::reader::ChunkReader;
use crate::chunk::writer::{self, ChunkWriter, StreamSpec, WriteMode};
use crate::error::Error;
use crate::format::paths::ChunkPaths;
use crate::video::Codec;

/// Writes one chunk; see `chunk::writer` for the publication protocol.
#[pyclass(module = "gulpio_rs._native")]
pub struct NativeWriter {
    inner: Option<ChunkWriter>,
    /// `(data, meta)` where the chunk is (or will be) published; kept after `close`.
    paths: ChunkPaths,
}

impl NativeWriter {
    fn writer(&mut self) -> PyResult<&mut ChunkWriter> {
        self.inner
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the chunk writer is closed"))
    }
}

fn path_str(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

#[pymethods]
impl NativeWriter {
    /// Starts an empty chunk, or adds to the chunk with `append` (gulpio's `'wb'`/`'ab'`
    /// modes are parsed in Python: `GulpChunk.open`). With `new`, the chunk is published
    /// under the first chunk number of its folder, from this one on, that is free then
    /// (`GulpDirectory.new_chunks`).
    #[new]
    #[pyo3(signature = (data_path, meta_path, append=false, new=false))]
    fn new(
        py: Python<'_>,
        data_path: &str,
        meta_path: &str,
        append: bool,
        new: bool,
    ) -> PyResult<Self> {
        let mode = match (new, append) {
            (true, _) => WriteMode::Next,
            (false, true) => WriteMode::Append,
            (false, false) => WriteMode::Create,
        };
        let paths = ChunkPaths::new(data_path, meta_path);
        let w = py.detach(|| ChunkWriter::open(&paths, mode))?;
        Ok(NativeWriter {
            inner: Some(w),
            paths,
        })
    }

    /// `(data path, meta path)` of the chunk: where it was published (a new chunk's number
    /// is final after its first publication), also after `close`.
    #[getter]
    fn paths(&self) -> (String, String) {
        let p = self.inner.as_ref().map_or(&self.paths, |w| w.paths());
        (path_str(&p.data), path_str(&p.meta))
    }

    /// Appends a video; `frames` are JPEG files as bytes-like objects.
    fn append(
        &mut self,
        py: Python<'_>,
        id: &str,
        meta_json: &str,
        frames: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let buffers = frames
            .iter()
            .map(|f| pyo3::buffer::PyBuffer::<u8>::get(f))
            .collect::<PyResult<Vec<_>>>()?;
        let owned: Vec<Vec<u8>>;
        let slices: Vec<&[u8]> = if buffers.iter().all(|b| b.is_c_contiguous()) {
            // SAFETY: the buffers are C-contiguous u8 and stay alive (held in `buffers`) while
            // the slices are used. They are only read without the GIL when they are `bytes`,
            // which nothing can change (below).
            buffers
                .iter()
                .map(|b| unsafe {
                    std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes())
                })
                .collect()
        } else {
            owned = buffers
                .iter()
                .map(|b| b.to_vec(py))
                .collect::<PyResult<Vec<_>>>()?;
            owned.iter().map(|v| v.as_slice()).collect()
        };
        let immutable = frames.iter().all(|f| f.is_exact_instance_of::<PyBytes>());
        let w = self.writer()?;
        if immutable {
            // `bytes` cannot change while the GIL is released, so the CRC and the written bytes
            // agree; the write and CRC then overlap the adapter's Python work.
            Ok(py.detach(|| w.append(id, meta_json.as_bytes(), &slices))?)
        } else {
            Ok(w.append(id, meta_json.as_bytes(), &slices)?)
        }
    }

    /// Appends a video stored as segments (docs/FORMAT.md §6): `segments` are
    /// `(stream bytes, frame count)` pairs in frame order, coded with `codec` ("av1"),
    /// colour `matrix` (1 = BT.709, 6 = BT.601, as AV1 numbers them) and range.
    #[pyo3(signature = (id, meta_json, segments, *, width, height, gop, codec="av1", matrix=6, full_range=false))]
    #[allow(clippy::too_many_arguments)]
    fn append_segments(
        &mut self,
        py: Python<'_>,
        id: &str,
        meta_json: &str,
        segments: Vec<(Vec<u8>, usize)>,
        width: u16,
        height: u16,
        gop: u32,
        codec: &str,
        matrix: u8,
        full_range: bool,
    ) -> PyResult<()> {
        let codec = Codec::from_name(codec)
            .ok_or_else(|| PyValueError::new_err(format!("unknown codec {codec:?} (\"av1\")")))?;
        let spec = StreamSpec {
            codec,
            matrix,
            full_range,
            width,
            height,
            gop,
        };
        let parts: Vec<(&[u8], usize)> = segments.iter().map(|(b, n)| (b.as_slice(), *n)).collect();
        let w = self.writer()?;
        Ok(py.detach(|| w.append_segments(id, meta_json.as_bytes(), &spec, &parts))?)
    }

    /// Publishes everything appended so far (durable, atomic).
    fn publish(&mut self, py: Python<'_>) -> PyResult<()> {
        let w = self.writer()?;
        Ok(py.detach(|| w.publish())?)
    }

    /// Publishes and closes.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.inner.take() {
            Some(w) => {
                self.paths = py.detach(|| w.close())?;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Discards everything not yet published and closes.
    fn abort(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.inner.take() {
            Some(w) => Ok(py.detach(|| w.abort())?),
            None => Ok(()),
        }
    }

    /// The `.gmeta` text for the current content.
    fn meta_text(&mut self) -> PyResult<String> {
        let w = self.writer()?;
        Ok(String::from_utf8_lossy(&w.meta_text()).into_owned())
    }

    fn __len__(&mut self) -> PyResult<usize> {
        Ok(self.writer()?.video_count())
    }
}

/// Writes the checksummed index for a chunk that lacks one; returns the number of videos.
#[pyfunction]
pub fn write_index(py: Python<'_>, data_path: &str, meta_path: &str) -> PyResult<usize> {
    let paths = ChunkPaths::new(data_path, meta_path);
    Ok(py.detach(|| writer::write_index(&paths))?)
}

/// The videos stored as segments whose index entries cannot be rebuilt from the chunk's
/// `.gulp` and `.gmeta` (each segment is decoded whole): `[(video_id, frame, message), ...]`,
/// `frame` the first frame of the segment that failed (None when the failure is the video's).
#[pyfunction]
pub fn rebuild_failures(
    py: Python<'_>,
    data_path: &str,
    meta_path: &str,
) -> PyResult<Vec<(String, Option<usize>, String)>> {
    let paths = ChunkPaths::new(data_path, meta_path);
    let failures = py.detach(|| {
        let reader = ChunkReader::open_legacy(&paths)?;
        crate::chunk::rebuild::unrebuildable(&reader)
    })?;
    Ok(failures
        .into_iter()
        .map(|e| {
            let at = e.at();
            let msg = match e {
                Error::Format { msg, .. } => msg,
                other => other.to_string(),
            };
            (
                at.as_ref().map_or_else(String::new, |a| a.id.clone()),
                at.and_then(|a| a.frame),
                msg,
            )
        })
        .collect())
}

/// Rewrites a damaged `.gmeta` from the chunk's checksummed index; False when it was intact.
#[pyfunction]
pub fn restore_meta(py: Python<'_>, data_path: &str, meta_path: &str) -> PyResult<bool> {
    let paths = ChunkPaths::new(data_path, meta_path);
    Ok(py.detach(|| writer::restore_meta(&paths))?)
}

/// Cuts the unpublished tail of a chunk's data file (never through a symlink); returns the
/// number of bytes cut.
#[pyfunction]
pub fn cut_tail(py: Python<'_>, data_path: &str, meta_path: &str) -> PyResult<u64> {
    let paths = ChunkPaths::new(data_path, meta_path);
    Ok(py.detach(|| writer::cut_tail(&paths))?)
}

/// A file descriptor of `path` opened for reading: a regular file within the size limit of
/// its kind (`FormatError` otherwise, before anything is read; the open cannot block on a
/// FIFO). The caller owns the descriptor.
#[pyfunction]
pub fn open_for_reading(py: Python<'_>, path: &str) -> PyResult<i32> {
    use std::os::fd::IntoRawFd;
    let path = std::path::Path::new(path);
    let (file, _) = py.detach(|| crate::io::local::open_read(path))?;
    Ok(file.into_raw_fd())
}

/// A file descriptor of `path` opened for writing in place (`truncate`: emptied first), or of
/// a new file when there is none: never through a symlink, only a regular file without other
/// hard links (`UnsafeFileError` otherwise). For gulpio2's serializer-based writing.
#[pyfunction]
#[pyo3(signature = (path, truncate=false))]
pub fn open_for_writing(py: Python<'_>, path: &str, truncate: bool) -> PyResult<i32> {
    use std::os::fd::IntoRawFd;
    let path = std::path::Path::new(path);
    let file = py.detach(|| -> crate::Result<std::fs::File> {
        let file = match crate::io::local::create_new(path) {
            Ok(f) => f,
            Err(crate::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                crate::io::local::open_in_place(path)?
            }
            Err(e) => return Err(e),
        };
        if truncate {
            use crate::error::IoContext;
            file.set_len(0).at(path)?;
        }
        Ok(file)
    })?;
    Ok(file.into_raw_fd())
}
