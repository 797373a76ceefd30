//! A frame's entry in the index's frame table (docs/FORMAT.md): where its JPEG is in the
//! `.gulp`, its CRC and size. Both `index` (the table) and `segments` (segments stored as
//! runs of frame records) use it.

/// One stored frame. `channels` and the size come from the JPEG's SOF header (0 = unknown,
/// only in indexes built in memory for legacy chunks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FrameRec {
    pub offset: u64,
    pub jpeg_len: u32,
    pub crc: u32,
    pub width: u16,
    pub height: u16,
    pub channels: u8,
    pub pad: u8,
}

impl FrameRec {
    /// `[loc, pad, length]` as gulpio's `.gmeta` stores it (length includes the padding).
    pub fn frame_info(&self) -> (u64, u64, u64) {
        (
            self.offset,
            self.pad as u64,
            self.jpeg_len as u64 + self.pad as u64,
        )
    }
    pub fn jpeg_end(&self) -> u64 {
        self.offset + self.jpeg_len as u64
    }
    pub fn record_end(&self) -> u64 {
        self.jpeg_end() + self.pad as u64
    }
}
