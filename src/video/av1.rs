//! The AV1 backend: rav1d, the Rust port of dav1d, through its dav1d-compatible API (its only
//! public one). Everything `unsafe` about it is in this file; `mod.rs` sees a decoder that
//! takes a segment's bytes and hands out pictures one at a time.
//!
//! rav1d's entry points are `extern "C"` functions: a panic inside rav1d cannot unwind out of
//! them and aborts the process (Rust's rule for non-unwinding ABIs). What this module can do
//! about it is keep such input away and out of rav1d's known panicking paths: `obu::walk`
//! vets the stream first, sizes are limited before the decoder allocates, the decoder runs
//! with two frame contexts (`FRAME_CONTEXTS`), and the fuzz target `video_segment` runs rav1d
//! on hostile bytes (docs/DECISIONS.md, "Video segments").

use std::mem::MaybeUninit;
use std::ptr::{addr_of_mut, NonNull};

use rav1d::include::dav1d::data::Dav1dData;
use rav1d::include::dav1d::dav1d::{Dav1dContext, Dav1dSettings};
use rav1d::include::dav1d::headers::DAV1D_PIXEL_LAYOUT_I420;
use rav1d::include::dav1d::picture::Dav1dPicture;
use rav1d::src::lib::{
    dav1d_close, dav1d_data_create, dav1d_data_unref, dav1d_default_settings, dav1d_get_picture,
    dav1d_open, dav1d_picture_unref, dav1d_send_data,
};

use super::fork_gate::{self, Admission};
use super::yuv::{Matrix, Planes, Range};

/// `DAV1D_ERR(EAGAIN)`: the decoder wants its picture taken (send) or more data (get).
const EAGAIN: i32 = -11;

/// rav1d's frame contexts (its `n_fc`: frames decoded at once), also its thread count, since
/// `n_fc` is `min(max_frame_delay, n_threads)`. Two, not one, to keep rav1d 1.1.0 from
/// aborting the process on damaged input: with a single frame context a frame that fails to
/// decode reaches `on_error` in `rav1d_submit_frame` after its frame header was released, and
/// its `unwrap()` panics inside the `extern "C"` API (memorysafety/rav1d PR #1496; reproducer
/// in tests/segments/rav1d-abort/). With two, decode errors take the frame-threading path,
/// which reports them as return codes; measured on 2026-11-26 in docs/DECISIONS.md ("Video
/// segments"), with its cost. Go back to 1 once a fixed rav1d is pinned.
const FRAME_CONTEXTS: i32 = 2;

/// One decoder instance. Parallelism is across segments, on our own pool; rav1d's own
/// `FRAME_CONTEXTS` threads per instance are there for the reason given on that constant.
pub struct Decoder {
    ctx: Dav1dContext,
    /// Held until the context is closed (fields drop after `Drop::drop`): a fork waits for
    /// it and for the worker threads to exit (`fork_gate`).
    _admission: Admission,
}

// SAFETY: a rav1d context is an `Arc` of a `Mutex`-guarded state designed to be driven from
// any thread (dav1d's API is thread-compatible); `Decoder` is only used through `&mut self`.
unsafe impl Send for Decoder {}

impl Decoder {
    /// A decoder that refuses frames over `max_pixels` (width x height) before allocating them.
    pub fn new(max_pixels: u32) -> Result<Decoder, String> {
        let admission = fork_gate::admit()?;
        let mut settings = MaybeUninit::<Dav1dSettings>::zeroed();
        // SAFETY: `settings` is a valid, writable `Dav1dSettings`-sized buffer; the call fills
        // every field.
        unsafe { dav1d_default_settings(NonNull::from(&mut settings).cast()) };
        // SAFETY: initialised by `dav1d_default_settings` just above.
        let mut settings = unsafe { settings.assume_init() };
        settings.n_threads = FRAME_CONTEXTS;
        settings.max_frame_delay = FRAME_CONTEXTS;
        settings.frame_size_limit = max_pixels;
        // The logger's type is private to rav1d; all-zero is its "no logger" value (a `None`
        // callback): decode errors come back as return codes, not as lines on stderr.
        // SAFETY: the field is a `#[repr(C)]` pair of nullable pointers, for which all-zero
        // bytes are `None`.
        unsafe {
            let logger = addr_of_mut!(settings.logger);
            std::ptr::write_bytes(logger.cast::<u8>(), 0, std::mem::size_of_val(&*logger));
        }
        let mut ctx: Option<Dav1dContext> = None;
        // SAFETY: both pointers are valid for the call; `settings` outlives it.
        let r = unsafe {
            dav1d_open(
                Some(NonNull::from(&mut ctx)),
                Some(NonNull::from(&mut settings)),
            )
        };
        match (r.0, ctx) {
            (0, Some(ctx)) => Ok(Decoder {
                ctx,
                _admission: admission,
            }),
            (code, _) => Err(format!("cannot start the AV1 decoder (error {code})")),
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
        // SAFETY: an all-zero `Dav1dData` is the empty value dav1d's API expects.
        let mut owned: Dav1dData = unsafe { std::mem::zeroed() };
        // rav1d keeps its own reference to the bytes it has not consumed yet, so they are
        // copied into a buffer it owns rather than lent (segments are kilobytes).
        // SAFETY: `owned` is a valid `Dav1dData`; the returned buffer has `data.len()` bytes.
        let buf = unsafe { dav1d_data_create(Some(NonNull::from(&mut owned)), data.len()) };
        if buf.is_null() {
            return Err(format!(
                "cannot allocate {} bytes for a segment",
                data.len()
            ));
        }
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
            if pending.data.sz > 0 {
                // SAFETY: `ctx` is open; `pending.data` is a valid `Dav1dData` whose consumed
                // part rav1d updates in place.
                let r = unsafe {
                    dav1d_send_data(Some(self.ctx), Some(NonNull::from(&mut pending.data)))
                };
                if r.0 != 0 && r.0 != EAGAIN {
                    return Err(format!("AV1 decoding failed (error {})", r.0));
                }
            }
            // SAFETY: an all-zero `Dav1dPicture` is the empty value `get_picture` fills.
            let mut pic: Dav1dPicture = unsafe { std::mem::zeroed() };
            // SAFETY: `ctx` is open and `pic` writable.
            let r = unsafe { dav1d_get_picture(Some(self.ctx), Some(NonNull::from(&mut pic))) };
            if r.0 != 0 {
                release_default(&mut pic);
            }
            match r.0 {
                0 => return Ok(Some(Picture { pic })),
                EAGAIN if pending.data.sz > 0 => continue,
                // All data sent: with frame threading the pictures still in flight come out
                // of the calls after the first that finds no new data (rav1d's `drain`).
                EAGAIN if !pending.draining => pending.draining = true,
                EAGAIN => return Ok(None),
                code => return Err(format!("AV1 decoding failed (error {code})")),
            }
        }
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        let mut ctx = Some(self.ctx);
        // SAFETY: `ctx` came from `dav1d_open` and is closed once, here.
        unsafe { dav1d_close(Some(NonNull::from(&mut ctx))) };
    }
}

/// A segment's bytes inside the decoder, not yet all consumed.
pub struct Pending {
    data: Dav1dData,
    /// Everything was sent and the decoder asked once more: the next request drains it.
    draining: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        // SAFETY: `data` came from `dav1d_data_create`; unref on an emptied value is a no-op.
        unsafe { dav1d_data_unref(Some(NonNull::from(&mut self.data))) };
    }
}

/// A decoded picture (rav1d's reference to it, released on drop).
pub struct Picture {
    pic: Dav1dPicture,
}

impl Picture {
    pub fn width(&self) -> usize {
        self.pic.p.w.max(0) as usize
    }
    pub fn height(&self) -> usize {
        self.pic.p.h.max(0) as usize
    }

    /// The colour conversion the stream signals: `Err` for what is not 8-bit 4:2:0 YCbCr.
    pub fn color(&self) -> Result<(Matrix, Range), String> {
        if self.pic.p.layout != DAV1D_PIXEL_LAYOUT_I420 || self.pic.p.bpc != 8 {
            return Err(format!(
                "the segment's pictures are {}-bit with chroma layout {}; only 8-bit 4:2:0 is \
                 stored",
                self.pic.p.bpc, self.pic.p.layout
            ));
        }
        let seq = self
            .pic
            .seq_hdr
            .ok_or("a decoded picture without its sequence header")?;
        // SAFETY: rav1d keeps the sequence header alive as long as the picture references it.
        let seq = unsafe { seq.as_ref() };
        let matrix = u8::try_from(seq.mtrx)
            .ok()
            .and_then(Matrix::from_av1_code)
            .ok_or_else(|| format!("the segment's colour matrix {} is not stored", seq.mtrx))?;
        let range = if seq.color_range != 0 {
            Range::Full
        } else {
            Range::Limited
        };
        Ok((matrix, range))
    }

    /// The picture's planes, borrowed from rav1d's buffers.
    pub fn planes(&self) -> Result<Planes<'_>, String> {
        let (w, h) = (self.width(), self.height());
        let (ys, cs) = (self.pic.stride[0], self.pic.stride[1]);
        if ys < w as isize || cs < w.div_ceil(2) as isize {
            return Err("a decoded picture with negative or short strides".into());
        }
        let (ys, cs) = (ys as usize, cs as usize);
        let plane = |i: usize, stride: usize, rows: usize| -> Result<&[u8], String> {
            let p = self.pic.data[i].ok_or("a decoded picture without pixels")?;
            let len = stride * rows;
            // SAFETY: rav1d allocates each plane as `stride * rows` bytes (rows padded up, never
            // fewer than the picture's) and keeps it alive while the picture is referenced;
            // `self` borrows the picture for the slice's lifetime.
            Ok(unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<u8>(), len) })
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
        // SAFETY: `pic` was filled by `dav1d_get_picture` and is released once, here.
        unsafe { dav1d_picture_unref(Some(NonNull::from(&mut self.pic))) };
        release_default(&mut self.pic);
    }
}

/// Frees what rav1d 1.1.0 leaves behind in a picture struct it has written an empty picture
/// into (`dav1d_picture_unref` always, `dav1d_get_picture` when it returns no picture): a
/// freshly allocated, empty `itut_t35` `Arc` that no call of its API releases, 48 bytes per
/// decoded frame otherwise (found by LeakSanitizer in the fuzz build; tested in
/// tests/video_leak.rs). Only for structs that hold no picture: a real picture's references
/// are released by `dav1d_picture_unref`.
fn release_default(pic: &mut Dav1dPicture) {
    if let Some(raw) = pic.itut_t35_ref.take() {
        // SAFETY: rav1d made `raw` with `RawArc::from_arc` when it wrote the empty picture, and
        // nothing else refers to that new `Arc`; taking it out of the struct means it is
        // converted back exactly once.
        drop(unsafe { raw.into_arc() });
    }
    pic.itut_t35 = None;
    pic.n_itut_t35 = 0;
}
