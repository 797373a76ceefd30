//! Checking an index's bytes before they are believed: the front (header, video table, ids;
//! what a directory open needs) and the frame records (shared with the legacy `.gmeta` path).

use super::header::{
    decode_header, Header, Layout, VideoRec, MAX_FRAMES_PER_VIDEO, MAX_ID_LEN, MAX_JPEG_LEN,
    MAX_META_LEN, VIDEO_ENTRY_LEN,
};
use crate::format::bytes::{u32_at, u64_at};
use crate::format::frame::FrameRec;

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

pub(super) fn check_crc(what: &str, bytes: &[u8], expected: u32) -> Result<(), String> {
    let actual = crc32fast::hash(bytes);
    if actual != expected {
        return Err(format!(
            "{what} CRC mismatch: expected {expected:#010x}, found {actual:#010x}"
        ));
    }
    Ok(())
}

pub(super) fn video_at(b: &[u8], videos_at: usize, i: usize) -> VideoRec {
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

pub(super) fn id_bytes_at<'a>(
    b: &'a [u8],
    ids_at: usize,
    ids_len: usize,
    v: &VideoRec,
) -> &'a [u8] {
    let ids = &b[ids_at..ids_at + ids_len];
    let start = (v.id_off as usize).min(ids.len());
    let end = (start + v.id_len as usize).min(ids.len());
    &ids[start..end]
}

/// Ids were checked to be UTF-8 by `check_videos`.
pub(super) fn id_at<'a>(b: &'a [u8], ids_at: usize, ids_len: usize, v: &VideoRec) -> &'a str {
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
