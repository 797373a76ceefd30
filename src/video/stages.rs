//! Where the time of segment reads goes, summed over every thread of the process since the
//! last reset: what `benches/bench_segments.py` reports per stage. Counting costs a clock read
//! per stage and picture (tens of nanoseconds against a decode of tens of microseconds), so
//! it is always on rather than behind a build feature that the measured wheel would lack.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The stages of a segment read, in pipeline order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Starting a decoder (its frame threads and buffers) and closing it.
    Setup = 0,
    /// The AV1 decoder at work until a picture is out: entropy decoding and reconstruction
    /// (rav1d runs both inside its own tasks and does not time them apart).
    Decode = 1,
    /// YUV 4:2:0 to packed RGB.
    Convert = 2,
    /// Crops, resizes, flips and gray output of decoded frames, and the copies of frames a
    /// batch asks for more than once (clips that overlap).
    Reframe = 3,
}

const STAGES: usize = 4;

static NANOS: [AtomicU64; STAGES] = [const { AtomicU64::new(0) }; STAGES];
static SEGMENTS: AtomicU64 = AtomicU64::new(0);
static PICTURES: AtomicU64 = AtomicU64::new(0);
static RETURNED: AtomicU64 = AtomicU64::new(0);

/// Adds the time since `since` to `stage`.
pub fn add(stage: Stage, since: Instant) {
    let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
    NANOS[stage as usize].fetch_add(ns, Ordering::Relaxed);
}

/// Counts one segment decode that produced `pictures` pictures, `returned` of them asked for.
pub fn count(pictures: usize, returned: usize) {
    SEGMENTS.fetch_add(1, Ordering::Relaxed);
    PICTURES.fetch_add(pictures as u64, Ordering::Relaxed);
    RETURNED.fetch_add(returned as u64, Ordering::Relaxed);
}

/// The totals since the last reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Nanoseconds per [`Stage`], indexed by its value.
    pub nanos: [u64; STAGES],
    pub segments: u64,
    /// Pictures the decoder produced (from each segment's key frame on).
    pub pictures: u64,
    /// Of those, the frames a read asked for.
    pub returned: u64,
}

/// The totals; with `reset`, they start again from zero.
pub fn totals(reset: bool) -> Totals {
    let take = |a: &AtomicU64| {
        if reset {
            a.swap(0, Ordering::Relaxed)
        } else {
            a.load(Ordering::Relaxed)
        }
    };
    Totals {
        nanos: std::array::from_fn(|i| take(&NANOS[i])),
        segments: take(&SEGMENTS),
        pictures: take(&PICTURES),
        returned: take(&RETURNED),
    }
}

/// Stage names as reported, indexed by [`Stage`] value.
pub const NAMES: [&str; STAGES] = ["setup", "decode", "convert", "reframe"];
