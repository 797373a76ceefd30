//! An index built in memory from `.gmeta` text, for chunks read without their `.gidx`
//! (legacy gulpio data, or an index that could not be trusted).

use crate::error::{At, Problem};
use crate::format::index::{FrameRec, Index, IndexBuilder};
use crate::format::{gmeta, Storage};

/// Builds an in-memory index from `.gmeta` text. Frame CRCs and sizes are unknown (zero).
pub fn legacy_index(text: &[u8]) -> Result<Index, Problem> {
    Ok(legacy_index_of(text)?.0)
}

/// Videos read through the `.gmeta` that say they are stored as segments, with the text of
/// their `segments` object.
pub type Unindexed = Vec<(usize, Vec<u8>)>;

/// [`legacy_index`], and the videos whose entries say they are stored as segments.
pub fn legacy_index_of(text: &[u8]) -> Result<(Index, Unindexed), Problem> {
    let entries = gmeta::parse(text)?;
    let segmented = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((i, e.segments.clone()?)))
        .collect();
    let mut builder = IndexBuilder::new();
    let mut frames = Vec::new();
    for e in &entries {
        frames.clear();
        for (k, &(loc, pad, length)) in e.frame_info.iter().enumerate() {
            let jpeg_len = u32::try_from(length - pad).map_err(|_| {
                Problem::at(At::frame(&e.id, k), format!("length {length} is too large"))
            })?;
            frames.push(FrameRec {
                offset: loc,
                jpeg_len,
                pad: pad as u8,
                ..Default::default()
            });
        }
        builder.push_video(&e.id, &e.meta_data, &frames)?;
    }
    // Legacy data carries no published length: records are bounded by u64 range here and by
    // the actual file length at read time, so a truncated `.gulp` loses only the frames it cut.
    let index = Index::parse(Storage::Owned(builder.encode(u64::MAX >> 16, 0, 0, 0)))?;
    index.verify_full()?;
    Ok((index, segmented))
}
