//! JPEG bytes -> what `gulpio_rs._native.jpeg_info` and `decode_jpeg` do: `read_info`, then
//! `output_shape` (which enforces `MAX_FRAME_PIXELS` before anything is allocated) and
//! `decode_into_with` a buffer of exactly that size, in one of the three output colourspaces,
//! accurately or with libjpeg-turbo's fast IDCT and upsampling (gulpio2's settings).
//!
//! Invariants beyond "no panic": the accepted shape respects the pixel limit and the header,
//! a buffer of the wrong size is refused, decoding is deterministic, and the two precisions
//! accept and refuse the same bytes (they differ in arithmetic, not in what they check).
#![no_main]

use gulpio_rs::jpeg::header::read_info;
use gulpio_rs::jpeg::{decode_into_with, output_shape, Colorspace, Precision, MAX_FRAME_PIXELS};
use gulpio_rs_fuzz::let_zune_panics_unwind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let_zune_panics_unwind();
    let info = read_info(data);
    // Chosen from the length rather than a prefix byte so that seeds stay plain JPEG files.
    let want = [Colorspace::Auto, Colorspace::Rgb, Colorspace::Gray][data.len() % 3];
    let (precision, other) = if (data.len() / 3) % 2 == 1 {
        (Precision::Fast, Precision::Accurate)
    } else {
        (Precision::Accurate, Precision::Fast)
    };
    let Ok((h, w, c, shape_info)) = output_shape(data, want) else {
        return;
    };
    assert_eq!(Ok(shape_info), info);
    assert!(h * w <= MAX_FRAME_PIXELS);
    assert_eq!(
        (h, w),
        (shape_info.height as usize, shape_info.width as usize)
    );
    assert!(c == 1 || c == 3);

    let mut short = vec![0u8; h * w * c - 1];
    assert!(decode_into_with(data, want, precision, &mut short).is_err());
    drop(short);

    let mut out = vec![0u8; h * w * c];
    let first = decode_into_with(data, want, precision, &mut out);
    // A second decode of a small frame must give the same pixels (no uninitialised reads).
    if out.len() <= 1 << 16 {
        if first.is_ok() {
            let mut again = vec![0xA5u8; out.len()];
            decode_into_with(data, want, precision, &mut again)
                .expect("second decode of the same bytes");
            assert!(again == out, "two decodes of the same JPEG differ");
        }
        let mut other_out = vec![0u8; out.len()];
        let second = decode_into_with(data, want, other, &mut other_out);
        assert_eq!(
            first.is_ok(),
            second.is_ok(),
            "{precision:?} and {other:?} disagree: {first:?} / {second:?}"
        );
    }
});
