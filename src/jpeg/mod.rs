//! JPEG: header inspection (for the index) and strict decoding (zune-jpeg, or libjpeg-turbo
//! with the `turbo` feature).

pub mod decode;
pub mod header;
#[cfg(feature = "turbo")]
mod turbo;
