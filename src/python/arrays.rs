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
///
/// The size is checked against the read limit (`decode::MAX_READ_BYTES`, a `ValueError`)
/// and a large buffer that cannot be allocated is a `MemoryError`, never an abort.
pub fn uninit_dyn<'py>(py: Python<'py>, dims: &[usize]) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
    let len = crate::decode::output_bytes(dims)?;
    if len < POOL.min_bytes {
        // SAFETY: every byte is written by the decoder before the array is returned; on error
        // the array is dropped without being exposed.
        return Ok(unsafe { PyArrayDyn::<u8>::new(py, IxDyn(dims), false) });
    }
    let mut buf = POOL.take(len, || shape_text(dims))?;
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

/// `dims` as text for messages: `16 x 224 x 224 x 3`.
fn shape_text(dims: &[usize]) -> String {
    let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!(
        "the decoded frames (an array of {}): {}",
        dims.join(" x "),
        crate::decode::ASK_LESS
    )
}

/// `uninit_dyn` for a `(T, H, W, C)` array.
pub fn uninit4<'py>(py: Python<'py>, dims: [usize; 4]) -> PyResult<Bound<'py, PyArray4<u8>>> {
    Ok(uninit_dyn(py, &dims)?.cast_into::<PyArray4<u8>>()?)
}

/// `uninit4` for several arrays (a batch of videos of different sizes). Together at least the
/// pool's size, they are views into one pooled buffer, as a stacked batch is: many separate
/// arrays of a megabyte or two each would come from fresh pages every batch (glibc maps
/// blocks that size and unmaps them on free), which made a list of videos decode much slower
/// than one video at a time (docs/DECISIONS.md, "Output buffers"). The buffer is reused once
/// every array of the list (and every view of one) is gone.
pub fn uninit4_many<'py>(
    py: Python<'py>,
    shapes: &[[usize; 4]],
) -> PyResult<Vec<Bound<'py, PyArray4<u8>>>> {
    let lens: Vec<usize> = shapes
        .iter()
        .map(|d| crate::decode::output_bytes(d))
        .collect::<crate::Result<_>>()?;
    let total = lens.iter().try_fold(0u64, |a, &n| a.checked_add(n as u64));
    let total = crate::decode::read_bytes(total, &format!("{} videos", shapes.len()))?;
    let what = || {
        format!(
            "the decoded frames ({} videos): {}",
            shapes.len(),
            crate::decode::ASK_LESS
        )
    };
    if total < POOL.min_bytes {
        return shapes.iter().map(|&d| uninit4(py, d)).collect();
    }
    let mut buf = POOL.take(total, what)?;
    let base = buf.as_mut_ptr();
    let owner = Bound::new(py, PooledBuffer { buf })?.into_any();
    let mut out = Vec::with_capacity(shapes.len());
    let mut at = 0;
    for (dims, len) in shapes.iter().zip(lens) {
        // SAFETY: the arrays tile the buffer (`at + len <= total`), which `owner` keeps alive
        // as every array's base and never reallocates; each is C-contiguous over its own
        // bytes, which the caller writes before Python sees them.
        let arr = unsafe {
            let view = ArrayViewMutD::from_shape_ptr(IxDyn(dims), base.add(at));
            PyArrayDyn::borrow_from_array(&view, owner.clone())
        };
        out.push(arr.cast_into::<PyArray4<u8>>()?);
        at += len;
    }
    Ok(out)
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
