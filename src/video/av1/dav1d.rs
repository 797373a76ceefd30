//! The libdav1d backend's half of [`super`]: dav1d 1.4.3 (VideoLAN's C decoder, the one
//! FFmpeg, Chrome and Firefox use), built from source and linked statically by
//! `libdav1d-sys`. The `turbo` builds take it, since they have the C toolchain and nasm it
//! needs; it decodes with one frame context and no threads of its own, where rav1d 1.1.0
//! needs two (and two threads) to stay clear of an abort on damaged input: 30-36% less CPU
//! per segment (docs/DECISIONS.md, "Video segments").
//!
//! C reports every decode failure as a return code, so nothing here can panic or abort.
//! The enums of the generated bindings are Rust enums: a value outside them (dav1d copies
//! the colour codes of a sequence header from the stream unchecked) must never be read as
//! one, so such fields are read as the integers they are in C.

use std::mem::MaybeUninit;
use std::ptr::{addr_of, null_mut};

use libdav1d_sys::{
    dav1d_close, dav1d_data_create, dav1d_data_unref, dav1d_default_settings, dav1d_get_picture,
    dav1d_open, dav1d_picture_unref, dav1d_send_data, Dav1dContext, Dav1dData, Dav1dPicture,
    Dav1dPixelLayout, Dav1dSettings,
};

pub const NAME: &str = "libdav1d";

/// One frame context and no worker threads: parallelism is across segments, on our pool, and
/// a process with no decoder threads forks safely whatever another thread is decoding.
pub const FRAME_CONTEXTS: i32 = 1;

pub type Context = *mut Dav1dContext;
pub type Data = Dav1dData;
pub type Pic = Dav1dPicture;

/// Opens a decoder with one frame context and thread, no logger, and `max_pixels` as the frame
/// size limit; `Err` carries dav1d's code.
pub fn open(max_pixels: u32) -> Result<Context, i32> {
    let mut settings = MaybeUninit::<Dav1dSettings>::zeroed();
    // SAFETY: `settings` is a writable `Dav1dSettings`; the call fills every field.
    unsafe { dav1d_default_settings(settings.as_mut_ptr()) };
    // SAFETY: initialised just above.
    let mut settings = unsafe { settings.assume_init() };
    settings.n_threads = FRAME_CONTEXTS;
    settings.max_frame_delay = FRAME_CONTEXTS;
    settings.frame_size_limit = max_pixels;
    // No logger: decode errors come back as return codes, not as lines on stderr.
    settings.logger.callback = None;
    settings.logger.cookie = null_mut();
    let mut ctx: Context = null_mut();
    // SAFETY: both pointers are valid for the call.
    let r = unsafe { dav1d_open(&mut ctx, &settings) };
    if r == 0 && !ctx.is_null() {
        Ok(ctx)
    } else {
        Err(r)
    }
}

/// # Safety
/// `ctx` came from [`open`] and is not used again.
pub unsafe fn close(ctx: Context) {
    let mut ctx = ctx;
    // SAFETY: per this function's contract.
    unsafe { dav1d_close(&mut ctx) };
}

/// A buffer of `len` bytes owned by the decoder's data type, or `None` without memory.
pub fn data_with(len: usize) -> Option<(Data, *mut u8)> {
    // SAFETY: an all-zero `Dav1dData` is the empty value dav1d's API expects.
    let mut data: Dav1dData = unsafe { std::mem::zeroed() };
    // SAFETY: `data` is a valid `Dav1dData`.
    let buf = unsafe { dav1d_data_create(&mut data, len) };
    (!buf.is_null()).then_some((data, buf))
}

pub fn data_len(data: &Data) -> usize {
    data.sz
}

/// # Safety
/// `data` came from [`data_with`]; unref on an emptied value is a no-op.
pub unsafe fn data_unref(data: &mut Data) {
    // SAFETY: per this function's contract.
    unsafe { dav1d_data_unref(data) };
}

/// # Safety
/// `ctx` is open.
pub unsafe fn send_data(ctx: Context, data: &mut Data) -> i32 {
    // SAFETY: per this function's contract; `data` is valid and updated in place.
    unsafe { dav1d_send_data(ctx, data) }
}

pub fn empty_picture() -> Pic {
    // SAFETY: all-zero is the empty `Dav1dPicture` `get_picture` fills (null pointers, zero
    // sizes; zero is a valid value of each enum field).
    unsafe { std::mem::zeroed() }
}

/// # Safety
/// `ctx` is open and `pic` empty.
pub unsafe fn get_picture(ctx: Context, pic: &mut Pic) -> i32 {
    // SAFETY: per this function's contract.
    unsafe { dav1d_get_picture(ctx, pic) }
}

/// # Safety
/// `pic` was filled by [`get_picture`] and is released once.
pub unsafe fn picture_unref(pic: &mut Pic) {
    // SAFETY: per this function's contract.
    unsafe { dav1d_picture_unref(pic) };
}

/// Width and height in pixels.
pub fn size(pic: &Pic) -> (i32, i32) {
    (pic.p.w, pic.p.h)
}

/// Whether the picture is 4:2:0, and its bits per component. dav1d sets the layout from the
/// four it knows, so the enum field is valid.
pub fn format(pic: &Pic) -> (bool, i32) {
    (
        matches!(pic.p.layout, Dav1dPixelLayout::DAV1D_PIXEL_LAYOUT_I420),
        pic.p.bpc,
    )
}

/// Luma and chroma strides in bytes.
pub fn strides(pic: &Pic) -> [isize; 2] {
    pic.stride
}

/// Plane `i`'s first byte (0 luma, 1 and 2 chroma).
pub fn plane(pic: &Pic, i: usize) -> Option<*const u8> {
    let p = pic.data[i];
    (!p.is_null()).then_some(p.cast_const().cast::<u8>())
}

/// The sequence header's matrix coefficients code and colour range flag.
///
/// # Safety
/// `pic` holds a picture (its sequence header is alive while it is referenced).
pub unsafe fn color_codes(pic: &Pic) -> Option<(u32, u8)> {
    let seq = pic.seq_hdr;
    if seq.is_null() {
        return None;
    }
    // The matrix code is the stream's 8 bits, not necessarily one of the enum's values: read
    // as the `unsigned` C stores (the enum is `repr(u32)`), never as the Rust enum.
    // SAFETY: per this function's contract; the fields are read through raw pointers, with
    // no reference to the header made.
    unsafe {
        let mtrx = addr_of!((*seq).mtrx).cast::<u32>().read();
        let range = addr_of!((*seq).color_range).read();
        Some((mtrx, range))
    }
}
