//! Maps core errors to the Python exception hierarchy defined in `gulpio_rs/errors.py`
//! (defined in Python so classes can inherit from both `GulpError` and a builtin such as
//! `ValueError`). Each exception carries `path`, `video_id` and `frame` attributes.

use pyo3::exceptions::{PyIndexError, PyKeyError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::error::Error;

fn gulp_error(py: Python<'_>, class: &str, err: &Error) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = PyModule::import(py, "gulpio_rs.errors")?;
        let cls = module.getattr(class)?;
        let exc = cls.call1((err.to_string(),))?;
        let (path, id, frame) = context(err);
        exc.setattr("path", path)?;
        exc.setattr("video_id", id)?;
        exc.setattr("frame", frame)?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

fn context(err: &Error) -> (Option<String>, Option<String>, Option<usize>) {
    let p = |p: &std::path::Path| Some(p.display().to_string());
    match err {
        Error::Io { path, .. } | Error::Format { path, .. } | Error::StaleIndex { path, .. } => {
            (p(path), None, None)
        }
        Error::Crc {
            path, id, frame, ..
        }
        | Error::Decode {
            path, id, frame, ..
        }
        | Error::UnsupportedJpeg {
            path, id, frame, ..
        } => (p(path), Some(id.clone()), Some(*frame)),
        Error::DuplicateId { id, second, .. } => (p(second), Some(id.clone()), None),
        Error::FrameOutOfRange { path, id, .. } => (p(path), Some(id.clone()), None),
        Error::UnknownId(id) => (None, Some(id.clone()), None),
        Error::InvalidArgument(_) | Error::Internal(_) => (None, None, None),
    }
}

pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    match &err {
        Error::Io { path, source } => {
            let errno = source.raw_os_error();
            match errno {
                // OSError(errno, strerror, filename) becomes FileNotFoundError etc.
                Some(n) => PyOSError::new_err((n, source.to_string(), path.display().to_string())),
                None => PyOSError::new_err(err.to_string()),
            }
        }
        Error::Format { .. } => gulp_error(py, "FormatError", &err),
        Error::StaleIndex { .. } => gulp_error(py, "StaleIndexError", &err),
        Error::Crc { .. } => gulp_error(py, "CorruptDataError", &err),
        Error::Decode { .. } => gulp_error(py, "DecodeError", &err),
        Error::UnsupportedJpeg { .. } => gulp_error(py, "UnsupportedJpegError", &err),
        Error::DuplicateId { .. } => gulp_error(py, "DuplicateIdError", &err),
        Error::UnknownId(id) => PyKeyError::new_err(id.clone()),
        Error::FrameOutOfRange { .. } => PyIndexError::new_err(err.to_string()),
        Error::InvalidArgument(m) => PyValueError::new_err(m.clone()),
        Error::Internal(_) => PyRuntimeError::new_err(err.to_string()),
    }
}

/// `?`-friendly conversion inside binding functions.
pub trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, Error> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

#[allow(dead_code)]
pub fn internal(msg: &str) -> PyErr {
    PyRuntimeError::new_err(msg.to_owned())
}
