//! Full verification of a chunk, for `gulpio check`: every frame's CRC (and optionally a full
//! decode) in parallel, the CRC of all published data, and leftovers past the published end.
//! Problems are collected, not returned as the first error, so one pass reports all damage.

use rayon::prelude::*;

use crate::chunk::reader::{ChunkReader, IndexKind};
use crate::error::Error;
use crate::jpeg::{self, Colorspace, DecodeFailure};
use crate::pool::Runner;

/// One problem found in a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `crc`, `truncated`, `decode`, `unsupported`, `restarts` (the index's restart markers
    /// are not the frame's), `data_crc`, `unpublished_tail` or `io` (the data could not be
    /// read at all).
    pub kind: &'static str,
    pub video: Option<String>,
    pub frame: Option<usize>,
    pub message: String,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub videos: usize,
    pub frames: usize,
    /// Bytes of published data covered.
    pub bytes: u64,
    /// The frames' JPEG bytes (padding excluded): what ingest reports as a chunk's bytes.
    pub frame_bytes: u64,
    pub findings: Vec<Finding>,
}

/// Verifies every frame of `reader` (CRC when the chunk is indexed; with `decode`, also a
/// full decode) and the chunk-level data CRC.
pub fn verify_chunk(reader: &ChunkReader, decode: bool, runner: &Runner) -> Report {
    let frames: Vec<(usize, usize)> = (0..reader.video_count())
        .flat_map(|v| (0..reader.frame_count(v)).map(move |k| (v, k)))
        .collect();
    let frame_bytes = (0..reader.video_count())
        .flat_map(|v| reader.frames(v))
        .map(|f| f.jpeg_len as u64)
        .sum();
    // Mapped locally; read whole (in concurrent ranges) from other sources.
    let data = match reader.whole_data() {
        Ok(d) => d,
        Err(e) => {
            return Report {
                videos: reader.video_count(),
                frames: frames.len(),
                bytes: 0,
                frame_bytes,
                findings: vec![Finding {
                    kind: "io",
                    video: None,
                    frame: None,
                    message: e.to_string(),
                }],
            }
        }
    };
    let data: &[u8] = &data;
    let check = |&(v, k): &(usize, usize)| check_frame(reader, data, v, k, decode);
    let mut findings: Vec<Finding> = match runner {
        Runner::Caller => frames.iter().filter_map(check).collect(),
        Runner::Pool(pool) => pool.install(|| frames.par_iter().filter_map(check).collect()),
    };
    let published = reader.published_len();
    if reader.kind() == IndexKind::Binary && data.len() as u64 >= published {
        let expected = reader.index().header().gulp_crc;
        let actual = crc32fast::hash(&data[..published as usize]);
        if actual != expected {
            // One damaged place is one problem: when frames' CRCs already fail, the whole-file
            // CRC failing too is a consequence, said in the first of them rather than as a
            // second problem. Alone (damage in padding or between frames), it is the finding.
            let consequence = format!(
                "CRC of the published data (bytes 0..{published}): expected {expected:#010x}, \
                 found {actual:#010x}"
            );
            match findings.iter_mut().find(|f| f.kind == "crc") {
                Some(first) => {
                    first.message = format!("{}; so the {consequence} fails too", first.message)
                }
                None => findings.push(Finding {
                    kind: "data_crc",
                    video: None,
                    frame: None,
                    message: consequence,
                }),
            }
        }
    }
    let frame_cut = findings.iter().any(|f| f.kind == "truncated");
    if (data.len() as u64) < published && !frame_cut {
        // Only padding is missing: every JPEG is whole, but the file is not what was
        // published (gulpio2 would strip `pad` bytes from the last frame).
        findings.push(Finding {
            kind: "truncated",
            video: None,
            frame: None,
            message: format!(
                "the data file has {} bytes, {} fewer than published: the padding after the \
                 last frame is cut",
                data.len(),
                published - data.len() as u64
            ),
        });
    }
    if data.len() as u64 > published {
        findings.push(Finding {
            kind: "unpublished_tail",
            video: None,
            frame: None,
            message: format!(
                "{} bytes past the published end (byte {published}): left by an interrupted \
                 write",
                data.len() as u64 - published
            ),
        });
    }
    Report {
        videos: reader.video_count(),
        frames: frames.len(),
        bytes: published.min(data.len() as u64),
        frame_bytes,
        findings,
    }
}

fn check_frame(
    reader: &ChunkReader,
    data: &[u8],
    v: usize,
    k: usize,
    decode: bool,
) -> Option<Finding> {
    let finding = |kind, message: String| Finding {
        kind,
        video: Some(reader.id(v).to_owned()),
        frame: Some(k),
        message,
    };
    let bytes = match reader
        .frame(v, k as i64)
        .and_then(|(k, rec)| reader.frame_in(data, v, k, &rec, true))
    {
        Ok(b) => b,
        Err(Error::Crc {
            offset,
            end,
            expected,
            actual,
            ..
        }) => {
            return Some(finding(
                "crc",
                format!(
                    "CRC mismatch in bytes {offset}..{end}: expected {expected:#010x}, found \
                     {actual:#010x}"
                ),
            ))
        }
        Err(Error::Format { msg, .. }) => return Some(finding("truncated", msg)),
        Err(e) => return Some(finding("truncated", e.to_string())),
    };
    // The index's restart markers must be this frame's (a crop's decode cuts at them; reads
    // check them too and decode the whole frame when they do not fit, so this is an index
    // problem, not damage to the pixels).
    if let Some(markers) = reader.restarts(v, k) {
        let found = jpeg::header::read_info(bytes)
            .ok()
            .and_then(|info| jpeg::restart::scan(bytes, &info))
            .unwrap_or_default();
        if found != markers {
            return Some(finding(
                "restarts",
                format!(
                    "the index records {} restart marker(s) the frame does not have where it                      says (it has {}): cropped reads decode this frame whole",
                    markers.len(),
                    found.len()
                ),
            ));
        }
    }
    if !decode {
        return None;
    }
    match jpeg::decode(bytes, Colorspace::Auto) {
        Ok(_) => None,
        Err(DecodeFailure::Unsupported(m)) => Some(finding("unsupported", m)),
        Err(DecodeFailure::Corrupt(m)) => Some(finding("decode", m)),
    }
}
