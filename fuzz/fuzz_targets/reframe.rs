//! JPEG bytes and a crop -> `jpeg::decode_reframed` (the fused crop/scale/resize of
//! `read(..., crop=, size=)`), with the frame's restart markers as the index would record them,
//! none, or a hostile list (an index that does not describe the frame).
//!
//! Input: 8 parameter bytes, then the JPEG. Parameters: crop top, left, height, width as
//! fractions of the frame (bytes 0-3); flags (byte 4: bit 0 a size, bit 1 flip, bit 2 DCT
//! scaling, bits 3-4 the markers: none, the frame's own, shifted by byte 5, made of bytes
//! 5-7); the output size (bytes 5-6); the colourspace (byte 7).
//!
//! Invariants beyond "no panic": a decode is deterministic, and with the frame's own markers
//! the result is exactly the result without any (a restart cut never changes pixels).
#![no_main]

use gulpio_rs::jpeg::header::read_info;
use gulpio_rs::jpeg::{decode_reframed, output_shape, restart, Colorspace, CropBox, Reframe};
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
    let (top, left) = (frac(p[0]) * h as f64, frac(p[1]) * w as f64);
    let crop = CropBox {
        top,
        left,
        height: frac(p[2]) * (h as f64 - top),
        width: frac(p[3]) * (w as f64 - left),
    };
    let spec = Reframe {
        crop: Some(crop),
        size: (p[4] & 1 == 1).then(|| (1 + p[5] as usize % 96, 1 + p[6] as usize % 96)),
        flip: p[4] & 2 != 0,
        dct_scaling: p[4] & 4 != 0,
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
        assert!(decode_reframed(jpeg, want, &spec, markers.as_deref(), &mut out).is_err());
        return;
    };
    if oh * ow * c > 1 << 20 {
        return;
    }
    let mut out = vec![0u8; oh * ow * c];
    if decode_reframed(jpeg, want, &spec, markers.as_deref(), &mut out).is_err() {
        return;
    }
    let mut again = vec![0xA5u8; out.len()];
    decode_reframed(jpeg, want, &spec, markers.as_deref(), &mut again)
        .expect("a second decode of the same bytes");
    assert!(again == out, "two fused decodes of the same JPEG differ");
    if (p[4] >> 3) & 3 == 1 && markers.is_some() {
        let mut whole = vec![0x5Au8; out.len()];
        if decode_reframed(jpeg, want, &spec, None, &mut whole).is_ok() {
            assert!(whole == out, "a restart cut changed the pixels");
        }
    }
});
