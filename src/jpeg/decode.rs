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

/// The largest frame decoded, in pixels (8K UHD is 33 M). Checked against the header before
/// anything is allocated.
pub const MAX_FRAME_PIXELS: usize = 1 << 26;

/// Output geometry of a frame: `(height, width, channels)`.
pub fn output_shape(
    jpeg: &[u8],
    want: Colorspace,
) -> Result<(usize, usize, usize, JpegInfo), DecodeFailure> {
    let info = read_info(jpeg).map_err(DecodeFailure::Corrupt)?;
    // libjpeg-turbo decodes arithmetic coding; zune-jpeg does not.
    let arithmetic = info.is_arithmetic() && BACKEND == Backend::Zune;
    if arithmetic || info.is_lossless() || info.precision != 8 {
        return Err(DecodeFailure::Unsupported(format!(
            "{}-bit {} JPEG (SOF 0xFF{:02X}) is not supported by the built-in decoder; pass \
             fallback_decoder= or jpeg_decoder= to use another one",
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
    let (h, w) = (info.height as usize, info.width as usize);
    if h * w > MAX_FRAME_PIXELS {
        return Err(DecodeFailure::Corrupt(format!(
            "the frame header declares {w}x{h}, over the maximum of {MAX_FRAME_PIXELS} pixels"
        )));
    }
    Ok((h, w, want.channels_for(&info), info))
}

fn options(strict: bool, w: usize, h: usize, out: ColorSpace) -> DecoderOptions {
    DecoderOptions::default()
        .set_strict_mode(strict)
        .set_max_width(w)
        .set_max_height(h)
        .jpeg_set_out_colorspace(out)
}

/// Decodes into `out`, which must hold exactly `height * width * channels` bytes as given by
/// [`output_shape`].
///
/// Headers are parsed leniently and the entropy-coded data strictly: stray bytes between
/// segments or a short APP segment are what libjpeg only warns about (the pixels are intact),
/// while a damaged or cut scan must be an error, never a partly grey image.
pub fn decode_into(jpeg: &[u8], want: Colorspace, out: &mut [u8]) -> Result<(), DecodeFailure> {
    #[cfg(feature = "turbo")]
    return super::turbo::decode_into(jpeg, want, out);
    #[cfg(not(feature = "turbo"))]
    decode_into_zune(jpeg, want, out)
}

/// The zune-jpeg path of [`decode_into`], whatever the build's default backend.
pub fn decode_into_zune(
    jpeg: &[u8],
    want: Colorspace,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    let patched;
    let jpeg = match short_adobe_segment(jpeg) {
        // zune-jpeg refuses an "Adobe" APP14 segment too short to hold its fields; libjpeg
        // ignores such a segment. Decode a copy in which it is relabelled APP15 (skipped).
        Some(at) => {
            let mut copy = jpeg.to_vec();
            copy[at] = 0xEF;
            patched = copy;
            &patched[..]
        }
        None => jpeg,
    };
    // zune-jpeg 0.5 returns Ok, even in strict mode, when a scan ends early (a second SOS in
    // a one-scan image, a marker in the middle of the scan data), leaving the rows below
    // unwritten: uninitialised memory in a numpy array. Rows are written top to bottom, so
    // a canary in the last row that survives two decodes with different canaries means the
    // scan never got there. Costs one row's fill and compare (found by fuzzing).
    let row = out.len() / output_shape(jpeg, want)?.0.max(1);
    let tail = out.len() - row;
    fill_canary(&mut out[tail..], 0);
    decode_checked(jpeg, want, out)?;
    if is_canary(&out[tail..], 0) {
        fill_canary(&mut out[tail..], 1);
        decode_checked(jpeg, want, out)?;
        if is_canary(&out[tail..], 1) {
            return Err(DecodeFailure::Corrupt(
                "the scan data ends before the last row (a marker inside the scan)".into(),
            ));
        }
    }
    Ok(())
}

fn canary(i: usize, seed: u8) -> u8 {
    ((i * 37 + 11) as u8).wrapping_add(seed.wrapping_mul(101)) ^ 0x5A
}

fn fill_canary(buf: &mut [u8], seed: u8) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = canary(i, seed);
    }
}

fn is_canary(buf: &[u8], seed: u8) -> bool {
    buf.iter().enumerate().all(|(i, &b)| b == canary(i, seed))
}

/// Position of the marker byte of an "Adobe" APP14 segment shorter than its 12 data bytes.
fn short_adobe_segment(b: &[u8]) -> Option<usize> {
    super::header::adobe_segment(b).and_then(|(at, len)| (len < 14).then_some(at))
}

/// zune-jpeg decodes a stream cut a few bytes short (the missing bits read as zeros) where
/// libjpeg reports "premature end of data". Entropy-coded data never holds `FF D9` (an `FF`
/// there is followed by `00` or a restart marker), so a whole stream has an EOI with no SOS
/// after it. Found from the end, so whole streams cost only their trailing bytes.
fn ends_with_eoi(jpeg: &[u8]) -> bool {
    match jpeg.windows(2).rposition(|w| w == [0xFF, 0xD9]) {
        Some(eoi) => !jpeg[eoi..].windows(2).any(|w| w == [0xFF, 0xDA]),
        None => false,
    }
}

fn decode_checked(jpeg: &[u8], want: Colorspace, out: &mut [u8]) -> Result<(), DecodeFailure> {
    let (h, w, c, info) = output_shape(jpeg, want)?;
    if !ends_with_eoi(jpeg) {
        return Err(DecodeFailure::Corrupt(
            "premature end of data: the stream has no end-of-image marker after its last scan"
                .into(),
        ));
    }
    if out.len() != h * w * c {
        return Err(DecodeFailure::Corrupt(format!(
            "the JPEG header declares {w}x{h} with {c} output channel(s) ({} bytes) but {} \
             bytes were expected (does the index describe another frame?)",
            h * w * c,
            out.len()
        )));
    }
    // zune-jpeg's luma output covers baseline YCbCr and gray; for CMYK, YCCK, RGB-coded and
    // progressive colour JPEGs gray output is made from its RGB output (BT.601 weights, as
    // libjpeg converts).
    let progressive = matches!(info.sof, 0xC2 | 0xC6 | 0xCA | 0xCE);
    let mut luma_direct =
        c == 1 && (info.components == 1 || (info.components == 3 && !progressive));
    let mut dec = headers(
        jpeg,
        w,
        h,
        if luma_direct {
            ColorSpace::Luma
        } else {
            ColorSpace::RGB
        },
    )?;
    if luma_direct && info.components == 3 && dec.input_colorspace() != Some(ColorSpace::YCbCr) {
        luma_direct = false;
        dec = headers(jpeg, w, h, ColorSpace::RGB)?;
    }
    if c == 1 && !luma_direct {
        let mut rgb = vec![0u8; h * w * 3];
        scan(&mut dec, w, h, ColorSpace::RGB, &mut rgb)?;
        for (g, px) in out.iter_mut().zip(rgb.chunks_exact(3)) {
            let y = 19595 * px[0] as u32 + 38470 * px[1] as u32 + 7471 * px[2] as u32;
            *g = ((y + 32768) >> 16) as u8;
        }
        return Ok(());
    }
    let cs = if c == 1 {
        ColorSpace::Luma
    } else {
        ColorSpace::RGB
    };
    scan(&mut dec, w, h, cs, out)
}

fn headers(
    jpeg: &[u8],
    w: usize,
    h: usize,
    cs: ColorSpace,
) -> Result<JpegDecoder<ZCursor<&[u8]>>, DecodeFailure> {
    let mut dec = JpegDecoder::new_with_options(ZCursor::new(jpeg), options(false, w, h, cs));
    dec.decode_headers().map_err(failure)?;
    Ok(dec)
}

fn scan(
    dec: &mut JpegDecoder<ZCursor<&[u8]>>,
    w: usize,
    h: usize,
    cs: ColorSpace,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    dec.set_options(options(true, w, h, cs));
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
