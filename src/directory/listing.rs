//! Opening a dataset by listing its folder (docs/FORMAT.md §1-§4a): every chunk's index front
//! probed (concurrently on object stores), every id held in one table. What a dataset without
//! a manifest, or whose manifest cannot be used, opens with.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use hashbrown::{DefaultHashBuilder, HashTable};

use super::slot::{ChunkSlot, HowOpened};
use super::Problem;
use crate::chunk::probe::{probe_index_in, KnownSizes, Probe};
use crate::chunk::reader::{ChunkReader, ExpectedIndex};
use crate::error::{Error, Result};
use crate::format::index::front_ids;
use crate::format::paths::{chunk_number, glob_kind, ChunkPaths, FileKind};
use crate::io::Store;

/// The chunks and ids a listing found.
#[derive(Default)]
pub(super) struct Listing {
    pub chunks: Vec<Arc<ChunkSlot>>,
    pub ids: IdTable,
    /// Chunk position of each video, parallel to `ids`.
    pub chunk_of: Vec<u32>,
    pub problems: Vec<Problem>,
}

impl Listing {
    /// Lists `root` and probes every chunk's index.
    pub fn open(store: &Store, root: &Path) -> Result<Listing> {
        let mut listing = Listing::default();
        let pairs = find_chunks(store, root, &mut listing.problems)?;
        let probes = probe_all(store, &pairs);
        listing.chunks.reserve(pairs.len());
        for ((number, paths, sizes), probe) in pairs.into_iter().zip(probes) {
            listing.add_chunk(store, number, paths, sizes, probe)?;
        }
        Ok(listing)
    }

    /// `(chunk position, video position inside the chunk)` of global video `g`.
    pub fn location(&self, g: usize) -> Option<(usize, usize)> {
        let c = *self.chunk_of.get(g)? as usize;
        Some((c, g - self.chunks[c].first))
    }

    /// The chunk's videos as the listing registered them, in order.
    pub fn registered(&self, slot: &ChunkSlot) -> impl Iterator<Item = &str> + '_ {
        (slot.first..slot.first + slot.video_count).map(|g| self.ids.get(g))
    }

    fn add_chunk(
        &mut self,
        store: &Store,
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
                        how: HowOpened::Probed(probe.header_bytes),
                        reader: ChunkSlot::unopened(),
                    };
                    self.ids
                        .reserve(slot.video_count, probe.header.ids_len as usize);
                    return self.register(slot, ids);
                }
                // The `.gmeta` changed size since the index was written: appended to by
                // another tool, or damaged. Which one decides whose ids count, so the chunk is
                // opened now (only such chunks pay for it).
                Ok(probe) => {
                    let expected = ExpectedIndex::Header(&probe.header_bytes);
                    match ChunkReader::from_index_in(store, &paths, expected, sizes) {
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
        match ChunkReader::open_legacy_in(store, &paths, sizes) {
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
            how: HowOpened::AtOpen,
            reader: std::sync::Mutex::new(Some(Ok(reader.clone()))),
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
        self.chunks.push(Arc::new(slot));
        Ok(())
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
    pub(super) fn insert(&mut self, id: &str) -> std::result::Result<usize, usize> {
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

    pub(super) fn reserve(&mut self, ids: usize, bytes: usize) {
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
