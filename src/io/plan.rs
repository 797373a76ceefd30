//! Range planning: the byte ranges of a batch's frames, known from the index before anything
//! is fetched, merged into few requests. Frames of a clip sit back to back in a `.gulp`
//! (separated only by their 0-3 bytes of padding), so a clip becomes one request; a gap wider
//! than `max_gap` starts a new one, so strided sampling never fetches the skipped frames.

use std::ops::Range;

/// Gap (bytes) below which two ranges are fetched as one: a request costs a round trip, a few
/// KiB of extra body cost almost nothing. Kept small so bytes fetched stay ≈ bytes needed.
pub const MAX_GAP: u64 = 4096;
/// Longest merged request: longer ones would serialise what concurrency could overlap.
pub const MAX_REQUEST: u64 = 8 << 20;

/// The requests of a plan and where each frame sits in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub requests: Vec<Range<u64>>,
    /// For frame `i`: `(request, offset of the frame inside that request's bytes)`.
    pub slots: Vec<(usize, usize)>,
}

impl Plan {
    /// Bytes the requests fetch.
    pub fn fetched(&self) -> u64 {
        self.requests.iter().map(|r| r.end - r.start).sum()
    }
}

/// Plans requests covering `frames` (byte ranges, in any order, possibly repeated).
pub fn plan(frames: &[Range<u64>], max_gap: u64, max_request: u64) -> Plan {
    let mut order: Vec<usize> = (0..frames.len()).collect();
    order.sort_by_key(|&i| (frames[i].start, frames[i].end));
    let mut requests: Vec<Range<u64>> = Vec::new();
    let mut slots = vec![(0usize, 0usize); frames.len()];
    for i in order {
        let f = &frames[i];
        let extend = requests.last().is_some_and(|r| {
            f.start <= r.end.saturating_add(max_gap)
                && f.end.max(r.end) - r.start <= max_request.max(f.end - f.start)
        });
        if extend {
            if let Some(r) = requests.last_mut() {
                r.end = r.end.max(f.end);
            }
        } else {
            requests.push(f.clone());
        }
        let k = requests.len() - 1;
        slots[i] = (k, (f.start - requests[k].start) as usize);
    }
    Plan { requests, slots }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_clip_is_one_request() {
        let frames = [0..100, 100..250, 252..300];
        let p = plan(&frames, MAX_GAP, MAX_REQUEST);
        assert_eq!(p.requests, vec![0..300]);
        assert_eq!(p.slots, vec![(0, 0), (0, 100), (0, 252)]);
    }

    #[test]
    fn wide_gaps_split() {
        let frames = [50_000..60_000, 0..10_000];
        let p = plan(&frames, MAX_GAP, MAX_REQUEST);
        assert_eq!(p.requests, vec![0..10_000, 50_000..60_000]);
        assert_eq!(p.slots, vec![(1, 0), (0, 0)]);
        assert_eq!(p.fetched(), 20_000);
    }

    #[test]
    fn long_runs_split() {
        let frames: Vec<_> = (0..10u64).map(|i| i * 100..(i + 1) * 100).collect();
        let p = plan(&frames, MAX_GAP, 300);
        assert_eq!(p.requests.len(), 4);
    }

    proptest! {
        #[test]
        fn every_frame_is_inside_its_request(
            raw in proptest::collection::vec((0u64..3000, 1u64..500, any::<bool>()), 0..40),
            rotate in 0usize..40,
            gap in 0u64..2000,
            max in 1u64..5000,
        ) {
            // Frames as a `.gulp` holds them: back to back with gaps, never overlapping;
            // asked for in any order, some twice.
            let mut frames: Vec<Range<u64>> = Vec::new();
            let mut at = 0;
            for &(skip, len, twice) in &raw {
                at += skip;
                frames.push(at..at + len);
                if twice {
                    frames.push(at..at + len);
                }
                at += len;
            }
            let n = frames.len().max(1);
            frames.rotate_left(rotate % n);
            let p = plan(&frames, gap, max);
            for (f, &(k, off)) in frames.iter().zip(&p.slots) {
                let r = &p.requests[k];
                prop_assert_eq!(r.start + off as u64, f.start);
                prop_assert!(f.end <= r.end);
            }
            for w in p.requests.windows(2) {
                prop_assert!(w[0].start <= w[1].start);
            }
            let needed: u64 = {
                let mut v: Vec<Range<u64>> = frames.clone();
                v.sort_by_key(|r| r.start);
                let mut total = 0;
                let mut end = 0;
                for r in v {
                    let s = r.start.max(end);
                    if r.end > s { total += r.end - s; }
                    end = end.max(r.end);
                }
                total
            };
            // Over-fetch is bounded by the gaps merged.
            prop_assert!(p.fetched() <= needed + gap * frames.len() as u64);
        }
    }
}
