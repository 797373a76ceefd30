//! A dataset directory: many chunks, one id namespace. Opening reads only the indexes' video
//! and id tables (legacy chunks without an index are parsed from their `.gmeta`); each
//! indexed chunk is fully checked and its data mapped the first time it is read from.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::chunk::probe::{probe_index_in, KnownSizes, Probe};
use crate::chunk::reader::ChunkReader;
use crate::decode::{plan, FrameJob};
use crate::error::{At, Error, Result};
use crate::format::index::{front_ids, HEADER_LEN};
use crate::format::paths::{chunk_number, glob_kind, ChunkPaths, FileKind};
use crate::io::Store;
use crate::pixels::Colorspace;

/// Something wrong with one chunk that did not stop the directory from opening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: PathBuf,
    pub message: String,
    /// True when the chunk's videos are unavailable; false for a warning (e.g. a stale index
    /// that was ignored in favour of the `.gmeta`).
    pub chunk_skipped: bool,
    /// The video (and frame) the message names, when the problem is about one.
    pub at: Option<At>,
}

pub struct ChunkSlot {
    pub number: u64,
    pub paths: ChunkPaths,
    /// Global position of the chunk's first video.
    pub first: usize,
    pub video_count: usize,
    /// File sizes the listing gave (object stores), saving a request per file.
    pub sizes: KnownSizes,
    /// Header of the index probed at open (None for legacy chunks, opened at once).
    probed: Option<[u8; HEADER_LEN]>,
    reader: OnceLock<Result<Arc<ChunkReader>>>,
}

impl ChunkSlot {
    /// True once the reader was opened (or failed to open): `reader()` then does no I/O.
    pub fn is_loaded(&self) -> bool {
        self.reader.get().is_some()
    }

    /// The chunk's reader, opening it on first use. A failure is remembered and reported on
    /// every later use, so a damaged chunk fails the same way each time; a remote fault that
    /// outlasted the retries is not remembered (the next use tries again). `ids` are the ids
    /// the directory registered for this chunk when it was opened.
    fn reader(&self, ids: &IdTable, store: &Store) -> Result<Arc<ChunkReader>> {
        if let Some(done) = self.reader.get() {
            return done.clone();
        }
        let opened = match &self.probed {
            Some(header) => {
                match ChunkReader::from_index_in(store, &self.paths, header, self.sizes) {
                    Err(e @ (Error::StaleIndex { .. } | Error::Format { .. })) => {
                        self.fall_back(ids, store, e)
                    }
                    other => other,
                }
            }
            None => Err(Error::Internal("chunk has no reader".into())),
        }
        .map(Arc::new);
        if matches!(opened, Err(Error::Remote { .. })) {
            return opened;
        }
        // Another thread may have opened it meanwhile: every caller gets the same reader.
        self.reader.get_or_init(|| opened).clone()
    }

    /// The index passed the open-time checks but not the full one (a damaged frame table, or
    /// a `.gmeta` changed without changing size): read through the `.gmeta` if it still lists
    /// the videos the directory registered, in the same order; otherwise the directory must
    /// be reopened.
    fn fall_back(&self, ids: &IdTable, store: &Store, why: Error) -> Result<ChunkReader> {
        let mut legacy = ChunkReader::open_legacy_in(store, &self.paths, self.sizes)?;
        let same = legacy.video_count() == self.video_count
            && (0..self.video_count).all(|i| legacy.id(i) == ids.get(self.first + i));
        if !same {
            return Err(Error::stale(
                &self.paths.index,
                format!("{why}; the chunk changed after the directory was opened: reopen it"),
            ));
        }
        legacy.set_index_problem(why.to_string());
        Ok(legacy)
    }
}

/// Every id of a directory in one string, with a hash table of positions: two allocations
/// for any number of ids, instead of one or more per id.
#[derive(Default)]
pub struct IdTable {
    blob: String,
    ends: Vec<usize>,
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

impl IdTable {
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Panics if `i >= len()`.
    pub fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.blob[start..self.ends[i]]
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    pub fn lookup(&self, id: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(id);
        self.table
            .find(hash, |&i| self.get(i as usize) == id)
            .map(|&i| i as usize)
    }

    /// Adds `id` at position `len()`; if it is already present, returns its position instead.
    fn insert(&mut self, id: &str) -> std::result::Result<usize, usize> {
        if let Some(existing) = self.lookup(id) {
            return Err(existing);
        }
        let pos = self.len();
        self.blob.push_str(id);
        self.ends.push(self.blob.len());
        let hash = self.hasher.hash_one(id);
        let (blob, ends, hasher) = (&self.blob, &self.ends, &self.hasher);
        self.table.insert_unique(hash, pos as u32, |&i| {
            let i = i as usize;
            let start = if i == 0 { 0 } else { ends[i - 1] };
            hasher.hash_one(&blob[start..ends[i]])
        });
        Ok(pos)
    }

    fn reserve(&mut self, ids: usize, bytes: usize) {
        self.blob.reserve(bytes);
        self.ends.reserve(ids);
        let (blob, ends, hasher) = (&self.blob, &self.ends, &self.hasher);
        self.table.reserve(ids, |&i| {
            let i = i as usize;
            let start = if i == 0 { 0 } else { ends[i - 1] };
            hasher.hash_one(&blob[start..ends[i]])
        });
    }
}

pub struct Directory {
    root: PathBuf,
    store: Store,
    chunks: Vec<ChunkSlot>,
    ids: IdTable,
    /// Chunk position of each video, parallel to `ids`.
    chunk_of: Vec<u32>,
    problems: Vec<Problem>,
}

/// gulpio's globs: `data*.gulp` and `meta*.gmeta` (hidden files never match).
impl Directory {
    /// Opens the dataset in the local directory `root`, memory-mapping its files.
    pub fn open(root: impl AsRef<Path>) -> Result<Directory> {
        Self::open_in(Store::default(), root)
    }

    /// Opens the dataset at `root` in `store` (for object stores `root` is the dataset's URL).
    /// Index fronts are fetched concurrently for remote stores (one round trip per chunk,
    /// overlapped), after one listing.
    pub fn open_in(store: Store, root: impl AsRef<Path>) -> Result<Directory> {
        let root = root.as_ref().to_path_buf();
        let mut problems = Vec::new();
        let pairs = find_chunks(&store, &root, &mut problems)?;
        let probes = probe_all(&store, &pairs);
        let mut dir = Directory {
            root,
            store,
            chunks: Vec::with_capacity(pairs.len()),
            ids: IdTable::default(),
            chunk_of: Vec::new(),
            problems,
        };
        for ((number, paths, sizes), probe) in pairs.into_iter().zip(probes) {
            dir.add_chunk(number, paths, sizes, probe)?;
        }
        Ok(dir)
    }

    /// Where the dataset's bytes come from.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Chunk numbers of every data or meta file listed now, paired or not.
    pub fn listed_numbers(&self) -> Result<Vec<u64>> {
        let mut out: Vec<u64> = self
            .store
            .list(&self.root)?
            .iter()
            .filter_map(|(path, _)| {
                let name = path.file_name()?.to_str()?;
                glob_kind(name).and_then(|_| chunk_number(path))
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The names of the files directly in the dataset's folder (or under its prefix), listed
    /// now, sorted: chunk files and every other file beside them.
    pub fn file_names(&self) -> Result<Vec<String>> {
        let mut out: Vec<String> = self
            .store
            .list(&self.root)?
            .iter()
            .filter_map(|(path, _)| Some(path.file_name()?.to_str()?.to_owned()))
            .collect();
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// Uploads a small local file beside the chunks of a remote dataset.
    pub fn upload_file(&self, local: &Path, name: &str) -> Result<()> {
        check_plain_name(name)?;
        match &self.store {
            Store::Remote(r) => r.put_file(name, local),
            Store::Local(_) => Err(Error::InvalidArgument(
                "upload_file is for remote datasets; copy local files instead".into(),
            )),
        }
    }

    /// A small file beside the chunks (e.g. `label2idx.json`), or None if there is none.
    /// Only plain names: ids and other input never become paths.
    pub fn read_file(&self, name: &str) -> Result<Option<Vec<u8>>> {
        if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
            return Err(Error::InvalidArgument(format!(
                "not a plain file name: {name:?}"
            )));
        }
        let path = self.store.join(&self.root, name);
        match self.store.read_all(&path) {
            Ok(bytes) => Ok(Some(bytes.to_vec())),
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Ok(None)
            }
            Err(Error::Remote {
                kind: crate::error::RemoteKind::NotFound,
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn add_chunk(
        &mut self,
        number: u64,
        paths: ChunkPaths,
        sizes: KnownSizes,
        probe: Option<Result<Probe>>,
    ) -> Result<()> {
        let first = self.ids.len();
        if let Some(probed) = probe {
            match probed {
                Ok(probe) if probe.meta_size_matches() => {
                    let ids = front_ids(&probe.front, &probe.header)
                        .map_err(|m| Error::format(&paths.index, m))?;
                    let slot = ChunkSlot {
                        number,
                        paths,
                        first,
                        video_count: probe.header.video_count as usize,
                        sizes,
                        probed: Some(probe.header_bytes),
                        reader: OnceLock::new(),
                    };
                    self.ids
                        .reserve(slot.video_count, probe.header.ids_len as usize);
                    return self.register(slot, ids);
                }
                // The `.gmeta` changed size since the index was written: appended to by
                // another tool, or damaged. Which one decides whose ids count, so the chunk is
                // opened now (only such chunks pay for it).
                Ok(probe) => {
                    match ChunkReader::from_index_in(
                        &self.store,
                        &paths,
                        &probe.header_bytes,
                        sizes,
                    ) {
                        // A damaged `.gmeta` is the reader's `meta_problem`, reported when the
                        // chunk is first used, as for one found before the first read.
                        Ok(reader) => return self.add_opened(number, paths, sizes, reader),
                        Err(e @ (Error::StaleIndex { .. } | Error::Format { .. })) => {
                            self.problems.push(Problem {
                                path: paths.index.clone(),
                                message: format!(
                                    "{e}; reading the chunk through its .gmeta instead"
                                ),
                                chunk_skipped: false,
                                at: e.at(),
                            })
                        }
                        Err(e) => return Err(e),
                    }
                }
                // A remote index that arrived different every time: never read without it.
                Err(e @ Error::Remote { .. }) => return Err(e),
                Err(e) => self.problems.push(Problem {
                    path: paths.index.clone(),
                    message: format!("{e}; reading the chunk through its .gmeta instead"),
                    chunk_skipped: false,
                    at: e.at(),
                }),
            }
        }
        match ChunkReader::open_legacy_in(&self.store, &paths, sizes) {
            Ok(r) => self.add_opened(number, paths, sizes, r),
            Err(e) => {
                self.problems.push(Problem {
                    path: paths.meta.clone(),
                    message: format!("{e}; the chunk's videos are unavailable"),
                    chunk_skipped: true,
                    at: e.at(),
                });
                Ok(())
            }
        }
    }

    /// Adds a chunk whose reader is already open.
    fn add_opened(
        &mut self,
        number: u64,
        paths: ChunkPaths,
        sizes: KnownSizes,
        reader: ChunkReader,
    ) -> Result<()> {
        let reader = Arc::new(reader);
        let slot = ChunkSlot {
            number,
            paths,
            first: self.ids.len(),
            video_count: reader.video_count(),
            sizes,
            probed: None,
            reader: OnceLock::from(Ok(reader.clone())),
        };
        self.register(slot, (0..reader.video_count()).map(|i| reader.id(i)))
    }

    /// Adds a chunk's ids (refusing duplicates, also inside the chunk) and the chunk.
    fn register<'a>(&mut self, slot: ChunkSlot, ids: impl Iterator<Item = &'a str>) -> Result<()> {
        let pos = u32::try_from(self.chunks.len())
            .map_err(|_| Error::InvalidArgument("too many chunks".into()))?;
        if u32::try_from(self.ids.len() + slot.video_count).is_err() {
            return Err(Error::InvalidArgument(
                "more than 4 billion videos in one directory".into(),
            ));
        }
        for id in ids {
            if let Err(other) = self.ids.insert(id) {
                // `other` may be in this very chunk, which is not in `self.chunks` yet.
                let first = match self
                    .chunk_of
                    .get(other)
                    .and_then(|&c| self.chunks.get(c as usize))
                {
                    Some(c) => c.paths.meta.clone(),
                    None => slot.paths.meta.clone(),
                };
                return Err(Error::DuplicateId {
                    id: id.to_owned(),
                    first,
                    second: slot.paths.meta.clone(),
                });
            }
            self.chunk_of.push(pos);
        }
        self.chunks.push(slot);
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    pub fn ids(&self) -> &IdTable {
        &self.ids
    }
    pub fn lookup(&self, id: &str) -> Option<usize> {
        self.ids.lookup(id)
    }
    pub fn chunks(&self) -> &[ChunkSlot] {
        &self.chunks
    }
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// The reader of chunk position `pos`, opened (and fully checked) on first use.
    pub fn reader(&self, pos: usize) -> Result<Arc<ChunkReader>> {
        let slot = self
            .chunks
            .get(pos)
            .ok_or_else(|| Error::InvalidArgument(format!("chunk position {pos} out of range")))?;
        slot.reader(&self.ids, &self.store)
    }

    /// `(chunk position, video position inside the chunk)` of global video `g`.
    pub fn location(&self, g: usize) -> Option<(usize, usize)> {
        let c = *self.chunk_of.get(g)? as usize;
        Some((c, g - self.chunks[c].first))
    }

    /// Per video, from the binary indexes alone (no frame read, no `.gmeta` parsed): its frame
    /// count and its first frame's `[height, width, channels]`, `[0, 0, 0]` when the video has
    /// no frames or its chunk has no index (legacy chunks). `videos` are global positions (in
    /// id order), `None` for every video. Opens each chunk's reader once, as a first read
    /// would (one request per chunk for a remote dataset). What shape bucketing needs.
    ///
    /// With `headers`, a video with frames whose index does not say (a chunk written without
    /// one, by gulpio or gulpio2) gets its first frame's shape from the JPEG header, as a read
    /// plans it (channels 1 for gray, else 3): one frame read per such video.
    pub fn video_shapes(
        &self,
        videos: Option<&[usize]>,
        headers: bool,
    ) -> Result<(Vec<u32>, Vec<[u16; 3]>)> {
        let n = videos.map_or(self.len(), <[usize]>::len);
        let mut counts = Vec::with_capacity(n);
        let mut shapes = Vec::with_capacity(n);
        let mut readers: Vec<Option<Arc<ChunkReader>>> = vec![None; self.chunks.len()];
        for k in 0..n {
            let g = videos.map_or(k, |v| v[k]);
            let (c, v) = self.location(g).ok_or_else(|| {
                Error::InvalidArgument(format!("video position {g} out of range"))
            })?;
            let reader = match &readers[c] {
                Some(r) => r,
                None => readers[c].insert(self.reader(c)?),
            };
            let first = reader.frames(v).next().unwrap_or_default();
            let count = reader.frame_count(v);
            counts.push(count as u32);
            let mut shape = [first.height, first.width, first.channels as u16];
            if headers && count > 0 && shape[0] == 0 {
                let jobs = plan(reader, v, &[0], Colorspace::Auto, false, None)?;
                if let Some(&FrameJob {
                    shape: (h, w, c), ..
                }) = jobs.first()
                {
                    // A JPEG header's sizes are 16-bit fields.
                    let dim = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
                    shape = [dim(h), dim(w), dim(c)];
                }
            }
            shapes.push(shape);
        }
        Ok((counts, shapes))
    }

    /// The reader and local position of the video with this id.
    pub fn resolve(&self, id: &str) -> Result<(Arc<ChunkReader>, usize)> {
        let g = self
            .lookup(id)
            .ok_or_else(|| Error::UnknownId(id.to_owned()))?;
        let (c, v) = self
            .location(g)
            .ok_or_else(|| Error::UnknownId(id.to_owned()))?;
        Ok((self.reader(c)?, v))
    }
}

/// Only plain names: ids and other input never become paths.
fn check_plain_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
        return Err(Error::InvalidArgument(format!(
            "not a plain file name: {name:?}"
        )));
    }
    Ok(())
}

/// Probes the index of every chunk that has one (None for chunks without an index). Remote
/// probes run concurrently, each a round trip or two; local ones are cheap reads in order.
fn probe_all(store: &Store, pairs: &[(u64, ChunkPaths, KnownSizes)]) -> Vec<Option<Result<Probe>>> {
    let probe = |(_, paths, sizes): &(u64, ChunkPaths, KnownSizes)| {
        sizes.index.map(|_| probe_index_in(store, paths, *sizes))
    };
    let Store::Remote(remote) = store else {
        return pairs.iter().map(probe).collect();
    };
    let workers = remote.settings().concurrency.clamp(1, 64).min(pairs.len());
    if workers <= 1 {
        return pairs.iter().map(probe).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<OnceLock<Option<Result<Probe>>>> =
        pairs.iter().map(|_| OnceLock::new()).collect();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(pair) = pairs.get(i) else { break };
                let _ = results[i].set(probe(pair));
            });
        }
    });
    results
        .into_iter()
        .map(|r| {
            r.into_inner().unwrap_or_else(|| {
                Some(Err(Error::Internal("an index probe did not finish".into())))
            })
        })
        .collect()
}

/// Pairs `data*.gulp` with `meta*.gmeta` by chunk number, sorted numerically (gulpio sorted
/// file names, which put `data_10` before `data_2`). Unpaired files are reported, not fatal.
/// One listing gives every file, with sizes for object stores.
fn find_chunks(
    store: &Store,
    root: &Path,
    problems: &mut Vec<Problem>,
) -> Result<Vec<(u64, ChunkPaths, KnownSizes)>> {
    let mut data: HashMap<u64, PathBuf> = HashMap::new();
    let mut meta: HashMap<u64, PathBuf> = HashMap::new();
    let entries = store.list(root)?;
    let known = |n: u64| (n != u64::MAX).then_some(n);
    let sizes: HashMap<&Path, u64> = entries.iter().map(|(p, n)| (p.as_path(), *n)).collect();
    for (path, _) in &entries {
        let path = path.clone();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let (table, what) = match glob_kind(name) {
            Some(FileKind::Data) => (&mut data, "data"),
            Some(FileKind::Meta) => (&mut meta, "meta"),
            _ => continue,
        };
        let Some(k) = chunk_number(&path) else {
            problems.push(Problem {
                path,
                message: format!("{what} file name has no chunk number; ignored"),
                chunk_skipped: true,
                at: None,
            });
            continue;
        };
        if let Some(prev) = table.get(&k) {
            return Err(Error::format(
                root,
                format!(
                    "{} and {} both claim chunk number {k}",
                    prev.display(),
                    path.display()
                ),
            ));
        }
        table.insert(k, path);
    }
    let mut numbers: Vec<u64> = data.keys().chain(meta.keys()).copied().collect();
    numbers.sort_unstable();
    numbers.dedup();
    let mut pairs = Vec::new();
    for k in numbers {
        match (data.remove(&k), meta.remove(&k)) {
            (Some(d), Some(m)) => {
                let paths = ChunkPaths::new(d, m);
                let sizes = KnownSizes {
                    data: sizes.get(paths.data.as_path()).copied().and_then(known),
                    meta: sizes.get(paths.meta.as_path()).copied().and_then(known),
                    // Listed means present; local listings carry no sizes (u64::MAX).
                    index: sizes.get(paths.index.as_path()).copied(),
                };
                pairs.push((k, paths, sizes))
            }
            (Some(d), None) => problems.push(Problem {
                message: format!(
                    "chunk {k} has a data file but no meta file (an interrupted write?); its \
                     videos are unavailable. Restore the meta file, or remove the data file if it is \
                     the leftover of an interrupted write"
                ),
                path: d,
                chunk_skipped: true,
                at: None,
            }),
            (None, Some(m)) => problems.push(Problem {
                message: format!(
                    "chunk {k} has a meta file but no data file; its videos are unavailable"
                ),
                path: m,
                chunk_skipped: true,
                at: None,
            }),
            (None, None) => {}
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests;
