//! gulpio-rs core: gulpio-compatible chunk storage with a checksummed index, mmap reads, JPEG
//! decoding and AV1 video-segment decoding. Pure Rust; the Python bindings live in `python/`
//! behind the `python` feature.

pub mod buffers;
pub mod chunk;
pub mod decode;
pub mod directory;
pub mod error;
pub mod format;
pub mod io;
pub mod jpeg;
pub mod manifest;
pub mod permute;
pub mod pixels;
pub mod pool;
pub mod verify;
pub mod video;

#[cfg(feature = "python")]
mod python;

pub use chunk::reader::ChunkReader;
pub use chunk::writer::{ChunkWriter, WriteMode};
pub use directory::Directory;
pub use error::{Error, Result};
pub use format::paths::ChunkPaths;
