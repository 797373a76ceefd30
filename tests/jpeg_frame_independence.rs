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

/// An MJPEG frame (no DHT segment: the standard tables) decodes to the pixels of the same frame
/// with its tables written out, with either backend and at either precision, whatever the
/// thread decoded before (here: a frame with tables of its own).
#[test]
fn an_mjpeg_frame_decodes_as_the_same_frame_with_its_tables() {
    let mjpeg = include_bytes!("../fuzz/corpus/jpeg/mjpeg-no-dht.jpg");
    let tables = include_bytes!("../fuzz/corpus/jpeg/baseline-420.jpg");
    let optimized = include_bytes!("../fuzz/corpus/jpeg/baseline-422-optimized.jpg");
    for precision in [Precision::Accurate, Precision::Fast] {
        let want = decode(tables, Colorspace::Rgb, precision).expect("the frame decodes");
        assert!(decode(optimized, Colorspace::Rgb, precision).is_some());
        let got = decode(mjpeg, Colorspace::Rgb, precision);
        assert!(got.as_ref() == Some(&want), "{precision:?}");
    }
}
