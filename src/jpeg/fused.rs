//! Decoding only what is kept: a crop of a frame, resized, in one pass per frame.
//!
//! Training never uses a stored frame as it is: it takes a crop and resizes it. Done after a
//! full decode, that is three passes over every pixel (decode, crop, resize) and decoding
//! pixels that are thrown away. Here, per frame:
//!
//! 1. the smallest DCT scale `M/8` (`M` in 1, 2, 4, 8: `SIMD_EIGHTHS`) that still leaves at
//!    least the output size: libjpeg-turbo then computes only the low frequencies of each 8x8
//!    block (the "free" downscale);
//! 2. only the crop's rows and columns are decoded: rows below it are not touched, rows above
//!    it only entropy-decoded (Huffman decoding cannot start mid-scan), columns outside it
//!    skip the IDCT, upsampling and colour conversion; with restart markers at every MCU row
//!    (what gulpio-rs writes, the positions in the index) the rows above it are skipped too
//!    ([`super::restart`]);
//! 3. an antialiased bilinear resize (fast_image_resize's convolution, Pillow's `BILINEAR`
//!    filter whose support widens when reducing) from the decoded region straight into the
//!    caller's output slot, then the optional left-right flip (`crate::pixels::reframe`,
//!    which every decoder's reframing shares).
//!
//! The zune-jpeg build does the same with a full decode of the rows kept (restart cut
//! included) instead of 1 and 2.

use std::cell::RefCell;

use super::{restart, DecodeFailure, Frame, Precision};
use crate::pixels::reframe::reframe_box;
use crate::pixels::{Colorspace, CropBox, Reframe};

thread_local! {
    // Per decode thread: the decoded region's pixels and the restart cut's bytes, reused
    // from frame to frame.
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Decodes `jpeg` through `spec` into `out`, which must hold exactly `spec.output(..)` x
/// the output channels bytes. `restarts`: the frame's restart marker positions from the
/// index, if it has usable ones.
pub fn decode_reframed(
    jpeg: &[u8],
    want: Colorspace,
    spec: &Reframe,
    restarts: Option<&[u32]>,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    decode_reframed_with(jpeg, want, spec, restarts, Precision::Accurate, out)
}

/// [`decode_reframed`] at the given [`Precision`].
pub fn decode_reframed_with(
    jpeg: &[u8],
    want: Colorspace,
    spec: &Reframe,
    restarts: Option<&[u32]>,
    precision: Precision,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    let frame = Frame::of(jpeg, want)?;
    let (oh, ow) = spec.output(frame.height, frame.width).map_err(|m| {
        DecodeFailure::Corrupt(format!("{m} (does the index describe another frame?)"))
    })?;
    if out.len() != oh * ow * frame.channels {
        return Err(DecodeFailure::Corrupt(format!(
            "output buffer of {} bytes for a {ow}x{oh} frame with {} channel(s)",
            out.len(),
            frame.channels
        )));
    }
    let crop = spec.crop_of(frame.height, frame.width);
    let eighths = dct_eighths(&frame, &crop, (oh, ow), spec.dct_scaling);
    SCRATCH.with(|cell| {
        let mut scratch = cell.borrow_mut();
        let (pixels, cut) = &mut *scratch;
        // Only the intervals holding the crop's rows, when the index knows the markers.
        let rows =
            crop.top.floor() as usize..((crop.top + crop.height).ceil() as usize).min(frame.height);
        let cut_top = restarts.and_then(|markers| {
            let layout = restart::layout(jpeg, &frame.info)?;
            let mcu_rows = restart::mcu_rows_for(&frame.info, rows, eighths);
            restart::cut(jpeg, &layout, markers, mcu_rows, cut)
        });
        let (src, src_frame, top) = match cut_top {
            Some(top) => (&cut[..], Frame::of(cut, want)?, top),
            None => (jpeg, frame, 0),
        };
        // The crop in the pixels of the (cut, scaled) image that is decoded.
        let s = eighths as f64 / 8.0;
        let (cx, cy) = (crop.left * s, (crop.top - top as f64) * s);
        let (cw, ch) = (crop.width * s, crop.height * s);
        let rect = (cx, cy, cw, ch);
        let region = decode_region(src, &src_frame, eighths, precision, rect, pixels)?;
        let rel = (cx - region.x as f64, cy - region.y as f64, cw, ch);
        reframe_box(
            &pixels[..region.w * region.h * frame.channels],
            (region.h, region.w, frame.channels),
            rel,
            (oh, ow),
            spec.flip,
            out,
        )
        .map_err(DecodeFailure::Corrupt)
    })
}

/// The DCT scales used, in eighths: those libjpeg-turbo computes with SIMD code (its 8x8,
/// 4x4 and 2x2 inverse DCTs; 1x1 is the DC value alone). At 3/8, 5/8, 6/8 and 7/8 every block
/// goes through plain-C inverse DCTs, and with 4:2:0 chroma through 6x6, 10x10, 12x12 or 14x14
/// ones (libjpeg scales chroma up in the DCT instead of upsampling it): measured with
/// callgrind on random-resized crops of 456x256 q90 frames to 112x112, those scales made the
/// fused decode cost more instructions than decoding the whole frame (docs/FUSED.md).
const SIMD_EIGHTHS: [usize; 4] = [1, 2, 4, 8];

/// The DCT scale, in eighths: the smallest of [`SIMD_EIGHTHS`] that leaves the crop at least
/// the output's size in both directions (8 when scaling is off or not available).
fn dct_eighths(frame: &Frame, crop: &CropBox, (oh, ow): (usize, usize), allowed: bool) -> usize {
    if !allowed || super::BACKEND != super::Backend::Turbo || frame.info.components == 4 {
        return 8;
    }
    SIMD_EIGHTHS
        .into_iter()
        .find(|&m| {
            let s = m as f64 / 8.0;
            crop.width * s >= ow as f64 - 1e-6 && crop.height * s >= oh as f64 - 1e-6
        })
        .unwrap_or(8)
}

/// A decoded rectangle of the (scaled) frame, its pixels at the start of the scratch buffer.
#[derive(Debug, Clone, Copy)]
struct Decoded {
    x: usize,
    y: usize,
    w: usize,
    h: usize,
}

/// Decodes at least the rectangle `(x, y, w, h)` of `frame` scaled by `eighths / 8` into
/// `pixels`, and says which rectangle it decoded.
#[cfg(feature = "turbo")]
fn decode_region(
    jpeg: &[u8],
    frame: &Frame,
    eighths: usize,
    precision: Precision,
    (x, y, w, h): (f64, f64, f64, f64),
    pixels: &mut Vec<u8>,
) -> Result<Decoded, DecodeFailure> {
    use super::turbo::{self, Region};
    if frame.info.components == 4 {
        // CMYK comes out of TurboJPEG only whole and unscaled (then converted here).
        return decode_whole(jpeg, frame, precision, pixels);
    }
    let scaled = |d: usize| (d * eighths).div_ceil(8);
    let (sw, sh) = (scaled(frame.width), scaled(frame.height));
    // The left edge must be on a (scaled) MCU boundary, and one MCU further left: chroma
    // upsampling at the region's edge looks at the column beyond it, which a region starting
    // at the crop would replicate instead (pixels would differ from a whole decode's). The
    // same one MCU of margin on the right.
    let mcu = (frame.info.mcu_size().0 * eighths / 8).max(1);
    let x0 = (x.floor().max(0.0) as usize / mcu).saturating_sub(1) * mcu;
    let y0 = y.floor().max(0.0) as usize;
    let x1 = ((x + w).ceil() as usize + mcu).clamp(x0 + 1, sw);
    let y1 = ((y + h).ceil() as usize).clamp(y0 + 1, sh);
    let want = Region {
        x: x0,
        y: y0,
        w: x1 - x0,
        h: y1 - y0,
    };
    let got = turbo::decode_region(jpeg, frame, eighths, precision, want, pixels)?;
    Ok(Decoded {
        x: got.x,
        y: got.y,
        w: got.w,
        h: got.h,
    })
}

#[cfg(not(feature = "turbo"))]
fn decode_region(
    jpeg: &[u8],
    frame: &Frame,
    _eighths: usize,
    precision: Precision,
    _rect: (f64, f64, f64, f64),
    pixels: &mut Vec<u8>,
) -> Result<Decoded, DecodeFailure> {
    decode_whole(jpeg, frame, precision, pixels)
}

/// The whole frame at full size, through the backend's ordinary decode.
fn decode_whole(
    jpeg: &[u8],
    frame: &Frame,
    precision: Precision,
    pixels: &mut Vec<u8>,
) -> Result<Decoded, DecodeFailure> {
    pixels.resize(frame.len(), 0);
    #[cfg(feature = "turbo")]
    super::turbo::decode_into(jpeg, frame, precision, pixels)?;
    #[cfg(not(feature = "turbo"))]
    {
        let _ = precision; // zune-jpeg decodes accurately only
        super::zune::decode_into(jpeg, frame, pixels)?;
    }
    Ok(Decoded {
        x: 0,
        y: 0,
        w: frame.width,
        h: frame.height,
    })
}
