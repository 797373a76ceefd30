//! Reading a chunk: the `.gulp` is memory-mapped and frames are located through the index,
//! either the binary `.gidx` (checksummed) or one built in memory from a legacy `.gmeta`.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;

use super::probe::{probe_index_in, until_settled, KnownSizes};
use crate::error::{At, Error, Problem, Result};
use crate::format::index::{FrameRec, Index, IndexBuilder, HEADER_LEN};
use crate::format::paths::ChunkPaths;
use crate::format::segments::{self, SegmentRec, StreamRec};
use crate::format::{gmeta, Storage};
use crate::io::{plan, DataSource, Store};

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
    data: DataSource,
    index: Index,
    kind: IndexKind,
    /// Why an existing index was not used (the chunk then reads through its `.gmeta`).
    index_problem: Option<String>,
    /// Why the `.gmeta` was not believed although the chunk reads through its index (the
    /// `.gmeta` contradicts the checksummed index: damaged, or edited by hand).
    meta_problem: Option<String>,
    by_id: OnceLock<HashMap<String, usize>>,
    /// Read through the `.gmeta` only: the videos whose entry says they are stored as
    /// segments (docs/FORMAT.md §6.2), which cannot be read without the index, in video
    /// order, with the text of their entry's `segments` object.
    unindexed_segments: Vec<(usize, Vec<u8>)>,
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

/// The planned reads of some frames of one chunk ([`ChunkReader::plan_frames`]).
pub struct FramePlan {
    wanted: Vec<(usize, usize)>,
    /// The record of each wanted frame (None when it failed before any fetch).
    recs: Vec<Option<FrameRec>>,
    /// Failures known before fetching (frame out of range, beyond the end of the file).
    early: Vec<(usize, Error)>,
    /// Positions in `wanted` of the frames to fetch, and their byte ranges.
    fetch: Vec<usize>,
    ranges: Vec<Range<u64>>,
    planned: plan::Plan,
    /// For each request, the positions in `fetch` it serves.
    by_request: Vec<Vec<usize>>,
}

impl FramePlan {
    /// The merged requests.
    pub fn requests(&self) -> &[Range<u64>] {
        &self.planned.requests
    }
}

/// Reads frames of several chunks: `groups[g] = (chunk, wanted)` as in
/// [`ChunkReader::read_frames`], with `each(g, i, bytes)`. The requests of every remote chunk
/// are in flight together (a batch whose clips sit in 16 chunks costs one round trip, not 16).
pub fn read_many<'a>(
    groups: &[(&'a ChunkReader, Vec<(usize, usize)>)],
    check: bool,
    mut each: impl FnMut(usize, usize, Result<FrameData<'a>>),
) -> Result<()> {
    let mut plans: Vec<Option<FramePlan>> = Vec::with_capacity(groups.len());
    for (g, (chunk, wanted)) in groups.iter().enumerate() {
        if chunk.data.mapped().is_some() {
            for (i, &(video, k)) in wanted.iter().enumerate() {
                each(
                    g,
                    i,
                    chunk
                        .frame_bytes(video, k as i64, check)
                        .map(FrameData::Borrowed),
                );
            }
            plans.push(None);
            continue;
        }
        let mut fp = chunk.plan_frames(wanted);
        for (i, e) in std::mem::take(&mut fp.early) {
            each(g, i, Err(e));
        }
        plans.push(Some(fp));
    }
    let mut retries: Vec<Vec<usize>> = vec![Vec::new(); groups.len()];
    // Remote requests of all groups in one concurrent stream, per store.
    let mut remote: Vec<(usize, usize)> = Vec::new(); // (group, request)
    let mut store: Option<&std::sync::Arc<crate::io::RemoteStore>> = None;
    let mut items: Vec<(String, Range<u64>)> = Vec::new();
    for (g, fp) in plans.iter().enumerate() {
        let Some(fp) = fp else { continue };
        let chunk = groups[g].0;
        match &chunk.data {
            DataSource::Remote { store: s, name, .. }
                if store.is_none_or(|st| std::sync::Arc::ptr_eq(st, s)) =>
            {
                store = Some(s);
                for (r, range) in fp.requests().iter().enumerate() {
                    remote.push((g, r));
                    items.push((name.clone(), range.clone()));
                }
            }
            _ => {
                let mut sink = |i: usize, got| each(g, i, got);
                chunk
                    .data
                    .read_ranges(&chunk.paths.data, fp.requests(), |r, got| {
                        chunk.deliver(fp, r, &got, check, &mut retries[g], &mut sink)
                    })?;
            }
        }
    }
    if let Some(store) = store {
        store.read_named_ranges(&items, |n, got| {
            let (g, r) = remote[n];
            if let Some(fp) = &plans[g] {
                let mut sink = |i: usize, got| each(g, i, got);
                groups[g]
                    .0
                    .deliver(fp, r, &got, check, &mut retries[g], &mut sink);
            }
        })?;
    }
    for (g, fp) in plans.iter().enumerate() {
        if let Some(fp) = fp {
            let mut sink = |i: usize, got| each(g, i, got);
            groups[g].0.refetch(fp, &retries[g], &mut sink)?;
        }
    }
    Ok(())
}

/// One frame's JPEG bytes: a slice of a mapping, or bytes fetched for the caller.
pub enum FrameData<'a> {
    Borrowed(&'a [u8]),
    Owned(Bytes),
}

impl std::ops::Deref for FrameData<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FrameData::Borrowed(b) => b,
            FrameData::Owned(b) => b,
        }
    }
}

impl FrameData<'_> {
    /// Owned bytes (a copy only when borrowed).
    pub fn into_bytes(self) -> Bytes {
        match self {
            FrameData::Borrowed(b) => Bytes::copy_from_slice(b),
            FrameData::Owned(b) => b,
        }
    }
}

impl ChunkReader {
    /// Opens a chunk, using its index when one exists and is intact and current, and the
    /// `.gmeta` otherwise. The second value says why an existing index was not used.
    pub fn open(paths: &ChunkPaths) -> Result<(ChunkReader, Option<Error>)> {
        if !paths.index.exists() {
            return Ok((Self::open_legacy(paths)?, None));
        }
        Self::open_in(&Store::default(), paths, KnownSizes::default())
    }

    /// [`ChunkReader::open`] with the `.gulp` memory-mapped, so that
    /// [`ChunkReader::frame_bytes`] hands out slices of it (the default reads with `pread`).
    pub fn open_mapped(paths: &ChunkPaths) -> Result<(ChunkReader, Option<Error>)> {
        Self::open_in(
            &Store::Local(crate::io::LocalIo::Mmap),
            paths,
            KnownSizes::default(),
        )
    }

    /// [`ChunkReader::open`] in any store; `sizes.index` must be known to exist (None for
    /// local files, which are looked for).
    pub fn open_in(
        store: &Store,
        paths: &ChunkPaths,
        sizes: KnownSizes,
    ) -> Result<(ChunkReader, Option<Error>)> {
        let has_index = match store {
            Store::Local(_) => paths.index.exists(),
            Store::Remote(_) => sizes.index.is_some(),
        };
        if !has_index {
            return Ok((Self::open_legacy_in(store, paths, sizes)?, None));
        }
        let opened = probe_index_in(store, paths, sizes)
            .and_then(|p| Self::from_index_in(store, paths, &p.header_bytes, sizes));
        match opened {
            Ok(r) => Ok((r, None)),
            // A damaged or stale index must not make a chunk with a good `.gmeta` unreadable.
            // (On object stores, bytes damaged in transit were fetched again first: only
            // damage at rest gets here.)
            Err(e @ (Error::StaleIndex { .. } | Error::Format { .. })) => {
                let mut legacy = Self::open_legacy_in(store, paths, sizes)?;
                legacy.index_problem = Some(e.to_string());
                Ok((legacy, Some(e)))
            }
            Err(e) => Err(e),
        }
    }

    /// Completes opening a probed chunk: maps the index and checks it is the one probed
    /// (`header` carries every section's CRC), checks the frame table and meta blob, and
    /// compares the `.gmeta` with the one the index was written with.
    pub fn from_index(paths: &ChunkPaths, header: &[u8; HEADER_LEN]) -> Result<ChunkReader> {
        Self::from_index_in(&Store::default(), paths, header, KnownSizes::default())
    }

    /// [`ChunkReader::from_index`] in any store. A `.gmeta` that differs from the one the
    /// index was written for is judged ([`judge_meta`]): written later by another tool (a
    /// `StaleIndex` error: the caller reads through the `.gmeta`), or damaged (the chunk reads
    /// through its checksummed index and [`ChunkReader::meta_problem`] says why).
    pub fn from_index_in(
        store: &Store,
        paths: &ChunkPaths,
        header: &[u8; HEADER_LEN],
        sizes: KnownSizes,
    ) -> Result<ChunkReader> {
        let index = until_settled(store, &paths.index, |seen| {
            let bytes = store.map_or_read(&paths.index)?;
            if store.is_remote() {
                seen.update(&bytes);
            }
            let index = Index::parse(bytes).map_err(|m| Error::format(&paths.index, m))?;
            if index.header_bytes() != header {
                return Err(Error::stale(
                    &paths.index,
                    "the index file was replaced after the chunk was opened",
                ));
            }
            index
                .verify_full()
                .map_err(|m| Error::format(&paths.index, m))?;
            Ok(index)
        })?;
        let h = index.header();
        let (want_len, want_crc) = (h.gmeta_len, h.gmeta_crc);
        // The `.gmeta` as it is when it does not match (after refetches on object stores).
        let mut differs: Option<(Storage, u32)> = None;
        let fetched = until_settled(store, &paths.meta, |seen| {
            let meta = store.read_all(&paths.meta)?;
            let crc = crc32fast::hash(&meta);
            seen.update(&crc.to_le_bytes());
            if meta.len() as u64 == want_len && crc == want_crc {
                return Ok(());
            }
            differs = Some((meta, crc));
            Err(Error::stale(&paths.meta, "differs from its index"))
        });
        let data = store.open_data(&paths.data, sizes.data)?;
        let meta_problem = match (fetched, differs) {
            (Ok(()), _) => None,
            (Err(Error::StaleIndex { .. }), Some((meta, crc))) => {
                let what = format!(
                    "{} has CRC {crc:#010x} ({} bytes); the index was written for CRC \
                     {want_crc:#010x} ({want_len} bytes)",
                    paths.meta.display(),
                    meta.len(),
                );
                let verdict = match judge_meta(&index, &meta, data.len()) {
                    // A `.gmeta` that contradicts the index is damage only if the data still
                    // holds the index's frames; otherwise another tool rewrote the chunk.
                    MetaVerdict::Damaged(_) if !frames_still_match(&index, &data, &paths.data) => {
                        MetaVerdict::Newer(
                            "and the data file no longer holds the frames the index \
                             describes: the chunk was rewritten by another tool"
                                .into(),
                        )
                    }
                    MetaVerdict::Damaged(_) if data_written_after_index(store, paths) => {
                        MetaVerdict::Newer(
                            "and the data file was written after the index: the chunk was \
                             rewritten by another tool"
                                .into(),
                        )
                    }
                    verdict => verdict,
                };
                match verdict {
                    MetaVerdict::Same => None,
                    MetaVerdict::Newer(how) => {
                        return Err(Error::stale(&paths.index, format!("{what}: {how}")))
                    }
                    MetaVerdict::Damaged(how) => Some(format!(
                        "{what}, and {how}: it is damaged (or was edited by hand), so the chunk \
                         is read through its checksummed index, which holds every id, frame \
                         and metadata value; `gulpio repair --apply` rewrites the .gmeta from \
                         the index"
                    )),
                }
            }
            (Err(e), _) => return Err(e),
        };
        Ok(ChunkReader {
            data,
            paths: paths.clone(),
            index,
            kind: IndexKind::Binary,
            index_problem: None,
            meta_problem,
            by_id: OnceLock::new(),
            unindexed_segments: Vec::new(),
        })
    }

    /// Opens a chunk through its `.gmeta` alone (no CRCs to verify).
    pub fn open_legacy(paths: &ChunkPaths) -> Result<ChunkReader> {
        Self::open_legacy_in(&Store::default(), paths, KnownSizes::default())
    }

    /// [`ChunkReader::open_legacy`] in any store.
    pub fn open_legacy_in(
        store: &Store,
        paths: &ChunkPaths,
        sizes: KnownSizes,
    ) -> Result<ChunkReader> {
        let text = store.read_all(&paths.meta)?;
        let (index, unindexed_segments) =
            legacy_index_of(&text).map_err(|m| Error::format(&paths.meta, m))?;
        Ok(ChunkReader {
            data: store.open_data(&paths.data, sizes.data)?,
            paths: paths.clone(),
            index,
            kind: IndexKind::Legacy,
            index_problem: None,
            meta_problem: None,
            by_id: OnceLock::new(),
            unindexed_segments,
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
    /// Why the `.gmeta` was not believed, when the chunk reads through its index although
    /// the `.gmeta` does not match it.
    pub fn meta_problem(&self) -> Option<&str> {
        self.meta_problem.as_deref()
    }
    pub(crate) fn set_index_problem(&mut self, why: String) {
        self.index_problem = Some(why);
    }
    pub fn index(&self) -> &Index {
        &self.index
    }
    /// Where the `.gulp`'s bytes come from.
    pub fn source(&self) -> &DataSource {
        &self.data
    }
    /// The mapped `.gulp`, when it is mapped (local files read with mmap).
    pub fn mapped(&self) -> Option<&[u8]> {
        self.data.mapped()
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
    fn check_in_file(&self, video: usize, k: usize, rec: &FrameRec, len: u64) -> Result<()> {
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

    /// Starts fetching frames `wanted[i] = (video, frame)` (frame indices may be negative) in
    /// the background when the chunk is in an object store, and returns at once: a later read
    /// of the same frames takes those bytes (CRC-checked as always) instead of waiting a
    /// round trip. Nothing to do for local chunks; frames that do not exist are left for the
    /// read to report.
    pub fn prefetch(&self, wanted: &[(usize, i64)]) -> Result<()> {
        let DataSource::Remote { store, name, .. } = &self.data else {
            return Ok(());
        };
        let resolved: Vec<(usize, usize)> = wanted
            .iter()
            .filter_map(|&(video, f)| Some((video, self.frame(video, f).ok()?.0)))
            .collect();
        let fp = self.plan_frames(&resolved);
        let items: Vec<(String, Range<u64>)> = fp
            .requests()
            .iter()
            .map(|r| (name.clone(), r.clone()))
            .collect();
        store.prefetch(&items)
    }

    /// Plans reading frames `wanted[i] = (video, frame)` (resolved, non-negative) of a chunk
    /// that is not mapped: their byte ranges merged into few requests (see [`plan`]).
    pub fn plan_frames(&self, wanted: &[(usize, usize)]) -> FramePlan {
        let mut fp = FramePlan {
            wanted: wanted.to_vec(),
            recs: Vec::with_capacity(wanted.len()),
            early: Vec::new(),
            fetch: Vec::with_capacity(wanted.len()),
            ranges: Vec::with_capacity(wanted.len()),
            planned: plan::Plan {
                requests: Vec::new(),
                slots: Vec::new(),
            },
            by_request: Vec::new(),
        };
        for (i, &(video, k)) in wanted.iter().enumerate() {
            let rec = self.frame(video, k as i64).and_then(|(_, rec)| {
                self.check_in_file(video, k, &rec, self.data.len())
                    .map(|_| rec)
            });
            match rec {
                Ok(rec) => {
                    fp.fetch.push(i);
                    fp.ranges.push(rec.offset..rec.jpeg_end());
                    fp.recs.push(Some(rec));
                }
                Err(e) => {
                    fp.early.push((i, e));
                    fp.recs.push(None);
                }
            }
        }
        fp.planned = plan::plan(&fp.ranges, plan::MAX_GAP, plan::MAX_REQUEST);
        fp.by_request = vec![Vec::new(); fp.planned.requests.len()];
        for (j, &(req, _)) in fp.planned.slots.iter().enumerate() {
            fp.by_request[req].push(j);
        }
        fp
    }

    /// Hands out the frames of request `req` of `fp` once its bytes (`got`) are in. Frames
    /// whose CRC fails after a fetch from an object store go to `retry` instead.
    fn deliver<'a>(
        &'a self,
        fp: &FramePlan,
        req: usize,
        got: &Result<Bytes>,
        check: bool,
        retry: &mut Vec<usize>,
        each: &mut dyn FnMut(usize, Result<FrameData<'a>>),
    ) {
        let remote = matches!(self.data, DataSource::Remote { .. });
        for &j in &fp.by_request[req] {
            let i = fp.fetch[j];
            let (video, k) = fp.wanted[i];
            let out = match got {
                Ok(bytes) => {
                    let off = fp.planned.slots[j].1;
                    let len = (fp.ranges[j].end - fp.ranges[j].start) as usize;
                    let frame = bytes.slice(off..off + len);
                    let crc = match (check, &fp.recs[i]) {
                        (true, Some(rec)) => self.check_crc(video, k, rec, &frame),
                        _ => Ok(()),
                    };
                    match crc {
                        Err(Error::Crc { .. }) if remote => {
                            retry.push(i);
                            continue;
                        }
                        Err(e) => Err(e),
                        Ok(()) => Ok(FrameData::Owned(frame)),
                    }
                }
                Err(e) => match self.cut_under_us(video, k, fp.recs[i].as_ref(), e) {
                    // Intact, but in a request that ran past the new end: read it alone.
                    None => {
                        retry.push(i);
                        continue;
                    }
                    Some(e) => Err(e),
                },
            };
            each(i, out);
        }
    }

    /// For a failed read of a local file read with positional reads, which can be cut after
    /// it was opened: a truncation error naming the frame when the frame now ends past the
    /// end of the file, None when the frame is still whole (to be read alone). Other sources
    /// and errors are returned as they came.
    fn cut_under_us(
        &self,
        video: usize,
        k: usize,
        rec: Option<&FrameRec>,
        e: &Error,
    ) -> Option<Error> {
        match (&self.data, rec, e) {
            (DataSource::Pread { .. }, Some(rec), Error::Format { .. }) => {
                let now = self.data.current_len();
                (rec.jpeg_end() > now).then(|| self.truncated(video, k, rec, now))
            }
            _ => Some(e.clone()),
        }
    }

    /// Fetches the frames in `retry` once more, one request each; a CRC failure now is
    /// damage (or a connection that corrupts every time), reported as such.
    fn refetch<'a>(
        &'a self,
        fp: &FramePlan,
        retry: &[usize],
        each: &mut dyn FnMut(usize, Result<FrameData<'a>>),
    ) -> Result<()> {
        if retry.is_empty() {
            return Ok(());
        }
        let again: Vec<Range<u64>> = retry
            .iter()
            .filter_map(|&i| fp.recs[i].as_ref())
            .map(|r| r.offset..r.jpeg_end())
            .collect();
        if let DataSource::Remote { store, name, .. } = &self.data {
            // Bytes that failed their CRC may have come from the local cache: ask the store.
            store.invalidate(name, &again);
        }
        self.data.read_ranges(&self.paths.data, &again, |j, got| {
            let i = retry[j];
            let (video, k) = fp.wanted[i];
            let got = got
                .map_err(|e| {
                    self.cut_under_us(video, k, fp.recs[i].as_ref(), &e)
                        .unwrap_or(e)
                })
                .and_then(|frame| match &fp.recs[i] {
                    Some(rec) => self
                        .check_crc(video, k, rec, &frame)
                        .map(|_| FrameData::Owned(frame)),
                    None => Err(Error::Internal(
                        "a frame without a record was fetched".into(),
                    )),
                });
            each(i, got);
        })
    }

    /// Reads frames `wanted[i] = (video, frame)` (frames already resolved, non-negative) from
    /// any source and calls `each(i, bytes)` on the calling thread as each frame's bytes are
    /// in (in any order), CRC-checked with `check`. Mapped chunks hand out slices; others
    /// fetch a planned set of merged ranges, concurrently for object stores. A frame whose
    /// CRC fails after a fetch from an object store is fetched once more before it is called
    /// corrupt: a byte flipped in transit is not damage to the dataset.
    pub fn read_frames<'a>(
        &'a self,
        wanted: &[(usize, usize)],
        check: bool,
        mut each: impl FnMut(usize, Result<FrameData<'a>>),
    ) -> Result<()> {
        read_many(&[(self, wanted.to_vec())], check, |_, i, got| each(i, got))
    }

    /// One frame's bytes from any source (`frame` may be negative, Python style).
    pub fn read_frame(&self, video: usize, frame: i64, check: bool) -> Result<FrameData<'_>> {
        let (k, _) = self.frame(video, frame)?;
        let mut out = None;
        self.read_frames(&[(video, k)], check, |_, got| out = Some(got))?;
        out.unwrap_or_else(|| Err(Error::Internal("frame read produced no result".into())))
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

/// What a `.gmeta` that does not match its index is ([`judge_meta`]).
#[derive(Debug, PartialEq, Eq)]
pub enum MetaVerdict {
    /// Other bytes, the same content (rewritten with other formatting): the index is current.
    Same,
    /// Written after the index by another tool (gulpio2 appending to the chunk, or rewriting
    /// it): the `.gmeta` describes the chunk, the index does not. Says how it was told.
    Newer(String),
    /// Contradicts the checksummed index on what the index describes: damage (or a hand
    /// edit), which a reader must not believe over the index. Says where.
    Damaged(String),
}

/// Judges a `.gmeta` whose bytes differ from the ones its (intact) index was written with,
/// `data_len` being the `.gulp`'s size now. Another tool may have appended to the chunk
/// (gulpio2's `'ab'` keeps every entry and adds frames, metadata elements and videos after
/// them) or rewritten it (a new `.gulp` shorter than the index says, every record of the
/// `.gmeta` inside it); anything else that contradicts the index is damage.
pub fn judge_meta(index: &Index, meta: &[u8], data_len: u64) -> MetaVerdict {
    let verdict = judge_meta_entries(index, meta, data_len);
    let MetaVerdict::Damaged(_) = verdict else {
        return verdict;
    };
    // A data file grown past what the index describes, with a `.gmeta` describing the new
    // bytes, was written after the index (another tool rewrote the chunk with other videos):
    // a flipped byte in a `.gmeta` does not change the data file's length.
    let gulp_len = index.header().gulp_len;
    let Ok(legacy) = legacy_index(meta) else {
        return verdict;
    };
    let ends = || (0..legacy.frame_count()).map(|j| legacy.frame(j).record_end());
    if data_len > gulp_len && ends().all(|e| e <= data_len) && ends().any(|e| e > gulp_len) {
        return MetaVerdict::Newer(format!(
            "the data file is {data_len} bytes where the index describes {gulp_len}, and the \
             .gmeta describes the new bytes: the chunk was rewritten by another tool"
        ));
    }
    verdict
}

/// [`judge_meta`] on the `.gmeta`'s entries against the index's.
fn judge_meta_entries(index: &Index, meta: &[u8], data_len: u64) -> MetaVerdict {
    let (legacy, segmented) = match legacy_index_of(meta) {
        Ok(l) => l,
        Err(m) => return MetaVerdict::Damaged(format!("it does not parse ({m})")),
    };
    let rewritten = data_len < index.header().gulp_len
        && (0..legacy.frame_count()).all(|j| legacy.frame(j).record_end() <= data_len);
    if rewritten {
        return MetaVerdict::Newer(format!(
            "the data file is {data_len} bytes, shorter than the {} the index describes, and \
             the .gmeta describes it: the chunk was rewritten by another tool",
            index.header().gulp_len
        ));
    }
    if legacy.video_count() < index.video_count() {
        return MetaVerdict::Damaged(format!(
            "it lists {} videos where the index has {}",
            legacy.video_count(),
            index.video_count()
        ));
    }
    for v in 0..index.video_count() {
        if legacy.id(v) != index.id(v) {
            return MetaVerdict::Damaged(format!(
                "its video {v} is {:?} where the index has {:?}",
                legacy.id(v),
                index.id(v)
            ));
        }
        let (ours, theirs) = (frame_infos(index, v), frame_infos(&legacy, v));
        if theirs.len() < ours.len() {
            return MetaVerdict::Damaged(format!(
                "video {:?} has {} frames where the index has {}",
                index.id(v),
                theirs.len(),
                ours.len()
            ));
        }
        if let Some(k) = (0..ours.len()).find(|&k| ours[k] != theirs[k]) {
            return MetaVerdict::Damaged(format!(
                "video {:?} frame {k} is at {:?} where the index has {:?} ([loc, pad, length])",
                index.id(v),
                theirs[k],
                ours[k]
            ));
        }
        if !extends_meta(index.meta(v), legacy.meta(v)) {
            return MetaVerdict::Damaged(format!(
                "the metadata of video {:?} differs from the index's",
                index.id(v)
            ));
        }
        // How the video is stored: another tool appending to the chunk keeps the object as
        // it is (gulpio2 rewrites the JSON it loaded), so any difference is damage.
        let theirs = segmented
            .binary_search_by_key(&v, |(i, _)| *i)
            .ok()
            .map(|at| segmented[at].1.as_slice());
        let ours = index.stream_and_segments(v);
        let ours = ours.as_ref().map(|(rec, segs)| (rec, segs.as_slice()));
        if let Some(how) = segments::meta_contradicts(ours, theirs) {
            return MetaVerdict::Damaged(format!("the entry of video {:?} {how}", index.id(v)));
        }
    }
    let same = legacy.video_count() == index.video_count()
        && (0..index.video_count()).all(|v| {
            legacy.video(v).frame_count == index.video(v).frame_count
                && legacy.meta(v) == index.meta(v)
        });
    if same {
        return MetaVerdict::Same;
    }
    MetaVerdict::Newer(
        "the .gmeta keeps everything the index describes and adds to it: another tool \
         appended to the chunk (gulpio2?); `gulpio index` brings the index up to date"
            .into(),
    )
}

/// True when a local chunk's `.gulp` was modified after its index was written. Our writers
/// write the index after the data, so this means another tool wrote the data later (gulpio2
/// re-gulping the chunk, possibly to the same bytes with other labels), whereas damage to the
/// `.gmeta` alone leaves the `.gulp` untouched. Unknown (object stores, missing times): false.
fn data_written_after_index(store: &Store, paths: &ChunkPaths) -> bool {
    if store.is_remote() {
        return false;
    }
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(&paths.data), modified(&paths.index)) {
        (Some(data), Some(index)) => data > index,
        _ => false,
    }
}

/// Frames of an index checked against the data file when its `.gmeta` contradicts it.
const FRAMES_SAMPLED: usize = 16;

/// True when a sample of the index's frames (spread over the chunk, the last one included)
/// still has its recorded CRCs in the data file.
fn frames_still_match(index: &Index, data: &DataSource, path: &std::path::Path) -> bool {
    let n = index.frame_count();
    if n == 0 {
        return true;
    }
    let picks = FRAMES_SAMPLED.min(n);
    let mut recs: Vec<FrameRec> = (0..picks).map(|i| index.frame(i * n / picks)).collect();
    recs.push(index.frame(n - 1));
    if recs.iter().any(|r| r.jpeg_end() > data.len()) {
        return false;
    }
    let ranges: Vec<Range<u64>> = recs.iter().map(|r| r.offset..r.jpeg_end()).collect();
    let mut all = true;
    let read = data.read_ranges(path, &ranges, |i, got| {
        all &= got.is_ok_and(|b| crc32fast::hash(&b) == recs[i].crc);
    });
    all && read.is_ok()
}

/// `[loc, pad, length]` of every frame of video `v`, as the `.gmeta` stores them.
fn frame_infos(index: &Index, v: usize) -> Vec<(u64, u64, u64)> {
    let rec = index.video(v);
    (0..rec.frame_count as usize)
        .map(|k| index.frame(rec.frame_start as usize + k).frame_info())
        .collect()
}

/// True when metadata list `newer` (JSON text `[a, b, ...]`) is `older` with zero or more
/// elements appended, as gulpio2 does when appending to a video.
fn extends_meta(older: &[u8], newer: &[u8]) -> bool {
    if older == newer {
        return true;
    }
    let Some(head) = older.strip_suffix(b"]") else {
        return false;
    };
    let Some(rest) = newer.strip_prefix(head) else {
        return false;
    };
    // `[a]` -> `[a, b]`; an empty list `[]` -> `[b]`.
    head == b"[" || rest.starts_with(b",")
}

/// Builds an in-memory index from `.gmeta` text. Frame CRCs and sizes are unknown (zero).
pub fn legacy_index(text: &[u8]) -> Result<Index, Problem> {
    Ok(legacy_index_of(text)?.0)
}

/// Videos read through the `.gmeta` that say they are stored as segments, with the text of
/// their `segments` object.
type Unindexed = Vec<(usize, Vec<u8>)>;

/// [`legacy_index`], and the videos whose entries say they are stored as segments.
fn legacy_index_of(text: &[u8]) -> Result<(Index, Unindexed), Problem> {
    let entries = gmeta::parse(text)?;
    let segmented = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((i, e.segments.clone()?)))
        .collect();
    let mut builder = IndexBuilder::new();
    let mut frames = Vec::new();
    for e in &entries {
        frames.clear();
        for (k, &(loc, pad, length)) in e.frame_info.iter().enumerate() {
            let jpeg_len = u32::try_from(length - pad).map_err(|_| {
                Problem::at(At::frame(&e.id, k), format!("length {length} is too large"))
            })?;
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
    Ok((index, segmented))
}
