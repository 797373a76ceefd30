//! JPEG: header inspection (for the index) and strict decoding.
//!
//! This module owns the JPEG decoder contract whatever the backend: the output shape for the
//! colourspace asked, the limits checked before anything is allocated (the frame size, as
//! every decoder checks it, `crate::pixels`; the JPEG features the backend decodes), and the
//! exact output size. The backends, `zune` (zune-jpeg, pure Rust) and `turbo` (libjpeg-turbo,
//! cargo feature `turbo`), are siblings that only decode a frame already vetted here.

#[cfg(feature = "turbo")]
pub mod encode;
pub mod fused;
pub mod header;
pub mod mjpeg;
pub mod restart;
#[cfg(feature = "turbo")]
mod turbo;
#[cfg(not(feature = "turbo"))]
mod zune;

pub use fused::{decode_reframed, decode_reframed_with};
// What the decoders here take and check, named where JPEG callers look for them; they belong
// to `pixels`, which every decoder shares.
pub use crate::pixels::{check_frame_size, Colorspace, CropBox, Reframe, MAX_FRAME_PIXELS};

use header::read_info;
pub use header::JpegInfo;

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
            channels: want.channels(info.components),
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
