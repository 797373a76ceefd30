//! JPEG encoding with libjpeg-turbo (cargo feature `turbo`), for ingestion: many frames in one
//! call on the private pool, with no Python in the loop.
//!
//! Why here and not through simplejpeg: simplejpeg holds the GIL for part of every encode, so
//! a second thread added little, and each frame cost a Python call and a thread-pool hand-off
//! (measured in docs/DECISIONS.md, "Writing").
//!
//! The settings are what simplejpeg 1.9 (gulpio2's encoder) actually uses, found by comparing
//! bytes at every quality: the fast integer forward DCT below quality 96 and the accurate one
//! from 96 (its `fastdct` argument changes nothing), standard Huffman tables and a JFIF
//! header. So the bytes equal gulpio2's from the same pixels (tests/ingest/test_encode.py,
//! tests/compat/test_compat_gulpio2.py).

use std::cell::RefCell;
use std::ffi::{c_int, CStr};

use rayon::prelude::*;
use turbojpeg_sys as tj;

use crate::error::{Error, Result};
use crate::pixels::resize::{self, Pixels};
use crate::pool::Runner;

/// Chroma subsampling of colour frames (gray frames have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subsampling {
    S444,
    S422,
    S420,
    S440,
}

impl Subsampling {
    /// The names [`Subsampling::parse`] takes (also without the colons).
    pub const NAMES: [&'static str; 4] = ["4:4:4", "4:2:2", "4:2:0", "4:4:0"];

    /// `"4:2:0"` or `"420"` style names.
    pub fn parse(name: &str) -> Option<Self> {
        match name.replace(':', "").as_str() {
            "444" => Some(Subsampling::S444),
            "422" => Some(Subsampling::S422),
            "420" => Some(Subsampling::S420),
            "440" => Some(Subsampling::S440),
            _ => None,
        }
    }

    fn tj(self) -> c_int {
        (match self {
            Subsampling::S444 => tj::TJSAMP_TJSAMP_444,
            Subsampling::S422 => tj::TJSAMP_TJSAMP_422,
            Subsampling::S420 => tj::TJSAMP_TJSAMP_420,
            Subsampling::S440 => tj::TJSAMP_TJSAMP_440,
        }) as c_int
    }
}

/// How frames are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeSettings {
    /// 1..=100.
    pub quality: u8,
    pub subsampling: Subsampling,
    /// A restart marker after every MCU row, so that a crop's decode can skip the rows above
    /// it (`jpeg::restart`); costs a few bytes per frame (docs/FUSED.md). Off: simplejpeg's
    /// (gulpio2's) bytes.
    pub restart_rows: bool,
}

/// The quality from which simplejpeg encodes with the accurate DCT.
const SIMPLEJPEG_ACCURATE_DCT_FROM: u8 = 96;

struct Compressor(tj::tjhandle);

impl Drop for Compressor {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { tj::tj3Destroy(self.0) }
    }
}

thread_local! {
    // One compressor per thread, as for decoding: creating one costs about as much as
    // encoding a small frame.
    static COMPRESSOR: RefCell<Option<Compressor>> = const { RefCell::new(None) };
}

fn failure(h: tj::tjhandle, what: &str) -> Error {
    // SAFETY: tj3GetErrorStr returns a NUL-terminated string owned by the handle (or a
    // global one for a null handle).
    let msg = unsafe { CStr::from_ptr(tj::tj3GetErrorStr(h)) }
        .to_string_lossy()
        .trim()
        .to_string();
    Error::InvalidArgument(format!("libjpeg-turbo cannot {what}: {msg}"))
}

/// Encodes one frame (1 = gray or 3 = RGB channels, checked by `Pixels::new`).
pub fn encode(px: Pixels<'_>, settings: EncodeSettings) -> Result<Vec<u8>> {
    if !(1..=100).contains(&settings.quality) {
        return Err(Error::InvalidArgument(format!(
            "quality must be in 1..100, not {}",
            settings.quality
        )));
    }
    let too_big = || {
        Error::InvalidArgument(format!(
            "frame {}x{} is too large to encode",
            px.height, px.width
        ))
    };
    let w = c_int::try_from(px.width).map_err(|_| too_big())?;
    let h = c_int::try_from(px.height).map_err(|_| too_big())?;
    let pitch = c_int::try_from(px.width * px.channels).map_err(|_| too_big())?;
    let (format, samp) = if px.channels == 1 {
        (tj::TJPF_TJPF_GRAY as c_int, tj::TJSAMP_TJSAMP_GRAY as c_int)
    } else {
        (tj::TJPF_TJPF_RGB as c_int, settings.subsampling.tj())
    };
    let result = COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            // SAFETY: plain constructor; null means failure.
            let p = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as c_int) };
            if p.is_null() {
                return Err(Error::Internal(
                    "libjpeg-turbo: cannot create a compressor".into(),
                ));
            }
            *slot = Some(Compressor(p));
        }
        let handle = slot.as_ref().map(|c| c.0).ok_or_else(|| {
            Error::Internal("libjpeg-turbo compressor missing after creation".into())
        })?;
        for (param, value) in [
            (tj::TJPARAM_TJPARAM_QUALITY, settings.quality as c_int),
            (tj::TJPARAM_TJPARAM_SUBSAMP, samp),
            // simplejpeg's output, byte for byte (see the module comment).
            (
                tj::TJPARAM_TJPARAM_FASTDCT,
                c_int::from(settings.quality < SIMPLEJPEG_ACCURATE_DCT_FROM),
            ),
            // Set every time: the compressor is reused by frames with either setting.
            (
                tj::TJPARAM_TJPARAM_RESTARTROWS,
                c_int::from(settings.restart_rows),
            ),
        ] {
            // SAFETY: a live compressor handle.
            if unsafe { tj::tj3Set(handle, param as c_int, value) } != 0 {
                return Err(failure(handle, "set the encoder's parameters"));
            }
        }
        let mut buf: *mut u8 = std::ptr::null_mut();
        let mut size: tj::size_t = 0;
        // SAFETY: `px.data` holds `height * pitch` bytes (checked by Pixels::new); with a null
        // buffer TurboJPEG allocates the output, which is copied and freed below.
        let rc = unsafe {
            tj::tj3Compress8(
                handle,
                px.data.as_ptr(),
                w,
                pitch,
                h,
                format,
                &mut buf,
                &mut size,
            )
        };
        let out = if rc == 0 && !buf.is_null() {
            // SAFETY: on success `buf` holds `size` bytes written by TurboJPEG.
            Ok(unsafe { std::slice::from_raw_parts(buf, size as usize) }.to_vec())
        } else {
            Err(failure(handle, "encode the frame"))
        };
        if !buf.is_null() {
            // SAFETY: allocated by TurboJPEG (tj3Alloc), freed once.
            unsafe { tj::tj3Free(buf.cast()) };
        }
        out
    });
    if result.is_err() {
        // A failed call may leave libjpeg's state machine unusable: start afresh.
        COMPRESSOR.with(|cell| cell.borrow_mut().take());
    }
    result
}

/// Resizes (shorter side to `size`, if given) and encodes every frame, in order, on `runner`.
/// The output does not depend on the number of threads.
pub fn encode_batch(
    frames: &[Pixels<'_>],
    size: Option<usize>,
    settings: EncodeSettings,
    runner: &Runner,
) -> Result<Vec<Vec<u8>>> {
    let one = |(i, px): (usize, &Pixels<'_>)| -> Result<Vec<u8>> {
        let r = match size {
            Some(s) => resize::resize(*px, s).and_then(|f| encode(f.pixels(), settings)),
            None => encode(*px, settings),
        };
        r.map_err(|e| match e {
            Error::InvalidArgument(msg) => Error::InvalidArgument(format!("frame {i}: {msg}")),
            other => other,
        })
    };
    match runner {
        Runner::Caller => frames.iter().enumerate().map(one).collect(),
        Runner::Pool(pool) => pool.install(|| frames.par_iter().enumerate().map(one).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(h: usize, w: usize, c: usize) -> Vec<u8> {
        (0..h * w * c)
            .map(|i| ((i / c) % w * 255 / w) as u8)
            .collect()
    }

    #[test]
    fn round_trip_is_close() {
        let data = gradient(48, 80, 3);
        let px = Pixels::new(&data, 48, 80, 3).unwrap();
        for sub in ["4:4:4", "4:2:2", "4:2:0", "4:4:0"] {
            let settings = EncodeSettings {
                quality: 95,
                subsampling: Subsampling::parse(sub).unwrap(),
                restart_rows: false,
            };
            let jpeg = encode(px, settings).unwrap();
            let (out, h, w, c) = crate::jpeg::decode(&jpeg, crate::jpeg::Colorspace::Auto).unwrap();
            assert_eq!((h, w, c), (48, 80, 3));
            let worst = out.iter().zip(&data).map(|(a, b)| a.abs_diff(*b)).max();
            assert!(worst.unwrap() < 12, "{sub}: {worst:?}");
        }
    }

    #[test]
    fn gray_stays_gray_and_threads_do_not_matter() {
        let g = gradient(33, 17, 1);
        let c = gradient(40, 70, 3);
        let frames = [
            Pixels::new(&g, 33, 17, 1).unwrap(),
            Pixels::new(&c, 40, 70, 3).unwrap(),
        ];
        let settings = EncodeSettings {
            quality: 90,
            subsampling: Subsampling::S420,
            restart_rows: false,
        };
        let one = encode_batch(&frames, Some(16), settings, &Runner::Caller).unwrap();
        let two = encode_batch(
            &frames,
            Some(16),
            settings,
            &crate::pool::runner(2).unwrap(),
        );
        assert_eq!(one, two.unwrap());
        let info = crate::jpeg::header::read_info(&one[0]).unwrap();
        assert_eq!((info.components, info.width, info.height), (1, 16, 31));
    }

    #[test]
    fn bad_quality_is_an_error() {
        let data = gradient(8, 8, 3);
        let px = Pixels::new(&data, 8, 8, 3).unwrap();
        let settings = EncodeSettings {
            quality: 0,
            subsampling: Subsampling::S444,
            restart_rows: false,
        };
        assert!(encode(px, settings).is_err());
        assert_eq!(Subsampling::parse("4:1:1"), None);
    }

    #[test]
    fn every_listed_name_parses_with_and_without_colons() {
        let parsed: Vec<_> = Subsampling::NAMES
            .iter()
            .map(|n| Subsampling::parse(n))
            .collect();
        assert!(parsed.iter().all(Option::is_some));
        for (name, sub) in Subsampling::NAMES.iter().zip(&parsed) {
            assert_eq!(Subsampling::parse(&name.replace(':', "")), *sub);
        }
        for (i, a) in parsed.iter().enumerate() {
            assert!(parsed[i + 1..].iter().all(|b| b != a), "{a:?} listed twice");
        }
    }
}
