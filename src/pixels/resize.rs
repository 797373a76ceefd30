//! Resizing with fast_image_resize (SIMD convolution): the shorter-side resize of ingestion,
//! many frames at once on the private pool, and the crop-and-resize of fused reads
//! ([`crop_resize_into`]). The bilinear filter is a convolution whose support widens when
//! downscaling, like Pillow's `BILINEAR` that gulpio2 used, so downscaled frames are
//! antialiased, not point-sampled. A pure function of its input: the output never depends on
//! the number of threads.
//!
//! JPEG encoding is not here but in `jpeg::encode`: libjpeg-turbo, several times faster than
//! the pure-Rust jpeg-encoder crate (measured in docs/DECISIONS.md, "Writing").

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::pool::Runner;

/// A borrowed frame: `height * width * channels` bytes, rows packed, channels interleaved
/// (1 = gray, 3 = RGB).
#[derive(Clone, Copy)]
pub struct Pixels<'a> {
    pub data: &'a [u8],
    pub height: usize,
    pub width: usize,
    pub channels: usize,
}

impl<'a> Pixels<'a> {
    /// Checks the shape against the buffer, so the encoders below can trust it.
    pub fn new(data: &'a [u8], height: usize, width: usize, channels: usize) -> Result<Self> {
        if channels != 1 && channels != 3 {
            return Err(Error::InvalidArgument(format!(
                "frames must have 1 (gray) or 3 (RGB) channels, got {channels}"
            )));
        }
        if height == 0 || width == 0 {
            return Err(Error::InvalidArgument(format!(
                "frame has an empty shape {height}x{width}"
            )));
        }
        let need = height
            .checked_mul(width)
            .and_then(|n| n.checked_mul(channels))
            .ok_or_else(|| Error::InvalidArgument("frame shape overflows".into()))?;
        if data.len() != need {
            return Err(Error::InvalidArgument(format!(
                "frame buffer has {} bytes, shape {height}x{width}x{channels} needs {need}",
                data.len()
            )));
        }
        Ok(Pixels {
            data,
            height,
            width,
            channels,
        })
    }
}

/// An owned frame, as `resize` returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub data: Vec<u8>,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
}

impl Frame {
    pub fn pixels(&self) -> Pixels<'_> {
        Pixels {
            data: &self.data,
            height: self.height,
            width: self.width,
            channels: self.channels,
        }
    }
}

/// Output `(height, width)` when the shorter side becomes `size`: the longer side is
/// `floor(size * long / short)` (gulpio2's rule), at least 1. Integer arithmetic, so no
/// float rounding turns 128.0 into 127.
pub fn short_side_size(height: usize, width: usize, size: usize) -> (usize, usize) {
    let scale =
        |long: usize, short: usize| ((size as u128 * long as u128) / short as u128) as usize;
    if height < width {
        (size, scale(width, height).max(1))
    } else {
        (scale(height, width).max(1), size)
    }
}

/// Resizes `src` so its shorter side is `size` pixels (up or down).
pub fn resize(src: Pixels<'_>, size: usize) -> Result<Frame> {
    if size == 0 {
        return Err(Error::InvalidArgument(
            "resize size must be at least 1".into(),
        ));
    }
    let (height, width) = short_side_size(src.height, src.width, size);
    if (height, width) == (src.height, src.width) {
        return Ok(Frame {
            data: src.data.to_vec(),
            height,
            width,
            channels: src.channels,
        });
    }
    let dims = |h: usize, w: usize| -> Result<(u32, u32)> {
        let too_big = || Error::InvalidArgument(format!("frame {h}x{w} is too large to resize"));
        Ok((
            u32::try_from(w).map_err(|_| too_big())?,
            u32::try_from(h).map_err(|_| too_big())?,
        ))
    };
    let pixel_type = if src.channels == 1 {
        PixelType::U8
    } else {
        PixelType::U8x3
    };
    let (sw, sh) = dims(src.height, src.width)?;
    let (dw, dh) = dims(height, width)?;
    let src_img = ImageRef::new(sw, sh, src.data, pixel_type)
        .map_err(|e| Error::InvalidArgument(format!("resize input: {e}")))?;
    let mut dst = Image::new(dw, dh, pixel_type);
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
    Resizer::new()
        .resize(&src_img, &mut dst, &options)
        .map_err(|e| Error::InvalidArgument(format!("resize {sh}x{sw} to {dh}x{dw}: {e}")))?;
    Ok(Frame {
        data: dst.into_vec(),
        height,
        width,
        channels: src.channels,
    })
}

thread_local! {
    // A resizer keeps its scratch buffers between calls: one per decode thread.
    static RESIZER: std::cell::RefCell<Resizer> = std::cell::RefCell::new(Resizer::new());
}

/// Resizes the box `(left, top, width, height)` (fractional pixels) of the image `src` of
/// `(height, width, channels)` to `(out_height, out_width)` into `out`, antialiased as
/// [`resize`]. An integer box of the output's size is copied as it is.
pub fn crop_resize_into(
    src: &[u8],
    (sh, sw, c): (usize, usize, usize),
    (left, top, width, height): (f64, f64, f64, f64),
    (oh, ow): (usize, usize),
    out: &mut [u8],
) -> std::result::Result<(), String> {
    if src.len() != sh * sw * c || out.len() != oh * ow * c || !(c == 1 || c == 3) {
        return Err(format!(
            "resize of a {sw}x{sh}x{c} image ({} bytes) into {ow}x{oh} ({} bytes)",
            src.len(),
            out.len()
        ));
    }
    let whole = |v: f64| (v - v.round()).abs() < 1e-9;
    if [left, top, width, height].into_iter().all(whole)
        && (height.round() as usize, width.round() as usize) == (oh, ow)
        && left.round() as usize + ow <= sw
        && top.round() as usize + oh <= sh
    {
        let (x, y) = (left.round() as usize, top.round() as usize);
        for (r, row) in out.chunks_exact_mut(ow * c).enumerate() {
            let at = ((y + r) * sw + x) * c;
            row.copy_from_slice(&src[at..at + ow * c]);
        }
        return Ok(());
    }
    let pixel_type = if c == 1 {
        PixelType::U8
    } else {
        PixelType::U8x3
    };
    let dim = |v: usize| u32::try_from(v).map_err(|_| format!("image side {v} too large"));
    let src_img = ImageRef::new(dim(sw)?, dim(sh)?, src, pixel_type).map_err(|e| e.to_string())?;
    let mut dst =
        Image::from_slice_u8(dim(ow)?, dim(oh)?, out, pixel_type).map_err(|e| e.to_string())?;
    let options = ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
        .crop(left, top, width, height);
    RESIZER
        .with(|r| r.borrow_mut().resize(&src_img, &mut dst, &options))
        .map_err(|e| {
            format!("resize {sw}x{sh} ({width}x{height} at {left},{top}) to {ow}x{oh}: {e}")
        })
}

/// `resize` over many frames on `runner`.
pub fn resize_batch(frames: &[Pixels<'_>], size: usize, runner: &Runner) -> Result<Vec<Frame>> {
    let one = |(i, f): (usize, &Pixels<'_>)| resize(*f, size).map_err(|e| at_frame(i, e));
    match runner {
        Runner::Caller => frames.iter().enumerate().map(one).collect(),
        Runner::Pool(pool) => pool.install(|| frames.par_iter().enumerate().map(one).collect()),
    }
}

fn at_frame(i: usize, e: Error) -> Error {
    match e {
        Error::InvalidArgument(msg) => Error::InvalidArgument(format!("frame {i}: {msg}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gulpio2_size_rule() {
        assert_eq!(short_side_size(144, 256, 128), (128, 227));
        assert_eq!(short_side_size(256, 144, 128), (227, 128));
        assert_eq!(short_side_size(100, 100, 64), (64, 64));
        assert_eq!(short_side_size(1, 10_000, 1), (1, 10_000));
        assert_eq!(short_side_size(10_000, 1, 1), (10_000, 1));
    }

    #[test]
    fn flat_image_stays_flat() {
        let data = vec![77u8; 90 * 160 * 3];
        let src = Pixels::new(&data, 90, 160, 3).unwrap();
        let out = resize(src, 45).unwrap();
        assert_eq!((out.height, out.width, out.channels), (45, 80, 3));
        assert!(out.data.iter().all(|&v| v == 77));
    }

    #[test]
    fn bad_shapes_are_errors_not_panics() {
        let a = [0u8; 10];
        assert!(Pixels::new(&a, 2, 2, 3).is_err());
        assert!(Pixels::new(&a, 0, 2, 3).is_err());
        assert!(Pixels::new(&a, 5, 2, 2).is_err());
        assert!(Pixels::new(&a, usize::MAX, 2, 3).is_err());
    }

    #[test]
    fn batch_is_independent_of_threads() {
        let a: Vec<u8> = (0..40 * 70 * 3).map(|i| (i * 31 % 256) as u8).collect();
        let b: Vec<u8> = (0..33 * 17).map(|i| (i * 7 % 256) as u8).collect();
        let frames = [
            Pixels::new(&a, 40, 70, 3).unwrap(),
            Pixels::new(&b, 33, 17, 1).unwrap(),
        ];
        let one = resize_batch(&frames, 16, &Runner::Caller).unwrap();
        let two = resize_batch(&frames, 16, &crate::pool::runner(2).unwrap()).unwrap();
        assert_eq!(one, two);
        assert_eq!((one[1].height, one[1].width, one[1].channels), (31, 16, 1));
    }
}
