//! `.gulp` files read with positional reads, a bounded number open at once. A chunk's data file
//! used to stay open from its first read for as long as its directory lived: a process reading
//! a dataset of 100k chunks (an epoch of a 10M-video dataset, `gulpio index` on it) held 100k
//! descriptors and failed with EMFILE past the limit (1,024 by default on Linux; seen at 20,000
//! on 2026-11-30, `benches/bench_scale.py --videos 10000000`). At most [`OPEN_FILES`] stay
//! open per process, the least recently read closed first. One closed is reopened by its path
//! and must be the same file (device and inode), else it was replaced after its chunk was
//! opened: a `StaleIndexError`, never another file's bytes.
//!
//! The table is per process: a forked child (a DataLoader worker) starts an empty one and never
//! takes the parent's lock, which a parent thread may have held at the moment of the fork.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// Data files open at once in a process: far below the usual 1,024 descriptors, and enough
/// that a batch drawn from a few hundred chunks reads each one without reopening it.
pub const OPEN_FILES: usize = 256;

#[derive(Default)]
struct Table {
    open: HashMap<u64, (Arc<File>, u64)>,
    clock: u64,
}

struct Shared {
    pid: u32,
    table: Mutex<Table>,
}

static SHARED: AtomicPtr<Shared> = AtomicPtr::new(std::ptr::null_mut());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// This process's table. The parent's, inherited by a forked child, is left as it is (its
/// files stay open in the child, at most [`OPEN_FILES`]).
fn shared() -> &'static Shared {
    let pid = std::process::id();
    loop {
        let current = SHARED.load(Ordering::Acquire);
        // SAFETY: a published table is never freed (leaked on purpose), so the pointer stays
        // valid for the life of the process.
        if let Some(s) = unsafe { current.as_ref() }.filter(|s| s.pid == pid) {
            return s;
        }
        let fresh = Box::into_raw(Box::new(Shared {
            pid,
            table: Mutex::new(Table::default()),
        }));
        match SHARED.compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: just published, and never freed.
            Ok(_) => return unsafe { &*fresh },
            Err(_) => {
                // SAFETY: not published: still only ours.
                drop(unsafe { Box::from_raw(fresh) });
            }
        }
    }
}

fn with_table<T>(f: impl FnOnce(&mut Table) -> T) -> T {
    let mut table = shared()
        .table
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut table)
}

/// A `.gulp` opened for positional reads: its descriptor is in the process's table while it is
/// among the [`OPEN_FILES`] most recently read.
pub struct PreadFile {
    path: PathBuf,
    id: u64,
    dev: u64,
    ino: u64,
}

impl PreadFile {
    /// Opens `path` (checked as [`super::local::open_read`] checks it); its length.
    pub fn open(path: &Path) -> Result<(PreadFile, u64)> {
        let (file, len) = super::local::open_read(path)?;
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let opened = PreadFile {
            path: path.to_path_buf(),
            id,
            dev: meta.dev(),
            ino: meta.ino(),
        };
        opened.keep(Arc::new(file));
        Ok((opened, len))
    }

    /// The open file, reopened if it was closed to stay within [`OPEN_FILES`].
    pub fn file(&self) -> Result<Arc<File>> {
        let hit = with_table(|t| {
            t.clock += 1;
            let now = t.clock;
            t.open.get_mut(&self.id).map(|(file, used)| {
                *used = now;
                file.clone()
            })
        });
        if let Some(file) = hit {
            return Ok(file);
        }
        // Opened outside the lock: an open can take long (a network file system).
        let (file, _) = super::local::open_read(&self.path)?;
        let meta = file.metadata().map_err(|e| Error::io(&self.path, e))?;
        if (meta.dev(), meta.ino()) != (self.dev, self.ino) {
            return Err(Error::stale(
                &self.path,
                "was replaced after its chunk was opened (another file has its name now); \
                 open the dataset again",
            ));
        }
        let file = Arc::new(file);
        self.keep(file.clone());
        Ok(file)
    }

    fn keep(&self, file: Arc<File>) {
        with_table(|t| {
            t.clock += 1;
            let now = t.clock;
            t.open.insert(self.id, (file, now));
            if t.open.len() > OPEN_FILES {
                // Close the least recently read eighth at once: one scan per many opens.
                let mut by_use: Vec<(u64, u64)> = t.open.iter().map(|(k, v)| (v.1, *k)).collect();
                by_use.sort_unstable();
                for (_, k) in by_use.into_iter().take(OPEN_FILES / 8) {
                    t.open.remove(&k);
                }
            }
        });
    }

    /// The file's length now (it can be cut after opening).
    pub fn current_len(&self) -> Option<u64> {
        self.file().ok()?.metadata().ok().map(|m| m.len())
    }
}

impl Drop for PreadFile {
    fn drop(&mut self) {
        with_table(|t| t.open.remove(&self.id));
    }
}

/// Data files open now in this process (tests).
pub fn open_count() -> usize {
    with_table(|t| t.open.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, n: usize) -> Vec<PathBuf> {
        (0..n)
            .map(|i| {
                let p = dir.join(format!("data_{i}.gulp"));
                std::fs::write(&p, format!("file {i}")).unwrap();
                p
            })
            .collect()
    }

    fn read_all(f: &PreadFile) -> String {
        use std::os::unix::fs::FileExt;
        let file = f.file().unwrap();
        let mut b = vec![0u8; file.metadata().unwrap().len() as usize];
        file.read_exact_at(&mut b, 0).unwrap();
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn more_files_than_the_bound_are_read_each_through_its_own_descriptor() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = files(tmp.path(), OPEN_FILES * 2);
        let opened: Vec<PreadFile> = paths
            .iter()
            .map(|p| PreadFile::open(p).unwrap().0)
            .collect();
        for round in 0..2 {
            for (i, f) in opened.iter().enumerate() {
                assert_eq!(read_all(f), format!("file {i}"), "round {round}");
            }
        }
        // Other tests of this process open files too: the bound holds for all of them.
        assert!(open_count() <= OPEN_FILES);
    }

    #[test]
    fn a_file_replaced_while_closed_is_a_stale_index_error_not_its_successor() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = files(tmp.path(), OPEN_FILES + 8);
        let (first, _) = PreadFile::open(&paths[0]).unwrap();
        let rest: Vec<PreadFile> = paths[1..]
            .iter()
            .map(|p| PreadFile::open(p).unwrap().0)
            .collect();
        for f in &rest {
            read_all(f);
        }
        let new = tmp.path().join("new");
        std::fs::write(&new, "another file").unwrap();
        std::fs::rename(&new, &paths[0]).unwrap();
        match first.file() {
            // Still open (the other tests' files were the ones closed): its own bytes.
            Ok(file) => {
                use std::os::unix::fs::FileExt;
                let mut b = [0u8; 6];
                file.read_exact_at(&mut b, 0).unwrap();
                assert_eq!(&b, b"file 0");
            }
            Err(e) => assert!(matches!(e, Error::StaleIndex { .. }), "{e}"),
        }
        // Dropped handles leave the table.
        drop(rest);
        drop(first);
    }

    #[test]
    fn a_forked_child_starts_its_own_table() {
        let before = shared() as *const Shared;
        // SAFETY: the child only touches this module and exits without unwinding.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = !std::ptr::eq(shared(), before) && shared().pid == std::process::id();
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
}
