//! One chunk: reading (mmap + index) and writing (crash-safe publication).

pub mod probe;
pub mod reader;
pub mod rebuild;
pub mod writer;

#[cfg(test)]
pub(crate) mod testing;
