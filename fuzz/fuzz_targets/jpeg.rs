//! JPEG bytes -> what `gulpio_rs._native.jpeg_info` and `decode_jpeg` do: `read_info`, then
//! `output_shape` (which enforces `MAX_FRAME_PIXELS` before anything is allocated) and
//! `decode_into` a buffer of exactly that size, in one of the three output colourspaces.
//!
//! Invariants beyond "no panic": the accepted shape respects the pixel limit and the header,
//! a buffer of the wrong size is refused, and decoding is deterministic.
#![no_main]

use gulpio_rs::jpeg::header::read_info;
use gulpio_rs::jpeg::{decode_into, output_shape, Colorspace, MAX_FRAME_PIXELS};
use gulpio_rs_fuzz::let_zune_panics_unwind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let_zune_panics_unwind();
    let info = read_info(data);
    // Chosen from the length rather than a prefix byte so that seeds stay plain JPEG files.
    let want = [Colorspace::Auto, Colorspace::Rgb, Colorspace::Gray][data.len() % 3];
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
    assert!(decode_into(data, want, &mut short).is_err());
    drop(short);

    let mut out = vec![0u8; h * w * c];
    let first = decode_into(data, want, &mut out);
    // A second decode of a small frame must give the same pixels (no uninitialised reads).
    if first.is_ok() && out.len() <= 1 << 16 {
        let mut again = vec![0xA5u8; out.len()];
        decode_into(data, want, &mut again).expect("second decode of the same bytes");
        assert!(again == out, "two decodes of the same JPEG differ");
    }
});
