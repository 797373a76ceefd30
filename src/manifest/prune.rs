//! Clean-up (docs/FORMAT.md §7.6, "Clean-up"): the snapshots that a newer one replaced more
//! than [`KEEP_FOR_MS`] ago, then the commits (and their bodies) that only those or the genesis
//! needed as a base. Run after every compaction, so `_gulpio/` holds a week of history and not
//! every snapshot ever written. What a reader may still use is never deleted: the base
//! `LATEST` names and every newer snapshot, each snapshot replaced within the retention (a
//! pinned copy of an open made before may read it, §7.5), the commits after the oldest of those
//! and the ones their pending tables name, and the genesis commit (the dataset's id).

use super::io::ManifestIo;
use super::{body_name, log_name, DIR, LATEST};
use crate::error::{Error, Result};
use crate::format::manifest::{decode_header, decode_hint, Header, Kind, TableFile, HEADER_LEN};

/// How long a replaced base stays: a week, as Delta Lake keeps its log's checkpoints by
/// default and Lance its versions; a copy of an open older than that (a DataLoader worker
/// of a week-long epoch, a pickle kept on disk) raises `StaleIndexError` and is opened again.
pub const KEEP_FOR_MS: u64 = 7 * 24 * 3600 * 1000;

/// What one clean-up deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub snapshots: usize,
    pub commits: usize,
    pub bodies: usize,
}

/// `(version, name)` of names `{v:020}-{id}.gman` / `{v:020}.glog` listed in `dir`.
fn versions_in(io: ManifestIo<'_>, dir: &str, suffix: &str) -> Result<Vec<(u64, String)>> {
    let mut out: Vec<(u64, String)> = io
        .names_in(dir)?
        .into_iter()
        .filter_map(|name| {
            let stem = name.strip_suffix(suffix)?;
            let v = stem.split('-').next()?.parse::<u64>().ok()?;
            Some((v, format!("{dir}/{name}")))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// A manifest file's header (one ranged read; every table file is longer than its header).
fn header_of(io: ManifestIo<'_>, name: &str) -> Result<Header> {
    let head = io
        .read_range(name, 0..HEADER_LEN as u64)?
        .ok_or_else(|| Error::format(io.path(name), "is missing"))?;
    decode_header(&head).map_err(|m| Error::format(io.path(name), m))
}

/// The versions of the commits a snapshot's pending table names (read from its front).
fn pending_of(io: ManifestIo<'_>, name: &str) -> Result<Vec<u64>> {
    let h = header_of(io, name)?;
    if h.pending_count == 0 {
        return Ok(Vec::new());
    }
    let front = io
        .read_range(name, 0..h.front_len)?
        .ok_or_else(|| Error::format(io.path(name), "is missing"))?;
    let file = TableFile::open(front).map_err(|m| Error::format(io.path(name), m))?;
    Ok(file.pending().iter().map(|&(_, v)| v).collect())
}

/// Deletes what no reader needs any more, as of `now_ms`, keeping replaced bases for
/// `keep_for_ms`. Nothing is deleted while `LATEST` is missing, damaged or names the genesis.
pub fn prune_in(io: ManifestIo<'_>, keep_for_ms: u64, now_ms: u64) -> Result<Pruned> {
    let mut out = Pruned::default();
    let Some(hint) = io.read(LATEST)?.and_then(|b| decode_hint(&b).ok()) else {
        return Ok(out);
    };
    if hint.kind != 1 {
        return Ok(out);
    }
    let snaps = versions_in(io, &format!("{DIR}/snap"), ".gman")?;
    let current = super::snap_name(hint.version, &hint.file_id);
    if !snaps.iter().any(|(_, name)| *name == current) {
        return Ok(out); // LATEST names a snapshot not listed (yet): judge nothing
    }
    // A base is replaced when the next snapshot was written (its header's time); the genesis
    // by the first snapshot.
    let expired = |next: &str| -> Result<bool> {
        let created = header_of(io, next)?.created_ms;
        Ok(now_ms.saturating_sub(created) > keep_for_ms)
    };
    // The bases go first: a clean-up cut short leaves only commits nobody reads.
    let mut doomed = Vec::new();
    let mut oldest_kept = hint.version;
    for (i, (v, name)) in snaps.iter().enumerate() {
        let replaced = *v < hint.version && *name != current;
        match snaps.get(i + 1) {
            Some((_, next)) if replaced && expired(next)? => doomed.push(name.clone()),
            _ => oldest_kept = oldest_kept.min(*v),
        }
    }
    if let Some((_, first)) = snaps.first() {
        if !expired(first)? {
            oldest_kept = 0;
        }
    }
    for name in &doomed {
        io.delete(name)?;
        out.snapshots += 1;
    }
    if oldest_kept <= 1 {
        return Ok(out); // no commit but the genesis is older than every kept base
    }
    // Commits below every kept base, less those a kept snapshot's pending table names.
    let mut needed = Vec::new();
    for (v, name) in &snaps {
        if *v >= oldest_kept && !doomed.contains(name) {
            needed.extend(pending_of(io, name)?);
        }
    }
    for (v, name) in versions_in(io, &format!("{DIR}/log"), ".glog")? {
        if v == 0 || v >= oldest_kept || needed.contains(&v) {
            continue;
        }
        debug_assert_eq!(name, log_name(v));
        let h = header_of(io, &name)?;
        io.delete(&name)?;
        out.commits += 1;
        if h.kind == Kind::CommitInBody {
            io.delete(&body_name(&h.body_id))?;
            out.bodies += 1;
        }
    }
    Ok(out)
}
