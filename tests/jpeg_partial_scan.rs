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

/// A stream on which zune-jpeg 0.5.15 panics (an `unwrap` in its AVX2 IDCT): an error, never a
/// panic, whichever backend decodes it.
#[test]
fn a_panic_inside_the_decoder_is_a_decode_error() {
    let jpeg = include_bytes!("../fuzz/artifacts-found/jpeg-zune-idct-panic.jpg");
    for cs in [Colorspace::Auto, Colorspace::Rgb, Colorspace::Gray] {
        let Ok((h, w, c, _)) = output_shape(jpeg, cs) else {
            continue;
        };
        let mut out = vec![0u8; h * w * c];
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            decode_into(jpeg, cs, &mut out)
        }));
        let got = got.unwrap_or_else(|_| panic!("{cs:?}: the decoder's panic escaped"));
        #[cfg(not(feature = "turbo"))]
        assert!(got.is_err(), "{cs:?}: damaged data decoded: {got:?}");
        let _ = got;
    }
}
