//! Opening a dataset through its manifest (docs/FORMAT.md §7.5): the state's base mapped, its
//! tail resolved, the canary checked; nothing per chunk until a chunk is first read, when its
//! files are compared with its record (rule M3, §7.7).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::slot::{ChunkSlot, HowOpened};
use crate::chunk::probe::KnownSizes;
use crate::chunk::reader::{ChunkReader, ExpectedIndex, IndexKind};
use crate::error::{Error, Result};
use crate::format::manifest::ChunkRecord;
use crate::format::paths::{ChunkPaths, FileKind};
use crate::io::Store;
use crate::manifest::{ManifestIo, OpenAt, Opening, Pin, View};

const NO_MANIFEST: &str = "no manifest (`gulpio index` creates one)";

/// A chunk's files in the dataset, as a listing names them.
fn chunk_paths(store: &Store, root: &Path, k: u64) -> ChunkPaths {
    ChunkPaths::new(
        store.join(root, &FileKind::Data.file_name(k)),
        store.join(root, &FileKind::Meta.file_name(k)),
    )
}

/// A tail longer than this is not read at open: listing is then cheaper (§7.8).
const MAX_TAIL: u64 = 65_536;

/// The state a directory opened through, and the slots of the chunks read lately (the only
/// per-chunk memory: bounded, since a slot is made again from its record when needed).
pub(super) struct Recorded {
    pub view: View,
    slots: Mutex<HashMap<usize, Arc<ChunkSlot>>>,
}

/// Why a dataset was not opened through its manifest.
pub(super) struct Declined {
    pub reason: String,
    /// The manifest exists but could not be used: users are warned (and `"require"` raises).
    pub warn: bool,
    /// The store refused the first request (credentials, a bad URL, retries spent): listing
    /// would fail the same way, so this is the open's error.
    pub fatal: Option<Box<Error>>,
}

impl Declined {
    fn quiet(reason: impl Into<String>) -> Declined {
        Declined {
            reason: reason.into(),
            warn: false,
            fatal: None,
        }
    }
    fn loud(reason: impl Into<String>) -> Declined {
        Declined {
            reason: reason.into(),
            warn: true,
            fatal: None,
        }
    }
}

/// Commits after the state read that are looked through for the canary's chunk.
const MAX_EXPLAINING: u64 = 64;

impl Recorded {
    /// Opens the state at `root`, or says why not (steps 1-4 of §7.5).
    /// With a `pin` (a copy of an earlier open), the pinned state or a `StaleIndexError`
    /// saying why it is gone: never another state, and never a listing.
    pub fn open(
        store: &Store,
        root: &Path,
        pin: Option<&Pin>,
    ) -> std::result::Result<Recorded, Declined> {
        match pin {
            Some(pin) => Self::open_pinned(store, root, pin),
            None => Self::open_current(store, root),
        }
    }

    fn open_pinned(
        store: &Store,
        root: &Path,
        pin: &Pin,
    ) -> std::result::Result<Recorded, Declined> {
        let fatal = |e: Error| Declined {
            fatal: Some(Box::new(e)),
            ..Declined::loud("the pinned state cannot be opened")
        };
        let (io, remote) = match store {
            Store::Remote(r) => (ManifestIo::Remote(r), Some(r.clone())),
            Store::Local(_) => (ManifestIo::Local(root), None),
        };
        let at = OpenAt {
            pin: Some(pin),
            max_tail: None,
        };
        // The original read the tail already: its length was accepted then.
        match View::open_at(io, remote, None, at).map_err(fatal)? {
            Opening::Ready(view) => Ok(Recorded {
                view: *view,
                slots: Mutex::new(HashMap::new()),
            }),
            Opening::TailTooLong(_) => Err(Declined::quiet("unreachable: no tail limit")),
        }
    }

    fn open_current(store: &Store, root: &Path) -> std::result::Result<Recorded, Declined> {
        let unusable = |e: Error| {
            Declined::loud(format!(
                "the manifest cannot be used: {e}; `gulpio repair --apply` rebuilds it from \
                 the chunks (for a dataset URL: delete its `_gulpio/` objects, then run \
                 `gulpio index URL`)"
            ))
        };
        let (io, remote, latest) = match store {
            Store::Remote(r) => {
                let io = ManifestIo::Remote(r);
                // One request decides: without `LATEST` there is no manifest to read.
                let latest = io
                    .read(crate::manifest::LATEST)
                    .map_err(|e| Declined {
                        fatal: Some(Box::new(e)),
                        ..Declined::quiet(NO_MANIFEST)
                    })?
                    .ok_or_else(|| Declined::quiet(NO_MANIFEST))?;
                (io, Some(r.clone()), Some(latest))
            }
            Store::Local(_) => {
                if !crate::manifest::has_manifest(root) {
                    return Err(Declined::quiet(NO_MANIFEST));
                }
                (ManifestIo::Local(root), None, None)
            }
        };
        let at = OpenAt {
            pin: None,
            max_tail: Some(MAX_TAIL),
        };
        // The tail's length is known before any of its commits is read.
        let view = match View::open_at(io, remote, latest, at).map_err(unusable)? {
            Opening::Ready(view) => *view,
            Opening::TailTooLong(commits) => {
                return Err(Declined::loud(format!(
                    "the manifest has {commits} commits after its last snapshot, more than the \
                     {MAX_TAIL} read at open; `gulpio index` compacts it"
                )))
            }
        };
        if let Some(k) = view.unrecorded.first() {
            return Err(Declined::loud(format!(
                "{} is on disk but the manifest does not record it (written by a tool that does \
                 not keep the manifest); `gulpio index` records it",
                store.join(root, &FileKind::Meta.file_name(*k)).display()
            )));
        }
        let next = view
            .max_chunk()
            .map_err(unusable)?
            .map_or(0, |m| m.saturating_add(1));
        let canary = FileKind::Meta.file_name(next);
        if io.size(&canary).map_err(unusable)?.is_some() {
            let declined = Declined::loud(format!(
                "{} exists but the manifest does not record it (added by a tool that does not \
                 keep the manifest, after its last commit); `gulpio index` records it",
                store.join(root, &canary).display()
            ));
            // A writer of ours may have committed and published it after the log was read:
            // then the state read is only older, and still whole.
            if !explained_by_later_commit(io, view.version, next).map_err(unusable)? {
                return Err(declined);
            }
        }
        Ok(Recorded {
            view,
            slots: Mutex::new(HashMap::new()),
        })
    }

    /// The slot of chunk position `c`, made on first use. The table keeps the slots with an
    /// open reader (at most `keep`, the directory's bound) and, up to `keep` more, slots made
    /// without one (`is_indexed`, the chunk table): an epoch over 100k chunks must not leave
    /// 100k slots behind.
    pub fn slot(
        &self,
        store: &Store,
        root: &Path,
        c: usize,
        keep: usize,
    ) -> Result<Arc<ChunkSlot>> {
        let mut slots = self
            .slots
            .lock()
            .map_err(|_| Error::Internal("a chunk slot table was poisoned".into()))?;
        if let Some(s) = slots.get(&c) {
            return Ok(s.clone());
        }
        if slots.len() >= keep.saturating_mul(2) {
            // Readers are at most `keep`, so this frees at least half: amortised O(1).
            slots.retain(|_, s| s.is_loaded());
        }
        let at = self.view.chunk(c)?;
        let slot = Arc::new(ChunkSlot {
            number: at.record.number,
            paths: chunk_paths(store, root, at.record.number),
            first: at.first as usize,
            video_count: at.video_count as usize,
            // Remotely the record's sizes save a request per file; M3 compares the files with
            // the record before anything else is believed.
            sizes: match store {
                Store::Remote(_) => KnownSizes {
                    data: Some(at.record.gulp_len),
                    meta: Some(at.record.gmeta_len),
                    index: (at.record.index_version > 0).then_some(at.record.gidx_len),
                },
                Store::Local(_) => KnownSizes::default(),
            },
            how: HowOpened::Recorded(at.record),
            reader: ChunkSlot::unopened(),
        });
        slots.insert(c, slot.clone());
        Ok(slot)
    }

    /// Forgets the slot of chunk position `c` when it is still `slot` (its reader was dropped
    /// by the directory's bound; a later use makes a new one).
    pub fn release(&self, c: usize, slot: &Arc<ChunkSlot>) {
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slots.get(&c).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(&c);
        }
    }

    /// The number of slots held (tests).
    #[cfg(test)]
    pub fn slots_held(&self) -> usize {
        self.slots.lock().map_or(0, |s| s.len())
    }

    /// Rule M3: opens the chunk as a listing would, then believes it only if its files are
    /// the ones its record describes, or, when they are not (another tool changed the chunk),
    /// if its first videos are still the ones the manifest gives for its positions.
    pub fn open_chunk(
        &self,
        store: &Store,
        slot: &ChunkSlot,
        record: &ChunkRecord,
    ) -> Result<ChunkReader> {
        if record.index_version > 0 {
            // The usual case, in one fetch of the index (no probe first): the recorded index.
            let expected = ExpectedIndex::Recorded {
                len: record.gidx_len,
                header_crc: record.gidx_header_crc,
            };
            match ChunkReader::from_index_in(store, &slot.paths, expected, slot.sizes) {
                Ok(reader) => return Ok(reader),
                // Another index, a damaged one, a changed `.gmeta`, or none: judged below.
                Err(Error::StaleIndex { .. } | Error::Format { .. } | Error::Io { .. }) => {}
                Err(e @ Error::Remote { .. }) if !is_not_found(&e) => return Err(e),
                Err(_) => {}
            }
        }
        let (mut reader, _) = ChunkReader::open_in(store, &slot.paths, slot.sizes)?;
        if matches_record(store, &reader, record)? {
            return Ok(reader);
        }
        let mut same = reader.video_count() >= slot.video_count;
        for i in 0..slot.video_count {
            if !same {
                break;
            }
            let g = (slot.first + i) as u64;
            same = self.view.id(g)? == reader.id(i)
                && self.view.shape(g)?.0 as usize == reader.frame_count(i);
        }
        if !same {
            return Err(Error::stale(
                &slot.paths.meta,
                format!(
                    "the chunk changed after the dataset manifest recorded it (version {}): its \
                     videos are not the ones the manifest lists; run `gulpio index` to record \
                     it, or open the directory with manifest=\"off\"",
                    self.view.version
                ),
            ));
        }
        reader.add_index_problem(format!(
            "the dataset manifest (version {}) is behind for this chunk: it was changed by a \
             tool that does not keep the manifest; its first {} videos are the recorded ones \
             and are read, videos it gained are not part of this open; `gulpio index` updates \
             the manifest",
            self.view.version, slot.video_count
        ));
        Ok(reader)
    }
}

/// True when a commit after `version` (of the next [`MAX_EXPLAINING`]) has an operation of
/// chunk `k`: its `.gmeta` was published by a writer that keeps the manifest.
fn explained_by_later_commit(io: ManifestIo<'_>, version: u64, k: u64) -> Result<bool> {
    for v in version + 1..=version.saturating_add(MAX_EXPLAINING) {
        let Some(commit) = crate::manifest::read_commit_in(io, v)? else {
            return Ok(false);
        };
        if commit.ops.iter().any(|op| op.record.number == k) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn is_not_found(e: &Error) -> bool {
    matches!(
        e,
        Error::Remote {
            kind: crate::error::RemoteKind::NotFound,
            ..
        }
    )
}

/// True when the chunk's files are the ones `r` describes: the index the reader uses has the
/// recorded length and header CRC, or, for a record without index, the `.gmeta` has the
/// recorded length and CRC.
fn matches_record(store: &Store, reader: &ChunkReader, r: &ChunkRecord) -> Result<bool> {
    if r.index_version > 0 {
        if reader.kind() != IndexKind::Binary {
            return Ok(false);
        }
        let index = reader.index();
        let h = index.header_bytes();
        let crc = u32::from_le_bytes([h[124], h[125], h[126], h[127]]);
        return Ok(index.byte_len() == r.gidx_len && crc == r.gidx_header_crc);
    }
    let meta = store.read_all(&reader.paths().meta)?;
    Ok(meta.len() as u64 == r.gmeta_len && crc32fast::hash(&meta) == r.gmeta_crc)
}
