//! Reading a table file a page at a time (docs/FORMAT.md §7.2): open reads the header and the
//! front; every other read is one page of one table, checked against its CRC the first time
//! it is read. A lookup by id reads one id page, by position one video page (and one id page
//! for the id), by chunk one chunk page.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

use super::super::bytes::{u16_at, u32_at, u64_at};
use super::front::Front;
use super::header::{decode_header, Header, Kind, CHUNK_RECORD_LEN, HEADER_LEN, VIDEO_ROW_LEN};
use super::{ChunkRecord, Op, VideoRow};

/// Where a table file's bytes come from: a mapped file (borrowed slices), or a cache that
/// fetches ranges. Errors are messages the caller names the file in.
pub trait Source {
    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, String>;
}

impl Source for [u8] {
    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, String> {
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.len() as u64)
            .ok_or_else(|| {
                format!(
                    "the file is {} bytes; bytes {offset}..{} were asked for",
                    self.len(),
                    offset.saturating_add(len)
                )
            })?;
        Ok(Cow::Borrowed(&self[offset as usize..end as usize]))
    }
}

impl<T: Source + ?Sized> Source for &T {
    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, String> {
        (**self).read(offset, len)
    }
}

impl Source for Vec<u8> {
    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, String> {
        self.as_slice().read(offset, len)
    }
}

impl Source for super::super::Storage {
    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, String> {
        (**self).read(offset, len)
    }
}

/// Which pages have passed their CRC check (one bit each), so that a warm lookup does not
/// hash a page again.
struct Verified(Vec<AtomicU64>);

impl Verified {
    fn new(pages: usize) -> Verified {
        Verified((0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect())
    }
    fn get(&self, p: usize) -> bool {
        self.0[p / 64].load(Ordering::Relaxed) & (1 << (p % 64)) != 0
    }
    fn set(&self, p: usize) {
        self.0[p / 64].fetch_or(1 << (p % 64), Ordering::Relaxed);
    }
}

#[derive(Clone, Copy)]
enum Table {
    Chunks,
    Ids,
    Videos,
}

/// An open table file.
pub struct TableFile<S: Source> {
    source: S,
    header: Header,
    front: Front,
    verified: [Verified; 3],
}

impl<S: Source> TableFile<S> {
    /// Reads and checks the header and the front (two reads of `source`, whatever its size).
    pub fn open(source: S) -> Result<TableFile<S>, String> {
        let header = decode_header(&source.read(0, HEADER_LEN as u64)?)?;
        if header.kind == Kind::CommitInBody {
            return Err("a kind 3 commit holds no tables; its body does".into());
        }
        let front = Front::parse(&header, &source.read(0, header.front_len)?)?;
        let verified = [
            Verified::new(front.chunk_crcs.len()),
            Verified::new(front.id_crcs.len()),
            Verified::new(front.video_crcs.len()),
        ];
        Ok(TableFile {
            source,
            header,
            front,
            verified,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }
    /// Where the file's bytes come from.
    pub fn source(&self) -> &S {
        &self.source
    }
    /// Snapshots: (chunk number, commit version) of the operations not yet in effect.
    pub fn pending(&self) -> &[(u64, u64)] {
        &self.front.pending
    }
    pub fn video_count(&self) -> u64 {
        self.header.video_count
    }
    pub fn chunk_count(&self) -> u64 {
        self.header.chunk_count
    }

    /// Page `p` of `table`, its CRC checked the first time it is read (then `true`: the
    /// caller checks its structure then too).
    fn page(&self, table: Table, p: usize) -> Result<(Cow<'_, [u8]>, bool), String> {
        let h = &self.header;
        // The fixed-size tables: page `p` of `count` entries of `entry` bytes from `table_off`.
        let fixed = |table_off: u64, count: u64, entry: usize| {
            let per = h.page_size() / entry as u64;
            let n = (count - p as u64 * per).min(per);
            (table_off + p as u64 * per * entry as u64, n * entry as u64)
        };
        let (off, len, crcs, name) = match table {
            Table::Chunks => {
                let (off, len) = fixed(h.chunk_table_off, h.chunk_count, CHUNK_RECORD_LEN);
                (off, len, &self.front.chunk_crcs, "chunk")
            }
            Table::Ids => {
                let start = self.front.id_pages[p].offset;
                let end = self
                    .front
                    .id_pages
                    .get(p + 1)
                    .map_or(h.id_table_len, |q| q.offset);
                (
                    h.id_table_off + start,
                    end - start,
                    &self.front.id_crcs,
                    "id",
                )
            }
            Table::Videos => {
                let (off, len) = fixed(h.video_table_off, h.video_count, VIDEO_ROW_LEN);
                (off, len, &self.front.video_crcs, "video")
            }
        };
        let bytes = self.source.read(off, len)?;
        if bytes.len() as u64 != len {
            return Err(format!(
                "{name} page {p}: {} bytes read, {len} expected",
                bytes.len()
            ));
        }
        let seen = &self.verified[table as usize];
        let first_time = !seen.get(p);
        if first_time {
            let crc = crc32fast::hash(&bytes);
            if crc != crcs[p] {
                return Err(format!(
                    "{name} page {p} (bytes {off}..{}): CRC mismatch: expected {:#010x}, found \
                     {crc:#010x}",
                    off + len,
                    crcs[p]
                ));
            }
        }
        Ok((bytes, first_time))
    }

    /// Marks page `p` of `table` as checked, CRC and structure.
    fn checked(&self, table: Table, p: usize) {
        self.verified[table as usize].set(p);
    }

    fn check_position(&self, position: u64) -> Result<(), String> {
        if position < self.header.video_count {
            Ok(())
        } else {
            Err(format!(
                "position {position} is past the {} videos",
                self.header.video_count
            ))
        }
    }

    /// The video at `position`.
    pub fn row(&self, position: u64) -> Result<VideoRow, String> {
        self.check_position(position)?;
        let per = self.header.rows_per_page();
        let p = (position / per) as usize;
        let (page, _) = self.page(Table::Videos, p)?;
        self.checked(Table::Videos, p);
        let at = (position % per) as usize * VIDEO_ROW_LEN;
        let b = &page[at..at + VIDEO_ROW_LEN];
        let flags = b[9];
        let slot = u32_at(b, 12);
        if flags & !1 != 0 || b[10] != 0 || b[11] != 0 || u64::from(slot) >= self.header.video_count
        {
            return Err(format!("video row {position} is malformed"));
        }
        Ok(VideoRow {
            frame_count: u32_at(b, 0),
            height: u16_at(b, 4),
            width: u16_at(b, 6),
            channels: b[8],
            segments: flags & 1 == 1,
            slot,
        })
    }

    /// The id page `p`: its ids' ends, positions and heap, checked.
    fn id_page(&self, p: usize) -> Result<IdPage<'_>, String> {
        let (bytes, first_time) = self.page(Table::Ids, p)?;
        let first = self.front.id_pages[p].first_slot;
        let next = self
            .front
            .id_pages
            .get(p + 1)
            .map_or(self.header.video_count, |q| u64::from(q.first_slot));
        let bad = |what: &str| Err(format!("id page {p}: {what}"));
        if bytes.len() < 8 {
            return bad("shorter than its counts");
        }
        let n = u32_at(&bytes, 0) as u64;
        let heap_len = u32_at(&bytes, 4) as u64;
        if n == 0 || n != next - u64::from(first) {
            return bad("its id count does not match the page index");
        }
        let len = 8 + 8 * n + heap_len;
        if len.div_ceil(4) * 4 != bytes.len() as u64
            || bytes[len as usize..].iter().any(|&x| x != 0)
        {
            return bad("its length does not match its counts");
        }
        let page = IdPage {
            bytes,
            n: n as usize,
            first_slot: first,
        };
        if !first_time {
            return Ok(page);
        }
        let mut prev = 0u32;
        for i in 0..page.n {
            let end = page.end(i);
            if end <= prev || u64::from(end) > heap_len {
                return bad("id ends out of order");
            }
            if u64::from(page.position(i)) >= self.header.video_count {
                return bad("an id's position is past the last video");
            }
            prev = end;
        }
        if u64::from(prev) != heap_len {
            return bad("the last id does not end the heap");
        }
        if page.id(0) != self.front.key(p) {
            return bad("its first id is not the one the page index names");
        }
        if (1..page.n).any(|i| page.id(i - 1) >= page.id(i)) {
            return bad("ids out of order");
        }
        self.checked(Table::Ids, p);
        Ok(page)
    }

    /// Where `id` is: (slot, position), or `None` if the file does not hold it.
    pub fn find(&self, id: &str) -> Result<Option<(u32, u64)>, String> {
        let Some(p) = self.front.id_page_for(id.as_bytes()) else {
            return Ok(None);
        };
        let page = self.id_page(p)?;
        let (mut lo, mut hi) = (0usize, page.n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match page.id(mid).cmp(id.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    return Ok(Some((
                        page.first_slot + mid as u32,
                        u64::from(page.position(mid)),
                    )))
                }
            }
        }
        Ok(None)
    }

    /// The id in sorted rank `slot`, and its position.
    pub fn id_at_slot(&self, slot: u32) -> Result<(String, u64), String> {
        if u64::from(slot) >= self.header.video_count {
            return Err(format!(
                "slot {slot} is past the {} ids",
                self.header.video_count
            ));
        }
        let p = self
            .front
            .id_page_of_slot(slot)
            .ok_or_else(|| format!("no id page holds slot {slot}"))?;
        let page = self.id_page(p)?;
        let i = (slot - page.first_slot) as usize;
        let id = std::str::from_utf8(page.id(i))
            .map_err(|_| format!("id page {p}: an id that is not UTF-8"))?;
        Ok((id.to_string(), u64::from(page.position(i))))
    }

    /// The id of the video at `position` (its row names the slot; the slot's page names the
    /// position back, which is checked).
    pub fn id_at(&self, position: u64) -> Result<String, String> {
        let row = self.row(position)?;
        let (id, back) = self.id_at_slot(row.slot)?;
        if back != position {
            return Err(format!(
                "video row {position} and id slot {} do not name each other",
                row.slot
            ));
        }
        Ok(id)
    }

    /// Chunk page `p`, its CRC and structure checked the first time it is read (§7.7 M2):
    /// numbers increasing from the directory's, videos tiling from its first position, ops this
    /// kind of file holds, reserved bytes zero.
    fn chunk_page(&self, p: usize) -> Result<Cow<'_, [u8]>, String> {
        let (bytes, first_time) = self.page(Table::Chunks, p)?;
        if !first_time {
            return Ok(bytes);
        }
        let (number0, first0) = self.front.chunk_pages[p];
        let mut prev: Option<u64> = None;
        let mut next_first = first0;
        for (i, b) in bytes.chunks_exact(CHUNK_RECORD_LEN).enumerate() {
            let bad = |what: &str| format!("chunk page {p} record {i}: {what}");
            let op = Op::from_u8(b[20]).ok_or_else(|| bad("unknown op"))?;
            let r = decode_record(b, op);
            if i == 0 && r.number != number0 {
                return Err(bad("its number is not the one the page directory names"));
            }
            if prev.is_some_and(|q| q >= r.number) {
                return Err(bad("numbers out of order"));
            }
            if r.first != next_first || r.first + u64::from(r.video_count) > self.header.video_count
            {
                return Err(bad("its videos do not follow the previous chunk's"));
            }
            if b[22] != 0 || b[23] != 0 || r.index_version > 3 {
                return Err(bad("reserved bytes or index version"));
            }
            let snapshot_like = self.header.kind == Kind::Snapshot || self.header.full;
            if snapshot_like != (op == Op::State) {
                return Err(bad("an op this kind of file does not hold"));
            }
            if !op.has_files() && b[16..20].iter().chain(&b[21..]).any(|&x| x != 0) {
                return Err(bad("a remove or abort record with fields set"));
            }
            next_first = r.first + u64::from(r.video_count);
            prev = Some(r.number);
        }
        // The last page ends the video table; a page before another ends where it begins.
        let expected_end = self
            .front
            .chunk_pages
            .get(p + 1)
            .map_or(self.header.video_count, |q| q.1);
        if next_first != expected_end {
            return Err(format!(
                "chunk page {p}: its videos end at {next_first}, the next page's start at \
                 {expected_end}"
            ));
        }
        self.checked(Table::Chunks, p);
        Ok(bytes)
    }

    /// Record `i` of a checked chunk page.
    fn record_in(page: &[u8], i: usize) -> ChunkRecord {
        let b = &page[i * CHUNK_RECORD_LEN..(i + 1) * CHUNK_RECORD_LEN];
        // The page's check accepted every op byte.
        decode_record(b, Op::from_u8(b[20]).unwrap_or(Op::State))
    }

    /// The chunk record at `index` in number order (its rank among the file's chunks).
    pub fn chunk_at(&self, index: u64) -> Result<ChunkRecord, String> {
        if index >= self.header.chunk_count {
            return Err(format!(
                "chunk {index} is past the {} chunks",
                self.header.chunk_count
            ));
        }
        let per = self.header.chunks_per_page();
        let page = self.chunk_page((index / per) as usize)?;
        Ok(Self::record_in(&page, (index % per) as usize))
    }

    /// The chunk holding the video at `position`: its index in number order and its record.
    pub fn chunk_of_indexed(&self, position: u64) -> Result<(u64, ChunkRecord), String> {
        self.check_position(position)?;
        let p = self
            .front
            .chunk_page_of_position(position)
            .ok_or_else(|| format!("no chunk page holds position {position}"))?;
        let page = self.chunk_page(p)?;
        let n = page.len() / CHUNK_RECORD_LEN;
        // Records tile the positions in order; chunks without videos hold none of them.
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if u64_at(&page, mid * CHUNK_RECORD_LEN + 8) <= position {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // Records without videos share `first` with the next one: the last record starting
        // at or before `position` holds it.
        let i = lo
            .checked_sub(1)
            .ok_or_else(|| format!("no chunk record holds position {position}"))?;
        let r = Self::record_in(&page, i);
        if !(r.first <= position && position < r.first + u64::from(r.video_count)) {
            return Err(format!("no chunk record holds position {position}"));
        }
        let per = self.header.chunks_per_page();
        Ok((p as u64 * per + i as u64, r))
    }

    /// The record of the chunk holding the video at `position`.
    pub fn chunk_of(&self, position: u64) -> Result<ChunkRecord, String> {
        self.chunk_of_indexed(position).map(|(_, r)| r)
    }

    /// The record of chunk number `k` and its index in number order, if the file has one.
    pub fn chunk_indexed(&self, k: u64) -> Result<Option<(u64, ChunkRecord)>, String> {
        let Some(p) = self.front.chunk_page_of_number(k) else {
            return Ok(None);
        };
        let page = self.chunk_page(p)?;
        let n = page.len() / CHUNK_RECORD_LEN;
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match u64_at(&page, mid * CHUNK_RECORD_LEN).cmp(&k) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let per = self.header.chunks_per_page();
                    return Ok(Some((
                        p as u64 * per + mid as u64,
                        Self::record_in(&page, mid),
                    )));
                }
            }
        }
        Ok(None)
    }

    /// The record of chunk number `k`, if the file has one.
    pub fn chunk(&self, k: u64) -> Result<Option<ChunkRecord>, String> {
        self.chunk_indexed(k).map(|f| f.map(|(_, r)| r))
    }

    /// Every chunk record, in number order (reads every chunk page).
    pub fn chunks(&self) -> Result<Vec<ChunkRecord>, String> {
        let mut out = Vec::with_capacity(self.header.chunk_count as usize);
        for p in 0..self.front.chunk_pages.len() {
            let page = self.chunk_page(p)?;
            out.extend((0..page.len() / CHUNK_RECORD_LEN).map(|i| Self::record_in(&page, i)));
        }
        Ok(out)
    }
}

/// A chunk record's fields (`op` decoded by the caller).
fn decode_record(b: &[u8], op: Op) -> ChunkRecord {
    ChunkRecord {
        number: u64_at(b, 0),
        first: u64_at(b, 8),
        video_count: u32_at(b, 16),
        op,
        index_version: b[21],
        gidx_len: u64_at(b, 24),
        gidx_header_crc: u32_at(b, 32),
        gmeta_crc: u32_at(b, 36),
        gmeta_len: u64_at(b, 40),
        gulp_len: u64_at(b, 48),
        frame_count: u64_at(b, 56),
    }
}

/// A checked id page's parts.
struct IdPage<'a> {
    bytes: Cow<'a, [u8]>,
    n: usize,
    first_slot: u32,
}

impl IdPage<'_> {
    fn end(&self, i: usize) -> u32 {
        u32_at(&self.bytes, 8 + 4 * i)
    }
    fn position(&self, i: usize) -> u32 {
        u32_at(&self.bytes, 8 + 4 * (self.n + i))
    }
    fn id(&self, i: usize) -> &[u8] {
        let heap = 8 + 8 * self.n;
        let start = if i == 0 { 0 } else { self.end(i - 1) as usize };
        &self.bytes[heap + start..heap + self.end(i) as usize]
    }
}
