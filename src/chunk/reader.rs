//! Reading a chunk: the `.gulp` is memory-mapped and frames are located through the index,
//! either the binary `.gidx` (checksummed) or one built in memory from a legacy `.gmeta`.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::sync::OnceLock;

use crate::error::{Error, IoContext, Result};
use crate::format::index::{
    check_front, decode_header, front_len, FrameRec, Header, Index, IndexBuilder, HEADER_LEN,
};
use crate::format::paths::ChunkPaths;
use crate::format::{gmeta, Storage};

use super::map_file;

/// Where a chunk's index came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// The checksummed `.gidx`: frame CRCs are verified on read.
    Binary,
    /// Built from the `.gmeta` (legacy gulpio data, or an index that could not be trusted).
    Legacy,
}

pub struct ChunkReader {
    paths: ChunkPaths,
    data: Storage,
    index: Index,
    kind: IndexKind,
    /// Why an existing index was not used (the chunk then reads through its `.gmeta`).
    index_problem: Option<String>,
    by_id: OnceLock<HashMap<String, usize>>,
}

impl std::fmt::Debug for ChunkReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkReader")
            .field("paths", &self.paths)
            .field("kind", &self.kind)
            .field("videos", &self.index.video_count())
            .finish()
    }
}

/// What opening a directory reads of an index: the header and the front sections (videos
/// and ids), with ordinary reads rather than a mapping (mapping would fault in 64 KiB per file
/// through the kernel's fault-around, most of it frame entries not needed yet).
pub struct Probe {
    pub header: Header,
    pub header_bytes: [u8; HEADER_LEN],
    pub front: Vec<u8>,
}

/// Reads and checks the front of `paths.index` and that the `.gmeta` has the size the index
/// was written for.
pub fn probe_index(paths: &ChunkPaths) -> Result<Probe> {
    let path = &paths.index;
    let mut file = File::open(path).at(path)?;
    let len = file.metadata().at(path)?.len();
    let mut header_bytes = [0u8; HEADER_LEN];
    if len < HEADER_LEN as u64 {
        return Err(Error::format(
            path,
            format!("index is {len} bytes, shorter than its {HEADER_LEN}-byte header"),
        ));
    }
    file.read_exact(&mut header_bytes).at(path)?;
    let header = decode_header(&header_bytes).map_err(|m| Error::format(path, m))?;
    let need = front_len(&header).map_err(|m| Error::format(path, m))?;
    // Checked against the real length before allocating: a hostile header cannot make us
    // allocate more than the file holds.
    if need as u64 > len {
        return Err(Error::format(
            path,
            format!("index is {len} bytes, its header describes at least {need}"),
        ));
    }
    let mut front = vec![0u8; need];
    front[..HEADER_LEN].copy_from_slice(&header_bytes);
    file.read_exact(&mut front[HEADER_LEN..]).at(path)?;
    check_front(&front, len).map_err(|m| Error::format(path, m))?;
    let meta_len = std::fs::metadata(&paths.meta).at(&paths.meta)?.len();
    if meta_len != header.gmeta_len {
        return Err(Error::stale(
            path,
            format!(
                "{} is {meta_len} bytes, the index was written for {} bytes (modified by \
                 another tool?)",
                paths.meta.display(),
                header.gmeta_len
            ),
        ));
    }
    Ok(Probe {
        header,
        header_bytes,
        front,
    })
}

impl ChunkReader {
    /// Opens a chunk, using its index when one exists and is intact and current, and the
    /// `.gmeta` otherwise. The second value says why an existing index was not used.
    pub fn open(paths: &ChunkPaths) -> Result<(ChunkReader, Option<Error>)> {
        if !paths.index.exists() {
            return Ok((Self::open_legacy(paths)?, None));
        }
        let opened = probe_index(paths).and_then(|p| Self::from_index(paths, &p.header_bytes));
        match opened {
            Ok(r) => Ok((r, None)),
            // A damaged or stale index must not make a chunk with a good `.gmeta` unreadable.
            Err(e @ (Error::StaleIndex { .. } | Error::Format { .. })) => {
                let mut legacy = Self::open_legacy(paths)?;
                legacy.index_problem = Some(e.to_string());
                Ok((legacy, Some(e)))
            }
            Err(e) => Err(e),
        }
    }

    /// Completes opening a probed chunk: maps the index and checks it is the one probed
    /// (`header` carries every section's CRC), checks the frame table and meta blob, and
    /// that the `.gmeta` is byte for byte the one the index was written with.
    pub fn from_index(paths: &ChunkPaths, header: &[u8; HEADER_LEN]) -> Result<ChunkReader> {
        let index =
            Index::parse(map_file(&paths.index)?).map_err(|m| Error::format(&paths.index, m))?;
        if index.header_bytes() != header {
            return Err(Error::stale(
                &paths.index,
                "the index file was replaced after the chunk was opened",
            ));
        }
        index
            .verify_full()
            .map_err(|m| Error::format(&paths.index, m))?;
        let meta = std::fs::read(&paths.meta).at(&paths.meta)?;
        let h = index.header();
        let crc = crc32fast::hash(&meta);
        if meta.len() as u64 != h.gmeta_len || crc != h.gmeta_crc {
            return Err(Error::stale(
                &paths.index,
                format!(
                    "{} has CRC {crc:#010x} ({} bytes); the index was written for CRC {:#010x} \
                     ({} bytes)",
                    paths.meta.display(),
                    meta.len(),
                    h.gmeta_crc,
                    h.gmeta_len
                ),
            ));
        }
        Ok(ChunkReader {
            data: map_file(&paths.data)?,
            paths: paths.clone(),
            index,
            kind: IndexKind::Binary,
            index_problem: None,
            by_id: OnceLock::new(),
        })
    }

    /// Opens a chunk through its `.gmeta` alone (no CRCs to verify).
    pub fn open_legacy(paths: &ChunkPaths) -> Result<ChunkReader> {
        let text = std::fs::read(&paths.meta).at(&paths.meta)?;
        let index = legacy_index(&text).map_err(|m| Error::format(&paths.meta, m))?;
        Ok(ChunkReader {
            data: map_file(&paths.data)?,
            paths: paths.clone(),
            index,
            kind: IndexKind::Legacy,
            index_problem: None,
            by_id: OnceLock::new(),
        })
    }

    pub fn paths(&self) -> &ChunkPaths {
        &self.paths
    }
    pub fn kind(&self) -> IndexKind {
        self.kind
    }
    /// Why an existing index was not used, if one exists and was not.
    pub fn index_problem(&self) -> Option<&str> {
        self.index_problem.as_deref()
    }
    pub(crate) fn set_index_problem(&mut self, why: String) {
        self.index_problem = Some(why);
    }
    pub fn index(&self) -> &Index {
        &self.index
    }
    pub fn data(&self) -> &[u8] {
        &self.data
    }
    pub fn video_count(&self) -> usize {
        self.index.video_count()
    }
    pub fn id(&self, video: usize) -> &str {
        self.index.id(video)
    }
    /// The JSON text of the video's `meta_data` list.
    pub fn meta_data(&self, video: usize) -> &[u8] {
        self.index.meta(video)
    }
    pub fn frame_count(&self, video: usize) -> usize {
        self.index.video(video).frame_count as usize
    }

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
    pub fn frame_bytes(&self, video: usize, frame: i64, check: bool) -> Result<&[u8]> {
        let (k, rec) = self.frame(video, frame)?;
        let bytes = self.data.get(rec.offset as usize..rec.jpeg_end() as usize);
        let Some(bytes) = bytes.filter(|_| rec.jpeg_end() <= self.data.len() as u64) else {
            return Err(Error::format(
                &self.paths.data,
                format!(
                    "truncated: video {:?} frame {k} needs bytes {}..{}, the file has {}",
                    self.id(video),
                    rec.offset,
                    rec.jpeg_end(),
                    self.data.len()
                ),
            ));
        };
        if check && self.kind == IndexKind::Binary {
            let actual = crc32fast::hash(bytes);
            if actual != rec.crc {
                return Err(Error::Crc {
                    path: self.paths.data.clone(),
                    id: self.id(video).to_owned(),
                    frame: k,
                    offset: rec.offset,
                    end: rec.jpeg_end(),
                    expected: rec.crc,
                    actual,
                });
            }
        }
        Ok(bytes)
    }

    /// Where published data ends: the index's recorded length, or for legacy chunks the end of
    /// the last record.
    pub fn published_len(&self) -> u64 {
        match self.kind {
            IndexKind::Binary => self.index.header().gulp_len,
            IndexKind::Legacy => (0..self.index.frame_count())
                .map(|j| self.index.frame(j).record_end())
                .max()
                .unwrap_or(0),
        }
    }
}

/// Builds an in-memory index from `.gmeta` text. Frame CRCs and sizes are unknown (zero).
pub fn legacy_index(text: &[u8]) -> Result<Index, String> {
    let entries = gmeta::parse(text)?;
    let mut builder = IndexBuilder::new();
    let mut frames = Vec::new();
    for e in &entries {
        frames.clear();
        for (k, &(loc, pad, length)) in e.frame_info.iter().enumerate() {
            let jpeg_len = u32::try_from(length - pad)
                .map_err(|_| format!("video {:?} frame {k}: length {length} is too large", e.id))?;
            frames.push(FrameRec {
                offset: loc,
                jpeg_len,
                pad: pad as u8,
                ..Default::default()
            });
        }
        builder.push_video(&e.id, &e.meta_data, &frames)?;
    }
    // Legacy data carries no published length: records are bounded by u64 range here and by
    // the actual file length at read time, so a truncated `.gulp` loses only the frames it cut.
    let index = Index::parse(Storage::Owned(builder.encode(u64::MAX >> 16, 0, 0, 0)))?;
    index.verify_full()?;
    Ok(index)
}
