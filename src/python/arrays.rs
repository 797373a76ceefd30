//! Output arrays for decoded frames. Large ones live in buffers from a pool
//! (`crate::buffers`), given back when numpy frees the array, so a training loop reuses
//! warm pages instead of having the kernel fault in and zero fresh ones on every batch.

use std::time::Duration;

use numpy::ndarray::{ArrayViewMutD, IxDyn};
use numpy::{PyArray4, PyArrayDyn};
use pyo3::prelude::*;

use crate::buffers::BufferPool;

/// Two buffers: the batch in use and the one being decoded. Below 16 MiB malloc reuses its heap.
static POOL: BufferPool = BufferPool::new(16 << 20, 2, Duration::from_secs(30));

/// The owner (numpy `base`) of a pooled array's memory: gives the buffer back when dropped,
/// which numpy does when the array and every view of it are gone.
#[pyclass(frozen)]
struct PooledBuffer {
    buf: Vec<u8>,
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        POOL.give(std::mem::take(&mut self.buf));
    }
}

/// A C-contiguous uint8 array of shape `dims` whose contents are unspecified: the caller
/// writes every byte before Python sees it.
pub fn uninit_dyn<'py>(py: Python<'py>, dims: &[usize]) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
    let len = dims.iter().product::<usize>();
    if len < POOL.min_bytes {
        // SAFETY: every byte is written by the decoder before the array is returned; on error
        // the array is dropped without being exposed.
        return Ok(unsafe { PyArrayDyn::<u8>::new(py, IxDyn(dims), false) });
    }
    let mut buf = POOL.take(len);
    // The heap block does not move when the Vec moves into its owner below.
    let ptr = buf.as_mut_ptr();
    let owner = Bound::new(py, PooledBuffer { buf })?;
    // SAFETY: `ptr` points to at least `len` initialised bytes owned by `owner`, which becomes
    // the array's base and is never reallocated; dims describe exactly `len` bytes, C order.
    unsafe {
        let view = ArrayViewMutD::from_shape_ptr(IxDyn(dims), ptr);
        Ok(PyArrayDyn::borrow_from_array(&view, owner.into_any()))
    }
}

/// `uninit_dyn` for a `(T, H, W, C)` array.
pub fn uninit4<'py>(py: Python<'py>, dims: [usize; 4]) -> PyResult<Bound<'py, PyArray4<u8>>> {
    Ok(uninit_dyn(py, &dims)?.cast_into::<PyArray4<u8>>()?)
}

/// Bytes held for reuse by large output arrays that have been freed.
#[pyfunction]
pub fn pooled_bytes() -> usize {
    POOL.kept_bytes()
}

/// Frees the buffers kept for reuse now instead of after 30 idle seconds.
#[pyfunction]
pub fn release_pooled_buffers() {
    POOL.clear();
}
