//! Where a dataset's bytes come from: one seam, three sources. The chunk reader never opens a
//! file itself; it asks its [`Store`] for whole small files (index, meta) and its
//! [`DataSource`] for byte ranges of the `.gulp`. Local files are memory-mapped (zero-copy,
//! the fast path) or read with positional reads (`pread`: network file systems, where page
//! faults make 4 KiB round trips and a file truncated under a mapping is a SIGBUS); object
//! stores are read with concurrent range requests.

pub mod aws_profile;
pub mod cache;
pub mod fork;
pub mod plan;
pub mod remote;
pub mod runtime;

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, IoContext, Result};
use crate::format::Storage;

pub use remote::redact::url as redact_url;
pub use remote::{is_remote_url, RemoteSettings, RemoteStore};

/// How local files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LocalIo {
    /// Memory-mapped: frames are slices of the mapping (zero-copy).
    #[default]
    Mmap,
    /// Positional reads of the ranges a batch needs.
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
        Store::Local(LocalIo::Mmap)
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
            Store::Local(_) => Ok(Storage::Owned(std::fs::read(path).at(path)?)),
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
                let file = File::open(path).at(path)?;
                let mut buf = crate::buffers::zeroed(range_len(&range)?, || {
                    format!("bytes {range:?} of {}", path.display())
                })?;
                read_exact_at(&file, &mut buf, range.start).at(path)?;
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
                let file = File::open(path).at(path)?;
                let len = file.metadata().at(path)?.len();
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

impl Store {
    /// Publishes a chunk staged on local disk (complete and checked: data, index, meta) as
    /// chunk `target`: uploads the data, then the index, then **last** the `.gmeta`, the commit
    /// point (docs/FORMAT.md §4a): readers pair data with meta, so before it the chunk does not
    /// exist for them and after it everything it describes is uploaded. Local stores are
    /// published by the chunk writer itself and refuse this.
    pub fn publish_staged(
        &self,
        staged: &crate::format::paths::ChunkPaths,
        target_number: u64,
    ) -> Result<()> {
        let Store::Remote(r) = self else {
            return Err(Error::InvalidArgument(
                "staged publication is for remote datasets".into(),
            ));
        };
        let names = crate::format::paths::ChunkPaths::numbered(Path::new(""), target_number);
        let name = |p: &Path| -> Result<String> { Ok(remote_name(p)?.to_owned()) };
        r.put_file(&name(&names.data)?, &staged.data)?;
        if staged.index.exists() {
            r.put_file(&name(&names.index)?, &staged.index)?;
        }
        r.put_file(&name(&names.meta)?, &staged.meta)
    }

    /// Writes `bytes` as `name` beside the chunks unless it exists (local: a hard link from a
    /// complete temporary; remote: a conditional `PUT`). True when this call created it.
    pub fn create_file(&self, root: &Path, name: &str, bytes: &[u8]) -> Result<bool> {
        match self {
            Store::Remote(r) => r.put_new(name, bytes.to_vec()),
            Store::Local(_) => {
                let target = root.join(name);
                let tmp = crate::format::paths::temp_for(&target);
                std::fs::write(&tmp, bytes).at(&tmp)?;
                let linked = std::fs::hard_link(&tmp, &target);
                let _ = std::fs::remove_file(&tmp);
                match linked {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                    Err(e) => Err(Error::io(target, e)),
                }
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
    let file = File::open(path).at(path)?;
    let len = file.metadata().at(path)?.len();
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
        file: File,
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

    /// The whole file as one slice, when it is mapped.
    pub fn mapped(&self) -> Option<&[u8]> {
        match self {
            DataSource::Mapped(s) => Some(s),
            _ => None,
        }
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
                            read_exact_at(file, &mut buf, r.start).at(path)?;
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

fn beyond(path: &Path, r: &Range<u64>, len: u64) -> Error {
    Error::format(
        path,
        format!(
            "truncated: bytes {}..{} are needed, the file has {len}",
            r.start, r.end
        ),
    )
}
