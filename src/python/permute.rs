//! Binding of the samplers' seeded permutation (`crate::permute`).

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::permute::Feistel;

/// Elements `positions` of the permutation of `0..n` keyed by `(seed, epoch)`, or with
/// `inverse` where each of `positions` sits in it. ValueError for a position `>= n`.
#[pyfunction]
#[pyo3(signature = (positions, n, seed, epoch, inverse=false))]
pub fn feistel<'py>(
    py: Python<'py>,
    positions: PyReadonlyArray1<'py, u64>,
    n: u64,
    seed: u64,
    epoch: u64,
    inverse: bool,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let permutation = Feistel::new(n, seed, epoch);
    let out = positions
        .as_array()
        .iter()
        .map(|&p| permutation.get(p, inverse))
        .collect::<crate::Result<Vec<u64>>>()?;
    Ok(PyArray1::from_vec(py, out))
}
