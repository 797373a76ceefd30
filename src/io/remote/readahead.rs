//! Read-ahead: range requests started before a read asks for them, so a batch's round trip
//! overlaps the decoding of the batch before it. A later read whose range lies inside a
//! pending one takes its bytes from there (waiting for them if they are still in flight)
//! instead of asking the store again; bytes nobody asks for are dropped after a while.
//!
//! Prefetched bytes are not trusted more than fetched ones: the reader checks every frame's
//! CRC whichever way its bytes came, and a failed or short read-ahead is simply fetched again.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};

use super::fetch::fetch_range;
use super::{runtime, RemoteStore};
use crate::error::Result;
use crate::io::fork::ProcessLocal;

/// The bytes of one prefetched range, or None if fetching them failed.
pub(super) type Pending = Shared<BoxFuture<'static, Option<Bytes>>>;

/// How long prefetched bytes wait for a reader: a read-ahead that was not followed (the order
/// changed) must not hold memory for long.
const MAX_AGE: Duration = Duration::from_secs(30);

struct Entry {
    name: String,
    range: Range<u64>,
    bytes: Pending,
    at: Instant,
}

impl Entry {
    fn covers(&self, name: &str, r: &Range<u64>) -> bool {
        self.name == name && self.range.start <= r.start && r.end <= self.range.end
    }
    fn len(&self) -> u64 {
        self.range.end - self.range.start
    }
}

/// The pending read-aheads of one store, bounded in bytes and age.
pub(super) struct ReadAhead {
    /// Entries are futures of this process's runtime: a forked child must never wait on (or
    /// drop) the parent's.
    inner: Mutex<ProcessLocal<VecDeque<Entry>>>,
    budget: u64,
}

impl ReadAhead {
    pub(super) fn new(budget: u64) -> Self {
        ReadAhead {
            inner: Mutex::new(ProcessLocal::new(VecDeque::new())),
            budget,
        }
    }

    pub(super) fn enabled(&self) -> bool {
        self.budget > 0
    }

    fn with<T>(&self, f: impl FnOnce(&mut VecDeque<Entry>) -> T) -> Option<T> {
        let mut guard = self.inner.lock().ok()?;
        if guard.get().is_none() {
            // Inherited through fork: the tasks behind these futures do not run here
            // (replacing them leaks them, see ProcessLocal).
            *guard = ProcessLocal::new(VecDeque::new());
        }
        let entries = guard.get_mut()?;
        // Old entries go first, then the oldest until the rest fits the budget.
        let now = Instant::now();
        while entries
            .front()
            .is_some_and(|e| now.duration_since(e.at) > MAX_AGE)
        {
            entries.pop_front();
        }
        Some(f(entries))
    }

    /// True if `name[r]` is already prefetched (or being fetched).
    pub(super) fn covers(&self, name: &str, r: &Range<u64>) -> bool {
        self.with(|e| e.iter().any(|x| x.covers(name, r)))
            .unwrap_or(false)
    }

    pub(super) fn insert(&self, name: &str, range: Range<u64>, bytes: Pending) {
        let budget = self.budget;
        self.with(|entries| {
            entries.push_back(Entry {
                name: name.to_owned(),
                range,
                bytes,
                at: Instant::now(),
            });
            let mut total: u64 = entries.iter().map(Entry::len).sum();
            while total > budget {
                match entries.pop_front() {
                    Some(e) => total -= e.len(),
                    None => break,
                }
            }
        });
    }

    /// Takes the pending read-ahead holding `name[r]`, with where `r` starts inside it.
    pub(super) fn take(&self, name: &str, r: &Range<u64>) -> Option<(Pending, usize)> {
        self.with(|entries| {
            let i = entries.iter().position(|e| e.covers(name, r))?;
            let e = entries.remove(i)?;
            Some((e.bytes, (r.start - e.range.start) as usize))
        })
        .flatten()
    }
}

/// The bytes `[offset, offset + len)` of a finished read-ahead, if it got them.
pub(super) async fn from_pending(pending: Pending, offset: usize, len: usize) -> Option<Bytes> {
    let bytes = pending.await?;
    (offset + len <= bytes.len()).then(|| bytes.slice(offset..offset + len))
}

impl RemoteStore {
    /// Starts fetching `items` (`(name, range)`) in the background and returns at once; a
    /// later read of any of these ranges (or a part of one) uses those bytes. With a local
    /// block cache, the blocks holding the ranges that are not cached yet are fetched instead,
    /// and stored when the read comes. A no-op when read-ahead is off (`readahead=0`).
    pub fn prefetch(&self, items: &[(String, Range<u64>)]) -> Result<()> {
        if !self.readahead.enabled() || items.is_empty() {
            return Ok(());
        }
        let wanted = match &self.cache {
            Some(cache) => self.uncached_blocks(cache, items),
            None => items.to_vec(),
        };
        let client = self.client()?;
        let (rt, _) = runtime::runtime()?;
        for (name, range) in wanted {
            if range.is_empty() || self.readahead.covers(&name, &range) {
                continue;
            }
            let (client, key, r) = (client.clone(), self.key(&name), range.clone());
            let (size, policy) = (self.listed_size(&name), self.policy());
            // Spawned, so it runs whether or not anybody waits for it yet.
            let task =
                rt.spawn(async move { fetch_range(client, key, r, size, policy).await.ok() });
            let pending: Pending = task.map(|joined| joined.ok().flatten()).boxed().shared();
            self.readahead.insert(&name, range, pending);
        }
        Ok(())
    }

    /// The whole blocks that hold `items` and are not in `cache`, as ranges of their objects
    /// (objects the listing did not show are read directly, so they are prefetched as is).
    fn uncached_blocks(
        &self,
        cache: &crate::io::cache::DiskCache,
        items: &[(String, Range<u64>)],
    ) -> Vec<(String, Range<u64>)> {
        let b = cache.block();
        let mut out: Vec<(String, Range<u64>)> = Vec::new();
        for (name, r) in items {
            let Some((key, size)) = self.cache_key(name).filter(|(_, size)| r.end <= *size) else {
                out.push((name.clone(), r.clone()));
                continue;
            };
            if r.is_empty() {
                continue;
            }
            for index in r.start / b..=(r.end - 1) / b {
                let block = index * b..((index + 1) * b).min(size);
                if !cache.has(&key, index) && !out.iter().any(|(n, x)| n == name && *x == block) {
                    out.push((name.clone(), block));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a test runtime")
            .block_on(f)
    }

    fn ready(b: &'static [u8]) -> Pending {
        futures::future::ready(Some(Bytes::from_static(b)))
            .boxed()
            .shared()
    }

    #[test]
    fn a_read_inside_a_prefetched_range_takes_it_once() {
        let ra = ReadAhead::new(1 << 20);
        ra.insert("a", 10..20, ready(b"0123456789"));
        assert!(ra.covers("a", &(12..15)));
        assert!(!ra.covers("a", &(15..25)));
        assert!(!ra.covers("b", &(12..15)));
        let (p, off) = ra.take("a", &(12..15)).unwrap();
        assert_eq!(off, 2);
        let got = block_on(from_pending(p, off, 3)).unwrap();
        assert_eq!(&got[..], b"234");
        assert!(ra.take("a", &(12..15)).is_none());
    }

    #[test]
    fn the_budget_drops_the_oldest() {
        let ra = ReadAhead::new(25);
        ra.insert("a", 0..10, ready(b"0123456789"));
        ra.insert("b", 0..10, ready(b"0123456789"));
        ra.insert("c", 0..10, ready(b"0123456789"));
        assert!(!ra.covers("a", &(0..10)));
        assert!(ra.covers("b", &(0..10)) && ra.covers("c", &(0..10)));
        assert!(!ReadAhead::new(0).enabled());
    }

    #[test]
    fn short_bytes_are_not_served() {
        let got = block_on(from_pending(ready(b"0123"), 2, 5));
        assert!(got.is_none());
    }
}
