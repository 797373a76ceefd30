//! JPEG bytes and a crop -> `jpeg::decode_reframed` (the fused crop/scale/resize of
//! `read(..., crop=, size=)`), with the frame's restart markers as the index would record them,
//! none, or a hostile list (an index that does not describe the frame).
//!
//! Input: 8 parameter bytes, then the JPEG. Parameters: crop top, left, height, width as
//! fractions of the frame (bytes 0-3); flags (byte 4: bit 0 a size, bit 1 flip, bit 2 DCT
//! scaling, bits 3-4 the markers: none, the frame's own, shifted by byte 5, made of bytes
//! 5-7; bit 5 libjpeg-turbo's fast IDCT and upsampling, what the PyTorch datasets decode
//! with; bit 6 a box on whole pixels); the output size (bytes 5-6); the colourspace (byte 7).
//!
//! Invariants beyond "no panic": a decode is deterministic, with the frame's own markers
//! the result is exactly the result without any (a restart cut never changes pixels), and a
//! plain crop on whole pixels is exactly those pixels of the whole frame decoded at the same
//! precision (the region decode and its skipped rows change nothing).
//!
//! The inputs run one after another on one thread, accurate, fast, scaled and cropped in every
//! order: state kept from one decode to the next (libjpeg's tables, or the dangling pointer of
//! docs/RELIABILITY.md finding 5) would show as a decode that differs or crashes.
#![no_main]

use gulpio_rs::jpeg::header::read_info;
use gulpio_rs::jpeg::{
    decode_into_with, decode_reframed_with, output_shape, restart, Colorspace, CropBox, Precision,
    Reframe,
};
use gulpio_rs_fuzz::let_zune_panics_unwind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let_zune_panics_unwind();
    let Some((p, jpeg)) = data.split_first_chunk::<8>() else {
        return;
    };
    let Ok(info) = read_info(jpeg) else {
        return;
    };
    let want = [Colorspace::Auto, Colorspace::Rgb, Colorspace::Gray][p[7] as usize % 3];
    let Ok((h, w, c, _)) = output_shape(jpeg, want) else {
        return;
    };
    let frac = |b: u8| b as f64 / 255.0;
    let whole_pixels = p[4] & 0x40 != 0;
    let snap = |v: f64| if whole_pixels { v.floor() } else { v };
    let (top, left) = (snap(frac(p[0]) * h as f64), snap(frac(p[1]) * w as f64));
    let crop = CropBox {
        top,
        left,
        height: snap(frac(p[2]) * (h as f64 - top)),
        width: snap(frac(p[3]) * (w as f64 - left)),
    };
    let precision = if p[4] & 0x20 != 0 {
        Precision::Fast
    } else {
        Precision::Accurate
    };
    let spec = Reframe {
        crop: Some(crop),
        size: (p[4] & 1 == 1).then(|| (1 + p[5] as usize % 96, 1 + p[6] as usize % 96)),
        flip: p[4] & 2 != 0,
        dct_scaling: p[4] & 4 != 0,
    };
    let decode = |markers: Option<&[u32]>, out: &mut [u8]| {
        decode_reframed_with(jpeg, want, &spec, markers, precision, out)
    };
    let own = restart::scan(jpeg, &info);
    let markers: Option<Vec<u32>> = match (p[4] >> 3) & 3 {
        0 => None,
        1 => own.clone(),
        2 => own.map(|m| m.iter().map(|x| x.wrapping_add(p[5] as u32)).collect()),
        _ => Some(p[5..8].iter().map(|&b| b as u32 * 7).collect()),
    };
    let Ok((oh, ow)) = spec.output(h, w) else {
        // A crop that does not fit is refused before any decoding, never decoded.
        let mut out = vec![0u8; 3];
        assert!(decode(markers.as_deref(), &mut out).is_err());
        return;
    };
    if oh * ow * c > 1 << 20 {
        return;
    }
    let mut out = vec![0u8; oh * ow * c];
    if decode(markers.as_deref(), &mut out).is_err() {
        return;
    }
    let mut again = vec![0xA5u8; out.len()];
    decode(markers.as_deref(), &mut again).expect("a second decode of the same bytes");
    assert!(again == out, "two fused decodes of the same JPEG differ");
    if (p[4] >> 3) & 3 == 1 && markers.is_some() {
        let mut whole = vec![0x5Au8; out.len()];
        if decode(None, &mut whole).is_ok() {
            assert!(whole == out, "a restart cut changed the pixels");
        }
    }
    if whole_pixels && spec.size.is_none() && !spec.flip && h * w * c <= 1 << 22 {
        let mut frame = vec![0u8; h * w * c];
        if decode_into_with(jpeg, want, precision, &mut frame).is_ok() {
            let (y0, x0) = (crop.top as usize, crop.left as usize);
            for y in 0..oh {
                let row = &frame[((y0 + y) * w + x0) * c..((y0 + y) * w + x0 + ow) * c];
                assert!(
                    &out[y * ow * c..(y + 1) * ow * c] == row,
                    "row {y} of a {ow}x{oh} crop at ({x0}, {y0}) differs from the whole frame's \
                     ({precision:?})"
                );
            }
        }
    }
});
