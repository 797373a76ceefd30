//! No rav1d thread may exist when the process forks.
//!
//! (libdav1d, the decoder of `turbo` builds, runs no threads of its own, `av1::FRAME_CONTEXTS`,
//! so there is nothing for this gate to wait for beyond the decodes in progress; it stays in
//! front of both backends so that the rule does not depend on how the crate was built.)
//!
//! rav1d's threads wait on `parking_lot` locks and condition variables, and `parking_lot`
//! keeps one table for the whole process of the threads parked on any of them (a queue per
//! hash bucket, each with its own lock, holding pointers to the parked threads' thread-local
//! records). `fork()` copies that table into the child but not the threads in it: a queue
//! keeps entries for threads that do not exist there, and a bucket lock held by one of them
//! at that moment is never released. glibc then gives the dead threads' stacks (where their
//! records live) to the child's next threads. The child's first decoder therefore parks or
//! wakes through stale entries: a segmentation fault, an abort on corrupted state, or a wait
//! that never ends. PyTorch DataLoader workers are forked children, and a parent reading
//! segments on another thread at the moment of the fork is ordinary (docs/RELIABILITY.md,
//! "Forking while segments are decoded"; `parking_lot` has no fork handling of its own).
//!
//! So the process never forks with a rav1d thread alive: every decoder holds an
//! [`Admission`] for its lifetime, and a `pthread_atfork` handler, before the fork, stops new
//! admissions, waits for the decoders there are to close and for their worker threads
//! (named `rav1d-worker-N` by rav1d) to exit. A segment decode takes milliseconds, so a fork
//! waits that long at most. Should that ever take longer than [`MAX_WAIT`], the fork goes
//! ahead and the child refuses to decode AV1 (a typed error, never a crash or hang).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

/// Set while a fork is under way; the other bits count the decoders alive.
const FORKING: usize = 1 << (usize::BITS - 1);

static STATE: AtomicUsize = AtomicUsize::new(0);
/// In a parent: the last prepare gave up waiting. Copied into the child as `UNSAFE_CHILD`.
static GAVE_UP: AtomicBool = AtomicBool::new(false);
/// In a child: its parent forked with rav1d threads alive, so this process must not decode.
static UNSAFE_CHILD: AtomicBool = AtomicBool::new(false);

/// How long a fork waits for the decoders of other threads to finish.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

/// How often the waits look again: short against a decode, long against an atomic load.
const POLL: Duration = Duration::from_micros(100);

/// Permission for one decoder to exist; dropped after the decoder is closed.
#[derive(Debug)]
pub struct Admission(());

/// Waits while a fork is under way, then admits one decoder. `Err` in a child forked while
/// decoders could not be closed.
pub fn admit() -> Result<Admission, String> {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(install);
    if UNSAFE_CHILD.load(Ordering::Acquire) {
        return Err(format!(
            "this process was forked while AV1 decoders of its parent were still running after \
             {} s; it cannot decode video segments safely (decode them in the parent or in a \
             process started with the 'spawn' or 'forkserver' method)",
            MAX_WAIT.as_secs()
        ));
    }
    loop {
        let s = STATE.load(Ordering::Acquire);
        if s & FORKING != 0 {
            std::thread::sleep(POLL);
            continue;
        }
        if STATE
            .compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Ok(Admission(()));
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        STATE.fetch_sub(1, Ordering::AcqRel);
    }
}

fn install() {
    // SAFETY: the three handlers are `extern "C" fn()` that stay valid for the life of the
    // process; registering them has no other precondition.
    // It fails only for lack of memory; forks are then as unsafe as before this module, and
    // decoding itself still works, so there is nothing better to do than go on.
    let _ = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

extern "C" fn prepare() {
    STATE.fetch_or(FORKING, Ordering::AcqRel);
    let started = Instant::now();
    let settled = || {
        STATE.load(Ordering::Acquire) & !FORKING == 0
            && match rav1d_threads() {
                Some(n) => n == 0,
                // No /proc: a closed decoder's workers exit within microseconds of waking.
                None => started.elapsed() > Duration::from_millis(20),
            }
    };
    let mut done = settled();
    while !done && started.elapsed() < MAX_WAIT {
        std::thread::sleep(POLL);
        done = settled();
    }
    GAVE_UP.store(!done, Ordering::Release);
}

extern "C" fn parent() {
    STATE.fetch_and(!FORKING, Ordering::AcqRel);
}

extern "C" fn child() {
    // The parent's decoders are not in this process (their threads were not copied); their
    // admissions are never released here, so the count starts again.
    if GAVE_UP.load(Ordering::Acquire) {
        UNSAFE_CHILD.store(true, Ordering::Release);
    }
    STATE.store(0, Ordering::Release);
}

/// rav1d's worker threads alive in this process (`None` where `/proc` cannot tell). rav1d
/// names them `rav1d-worker-{n}`; a thread takes its name as it starts, and rav1d's workers
/// start working before a decoder returns its first picture.
fn rav1d_threads() -> Option<usize> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut n = 0;
    for task in tasks.flatten() {
        // A thread that exited between the listing and this read is not alive.
        if let Ok(name) = std::fs::read(task.path().join("comm")) {
            if name.starts_with(b"rav1d-worker") {
                n += 1;
            }
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_of_this_process_are_listed() {
        assert!(rav1d_threads().is_some());
    }
}
