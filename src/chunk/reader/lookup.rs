//! Frames by video and position: ids to videos, Python-style frame indices to records, and
//! the checks a frame's bytes pass before they are handed out (inside the file, CRC).

use super::{ChunkReader, IndexKind};
use crate::error::{At, Error, Result};
use crate::format::index::FrameRec;

impl ChunkReader {
    /// Position of `id` in this chunk.
    pub fn lookup(&self, id: &str) -> Option<usize> {
        self.by_id
            .get_or_init(|| {
                (0..self.video_count())
                    .map(|i| (self.id(i).to_owned(), i))
                    .collect()
            })
            .get(id)
            .copied()
    }

    pub fn frames(&self, video: usize) -> impl Iterator<Item = FrameRec> + '_ {
        let v = self.index.video(video);
        (0..v.frame_count as usize).map(move |k| self.index.frame(v.frame_start as usize + k))
    }

    /// Resolves a possibly negative frame index (Python semantics) to a record.
    pub fn frame(&self, video: usize, frame: i64) -> Result<(usize, FrameRec)> {
        let v = self.index.video(video);
        let n = v.frame_count as i64;
        let k = if frame < 0 { frame + n } else { frame };
        if !(0..n).contains(&k) {
            return Err(Error::FrameOutOfRange {
                path: self.paths.data.clone(),
                id: self.id(video).to_owned(),
                frame,
                count: n as usize,
            });
        }
        Ok((
            k as usize,
            self.index.frame(v.frame_start as usize + k as usize),
        ))
    }

    /// The JPEG bytes of a frame (padding removed), straight from the mapping. With `check`,
    /// the CRC32 recorded in the index is verified first.
    /// (Mapped chunks only: others are read with [`ChunkReader::read_frames`].)
    pub fn frame_bytes(&self, video: usize, frame: i64, check: bool) -> Result<&[u8]> {
        let (k, rec) = self.frame(video, frame)?;
        let Some(data) = self.data.mapped() else {
            return Err(Error::Internal(format!(
                "{}: frame_bytes on a chunk that is not memory-mapped",
                self.paths.data.display()
            )));
        };
        self.frame_in(data, video, k, &rec, check)
    }

    /// Frame `k` (resolved) of `video` inside `data`, the whole `.gulp`'s bytes.
    pub fn frame_in<'d>(
        &self,
        data: &'d [u8],
        video: usize,
        k: usize,
        rec: &FrameRec,
        check: bool,
    ) -> Result<&'d [u8]> {
        self.check_in_file(video, k, rec, data.len() as u64)?;
        let bytes = &data[rec.offset as usize..rec.jpeg_end() as usize];
        if check {
            self.check_crc(video, k, rec, bytes)?;
        }
        Ok(bytes)
    }

    /// The record lies inside the `.gulp` (a truncated file loses only the frames it cut).
    pub(super) fn check_in_file(
        &self,
        video: usize,
        k: usize,
        rec: &FrameRec,
        len: u64,
    ) -> Result<()> {
        if rec.jpeg_end() <= len {
            return Ok(());
        }
        Err(self.truncated(video, k, rec, len))
    }

    /// Frame `k` of `video` ends past byte `len`, where the `.gulp` ends.
    pub(crate) fn truncated(&self, video: usize, k: usize, rec: &FrameRec, len: u64) -> Error {
        Error::format_at(
            &self.paths.data,
            At::frame(self.id(video), k),
            format!(
                "truncated: needs bytes {}..{}, the file has {}",
                rec.offset,
                rec.jpeg_end(),
                len
            ),
        )
    }

    /// The frame's CRC32 against the index (legacy chunks have none to check).
    pub(crate) fn check_crc(
        &self,
        video: usize,
        k: usize,
        rec: &FrameRec,
        bytes: &[u8],
    ) -> Result<()> {
        if self.kind != IndexKind::Binary {
            return Ok(());
        }
        let actual = crc32fast::hash(bytes);
        if actual == rec.crc {
            return Ok(());
        }
        Err(Error::Crc {
            path: self.paths.data.clone(),
            id: self.id(video).to_owned(),
            frame: k,
            offset: rec.offset,
            end: rec.jpeg_end(),
            expected: rec.crc,
            actual,
        })
    }

    /// The restart marker positions of frame `frame` of video `video` (resolved), when the
    /// index records them (frames with a restart interval of whole MCU rows).
    pub fn restarts(&self, video: usize, frame: usize) -> Option<Vec<u32>> {
        let v = self.index.video(video);
        if frame >= v.frame_count as usize {
            return None;
        }
        self.index.restarts(v.frame_start as usize + frame)
    }
}
