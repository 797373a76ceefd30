//! A dataset directory: many chunks, one id namespace. Opening reads only the indexes' video
//! and id tables (legacy chunks without an index are parsed from their `.gmeta`); each
//! indexed chunk is fully checked and its data mapped the first time it is read from.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::chunk::reader::{probe_index, ChunkReader};
use crate::error::{Error, IoContext, Result};
use crate::format::index::Index;
use crate::format::paths::{chunk_number, ChunkPaths, DATA_EXT, META_EXT};

/// Something wrong with one chunk that did not stop the directory from opening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: PathBuf,
    pub message: String,
    /// True when the chunk's videos are unavailable; false for a warning (e.g. a stale index
    /// that was ignored in favour of the `.gmeta`).
    pub chunk_skipped: bool,
}

pub struct ChunkSlot {
    pub number: u64,
    pub paths: ChunkPaths,
    /// Global position of the chunk's first video.
    pub first: usize,
    pub video_count: usize,
    /// The probed index, until the first read completes the check and maps the data.
    pending: Mutex<Option<Index>>,
    reader: OnceLock<Result<Arc<ChunkReader>>>,
}

impl ChunkSlot {
    /// True once the reader was opened (or failed to open): `reader()` then does no I/O.
    pub fn is_loaded(&self) -> bool {
        self.reader.get().is_some()
    }

    /// The chunk's reader, opening it on first use. A failure is remembered and reported on
    /// every later use, so a damaged chunk fails the same way each time. `ids` are the ids the
    /// directory registered for this chunk when it was opened.
    fn reader(&self, ids: &[Box<str>]) -> Result<Arc<ChunkReader>> {
        self.reader
            .get_or_init(|| {
                let pending = self.pending.lock().map(|mut p| p.take()).ok().flatten();
                let opened = match pending {
                    Some(index) => match ChunkReader::from_index(&self.paths, index) {
                        Err(e @ (Error::StaleIndex { .. } | Error::Format { .. })) => {
                            self.fall_back(ids, e)
                        }
                        other => other,
                    },
                    None => Err(Error::InvalidArgument("chunk has no reader".into())),
                };
                opened.map(Arc::new)
            })
            .clone()
    }

    /// The index passed the open-time checks but not the full one (a damaged frame table, or
    /// a `.gmeta` changed without changing size): read through the `.gmeta` if it still lists
    /// the videos the directory registered, in the same order; otherwise the directory must
    /// be reopened.
    fn fall_back(&self, ids: &[Box<str>], why: Error) -> Result<ChunkReader> {
        let mut legacy = ChunkReader::open_legacy(&self.paths)?;
        let same = legacy.video_count() == ids.len()
            && ids.iter().enumerate().all(|(i, id)| legacy.id(i) == &**id);
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

pub struct Directory {
    root: PathBuf,
    chunks: Vec<ChunkSlot>,
    ids: Vec<Box<str>>,
    /// Chunk position of each video, parallel to `ids`.
    chunk_of: Vec<u32>,
    by_id: HashMap<Box<str>, u32>,
    problems: Vec<Problem>,
}

/// gulpio's globs: `data*.gulp` and `meta*.gmeta` (hidden files never match).
fn matches(name: &str, prefix: &str, ext: &str) -> bool {
    name.starts_with(prefix) && name.strip_suffix(ext).is_some_and(|s| s.ends_with('.'))
}

impl Directory {
    pub fn open(root: impl AsRef<Path>) -> Result<Directory> {
        let root = root.as_ref().to_path_buf();
        let mut problems = Vec::new();
        let pairs = find_chunks(&root, &mut problems)?;
        let mut dir = Directory {
            root,
            chunks: Vec::with_capacity(pairs.len()),
            ids: Vec::new(),
            chunk_of: Vec::new(),
            by_id: HashMap::new(),
            problems,
        };
        for (number, paths) in pairs {
            dir.add_chunk(number, paths)?;
        }
        Ok(dir)
    }

    fn add_chunk(&mut self, number: u64, paths: ChunkPaths) -> Result<()> {
        let pos = self.chunks.len() as u32;
        let first = self.ids.len();
        let mut pending = None;
        let reader = OnceLock::new();
        let mut ids: Vec<Box<str>> = Vec::new();
        let indexed = if paths.index.exists() {
            match probe_index(&paths) {
                Ok(index) => Some(index),
                Err(e) => {
                    self.problems.push(Problem {
                        path: paths.index.clone(),
                        message: format!("{e}; reading the chunk through its .gmeta instead"),
                        chunk_skipped: false,
                    });
                    None
                }
            }
        } else {
            None
        };
        match indexed {
            Some(index) => {
                ids.extend((0..index.video_count()).map(|i| Box::from(index.id(i))));
                pending = Some(index);
            }
            None => match ChunkReader::open_legacy(&paths) {
                Ok(r) => {
                    ids.extend((0..r.video_count()).map(|i| Box::from(r.id(i))));
                    let _ = reader.set(Ok(Arc::new(r)));
                }
                Err(e) => {
                    self.problems.push(Problem {
                        path: paths.meta.clone(),
                        message: format!("{e}; the chunk's videos are unavailable"),
                        chunk_skipped: true,
                    });
                    return Ok(());
                }
            },
        }
        for id in &ids {
            if let Some(&other) = self.by_id.get(id) {
                let other_chunk = &self.chunks[self.chunk_of[other as usize] as usize];
                return Err(Error::DuplicateId {
                    id: id.to_string(),
                    first: other_chunk.paths.meta.clone(),
                    second: paths.meta.clone(),
                });
            }
            let g = u32::try_from(self.ids.len()).map_err(|_| {
                Error::InvalidArgument("more than 4 billion videos in one directory".into())
            })?;
            // Duplicates inside one chunk are caught here too, before the chunk is pushed.
            if self.by_id.insert(id.clone(), g).is_some() {
                return Err(Error::DuplicateId {
                    id: id.to_string(),
                    first: paths.meta.clone(),
                    second: paths.meta.clone(),
                });
            }
            self.ids.push(id.clone());
            self.chunk_of.push(pos);
        }
        self.chunks.push(ChunkSlot {
            number,
            paths,
            first,
            video_count: ids.len(),
            pending: Mutex::new(pending),
            reader,
        });
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
    pub fn ids(&self) -> &[Box<str>] {
        &self.ids
    }
    pub fn lookup(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).map(|&g| g as usize)
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
        slot.reader(&self.ids[slot.first..slot.first + slot.video_count])
    }

    /// `(chunk position, video position inside the chunk)` of global video `g`.
    pub fn location(&self, g: usize) -> Option<(usize, usize)> {
        let c = *self.chunk_of.get(g)? as usize;
        Some((c, g - self.chunks[c].first))
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

/// Pairs `data*.gulp` with `meta*.gmeta` by chunk number, sorted numerically (gulpio sorted
/// file names, which put `data_10` before `data_2`). Unpaired files are reported, not fatal.
fn find_chunks(root: &Path, problems: &mut Vec<Problem>) -> Result<Vec<(u64, ChunkPaths)>> {
    let mut data: HashMap<u64, PathBuf> = HashMap::new();
    let mut meta: HashMap<u64, PathBuf> = HashMap::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(root)
        .at(root)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .at(root)?;
    entries.sort();
    for path in entries {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let (table, what) = if matches(name, "data", DATA_EXT) {
            (&mut data, "data")
        } else if matches(name, "meta", META_EXT) {
            (&mut meta, "meta")
        } else {
            continue;
        };
        let Some(k) = chunk_number(&path) else {
            problems.push(Problem {
                path,
                message: format!("{what} file name has no chunk number; ignored"),
                chunk_skipped: true,
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
            (Some(d), Some(m)) => pairs.push((k, ChunkPaths::new(d, m))),
            (Some(d), None) => problems.push(Problem {
                message: format!(
                    "chunk {k} has a data file but no meta file (an interrupted write?); its \
                     videos are unavailable. `gulpio repair` removes it"
                ),
                path: d,
                chunk_skipped: true,
            }),
            (None, Some(m)) => problems.push(Problem {
                message: format!(
                    "chunk {k} has a meta file but no data file; its videos are unavailable"
                ),
                path: m,
                chunk_skipped: true,
            }),
            (None, None) => {}
        }
    }
    Ok(pairs)
}
