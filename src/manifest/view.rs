//! The state at the current version without materialising it (docs/FORMAT.md §7.5): the base
//! is mapped and read a page at a time, so a process holds the base's front, one bit per page,
//! and the tail's chunks, whatever the number of videos. Positions follow §7.4 step 4: the
//! base's videos minus its chunks the tail replaced or removed, then the tail's chunks.
//! The reader `GulpDirectory` will open through (issue 36); `State` is its materialised twin
//! and the reference its tests compare with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::io::ManifestIo;
use super::log::current_version_after;
use super::pages::{BaseBytes, Fetched};
use super::pin::Pin;
use super::state::{check_base, locate_base, resolve, tail_candidates, BaseFile, Chosen};
use crate::error::{Error, Result};
use crate::format::manifest::{
    decode_header, ChunkInput, ChunkRecord, Hint, TableFile, VideoRow, HEADER_LEN,
};
use crate::io::RemoteStore;

/// One video of the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoAt {
    pub id: String,
    /// Its chunk's number, and its place in the chunk's index order.
    pub chunk: u64,
    pub index: u32,
    pub frame_count: u32,
    /// `(height, width, channels)` of its first frame, zeros when unknown.
    pub shape: (u16, u16, u8),
    pub segments: bool,
}

/// One chunk of the state, at its chunk position (§7.4 step 4's order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkAt {
    /// The record the state holds for it (`first` is the record's own, in its file).
    pub record: ChunkRecord,
    /// The state position of its first video.
    pub first: u64,
    pub video_count: u64,
    /// No operation of the chunk took effect and its files no longer match its base record.
    pub changed: bool,
}

/// Where a video of the state is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub position: u64,
    /// Its chunk's position, and its place in the chunk.
    pub chunk: usize,
    pub index: u32,
}

pub struct View {
    base_name: String,
    base_hint: Option<Hint>,
    base_is_snapshot: bool,
    base_path: PathBuf,
    base: TableFile<BaseBytes>,
    pub version: u64,
    pub base_version: u64,
    /// Base position ranges `[first, end)` of base chunks not in the state, by `first`, and
    /// the videos excluded before each.
    excluded: Vec<(u64, u64)>,
    excluded_before: Vec<u64>,
    /// Kept-numbering position where each excluded range would start.
    excluded_kept_start: Vec<u64>,
    base_kept: u64,
    /// Indices (in the base's number order) of base chunks not in the state, sorted.
    excluded_chunks: Vec<u64>,
    /// Base chunks no candidate of which took effect (rule M3 judges their reads).
    pub changed: Vec<u64>,
    /// The tail's chunks in position order, and the state position of each one's first video.
    tail: Vec<ChunkInput>,
    tail_first: Vec<u64>,
    tail_ids: HashMap<String, (u32, u32)>,
    pub pending: Vec<(u64, u64)>,
    pub unrecorded: Vec<u64>,
    total: u64,
}

/// What an open reads beyond the base: all commits up to the current version, or (a copy of an
/// earlier open) exactly the state a [`Pin`] describes; and how many commits at most.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAt<'a> {
    pub pin: Option<&'a Pin>,
    /// A longer tail is not read (its commits are not fetched): [`Opening::TailTooLong`].
    pub max_tail: Option<u64>,
}

/// A view, or why it was not read.
pub enum Opening {
    Ready(Box<View>),
    /// The tail has this many commits, more than [`OpenAt::max_tail`].
    TailTooLong(u64),
}

impl Opening {
    fn ready(self) -> View {
        match self {
            Opening::Ready(v) => *v,
            // Only returned when a limit was asked for.
            Opening::TailTooLong(_) => unreachable!("no tail limit was set"),
        }
    }
}

impl View {
    /// Opens the state of the local dataset at `root`: the base's header and front, the
    /// tail's commits, a `stat` of each chunk they name. Ids of the tail that the base's
    /// remaining videos also hold are a `DuplicateId`, as for a listing.
    pub fn open(root: &Path) -> Result<View> {
        super::local_only(root)?;
        Ok(Self::open_at(ManifestIo::Local(root), None, None, OpenAt::default())?.ready())
    }

    /// Opens the state of the dataset in `store`, whose `LATEST` the caller read (`latest`):
    /// the base's front in one request, a probe for commits after it (and a `HEAD` per chunk
    /// they name); the base's pages are fetched when first used.
    pub fn open_remote(store: &Arc<RemoteStore>, latest: Vec<u8>) -> Result<View> {
        let io = ManifestIo::Remote(store);
        Ok(Self::open_at(io, Some(store.clone()), Some(latest), OpenAt::default())?.ready())
    }

    /// Opens the state as `at` says. With a pin, `LATEST` is not read and the log not probed:
    /// the pin's base and the commits up to its version, its pending operations left out even
    /// if they were published since; a state that cannot be the pinned one (a chunk of it
    /// replaced or removed since, another number of videos) is a `StaleIndexError`.
    pub fn open_at(
        io: ManifestIo<'_>,
        remote: Option<Arc<RemoteStore>>,
        latest: Option<Vec<u8>>,
        at: OpenAt<'_>,
    ) -> Result<Opening> {
        let base_file = match at.pin {
            Some(pin) => pin.base_file(io.path(&pin.base_name)),
            None => locate_base(io, latest)?,
        };
        let gone = |e: Error| match (at.pin, &e) {
            (Some(pin), Error::Io { .. } | Error::Remote { .. } | Error::Format { .. }) => {
                Error::stale(
                    io.path(super::DIR),
                    format!(
                        "the manifest version {} a copy of this open was made at cannot be \
                         read any more ({e}); open the dataset again",
                        pin.version
                    ),
                )
            }
            _ => e,
        };
        let base = open_base(&base_file, remote).map_err(gone)?;
        check_base(&base_file, base.header()).map_err(gone)?;
        if let Some(pin) = at.pin.filter(|p| p.dataset_id != base.header().dataset_id) {
            return Err(Error::stale(
                io.path(super::DIR),
                format!(
                    "is another dataset than the one a copy of this open was made from \
                     (manifest version {}): its dataset id differs",
                    pin.version
                ),
            ));
        }
        let version = match at.pin {
            Some(pin) => pin.version,
            // The base was read: only the commits after it are probed.
            None => current_version_after(io, base_file.version)?,
        };
        let tail = version - base_file.version;
        if at.max_tail.is_some_and(|max| tail > max) {
            return Ok(Opening::TailTooLong(tail));
        }
        let mut ops = tail_candidates(
            io,
            base_file.version,
            version,
            base.header().dataset_id,
            base.pending(),
        )
        .map_err(gone)?;
        if let Some(pin) = at.pin {
            // What had not taken effect for the original stays out, published or not.
            for &(k, v) in &pin.pending {
                if let Some(list) = ops.get_mut(&k) {
                    list.retain(|c| c.version < v);
                }
            }
        }
        let mut excluded = Vec::new();
        let mut excluded_chunks = Vec::new();
        let mut changed = Vec::new();
        let mut from_tail: Vec<(u64, ChunkInput)> = Vec::new();
        let mut pending = Vec::new();
        let mut unrecorded = Vec::new();
        for (k, list) in ops {
            let found = call_base(&base, &base_file.path, |b| b.chunk_indexed(k))?;
            let record = found.as_ref().map(|(_, r)| r.clone());
            let r = resolve(io, k, list, record.as_ref())?;
            if let Some(v) = r.pending {
                pending.push((k, v));
            }
            let leaves_base = !matches!(r.chosen, Chosen::Base | Chosen::Changed);
            if let (true, Some((i, rec))) = (leaves_base, &found) {
                excluded_chunks.push(*i);
                if rec.video_count > 0 {
                    excluded.push((rec.first, rec.first + u64::from(rec.video_count)));
                }
            }
            match r.chosen {
                Chosen::Tail(v, input) => from_tail.push((v, input)),
                Chosen::Changed => changed.push(k),
                Chosen::Unrecorded => match at.pin {
                    // The files of an operation the original did not see (published since).
                    Some(pin) if pin.pending.iter().any(|p| p.0 == k) => {}
                    Some(pin) => return Err(pinned_changed(io, pin, k)),
                    None => unrecorded.push(k),
                },
                Chosen::Base | Chosen::Gone => {}
            }
        }
        if let Some(pin) = at.pin {
            pending = pin.pending.clone();
        }
        excluded.sort_unstable();
        excluded_chunks.sort_unstable();
        let mut excluded_before = Vec::with_capacity(excluded.len());
        let mut excluded_kept_start = Vec::with_capacity(excluded.len());
        let mut total = 0;
        for &(first, end) in &excluded {
            excluded_before.push(total);
            excluded_kept_start.push(first - total);
            total += end - first;
        }
        let base_kept = base.video_count() - total;
        from_tail.sort_by_key(|(v, c)| (*v, c.record.number));
        let mut view = View {
            base_name: base_file.name,
            base_hint: base_file.hint,
            base_is_snapshot: base_file.is_snapshot,
            base_path: base_file.path,
            base,
            version,
            base_version: base_file.version,
            excluded,
            excluded_before,
            excluded_kept_start,
            base_kept,
            excluded_chunks,
            changed,
            tail: Vec::with_capacity(from_tail.len()),
            tail_first: Vec::with_capacity(from_tail.len()),
            tail_ids: HashMap::new(),
            pending,
            unrecorded,
            total: base_kept,
        };
        let mut next = base_kept;
        for (_, input) in from_tail {
            let c = view.tail.len() as u32;
            for (i, v) in input.videos.iter().enumerate() {
                // Remotely the base's id pages are not fetched at open: its clashes with the
                // tail are found when the id is looked up (§7.4).
                let clash = view.tail_ids.insert(v.id.clone(), (c, i as u32)).is_some()
                    || (!view.base.source().is_remote() && view.lookup_base(&v.id)?.is_some());
                if clash {
                    return Err(Error::format(
                        io.path(super::DIR),
                        format!(
                            "video id {:?} of chunk {} is also in another chunk of the state",
                            v.id, input.record.number
                        ),
                    ));
                }
            }
            view.tail_first.push(next);
            next += input.videos.len() as u64;
            view.tail.push(input);
        }
        view.total = next;
        if let Some(pin) = at.pin.filter(|p| p.total != view.total) {
            return Err(Error::stale(
                io.path(super::DIR),
                format!(
                    "the dataset's state at manifest version {} holds {} videos now, not the \
                     {} a copy of this open was made with (a chunk was replaced or removed \
                     since); open the dataset again",
                    pin.version, view.total, pin.total
                ),
            ));
        }
        Ok(Opening::Ready(Box::new(view)))
    }

    /// What a copy of this open needs to open the same state ([`OpenAt::pin`]).
    pub fn pin(&self) -> Pin {
        Pin {
            dataset_id: self.base.header().dataset_id,
            version: self.version,
            base_version: self.base_version,
            base_name: self.base_name.clone(),
            is_snapshot: self.base_is_snapshot,
            hint: self.base_hint.clone(),
            pending: self.pending.clone(),
            total: self.total,
        }
    }

    /// Videos in the state.
    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A read of the base's pages; remotely, one that fails a check is tried again with the
    /// fetched pages dropped (rule M4).
    fn call<T>(
        &self,
        f: impl Fn(&TableFile<BaseBytes>) -> std::result::Result<T, String>,
    ) -> Result<T> {
        call_base(&self.base, &self.base_path, f)
    }

    /// The range of `excluded` holding base position `p`, or where it would go.
    fn excluded_at(&self, p: u64) -> std::result::Result<usize, usize> {
        match self.excluded.partition_point(|&(first, _)| first <= p) {
            0 => Err(0),
            n if p < self.excluded[n - 1].1 => Ok(n - 1),
            n => Err(n),
        }
    }

    /// The state position of an id of the base, if its chunk is still the base's.
    fn lookup_base(&self, id: &str) -> Result<Option<u64>> {
        let Some((_, p)) = self.call(|b| b.find(id))? else {
            return Ok(None);
        };
        Ok(match self.excluded_at(p) {
            Ok(_) => None,
            Err(n) => Some(
                p - n.checked_sub(1).map_or(0, |r| {
                    self.excluded_before[r] + self.excluded[r].1 - self.excluded[r].0
                }),
            ),
        })
    }

    /// The position of `id`, or None when the state does not hold it: one id page of the
    /// base (the id table holds base positions: no chunk page is needed, one request
    /// remotely when cold), or the tail's table.
    pub fn lookup(&self, id: &str) -> Result<Option<u64>> {
        if let Some((c, i)) = self.tail_place(id)? {
            return Ok(Some(self.tail_first[c as usize] + u64::from(i)));
        }
        self.lookup_base(id)
    }

    /// The tail's place of `id`, refusing an id the base also holds where that was not
    /// checked at open (remote bases).
    fn tail_place(&self, id: &str) -> Result<Option<(u32, u32)>> {
        let Some(&place) = self.tail_ids.get(id) else {
            return Ok(None);
        };
        if self.base.source().is_remote() && self.lookup_base(id)?.is_some() {
            return Err(Error::format(
                &self.base_path,
                format!(
                    "video id {id:?} of chunk {} is also in another chunk of the state",
                    self.tail[place.0 as usize].record.number
                ),
            ));
        }
        Ok(Some(place))
    }

    /// The base position of the base's `p`-th kept video: ranges whose kept-numbering start
    /// is at or before it are skipped.
    fn base_position(&self, p: u64) -> u64 {
        match self.excluded_kept_start.partition_point(|&k| k <= p) {
            0 => p,
            n => {
                let r = n - 1;
                p + self.excluded_before[r] + self.excluded[r].1 - self.excluded[r].0
            }
        }
    }

    /// Base videos not in the state before base position `p`.
    fn excluded_videos_before(&self, p: u64) -> u64 {
        match self.excluded.partition_point(|&(first, _)| first < p) {
            0 => 0,
            n => self.excluded_before[n - 1] + self.excluded[n - 1].1 - self.excluded[n - 1].0,
        }
    }

    /// Base chunks kept in the state.
    fn base_chunks_kept(&self) -> usize {
        (self.base.chunk_count() as usize).saturating_sub(self.excluded_chunks.len())
    }

    /// Chunks in the state.
    pub fn chunk_count(&self) -> usize {
        self.base_chunks_kept() + self.tail.len()
    }

    /// The chunk position of the base's chunk of index `i` (which the state keeps).
    fn kept_chunk_position(&self, i: u64) -> usize {
        (i - self.excluded_chunks.partition_point(|&e| e < i) as u64) as usize
    }

    /// The chunk at chunk position `c`.
    pub fn chunk(&self, c: usize) -> Result<ChunkAt> {
        let kept = self.base_chunks_kept();
        if c >= kept {
            let t = c - kept;
            let input = self.tail.get(t).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "chunk position {c} is past the {} chunks",
                    self.chunk_count()
                ))
            })?;
            return Ok(ChunkAt {
                record: input.record.clone(),
                first: self.tail_first[t],
                video_count: input.videos.len() as u64,
                changed: false,
            });
        }
        // The `c`-th base index not excluded.
        let mut i = c as u64;
        for &e in &self.excluded_chunks {
            if e <= i {
                i += 1;
            } else {
                break;
            }
        }
        let record = self.call(|b| b.chunk_at(i))?;
        Ok(ChunkAt {
            first: record.first - self.excluded_videos_before(record.first),
            video_count: u64::from(record.video_count),
            changed: self.changed.binary_search(&record.number).is_ok(),
            record,
        })
    }

    /// Where the video at state position `position` is.
    pub fn locate_position(&self, position: u64) -> Result<Located> {
        self.check(position)?;
        if position >= self.base_kept {
            let c = self.tail_first.partition_point(|&f| f <= position) - 1;
            return Ok(Located {
                position,
                chunk: self.base_chunks_kept() + c,
                index: (position - self.tail_first[c]) as u32,
            });
        }
        self.locate_base(position, self.base_position(position))
    }

    fn locate_base(&self, position: u64, p: u64) -> Result<Located> {
        let (i, rec) = self.call(|b| b.chunk_of_indexed(p))?;
        Ok(Located {
            position,
            chunk: self.kept_chunk_position(i),
            index: (p - rec.first) as u32,
        })
    }

    /// Where the video `id` is, or None when the state does not hold it.
    pub fn locate(&self, id: &str) -> Result<Option<Located>> {
        if let Some((c, i)) = self.tail_place(id)? {
            return Ok(Some(Located {
                position: self.tail_first[c as usize] + u64::from(i),
                chunk: self.base_chunks_kept() + c as usize,
                index: i,
            }));
        }
        let Some((_, p)) = self.call(|b| b.find(id))? else {
            return Ok(None);
        };
        if self.excluded_at(p).is_ok() {
            return Ok(None);
        }
        self.locate_base(p - self.excluded_videos_before(p), p)
            .map(Some)
    }

    /// The id of the video at `position`.
    pub fn id(&self, position: u64) -> Result<String> {
        self.check(position)?;
        if position >= self.base_kept {
            let c = self.tail_first.partition_point(|&f| f <= position) - 1;
            return Ok(
                self.tail[c].videos[(position - self.tail_first[c]) as usize]
                    .id
                    .clone(),
            );
        }
        let p = self.base_position(position);
        self.call(|b| b.id_at(p))
    }

    /// The frame count and first frame's `(height, width, channels)` of the video at
    /// `position` (one video page, no id page).
    pub fn shape(&self, position: u64) -> Result<(u32, (u16, u16, u8))> {
        self.check(position)?;
        if position >= self.base_kept {
            let c = self.tail_first.partition_point(|&f| f <= position) - 1;
            let v = &self.tail[c].videos[(position - self.tail_first[c]) as usize];
            return Ok((v.frame_count, (v.height, v.width, v.channels)));
        }
        let p = self.base_position(position);
        let row = self.call(|b| b.row(p))?;
        Ok((row.frame_count, (row.height, row.width, row.channels)))
    }

    /// The largest chunk number of the state, its pending operations and the chunks found
    /// unrecorded (the canary's reference, §7.5 step 4: a tool that does not know the manifest
    /// numbers its new chunk after the largest one on disk).
    pub fn max_chunk(&self) -> Result<Option<u64>> {
        let mut i = self.base.chunk_count();
        let mut base = None;
        let last_kept = i > 0 && self.excluded_chunks.last() != Some(&(i - 1));
        if last_kept && self.base.pending().is_empty() {
            // The header's `max_chunk` is then the last record's number: no page to read (a
            // request remotely).
            i = 0;
            base = Some(self.base.header().max_chunk);
        }
        while i > 0 {
            i -= 1;
            if self.excluded_chunks.binary_search(&i).is_err() {
                base = Some(self.call(|b| b.chunk_at(i))?.number);
                break;
            }
        }
        Ok(self
            .tail
            .iter()
            .map(|c| c.record.number)
            .chain(self.pending.iter().map(|p| p.0))
            .chain(self.unrecorded.iter().copied())
            .chain(base)
            .max())
    }

    /// Commits after the base.
    pub fn tail_commits(&self) -> u64 {
        self.version - self.base_version
    }

    fn check(&self, position: u64) -> Result<()> {
        if position >= self.len() {
            return Err(Error::InvalidArgument(format!(
                "video position {position} is past the {} videos",
                self.len()
            )));
        }
        Ok(())
    }

    /// The video at `position`.
    pub fn video(&self, position: u64) -> Result<VideoAt> {
        if position >= self.len() {
            return Err(Error::InvalidArgument(format!(
                "video position {position} is past the {} videos",
                self.len()
            )));
        }
        if position >= self.base_kept {
            let c = self.tail_first.partition_point(|&f| f <= position) - 1;
            let input = &self.tail[c];
            let i = (position - self.tail_first[c]) as usize;
            let v = &input.videos[i];
            return Ok(VideoAt {
                id: v.id.clone(),
                chunk: input.record.number,
                index: i as u32,
                frame_count: v.frame_count,
                shape: (v.height, v.width, v.channels),
                segments: v.segments,
            });
        }
        let p = self.base_position(position);
        let row: VideoRow = self.call(|b| b.row(p))?;
        let id = self.call(|b| b.id_at(p))?;
        let rec = self.call(|b| b.chunk_of(p))?;
        Ok(VideoAt {
            id,
            chunk: rec.number,
            index: (p - rec.first) as u32,
            frame_count: row.frame_count,
            shape: (row.height, row.width, row.channels),
            segments: row.segments,
        })
    }
}

/// A chunk of a pinned state that is neither its pinned record nor absent any more.
fn pinned_changed(io: ManifestIo<'_>, pin: &Pin, k: u64) -> Error {
    Error::stale(
        io.path(&crate::format::paths::FileKind::Meta.file_name(k)),
        format!(
            "chunk {k} was replaced or removed after manifest version {}, at which a copy of \
             this open was made; open the dataset again",
            pin.version
        ),
    )
}

/// A remote base up to this size is fetched whole at open (one request instead of one per
/// page used; a dataset of ~100k videos).
const WHOLE_FETCH: u64 = 4 << 20;

/// [`View::call`] before the view exists.
fn call_base<T>(
    base: &TableFile<BaseBytes>,
    path: &Path,
    f: impl Fn(&TableFile<BaseBytes>) -> std::result::Result<T, String>,
) -> Result<T> {
    match f(base) {
        Ok(v) => Ok(v),
        Err(_) if base.source().is_remote() => {
            base.source().forget();
            f(base).map_err(|m| Error::format(path, m))
        }
        Err(m) => Err(Error::format(path, m)),
    }
}

/// The base's table file: mapped locally (its exact length checked, rule M1), or its front
/// fetched whole remotely, in one request when `LATEST` gave its length, again if it fails its
/// check (rule M4: only damage seen twice is the file's).
fn open_base(base: &BaseFile, remote: Option<Arc<RemoteStore>>) -> Result<TableFile<BaseBytes>> {
    let bad = |m: String| Error::format(&base.path, m);
    let Some(store) = remote else {
        let storage = crate::io::map_file(&base.path)?;
        let len = storage.len() as u64;
        let file = TableFile::open(BaseBytes::Mapped(storage)).map_err(bad)?;
        // A cut file may still hold a whole front.
        if len != file.header().file_len {
            return Err(bad(format!(
                "the file is {len} bytes, its header says {}",
                file.header().file_len
            )));
        }
        return Ok(file);
    };
    let mut failure = String::new();
    for _ in 0..2 {
        let (front_len, fetch_len) = match &base.hint {
            // A small base is fetched whole: its pages cost no request later.
            Some(h) if h.front_len >= HEADER_LEN as u64 && h.file_len <= WHOLE_FETCH => {
                (h.front_len, h.file_len.max(h.front_len))
            }
            Some(h) if h.front_len >= HEADER_LEN as u64 => (h.front_len, h.front_len),
            _ => {
                let head = store.read_range(&base.name, 0..HEADER_LEN as u64)?;
                match decode_header(&head) {
                    Ok(h) => (h.front_len, h.front_len),
                    Err(m) => {
                        failure = m;
                        continue;
                    }
                }
            }
        };
        let bytes = store.read_range(&base.name, 0..fetch_len)?.to_vec();
        let fetched = BaseBytes::Fetched(Fetched::new(
            store.clone(),
            base.name.clone(),
            bytes,
            front_len as usize,
        ));
        match TableFile::open(fetched) {
            Ok(file) => {
                if let Some(h) = &base.hint {
                    let header = file.header();
                    if h.file_len != header.file_len || h.front_len != header.front_len {
                        return Err(bad(format!(
                            "its header gives {} bytes ({} of front), LATEST {} ({})",
                            file.header().file_len,
                            file.header().front_len,
                            h.file_len,
                            h.front_len
                        )));
                    }
                }
                return Ok(file);
            }
            Err(m) => failure = m,
        }
    }
    Err(bad(failure))
}
