//! The one async runtime of the process, for object-store requests. Rebuilt in a forked child:
//! a runtime inherited through `fork()` (PyTorch DataLoader workers) has no worker threads and
//! its connection pool shares sockets with the parent, so it must never be used there.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::runtime::{Builder, Runtime};

use crate::error::{Error, Result};

struct Current {
    pid: u32,
    runtime: Arc<Runtime>,
}

static RUNTIME: Mutex<Option<Current>> = Mutex::new(None);

/// Threads of the I/O runtime. Requests are I/O-bound; two threads keep TLS and body copies
/// off the decode threads' critical path without competing with them for cores.
fn io_threads() -> usize {
    std::env::var("GULPIO_IO_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(2)
}

/// The runtime of this process, and a generation number that changes when it was rebuilt
/// after a fork (clients built on an older generation must be rebuilt too).
pub fn runtime() -> Result<(Arc<Runtime>, u32)> {
    let pid = std::process::id();
    let mut guard = RUNTIME
        .lock()
        .map_err(|_| Error::Internal("I/O runtime lock poisoned".into()))?;
    if let Some(current) = guard.as_ref() {
        if current.pid == pid {
            return Ok((current.runtime.clone(), pid));
        }
    }
    if let Some(inherited) = guard.take() {
        // Its threads do not exist in this process; dropping it would wait for them forever.
        std::mem::forget(inherited);
    }
    let runtime = Builder::new_multi_thread()
        .worker_threads(io_threads())
        .thread_name("gulpio-io")
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::Internal(format!("cannot start the I/O runtime: {e}")))?;
    let runtime = Arc::new(runtime);
    *guard = Some(Current {
        pid,
        runtime: runtime.clone(),
    });
    Ok((runtime, pid))
}

/// Runs `fut` to completion from a synchronous caller (never from inside the runtime).
pub fn block_on<F: Future>(fut: F) -> Result<F::Output> {
    let (rt, _) = runtime()?;
    Ok(rt.block_on(fut))
}
