//! The state at the current version without materialising it (docs/FORMAT.md §7.5): the base
//! is mapped and read a page at a time, so a process holds the base's front, one bit per page,
//! and the tail's chunks, whatever the number of videos. Positions follow §7.4 step 4: the
//! base's videos minus its chunks the tail replaced or removed, then the tail's chunks.
//! The reader `GulpDirectory` will open through (issue 36); `State` is its materialised twin
//! and the reference its tests compare with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::state::{check_base, locate_base, resolve, tail_candidates, Chosen};
use crate::error::{Error, Result};
use crate::format::manifest::{ChunkInput, ChunkRecord, TableFile, VideoRow};
use crate::format::Storage;

/// One video of the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoAt {
    pub id: String,
    /// Its chunk's number, and its place in the chunk's index order.
    pub chunk: u64,
    pub index: u32,
    pub frame_count: u32,
    /// `(height, width, channels)` of its first frame, zeros when unknown.
    pub shape: (u16, u16, u8),
    pub segments: bool,
}

pub struct View {
    base_path: PathBuf,
    base: TableFile<Storage>,
    pub version: u64,
    pub base_version: u64,
    /// Base position ranges `[first, end)` of base chunks not in the state, by `first`, and
    /// the videos excluded before each.
    excluded: Vec<(u64, u64)>,
    excluded_before: Vec<u64>,
    base_kept: u64,
    /// Base chunks no candidate of which took effect (rule M3 judges their reads).
    pub changed: Vec<u64>,
    /// The tail's chunks in position order, and the state position of each one's first video.
    tail: Vec<ChunkInput>,
    tail_first: Vec<u64>,
    tail_ids: HashMap<String, (u32, u32)>,
    pub pending: Vec<(u64, u64)>,
    pub unrecorded: Vec<u64>,
}

impl View {
    /// Opens the state of the local dataset at `root`: the base's header and front, the
    /// tail's commits, a `stat` of each chunk they name. Ids of the tail that the base's
    /// remaining videos also hold are a `DuplicateId`, as for a listing.
    pub fn open(root: &Path) -> Result<View> {
        super::local_only(root)?;
        let base_file = locate_base(root)?;
        let storage = crate::io::map_file(&base_file.path)?;
        let base = TableFile::open(storage).map_err(|m| Error::format(&base_file.path, m))?;
        check_base(&base_file, base.header())?;
        let bad = |m: String| Error::format(&base_file.path, m);
        let (version, ops) = tail_candidates(
            root,
            base_file.version,
            base.header().dataset_id,
            base.pending(),
        )?;
        let mut excluded = Vec::new();
        let mut changed = Vec::new();
        let mut from_tail: Vec<(u64, ChunkInput)> = Vec::new();
        let mut pending = Vec::new();
        let mut unrecorded = Vec::new();
        for (k, list) in ops {
            let record: Option<ChunkRecord> = base.chunk(k).map_err(bad)?;
            let r = resolve(root, k, list, record.as_ref())?;
            if let Some(v) = r.pending {
                pending.push((k, v));
            }
            let leaves_base = !matches!(r.chosen, Chosen::Base | Chosen::Changed);
            if let (true, Some(rec)) = (leaves_base, &record) {
                if rec.video_count > 0 {
                    excluded.push((rec.first, rec.first + u64::from(rec.video_count)));
                }
            }
            match r.chosen {
                Chosen::Tail(v, input) => from_tail.push((v, input)),
                Chosen::Changed => changed.push(k),
                Chosen::Unrecorded => unrecorded.push(k),
                Chosen::Base | Chosen::Gone => {}
            }
        }
        excluded.sort_unstable();
        let mut excluded_before = Vec::with_capacity(excluded.len());
        let mut total = 0;
        for &(first, end) in &excluded {
            excluded_before.push(total);
            total += end - first;
        }
        let base_kept = base.video_count() - total;
        from_tail.sort_by_key(|(v, c)| (*v, c.record.number));
        let mut view = View {
            base_path: base_file.path,
            base,
            version,
            base_version: base_file.version,
            excluded,
            excluded_before,
            base_kept,
            changed,
            tail: Vec::with_capacity(from_tail.len()),
            tail_first: Vec::with_capacity(from_tail.len()),
            tail_ids: HashMap::new(),
            pending,
            unrecorded,
        };
        let mut next = base_kept;
        for (_, input) in from_tail {
            let c = view.tail.len() as u32;
            for (i, v) in input.videos.iter().enumerate() {
                let clash = view.tail_ids.insert(v.id.clone(), (c, i as u32)).is_some()
                    || view.lookup_base(&v.id)?.is_some();
                if clash {
                    return Err(Error::format(
                        root.join(super::DIR),
                        format!(
                            "video id {:?} of chunk {} is also in another chunk of the state",
                            v.id, input.record.number
                        ),
                    ));
                }
            }
            view.tail_first.push(next);
            next += input.videos.len() as u64;
            view.tail.push(input);
        }
        Ok(view)
    }

    /// Videos in the state.
    pub fn len(&self) -> u64 {
        self.base_kept + self.tail.iter().map(|c| c.videos.len() as u64).sum::<u64>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn format(&self, m: String) -> Error {
        Error::format(&self.base_path, m)
    }

    /// The range of `excluded` holding base position `p`, or where it would go.
    fn excluded_at(&self, p: u64) -> std::result::Result<usize, usize> {
        match self.excluded.partition_point(|&(first, _)| first <= p) {
            0 => Err(0),
            n if p < self.excluded[n - 1].1 => Ok(n - 1),
            n => Err(n),
        }
    }

    /// The state position of an id of the base, if its chunk is still the base's.
    fn lookup_base(&self, id: &str) -> Result<Option<u64>> {
        let Some((_, p)) = self.base.find(id).map_err(|m| self.format(m))? else {
            return Ok(None);
        };
        Ok(match self.excluded_at(p) {
            Ok(_) => None,
            Err(n) => Some(
                p - n.checked_sub(1).map_or(0, |r| {
                    self.excluded_before[r] + self.excluded[r].1 - self.excluded[r].0
                }),
            ),
        })
    }

    /// The position of `id`, or None when the state does not hold it: one id page of the
    /// base, or the tail's table.
    pub fn lookup(&self, id: &str) -> Result<Option<u64>> {
        if let Some(&(c, i)) = self.tail_ids.get(id) {
            return Ok(Some(self.tail_first[c as usize] + u64::from(i)));
        }
        self.lookup_base(id)
    }

    /// The base position of the base's `p`-th kept video.
    fn base_position(&self, p: u64) -> u64 {
        // Ranges starting at or before the kept position (in the kept numbering) are skipped.
        let n = self
            .excluded
            .iter()
            .zip(&self.excluded_before)
            .take_while(|((first, _), before)| first - *before <= p)
            .count();
        match n {
            0 => p,
            n => {
                let r = n - 1;
                p + self.excluded_before[r] + self.excluded[r].1 - self.excluded[r].0
            }
        }
    }

    /// The video at `position`.
    pub fn video(&self, position: u64) -> Result<VideoAt> {
        if position >= self.len() {
            return Err(Error::InvalidArgument(format!(
                "video position {position} is past the {} videos",
                self.len()
            )));
        }
        if position >= self.base_kept {
            let c = self.tail_first.partition_point(|&f| f <= position) - 1;
            let input = &self.tail[c];
            let i = (position - self.tail_first[c]) as usize;
            let v = &input.videos[i];
            return Ok(VideoAt {
                id: v.id.clone(),
                chunk: input.record.number,
                index: i as u32,
                frame_count: v.frame_count,
                shape: (v.height, v.width, v.channels),
                segments: v.segments,
            });
        }
        let p = self.base_position(position);
        let row: VideoRow = self.base.row(p).map_err(|m| self.format(m))?;
        let id = self.base.id_at(p).map_err(|m| self.format(m))?;
        let rec = self.base.chunk_of(p).map_err(|m| self.format(m))?;
        Ok(VideoAt {
            id,
            chunk: rec.number,
            index: (p - rec.first) as u32,
            frame_count: row.frame_count,
            shape: (row.height, row.width, row.channels),
            segments: row.segments,
        })
    }
}
