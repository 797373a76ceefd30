//! What a read asks for, as Python hands it over in one object: the frame selection of each
//! video (gulpio2's forms, resolved here against the video's frame count: the one owner of
//! those rules) and the read options (`gulpio_rs._reading.ReadSpec`, whose argument rules
//! Python applies once per call).

use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList, PySlice, PySliceMethods, PyTuple};

use super::chunk_handle::Chunk;
use crate::pixels::{Colorspace, CropBox, Reframe};

/// `gulpio_rs._reading.ReadSpec`, read by attribute. Per-video lists have one entry per video
/// of the read (`None`: the same for every video).
#[derive(FromPyObject)]
pub struct ReadSpec {
    #[pyo3(attribute)]
    crops: Option<Vec<Option<CropArg>>>,
    #[pyo3(attribute)]
    sizes: Option<Vec<Option<(usize, usize)>>>,
    #[pyo3(attribute)]
    flips: Option<Vec<bool>>,
    #[pyo3(attribute)]
    colorspace: Option<String>,
    #[pyo3(attribute)]
    pub threads: usize,
    #[pyo3(attribute)]
    dct_scaling: bool,
    #[pyo3(attribute)]
    pub fast: bool,
    #[pyo3(attribute)]
    pub check: bool,
}

impl ReadSpec {
    pub fn colorspace(&self) -> PyResult<Colorspace> {
        colorspace(self.colorspace.as_deref())
    }

    /// Refuses per-video lists whose length is not `videos`.
    pub fn check_lengths(&self, videos: usize) -> PyResult<()> {
        for (what, n) in [
            ("crops", self.crops.as_ref().map(Vec::len)),
            ("flips", self.flips.as_ref().map(Vec::len)),
            ("sizes", self.sizes.as_ref().map(Vec::len)),
        ] {
            if let Some(n) = n.filter(|&n| n != videos) {
                return Err(PyValueError::new_err(format!(
                    "{what} must have one entry per video ({videos} videos, {n} {what})"
                )));
            }
        }
        Ok(())
    }

    /// The fused crop/resize/flip of the `i`-th video, or None when nothing of it is asked.
    pub fn reframe(&self, i: usize) -> Option<Reframe> {
        let crop = self
            .crops
            .as_ref()
            .and_then(|c| c.get(i).copied().flatten());
        let size = self
            .sizes
            .as_ref()
            .and_then(|s| s.get(i).copied().flatten());
        let flip = self
            .flips
            .as_ref()
            .is_some_and(|f| f.get(i).copied().unwrap_or(false));
        reframe(crop, size, flip, self.dct_scaling)
    }
}

/// The frame indices `selection` names in `video` of `chunk` (`None`: every frame): gulpio2's
/// forms, an int, a slice, or a sequence or array of ints; negative indices count from the
/// end and are checked when used. An index no 64-bit integer holds is out of range (the
/// `IndexError` every out-of-range index gets), anything not an index a `TypeError`.
pub fn frames_of(
    chunk: &Chunk,
    video: usize,
    selection: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Vec<i64>>> {
    let Some(sel) = selection.filter(|s| !s.is_none()) else {
        return Ok(None);
    };
    chunk.check(video)?;
    if let Ok(slice) = sel.cast::<PySlice>() {
        let count = chunk.reader().frame_count(video);
        let ind = slice.indices(count as isize)?;
        let (start, step) = (ind.start as i64, ind.step as i64);
        return Ok(Some(
            (0..ind.slicelength as i64)
                .map(|n| start + n * step)
                .collect(),
        ));
    }
    if sel.cast::<PyList>().is_ok() || sel.cast::<PyTuple>().is_ok() {
        let frames: PyResult<Vec<i64>> =
            sel.try_iter()?.map(|k| index(chunk, video, &k?)).collect();
        return frames.map(Some);
    }
    if sel.cast::<PyInt>().is_ok() || !sel.hasattr("__len__")? {
        // An int, or a scalar that says it is one (numpy integers): one frame.
        return Ok(Some(vec![index(chunk, video, sel)?]));
    }
    // An array (any shape, any integer dtype) or another sequence: its indices, flattened.
    let flat = sel
        .py()
        .import("numpy")?
        .call_method1("asarray", (sel,))?
        .call_method1("reshape", (-1,))?
        .call_method0("tolist")?;
    let frames: PyResult<Vec<i64>> = flat.try_iter()?.map(|k| index(chunk, video, &k?)).collect();
    frames.map(Some)
}

fn index(chunk: &Chunk, video: usize, k: &Bound<'_, PyAny>) -> PyResult<i64> {
    match k.extract::<i64>() {
        Ok(k) => Ok(k),
        Err(_) if k.cast::<PyInt>().is_ok() || k.hasattr("__index__")? => {
            // An integer beyond i64: out of range for every video.
            Err(out_of_range(chunk, video, k))
        }
        Err(_) => Err(PyTypeError::new_err(format!(
            "{}: video {:?}: frame indices must be integers, not {}",
            chunk.reader().paths().data.display(),
            chunk.reader().id(video),
            k.get_type().name()?
        ))),
    }
}

/// The `IndexError` of an out-of-range index, as the core's (`FrameOutOfRange`: message and
/// `path`, `video_id`, `frame` attributes), for an index the core cannot hold.
fn out_of_range(chunk: &Chunk, video: usize, k: &Bound<'_, PyAny>) -> PyErr {
    let reader = chunk.reader();
    let path = reader.paths().data.display().to_string();
    let id = reader.id(video);
    let err = PyIndexError::new_err(format!(
        "{path}: video {id:?} has {} frames; frame index {k} is out of range",
        reader.frame_count(video)
    ));
    let value = err.value(k.py());
    let set = value
        .setattr("path", &path)
        .and_then(|()| value.setattr("video_id", id))
        .and_then(|()| value.setattr("frame", k));
    match set {
        Ok(()) => err,
        Err(e) => e,
    }
}

pub fn colorspace(name: Option<&str>) -> PyResult<Colorspace> {
    match name.map(|s| s.to_ascii_uppercase()).as_deref() {
        None | Some("AUTO") => Ok(Colorspace::Auto),
        Some("RGB") => Ok(Colorspace::Rgb),
        Some("GRAY") | Some("GREY") | Some("L") => Ok(Colorspace::Gray),
        Some(other) => Err(PyValueError::new_err(format!(
            "colorspace must be 'RGB', 'GRAY' or None, not {other:?}"
        ))),
    }
}

/// A crop box `(top, left, height, width)` and output size `(height, width)` as Python gives
/// them.
pub type CropArg = (f64, f64, f64, f64);

/// The fused crop/resize/flip of a read, or None when nothing of it is asked for.
pub fn reframe(
    crop: Option<CropArg>,
    size: Option<(usize, usize)>,
    flip: bool,
    dct_scaling: bool,
) -> Option<Reframe> {
    if crop.is_none() && size.is_none() && !flip {
        return None;
    }
    Some(Reframe {
        crop: crop.map(|(top, left, height, width)| CropBox {
            top,
            left,
            height,
            width,
        }),
        size,
        flip,
        dct_scaling,
    })
}
