//! Snapshots and `LATEST` (docs/FORMAT.md §7.4, §7.6 "Compaction"), and the genesis commit of
//! a dataset that had no manifest.

use std::io::Write;
use std::path::Path;

use super::log::create_genesis;
use super::state::State;
use super::{latest_path, make_dirs, now_ms, random_id, snap_name, DIR};
use crate::error::{Error, Result};
use crate::format::manifest::{
    build_table_file, decode_header, decode_hint, encode_hint, ChunkInput, Hint, Kind, Op,
    TableMeta, PAGE_SHIFT,
};
use crate::io::local;

/// Writes the state as a snapshot under a fresh name and points `LATEST` at it unless it
/// names a newer base. Returns the snapshot's version.
pub fn compact(root: &Path, state: &State) -> Result<u64> {
    super::local_only(root)?;
    make_dirs(root)?;
    let mut chunks: Vec<ChunkInput> = state.chunks.iter().map(|c| c.input.clone()).collect();
    chunks.sort_by_key(|c| c.record.number);
    for c in &mut chunks {
        c.record.op = Op::State;
    }
    let mut pending = state.pending.clone();
    pending.sort_unstable();
    let meta = TableMeta {
        kind: Kind::Snapshot,
        full: true,
        page_shift: PAGE_SHIFT,
        dataset_version: state.version,
        base_version: state.base_version,
        dataset_id: state.dataset_id,
        created_ms: now_ms(),
        tail_videos: 0,
        pending,
    };
    let bytes = build_table_file(&meta, &chunks)
        .map_err(|m| Error::format(root.join(DIR), format!("cannot write a snapshot: {m}")))?;
    let id = random_id()?;
    let name = snap_name(state.version, &id);
    if !crate::io::Store::default().create_file(root, &name, &bytes)? {
        return Err(Error::Internal("a fresh snapshot name was taken".into()));
    }
    sync_dir(&root.join(DIR).join("snap"))?;
    let h = decode_header(&bytes).map_err(Error::Internal)?;
    replace_latest(
        root,
        &Hint {
            version: state.version,
            kind: 1,
            file_id: id,
            front_len: h.front_len,
            file_len: h.file_len,
            dataset_id: state.dataset_id,
        },
    )?;
    Ok(state.version)
}

/// Creates the genesis commit holding `chunks` (their records op `State`, in number order) and
/// `LATEST` naming it. False when the dataset already had a manifest (nothing written).
pub fn write_genesis(root: &Path, chunks: &[ChunkInput]) -> Result<bool> {
    super::local_only(root)?;
    let dataset_id = random_id()?;
    if !create_genesis(super::io::ManifestIo::Local(root), dataset_id, chunks)? {
        return Ok(false);
    }
    let genesis = super::log::read_commit(root, 0)?
        .ok_or_else(|| Error::Internal("the genesis commit vanished".into()))?;
    let (file_id, front_len, file_len) = if genesis.header.kind == Kind::CommitInBody {
        let body = local::read_whole(&root.join(super::body_name(&genesis.header.body_id)))?;
        let bh = decode_header(&body).map_err(Error::Internal)?;
        (genesis.header.body_id, bh.front_len, bh.file_len)
    } else {
        ([0; 16], genesis.header.front_len, genesis.header.file_len)
    };
    replace_latest(
        root,
        &Hint {
            version: 0,
            kind: 2,
            file_id,
            front_len,
            file_len,
            dataset_id: genesis.header.dataset_id,
        },
    )?;
    Ok(true)
}

/// Replaces `LATEST` with `hint` unless it names a newer base, under `_gulpio/.lock` so that
/// two writers do not interleave their read and their rename.
fn replace_latest(root: &Path, hint: &Hint) -> Result<bool> {
    super::check_dirs(root)?;
    let dir = root.join(DIR);
    let lock_path = dir.join(".lock");
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags_nofollow()
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    lock_exclusive(&lock, &lock_path)?;
    let target = latest_path(root);
    if let Ok(old) = local::read_whole(&target) {
        if let Ok(old) = decode_hint(&old) {
            if old.dataset_id == hint.dataset_id && old.version >= hint.version {
                return Ok(false);
            }
        }
    }
    let tmp = crate::format::paths::temp_for(&target);
    let written = local::create_new(&tmp).and_then(|mut f| {
        f.write_all(&encode_hint(hint))
            .and_then(|_| f.sync_all())
            .map_err(|e| Error::io(&tmp, e))
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = std::fs::rename(&tmp, &target) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(&target, e));
    }
    sync_dir(&dir)?;
    Ok(true)
}

trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOFOLLOW)
    }
}

/// Blocks until this process holds `file`'s exclusive `flock` (released when it is closed).
fn lock_exclusive(file: &std::fs::File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor `file` owns; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(Error::io(path, e));
        }
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}
