//! JPEG: header inspection (for the index) and decoding (zune-jpeg, strict mode).

pub mod decode;
pub mod header;
