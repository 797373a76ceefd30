//! JPEG: header inspection (for the index) and strict decoding.
//!
//! This module owns the decoder contract whatever the backend: the output colourspace and
//! shape, the limits checked before anything is allocated, the exact output size, and the
//! grey conversion. The backends, `zune` (zune-jpeg, pure Rust) and `turbo` (libjpeg-turbo,
//! cargo feature `turbo`), are siblings that only decode a frame already vetted here.

#[cfg(feature = "turbo")]
pub mod encode;
pub mod header;
pub mod mjpeg;
pub mod reframe;
pub mod restart;
#[cfg(feature = "turbo")]
mod turbo;

pub use reframe::{decode_reframed, decode_reframed_with, reframe_pixels, CropBox, Reframe};
#[cfg(not(feature = "turbo"))]
mod zune;

use header::read_info;
pub use header::JpegInfo;

/// Output colour layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colorspace {
    /// 1 channel for grayscale JPEGs, 3 (RGB) for everything else.
    Auto,
    Rgb,
    Gray,
}

impl Colorspace {
    pub fn channels_for(self, info: &JpegInfo) -> usize {
        match self {
            Colorspace::Auto if info.components == 1 => 1,
            Colorspace::Auto | Colorspace::Rgb => 3,
            Colorspace::Gray => 1,
        }
    }
}

/// How libjpeg-turbo computes the pixels: accuracy against speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// The accurate integer IDCT and smooth ("fancy") chroma upsampling: libjpeg's defaults.
    #[default]
    Accurate,
    /// The fast integer IDCT and chroma upsampling by replication, about 10% less work per
    /// frame: what gulpio2 decodes with (simplejpeg's `fastdct=True, fastupsample=True`), so
    /// the pixels are gulpio2's. The zune-jpeg build has no such mode and decodes accurately.
    Fast,
}

/// The failure type lives with the core's error type (`crate::error`), which wraps it.
pub use crate::error::DecodeFailure;

/// Which library decodes: libjpeg-turbo when built with the `turbo` feature (what the Python
/// wheel ships), else zune-jpeg (pure Rust).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Zune,
    Turbo,
}

pub const BACKEND: Backend = if cfg!(feature = "turbo") {
    Backend::Turbo
} else {
    Backend::Zune
};

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Zune => "zune-jpeg",
            Backend::Turbo => "libjpeg-turbo",
        }
    }
}

/// The largest frame decoded, in pixels (8K UHD is 33 M). Checked against the header (and
/// against sizes an index declares) before anything is allocated.
pub const MAX_FRAME_PIXELS: usize = 1 << 26;

/// `Err` with a message if a `w` x `h` frame is over [`MAX_FRAME_PIXELS`].
pub fn check_frame_size(w: usize, h: usize) -> Result<(), String> {
    match w.checked_mul(h) {
        Some(px) if px <= MAX_FRAME_PIXELS => Ok(()),
        _ => Err(format!(
            "the frame is declared {w}x{h}, over the maximum of {MAX_FRAME_PIXELS} pixels"
        )),
    }
}

/// A frame vetted for decoding: its header, and the output geometry for the colourspace asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    pub info: JpegInfo,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
}

impl Frame {
    fn of(jpeg: &[u8], want: Colorspace) -> Result<Frame, DecodeFailure> {
        let info = read_info(jpeg).map_err(DecodeFailure::Corrupt)?;
        // libjpeg-turbo decodes arithmetic coding; zune-jpeg does not.
        let arithmetic = info.is_arithmetic() && BACKEND == Backend::Zune;
        if arithmetic || info.is_lossless() || info.precision != 8 {
            return Err(DecodeFailure::Unsupported(format!(
                "{}-bit {} JPEG (SOF 0xFF{:02X}) is not supported by the built-in decoder; \
                 pass fallback_decoder= or jpeg_decoder= to use another one",
                info.precision,
                if info.is_arithmetic() {
                    "arithmetic-coded"
                } else if info.is_lossless() {
                    "lossless"
                } else {
                    "Huffman-coded"
                },
                info.sof
            )));
        }
        let (height, width) = (info.height as usize, info.width as usize);
        check_frame_size(width, height).map_err(DecodeFailure::Corrupt)?;
        Ok(Frame {
            info,
            height,
            width,
            channels: want.channels_for(&info),
        })
    }

    /// The colourspace the backend must produce: `Auto` resolved by the channel count.
    fn colorspace(&self) -> Colorspace {
        if self.channels == 1 {
            Colorspace::Gray
        } else {
            Colorspace::Rgb
        }
    }

    fn len(&self) -> usize {
        self.height * self.width * self.channels
    }
}

/// Output geometry of a frame: `(height, width, channels, header)`.
pub fn output_shape(
    jpeg: &[u8],
    want: Colorspace,
) -> Result<(usize, usize, usize, JpegInfo), DecodeFailure> {
    let f = Frame::of(jpeg, want)?;
    Ok((f.height, f.width, f.channels, f.info))
}

/// Decodes into `out`, which must hold exactly `height * width * channels` bytes as given by
/// [`output_shape`].
///
/// Headers are parsed leniently and the entropy-coded data strictly: stray bytes between
/// segments or a short APP segment are what libjpeg only warns about (the pixels are intact),
/// while a damaged or cut scan must be an error, never a partly grey image.
pub fn decode_into(jpeg: &[u8], want: Colorspace, out: &mut [u8]) -> Result<(), DecodeFailure> {
    decode_into_with(jpeg, want, Precision::Accurate, out)
}

/// [`decode_into`] at the given [`Precision`].
pub fn decode_into_with(
    jpeg: &[u8],
    want: Colorspace,
    precision: Precision,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    let frame = Frame::of(jpeg, want)?;
    if out.len() != frame.len() {
        return Err(DecodeFailure::Corrupt(format!(
            "the JPEG header declares {}x{} with {} output channel(s) ({} bytes) but {} bytes \
             were expected (does the index describe another frame?)",
            frame.width,
            frame.height,
            frame.channels,
            frame.len(),
            out.len()
        )));
    }
    #[cfg(feature = "turbo")]
    return turbo::decode_into(jpeg, &frame, precision, out);
    #[cfg(not(feature = "turbo"))]
    {
        let _ = precision; // zune-jpeg decodes accurately only
        zune::decode_into(jpeg, &frame, out)
    }
}

/// Convenience: decode into a new buffer; returns `(pixels, height, width, channels)`.
pub fn decode(
    jpeg: &[u8],
    want: Colorspace,
) -> Result<(Vec<u8>, usize, usize, usize), DecodeFailure> {
    let (h, w, c, _) = output_shape(jpeg, want)?;
    let mut out = vec![0u8; h * w * c];
    decode_into(jpeg, want, &mut out)?;
    Ok((out, h, w, c))
}

/// Grey from RGB with BT.601 weights in 16-bit fixed point, rounded, as libjpeg converts.
pub(crate) fn luma(r: u32, g: u32, b: u32) -> u8 {
    ((19595 * r + 38470 * g + 7471 * b + 32768) >> 16) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luma_matches_libjpeg_weights() {
        assert_eq!(luma(0, 0, 0), 0);
        assert_eq!(luma(255, 255, 255), 255);
        assert_eq!(luma(255, 0, 0), 76);
        assert_eq!(luma(0, 255, 0), 150);
        assert_eq!(luma(0, 0, 255), 29);
    }

    #[test]
    fn frame_size_limit() {
        assert!(check_frame_size(8192, 8192).is_ok());
        assert!(check_frame_size(8192, 8193).is_err());
        assert!(check_frame_size(usize::MAX, 2).is_err());
    }
}
