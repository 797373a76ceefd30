//! The rav1d backend's half of [`super`]: rav1d 1.1.0 (the Rust port of dav1d) through its
//! dav1d-compatible API, its only public one. Pure Rust, built wherever Rust builds; the
//! `turbo` builds, which have a C toolchain, take libdav1d instead (`dav1d.rs`).
//!
//! rav1d's entry points are `extern "C"` functions: a panic inside rav1d cannot unwind out of
//! them and aborts the process (Rust's rule for non-unwinding ABIs). What this backend does
//! about it is run with two frame contexts ([`FRAME_CONTEXTS`]); `obu::walk` vets the stream
//! and sizes are limited before it allocates, as for every backend.

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

pub const NAME: &str = "rav1d";

/// rav1d's frame contexts (its `n_fc`: frames decoded at once), also its thread count, since
/// `n_fc` is `min(max_frame_delay, n_threads)`. Two, not one, to keep rav1d 1.1.0 from
/// aborting the process on damaged input: with a single frame context a frame that fails to
/// decode reaches `on_error` in `rav1d_submit_frame` after its frame header was released, and
/// its `unwrap()` panics inside the `extern "C"` API (memorysafety/rav1d PR #1496; reproducer
/// in tests/segments/rav1d-abort/). With two, decode errors take the frame-threading path,
/// which reports them as return codes; measured on 2026-11-26 in docs/DECISIONS.md ("Video
/// segments"), with its cost. Go back to 1 once a fixed rav1d is pinned.
pub const FRAME_CONTEXTS: i32 = 2;

pub type Context = Dav1dContext;
pub type Data = Dav1dData;
pub type Pic = Dav1dPicture;

/// Opens a decoder with `FRAME_CONTEXTS` frame contexts and threads, no logger, and
/// `max_pixels` as the frame size limit; `Err` carries rav1d's code.
pub fn open(max_pixels: u32) -> Result<Context, i32> {
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
        (0, Some(ctx)) => Ok(ctx),
        (code, _) => Err(code),
    }
}

/// # Safety
/// `ctx` came from [`open`] and is not used again.
pub unsafe fn close(ctx: Context) {
    let mut ctx = Some(ctx);
    // SAFETY: per this function's contract.
    unsafe { dav1d_close(Some(NonNull::from(&mut ctx))) };
}

/// A buffer of `len` bytes owned by the decoder's data type, or `None` without memory.
pub fn data_with(len: usize) -> Option<(Data, *mut u8)> {
    // SAFETY: an all-zero `Dav1dData` is the empty value dav1d's API expects.
    let mut data: Dav1dData = unsafe { std::mem::zeroed() };
    // SAFETY: `data` is a valid `Dav1dData`.
    let buf = unsafe { dav1d_data_create(Some(NonNull::from(&mut data)), len) };
    (!buf.is_null()).then_some((data, buf))
}

pub fn data_len(data: &Data) -> usize {
    data.sz
}

/// # Safety
/// `data` came from [`data_with`]; unref on an emptied value is a no-op.
pub unsafe fn data_unref(data: &mut Data) {
    // SAFETY: per this function's contract.
    unsafe { dav1d_data_unref(Some(NonNull::from(data))) };
}

/// # Safety
/// `ctx` is open.
pub unsafe fn send_data(ctx: Context, data: &mut Data) -> i32 {
    // SAFETY: per this function's contract; `data` is valid and updated in place.
    unsafe { dav1d_send_data(Some(ctx), Some(NonNull::from(data))) }.0
}

pub fn empty_picture() -> Pic {
    // SAFETY: an all-zero `Dav1dPicture` is the empty value `get_picture` fills.
    unsafe { std::mem::zeroed() }
}

/// # Safety
/// `ctx` is open and `pic` empty.
pub unsafe fn get_picture(ctx: Context, pic: &mut Pic) -> i32 {
    // SAFETY: per this function's contract.
    let r = unsafe { dav1d_get_picture(Some(ctx), Some(NonNull::from(&mut *pic))) }.0;
    if r != 0 {
        release_default(pic);
    }
    r
}

/// # Safety
/// `pic` was filled by [`get_picture`] and is released once.
pub unsafe fn picture_unref(pic: &mut Pic) {
    // SAFETY: per this function's contract.
    unsafe { dav1d_picture_unref(Some(NonNull::from(&mut *pic))) };
    release_default(pic);
}

/// Frees what rav1d 1.1.0 leaves behind in a picture struct it has written an empty picture
/// into (`dav1d_picture_unref` always, `dav1d_get_picture` when it returns no picture): a
/// freshly allocated, empty `itut_t35` `Arc` that no call of its API releases, 48 bytes per
/// decoded frame otherwise (found by LeakSanitizer in the fuzz build; tested in
/// tests/video_leak.rs). Only for structs that hold no picture: a real picture's references
/// are released by `dav1d_picture_unref`.
fn release_default(pic: &mut Pic) {
    if let Some(raw) = pic.itut_t35_ref.take() {
        // SAFETY: rav1d made `raw` with `RawArc::from_arc` when it wrote the empty picture, and
        // nothing else refers to that new `Arc`; taking it out of the struct means it is
        // converted back exactly once.
        drop(unsafe { raw.into_arc() });
    }
    pic.itut_t35 = None;
    pic.n_itut_t35 = 0;
}

/// Width and height in pixels.
pub fn size(pic: &Pic) -> (i32, i32) {
    (pic.p.w, pic.p.h)
}

/// Whether the picture is 4:2:0, and its bits per component.
pub fn format(pic: &Pic) -> (bool, i32) {
    (pic.p.layout == DAV1D_PIXEL_LAYOUT_I420, pic.p.bpc)
}

/// Luma and chroma strides in bytes.
pub fn strides(pic: &Pic) -> [isize; 2] {
    pic.stride
}

/// Plane `i`'s first byte (0 luma, 1 and 2 chroma).
pub fn plane(pic: &Pic, i: usize) -> Option<*const u8> {
    pic.data[i].map(|p| p.as_ptr().cast_const().cast::<u8>())
}

/// The sequence header's matrix coefficients code and colour range flag.
///
/// # Safety
/// `pic` holds a picture (its sequence header is alive while it is referenced).
pub unsafe fn color_codes(pic: &Pic) -> Option<(u32, u8)> {
    let seq = pic.seq_hdr?;
    // SAFETY: per this function's contract.
    let seq = unsafe { seq.as_ref() };
    Some((seq.mtrx, seq.color_range))
}
