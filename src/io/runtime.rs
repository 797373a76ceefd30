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

/// Threads of the I/O runtime: `GULPIO_IO_THREADS`, default 2. Requests are I/O-bound; two
/// threads keep TLS and body copies off the decode threads' critical path without competing
/// with them for cores. A value that is not an integer from 1 to `pool::MAX_THREADS` is an
/// error naming the variable (it was ignored, and `100000` was taken as is).
fn io_threads() -> Result<usize> {
    const VAR: &str = "GULPIO_IO_THREADS";
    match std::env::var(VAR) {
        Ok(v) if !v.trim().is_empty() => {
            let n = v.trim().parse::<i64>().map_err(|_| {
                Error::InvalidArgument(format!("{VAR} must be an integer, not {v:?}"))
            })?;
            match crate::pool::check_threads(n, VAR)? {
                0 => Err(Error::InvalidArgument(format!(
                    "{VAR} must be between 1 and {}, not 0",
                    crate::pool::MAX_THREADS
                ))),
                n => Ok(n),
            }
        }
        _ => Ok(2),
    }
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
        .worker_threads(io_threads()?)
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
///
/// A panic inside `fut` (the HTTP stack builds some requests with `unwrap`, e.g. on a
/// header value a server sent) becomes an internal error here instead of unwinding into
/// Python: a backstop, not a fix (settings that caused panics are refused when a store is
/// opened, see `remote::options::check_value`).
pub fn block_on<F: Future>(fut: F) -> Result<F::Output> {
    use futures::FutureExt;
    let (rt, _) = runtime()?;
    rt.block_on(std::panic::AssertUnwindSafe(fut).catch_unwind())
        .map_err(|panic| {
            Error::Internal(format!("the HTTP stack panicked: {}", panic_text(&panic)))
        })
}

/// The message of a caught panic.
pub fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic in the I/O stack".into())
}
