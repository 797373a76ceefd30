//! A frame's pixels must not depend on the frames the same thread decoded before it
//! (fuzz/artifacts-found/README.md, finding 4): libjpeg keeps Huffman tables in a decompressor
//! from one image to the next, so a decoder kept per thread decoded this frame, whose first
//! scan uses a table defined only after it, with whatever table the previous frame left.

use gulpio_rs::jpeg::{decode_into_with, output_shape, Colorspace, Precision};

const FOUND: &[u8] = include_bytes!("../fuzz/artifacts-found/jpeg-table-used-before-defined.jpg");

fn decode(jpeg: &[u8], cs: Colorspace, precision: Precision) -> Option<Vec<u8>> {
    let (h, w, c, _) = output_shape(jpeg, cs).ok()?;
    let mut out = vec![0u8; h * w * c];
    decode_into_with(jpeg, cs, precision, &mut out).ok()?;
    Some(out)
}

#[test]
fn a_table_defined_after_its_scan_gives_the_same_pixels_every_time() {
    for cs in [Colorspace::Auto, Colorspace::Rgb, Colorspace::Gray] {
        for precision in [Precision::Accurate, Precision::Fast] {
            // The first decode on a thread that has decoded nothing yet.
            let first = std::thread::spawn(move || decode(FOUND, cs, precision))
                .join()
                .expect("decoding thread");
            for _ in 0..3 {
                let again = decode(FOUND, cs, precision);
                assert!(again == first, "{cs:?} {precision:?}: the pixels changed");
            }
        }
    }
}
