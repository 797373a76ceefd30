//! The binary chunk index (`.gidx`), versions 1 to 3. `docs/FORMAT.md` is the normative
//! description; this module is its only implementation. All integers are little-endian; every
//! CRC is CRC-32 (IEEE, as zlib's `crc32`).
//!
//! Layout: header (128 bytes) | video table (40 B per video) | ids (UTF-8, zero-padded to a
//! multiple of 8) | frame table (24 B per frame) | meta blob (each video's `meta_data` JSON) |
//! version 2 only: zero padding to a multiple of 8, then the restart table (where each
//! frame's restart markers are, for decoding only the rows a crop needs). Version 3 (chunks
//! with videos stored as segments, docs/FORMAT.md §6.3) always has the restart table, then the
//! stream and segment tables (`super::segments`), each at a multiple of 8. Writers use the
//! lowest version that holds the chunk, so indexes without segments read in older builds too.
//! Reading is two-step so that opening a directory stays cheap: [`Index::parse`] checks the
//! header, the video table and the ids (all a directory open needs); [`Index::verify_full`]
//! checks the frame table and meta blob, once, before a chunk is first read from.
//!
//! Each part has a file of its own: `header` (constants, limits, the fixed header and the
//! section layout), `check` (what is checked before bytes are believed), `parsed` (the
//! [`Index`] over checked bytes) and `build` (the [`IndexBuilder`] that writes one).

mod build;
mod check;
mod header;
mod parsed;

pub use super::frame::FrameRec;
pub use build::IndexBuilder;
pub use check::{check_frames, check_front, front_ids, front_len};
pub use header::{
    decode_header, encode_header, Header, VideoRec, FRAME_ENTRY_LEN, HEADER_LEN, MAGIC, MAX_FRAMES,
    MAX_FRAMES_PER_VIDEO, MAX_GULP_LEN, MAX_ID_LEN, MAX_JPEG_LEN, MAX_META_LEN, MAX_RESTARTS,
    MAX_VIDEOS, VERSION, VIDEO_ENTRY_LEN,
};
pub use parsed::Index;

#[cfg(test)]
mod tests;
