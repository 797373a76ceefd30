//! Reading frames of videos stored as segments (docs/FORMAT.md §6): the frames a batch asks
//! for are grouped by the segment that holds them; each segment is fetched once (as its
//! frame-table tiles, through the same planned, merged, CRC-checked reads as JPEG frames, so
//! object stores, read-ahead and retries work unchanged), checked against its own CRC and
//! decoded from its key frame up to the last frame wanted, on the pool, one segment per task.
//! Crops, resizes, flips and gray output are applied to the decoded pixels.

use std::collections::HashMap;

use rayon::prelude::*;

use super::plan::FrameJob;
use super::FrameDecoder;
use crate::chunk::reader::{read_many, ChunkReader};
use crate::error::{Error, Result, SegmentFailure};
use crate::format::segments::{SegmentRec, StreamRec};
use crate::pixels::{reframe_region, to_gray, touched, Colorspace};
use crate::pool::Runner;
use crate::video::yuv::Region;
use crate::video::{decode_segment, decode_segment_region, Codec, Integrity, SegmentShape};

/// The decoder of videos stored as segments: every video with a stream entry.
pub(super) struct Segments;

impl FrameDecoder for Segments {
    fn claims(&self, job: &FrameJob) -> bool {
        job.chunk.index().stream_of(job.video).is_some()
    }

    // `check` is not for segments: they are always CRC-checked (`decode_segment_jobs`).
    fn decode(
        &self,
        jobs: &[FrameJob],
        outs: Vec<&mut [u8]>,
        _check: bool,
        runner: &Runner,
    ) -> Result<()> {
        decode_segment_jobs(jobs, outs, runner)
    }

    fn decode_single(&self, job: &FrameJob, out: &mut [u8], _check: bool) -> Result<()> {
        decode_segment_jobs(std::slice::from_ref(job), vec![out], &Runner::Caller)
    }
}

/// The frames of one segment that a batch wants.
struct Group<'c> {
    chunk: &'c ChunkReader,
    video: usize,
    /// Position of the segment within its video.
    number: usize,
    stream: StreamRec,
    segment: SegmentRec,
    /// Indices into the batch's jobs.
    members: Vec<usize>,
}

/// Decodes `jobs` (all of videos stored as segments) into `outs`, in parallel on `runner`.
/// Segments are always CRC-checked, whatever the caller's `check`: the decoder must never see
/// damaged bytes (docs/DECISIONS.md, "Video segments"), and the check costs microseconds next
/// to the decode. The error returned is the first in job order.
fn decode_segment_jobs(jobs: &[FrameJob], outs: Vec<&mut [u8]>, runner: &Runner) -> Result<()> {
    let groups = group(jobs)?;
    let tiles = fetch(&groups)?;
    let mut slots: Vec<Vec<(usize, &mut [u8])>> = groups.iter().map(|_| Vec::new()).collect();
    let mut group_of = HashMap::with_capacity(jobs.len());
    for (g, group) in groups.iter().enumerate() {
        for &j in &group.members {
            group_of.insert(j, g);
        }
    }
    for (j, out) in outs.into_iter().enumerate() {
        let g = group_of
            .get(&j)
            .ok_or_else(|| Error::Internal("a frame without its segment".into()))?;
        slots[*g].push((j, out));
    }
    let work: Vec<_> = groups.iter().zip(tiles).zip(slots).collect();
    let results: Vec<Result<()>> = match runner {
        Runner::Caller => work
            .into_iter()
            .map(|((g, t), s)| decode_group(g, t, jobs, s))
            .collect(),
        Runner::Pool(pool) => pool.install(|| {
            work.into_par_iter()
                .with_min_len(1)
                .map(|((g, t), s)| decode_group(g, t, jobs, s))
                .collect()
        }),
    };
    // First failure in job order: groups are formed in order of their first job.
    results.into_iter().collect()
}

fn group<'c>(jobs: &[FrameJob<'c>]) -> Result<Vec<Group<'c>>> {
    let mut groups: Vec<Group> = Vec::new();
    let mut by_key: HashMap<(usize, usize, usize), usize> = HashMap::new();
    let mut streams: HashMap<(usize, usize), (StreamRec, Vec<SegmentRec>)> = HashMap::new();
    for (j, job) in jobs.iter().enumerate() {
        let chunk_key = job.chunk as *const ChunkReader as usize;
        let (stream, segments) = match streams.get(&(chunk_key, job.video)) {
            Some(s) => s,
            None => {
                let s = job.chunk.stream(job.video).ok_or_else(|| {
                    Error::Internal("a segment read of a video of JPEG frames".into())
                })?;
                streams.entry((chunk_key, job.video)).or_insert(s)
            }
        };
        // The last segment starting at or before the frame (segments tile the video).
        let number = segments
            .partition_point(|s| s.first_frame as usize <= job.frame)
            .checked_sub(1)
            .filter(|&k| segments[k].frames().contains(&job.frame))
            .ok_or_else(|| Error::Internal(format!("frame {} is in no segment", job.frame)))?;
        let key = (chunk_key, job.video, number);
        match by_key.get(&key) {
            Some(&g) => groups[g].members.push(j),
            None => {
                by_key.insert(key, groups.len());
                groups.push(Group {
                    chunk: job.chunk,
                    video: job.video,
                    number,
                    stream: *stream,
                    segment: segments[number],
                    members: vec![j],
                });
            }
        }
    }
    Ok(groups)
}

/// Each group's segment bytes: its tiles read with one `read_many` over all chunks (merged
/// ranges, concurrent requests for remote chunks, each tile's CRC checked), concatenated.
fn fetch(groups: &[Group]) -> Result<Vec<Result<Vec<u8>>>> {
    // Reads grouped by chunk, in first-appearance order; `at[c][i]` = (group, tile).
    let mut chunks: Vec<(&ChunkReader, Vec<(usize, usize)>)> = Vec::new();
    let mut at: Vec<Vec<(usize, usize)>> = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let c = match chunks
            .iter()
            .position(|(c, _)| std::ptr::eq(*c, group.chunk))
        {
            Some(c) => c,
            None => {
                chunks.push((group.chunk, Vec::new()));
                at.push(Vec::new());
                chunks.len() - 1
            }
        };
        for (t, frame) in group.segment.frames().enumerate() {
            chunks[c].1.push((group.video, frame));
            at[c].push((g, t));
        }
    }
    let mut tiles: Vec<Vec<Option<Result<bytes::Bytes>>>> = groups
        .iter()
        .map(|g| vec![None; g.segment.frame_count as usize])
        .collect();
    read_many(&chunks, true, |c, i, got| {
        let (g, t) = at[c][i];
        tiles[g][t] = Some(got.map(|b| b.into_bytes()));
    })?;
    Ok(tiles
        .into_iter()
        .zip(groups)
        .map(|(parts, group)| {
            let mut stream = Vec::with_capacity(group.segment.len as usize);
            for part in parts {
                match part {
                    Some(Ok(b)) => stream.extend_from_slice(&b),
                    Some(Err(e)) => {
                        let (chunk, seg) = (group.chunk, &group.segment);
                        return Err(chunk.segment_damage(group.video, group.number, seg, e));
                    }
                    None => return Err(Error::Internal("a segment tile was not read".into())),
                }
            }
            Ok(stream)
        })
        .collect())
}

fn decode_group(
    group: &Group,
    stream: Result<Vec<u8>>,
    jobs: &[FrameJob],
    mut slots: Vec<(usize, &mut [u8])>,
) -> Result<()> {
    let bytes = stream?;
    let seg = &group.segment;
    let codec = Codec::from_code(group.stream.codec)
        .ok_or_else(|| Error::Internal("an unknown codec passed the index checks".into()))?;
    let shape = SegmentShape {
        codec,
        width: group.stream.width as usize,
        height: group.stream.height as usize,
        frames: seg.frame_count as usize,
    };
    let first = seg.first_frame as usize;
    let local = |j: usize| jobs[j].frame - first;
    let plain = |j: usize| {
        let job = &jobs[j];
        job.reframe.is_none()
            && job.colorspace != Colorspace::Gray
            && job.shape == (shape.height, shape.width, 3)
    };
    let increasing = slots.windows(2).all(|w| local(w[0].0) < local(w[1].0));
    if increasing && slots.iter().all(|(j, _)| plain(*j)) {
        // The common case (whole frames, each once): decoded straight into the output.
        let wanted: Vec<usize> = slots.iter().map(|(j, _)| local(*j)).collect();
        let mut outs: Vec<&mut [u8]> = slots.iter_mut().map(|(_, o)| &mut **o).collect();
        return decode_segment(&shape, &bytes, Integrity::Crc(seg.crc), &wanted, &mut outs)
            .map_err(|e| failure(group, &bytes, e));
    }
    let mut wanted: Vec<usize> = slots.iter().map(|(j, _)| local(*j)).collect();
    wanted.sort_unstable();
    wanted.dedup();
    // Only the pixels the crops touch are converted from YUV (the union of them, when jobs
    // crop differently): the same pixels as converting whole frames and cropping those.
    let region = region_of(slots.iter().map(|(j, _)| &jobs[*j]), &shape);
    let mut decoded = Vec::with_capacity(wanted.len());
    for _ in &wanted {
        decoded.push(crate::buffers::zeroed(region.rgb_len(), || {
            format!(
                "a frame of video {:?} ({}x{})",
                group.chunk.id(group.video),
                region.width(),
                region.height()
            )
        })?);
    }
    {
        let mut outs: Vec<&mut [u8]> = decoded.iter_mut().map(Vec::as_mut_slice).collect();
        let integrity = Integrity::Crc(seg.crc);
        decode_segment_region(&shape, &bytes, integrity, &wanted, region, &mut outs)
            .map_err(|e| failure(group, &bytes, e))?;
    }
    let started = std::time::Instant::now();
    let whole = region == Region::whole(shape.width, shape.height);
    for (j, out) in slots {
        let job = &jobs[j];
        let pos = wanted
            .binary_search(&local(j))
            .map_err(|_| Error::Internal("a wanted frame was not decoded".into()))?;
        let rgb = &decoded[pos];
        let gray = job.shape.2 == 1;
        let refused = |m: String| {
            Error::invalid_for(
                &group.chunk.paths().data,
                crate::error::At::frame(group.chunk.id(group.video), job.frame),
                m,
            )
        };
        let reframe = |r, out: &mut [u8]| {
            let dims = (region.height(), region.width(), 3);
            let frame = (shape.height, shape.width);
            reframe_region(rgb, dims, (region.x0, region.y0), frame, r, out).map_err(refused)
        };
        match (&job.reframe, gray) {
            (None, _) if !whole => {
                return Err(Error::Internal(
                    "a whole frame was wanted from a partial conversion".into(),
                ))
            }
            (None, false) => out.copy_from_slice(rgb),
            (None, true) => to_gray(rgb, out),
            (Some(r), false) => reframe(r, out)?,
            (Some(r), true) => {
                let mut tmp = crate::buffers::zeroed(out.len() * 3, || "a reframed frame".into())?;
                reframe(r, &mut tmp)?;
                to_gray(&tmp, out);
            }
        }
    }
    crate::video::stages::add(crate::video::stages::Stage::Reframe, started);
    Ok(())
}

/// The part of each frame that `jobs` need converted to RGB: the union of the pixels their
/// crops touch, its left edge moved to an even column (chroma covers column pairs); the
/// whole frame when a job keeps it whole or its crop does not fit (the reframe then says
/// why, naming the frame).
fn region_of<'a>(jobs: impl Iterator<Item = &'a FrameJob<'a>>, shape: &SegmentShape) -> Region {
    let whole = Region::whole(shape.width, shape.height);
    let mut union: Option<[usize; 4]> = None;
    for job in jobs {
        let Some(r) = &job.reframe else {
            return whole;
        };
        let Ok([x0, y0, x1, y1]) = touched(r, shape.height, shape.width) else {
            return whole;
        };
        union = Some(match union {
            None => [x0, y0, x1, y1],
            Some(u) => [u[0].min(x0), u[1].min(y0), u[2].max(x1), u[3].max(y1)],
        });
    }
    match union {
        Some([x0, y0, x1, y1]) => Region {
            x0: x0 & !1,
            y0,
            x1,
            y1,
        },
        None => whole,
    }
}

/// A segment that failed: named by file, video, the frames it holds and its byte range.
fn failure(group: &Group, bytes: &[u8], e: SegmentFailure) -> Error {
    let seg = &group.segment;
    if e.corrupt {
        let actual = crc32fast::hash(bytes);
        return group
            .chunk
            .segment_crc_error(group.video, group.number, seg, actual);
    }
    let (path, id) = (
        group.chunk.paths().data.clone(),
        group.chunk.id(group.video).to_owned(),
    );
    let frames = seg.frames();
    Error::Decode {
        path,
        id,
        frame: frames.start + e.frame.unwrap_or(0),
        msg: format!(
            "segment {} (frames {}..{}, bytes {}..{}): {}",
            group.number,
            frames.start,
            frames.end,
            seg.offset,
            seg.end(),
            e.msg
        ),
    }
}
