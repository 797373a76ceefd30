//! One chunk: reading (mmap + index) and writing (crash-safe publication).

pub mod reader;
pub mod writer;

use std::fs::File;
use std::path::Path;

use crate::error::{IoContext, Result};
use crate::format::Storage;

/// Maps a whole file read-only. Files are never modified in place below their published
/// length (see docs/FORMAT.md), which is what makes holding a mapping sound.
pub(crate) fn map_file(path: &Path) -> Result<Storage> {
    let file = File::open(path).at(path)?;
    let len = file.metadata().at(path)?.len();
    if len == 0 {
        return Ok(Storage::Empty);
    }
    // SAFETY: the mapping is read-only and our writers never rewrite or truncate published
    // bytes; external truncation of a mapped file is documented as unsupported.
    let map = unsafe { memmap2::Mmap::map(&file) }.at(path)?;
    Ok(Storage::Mapped(map))
}
