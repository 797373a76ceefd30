//! The dataset manifest as a whole (docs/FORMAT.md §7.1, §7.3-§7.6): where its files live, the
//! log of create-only commits, the state at a version, snapshots and `LATEST`. The layout of
//! each file is `format::manifest`'s; this module decides what the files mean together.
//!
//! Writers commit on local folders and object stores alike (`io`); the state, snapshots and
//! `gulpio index` are local only, so far.
//!
//! Each part has a file of its own: `describe` (a chunk's record from its files), `log` (the
//! commits and their versions), `state` (the state at the current version), `compact`
//! (snapshots and `LATEST`).

mod compact;
mod describe;
mod index;
mod io;
mod log;
mod pages;
mod pin;
mod prune;
mod state;
mod view;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub use compact::{
    compact, compact_if_due, compact_if_tail, compact_in, create_if_new, write_genesis,
    write_genesis_in,
};
pub use describe::{describe, describe_files, describe_unindexed};
pub use index::{index, index_in, status, status_in, IndexReport, Status};
pub use io::ManifestIo;
pub use log::{
    abort_op, abort_op_in, commit_ops, commit_ops_in, current_version, current_version_in,
    read_commit, read_commit_in, Commit, Committed, COMPACT_EVERY_COMMITS, COMPACT_EVERY_VIDEOS,
};
pub use pin::Pin;
pub use prune::{prune_in, Pruned, KEEP_FOR_MS};
pub use state::{load_state, load_state_in, ChunkState, State};
pub use view::{ChunkAt, Located, OpenAt, Opening, VideoAt, View};

/// The manifest's folder inside the dataset (ignored by gulpio's and gulpio2's globs).
pub const DIR: &str = "_gulpio";

/// A commit larger than this is written as a body and a header pointing at it (§7.3).
pub const MAX_COMMIT_LEN: usize = 8 << 20;

/// `_gulpio/log/{v}.glog`, `v` zero-padded to 20 digits so names sort as versions.
pub fn log_name(v: u64) -> String {
    format!("{DIR}/log/{v:020}.glog")
}

/// `_gulpio/snap/{v}-{id}.gman`.
pub fn snap_name(v: u64, id: &[u8; 16]) -> String {
    format!("{DIR}/snap/{v:020}-{}.gman", hex(id))
}

/// `_gulpio/body/{id}.gman`.
pub fn body_name(id: &[u8; 16]) -> String {
    format!("{DIR}/body/{}.gman", hex(id))
}

/// `_gulpio/LATEST`.
pub const LATEST: &str = "_gulpio/LATEST";

pub fn latest_path(root: &Path) -> PathBuf {
    root.join(LATEST)
}

/// True when the dataset at `root` has a manifest: its genesis commit exists (§7.1).
pub fn has_manifest(root: &Path) -> bool {
    crate::io::local::name_exists(&root.join(log_name(0)))
}

/// The manifest's part in publishing a staged chunk to an object store
/// (`Store::publish_staged`): commit its add before its `.gmeta` when the dataset has a
/// manifest, abort it when the `.gmeta` could not be published, compact after it was when the
/// policy says so.
#[derive(Default)]
pub struct StagedCommits {
    committed: std::sync::Mutex<Option<Committed>>,
}

impl crate::io::CommitPointHook for StagedCommits {
    fn before_commit_point(
        &self,
        store: &crate::io::RemoteStore,
        number: u64,
        index: &[u8],
        meta: &[u8],
    ) -> Result<bool> {
        let io = ManifestIo::Remote(store);
        if !has_manifest_in(io)? {
            return Ok(false);
        }
        let input = describe(number, crate::format::manifest::Op::Add, index, meta)
            .map_err(|m| Error::Internal(format!("the staged chunk's own index: {m}")))?;
        let committed = commit_ops_in(io, &[input])?;
        if let Ok(mut c) = self.committed.lock() {
            *c = Some(committed);
        }
        Ok(true)
    }

    fn commit_point_missed(&self, store: &crate::io::RemoteStore, number: u64) {
        // A failure leaves the add pending, which readers check: never wrong.
        let _ = abort_op_in(ManifestIo::Remote(store), number);
    }

    fn published(&self, store: &crate::io::RemoteStore) {
        let committed = self.committed.lock().ok().and_then(|mut c| c.take());
        if let Some(c) = committed {
            // As for local writers: a lagging `LATEST` costs readers a longer tail, no more.
            let _ = compact_if_due(ManifestIo::Remote(store), &c);
        }
    }
}

/// [`has_manifest`] for any dataset: one `stat`, or one `HEAD` remotely.
pub fn has_manifest_in(io: ManifestIo<'_>) -> Result<bool> {
    io.exists(&log_name(0))
}

fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// 16 bytes from the kernel's random source (dataset ids, snapshot and body names).
fn random_id() -> Result<[u8; 16]> {
    let mut id = [0u8; 16];
    let mut got = 0;
    while got < id.len() {
        // SAFETY: writes at most `id.len() - got` bytes into `id[got..]`, which it owns.
        let n = unsafe {
            libc::getrandom(
                id[got..].as_mut_ptr().cast::<libc::c_void>(),
                id.len() - got,
                0,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::Internal(format!("getrandom failed: {e}")));
        }
        got += n as usize;
    }
    Ok(id)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Refuses remote datasets, which this build reads by listing and does not commit to.
fn local_only(root: &Path) -> Result<()> {
    crate::io::local::refuse_url(root)
}

/// `_gulpio/` and its folders, outermost first.
fn folders(root: &Path) -> [PathBuf; 4] {
    let top = root.join(DIR);
    [
        top.clone(),
        top.join("log"),
        top.join("snap"),
        top.join("body"),
    ]
}

/// Creates the manifest's folders (the log, snapshots, bodies) if missing, and refuses any
/// that is a symlink: the manifest's files are written only inside the dataset.
fn make_dirs(root: &Path) -> Result<()> {
    // Each folder is checked before anything is created inside it.
    for dir in folders(root) {
        check_dirs(root)?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(&dir, e)),
        }
    }
    check_dirs(root)
}

/// Refuses to write under `_gulpio/` when it or one of its folders is a symlink or not a
/// folder (it could lead outside the dataset).
fn check_dirs(root: &Path) -> Result<()> {
    for dir in folders(root) {
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() {
            return Err(Error::Unsafe {
                path: dir,
                msg: format!(
                    "is {}, not a folder; refusing to write the dataset manifest through it \
                     (gulpio never writes through a symlink: it could lead outside the \
                     dataset)",
                    if meta.file_type().is_symlink() {
                        "a symbolic link"
                    } else {
                        "a file"
                    }
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
