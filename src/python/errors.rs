//! Maps core errors to the Python exception hierarchy defined in `gulpio_rs/errors.py`
//! (defined in Python so classes can inherit from both `GulpError` and a builtin such as
//! `ValueError`). Each exception carries `path`, `video_id` and `frame` attributes.
//!
//! The mapping is `impl From<Error> for PyErr`, so binding functions use `?` on core results.

use pyo3::exceptions::{PyIndexError, PyKeyError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::error::{Error, RemoteKind};
use crate::jpeg::DecodeFailure;

/// The classes of `gulpio_rs.errors` that Rust raises, each imported once per interpreter.
#[derive(Clone, Copy)]
pub enum Class {
    Format,
    StaleIndex,
    CorruptData,
    Decode,
    UnsupportedJpeg,
    DuplicateId,
    BrokenChunkWarning,
    Remote,
    RemoteNotFound,
    RemotePermission,
    RemoteConfig,
}

impl Class {
    const ALL: usize = 11;

    fn name(self) -> &'static str {
        match self {
            Class::Format => "FormatError",
            Class::StaleIndex => "StaleIndexError",
            Class::CorruptData => "CorruptDataError",
            Class::Decode => "DecodeError",
            Class::UnsupportedJpeg => "UnsupportedJpegError",
            Class::DuplicateId => "DuplicateIdError",
            Class::BrokenChunkWarning => "BrokenChunkWarning",
            Class::Remote => "RemoteError",
            Class::RemoteNotFound => "RemoteNotFoundError",
            Class::RemotePermission => "RemotePermissionError",
            Class::RemoteConfig => "RemoteConfigError",
        }
    }

    pub fn get(self, py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
        static CLASSES: [PyOnceLock<Py<PyType>>; Class::ALL] =
            [const { PyOnceLock::new() }; Class::ALL];
        CLASSES[self as usize].import(py, "gulpio_rs.errors", self.name())
    }
}

/// An instance of `class` with the error's message and location attributes.
fn gulp_error(py: Python<'_>, class: Class, err: &Error) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let exc = class.get(py)?.call1((err.to_string(),))?;
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
        Error::Remote { url, .. } => (Some(url.clone()), None, None),
        Error::Jpeg(_) | Error::Video(_) | Error::InvalidArgument(_) | Error::Internal(_) => {
            (None, None, None)
        }
    }
}

fn to_py(py: Python<'_>, err: Error) -> PyErr {
    match &err {
        Error::Io { path, source } => match source.raw_os_error() {
            // OSError(errno, strerror, filename) becomes FileNotFoundError etc.
            Some(n) => PyOSError::new_err((n, source.to_string(), path.display().to_string())),
            None => PyOSError::new_err(err.to_string()),
        },
        Error::Format { .. } => gulp_error(py, Class::Format, &err),
        Error::StaleIndex { .. } => gulp_error(py, Class::StaleIndex, &err),
        Error::Crc { .. } => gulp_error(py, Class::CorruptData, &err),
        Error::Video(f) if f.corrupt => gulp_error(py, Class::CorruptData, &err),
        Error::Decode { .. } | Error::Jpeg(DecodeFailure::Corrupt(_)) | Error::Video(_) => {
            gulp_error(py, Class::Decode, &err)
        }
        Error::UnsupportedJpeg { .. } | Error::Jpeg(DecodeFailure::Unsupported(_)) => {
            gulp_error(py, Class::UnsupportedJpeg, &err)
        }
        Error::DuplicateId { .. } => gulp_error(py, Class::DuplicateId, &err),
        Error::UnknownId(id) => PyKeyError::new_err(id.clone()),
        Error::FrameOutOfRange { .. } => PyIndexError::new_err(err.to_string()),
        Error::InvalidArgument(m) => PyValueError::new_err(m.clone()),
        Error::Remote { kind, .. } => gulp_error(
            py,
            match kind {
                RemoteKind::NotFound => Class::RemoteNotFound,
                RemoteKind::Denied => Class::RemotePermission,
                RemoteKind::Config => Class::RemoteConfig,
                RemoteKind::Failed => Class::Remote,
            },
            &err,
        ),
        Error::Internal(_) => PyRuntimeError::new_err(err.to_string()),
    }
}

impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
        // Binding code holds the GIL already; attaching again only bumps a counter.
        Python::attach(|py| to_py(py, err))
    }
}

impl From<DecodeFailure> for PyErr {
    fn from(f: DecodeFailure) -> PyErr {
        Error::Jpeg(f).into()
    }
}
