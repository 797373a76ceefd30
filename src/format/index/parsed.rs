//! A parsed index over its bytes: the second, full verification step and the O(1) accessors
//! the reader uses for videos, ids, metadata, frames, restart markers and segments.

use super::check::{check_crc, check_frames, check_front, id_at, id_bytes_at, video_at};
use super::header::{Header, Layout, VideoRec, FRAME_ENTRY_LEN, HEADER_LEN};
use crate::format::bytes::{u16_at, u32_at, u64_at};
use crate::format::frame::FrameRec;
use crate::format::segments::{
    check_video_segments, segment_at, stream_at, stream_reserved_zero, SegmentRec, StreamRec,
};
use crate::format::Storage;

/// A parsed index over its bytes (mapped or owned). Accessors are O(1) and never allocate.
pub struct Index {
    bytes: Storage,
    header: Header,
    layout: Layout,
}

impl Index {
    /// Checks the front (see [`check_front`]) over the whole file. The frame table and meta
    /// blob are checked by [`Index::verify_full`].
    pub fn parse(bytes: Storage) -> Result<Index, String> {
        let header = check_front(&bytes, bytes.len() as u64)?;
        let layout = Layout::of(&header)?;
        Ok(Index {
            bytes,
            header,
            layout,
        })
    }

    /// The index file's length.
    pub fn byte_len(&self) -> u64 {
        self.bytes.len() as u64
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
