//! Decoded pixels, whichever decoder made them: the output colour layout, the frame-size limit
//! every decoder checks before it allocates, grey from RGB, and what is made of a decoded
//! frame (`reframe`: crop, resize, flip; `resize`). It knows no codec: `jpeg`, `video` and
//! `format` build on it, never the other way round.

pub mod reframe;
pub mod resize;

pub use reframe::{reframe_pixels, reframe_region, touched, CropBox, Reframe};

/// Output colour layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colorspace {
    /// 1 channel for grayscale frames, 3 (RGB) for everything else.
    Auto,
    Rgb,
    Gray,
}

impl Colorspace {
    /// Output channels for a frame stored with `components` colour components.
    pub fn channels(self, components: u8) -> usize {
        match self {
            Colorspace::Auto if components == 1 => 1,
            Colorspace::Auto | Colorspace::Rgb => 3,
            Colorspace::Gray => 1,
        }
    }
}

/// The largest frame decoded, in pixels (8K UHD is 33 M). Checked against the header (and
/// against sizes an index declares) before anything is allocated.
pub const MAX_FRAME_PIXELS: usize = 1 << 26;

/// `Err` with a message if a `w` x `h` frame is over [`MAX_FRAME_PIXELS`].
pub fn check_frame_size(w: usize, h: usize) -> Result<(), String> {
    match w.checked_mul(h) {
        Some(px) if px <= MAX_FRAME_PIXELS => Ok(()),
        _ => Err(format!(
            "the frame is declared {w}x{h}, over the maximum of {MAX_FRAME_PIXELS} pixels"
        )),
    }
}

/// Grey from RGB with BT.601 weights in 16-bit fixed point, rounded, as libjpeg converts.
pub(crate) fn luma(r: u32, g: u32, b: u32) -> u8 {
    ((19595 * r + 38470 * g + 7471 * b + 32768) >> 16) as u8
}

/// Packed RGB to grey ([`luma`]), one output byte per pixel: what a decoder that only makes
/// RGB (video segments) gives for gray output, the same as libjpeg's conversion.
pub(crate) fn to_gray(rgb: &[u8], out: &mut [u8]) {
    for (px, y) in rgb.chunks_exact(3).zip(out.iter_mut()) {
        *y = luma(px[0] as u32, px[1] as u32, px[2] as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luma_matches_libjpeg_weights() {
        assert_eq!(luma(0, 0, 0), 0);
        assert_eq!(luma(255, 255, 255), 255);
        assert_eq!(luma(255, 0, 0), 76);
        assert_eq!(luma(0, 255, 0), 150);
        assert_eq!(luma(0, 0, 255), 29);
    }

    #[test]
    fn frame_size_limit() {
        assert!(check_frame_size(8192, 8192).is_ok());
        assert!(check_frame_size(8192, 8193).is_err());
        assert!(check_frame_size(usize::MAX, 2).is_err());
    }
}
