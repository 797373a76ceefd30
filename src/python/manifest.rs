//! The dataset manifest's tools (`gulpio index`, `gulpio check`, `gulpio info`): thin
//! wrappers over `crate::manifest`, the GIL released while files are read and written.

use std::path::Path;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::manifest;

/// Records every chunk of a local dataset in its manifest (creating it if missing) and
/// compacts it: `{"created", "added", "replaced", "removed", "aborted", "version", "chunks",
/// "videos"}`.
#[pyfunction]
#[pyo3(signature = (path, abort_pending = false))]
pub fn manifest_index<'py>(
    py: Python<'py>,
    path: &str,
    abort_pending: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let r = py.detach(|| manifest::index(Path::new(path), abort_pending))?;
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(manifest_index, m)?)?;
    m.add_function(wrap_pyfunction!(manifest_status, m)?)?;
    m.add("MANIFEST_DIR", manifest::DIR)?;
    Ok(())
}
