//! Where a dataset's bytes come from: one seam, three sources. The chunk reader never opens a
//! file itself; it asks its [`Store`] for whole small files (index, meta) and its
//! [`DataSource`] for byte ranges of the `.gulp`. Local `.gulp` files are read with positional
//! reads (`pread`, the default: a file cut short under a reader is a `FormatError`) or
//! memory-mapped (zero-copy, where a file cut short under the mapping is a SIGBUS: opt in
//! with `io="mmap"`, docs/DECISIONS.md); object stores are read with concurrent range
//! requests. Local files are opened by the rules of [`local`].

#[cfg(feature = "remote")]
pub mod aws_profile;
#[cfg(feature = "remote")]
pub mod cache;
#[cfg(feature = "remote")]
pub mod fork;
pub mod local;
pub mod open_files;
pub mod plan;
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(not(feature = "remote"))]
#[path = "remote_off.rs"]
pub mod remote;
#[cfg(feature = "remote")]
pub mod runtime;

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, IoContext, Result};
use crate::format::Storage;

#[cfg(feature = "remote")]
pub use remote::redact::url as redact_url;
#[cfg(feature = "remote")]
pub use remote::{is_remote_url, RemoteSettings};
pub use remote::{ObjectVersion, RemoteStore};

/// How local `.gulp` files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LocalIo {
    /// Memory-mapped: frames are slices of the mapping (zero-copy). A file cut short under
    /// the mapping kills the process with SIGBUS when a page past the new end is touched.
    Mmap,
    /// Positional reads of the ranges a batch needs (a copy and a system call per request):
    /// a file cut short under a reader is a `FormatError` naming the frame.
    #[default]
    Pread,
}

impl std::str::FromStr for LocalIo {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "mmap" => Ok(LocalIo::Mmap),
            "pread" => Ok(LocalIo::Pread),
            other => Err(Error::InvalidArgument(format!(
                "io must be 'mmap' or 'pread', not {other:?}"
            ))),
        }
    }
}

/// A dataset's storage.
#[derive(Debug, Clone)]
pub enum Store {
    Local(LocalIo),
    Remote(Arc<RemoteStore>),
}

impl Default for Store {
    fn default() -> Self {
        Store::Local(LocalIo::default())
    }
}

/// A file's name inside a remote dataset (its "path" is the URL `<dataset>/<name>`).
fn remote_name(path: &Path) -> Result<&str> {
    path.file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no file name", path.display())))
}

impl Store {
    pub fn is_remote(&self) -> bool {
        matches!(self, Store::Remote(_))
    }

    /// The "path" of `name` inside the dataset at `root` (a URL for remote datasets).
    pub fn join(&self, root: &Path, name: &str) -> PathBuf {
        match self {
            Store::Local(_) => root.join(name),
            Store::Remote(r) => PathBuf::from(r.url_of(name)),
        }
    }

    /// The files directly in the dataset: `(path, size)`, sorted by path.
    pub fn list(&self, root: &Path) -> Result<Vec<(PathBuf, u64)>> {
        match self {
            Store::Local(_) => {
                let mut out = Vec::new();
                for entry in std::fs::read_dir(root).at(root)? {
                    let entry = entry.at(root)?;
                    let path = entry.path();
                    // Sizes are read later, from the files that matter; a stat per entry here
                    // would cost a directory of many chunks a syscall per file at open.
                    out.push((path, u64::MAX));
                }
                out.sort();
                Ok(out)
            }
            Store::Remote(r) => Ok(r
                .list()?
                .into_iter()
                .map(|(name, size)| (PathBuf::from(r.url_of(&name)), size))
                .collect()),
        }
    }

    /// The whole of a small file (an index or a `.gmeta`).
    pub fn read_all(&self, path: &Path) -> Result<Storage> {
        match self {
            Store::Local(_) => Ok(Storage::Owned(local::read_whole(path)?)),
            Store::Remote(r) => Ok(Storage::Owned(r.read_all(remote_name(path)?)?.into())),
        }
    }

    /// A file's bytes for random access: mapped when local with `Mmap` (indexes are always
    /// mapped locally: they are read through O(1) lookups, not ranges).
    pub fn map_or_read(&self, path: &Path) -> Result<Storage> {
        match self {
            Store::Local(_) => map_file(path),
            Store::Remote(_) => self.read_all(path),
        }
    }

    /// Bytes `range` of a file.
    pub fn read_range(&self, path: &Path, range: Range<u64>) -> Result<Vec<u8>> {
        match self {
            Store::Local(_) => {
                let (file, len) = local::open_read(path)?;
                if range.end > len {
                    return Err(beyond(path, &range, len));
                }
                let mut buf = crate::buffers::zeroed(range_len(&range)?, || {
                    format!("bytes {range:?} of {}", path.display())
                })?;
                read_exact_at(&file, &mut buf, range.start)
                    .map_err(|e| short_read(path, &file, &range, e))?;
                Ok(buf)
            }
            Store::Remote(r) => Ok(r.read_range(remote_name(path)?, range)?.into()),
        }
    }

    /// Drops any locally cached copy of a remote file (its bytes failed a check), so the next
    /// read fetches it from the store. Nothing to do for local files.
    pub fn forget_cached(&self, path: &Path) {
        if let (Store::Remote(r), Ok(name)) = (self, remote_name(path)) {
            r.forget(name);
        }
    }

    /// The size of a file (`known` when the listing gave it).
    pub fn size(&self, path: &Path, known: Option<u64>) -> Result<u64> {
        if let Some(n) = known.filter(|&n| n != u64::MAX) {
            return Ok(n);
        }
        match self {
            Store::Local(_) => Ok(std::fs::metadata(path).at(path)?.len()),
            Store::Remote(r) => r.size(remote_name(path)?),
        }
    }

    /// Opens a `.gulp` for reading frames.
    pub fn open_data(&self, path: &Path, known_len: Option<u64>) -> Result<DataSource> {
        match self {
            Store::Local(LocalIo::Mmap) => Ok(DataSource::Mapped(map_file(path)?)),
            Store::Local(LocalIo::Pread) => {
                let (file, len) = open_files::PreadFile::open(path)?;
                Ok(DataSource::Pread { file, len })
            }
            Store::Remote(r) => Ok(DataSource::Remote {
                len: self.size(path, known_len)?,
                store: r.clone(),
                name: remote_name(path)?.to_owned(),
            }),
        }
    }
}

/// How a chunk staged on local disk takes its number in a remote dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteNumber {
    /// Exactly this number (an ingest's plan assigned it): an index or `.gmeta` already there
    /// with the same bytes is an earlier attempt of the same upload; other bytes are a
    /// conflict.
    Exactly(u64),
    /// The first number, this one or later, that no object uses (`new_chunks`).
    FirstFree(u64),
}

/// What a publication does just before a staged chunk's commit point (its `.gmeta`) and when
/// that commit point was not reached: the dataset manifest's commit and abort
/// (`manifest::StagedCommits`), kept out of this module so that storage does not depend on
/// the manifest.
pub trait CommitPointHook: Sync {
    /// Called with the chunk's number, index and `.gmeta` bytes; true when it recorded
    /// something that [`CommitPointHook::commit_point_missed`] must undo.
    fn before_commit_point(
        &self,
        store: &RemoteStore,
        number: u64,
        index: &[u8],
        meta: &[u8],
    ) -> Result<bool>;
    fn commit_point_missed(&self, store: &RemoteStore, number: u64);
    /// Called once the `.gmeta` is published.
    fn published(&self, _store: &RemoteStore) {}
}

/// Attempts at taking a chunk number in a remote dataset before giving up.
const MAX_REMOTE_CLAIMS: usize = 1000;

impl Store {
    /// Publishes a chunk staged on local disk (complete and checked: data, index, meta) in a
    /// remote dataset whose URL is `root`; returns the chunk number it took. The index is
    /// uploaded first and only if no object has its name (a conditional `PUT`): that claims
    /// the number, so two writers never publish under one number (the second takes the next
    /// free number, or fails for [`RemoteNumber::Exactly`]). Then the data, then **last** the
    /// `.gmeta`, the commit point (docs/FORMAT.md §4a), also conditionally: readers pair data
    /// with meta, so before it the chunk does not exist for them and after it everything it
    /// describes is uploaded. Local stores are published by the chunk writer itself and
    /// refuse this.
    pub fn publish_staged(
        &self,
        root: &Path,
        staged: &crate::format::paths::ChunkPaths,
        number: RemoteNumber,
        hook: &dyn CommitPointHook,
    ) -> Result<u64> {
        let Store::Remote(r) = self else {
            return Err(Error::InvalidArgument(
                "staged publication is for remote datasets".into(),
            ));
        };
        if !local::name_exists(&staged.index) {
            return Err(Error::InvalidArgument(format!(
                "{}: a staged chunk needs its index to be published (the index claims the \
                 chunk number); write it with the JSON serializer",
                staged.index.display()
            )));
        }
        let index = local::read_whole(&staged.index)?;
        let meta = local::read_whole(&staged.meta)?;
        let (mut k, exactly) = match number {
            RemoteNumber::Exactly(k) => (k, true),
            RemoteNumber::FirstFree(k) => (k, false),
        };
        for _ in 0..MAX_REMOTE_CLAIMS {
            if !exactly {
                k = self.first_free(root, k)?;
            }
            let names = crate::format::paths::ChunkPaths::numbered(Path::new(""), k);
            let name = |p: &Path| -> Result<String> { Ok(remote_name(p)?.to_owned()) };
            let (data_name, index_name, meta_name) =
                (name(&names.data)?, name(&names.index)?, name(&names.meta)?);
            if exactly && self.unindexed_chunk_at(root, &data_name, &index_name, &meta_name)? {
                return Err(Error::Conflict {
                    path: PathBuf::from(r.url_of(&meta_name)),
                    msg: format!(
                        "chunk {k} already exists (without an index); nothing was uploaded"
                    ),
                });
            }
            if !r.put_new(&index_name, index.clone())? {
                if !exactly {
                    continue; // another writer's chunk: `first_free` now sees its index
                }
                if r.read_all(&index_name)?.as_ref() != index.as_slice() {
                    return Err(Error::Conflict {
                        path: PathBuf::from(r.url_of(&index_name)),
                        msg: format!(
                            "chunk {k} is being published by another writer, or an interrupted \
                             upload of other content left its index; if no other writer is \
                             running, delete {index_name} and {data_name} (without a .gmeta \
                             they are not part of the dataset) and run again"
                        ),
                    });
                }
            }
            r.put_file(&data_name, &staged.data)?;
            // A dataset with a manifest records the chunk before its `.gmeta`, the commit
            // point (docs/FORMAT.md §7.6).
            let committed = hook.before_commit_point(r, k, &index, &meta)?;
            if r.put_new(&meta_name, meta.clone())? {
                hook.published(r);
                return Ok(k);
            }
            if exactly && r.read_all(&meta_name)?.as_ref() == meta.as_slice() {
                return Ok(k);
            }
            if committed {
                // Not pending for ever: this writer knows its add will not take effect.
                hook.commit_point_missed(r, k);
            }
            return Err(Error::Conflict {
                path: PathBuf::from(r.url_of(&meta_name)),
                msg: format!(
                    "a .gmeta was published under chunk number {k} by a writer that did not \
                     claim the number first (an older gulpio-rs, or another tool); this \
                     upload's {data_name} and {index_name} are left unpaired, not part of \
                     the dataset (`gulpio check` lists them)"
                ),
            });
        }
        Err(Error::Internal(format!(
            "{}: no free chunk number after {MAX_REMOTE_CLAIMS} attempts",
            root.display()
        )))
    }

    /// True when the dataset has the data or meta file of a chunk but not its index: a chunk
    /// written by another tool, which a claim by index would not see.
    fn unindexed_chunk_at(&self, root: &Path, data: &str, index: &str, meta: &str) -> Result<bool> {
        let listed = self.list(root)?;
        let has = |name: &str| {
            listed
                .iter()
                .any(|(p, _)| p.file_name().and_then(|n| n.to_str()) == Some(name))
        };
        Ok((has(data) || has(meta)) && !has(index))
    }

    /// The first chunk number, `from` or later, that no file of the dataset at `root` uses.
    fn first_free(&self, root: &Path, from: u64) -> Result<u64> {
        let listed = self.list(root)?;
        let names = listed
            .iter()
            .filter_map(|(p, _)| p.file_name().and_then(|n| n.to_str()));
        crate::format::paths::first_free_number(names, from).ok_or_else(|| {
            Error::InvalidArgument(format!("{}: no chunk number is left", root.display()))
        })
    }

    /// Writes `bytes` as `name` beside the chunks unless it exists (local: a hard link from a
    /// complete temporary; remote: a conditional `PUT`). True when this call created it.
    pub fn create_file(&self, root: &Path, name: &str, bytes: &[u8]) -> Result<bool> {
        match self {
            Store::Remote(r) => r.put_new(name, bytes.to_vec()),
            Store::Local(_) => {
                use std::io::Write;
                let target = root.join(name);
                let tmp = crate::format::paths::temp_for(&target);
                let written = local::create_new(&tmp)
                    .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()).at(&tmp))
                    .and_then(|_| local::link_new(&tmp, &target));
                let _ = std::fs::remove_file(&tmp);
                written
            }
        }
    }

    /// Deletes a file beside the chunks (absent is fine).
    pub fn delete(&self, path: &Path) -> Result<()> {
        match self {
            Store::Remote(r) => r.delete(remote_name(path)?),
            Store::Local(_) => match std::fs::remove_file(path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(Error::io(path, e)),
            },
        }
    }
}

/// Maps a whole file read-only. Files are never modified in place below their published
/// length (see docs/FORMAT.md), which is what makes holding a mapping sound.
pub(crate) fn map_file(path: &Path) -> Result<Storage> {
    let (file, len) = local::open_read(path)?;
    if len == 0 {
        return Ok(Storage::Empty);
    }
    // SAFETY: the mapping is read-only and our writers never rewrite or truncate published
    // bytes; external truncation of a mapped file is documented as unsupported (use pread).
    let map = unsafe { memmap2::Mmap::map(&file) }.at(path)?;
    Ok(Storage::Mapped(map))
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, offset)
}

/// The bytes of a chunk's `.gulp`.
pub enum DataSource {
    Mapped(Storage),
    Pread {
        file: open_files::PreadFile,
        len: u64,
    },
    Remote {
        store: Arc<RemoteStore>,
        name: String,
        len: u64,
    },
}

impl DataSource {
    pub fn len(&self) -> u64 {
        match self {
            DataSource::Mapped(s) => s.len() as u64,
            DataSource::Pread { len, .. } | DataSource::Remote { len, .. } => *len,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file's length now, for local files read with positional reads (they can be cut
    /// after opening); the length at opening otherwise.
    pub fn current_len(&self) -> u64 {
        match self {
            DataSource::Pread { file, len } => file.current_len().unwrap_or(*len),
            other => other.len(),
        }
    }

    /// The whole file as one slice, when it is mapped.
    pub fn mapped(&self) -> Option<&[u8]> {
        match self {
            DataSource::Mapped(s) => Some(s),
            _ => None,
        }
    }

    /// Bytes `range` (within `len()`) of the file, exactly: one range of [`Self::read_ranges`].
    pub fn read_range(&self, path: &Path, range: Range<u64>) -> Result<Bytes> {
        let mut out = None;
        self.read_ranges(path, std::slice::from_ref(&range), |_, got| out = Some(got))?;
        out.unwrap_or_else(|| Err(Error::Internal("range read produced no result".into())))
    }

    /// Reads `ranges` (each within `len()`) and calls `each(i, bytes)` as each arrives, on the
    /// calling thread. Remote ranges are fetched concurrently; local ones are read in order.
    pub fn read_ranges(
        &self,
        path: &Path,
        ranges: &[Range<u64>],
        mut each: impl FnMut(usize, Result<Bytes>),
    ) -> Result<()> {
        match self {
            DataSource::Mapped(s) => {
                for (i, r) in ranges.iter().enumerate() {
                    let got = s
                        .get(r.start as usize..r.end as usize)
                        .map(Bytes::copy_from_slice)
                        .ok_or_else(|| beyond(path, r, s.len() as u64));
                    each(i, got);
                }
                Ok(())
            }
            DataSource::Pread { file, len } => {
                let file = file.file()?;
                for (i, r) in ranges.iter().enumerate() {
                    if r.end > *len {
                        each(i, Err(beyond(path, r, *len)));
                        continue;
                    }
                    let got = range_len(r)
                        .and_then(|n| {
                            crate::buffers::zeroed(n, || {
                                format!("bytes {r:?} of {}", path.display())
                            })
                        })
                        .and_then(|mut buf| {
                            read_exact_at(&file, &mut buf, r.start)
                                .map_err(|e| short_read(path, &file, r, e))?;
                            Ok(Bytes::from(buf))
                        });
                    each(i, got);
                }
                Ok(())
            }
            DataSource::Remote { store, name, len } => {
                // Ranges past the end are refused here: a server would answer 416 or a
                // short body, and the message would not say which frame.
                let mut ok = Vec::with_capacity(ranges.len());
                let mut map = Vec::with_capacity(ranges.len());
                for (i, r) in ranges.iter().enumerate() {
                    if r.end > *len {
                        each(i, Err(beyond(path, r, *len)));
                    } else {
                        map.push(i);
                        ok.push(r.clone());
                    }
                }
                store.read_ranges(name, &ok, |j, got| each(map[j], got))
            }
        }
    }
}

/// The length of `r`, which must be a forward range that fits in memory.
fn range_len(r: &Range<u64>) -> Result<usize> {
    r.end
        .checked_sub(r.start)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| Error::Internal(format!("byte range {r:?} runs backwards")))
}

/// A positional read that came back short: the file was cut after it was opened. A
/// `FormatError` like any other truncation, not a bare I/O error.
fn short_read(path: &Path, file: &File, r: &Range<u64>, e: std::io::Error) -> Error {
    if e.kind() != std::io::ErrorKind::UnexpectedEof {
        return Error::io(path, e);
    }
    let now = file.metadata().map_or(0, |m| m.len());
    beyond(path, r, now)
}

fn beyond(path: &Path, r: &Range<u64>, len: u64) -> Error {
    Error::format(
        path,
        format!(
            "truncated: bytes {}..{} are needed, the file has {len}",
            r.start, r.end
        ),
    )
}
