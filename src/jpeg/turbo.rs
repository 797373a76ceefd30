//! The libjpeg-turbo backend (cargo feature `turbo`), through TurboJPEG 3's API built from
//! source by turbojpeg-sys. Gets frames vetted by `jpeg::decode_into` (shape, limits, output
//! size) and must be as strict as the contract there says.
//!
//! Strictness: `TJPARAM_STOPONWARNING` is off, because libjpeg also warns about harmless
//! metadata (an ICC profile after the frame header, odd JFIF/Adobe segments) that Pillow
//! ignores too. Instead every warning is judged after the call (`check`, `benign`): all but
//! those metadata warnings ("premature end of data", "corrupt JPEG data: N extraneous bytes",
//! ...) are errors, so a cut or damaged scan is never returned as a partly grey image.
//! `TJPARAM_MAXPIXELS` and `TJPARAM_SCANLIMIT` bound memory and time on hostile input
//! (progressive scan bombs).

use std::cell::RefCell;
use std::ffi::{c_int, CStr};

use turbojpeg_sys as tj;

use super::{header, luma, Colorspace, DecodeFailure, Frame, MAX_FRAME_PIXELS};

/// A progressive JPEG needs ~10 scans; thousands are only ever an attack on decode time.
const SCAN_LIMIT: c_int = 500;

struct Handle(tj::tjhandle);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { tj::tj3Destroy(self.0) }
    }
}

thread_local! {
    // One decompressor per thread: creating one costs more than decoding a small frame.
    static HANDLE: RefCell<Option<Handle>> = const { RefCell::new(None) };
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
pub(super) fn decode_into(jpeg: &[u8], frame: &Frame, out: &mut [u8]) -> Result<(), DecodeFailure> {
    let dims = (frame.width, frame.height);
    if frame.info.components == 4 {
        return decode_cmyk(jpeg, dims, frame.channels, out);
    }
    let format = match frame.colorspace() {
        Colorspace::Gray => tj::TJPF_TJPF_GRAY,
        _ => tj::TJPF_TJPF_RGB,
    };
    decode_with_handle(jpeg, dims, format, out)
}

/// TurboJPEG hands CMYK/YCCK JPEGs out only as CMYK; convert as Pillow does
/// (`R = (255 - C)(255 - K) / 255`), where Adobe-written files store the inks inverted.
fn decode_cmyk(
    jpeg: &[u8],
    (w, h): (usize, usize),
    channels: usize,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    let mut cmyk = vec![0u8; h * w * 4];
    decode_with_handle(jpeg, (w, h), tj::TJPF_TJPF_CMYK, &mut cmyk)?;
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

fn decode_with_handle(
    jpeg: &[u8],
    dims: (usize, usize),
    format: tj::TJPF,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    let result = decode_on_thread_handle(jpeg, dims, format, out);
    if result.is_err() {
        // After a failed call libjpeg's state machine refuses further calls ("improper call
        // in state 202"): start the next frame on a fresh decompressor.
        HANDLE.with(|cell| cell.borrow_mut().take());
    }
    result
}

fn decode_on_thread_handle(
    jpeg: &[u8],
    (w, h): (usize, usize),
    format: tj::TJPF,
    out: &mut [u8],
) -> Result<(), DecodeFailure> {
    HANDLE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let handle = match slot.as_ref() {
            Some(handle) => handle.0,
            None => {
                // SAFETY: plain constructor; null means failure.
                let p = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as c_int) };
                if p.is_null() {
                    return Err(DecodeFailure::Corrupt(
                        "cannot start a libjpeg-turbo decompressor".into(),
                    ));
                }
                *slot = Some(Handle(p));
                p
            }
        };
        // Warnings are judged after the call (see `benign`), not stopped on: libjpeg also
        // warns about harmless metadata, such as an ICC profile after the frame header.
        set(handle, tj::TJPARAM_TJPARAM_STOPONWARNING, 0)?;
        set(handle, tj::TJPARAM_TJPARAM_SCANLIMIT, SCAN_LIMIT)?;
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
        let pitch = c_int::try_from(w * channels)
            .map_err(|_| DecodeFailure::Corrupt("frame row too wide".into()))?;
        debug_assert_eq!(out.len(), w * h * channels);
        // SAFETY: out holds exactly h rows of `pitch` bytes (checked by the callers), which is
        // what tj3Decompress8 writes for a w x h frame in `format`.
        let rc = unsafe {
            tj::tj3Decompress8(handle, jpeg.as_ptr(), len, out.as_mut_ptr(), pitch, format)
        };
        check(handle, rc)
    })
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
