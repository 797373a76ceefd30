//! YUV 4:2:0 (8-bit) to packed RGB, as FFmpeg's swscale converts a decoded frame for
//! `to_ndarray(format="rgb24")`: the matrix the stream signals (BT.709, else BT.601), limited
//! ("TV") or full range as signalled, and each chroma sample used for its 2x2 block of luma
//! samples (swscale's unscaled YUV -> RGB path does not interpolate chroma), in swscale's own
//! integer arithmetic (`Coefficients`), so that the pixels are FFmpeg's for even-sized frames
//! (docs/DECISIONS.md, "Video segments", has the measured difference).

/// The matrix coefficients that turn Y'CbCr into R'G'B'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matrix {
    /// ITU-R BT.601 (also what an unsignalled stream gets, as in swscale).
    Bt601,
    /// ITU-R BT.709.
    Bt709,
}

impl Matrix {
    /// The conversion for an AV1 `matrix_coefficients` value, as swscale treats it: BT.709
    /// for 1, BT.601 for BT.601, BT.470BG, SMPTE 170M and unspecified (6, 5, 6, 2) and
    /// everything else; `None` for 0, RGB coded as is (identity), which is never stored.
    pub fn from_av1_code(code: u8) -> Option<Matrix> {
        match code {
            0 => None,
            1 => Some(Matrix::Bt709),
            _ => Some(Matrix::Bt601),
        }
    }
}

/// How the samples use the 8-bit range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// Y in 16..=235, chroma in 16..=240 ("TV", "MPEG"): what encoders write by default.
    Limited,
    /// 0..=255 ("PC", "JPEG").
    Full,
}

/// Borrowed planes of one 4:2:0 picture: chroma planes are `ceil(w/2) x ceil(h/2)`.
#[derive(Clone, Copy)]
pub struct Planes<'a> {
    pub y: &'a [u8],
    pub u: &'a [u8],
    pub v: &'a [u8],
    pub y_stride: usize,
    pub uv_stride: usize,
    pub width: usize,
    pub height: usize,
}

impl Planes<'_> {
    /// `Err` if a plane is too short for the geometry (a bug in the caller, never input data:
    /// the decoder hands out the planes).
    fn check(&self) -> Result<(), String> {
        let (cw, ch) = (self.width.div_ceil(2), self.height.div_ceil(2));
        let need = |stride: usize, w: usize, h: usize| match h {
            0 => 0,
            h => stride * (h - 1) + w,
        };
        if self.y_stride < self.width
            || self.uv_stride < cw
            || self.y.len() < need(self.y_stride, self.width, self.height)
            || self.u.len() < need(self.uv_stride, cw, ch)
            || self.v.len() < need(self.uv_stride, cw, ch)
        {
            return Err(format!(
                "YUV planes too short for a {}x{} picture",
                self.width, self.height
            ));
        }
        Ok(())
    }
}

/// The conversion in swscale's integer arithmetic (what FFmpeg's unscaled YUV -> RGB code
/// computes on x86), so that pixels equal `to_ndarray(format="rgb24")`'s: samples are scaled
/// by 8, each term is a 16x16-bit product keeping the high 16 bits (rounded down), and the
/// terms are added and clamped. Coefficients carry 13 fractional bits:
/// `R = y*(8Y - y_off) + rv*8(V - 128)`, `G = ... + gu*8(U - 128) + gv*8(V - 128)`,
/// `B = ... + bu*8(U - 128)`, each product `>> 16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Coefficients {
    y: i32,
    y_off: i32,
    rv: i32,
    gu: i32,
    gv: i32,
    bu: i32,
}

/// `x` in 16.16 fixed point, rounded to nearest.
const fn fixed16(x: f64) -> i64 {
    (x * 65536.0 + 0.5) as i64
}

/// swscale's rounding of a 16.16 value times `2^k` to an integer: `(x + 2^15) >> 16`.
const fn round16(x: i64) -> i32 {
    ((x + (1 << 15)) >> 16) as i32
}

/// From the luma weights `kr`, `kb` of the matrix (`kg = 1 - kr - kb`). The chroma factors are
/// first those of limited range (`V - 128` spans `2 (1 - kr)` of R's range, scaled by
/// 255/224), in 16.16 as swscale tabulates them; full range scales them back by 224/255 in
/// integers, and limited range scales luma by 255/219 and offsets it by 16.
const fn coefficients(kr: f64, kb: f64, range: Range) -> Coefficients {
    let kg = 1.0 - kr - kb;
    let c = 255.0 / 224.0;
    let (mut crv, mut cbu) = (fixed16(c * 2.0 * (1.0 - kr)), fixed16(c * 2.0 * (1.0 - kb)));
    let (mut cgu, mut cgv) = (
        -fixed16(c * 2.0 * (1.0 - kb) * kb / kg),
        -fixed16(c * 2.0 * (1.0 - kr) * kr / kg),
    );
    let (cy, oy): (i64, i64) = match range {
        Range::Limited => ((65536 * 255) / 219, 16 << 16),
        Range::Full => {
            crv = crv * 224 / 255;
            cbu = cbu * 224 / 255;
            cgu = cgu * 224 / 255;
            cgv = cgv * 224 / 255;
            (65536, 0)
        }
    };
    Coefficients {
        y: round16(cy << 13),
        y_off: round16(oy << 3),
        rv: round16(crv << 13),
        gu: round16(cgu << 13),
        gv: round16(cgv << 13),
        bu: round16(cbu << 13),
    }
}

const fn table(matrix: Matrix, range: Range) -> Coefficients {
    match matrix {
        Matrix::Bt601 => coefficients(0.299, 0.114, range),
        Matrix::Bt709 => coefficients(0.2126, 0.0722, range),
    }
}

/// The high 16 bits of a product, rounded down (x86's `pmulhw`).
#[inline(always)]
fn mulhi(a: i32, b: i32) -> i32 {
    (a * b) >> 16
}

#[inline(always)]
fn clamp8(x: i32) -> u8 {
    x.clamp(0, 255) as u8
}

/// A rectangle of a picture, in luma samples: columns `x0..x1`, rows `y0..y1`. `x0` is even,
/// so that each chroma sample still covers the same two columns as in the whole picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub x0: usize,
    pub y0: usize,
    pub x1: usize,
    pub y1: usize,
}

impl Region {
    /// The whole of a `width` x `height` picture.
    pub fn whole(width: usize, height: usize) -> Region {
        Region {
            x0: 0,
            y0: 0,
            x1: width,
            y1: height,
        }
    }

    pub fn width(&self) -> usize {
        self.x1 - self.x0
    }

    pub fn height(&self) -> usize {
        self.y1 - self.y0
    }

    /// Bytes of the region as packed RGB.
    pub fn rgb_len(&self) -> usize {
        self.width() * self.height() * 3
    }

    /// `Err` unless this is a non-empty rectangle of a `width` x `height` picture starting at
    /// an even column.
    pub fn check(&self, width: usize, height: usize) -> Result<(), String> {
        if !self.x0.is_multiple_of(2)
            || self.x0 >= self.x1
            || self.y0 >= self.y1
            || self.x1 > width
            || self.y1 > height
        {
            return Err(format!(
                "the region {self:?} is not an even-aligned part of a {width}x{height} picture"
            ));
        }
        Ok(())
    }
}

/// Writes the picture as packed RGB (`height` rows of `width * 3` bytes) into `out`, which
/// must be exactly that long.
pub fn to_rgb(p: &Planes, matrix: Matrix, range: Range, out: &mut [u8]) -> Result<(), String> {
    to_rgb_region(p, matrix, range, Region::whole(p.width, p.height), out)
}

/// Writes `region` of the picture as packed RGB into `out` (exactly `region.rgb_len()`
/// bytes): the same pixels as those of [`to_rgb`] in that rectangle, since each pixel depends
/// only on its own luma sample and the chroma sample of its 2x2 block. A crop converts only
/// what it keeps.
pub fn to_rgb_region(
    p: &Planes,
    matrix: Matrix,
    range: Range,
    region: Region,
    out: &mut [u8],
) -> Result<(), String> {
    p.check()?;
    if p.width == 0 || p.height == 0 {
        return if out.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "an RGB buffer of {} bytes for an empty picture",
                out.len()
            ))
        };
    }
    region.check(p.width, p.height)?;
    if out.len() != region.rgb_len() {
        return Err(format!(
            "an RGB buffer of {} bytes for a {}x{} region",
            out.len(),
            region.width(),
            region.height()
        ));
    }
    let c = table(matrix, range);
    let w = region.width();
    let (cx, cw) = (region.x0 / 2, w.div_ceil(2));
    for (row, rgb) in (region.y0..region.y1).zip(out.chunks_exact_mut(w * 3)) {
        let y_row = &p.y[row * p.y_stride + region.x0..][..w];
        let u_row = &p.u[(row / 2) * p.uv_stride + cx..][..cw];
        let v_row = &p.v[(row / 2) * p.uv_stride + cx..][..cw];
        convert_row(&c, y_row, u_row, v_row, rgb);
    }
    Ok(())
}

/// Luma samples converted per block: the arithmetic runs on fixed-size arrays, which the
/// compiler turns into SIMD; only the interleaving store is per sample.
const BLOCK: usize = 32;

/// [`mulhi`] on 16-bit lanes: every operand fits (samples times 8 are below 2^11, the
/// coefficients below 2^15), and the 16-bit form is one SSE2 instruction (`pmulhw`) where
/// the 32-bit one has no single-instruction multiply before SSE4.1 (measured: 150 µs per
/// 456x256 frame with 32-bit lanes; see docs/DECISIONS.md, "Video segments").
#[inline(always)]
fn mulhi16(a: i16, b: i16) -> i16 {
    ((a as i32 * b as i32) >> 16) as i16
}

/// [`convert_row_body`], compiled for AVX2 when the CPU has it (the same arithmetic, so the
/// same bytes; the release wheel's baseline is SSE2, where the compiler cannot vectorise the
/// interleaving store).
fn convert_row(c: &Coefficients, y: &[u8], u: &[u8], v: &[u8], rgb: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { convert_row_avx2(c, y, u, v, rgb) };
            return;
        }
    }
    convert_row_body(c, y, u, v, rgb)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn convert_row_avx2(c: &Coefficients, y: &[u8], u: &[u8], v: &[u8], rgb: &mut [u8]) {
    convert_row_body(c, y, u, v, rgb)
}

#[inline(always)]
fn convert_row_body(c: &Coefficients, y: &[u8], u: &[u8], v: &[u8], rgb: &mut [u8]) {
    let blocks = y.len() / BLOCK;
    let (cy, y_off) = (c.y as i16, c.y_off as i16);
    let (rv, gu, gv, bu) = (c.rv as i16, c.gu as i16, c.gv as i16, c.bu as i16);
    for (((ys, us), vs), px) in y
        .chunks_exact(BLOCK)
        .zip(u.chunks_exact(BLOCK / 2))
        .zip(v.chunks_exact(BLOCK / 2))
        .zip(rgb.chunks_exact_mut(BLOCK * 3))
    {
        let mut l = [0i16; BLOCK];
        for (l, &y) in l.iter_mut().zip(ys) {
            *l = mulhi16(8 * y as i16 - y_off, cy);
        }
        let (mut r, mut g, mut b) = ([0i16; BLOCK / 2], [0i16; BLOCK / 2], [0i16; BLOCK / 2]);
        for ((((r, g), b), &u), &v) in r.iter_mut().zip(&mut g).zip(&mut b).zip(us).zip(vs) {
            let (u, v) = (8 * (u as i16 - 128), 8 * (v as i16 - 128));
            *r = mulhi16(v, rv);
            *g = mulhi16(u, gu) + mulhi16(v, gv);
            *b = mulhi16(u, bu);
        }
        for (i, dst) in px.chunks_exact_mut(3).enumerate() {
            dst[0] = (l[i] + r[i / 2]).clamp(0, 255) as u8;
            dst[1] = (l[i] + g[i / 2]).clamp(0, 255) as u8;
            dst[2] = (l[i] + b[i / 2]).clamp(0, 255) as u8;
        }
    }
    // The rest of the row (fewer than BLOCK samples), two luma samples per chroma pair.
    let done = blocks * BLOCK;
    for (((px, ys), &u), &v) in rgb[done * 3..]
        .chunks_mut(6)
        .zip(y[done..].chunks(2))
        .zip(&u[done / 2..])
        .zip(&v[done / 2..])
    {
        let (u, v) = (8 * (u as i32 - 128), 8 * (v as i32 - 128));
        let (r, g, b) = (
            mulhi(v, c.rv),
            mulhi(u, c.gu) + mulhi(v, c.gv),
            mulhi(u, c.bu),
        );
        for (dst, &yy) in px.chunks_exact_mut(3).zip(ys) {
            let l = mulhi(8 * yy as i32 - c.y_off, c.y);
            dst[0] = clamp8(l + r);
            dst[1] = clamp8(l + g);
            dst[2] = clamp8(l + b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(y: u8, u: u8, v: u8, m: Matrix, r: Range) -> [u8; 3] {
        let planes = Planes {
            y: &[y],
            u: &[u],
            v: &[v],
            y_stride: 1,
            uv_stride: 1,
            width: 1,
            height: 1,
        };
        let mut out = [0u8; 3];
        to_rgb(&planes, m, r, &mut out).unwrap();
        out
    }

    #[test]
    fn limited_range_black_white_and_grey() {
        for m in [Matrix::Bt601, Matrix::Bt709] {
            assert_eq!(convert(16, 128, 128, m, Range::Limited), [0, 0, 0]);
            assert_eq!(convert(235, 128, 128, m, Range::Limited), [255, 255, 255]);
            assert_eq!(convert(126, 128, 128, m, Range::Limited), [128, 128, 128]);
            assert_eq!(convert(0, 128, 128, m, Range::Full), [0, 0, 0]);
            assert_eq!(convert(255, 128, 128, m, Range::Full), [255, 255, 255]);
        }
    }

    #[test]
    fn equals_ffmpeg_on_sample_values() {
        // What PyAV 18 (FFmpeg 8's swscale) returns from `to_ndarray(format="rgb24")` for flat
        // yuv420p frames with these samples, per matrix and range.
        let cases = [
            (Matrix::Bt601, Range::Limited, [100, 90, 200], [211, 52, 20]),
            (Matrix::Bt601, Range::Limited, [81, 90, 240], [253, 0, 0]),
            (Matrix::Bt601, Range::Limited, [50, 200, 60], [0, 65, 184]),
            (Matrix::Bt709, Range::Limited, [100, 90, 200], [226, 66, 16]),
            (Matrix::Bt709, Range::Limited, [81, 90, 240], [255, 23, 0]),
            (Matrix::Bt709, Range::Limited, [50, 200, 60], [0, 59, 191]),
            (Matrix::Bt601, Range::Full, [100, 90, 200], [200, 61, 32]),
            (Matrix::Bt601, Range::Full, [81, 90, 240], [238, 14, 13]),
            (Matrix::Bt601, Range::Full, [50, 200, 60], [0, 73, 177]),
            (Matrix::Bt601, Range::Full, [235, 128, 128], [235, 235, 235]),
        ];
        for (m, r, [y, u, v], want) in cases {
            assert_eq!(convert(y, u, v, m, r), want, "{m:?} {r:?} {y} {u} {v}");
        }
    }

    #[test]
    fn odd_sizes_use_the_last_chroma_sample() {
        // 3x3 picture: chroma is 2x2; the last column and row reuse chroma column/row 1.
        let y = [16u8; 9];
        let u = [128u8, 128, 128, 240];
        let v = [128u8, 128, 128, 240];
        let planes = Planes {
            y: &y,
            u: &u,
            v: &v,
            y_stride: 3,
            uv_stride: 2,
            width: 3,
            height: 3,
        };
        let mut out = [0u8; 27];
        to_rgb(&planes, Matrix::Bt601, Range::Limited, &mut out).unwrap();
        assert_eq!(&out[..3], &[0, 0, 0]);
        // Pixel (2, 2) uses chroma (1, 1): strongly magenta.
        assert!(
            out[24] > 150 && out[26] > 150 && out[25] == 0,
            "{:?}",
            &out[24..]
        );
    }

    #[test]
    fn blocks_and_row_tails_agree_with_the_per_pixel_formula() {
        // Widths below, at and across the block size, odd and even, with strides > width.
        let mut seed = 1u32;
        let mut byte = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 16) as u8
        };
        for width in [1usize, 2, 15, 16, 17, 33, 47] {
            let height: usize = 3;
            let (cw, ch) = (width.div_ceil(2), height.div_ceil(2));
            let y: Vec<u8> = (0..(width + 5) * height).map(|_| byte()).collect();
            let u: Vec<u8> = (0..(cw + 3) * ch).map(|_| byte()).collect();
            let v: Vec<u8> = (0..(cw + 3) * ch).map(|_| byte()).collect();
            let planes = Planes {
                y: &y,
                u: &u,
                v: &v,
                y_stride: width + 5,
                uv_stride: cw + 3,
                width,
                height,
            };
            for (m, r) in [
                (Matrix::Bt601, Range::Limited),
                (Matrix::Bt709, Range::Full),
            ] {
                let mut out = vec![0u8; width * height * 3];
                to_rgb(&planes, m, r, &mut out).unwrap();
                for row in 0..height {
                    for x in 0..width {
                        let at = row * (width + 5) + x;
                        let c = (row / 2) * (cw + 3) + x / 2;
                        let want = convert(y[at], u[c], v[c], m, r);
                        let got = &out[(row * width + x) * 3..][..3];
                        assert_eq!(got, want, "width {width} row {row} x {x}");
                    }
                }
            }
        }
    }

    #[test]
    fn short_planes_or_output_are_errors() {
        let planes = Planes {
            y: &[0; 3],
            u: &[0; 1],
            v: &[0; 1],
            y_stride: 2,
            uv_stride: 1,
            width: 2,
            height: 2,
        };
        assert!(to_rgb(&planes, Matrix::Bt601, Range::Limited, &mut [0; 12]).is_err());
        let planes = Planes {
            y: &[0; 4],
            ..planes
        };
        assert!(to_rgb(&planes, Matrix::Bt601, Range::Limited, &mut [0; 11]).is_err());
        assert!(to_rgb(&planes, Matrix::Bt601, Range::Limited, &mut [0; 12]).is_ok());
    }
}
