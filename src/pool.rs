//! The package's private decode thread pool. Private so we never fight the application's own
//! rayon pool, and rebuilt in a forked child: a pool inherited across `fork()` has no threads
//! behind it and would deadlock (PyTorch DataLoader workers are forked).

use std::sync::{Arc, Mutex};

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Error, Result};

struct Cached {
    pid: u32,
    threads: usize,
    pool: Arc<ThreadPool>,
}

static POOL: Mutex<Option<Cached>> = Mutex::new(None);

/// The number of CPUs this process may run on (its affinity mask and cgroup quota).
pub fn available_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A pool with `threads` workers (0 = `available_threads()`), reused across calls.
pub fn pool(threads: usize) -> Result<Arc<ThreadPool>> {
    let threads = if threads == 0 {
        available_threads()
    } else {
        threads
    };
    let pid = std::process::id();
    let mut guard = POOL
        .lock()
        .map_err(|_| Error::InvalidArgument("decode thread pool lock poisoned".into()))?;
    if let Some(c) = guard.as_ref() {
        if c.pid == pid && c.threads == threads {
            return Ok(c.pool.clone());
        }
    }
    if let Some(old) = guard.take() {
        if old.pid != pid {
            // Inherited from the parent: its threads do not exist here, and dropping it could
            // block on their state. Leak it instead (a few hundred bytes per fork).
            std::mem::forget(old);
        }
    }
    let pool = ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("gulpio-decode-{i}"))
        .build()
        .map_err(|e| Error::InvalidArgument(format!("cannot start decode threads: {e}")))?;
    let pool = Arc::new(pool);
    *guard = Some(Cached {
        pid,
        threads,
        pool: pool.clone(),
    });
    Ok(pool)
}
