//! The one error type of the core. Every variant carries enough context (file, video id, frame)
//! for the message alone to locate the problem; the Python layer maps variants to exception
//! classes (see `python/errors.rs`).

use std::io;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A file is not what the format says it must be (bad magic, bad JSON, a limit exceeded,
    /// an offset beyond the end of the data file, ...).
    #[error("{path}: {msg}")]
    Format { path: PathBuf, msg: String },

    /// An index exists but no longer describes its `.gulp`/`.gmeta` pair (or belongs to another
    /// chunk). It is never trusted.
    #[error("{path}: index does not match its chunk: {msg}")]
    StaleIndex { path: PathBuf, msg: String },

    /// Stored bytes do not match their recorded CRC32.
    #[error(
        "{path}: CRC mismatch in video {id:?} frame {frame} (bytes {offset}..{end}): \
         expected {expected:#010x}, found {actual:#010x}"
    )]
    Crc {
        path: PathBuf,
        id: String,
        frame: usize,
        offset: u64,
        end: u64,
        expected: u32,
        actual: u32,
    },

    #[error("{path}: cannot decode video {id:?} frame {frame}: {msg}")]
    Decode {
        path: PathBuf,
        id: String,
        frame: usize,
        msg: String,
    },

    /// The JPEG uses a feature the built-in decoder does not implement (arithmetic coding,
    /// 12-bit samples, ...). Distinct from `Decode` so callers can fall back to another decoder.
    #[error("{path}: video {id:?} frame {frame}: unsupported JPEG: {msg}")]
    UnsupportedJpeg {
        path: PathBuf,
        id: String,
        frame: usize,
        msg: String,
    },

    #[error("duplicate video id {id:?} in {first} and {second}")]
    DuplicateId {
        id: String,
        first: PathBuf,
        second: PathBuf,
    },

    #[error("unknown video id {0:?}")]
    UnknownId(String),

    #[error("{path}: video {id:?} has {count} frames; frame index {frame} is out of range")]
    FrameOutOfRange {
        path: PathBuf,
        id: String,
        frame: i64,
        count: usize,
    },

    /// A JPEG given on its own (not a stored frame, which gets `Decode`/`UnsupportedJpeg` with
    /// its location) cannot be decoded or has no usable frame header.
    #[error("{0}")]
    Jpeg(#[from] crate::jpeg::DecodeFailure),

    /// A video segment given on its own (not a stored one, which gets `Decode` with its
    /// location) cannot be decoded.
    #[error("{0}")]
    Video(#[from] crate::video::SegmentFailure),

    /// A bad argument from the caller (a mode string, a size, a closed writer, ...).
    #[error("{0}")]
    InvalidArgument(String),

    /// A request to an object store failed for good (after retries for transient faults).
    /// `url` names the object; `msg` never holds a secret.
    #[error("{url}: {msg}")]
    Remote {
        url: String,
        kind: RemoteKind,
        msg: String,
    },

    /// Something that should not happen whatever the input: a poisoned lock, threads that
    /// cannot be started, an internal size mismatch. A bug or a sick machine, not bad data.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why a remote request failed, for the Python exception type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteKind {
    /// 404: the object (or bucket) does not exist.
    NotFound,
    /// 401/403: the credentials in use were refused.
    Denied,
    /// The URL or `storage_options` are not usable.
    Config,
    /// Transient faults that outlasted the retries, or a permanent server error.
    Failed,
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn format(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            msg: msg.into(),
        }
    }

    pub fn stale(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::StaleIndex {
            path: path.into(),
            msg: msg.into(),
        }
    }
}

impl Clone for Error {
    /// `io::Error` is not `Clone`; a copy keeps its kind, OS code and message.
    fn clone(&self) -> Self {
        match self {
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Format { path, msg } => Error::Format {
                path: path.clone(),
                msg: msg.clone(),
            },
            Error::StaleIndex { path, msg } => Error::StaleIndex {
                path: path.clone(),
                msg: msg.clone(),
            },
            Error::Crc {
                path,
                id,
                frame,
                offset,
                end,
                expected,
                actual,
            } => Error::Crc {
                path: path.clone(),
                id: id.clone(),
                frame: *frame,
                offset: *offset,
                end: *end,
                expected: *expected,
                actual: *actual,
            },
            Error::Decode {
                path,
                id,
                frame,
                msg,
            } => Error::Decode {
                path: path.clone(),
                id: id.clone(),
                frame: *frame,
                msg: msg.clone(),
            },
            Error::UnsupportedJpeg {
                path,
                id,
                frame,
                msg,
            } => Error::UnsupportedJpeg {
                path: path.clone(),
                id: id.clone(),
                frame: *frame,
                msg: msg.clone(),
            },
            Error::DuplicateId { id, first, second } => Error::DuplicateId {
                id: id.clone(),
                first: first.clone(),
                second: second.clone(),
            },
            Error::UnknownId(id) => Error::UnknownId(id.clone()),
            Error::FrameOutOfRange {
                path,
                id,
                frame,
                count,
            } => Error::FrameOutOfRange {
                path: path.clone(),
                id: id.clone(),
                frame: *frame,
                count: *count,
            },
            Error::Jpeg(f) => Error::Jpeg(f.clone()),
            Error::Video(f) => Error::Video(f.clone()),
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Remote { url, kind, msg } => Error::Remote {
                url: url.clone(),
                kind: *kind,
                msg: msg.clone(),
            },
            Error::Internal(m) => Error::Internal(m.clone()),
        }
    }
}

/// Extension for `io::Result` so I/O errors always carry the path they concern.
pub trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}
