//! The segment decoder returns every byte it allocates: decoding the same segment many times
//! leaves the heap where one decode left it. A binary of its own, because it counts the whole
//! process's allocations through a global allocator (rav1d 1.1.0 leaked an `Arc` per decoded
//! picture, released in `video::av1`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicIsize, Ordering};

use gulpio_rs::video::{decode_segment, Codec, Integrity, SegmentShape};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn decoding_does_not_grow_the_heap() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/segments/bt601-128x72-0.av1");
    let bytes = std::fs::read(&path).expect("tests/segments");
    let shape = SegmentShape {
        codec: Codec::Av1,
        width: 128,
        height: 72,
        frames: 8,
    };
    let crc = Integrity::Crc(crc32fast::hash(&bytes));
    let mut bufs = vec![vec![0u8; shape.frame_len()]; shape.frames];
    let wanted: Vec<usize> = (0..shape.frames).collect();
    let mut decode = |times: usize| {
        for _ in 0..times {
            let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
            decode_segment(&shape, &bytes, crc, &wanted, &mut outs).expect("a real segment");
        }
    };
    // Warm up (one-time tables, thread-locals), then compare two rounds of different length.
    decode(3);
    let before = LIVE.load(Ordering::Relaxed);
    decode(10);
    let after_10 = LIVE.load(Ordering::Relaxed);
    decode(40);
    let after_50 = LIVE.load(Ordering::Relaxed);
    // 400 pictures at the old 48 bytes each would be 19,200 bytes; allow small noise from
    // threads' lazily created state, which does not scale with the pictures decoded.
    let grew = after_50 - after_10;
    assert!(
        grew < 1024,
        "heap grew by {grew} bytes over 40 decodes of an 8-frame segment (before: {before}, \
         after 10: {after_10}, after 50: {after_50})"
    );
}
