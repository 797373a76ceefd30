//! Videos stored as AV1 segments: their stream entries, a segment's bytes checked whole,
//! the errors that name a damaged segment's frames, and refusing what needs the index.

use super::ChunkReader;
use crate::error::{At, Error, Result};
use crate::format::segments::{SegmentRec, StreamRec};

impl ChunkReader {
    /// Video `video`'s stream entry and segments, when it is stored as segments (only an
    /// index of version 3 says so).
    pub fn stream(&self, video: usize) -> Option<(StreamRec, Vec<SegmentRec>)> {
        self.index.stream_and_segments(video)
    }

    /// The stream bytes of segment `number` of video `video` (stored as segments), read
    /// through its tiles with their CRCs checked, then checked against the segment's CRC:
    /// for copying a segment as it is stored (`gulpio repair`'s rewrite) and for decoding it
    /// whole (`gulpio check --decode`).
    pub fn segment_stream(&self, video: usize, number: usize) -> Result<Vec<u8>> {
        let (_, segments) = self
            .stream(video)
            .ok_or_else(|| Error::Internal(format!("video {video} is not stored as segments")))?;
        let seg = *segments
            .get(number)
            .ok_or_else(|| Error::Internal(format!("segment {number} of {}", segments.len())))?;
        let wanted: Vec<(usize, usize)> = seg.frames().map(|k| (video, k)).collect();
        let mut bytes = Vec::with_capacity(seg.len as usize);
        let mut failed = None;
        self.read_frames(&wanted, true, |_, got| match got {
            Ok(b) => bytes.extend_from_slice(&b),
            Err(e) => {
                failed.get_or_insert(e);
            }
        })?;
        if let Some(e) = failed {
            return Err(self.segment_damage(video, number, &seg, e));
        }
        let actual = crc32fast::hash(&bytes);
        if actual != seg.crc {
            return Err(self.segment_crc_error(video, number, &seg, actual));
        }
        Ok(bytes)
    }

    /// Segment `number` of `video` (`seg`), whose stream bytes have CRC `actual`, fails its
    /// recorded CRC: the error names the frames it holds (docs/FORMAT.md §6.3).
    pub(crate) fn segment_crc_error(
        &self,
        video: usize,
        number: usize,
        seg: &SegmentRec,
        actual: u32,
    ) -> Error {
        Error::SegmentCrc {
            path: self.paths.data.clone(),
            id: self.id(video).to_owned(),
            segment: number,
            frames: seg.frames(),
            offset: seg.offset,
            end: seg.end(),
            expected: seg.crc,
            actual,
        }
    }

    /// A read of segment `number` of `video` whose tiles failed with `e`. A tile's CRC
    /// mismatch, or a tile cut off by a truncated file, is damage to the segment and reported
    /// as such, with the frames it holds, whichever tile holds the damaged bytes (a tile says
    /// nothing about where its frame's pixels are coded); the CRC found is that of the
    /// segment's bytes, read again. Other errors (I/O) are returned as they are.
    pub(crate) fn segment_damage(
        &self,
        video: usize,
        number: usize,
        seg: &SegmentRec,
        e: Error,
    ) -> Error {
        let now = self.data.current_len();
        if seg.end() > now {
            return Error::format_at(
                &self.paths.data,
                At::frame(self.id(video), seg.first_frame as usize),
                format!(
                    "truncated: {} end past the file's {now} bytes",
                    seg.named(number)
                ),
            );
        }
        if !matches!(e, Error::Crc { .. }) {
            return e;
        }
        match self
            .data
            .read_range(&self.paths.data, seg.offset..seg.end())
        {
            Ok(bytes) => self.segment_crc_error(video, number, seg, crc32fast::hash(&bytes)),
            Err(_) => e,
        }
    }

    /// Whether the chunk has videos stored as segments that it cannot read: its index is
    /// missing or unusable and the `.gmeta` says they are segments.
    pub fn has_unindexed_segments(&self) -> bool {
        !self.unindexed_segments.is_empty()
    }

    /// The `.gmeta`'s `segments` object (its text) of a video stored as segments that the
    /// chunk reads without an index: what rebuilding that index starts from.
    pub fn unindexed_json(&self, video: usize) -> Option<&[u8]> {
        let at = self
            .unindexed_segments
            .binary_search_by_key(&video, |(v, _)| *v)
            .ok()?;
        Some(&self.unindexed_segments[at].1)
    }

    /// Refuses to read a video stored as segments without the index that describes its
    /// segments (its `.gmeta` tiles would read as damaged JPEGs).
    pub fn check_readable(&self, video: usize) -> Result<()> {
        if self.unindexed_json(video).is_none() {
            return Ok(());
        }
        let why = self.index_problem.as_deref().map_or_else(
            || "there is none".to_owned(),
            |p| format!("it is unusable: {p}"),
        );
        Err(Error::format_at(
            &self.paths.data,
            At::video(self.id(video)),
            format!(
                "the video is stored as AV1 segments, which are read only through the chunk's \
                 checksummed index (.gidx, version 3), and {why}; `gulpio repair DIR --apply` \
                 rebuilds it from the .gulp and .gmeta"
            ),
        ))
    }

    /// Refuses an operation on JPEG bytes (`frame_bytes`) for a video stored as segments:
    /// its frame table entries are tiles of AV1 streams, not JPEG files.
    pub fn refuse_segments(&self, video: usize) -> Result<()> {
        self.check_readable(video)?;
        if self.index.stream_of(video).is_none() {
            return Ok(());
        }
        Err(Error::invalid_for(
            &self.paths.data,
            At::video(self.id(video)),
            "the video is stored as AV1 segments, not as JPEG frames: there are no JPEG bytes \
             to return; read its frames decoded (gd[id], read, read_batch)",
        ))
    }

    /// The `.gmeta`'s `segments` object of video `video` as a writer writes it, when it is
    /// stored as segments.
    pub fn segments_json(&self, video: usize) -> Option<Vec<u8>> {
        let (rec, segments) = self.stream(video)?;
        Some(crate::format::segments::segments_meta(&rec, &segments))
    }
}
