//! The AV1 decoder behind segments: one facade over two backends, chosen when the crate is
//! built. `turbo` builds (a C toolchain and nasm, as wheels and `pip install` with nasm have)
//! decode with libdav1d (`dav1d.rs`); the others with rav1d, the Rust port of dav1d
//! (`rav1d.rs`). Both export dav1d's C API under the same symbol names, so exactly one is
//! linked: the features `dav1d` and `rav1d` exclude each other. Everything `unsafe` about
//! either is in its own file; `video::mod` sees a decoder that takes a segment's bytes and
//! hands out pictures one at a time.
//!
//! Whatever the backend, hostile input is kept away from it first: `obu::walk` vets the
//! stream, sizes are limited before the decoder allocates, and the fuzz target
//! `video_segment` runs the decoder on hostile bytes (docs/DECISIONS.md, "Video segments").

#[cfg(all(feature = "dav1d", feature = "rav1d"))]
compile_error!(
    "the features `dav1d` and `rav1d` both link dav1d's C API; build with one \
     (`--no-default-features --features dav1d` for libdav1d)"
);
#[cfg(not(any(feature = "dav1d", feature = "rav1d")))]
compile_error!("an AV1 decoder is needed: build with the feature `rav1d` (default) or `dav1d`");

#[cfg(feature = "dav1d")]
#[path = "dav1d.rs"]
mod backend;
#[cfg(all(feature = "rav1d", not(feature = "dav1d")))]
#[path = "rav1d.rs"]
mod backend;

use super::fork_gate::{self, Admission};
use super::yuv::{Matrix, Planes, Range};

/// The decoder this build links: `"libdav1d"` or `"rav1d"`.
pub const BACKEND: &str = backend::NAME;

/// `DAV1D_ERR(EAGAIN)`: the decoder wants its picture taken (send) or more data (get).
const EAGAIN: i32 = -11;

/// Frames the backend decodes at once (its `n_fc`); also its own threads beyond the caller's.
pub const FRAME_CONTEXTS: i32 = backend::FRAME_CONTEXTS;

/// One decoder instance. Parallelism is across segments, on our own pool.
pub struct Decoder {
    ctx: backend::Context,
    /// Held until the context is closed (fields drop after `Drop::drop`): a fork waits for
    /// it and for rav1d's worker threads to exit (`fork_gate`).
    _admission: Admission,
}

// SAFETY: a decoder context (rav1d's `Arc` of a `Mutex`-guarded state, or dav1d's C struct)
// may be driven from any thread, one at a time (dav1d's API is thread-compatible); `Decoder`
// is only used through `&mut self`.
unsafe impl Send for Decoder {}

impl Decoder {
    /// A decoder that refuses frames over `max_pixels` (width x height) before allocating them.
    pub fn new(max_pixels: u32) -> Result<Decoder, String> {
        let admission = fork_gate::admit()?;
        match backend::open(max_pixels) {
            Ok(ctx) => Ok(Decoder {
                ctx,
                _admission: admission,
            }),
            Err(code) => Err(format!("cannot start the AV1 decoder (error {code})")),
        }
    }

    /// Gives the decoder `data` (the whole segment). Pictures are then taken with [`next`],
    /// which feeds the rest of the data as the decoder asks for it.
    ///
    /// [`next`]: Decoder::next
    pub fn start(&mut self, data: &[u8]) -> Result<Pending, String> {
        if data.is_empty() {
            return Err("empty segment".into());
        }
        // The decoder keeps its own reference to the bytes it has not consumed yet, so they
        // are copied into a buffer it owns rather than lent (segments are kilobytes).
        let (owned, buf) = backend::data_with(data.len())
            .ok_or_else(|| format!("cannot allocate {} bytes for a segment", data.len()))?;
        // SAFETY: `buf` holds `data.len()` writable bytes and does not overlap `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len()) };
        Ok(Pending {
            data: owned,
            draining: false,
        })
    }

    /// The next picture in display order, `None` when the data is used up and nothing more
    /// comes out.
    pub fn next(&mut self, pending: &mut Pending) -> Result<Option<Picture>, String> {
        loop {
            if backend::data_len(&pending.data) > 0 {
                // SAFETY: `ctx` is open; `pending.data` is a valid data value whose consumed
                // part the decoder updates in place.
                let r = unsafe { backend::send_data(self.ctx, &mut pending.data) };
                if r != 0 && r != EAGAIN {
                    return Err(format!("AV1 decoding failed (error {r})"));
                }
            }
            let mut pic = backend::empty_picture();
            // SAFETY: `ctx` is open and `pic` empty.
            let r = unsafe { backend::get_picture(self.ctx, &mut pic) };
            match r {
                0 => return Ok(Some(Picture { pic })),
                EAGAIN if backend::data_len(&pending.data) > 0 => continue,
                // All data sent: with frame threading the pictures still in flight come out
                // of the calls after the first that finds no new data (dav1d's `drain`).
                EAGAIN if !pending.draining => pending.draining = true,
                EAGAIN => return Ok(None),
                code => return Err(format!("AV1 decoding failed (error {code})")),
            }
        }
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: `ctx` came from `open` and is closed once, here.
        unsafe { backend::close(self.ctx) };
    }
}

/// A segment's bytes inside the decoder, not yet all consumed.
pub struct Pending {
    data: backend::Data,
    /// Everything was sent and the decoder asked once more: the next request drains it.
    draining: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        // SAFETY: `data` came from `data_with`; unref on an emptied value is a no-op.
        unsafe { backend::data_unref(&mut self.data) };
    }
}

/// A decoded picture (the decoder's reference to it, released on drop).
pub struct Picture {
    pic: backend::Pic,
}

impl Picture {
    pub fn width(&self) -> usize {
        backend::size(&self.pic).0.max(0) as usize
    }
    pub fn height(&self) -> usize {
        backend::size(&self.pic).1.max(0) as usize
    }

    /// The colour conversion the stream signals: `Err` for what is not 8-bit 4:2:0 YCbCr.
    pub fn color(&self) -> Result<(Matrix, Range), String> {
        let (i420, bpc) = backend::format(&self.pic);
        if !i420 || bpc != 8 {
            return Err(format!(
                "the segment's pictures are {bpc}-bit{}; only 8-bit 4:2:0 is stored",
                if i420 { "" } else { " and not 4:2:0" }
            ));
        }
        // SAFETY: `self.pic` holds a picture, referenced until `self` drops.
        let (mtrx, color_range) = unsafe { backend::color_codes(&self.pic) }
            .ok_or("a decoded picture without its sequence header")?;
        let matrix = u8::try_from(mtrx)
            .ok()
            .and_then(Matrix::from_av1_code)
            .ok_or_else(|| format!("the segment's colour matrix {mtrx} is not stored"))?;
        let range = if color_range != 0 {
            Range::Full
        } else {
            Range::Limited
        };
        Ok((matrix, range))
    }

    /// The picture's planes, borrowed from the decoder's buffers.
    pub fn planes(&self) -> Result<Planes<'_>, String> {
        let (w, h) = (self.width(), self.height());
        let [ys, cs] = backend::strides(&self.pic);
        if ys < w as isize || cs < w.div_ceil(2) as isize {
            return Err("a decoded picture with negative or short strides".into());
        }
        let (ys, cs) = (ys as usize, cs as usize);
        let plane = |i: usize, stride: usize, rows: usize| -> Result<&[u8], String> {
            let p = backend::plane(&self.pic, i).ok_or("a decoded picture without pixels")?;
            // SAFETY: both decoders allocate each plane as `stride * rows` bytes (rows padded
            // up, never fewer than the picture's) and keep it alive while the picture is
            // referenced; `self` borrows the picture for the slice's lifetime.
            Ok(unsafe { std::slice::from_raw_parts(p, stride * rows) })
        };
        Ok(Planes {
            y: plane(0, ys, h)?,
            u: plane(1, cs, h.div_ceil(2))?,
            v: plane(2, cs, h.div_ceil(2))?,
            y_stride: ys,
            uv_stride: cs,
            width: w,
            height: h,
        })
    }
}

impl Drop for Picture {
    fn drop(&mut self) {
        // SAFETY: `pic` was filled by `get_picture` and is released once, here.
        unsafe { backend::picture_unref(&mut self.pic) };
    }
}
