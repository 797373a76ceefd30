//! `gulpio index`'s manifest step (docs/FORMAT.md §7.6): record every chunk of a local
//! dataset, creating the manifest (its genesis commit) or committing what it does not record
//! yet, then compact; and the comparison `gulpio check` and `gulpio info` print.

use std::collections::BTreeMap;
use std::path::Path;

use super::describe::{describe, describe_unindexed, files_match_in};
use super::io::ManifestIo;
use super::state::{load_state_in, State};
use super::{abort_op_in, commit_ops_in, compact_in, has_manifest_in, write_genesis_in};
use crate::error::{Error, Result};
use crate::format::manifest::{ChunkInput, ChunkRecord, Op};
use crate::format::paths::{glob_kind, parse_chunk_file_name, FileKind};

/// What [`index`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexReport {
    /// The manifest was created by this call (its genesis commit).
    pub created: bool,
    pub added: usize,
    pub replaced: usize,
    pub removed: usize,
    pub aborted: usize,
    /// The version the snapshot holds.
    pub version: u64,
    pub chunks: usize,
    pub videos: u64,
}

/// The chunks of the dataset as listed now: numbers of the canonical pairs. Files gulpio's
/// globs list under other names are refused: the manifest records canonical names only.
fn listed_chunks(io: ManifestIo<'_>) -> Result<Vec<u64>> {
    let mut data = BTreeMap::new();
    let mut meta = BTreeMap::new();
    let mut odd = Vec::new();
    for name in io.names()? {
        match parse_chunk_file_name(&name) {
            Some((FileKind::Data, k)) => {
                data.insert(k, ());
            }
            Some((FileKind::Meta, k)) => {
                meta.insert(k, ());
            }
            Some(_) => {}
            None if glob_kind(&name).is_some() => odd.push(name),
            None => {}
        }
    }
    if !odd.is_empty() {
        odd.sort();
        return Err(Error::InvalidArgument(format!(
            "{}: the manifest records chunks under gulpio's names data_{{k}}.gulp and \
             meta_{{k}}.gmeta only; rename {} first",
            io.path("").display(),
            odd.join(", ")
        )));
    }
    Ok(data
        .keys()
        .filter(|k| meta.contains_key(k))
        .copied()
        .collect())
}

fn described(io: ManifestIo<'_>, k: u64, op: Op) -> Result<ChunkInput> {
    let index_name = FileKind::Index.file_name(k);
    let meta_name = FileKind::Meta.file_name(k);
    let index = io.read(&index_name)?;
    let meta = io
        .read(&meta_name)?
        .ok_or_else(|| Error::format(io.path(&meta_name), "is missing"))?;
    match (index, io) {
        (Some(index), _) => {
            describe(k, op, &index, &meta).map_err(|m| Error::format(io.path(&index_name), m))
        }
        // Locally the indexes were written first: one missing now was removed meanwhile.
        (None, ManifestIo::Local(_)) => Err(Error::InvalidArgument(format!(
            "{} has no index; write the chunks' indexes first (`gulpio index` does)",
            io.path(&meta_name).display(),
        ))),
        // No `.gidx` is written to an object store (§7.6): a gulpio2 chunk is recorded
        // without one and read through its `.gmeta`, as a listing reads it.
        (None, ManifestIo::Remote(_)) => {
            let data_name = FileKind::Data.file_name(k);
            let gulp_len = io
                .size(&data_name)?
                .ok_or_else(|| Error::format(io.path(&data_name), "is missing"))?;
            describe_unindexed(k, op, &meta, gulp_len)
                .map_err(|m| Error::format(io.path(&meta_name), m))
        }
    }
}

/// True when the record is the chunk's files as they are now.
fn matches_files(io: ManifestIo<'_>, r: &ChunkRecord) -> Result<bool> {
    Ok(
        io.size(&FileKind::Meta.file_name(r.number))? == Some(r.gmeta_len)
            && files_match_in(io, r.number, r),
    )
}

/// Requests in flight while a remote dataset's chunks are described (each is two small
/// `GET`s or a `HEAD` and a range; latency-bound, not CPU-bound).
const REMOTE_IN_FLIGHT: usize = 32;

/// `f(item)` for every item, in order, several at once on an object store.
fn each<T: Send, U: Sync>(
    io: ManifestIo<'_>,
    items: &[U],
    f: impl Fn(&U) -> Result<T> + Sync + Send,
) -> Result<Vec<T>> {
    use rayon::prelude::*;
    match io {
        ManifestIo::Local(_) => items.iter().map(f).collect(),
        ManifestIo::Remote(_) => rayon::ThreadPoolBuilder::new()
            .num_threads(REMOTE_IN_FLIGHT.min(items.len()).max(1))
            .build()
            .map_err(|e| Error::Internal(format!("cannot start threads: {e}")))?
            .install(|| items.par_iter().map(f).collect()),
    }
}

/// Records every chunk of the local dataset at `root` in its manifest and compacts it. Needs
/// what `gulpio repair` needs: no writer at work on the dataset. With `abort_pending`, pending
/// operations whose chunk has no `.gmeta` are aborted (their writers are gone).
pub fn index(root: &Path, abort_pending: bool) -> Result<IndexReport> {
    super::local_only(root)?;
    index_in(ManifestIo::Local(root), abort_pending)
}

/// [`index`] for any dataset: on an object store it only adds files under `_gulpio/` (every
/// chunk must have its index already).
pub fn index_in(io: ManifestIo<'_>, abort_pending: bool) -> Result<IndexReport> {
    let listed = listed_chunks(io)?;
    let mut report = IndexReport::default();
    if !has_manifest_in(io)? {
        if listed.is_empty() {
            // A mistyped path or prefix: a manifest of nothing would only hide the mistake.
            return Err(Error::InvalidArgument(format!(
                "{}: no gulp chunks here (data_*.gulp + meta_*.gmeta); nothing to index",
                io.path("").display()
            )));
        }
        let chunks = each(io, &listed, |&k| described(io, k, Op::State))?;
        report.created = write_genesis_in(io, &chunks)?;
        if report.created {
            report.added = chunks.len();
        }
    }
    let state = load_state_in(io)?;
    let recorded: BTreeMap<u64, &ChunkRecord> = state
        .chunks
        .iter()
        .map(|c| (c.input.record.number, &c.input.record))
        .collect();
    let checked = each(io, &listed, |&k| match recorded.get(&k) {
        None => described(io, k, Op::Add).map(Some),
        Some(r) if !matches_files(io, r)? => described(io, k, Op::Replace).map(Some),
        Some(_) => Ok(None),
    })?;
    let mut ops: Vec<ChunkInput> = checked.into_iter().flatten().collect();
    for op in &ops {
        if op.record.op == Op::Add {
            report.added += 1;
        } else {
            report.replaced += 1;
        }
    }
    for &k in recorded.keys() {
        if listed.binary_search(&k).is_err() {
            ops.push(ChunkInput::without_files(k, Op::Remove));
            report.removed += 1;
        }
    }
    ops.sort_by_key(|c| c.record.number);
    if !ops.is_empty() {
        commit_ops_in(io, &ops)?;
    }
    if abort_pending {
        for &(k, _) in &state.pending {
            if io.size(&FileKind::Meta.file_name(k))?.is_none() {
                abort_op_in(io, k)?;
                report.aborted += 1;
            }
        }
    }
    let state = load_state_in(io)?;
    // A base at the current version is already what a snapshot would be.
    report.version = if state.tail > 0 {
        compact_in(io, &state)?
    } else {
        state.version
    };
    // Again, its errors this time (compaction's own clean-up is best effort).
    super::prune_in(io, super::KEEP_FOR_MS, super::now_ms())?;
    report.chunks = state.chunks.len();
    report.videos = state.video_count();
    Ok(report)
}

/// How the manifest compares with the folder (`gulpio check`, `gulpio info`).
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub version: u64,
    pub base_version: u64,
    pub base_is_snapshot: bool,
    pub tail: u64,
    pub chunks: usize,
    pub videos: u64,
    pub pending: Vec<(u64, u64)>,
    /// Listed chunks the manifest does not record.
    pub unrecorded: Vec<u64>,
    /// Records whose chunk is gone or whose files differ.
    pub mismatched: Vec<u64>,
}

/// The manifest's state compared with a listing, or None when the dataset has no manifest.
pub fn status(root: &Path) -> Result<Option<Status>> {
    super::local_only(root)?;
    status_in(ManifestIo::Local(root))
}

/// [`status`] for any dataset (remotely: the base fetched whole, a listing, and a `HEAD` and a
/// 4-byte range of each recorded chunk's index, several at once).
pub fn status_in(io: ManifestIo<'_>) -> Result<Option<Status>> {
    if !has_manifest_in(io)? {
        return Ok(None);
    }
    let state: State = load_state_in(io)?;
    let listed = listed_chunks(io)?;
    let mut out = Status {
        version: state.version,
        base_version: state.base_version,
        base_is_snapshot: state.base_is_snapshot,
        tail: state.tail,
        chunks: state.chunks.len(),
        videos: state.video_count(),
        pending: state.pending.clone(),
        unrecorded: state.unrecorded.clone(),
        mismatched: Vec::new(),
    };
    let mut recorded = BTreeMap::new();
    let matched = each(io, &state.chunks, |c| matches_files(io, &c.input.record))?;
    for (c, matched) in state.chunks.iter().zip(matched) {
        recorded.insert(c.input.record.number, ());
        if !matched {
            out.mismatched.push(c.input.record.number);
        }
    }
    for k in listed {
        if !recorded.contains_key(&k) && !out.unrecorded.contains(&k) {
            out.unrecorded.push(k);
        }
    }
    out.unrecorded.sort_unstable();
    Ok(Some(out))
}
