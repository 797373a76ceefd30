//! The fixed part of an index: its constants and limits, the 128-byte header (encode,
//! decode and check) and the section layout the header's counts imply.

use crate::format::bytes::{u32_at, u64_at};
use crate::format::segments::{MAX_SEGMENTS, SEGMENT_ENTRY_LEN, STREAM_ENTRY_LEN};

pub const MAGIC: [u8; 8] = *b"GULPIDX\0";
/// The newest version: written when the chunk has a video stored as segments; 2 when some
/// frame has restart markers; 1 otherwise.
pub const VERSION: u32 = 3;
pub const HEADER_LEN: usize = 128;
pub const VIDEO_ENTRY_LEN: usize = 40;
pub const FRAME_ENTRY_LEN: usize = 24;
const HEADER_CRC_AT: usize = 124;

/// Limits. They bound what a hostile or damaged index can make a reader do; nothing is
/// allocated from a declared size before the file length has confirmed it.
pub const MAX_VIDEOS: u64 = 1 << 24;
pub const MAX_FRAMES: u64 = 1 << 28;
pub const MAX_ID_LEN: u32 = 65_535;
pub const MAX_META_LEN: u32 = 16 << 20;
pub const MAX_FRAMES_PER_VIDEO: u32 = 1 << 24;
/// 1 GiB: far above any real frame, and small enough that `u32` arithmetic stays exact.
pub const MAX_JPEG_LEN: u32 = 1 << 30;
pub const MAX_GULP_LEN: u64 = 1 << 48;
/// Restart marker positions in one index (they are `u32` offsets into a `u32` table).
pub const MAX_RESTARTS: u64 = u32::MAX as u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub video_count: u64,
    pub frame_count: u64,
    pub ids_len: u64,
    pub meta_len: u64,
    /// Published length of the `.gulp`: bytes past it are an unpublished tail.
    pub gulp_len: u64,
    pub gmeta_len: u64,
    pub gulp_crc: u32,
    pub gmeta_crc: u32,
    pub videos_crc: u32,
    pub ids_crc: u32,
    pub frames_crc: u32,
    pub meta_crc: u32,
    /// 1, or 2 with a restart table.
    pub version: u32,
    /// Version 2: restart marker positions in the table, and the table's CRC.
    pub restarts_len: u64,
    pub restarts_crc: u32,
    /// Version 3: videos stored as segments, segments, and the two tables' CRCs.
    pub stream_count: u32,
    pub streams_crc: u32,
    pub segment_count: u64,
    pub segments_crc: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct VideoRec {
    pub frame_start: u64,
    pub frame_count: u32,
    pub id_len: u32,
    pub id_off: u64,
    pub meta_off: u64,
    pub meta_len: u32,
    /// Version 3: 0 for a video of JPEG frames, `s` for the one stream entry `s - 1` describes.
    pub stream: u32,
}

pub(super) fn pad8(n: u64) -> u64 {
    (8 - n % 8) % 8
}

/// Byte offsets of the sections, derived from the header counts with checked arithmetic.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    pub(super) videos_at: usize,
    pub(super) ids_at: usize,
    pub(super) frames_at: usize,
    pub(super) meta_at: usize,
    /// End of the meta blob; version 2: the restart table starts at the next multiple of 8.
    pub(super) meta_end: usize,
    pub(super) restarts_at: usize,
    pub(super) restarts_end: usize,
    /// Version 3: the stream table, then the segment table (its end is `total`).
    pub(super) streams_at: usize,
    pub(super) segments_at: usize,
    pub(super) total: u64,
}

impl Layout {
    pub(super) fn of(h: &Header) -> Result<Layout, String> {
        let overflow = || "section sizes overflow".to_string();
        let videos_len = h
            .video_count
            .checked_mul(VIDEO_ENTRY_LEN as u64)
            .ok_or_else(overflow)?;
        let frames_len = h
            .frame_count
            .checked_mul(FRAME_ENTRY_LEN as u64)
            .ok_or_else(overflow)?;
        let ids_at = (HEADER_LEN as u64)
            .checked_add(videos_len)
            .ok_or_else(overflow)?;
        let frames_at = ids_at
            .checked_add(h.ids_len)
            .and_then(|x| x.checked_add(pad8(h.ids_len)))
            .ok_or_else(overflow)?;
        let meta_at = frames_at.checked_add(frames_len).ok_or_else(overflow)?;
        let meta_end = meta_at.checked_add(h.meta_len).ok_or_else(overflow)?;
        let (restarts_at, restarts_end) = if h.version >= 2 {
            // Starts of each frame's markers (one more than frames), then the markers.
            let entries = h
                .frame_count
                .checked_add(1)
                .and_then(|n| n.checked_add(h.restarts_len))
                .and_then(|n| n.checked_mul(4))
                .ok_or_else(overflow)?;
            let at = meta_end.checked_add(pad8(meta_end)).ok_or_else(overflow)?;
            (at, at.checked_add(entries).ok_or_else(overflow)?)
        } else {
            (meta_end, meta_end)
        };
        let (streams_at, segments_at, total) = if h.version >= 3 {
            let streams_at = restarts_end
                .checked_add(pad8(restarts_end))
                .ok_or_else(overflow)?;
            // Stream entries are 32 bytes: the segment table starts at a multiple of 8 too.
            let segments_at = (h.stream_count as u64)
                .checked_mul(STREAM_ENTRY_LEN as u64)
                .and_then(|n| n.checked_add(streams_at))
                .ok_or_else(overflow)?;
            let total = h
                .segment_count
                .checked_mul(SEGMENT_ENTRY_LEN as u64)
                .and_then(|n| n.checked_add(segments_at))
                .ok_or_else(overflow)?;
            (streams_at, segments_at, total)
        } else {
            (restarts_end, restarts_end, restarts_end)
        };
        let to_usize = |x: u64| usize::try_from(x).map_err(|_| overflow());
        Ok(Layout {
            videos_at: HEADER_LEN,
            ids_at: to_usize(ids_at)?,
            frames_at: to_usize(frames_at)?,
            meta_at: to_usize(meta_at)?,
            meta_end: to_usize(meta_end)?,
            restarts_at: to_usize(restarts_at)?,
            restarts_end: to_usize(restarts_end)?,
            streams_at: to_usize(streams_at)?,
            segments_at: to_usize(segments_at)?,
            total,
        })
    }
}

pub fn encode_header(h: &Header) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&h.version.max(1).to_le_bytes());
    b[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    b[16..24].copy_from_slice(&h.video_count.to_le_bytes());
    b[24..32].copy_from_slice(&h.frame_count.to_le_bytes());
    b[32..40].copy_from_slice(&h.ids_len.to_le_bytes());
    b[40..48].copy_from_slice(&h.meta_len.to_le_bytes());
    b[48..56].copy_from_slice(&h.gulp_len.to_le_bytes());
    b[56..64].copy_from_slice(&h.gmeta_len.to_le_bytes());
    b[64..68].copy_from_slice(&h.gulp_crc.to_le_bytes());
    b[68..72].copy_from_slice(&h.gmeta_crc.to_le_bytes());
    b[72..76].copy_from_slice(&h.videos_crc.to_le_bytes());
    b[76..80].copy_from_slice(&h.ids_crc.to_le_bytes());
    b[80..84].copy_from_slice(&h.frames_crc.to_le_bytes());
    b[84..88].copy_from_slice(&h.meta_crc.to_le_bytes());
    if h.version >= 2 {
        b[88..96].copy_from_slice(&h.restarts_len.to_le_bytes());
        b[96..100].copy_from_slice(&h.restarts_crc.to_le_bytes());
    }
    if h.version >= 3 {
        b[100..104].copy_from_slice(&h.stream_count.to_le_bytes());
        b[104..108].copy_from_slice(&h.streams_crc.to_le_bytes());
        b[108..116].copy_from_slice(&h.segment_count.to_le_bytes());
        b[116..120].copy_from_slice(&h.segments_crc.to_le_bytes());
    }
    let crc = crc32fast::hash(&b[..HEADER_CRC_AT]);
    b[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Parses and checks the fixed header: magic, version, header CRC, reserved bytes, limits.
pub fn decode_header(b: &[u8]) -> Result<Header, String> {
    if b.len() < HEADER_LEN {
        return Err(format!(
            "index is {} bytes, shorter than its {HEADER_LEN}-byte header",
            b.len()
        ));
    }
    if b[0..8] != MAGIC {
        return Err("not a gulpio-rs index (bad magic)".into());
    }
    let version = u32_at(b, 8);
    if !(1..=VERSION).contains(&version) {
        return Err(format!(
            "index version {version} is not supported (this build reads versions 1 to {VERSION})"
        ));
    }
    let stored = u32_at(b, HEADER_CRC_AT);
    let actual = crc32fast::hash(&b[..HEADER_CRC_AT]);
    if stored != actual {
        return Err(format!(
            "header CRC mismatch: expected {stored:#010x}, found {actual:#010x}"
        ));
    }
    if u32_at(b, 12) as usize != HEADER_LEN {
        return Err("header length field is not 128".into());
    }
    let reserved_from = match version {
        1 => 88,
        2 => 100,
        _ => 120,
    };
    if b[reserved_from..HEADER_CRC_AT].iter().any(|&x| x != 0) {
        return Err("reserved header bytes are not zero".into());
    }
    let h = Header {
        video_count: u64_at(b, 16),
        frame_count: u64_at(b, 24),
        ids_len: u64_at(b, 32),
        meta_len: u64_at(b, 40),
        gulp_len: u64_at(b, 48),
        gmeta_len: u64_at(b, 56),
        gulp_crc: u32_at(b, 64),
        gmeta_crc: u32_at(b, 68),
        videos_crc: u32_at(b, 72),
        ids_crc: u32_at(b, 76),
        frames_crc: u32_at(b, 80),
        meta_crc: u32_at(b, 84),
        version,
        restarts_len: if version >= 2 { u64_at(b, 88) } else { 0 },
        restarts_crc: if version >= 2 { u32_at(b, 96) } else { 0 },
        stream_count: if version >= 3 { u32_at(b, 100) } else { 0 },
        streams_crc: if version >= 3 { u32_at(b, 104) } else { 0 },
        segment_count: if version >= 3 { u64_at(b, 108) } else { 0 },
        segments_crc: if version >= 3 { u32_at(b, 116) } else { 0 },
    };
    if h.restarts_len > MAX_RESTARTS {
        return Err(format!(
            "restart count {} exceeds the limit {MAX_RESTARTS}",
            h.restarts_len
        ));
    }
    if version == 2 && h.restarts_len == 0 {
        // Writers use version 1 then: one index per content, so a version 2 without markers
        // is not something a writer made.
        return Err("a version 2 index without restart markers".into());
    }
    if h.video_count > MAX_VIDEOS {
        return Err(format!(
            "video count {} exceeds the limit {MAX_VIDEOS}",
            h.video_count
        ));
    }
    if h.frame_count > MAX_FRAMES {
        return Err(format!(
            "frame count {} exceeds the limit {MAX_FRAMES}",
            h.frame_count
        ));
    }
    if version >= 3
        && (h.stream_count == 0
            || h.stream_count as u64 > h.video_count
            || h.segment_count < h.stream_count as u64
            || h.segment_count > h.frame_count.min(MAX_SEGMENTS))
    {
        // Version 3 is written only for chunks with segments; each stream has at least one.
        return Err(format!(
            "{} streams and {} segments for {} videos of {} frames",
            h.stream_count, h.segment_count, h.video_count, h.frame_count
        ));
    }
    if h.gulp_len > MAX_GULP_LEN {
        return Err(format!(
            "data length {} exceeds the limit {MAX_GULP_LEN}",
            h.gulp_len
        ));
    }
    Ok(h)
}
