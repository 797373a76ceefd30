//! Thin PyO3 bindings, one module per class or job: convert arguments, release the GIL around
//! core calls, and map core errors (once, in `errors`, so `?` works everywhere). All
//! Python-facing semantics (gulpio2's API shapes) live in `python/gulpio_rs/`.

mod arrays;
mod chunk;
mod chunk_handle;
mod decode;
mod directory;
mod errors;
mod ids;
mod jpeg;
mod manifest;
mod paths;
mod permute;
mod pool;
mod read_spec;
mod resize;
mod video;
mod writer;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<chunk::FrameView>()?;
    m.add_class::<chunk::Chunk>()?;
    m.add_class::<directory::NativeDirectory>()?;
    m.add_class::<writer::NativeWriter>()?;
    m.add_class::<jpeg::JpegInfo>()?;
    m.add_function(wrap_pyfunction!(writer::write_index, m)?)?;
    m.add_function(wrap_pyfunction!(writer::restore_meta, m)?)?;
    m.add_function(wrap_pyfunction!(writer::rebuild_failures, m)?)?;
    m.add_function(wrap_pyfunction!(writer::cut_tail, m)?)?;
    m.add_function(wrap_pyfunction!(writer::open_for_reading, m)?)?;
    m.add_function(wrap_pyfunction!(writer::open_for_writing, m)?)?;
    m.add_function(wrap_pyfunction!(decode::read_batch, m)?)?;
    m.add_function(wrap_pyfunction!(jpeg::decode_jpeg, m)?)?;
    m.add_function(wrap_pyfunction!(jpeg::jpeg_info, m)?)?;
    m.add_function(wrap_pyfunction!(directory::is_remote_url, m)?)?;
    m.add_function(wrap_pyfunction!(directory::redact_url, m)?)?;
    m.add_function(wrap_pyfunction!(directory::is_secret_option, m)?)?;
    m.add_function(wrap_pyfunction!(resize::resize_frames, m)?)?;
    m.add_function(wrap_pyfunction!(resize::reframe_frames, m)?)?;
    m.add_function(wrap_pyfunction!(resize::encode_frames, m)?)?;
    m.add_function(wrap_pyfunction!(pool::available_threads, m)?)?;
    m.add_function(wrap_pyfunction!(video::probe_segment, m)?)?;
    m.add_function(wrap_pyfunction!(video::decode_segment, m)?)?;
    m.add_function(wrap_pyfunction!(video::segment_stage_times, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::pooled_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::release_pooled_buffers, m)?)?;
    m.add_function(wrap_pyfunction!(permute::feistel, m)?)?;
    paths::register(m)?;
    manifest::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("JPEG_BACKEND", crate::jpeg::BACKEND.name())?;
    m.add("AV1_BACKEND", crate::video::av1::BACKEND)?;
    m.add("MAX_THREADS", crate::pool::MAX_THREADS)?;
    m.add("MAX_READ_BYTES", crate::decode::MAX_READ_BYTES)?;
    Ok(())
}
