//! Bindings for the ingest pipeline: resize and encode many frames in one call, on the private
//! pool with the GIL released.

use numpy::{PyArray3, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::pixels::resize::{self, Pixels};
use crate::pool;

/// Borrows each array as `Pixels`: C-contiguous uint8 `(H, W)`, `(H, W, 1)` or `(H, W, 3)`.
fn pixels<'a>(arrays: &'a [PyReadonlyArrayDyn<'_, u8>]) -> PyResult<Vec<Pixels<'a>>> {
    arrays
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let shape = a.shape();
            let (h, w, c) = match *shape {
                [h, w] => (h, w, 1),
                [h, w, c] => (h, w, c),
                _ => {
                    return Err(PyValueError::new_err(format!(
                        "frame {i}: expected an (H, W) or (H, W, C) array, got shape {shape:?}"
                    )))
                }
            };
            let data = a.as_slice().map_err(|_| {
                PyValueError::new_err(format!("frame {i}: array must be C-contiguous"))
            })?;
            Pixels::new(data, h, w, c).map_err(|e| PyValueError::new_err(format!("frame {i}: {e}")))
        })
        .collect()
}

/// Resizes every frame so its shorter side is `size`; gray frames keep their rank.
#[pyfunction]
#[pyo3(signature = (frames, size, threads=1))]
pub fn resize_frames<'py>(
    py: Python<'py>,
    frames: Vec<PyReadonlyArrayDyn<'py, u8>>,
    size: usize,
    threads: usize,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let px = pixels(&frames)?;
    let runner = pool::runner(threads)?;
    let resized = py.detach(|| resize::resize_batch(&px, size, &runner))?;
    let mut out = Vec::with_capacity(resized.len());
    for (f, src) in resized.into_iter().zip(&frames) {
        let (h, w) = (f.height, f.width);
        let arr = numpy::ndarray::Array3::from_shape_vec((h, w, f.channels), f.data)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let arr = PyArray3::from_owned_array(py, arr);
        out.push(if src.ndim() == 2 {
            arr.reshape([h, w])?.into_any()
        } else {
            arr.into_any()
        });
    }
    Ok(out)
}

/// Crops, resizes and flips decoded frames as a fused read would (`crop`: `(top, left, height,
/// width)`, None for whole frames; `size`: `(height, width)`, None for the crop's size);
/// returns `(H, W, C)` arrays (gray frames keep their rank).
#[pyfunction]
#[pyo3(signature = (frames, crop=None, size=None, flip=false))]
pub fn reframe_frames<'py>(
    py: Python<'py>,
    frames: Vec<PyReadonlyArrayDyn<'py, u8>>,
    crop: Option<super::read_spec::CropArg>,
    size: Option<(usize, usize)>,
    flip: bool,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let px = pixels(&frames)?;
    let spec =
        super::read_spec::reframe(crop, size, flip, true).unwrap_or(crate::pixels::Reframe {
            crop: None,
            size: None,
            flip: false,
            dct_scaling: true,
        });
    let mut out = Vec::with_capacity(px.len());
    for (i, (p, src)) in px.iter().zip(&frames).enumerate() {
        let (oh, ow) = spec
            .output(p.height, p.width)
            .map_err(|m| PyValueError::new_err(format!("frame {i}: {m}")))?;
        let mut data = crate::buffers::zeroed(oh * ow * p.channels, || {
            format!("frame {i} resized to {ow}x{oh}")
        })?;
        py.detach(|| {
            crate::pixels::reframe_pixels(p.data, (p.height, p.width, p.channels), &spec, &mut data)
        })
        .map_err(|m| PyValueError::new_err(format!("frame {i}: {m}")))?;
        let arr = numpy::ndarray::Array3::from_shape_vec((oh, ow, p.channels), data)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let arr = PyArray3::from_owned_array(py, arr);
        out.push(if src.ndim() == 2 {
            arr.reshape([oh, ow])?.into_any()
        } else {
            arr.into_any()
        });
    }
    Ok(out)
}

/// Resizes (shorter side to `size`, if given) and encodes every frame as JPEG with
/// libjpeg-turbo; `subsampling` is one of `Subsampling::NAMES` (gray frames have none);
/// `restart_rows` puts a restart marker after every MCU row. `quality` or `subsampling` left
/// out: the package's defaults, which `gulpio_rs._encode_options.DEFAULT` owns. Only in builds
/// with libjpeg-turbo (`JPEG_BACKEND == "libjpeg-turbo"`).
#[pyfunction]
#[pyo3(signature = (
    frames, quality=None, subsampling=None, size=None, threads=1, restart_rows=false
))]
pub fn encode_frames<'py>(
    py: Python<'py>,
    frames: Vec<PyReadonlyArrayDyn<'py, u8>>,
    quality: Option<u8>,
    subsampling: Option<String>,
    size: Option<usize>,
    threads: usize,
    restart_rows: bool,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    #[cfg(feature = "turbo")]
    {
        use crate::jpeg::encode::{encode_batch, EncodeSettings, Subsampling};
        let (quality, subsampling) = match (quality, subsampling) {
            (Some(q), Some(s)) => (q, s),
            (q, s) => {
                let (default_q, default_s) = encode_defaults(py)?;
                (q.unwrap_or(default_q), s.unwrap_or(default_s))
            }
        };
        let subsampling = Subsampling::parse(&subsampling).ok_or_else(|| {
            PyValueError::new_err(format!(
                "subsampling must be one of {}, not {subsampling:?}",
                Subsampling::NAMES.join(", ")
            ))
        })?;
        let settings = EncodeSettings {
            quality,
            subsampling,
            restart_rows,
        };
        let px = pixels(&frames)?;
        let runner = pool::runner(threads)?;
        let encoded = py.detach(|| encode_batch(&px, size, settings, &runner))?;
        Ok(encoded.iter().map(|j| PyBytes::new(py, j)).collect())
    }
    #[cfg(not(feature = "turbo"))]
    {
        let _ = (
            py,
            frames,
            quality,
            subsampling,
            size,
            threads,
            restart_rows,
        );
        Err(pyo3::exceptions::PyRuntimeError::new_err(
            "this build of gulpio-rs has no libjpeg-turbo encoder (JPEG_BACKEND is zune-jpeg)",
        ))
    }
}

/// `(quality, subsampling)` of `gulpio_rs._encode_options.DEFAULT`: the one owner of the
/// ingest's encode defaults, which the Python writers share with this binding.
#[cfg(feature = "turbo")]
fn encode_defaults(py: Python<'_>) -> PyResult<(u8, String)> {
    let default = py.import("gulpio_rs._encode_options")?.getattr("DEFAULT")?;
    Ok((
        default.getattr("quality")?.extract()?,
        default.getattr("subsampling")?.extract()?,
    ))
}
