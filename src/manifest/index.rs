//! `gulpio index`'s manifest step (docs/FORMAT.md §7.6): record every chunk of a local
//! dataset, creating the manifest (its genesis commit) or committing what it does not record
//! yet, then compact; and the comparison `gulpio check` and `gulpio info` print.

use std::collections::BTreeMap;
use std::path::Path;

use super::describe::{describe_files, files_match, meta_len};
use super::state::{load_state, State};
use super::{abort_op, commit_ops, compact, has_manifest, write_genesis};
use crate::error::{Error, Result};
use crate::format::manifest::{ChunkInput, ChunkRecord, Op};
use crate::format::paths::{glob_kind, parse_chunk_file_name, ChunkPaths, FileKind};

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

/// The chunks of the folder as listed now: numbers of the canonical pairs. Files gulpio's
/// globs list under other names are refused: the manifest records canonical names only.
fn listed_chunks(root: &Path) -> Result<Vec<u64>> {
    let mut data = BTreeMap::new();
    let mut meta = BTreeMap::new();
    let mut odd = Vec::new();
    for entry in std::fs::read_dir(root).map_err(|e| Error::io(root, e))? {
        let name = entry.map_err(|e| Error::io(root, e))?.file_name();
        let Some(name) = name.to_str() else { continue };
        match parse_chunk_file_name(name) {
            Some((FileKind::Data, k)) => {
                data.insert(k, ());
            }
            Some((FileKind::Meta, k)) => {
                meta.insert(k, ());
            }
            Some(_) => {}
            None if glob_kind(name).is_some() => odd.push(name.to_owned()),
            None => {}
        }
    }
    if !odd.is_empty() {
        odd.sort();
        return Err(Error::InvalidArgument(format!(
            "{}: the manifest records chunks under gulpio's names data_{{k}}.gulp and \
             meta_{{k}}.gmeta only; rename {} first",
            root.display(),
            odd.join(", ")
        )));
    }
    Ok(data
        .keys()
        .filter(|k| meta.contains_key(k))
        .copied()
        .collect())
}

fn described(root: &Path, k: u64, op: Op) -> Result<ChunkInput> {
    let paths = ChunkPaths::numbered(root, k);
    if !crate::io::local::name_exists(&paths.index) {
        return Err(Error::InvalidArgument(format!(
            "{} has no index; write the chunks' indexes first (`gulpio index` does)",
            paths.meta.display()
        )));
    }
    describe_files(k, op, &paths)
}

/// True when the record is the chunk's files as they are now.
fn matches_files(root: &Path, r: &ChunkRecord) -> Result<bool> {
    let paths = ChunkPaths::numbered(root, r.number);
    Ok(meta_len(&paths.meta)? == Some(r.gmeta_len) && files_match(&paths, r))
}

/// Records every chunk of the local dataset at `root` in its manifest and compacts it. Needs
/// what `gulpio repair` needs: no writer at work on the dataset. With `abort_pending`, pending
/// operations whose chunk has no `.gmeta` are aborted (their writers are gone).
pub fn index(root: &Path, abort_pending: bool) -> Result<IndexReport> {
    super::local_only(root)?;
    let listed = listed_chunks(root)?;
    let mut report = IndexReport::default();
    if !has_manifest(root) {
        let chunks = listed
            .iter()
            .map(|&k| described(root, k, Op::State))
            .collect::<Result<Vec<_>>>()?;
        report.created = write_genesis(root, &chunks)?;
        if report.created {
            report.added = chunks.len();
        }
    }
    let state = load_state(root)?;
    let recorded: BTreeMap<u64, &ChunkRecord> = state
        .chunks
        .iter()
        .map(|c| (c.input.record.number, &c.input.record))
        .collect();
    let mut ops = Vec::new();
    for &k in &listed {
        match recorded.get(&k) {
            None => {
                ops.push(described(root, k, Op::Add)?);
                report.added += 1;
            }
            Some(r) if !matches_files(root, r)? => {
                ops.push(described(root, k, Op::Replace)?);
                report.replaced += 1;
            }
            Some(_) => {}
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
        commit_ops(root, &ops)?;
    }
    if abort_pending {
        for &(k, _) in &state.pending {
            if meta_len(&ChunkPaths::numbered(root, k).meta)?.is_none() {
                abort_op(root, k)?;
                report.aborted += 1;
            }
        }
    }
    let state = load_state(root)?;
    // A base at the current version is already what a snapshot would be.
    report.version = if state.tail > 0 {
        compact(root, &state)?
    } else {
        state.version
    };
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
    if !has_manifest(root) {
        return Ok(None);
    }
    let state: State = load_state(root)?;
    let listed = listed_chunks(root)?;
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
    for c in &state.chunks {
        recorded.insert(c.input.record.number, ());
        if !matches_files(root, &c.input.record)? {
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
