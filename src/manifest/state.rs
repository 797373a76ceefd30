//! The state at the current version (docs/FORMAT.md §7.4): a base (the snapshot `LATEST`
//! names, or the genesis commit) and the commits after it, each operation judged by its
//! chunk's files. Materialised whole: what writers, `gulpio index` and `gulpio check` need.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::describe::files_match_in;
use super::io::ManifestIo;
use super::log::{current_version_after, read_commit_in, read_tables_in};
use super::{body_name, log_name, snap_name, LATEST};
use crate::error::{Error, Result};
use crate::format::manifest::{
    decode_header, decode_hint, ChunkInput, ChunkRecord, Header, Hint, Kind, Op, HEADER_LEN,
};
use crate::format::paths::FileKind;

/// A chunk of the state: its record (op `State`) and videos.
#[derive(Debug, Clone)]
pub struct ChunkState {
    pub input: ChunkInput,
    /// The commit whose record it is, or None for the base's record.
    pub version: Option<u64>,
    /// No operation of the chunk took effect and its files do not match its base record:
    /// another tool changed it (rule M3 judges its reads; `gulpio index` records it).
    pub changed: bool,
}

/// The dataset's state at `version`.
#[derive(Debug, Clone)]
pub struct State {
    pub dataset_id: [u8; 16],
    pub version: u64,
    pub base_version: u64,
    /// The base was a snapshot (else the genesis commit).
    pub base_is_snapshot: bool,
    /// In position order (§7.4 step 4).
    pub chunks: Vec<ChunkState>,
    /// (chunk, version) of the newest operation of each chunk that has not taken effect.
    pub pending: Vec<(u64, u64)>,
    /// Chunks named by operations none of which took effect and that the base does not hold.
    pub unrecorded: Vec<u64>,
    /// Commits after the base.
    pub tail: u64,
}

impl State {
    pub fn video_count(&self) -> u64 {
        self.chunks
            .iter()
            .map(|c| c.input.videos.len() as u64)
            .sum()
    }
    /// The largest chunk number the state or its pending operations name.
    pub fn max_chunk(&self) -> Option<u64> {
        self.chunks
            .iter()
            .map(|c| c.input.record.number)
            .chain(self.pending.iter().map(|p| p.0))
            .max()
    }
}

/// The file a state starts from (§7.4 step 1): a snapshot, the genesis commit, or the
/// genesis commit's body.
pub(super) struct BaseFile {
    /// Its name in the dataset, and its path (or URL) for messages.
    pub name: String,
    pub path: PathBuf,
    pub version: u64,
    /// A snapshot, else the genesis commit.
    pub is_snapshot: bool,
    /// `LATEST`, when it named this base (its front and file lengths).
    pub hint: Option<Hint>,
}

/// The genesis commit's tables: the commit itself, or the body a kind 3 commit names (its
/// length and header CRC must be the ones the commit records).
fn genesis_file(io: ManifestIo<'_>) -> Result<BaseFile> {
    let name = log_name(0);
    let path = io.path(&name);
    let head = read_head(io, &name)?;
    let h = decode_header(&head).map_err(|m| Error::format(&path, m))?;
    if h.dataset_version != 0 || !h.full {
        return Err(Error::format(&path, "is not a genesis commit"));
    }
    if h.kind != Kind::CommitInBody {
        return Ok(BaseFile {
            name,
            path,
            version: 0,
            is_snapshot: false,
            hint: None,
        });
    }
    let body_name = body_name(&h.body_id);
    let body = io.path(&body_name);
    let bh_bytes = read_head(io, &body_name)?;
    let bh = decode_header(&bh_bytes).map_err(|m| Error::format(&body, m))?;
    let crc = u32::from_le_bytes([bh_bytes[252], bh_bytes[253], bh_bytes[254], bh_bytes[255]]);
    if bh.kind != Kind::Body
        || bh.file_len != h.body_len
        || crc != h.body_header_crc
        || bh.dataset_id != h.dataset_id
    {
        return Err(Error::format(
            &body,
            "is not the body the genesis commit names",
        ));
    }
    Ok(BaseFile {
        name: body_name,
        path: body,
        version: 0,
        is_snapshot: false,
        hint: None,
    })
}

/// A manifest file's first 256 bytes (fewer when it is shorter: its header check says so).
fn read_head(io: ManifestIo<'_>, name: &str) -> Result<Vec<u8>> {
    let missing = || Error::format(io.path(name), "is missing");
    let len = io.size(name)?.ok_or_else(missing)?;
    io.read_range(name, 0..len.min(HEADER_LEN as u64))?
        .ok_or_else(missing)
}

/// The base: the snapshot `LATEST` names, else (locally) the newest snapshot listed, else the
/// genesis. `latest` is `LATEST`'s bytes when the caller read them already.
pub(super) fn locate_base(io: ManifestIo<'_>, latest: Option<Vec<u8>>) -> Result<BaseFile> {
    let latest = match latest {
        Some(b) => Some(b),
        None => io.read(LATEST)?,
    };
    let hint = latest.and_then(|b| decode_hint(&b).ok());
    if let Some(hint) = hint {
        if hint.kind == 2 {
            // LATEST names the genesis's tables (the commit, or its body) and their lengths:
            // nothing to read before the front (its header is checked as any base's).
            let name = if hint.file_id == [0; 16] {
                log_name(0)
            } else {
                body_name(&hint.file_id)
            };
            return Ok(BaseFile {
                path: io.path(&name),
                name,
                version: 0,
                is_snapshot: false,
                hint: Some(hint),
            });
        }
        let name = snap_name(hint.version, &hint.file_id);
        // Remotely the front's fetch finds out (one request fewer); locally a `stat`.
        let named = match io {
            ManifestIo::Local(root) => crate::io::local::name_exists(&root.join(&name)),
            ManifestIo::Remote(_) => true,
        };
        if named {
            return Ok(BaseFile {
                path: io.path(&name),
                name,
                version: hint.version,
                is_snapshot: true,
                hint: Some(hint),
            });
        }
    }
    if let ManifestIo::Local(root) = io {
        if let Some((version, name)) = newest_snapshot(root)? {
            return Ok(BaseFile {
                path: root.join(&name),
                name,
                version,
                is_snapshot: true,
                hint: None,
            });
        }
    }
    genesis_file(io)
}

/// Checks that the base's header is what its place says (kind, version, whole dataset).
pub(super) fn check_base(base: &BaseFile, h: &Header) -> Result<()> {
    let fits = if base.is_snapshot {
        h.kind == Kind::Snapshot
    } else {
        matches!(h.kind, Kind::Commit | Kind::Body)
    };
    let version = if base.is_snapshot { base.version } else { 0 };
    let hinted = base
        .hint
        .as_ref()
        .is_none_or(|hint| hint.dataset_id == h.dataset_id);
    if !fits || !h.full || h.dataset_version != version || !hinted {
        return Err(Error::format(
            &base.path,
            "is not the base its name and LATEST say",
        ));
    }
    Ok(())
}

/// The newest snapshot listed: (version, name).
fn newest_snapshot(root: &Path) -> Result<Option<(u64, String)>> {
    let dir = root.join(super::DIR).join("snap");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    let mut best: Option<(u64, String)> = None;
    for entry in entries {
        let name = entry.map_err(|e| Error::io(&dir, e))?.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(v) = name
            .strip_suffix(".gman")
            .and_then(|s| s.split_once('-'))
            .and_then(|(v, _)| v.parse::<u64>().ok())
        else {
            continue;
        };
        if best.as_ref().is_none_or(|b| v > b.0) {
            best = Some((v, format!("{}/snap/{name}", super::DIR)));
        }
    }
    Ok(best)
}

/// One operation of a chunk from the tail or a pending commit.
pub(super) struct Candidate {
    pub version: u64,
    pub input: ChunkInput,
}

/// Per chunk the tail up to `version` or the base's pending table names, its operations.
pub(super) fn tail_candidates(
    io: ManifestIo<'_>,
    base_version: u64,
    version: u64,
    dataset_id: [u8; 16],
    base_pending: &[(u64, u64)],
) -> Result<BTreeMap<u64, Vec<Candidate>>> {
    let mut ops: BTreeMap<u64, Vec<Candidate>> = BTreeMap::new();
    let mut add_commit = |v: u64, only: Option<u64>| -> Result<()> {
        let commit = read_commit_in(io, v)?.ok_or_else(|| {
            Error::format(
                io.path(&log_name(v)),
                "a commit the manifest names is missing",
            )
        })?;
        if commit.header.dataset_id != dataset_id {
            return Err(Error::format(
                io.path(&log_name(v)),
                "belongs to another dataset (its dataset id differs)",
            ));
        }
        for input in commit.ops {
            if only.is_none_or(|k| k == input.record.number) {
                ops.entry(input.record.number)
                    .or_default()
                    .push(Candidate { version: v, input });
            }
        }
        Ok(())
    };
    for v in base_version + 1..=version {
        add_commit(v, None)?;
    }
    // Pending operations are older than the base, so never in the tail.
    for &(k, v) in base_pending {
        add_commit(v, Some(k))?;
    }
    Ok(ops)
}

/// What a chunk named by operations is in the state (§7.4 step 3).
pub(super) enum Chosen {
    /// Its base record.
    Base,
    /// The record of the operation of this version.
    Tail(u64, ChunkInput),
    /// Not part of the state: removed, or never published.
    Gone,
    /// No candidate took effect: the base record, marked changed.
    Changed,
    /// No candidate took effect and the base has no record, but a `.gmeta` exists.
    Unrecorded,
}

pub(super) struct Resolved {
    pub chosen: Chosen,
    /// The version of the newest operation that has not taken effect.
    pub pending: Option<u64>,
}

/// Judges chunk `k`'s operations (any order) against its files, newest first, then its base
/// record (or "absent").
pub(super) fn resolve(
    io: ManifestIo<'_>,
    k: u64,
    mut list: Vec<Candidate>,
    base_record: Option<&ChunkRecord>,
) -> Result<Resolved> {
    list.sort_by_key(|c| c.version);
    // An abort deletes the nearest older operation of its chunk.
    let mut live: Vec<Candidate> = Vec::new();
    for c in list {
        if c.input.record.op == Op::Abort {
            live.pop();
        } else {
            live.push(c);
        }
    }
    let on_disk = io.size(&FileKind::Meta.file_name(k))?;
    let took = |r: &ChunkRecord, others: &[&ChunkRecord]| {
        if !r.op.has_files() {
            return on_disk.is_none();
        }
        if on_disk != Some(r.gmeta_len) {
            return false;
        }
        let tie = others
            .iter()
            .any(|o| o.op.has_files() && o.gmeta_len == r.gmeta_len);
        !tie || files_match_in(io, k, r)
    };
    let records: Vec<&ChunkRecord> = live
        .iter()
        .rev()
        .map(|c| &c.input.record)
        .chain(base_record)
        .collect();
    let chosen_at = (0..records.len()).find(|&i| took(records[i], &records[i + 1..]));
    // Operations newer than the one that took effect have not (yet): the newest stays
    // pending, so that its commit point, if it comes, is seen.
    let pending = (chosen_at.unwrap_or(live.len()) > 0).then(|| live[live.len() - 1].version);
    let chosen = match chosen_at {
        Some(i) if i < live.len() => {
            let c = &live[live.len() - 1 - i];
            if c.input.record.op.has_files() {
                let mut input = c.input.clone();
                input.record.op = Op::State;
                Chosen::Tail(c.version, input)
            } else {
                Chosen::Gone
            }
        }
        Some(_) => Chosen::Base,
        None if base_record.is_some() => Chosen::Changed,
        None if on_disk.is_none() => Chosen::Gone,
        None => Chosen::Unrecorded,
    };
    Ok(Resolved { chosen, pending })
}

/// Computes the state at the current version of the local dataset at `root`.
pub fn load_state(root: &Path) -> Result<State> {
    super::local_only(root)?;
    load_state_in(ManifestIo::Local(root))
}

/// [`load_state`] for any dataset; remotely the base is fetched whole (compaction writes it
/// again whole anyway).
pub fn load_state_in(io: ManifestIo<'_>) -> Result<State> {
    let base_file = locate_base(io, None)?;
    let tables = read_tables_in(io, &base_file.name)?;
    check_base(&base_file, &tables.header)?;
    // The base was read: only the commits after it are probed.
    let version = current_version_after(io, base_file.version)?;
    let ops = tail_candidates(
        io,
        base_file.version,
        version,
        tables.header.dataset_id,
        &tables.pending,
    )?;
    let mut base: BTreeMap<u64, ChunkInput> = tables
        .chunks
        .into_iter()
        .map(|c| (c.record.number, c))
        .collect();
    let mut kept_base = Vec::new();
    let mut from_tail: Vec<(u64, ChunkState)> = Vec::new();
    let mut pending = Vec::new();
    let mut unrecorded = Vec::new();
    for (k, list) in ops {
        let base_record = base.remove(&k);
        let r = resolve(io, k, list, base_record.as_ref().map(|b| &b.record))?;
        if let Some(v) = r.pending {
            pending.push((k, v));
        }
        let kept = |input, changed| ChunkState {
            input,
            version: None,
            changed,
        };
        match (r.chosen, base_record) {
            (Chosen::Tail(v, input), _) => from_tail.push((
                v,
                ChunkState {
                    input,
                    version: Some(v),
                    changed: false,
                },
            )),
            (Chosen::Base, Some(b)) => kept_base.push(kept(b, false)),
            (Chosen::Changed, Some(b)) => kept_base.push(kept(b, true)),
            (Chosen::Unrecorded, _) => unrecorded.push(k),
            _ => {}
        }
    }
    // Chunks no operation names keep their base record, unchecked until read (rule M3).
    kept_base.extend(base.into_values().map(|input| ChunkState {
        input,
        version: None,
        changed: false,
    }));
    kept_base.sort_by_key(|c| c.input.record.number);
    from_tail.sort_by_key(|(v, c)| (*v, c.input.record.number));
    let mut chunks = kept_base;
    chunks.extend(from_tail.into_iter().map(|(_, c)| c));
    Ok(State {
        dataset_id: tables.header.dataset_id,
        version,
        base_version: base_file.version,
        base_is_snapshot: base_file.is_snapshot,
        chunks,
        pending,
        unrecorded,
        tail: version - base_file.version,
    })
}
