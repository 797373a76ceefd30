//! Video segments: a run of a video's frames stored as one short AV1 stream that starts with
//! a key frame and decodes on its own (docs/FORMAT.md §6, docs/DECISIONS.md "Video segments").
//!
//! This module owns the segment decoder's contract whatever the codec: the limits checked
//! before anything is decoded, the output (packed RGB, `height x width x 3`, converted as
//! FFmpeg converts the same stream, `yuv`), frame-exact selection (the i-th picture in display
//! order is the segment's frame i; decoding stops after the last frame asked for), and that
//! nothing a decoder does on bad input (an error or a panic) leaves it other than as a
//! [`SegmentFailure`]. `av1` is the one codec (libdav1d or rav1d, chosen at build time); `obu`
//! vets AV1 streams for it; `refs` finds the frames a read may leave out.

pub mod av1;
pub mod fork_gate;
pub mod obu;
pub mod refs;
pub mod stages;
pub mod yuv;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use stages::Stage;

use crate::pixels::check_frame_size;

/// The failure type lives with the core's error type (`crate::error`), which wraps it.
pub use crate::error::SegmentFailure;
/// What the index records of segments, and the limits on them, belong to the format.
pub use crate::format::segments::{Codec, MAX_SEGMENT_BYTES, MAX_SEGMENT_FRAMES};

/// Frame headers allowed in a segment of `frames` frames: each frame is coded once, plus the
/// repeats that show hidden frames (at most one per shown frame) and a little slack. Each
/// header can make the decoder reconstruct a whole frame, so this bounds its work.
fn max_frame_headers(frames: usize) -> usize {
    2 * frames + 16
}

/// What a segment is declared to be (by the index): its frames' size and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentShape {
    pub codec: Codec,
    pub width: usize,
    pub height: usize,
    pub frames: usize,
}

impl SegmentShape {
    /// Bytes of one decoded RGB frame.
    pub fn frame_len(&self) -> usize {
        self.width * self.height * 3
    }
}

/// What is known of a segment's bytes before they reach the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integrity {
    /// The CRC-32 recorded for the segment (the index's segment entry, docs/FORMAT.md §6.3):
    /// checked before anything is decoded; a mismatch fails with `corrupt` set.
    Crc(u32),
    /// Decode the bytes as given, for a caller that asked for it. Damage then reaches the
    /// decoder: AV1 carries no checksum, so a damaged segment can decode to wrong pixels
    /// without an error, and a panic left in rav1d (one is worked around, `av1::Decoder`)
    /// would abort the process rather than fail the call.
    Unchecked,
}

impl Integrity {
    fn check(self, bytes: &[u8]) -> Result<(), SegmentFailure> {
        let Integrity::Crc(expected) = self else {
            return Ok(());
        };
        let actual = crc32fast::hash(bytes);
        if actual == expected {
            return Ok(());
        }
        Err(SegmentFailure {
            corrupt: true,
            ..SegmentFailure::new(format!(
                "CRC mismatch in the segment's {} bytes: expected {expected:#010x}, found \
                 {actual:#010x}",
                bytes.len()
            ))
        })
    }
}

/// What a whole decode of a segment found (for ingest's check and for index building).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentProbe {
    pub width: usize,
    pub height: usize,
    pub frames: usize,
    pub matrix: yuv::Matrix,
    pub range: yuv::Range,
}

/// Checks the limits that hold before decoding: sizes, counts, the stream's own structure.
fn vet(shape: &SegmentShape, bytes: &[u8]) -> Result<obu::Summary, SegmentFailure> {
    if bytes.len() > MAX_SEGMENT_BYTES {
        return Err(SegmentFailure::new(format!(
            "the segment is {} bytes, over the maximum of {MAX_SEGMENT_BYTES}",
            bytes.len()
        )));
    }
    if shape.frames == 0 || shape.frames > MAX_SEGMENT_FRAMES {
        return Err(SegmentFailure::new(format!(
            "the segment is declared to hold {} frames; 1 to {MAX_SEGMENT_FRAMES} are allowed",
            shape.frames
        )));
    }
    check_frame_size(shape.width, shape.height).map_err(SegmentFailure::new)?;
    if shape.width == 0 || shape.height == 0 {
        return Err(SegmentFailure::new(format!(
            "the segment is declared {}x{}",
            shape.width, shape.height
        )));
    }
    let summary = obu::walk(bytes).map_err(SegmentFailure::new)?;
    if summary.profile != 0 {
        return Err(SegmentFailure::new(format!(
            "AV1 profile {} (only Main, 8-bit 4:2:0, is stored)",
            summary.profile
        )));
    }
    // One temporal unit per frame, each opened by its temporal delimiter (docs/FORMAT.md
    // §6.1): an AV1 temporal unit shows exactly one frame, so a segment whose units are not
    // its declared frames would return frames shifted from where the index puts them. Cheap
    // to see without decoding, so every read and `gulpio check` see it.
    if summary.temporal_units.first() != Some(&0) {
        return Err(SegmentFailure::new(
            "the segment does not start with a temporal delimiter",
        ));
    }
    if summary.temporal_units.len() != shape.frames {
        return Err(SegmentFailure::new(format!(
            "the segment holds {} temporal units (one per frame), not the {} frames declared",
            summary.temporal_units.len(),
            shape.frames
        )));
    }
    let most = max_frame_headers(shape.frames);
    if summary.frame_headers > most {
        return Err(SegmentFailure::new(format!(
            "the segment has {} frame headers, more than {most} for {} frames",
            summary.frame_headers, shape.frames
        )));
    }
    Ok(summary)
}

/// What every read checks of a segment before decoding it (`decode_segment` does it itself):
/// the size limits, the declared frame count against the stream's temporal units, its AV1
/// structure. For `gulpio check` without `--decode`.
pub fn vet_segment(shape: &SegmentShape, bytes: &[u8]) -> Result<(), SegmentFailure> {
    vet(shape, bytes).map(|_| ())
}

/// Decodes the frames `wanted` (indices within the segment, strictly increasing) of a segment
/// declared as `shape`, each into its buffer in `outs` (`shape.frame_len()` bytes each).
/// `integrity` is checked first ([`Integrity::Unchecked`] only when the caller asked for it).
/// Decoding starts at the segment's key frame and stops once the last wanted frame is out.
/// A picture of another size than declared, fewer pictures than the wanted frames need, or
/// (when the whole segment is decoded) more pictures than declared, is a failure.
pub fn decode_segment(
    shape: &SegmentShape,
    bytes: &[u8],
    integrity: Integrity,
    wanted: &[usize],
    outs: &mut [&mut [u8]],
) -> Result<(), SegmentFailure> {
    let whole = yuv::Region::whole(shape.width, shape.height);
    decode_segment_region(shape, bytes, integrity, wanted, whole, outs)
}

/// [`decode_segment`] keeping only `region` of each frame (`outs` of `region.rgb_len()`
/// bytes): the pixels of the whole frame's conversion in that rectangle, for a read that
/// crops (converting a whole frame cost more than the crop's resize).
pub fn decode_segment_region(
    shape: &SegmentShape,
    bytes: &[u8],
    integrity: Integrity,
    wanted: &[usize],
    region: yuv::Region,
    outs: &mut [&mut [u8]],
) -> Result<(), SegmentFailure> {
    if wanted.len() != outs.len() {
        return Err(SegmentFailure::new(
            "one output buffer per wanted frame is needed",
        ));
    }
    if wanted.windows(2).any(|w| w[0] >= w[1]) {
        return Err(SegmentFailure::new(
            "wanted frames must be strictly increasing",
        ));
    }
    if let Some(&last) = wanted.last() {
        if last >= shape.frames {
            return Err(SegmentFailure::at(
                last,
                format!("frame {last} of a {}-frame segment", shape.frames),
            ));
        }
    }
    region
        .check(shape.width, shape.height)
        .map_err(SegmentFailure::new)?;
    if let Some(o) = outs.iter().find(|o| o.len() != region.rgb_len()) {
        return Err(SegmentFailure::new(format!(
            "an output buffer of {} bytes for a {}x{} RGB region",
            o.len(),
            region.width(),
            region.height()
        )));
    }
    integrity.check(bytes)?;
    let summary = vet(shape, bytes)?;
    // Only the temporal units up to the last wanted frame's (frame i is the i-th unit, as
    // segments are written): with frame threading the decoder would otherwise start on the
    // next frames, and closing it waits for them. Fewer units than frames (a stream not
    // written so) only means fewer pictures, which `run` reports.
    let Some(&last) = wanted.last() else {
        return Ok(());
    };
    let units = &summary.temporal_units;
    let cut = units.get(last + 1).map_or(bytes.len(), |&end| end);
    // Frames no later frame refers to and the caller does not want are left out (`refs`):
    // what a stride-2 clip or a clip that starts inside a segment would decode for nothing.
    let skip = refs::skippable(&bytes[..cut], units, wanted);
    let mut frames = Vec::with_capacity(last + 1 - skip.len());
    let mut kept = Vec::new();
    for i in 0..=last {
        if skip.binary_search(&i).is_ok() {
            continue;
        }
        frames.push(i);
        if !skip.is_empty() {
            let end = units.get(i + 1).map_or(cut, |&e| e.min(cut));
            kept.extend_from_slice(&bytes[units.get(i).copied().unwrap_or(cut)..end]);
        }
    }
    let stream = if skip.is_empty() {
        &bytes[..cut]
    } else {
        &kept[..]
    };
    guarded(|| run(shape, stream, &frames, wanted, region, outs).map(|_| ()))
}

/// Decodes a whole segment without keeping pixels: its frame size, frame count and colour
/// signalling. For checking what ingest is about to store (bytes straight from the encoder,
/// which have no recorded CRC yet): it decodes unchecked bytes, with the risks told at
/// [`Integrity::Unchecked`], and is not a way to read stored segments. `max_pixels` bounds
/// the frame size.
pub fn probe_segment(
    codec: Codec,
    bytes: &[u8],
    frames: usize,
    max_pixels: usize,
) -> Result<SegmentProbe, SegmentFailure> {
    let shape = SegmentShape {
        codec,
        width: 1,
        height: 1,
        frames,
    };
    vet(&shape, bytes)?;
    guarded(|| {
        let max =
            u32::try_from(max_pixels.min(crate::pixels::MAX_FRAME_PIXELS)).unwrap_or(u32::MAX);
        let mut dec = av1::Decoder::new(max).map_err(SegmentFailure::new)?;
        let mut pending = dec.start(bytes).map_err(SegmentFailure::new)?;
        let mut probe: Option<SegmentProbe> = None;
        let mut count = 0usize;
        while let Some(pic) = dec
            .next(&mut pending)
            .map_err(|m| SegmentFailure::at(count, m))?
        {
            let (matrix, range) = pic.color().map_err(|m| SegmentFailure::at(count, m))?;
            let (w, h) = (pic.width(), pic.height());
            match &probe {
                None => {
                    probe = Some(SegmentProbe {
                        width: w,
                        height: h,
                        frames: 0,
                        matrix,
                        range,
                    })
                }
                Some(p) if (p.width, p.height, p.matrix, p.range) != (w, h, matrix, range) => {
                    return Err(SegmentFailure::at(
                        count,
                        format!(
                            "frame {count} is {w}x{h}, the segment's first {}x{} (or its colour \
                             signalling changed)",
                            p.width, p.height
                        ),
                    ))
                }
                Some(_) => {}
            }
            count += 1;
            if count > frames {
                return Err(SegmentFailure::at(
                    count - 1,
                    format!("the segment holds more than its {frames} declared frames"),
                ));
            }
        }
        match probe {
            Some(p) if count == frames => Ok(SegmentProbe { frames: count, ..p }),
            _ => Err(SegmentFailure::new(format!(
                "the segment holds {count} frames, not the {frames} declared"
            ))),
        }
    })
}

/// Proves that a segment about to be stored decodes to exactly what its writer declares: the
/// frame size and count of `shape` and the colour conversion `colour` (matrix and range, as
/// the stream entry records them). Every writer calls it for every segment before anything
/// is written, so no stored segment disagrees with its index (docs/FORMAT.md §6.3). Decodes
/// unchecked bytes: the writer's input, with the risks told at [`Integrity::Unchecked`].
pub fn verify_segment(
    shape: &SegmentShape,
    colour: (yuv::Matrix, yuv::Range),
    bytes: &[u8],
) -> Result<(), SegmentFailure> {
    let p = probe_segment(shape.codec, bytes, shape.frames, shape.width * shape.height)?;
    if (p.width, p.height) != (shape.width, shape.height) {
        return Err(SegmentFailure::new(format!(
            "its frames are {}x{}, declared {}x{}",
            p.width, p.height, shape.width, shape.height
        )));
    }
    if (p.matrix, p.range) != colour {
        return Err(SegmentFailure::new(format!(
            "its stream signals {:?} {:?} range, declared {:?} {:?} range",
            p.matrix, p.range, colour.0, colour.1
        )));
    }
    Ok(())
}

/// Runs `f`, turning a panic (in our code or a backend's Rust code) into a failure.
fn guarded<T>(f: impl FnOnce() -> Result<T, SegmentFailure>) -> Result<T, SegmentFailure> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(SegmentFailure::new(format!(
                "the segment decoder failed unexpectedly ({why})"
            )))
        }
    }
}

/// The decode loop of [`decode_segment`], after vetting: `bytes` holds the temporal units of
/// the frames `frames` (increasing, one picture each), which include every wanted frame.
/// Returns the pictures seen.
fn run(
    shape: &SegmentShape,
    bytes: &[u8],
    frames: &[usize],
    wanted: &[usize],
    region: yuv::Region,
    outs: &mut [&mut [u8]],
) -> Result<usize, SegmentFailure> {
    if wanted.is_empty() {
        return Ok(0);
    }
    // The decoder refuses larger frames before allocating them (a hostile stream could
    // otherwise declare 65536x65536 inside a segment the index calls small).
    let max = u32::try_from(shape.width * shape.height).unwrap_or(u32::MAX);
    let setup = Instant::now();
    let mut dec = av1::Decoder::new(max).map_err(SegmentFailure::new)?;
    stages::add(Stage::Setup, setup);
    let result = decode_frames(&mut dec, shape, bytes, frames, wanted, region, outs);
    let close = Instant::now();
    drop(dec);
    stages::add(Stage::Setup, close);
    if let Ok(pictures) = result {
        stages::count(pictures, wanted.len());
    }
    result
}

fn decode_frames(
    dec: &mut av1::Decoder,
    shape: &SegmentShape,
    bytes: &[u8],
    frames: &[usize],
    wanted: &[usize],
    region: yuv::Region,
    outs: &mut [&mut [u8]],
) -> Result<usize, SegmentFailure> {
    let started = Instant::now();
    let mut pending = dec.start(bytes).map_err(SegmentFailure::new)?;
    stages::add(Stage::Decode, started);
    let mut next_out = 0usize;
    for &index in frames {
        let started = Instant::now();
        let pic = dec
            .next(&mut pending)
            .map_err(|m| SegmentFailure::at(index, m))?
            .ok_or_else(|| {
                SegmentFailure::at(
                    index,
                    format!(
                        "the segment ends before frame {index}; {} frames are declared",
                        shape.frames
                    ),
                )
            })?;
        if (pic.width(), pic.height()) != (shape.width, shape.height) {
            return Err(SegmentFailure::at(
                index,
                format!(
                    "frame {index} decodes to {}x{}, the index says {}x{}",
                    pic.width(),
                    pic.height(),
                    shape.width,
                    shape.height
                ),
            ));
        }
        stages::add(Stage::Decode, started);
        if wanted.get(next_out) == Some(&index) {
            let started = Instant::now();
            let (matrix, range) = pic.color().map_err(|m| SegmentFailure::at(index, m))?;
            let planes = pic.planes().map_err(|m| SegmentFailure::at(index, m))?;
            yuv::to_rgb_region(&planes, matrix, range, region, outs[next_out])
                .map_err(|m| SegmentFailure::at(index, m))?;
            stages::add(Stage::Convert, started);
            next_out += 1;
        }
    }
    // Decoded to the end: a picture past the declared frames means the declaration is wrong
    // (the frames before it may be shifted), so the segment is refused rather than read.
    let index = shape.frames;
    if frames.last() == Some(&(index - 1))
        && dec
            .next(&mut pending)
            .map_err(|m| SegmentFailure::at(index, m))?
            .is_some()
    {
        return Err(SegmentFailure::at(
            index,
            format!(
                "the segment holds more than its {} declared frames",
                shape.frames
            ),
        ));
    }
    Ok(frames.len())
}

#[cfg(test)]
mod tests;
