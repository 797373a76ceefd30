//! `Chunk`'s Python methods (an open chunk, read side; the type is in `chunk_handle`) and
//! `FrameView` (zero-copy JPEG bytes of one frame).

use std::ffi::c_int;
use std::os::raw::c_void;
use std::sync::Arc;

use numpy::PyArray4;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyMemoryView, PySlice, PyString};

// The type itself is in `chunk_handle`, which `decode` uses without needing this file.
pub use super::chunk_handle::Chunk;
use super::decode::{self, Layout};
use super::read_spec::{frames_of, ReadSpec};
use crate::chunk::reader::{ChunkReader, IndexKind};
use crate::chunk::rebuild::stored_segments;
use crate::format::paths::ChunkPaths;

/// Zero-copy, read-only view of one frame's JPEG bytes inside the mapped `.gulp`. Supports
/// the buffer protocol (`memoryview(v)`, `np.frombuffer(v, np.uint8)`, `bytes(v)`); the
/// mapping stays alive as long as any view or buffer derived from it does.
#[pyclass(frozen, module = "gulpio_rs._native")]
pub struct FrameView {
    chunk: Arc<ChunkReader>,
    start: usize,
    len: usize,
}

#[pymethods]
impl FrameView {
    fn __len__(&self) -> usize {
        self.len
    }

    fn __repr__(&self) -> String {
        format!("<FrameView of {} bytes>", self.len)
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("view is null"));
        }
        if (flags & pyo3::ffi::PyBUF_WRITABLE) == pyo3::ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("frame bytes are read-only"));
        }
        let this = slf.get();
        let Some(whole) = this.chunk.mapped() else {
            return Err(PyBufferError::new_err("the chunk is not memory-mapped"));
        };
        let data = &whole[this.start..this.start + this.len];
        // SAFETY: `view` is non-null and owned by the caller for the duration of the call; the
        // bytes live in an mmap owned (through the Arc) by `slf`, whose reference is stored in
        // `view.obj` and released by Python when the buffer is released.
        unsafe {
            (*view).obj = slf.clone().into_any().into_ptr();
            (*view).buf = data.as_ptr() as *mut c_void;
            (*view).len = data.len() as isize;
            (*view).readonly = 1;
            (*view).itemsize = 1;
            (*view).format = if (flags & pyo3::ffi::PyBUF_FORMAT) == pyo3::ffi::PyBUF_FORMAT {
                c"B".as_ptr() as *mut _
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if (flags & pyo3::ffi::PyBUF_ND) == pyo3::ffi::PyBUF_ND {
                &mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if (flags & pyo3::ffi::PyBUF_STRIDES) == pyo3::ffi::PyBUF_STRIDES {
                &mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}
}

impl Chunk {
    fn base_view<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyAny>> {
        if self.base_view.get().is_none() {
            let owner = Bound::new(
                py,
                FrameView {
                    chunk: self.inner.clone(),
                    start: 0,
                    len: self.inner.mapped().map_or(0, <[u8]>::len),
                },
            )?;
            let view = PyMemoryView::from(owner.as_any())?.into_any().unbind();
            let _ = self.base_view.set(view);
        }
        match self.base_view.get() {
            Some(v) => Ok(v.bind(py)),
            None => Err(PyValueError::new_err("chunk view unavailable")),
        }
    }
}

#[pymethods]
impl Chunk {
    /// Opens a chunk; returns `(chunk, warning)` where warning says why an index was ignored.
    #[staticmethod]
    fn open(py: Python<'_>, data_path: &str, meta_path: &str) -> PyResult<(Chunk, Option<String>)> {
        let paths = ChunkPaths::new(data_path, meta_path);
        let (reader, warning) = py.detach(|| ChunkReader::open(&paths))?;
        let warning = warning
            .map(|w| w.to_string())
            .or_else(|| reader.meta_problem().map(str::to_owned));
        Ok((Chunk::new(Arc::new(reader)), warning))
    }

    #[getter]
    fn indexed(&self) -> bool {
        self.inner.kind() == IndexKind::Binary
    }

    /// Why the chunk's index file was not used, if it has one that was not.
    #[getter]
    fn index_problem(&self) -> Option<&str> {
        self.inner.index_problem()
    }

    /// Why the chunk's `.gmeta` was not believed (it contradicts the checksummed index, which
    /// the chunk is read through), if it was not.
    #[getter]
    fn meta_problem(&self) -> Option<&str> {
        self.inner.meta_problem()
    }

    #[getter]
    fn data_path(&self) -> String {
        self.inner.paths().data.display().to_string()
    }

    #[getter]
    fn published_len(&self) -> u64 {
        self.inner.published_len()
    }

    fn __len__(&self) -> usize {
        self.inner.video_count()
    }

    fn ids(&self) -> Vec<&str> {
        (0..self.inner.video_count())
            .map(|i| self.inner.id(i))
            .collect()
    }

    fn lookup(&self, id: &Bound<'_, PyString>) -> Option<usize> {
        self.inner.lookup(&super::ids::stored(id)?)
    }

    fn id(&self, video: usize) -> PyResult<&str> {
        self.check(video)?;
        Ok(self.inner.id(video))
    }

    pub(super) fn frame_count(&self, video: usize) -> PyResult<usize> {
        self.check(video)?;
        Ok(self.inner.frame_count(video))
    }

    /// The JSON text of the video's `meta_data` list.
    fn meta_data(&self, video: usize) -> PyResult<String> {
        self.check(video)?;
        Ok(String::from_utf8_lossy(self.inner.meta_data(video)).into_owned())
    }

    /// gulpio's `frame_info`: `[(loc, pad, length), ...]`.
    fn frame_info(&self, video: usize) -> PyResult<Vec<(u64, u64, u64)>> {
        self.check(video)?;
        Ok(self.inner.frames(video).map(|f| f.frame_info()).collect())
    }

    /// How video `video` is stored when it is stored as segments (docs/FORMAT.md §6):
    /// `(codec, gop, [(first frame, frame count, stream bytes), ...])`; None for JPEG frames.
    #[allow(clippy::type_complexity)]
    fn segments(&self, video: usize) -> PyResult<Option<(String, u32, Vec<(u32, u16, u32)>)>> {
        self.check(video)?;
        Ok(self.inner.stream(video).map(|(rec, segments)| {
            let codec = crate::video::Codec::from_code(rec.codec).map_or("unknown", |c| c.name());
            let parts = segments
                .iter()
                .map(|g| (g.first_frame, g.frame_count, g.len))
                .collect();
            (codec.to_owned(), rec.gop, parts)
        }))
    }

    /// A video stored as segments, as stored: `{"codec", "width", "height", "gop", "matrix",
    /// "full_range", "segments": [(stream bytes, frame count), ...]}` (the keyword arguments
    /// and segments `NativeWriter.append_segments` takes, to copy the video without decoding
    /// it), each segment CRC-checked; None for a video of JPEG frames. A chunk read without
    /// its index has the video's entries rebuilt first (each segment decoded whole:
    /// `FormatError` when that fails).
    fn segment_streams<'py>(
        &self,
        py: Python<'py>,
        video: usize,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.check(video)?;
        let inner = &self.inner;
        let Some((rec, streams)) = py.detach(|| stored_segments(inner, video))? else {
            return Ok(None);
        };
        let codec = crate::video::Codec::from_code(rec.codec).map_or("unknown", |c| c.name());
        let parts = PyList::empty(py);
        for (seg, bytes) in &streams {
            parts.append((PyBytes::new(py, bytes), seg.frame_count))?;
        }
        let out = PyDict::new(py);
        out.set_item("codec", codec)?;
        out.set_item("width", rec.width)?;
        out.set_item("height", rec.height)?;
        out.set_item("gop", rec.gop)?;
        out.set_item("matrix", rec.matrix)?;
        out.set_item("full_range", rec.range == 1)?;
        out.set_item("segments", parts)?;
        Ok(Some(out))
    }

    /// `[(height, width, channels), ...]` from the index (zeros when unknown: legacy chunks).
    fn frame_shapes(&self, video: usize) -> PyResult<Vec<(u16, u16, u8)>> {
        self.check(video)?;
        Ok(self
            .inner
            .frames(video)
            .map(|f| (f.height, f.width, f.channels))
            .collect())
    }

    /// Zero-copy read-only memoryviews of the JPEG bytes of the given frames, CRC-checked
    /// when `check`.
    /// `frames`: gulpio2's selection forms (`read_spec::frames_of`).
    #[pyo3(signature = (video, frames=None, check=true))]
    fn frame_views<'py>(
        &self,
        py: Python<'py>,
        video: usize,
        frames: Option<Bound<'py, PyAny>>,
        check: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        self.check(video)?;
        self.inner.refuse_segments(video)?;
        let frames = frames_of(self, video, frames.as_ref())?;
        let frames = self.selection(video, frames);
        let inner = &self.inner;
        let Some(whole) = inner.mapped() else {
            // Positional reads or an object store: the bytes fetched in one planned pass.
            let resolved = frames
                .iter()
                .map(|&k| inner.frame(video, k).map(|(k, _)| (video, k)))
                .collect::<crate::Result<Vec<_>>>()?;
            let fetched = py.detach(|| {
                let mut got: Vec<Option<crate::Result<bytes::Bytes>>> =
                    (0..resolved.len()).map(|_| None).collect();
                inner.read_frames(&resolved, check, |i, r| {
                    got[i] = Some(r.map(|b| b.into_bytes()))
                })?;
                got.into_iter()
                    .map(|r| {
                        r.unwrap_or_else(|| {
                            Err(crate::Error::Internal("a frame was not read".into()))
                        })
                    })
                    .collect::<crate::Result<Vec<_>>>()
            })?;
            // Read-only memoryviews as from a mapping (of bytes fetched for the call).
            let views = fetched
                .iter()
                .map(|b| PyMemoryView::from(PyBytes::new(py, b).as_any()))
                .collect::<PyResult<Vec<_>>>()?;
            return PyList::new(py, views);
        };
        let base_ptr = whole.as_ptr() as usize;
        let spans = py.detach(|| {
            frames
                .iter()
                .map(|&k| {
                    let b = inner.frame_bytes(video, k, check)?;
                    let start = b.as_ptr() as usize - base_ptr;
                    Ok((start, start + b.len()))
                })
                .collect::<crate::Result<Vec<_>>>()
        })?;
        let base = self.base_view(py)?;
        let views = spans
            .into_iter()
            .map(|(a, b)| base.get_item(PySlice::new(py, a as isize, b as isize, 1)))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, views)
    }

    /// Verifies every frame (CRC; with `decode`, a full decode) and the data CRC. Returns
    /// `(videos, frames, bytes, [(kind, video_id, frame, message), ...])`.
    #[pyo3(signature = (decode=false, threads=0))]
    #[allow(clippy::type_complexity)] // a plain tuple is the simplest thing to hand Python
    fn verify(
        &self,
        py: Python<'_>,
        decode: bool,
        threads: usize,
    ) -> PyResult<(
        usize,
        usize,
        u64,
        u64,
        Vec<(&'static str, Option<String>, Option<usize>, String)>,
    )> {
        let runner = crate::pool::runner(threads)?;
        let report = py.detach(|| crate::verify::verify_chunk(&self.inner, decode, &runner));
        Ok((
            report.videos,
            report.frames,
            report.bytes,
            report.frame_bytes,
            report
                .findings
                .into_iter()
                .map(|f| (f.kind, f.video, f.frame, f.message))
                .collect(),
        ))
    }

    /// The frame indices `frames` selects in `video` (gulpio2's forms; every frame for
    /// `None`), negative ones as given: for reads that decode elsewhere.
    #[pyo3(signature = (video, frames=None))]
    fn select(&self, video: usize, frames: Option<Bound<'_, PyAny>>) -> PyResult<Vec<i64>> {
        self.check(video)?;
        let frames = frames_of(self, video, frames.as_ref())?;
        Ok(self.selection(video, frames))
    }

    /// Decodes frames for gulpio2's list shape: each frame keeps its own size and channels
    /// (1 for gray JPEGs unless the spec's colorspace says otherwise). Returns one `(T, H, W,
    /// C)` array when all frames agree (the caller hands out views of it), else a list of
    /// `(H, W, C)`. `spec` (`_reading.ReadSpec`) may not crop, resize or flip.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        video: usize,
        frames: Option<Bound<'py, PyAny>>,
        spec: ReadSpec,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cs = spec.colorspace()?;
        if spec.reframe(0).is_some() {
            return Err(PyValueError::new_err(
                "decode() keeps each frame's own size: crop, size and flip are read()'s",
            ));
        }
        let frames = frames_of(self, video, frames.as_ref())?;
        let plan =
            decode::plan(py, self, video, frames, cs, Layout::PerFrame, None)?.fast(spec.fast);
        let (check, threads) = (spec.check, spec.threads);
        if let Some((h, w, c)) = plan.shape {
            let dims = [plan.jobs.len(), h, w, c];
            return Ok(decode::into_one(py, &plan.jobs, &dims, None, check, threads)?.into_any());
        }
        let groups: Vec<&[_]> = plan.jobs.chunks(1).collect();
        let frames = decode::into_each(py, &groups, check, threads)?
            .into_iter()
            .map(|a| a.get_item(0))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyList::new(py, frames)?.into_any())
    }

    /// Decodes frames into one `(T, H, W, C)` array, or into `out` (same shape, C-contiguous
    /// uint8) without an extra copy. All frames must have the same size. `spec`
    /// (`_reading.ReadSpec` of one video) fuses a crop, resize and flip into the decode.
    #[pyo3(signature = (video, frames, spec, out=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        video: usize,
        frames: Option<Bound<'py, PyAny>>,
        spec: ReadSpec,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray4<u8>>> {
        let cs = spec.colorspace()?;
        spec.check_lengths(1)?;
        let reframe = spec.reframe(0);
        let frames = frames_of(self, video, frames.as_ref())?;
        let plan = decode::plan(
            py,
            self,
            video,
            frames,
            cs,
            Layout::Stacked,
            reframe.as_ref(),
        )?
        .fast(spec.fast);
        let (h, w, c) = plan.shape.unwrap_or_default();
        let dims = [plan.jobs.len(), h, w, c];
        let arr = decode::into_one(py, &plan.jobs, &dims, out, spec.check, spec.threads)?;
        Ok(arr.cast_into::<PyArray4<u8>>()?)
    }
}
