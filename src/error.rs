//! The one error type of the core. Every variant carries enough context (file, video id, frame)
//! for the message alone to locate the problem; the Python layer maps variants to exception
//! classes (see `python/errors.rs`).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a JPEG did not decode, from either backend (`jpeg::turbo`, `jpeg::zune`); defined here
/// so that the error type depends on nothing above it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeFailure {
    /// A valid JPEG using a feature the backend lacks (arithmetic coding with zune-jpeg,
    /// 12-bit, lossless).
    #[error("{0}")]
    Unsupported(String),
    /// Damaged or not a JPEG.
    #[error("{0}")]
    Corrupt(String),
}

impl DecodeFailure {
    pub fn message(&self) -> &str {
        match self {
            DecodeFailure::Unsupported(m) | DecodeFailure::Corrupt(m) => m,
        }
    }
}

/// A segment that cannot be decoded (`video::decode_segment` and its siblings). `frame` is
/// the frame (within the segment) it concerns, when one does; the reader adds the file, video
/// and frame numbers (`Error::Decode`). `corrupt`: the bytes are not the ones stored (their
/// CRC differs from the recorded one), so nothing was decoded (the reader's `Error::Crc`).
/// Defined here, like [`DecodeFailure`], so that the error type depends on nothing above it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{msg}")]
pub struct SegmentFailure {
    pub frame: Option<usize>,
    pub msg: String,
    pub corrupt: bool,
}

impl SegmentFailure {
    pub(crate) fn new(msg: impl Into<String>) -> Self {
        SegmentFailure {
            frame: None,
            msg: msg.into(),
            corrupt: false,
        }
    }
    pub(crate) fn at(frame: usize, msg: impl Into<String>) -> Self {
        SegmentFailure {
            frame: Some(frame),
            ..SegmentFailure::new(msg)
        }
    }
}

/// `Clone` because one failure can be the answer to several requests (a remote fetch shared
/// by the reads that wait on it); `io::Error` is not `Clone`, so it is shared.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },

    /// A file is not what the format says it must be (bad magic, bad JSON, a limit exceeded,
    /// an offset beyond the end of the data file, ...); `at` when it concerns one video (or
    /// frame) of a chunk, such as a frame a truncated `.gulp` cut.
    #[error("{path}: {}{msg}", At::prefix(.at))]
    Format {
        path: PathBuf,
        at: Option<At>,
        msg: String,
    },

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

    /// The stream bytes of a video segment (docs/FORMAT.md §6) do not match their recorded
    /// CRC32: named by the frames the segment holds (`frames`, half-open, the frames any read
    /// of it needs), its number within the video and its byte range, whichever frame was
    /// asked for and whichever of its bytes are damaged.
    #[error(
        "{path}: CRC mismatch in video {id:?} frames {}..{} (segment {segment}, bytes \
         {offset}..{end}): expected {expected:#010x}, found {actual:#010x}",
        .frames.start,
        .frames.end
    )]
    SegmentCrc {
        path: PathBuf,
        id: String,
        segment: usize,
        frames: std::ops::Range<usize>,
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

    /// A caller's argument that is wrong for one stored video (or frame): a crop that does not
    /// fit it, a frame to store that is not a JPEG, metadata that is not JSON.
    #[error("{path}: {at}: {msg}")]
    InvalidFor { path: PathBuf, at: At, msg: String },

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
    Jpeg(#[from] DecodeFailure),

    /// A write, truncation or deletion refused because the file is not safe to change: a
    /// symlink (it may lead outside the dataset), not a regular file, or a file with other
    /// hard links.
    #[error("{path}: {msg}")]
    Unsafe { path: PathBuf, msg: String },

    /// Another writer got there first: the chunk is being written by another writer, or a
    /// chunk was published under the name this writer meant to create.
    #[error("{path}: {msg}")]
    Conflict { path: PathBuf, msg: String },

    /// A video segment given on its own (not a stored one, which gets `Decode` with its
    /// location) cannot be decoded.
    #[error("{0}")]
    Video(#[from] SegmentFailure),

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

    /// Memory for a result could not be allocated: `bytes` asked for `what` (with how to ask
    /// for less). Raised as `MemoryError`, where an infallible allocation would abort.
    #[error("cannot allocate {bytes} bytes for {what}")]
    OutOfMemory { bytes: u64, what: String },

    /// Something that should not happen whatever the input: a poisoned lock, threads that
    /// cannot be started, an internal size mismatch. A bug or a sick machine, not bad data.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The video (and frame) of a chunk an error is about. Every error whose message names a
/// video carries it as data too, so the Python exception's `video_id` and `frame` are set
/// (`python/errors.rs`) and the text cannot say something the attributes do not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At {
    pub id: String,
    pub frame: Option<usize>,
}

impl At {
    pub fn video(id: impl Into<String>) -> Self {
        At {
            id: id.into(),
            frame: None,
        }
    }

    pub fn frame(id: impl Into<String>, frame: usize) -> Self {
        At {
            id: id.into(),
            frame: Some(frame),
        }
    }

    /// `video "id" frame k: ` (or nothing), to start a message with.
    fn prefix(at: &Option<At>) -> String {
        at.as_ref().map_or_else(String::new, |at| format!("{at}: "))
    }
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "video {:?}", self.id)?;
        match self.frame {
            Some(k) => write!(f, " frame {k}"),
            None => Ok(()),
        }
    }
}

/// What a parser or index builder found wrong, with the video (and frame) it concerns when
/// there is one. Whoever knows the file turns it into an [`Error`] (`Error::format`, which
/// keeps the location), so format errors about one video carry it as data too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub at: Option<At>,
    pub msg: String,
}

impl Problem {
    pub fn at(at: At, msg: impl Into<String>) -> Self {
        Problem {
            at: Some(at),
            msg: msg.into(),
        }
    }
}

impl From<String> for Problem {
    fn from(msg: String) -> Self {
        Problem { at: None, msg }
    }
}

impl From<&str> for Problem {
    fn from(msg: &str) -> Self {
        msg.to_owned().into()
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", At::prefix(&self.at), self.msg)
    }
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
            source: Arc::new(source),
        }
    }

    /// A format error in `path`; a [`Problem`] about one video keeps that location.
    pub fn format(path: impl Into<PathBuf>, problem: impl Into<Problem>) -> Self {
        let Problem { at, msg } = problem.into();
        Error::Format {
            path: path.into(),
            at,
            msg,
        }
    }

    /// A format error about one video (or frame): its message starts with where.
    pub fn format_at(path: impl Into<PathBuf>, at: At, msg: impl Into<String>) -> Self {
        Error::format(path, Problem::at(at, msg))
    }

    /// The video (and frame) this error is about, if it names one.
    pub fn at(&self) -> Option<At> {
        match self {
            Error::Format { at, .. } => at.clone(),
            Error::InvalidFor { at, .. } => Some(at.clone()),
            Error::Crc { id, frame, .. }
            | Error::Decode { id, frame, .. }
            | Error::UnsupportedJpeg { id, frame, .. } => Some(At::frame(id.clone(), *frame)),
            // The segment's first frame: `frames` in the message says the rest.
            Error::SegmentCrc { id, frames, .. } => Some(At::frame(id.clone(), frames.start)),
            Error::DuplicateId { id, .. } | Error::FrameOutOfRange { id, .. } => {
                Some(At::video(id.clone()))
            }
            Error::UnknownId(id) => Some(At::video(id.clone())),
            Error::Io { .. }
            | Error::StaleIndex { .. }
            | Error::Jpeg(_)
            | Error::Video(_)
            | Error::InvalidArgument(_)
            | Error::Remote { .. }
            | Error::Unsafe { .. }
            | Error::Conflict { .. }
            | Error::OutOfMemory { .. }
            | Error::Internal(_) => None,
        }
    }

    /// A caller's data refused while writing `path`: `InvalidFor` when the problem is about
    /// one video, else `InvalidArgument` naming the file.
    pub fn refused(path: impl Into<PathBuf>, problem: Problem) -> Self {
        let path = path.into();
        match problem.at {
            Some(at) => Error::InvalidFor {
                path,
                at,
                msg: problem.msg,
            },
            None => Error::InvalidArgument(format!("{}: {}", path.display(), problem.msg)),
        }
    }

    /// An argument that is wrong for one stored video (or frame).
    pub fn invalid_for(path: impl Into<PathBuf>, at: At, msg: impl Into<String>) -> Self {
        Error::InvalidFor {
            path: path.into(),
            at,
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
/// Extension for `io::Result` so I/O errors always carry the path they concern.
pub trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}
