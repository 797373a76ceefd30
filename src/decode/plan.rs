//! Planning a read: which frames, and each one's output shape, worked out from the index (or
//! the JPEG header for legacy chunks) and checked against the read limits before anything is
//! allocated or decoded. One [`FrameJob`] per frame, whichever decoder then decodes it.

use crate::chunk::reader::ChunkReader;
use crate::error::{At, Error, Result};
use crate::jpeg::{output_shape, DecodeFailure, Precision};
use crate::pixels::{check_frame_size, Colorspace, Reframe};

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
        let c = colorspace.channels(comps);
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

/// A frame's decode failure as the crate's error, naming the chunk, the video and the frame.
pub(super) fn context(chunk: &ChunkReader, video: usize, frame: usize, e: DecodeFailure) -> Error {
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
