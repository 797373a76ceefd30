//! One chunk: reading (mmap + index) and writing (crash-safe publication).

pub mod probe;
pub mod reader;
mod rebuild;
pub mod writer;
