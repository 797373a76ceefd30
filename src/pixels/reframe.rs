//! What to make of a decoded frame: a crop box, an output size and a flip ([`Reframe`]), the
//! output shape they give, and applying them to decoded pixels. A JPEG decode fuses them into
//! the decode (`jpeg::fused`) and finishes with `reframe_box` here; every other decoder
//! (video segments, a caller's own) decodes whole frames and calls [`reframe_pixels`].

use std::cell::RefCell;

/// A crop box in a stored frame's pixels; fractional values are allowed (the resize samples
/// between pixels), as when a crop was chosen on a resized view of the frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CropBox {
    pub top: f64,
    pub left: f64,
    pub height: f64,
    pub width: f64,
}

/// What to make of each frame: `crop` (None: the whole frame) resized to `size` (`(height,
/// width)`; None: the crop's own size, rounded), mirrored left-right when `flip`.
/// `dct_scaling: false` keeps every decode at full scale (slower, closest to "full decode,
/// crop, resize").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reframe {
    pub crop: Option<CropBox>,
    pub size: Option<(usize, usize)>,
    pub flip: bool,
    pub dct_scaling: bool,
}

impl Reframe {
    /// The crop applied to a `height` x `width` frame.
    pub fn crop_of(&self, height: usize, width: usize) -> CropBox {
        self.crop.unwrap_or(CropBox {
            top: 0.0,
            left: 0.0,
            height: height as f64,
            width: width as f64,
        })
    }

    /// `(height, width)` of the output for a `height` x `width` frame, or why the crop does
    /// not fit that frame.
    pub fn output(&self, height: usize, width: usize) -> Result<(usize, usize), String> {
        let c = self.crop_of(height, width);
        // A crop computed in floats may end a rounding error past the edge.
        const SLACK: f64 = 1e-6;
        let fits = [c.top, c.left, c.height, c.width]
            .iter()
            .all(|v| v.is_finite())
            && c.top >= 0.0
            && c.left >= 0.0
            && c.height > 0.0
            && c.width > 0.0
            && c.top + c.height <= height as f64 + SLACK
            && c.left + c.width <= width as f64 + SLACK;
        if !fits {
            return Err(format!(
                "the crop (top {}, left {}, height {}, width {}) is not inside the {width}x{height} \
                 frame",
                c.top, c.left, c.height, c.width
            ));
        }
        let (h, w) = self.size.unwrap_or((
            (c.height.round() as usize).max(1),
            (c.width.round() as usize).max(1),
        ));
        if h == 0 || w == 0 {
            return Err(format!("the output size {w}x{h} is empty"));
        }
        super::check_frame_size(w, h)?;
        Ok((h, w))
    }
}

/// The crop, resize and flip of `spec` applied to decoded pixels `src` of `(height, width,
/// channels)` (frames decoded by a user's decoder, say), into `out` of the output's size.
pub fn reframe_pixels(
    src: &[u8],
    (h, w, c): (usize, usize, usize),
    spec: &Reframe,
    out: &mut [u8],
) -> Result<(), String> {
    let (oh, ow) = spec.output(h, w)?;
    let crop = spec.crop_of(h, w);
    let rel = (crop.left, crop.top, crop.width, crop.height);
    reframe_box(src, (h, w, c), rel, (oh, ow), spec.flip, out)
}

/// The pixels of a `height` x `width` frame that `spec`'s crop touches, `(x0, y0, x1, y1)`:
/// what a decoder must produce for [`reframe_region`] (`Err`: the crop does not fit).
pub fn touched(spec: &Reframe, height: usize, width: usize) -> Result<[usize; 4], String> {
    spec.output(height, width)?;
    let c = spec.crop_of(height, width);
    Ok(clamp_box((height, width), (c.left, c.top, c.width, c.height)).1)
}

/// [`reframe_pixels`] from a part of the frame: `src`, of `(rows, columns, channels)`, is the
/// rectangle whose top-left pixel is `origin` (`(x, y)`) in a `frame` of `(height, width)`,
/// and holds every pixel [`touched`] names. The same output as from the whole frame: the
/// resize sees only the touched pixels either way.
pub fn reframe_region(
    src: &[u8],
    (rh, rw, c): (usize, usize, usize),
    (x, y): (usize, usize),
    (h, w): (usize, usize),
    spec: &Reframe,
    out: &mut [u8],
) -> Result<(), String> {
    let (oh, ow) = spec.output(h, w)?;
    let crop = spec.crop_of(h, w);
    let rel = (
        crop.left - x as f64,
        crop.top - y as f64,
        crop.width,
        crop.height,
    );
    reframe_box(src, (rh, rw, c), rel, (oh, ow), spec.flip, out)
}

/// Box `(left, top, width, height)` clamped into an image of `(height, width)` (float
/// rounding may put it a hair outside), and the pixels it touches, `[x0, y0, x1, y1]`.
fn clamp_box(
    (h, w): (usize, usize),
    (left, top, width, height): (f64, f64, f64, f64),
) -> ((f64, f64, f64, f64), [usize; 4]) {
    let (left, top) = (left.clamp(0.0, w as f64), top.clamp(0.0, h as f64));
    let width = width.min(w as f64 - left);
    let height = height.min(h as f64 - top);
    let x0 = (left.floor() as usize).min(w - 1);
    let y0 = (top.floor() as usize).min(h - 1);
    let x1 = ((left + width).ceil() as usize).clamp(x0 + 1, w);
    let y1 = ((top + height).ceil() as usize).clamp(y0 + 1, h);
    ((left, top, width, height), [x0, y0, x1, y1])
}

thread_local! {
    // The pixels a crop touches, copied out of a larger decoded region (see `reframe_box`).
    static TOUCHED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Resizes box `rel` (`left, top, width, height`) of the image `src` of `(height, width,
/// channels)` into `out`, then flips it: what every reframe ends with, whichever decoder made
/// `src` (a whole frame, or the region a fused JPEG decode produced around the crop). The resize sees only the pixels the box touches,
/// as if the crop had been cut out first ("crop, then resize", as torchvision's
/// `resized_crop` and Pillow do): the filter's support near the box's edges is clamped there,
/// never reaching into the decoded margin around it, so the result depends on the crop's
/// pixels alone, whatever was decoded around them.
pub(crate) fn reframe_box(
    src: &[u8],
    (h, w, c): (usize, usize, usize),
    (left, top, width, height): (f64, f64, f64, f64),
    (oh, ow): (usize, usize),
    flip: bool,
    out: &mut [u8],
) -> Result<(), String> {
    let ((left, top, width, height), [x0, y0, x1, y1]) =
        clamp_box((h, w), (left, top, width, height));
    let whole = (x0, y0, x1, y1) == (0, 0, w, h);
    let exact = [left, top, width, height]
        .iter()
        .all(|v| (v - v.round()).abs() < 1e-9)
        && (height.round() as usize, width.round() as usize) == (oh, ow);
    if whole || exact {
        // A plain crop is copied as it is; a box over the whole image needs no cut.
        super::resize::crop_resize_into(src, (h, w, c), (left, top, width, height), (oh, ow), out)?;
    } else {
        TOUCHED.with(|cell| -> Result<(), String> {
            let mut touched = cell.borrow_mut();
            touched.clear();
            for y in y0..y1 {
                touched.extend_from_slice(&src[(y * w + x0) * c..(y * w + x1) * c]);
            }
            let rel = (left - x0 as f64, top - y0 as f64, width, height);
            super::resize::crop_resize_into(&touched, (y1 - y0, x1 - x0, c), rel, (oh, ow), out)
        })?;
    }
    if flip {
        flip_rows(out, ow, c);
    }
    Ok(())
}

/// Mirrors every row of a `width`-pixel image left to right, in place.
fn flip_rows(pixels: &mut [u8], width: usize, channels: usize) {
    // The whole row's bytes reversed, then each pixel's channels put back in order: a
    // byte-by-byte swap of mirrored pixels with index checks cost ~8% of a fused 112x112 crop
    // (callgrind, issue 28).
    for row in pixels.chunks_exact_mut(width * channels) {
        row.reverse();
        if channels > 1 {
            for pixel in row.chunks_exact_mut(channels) {
                pixel.reverse();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes_and_crops_that_do_not_fit() {
        let r = Reframe {
            crop: None,
            size: Some((112, 100)),
            flip: false,
            dct_scaling: true,
        };
        assert_eq!(r.output(240, 320), Ok((112, 100)));
        let crop = |top, left, height, width| Reframe {
            crop: Some(CropBox {
                top,
                left,
                height,
                width,
            }),
            size: None,
            flip: false,
            dct_scaling: true,
        };
        assert_eq!(
            crop(10.0, 20.0, 100.4, 50.6).output(240, 320),
            Ok((100, 51))
        );
        assert_eq!(
            crop(0.0, 0.0, 240.0, 320.0000001).output(240, 320),
            Ok((240, 320))
        );
        assert!(crop(0.0, 0.0, 241.0, 10.0).output(240, 320).is_err());
        assert!(crop(-1.0, 0.0, 10.0, 10.0).output(240, 320).is_err());
        assert!(crop(0.0, 0.0, 0.0, 10.0).output(240, 320).is_err());
        assert!(crop(0.0, f64::NAN, 10.0, 10.0).output(240, 320).is_err());
        let empty = Reframe {
            size: Some((0, 5)),
            ..crop(0.0, 0.0, 5.0, 5.0)
        };
        assert!(empty.output(240, 320).is_err());
    }

    #[test]
    fn flip_mirrors_each_row() {
        let mut px = vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
        flip_rows(&mut px, 2, 3);
        assert_eq!(px, [4, 5, 6, 1, 2, 3, 10, 11, 12, 7, 8, 9]);
        let mut gray = vec![1, 2, 3];
        flip_rows(&mut gray, 3, 1);
        assert_eq!(gray, [3, 2, 1]);
        let mut odd = vec![1, 2, 3, 4, 5, 6, 7, 8, 9];
        flip_rows(&mut odd, 3, 3);
        assert_eq!(odd, [7, 8, 9, 4, 5, 6, 1, 2, 3]);
    }
}
