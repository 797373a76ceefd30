//! Writing an index: [`IndexBuilder`] accumulates videos in chunk order and serialises them
//! as one `.gidx` file.

use super::header::{
    encode_header, pad8, Header, VideoRec, FRAME_ENTRY_LEN, HEADER_LEN, MAX_FRAMES_PER_VIDEO,
    MAX_ID_LEN, MAX_META_LEN, MAX_RESTARTS, VIDEO_ENTRY_LEN,
};
use crate::error::{At, Problem};
use crate::format::frame::FrameRec;
use crate::format::segments::{
    check_video_segments, encode_segment, encode_stream, SegmentRec, StreamRec, MAX_SEGMENTS,
    SEGMENT_ENTRY_LEN, STREAM_ENTRY_LEN,
};

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
