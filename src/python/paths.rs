//! The file naming rules of `format::paths`, for the Python side (ingest, repair, directory)
//! so that chunk and temporary-file names have one definition.

use pyo3::prelude::*;

use crate::format::paths::{self, FileKind};

/// `(data, meta, index)` file names of chunk `number`.
#[pyfunction]
pub fn chunk_file_names(number: u64) -> (String, String, String) {
    (
        FileKind::Data.file_name(number),
        FileKind::Meta.file_name(number),
        FileKind::Index.file_name(number),
    )
}

/// `(kind, number)` of a file named as this package names chunk files (`data_{k}.gulp`,
/// `meta_{k}.gmeta`, `data_{k}.gidx`; kind `"data"`, `"meta"` or `"index"`), else None.
#[pyfunction]
pub fn parse_chunk_file_name(name: &str) -> Option<(&'static str, u64)> {
    paths::parse_chunk_file_name(name).map(|(kind, k)| (kind.name(), k))
}

/// The chunk number a reader gives a file gulpio's globs list (`data*.gulp`, `meta*.gmeta`):
/// the first run of digits in the name. None for other names or names without digits.
#[pyfunction]
pub fn gulpio_chunk_number(name: &str) -> Option<u64> {
    paths::glob_kind(name)?;
    paths::chunk_number(std::path::Path::new(name))
}

/// `(target file name, pid)` if `name` is a chunk writer's temporary file, else None.
#[pyfunction]
pub fn parse_temp_name(name: &str) -> Option<(&str, u32)> {
    paths::parse_temp_name(name)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(chunk_file_names, m)?)?;
    m.add_function(wrap_pyfunction!(parse_chunk_file_name, m)?)?;
    m.add_function(wrap_pyfunction!(gulpio_chunk_number, m)?)?;
    m.add_function(wrap_pyfunction!(parse_temp_name, m)?)?;
    m.add("TEMP_PREFIX", paths::TMP_PREFIX)?;
    Ok(())
}
