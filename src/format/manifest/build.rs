//! Writes a table file (docs/FORMAT.md §7.2) from chunk records and their videos.

use super::header::{
    encode_header, Header, Kind, CHUNK_RECORD_LEN, HEADER_LEN, MAX_CHUNKS, MAX_CHUNK_VIDEOS,
    MAX_FRONT_LEN, MAX_VIDEOS, NONE, VIDEO_ROW_LEN,
};
use super::{ChunkRecord, Op};

/// A video of a chunk, in the chunk's index order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoInput {
    pub id: String,
    pub frame_count: u32,
    pub height: u16,
    pub width: u16,
    pub channels: u8,
    pub segments: bool,
}

/// A chunk and its videos. `record`'s `first`, `video_count` and `frame_count` are computed
/// from `videos` and the chunks before it; the rest is taken as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkInput {
    pub record: ChunkRecord,
    pub videos: Vec<VideoInput>,
}

/// The header fields a writer chooses; the rest follow from the tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMeta {
    /// Snapshot, commit or body (a kind 3 commit is a header written by the dataset layer).
    pub kind: Kind,
    pub full: bool,
    pub page_shift: u8,
    pub dataset_version: u64,
    pub base_version: u64,
    pub dataset_id: [u8; 16],
    pub created_ms: u64,
    pub tail_videos: u64,
    /// Snapshots: (chunk number, commit version) of the operations not yet in effect.
    pub pending: Vec<(u64, u64)>,
}

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn pad_to(out: &mut Vec<u8>, len: u64) {
    out.resize(len as usize, 0);
}

/// One id page's bytes (§7.2, "Id table") for the sorted `(id, position)` pairs given.
fn id_page(entries: &[(&str, u64)]) -> Vec<u8> {
    let heap_len: usize = entries.iter().map(|(id, _)| id.len()).sum();
    let mut p = Vec::with_capacity(8 + 8 * entries.len() + heap_len + 3);
    put_u32(&mut p, entries.len() as u32);
    put_u32(&mut p, heap_len as u32);
    let mut end = 0u32;
    for (id, _) in entries {
        end += id.len() as u32;
        put_u32(&mut p, end);
    }
    for (_, pos) in entries {
        put_u32(&mut p, *pos as u32);
    }
    for (id, _) in entries {
        p.extend_from_slice(id.as_bytes());
    }
    let padded = align(p.len() as u64, 4);
    pad_to(&mut p, padded);
    p
}

/// The bytes of a table file holding `chunks` (in increasing chunk number), or why it cannot
/// be written: a chunk out of order, an id twice, an op the kind does not allow, a limit.
pub fn build_table_file(meta: &TableMeta, chunks: &[ChunkInput]) -> Result<Vec<u8>, String> {
    if meta.kind == Kind::CommitInBody {
        return Err("a kind 3 commit is a header pointing at a body, not a table file".into());
    }
    if !(super::header::MIN_PAGE_SHIFT..=super::header::MAX_PAGE_SHIFT).contains(&meta.page_shift) {
        return Err(format!("page shift {} is out of range", meta.page_shift));
    }
    if !meta.pending.is_empty() && meta.kind != Kind::Snapshot {
        return Err("only snapshots have a pending table".into());
    }
    if meta.pending.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err("pending entries must be in strictly increasing chunk number".into());
    }
    let page = 1u64 << meta.page_shift;
    // The chunk table, and the rows and ids in position order.
    let mut records = Vec::with_capacity(chunks.len());
    let mut ids: Vec<(&str, u64)> = Vec::new();
    let mut rows: Vec<&VideoInput> = Vec::new();
    let (mut frames, mut id_bytes) = (0u64, 0u64);
    for (i, c) in chunks.iter().enumerate() {
        let r = &c.record;
        if i > 0 && chunks[i - 1].record.number >= r.number {
            return Err(format!(
                "chunk {} follows chunk {}: records must be in strictly increasing number",
                r.number,
                chunks[i - 1].record.number
            ));
        }
        let snapshot_like = meta.kind == Kind::Snapshot || meta.full;
        if snapshot_like != (r.op == Op::State) {
            return Err(format!(
                "chunk {}: op {:?} in a {:?} file{}",
                r.number,
                r.op,
                meta.kind,
                if meta.full {
                    " describing the whole dataset"
                } else {
                    ""
                }
            ));
        }
        if !r.op.has_files() && !c.videos.is_empty() {
            return Err(format!(
                "chunk {}: a {:?} record with videos",
                r.number, r.op
            ));
        }
        if c.videos.len() as u64 > MAX_CHUNK_VIDEOS {
            return Err(format!("chunk {}: more than 2^24 videos", r.number));
        }
        let chunk_frames: u64 = c.videos.iter().map(|v| u64::from(v.frame_count)).sum();
        let mut rec = r.clone();
        rec.first = rows.len() as u64;
        rec.video_count = c.videos.len() as u32;
        rec.frame_count = chunk_frames;
        if !rec.op.has_files() {
            rec = ChunkRecord::without_files(rec.number, rec.op, rec.first);
        }
        if rec.index_version > 3 {
            return Err(format!(
                "chunk {}: index version {}",
                r.number, rec.index_version
            ));
        }
        for v in &c.videos {
            if v.id.is_empty() || v.id.len() as u64 > page {
                return Err(format!(
                    "chunk {}: an id of {} bytes (1 to {page})",
                    r.number,
                    v.id.len()
                ));
            }
            ids.push((v.id.as_str(), rows.len() as u64));
            rows.push(v);
            id_bytes += v.id.len() as u64;
        }
        frames += chunk_frames;
        records.push(rec);
    }
    if records.len() as u64 > MAX_CHUNKS || rows.len() as u64 > MAX_VIDEOS {
        return Err("more chunks or videos than a manifest file may hold".into());
    }
    ids.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    if let Some(w) = ids.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("video id {:?} appears twice", w[0].0));
    }
    let mut slots = vec![0u32; rows.len()];
    for (slot, (_, pos)) in ids.iter().enumerate() {
        slots[*pos as usize] = slot as u32;
    }
    // Id pages: as many ids as fit in a page, at least one.
    let mut pages: Vec<(usize, Vec<u8>)> = Vec::new(); // (first slot, bytes)
    let mut start = 0;
    while start < ids.len() {
        let mut end = start;
        let mut len = 8u64;
        while end < ids.len() {
            let more = 8 + ids[end].0.len() as u64;
            if end > start && align(len + more, 4) > page {
                break;
            }
            len += more;
            end += 1;
        }
        pages.push((start, id_page(&ids[start..end])));
        start = end;
    }
    // The tables' bytes, then the front that indexes them.
    let mut chunk_table = Vec::with_capacity(records.len() * CHUNK_RECORD_LEN);
    for r in &records {
        put_u64(&mut chunk_table, r.number);
        put_u64(&mut chunk_table, r.first);
        put_u32(&mut chunk_table, r.video_count);
        chunk_table.extend_from_slice(&[r.op as u8, r.index_version, 0, 0]);
        put_u64(&mut chunk_table, r.gidx_len);
        put_u32(&mut chunk_table, r.gidx_header_crc);
        put_u32(&mut chunk_table, r.gmeta_crc);
        put_u64(&mut chunk_table, r.gmeta_len);
        put_u64(&mut chunk_table, r.gulp_len);
        put_u64(&mut chunk_table, r.frame_count);
    }
    let mut id_table = Vec::new();
    let mut id_index = Vec::with_capacity(pages.len() * 16);
    let mut key_heap = Vec::new();
    for (first_slot, bytes) in &pages {
        put_u64(&mut id_index, id_table.len() as u64);
        put_u32(&mut id_index, *first_slot as u32);
        key_heap.extend_from_slice(ids[*first_slot].0.as_bytes());
        put_u32(&mut id_index, key_heap.len() as u32);
        id_table.extend_from_slice(bytes);
    }
    let mut video_table = Vec::with_capacity(rows.len() * VIDEO_ROW_LEN);
    for (pos, v) in rows.iter().enumerate() {
        put_u32(&mut video_table, v.frame_count);
        video_table.extend_from_slice(&v.height.to_le_bytes());
        video_table.extend_from_slice(&v.width.to_le_bytes());
        video_table.extend_from_slice(&[v.channels, u8::from(v.segments), 0, 0]);
        put_u32(&mut video_table, slots[pos]);
    }
    let per_chunk_page = (page as usize) / CHUNK_RECORD_LEN;
    let per_row_page = (page as usize) / VIDEO_ROW_LEN;
    let mut front = Vec::new();
    for r in records.iter().step_by(per_chunk_page) {
        put_u64(&mut front, r.number);
        put_u64(&mut front, r.first);
    }
    front.extend_from_slice(&id_index);
    front.extend_from_slice(&key_heap);
    let padded = align(front.len() as u64, 8);
    pad_to(&mut front, padded);
    for p in chunk_table.chunks(per_chunk_page * CHUNK_RECORD_LEN) {
        put_u32(&mut front, crc32fast::hash(p));
    }
    for (_, bytes) in &pages {
        put_u32(&mut front, crc32fast::hash(bytes));
    }
    for p in video_table.chunks(per_row_page * VIDEO_ROW_LEN) {
        put_u32(&mut front, crc32fast::hash(p));
    }
    if !meta.pending.is_empty() {
        let padded = align(front.len() as u64, 8);
        pad_to(&mut front, padded);
        for (number, version) in &meta.pending {
            put_u64(&mut front, *number);
            put_u64(&mut front, *version);
        }
    }
    let front_len = HEADER_LEN as u64 + front.len() as u64;
    if front_len > MAX_FRONT_LEN {
        return Err(format!("a front of {front_len} bytes, over the limit"));
    }
    let a = meta.kind.section_align();
    let chunk_table_off = align(front_len, a);
    let id_table_off = align(chunk_table_off + chunk_table.len() as u64, a);
    let video_table_off = align(id_table_off + id_table.len() as u64, a);
    let file_len = video_table_off + video_table.len() as u64;
    let max_chunk = records
        .iter()
        .map(|r| r.number)
        .chain(meta.pending.iter().map(|p| p.0))
        .max()
        .unwrap_or(NONE);
    let header = Header {
        kind: meta.kind,
        full: meta.full,
        page_shift: meta.page_shift,
        dataset_version: meta.dataset_version,
        base_version: meta.base_version,
        dataset_id: meta.dataset_id,
        chunk_count: records.len() as u64,
        video_count: rows.len() as u64,
        frame_count: frames,
        id_bytes,
        max_chunk,
        pending_count: meta.pending.len() as u64,
        id_page_count: pages.len() as u64,
        front_len,
        chunk_table_off,
        id_table_off,
        id_table_len: id_table.len() as u64,
        video_table_off,
        file_len,
        front_crc: crc32fast::hash(&front),
        created_ms: meta.created_ms,
        body_id: [0; 16],
        body_len: 0,
        body_header_crc: 0,
        tail_videos: meta.tail_videos,
    };
    let mut out = Vec::with_capacity(file_len as usize);
    out.extend_from_slice(&encode_header(&header));
    out.extend_from_slice(&front);
    pad_to(&mut out, chunk_table_off);
    out.extend_from_slice(&chunk_table);
    pad_to(&mut out, id_table_off);
    out.extend_from_slice(&id_table);
    pad_to(&mut out, video_table_off);
    out.extend_from_slice(&video_table);
    Ok(out)
}
