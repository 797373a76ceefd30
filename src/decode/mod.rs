//! Decoding stored frames into caller-provided buffers (numpy arrays in Python), whatever
//! stores them: `plan` works out every frame's output shape (one [`FrameJob`] each), then each
//! job goes to the decoder of its video's storage, behind one trait, `FrameDecoder`:
//! `jpeg_frames` (JPEG frames, one by one) and `segments` (videos stored as AV1 segments, a
//! segment at a time). Adding a decoder (another backend, a GPU one) is a module implementing
//! the trait and its entry in `DECODERS`; neither the planner nor `jpeg`/`video` change.

mod jpeg_frames;
mod plan;
mod segments;

pub use plan::{output_bytes, plan, read_bytes, uniform, FrameJob, ASK_LESS, MAX_READ_BYTES};

use crate::chunk::reader::ChunkReader;
use crate::error::{Error, Result};
use crate::pixels::Colorspace;
use crate::pool::Runner;

/// One way of decoding planned frames, for the jobs it claims.
trait FrameDecoder: Sync {
    /// Whether `job` is this decoder's (the first decoder in [`DECODERS`] that claims a job
    /// decodes it).
    fn claims(&self, job: &FrameJob) -> bool;

    /// Verifies and decodes `jobs` (all claimed) into `outs` (one slice of exactly
    /// `jobs[i].len()` bytes each) on `runner`, returning the first failure in job order.
    /// `check`: verify CRCs where the storage leaves that to the caller.
    fn decode(
        &self,
        jobs: &[FrameJob],
        outs: Vec<&mut [u8]>,
        check: bool,
        runner: &Runner,
    ) -> Result<()>;

    /// Decodes one claimed job on the calling thread (`decode_frame`), reading as little as
    /// the one frame needs.
    fn decode_single(&self, job: &FrameJob, out: &mut [u8], check: bool) -> Result<()>;
}

/// Every decoder, in the order they are asked whether they claim a job. Segments first: a
/// video with a stream entry is never read as JPEG frames.
const DECODERS: &[&dyn FrameDecoder] = &[&segments::Segments, &jpeg_frames::JpegFrames];

/// The position in [`DECODERS`] of the decoder of `job`.
fn decoder_of(job: &FrameJob) -> Result<usize> {
    DECODERS
        .iter()
        .position(|d| d.claims(job))
        .ok_or_else(|| Error::Internal("a frame no decoder claims".into()))
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
    let owners = jobs
        .iter()
        .map(decoder_of)
        .collect::<Result<Vec<usize>>>()?;
    let Some(&first) = owners.first() else {
        return Ok(());
    };
    if owners.iter().all(|&d| d == first) {
        // The usual batch, one storage throughout: handed over as it is, no copy.
        return DECODERS[first].decode(jobs, outs, check, runner);
    }
    decode_mixed(jobs, outs, &owners, check, runner)
}

/// One decoder's share of a mixed batch: its jobs, their outputs, and where its first job is
/// in the batch.
struct Share<'c, 'o> {
    jobs: Vec<FrameJob<'c>>,
    outs: Vec<&'o mut [u8]>,
    first: Option<usize>,
}

/// [`decode`] for batches whose frames several decoders claim (videos stored as segments next
/// to videos of JPEG frames): each decoder gets its jobs, in [`DECODERS`] order. With
/// failures on several sides, the one whose first job comes earliest is returned.
fn decode_mixed(
    jobs: &[FrameJob],
    outs: Vec<&mut [u8]>,
    owners: &[usize],
    check: bool,
    runner: &Runner,
) -> Result<()> {
    let mut shares: Vec<Share> = DECODERS
        .iter()
        .map(|_| Share {
            jobs: Vec::new(),
            outs: Vec::new(),
            first: None,
        })
        .collect();
    for (i, ((job, out), &d)) in jobs.iter().zip(outs).zip(owners).enumerate() {
        let share = &mut shares[d];
        share.jobs.push(*job);
        share.outs.push(out);
        share.first.get_or_insert(i);
    }
    // Which failed first in job order is not tracked per job; the earliest first job of the
    // failing sides is the best deterministic choice.
    let mut failed: Option<(usize, Error)> = None;
    for (decoder, share) in DECODERS.iter().zip(shares) {
        let Some(at) = share.first else { continue };
        if let Err(e) = decoder.decode(&share.jobs, share.outs, check, runner) {
            if failed.as_ref().is_none_or(|(earlier, _)| at < *earlier) {
                failed = Some((at, e));
            }
        }
    }
    failed.map_or(Ok(()), |(_, e)| Err(e))
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
    DECODERS[decoder_of(job)?].decode_single(job, &mut out, check)?;
    Ok((out, job.shape.0, job.shape.1, job.shape.2))
}
