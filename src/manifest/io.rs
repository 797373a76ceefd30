//! Where the manifest's files are read and created: a local folder, or an object store
//! (`_gulpio/...` keys below the dataset's prefix). One seam, so that the log's rules
//! (create-only commits, probing for the current version) have one implementation.

use std::path::{Path, PathBuf};

use crate::error::{Error, RemoteKind, Result};
use crate::io::{local, RemoteStore, Store};

/// The dataset a manifest belongs to.
#[derive(Clone, Copy)]
pub enum ManifestIo<'a> {
    Local(&'a Path),
    Remote(&'a RemoteStore),
}

fn not_found(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        Error::Remote { kind, .. } => matches!(kind, RemoteKind::NotFound),
        _ => false,
    }
}

impl ManifestIo<'_> {
    /// The file's path, or its URL (for messages).
    pub fn path(&self, name: &str) -> PathBuf {
        match self {
            ManifestIo::Local(root) => root.join(name),
            ManifestIo::Remote(r) => PathBuf::from(r.url_of(name)),
        }
    }

    pub fn exists(&self, name: &str) -> Result<bool> {
        match self {
            ManifestIo::Local(root) => Ok(local::name_exists(&root.join(name))),
            ManifestIo::Remote(r) => match r.size(name) {
                Ok(_) => Ok(true),
                Err(e) if not_found(&e) => Ok(false),
                Err(e) => Err(e),
            },
        }
    }

    /// The whole file, or None when it does not exist.
    pub fn read(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let got = match self {
            ManifestIo::Local(root) => local::read_whole(&root.join(name)),
            ManifestIo::Remote(r) => r.read_all(name).map(|b| b.to_vec()),
        };
        match got {
            Ok(b) => Ok(Some(b)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The file's length, or None when it does not exist (one `stat`, one `HEAD`).
    pub fn size(&self, name: &str) -> Result<Option<u64>> {
        let got = match self {
            ManifestIo::Local(root) => {
                let path = root.join(name);
                std::fs::symlink_metadata(&path)
                    .map(|m| m.len())
                    .map_err(|e| Error::io(&path, e))
            }
            ManifestIo::Remote(r) => r.size(name),
        };
        match got {
            Ok(n) => Ok(Some(n)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Bytes `range` of the file, exactly, or None when it does not exist.
    pub fn read_range(&self, name: &str, range: std::ops::Range<u64>) -> Result<Option<Vec<u8>>> {
        let got = match self {
            ManifestIo::Local(root) => {
                let path = root.join(name);
                local::open_read(&path).and_then(|(file, len)| {
                    if range.end > len {
                        return Err(Error::format(
                            &path,
                            format!("the file is {len} bytes; bytes {range:?} were asked for"),
                        ));
                    }
                    let mut b = vec![0u8; (range.end - range.start) as usize];
                    std::os::unix::fs::FileExt::read_exact_at(&file, &mut b, range.start)
                        .map_err(|e| Error::io(&path, e))?;
                    Ok(b)
                })
            }
            ManifestIo::Remote(r) => r.read_range(name, range).map(|b| b.to_vec()),
        };
        match got {
            Ok(b) => Ok(Some(b)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates `name` with `bytes` unless a file has that name (locally: a complete
    /// temporary hard-linked under it, then its folder fsynced; remotely: a conditional
    /// `PUT`). True when this call created it.
    pub fn create(&self, name: &str, bytes: &[u8]) -> Result<bool> {
        match self {
            ManifestIo::Local(root) => {
                super::check_dirs(root)?;
                let created = Store::default().create_file(root, name, bytes)?;
                let target = root.join(name);
                if let Some(dir) = target.parent() {
                    std::fs::File::open(dir)
                        .and_then(|d| d.sync_all())
                        .map_err(|e| Error::io(dir, e))?;
                }
                Ok(created)
            }
            ManifestIo::Remote(r) => r.put_new(name, bytes.to_vec()),
        }
    }

    /// The names of the files directly in the dataset (one listing).
    pub fn names(&self) -> Result<Vec<String>> {
        match self {
            ManifestIo::Local(root) => {
                let mut out = Vec::new();
                for entry in std::fs::read_dir(root).map_err(|e| Error::io(root, e))? {
                    let entry = entry.map_err(|e| Error::io(root, e))?;
                    if let Some(name) = entry.file_name().to_str() {
                        out.push(name.to_owned());
                    }
                }
                Ok(out)
            }
            ManifestIo::Remote(r) => Ok(r.list()?.into_iter().map(|(name, _)| name).collect()),
        }
    }

    /// The names of the files in the manifest's folder `dir` (such as `_gulpio/snap`),
    /// sorted; none when it does not exist.
    pub fn names_in(&self, dir: &str) -> Result<Vec<String>> {
        match self {
            ManifestIo::Local(root) => {
                let folder = root.join(dir);
                let entries = match std::fs::read_dir(&folder) {
                    Ok(e) => e,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(Error::io(&folder, e)),
                };
                let mut out = Vec::new();
                for entry in entries {
                    let entry = entry.map_err(|e| Error::io(&folder, e))?;
                    if let Some(name) = entry.file_name().to_str() {
                        out.push(name.to_owned());
                    }
                }
                out.sort();
                Ok(out)
            }
            ManifestIo::Remote(r) => r.list_in(dir),
        }
    }

    /// Deletes `name` (nothing when it does not exist). Locally never through a symlinked
    /// folder (the manifest's folders are checked first).
    pub fn delete(&self, name: &str) -> Result<()> {
        match self {
            ManifestIo::Local(root) => {
                super::check_dirs(root)?;
                let path = root.join(name);
                match std::fs::remove_file(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(Error::io(&path, e)),
                }
            }
            ManifestIo::Remote(r) => r.delete(name),
        }
    }

    /// Creates the manifest's folders where there are folders.
    pub fn make_dirs(&self) -> Result<()> {
        if let ManifestIo::Local(root) = self {
            super::make_dirs(root)?;
        }
        Ok(())
    }
}
