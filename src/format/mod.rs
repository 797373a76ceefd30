//! On-disk formats: the binary checksummed index (`index`, its frame records `frame`), the
//! dataset manifest's table files (`manifest`, docs/FORMAT.md §7) and the index's
//! segment tables (`segments`, with the codec ids and segment limits they record), gulpio's
//! JSON meta file (`gmeta`, `json`), and the file naming rules of a chunk (`paths`). Pure
//! functions over bytes; no I/O policy, no decoder.

pub(crate) mod bytes;
pub mod frame;
pub mod gmeta;
pub mod index;
pub mod json;
pub mod manifest;
pub mod paths;
pub mod segments;

/// Byte storage of a file as read: an mmap for files on disk, a vector for indexes built in
/// memory from legacy `.gmeta` files.
pub enum Storage {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
    Empty,
}

impl std::ops::Deref for Storage {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::Mapped(m) => m,
            Storage::Empty => &[],
        }
    }
}

/// Zero padding that gulpio appends after each JPEG so records are 4-byte multiples.
pub fn pad_for(len: u64) -> u8 {
    ((4 - len % 4) % 4) as u8
}
