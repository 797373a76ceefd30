//! The dataset manifest's tools (`gulpio index`, `gulpio check`, `gulpio info`): thin
//! wrappers over `crate::manifest`, the GIL released while files are read and written.

use std::path::Path;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::manifest;

/// Records every chunk of a dataset (a folder or a dataset URL) in its manifest (creating it
/// if missing) and compacts it: `{"created", "added", "replaced", "removed", "aborted",
/// "version", "chunks", "videos"}`.
#[pyfunction]
#[pyo3(signature = (path, abort_pending = false, storage_options = None))]
pub fn manifest_index<'py>(
    py: Python<'py>,
    path: &str,
    abort_pending: bool,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<Bound<'py, PyDict>> {
    let r = on_manifest(py, path, storage_options, |io| {
        manifest::index_in(io, abort_pending)
    })?;
    let d = PyDict::new(py);
    d.set_item("created", r.created)?;
    d.set_item("added", r.added)?;
    d.set_item("replaced", r.replaced)?;
    d.set_item("removed", r.removed)?;
    d.set_item("aborted", r.aborted)?;
    d.set_item("version", r.version)?;
    d.set_item("chunks", r.chunks)?;
    d.set_item("videos", r.videos)?;
    Ok(d)
}

/// The manifest compared with a listing of the local dataset, or None without a manifest:
/// `{"version", "base_version", "base", "tail", "chunks", "videos", "pending",
/// "unrecorded", "mismatched"}`.
#[pyfunction]
pub fn manifest_status<'py>(py: Python<'py>, path: &str) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(s) = py.detach(|| manifest::status(Path::new(path)))? else {
        return Ok(None);
    };
    let d = PyDict::new(py);
    d.set_item("version", s.version)?;
    d.set_item("base_version", s.base_version)?;
    d.set_item(
        "base",
        if s.base_is_snapshot {
            "snapshot"
        } else {
            "genesis"
        },
    )?;
    d.set_item("tail", s.tail)?;
    d.set_item("chunks", s.chunks)?;
    d.set_item("videos", s.videos)?;
    d.set_item("pending", s.pending)?;
    d.set_item("unrecorded", s.unrecorded)?;
    d.set_item("mismatched", s.mismatched)?;
    Ok(Some(d))
}

/// Runs `f` on the manifest of the dataset at `path` (a folder or a dataset URL) without the
/// GIL.
fn on_manifest<T: Send>(
    py: Python<'_>,
    path: &str,
    storage_options: Option<Vec<(String, String)>>,
    f: impl FnOnce(manifest::ManifestIo<'_>) -> crate::error::Result<T> + Send,
) -> PyResult<T> {
    Ok(py.detach(|| {
        if crate::io::is_remote_url(path) {
            let store = crate::io::RemoteStore::new(path, &storage_options.unwrap_or_default())?;
            f(manifest::ManifestIo::Remote(&store))
        } else {
            f(manifest::ManifestIo::Local(Path::new(path)))
        }
    })?)
}

/// Gives a dataset being created (no manifest, no chunk file) an empty manifest; True when
/// this call created it (docs/FORMAT.md §7.6).
#[pyfunction]
#[pyo3(signature = (path, storage_options = None))]
pub fn manifest_create(
    py: Python<'_>,
    path: &str,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<bool> {
    on_manifest(py, path, storage_options, manifest::create_if_new)
}

/// Writes a snapshot of the manifest's current state and points `LATEST` at it, unless the
/// dataset has no manifest or no commit follows its base; the version compacted, or None.
#[pyfunction]
#[pyo3(signature = (path, storage_options = None))]
pub fn manifest_compact(
    py: Python<'_>,
    path: &str,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<Option<u64>> {
    on_manifest(py, path, storage_options, manifest::compact_if_tail)
}

/// Deletes what no reader of the manifest needs any more (docs/FORMAT.md §7.6, "Clean-up"):
/// snapshots replaced more than `keep_seconds` ago (default: a week, what every compaction
/// keeps) and the commits only they needed; `(snapshots, commits, bodies)` deleted.
#[pyfunction]
#[pyo3(signature = (path, keep_seconds = None, storage_options = None))]
pub fn manifest_prune(
    py: Python<'_>,
    path: &str,
    keep_seconds: Option<f64>,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<(usize, usize, usize)> {
    let keep_ms = match keep_seconds {
        None => manifest::KEEP_FOR_MS,
        Some(s) if s.is_finite() && s >= 0.0 => (s * 1000.0) as u64,
        Some(s) => {
            return Err(crate::error::Error::InvalidArgument(format!(
                "keep_seconds must be a number of seconds >= 0, not {s}"
            ))
            .into())
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let p = on_manifest(py, path, storage_options, |io| {
        manifest::prune_in(io, keep_ms, now)
    })?;
    Ok((p.snapshots, p.commits, p.bodies))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(manifest_prune, m)?)?;
    m.add_function(wrap_pyfunction!(manifest_create, m)?)?;
    m.add_function(wrap_pyfunction!(manifest_compact, m)?)?;
    m.add_function(wrap_pyfunction!(manifest_index, m)?)?;
    m.add_function(wrap_pyfunction!(manifest_status, m)?)?;
    m.add("MANIFEST_DIR", manifest::DIR)?;
    Ok(())
}
