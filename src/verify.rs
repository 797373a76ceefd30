//! Full verification of a chunk, for `gulpio check`: every frame's CRC, and every segment's
//! for videos stored as segments (and optionally a full decode) in parallel, the CRC of all published data, and leftovers past the published end.
//! Problems are collected, not returned as the first error, so one pass reports all damage.

use std::borrow::Cow;
use std::ops::Range;

use rayon::prelude::*;

use crate::chunk::reader::{ChunkReader, IndexKind};
use crate::error::Error;
use crate::format::segments::{SegmentRec, StreamRec};
use crate::jpeg::{self, DecodeFailure};
use crate::pixels::Colorspace;
use crate::pool::Runner;
use crate::video::{decode_segment, vet_segment, Codec, Integrity, SegmentShape};

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

/// Verifies every frame of `reader` (CRC when the chunk is indexed, of each whole segment
/// for videos stored as segments; with `decode`, also a full decode) and the chunk-level
/// data CRC. A mapped chunk is checked in place; any other
/// is read window by window (bounded memory whatever the file's size).
pub fn verify_chunk(reader: &ChunkReader, decode: bool, runner: &Runner) -> Report {
    let frame_count: usize = (0..reader.video_count())
        .map(|v| reader.frame_count(v))
        .sum();
    let frame_bytes = (0..reader.video_count())
        .flat_map(|v| reader.frames(v))
        .map(|f| f.jpeg_len as u64)
        .sum();
    // Frames and segments in file order, so each window of the file holds the units that
    // start in it.
    let mut order = units(reader);
    order.sort_unstable_by_key(|u| (u.start, u.end, u.video));
    let len = reader.source().len();
    let published = reader.published_len();
    let mut crc = crc32fast::Hasher::new();
    let mut findings: Vec<Finding> = Vec::new();
    let (mut at, mut next) = (0u64, 0usize);
    while at < len {
        let mut end = (at + WINDOW).min(len);
        let mut upto = next;
        while upto < order.len() && order[upto].start < end {
            end = end.max(order[upto].end.min(len));
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
        let check = |u: &Unit| check_unit(reader, window, at, len, u, decode);
        let batch = &order[next..upto];
        findings.extend(match runner {
            Runner::Caller => batch.iter().filter_map(check).collect::<Vec<_>>(),
            Runner::Pool(pool) => pool.install(|| batch.par_iter().filter_map(check).collect()),
        });
        (at, next) = (end, upto);
    }
    // Units that start past the end of the file (it was cut before them).
    findings.extend(
        order[next..]
            .iter()
            .filter_map(|u| check_unit(reader, &[], len, len, u, decode)),
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

/// What `check` reads and CRCs as one piece: a JPEG frame, or a whole segment of a video
/// stored as segments (its CRC covers the stream, and its frames are read only together), at
/// bytes `start..end` of the `.gulp`.
struct Unit {
    start: u64,
    end: u64,
    video: usize,
    what: What,
}

enum What {
    Frame(usize),
    /// The segment's number within its video, its entry, and its video's stream entry.
    Segment(usize, SegmentRec, StreamRec),
}

/// Every frame of `reader`'s JPEG videos, and every segment of its videos stored as
/// segments (read through the index that describes them; without it their tiles are
/// checked as frames are, for placement).
fn units(reader: &ChunkReader) -> Vec<Unit> {
    let mut out = Vec::new();
    for v in 0..reader.video_count() {
        if let Some((stream, segments)) = reader.stream(v) {
            out.extend(segments.into_iter().enumerate().map(|(number, seg)| Unit {
                start: seg.offset,
                end: seg.end(),
                video: v,
                what: What::Segment(number, seg, stream),
            }));
            continue;
        }
        out.extend(reader.frames(v).enumerate().map(|(k, f)| Unit {
            start: f.offset,
            end: f.jpeg_end(),
            video: v,
            what: What::Frame(k),
        }));
    }
    out
}

fn check_unit(
    reader: &ChunkReader,
    window: &[u8],
    base: u64,
    len: u64,
    unit: &Unit,
    decode: bool,
) -> Option<Finding> {
    match &unit.what {
        What::Frame(k) => check_frame(reader, window, base, len, unit.video, *k, decode),
        What::Segment(number, seg, stream) => check_segment(
            reader,
            window,
            base,
            len,
            unit.video,
            (*number, seg, stream),
        ),
    }
}

/// Checks segment `number` of video `v` (`seg`) from `window` as [`check_frame`] checks a
/// frame: the stream's CRC against the segment entry's, and each of its tiles' against the
/// frame table's (a read checks both). One finding for the segment, on its first frame, whose
/// message names every frame it holds: a damaged segment loses them all. An intact stream
/// is also held to what reads check before decoding (`video::vet_segment`: one temporal unit
/// per declared frame, the limits), so a segment whose declared frames are not its stream's
/// is found without `--decode`.
fn check_segment(
    reader: &ChunkReader,
    window: &[u8],
    base: u64,
    len: u64,
    v: usize,
    (number, seg, stream): (usize, &SegmentRec, &StreamRec),
) -> Option<Finding> {
    let frames = seg.frames();
    let what = seg.named(number);
    let finding = |kind, message: String| Finding {
        kind,
        video: Some(reader.id(v).to_owned()),
        frame: Some(frames.start),
        message,
    };
    if seg.end() > len {
        return Some(finding(
            "truncated",
            format!("truncated: {what} end past the file's {len} bytes"),
        ));
    }
    let Some(bytes) = seg
        .offset
        .checked_sub(base)
        .and_then(|start| window.get(start as usize..(start + seg.len as u64) as usize))
    else {
        return Some(finding(
            "io",
            format!("internal error: {what} is not in the window read"),
        ));
    };
    let actual = crc32fast::hash(bytes);
    if actual != seg.crc {
        return Some(finding(
            "crc",
            format!(
                "CRC mismatch in {what}: expected {:#010x}, found {actual:#010x}",
                seg.crc
            ),
        ));
    }
    if let Some(codec) = Codec::from_code(stream.codec) {
        let shape = SegmentShape {
            codec,
            width: stream.width as usize,
            height: stream.height as usize,
            frames: frames.len(),
        };
        if let Err(f) = vet_segment(&shape, bytes) {
            return Some(finding(
                "decode",
                format!("{what} cannot be read: {}", f.msg),
            ));
        }
    }
    // The stream is intact, so a tile that fails is an index whose frame table contradicts
    // its segment table (both CRC-checked): reads of the segment fail all the same.
    let tiles = reader.frames(v).enumerate().skip(frames.start);
    for (k, rec) in tiles.take(frames.len()) {
        // Tiles lie inside their segment (the index's checks).
        let part = rec
            .offset
            .checked_sub(seg.offset)
            .and_then(|at| bytes.get(at as usize..(at + rec.jpeg_len as u64) as usize));
        let actual = part.map(crc32fast::hash);
        if actual != Some(rec.crc) {
            return Some(finding(
                "crc",
                format!(
                    "CRC mismatch in {what}: the stream matches its CRC, but frame {k}'s entry \
                     in the index (bytes {}..{}) records {:#010x}",
                    rec.offset,
                    rec.jpeg_end(),
                    rec.crc
                ),
            ));
        }
    }
    None
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
    if !decode || reader.check_readable(v).is_err() {
        // Tiles of segments read without their index are not JPEGs: such videos get an
        // `index` finding (`check_segment_videos`).
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
