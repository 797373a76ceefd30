//! The log (docs/FORMAT.md §7.3, §7.6): commit *v* is `_gulpio/log/{v}.glog`, created only if
//! no file has its name, so concurrent writers get distinct, gap-free versions without a lock.

use std::path::Path;

use super::io::ManifestIo;
use super::{body_name, log_name, now_ms, random_id, MAX_COMMIT_LEN};
use crate::error::{Error, Result};
use crate::format::manifest::{
    build_table_file, decode_header, decode_hint, encode_header, header_crc, ChunkInput, Header,
    Kind, TableFile, TableMeta, VideoInput, HEADER_LEN, NONE, PAGE_SHIFT,
};

/// A commit, read whole and checked (rules M1 and M2 over every page).
#[derive(Debug, Clone)]
pub struct Commit {
    pub version: u64,
    /// Its own header (for a kind 3 commit, the header pointing at the body).
    pub header: Header,
    /// Its operations in chunk number order, each with its videos in index order.
    pub ops: Vec<ChunkInput>,
}

/// A table file read whole.
pub(super) struct Tables {
    pub header: Header,
    /// Records in chunk number order, each with its videos.
    pub chunks: Vec<ChunkInput>,
    /// Snapshots: (chunk, version) of the operations not yet in effect.
    pub pending: Vec<(u64, u64)>,
}

/// Every record of a table file with its videos, every page checked.
pub(super) fn read_tables(bytes: &[u8]) -> Result<Tables, String> {
    let file = TableFile::open(bytes)?;
    if bytes.len() as u64 != file.header().file_len {
        return Err(format!(
            "is {} bytes; its header says {}",
            bytes.len(),
            file.header().file_len
        ));
    }
    let n = file.video_count();
    // Walk the ids in slot order (each id page once) to place each id at its position.
    let mut ids: Vec<Option<String>> = vec![None; n as usize];
    for slot in 0..n {
        let (id, pos) = file.id_at_slot(slot as u32)?;
        let at = ids
            .get_mut(pos as usize)
            .ok_or_else(|| format!("slot {slot} names position {pos}, past the videos"))?;
        if at.replace(id).is_some() {
            return Err(format!("two ids name position {pos}"));
        }
    }
    let mut chunks = Vec::with_capacity(file.chunk_count() as usize);
    for record in file.chunks()? {
        let mut videos = Vec::with_capacity(record.video_count as usize);
        for pos in record.first..record.first + u64::from(record.video_count) {
            let row = file.row(pos)?;
            let (_, back) = file.id_at_slot(row.slot)?;
            if back != pos {
                return Err(format!(
                    "video row {pos} and id slot {} do not name each other",
                    row.slot
                ));
            }
            videos.push(VideoInput {
                id: ids[pos as usize]
                    .take()
                    .ok_or_else(|| format!("no id names position {pos}"))?,
                frame_count: row.frame_count,
                height: row.height,
                width: row.width,
                channels: row.channels,
                segments: row.segments,
            });
        }
        chunks.push(ChunkInput { record, videos });
    }
    Ok(Tables {
        header: file.header().clone(),
        chunks,
        pending: file.pending().to_vec(),
    })
}

/// Reads a table file (snapshot, full commit or body) whole.
pub(super) fn read_tables_in(io: ManifestIo<'_>, name: &str) -> Result<Tables> {
    let bytes = io
        .read(name)?
        .ok_or_else(|| Error::format(io.path(name), "is missing"))?;
    read_tables(&bytes).map_err(|m| Error::format(io.path(name), m))
}

/// Commit `v`, or None when no file has its name. A kind 3 commit is read with its body,
/// which must be the one its header names (`body_len`, `body_header_crc`, `dataset_id`).
pub fn read_commit(root: &Path, v: u64) -> Result<Option<Commit>> {
    read_commit_in(ManifestIo::Local(root), v)
}

pub fn read_commit_in(io: ManifestIo<'_>, v: u64) -> Result<Option<Commit>> {
    let name = log_name(v);
    let path = io.path(&name);
    let Some(bytes) = io.read(&name)? else {
        return Ok(None);
    };
    let header = decode_header(&bytes).map_err(|m| Error::format(&path, m))?;
    let bad = |m: String| Error::format(&path, m);
    if header.dataset_version != v {
        return Err(bad(format!(
            "holds version {}, not the {v} its name says",
            header.dataset_version
        )));
    }
    if !matches!(header.kind, Kind::Commit | Kind::CommitInBody) {
        return Err(bad(format!("a {:?} in the log", header.kind)));
    }
    if header.full != (v == 0) {
        return Err(bad(
            "only the genesis commit describes the whole dataset".into()
        ));
    }
    let ops = if header.kind == Kind::CommitInBody {
        let body_name = body_name(&header.body_id);
        let body_path = io.path(&body_name);
        let body = io
            .read(&body_name)?
            .ok_or_else(|| Error::format(&path, "the body it names is missing"))?;
        let Tables {
            header: bh,
            chunks: ops,
            ..
        } = read_tables(&body).map_err(|m| Error::format(&body_path, m))?;
        let crc = u32::from_le_bytes([body[252], body[253], body[254], body[255]]);
        if bh.kind != Kind::Body
            || bh.file_len != header.body_len
            || crc != header.body_header_crc
            || bh.dataset_id != header.dataset_id
            || bh.full != header.full
        {
            return Err(Error::format(
                &body_path,
                format!("is not the body commit {v} names"),
            ));
        }
        ops
    } else {
        if bytes.len() as u64 != header.file_len {
            return Err(bad(format!(
                "is {} bytes; its header says {}",
                bytes.len(),
                header.file_len
            )));
        }
        read_tables(&bytes).map_err(bad)?.chunks
    };
    Ok(Some(Commit {
        version: v,
        header,
        ops,
    }))
}

/// The header of commit `v`, or None when it does not exist.
fn commit_header(io: ManifestIo<'_>, v: u64) -> Result<Option<Header>> {
    let name = log_name(v);
    let Some(bytes) = io.read(&name)? else {
        return Ok(None);
    };
    decode_header(&bytes)
        .map(Some)
        .map_err(|m| Error::format(io.path(&name), m))
}

fn exists(io: ManifestIo<'_>, v: u64) -> Result<bool> {
    io.exists(&log_name(v))
}

/// The current version: the end of the unbroken run of commits from `from` (a version known
/// to exist; the genesis 0 always does). Probes `from+1`, `from+2`, `from+4`, ... until one is
/// missing, then bisects: versions have no gaps (§7.5 step 3).
pub fn current_version(root: &Path, from: u64) -> Result<u64> {
    current_version_in(ManifestIo::Local(root), from)
}

pub fn current_version_in(io: ManifestIo<'_>, from: u64) -> Result<u64> {
    let from = if from > 0 && exists(io, from)? {
        from
    } else {
        0
    };
    if from == 0 && !exists(io, 0)? {
        return Err(Error::format(
            io.path(&log_name(0)),
            "the manifest has no genesis commit",
        ));
    }
    current_version_after(io, from)
}

/// [`current_version_in`] from a version the caller knows exists (a reader's base): only the
/// probes after it.
pub(super) fn current_version_after(io: ManifestIo<'_>, from: u64) -> Result<u64> {
    let (mut found, mut step) = (from, 1u64);
    let missing = loop {
        let probe = from.saturating_add(step);
        if !exists(io, probe)? {
            break probe;
        }
        found = probe;
        step = step.saturating_mul(2);
    };
    let (mut lo, mut hi) = (found, missing);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists(io, mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The genesis commit's header: the dataset id every later file carries.
pub(super) fn genesis_header(io: ManifestIo<'_>) -> Result<Header> {
    commit_header(io, 0)?
        .ok_or_else(|| Error::format(io.path(&log_name(0)), "the manifest has no genesis commit"))
}

/// The version `LATEST` names, if it exists and is valid (a hint: anything else means 0).
pub(super) fn hinted_version(io: ManifestIo<'_>) -> Result<u64> {
    Ok(io
        .read(&format!("{}/LATEST", super::DIR))?
        .and_then(|b| decode_hint(&b).ok())
        .map_or(0, |h| h.version))
}

/// The bytes of commit `v`: one file, or (over [`MAX_COMMIT_LEN`]) a header pointing at a body
/// already created under a fresh name.
pub(super) fn commit_bytes(
    io: ManifestIo<'_>,
    meta: &TableMeta,
    ops: &[ChunkInput],
    body: &mut Option<(Header, [u8; 16])>,
) -> Result<Vec<u8>> {
    if let Some((bh, id)) = body {
        return Ok(pointer_header(meta, bh, id).to_vec());
    }
    let bytes = build_table_file(meta, ops).map_err(Error::InvalidArgument)?;
    if bytes.len() <= MAX_COMMIT_LEN {
        return Ok(bytes);
    }
    let mut body_meta = meta.clone();
    body_meta.kind = Kind::Body;
    body_meta.dataset_version = 0;
    body_meta.tail_videos = 0;
    let body_bytes = build_table_file(&body_meta, ops).map_err(Error::InvalidArgument)?;
    let id = random_id()?;
    if !io.create(&body_name(&id), &body_bytes)? {
        return Err(Error::Internal("a fresh body name was taken".into()));
    }
    let bh = decode_header(&body_bytes).map_err(Error::Internal)?;
    let out = pointer_header(meta, &bh, &id).to_vec();
    *body = Some((bh, id));
    Ok(out)
}

/// A kind 3 commit: the header alone, its counts copied from the body it names.
fn pointer_header(meta: &TableMeta, body: &Header, id: &[u8; 16]) -> [u8; HEADER_LEN] {
    let body_bytes_header = encode_header(body);
    let h = Header {
        kind: Kind::CommitInBody,
        full: meta.full,
        page_shift: meta.page_shift,
        dataset_version: meta.dataset_version,
        base_version: meta.base_version,
        dataset_id: meta.dataset_id,
        chunk_count: body.chunk_count,
        video_count: body.video_count,
        frame_count: body.frame_count,
        id_bytes: body.id_bytes,
        max_chunk: body.max_chunk,
        pending_count: 0,
        id_page_count: 0,
        front_len: HEADER_LEN as u64,
        chunk_table_off: 0,
        id_table_off: 0,
        id_table_len: 0,
        video_table_off: 0,
        file_len: HEADER_LEN as u64,
        front_crc: 0,
        created_ms: meta.created_ms,
        body_id: *id,
        body_len: body.file_len,
        body_header_crc: header_crc(&body_bytes_header),
        tail_videos: meta.tail_videos,
    };
    encode_header(&h)
}

/// Bound on lost races for one commit: each loss means another writer committed.
const MAX_COMMIT_TRIES: usize = 100_000;

/// Commits `ops` (records in increasing chunk number with their videos; op add, replace,
/// remove or abort) as the next version of the dataset at `root`, which must have a manifest.
/// Returns the version it took. Another writer taking the same version first only moves
/// this one to the next (§7.6).
pub fn commit_ops(root: &Path, ops: &[ChunkInput]) -> Result<u64> {
    super::local_only(root)?;
    commit_ops_in(ManifestIo::Local(root), ops).map(|c| c.version)
}

/// A commit as its writer made it: what the compaction policy (§7.6) goes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    pub version: u64,
    /// The base version `LATEST` named when the writer started.
    pub base: u64,
    /// `tail_videos` of the commit before this one, and of this one.
    pub videos_before: u64,
    pub videos_after: u64,
}

/// A writer whose commit brings the tail to a multiple of this many commits compacts.
pub const COMPACT_EVERY_COMMITS: u64 = 1 << 10;
/// ... or whose commit takes the tail's videos past a multiple of this many.
pub const COMPACT_EVERY_VIDEOS: u64 = 1 << 18;

impl Committed {
    /// Whether this commit's writer compacts (§7.6): exactly one commit reaches each
    /// multiple, so writers at work together do not all compact at once.
    pub fn compaction_due(&self) -> bool {
        let tail = self.version.saturating_sub(self.base);
        (tail > 0 && tail.is_multiple_of(COMPACT_EVERY_COMMITS))
            || self.videos_after / COMPACT_EVERY_VIDEOS > self.videos_before / COMPACT_EVERY_VIDEOS
    }
}

pub fn commit_ops_in(io: ManifestIo<'_>, ops: &[ChunkInput]) -> Result<Committed> {
    let genesis = genesis_header(io)?;
    let base = hinted_version(io)?;
    let mut from = base;
    let added: u64 = ops.iter().map(|c| c.videos.len() as u64).sum();
    let mut body = None;
    for _ in 0..MAX_COMMIT_TRIES {
        let c = current_version_in(io, from)?;
        let before = if c > base {
            commit_header(io, c)?.map_or(0, |h| h.tail_videos)
        } else {
            0
        };
        let meta = TableMeta {
            kind: Kind::Commit,
            full: false,
            page_shift: PAGE_SHIFT,
            dataset_version: c + 1,
            base_version: base,
            dataset_id: genesis.dataset_id,
            created_ms: now_ms(),
            tail_videos: before + added,
            pending: Vec::new(),
        };
        let bytes = commit_bytes(io, &meta, ops, &mut body)?;
        if io.create(&log_name(c + 1), &bytes)? {
            return Ok(Committed {
                version: c + 1,
                base,
                videos_before: before,
                videos_after: before + added,
            });
        }
        from = c + 1;
    }
    Err(Error::Internal(format!(
        "{}: no commit after {MAX_COMMIT_TRIES} lost races",
        io.path(super::DIR).display()
    )))
}

/// Commits an abort of the operation on chunk `number` that this writer committed and will
/// not carry out (§7.6).
pub fn abort_op(root: &Path, number: u64) -> Result<u64> {
    abort_op_in(ManifestIo::Local(root), number).map(|c| c.version)
}

pub fn abort_op_in(io: ManifestIo<'_>, number: u64) -> Result<Committed> {
    commit_ops_in(
        io,
        &[ChunkInput::without_files(
            number,
            crate::format::manifest::Op::Abort,
        )],
    )
}

/// Creates the genesis commit (version 0) holding `chunks` unless one exists. True when this
/// call created it.
pub(super) fn create_genesis(
    io: ManifestIo<'_>,
    dataset_id: [u8; 16],
    chunks: &[ChunkInput],
) -> Result<bool> {
    io.make_dirs()?;
    let meta = TableMeta {
        kind: Kind::Commit,
        full: true,
        page_shift: PAGE_SHIFT,
        dataset_version: 0,
        base_version: NONE,
        dataset_id,
        created_ms: now_ms(),
        tail_videos: 0,
        pending: Vec::new(),
    };
    let bytes = commit_bytes(io, &meta, chunks, &mut None)?;
    io.create(&log_name(0), &bytes)
}
