//! Regression tests for inputs found by fuzzing (fuzz/artifacts-found/): scans that end early
//! must fail, and never leave output bytes unwritten (the Python layer hands these buffers out
//! without initialising them).

use gulpio_rs::jpeg::{decode_into, output_shape, Colorspace};

#[test]
fn early_ending_scans_never_leave_output_bytes_unwritten() {
    for jpeg in [
        &include_bytes!("../fuzz/artifacts-found/jpeg-second-sos.jpg")[..],
        include_bytes!("../fuzz/artifacts-found/jpeg-partial-scan-then-marker.jpg"),
    ] {
        for cs in [Colorspace::Auto, Colorspace::Rgb, Colorspace::Gray] {
            let (h, w, c, _) = output_shape(jpeg, cs).expect("header parses");
            let (mut zeros, mut ones) = (vec![0x00; h * w * c], vec![0xFF; h * w * c]);
            let a = decode_into(jpeg, cs, &mut zeros);
            let b = decode_into(jpeg, cs, &mut ones);
            assert!(a.is_err() && b.is_err(), "{cs:?}: {a:?} {b:?}");
        }
    }
}
