//! JPEG frames (videos stored as gulpio's frame records): CRCs verified and every frame
//! decoded on the private pool, straight into its slice of the caller's buffer. Mapped chunks
//! are decoded from the mapping; other chunks (positional reads, object stores) are read with
//! one planned set of range requests per chunk, each frame decoded as soon as its bytes are in.

use rayon::prelude::*;

use super::plan::{context, FrameJob};
use super::FrameDecoder;
use crate::chunk::reader::{read_many, ChunkReader, FrameData};
use crate::error::{Error, Result};
use crate::jpeg::header::read_info;
use crate::jpeg::{decode_into_with, decode_reframed_with, DecodeFailure};
use crate::pixels::Colorspace;
use crate::pool::Runner;

/// The decoder of videos stored as JPEG frames: every video without a stream entry.
pub(super) struct JpegFrames;

impl FrameDecoder for JpegFrames {
    fn claims(&self, job: &FrameJob) -> bool {
        job.chunk.index().stream_of(job.video).is_none()
    }

    fn decode(
        &self,
        jobs: &[FrameJob],
        outs: Vec<&mut [u8]>,
        check: bool,
        runner: &Runner,
    ) -> Result<()> {
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

    fn decode_single(&self, job: &FrameJob, out: &mut [u8], check: bool) -> Result<()> {
        let bytes = job.chunk.read_frame(job.video, job.frame as i64, check)?;
        decode_bytes(job, &bytes, out)
    }
}

/// `JpegFrames::decode` for batches with chunks that are not mapped (positional reads, object
/// stores): each chunk's frames are read with one planned set of range requests, and every
/// frame is decoded on the pool as soon as its bytes are in, while later requests are still
/// in flight.
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
