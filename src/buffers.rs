//! A small pool of large byte buffers, handed out again instead of freed.
//!
//! Why: a batch array above glibc's mmap threshold (32 MiB) is fresh memory on every call, and
//! the kernel faults in and zeroes each of its pages while the decoders write it, a sizeable
//! share of a `read_batch` (measured in docs/DECISIONS.md, "Output buffers"). A training loop asks
//! for the same size over and over, and at most two batches are alive at once (the one in use
//! and the one being made), so keeping two buffers removes that cost. Buffers idle for longer
//! than `max_idle` are let go, so a finished loop does not keep its memory for long.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// `len` zeroed bytes, or [`Error::OutOfMemory`] naming `what` where `vec![0; len]` would
/// abort the process: for every buffer whose size comes from input (a request, a file).
/// Zeroed by the allocator (`calloc`: fresh pages come zeroed from the kernel, no memset).
pub fn zeroed(len: usize, what: impl FnOnce() -> String) -> Result<Vec<u8>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let fail = |what: String| Error::OutOfMemory {
        bytes: len as u64,
        what,
    };
    let Ok(layout) = std::alloc::Layout::array::<u8>(len) else {
        return Err(fail(what()));
    };
    // SAFETY: `layout` has a non-zero size (len > 0).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(fail(what()));
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `[u8; len]`
    // (size `len`, alignment 1), which is what a `Vec<u8>` of capacity `len` frees with;
    // all `len` bytes are initialised (zeroed).
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// Buffers kept and handed out again, with the rules for which to keep.
pub struct BufferPool {
    kept: Mutex<Vec<(Vec<u8>, Instant)>>,
    /// Requests smaller than this are not pooled (malloc reuses its own heap for them).
    pub min_bytes: usize,
    /// At most this many buffers are kept.
    pub max_kept: usize,
    /// A buffer unused for this long is freed at the next `take` or `give`.
    pub max_idle: Duration,
}

impl BufferPool {
    pub const fn new(min_bytes: usize, max_kept: usize, max_idle: Duration) -> Self {
        BufferPool {
            kept: Mutex::new(Vec::new()),
            min_bytes,
            max_kept,
            max_idle,
        }
    }

    /// A buffer of at least `len` bytes (`len()` may be larger, by at most half, so a big
    /// buffer is not spent on a small request). Its contents are unspecified: leftovers of an
    /// earlier use, or zeros. `what` names the use, for the error when memory runs out.
    pub fn take(&self, len: usize, what: impl FnOnce() -> String) -> Result<Vec<u8>> {
        if len >= self.min_bytes {
            if let Ok(mut kept) = self.kept.lock() {
                self.expire(&mut kept);
                let fits = |b: &Vec<u8>| b.len() >= len && b.len() - len <= len / 2;
                // The smallest that fits: a pool of two sizes keeps serving both.
                if let Some(i) = (0..kept.len())
                    .filter(|&i| fits(&kept[i].0))
                    .min_by_key(|&i| kept[i].0.len())
                {
                    return Ok(kept.swap_remove(i).0);
                }
            }
        }
        zeroed(len, String::new).or_else(|_| {
            // Kept buffers that do not fit may hold the memory the new one needs.
            self.clear();
            zeroed(len, what)
        })
    }

    /// Gives a buffer back for a later `take`; the oldest is freed when the pool is full.
    pub fn give(&self, buf: Vec<u8>) {
        if buf.len() < self.min_bytes || self.max_kept == 0 {
            return;
        }
        if let Ok(mut kept) = self.kept.lock() {
            self.expire(&mut kept);
            if kept.len() >= self.max_kept {
                if let Some(oldest) = (0..kept.len()).min_by_key(|&i| kept[i].1) {
                    kept.swap_remove(oldest);
                }
            }
            kept.push((buf, Instant::now()));
        }
    }

    /// Bytes held by the pool now.
    pub fn kept_bytes(&self) -> usize {
        self.kept
            .lock()
            .map(|k| k.iter().map(|(b, _)| b.len()).sum())
            .unwrap_or(0)
    }

    /// Frees every kept buffer.
    pub fn clear(&self) {
        if let Ok(mut kept) = self.kept.lock() {
            kept.clear();
        }
    }

    fn expire(&self, kept: &mut Vec<(Vec<u8>, Instant)>) {
        let now = Instant::now();
        kept.retain(|(_, at)| now.duration_since(*at) < self.max_idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(p: &BufferPool, len: usize) -> Vec<u8> {
        p.take(len, String::new).unwrap()
    }

    #[test]
    fn an_allocation_that_cannot_be_made_is_an_error() {
        let got = zeroed(usize::MAX, || "the test".into());
        assert!(matches!(got, Err(Error::OutOfMemory { .. })));
        assert_eq!(zeroed(5, String::new).unwrap(), vec![0; 5]);
    }

    fn pool() -> BufferPool {
        BufferPool::new(100, 2, Duration::from_secs(60))
    }

    #[test]
    fn a_given_buffer_is_taken_again() {
        let p = pool();
        let mut b = take(&p, 1000);
        b[0] = 7;
        let ptr = b.as_ptr();
        p.give(b);
        assert_eq!(p.kept_bytes(), 1000);
        let again = take(&p, 1000);
        assert_eq!((again.as_ptr(), again[0]), (ptr, 7));
        assert_eq!(p.kept_bytes(), 0);
    }

    #[test]
    fn small_requests_are_not_pooled() {
        let p = pool();
        p.give(take(&p, 99));
        assert_eq!(p.kept_bytes(), 0);
    }

    #[test]
    fn a_much_bigger_buffer_is_not_spent_on_a_small_request() {
        let p = pool();
        p.give(vec![0; 1000]);
        assert_eq!(take(&p, 600).len(), 600); // 1000 - 600 > 300: a new buffer
        assert_eq!(take(&p, 700).len(), 1000); // within half: reused
        assert_eq!(take(&p, 1001).len(), 1001); // too small: new
    }

    #[test]
    fn the_smallest_fitting_buffer_is_taken() {
        let p = pool();
        p.give(vec![0; 1400]);
        p.give(vec![0; 1000]);
        assert_eq!(take(&p, 1000).len(), 1000);
        assert_eq!(take(&p, 1000).len(), 1400);
    }

    #[test]
    fn at_most_max_kept_buffers_are_kept_and_the_oldest_goes() {
        let p = pool();
        for len in [1000, 1100, 1200] {
            p.give(vec![0; len]);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(p.kept_bytes(), 1100 + 1200);
    }

    #[test]
    fn idle_buffers_expire() {
        let p = BufferPool::new(100, 2, Duration::from_millis(20));
        p.give(vec![0; 1000]);
        std::thread::sleep(Duration::from_millis(40));
        p.give(vec![0; 200]); // the first one has been idle too long
        assert_eq!(p.kept_bytes(), 200);
        p.clear();
        assert_eq!(p.kept_bytes(), 0);
    }

    #[test]
    fn a_pool_that_keeps_nothing_keeps_nothing() {
        let p = BufferPool::new(100, 0, Duration::from_secs(60));
        p.give(vec![0; 1000]);
        assert_eq!(p.kept_bytes(), 0);
    }
}
