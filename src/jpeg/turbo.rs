//! The libjpeg-turbo backend (cargo feature `turbo`), through TurboJPEG 3's API built from
//! source by turbojpeg-sys. Gets frames vetted by `jpeg::decode_into` (shape, limits, output
//! size) and must be as strict as the contract there says.
//!
//! Strictness: `TJPARAM_STOPONWARNING` is off, because libjpeg also warns about harmless
//! metadata (an ICC profile after the frame header, odd JFIF/Adobe segments) that Pillow
//! ignores too. Instead every warning is judged after the call (`check`, `benign`): all but
//! those metadata warnings ("premature end of data", "corrupt JPEG data: N extraneous bytes",
//! ...) are errors, so a cut or damaged scan is never returned as a partly grey image. Stray
//! bytes between header segments, which libjpeg reports with the same "extraneous bytes"
//! warning, are removed before decoding (`header::without_header_junk`): they are harmless.
//! `TJPARAM_MAXPIXELS` and `TJPARAM_SCANLIMIT` bound memory and time on hostile input
//! (progressive scan bombs).

use std::ffi::{c_int, CStr};

use turbojpeg_sys as tj;

use super::{header, DecodeFailure, Frame, Precision};
use crate::pixels::{luma, Colorspace, MAX_FRAME_PIXELS};

/// A progressive JPEG needs ~10 scans; thousands are only ever an attack on decode time.
const SCAN_LIMIT: c_int = 500;

struct Handle(tj::tjhandle);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { tj::tj3Destroy(self.0) }
    }
}

fn last_error(h: tj::tjhandle) -> DecodeFailure {
    // SAFETY: tj3GetErrorStr returns a NUL-terminated string owned by the handle.
    let msg = unsafe { CStr::from_ptr(tj::tj3GetErrorStr(h)) }
        .to_string_lossy()
        .trim()
        .to_string();
    if msg.contains("Unsupported") || msg.contains("not supported") {
        DecodeFailure::Unsupported(format!("libjpeg-turbo: {msg}"))
    } else {
        DecodeFailure::Corrupt(format!("libjpeg-turbo: {msg}"))
    }
}

fn set(h: tj::tjhandle, param: tj::TJPARAM, value: c_int) -> Result<(), DecodeFailure> {
    // SAFETY: h is a live decompressor handle.
    if unsafe { tj::tj3Set(h, param as c_int, value) } != 0 {
        return Err(last_error(h));
    }
    Ok(())
}

/// Decodes `frame` into `out` (exactly its size, checked by the caller).
pub(super) fn decode_into(
    jpeg: &[u8],
    frame: &Frame,
    precision: Precision,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    let dims = (frame.width, frame.height);
    if frame.info.components == 4 {
        return decode_cmyk(jpeg, dims, frame.channels, precision, out);
    }
    let format = match frame.colorspace() {
        Colorspace::Gray => tj::TJPF_TJPF_GRAY,
        _ => tj::TJPF_TJPF_RGB,
    };
    decode_whole(jpeg, dims, format, precision, out)
}

/// TurboJPEG hands CMYK/YCCK JPEGs out only as CMYK; convert as Pillow does
/// (`R = (255 - C)(255 - K) / 255`), where Adobe-written files store the inks inverted.
fn decode_cmyk(
    jpeg: &[u8],
    (w, h): (usize, usize),
    channels: usize,
    precision: Precision,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    let mut cmyk = vec![0u8; h * w * 4];
    decode_whole(jpeg, (w, h), tj::TJPF_TJPF_CMYK, precision, &mut cmyk)?;
    let inverted = header::adobe_segment(jpeg).is_some();
    let ink = |v: u8| -> u32 {
        if inverted {
            v as u32
        } else {
            255 - v as u32
        }
    };
    let mix = |a: u8, k: u32| -> u32 { (ink(a) * k + 127) / 255 };
    for (o, px) in out.chunks_exact_mut(channels).zip(cmyk.chunks_exact(4)) {
        let k = ink(px[3]);
        let (r, g, b) = (mix(px[0], k), mix(px[1], k), mix(px[2], k));
        if channels == 1 {
            o[0] = luma(r, g, b);
        } else {
            o[0] = r as u8;
            o[1] = g as u8;
            o[2] = b as u8;
        }
    }
    Ok(())
}

fn decode_whole(
    jpeg: &[u8],
    dims: (usize, usize),
    format: tj::TJPF,
    precision: Precision,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    let full = Region {
        x: 0,
        y: 0,
        w: dims.0,
        h: dims.1,
    };
    with_decompressor(|handle| {
        let how = How {
            eighths: 8,
            precision,
        };
        decompress(handle, jpeg, dims, format, how, full, Dest::Exact(out)).map(|_| ())
    })
}

/// A rectangle of a frame decoded at some scale, in pixels of that scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    pub x: usize,
    pub y: usize,
    pub w: usize,
    pub h: usize,
}

/// Decodes `region` of `frame` scaled by `eighths / 8` (1..=8: libjpeg-turbo scales in the
/// DCT domain, skipping the IDCT work of the dropped frequencies) into `scratch`, resized to
/// hold it. The left edge of `region` must be a multiple of the scaled MCU width. Rows below
/// the region are not decoded at all, rows above it only entropy-decoded. Returns the region
/// decoded: `region`, or the whole scaled frame when libjpeg-turbo cannot crop this frame
/// (a chroma subsampling it has no name for).
pub(super) fn decode_region(
    jpeg: &[u8],
    frame: &Frame,
    eighths: usize,
    precision: Precision,
    region: Region,
    scratch: &mut Vec<u8>,
) -> Result<Region, DecodeFailure> {
    let format = match frame.colorspace() {
        Colorspace::Gray => tj::TJPF_TJPF_GRAY,
        _ => tj::TJPF_TJPF_RGB,
    };
    with_decompressor(|handle| {
        decompress(
            handle,
            jpeg,
            (frame.width, frame.height),
            format,
            How { eighths, precision },
            region,
            Dest::Grow(scratch),
        )
    })
}

/// Runs `f` with a decompressor made for this frame alone. One kept for the thread's next
/// frame carries state into it, as libjpeg is designed to (tables persist across images, for
/// abbreviated datastreams), and both bugs we found in libjpeg-turbo lived there: a frame that
/// uses a Huffman or quantization table it does not define first (MJPEG frames rely on the
/// standard tables) decoded with the previous frame's, and libjpeg-turbo 3.1.0 left the colour
/// converter pointer of a merged-upsampler image aimed at the previous image's freed memory,
/// which row skipping wrote through (docs/RELIABILITY.md, findings 5 and 6). A new one per
/// frame costs nothing measurable (docs/DECISIONS.md, "Every frame gets a libjpeg-turbo
/// decompressor of its own").
fn with_decompressor<T>(
    f: impl FnOnce(tj::tjhandle) -> Result<T, DecodeFailure>,
) -> Result<T, DecodeFailure> {
    // SAFETY: plain constructor; null means failure.
    let p = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as c_int) };
    if p.is_null() {
        return Err(DecodeFailure::Corrupt(
            "cannot start a libjpeg-turbo decompressor".into(),
        ));
    }
    let handle = Handle(p);
    f(handle.0)
}

/// The scaling factor `eighths / 8` in the reduced form TurboJPEG looks up.
fn scaling_factor(eighths: usize) -> tj::tjscalingfactor {
    let e = eighths.clamp(1, 8) as c_int;
    let g = [8, 4, 2, 1]
        .into_iter()
        .find(|g| e % g == 0 && 8 % g == 0)
        .unwrap_or(1);
    tj::tjscalingfactor {
        num: e / g,
        denom: 8 / g,
    }
}

/// Where decompressed pixels go: a buffer of exactly the right size, or one sized to fit.
enum Dest<'a> {
    Exact(&'a mut [u8]),
    Grow(&'a mut Vec<u8>),
}

impl Dest<'_> {
    fn get(&mut self, len: usize) -> Option<&mut [u8]> {
        match self {
            Dest::Exact(b) => (b.len() == len).then_some(&mut b[..]),
            Dest::Grow(v) => {
                v.resize(len, 0);
                Some(&mut v[..])
            }
        }
    }
}

/// How a frame is decompressed: at `eighths / 8` of its size, at `precision`.
#[derive(Debug, Clone, Copy)]
struct How {
    eighths: usize,
    precision: Precision,
}

/// Decompresses `region` of the frame scaled by `how.eighths / 8` into `out`.
fn decompress(
    handle: tj::tjhandle,
    jpeg: &[u8],
    (w, h): (usize, usize),
    format: tj::TJPF,
    How { eighths, precision }: How,
    region: Region,
    mut out: Dest<'_>,
) -> Result<Region, DecodeFailure> {
    // Stray bytes between header segments are harmless, but libjpeg warns about them as it
    // does about a damaged scan: decode without them, so that every warning left is damage.
    let cleaned = header::without_header_junk(jpeg);
    let jpeg = cleaned.as_deref().unwrap_or(jpeg);
    {
        // Warnings are judged after the call (see `benign`), not stopped on: libjpeg also
        // warns about harmless metadata, such as an ICC profile after the frame header.
        set(handle, tj::TJPARAM_TJPARAM_STOPONWARNING, 0)?;
        set(handle, tj::TJPARAM_TJPARAM_SCANLIMIT, SCAN_LIMIT)?;
        let fast = c_int::from(precision == Precision::Fast);
        set(handle, tj::TJPARAM_TJPARAM_FASTDCT, fast)?;
        set(handle, tj::TJPARAM_TJPARAM_FASTUPSAMPLE, fast)?;
        set(
            handle,
            tj::TJPARAM_TJPARAM_MAXPIXELS,
            c_int::try_from(MAX_FRAME_PIXELS).unwrap_or(c_int::MAX),
        )?;
        let len = tj::size_t::try_from(jpeg.len())
            .map_err(|_| DecodeFailure::Corrupt("JPEG too large".into()))?;
        // SAFETY: jpeg is a valid slice for the call's duration.
        let rc = unsafe { tj::tj3DecompressHeader(handle, jpeg.as_ptr(), len) };
        check(handle, rc)?;
        // SAFETY: reading parameters of a live handle.
        let (tw, th) = unsafe {
            (
                tj::tj3Get(handle, tj::TJPARAM_TJPARAM_JPEGWIDTH as c_int),
                tj::tj3Get(handle, tj::TJPARAM_TJPARAM_JPEGHEIGHT as c_int),
            )
        };
        if (tw as i64, th as i64) != (w as i64, h as i64) {
            return Err(DecodeFailure::Corrupt(format!(
                "libjpeg-turbo reads a {tw}x{th} frame where the header parser read {w}x{h}"
            )));
        }
        let channels = match format {
            tj::TJPF_TJPF_GRAY => 1,
            tj::TJPF_TJPF_CMYK => 4,
            _ => 3,
        };
        let factor = scaling_factor(eighths);
        // SAFETY: a live handle with the header read; the factor is one TurboJPEG lists.
        check(handle, unsafe { tj::tj3SetScalingFactor(handle, factor) })?;
        let scaled = |d: usize| (d * factor.num as usize).div_ceil(factor.denom as usize);
        let (sw, sh) = (scaled(w), scaled(h));
        let whole = Region {
            x: 0,
            y: 0,
            w: sw,
            h: sh,
        };
        // SAFETY: reading a parameter of a live handle.
        let subsamp = unsafe { tj::tj3Get(handle, tj::TJPARAM_TJPARAM_SUBSAMP as c_int) };
        let inside =
            region.w > 0 && region.h > 0 && region.x + region.w <= sw && region.y + region.h <= sh;
        let region = if subsamp == tj::TJSAMP_TJSAMP_UNKNOWN || !inside {
            whole
        } else {
            region
        };
        let tjregion = |r: Region| -> Result<tj::tjregion, DecodeFailure> {
            let c = |v: usize| {
                c_int::try_from(v).map_err(|_| DecodeFailure::Corrupt("frame too large".into()))
            };
            Ok(if r == whole {
                tj::tjregion {
                    x: 0,
                    y: 0,
                    w: 0,
                    h: 0,
                }
            } else {
                tj::tjregion {
                    x: c(r.x)?,
                    y: c(r.y)?,
                    w: c(r.w)?,
                    h: c(r.h)?,
                }
            })
        };
        // SAFETY: as above; the region lies inside the scaled frame (checked just before).
        check(handle, unsafe {
            tj::tj3SetCroppingRegion(handle, tjregion(region)?)
        })?;
        let pitch = c_int::try_from(region.w * channels)
            .map_err(|_| DecodeFailure::Corrupt("frame row too wide".into()))?;
        let Some(buf) = out.get(region.w * region.h * channels) else {
            return Err(DecodeFailure::Corrupt(format!(
                "the output buffer does not hold a {}x{} frame",
                region.w, region.h
            )));
        };
        // SAFETY: buf holds exactly region.h rows of `pitch` bytes, which is what
        // tj3Decompress8 writes for that region in `format`.
        let rc = unsafe {
            tj::tj3Decompress8(handle, jpeg.as_ptr(), len, buf.as_mut_ptr(), pitch, format)
        };
        let result = check(handle, rc);
        // Back to whole frames at full size for the next call on this handle.
        // SAFETY: a live handle; these are the default settings.
        unsafe {
            tj::tj3SetCroppingRegion(
                handle,
                tj::tjregion {
                    x: 0,
                    y: 0,
                    w: 0,
                    h: 0,
                },
            );
            tj::tj3SetScalingFactor(handle, tj::tjscalingfactor { num: 1, denom: 1 });
        }
        result.map(|()| region)
    }
}

/// TurboJPEG returns -1 for warnings as well as errors (with STOPONWARNING off the call has
/// completed); only benign warnings count as success.
fn check(handle: tj::tjhandle, rc: c_int) -> Result<(), DecodeFailure> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: reading the state of a live handle.
    let warning = unsafe { tj::tj3GetErrorCode(handle) } == tj::TJERR_TJERR_WARNING as c_int;
    let failure = last_error(handle);
    if warning && benign(failure.message()) {
        Ok(())
    } else {
        Err(failure)
    }
}

/// Warnings about metadata libjpeg skips anyway; every other warning (premature end of data,
/// corrupt entropy data, extraneous bytes, ...) means the pixels are not what was encoded.
fn benign(message: &str) -> bool {
    ["bad ICC marker", "JFIF", "Adobe", "thumbnail"]
        .iter()
        .any(|m| message.contains(m))
}
