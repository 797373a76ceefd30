//! Single JPEGs outside any chunk: `decode_jpeg` and `jpeg_info` (`JpegInfo`).

use numpy::{PyArray3, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::read_spec::colorspace;
use crate::jpeg::{self, header, DecodeFailure};

/// Decodes one JPEG with the built-in decoder to an `(H, W, C)` uint8 array.
#[pyfunction]
#[pyo3(signature = (data, colorspace=None))]
pub fn decode_jpeg<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    colorspace: Option<&str>,
) -> PyResult<Bound<'py, PyArray3<u8>>> {
    let cs = self::colorspace(colorspace)?;
    // `bytes` is immutable and can be read without the GIL; other buffers are copied, since
    // their owner could change them while we decode.
    let copied: Vec<u8>;
    let bytes: &[u8] = match data.cast::<PyBytes>() {
        Ok(b) => b.as_bytes(),
        Err(_) => {
            copied = pyo3::buffer::PyBuffer::<u8>::get(data)?.to_vec(py)?;
            &copied
        }
    };
    let (h, w, c, _) = jpeg::output_shape(bytes, cs)?;
    // SAFETY: fully written by the decoder before it is returned; dropped on error.
    let arr = unsafe { PyArray3::<u8>::new(py, [h, w, c], false) };
    let out = unsafe { arr.as_slice_mut() }.map_err(|e| PyValueError::new_err(e.to_string()))?;
    py.detach(|| jpeg::decode_into(bytes, cs, out))?;
    Ok(arr)
}

/// What a JPEG's frame header (SOF) says, read without decoding.
#[pyclass(frozen, get_all, module = "gulpio_rs._native")]
pub struct JpegInfo {
    width: u16,
    height: u16,
    components: u8,
    precision: u8,
    /// The SOF marker byte (0xC0..0xCF): the coding process.
    sof: u8,
    progressive: bool,
    arithmetic: bool,
    lossless: bool,
}

#[pymethods]
impl JpegInfo {
    fn __repr__(&self) -> String {
        let b = |v: bool| if v { "True" } else { "False" };
        format!(
            "JpegInfo(width={}, height={}, components={}, precision={}, sof=0x{:02X}, \
             progressive={}, arithmetic={}, lossless={})",
            self.width,
            self.height,
            self.components,
            self.precision,
            self.sof,
            b(self.progressive),
            b(self.arithmetic),
            b(self.lossless)
        )
    }
}

/// The frame header of a JPEG, without decoding; `DecodeError` if it is not a JPEG or the
/// header cannot be found.
#[pyfunction]
pub fn jpeg_info(data: &[u8]) -> PyResult<JpegInfo> {
    let i = header::read_info(data).map_err(DecodeFailure::Corrupt)?;
    Ok(JpegInfo {
        width: i.width,
        height: i.height,
        components: i.components,
        precision: i.precision,
        sof: i.sof,
        progressive: i.is_progressive(),
        arithmetic: i.is_arithmetic(),
        lossless: i.is_lossless(),
    })
}
