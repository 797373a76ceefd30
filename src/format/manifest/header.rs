//! The 256-byte header every manifest table file starts with (docs/FORMAT.md §7.2), and the
//! section layout it implies.

use super::super::bytes::{u32_at, u64_at};

pub const MAGIC: [u8; 8] = *b"GULPMAN\0";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 256;
const HEADER_CRC_AT: usize = 252;

/// Bytes per record of the chunk table and per row of the video table.
pub const CHUNK_RECORD_LEN: usize = 64;
pub const VIDEO_ROW_LEN: usize = 16;
/// The page size writers use (2^16 = 64 KiB); readers accept 2^12 to 2^20.
pub const PAGE_SHIFT: u8 = 16;
pub const MIN_PAGE_SHIFT: u8 = 12;
pub const MAX_PAGE_SHIFT: u8 = 20;
/// "None" for `base_version` and `max_chunk`.
pub const NONE: u64 = u64::MAX;
/// Videos a chunk record may describe (a chunk's index holds fewer).
pub const MAX_CHUNK_VIDEOS: u64 = 1 << 24;
/// Limits on what a header may declare, so that a damaged or hostile one cannot make a reader
/// allocate or fetch without bound before a CRC has been checked: the front is held whole.
pub const MAX_FRONT_LEN: u64 = 256 << 20;
/// Video rows name their id by a u32 slot, and id pages their first slot by one.
pub const MAX_VIDEOS: u64 = u32::MAX as u64;
pub const MAX_CHUNKS: u64 = 1 << 32;

/// What a table file is (`kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The whole state at one version.
    Snapshot = 1,
    /// A commit with its tables.
    Commit = 2,
    /// A commit whose tables are in a body file; the file is this header alone.
    CommitInBody = 3,
    /// The tables of a kind 3 commit.
    Body = 4,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Snapshot),
            2 => Some(Kind::Commit),
            3 => Some(Kind::CommitInBody),
            4 => Some(Kind::Body),
            _ => None,
        }
    }

    /// Sections start at multiples of this: a page of the OS for snapshots, which are mapped
    /// and shared by every process of a machine.
    pub fn section_align(self) -> u64 {
        match self {
            Kind::Snapshot => 4096,
            _ => 8,
        }
    }
}

/// The header's fields (docs/FORMAT.md §7.2). Offsets and lengths are checked against each
/// other by [`decode_header`]; the front's own length is checked against the counts once the
/// front is read (`front::Front::parse`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    /// Bit 0 of `flags`: the file describes the whole dataset.
    pub full: bool,
    pub page_shift: u8,
    pub dataset_version: u64,
    pub base_version: u64,
    pub dataset_id: [u8; 16],
    pub chunk_count: u64,
    pub video_count: u64,
    pub frame_count: u64,
    pub id_bytes: u64,
    pub max_chunk: u64,
    pub pending_count: u64,
    pub id_page_count: u64,
    pub front_len: u64,
    pub chunk_table_off: u64,
    pub id_table_off: u64,
    pub id_table_len: u64,
    pub video_table_off: u64,
    pub file_len: u64,
    pub front_crc: u32,
    pub created_ms: u64,
    pub body_id: [u8; 16],
    pub body_len: u64,
    pub body_header_crc: u32,
    pub tail_videos: u64,
}

impl Header {
    pub fn page_size(&self) -> u64 {
        1 << self.page_shift
    }
    pub fn chunks_per_page(&self) -> u64 {
        self.page_size() / CHUNK_RECORD_LEN as u64
    }
    pub fn rows_per_page(&self) -> u64 {
        self.page_size() / VIDEO_ROW_LEN as u64
    }
    pub fn chunk_page_count(&self) -> u64 {
        self.chunk_count.div_ceil(self.chunks_per_page())
    }
    pub fn video_page_count(&self) -> u64 {
        self.video_count.div_ceil(self.rows_per_page())
    }
}

pub fn encode_header(h: &Header) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
    put(0, &MAGIC);
    put(8, &VERSION.to_le_bytes());
    put(12, &(HEADER_LEN as u32).to_le_bytes());
    put(16, &[h.kind as u8, u8::from(h.full), h.page_shift]);
    put(24, &h.dataset_version.to_le_bytes());
    put(32, &h.base_version.to_le_bytes());
    put(40, &h.dataset_id);
    put(56, &h.chunk_count.to_le_bytes());
    put(64, &h.video_count.to_le_bytes());
    put(72, &h.frame_count.to_le_bytes());
    put(80, &h.id_bytes.to_le_bytes());
    put(88, &h.max_chunk.to_le_bytes());
    put(96, &h.pending_count.to_le_bytes());
    put(104, &h.id_page_count.to_le_bytes());
    put(112, &h.front_len.to_le_bytes());
    put(120, &h.chunk_table_off.to_le_bytes());
    put(128, &h.id_table_off.to_le_bytes());
    put(136, &h.id_table_len.to_le_bytes());
    put(144, &h.video_table_off.to_le_bytes());
    put(152, &h.file_len.to_le_bytes());
    put(160, &h.front_crc.to_le_bytes());
    put(168, &h.created_ms.to_le_bytes());
    put(176, &h.body_id);
    put(192, &h.body_len.to_le_bytes());
    put(200, &h.body_header_crc.to_le_bytes());
    put(208, &h.tail_videos.to_le_bytes());
    let crc = crc32fast::hash(&b[..HEADER_CRC_AT]);
    b[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The header's CRC, bytes `[252, 256)` (what `LATEST` and a kind 3 commit bind to).
pub fn header_crc(b: &[u8; HEADER_LEN]) -> u32 {
    u32_at(b, HEADER_CRC_AT)
}

/// Parses and checks the header: magic, version, CRC, reserved bytes, limits, and that the
/// sections it places follow each other inside `file_len` as §7.2 lays them out.
pub fn decode_header(b: &[u8]) -> Result<Header, String> {
    if b.len() < HEADER_LEN {
        return Err(format!(
            "a manifest file of {} bytes, shorter than its {HEADER_LEN}-byte header",
            b.len()
        ));
    }
    if b[0..8] != MAGIC {
        return Err("not a gulpio-rs manifest file (bad magic)".into());
    }
    let crc = crc32fast::hash(&b[..HEADER_CRC_AT]);
    if crc != u32_at(b, HEADER_CRC_AT) {
        return Err(format!(
            "manifest header CRC mismatch: expected {:#010x}, found {crc:#010x}",
            u32_at(b, HEADER_CRC_AT)
        ));
    }
    let version = u32_at(b, 8);
    if version != VERSION {
        return Err(format!(
            "manifest format version {version}; this build reads version {VERSION}"
        ));
    }
    if u32_at(b, 12) as usize != HEADER_LEN {
        return Err("manifest header length field is not 256".into());
    }
    let kind = Kind::from_u8(b[16]).ok_or_else(|| format!("unknown manifest kind {}", b[16]))?;
    if b[17] & !1 != 0 {
        return Err(format!("unknown manifest flags {:#04x}", b[17]));
    }
    let page_shift = b[18];
    if !(MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT).contains(&page_shift) {
        return Err(format!(
            "manifest page shift {page_shift} is outside {MIN_PAGE_SHIFT}..={MAX_PAGE_SHIFT}"
        ));
    }
    let zero = |r: std::ops::Range<usize>| b[r].iter().all(|&x| x == 0);
    if !(zero(19..24) && zero(164..168) && zero(204..208) && zero(216..252)) {
        return Err("reserved manifest header bytes are not zero".into());
    }
    let id16 = |at: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[at..at + 16]);
        a
    };
    let h = Header {
        kind,
        full: b[17] & 1 == 1,
        page_shift,
        dataset_version: u64_at(b, 24),
        base_version: u64_at(b, 32),
        dataset_id: id16(40),
        chunk_count: u64_at(b, 56),
        video_count: u64_at(b, 64),
        frame_count: u64_at(b, 72),
        id_bytes: u64_at(b, 80),
        max_chunk: u64_at(b, 88),
        pending_count: u64_at(b, 96),
        id_page_count: u64_at(b, 104),
        front_len: u64_at(b, 112),
        chunk_table_off: u64_at(b, 120),
        id_table_off: u64_at(b, 128),
        id_table_len: u64_at(b, 136),
        video_table_off: u64_at(b, 144),
        file_len: u64_at(b, 152),
        front_crc: u32_at(b, 160),
        created_ms: u64_at(b, 168),
        body_id: id16(176),
        body_len: u64_at(b, 192),
        body_header_crc: u32_at(b, 200),
        tail_videos: u64_at(b, 208),
    };
    check_layout(&h)?;
    Ok(h)
}

fn check_layout(h: &Header) -> Result<(), String> {
    let bad = |what: &str| Err(format!("manifest header: {what}"));
    if h.chunk_count > MAX_CHUNKS || h.video_count > MAX_VIDEOS {
        return bad("more chunks or videos than a manifest may hold");
    }
    if h.pending_count != 0 && h.kind != Kind::Snapshot {
        return bad("a pending table outside a snapshot");
    }
    if h.kind != Kind::CommitInBody && (h.body_id != [0; 16] || h.body_len != 0) {
        return bad("a body reference outside a kind 3 commit");
    }
    if h.kind == Kind::CommitInBody {
        return if h.front_len == HEADER_LEN as u64
            && h.file_len == HEADER_LEN as u64
            && h.chunk_table_off == 0
            && h.id_table_off == 0
            && h.id_table_len == 0
            && h.video_table_off == 0
            && h.id_page_count == 0
            && h.body_len >= HEADER_LEN as u64
        {
            Ok(())
        } else {
            bad("a kind 3 commit must be its header alone, pointing at its body")
        };
    }
    if (h.video_count == 0) != (h.id_page_count == 0) || h.id_page_count > h.video_count {
        return bad("id page count does not fit the video count");
    }
    if h.video_count > 0 && h.chunk_count == 0 {
        return bad("videos without a chunk");
    }
    let align = h.kind.section_align();
    let chunks_end = h.chunk_count * CHUNK_RECORD_LEN as u64;
    let videos_len = h.video_count * VIDEO_ROW_LEN as u64;
    let ordered = h.front_len >= HEADER_LEN as u64
        && h.front_len <= MAX_FRONT_LEN
        && h.chunk_table_off >= h.front_len
        && h.chunk_table_off.is_multiple_of(align)
        && h.id_table_off >= h.chunk_table_off + chunks_end
        && h.id_table_off.is_multiple_of(align)
        && h.video_table_off >= h.id_table_off.saturating_add(h.id_table_len)
        && h.video_table_off.is_multiple_of(align)
        && h.video_table_off.checked_add(videos_len) == Some(h.file_len);
    if !ordered {
        return bad("sections out of order, misaligned, or not ending the file");
    }
    // The gaps between sections are padding to the next alignment, nothing more.
    let gap_ok = |end: u64, next: u64| next - end < align;
    if !(gap_ok(h.front_len, h.chunk_table_off)
        && gap_ok(h.chunk_table_off + chunks_end, h.id_table_off)
        && gap_ok(h.id_table_off + h.id_table_len, h.video_table_off))
    {
        return bad("sections separated by more than their alignment");
    }
    Ok(())
}
