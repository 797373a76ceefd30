//! Thin PyO3 bindings: convert arguments, release the GIL around core calls, map errors.
//! All Python-facing semantics (gulpio2's API shapes) live in `python/gulpio_rs/`.

mod arrays;
mod errors;
mod resize;

use std::ffi::c_int;
use std::os::raw::c_void;
use std::sync::{Arc, OnceLock};

use numpy::{
    PyArray3, PyArray4, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyMemoryView, PySlice};

use crate::batch;
use crate::chunk::reader::{ChunkReader, IndexKind};
use crate::chunk::writer::{self, ChunkWriter, WriteMode};
use crate::directory::Directory;
use crate::format::paths::ChunkPaths;
use crate::jpeg::Colorspace;
use errors::IntoPy;

fn colorspace(name: Option<&str>) -> PyResult<Colorspace> {
    match name.map(|s| s.to_ascii_uppercase()).as_deref() {
        None | Some("AUTO") => Ok(Colorspace::Auto),
        Some("RGB") => Ok(Colorspace::Rgb),
        Some("GRAY") | Some("GREY") | Some("L") => Ok(Colorspace::Gray),
        Some(other) => Err(PyValueError::new_err(format!(
            "colorspace must be 'RGB', 'GRAY' or None, not {other:?}"
        ))),
    }
}

/// Zero-copy, read-only view of one frame's JPEG bytes inside the mapped `.gulp`. Supports
/// the buffer protocol (`memoryview(v)`, `np.frombuffer(v, np.uint8)`, `bytes(v)`); the
/// mapping stays alive as long as any view or buffer derived from it does.
#[pyclass(frozen, module = "gulpio_rs._native")]
struct FrameView {
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
        let data = &this.chunk.data()[this.start..this.start + this.len];
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

/// An open chunk (read side).
#[pyclass(frozen, module = "gulpio_rs._native")]
struct Chunk {
    inner: Arc<ChunkReader>,
    /// A memoryview of the whole mapped `.gulp`; frame views are slices of it (one object per
    /// frame instead of two).
    base_view: OnceLock<Py<PyAny>>,
}

impl Chunk {
    fn new(inner: Arc<ChunkReader>) -> Self {
        Chunk {
            inner,
            base_view: OnceLock::new(),
        }
    }

    fn base_view<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyAny>> {
        if self.base_view.get().is_none() {
            let owner = Bound::new(
                py,
                FrameView {
                    chunk: self.inner.clone(),
                    start: 0,
                    len: self.inner.data().len(),
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
        let (reader, warning) = py.detach(|| ChunkReader::open(&paths)).py_err(py)?;
        Ok((Chunk::new(Arc::new(reader)), warning.map(|w| w.to_string())))
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

    fn lookup(&self, id: &str) -> Option<usize> {
        self.inner.lookup(id)
    }

    fn id(&self, video: usize) -> PyResult<&str> {
        self.check(video)?;
        Ok(self.inner.id(video))
    }

    fn frame_count(&self, video: usize) -> PyResult<usize> {
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
    #[pyo3(signature = (video, frames=None, check=true))]
    fn frame_views<'py>(
        &self,
        py: Python<'py>,
        video: usize,
        frames: Option<Vec<i64>>,
        check: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        self.check(video)?;
        let frames = self.selection(video, frames);
        let inner = &self.inner;
        let spans = py
            .detach(|| {
                frames
                    .iter()
                    .map(|&k| {
                        let b = inner.frame_bytes(video, k, check)?;
                        let start = b.as_ptr() as usize - inner.data().as_ptr() as usize;
                        Ok((start, start + b.len()))
                    })
                    .collect::<crate::Result<Vec<_>>>()
            })
            .py_err(py)?;
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
        Vec<(&'static str, Option<String>, Option<usize>, String)>,
    )> {
        let runner = crate::pool::runner(threads).py_err(py)?;
        let report = py.detach(|| crate::verify::verify_chunk(&self.inner, decode, &runner));
        Ok((
            report.videos,
            report.frames,
            report.bytes,
            report
                .findings
                .into_iter()
                .map(|f| (f.kind, f.video, f.frame, f.message))
                .collect(),
        ))
    }

    /// Decodes frames for gulpio2's list shape: each frame keeps its own size and channels
    /// (1 for gray JPEGs unless `colorspace` says otherwise). Returns one `(T, H, W, C)` array
    /// when all frames agree (the caller hands out views of it), else a list of `(H, W, C)`.
    #[pyo3(signature = (video, frames=None, check=true, colorspace=None, threads=0))]
    fn decode<'py>(
        &self,
        py: Python<'py>,
        video: usize,
        frames: Option<Vec<i64>>,
        check: bool,
        colorspace: Option<&str>,
        threads: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check(video)?;
        let frames = self.selection(video, frames);
        let cs = self::colorspace(colorspace)?;
        let jobs = batch::plan(&self.inner, video, &frames, cs, false).py_err(py)?;
        if let Some((h, w, c)) = batch::uniform(&jobs) {
            let arr = new_array(py, [jobs.len(), h, w, c])?;
            decode_into_array(py, &jobs, &arr, check, threads)?;
            return Ok(arr.into_any());
        }
        let arrays: Vec<Bound<'py, PyArray4<u8>>> = jobs
            .iter()
            .map(|j| new_array(py, [1, j.shape.0, j.shape.1, j.shape.2]))
            .collect::<PyResult<_>>()?;
        let mut outs = Vec::with_capacity(arrays.len());
        for a in &arrays {
            outs.push(array_slice(a)?);
        }
        run(py, &jobs, outs, check, threads)?;
        let frames: Vec<Bound<'py, PyAny>> = arrays
            .into_iter()
            .map(|a| a.get_item(0))
            .collect::<PyResult<_>>()?;
        Ok(PyList::new(py, frames)?.into_any())
    }

    /// Decodes frames into one `(T, H, W, C)` array, or into `out` (same shape, C-contiguous
    /// uint8) without an extra copy. All frames must have the same size.
    #[pyo3(signature = (video, frames=None, check=true, colorspace=None, out=None, threads=0))]
    #[allow(clippy::too_many_arguments)] // mirrors the Python signature
    fn read<'py>(
        &self,
        py: Python<'py>,
        video: usize,
        frames: Option<Vec<i64>>,
        check: bool,
        colorspace: Option<&str>,
        out: Option<Bound<'py, PyArray4<u8>>>,
        threads: usize,
    ) -> PyResult<Bound<'py, PyArray4<u8>>> {
        self.check(video)?;
        let frames = self.selection(video, frames);
        let cs = self::colorspace(colorspace)?;
        let jobs = batch::plan(&self.inner, video, &frames, cs, true).py_err(py)?;
        let (h, w, c) = uniform_shape(&self.inner, video, &jobs)?;
        let arr = match out {
            Some(arr) => {
                check_out(arr.as_untyped(), &[jobs.len(), h, w, c])?;
                arr
            }
            None => new_array(py, [jobs.len(), h, w, c])?,
        };
        decode_into_array(py, &jobs, &arr, check, threads)?;
        Ok(arr)
    }
}

/// Output shape of a stacked read, or a clear error naming the frames whose sizes differ.
fn uniform_shape(
    chunk: &ChunkReader,
    video: usize,
    jobs: &[batch::FrameJob],
) -> PyResult<(usize, usize, usize)> {
    match (batch::uniform(jobs), jobs.first()) {
        (Some(shape), _) => Ok(shape),
        (None, Some(first)) => {
            let other = jobs.iter().find(|j| j.shape != first.shape);
            let (k, shape) = other
                .map(|j| (j.frame, j.shape))
                .unwrap_or((0, first.shape));
            Err(PyValueError::new_err(format!(
                "{}: video {:?} has frames of different sizes (frame {} is {}x{}, frame {} is \
                 {}x{}); read() stacks frames into one array: use gd[id] for a list of frames",
                chunk.paths().data.display(),
                chunk.id(video),
                first.frame,
                first.shape.1,
                first.shape.0,
                k,
                shape.1,
                shape.0
            )))
        }
        // No frames: an empty (0, 0, 0, C) array.
        (None, None) => Ok((0, 0, 0)),
    }
}

fn new_array<'py>(py: Python<'py>, dims: [usize; 4]) -> PyResult<Bound<'py, PyArray4<u8>>> {
    // Every byte is written by the decoder before the array is returned; on error the array
    // is dropped without being exposed.
    arrays::uninit4(py, dims)
}

// A numpy array is shared, interior-mutable memory: `&Bound` is all Python ever gives us.
#[allow(clippy::mut_from_ref)]
fn array_slice<'a, 'py>(arr: &'a Bound<'py, PyArray4<u8>>) -> PyResult<&'a mut [u8]> {
    // SAFETY: the array is either freshly allocated here or a caller's `out` that was checked
    // to be C-contiguous and writeable; no Python code runs while the slice is in use.
    unsafe { arr.as_slice_mut() }
        .map_err(|_| PyValueError::new_err("out must be a C-contiguous, writeable uint8 array"))
}

/// `out=` must have exactly the shape the frames need and be C-contiguous and writeable.
fn check_out(arr: &Bound<'_, PyUntypedArray>, dims: &[usize]) -> PyResult<()> {
    if arr.shape() != dims {
        return Err(PyValueError::new_err(format!(
            "out has shape {:?}, the frames need {:?}",
            arr.shape(),
            dims
        )));
    }
    let writeable: bool = arr.getattr("flags")?.getattr("writeable")?.extract()?;
    if !arr.is_c_contiguous() || !writeable {
        return Err(PyValueError::new_err(
            "out must be a C-contiguous, writeable uint8 array",
        ));
    }
    Ok(())
}

/// Decodes `jobs` (all of one size) back to back into `arr`.
fn decode_into_array(
    py: Python<'_>,
    jobs: &[batch::FrameJob],
    arr: &Bound<'_, PyArray4<u8>>,
    check: bool,
    threads: usize,
) -> PyResult<()> {
    let slice = array_slice(arr)?;
    let per = jobs.first().map(|j| j.len()).unwrap_or(0).max(1);
    let outs: Vec<&mut [u8]> = slice.chunks_exact_mut(per).take(jobs.len()).collect();
    run(py, jobs, outs, check, threads)
}

/// Runs the decode with the GIL released.
fn run(
    py: Python<'_>,
    jobs: &[batch::FrameJob],
    outs: Vec<&mut [u8]>,
    check: bool,
    threads: usize,
) -> PyResult<()> {
    let runner = crate::pool::runner(threads).py_err(py)?;
    py.detach(|| batch::decode(jobs, outs, check, &runner))
        .py_err(py)
}

impl Chunk {
    /// `None` selects every frame; indices may be negative (checked when used).
    fn selection(&self, video: usize, frames: Option<Vec<i64>>) -> Vec<i64> {
        frames.unwrap_or_else(|| (0..self.inner.frame_count(video) as i64).collect())
    }

    fn check(&self, video: usize) -> PyResult<()> {
        if video < self.inner.video_count() {
            Ok(())
        } else {
            Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "video position {video} out of range ({} videos)",
                self.inner.video_count()
            )))
        }
    }
}

/// A dataset directory (read side).
#[pyclass(frozen, module = "gulpio_rs._native")]
struct NativeDirectory {
    inner: Arc<Directory>,
    /// One Python `Chunk` per chunk position, made on first use and handed out again.
    chunk_objs: Vec<OnceLock<Py<Chunk>>>,
}

impl NativeDirectory {
    fn chunk_obj(&self, py: Python<'_>, pos: usize) -> PyResult<Py<Chunk>> {
        let cell = self
            .chunk_objs
            .get(pos)
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(pos))?;
        if let Some(c) = cell.get() {
            return Ok(c.clone_ref(py));
        }
        // Opening may do I/O (and fails the same way every time for a damaged chunk).
        let reader = py.detach(|| self.inner.reader(pos)).py_err(py)?;
        if let Some(why) = reader.index_problem() {
            // Found only now: the full index check runs before a chunk's first read.
            let category =
                PyModule::import(py, "gulpio_rs.errors")?.getattr("BrokenChunkWarning")?;
            PyErr::warn(
                py,
                &category,
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
        let dir = py.detach(|| Directory::open(path)).py_err(py)?;
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

    fn id_at(&self, g: usize) -> PyResult<&str> {
        if g < self.inner.len() {
            Ok(self.inner.ids().get(g))
        } else {
            Err(pyo3::exceptions::PyIndexError::new_err(g))
        }
    }

    fn lookup(&self, id: &str) -> Option<usize> {
        self.inner.lookup(id)
    }

    /// `(chunk position, video position in chunk)` of global video `g`.
    fn location(&self, g: usize) -> PyResult<(usize, usize)> {
        self.inner
            .location(g)
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(g))
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
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(id.to_owned()))?;
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

/// Writes one chunk; see `chunk::writer` for the publication protocol.
#[pyclass(module = "gulpio_rs._native")]
struct NativeWriter {
    inner: Option<ChunkWriter>,
}

impl NativeWriter {
    fn writer(&mut self) -> PyResult<&mut ChunkWriter> {
        self.inner
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the chunk writer is closed"))
    }
}

#[pymethods]
impl NativeWriter {
    #[new]
    fn new(py: Python<'_>, data_path: &str, meta_path: &str, mode: &str) -> PyResult<Self> {
        let mode = match mode {
            "wb" => WriteMode::Create,
            "ab" => WriteMode::Append,
            other => {
                return Err(PyValueError::new_err(format!(
                    "mode must be 'wb' or 'ab', not {other:?}"
                )))
            }
        };
        let paths = ChunkPaths::new(data_path, meta_path);
        let w = py.detach(|| ChunkWriter::open(&paths, mode)).py_err(py)?;
        Ok(NativeWriter { inner: Some(w) })
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
            // the slices are used; nothing else runs Python code meanwhile (GIL held).
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
        let w = self.writer()?;
        w.append(id, meta_json.as_bytes(), &slices).py_err(py)
    }

    /// Publishes everything appended so far (durable, atomic).
    fn publish(&mut self, py: Python<'_>) -> PyResult<()> {
        let w = self.writer()?;
        py.detach(|| w.publish()).py_err(py)
    }

    /// Publishes and closes.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        let w = self.inner.take();
        match w {
            Some(w) => py.detach(|| w.close()).py_err(py),
            None => Ok(()),
        }
    }

    /// Discards everything not yet published and closes.
    fn abort(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.inner.take() {
            Some(w) => py.detach(|| w.abort()).py_err(py),
            None => Ok(()),
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_none()
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

/// Decodes many videos in one parallel pass: `items` are `(chunk, video, frames or None)`.
/// Returns one `(N, T, H, W, C)` array when every video has the same frame count and size,
/// else a list of `(T, H, W, C)` arrays. Frames inside one video must share a size.
#[pyfunction]
#[pyo3(signature = (items, check=true, colorspace=None, threads=0, out=None))]
fn read_batch<'py>(
    py: Python<'py>,
    items: Vec<(Bound<'py, Chunk>, usize, Option<Vec<i64>>)>,
    check: bool,
    colorspace: Option<&str>,
    threads: usize,
    out: Option<Bound<'py, PyArrayDyn<u8>>>,
) -> PyResult<Bound<'py, PyAny>> {
    let cs = self::colorspace(colorspace)?;
    let readers: Vec<Arc<ChunkReader>> = items
        .iter()
        .map(|(c, _, _)| c.get().inner.clone())
        .collect();
    let mut plans = Vec::with_capacity(items.len());
    for ((chunk, video, frames), reader) in items.iter().zip(&readers) {
        let chunk = chunk.get();
        chunk.check(*video)?;
        let frames = chunk.selection(*video, frames.clone());
        let jobs = batch::plan(reader, *video, &frames, cs, true).py_err(py)?;
        let shape = uniform_shape(reader, *video, &jobs)?;
        plans.push((jobs, shape));
    }
    let same = plans
        .windows(2)
        .all(|w| w[0].0.len() == w[1].0.len() && w[0].1 == w[1].1);
    let all_jobs: Vec<batch::FrameJob> =
        plans.iter().flat_map(|(j, _)| j.iter().copied()).collect();
    if same {
        let (t, (h, w, c)) = plans.first().map_or((0, (0, 0, 0)), |(j, s)| (j.len(), *s));
        let dims = [plans.len(), t, h, w, c];
        let arr = match out {
            Some(arr) => {
                check_out(arr.as_untyped(), &dims)?;
                arr
            }
            // Every byte is written by the decoder before the array is returned.
            None => arrays::uninit_dyn(py, &dims)?,
        };
        let slice = dyn_slice(&arr)?;
        let per = (h * w * c).max(1);
        let outs: Vec<&mut [u8]> = slice.chunks_exact_mut(per).take(all_jobs.len()).collect();
        run(py, &all_jobs, outs, check, threads)?;
        return Ok(arr.into_any());
    }
    if out.is_some() {
        return Err(PyValueError::new_err(
            "out= needs every video to give the same number of frames of the same size",
        ));
    }
    let arrays: Vec<Bound<'py, PyArray4<u8>>> = plans
        .iter()
        .map(|(j, (h, w, c))| new_array(py, [j.len(), *h, *w, *c]))
        .collect::<PyResult<_>>()?;
    let mut outs = Vec::with_capacity(all_jobs.len());
    for (a, (jobs, _)) in arrays.iter().zip(&plans) {
        let per = jobs.first().map_or(1, |j| j.len().max(1));
        outs.extend(array_slice(a)?.chunks_exact_mut(per).take(jobs.len()));
    }
    run(py, &all_jobs, outs, check, threads)?;
    Ok(PyList::new(py, arrays)?.into_any())
}

// See `array_slice`.
#[allow(clippy::mut_from_ref)]
fn dyn_slice<'a>(arr: &'a Bound<'_, PyArrayDyn<u8>>) -> PyResult<&'a mut [u8]> {
    // SAFETY: freshly allocated, C-contiguous, not yet shared with Python code.
    unsafe { arr.as_slice_mut() }.map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Writes the checksummed index for a chunk that lacks one; returns the number of videos.
#[pyfunction]
fn write_index(py: Python<'_>, data_path: &str, meta_path: &str) -> PyResult<usize> {
    let paths = ChunkPaths::new(data_path, meta_path);
    py.detach(|| writer::write_index(&paths)).py_err(py)
}

/// Decodes one JPEG with the built-in decoder to an `(H, W, C)` uint8 array.
#[pyfunction]
#[pyo3(signature = (data, colorspace=None))]
fn decode_jpeg<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    colorspace: Option<&str>,
) -> PyResult<Bound<'py, PyArray3<u8>>> {
    use crate::jpeg::{decode_into, output_shape, DecodeFailure};
    let cs = self::colorspace(colorspace)?;
    // `bytes` is immutable and can be read without the GIL; other buffers are copied, since
    // their owner could change them while we decode.
    let copied: Vec<u8>;
    let bytes: &[u8] = match data.cast::<PyBytes>() {
        Ok(b) => b.as_bytes(),
        Err(_) => {
            copied = pyo3::buffer::PyBuffer::<u8>::get(data)?.to_vec(py)?;
            &copied
        }
    };
    let to_err = |f: DecodeFailure| {
        let cls = match f {
            DecodeFailure::Unsupported(_) => "UnsupportedJpegError",
            DecodeFailure::Corrupt(_) => "DecodeError",
        };
        PyModule::import(py, "gulpio_rs.errors")
            .and_then(|m| m.getattr(cls))
            .and_then(|c| c.call1((f.message().to_owned(),)))
            .map(PyErr::from_value)
            .unwrap_or_else(|e| e)
    };
    let (h, w, c, _) = output_shape(bytes, cs).map_err(to_err)?;
    // SAFETY: fully written by the decoder before it is returned; dropped on error.
    let arr = unsafe { PyArray3::<u8>::new(py, [h, w, c], false) };
    let out = unsafe { arr.as_slice_mut() }.map_err(|e| PyValueError::new_err(e.to_string()))?;
    py.detach(|| decode_into(bytes, cs, out)).map_err(to_err)?;
    Ok(arr)
}

/// What a JPEG's frame header (SOF) says, read without decoding.
#[pyclass(frozen, get_all, module = "gulpio_rs._native")]
struct JpegInfo {
    width: u16,
    height: u16,
    components: u8,
    precision: u8,
    /// The SOF marker byte (0xC0..0xCF): the coding process.
    sof: u8,
    progressive: bool,
    arithmetic: bool,
    lossless: bool,
}

#[pymethods]
impl JpegInfo {
    fn __repr__(&self) -> String {
        format!(
            "JpegInfo(width={}, height={}, components={}, precision={}, sof=0x{:02X}, \
             progressive={}, arithmetic={}, lossless={})",
            self.width,
            self.height,
            self.components,
            self.precision,
            self.sof,
            py_bool(self.progressive),
            py_bool(self.arithmetic),
            py_bool(self.lossless)
        )
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// The frame header of a JPEG, without decoding; `DecodeError` if it is not a JPEG or the
/// header cannot be found.
#[pyfunction]
fn jpeg_info(py: Python<'_>, data: &[u8]) -> PyResult<JpegInfo> {
    let i = crate::jpeg::header::read_info(data).map_err(|msg| {
        PyModule::import(py, "gulpio_rs.errors")
            .and_then(|m| m.getattr("DecodeError"))
            .and_then(|c| c.call1((msg,)))
            .map(PyErr::from_value)
            .unwrap_or_else(|e| e)
    })?;
    Ok(JpegInfo {
        width: i.width,
        height: i.height,
        components: i.components,
        precision: i.precision,
        sof: i.sof,
        progressive: i.is_progressive(),
        arithmetic: i.is_arithmetic(),
        lossless: i.is_lossless(),
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FrameView>()?;
    m.add_class::<Chunk>()?;
    m.add_class::<NativeDirectory>()?;
    m.add_class::<NativeWriter>()?;
    m.add_class::<JpegInfo>()?;
    m.add_function(wrap_pyfunction!(write_index, m)?)?;
    m.add_function(wrap_pyfunction!(read_batch, m)?)?;
    m.add_function(wrap_pyfunction!(decode_jpeg, m)?)?;
    m.add_function(wrap_pyfunction!(jpeg_info, m)?)?;
    m.add_function(wrap_pyfunction!(resize::resize_frames, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::pooled_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::release_pooled_buffers, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("JPEG_BACKEND", crate::jpeg::BACKEND.name())?;
    Ok(())
}
