//! The package's private decode thread pools. Private so we never fight the application's own
//! rayon pool, and rebuilt in a forked child: a pool inherited across `fork()` has no threads
//! behind it and would deadlock (PyTorch DataLoader workers are forked).

use std::sync::{Arc, Mutex};

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Error, Result};

struct Pools {
    pid: u32,
    /// One pool per thread count asked for, so alternating `threads=` values does not start
    /// new threads on every call; the most recently used last, at most `MAX_POOLS`.
    by_threads: Vec<(usize, Arc<ThreadPool>)>,
}

/// The most threads a caller may ask for (`threads=`, `GULPIO_NUM_THREADS`,
/// `GULPIO_IO_THREADS`, the command line's `--threads`, ingest workers). Decoding and
/// encoding are CPU-bound, so threads beyond the cores only add switching, and the largest
/// machines have a few hundred hardware threads; past about a thousand, every thread's stack
/// (2 MiB of address space) and the kernel's per-user task limit make starting them fail or
/// crawl, and `threads=10**9` started threads until the process hung. A fixed number, not a
/// multiple of the cores, so that the same call is accepted on every machine.
pub const MAX_THREADS: usize = 1024;

/// Pools kept for reuse: a caller alternating between a few `threads=` values reuses theirs,
/// one sweeping through many values does not accumulate threads (a dropped pool's threads
/// exit once its last user is done).
const MAX_POOLS: usize = 4;

/// `n`, a thread count given as `what` (a parameter or environment variable name), checked:
/// 0 means "all usable cores" (where a caller documents it), 1 to [`MAX_THREADS`] as given;
/// anything else is an error naming `what` and the accepted range.
pub fn check_threads(n: i64, what: &str) -> Result<usize> {
    match usize::try_from(n) {
        Ok(n) if n <= MAX_THREADS => Ok(n),
        _ => Err(Error::InvalidArgument(format!(
            "{what} must be between 1 and {MAX_THREADS} (or 0 for all usable cores), not {n}"
        ))),
    }
}

static POOLS: Mutex<Option<Pools>> = Mutex::new(None);

/// The number of CPUs this process may run on (its affinity mask and cgroup quota).
pub fn available_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Where a parallel pass runs: on the calling thread, or on a pool.
pub enum Runner {
    Caller,
    Pool(Arc<ThreadPool>),
}

/// A runner for `threads` workers (0 = `available_threads()`). One thread means the calling
/// thread itself: no hand-off, no pool.
pub fn runner(threads: usize) -> Result<Runner> {
    let threads = match threads {
        0 => available_threads().min(MAX_THREADS),
        n => check_threads(i64::try_from(n).unwrap_or(i64::MAX), "threads")?,
    };
    if threads == 1 {
        return Ok(Runner::Caller);
    }
    let pid = std::process::id();
    let mut guard = POOLS
        .lock()
        .map_err(|_| Error::Internal("decode thread pool lock poisoned".into()))?;
    if guard.as_ref().is_some_and(|p| p.pid != pid) {
        // Inherited from the parent: its threads do not exist here, and dropping the pools
        // could block on their state. Leak them instead (a few hundred bytes per fork).
        if let Some(old) = guard.take() {
            std::mem::forget(old);
        }
    }
    let pools = guard.get_or_insert_with(|| Pools {
        pid,
        by_threads: Vec::new(),
    });
    if let Some(i) = pools.by_threads.iter().position(|(n, _)| *n == threads) {
        let entry = pools.by_threads.remove(i);
        let pool = entry.1.clone();
        pools.by_threads.push(entry);
        return Ok(Runner::Pool(pool));
    }
    if pools.by_threads.len() >= MAX_POOLS {
        pools.by_threads.remove(0);
    }
    let pool = ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("gulpio-decode-{i}"))
        .build()
        .map_err(|e| Error::Internal(format!("cannot start decode threads: {e}")))?;
    let pool = Arc::new(pool);
    pools.by_threads.push((threads, pool.clone()));
    Ok(Runner::Pool(pool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_are_checked() {
        assert_eq!(check_threads(0, "threads").unwrap(), 0);
        assert_eq!(check_threads(8, "threads").unwrap(), 8);
        assert_eq!(check_threads(MAX_THREADS as i64, "t").unwrap(), MAX_THREADS);
        for bad in [-3, MAX_THREADS as i64 + 1, 1_000_000_000, i64::MIN] {
            let msg = check_threads(bad, "GULPIO_NUM_THREADS")
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains("GULPIO_NUM_THREADS") && msg.contains("1024"),
                "{msg}"
            );
        }
        assert!(runner(1_000_000_000).is_err());
    }

    #[test]
    fn sweeping_thread_counts_keeps_a_few_pools() {
        for n in 2..12 {
            runner(n).unwrap();
        }
        let guard = POOLS.lock().unwrap();
        let kept = guard.as_ref().map_or(0, |p| p.by_threads.len());
        assert!(kept <= MAX_POOLS, "{kept}");
    }
}
