//! Fetching frames: their byte ranges planned into few merged requests, fetched from any
//! source (concurrently for object stores, for one chunk or many), CRC-checked and handed
//! out, with one more fetch for bytes that may have been damaged in transit.

use std::ops::Range;

use bytes::Bytes;

use super::ChunkReader;
use crate::error::{Error, Result};
use crate::format::index::FrameRec;
use crate::io::{plan, DataSource};

/// The planned reads of some frames of one chunk ([`ChunkReader::plan_frames`]).
pub struct FramePlan {
    wanted: Vec<(usize, usize)>,
    /// The record of each wanted frame (None when it failed before any fetch).
    recs: Vec<Option<FrameRec>>,
    /// Failures known before fetching (frame out of range, beyond the end of the file).
    early: Vec<(usize, Error)>,
    /// Positions in `wanted` of the frames to fetch, and their byte ranges.
    fetch: Vec<usize>,
    ranges: Vec<Range<u64>>,
    planned: plan::Plan,
    /// For each request, the positions in `fetch` it serves.
    by_request: Vec<Vec<usize>>,
}

impl FramePlan {
    /// The merged requests.
    pub fn requests(&self) -> &[Range<u64>] {
        &self.planned.requests
    }
}

/// Reads frames of several chunks: `groups[g] = (chunk, wanted)` as in
/// [`ChunkReader::read_frames`], with `each(g, i, bytes)`. The requests of every remote chunk
/// are in flight together (a batch whose clips sit in 16 chunks costs one round trip, not 16).
pub fn read_many<'a>(
    groups: &[(&'a ChunkReader, Vec<(usize, usize)>)],
    check: bool,
    mut each: impl FnMut(usize, usize, Result<FrameData<'a>>),
) -> Result<()> {
    let mut plans: Vec<Option<FramePlan>> = Vec::with_capacity(groups.len());
    for (g, (chunk, wanted)) in groups.iter().enumerate() {
        if chunk.data.mapped().is_some() {
            for (i, &(video, k)) in wanted.iter().enumerate() {
                each(
                    g,
                    i,
                    chunk
                        .frame_bytes(video, k as i64, check)
                        .map(FrameData::Borrowed),
                );
            }
            plans.push(None);
            continue;
        }
        let mut fp = chunk.plan_frames(wanted);
        for (i, e) in std::mem::take(&mut fp.early) {
            each(g, i, Err(e));
        }
        plans.push(Some(fp));
    }
    let mut retries: Vec<Vec<usize>> = vec![Vec::new(); groups.len()];
    // Remote requests of all groups in one concurrent stream, per store.
    let mut remote: Vec<(usize, usize)> = Vec::new(); // (group, request)
    let mut store: Option<&std::sync::Arc<crate::io::RemoteStore>> = None;
    let mut items: Vec<(String, Range<u64>)> = Vec::new();
    for (g, fp) in plans.iter().enumerate() {
        let Some(fp) = fp else { continue };
        let chunk = groups[g].0;
        match &chunk.data {
            DataSource::Remote { store: s, name, .. }
                if store.is_none_or(|st| std::sync::Arc::ptr_eq(st, s)) =>
            {
                store = Some(s);
                for (r, range) in fp.requests().iter().enumerate() {
                    remote.push((g, r));
                    items.push((name.clone(), range.clone()));
                }
            }
            _ => {
                let mut sink = |i: usize, got| each(g, i, got);
                chunk
                    .data
                    .read_ranges(&chunk.paths.data, fp.requests(), |r, got| {
                        chunk.deliver(fp, r, &got, check, &mut retries[g], &mut sink)
                    })?;
            }
        }
    }
    if let Some(store) = store {
        store.read_named_ranges(&items, |n, got| {
            let (g, r) = remote[n];
            if let Some(fp) = &plans[g] {
                let mut sink = |i: usize, got| each(g, i, got);
                groups[g]
                    .0
                    .deliver(fp, r, &got, check, &mut retries[g], &mut sink);
            }
        })?;
    }
    for (g, fp) in plans.iter().enumerate() {
        if let Some(fp) = fp {
            let mut sink = |i: usize, got| each(g, i, got);
            groups[g].0.refetch(fp, &retries[g], &mut sink)?;
        }
    }
    Ok(())
}

/// One frame's JPEG bytes: a slice of a mapping, or bytes fetched for the caller.
pub enum FrameData<'a> {
    Borrowed(&'a [u8]),
    Owned(Bytes),
}

impl std::ops::Deref for FrameData<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FrameData::Borrowed(b) => b,
            FrameData::Owned(b) => b,
        }
    }
}

impl FrameData<'_> {
    /// Owned bytes (a copy only when borrowed).
    pub fn into_bytes(self) -> Bytes {
        match self {
            FrameData::Borrowed(b) => Bytes::copy_from_slice(b),
            FrameData::Owned(b) => b,
        }
    }
}

impl ChunkReader {
    /// Starts fetching frames `wanted[i] = (video, frame)` (frame indices may be negative) in
    /// the background when the chunk is in an object store, and returns at once: a later read
    /// of the same frames takes those bytes (CRC-checked as always) instead of waiting a
    /// round trip. Nothing to do for local chunks; frames that do not exist are left for the
    /// read to report.
    pub fn prefetch(&self, wanted: &[(usize, i64)]) -> Result<()> {
        let DataSource::Remote { store, name, .. } = &self.data else {
            return Ok(());
        };
        let resolved: Vec<(usize, usize)> = wanted
            .iter()
            .filter_map(|&(video, f)| Some((video, self.frame(video, f).ok()?.0)))
            .collect();
        let fp = self.plan_frames(&resolved);
        let items: Vec<(String, Range<u64>)> = fp
            .requests()
            .iter()
            .map(|r| (name.clone(), r.clone()))
            .collect();
        store.prefetch(&items)
    }

    /// Plans reading frames `wanted[i] = (video, frame)` (resolved, non-negative) of a chunk
    /// that is not mapped: their byte ranges merged into few requests (see [`plan`]).
    pub fn plan_frames(&self, wanted: &[(usize, usize)]) -> FramePlan {
        let mut fp = FramePlan {
            wanted: wanted.to_vec(),
            recs: Vec::with_capacity(wanted.len()),
            early: Vec::new(),
            fetch: Vec::with_capacity(wanted.len()),
            ranges: Vec::with_capacity(wanted.len()),
            planned: plan::Plan {
                requests: Vec::new(),
                slots: Vec::new(),
            },
            by_request: Vec::new(),
        };
        for (i, &(video, k)) in wanted.iter().enumerate() {
            let rec = self.frame(video, k as i64).and_then(|(_, rec)| {
                self.check_in_file(video, k, &rec, self.data.len())
                    .map(|_| rec)
            });
            match rec {
                Ok(rec) => {
                    fp.fetch.push(i);
                    fp.ranges.push(rec.offset..rec.jpeg_end());
                    fp.recs.push(Some(rec));
                }
                Err(e) => {
                    fp.early.push((i, e));
                    fp.recs.push(None);
                }
            }
        }
        fp.planned = plan::plan(&fp.ranges, plan::MAX_GAP, plan::MAX_REQUEST);
        fp.by_request = vec![Vec::new(); fp.planned.requests.len()];
        for (j, &(req, _)) in fp.planned.slots.iter().enumerate() {
            fp.by_request[req].push(j);
        }
        fp
    }

    /// Hands out the frames of request `req` of `fp` once its bytes (`got`) are in. Frames
    /// whose CRC fails after a fetch from an object store go to `retry` instead.
    fn deliver<'a>(
        &'a self,
        fp: &FramePlan,
        req: usize,
        got: &Result<Bytes>,
        check: bool,
        retry: &mut Vec<usize>,
        each: &mut dyn FnMut(usize, Result<FrameData<'a>>),
    ) {
        let remote = matches!(self.data, DataSource::Remote { .. });
        for &j in &fp.by_request[req] {
            let i = fp.fetch[j];
            let (video, k) = fp.wanted[i];
            let out = match got {
                Ok(bytes) => {
                    let off = fp.planned.slots[j].1;
                    let len = (fp.ranges[j].end - fp.ranges[j].start) as usize;
                    let frame = bytes.slice(off..off + len);
                    let crc = match (check, &fp.recs[i]) {
                        (true, Some(rec)) => self.check_crc(video, k, rec, &frame),
                        _ => Ok(()),
                    };
                    match crc {
                        Err(Error::Crc { .. }) if remote => {
                            retry.push(i);
                            continue;
                        }
                        Err(e) => Err(e),
                        Ok(()) => Ok(FrameData::Owned(frame)),
                    }
                }
                Err(e) => match self.cut_under_us(video, k, fp.recs[i].as_ref(), e) {
                    // Intact, but in a request that ran past the new end: read it alone.
                    None => {
                        retry.push(i);
                        continue;
                    }
                    Some(e) => Err(e),
                },
            };
            each(i, out);
        }
    }

    /// For a failed read of a local file read with positional reads, which can be cut after
    /// it was opened: a truncation error naming the frame when the frame now ends past the
    /// end of the file, None when the frame is still whole (to be read alone). Other sources
    /// and errors are returned as they came.
    fn cut_under_us(
        &self,
        video: usize,
        k: usize,
        rec: Option<&FrameRec>,
        e: &Error,
    ) -> Option<Error> {
        match (&self.data, rec, e) {
            (DataSource::Pread { .. }, Some(rec), Error::Format { .. }) => {
                let now = self.data.current_len();
                (rec.jpeg_end() > now).then(|| self.truncated(video, k, rec, now))
            }
            _ => Some(e.clone()),
        }
    }

    /// Fetches the frames in `retry` once more, one request each; a CRC failure now is
    /// damage (or a connection that corrupts every time), reported as such.
    fn refetch<'a>(
        &'a self,
        fp: &FramePlan,
        retry: &[usize],
        each: &mut dyn FnMut(usize, Result<FrameData<'a>>),
    ) -> Result<()> {
        if retry.is_empty() {
            return Ok(());
        }
        let again: Vec<Range<u64>> = retry
            .iter()
            .filter_map(|&i| fp.recs[i].as_ref())
            .map(|r| r.offset..r.jpeg_end())
            .collect();
        if let DataSource::Remote { store, name, .. } = &self.data {
            // Bytes that failed their CRC may have come from the local cache: ask the store.
            store.invalidate(name, &again);
        }
        self.data.read_ranges(&self.paths.data, &again, |j, got| {
            let i = retry[j];
            let (video, k) = fp.wanted[i];
            let got = got
                .map_err(|e| {
                    self.cut_under_us(video, k, fp.recs[i].as_ref(), &e)
                        .unwrap_or(e)
                })
                .and_then(|frame| match &fp.recs[i] {
                    Some(rec) => self
                        .check_crc(video, k, rec, &frame)
                        .map(|_| FrameData::Owned(frame)),
                    None => Err(Error::Internal(
                        "a frame without a record was fetched".into(),
                    )),
                });
            each(i, got);
        })
    }

    /// Reads frames `wanted[i] = (video, frame)` (frames already resolved, non-negative) from
    /// any source and calls `each(i, bytes)` on the calling thread as each frame's bytes are
    /// in (in any order), CRC-checked with `check`. Mapped chunks hand out slices; others
    /// fetch a planned set of merged ranges, concurrently for object stores. A frame whose
    /// CRC fails after a fetch from an object store is fetched once more before it is called
    /// corrupt: a byte flipped in transit is not damage to the dataset.
    pub fn read_frames<'a>(
        &'a self,
        wanted: &[(usize, usize)],
        check: bool,
        mut each: impl FnMut(usize, Result<FrameData<'a>>),
    ) -> Result<()> {
        read_many(&[(self, wanted.to_vec())], check, |_, i, got| each(i, got))
    }

    /// One frame's bytes from any source (`frame` may be negative, Python style).
    pub fn read_frame(&self, video: usize, frame: i64, check: bool) -> Result<FrameData<'_>> {
        let (k, _) = self.frame(video, frame)?;
        let mut out = None;
        self.read_frames(&[(video, k)], check, |_, got| out = Some(got))?;
        out.unwrap_or_else(|| Err(Error::Internal("frame read produced no result".into())))
    }
}
