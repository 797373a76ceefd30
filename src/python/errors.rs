//! Maps core errors to the Python exception hierarchy defined in `gulpio_rs/errors.py`
//! (defined in Python so classes can inherit from both `GulpError` and a builtin such as
//! `ValueError`). Each exception carries `path`, `video_id` and `frame` attributes; so do the
//! builtin `KeyError`, `IndexError` and `ValueError` raised for an error that names a video.
//!
//! The mapping is `impl From<Error> for PyErr`, so binding functions use `?` on core results.

use pyo3::exceptions::{
    PyIndexError, PyKeyError, PyMemoryError, PyOSError, PyRuntimeError, PyValueError,
};
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
    UnsafeFile,
    WriteConflict,
}

impl Class {
    const ALL: usize = 13;

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
            Class::UnsafeFile => "UnsafeFileError",
            Class::WriteConflict => "WriteConflictError",
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
        Ok(located(py, PyErr::from_value(exc), err))
    };
    build().unwrap_or_else(|e| e)
}

/// `exc` with `path`, `video_id` and `frame` set from `err` (also on the builtin `KeyError`,
/// `IndexError` and `ValueError` raised for errors that name a video or frame).
fn located(py: Python<'_>, exc: PyErr, err: &Error) -> PyErr {
    let (path, id, frame) = context(err);
    let value = exc.value(py);
    let set = || -> PyResult<()> {
        value.setattr("path", path)?;
        value.setattr("video_id", id)?;
        value.setattr("frame", frame)
    };
    match set() {
        Ok(()) => exc,
        Err(e) => e,
    }
}

/// Where `err` is: the file (or URL), the video id and the frame (for `FrameOutOfRange`, the
/// index asked for); the video and frame are those `Error::at` names.
fn context(err: &Error) -> (Option<String>, Option<String>, Option<i64>) {
    let path = match err {
        Error::Io { path, .. }
        | Error::Format { path, .. }
        | Error::StaleIndex { path, .. }
        | Error::InvalidFor { path, .. }
        | Error::Crc { path, .. }
        | Error::SegmentCrc { path, .. }
        | Error::Decode { path, .. }
        | Error::UnsupportedJpeg { path, .. }
        | Error::FrameOutOfRange { path, .. }
        | Error::Unsafe { path, .. }
        | Error::Conflict { path, .. }
        | Error::DuplicateId { second: path, .. } => Some(path.display().to_string()),
        Error::Remote { url, .. } => Some(url.clone()),
        Error::UnknownId(_)
        | Error::Jpeg(_)
        | Error::Video(_)
        | Error::InvalidArgument(_)
        | Error::OutOfMemory { .. }
        | Error::Internal(_) => None,
    };
    let at = err.at();
    let frame = match err {
        Error::FrameOutOfRange { frame, .. } => Some(*frame),
        _ => at.as_ref().and_then(|a| a.frame).map(|k| k as i64),
    };
    (path, at.map(|a| a.id), frame)
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
        Error::Crc { .. } | Error::SegmentCrc { .. } => gulp_error(py, Class::CorruptData, &err),
        Error::Video(f) if f.corrupt => gulp_error(py, Class::CorruptData, &err),
        Error::Decode { .. } | Error::Jpeg(DecodeFailure::Corrupt(_)) | Error::Video(_) => {
            gulp_error(py, Class::Decode, &err)
        }
        Error::UnsupportedJpeg { .. } | Error::Jpeg(DecodeFailure::Unsupported(_)) => {
            gulp_error(py, Class::UnsupportedJpeg, &err)
        }
        Error::DuplicateId { .. } => gulp_error(py, Class::DuplicateId, &err),
        Error::Unsafe { .. } => gulp_error(py, Class::UnsafeFile, &err),
        Error::Conflict { .. } => gulp_error(py, Class::WriteConflict, &err),
        Error::UnknownId(id) => located(py, PyKeyError::new_err(id.clone()), &err),
        Error::FrameOutOfRange { .. } => located(py, PyIndexError::new_err(err.to_string()), &err),
        Error::InvalidFor { .. } => located(py, PyValueError::new_err(err.to_string()), &err),
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
        Error::OutOfMemory { .. } => PyMemoryError::new_err(err.to_string()),
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
