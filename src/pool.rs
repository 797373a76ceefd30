//! The package's private decode thread pools. Private so we never fight the application's own
//! rayon pool, and rebuilt in a forked child: a pool inherited across `fork()` has no threads
//! behind it and would deadlock (PyTorch DataLoader workers are forked).

use std::sync::{Arc, Mutex};

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Error, Result};

struct Pools {
    pid: u32,
    /// One pool per thread count asked for, so alternating `threads=` values does not start
    /// new threads on every call.
    by_threads: Vec<(usize, Arc<ThreadPool>)>,
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
    let threads = if threads == 0 {
        available_threads()
    } else {
        threads
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
    if let Some((_, pool)) = pools.by_threads.iter().find(|(n, _)| *n == threads) {
        return Ok(Runner::Pool(pool.clone()));
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
