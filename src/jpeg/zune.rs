//! The zune-jpeg backend (builds without the `turbo` feature): strict mode, so a damaged
//! stream is an error, never a grey image. Gets frames vetted by `jpeg::decode_into`.

use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::errors::DecodeErrors;
use zune_jpeg::JpegDecoder;

use super::{header, mjpeg, DecodeFailure, Frame};
use crate::pixels::{luma, Colorspace};

fn options(strict: bool, w: usize, h: usize, out: ColorSpace) -> DecoderOptions {
    DecoderOptions::default()
        .set_strict_mode(strict)
        .set_max_width(w)
        .set_max_height(h)
        .jpeg_set_out_colorspace(out)
}

/// Decodes `frame` into `out` (exactly its size, checked by the caller).
pub(super) fn decode_into(jpeg: &[u8], frame: &Frame, out: &mut [u8]) -> Result<(), DecodeFailure> {
    // An MJPEG frame (no Huffman tables: the standard ones) is refused by zune-jpeg.
    let with_tables = mjpeg::with_standard_tables(jpeg);
    let jpeg = with_tables.as_deref().unwrap_or(jpeg);
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
    if !ends_with_eoi(jpeg) {
        return Err(DecodeFailure::Corrupt(
            "premature end of data: the stream has no end-of-image marker after its last scan"
                .into(),
        ));
    }
    // zune-jpeg 0.5 returns Ok, even in strict mode, when a scan ends early (a second SOS in
    // a one-scan image, a marker in the middle of the scan data), leaving the rows below
    // unwritten: uninitialised memory in a numpy array. Rows are written top to bottom, so
    // a canary in the last row that survives two decodes with different canaries means the
    // scan never got there. Costs one row's fill and compare (found by fuzzing).
    let row = out.len() / frame.height.max(1);
    let tail = out.len() - row;
    fill_canary(&mut out[tail..], 0);
    decode_checked(jpeg, frame, out)?;
    if is_canary(&out[tail..], 0) {
        fill_canary(&mut out[tail..], 1);
        decode_checked(jpeg, frame, out)?;
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
    header::adobe_segment(b).and_then(|(at, len)| (len < 14).then_some(at))
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

fn decode_checked(jpeg: &[u8], frame: &Frame, out: &mut [u8]) -> Result<(), DecodeFailure> {
    let (h, w, info) = (frame.height, frame.width, &frame.info);
    let gray = frame.colorspace() == Colorspace::Gray;
    // zune-jpeg's luma output covers baseline YCbCr and gray; for CMYK, YCCK, RGB-coded and
    // progressive colour JPEGs gray output is made from its RGB output.
    let mut luma_direct =
        gray && (info.components == 1 || (info.components == 3 && !info.is_progressive()));
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
    if gray && !luma_direct {
        let mut rgb = vec![0u8; h * w * 3];
        scan(&mut dec, w, h, ColorSpace::RGB, &mut rgb)?;
        for (g, px) in out.iter_mut().zip(rgb.chunks_exact(3)) {
            *g = luma(px[0] as u32, px[1] as u32, px[2] as u32);
        }
        return Ok(());
    }
    let cs = if gray {
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
    // As in `scan`: a panic inside zune-jpeg is damage, not a crash.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dec.decode_headers())) {
        Ok(result) => result.map_err(failure)?,
        Err(_) => {
            return Err(DecodeFailure::Corrupt(
                "the JPEG headers are damaged (zune-jpeg gave up on them)".into(),
            ))
        }
    }
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
    // zune-jpeg 0.5.15 panics on some damaged streams (an `unwrap` in its AVX2 IDCT, found by
    // fuzzing: fuzz/artifacts-found/jpeg-zune-idct-panic.jpg). A panic must never reach the
    // caller (or Python): it becomes a decode error like any other damage.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dec.decode_into(out))) {
        Ok(result) => result.map_err(failure),
        Err(_) => Err(DecodeFailure::Corrupt(
            "the JPEG data is damaged (zune-jpeg gave up on it)".into(),
        )),
    }
}

fn failure(e: DecodeErrors) -> DecodeFailure {
    match e {
        DecodeErrors::Unsupported(s) => DecodeFailure::Unsupported(format!("{s:?}")),
        other => DecodeFailure::Corrupt(other.to_string()),
    }
}
