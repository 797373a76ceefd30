//! Single-frame JPEG decoding with zune-jpeg in strict mode (a damaged stream is an error,
//! never a grey image). The parallel batch engine builds on `decode_into`.

use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::errors::DecodeErrors;
use zune_jpeg::JpegDecoder;

use super::header::{read_info, JpegInfo};

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeFailure {
    /// A valid JPEG using a feature zune-jpeg lacks (arithmetic coding, 12-bit, lossless).
    Unsupported(String),
    /// Damaged or not a JPEG.
    Corrupt(String),
}

impl DecodeFailure {
    pub fn message(&self) -> &str {
        match self {
            DecodeFailure::Unsupported(m) | DecodeFailure::Corrupt(m) => m,
        }
    }
}

/// Output geometry of a frame: `(height, width, channels)`.
pub fn output_shape(
    jpeg: &[u8],
    want: Colorspace,
) -> Result<(usize, usize, usize, JpegInfo), DecodeFailure> {
    let info = read_info(jpeg).map_err(DecodeFailure::Corrupt)?;
    if info.is_arithmetic() || info.is_lossless() || info.precision != 8 {
        return Err(DecodeFailure::Unsupported(format!(
            "{}-bit {} JPEG (SOF 0xFF{:02X}) is not supported by the built-in decoder; pass \
             jpeg_decoder= to use another one",
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
    Ok((
        info.height as usize,
        info.width as usize,
        want.channels_for(&info),
        info,
    ))
}

/// Decodes into `out`, which must hold exactly `height * width * channels` bytes as given by
/// [`output_shape`].
pub fn decode_into(jpeg: &[u8], want: Colorspace, out: &mut [u8]) -> Result<(), DecodeFailure> {
    let (h, w, c, _) = output_shape(jpeg, want)?;
    if out.len() != h * w * c {
        return Err(DecodeFailure::Corrupt(format!(
            "the JPEG header declares {w}x{h} with {c} output channel(s) ({} bytes) but {} \
             bytes were expected (does the index describe another frame?)",
            h * w * c,
            out.len()
        )));
    }
    let cs = if c == 1 {
        ColorSpace::Luma
    } else {
        ColorSpace::RGB
    };
    let options = DecoderOptions::default()
        .set_strict_mode(true)
        .set_max_width(w)
        .set_max_height(h)
        .jpeg_set_out_colorspace(cs);
    let mut dec = JpegDecoder::new_with_options(ZCursor::new(jpeg), options);
    dec.decode_headers().map_err(failure)?;
    let got = dec
        .output_buffer_size()
        .ok_or_else(|| DecodeFailure::Corrupt("headers did not decode".into()))?;
    if got != out.len() {
        return Err(DecodeFailure::Corrupt(format!(
            "decoder wants {got} output bytes, header says {}",
            out.len()
        )));
    }
    dec.decode_into(out).map_err(failure)
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

fn failure(e: DecodeErrors) -> DecodeFailure {
    match e {
        DecodeErrors::Unsupported(s) => DecodeFailure::Unsupported(format!("{s:?}")),
        other => DecodeFailure::Corrupt(other.to_string()),
    }
}
