//! Decoding stored frames into numpy arrays: one planning function (`plan`) behind
//! `Chunk.decode`, `Chunk.read` and `read_batch`, and one way to run a plan (`into_one`,
//! `into_each`: the GIL released, the decode on the private pool).

use numpy::{
    PyArray4, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::arrays;
use super::chunk_handle::Chunk;
use super::read_spec::{frames_of, ReadSpec};
use crate::decode::{self as batch, FrameJob};
use crate::error::{At, Error};
use crate::jpeg::Precision;
use crate::pixels::{Colorspace, Reframe};

/// How a video's frames are handed out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One `(T, H, W, C)` array: every frame must have the same size, and a video with some
    /// colour frames gives 3 channels for all.
    Stacked,
    /// gulpio2's list: each frame keeps its own size and channel count.
    PerFrame,
}

/// The frames of one video, planned.
pub struct Plan<'a> {
    pub jobs: Vec<FrameJob<'a>>,
    /// `(H, W, C)` shared by every frame. `Stacked` always has one (zeros for no frames);
    /// `PerFrame` has none when the frames differ or there are none.
    pub shape: Option<(usize, usize, usize)>,
}

impl Plan<'_> {
    /// The same frames decoded at `fast` (gulpio2's fast IDCT and upsampling) or accurate
    /// precision.
    pub fn fast(mut self, fast: bool) -> Self {
        let precision = if fast {
            Precision::Fast
        } else {
            Precision::Accurate
        };
        for job in &mut self.jobs {
            job.precision = precision;
        }
        self
    }
}

/// Checks the video position, selects the frames (`None`: all) and works out every frame's
/// output shape for `layout` (and `reframe`).
pub fn plan<'a>(
    py: Python<'_>,
    chunk: &'a Chunk,
    video: usize,
    frames: Option<Vec<i64>>,
    cs: Colorspace,
    layout: Layout,
    reframe: Option<&Reframe>,
) -> PyResult<Plan<'a>> {
    chunk.check(video)?;
    let frames = chunk.selection(video, frames);
    let reader = chunk.reader();
    // Legacy chunks read frame headers here, which for remote data is network I/O: never
    // with the GIL held.
    let stacked = layout == Layout::Stacked;
    let jobs = py.detach(|| batch::plan(reader, video, &frames, cs, stacked, reframe))?;
    let shape = match (layout, batch::uniform(&jobs), jobs.first()) {
        (_, Some(shape), _) => Some(shape),
        (Layout::PerFrame, None, _) => None,
        // No frames: an empty (0, 0, 0, C) array.
        (Layout::Stacked, None, None) => Some((0, 0, 0)),
        (Layout::Stacked, None, Some(first)) => {
            let (k, other) = jobs
                .iter()
                .find(|j| j.shape != first.shape)
                .map_or((first.frame, first.shape), |j| (j.frame, j.shape));
            let msg = format!(
                "frames of different sizes (frame {} is {}x{}, frame {k} is {}x{}); read() \
                 stacks frames into one array: use gd[id] for a list of frames",
                first.frame, first.shape.1, first.shape.0, other.1, other.0
            );
            let at = At::frame(reader.id(video), k);
            return Err(Error::invalid_for(&reader.paths().data, at, msg).into());
        }
    };
    Ok(Plan { jobs, shape })
}

/// Decodes `jobs` back to back into one array of shape `dims`: `out` (checked to be exactly
/// that shape, C-contiguous and writeable) or a new one.
pub fn into_one<'py>(
    py: Python<'py>,
    jobs: &[FrameJob],
    dims: &[usize],
    out: Option<Bound<'py, PyAny>>,
    check: bool,
    threads: usize,
) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
    let arr = match out {
        Some(out) => out_array(&out, dims)?,
        // Every byte is written by the decoder before the array is returned; on error the
        // array is dropped without being exposed.
        None => arrays::uninit_dyn(py, dims)?,
    };
    let outs = split(slice(&arr)?, jobs)?;
    run(py, jobs, outs, check, threads)?;
    Ok(arr)
}

/// Decodes each group of jobs (all of one shape) into its own new `(len, H, W, C)` array, in
/// one parallel pass over all of them.
pub fn into_each<'py>(
    py: Python<'py>,
    groups: &[&[FrameJob]],
    check: bool,
    threads: usize,
) -> PyResult<Vec<Bound<'py, PyArray4<u8>>>> {
    let shapes: Vec<[usize; 4]> = groups
        .iter()
        .map(|g| {
            let (h, w, c) = g.first().map_or((0, 0, 0), |j| j.shape);
            [g.len(), h, w, c]
        })
        .collect();
    let arrays = arrays::uninit4_many(py, &shapes)?;
    let mut outs = Vec::new();
    for (arr, jobs) in arrays.iter().zip(groups) {
        outs.extend(split(slice(arr.to_dyn())?, jobs)?);
    }
    let jobs: Vec<FrameJob> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    run(py, &jobs, outs, check, threads)?;
    Ok(arrays)
}

/// A video of a read: its chunk, position in the chunk and frames (`None`: all).
pub type Item<'py> = (Bound<'py, Chunk>, usize, Option<Vec<i64>>);

/// Resolves each item's frame selection (gulpio2's forms, `read_spec::frames_of`).
pub fn resolve_items<'py>(
    items: Vec<(Bound<'py, Chunk>, usize, Option<Bound<'py, PyAny>>)>,
) -> PyResult<Vec<Item<'py>>> {
    items
        .into_iter()
        .map(|(chunk, video, sel)| {
            let frames = frames_of(chunk.get(), video, sel.as_ref())?;
            Ok((chunk, video, frames))
        })
        .collect()
}

/// Decodes many videos in one parallel pass: the one read every batch read comes to.
/// Returns one `(N, T, H, W, C)` array when every video has the same frame count and size,
/// else a list of `(T, H, W, C)` arrays. Frames inside one video must share a size. `spec`
/// fuses each video's crop, resize and flip into the decode.
pub fn read_items<'py>(
    py: Python<'py>,
    items: &[Item<'py>],
    spec: &ReadSpec,
    out: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let cs = spec.colorspace()?;
    spec.check_lengths(items.len())?;
    let plans = items
        .iter()
        .enumerate()
        .map(|(i, (chunk, video, frames))| {
            let r = spec.reframe(i);
            plan(
                py,
                chunk.get(),
                *video,
                frames.clone(),
                cs,
                Layout::Stacked,
                r.as_ref(),
            )
            .map(|p| p.fast(spec.fast))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let same = plans
        .windows(2)
        .all(|w| w[0].jobs.len() == w[1].jobs.len() && w[0].shape == w[1].shape);
    if same {
        let (t, (h, w, c)) = plans.first().map_or((0, (0, 0, 0)), |p| {
            (p.jobs.len(), p.shape.unwrap_or_default())
        });
        let dims = [plans.len(), t, h, w, c];
        // Checked before the jobs of every video are gathered into one list.
        crate::decode::output_bytes(&dims)?;
        let jobs: Vec<FrameJob> = plans.iter().flat_map(|p| p.jobs.iter().copied()).collect();
        let arr = into_one(py, &jobs, &dims, out, spec.check, spec.threads)?;
        return Ok(arr.into_any());
    }
    if out.is_some() {
        return Err(PyValueError::new_err(
            "out= needs every video to give the same number of frames of the same size",
        ));
    }
    let groups: Vec<&[FrameJob]> = plans.iter().map(|p| p.jobs.as_slice()).collect();
    let arrays = into_each(py, &groups, spec.check, spec.threads)?;
    Ok(PyList::new(py, arrays)?.into_any())
}

/// [`read_items`] for `(chunk, video, frame selection)` items, for readers that hold chunks
/// rather than a directory (`gulpio_rs.ray`'s read tasks). `spec`: `_reading.ReadSpec`.
#[pyfunction]
#[pyo3(signature = (items, spec, out=None))]
pub fn read_batch<'py>(
    py: Python<'py>,
    items: Vec<(Bound<'py, Chunk>, usize, Option<Bound<'py, PyAny>>)>,
    spec: ReadSpec,
    out: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let items = resolve_items(items)?;
    read_items(py, &items, &spec, out)
}

/// Starts fetching the frames of `items` from object storage in the background; returns at
/// once.
pub fn prefetch_items(py: Python<'_>, items: &[Item<'_>]) -> PyResult<()> {
    // Grouped by chunk, so the prefetch plans the same merged requests as the read will.
    type Wanted = Vec<(usize, i64)>;
    let mut by_chunk: Vec<(std::sync::Arc<crate::ChunkReader>, Wanted)> = Vec::new();
    for (chunk, video, frames) in items {
        let chunk = chunk.get();
        chunk.check(*video)?;
        let wanted = chunk
            .selection(*video, frames.clone())
            .into_iter()
            .map(|f| (*video, f));
        match by_chunk
            .iter_mut()
            .find(|(c, _)| std::sync::Arc::ptr_eq(c, chunk.reader()))
        {
            Some((_, w)) => w.extend(wanted),
            None => by_chunk.push((chunk.reader().clone(), wanted.collect())),
        }
    }
    py.detach(|| {
        by_chunk
            .iter()
            .try_for_each(|(chunk, wanted)| chunk.prefetch(wanted))
    })?;
    Ok(())
}

/// The array's bytes, to be written by the decoder.
// A numpy array is shared, interior-mutable memory: `&Bound` is all Python ever gives us.
#[allow(clippy::mut_from_ref)]
fn slice<'a>(arr: &'a Bound<'_, PyArrayDyn<u8>>) -> PyResult<&'a mut [u8]> {
    // SAFETY: the array is either freshly allocated here or a caller's `out` that was checked
    // to be C-contiguous and writeable; no Python code runs while the slice is in use.
    unsafe { arr.as_slice_mut() }
        .map_err(|_| PyValueError::new_err("out must be a C-contiguous, writeable uint8 array"))
}

/// Cuts `buf` into one slice per job, in order, each exactly the job's size.
fn split<'s>(mut buf: &'s mut [u8], jobs: &[FrameJob]) -> PyResult<Vec<&'s mut [u8]>> {
    let mut outs = Vec::with_capacity(jobs.len());
    for job in jobs {
        let (head, tail) = std::mem::take(&mut buf)
            .split_at_mut_checked(job.len())
            .ok_or_else(|| crate::Error::Internal("output array smaller than its frames".into()))?;
        outs.push(head);
        buf = tail;
    }
    Ok(outs)
}

/// `out=` must be a numpy uint8 array of exactly the shape the frames need, C-contiguous and
/// writeable; anything else is one error naming every requirement and what `out` has.
fn out_array<'py>(out: &Bound<'py, PyAny>, dims: &[usize]) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
    let shape = |d: &[usize]| match d {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            d.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let want = format!(
        "a C-contiguous, writeable uint8 array of shape {}",
        shape(dims)
    );
    let Ok(arr) = out.cast::<PyUntypedArray>() else {
        return Err(PyTypeError::new_err(format!(
            "out must be {want}, not {}",
            out.get_type().name()?
        )));
    };
    let dtype_ok = arr.dtype().is_equiv_to(&numpy::dtype::<u8>(out.py()));
    let writeable: bool = arr.getattr("flags")?.getattr("writeable")?.extract()?;
    let shape_ok = arr.shape() == dims;
    if dtype_ok && shape_ok && arr.is_c_contiguous() && writeable {
        return Ok(arr.cast::<PyArrayDyn<u8>>()?.clone());
    }
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let msg = format!(
        "out must be {want}; got dtype {}, shape {}, C-contiguous: {}, writeable: {}",
        arr.dtype(),
        shape(arr.shape()),
        yes_no(arr.is_c_contiguous()),
        yes_no(writeable)
    );
    Err(if dtype_ok {
        PyValueError::new_err(msg)
    } else {
        PyTypeError::new_err(msg)
    })
}

/// Verifies and decodes with the GIL released.
fn run(
    py: Python<'_>,
    jobs: &[FrameJob],
    outs: Vec<&mut [u8]>,
    check: bool,
    threads: usize,
) -> PyResult<()> {
    let runner = crate::pool::runner(threads)?;
    Ok(py.detach(|| batch::decode(jobs, outs, check, &runner))?)
}
