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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::testing::{fake_jpeg, gray_jpeg};
    use crate::chunk::writer::{ChunkWriter, WriteMode};
    use crate::format::paths::ChunkPaths;
    use crate::pixels::CropBox;

    /// Video "rgb" (two 20x10 colour frames) and video "gray" (two 6x5 frames, then one 8x4
    /// in colour), without index when `legacy`.
    fn chunk(dir: &std::path::Path, legacy: bool) -> ChunkReader {
        let paths = ChunkPaths::numbered(dir, 0);
        let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
        w.append(
            "rgb",
            b"{}",
            &[&fake_jpeg(20, 10, 0), &fake_jpeg(20, 10, 1)],
        )
        .unwrap();
        let (g, c) = (gray_jpeg(6, 5), fake_jpeg(8, 4, 0));
        w.append("gray", b"{}", &[&g, &g, &c]).unwrap();
        w.close().unwrap();
        if legacy {
            std::fs::remove_file(&paths.index).unwrap();
        }
        ChunkReader::open(&paths).unwrap().0
    }

    fn shapes(jobs: &[FrameJob]) -> Vec<(usize, usize, usize)> {
        jobs.iter().map(|j| j.shape).collect()
    }

    #[test]
    fn frames_resolve_to_their_shapes_from_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let r = chunk(dir.path(), false);
        let jobs = plan(&r, 0, &[1, -2, 0], Colorspace::Auto, false, None).unwrap();
        let frames: Vec<usize> = jobs.iter().map(|j| j.frame).collect();
        assert_eq!(frames, [1, 0, 0]);
        assert_eq!(uniform(&jobs), Some((10, 20, 3)));
        assert!(jobs.iter().all(|j| j.recorded == Some((20, 10, 3))));
        assert_eq!((jobs[0].len(), jobs[0].is_empty()), (600, false));
        let jobs = plan(&r, 1, &[0, 2], Colorspace::Auto, false, None).unwrap();
        assert_eq!(shapes(&jobs), [(5, 6, 1), (4, 8, 3)]);
        assert_eq!(uniform(&jobs), None);
        assert!(uniform(&[]).is_none());
        match plan(&r, 1, &[3], Colorspace::Auto, false, None) {
            Err(Error::FrameOutOfRange { id, frame, .. }) => {
                assert_eq!((id.as_str(), frame), ("gray", 3))
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("planned"),
        }
    }

    #[test]
    fn a_chunk_without_index_is_shaped_from_the_jpeg_headers() {
        let dir = tempfile::tempdir().unwrap();
        let r = chunk(dir.path(), true);
        let jobs = plan(&r, 1, &[-1, 0], Colorspace::Auto, false, None).unwrap();
        assert_eq!(shapes(&jobs), [(4, 8, 3), (5, 6, 1)]);
        assert!(jobs.iter().all(|j| j.recorded.is_none()));
    }

    #[test]
    fn the_colorspace_sets_the_channels() {
        let dir = tempfile::tempdir().unwrap();
        let r = chunk(dir.path(), false);
        let channels = |frames: &[i64], cs, uniform_channels| {
            plan(&r, 1, frames, cs, uniform_channels, None)
                .unwrap()
                .iter()
                .map(|j| (j.shape.2, j.colorspace))
                .collect::<Vec<_>>()
        };
        use Colorspace::{Auto, Gray, Rgb};
        assert_eq!(channels(&[0, 2], Gray, false), [(1, Gray), (1, Gray)]);
        assert_eq!(channels(&[0, 2], Rgb, true), [(3, Rgb), (3, Rgb)]);
        assert_eq!(channels(&[0, 2], Auto, false), [(1, Auto), (3, Auto)]);
        // Stacked: one count for the video, colour if any frame is.
        assert_eq!(channels(&[0, 2], Auto, true), [(3, Rgb), (3, Rgb)]);
        assert_eq!(channels(&[0, 1], Auto, true), [(1, Gray), (1, Gray)]);
    }

    #[test]
    fn a_reframe_gives_the_output_size() {
        let dir = tempfile::tempdir().unwrap();
        let r = chunk(dir.path(), false);
        let crop = CropBox {
            top: 2.0,
            left: 4.0,
            height: 6.0,
            width: 12.4,
        };
        let spec = |crop, size| Reframe {
            crop,
            size,
            flip: false,
            dct_scaling: true,
        };
        let out =
            |s: &Reframe| shapes(&plan(&r, 0, &[0], Colorspace::Rgb, false, Some(s)).unwrap());
        assert_eq!(out(&spec(Some(crop), None)), [(6, 12, 3)]);
        assert_eq!(out(&spec(Some(crop), Some((3, 5)))), [(3, 5, 3)]);
        assert_eq!(out(&spec(None, Some((7, 9)))), [(7, 9, 3)]);
        assert_eq!(out(&spec(None, None)), [(10, 20, 3)]);
        let outside = CropBox { top: 5.0, ..crop };
        match plan(
            &r,
            0,
            &[1],
            Colorspace::Rgb,
            false,
            Some(&spec(Some(outside), None)),
        ) {
            Err(Error::InvalidFor { at, msg, .. }) => {
                assert_eq!(at, At::frame("rgb", 1));
                assert!(msg.contains("not inside the 20x10 frame"), "{msg}");
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("planned"),
        }
    }

    #[test]
    fn a_read_over_the_limit_is_refused_before_it_is_planned() {
        let dir = tempfile::tempdir().unwrap();
        let r = chunk(dir.path(), false);
        // 8192 x 8192 x 3 bytes a frame: the limit is passed at frame 171.
        let big = Reframe {
            crop: None,
            size: Some((8192, 8192)),
            flip: false,
            dct_scaling: true,
        };
        let per_frame = 8192 * 8192 * 3;
        let fits = (MAX_READ_BYTES / per_frame) as usize;
        let frames = vec![0i64; fits];
        assert_eq!(
            plan(&r, 0, &frames, Colorspace::Rgb, false, Some(&big))
                .unwrap()
                .len(),
            fits
        );
        let frames = vec![0i64; fits + 1];
        match plan(&r, 0, &frames, Colorspace::Rgb, false, Some(&big)) {
            Err(Error::InvalidArgument(msg)) => {
                let need = (fits as u64 + 1) * per_frame;
                assert!(msg.contains(&format!("at least {need} bytes")), "{msg}");
                assert!(msg.contains(ASK_LESS), "{msg}");
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("planned"),
        }
    }

    #[test]
    fn output_bytes_are_checked_against_the_limit() {
        assert_eq!(output_bytes(&[2, 3, 4, 5]).unwrap(), 120);
        assert_eq!(output_bytes(&[]).unwrap(), 1);
        let limit = MAX_READ_BYTES as usize;
        assert_eq!(output_bytes(&[limit]).unwrap(), limit);
        match output_bytes(&[limit + 1]) {
            Err(Error::InvalidArgument(msg)) => {
                assert!(msg.contains(&format!("need {} bytes", limit + 1)), "{msg}");
                assert!(msg.contains(&format!("an array of {}", limit + 1)), "{msg}");
            }
            other => panic!("{other:?}"),
        }
        match output_bytes(&[1 << 40, 1 << 40]) {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("more than 2^64"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }
}
