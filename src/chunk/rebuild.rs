//! Rebuilding the index entries of a video stored as segments whose chunk lost its index
//! (`write_index`, `gulpio repair`; docs/FORMAT.md §6.3, "Rebuilding"). Everything the index
//! held is in the other two files: the `.gmeta`'s `segments` object gives each segment's frame
//! count and the frames' size, its `frame_info` tiles give each segment's byte range, and
//! each stream's sequence header its colour signalling. CRCs are computed from the bytes as
//! they are now, as for JPEG frames; unlike a JPEG frame, each segment is decoded whole first
//! (frame count, size and colour must be what the `.gmeta` and the other segments say), so a
//! segment damaged in a way the decoder notices is refused rather than given a CRC.

use crate::chunk::reader::ChunkReader;
use crate::error::{At, Error, Result};
use crate::format::gmeta::{parse_segments_json, SegmentsMeta};
use crate::format::index::FrameRec;
use crate::format::segments::{
    check_stream, SegmentRec, StreamRec, CHROMA_420, FLAG_KEYFRAME, MATRIX_BT601, MATRIX_BT709,
};
use crate::video::yuv::{Matrix, Range};
use crate::video::{probe_segment, Codec, MAX_SEGMENT_BYTES, MAX_SEGMENT_FRAMES};

/// The stream entry, segments and frame table entries (tiles with their CRCs) of video
/// `video`, which `reader` (opened through the `.gmeta`) holds as segments described by
/// `json`, its `segments` object.
pub(crate) fn segment_video(
    reader: &ChunkReader,
    video: usize,
    json: &[u8],
) -> Result<(StreamRec, Vec<SegmentRec>, Vec<FrameRec>)> {
    let id = reader.id(video);
    let refuse = |frame: Option<usize>, m: String| {
        let at = match frame {
            Some(f) => At::frame(id, f),
            None => At::video(id),
        };
        Error::format_at(
            &reader.paths().data,
            at,
            format!(
                "the index of this video stored as AV1 segments cannot be rebuilt: {m}; restore \
                 the chunk's .gidx from a copy or ingest the video again"
            ),
        )
    };
    let meta = parse_segments_json(json)
        .map_err(|m| refuse(None, format!("its .gmeta segments object: {m}")))?;
    let SegmentsMeta {
        codec,
        width,
        height,
        frames: counts,
    } = meta;
    let codec =
        Codec::from_name(&codec).ok_or_else(|| refuse(None, format!("unknown codec {codec:?}")))?;
    let (Ok(width), Ok(height)) = (u16::try_from(width), u16::try_from(height)) else {
        return Err(refuse(None, format!("frames of {width}x{height}")));
    };
    let tiles: Vec<FrameRec> = reader.frames(video).collect();
    let total = counts.iter().try_fold(0u64, |a, &n| a.checked_add(n));
    if total != Some(tiles.len() as u64) || counts.is_empty() {
        return Err(refuse(
            None,
            format!(
                "its segments hold {:?} frames, its frame_info lists {}",
                total, // None: the counts overflow
                tiles.len()
            ),
        ));
    }
    let gop = counts.iter().copied().max().unwrap_or(0);
    let mut stream = StreamRec {
        codec: codec.code(),
        chroma: CHROMA_420,
        depth: 8,
        matrix: MATRIX_BT601,
        range: 0,
        width,
        height,
        segment_count: 0,
        segment_start: 0,
        gop: u32::try_from(gop).unwrap_or(u32::MAX),
    };
    check_stream(&stream).map_err(|m| refuse(None, m))?;
    let mut colour: Option<(Matrix, Range)> = None;
    let mut segments = Vec::with_capacity(counts.len());
    let mut frames = Vec::with_capacity(tiles.len());
    let mut first = 0usize;
    for (k, &n) in counts.iter().enumerate() {
        let n = n as usize; // at most the frame count, checked above
        let own = &tiles[first..first + n];
        let fail = |m: String| {
            refuse(
                Some(first),
                format!("segment {k} (frames {first}..{}): {m}", first + n),
            )
        };
        if n == 0 || n > MAX_SEGMENT_FRAMES {
            return Err(fail(format!(
                "1 to {MAX_SEGMENT_FRAMES} frames are allowed"
            )));
        }
        let (seg, bytes) = read_segment(reader, own, first, &fail)?;
        let probe = probe_segment(codec, &bytes, n, width as usize * height as usize)
            .map_err(|f| fail(format!("it does not decode: {}", f.msg)))?;
        if (probe.width, probe.height, probe.frames) != (width as usize, height as usize, n) {
            return Err(fail(format!(
                "it decodes to {} frames of {}x{}, the .gmeta says {n} of {width}x{height}",
                probe.frames, probe.width, probe.height
            )));
        }
        match colour {
            None => colour = Some((probe.matrix, probe.range)),
            Some(c) if c != (probe.matrix, probe.range) => {
                return Err(fail(
                    "its colour signalling differs from segment 0's".into(),
                ))
            }
            Some(_) => {}
        }
        let rebuilt = seg
            .tiles(width, height, &bytes)
            .ok_or_else(|| fail(format!("{} bytes cannot hold {n} frames", bytes.len())))?;
        frames.extend(rebuilt);
        segments.push(seg);
        first += n;
    }
    if let Some((matrix, range)) = colour {
        // As the decoder reads it: BT.601 stands for 2, 5 and 6 alike.
        stream.matrix = match matrix {
            Matrix::Bt709 => MATRIX_BT709,
            Matrix::Bt601 => MATRIX_BT601,
        };
        stream.range = u8::from(range == Range::Full);
    }
    Ok((stream, segments, frames))
}

/// The videos of `reader` (opened through the `.gmeta`) stored as segments whose index
/// entries cannot be rebuilt ([`segment_video`] fails on their data: a segment that does not
/// decode to what the `.gmeta` says, tiles that are not a segment's, a `segments` object that
/// does not parse), each with its error. `gulpio repair` leaves these out when it salvages a
/// chunk whose index is lost, keeping every other video. Errors not about one video's data
/// (I/O) are returned as the error.
pub fn unrebuildable(reader: &ChunkReader) -> Result<Vec<Error>> {
    let mut out = Vec::new();
    for v in 0..reader.video_count() {
        let Some(json) = reader.unindexed_json(v) else {
            continue;
        };
        match segment_video(reader, v, json) {
            Ok(_) => {}
            // A range past the end of a cut file names no video: this one's.
            Err(Error::Format { path, at, msg }) => out.push(Error::Format {
                path,
                at: at.or_else(|| Some(At::video(reader.id(v)))),
                msg,
            }),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// A video stored as segments, as stored: its stream entry and each segment with its stream
/// bytes, CRC-checked; None for a video of JPEG frames. When the chunk is read without its
/// index, the entries are rebuilt first ([`segment_video`], each segment decoded whole), so
/// that a chunk whose index is lost can be rewritten with its intact videos copied as they
/// are.
#[allow(clippy::type_complexity)]
pub fn stored_segments(
    reader: &ChunkReader,
    video: usize,
) -> Result<Option<(StreamRec, Vec<(SegmentRec, Vec<u8>)>)>> {
    if let Some((stream, segments)) = reader.stream(video) {
        let mut out = Vec::with_capacity(segments.len());
        for (number, seg) in segments.into_iter().enumerate() {
            out.push((seg, reader.segment_stream(video, number)?));
        }
        return Ok(Some((stream, out)));
    }
    let Some(json) = reader.unindexed_json(video) else {
        return Ok(None);
    };
    let (stream, segments, _) = segment_video(reader, video, json)?;
    let mut out = Vec::with_capacity(segments.len());
    for (number, seg) in segments.into_iter().enumerate() {
        let bytes = Vec::from(
            reader
                .source()
                .read_range(&reader.paths().data, seg.offset..seg.end())?,
        );
        // The CRC was computed from these bytes a moment ago: a difference is a file
        // changed under us.
        let actual = crc32fast::hash(&bytes);
        if actual != seg.crc {
            return Err(reader.segment_crc_error(video, number, &seg, actual));
        }
        out.push((seg, bytes));
    }
    Ok(Some((stream, out)))
}

/// Reads one segment's stream from its tiles (`own`, the `.gmeta`'s entries of its frames
/// from `first`, at least one); `fail` makes the error of a layout that is not a segment's.
fn read_segment(
    reader: &ChunkReader,
    own: &[FrameRec],
    first: usize,
    fail: &dyn Fn(String) -> Error,
) -> Result<(SegmentRec, Vec<u8>)> {
    let n = own.len();
    let start = own[0].offset;
    let mut at = start;
    for (i, t) in own.iter().enumerate() {
        let last = i + 1 == n;
        if t.offset != at || (!last && (t.jpeg_len != 4 || t.pad != 0)) {
            return Err(fail(format!(
                "frame {} is not a tile of one segment record (docs/FORMAT.md §6.2)",
                first + i
            )));
        }
        at = t.record_end();
    }
    let last = own[n - 1];
    let len = last.jpeg_end() - start;
    if len > MAX_SEGMENT_BYTES as u64 {
        return Err(fail(format!("{len} bytes, over {MAX_SEGMENT_BYTES}")));
    }
    let bytes = Vec::from(
        reader
            .source()
            .read_range(&reader.paths().data, start..last.jpeg_end())?,
    );
    let seg = SegmentRec {
        offset: start,
        len: len as u32, // at most MAX_SEGMENT_BYTES
        crc: crc32fast::hash(&bytes),
        first_frame: u32::try_from(first).map_err(|_| fail("too many frames".to_owned()))?,
        frame_count: n as u16, // at most MAX_SEGMENT_FRAMES
        flags: FLAG_KEYFRAME,  // probe_segment checks the key frame
        pad: last.pad,
    };
    Ok((seg, bytes))
}
