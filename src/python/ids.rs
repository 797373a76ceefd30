//! Video ids from Python. Every stored id is UTF-8; a `str` holding a lone surrogate cannot
//! be encoded as UTF-8, so no stored id can equal it. Lookups treat it as any other id that is
//! not there (`None`, `KeyError`, `False` for `in`) instead of raising `UnicodeEncodeError`.

use std::borrow::Cow;

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// The id as stored ids are spelled, or `None` if no stored id can be this one.
pub fn stored<'a>(id: &'a Bound<'_, PyString>) -> Option<Cow<'a, str>> {
    id.to_cow().ok()
}

/// The `KeyError` of an unknown id: the id as given, also as `video_id` (as the core's).
pub fn unknown(id: &Bound<'_, PyString>) -> PyErr {
    let err = PyKeyError::new_err(id.clone().unbind());
    match err.value(id.py()).setattr("video_id", id) {
        Ok(()) => err,
        Err(e) => e,
    }
}
