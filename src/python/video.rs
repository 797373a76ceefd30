//! Video segments on their own (outside any chunk): `probe_segment` (ingest checks what it is
//! about to store) and `decode_segment`.

use numpy::{PyArray4, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::error::Error;
use crate::video::{self, yuv, Codec, Integrity, SegmentShape};

/// Decodes a whole AV1 segment of `frames` frames without keeping pixels:
/// `(width, height, matrix, full_range)`. Raises `DecodeError` when it does not decode to
/// exactly `frames` frames of one size. For the encoder's fresh output only: no CRC is
/// checked (the risks of `Integrity::Unchecked`).
#[pyfunction]
pub fn probe_segment(
    py: Python<'_>,
    data: &Bound<'_, PyBytes>,
    frames: usize,
) -> PyResult<(usize, usize, &'static str, bool)> {
    let bytes = data.as_bytes();
    let p = py
        .detach(|| video::probe_segment(Codec::Av1, bytes, frames, crate::pixels::MAX_FRAME_PIXELS))
        .map_err(Error::from)?;
    let matrix = match p.matrix {
        yuv::Matrix::Bt601 => "bt601",
        yuv::Matrix::Bt709 => "bt709",
    };
    Ok((p.width, p.height, matrix, p.range == yuv::Range::Full))
}

/// Decodes frames of an AV1 segment declared `width` x `height` with `frames` frames into an
/// `(N, height, width, 3)` uint8 RGB array: the frames `wanted` (increasing indices within the
/// segment), or all of them. `crc` (required) is the segment's recorded CRC-32, checked
/// first; `None` decodes unchecked bytes (the stub's docstring says what that risks).
#[pyfunction]
#[pyo3(signature = (data, width, height, frames, wanted=None, *, crc))]
pub fn decode_segment<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyBytes>,
    width: usize,
    height: usize,
    frames: usize,
    wanted: Option<Vec<usize>>,
    crc: Option<u32>,
) -> PyResult<Bound<'py, PyArray4<u8>>> {
    let shape = SegmentShape {
        codec: Codec::Av1,
        width,
        height,
        frames,
    };
    // The size is checked before the array is allocated.
    crate::pixels::check_frame_size(width, height).map_err(PyValueError::new_err)?;
    if frames > video::MAX_SEGMENT_FRAMES {
        return Err(PyValueError::new_err(format!(
            "a segment holds at most {} frames, not {frames}",
            video::MAX_SEGMENT_FRAMES
        )));
    }
    let wanted = wanted.unwrap_or_else(|| (0..frames).collect());
    let bytes = data.as_bytes();
    // SAFETY: every frame is written by the decoder before the array is returned; on error it
    // is dropped unread.
    let arr = unsafe { PyArray4::<u8>::new(py, [wanted.len(), height, width, 3], false) };
    let out = unsafe { arr.as_slice_mut() }.map_err(|e| PyValueError::new_err(e.to_string()))?;
    let len = shape.frame_len();
    py.detach(|| {
        let mut outs: Vec<&mut [u8]> = if len == 0 {
            Vec::new()
        } else {
            out.chunks_exact_mut(len).collect()
        };
        let integrity = crc.map_or(Integrity::Unchecked, Integrity::Crc);
        video::decode_segment(&shape, bytes, integrity, &wanted, &mut outs)
    })
    .map_err(Error::from)?;
    Ok(arr)
}

/// Where segment reads spent their time in this process since the last reset, summed over
/// threads (`crate::video::stages`): seconds per stage, and the segments, pictures decoded
/// and frames returned. For benchmarks and profiling; `reset` starts the totals again.
#[pyfunction]
#[pyo3(signature = (reset=false))]
pub fn segment_stage_times(py: Python<'_>, reset: bool) -> PyResult<Bound<'_, PyDict>> {
    use crate::video::stages;
    let t = stages::totals(reset);
    let out = PyDict::new(py);
    for (name, ns) in stages::NAMES.iter().zip(t.nanos) {
        out.set_item(*name, ns as f64 / 1e9)?;
    }
    out.set_item("segments", t.segments)?;
    out.set_item("pictures", t.pictures)?;
    out.set_item("returned", t.returned)?;
    Ok(out)
}
