//! Full verification of a chunk, for `gulpio check`: every frame's CRC (and optionally a full
//! decode) in parallel, the CRC of all published data, and leftovers past the published end.
//! Problems are collected, not returned as the first error, so one pass reports all damage.

use std::borrow::Cow;
use std::ops::Range;

use rayon::prelude::*;

use crate::chunk::reader::{ChunkReader, IndexKind};
use crate::error::Error;
use crate::format::segments::{SegmentRec, StreamRec};
use crate::jpeg::{self, Colorspace, DecodeFailure};
use crate::pool::Runner;
use crate::video::{decode_segment, Codec, Integrity, SegmentShape};

/// One problem found in a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `crc`, `truncated`, `decode`, `unsupported`, `restarts` (the index's restart markers
    /// are not the frame's), `index` (a video stored as segments without the index that
    /// describes them), `data_crc`, `unpublished_tail` or `io` (the data could not be read at
    /// all).
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

/// Bytes of the `.gulp` checked at once when it is not mapped: frames are checked from a
/// window of the file held in memory, never the whole file.
const WINDOW: u64 = 64 << 20;

/// Verifies every frame of `reader` (CRC when the chunk is indexed; with `decode`, also a
/// full decode) and the chunk-level data CRC. A mapped chunk is checked in place; any other
/// is read window by window (bounded memory whatever the file's size).
pub fn verify_chunk(reader: &ChunkReader, decode: bool, runner: &Runner) -> Report {
    let frame_count: usize = (0..reader.video_count())
        .map(|v| reader.frame_count(v))
        .sum();
    let frame_bytes = (0..reader.video_count())
        .flat_map(|v| reader.frames(v))
        .map(|f| f.jpeg_len as u64)
        .sum();
    // Frames in file order, so each window of the file holds the frames that start in it.
    let mut order: Vec<(u64, u64, usize, usize)> = (0..reader.video_count())
        .flat_map(|v| {
            reader
                .frames(v)
                .enumerate()
                .map(move |(k, f)| (f.offset, f.jpeg_end(), v, k))
        })
        .collect();
    order.sort_unstable();
    let len = reader.source().len();
    let published = reader.published_len();
    let mut crc = crc32fast::Hasher::new();
    let mut findings: Vec<Finding> = Vec::new();
    let (mut at, mut next) = (0u64, 0usize);
    while at < len {
        let mut end = (at + WINDOW).min(len);
        let mut upto = next;
        while upto < order.len() && order[upto].0 < end {
            end = end.max(order[upto].1.min(len));
            upto += 1;
        }
        let window = match read_window(reader, at..end) {
            Ok(w) => w,
            Err(e) => {
                return Report {
                    videos: reader.video_count(),
                    frames: frame_count,
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
        let window: &[u8] = &window;
        if at < published {
            crc.update(&window[..(published.min(end) - at) as usize]);
        }
        let check = |&(_, _, v, k): &(u64, u64, usize, usize)| {
            check_frame(reader, window, at, len, v, k, decode)
        };
        let batch = &order[next..upto];
        findings.extend(match runner {
            Runner::Caller => batch.iter().filter_map(check).collect::<Vec<_>>(),
            Runner::Pool(pool) => pool.install(|| batch.par_iter().filter_map(check).collect()),
        });
        (at, next) = (end, upto);
    }
    // Frames that start past the end of the file (it was cut before them).
    findings.extend(
        order[next..]
            .iter()
            .filter_map(|&(_, _, v, k)| check_frame(reader, &[], len, len, v, k, decode)),
    );
    findings.extend(check_segment_videos(reader, decode, &findings, runner));
    // Findings in video and frame order, whatever the file order.
    findings.sort_by_key(|f| (f.video.as_ref().and_then(|id| reader.lookup(id)), f.frame));
    if reader.kind() == IndexKind::Binary && len >= published {
        let expected = reader.index().header().gulp_crc;
        let actual = crc.finalize();
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
    if len < published && !frame_cut {
        // Only padding is missing: every JPEG is whole, but the file is not what was
        // published (gulpio2 would strip `pad` bytes from the last frame).
        findings.push(Finding {
            kind: "truncated",
            video: None,
            frame: None,
            message: format!(
                "the data file has {len} bytes, {} fewer than published: the padding after the \
                 last frame is cut",
                published - len
            ),
        });
    }
    if len > published {
        findings.push(Finding {
            kind: "unpublished_tail",
            video: None,
            frame: None,
            message: format!(
                "{} bytes past the published end (byte {published}): left by an interrupted \
                 write",
                len - published
            ),
        });
    }
    Report {
        videos: reader.video_count(),
        frames: frame_count,
        bytes: published.min(len),
        frame_bytes,
        findings,
    }
}

/// Bytes `range` of the `.gulp`: a slice of the mapping, or read (in concurrent pieces from
/// object stores).
fn read_window(reader: &ChunkReader, range: Range<u64>) -> crate::Result<Cow<'_, [u8]>> {
    if let Some(m) = reader.mapped() {
        return Ok(Cow::Borrowed(&m[range.start as usize..range.end as usize]));
    }
    let step = crate::io::plan::MAX_REQUEST;
    let pieces: Vec<Range<u64>> = (range.start..range.end)
        .step_by(step as usize)
        .map(|s| s..(s + step).min(range.end))
        .collect();
    let mut out = vec![0u8; (range.end - range.start) as usize];
    let mut failed = None;
    reader
        .source()
        .read_ranges(&reader.paths().data, &pieces, |i, got| match got {
            Ok(b) if b.len() as u64 == pieces[i].end - pieces[i].start => {
                let at = (pieces[i].start - range.start) as usize;
                out[at..at + b.len()].copy_from_slice(&b);
            }
            Ok(_) => {
                failed.get_or_insert(crate::Error::Internal("a short window read".into()));
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(Cow::Owned(out)),
    }
}

/// Checks frame `k` of video `v` from `window`, the file's bytes from offset `base` on (it
/// holds the frame when the frame lies within the file's `len` bytes).
fn check_frame(
    reader: &ChunkReader,
    window: &[u8],
    base: u64,
    len: u64,
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
    let bytes = match reader.frame(v, k as i64).and_then(|(k, rec)| {
        if rec.jpeg_end() > len {
            return Err(reader.truncated(v, k, &rec, len));
        }
        let bytes = rec
            .offset
            .checked_sub(base)
            .and_then(|start| window.get(start as usize..(start + rec.jpeg_len as u64) as usize))
            .ok_or_else(|| Error::Internal(format!("frame {k} is not in the window read")))?;
        reader.check_crc(v, k, &rec, bytes).map(|_| bytes)
    }) {
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
                    "the index records {} restart marker(s) the frame does not have where it \
                     says (it has {}): cropped reads decode this frame whole",
                    markers.len(),
                    found.len()
                ),
            ));
        }
    }
    if !decode || reader.index().stream_of(v).is_some() || reader.check_readable(v).is_err() {
        // Segment tiles are not JPEGs: their videos are decoded a segment at a time
        // (`check_segment_videos`).
        return None;
    }
    match jpeg::decode(bytes, Colorspace::Auto) {
        Ok(_) => None,
        Err(DecodeFailure::Unsupported(m)) => Some(finding("unsupported", m)),
        Err(DecodeFailure::Corrupt(m)) => Some(finding("decode", m)),
    }
}

/// Videos stored as segments: one `index` finding for each that cannot be read (its chunk is
/// read without the index that describes its segments); with `decode`, every segment whose
/// tiles passed their CRCs decoded whole, a `decode` finding for each that fails.
fn check_segment_videos(
    reader: &ChunkReader,
    decode: bool,
    found: &[Finding],
    runner: &Runner,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut jobs = Vec::new();
    for v in 0..reader.video_count() {
        if let Err(e) = reader.check_readable(v) {
            out.push(Finding {
                kind: "index",
                video: Some(reader.id(v).to_owned()),
                frame: None,
                message: e.to_string(),
            });
            continue;
        }
        let Some((stream, segments)) = reader.stream(v) else {
            continue;
        };
        if !decode {
            continue;
        }
        for (number, seg) in segments.into_iter().enumerate() {
            let damaged = found.iter().any(|f| {
                f.video.as_deref() == Some(reader.id(v))
                    && f.frame.is_some_and(|k| seg.frames().contains(&k))
            });
            if !damaged {
                jobs.push((v, number, stream, seg));
            }
        }
    }
    let check = |&(v, number, stream, seg): &(usize, usize, StreamRec, SegmentRec)| {
        decode_whole_segment(reader, v, number, &stream, &seg)
    };
    out.extend(match runner {
        Runner::Caller => jobs.iter().filter_map(check).collect::<Vec<_>>(),
        Runner::Pool(pool) => pool.install(|| jobs.par_iter().filter_map(check).collect()),
    });
    out
}

fn decode_whole_segment(
    reader: &ChunkReader,
    v: usize,
    number: usize,
    stream: &StreamRec,
    seg: &SegmentRec,
) -> Option<Finding> {
    let finding = |frame: usize, message: String| Finding {
        kind: "decode",
        video: Some(reader.id(v).to_owned()),
        frame: Some(frame),
        message,
    };
    let bytes = match reader.segment_stream(v, number) {
        Ok(b) => b,
        Err(e) => return Some(finding(seg.first_frame as usize, e.to_string())),
    };
    let codec = Codec::from_code(stream.codec)?;
    let shape = SegmentShape {
        codec,
        width: stream.width as usize,
        height: stream.height as usize,
        frames: seg.frame_count as usize,
    };
    let all: Vec<usize> = (0..shape.frames).collect();
    // One frame's buffer for all of them would be enough if the decoder wrote in turn; a
    // segment is at most `MAX_SEGMENT_FRAMES` frames, decoded into one allocation.
    let mut pixels = match crate::buffers::zeroed(shape.frame_len() * shape.frames, || {
        format!("segment {number} of video {:?}", reader.id(v))
    }) {
        Ok(p) => p,
        Err(e) => return Some(finding(seg.first_frame as usize, e.to_string())),
    };
    let mut outs: Vec<&mut [u8]> = pixels.chunks_exact_mut(shape.frame_len()).collect();
    match decode_segment(&shape, &bytes, Integrity::Crc(seg.crc), &all, &mut outs) {
        Ok(()) => None,
        Err(e) => Some(finding(
            seg.first_frame as usize + e.frame.unwrap_or(0),
            format!(
                "segment {number} (frames {}..{}, bytes {}..{}): {}",
                seg.first_frame,
                seg.frames().end,
                seg.offset,
                seg.end(),
                e.msg
            ),
        )),
    }
}
