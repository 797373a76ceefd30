//! Whether to believe a `.gmeta` whose bytes differ from the ones its intact index was
//! written with: the same content, written later by another tool, or damage.

use std::ops::Range;

use super::legacy::{legacy_index, legacy_index_of};
use crate::format::index::{FrameRec, Index};
use crate::format::paths::ChunkPaths;
use crate::format::segments;
use crate::io::{DataSource, Store};

/// What a `.gmeta` that does not match its index is ([`judge_meta`]).
#[derive(Debug, PartialEq, Eq)]
pub enum MetaVerdict {
    /// Other bytes, the same content (rewritten with other formatting): the index is current.
    Same,
    /// Written after the index by another tool (gulpio2 appending to the chunk, or rewriting
    /// it): the `.gmeta` describes the chunk, the index does not. Says how it was told.
    Newer(String),
    /// Contradicts the checksummed index on what the index describes: damage (or a hand
    /// edit), which a reader must not believe over the index. Says where.
    Damaged(String),
}

/// Judges a `.gmeta` whose bytes differ from the ones its (intact) index was written with,
/// `data_len` being the `.gulp`'s size now. Another tool may have appended to the chunk
/// (gulpio2's `'ab'` keeps every entry and adds frames, metadata elements and videos after
/// them) or rewritten it (a new `.gulp` shorter than the index says, every record of the
/// `.gmeta` inside it); anything else that contradicts the index is damage.
pub fn judge_meta(index: &Index, meta: &[u8], data_len: u64) -> MetaVerdict {
    let verdict = judge_meta_entries(index, meta, data_len);
    let MetaVerdict::Damaged(_) = verdict else {
        return verdict;
    };
    // A data file grown past what the index describes, with a `.gmeta` describing the new
    // bytes, was written after the index (another tool rewrote the chunk with other videos):
    // a flipped byte in a `.gmeta` does not change the data file's length.
    let gulp_len = index.header().gulp_len;
    let Ok(legacy) = legacy_index(meta) else {
        return verdict;
    };
    let ends = || (0..legacy.frame_count()).map(|j| legacy.frame(j).record_end());
    if data_len > gulp_len && ends().all(|e| e <= data_len) && ends().any(|e| e > gulp_len) {
        return MetaVerdict::Newer(format!(
            "the data file is {data_len} bytes where the index describes {gulp_len}, and the \
             .gmeta describes the new bytes: the chunk was rewritten by another tool"
        ));
    }
    verdict
}

/// [`judge_meta`] on the `.gmeta`'s entries against the index's.
fn judge_meta_entries(index: &Index, meta: &[u8], data_len: u64) -> MetaVerdict {
    let (legacy, segmented) = match legacy_index_of(meta) {
        Ok(l) => l,
        Err(m) => return MetaVerdict::Damaged(format!("it does not parse ({m})")),
    };
    let rewritten = data_len < index.header().gulp_len
        && (0..legacy.frame_count()).all(|j| legacy.frame(j).record_end() <= data_len);
    if rewritten {
        return MetaVerdict::Newer(format!(
            "the data file is {data_len} bytes, shorter than the {} the index describes, and \
             the .gmeta describes it: the chunk was rewritten by another tool",
            index.header().gulp_len
        ));
    }
    if legacy.video_count() < index.video_count() {
        return MetaVerdict::Damaged(format!(
            "it lists {} videos where the index has {}",
            legacy.video_count(),
            index.video_count()
        ));
    }
    for v in 0..index.video_count() {
        if legacy.id(v) != index.id(v) {
            return MetaVerdict::Damaged(format!(
                "its video {v} is {:?} where the index has {:?}",
                legacy.id(v),
                index.id(v)
            ));
        }
        let (ours, theirs) = (frame_infos(index, v), frame_infos(&legacy, v));
        if theirs.len() < ours.len() {
            return MetaVerdict::Damaged(format!(
                "video {:?} has {} frames where the index has {}",
                index.id(v),
                theirs.len(),
                ours.len()
            ));
        }
        if let Some(k) = (0..ours.len()).find(|&k| ours[k] != theirs[k]) {
            return MetaVerdict::Damaged(format!(
                "video {:?} frame {k} is at {:?} where the index has {:?} ([loc, pad, length])",
                index.id(v),
                theirs[k],
                ours[k]
            ));
        }
        if !extends_meta(index.meta(v), legacy.meta(v)) {
            return MetaVerdict::Damaged(format!(
                "the metadata of video {:?} differs from the index's",
                index.id(v)
            ));
        }
        // How the video is stored: another tool appending to the chunk keeps the object as
        // it is (gulpio2 rewrites the JSON it loaded), so any difference is damage.
        let theirs = segmented
            .binary_search_by_key(&v, |(i, _)| *i)
            .ok()
            .map(|at| segmented[at].1.as_slice());
        let ours = index.stream_and_segments(v);
        let ours = ours.as_ref().map(|(rec, segs)| (rec, segs.as_slice()));
        if let Some(how) = segments::meta_contradicts(ours, theirs) {
            return MetaVerdict::Damaged(format!("the entry of video {:?} {how}", index.id(v)));
        }
    }
    let same = legacy.video_count() == index.video_count()
        && (0..index.video_count()).all(|v| {
            legacy.video(v).frame_count == index.video(v).frame_count
                && legacy.meta(v) == index.meta(v)
        });
    if same {
        return MetaVerdict::Same;
    }
    MetaVerdict::Newer(
        "the .gmeta keeps everything the index describes and adds to it: another tool \
         appended to the chunk (gulpio2?); `gulpio index` brings the index up to date"
            .into(),
    )
}

/// True when a local chunk's `.gulp` was modified after its index was written. Our writers
/// write the index after the data, so this means another tool wrote the data later (gulpio2
/// re-gulping the chunk, possibly to the same bytes with other labels), whereas damage to the
/// `.gmeta` alone leaves the `.gulp` untouched. Unknown (object stores, missing times): false.
pub(super) fn data_written_after_index(store: &Store, paths: &ChunkPaths) -> bool {
    if store.is_remote() {
        return false;
    }
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(&paths.data), modified(&paths.index)) {
        (Some(data), Some(index)) => data > index,
        _ => false,
    }
}

/// Frames of an index checked against the data file when its `.gmeta` contradicts it.
const FRAMES_SAMPLED: usize = 16;

/// True when a sample of the index's frames (spread over the chunk, the last one included)
/// still has its recorded CRCs in the data file.
pub(super) fn frames_still_match(index: &Index, data: &DataSource, path: &std::path::Path) -> bool {
    let n = index.frame_count();
    if n == 0 {
        return true;
    }
    let picks = FRAMES_SAMPLED.min(n);
    let mut recs: Vec<FrameRec> = (0..picks).map(|i| index.frame(i * n / picks)).collect();
    recs.push(index.frame(n - 1));
    if recs.iter().any(|r| r.jpeg_end() > data.len()) {
        return false;
    }
    let ranges: Vec<Range<u64>> = recs.iter().map(|r| r.offset..r.jpeg_end()).collect();
    let mut all = true;
    let read = data.read_ranges(path, &ranges, |i, got| {
        all &= got.is_ok_and(|b| crc32fast::hash(&b) == recs[i].crc);
    });
    all && read.is_ok()
}

/// `[loc, pad, length]` of every frame of video `v`, as the `.gmeta` stores them.
fn frame_infos(index: &Index, v: usize) -> Vec<(u64, u64, u64)> {
    let rec = index.video(v);
    (0..rec.frame_count as usize)
        .map(|k| index.frame(rec.frame_start as usize + k).frame_info())
        .collect()
}

/// True when metadata list `newer` (JSON text `[a, b, ...]`) is `older` with zero or more
/// elements appended, as gulpio2 does when appending to a video.
pub(super) fn extends_meta(older: &[u8], newer: &[u8]) -> bool {
    if older == newer {
        return true;
    }
    let Some(head) = older.strip_suffix(b"]") else {
        return false;
    };
    let Some(rest) = newer.strip_prefix(head) else {
        return false;
    };
    // `[a]` -> `[a, b]`; an empty list `[]` -> `[b]`.
    head == b"[" || rest.starts_with(b",")
}
