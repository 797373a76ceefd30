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

use super::bytes::{u16_at, u32_at, u64_at};
pub use super::frame::FrameRec;
use super::segments::{
    check_video_segments, encode_segment, encode_stream, segment_at, stream_at,
    stream_reserved_zero, SegmentRec, StreamRec, MAX_SEGMENTS, SEGMENT_ENTRY_LEN, STREAM_ENTRY_LEN,
};
use super::Storage;
use crate::error::{At, Problem};

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

fn pad8(n: u64) -> u64 {
    (8 - n % 8) % 8
}

/// Byte offsets of the sections, derived from the header counts with checked arithmetic.
#[derive(Clone, Copy, Debug)]
struct Layout {
    videos_at: usize,
    ids_at: usize,
    frames_at: usize,
    meta_at: usize,
    /// End of the meta blob; version 2: the restart table starts at the next multiple of 8.
    meta_end: usize,
    restarts_at: usize,
    restarts_end: usize,
    /// Version 3: the stream table, then the segment table (its end is `total`).
    streams_at: usize,
    segments_at: usize,
    total: u64,
}

impl Layout {
    fn of(h: &Header) -> Result<Layout, String> {
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

fn encode_video(v: &VideoRec, out: &mut Vec<u8>) {
    out.extend_from_slice(&v.frame_start.to_le_bytes());
    out.extend_from_slice(&v.frame_count.to_le_bytes());
    out.extend_from_slice(&v.id_len.to_le_bytes());
    out.extend_from_slice(&v.id_off.to_le_bytes());
    out.extend_from_slice(&v.meta_off.to_le_bytes());
    out.extend_from_slice(&v.meta_len.to_le_bytes());
    out.extend_from_slice(&v.stream.to_le_bytes());
}

fn encode_frame(f: &FrameRec, out: &mut Vec<u8>) {
    out.extend_from_slice(&f.offset.to_le_bytes());
    out.extend_from_slice(&f.jpeg_len.to_le_bytes());
    out.extend_from_slice(&f.crc.to_le_bytes());
    out.extend_from_slice(&f.width.to_le_bytes());
    out.extend_from_slice(&f.height.to_le_bytes());
    out.push(f.channels);
    out.push(f.pad);
    out.extend_from_slice(&0u16.to_le_bytes());
}

/// Accumulates videos in chunk order and serialises them as one index file.
#[derive(Default, Clone)]
pub struct IndexBuilder {
    videos: Vec<VideoRec>,
    frames: Vec<FrameRec>,
    ids: Vec<u8>,
    meta: Vec<u8>,
    /// Version 2's restart table: where each frame's markers start in `restarts`.
    restart_starts: Vec<u32>,
    restarts: Vec<u32>,
    /// Version 3's tables.
    streams: Vec<StreamRec>,
    segments: Vec<SegmentRec>,
}

impl IndexBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn video_count(&self) -> usize {
        self.videos.len()
    }

    /// Adds one video. `meta_json` is the JSON text of its whole `meta_data` list.
    pub fn push_video(
        &mut self,
        id: &str,
        meta_json: &[u8],
        frames: &[FrameRec],
    ) -> Result<(), Problem> {
        let id_len = u32::try_from(id.len())
            .ok()
            .filter(|&n| n <= MAX_ID_LEN)
            .ok_or_else(|| format!("id of {} bytes exceeds the limit {MAX_ID_LEN}", id.len()))?;
        let meta_len = u32::try_from(meta_json.len())
            .ok()
            .filter(|&n| n <= MAX_META_LEN)
            .ok_or_else(|| {
                let n = meta_json.len();
                Problem::at(
                    At::video(id),
                    format!("metadata is {n} bytes, over the limit {MAX_META_LEN}"),
                )
            })?;
        let frame_count = u32::try_from(frames.len())
            .ok()
            .filter(|&n| n <= MAX_FRAMES_PER_VIDEO)
            .ok_or_else(|| {
                let n = frames.len();
                Problem::at(At::video(id), format!("too many frames ({n})"))
            })?;
        self.videos.push(VideoRec {
            frame_start: self.frames.len() as u64,
            frame_count,
            id_len,
            id_off: self.ids.len() as u64,
            meta_off: self.meta.len() as u64,
            meta_len,
            stream: 0,
        });
        self.frames.extend_from_slice(frames);
        self.ids.extend_from_slice(id.as_bytes());
        self.meta.extend_from_slice(meta_json);
        Ok(())
    }

    /// [`IndexBuilder::push_video`] with each frame's restart marker positions (offsets of
    /// their `0xFF` from the frame's first byte; empty for frames without usable markers).
    pub fn push_video_with_restarts(
        &mut self,
        id: &str,
        meta_json: &[u8],
        frames: &[FrameRec],
        restarts: &[&[u32]],
    ) -> Result<(), Problem> {
        if restarts.len() != frames.len() {
            return Err(Problem::at(
                At::video(id),
                "restart markers for another frame count",
            ));
        }
        let before = self.frames.len();
        self.push_video(id, meta_json, frames)?;
        // Frames added earlier without markers have none.
        self.restart_starts
            .resize(before, self.restarts.len() as u32);
        for r in restarts {
            self.restart_starts.push(self.restarts.len() as u32);
            if (self.restarts.len() + r.len()) as u64 <= MAX_RESTARTS {
                self.restarts.extend_from_slice(r);
            }
        }
        Ok(())
    }

    /// Adds a video stored as segments (docs/FORMAT.md §6): `frames` are its frame table
    /// entries (the segments' tiles, `SegmentRec::tiles`), `stream` its stream entry (its
    /// `segment_count` and `segment_start` are set here), `segments` in frame order.
    pub fn push_segment_video(
        &mut self,
        id: &str,
        meta_json: &[u8],
        frames: &[FrameRec],
        stream: StreamRec,
        segments: &[SegmentRec],
    ) -> Result<(), Problem> {
        let stream = StreamRec {
            segment_count: u32::try_from(segments.len())
                .map_err(|_| Problem::at(At::video(id), "too many segments"))?,
            segment_start: self.segments.len() as u64,
            ..stream
        };
        check_video_segments(&stream, segments.iter().copied(), frames)
            .map_err(|e| Problem::at(At::video(id), e))?;
        if (self.segments.len() + segments.len()) as u64 > MAX_SEGMENTS {
            return Err(Problem::at(At::video(id), "too many segments in one chunk"));
        }
        self.push_video(id, meta_json, frames)?;
        self.streams.push(stream);
        if let Some(v) = self.videos.last_mut() {
            v.stream = self.streams.len() as u32;
        }
        self.segments.extend_from_slice(segments);
        Ok(())
    }

    /// Serialises the index for a chunk whose data and meta files have the given lengths/CRCs.
    pub fn encode(&self, gulp_len: u64, gulp_crc: u32, gmeta_len: u64, gmeta_crc: u32) -> Vec<u8> {
        let mut videos = Vec::with_capacity(self.videos.len() * VIDEO_ENTRY_LEN);
        for v in &self.videos {
            encode_video(v, &mut videos);
        }
        let mut frames = Vec::with_capacity(self.frames.len() * FRAME_ENTRY_LEN);
        for f in &self.frames {
            encode_frame(f, &mut frames);
        }
        let segmented = !self.streams.is_empty();
        let mut streams = Vec::with_capacity(self.streams.len() * STREAM_ENTRY_LEN);
        for st in &self.streams {
            encode_stream(st, &mut streams);
        }
        let mut segments = Vec::with_capacity(self.segments.len() * SEGMENT_ENTRY_LEN);
        for sg in &self.segments {
            encode_segment(sg, &mut segments);
        }
        // The restart table (version 2) only when some frame has markers; always in 3.
        let restart_table = (segmented || !self.restarts.is_empty()).then(|| {
            let mut starts = self.restart_starts.clone();
            starts.resize(self.frames.len() + 1, self.restarts.len() as u32);
            let mut t = Vec::with_capacity(4 * (starts.len() + self.restarts.len()));
            for v in starts.iter().chain(&self.restarts) {
                t.extend_from_slice(&v.to_le_bytes());
            }
            t
        });
        let h = Header {
            video_count: self.videos.len() as u64,
            frame_count: self.frames.len() as u64,
            ids_len: self.ids.len() as u64,
            meta_len: self.meta.len() as u64,
            gulp_len,
            gmeta_len,
            gulp_crc,
            gmeta_crc,
            videos_crc: crc32fast::hash(&videos),
            ids_crc: crc32fast::hash(&self.ids),
            frames_crc: crc32fast::hash(&frames),
            meta_crc: crc32fast::hash(&self.meta),
            version: if segmented {
                3
            } else if restart_table.is_some() {
                2
            } else {
                1
            },
            restarts_len: self.restarts.len() as u64,
            restarts_crc: restart_table.as_deref().map_or(0, crc32fast::hash),
            stream_count: self.streams.len() as u32,
            streams_crc: crc32fast::hash(&streams),
            segment_count: self.segments.len() as u64,
            segments_crc: crc32fast::hash(&segments),
        };
        let pad = pad8(self.ids.len() as u64) as usize;
        let mut out = Vec::with_capacity(
            HEADER_LEN + videos.len() + self.ids.len() + pad + frames.len() + self.meta.len(),
        );
        out.extend_from_slice(&encode_header(&h));
        out.extend_from_slice(&videos);
        out.extend_from_slice(&self.ids);
        out.resize(out.len() + pad, 0);
        out.extend_from_slice(&frames);
        out.extend_from_slice(&self.meta);
        if let Some(table) = restart_table {
            out.resize(out.len() + pad8(out.len() as u64) as usize, 0);
            out.extend_from_slice(&table);
        }
        if segmented {
            out.resize(out.len() + pad8(out.len() as u64) as usize, 0);
            out.extend_from_slice(&streams);
            out.extend_from_slice(&segments);
        }
        out
    }
}

/// Checks the front of an index (header, video table, id table; everything a directory open
/// needs) given the first `front_len(header)` bytes and the total file length.
pub fn check_front(front: &[u8], file_len: u64) -> Result<Header, String> {
    let header = decode_header(front)?;
    let layout = Layout::of(&header)?;
    if layout.total != file_len {
        return Err(format!(
            "index is {file_len} bytes but its header describes {} bytes (truncated or extended)",
            layout.total
        ));
    }
    if front.len() < layout.frames_at {
        return Err("index front is truncated".into());
    }
    let videos = &front[layout.videos_at..layout.ids_at];
    let ids = &front[layout.ids_at..layout.ids_at + header.ids_len as usize];
    check_crc("video table", videos, header.videos_crc)?;
    check_crc("id table", ids, header.ids_crc)?;
    if front[layout.ids_at + header.ids_len as usize..layout.frames_at]
        .iter()
        .any(|&b| b != 0)
    {
        return Err("id table padding is not zero".into());
    }
    check_videos(front, &header, &layout)?;
    Ok(header)
}

/// Bytes of an index file that [`check_front`] needs, from its header.
pub fn front_len(header: &Header) -> Result<usize, String> {
    Ok(Layout::of(header)?.frames_at)
}

/// The ids of a checked front, in video order.
pub fn front_ids<'a>(
    front: &'a [u8],
    header: &Header,
) -> Result<impl Iterator<Item = &'a str> + 'a, String> {
    let layout = Layout::of(header)?;
    let ids_len = header.ids_len as usize;
    Ok((0..header.video_count as usize).map(move |i| {
        let v = video_at(front, layout.videos_at, i);
        id_at(front, layout.ids_at, ids_len, &v)
    }))
}

fn check_crc(what: &str, bytes: &[u8], expected: u32) -> Result<(), String> {
    let actual = crc32fast::hash(bytes);
    if actual != expected {
        return Err(format!(
            "{what} CRC mismatch: expected {expected:#010x}, found {actual:#010x}"
        ));
    }
    Ok(())
}

fn video_at(b: &[u8], videos_at: usize, i: usize) -> VideoRec {
    let at = videos_at + i * VIDEO_ENTRY_LEN;
    VideoRec {
        frame_start: u64_at(b, at),
        frame_count: u32_at(b, at + 8),
        id_len: u32_at(b, at + 12),
        id_off: u64_at(b, at + 16),
        meta_off: u64_at(b, at + 24),
        meta_len: u32_at(b, at + 32),
        stream: u32_at(b, at + 36),
    }
}

fn id_bytes_at<'a>(b: &'a [u8], ids_at: usize, ids_len: usize, v: &VideoRec) -> &'a [u8] {
    let ids = &b[ids_at..ids_at + ids_len];
    let start = (v.id_off as usize).min(ids.len());
    let end = (start + v.id_len as usize).min(ids.len());
    &ids[start..end]
}

/// Ids were checked to be UTF-8 by `check_videos`.
fn id_at<'a>(b: &'a [u8], ids_at: usize, ids_len: usize, v: &VideoRec) -> &'a str {
    std::str::from_utf8(id_bytes_at(b, ids_at, ids_len, v)).unwrap_or("")
}

/// Video entries must tile the frame table, id table and meta blob exactly, in order.
fn check_videos(b: &[u8], header: &Header, layout: &Layout) -> Result<(), String> {
    let (mut frames, mut ids, mut meta, mut streams) = (0u64, 0u64, 0u64, 0u32);
    let ids_len = header.ids_len as usize;
    for i in 0..header.video_count as usize {
        let v = video_at(b, layout.videos_at, i);
        if v.frame_start != frames || v.id_off != ids || v.meta_off != meta {
            return Err(format!(
                "video entry {i} is not contiguous with the one before it"
            ));
        }
        if v.id_len > MAX_ID_LEN || v.meta_len > MAX_META_LEN {
            return Err(format!(
                "video entry {i} exceeds the id or meta length limit"
            ));
        }
        if v.frame_count > MAX_FRAMES_PER_VIDEO {
            return Err(format!("video entry {i} declares too many frames"));
        }
        if v.stream != 0 {
            if header.version < 3 {
                return Err(format!("video entry {i} has non-zero reserved bytes"));
            }
            streams += 1;
            if v.stream != streams {
                return Err(format!(
                    "video entry {i} names stream {} where {streams} comes next",
                    v.stream
                ));
            }
        }
        frames += v.frame_count as u64;
        ids += v.id_len as u64;
        meta += v.meta_len as u64;
        if frames > header.frame_count || ids > header.ids_len || meta > header.meta_len {
            return Err(format!(
                "video entry {i} points past the end of its sections"
            ));
        }
        if std::str::from_utf8(id_bytes_at(b, layout.ids_at, ids_len, &v)).is_err() {
            return Err(format!("id of video entry {i} is not valid UTF-8"));
        }
    }
    if frames != header.frame_count || ids != header.ids_len || meta != header.meta_len {
        return Err("video entries do not cover the frame, id and meta sections".into());
    }
    if streams != header.stream_count {
        return Err(format!(
            "video entries name {streams} streams, the header {}",
            header.stream_count
        ));
    }
    Ok(())
}

/// A parsed index over its bytes (mapped or owned). Accessors are O(1) and never allocate.
pub struct Index {
    bytes: Storage,
    header: Header,
    layout: Layout,
}

impl Index {
    /// Checks the front (see [`check_front`]) over the whole file. The frame table and meta
    /// blob are checked by [`verify_full`].
    pub fn parse(bytes: Storage) -> Result<Index, String> {
        let header = check_front(&bytes, bytes.len() as u64)?;
        let layout = Layout::of(&header)?;
        Ok(Index {
            bytes,
            header,
            layout,
        })
    }

    /// The raw 128-byte header (it carries the CRCs of every section).
    pub fn header_bytes(&self) -> &[u8] {
        &self.bytes[..HEADER_LEN]
    }

    /// Checks the frame table, meta blob and restart table CRCs and every frame's placement:
    /// inside the published data, padding of at most 3 bytes, no two records overlapping;
    /// restart markers inside their frames, in order.
    pub fn verify_full(&self) -> Result<(), String> {
        let h = &self.header;
        check_crc("frame table", self.frames_bytes(), h.frames_crc)?;
        check_crc("meta blob", self.meta_bytes(), h.meta_crc)?;
        if h.version >= 2 {
            self.verify_restarts()?;
        }
        if h.version >= 3 {
            self.verify_segments()?;
        }
        check_frames(
            (0..self.frame_count()).map(|j| self.frame(j)),
            self.frame_count(),
            h.gulp_len,
        )?;
        for j in 0..self.frame_count() {
            let at = self.layout.frames_at + j * FRAME_ENTRY_LEN;
            if u16_at(&self.bytes, at + 22) != 0 {
                return Err(format!("frame entry {j} has non-zero reserved bytes"));
            }
        }
        let mut seen = std::collections::HashSet::with_capacity(self.video_count());
        for i in 0..self.video_count() {
            if !seen.insert(self.id_bytes(i)) {
                return Err(format!("duplicate video id {:?}", self.id(i)));
            }
        }
        Ok(())
    }

    pub fn header(&self) -> &Header {
        &self.header
    }
    pub fn video_count(&self) -> usize {
        self.header.video_count as usize
    }
    pub fn frame_count(&self) -> usize {
        self.header.frame_count as usize
    }

    fn frames_bytes(&self) -> &[u8] {
        &self.bytes[self.layout.frames_at..self.layout.meta_at]
    }
    fn meta_bytes(&self) -> &[u8] {
        &self.bytes[self.layout.meta_at..self.layout.meta_end]
    }

    fn verify_restarts(&self) -> Result<(), String> {
        let l = &self.layout;
        if self.bytes[l.meta_end..l.restarts_at]
            .iter()
            .any(|&b| b != 0)
        {
            return Err("padding before the restart table is not zero".into());
        }
        check_crc(
            "restart table",
            &self.bytes[l.restarts_at..l.restarts_end],
            self.header.restarts_crc,
        )?;
        let start = |j: usize| u32_at(&self.bytes, l.restarts_at + 4 * j) as u64;
        if start(0) != 0 || start(self.frame_count()) != self.header.restarts_len {
            return Err("the restart table's starts do not cover its markers".into());
        }
        for j in 0..self.frame_count() {
            if start(j + 1) < start(j) {
                return Err(format!("restart starts of frame entry {j} go backwards"));
            }
            let markers = self.restarts(j).unwrap_or_default();
            let len = self.frame(j).jpeg_len;
            let ordered = markers.windows(2).all(|w| w[0] < w[1]);
            if !ordered || markers.last().is_some_and(|&m| m as u64 + 2 > len as u64) {
                return Err(format!(
                    "restart markers of frame entry {j} are out of order or past its end"
                ));
            }
        }
        Ok(())
    }

    /// The stream and segment tables (version 3): CRCs, zero padding, and for each stream
    /// video the rules of `segments::check_video_segments`; streams take the segment table
    /// in order, video after video.
    fn verify_segments(&self) -> Result<(), String> {
        let l = &self.layout;
        if self.bytes[l.restarts_end..l.streams_at]
            .iter()
            .any(|&b| b != 0)
        {
            return Err("padding before the stream table is not zero".into());
        }
        check_crc(
            "stream table",
            &self.bytes[l.streams_at..l.segments_at],
            self.header.streams_crc,
        )?;
        check_crc(
            "segment table",
            &self.bytes[l.segments_at..],
            self.header.segments_crc,
        )?;
        let mut next = 0u64;
        for i in 0..self.video_count() {
            let v = self.video(i);
            if v.stream == 0 {
                continue;
            }
            let s = self.stream_entry(v.stream as usize - 1);
            let k = (v.stream - 1) as usize;
            if !stream_reserved_zero(&self.bytes[l.streams_at..l.segments_at], k) {
                return Err(format!("stream entry {k} has non-zero reserved bytes"));
            }
            let end = s.segment_start.checked_add(s.segment_count as u64);
            if s.segment_start != next || end.is_none_or(|e| e > self.header.segment_count) {
                return Err(format!(
                    "stream entry {k} does not take the segment table in order"
                ));
            }
            next += s.segment_count as u64;
            let frames: Vec<FrameRec> = (0..v.frame_count as usize)
                .map(|f| self.frame(v.frame_start as usize + f))
                .collect();
            let segments =
                (0..s.segment_count as usize).map(|g| self.segment(s.segment_start as usize + g));
            check_video_segments(&s, segments, &frames)
                .map_err(|e| format!("video entry {i} ({:?}): {e}", self.id(i)))?;
        }
        if next != self.header.segment_count {
            return Err("the streams do not cover the segment table".into());
        }
        Ok(())
    }

    /// Stream entry `s` (version 3; panics past `stream_count`).
    pub fn stream_entry(&self, s: usize) -> StreamRec {
        stream_at(
            &self.bytes[self.layout.streams_at..self.layout.segments_at],
            s,
        )
    }

    /// The stream entry of video `i`, if it is stored as segments.
    pub fn stream_of(&self, i: usize) -> Option<StreamRec> {
        let s = self.video(i).stream;
        (s != 0).then(|| self.stream_entry(s as usize - 1))
    }

    /// Video `i`'s stream entry and segments, if it is stored as segments.
    pub fn stream_and_segments(&self, i: usize) -> Option<(StreamRec, Vec<SegmentRec>)> {
        let rec = self.stream_of(i)?;
        let start = rec.segment_start as usize;
        let segments = (start..start + rec.segment_count as usize)
            .map(|k| self.segment(k))
            .collect();
        Some((rec, segments))
    }

    /// Segment entry `k` (version 3; panics past `segment_count`).
    pub fn segment(&self, k: usize) -> SegmentRec {
        segment_at(&self.bytes[self.layout.segments_at..], k)
    }

    /// Frame `j`'s restart marker positions (offsets of their `0xFF` in the frame), when the
    /// index records some (version 2).
    pub fn restarts(&self, j: usize) -> Option<Vec<u32>> {
        if self.header.version < 2 || j >= self.frame_count() {
            return None;
        }
        let l = &self.layout;
        let start = |j: usize| u32_at(&self.bytes, l.restarts_at + 4 * j) as usize;
        let (a, b) = (start(j), start(j + 1));
        let table = l.restarts_at + 4 * (self.frame_count() + 1);
        let bytes = self.bytes.get(table + 4 * a..table + 4 * b)?;
        (a < b).then(|| {
            bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
    }

    /// Panics if `i >= video_count()`; callers index with validated positions only.
    pub fn video(&self, i: usize) -> VideoRec {
        video_at(&self.bytes, self.layout.videos_at, i)
    }

    fn id_bytes(&self, i: usize) -> &[u8] {
        id_bytes_at(
            &self.bytes,
            self.layout.ids_at,
            self.header.ids_len as usize,
            &self.video(i),
        )
    }

    /// The id of video `i`.
    pub fn id(&self, i: usize) -> &str {
        id_at(
            &self.bytes,
            self.layout.ids_at,
            self.header.ids_len as usize,
            &self.video(i),
        )
    }

    /// The JSON text of video `i`'s `meta_data` list.
    pub fn meta(&self, i: usize) -> &[u8] {
        let v = self.video(i);
        let m = self.meta_bytes();
        let start = (v.meta_off as usize).min(m.len());
        let end = (start + v.meta_len as usize).min(m.len());
        &m[start..end]
    }

    pub fn frame(&self, j: usize) -> FrameRec {
        let at = self.layout.frames_at + j * FRAME_ENTRY_LEN;
        let b = &self.bytes;
        FrameRec {
            offset: u64_at(b, at),
            jpeg_len: u32_at(b, at + 8),
            crc: u32_at(b, at + 12),
            width: u16_at(b, at + 16),
            height: u16_at(b, at + 18),
            channels: b[at + 20],
            pad: b[at + 21],
        }
    }
}

/// Shared by the binary index and the legacy JSON path: every record lies inside the first
/// `gulp_len` bytes, has at most 3 padding bytes, and no two records overlap.
pub fn check_frames(
    frames: impl Iterator<Item = FrameRec>,
    count: usize,
    gulp_len: u64,
) -> Result<(), String> {
    let mut spans = Vec::with_capacity(count);
    for (j, f) in frames.enumerate() {
        if f.pad > 3 {
            return Err(format!("frame entry {j} has padding {} (at most 3)", f.pad));
        }
        if f.jpeg_len > MAX_JPEG_LEN {
            return Err(format!(
                "frame entry {j} is {} bytes, over the limit {MAX_JPEG_LEN}",
                f.jpeg_len
            ));
        }
        let end = f
            .offset
            .checked_add(f.jpeg_len as u64 + f.pad as u64)
            .filter(|&e| e <= gulp_len)
            .ok_or_else(|| {
                format!(
                    "frame entry {j} (offset {}, {} bytes) lies beyond the data length {gulp_len}",
                    f.offset,
                    f.jpeg_len as u64 + f.pad as u64
                )
            })?;
        spans.push((f.offset, end, j));
    }
    // Writers append in offset order, so the sort is usually skipped.
    if !spans.windows(2).all(|w| w[0].0 <= w[1].0) {
        spans.sort_unstable();
    }
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(format!(
                "frame entries {} and {} overlap (bytes {}..{} and {}..{})",
                w[0].2, w[1].2, w[0].0, w[0].1, w[1].0, w[1].1
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut b = IndexBuilder::new();
        let f = |offset, len| FrameRec {
            offset,
            jpeg_len: len,
            crc: 7,
            width: 4,
            height: 2,
            channels: 3,
            pad: super::super::pad_for(len as u64),
        };
        b.push_video("a", b"[{\"x\": 1}]", &[f(0, 10), f(12, 8)])
            .unwrap();
        b.push_video("é/b", b"[{}]", &[]).unwrap();
        b.push_video("c", b"[{}]", &[f(20, 5)]).unwrap();
        b.encode(28, 1, 100, 2)
    }

    /// The same chunk with restart markers in two frames (a version 2 index).
    fn sample_v2() -> Vec<u8> {
        let mut b = IndexBuilder::new();
        let f = |offset, len| FrameRec {
            offset,
            jpeg_len: len,
            crc: 7,
            width: 4,
            height: 2,
            channels: 3,
            pad: super::super::pad_for(len as u64),
        };
        b.push_video_with_restarts("a", b"[{\"x\": 1}]", &[f(0, 10), f(12, 8)], &[&[2, 5], &[]])
            .unwrap();
        b.push_video("é/b", b"[{}]", &[]).unwrap();
        b.push_video_with_restarts("c", b"[{}]", &[f(20, 5)], &[&[1]])
            .unwrap();
        b.encode(28, 1, 100, 2)
    }

    #[test]
    fn version_2_keeps_restart_markers_and_version_1_stays_without() {
        let v1 = Index::parse(Storage::Owned(sample())).unwrap();
        assert_eq!(v1.header().version, 1);
        assert_eq!(v1.restarts(0), None);
        let idx = Index::parse(Storage::Owned(sample_v2())).unwrap();
        idx.verify_full().unwrap();
        assert_eq!(idx.header().version, 2);
        assert_eq!(idx.restarts(0), Some(vec![2, 5]));
        assert_eq!(idx.restarts(1), None);
        assert_eq!(idx.restarts(2), Some(vec![1]));
        assert_eq!(idx.restarts(3), None);
        assert_eq!(idx.meta(0), b"[{\"x\": 1}]");
        assert_eq!(idx.frame(2).frame_info(), (20, 3, 8));
        // A marker past its frame's end is refused by the full check.
        let mut b = IndexBuilder::new();
        let f = FrameRec {
            jpeg_len: 4,
            ..Default::default()
        };
        b.push_video_with_restarts("a", b"[{}]", &[f], &[&[3]])
            .unwrap();
        let bad = Index::parse(Storage::Owned(b.encode(4, 0, 0, 0))).unwrap();
        assert!(bad.verify_full().is_err());
    }

    #[test]
    fn every_single_byte_corruption_of_a_version_2_index_is_detected() {
        let good = sample_v2();
        assert_every_bit_flip_is_detected(&good);
        for len in 0..good.len() {
            assert!(Index::parse(Storage::Owned(good[..len].to_vec())).is_err());
        }
    }

    /// A JPEG video, then a video stored as two segments (a version 3 index).
    fn sample_v3() -> (Vec<u8>, Vec<SegmentRec>) {
        use super::super::segments::{FLAG_KEYFRAME, MATRIX_BT709};
        let mut b = IndexBuilder::new();
        let jpeg = FrameRec {
            offset: 0,
            jpeg_len: 10,
            crc: 7,
            width: 4,
            height: 2,
            channels: 3,
            pad: 2,
        };
        b.push_video("a", b"[{}]", &[jpeg]).unwrap();
        let segment = |offset: u64, first: u32, n: u16, bytes: &[u8]| SegmentRec {
            offset,
            len: bytes.len() as u32,
            crc: crc32fast::hash(bytes),
            first_frame: first,
            frame_count: n,
            flags: FLAG_KEYFRAME,
            pad: super::super::pad_for(bytes.len() as u64),
        };
        let (one, two) = ([9u8; 21], [5u8; 10]);
        let segments = vec![segment(12, 0, 3, &one), segment(36, 3, 2, &two)];
        let mut frames = segments[0].tiles(64, 48, &one).unwrap();
        frames.extend(segments[1].tiles(64, 48, &two).unwrap());
        let stream = StreamRec {
            codec: 1,
            chroma: 1,
            depth: 8,
            matrix: MATRIX_BT709,
            range: 1,
            width: 64,
            height: 48,
            segment_count: 0,
            segment_start: 0,
            gop: 3,
        };
        b.push_segment_video("v", b"[{\"y\": 2}]", &frames, stream, &segments)
            .unwrap();
        b.push_video("c", b"[]", &[]).unwrap();
        (b.encode(48, 1, 100, 2), segments)
    }

    #[test]
    fn version_3_holds_streams_and_segments() {
        let (bytes, segments) = sample_v3();
        let idx = Index::parse(Storage::Owned(bytes)).unwrap();
        idx.verify_full().unwrap();
        let h = idx.header();
        assert_eq!((h.version, h.stream_count, h.segment_count), (3, 1, 2));
        assert_eq!(idx.stream_of(0), None);
        assert_eq!(idx.stream_of(2), None);
        let s = idx.stream_of(1).unwrap();
        assert_eq!((s.width, s.height, s.matrix, s.range), (64, 48, 1, 1));
        assert_eq!((s.segment_start, s.segment_count, s.gop), (0, 2, 3));
        assert_eq!(idx.segment(0), segments[0]);
        assert_eq!(idx.segment(1), segments[1]);
        assert_eq!(idx.frame(1 + 2).frame_info(), (20, 3, 16));
        assert_eq!(idx.meta(1), b"[{\"y\": 2}]");
        assert_eq!(idx.restarts(0), None);
    }

    #[test]
    fn every_single_byte_corruption_of_a_version_3_index_is_detected() {
        let (good, _) = sample_v3();
        assert_every_bit_flip_is_detected(&good);
        for len in 0..good.len() {
            assert!(Index::parse(Storage::Owned(good[..len].to_vec())).is_err());
        }
    }

    #[test]
    fn segments_that_do_not_tile_their_video_are_refused_when_written() {
        let (_, segments) = sample_v3();
        let mut b = IndexBuilder::new();
        let stream = StreamRec {
            codec: 1,
            chroma: 1,
            depth: 8,
            matrix: 6,
            range: 0,
            width: 64,
            height: 48,
            segment_count: 0,
            segment_start: 0,
            gop: 3,
        };
        let frames = segments[0].tiles(64, 48, &[9u8; 21]).unwrap();
        // Two segments for the first one's three frames.
        let r = b.push_segment_video("v", b"[]", &frames, stream, &segments);
        assert!(r.is_err());
        assert_eq!(b.video_count(), 0);
    }

    #[test]
    fn round_trip() {
        let idx = Index::parse(Storage::Owned(sample())).unwrap();
        idx.verify_full().unwrap();
        assert_eq!(idx.video_count(), 3);
        assert_eq!(idx.frame_count(), 3);
        assert_eq!(idx.id(1), "é/b");
        assert_eq!(idx.meta(0), b"[{\"x\": 1}]");
        assert_eq!(idx.video(2).frame_start, 2);
        assert_eq!(idx.frame(1).frame_info(), (12, 0, 8));
        assert_eq!(idx.header().gulp_len, 28);
    }

    /// Every flip of a low or high bit of any byte of `good` fails to parse or to verify.
    fn assert_every_bit_flip_is_detected(good: &[u8]) {
        for at in 0..good.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = good.to_vec();
                bad[at] ^= bit;
                let r = Index::parse(Storage::Owned(bad)).and_then(|i| i.verify_full());
                assert!(
                    r.is_err(),
                    "flip of bit {bit:#x} at byte {at} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn every_single_byte_corruption_is_detected() {
        assert_every_bit_flip_is_detected(&sample());
    }

    #[test]
    fn every_truncation_and_extension_is_detected() {
        let good = sample();
        for len in 0..good.len() {
            assert!(Index::parse(Storage::Owned(good[..len].to_vec())).is_err());
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(Index::parse(Storage::Owned(longer)).is_err());
    }

    #[test]
    fn overlapping_and_out_of_range_frames_are_rejected() {
        let f = |offset, len| FrameRec {
            offset,
            jpeg_len: len,
            ..Default::default()
        };
        assert!(check_frames([f(0, 8), f(4, 8)].into_iter(), 2, 100).is_err());
        assert!(check_frames([f(0, 8), f(96, 8)].into_iter(), 2, 100).is_err());
        assert!(check_frames([f(u64::MAX - 2, 8)].into_iter(), 1, 100).is_err());
        assert!(check_frames([f(8, 8), f(0, 8)].into_iter(), 2, 16).is_ok());
    }
}
