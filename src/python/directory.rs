//! `NativeDirectory`: a dataset directory, read side.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::{PyIndexError, PyKeyError};
use pyo3::prelude::*;

use pyo3::types::{PyBytes, PyDict, PyString};

use super::chunk::Chunk;
use super::decode::{self, Item};
use super::errors::Class;
use super::ids;
use super::read_spec::{frames_of, ReadSpec};
use crate::directory::{Directory, ManifestMode, Opened, MAX_OPEN_CHUNKS};
use crate::error::Error;
use crate::format::paths::ChunkPaths;
use crate::io::{LocalIo, RemoteNumber, RemoteStore, Store};
use crate::manifest::Pin;
use crate::pixels::Colorspace;

/// Per video: frame counts `(N,)` and first-frame `(height, width, channels)` `(N, 3)`.
type VideoShapes<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray2<u16>>);

#[pyclass(frozen, module = "gulpio_rs._native")]
pub struct NativeDirectory {
    inner: Arc<Directory>,
    /// One Python `Chunk` per chunk position read so far, made on first use and handed out
    /// again (a map: a dataset of 100k chunks holds nothing for those not read).
    chunk_objs: Mutex<ChunkObjs>,
}

/// The `Chunk` objects handed out, at most [`MAX_OPEN_CHUNKS`] (each holds its reader open),
/// the oldest made dropped first: a chunk read again after that gets a new one.
#[derive(Default)]
struct ChunkObjs {
    by_pos: HashMap<usize, Py<Chunk>>,
    order: std::collections::VecDeque<usize>,
}

impl NativeDirectory {
    fn chunk_obj(&self, py: Python<'_>, pos: usize) -> PyResult<Py<Chunk>> {
        if let Some(c) = self.objs()?.by_pos.get(&pos) {
            return Ok(c.clone_ref(py));
        }
        if pos >= self.inner.chunk_count() {
            return Err(PyIndexError::new_err(pos));
        }
        // Opening may do I/O (and fails the same way every time for a damaged chunk).
        let reader = py.detach(|| self.inner.reader(pos))?;
        // Found only now: the full index check runs before a chunk's first read.
        for why in [reader.index_problem(), reader.meta_problem()]
            .into_iter()
            .flatten()
        {
            PyErr::warn(
                py,
                Class::BrokenChunkWarning.get(py)?,
                &std::ffi::CString::new(why.replace('\0', " "))?,
                2,
            )?;
        }
        let obj = Py::new(py, Chunk::new(reader))?;
        // Another thread may have made one meanwhile: every caller gets the first.
        let mut objs = self.objs()?;
        if let Some(first) = objs.by_pos.get(&pos) {
            return Ok(first.clone_ref(py));
        }
        objs.by_pos.insert(pos, obj.clone_ref(py));
        objs.order.push_back(pos);
        while objs.order.len() > MAX_OPEN_CHUNKS {
            if let Some(old) = objs.order.pop_front() {
                objs.by_pos.remove(&old);
            }
        }
        Ok(obj)
    }

    /// Runs `f` without the GIL when it may wait on an object store (a manifest page, an
    /// index): other Python threads, and a DataLoader's, run meanwhile. Local lookups are
    /// mapped memory and keep it (releasing costs more than they do).
    fn off_gil<T: Send>(&self, py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
        if self.inner.store().is_remote() {
            py.detach(f)
        } else {
            f()
        }
    }

    fn objs(&self) -> PyResult<std::sync::MutexGuard<'_, ChunkObjs>> {
        self.chunk_objs
            .lock()
            .map_err(|_| crate::Error::Internal("the chunk table was poisoned".into()).into())
    }

    /// Each id's `(chunk, video position, frames)`, `frames[i]` being the `i`-th id's
    /// selection: a batch's ids and selections resolved in one crossing.
    fn items<'py>(
        &self,
        py: Python<'py>,
        ids: &[Bound<'py, PyString>],
        frames: &[Option<Bound<'py, PyAny>>],
    ) -> PyResult<Vec<Item<'py>>> {
        if frames.len() != ids.len() {
            return Err(crate::Error::Internal(format!(
                "{} frame selections for {} ids",
                frames.len(),
                ids.len()
            ))
            .into());
        }
        ids.iter()
            .zip(frames)
            .map(|(id, sel)| {
                let (chunk, video) = self.resolve(py, id)?;
                let chunk = chunk.into_bound(py);
                let frames = frames_of(chunk.get(), video, sel.as_ref())?;
                Ok((chunk, video, frames))
            })
            .collect()
    }
}

#[pymethods]
impl NativeDirectory {
    /// `path` is a local directory or a dataset URL (`s3://`, `gs://`, `az://`, `http(s)://`);
    /// `storage_options` configure object stores; `io` is `"mmap"` or `"pread"` for local
    /// directories; `manifest` is `"auto"`, `"off"`, `"require"` or `"verify"`
    /// (docs/FORMAT.md §7.5); `pin` is [`NativeDirectory::pin`]'s bytes from an earlier open,
    /// whose state this one opens.
    #[new]
    #[pyo3(signature = (path, storage_options=None, io=None, manifest=None, pin=None))]
    fn new(
        py: Python<'_>,
        path: &str,
        storage_options: Option<Vec<(String, String)>>,
        io: Option<&str>,
        manifest: Option<&str>,
        pin: Option<&[u8]>,
    ) -> PyResult<Self> {
        let mode: ManifestMode = match manifest {
            Some(m) => m.parse()?,
            None => ManifestMode::Auto,
        };
        let pin = pin
            .map(Pin::from_bytes)
            .transpose()
            .map_err(|m| Error::InvalidArgument(format!("pin: {m}")))?;
        let store = if crate::io::is_remote_url(path) {
            let options = storage_options.unwrap_or_default();
            let remote = py.detach(|| RemoteStore::new(path, &options))?;
            Store::Remote(Arc::new(remote))
        } else {
            let local: LocalIo = match io {
                Some(s) => s.parse()?,
                None => LocalIo::default(),
            };
            Store::Local(local)
        };
        let root = match &store {
            Store::Remote(r) => r.url().to_owned(),
            Store::Local(_) => path.to_owned(),
        };
        let dir = py.detach(|| Directory::open_pinned(store, root, mode, pin.as_ref()))?;
        Ok(NativeDirectory {
            inner: Arc::new(dir),
            chunk_objs: Mutex::new(ChunkObjs::default()),
        })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The state this open saw, as bytes a copy opens again (`pin=`); None when it was opened
    /// by listing.
    fn pin<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.pin().map(|p| PyBytes::new(py, &p.to_bytes()))
    }

    /// The ids of videos `start` to `end` (default: to the last), in position order.
    #[pyo3(signature = (start=0, end=None))]
    fn ids(&self, py: Python<'_>, start: usize, end: Option<usize>) -> PyResult<Vec<String>> {
        let dir = &self.inner;
        Ok(py.detach(|| dir.ids_in(start, end.unwrap_or(usize::MAX)))?)
    }

    fn lookup(&self, py: Python<'_>, id: &Bound<'_, PyString>) -> PyResult<Option<usize>> {
        match ids::stored(id) {
            Some(id) => Ok(self.off_gil(py, || self.inner.lookup(&id))?),
            None => Ok(None),
        }
    }

    /// The frame count of the video `id` (KeyError when unknown): through a manifest from its
    /// video row, without opening the chunk.
    fn num_frames(&self, py: Python<'_>, id: &Bound<'_, PyString>) -> PyResult<usize> {
        if !matches!(self.inner.opened(), Opened::Manifest { .. }) {
            // By listing the count is in the chunk's index, read through the chunk object
            // (which warns once when that index had to be ignored).
            let (chunk, video) = self.resolve(py, id)?;
            return chunk.get().frame_count(video);
        }
        let found = match ids::stored(id) {
            Some(stored) => self.off_gil(py, || self.inner.lookup(&stored))?,
            None => None,
        };
        let g = found.ok_or_else(|| ids::unknown(id))?;
        Ok(self.off_gil(py, || self.inner.frame_count(g))?)
    }

    /// `(chunk position, video position in chunk)` of global video `g`.
    fn location(&self, py: Python<'_>, g: usize) -> PyResult<(usize, usize)> {
        self.off_gil(py, || self.inner.location(g))?
            .ok_or_else(|| PyIndexError::new_err(g))
    }

    /// Whether chunk position `pos` reads through its binary index (a chunk not read yet is
    /// opened for the answer and closed again).
    fn is_indexed(&self, py: Python<'_>, pos: usize) -> PyResult<bool> {
        let dir = &self.inner;
        Ok(py.detach(|| dir.is_indexed(pos))?)
    }

    /// How many chunks the directory reads (`chunk_table()`'s rows, without building them).
    fn chunk_count(&self) -> usize {
        self.inner.chunk_count()
    }

    /// `[(number, data_path, meta_path, index_path, first_video, video_count), ...]`, for
    /// chunk positions `start` to `end` (default: every chunk).
    #[pyo3(signature = (start=0, end=None))]
    #[allow(clippy::type_complexity)]
    fn chunk_table(
        &self,
        py: Python<'_>,
        start: usize,
        end: Option<usize>,
    ) -> PyResult<Vec<(u64, String, String, String, usize, usize)>> {
        let dir = &self.inner;
        let end = end.unwrap_or(usize::MAX).min(dir.chunk_count());
        let rows = py.detach(|| {
            (start.min(end)..end)
                .map(|pos| {
                    let c = dir.chunk(pos)?;
                    Ok((
                        c.number,
                        c.paths.data.display().to_string(),
                        c.paths.meta.display().to_string(),
                        c.paths.index.display().to_string(),
                        c.first,
                        c.video_count,
                    ))
                })
                .collect::<crate::Result<Vec<_>>>()
        })?;
        Ok(rows)
    }

    /// How the directory was opened: `{"how": "manifest", "version", "base_version", "tail",
    /// "pending", "changed"}` or `{"how": "listing", "reason", "warned"}`.
    fn opened<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        match self.inner.opened() {
            Opened::Listing { reason, warned } => {
                d.set_item("how", "listing")?;
                d.set_item("reason", reason)?;
                d.set_item("warned", *warned)?;
            }
            Opened::Manifest {
                version,
                base_version,
                tail,
                pending,
                changed,
            } => {
                d.set_item("how", "manifest")?;
                d.set_item("version", *version)?;
                d.set_item("base_version", *base_version)?;
                d.set_item("tail", *tail)?;
                d.set_item("pending", *pending)?;
                d.set_item("changed", *changed)?;
            }
        }
        Ok(d)
    }

    /// The reader of chunk position `pos`, opened (and fully checked) on first use.
    fn chunk(&self, py: Python<'_>, pos: usize) -> PyResult<Py<Chunk>> {
        self.chunk_obj(py, pos)
    }

    /// `(chunk, video position)` of a video id; KeyError if unknown.
    fn resolve(&self, py: Python<'_>, id: &Bound<'_, PyString>) -> PyResult<(Py<Chunk>, usize)> {
        let found = match ids::stored(id) {
            Some(stored) => self.off_gil(py, || self.inner.locate(&stored))?,
            None => None,
        };
        let (pos, video) = found.ok_or_else(|| ids::unknown(id))?;
        Ok((self.chunk_obj(py, pos)?, video))
    }

    /// Decodes the videos `ids` (`frames`: one selection per id) in one parallel pass, as
    /// `GulpDirectory.read_batch` returns them; `spec`: `_reading.ReadSpec`.
    #[pyo3(signature = (ids, frames, spec, out=None))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<Bound<'py, PyString>>,
        frames: Vec<Option<Bound<'py, PyAny>>>,
        spec: ReadSpec,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let items = self.items(py, &ids, &frames)?;
        decode::read_items(py, &items, &spec, out)
    }

    /// Starts fetching what `read_batch(ids, frames, ...)` will read; returns at once.
    fn prefetch<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<Bound<'py, PyString>>,
        frames: Vec<Option<Bound<'py, PyAny>>>,
    ) -> PyResult<()> {
        let items = self.items(py, &ids, &frames)?;
        decode::prefetch_items(py, &items)
    }

    /// `(chunk, video position, frame indices or None)` of each id with its selection, for
    /// reads that decode elsewhere (a user's decoder).
    fn select<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<Bound<'py, PyString>>,
        frames: Vec<Option<Bound<'py, PyAny>>>,
    ) -> PyResult<Vec<Item<'py>>> {
        self.items(py, &ids, &frames)
    }

    /// `(height, width, channels)` of frame `frame` of video `id` as a read decodes it
    /// (channels 1 for a gray frame, else 3): from the index, or for a chunk without one the
    /// frame's JPEG header (what the read planner looks at).
    fn frame_shape(
        &self,
        py: Python<'_>,
        id: &Bound<'_, PyString>,
        frame: i64,
    ) -> PyResult<(usize, usize, usize)> {
        let (chunk, video) = self.resolve(py, id)?;
        let chunk = chunk.get();
        chunk.check(video)?;
        let reader = chunk.reader();
        let jobs = py.detach(|| {
            crate::decode::plan(reader, video, &[frame], Colorspace::Auto, false, None)
        })?;
        match jobs.first() {
            Some(job) => Ok(job.shape),
            None => Err(crate::Error::Internal("a frame was not planned".into()).into()),
        }
    }

    /// `(frame_counts, shapes)`: per video (those with `ids`, in that order, else every video
    /// in `ids()` order), its frame count (uint32, `(N,)`) and first frame's `(height, width,
    /// channels)` (uint16, `(N, 3)`), from the indexes alone: zeros when the index does not
    /// say (legacy chunks, videos without frames) unless `headers`, which reads a legacy
    /// video's first JPEG header instead. KeyError for an unknown id.
    #[pyo3(signature = (ids=None, headers=false))]
    fn video_shapes<'py>(
        &self,
        py: Python<'py>,
        ids: Option<Vec<String>>,
        headers: bool,
    ) -> PyResult<VideoShapes<'py>> {
        let dir = &self.inner;
        let positions = ids
            .map(|ids| {
                let found = py.detach(|| {
                    ids.iter()
                        .map(|id| dir.lookup(id))
                        .collect::<crate::Result<Vec<_>>>()
                })?;
                ids.into_iter()
                    .zip(found)
                    .map(|(id, g)| g.ok_or_else(|| PyKeyError::new_err(id)))
                    .collect::<PyResult<Vec<usize>>>()
            })
            .transpose()?;
        let (counts, shapes) = py.detach(|| dir.video_shapes(positions.as_deref(), headers))?;
        let n = counts.len();
        let flat: Vec<u16> = shapes.into_iter().flatten().collect();
        let shapes = PyArray1::from_vec(py, flat).reshape([n, 3])?;
        Ok((PyArray1::from_vec(py, counts), shapes))
    }

    fn is_remote(&self) -> bool {
        self.inner.store().is_remote()
    }

    /// The bytes of a small file beside the chunks, or None if it does not exist.
    fn read_file<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let got = py.detach(|| self.inner.read_file(name))?;
        Ok(got.map(|b| PyBytes::new(py, &b)))
    }

    /// The names of the files directly in the dataset (its folder, or its prefix), listed now.
    fn file_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let dir = &self.inner;
        Ok(py.detach(|| dir.file_names())?)
    }

    /// Chunk numbers of every `data*.gulp` / `meta*.gmeta` file in the dataset now, paired
    /// or not (a fresh listing: new chunks must not collide with uploads in progress).
    fn listed_numbers(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        let dir = &self.inner;
        Ok(py.detach(|| dir.listed_numbers())?)
    }

    /// The number a new chunk claims first: after the largest the manifest's state knows
    /// (no request), else after every data or meta file listed now.
    fn next_chunk_number(&self, py: Python<'_>) -> PyResult<u64> {
        let dir = &self.inner;
        Ok(py.detach(|| dir.next_chunk_number())?)
    }

    /// Publishes a chunk staged on local disk in this (remote) dataset: index (the claim of
    /// the number), data, then the `.gmeta` (the commit point). As chunk `number` exactly, or
    /// with `first_free` under the first number from `number` on that no object uses; returns
    /// the number taken.
    #[pyo3(signature = (data_path, meta_path, number, first_free=false))]
    fn upload_chunk(
        &self,
        py: Python<'_>,
        data_path: &str,
        meta_path: &str,
        number: u64,
        first_free: bool,
    ) -> PyResult<u64> {
        let dir = &self.inner;
        let staged = ChunkPaths::new(data_path, meta_path);
        let number = if first_free {
            RemoteNumber::FirstFree(number)
        } else {
            RemoteNumber::Exactly(number)
        };
        let hook = crate::manifest::StagedCommits::default();
        Ok(py.detach(|| {
            dir.store()
                .publish_staged(dir.root(), &staged, number, &hook)
        })?)
    }

    /// Uploads a small local file beside the chunks (e.g. `label2idx.json`).
    fn upload_file(&self, py: Python<'_>, local_path: &str, name: &str) -> PyResult<()> {
        let dir = &self.inner;
        Ok(py.detach(|| dir.upload_file(std::path::Path::new(local_path), name))?)
    }

    /// `(data bytes, meta bytes)` per chunk, from the listing when it gave them.
    fn chunk_sizes(&self, py: Python<'_>) -> PyResult<Vec<(u64, u64)>> {
        let dir = &self.inner;
        let sizes = py.detach(|| {
            (0..dir.chunk_count())
                .map(|pos| {
                    let c = dir.chunk(pos)?;
                    if let crate::directory::HowOpened::Recorded(r) = &c.how {
                        return Ok((r.gulp_len, r.gmeta_len));
                    }
                    let store = dir.store();
                    Ok((
                        store.size(&c.paths.data, c.sizes.data)?,
                        store.size(&c.paths.meta, c.sizes.meta)?,
                    ))
                })
                .collect::<crate::Result<Vec<_>>>()
        })?;
        Ok(sizes)
    }

    /// `[(path, message, chunk_skipped, video_id, frame), ...]`: chunks that could not be
    /// (fully) used, and the video (and frame) the message names, if any.
    #[allow(clippy::type_complexity)]
    fn problems(&self) -> Vec<(String, String, bool, Option<String>, Option<usize>)> {
        self.inner
            .problems()
            .iter()
            .map(|p| {
                (
                    p.path.display().to_string(),
                    p.message.clone(),
                    p.chunk_skipped,
                    p.at.as_ref().map(|at| at.id.clone()),
                    p.at.as_ref().and_then(|at| at.frame),
                )
            })
            .collect()
    }
}

/// True for dataset URLs the object-store layer handles (`s3://`, `gs://`, `az://`, ...).
#[pyfunction]
pub fn is_remote_url(path: &str) -> bool {
    crate::io::is_remote_url(path)
}

/// `text` with credentials in URLs hidden (user info, secret query parameters): the one
/// redaction rule, for reprs and messages built in Python.
#[pyfunction]
pub fn redact_url(text: &str) -> String {
    crate::io::redact_url(text)
}

/// True for `storage_options` keys whose values are secrets (shown as `***`).
#[pyfunction]
pub fn is_secret_option(key: &str) -> bool {
    crate::io::remote::is_secret_key(key)
}
