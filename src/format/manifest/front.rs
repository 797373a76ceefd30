//! The front of a table file (docs/FORMAT.md §7.2): what a reader holds after open, checked
//! whole against `front_crc` and against the header's counts.

use super::super::bytes::{u32_at, u64_at};
use super::header::{Header, HEADER_LEN};

/// One entry of the id page index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdPage {
    /// From `id_table_off`.
    pub offset: u64,
    pub first_slot: u32,
    /// The page's first id is `key_heap[previous key_end..key_end]`.
    pub key_end: u32,
}

/// The parsed front: page directories, the first id of each id page, page CRCs, pending table.
#[derive(Debug, Clone)]
pub struct Front {
    /// Per chunk-table page: (first chunk number, first position).
    pub chunk_pages: Vec<(u64, u64)>,
    pub id_pages: Vec<IdPage>,
    pub key_heap: Vec<u8>,
    pub chunk_crcs: Vec<u32>,
    pub id_crcs: Vec<u32>,
    pub video_crcs: Vec<u32>,
    pub pending: Vec<(u64, u64)>,
}

fn align8(x: u64) -> u64 {
    x.div_ceil(8) * 8
}

impl Front {
    /// Parses `b`, the file's bytes `[0, front_len)` (header included), for header `h`.
    pub fn parse(h: &Header, b: &[u8]) -> Result<Front, String> {
        let bad = |what: String| Err(format!("manifest front: {what}"));
        if b.len() as u64 != h.front_len {
            return bad(format!(
                "{} bytes, the header says {}",
                b.len(),
                h.front_len
            ));
        }
        let crc = crc32fast::hash(&b[HEADER_LEN..]);
        if crc != h.front_crc {
            return bad(format!(
                "CRC mismatch: expected {:#010x}, found {crc:#010x}",
                h.front_crc
            ));
        }
        let chunk_pages = h.chunk_page_count();
        let id_pages = h.id_page_count;
        let video_pages = h.video_page_count();
        // Everything before the key heap has a length the header gives.
        let fixed = HEADER_LEN as u64 + 16 * chunk_pages + 16 * id_pages;
        if fixed > h.front_len {
            return bad("shorter than its page directories".into());
        }
        let mut at = HEADER_LEN;
        let mut dir = Vec::with_capacity(chunk_pages as usize);
        for _ in 0..chunk_pages {
            dir.push((u64_at(b, at), u64_at(b, at + 8)));
            at += 16;
        }
        let mut pages = Vec::with_capacity(id_pages as usize);
        for _ in 0..id_pages {
            pages.push(IdPage {
                offset: u64_at(b, at),
                first_slot: u32_at(b, at + 8),
                key_end: u32_at(b, at + 12),
            });
            at += 16;
        }
        let heap_len = pages.last().map_or(0, |p| u64::from(p.key_end));
        let crcs_at = align8(fixed + heap_len);
        let crcs_end = crcs_at + 4 * (chunk_pages + id_pages + video_pages);
        let expected = if h.pending_count > 0 {
            align8(crcs_end) + 16 * h.pending_count
        } else {
            crcs_end
        };
        if expected != h.front_len {
            return bad(format!(
                "{} bytes where its directories, keys, CRCs and pending table take {expected}",
                h.front_len
            ));
        }
        let key_heap = b[at..at + heap_len as usize].to_vec();
        if b[at + heap_len as usize..crcs_at as usize]
            .iter()
            .any(|&x| x != 0)
        {
            return bad("non-zero padding after the keys".into());
        }
        let crcs = |from: u64, n: u64| -> Vec<u32> {
            (0..n).map(|i| u32_at(b, (from + 4 * i) as usize)).collect()
        };
        let chunk_crcs = crcs(crcs_at, chunk_pages);
        let id_crcs = crcs(crcs_at + 4 * chunk_pages, id_pages);
        let video_crcs = crcs(crcs_at + 4 * (chunk_pages + id_pages), video_pages);
        let mut pending = Vec::with_capacity(h.pending_count as usize);
        if h.pending_count > 0 {
            let from = align8(crcs_end);
            if b[crcs_end as usize..from as usize].iter().any(|&x| x != 0) {
                return bad("non-zero padding before the pending table".into());
            }
            for i in 0..h.pending_count {
                let at = (from + 16 * i) as usize;
                pending.push((u64_at(b, at), u64_at(b, at + 8)));
            }
        }
        let front = Front {
            chunk_pages: dir,
            id_pages: pages,
            key_heap,
            chunk_crcs,
            id_crcs,
            video_crcs,
            pending,
        };
        front.check(h)?;
        Ok(front)
    }

    /// The directories agree with each other and with the header: numbers and positions in
    /// order, id pages in order and non-empty, keys sorted.
    fn check(&self, h: &Header) -> Result<(), String> {
        let bad = |what: &str| Err(format!("manifest front: {what}"));
        let per = h.chunks_per_page();
        for (i, w) in self.chunk_pages.windows(2).enumerate() {
            // A page of `per` records advances the number by at least `per`; positions by at
            // most `per` chunks of 2^24 videos, and never backwards.
            if w[1].0 < w[0].0.saturating_add(per) || w[1].1 < w[0].1 {
                return bad(&format!("chunk page {} out of order", i + 1));
            }
        }
        if let Some(first) = self.chunk_pages.first() {
            if first.1 != 0 {
                return bad("the first chunk does not start at position 0");
            }
        }
        if self.chunk_pages.last().is_some_and(|l| l.1 > h.video_count) {
            return bad("a chunk page starts past the last video");
        }
        let mut prev_end = 0u32;
        let mut prev_key: Option<&[u8]> = None;
        for (i, p) in self.id_pages.iter().enumerate() {
            let first_ok = if i == 0 {
                p.offset == 0 && p.first_slot == 0
            } else {
                let q = &self.id_pages[i - 1];
                p.offset > q.offset && p.first_slot > q.first_slot
            };
            if !first_ok
                || p.offset >= h.id_table_len
                || !p.offset.is_multiple_of(4)
                || u64::from(p.first_slot) >= h.video_count
                || p.key_end <= prev_end
            {
                return bad(&format!("id page {i} out of order"));
            }
            let key = &self.key_heap[prev_end as usize..p.key_end as usize];
            if prev_key.is_some_and(|k| k >= key) {
                return bad(&format!(
                    "the first id of page {i} is not after the previous"
                ));
            }
            prev_key = Some(key);
            prev_end = p.key_end;
        }
        if self.pending.windows(2).any(|w| w[0].0 >= w[1].0) {
            return bad("pending entries out of order");
        }
        Ok(())
    }

    /// Page `p`'s first id.
    pub fn key(&self, p: usize) -> &[u8] {
        let start = if p == 0 {
            0
        } else {
            self.id_pages[p - 1].key_end as usize
        };
        &self.key_heap[start..self.id_pages[p].key_end as usize]
    }

    /// The id page that would hold `id`, if any page can.
    pub fn id_page_for(&self, id: &[u8]) -> Option<usize> {
        // The last page whose first id is <= `id`.
        let n = self.id_pages.len();
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) <= id {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }

    /// The id page holding slot `slot`.
    pub fn id_page_of_slot(&self, slot: u32) -> Option<usize> {
        let p = self.id_pages.partition_point(|p| p.first_slot <= slot);
        p.checked_sub(1)
    }

    /// The chunk page holding position `pos`'s chunk, or chunk number `k`.
    pub fn chunk_page_of_position(&self, pos: u64) -> Option<usize> {
        self.chunk_pages
            .partition_point(|&(_, first)| first <= pos)
            .checked_sub(1)
    }
    pub fn chunk_page_of_number(&self, k: u64) -> Option<usize> {
        self.chunk_pages
            .partition_point(|&(number, _)| number <= k)
            .checked_sub(1)
    }
}
