//! The segment decoder returns every byte it allocates: decoding the same segment many times
//! leaves the heap where one decode left it. A binary of its own, because it counts the whole
//! process's allocations through a global allocator (rav1d 1.1.0 leaked an `Arc` per decoded
//! picture, released in `video::av1`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

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
    // rav1d's worker threads exit after `decode_segment` returns and release what they hold
    // as they go, so each reading waits for them (measured in CI: a reading taken while they
    // were exiting was 476 kB off).
    let threads = threads_alive();
    // Warm up (one-time tables, thread-locals), then compare two rounds of different length.
    decode(3);
    let before = settled(threads);
    decode(10);
    let after_10 = settled(threads);
    decode(40);
    let after_50 = settled(threads);
    // 400 pictures at the old 48 bytes each would be 19,200 bytes; allow small noise from
    // threads' lazily created state, which does not scale with the pictures decoded.
    let grew = after_50 - after_10;
    assert!(
        grew < 1024,
        "heap grew by {grew} bytes over 40 decodes of an 8-frame segment (before: {before}, \
         after 10: {after_10}, after 50: {after_50})"
    );
}

/// This process's threads, from `/proc/self/task` (Linux, where CI runs).
fn threads_alive() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// The live heap once the decoders' worker threads have exited (back to `threads`) and the
/// count has not moved for 50 ms; after 10 s, whatever it is then.
fn settled(threads: usize) -> isize {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = LIVE.load(Ordering::Relaxed);
    let mut still = 0;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        let now = LIVE.load(Ordering::Relaxed);
        still = if now == last && threads_alive() <= threads {
            still + 1
        } else {
            0
        };
        last = now;
        if still >= 10 {
            break;
        }
    }
    last
}
