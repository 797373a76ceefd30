//! A dataset directory: many chunks, one id namespace. It opens through the dataset manifest
//! when there is a usable one (docs/FORMAT.md §7.5: a mapped base and the commits after it,
//! nothing per chunk or per video), else by listing (every chunk's index front probed, every id
//! held). Either way each chunk is fully checked and its data mapped the first time it is read
//! from: against its index as probed, or against its manifest record (rule M3).
//!
//! Each part has a file of its own: `listing` (opening by listing), `recorded` (opening through
//! the manifest), `slot` (one chunk and its reader).

mod listing;
mod recorded;
mod slot;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::chunk::reader::{ChunkReader, ExpectedIndex};
use crate::decode::{plan, FrameJob};
use crate::error::{At, Error, Result};
use crate::format::paths::{chunk_number, glob_kind};
use crate::io::Store;
use crate::pixels::Colorspace;

pub use listing::IdTable;
use listing::Listing;
use recorded::Recorded;
pub use slot::{ChunkSlot, HowOpened};

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

/// Whether a directory opens through the dataset manifest (docs/FORMAT.md §7.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ManifestMode {
    /// Through the manifest when it is usable, else by listing (with a warning when a manifest
    /// exists but cannot be used).
    #[default]
    Auto,
    /// By listing, as before the manifest.
    Off,
    /// Through the manifest, or a `FormatError` saying why not.
    Require,
    /// Through the manifest, then listed and compared as `gulpio check` does: a chunk the
    /// manifest does not record, or a record whose files differ, is a `FormatError`.
    Verify,
}

impl std::str::FromStr for ManifestMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<ManifestMode> {
        Ok(match s {
            "auto" => ManifestMode::Auto,
            "off" => ManifestMode::Off,
            "require" => ManifestMode::Require,
            "verify" => ManifestMode::Verify,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "manifest={other:?}: expected \"auto\", \"off\", \"require\" or \"verify\""
                )))
            }
        })
    }
}

/// How a directory was opened (`gulpio info` prints it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// By listing; `reason` says why not through a manifest, `warned` whether a manifest
    /// exists that could not be used.
    Listing { reason: String, warned: bool },
    /// Through the manifest's state at `version`.
    Manifest {
        version: u64,
        base_version: u64,
        /// Commits after the base, operations not yet in effect, base chunks changed by
        /// another tool (checked at their first read).
        tail: u64,
        pending: usize,
        changed: usize,
    },
}

/// Where the directory's ids and chunks come from.
enum Catalog {
    Listed(Listing),
    // Boxed: one per directory, and the view holds its front inline.
    Recorded(Box<Recorded>),
}

/// Chunk readers a directory keeps open at once: each holds a mapping of its index (and, with
/// `io="mmap"`, of its data), and the kernel allows 65,530 per process (`vm.max_map_count`), so
/// a process reading every chunk of a 10M-video dataset (100k chunks) cannot keep them all.
/// Past this, the reader opened longest ago is dropped (its chunk opens again, checked again,
/// when next read).
pub const MAX_OPEN_CHUNKS: usize = 4096;

pub struct Directory {
    root: PathBuf,
    store: Store,
    catalog: Catalog,
    opened: Opened,
    problems: Vec<Problem>,
    /// Chunk positions and slots whose reader was opened, oldest first ([`MAX_OPEN_CHUNKS`]).
    loaded: std::sync::Mutex<std::collections::VecDeque<(usize, Arc<ChunkSlot>)>>,
    max_loaded: usize,
}

impl Directory {
    /// Opens the dataset in the local directory `root`, memory-mapping its files.
    pub fn open(root: impl AsRef<Path>) -> Result<Directory> {
        Self::open_in(Store::default(), root)
    }

    /// Opens the dataset at `root` in `store` (for object stores `root` is the dataset's URL),
    /// through its manifest when it is usable ([`ManifestMode::Auto`]).
    pub fn open_in(store: Store, root: impl AsRef<Path>) -> Result<Directory> {
        Self::open_with(store, root, ManifestMode::Auto)
    }

    /// Opens the dataset at `root` in `store` as `mode` says. Listing fetches index fronts
    /// concurrently for remote stores (one round trip per chunk, overlapped), after one
    /// listing.
    pub fn open_with(
        store: Store,
        root: impl AsRef<Path>,
        mode: ManifestMode,
    ) -> Result<Directory> {
        Self::open_pinned(store, root, mode, None)
    }

    /// [`Directory::open_with`], or with a `pin` (from [`Directory::pin`] of an earlier open,
    /// in this process or another) the state that open saw: the same videos at the same
    /// positions, whatever was committed since, or a `StaleIndexError` when that state
    /// cannot be read any more (docs/FORMAT.md §7.5, "Copies of an open").
    pub fn open_pinned(
        store: Store,
        root: impl AsRef<Path>,
        mode: ManifestMode,
        pin: Option<&crate::manifest::Pin>,
    ) -> Result<Directory> {
        let root = root.as_ref().to_path_buf();
        let pin = pin.filter(|_| mode != ManifestMode::Off);
        let declined = match mode {
            ManifestMode::Off => recorded::Declined {
                reason: "manifest=\"off\"".into(),
                warn: false,
                fatal: None,
            },
            _ => match Recorded::open(&store, &root, pin) {
                Ok(recorded) => {
                    if mode == ManifestMode::Verify {
                        verify(&store, &root)?;
                    }
                    let v = &recorded.view;
                    let opened = Opened::Manifest {
                        version: v.version,
                        base_version: v.base_version,
                        tail: v.tail_commits(),
                        pending: v.pending.len(),
                        changed: v.changed.len(),
                    };
                    return Ok(Directory {
                        root,
                        store,
                        catalog: Catalog::Recorded(Box::new(recorded)),
                        opened,
                        problems: Vec::new(),
                        loaded: Default::default(),
                        max_loaded: MAX_OPEN_CHUNKS,
                    });
                }
                Err(recorded::Declined { fatal: Some(e), .. }) => return Err(*e),
                Err(d) if mode == ManifestMode::Auto => d,
                Err(d) => {
                    return Err(Error::format(
                        root.join(crate::manifest::DIR),
                        format!("cannot open the dataset through its manifest: {}", d.reason),
                    ))
                }
            },
        };
        let listing = Listing::open(&store, &root)?;
        let problems = listing.problems.clone();
        Ok(Directory {
            root,
            store,
            catalog: Catalog::Listed(listing),
            opened: Opened::Listing {
                reason: declined.reason,
                warned: declined.warn,
            },
            problems,
            loaded: Default::default(),
            max_loaded: MAX_OPEN_CHUNKS,
        })
    }

    /// What a copy of this open needs to open the same state ([`Directory::open_pinned`]);
    /// None when it was opened by listing.
    pub fn pin(&self) -> Option<crate::manifest::Pin> {
        match &self.catalog {
            Catalog::Recorded(r) => Some(r.view.pin()),
            Catalog::Listed(_) => None,
        }
    }

    /// How the directory was opened.
    pub fn opened(&self) -> &Opened {
        &self.opened
    }

    /// Where the dataset's bytes come from.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The number a new chunk claims first (it takes the next free one if another writer
    /// has it, §4/§4a): after the largest the manifest's state knows (its pending and
    /// unrecorded chunks included), which costs no request, else after every data or meta
    /// file listed now.
    pub fn next_chunk_number(&self) -> Result<u64> {
        let largest = match &self.catalog {
            Catalog::Recorded(r) => r.view.max_chunk()?,
            Catalog::Listed(_) => self.listed_numbers()?.last().copied(),
        };
        Ok(largest.map_or(0, |m| m.saturating_add(1)))
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

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn len(&self) -> usize {
        match &self.catalog {
            Catalog::Listed(l) => l.ids.len(),
            Catalog::Recorded(r) => r.view.len() as usize,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id of global video `g` (InvalidArgument past the end).
    pub fn id(&self, g: usize) -> Result<Cow<'_, str>> {
        match &self.catalog {
            Catalog::Listed(l) if g < l.ids.len() => Ok(Cow::Borrowed(l.ids.get(g))),
            Catalog::Listed(l) => Err(Error::InvalidArgument(format!(
                "video position {g} is past the {} videos",
                l.ids.len()
            ))),
            Catalog::Recorded(r) => r.view.id(g as u64).map(Cow::Owned),
        }
    }

    /// The ids of global videos `start..end` (clamped to the videos there are), in order.
    pub fn ids_in(&self, start: usize, end: usize) -> Result<Vec<String>> {
        let end = end.min(self.len());
        (start.min(end)..end)
            .map(|g| self.id(g).map(Cow::into_owned))
            .collect()
    }

    /// The global position of `id`, or None. Through a manifest this reads one id page (an
    /// error when the page is damaged, rule M2).
    pub fn lookup(&self, id: &str) -> Result<Option<usize>> {
        match &self.catalog {
            Catalog::Listed(l) => Ok(l.ids.lookup(id)),
            Catalog::Recorded(r) => Ok(r.view.lookup(id)?.map(|p| p as usize)),
        }
    }

    /// Chunks in the directory.
    pub fn chunk_count(&self) -> usize {
        match &self.catalog {
            Catalog::Listed(l) => l.chunks.len(),
            Catalog::Recorded(r) => r.view.chunk_count(),
        }
    }

    /// The chunk at position `pos` (chunk-number order by listing; through a manifest, the
    /// state's order, §7.4 step 4).
    pub fn chunk(&self, pos: usize) -> Result<Arc<ChunkSlot>> {
        match &self.catalog {
            Catalog::Listed(l) => l.chunks.get(pos).cloned().ok_or_else(|| {
                Error::InvalidArgument(format!("chunk position {pos} out of range"))
            }),
            Catalog::Recorded(r) => r.slot(&self.store, &self.root, pos, self.max_loaded),
        }
    }

    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// The reader of chunk position `pos`, opened (and fully checked) on first use.
    pub fn reader(&self, pos: usize) -> Result<Arc<ChunkReader>> {
        let slot = self.chunk(pos)?;
        let (reader, opened) = slot.reader_with(|slot| self.open_chunk(slot));
        if opened {
            let mut loaded = self
                .loaded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            loaded.push_back((pos, slot));
            while loaded.len() > self.max_loaded {
                if let Some((old_pos, old)) = loaded.pop_front() {
                    old.forget();
                    if let Catalog::Recorded(r) = &self.catalog {
                        r.release(old_pos, &old);
                    }
                }
            }
        }
        reader
    }

    /// Keeps at most `n` chunk readers open (tests; [`MAX_OPEN_CHUNKS`] otherwise).
    #[cfg(test)]
    pub(crate) fn set_max_open_chunks(&mut self, n: usize) {
        self.max_loaded = n;
    }

    /// Whether chunk position `pos` reads through its binary index. A chunk not read yet is
    /// opened (and checked) for the answer and closed again: `gulpio index` asks it of every
    /// chunk, and readers kept for 100k chunks would hold 100k mappings, past the kernel's
    /// 65,530 (`vm.max_map_count`; seen on a 10M-video dataset).
    pub fn is_indexed(&self, pos: usize) -> Result<bool> {
        let slot = self.chunk(pos)?;
        let kind = if slot.is_loaded() {
            self.reader(pos)?.kind()
        } else {
            self.open_chunk(&slot)?.kind()
        };
        Ok(kind == crate::chunk::reader::IndexKind::Binary)
    }

    fn open_chunk(&self, slot: &ChunkSlot) -> Result<ChunkReader> {
        match (&slot.how, &self.catalog) {
            (HowOpened::Probed(header), Catalog::Listed(l)) => {
                let expected = ExpectedIndex::Header(header);
                match ChunkReader::from_index_in(&self.store, &slot.paths, expected, slot.sizes) {
                    Err(e @ (Error::StaleIndex { .. } | Error::Format { .. })) => {
                        fall_back(l, slot, &self.store, e)
                    }
                    other => other,
                }
            }
            (HowOpened::Recorded(record), Catalog::Recorded(r)) => {
                r.open_chunk(&self.store, slot, record)
            }
            _ => Err(Error::Internal("chunk has no reader".into())),
        }
    }

    /// `(chunk position, video position inside the chunk)` of global video `g`, or None past
    /// the end.
    pub fn location(&self, g: usize) -> Result<Option<(usize, usize)>> {
        match &self.catalog {
            Catalog::Listed(l) => Ok(l.location(g)),
            Catalog::Recorded(_) if g >= self.len() => Ok(None),
            Catalog::Recorded(r) => {
                let at = r.view.locate_position(g as u64)?;
                Ok(Some((at.chunk, at.index as usize)))
            }
        }
    }

    /// `(chunk position, video position inside the chunk)` of the video `id`, or None.
    pub fn locate(&self, id: &str) -> Result<Option<(usize, usize)>> {
        match &self.catalog {
            Catalog::Listed(l) => Ok(l.ids.lookup(id).and_then(|g| l.location(g))),
            Catalog::Recorded(r) => Ok(r.view.locate(id)?.map(|at| (at.chunk, at.index as usize))),
        }
    }

    /// A video's frame count and first frame's `[height, width, channels]` as the manifest
    /// records them, or None when the directory was opened by listing.
    fn recorded_shape(&self, g: usize) -> Result<Option<(u32, [u16; 3])>> {
        let Catalog::Recorded(r) = &self.catalog else {
            return Ok(None);
        };
        let (count, (h, w, c)) = r.view.shape(g as u64)?;
        Ok(Some((count, [h, w, u16::from(c)])))
    }

    /// The frame count of global video `g`: through a manifest its video row (no chunk is
    /// opened: a count is what samplers ask of every video, and a chunk's first read costs
    /// its index), by listing the chunk's index.
    pub fn frame_count(&self, g: usize) -> Result<usize> {
        if let Some((count, _)) = self.recorded_shape(g)? {
            return Ok(count as usize);
        }
        let (c, v) = self.location(g)?.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "video position {g} is past the {} videos",
                self.len()
            ))
        })?;
        Ok(self.reader(c)?.frame_count(v))
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
        let mut readers: std::collections::HashMap<usize, Arc<ChunkReader>> = Default::default();
        let out_of_range =
            |g: usize| Error::InvalidArgument(format!("video position {g} out of range"));
        for k in 0..n {
            let g = videos.map_or(k, |v| v[k]);
            if g >= self.len() {
                return Err(out_of_range(g));
            }
            // Through a manifest the counts and shapes are its video rows: no chunk is opened.
            let (count, mut shape) = match self.recorded_shape(g)? {
                Some(recorded) => recorded,
                None => {
                    let (c, v) = self.location(g)?.ok_or_else(|| out_of_range(g))?;
                    let reader = match readers.get(&c) {
                        Some(r) => r,
                        None => readers.entry(c).or_insert(self.reader(c)?),
                    };
                    let first = reader.frames(v).next().unwrap_or_default();
                    (
                        reader.frame_count(v) as u32,
                        [first.height, first.width, first.channels as u16],
                    )
                }
            };
            if headers && count > 0 && shape[0] == 0 {
                let (c, v) = self.location(g)?.ok_or_else(|| out_of_range(g))?;
                let reader = match readers.get(&c) {
                    Some(r) => r,
                    None => readers.entry(c).or_insert(self.reader(c)?),
                };
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
            counts.push(count);
            shapes.push(shape);
        }
        Ok((counts, shapes))
    }

    /// The reader and local position of the video with this id.
    pub fn resolve(&self, id: &str) -> Result<(Arc<ChunkReader>, usize)> {
        let (c, v) = self
            .locate(id)?
            .ok_or_else(|| Error::UnknownId(id.to_owned()))?;
        Ok((self.reader(c)?, v))
    }
}

/// The index passed the open-time checks but not the full one (a damaged frame table, or a
/// `.gmeta` changed without changing size): read through the `.gmeta` if it still lists the
/// videos the listing registered, in the same order; otherwise the directory must be reopened.
fn fall_back(
    listing: &Listing,
    slot: &ChunkSlot,
    store: &Store,
    why: Error,
) -> Result<ChunkReader> {
    let mut legacy = ChunkReader::open_legacy_in(store, &slot.paths, slot.sizes)?;
    let same = legacy.video_count() == slot.video_count
        && listing
            .registered(slot)
            .enumerate()
            .all(|(i, id)| legacy.id(i) == id);
    if !same {
        return Err(Error::stale(
            &slot.paths.index,
            format!("{why}; the chunk changed after the directory was opened: reopen it"),
        ));
    }
    legacy.set_index_problem(why.to_string());
    Ok(legacy)
}

/// `manifest="verify"`: the manifest compared with a listing, as `gulpio check` does.
fn verify(store: &Store, root: &Path) -> Result<()> {
    let io = match store {
        Store::Remote(r) => crate::manifest::ManifestIo::Remote(r),
        Store::Local(_) => crate::manifest::ManifestIo::Local(root),
    };
    let Some(status) = crate::manifest::status_in(io)? else {
        return Ok(());
    };
    let mut wrong = Vec::new();
    if !status.unrecorded.is_empty() {
        wrong.push(format!(
            "chunks it does not record: {:?}",
            status.unrecorded
        ));
    }
    if !status.mismatched.is_empty() {
        wrong.push(format!(
            "records whose files differ or are gone: {:?}",
            status.mismatched
        ));
    }
    if wrong.is_empty() {
        return Ok(());
    }
    Err(Error::format(
        io.path(crate::manifest::DIR),
        format!(
            "the dataset manifest (version {}) does not match the folder: {}; `gulpio index` \
             records what it lacks",
            status.version,
            wrong.join("; ")
        ),
    ))
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

#[cfg(test)]
mod tests;
