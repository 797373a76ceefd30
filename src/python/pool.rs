//! Binding of the core count the private pools use, so that Python shares out the same count
//! (`_reading._usable_cores`) instead of counting on its own.

use pyo3::prelude::*;

/// The CPUs this process may run on (affinity mask and cgroup CPU quota): the threads a pool
/// started with `threads=0` has.
#[pyfunction]
pub fn available_threads() -> usize {
    crate::pool::available_threads()
}
