//! Decoding many frames at once: plan every frame's output shape from the index (or the JPEG
//! header for legacy chunks), then verify CRCs and decode in parallel on the private pool,
//! each frame straight into its slice of a caller-provided buffer (a numpy array in Python).

use rayon::prelude::*;

use crate::chunk::reader::ChunkReader;
use crate::error::{Error, Result};
use crate::jpeg::{check_frame_size, decode_into, output_shape, Colorspace, DecodeFailure};
use crate::pool::Runner;

/// One frame to decode.
#[derive(Clone, Copy)]
pub struct FrameJob<'a> {
    pub chunk: &'a ChunkReader,
    pub video: usize,
    pub frame: usize,
    /// Output `(height, width, channels)`.
    pub shape: (usize, usize, usize),
    pub colorspace: Colorspace,
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
/// colour), as a stacked array needs.
pub fn plan<'a>(
    chunk: &'a ChunkReader,
    video: usize,
    frames: &[i64],
    colorspace: Colorspace,
    uniform_channels: bool,
) -> Result<Vec<FrameJob<'a>>> {
    let mut jobs = Vec::with_capacity(frames.len());
    for &f in frames {
        let (k, rec) = chunk.frame(video, f)?;
        let (h, w, comps) = if rec.width > 0 && rec.height > 0 && rec.channels > 0 {
            (rec.height as usize, rec.width as usize, rec.channels)
        } else {
            // Legacy chunk: read the size from the JPEG header (the CRC, if any, is checked
            // when the frame is decoded).
            let bytes = chunk.frame_bytes(video, f, false)?;
            let (h, w, _, info) =
                output_shape(bytes, Colorspace::Auto).map_err(|e| context(chunk, video, k, e))?;
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
        jobs.push(FrameJob {
            chunk,
            video,
            frame: k,
            shape: (h, w, c),
            colorspace,
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

/// Decodes a single frame into a new buffer: `(pixels, height, width, channels)`.
pub fn decode_frame(
    chunk: &ChunkReader,
    video: usize,
    frame: i64,
    check: bool,
    colorspace: Colorspace,
) -> Result<(Vec<u8>, usize, usize, usize)> {
    let jobs = plan(chunk, video, &[frame], colorspace, false)?;
    let job = &jobs[0];
    let mut out = vec![0u8; job.len()];
    decode_one(job, &mut out, check)?;
    Ok((out, job.shape.0, job.shape.1, job.shape.2))
}

fn decode_one(job: &FrameJob, out: &mut [u8], check: bool) -> Result<()> {
    if out.len() != job.len() {
        return Err(Error::Internal(format!(
            "output buffer of {} bytes for a frame of {} bytes",
            out.len(),
            job.len()
        )));
    }
    let bytes = job.chunk.frame_bytes(job.video, job.frame as i64, check)?;
    let want = match (job.colorspace, job.shape.2) {
        (Colorspace::Auto, 1) => Colorspace::Gray,
        (Colorspace::Auto, _) => Colorspace::Rgb,
        (cs, _) => cs,
    };
    decode_into(bytes, want, out).map_err(|e| context(job.chunk, job.video, job.frame, e))
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
