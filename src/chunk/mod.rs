//! One chunk: reading (mmap + index) and writing (crash-safe publication).

pub mod reader;
pub mod writer;
