//! Reading a chunk: the `.gulp` is memory-mapped and frames are located through the index,
//! either the binary `.gidx` (checksummed) or one built in memory from a legacy `.gmeta`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use bytes::Bytes;

use crate::error::{At, Error, IoContext, Problem, Result};
use crate::format::index::{
    check_front, decode_header, front_len, FrameRec, Header, Index, IndexBuilder, HEADER_LEN,
};
use crate::format::paths::ChunkPaths;
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

/// Sizes of a chunk's files when a listing already gave them (object stores list sizes for
/// free; asking again would cost a round trip per file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KnownSizes {
    pub data: Option<u64>,
    pub meta: Option<u64>,
    pub index: Option<u64>,
}

/// Bytes of an index fetched in the first request when probing a remote chunk: enough for the
/// header and the video and id tables of a chunk of a few hundred videos, so one round trip
/// usually does.
const PROBE_GUESS: u64 = 64 << 10;

/// Reads and checks the front of `paths.index` and that the `.gmeta` has the size the index
/// was written for (a local file).
pub fn probe_index(paths: &ChunkPaths) -> Result<Probe> {
    probe_index_in(&Store::default(), paths, KnownSizes::default())
}

/// [`probe_index`] in any store.
pub fn probe_index_in(store: &Store, paths: &ChunkPaths, sizes: KnownSizes) -> Result<Probe> {
    let path = &paths.index;
    let (header_bytes, header, front, len) = match store {
        Store::Local(_) => read_front_local(path)?,
        Store::Remote(_) => read_front_remote(store, path, sizes.index)?,
    };
    check_front(&front, len).map_err(|m| Error::format(path, m))?;
    let meta_len = store.size(&paths.meta, sizes.meta)?;
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

type Front = ([u8; HEADER_LEN], Header, Vec<u8>, u64);

fn too_short(path: &Path, len: u64) -> Result<()> {
    if len < HEADER_LEN as u64 {
        return Err(Error::format(
            path,
            format!("index is {len} bytes, shorter than its {HEADER_LEN}-byte header"),
        ));
    }
    Ok(())
}

/// The front sections' length, checked against the file's real length before anything is
/// allocated: a hostile header cannot make us allocate more than the file holds.
fn front_need(path: &Path, header: &Header, len: u64) -> Result<usize> {
    let need = front_len(header).map_err(|m| Error::format(path, m))?;
    if need as u64 > len {
        return Err(Error::format(
            path,
            format!("index is {len} bytes, its header describes at least {need}"),
        ));
    }
    Ok(need)
}

/// One open, one `fstat`, two reads: opening a directory does this for every chunk.
fn read_front_local(path: &Path) -> Result<Front> {
    let mut file = File::open(path).at(path)?;
    let len = file.metadata().at(path)?.len();
    too_short(path, len)?;
    let mut header_bytes = [0u8; HEADER_LEN];
    file.read_exact(&mut header_bytes).at(path)?;
    let header = decode_header(&header_bytes).map_err(|m| Error::format(path, m))?;
    let need = front_need(path, &header, len)?;
    let mut front = vec![0u8; need];
    front[..HEADER_LEN].copy_from_slice(&header_bytes);
    file.read_exact(&mut front[HEADER_LEN..]).at(path)?;
    Ok((header_bytes, header, front, len))
}

/// A guessed prefix first (one round trip for most chunks), the rest only if needed.
fn read_front_remote(store: &Store, path: &Path, known: Option<u64>) -> Result<Front> {
    let len = store.size(path, known)?;
    too_short(path, len)?;
    let mut front = store.read_range(path, 0..len.min(PROBE_GUESS))?;
    let mut header_bytes = [0u8; HEADER_LEN];
    header_bytes.copy_from_slice(&front[..HEADER_LEN]);
    let header = decode_header(&header_bytes).map_err(|m| Error::format(path, m))?;
    let need = front_need(path, &header, len)?;
    if front.len() < need {
        let rest = store.read_range(path, front.len() as u64..need as u64)?;
        front.extend_from_slice(&rest);
    }
    front.truncate(need);
    Ok((header_bytes, header, front, len))
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
        let opened = crate::directory::once_more_if_remote(store, || {
            probe_index_in(store, paths, sizes)
                .and_then(|p| Self::from_index_in(store, paths, &p.header_bytes, sizes))
        });
        match opened {
            Ok(r) => Ok((r, None)),
            // A damaged or stale index must not make a chunk with a good `.gmeta` unreadable.
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
    /// that the `.gmeta` is byte for byte the one the index was written with.
    pub fn from_index(paths: &ChunkPaths, header: &[u8; HEADER_LEN]) -> Result<ChunkReader> {
        Self::from_index_in(&Store::default(), paths, header, KnownSizes::default())
    }

    /// [`ChunkReader::from_index`] in any store.
    pub fn from_index_in(
        store: &Store,
        paths: &ChunkPaths,
        header: &[u8; HEADER_LEN],
        sizes: KnownSizes,
    ) -> Result<ChunkReader> {
        let index = Index::parse(store.map_or_read(&paths.index)?)
            .map_err(|m| Error::format(&paths.index, m))?;
        if index.header_bytes() != header {
            return Err(Error::stale(
                &paths.index,
                "the index file was replaced after the chunk was opened",
            ));
        }
        index
            .verify_full()
            .map_err(|m| Error::format(&paths.index, m))?;
        let meta = store.read_all(&paths.meta)?;
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
            data: store.open_data(&paths.data, sizes.data)?,
            paths: paths.clone(),
            index,
            kind: IndexKind::Binary,
            index_problem: None,
            by_id: OnceLock::new(),
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
        let index = legacy_index(&text).map_err(|m| Error::format(&paths.meta, m))?;
        Ok(ChunkReader {
            data: store.open_data(&paths.data, sizes.data)?,
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
    /// Where the `.gulp`'s bytes come from.
    pub fn source(&self) -> &DataSource {
        &self.data
    }
    /// The mapped `.gulp`, when it is mapped (local files read with mmap).
    pub fn mapped(&self) -> Option<&[u8]> {
        self.data.mapped()
    }
    /// Bytes `0..min(len, published_len)` of the `.gulp` whatever the source (a copy unless
    /// mapped), for full checks and rewrites.
    pub fn whole_data(&self) -> Result<Cow<'_, [u8]>> {
        if let Some(m) = self.data.mapped() {
            return Ok(Cow::Borrowed(m));
        }
        let len = self.data.len();
        let step = plan::MAX_REQUEST;
        let ranges: Vec<Range<u64>> = (0..len.div_ceil(step))
            .map(|i| i * step..((i + 1) * step).min(len))
            .collect();
        let mut out = vec![0u8; len as usize];
        let mut failed = None;
        self.data
            .read_ranges(&self.paths.data, &ranges, |i, got| match got {
                Ok(b) => {
                    let start = ranges[i].start as usize;
                    out[start..start + b.len()].copy_from_slice(&b);
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(Cow::Owned(out)),
        }
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
        Err(Error::format_at(
            &self.paths.data,
            At::frame(self.id(video), k),
            format!(
                "truncated: needs bytes {}..{}, the file has {}",
                rec.offset,
                rec.jpeg_end(),
                len
            ),
        ))
    }

    /// The frame's CRC32 against the index (legacy chunks have none to check).
    fn check_crc(&self, video: usize, k: usize, rec: &FrameRec, bytes: &[u8]) -> Result<()> {
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
                Err(e) => Err(e.clone()),
            };
            each(i, out);
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
            let got = got.and_then(|frame| match &fp.recs[i] {
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

/// Builds an in-memory index from `.gmeta` text. Frame CRCs and sizes are unknown (zero).
pub fn legacy_index(text: &[u8]) -> Result<Index, Problem> {
    let entries = gmeta::parse(text)?;
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
    Ok(index)
}
