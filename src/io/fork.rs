//! Values that belong to the process that made them. After `fork()` (PyTorch DataLoader
//! workers) a child inherits copies of the parent's object-store clients and pending
//! requests, but not the runtime threads they hand work to: dropping such a value in the child
//! wakes a task of the parent's runtime, which takes a lock that a parent thread may have held
//! at the moment of the fork, and the child hangs forever. So an inherited value is leaked,
//! never dropped (or used) in the child.

/// `T`, dropped only in the process that made it (leaked in a forked child).
pub struct ProcessLocal<T> {
    pid: u32,
    value: Option<T>,
}

impl<T> ProcessLocal<T> {
    pub fn new(value: T) -> Self {
        ProcessLocal {
            pid: std::process::id(),
            value: Some(value),
        }
    }

    /// The value, if this is the process that made it.
    pub fn get(&self) -> Option<&T> {
        self.value
            .as_ref()
            .filter(|_| self.pid == std::process::id())
    }

    /// The value, if this is the process that made it.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        if self.pid == std::process::id() {
            self.value.as_mut()
        } else {
            None
        }
    }

    /// The value whatever process made it: only for values known to be fork-safe.
    pub fn get_inherited(&self) -> Option<&T> {
        self.value.as_ref()
    }
}

impl<T> Drop for ProcessLocal<T> {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            if let Some(inherited) = self.value.take() {
                std::mem::forget(inherited);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_value_of_this_process_is_dropped_and_readable() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut v = ProcessLocal::new(Counted(drops.clone()));
        assert!(v.get().is_some() && v.get_mut().is_some() && v.get_inherited().is_some());
        drop(v);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_inherited_value_is_leaked_not_dropped() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut v = ProcessLocal::new(Counted(drops.clone()));
        v.pid = v.pid.wrapping_add(1); // as seen from a forked child
        assert!(v.get().is_none() && v.get_mut().is_none());
        assert!(v.get_inherited().is_some());
        drop(v);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
    }
}
