//! Decoding many frames at once: plan every frame's output shape from the index (or the JPEG
//! header for legacy chunks), then verify CRCs and decode in parallel on the private pool,
//! each frame straight into its slice of a caller-provided buffer (a numpy array in Python).

use rayon::prelude::*;

use crate::chunk::reader::{read_many, ChunkReader, FrameData};
use crate::error::{At, Error, Result};
use crate::jpeg::header::read_info;
use crate::jpeg::{
    check_frame_size, decode_into_with, decode_reframed_with, output_shape, Colorspace,
    DecodeFailure, Precision, Reframe,
};
use crate::pool::Runner;
use crate::segment_read::{decode_segment_jobs, is_segment_job};

/// The most bytes one read may decode into (`read`, `read_batch`, `gd[id]`, `Chunk.decode`):
/// 32 GiB, above any batch a training loop decodes (256 clips of 64 frames at 224x224 are
/// 2.5 GB; 300 frames of 4K video 7.5 GB), so that a mistaken request (a `size=` meant for
/// one frame given to a batch of thousands, a frame list built wrong) is a `ValueError` with
/// the numbers instead of an allocation the machine cannot make. Below it, an allocation
/// that fails is a `MemoryError` (nothing here allocates infallibly what input sized).
pub const MAX_READ_BYTES: u64 = 32 << 30;

/// What to do when a read is too large, appended to the messages.
pub const ASK_LESS: &str = "ask for fewer videos or frames per call, or a smaller size=";

/// The bytes of a decoded output of shape `dims` (`[videos,] frames, height, width,
/// channels`), checked against [`MAX_READ_BYTES`]: over it (or past `u64`), an error with
/// the numbers.
pub fn output_bytes(dims: &[usize]) -> Result<usize> {
    let total = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
    let shape = dims
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(" x ");
    read_bytes(total, &format!("an array of {shape}"))
}

/// `total` bytes of decoded output (None: past `u64`), described by `what`, checked against
/// [`MAX_READ_BYTES`].
pub fn read_bytes(total: Option<u64>, what: &str) -> Result<usize> {
    match total {
        Some(n) if n <= MAX_READ_BYTES => usize::try_from(n).map_err(|_| out_of_memory(n, what)),
        _ => Err(Error::InvalidArgument(format!(
            "the frames asked for need {} bytes ({what}), over the limit of {MAX_READ_BYTES} \
             bytes per read: {ASK_LESS}",
            total.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string())
        ))),
    }
}

/// The error for decoded output of `bytes` that could not be allocated.
fn out_of_memory(bytes: u64, what: &str) -> Error {
    Error::OutOfMemory {
        bytes,
        what: format!("the decoded frames ({what}): {ASK_LESS}"),
    }
}

/// One frame to decode.
#[derive(Clone, Copy)]
pub struct FrameJob<'a> {
    pub chunk: &'a ChunkReader,
    pub video: usize,
    pub frame: usize,
    /// Output `(height, width, channels)`.
    pub shape: (usize, usize, usize),
    pub colorspace: Colorspace,
    /// Crop, resize and flip fused into the decode (`shape` is then the output's).
    pub reframe: Option<Reframe>,
    /// `(width, height, components)` as the checksummed index records them (None for legacy
    /// chunks): the frame's own header must agree before it is decoded, since the output was
    /// shaped after the index.
    pub recorded: Option<(u16, u16, u8)>,
    pub precision: Precision,
}

impl FrameJob<'_> {
    pub fn len(&self) -> usize {
        self.shape.0 * self.shape.1 * self.shape.2
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Resolves frame indices (negative counts from the end) and works out each frame's output
/// shape. With `Colorspace::Auto` a frame keeps its own channel count (1 for gray JPEGs, else
/// 3); `uniform_channels` instead picks one count for the whole video (3 if any frame is in
/// colour), as a stacked array needs. With `reframe`, the output is the crop resized (a crop
/// that does not fit a frame is an `InvalidArgument` naming the video and frame).
pub fn plan<'a>(
    chunk: &'a ChunkReader,
    video: usize,
    frames: &[i64],
    colorspace: Colorspace,
    uniform_channels: bool,
    reframe: Option<&Reframe>,
) -> Result<Vec<FrameJob<'a>>> {
    let mut jobs: Vec<FrameJob> = Vec::new();
    // The output so far: a request over the limit stops here, before a job is planned for
    // each of (say) ten million frames.
    let mut total = 0u64;
    chunk.check_readable(video)?;
    for &f in frames {
        let (k, rec) = chunk.frame(video, f)?;
        let recorded = (rec.width > 0 && rec.height > 0 && rec.channels > 0).then_some((
            rec.width,
            rec.height,
            rec.channels,
        ));
        let (h, w, comps) = if recorded.is_some() {
            (rec.height as usize, rec.width as usize, rec.channels)
        } else {
            // Legacy chunk: read the size from the JPEG header (the CRC, if any, is checked
            // when the frame is decoded).
            let bytes = chunk.read_frame(video, f, false)?;
            let (h, w, _, info) =
                output_shape(&bytes, Colorspace::Auto).map_err(|e| context(chunk, video, k, e))?;
            (h, w, info.components)
        };
        // The index's sizes are checked like a header's before any output is allocated.
        check_frame_size(w, h)
            .map_err(|msg| context(chunk, video, k, DecodeFailure::Corrupt(msg)))?;
        let c = match colorspace {
            Colorspace::Gray => 1,
            Colorspace::Rgb => 3,
            Colorspace::Auto if comps == 1 => 1,
            Colorspace::Auto => 3,
        };
        let (h, w) = match reframe {
            None => (h, w),
            Some(r) => r.output(h, w).map_err(|msg| {
                Error::invalid_for(&chunk.paths().data, At::frame(chunk.id(video), k), msg)
            })?,
        };
        // (A stacked gray frame may become RGB below: the total is a lower bound.)
        total = total.saturating_add((h as u64) * (w as u64) * c as u64);
        if total > MAX_READ_BYTES {
            return Err(Error::InvalidArgument(format!(
                "the frames asked for need at least {total} bytes ({} frames of video {:?} of \
                 {}, frame {k} alone {w}x{h}x{c}), over the limit of {MAX_READ_BYTES} \
                 bytes per read: {ASK_LESS}",
                frames.len(),
                chunk.id(video),
                chunk.paths().data.display()
            )));
        }
        jobs.try_reserve(1).map_err(|_| Error::OutOfMemory {
            bytes: (jobs.len() as u64 + 1) * std::mem::size_of::<FrameJob>() as u64,
            what: format!("planning a read of {} frames: {ASK_LESS}", frames.len()),
        })?;
        jobs.push(FrameJob {
            chunk,
            video,
            frame: k,
            shape: (h, w, c),
            colorspace,
            reframe: reframe.copied(),
            recorded,
            precision: Precision::Accurate,
        });
    }
    if uniform_channels && colorspace == Colorspace::Auto {
        let c = if jobs.iter().any(|j| j.shape.2 == 3) {
            3
        } else {
            1
        };
        for j in &mut jobs {
            j.shape.2 = c;
            j.colorspace = if c == 3 {
                Colorspace::Rgb
            } else {
                Colorspace::Gray
            };
        }
    }
    Ok(jobs)
}

/// True if every job has the same output shape.
pub fn uniform(jobs: &[FrameJob]) -> Option<(usize, usize, usize)> {
    let first = jobs.first()?.shape;
    jobs.iter().all(|j| j.shape == first).then_some(first)
}

/// Verifies (with `check`) and decodes every job into its output slice, in parallel on
/// `runner`. `outs[i]` must be exactly `jobs[i].len()` bytes. On failure, the error of the
/// first failing job in job order is returned, so errors are deterministic.
pub fn decode(jobs: &[FrameJob], outs: Vec<&mut [u8]>, check: bool, runner: &Runner) -> Result<()> {
    if jobs.len() != outs.len() {
        return Err(Error::Internal(
            "one output buffer per frame is needed".into(),
        ));
    }
    if jobs.iter().any(is_segment_job) {
        return decode_mixed(jobs, outs, check, runner);
    }
    if jobs.iter().any(|j| j.chunk.mapped().is_none()) {
        return decode_fetched(jobs, outs, check, runner);
    }
    match runner {
        Runner::Caller => jobs
            .iter()
            .zip(outs)
            .try_for_each(|(job, out)| decode_one(job, out, check)),
        Runner::Pool(pool) => {
            let results: Vec<Result<()>> = pool.install(|| {
                jobs.par_iter()
                    .zip(outs.into_par_iter())
                    .with_min_len(1)
                    .map(|(job, out)| decode_one(job, out, check))
                    .collect()
            });
            results.into_iter().collect()
        }
    }
}

/// [`decode`] for batches with frames of videos stored as segments: those are decoded a
/// segment at a time (`segment_read`), the others as JPEG frames. With failures on both
/// sides, the one of the earlier job is returned.
fn decode_mixed(
    jobs: &[FrameJob],
    outs: Vec<&mut [u8]>,
    check: bool,
    runner: &Runner,
) -> Result<()> {
    let (mut seg_jobs, mut seg_outs, mut seg_at) = (Vec::new(), Vec::new(), Vec::new());
    let (mut jpeg_jobs, mut jpeg_outs, mut jpeg_at) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (job, out)) in jobs.iter().zip(outs).enumerate() {
        if is_segment_job(job) {
            seg_jobs.push(*job);
            seg_outs.push(out);
            seg_at.push(i);
        } else {
            jpeg_jobs.push(*job);
            jpeg_outs.push(out);
            jpeg_at.push(i);
        }
    }
    let segments = decode_segment_jobs(&seg_jobs, seg_outs, runner);
    let jpeg = if jpeg_jobs.is_empty() {
        Ok(())
    } else {
        decode(&jpeg_jobs, jpeg_outs, check, runner)
    };
    match (segments, jpeg) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        // Which failed first in job order is not tracked per job; the earlier first job of
        // the two sides is the best deterministic choice.
        (Err(a), Err(b)) => Err(if seg_at.first() < jpeg_at.first() {
            a
        } else {
            b
        }),
    }
}

/// [`decode`] for batches with chunks that are not mapped (positional reads, object stores):
/// each chunk's frames are read with one planned set of range requests, and every frame is
/// decoded on the pool as soon as its bytes are in, while later requests are still in flight.
fn decode_fetched(
    jobs: &[FrameJob],
    outs: Vec<&mut [u8]>,
    check: bool,
    runner: &Runner,
) -> Result<()> {
    let mut outs: Vec<Option<&mut [u8]>> = outs.into_iter().map(Some).collect();
    let results: Vec<std::sync::OnceLock<Result<()>>> =
        jobs.iter().map(|_| std::sync::OnceLock::new()).collect();
    // Jobs grouped by chunk, in first-appearance order.
    let mut groups: Vec<(&ChunkReader, Vec<usize>)> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        match groups.iter_mut().find(|(c, _)| std::ptr::eq(*c, job.chunk)) {
            Some((_, members)) => members.push(i),
            None => groups.push((job.chunk, vec![i])),
        }
    }
    match runner {
        Runner::Caller => read_groups(
            &groups,
            jobs,
            &mut outs,
            &results,
            check,
            &mut |i, out, bytes| {
                let _ = results[i].set(decode_bytes(&jobs[i], &bytes, out));
            },
        )?,
        Runner::Pool(pool) => {
            let results = &results;
            pool.in_place_scope(|s| {
                read_groups(
                    &groups,
                    jobs,
                    &mut outs,
                    results,
                    check,
                    &mut |i, out, bytes| {
                        let bytes = bytes.into_bytes();
                        s.spawn(move |_| {
                            let _ = results[i].set(decode_bytes(&jobs[i], &bytes, out));
                        });
                    },
                )
            })?
        }
    }
    for r in results {
        match r.into_inner() {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(e),
            None => {
                return Err(Error::Internal(
                    "a frame was neither read nor failed".into(),
                ))
            }
        }
    }
    Ok(())
}

/// Reads the frames of each chunk group and hands every frame's bytes, with its output slot,
/// to `spawn`; read failures are recorded in `results`.
fn read_groups<'o, 'c>(
    groups: &[(&'c ChunkReader, Vec<usize>)],
    jobs: &[FrameJob],
    outs: &mut [Option<&'o mut [u8]>],
    results: &[std::sync::OnceLock<Result<()>>],
    check: bool,
    spawn: &mut dyn FnMut(usize, &'o mut [u8], FrameData<'c>),
) -> Result<()> {
    let wanted: Vec<(&'c ChunkReader, Vec<(usize, usize)>)> = groups
        .iter()
        .map(|(chunk, members)| {
            let w = members
                .iter()
                .map(|&i| (jobs[i].video, jobs[i].frame))
                .collect();
            (*chunk, w)
        })
        .collect();
    read_many(&wanted, check, |g, m, got| {
        let i = groups[g].1[m];
        match (got, outs[i].take()) {
            (Ok(bytes), Some(out)) => spawn(i, out, bytes),
            (Err(e), _) => {
                let _ = results[i].set(Err(e));
            }
            (Ok(_), None) => {
                let _ =
                    results[i].set(Err(Error::Internal("a frame's bytes arrived twice".into())));
            }
        }
    })?;
    Ok(())
}

/// Decodes a single frame into a new buffer: `(pixels, height, width, channels)`.
pub fn decode_frame(
    chunk: &ChunkReader,
    video: usize,
    frame: i64,
    check: bool,
    colorspace: Colorspace,
) -> Result<(Vec<u8>, usize, usize, usize)> {
    let jobs = plan(chunk, video, &[frame], colorspace, false, None)?;
    let job = jobs
        .first()
        .ok_or_else(|| Error::Internal("a frame was planned to nothing".into()))?;
    let mut out = crate::buffers::zeroed(job.len(), || {
        format!("frame {frame} of video {:?}", chunk.id(video))
    })?;
    if is_segment_job(job) {
        decode_segment_jobs(std::slice::from_ref(job), vec![&mut out], &Runner::Caller)?;
        return Ok((out, job.shape.0, job.shape.1, job.shape.2));
    }
    let bytes = chunk.read_frame(video, job.frame as i64, check)?;
    decode_bytes(job, &bytes, &mut out)?;
    Ok((out, job.shape.0, job.shape.1, job.shape.2))
}

fn decode_one(job: &FrameJob, out: &mut [u8], check: bool) -> Result<()> {
    let bytes = job.chunk.frame_bytes(job.video, job.frame as i64, check)?;
    decode_bytes(job, bytes, out)
}

/// Decodes a frame's (already verified) bytes into `out`.
fn decode_bytes(job: &FrameJob, bytes: &[u8], out: &mut [u8]) -> Result<()> {
    if out.len() != job.len() {
        return Err(Error::Internal(format!(
            "output buffer of {} bytes for a frame of {} bytes",
            out.len(),
            job.len()
        )));
    }
    if let Some((w, h, c)) = job.recorded {
        let info = read_info(bytes)
            .map_err(|m| context(job.chunk, job.video, job.frame, DecodeFailure::Corrupt(m)))?;
        if (info.width, info.height, info.components) != (w, h, c) {
            let msg = format!(
                "the JPEG header declares {}x{} with {} component(s), the checksummed index \
                 {w}x{h} with {c}: the index does not describe this frame (written by a faulty \
                 tool, or forged)",
                info.width, info.height, info.components
            );
            return Err(context(
                job.chunk,
                job.video,
                job.frame,
                DecodeFailure::Corrupt(msg),
            ));
        }
    }
    let want = match (job.colorspace, job.shape.2) {
        (Colorspace::Auto, 1) => Colorspace::Gray,
        (Colorspace::Auto, _) => Colorspace::Rgb,
        (cs, _) => cs,
    };
    match &job.reframe {
        None => decode_into_with(bytes, want, job.precision, out),
        Some(r) => {
            let restarts = job.chunk.restarts(job.video, job.frame);
            decode_reframed_with(bytes, want, r, restarts.as_deref(), job.precision, out)
        }
    }
    .map_err(|e| context(job.chunk, job.video, job.frame, e))
}

fn context(chunk: &ChunkReader, video: usize, frame: usize, e: DecodeFailure) -> Error {
    let (path, id) = (chunk.paths().data.clone(), chunk.id(video).to_owned());
    match e {
        DecodeFailure::Unsupported(msg) => Error::UnsupportedJpeg {
            path,
            id,
            frame,
            msg,
        },
        DecodeFailure::Corrupt(msg) => Error::Decode {
            path,
            id,
            frame,
            msg,
        },
    }
}
