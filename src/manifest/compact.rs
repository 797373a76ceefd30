//! Snapshots and `LATEST` (docs/FORMAT.md §7.4, §7.6 "Compaction"), and the genesis commit of
//! a dataset that had no manifest.

use std::io::Write;
use std::path::Path;

use super::io::ManifestIo;
use super::log::{create_genesis, Committed};
use super::state::State;
use super::{latest_path, now_ms, random_id, snap_name, DIR, LATEST};
use crate::error::{Error, Result};
use crate::format::manifest::{
    build_table_file, decode_header, decode_hint, encode_hint, ChunkInput, Hint, Kind, Op,
    TableMeta, HEADER_LEN, PAGE_SHIFT,
};
use crate::io::local;

/// Writes the state as a snapshot under a fresh name and points `LATEST` at it unless it
/// names a newer base. Returns the snapshot's version.
pub fn compact(root: &Path, state: &State) -> Result<u64> {
    super::local_only(root)?;
    compact_in(ManifestIo::Local(root), state)
}

/// [`compact`] for any dataset.
pub fn compact_in(io: ManifestIo<'_>, state: &State) -> Result<u64> {
    io.make_dirs()?;
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
        .map_err(|m| Error::format(io.path(DIR), format!("cannot write a snapshot: {m}")))?;
    let id = random_id()?;
    if !io.create(&snap_name(state.version, &id), &bytes)? {
        return Err(Error::Internal("a fresh snapshot name was taken".into()));
    }
    let h = decode_header(&bytes).map_err(Error::Internal)?;
    replace_latest(
        io,
        &Hint {
            version: state.version,
            kind: 1,
            file_id: id,
            front_len: h.front_len,
            file_len: h.file_len,
            dataset_id: state.dataset_id,
        },
    )?;
    // Each compaction replaces a base: what only week-old bases needed goes (§7.6). Best
    // effort here: a writer's credentials may not allow deleting (S3 put-only roles), nothing
    // reads what is left, and `gulpio index` cleans up with its errors reported.
    let _ = super::prune_in(io, super::KEEP_FOR_MS, now_ms());
    Ok(state.version)
}

/// Compacts after `committed` when the policy says its writer does (§7.6). True when it did.
pub fn compact_if_due(io: ManifestIo<'_>, committed: &Committed) -> Result<bool> {
    if !committed.compaction_due() {
        return Ok(false);
    }
    compact_in(io, &super::load_state_in(io)?)?;
    Ok(true)
}

/// Compacts when commits follow the base `LATEST` names (an ingest run's end, §7.6): reads
/// `LATEST` and probes for the next commit before anything large. The version compacted, or
/// None (no manifest, or nothing after its base).
pub fn compact_if_tail(io: ManifestIo<'_>) -> Result<Option<u64>> {
    if !super::has_manifest_in(io)? {
        return Ok(None);
    }
    let base = super::log::hinted_version(io)?;
    if super::current_version_in(io, base)? == base {
        return Ok(None);
    }
    compact_in(io, &super::load_state_in(io)?).map(Some)
}

/// Creates the genesis commit holding `chunks` (their records op `State`, in number order) and
/// `LATEST` naming it. False when the dataset already had a manifest (nothing written).
pub fn write_genesis(root: &Path, chunks: &[ChunkInput]) -> Result<bool> {
    super::local_only(root)?;
    write_genesis_in(ManifestIo::Local(root), chunks)
}

/// [`write_genesis`] for any dataset.
pub fn write_genesis_in(io: ManifestIo<'_>, chunks: &[ChunkInput]) -> Result<bool> {
    let dataset_id = random_id()?;
    if !create_genesis(io, dataset_id, chunks)? {
        return Ok(false);
    }
    let genesis = super::log::read_commit_in(io, 0)?
        .ok_or_else(|| Error::Internal("the genesis commit vanished".into()))?;
    let (file_id, front_len, file_len) = if genesis.header.kind == Kind::CommitInBody {
        let name = super::body_name(&genesis.header.body_id);
        let body = io
            .read_range(&name, 0..HEADER_LEN as u64)?
            .ok_or_else(|| Error::format(io.path(&name), "is missing"))?;
        let bh = decode_header(&body).map_err(Error::Internal)?;
        (genesis.header.body_id, bh.front_len, bh.file_len)
    } else {
        ([0; 16], genesis.header.front_len, genesis.header.file_len)
    };
    replace_latest(
        io,
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

/// Gives a dataset that is being created (no manifest and no chunk file yet) an empty
/// manifest, so that it opens through one from its first chunk on (§7.6, "Which writers keep
/// a manifest"). Of two writers creating one dataset the second adopts the first's genesis.
/// False when the dataset has a manifest already, or has chunks without one (`gulpio index`
/// records those).
pub fn create_if_new(io: ManifestIo<'_>) -> Result<bool> {
    if super::has_manifest_in(io)? || has_chunk_files(io)? {
        return Ok(false);
    }
    write_genesis_in(io, &[])
}

/// Whether any file of a chunk (data, meta or index, published or claimed) is in the dataset
/// (a missing folder has none).
fn has_chunk_files(io: ManifestIo<'_>) -> Result<bool> {
    let names = match io.names() {
        Ok(n) => n,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    Ok(names
        .iter()
        .any(|n| crate::format::paths::parse_chunk_file_name(n).is_some()))
}

/// Replaces `LATEST` with `hint` unless it names a newer base of the same dataset. Locally
/// under `_gulpio/.lock`, so that two writers do not interleave their read and their rename;
/// remotely by a conditional `PUT` on the version read, read again after a lost race.
fn replace_latest(io: ManifestIo<'_>, hint: &Hint) -> Result<bool> {
    match io {
        ManifestIo::Local(root) => replace_latest_local(root, hint),
        ManifestIo::Remote(r) => {
            for _ in 0..MAX_LATEST_TRIES {
                let current = r.read_versioned(LATEST)?;
                if let Some((old, _)) = &current {
                    if newer_or_same(old, hint) {
                        return Ok(false);
                    }
                }
                let expected = current.as_ref().map(|(_, v)| v);
                if r.put_replacing(LATEST, encode_hint(hint).to_vec(), expected)? {
                    return Ok(true);
                }
            }
            // Writers that keep replacing it are compacting too: theirs serves as well.
            Ok(false)
        }
    }
}

/// Lost races on `LATEST` before leaving it to the writers that won them.
const MAX_LATEST_TRIES: usize = 16;

/// Whether `LATEST`'s bytes `old` name a base at least as new as `hint`'s, of the same dataset.
fn newer_or_same(old: &[u8], hint: &Hint) -> bool {
    decode_hint(old).is_ok_and(|o| o.dataset_id == hint.dataset_id && o.version >= hint.version)
}

fn replace_latest_local(root: &Path, hint: &Hint) -> Result<bool> {
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
    if local::read_whole(&target).is_ok_and(|old| newer_or_same(&old, hint)) {
        return Ok(false);
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
