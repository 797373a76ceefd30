//! The two tables index version 3 adds for videos stored as segments (docs/FORMAT.md §6.3):
//! one stream entry per such video (codec, colour signalling, size, where its segments are)
//! and one segment entry per segment (byte range, CRC, the frames it holds). Pure encoding,
//! decoding and the rules that hold between the tables and the frame table; `index` places
//! the tables in the file and checks their CRCs.

use super::bytes::{u16_at, u32_at, u64_at};
use super::frame::FrameRec;

pub const STREAM_ENTRY_LEN: usize = 32;
pub const SEGMENT_ENTRY_LEN: usize = 24;
/// Segments in one index: no more than frames (`index::MAX_FRAMES`).
pub const MAX_SEGMENTS: u64 = 1 << 28;
/// Segment flag bit 0: the segment starts with a key frame (readers refuse one without).
pub const FLAG_KEYFRAME: u8 = 1;
/// Chroma layout code of 4:2:0, the only one stored.
pub const CHROMA_420: u8 = 1;

/// Colour matrices as AV1 and ISO/IEC 23091-2 number them.
pub const MATRIX_BT709: u8 = 1;
pub const MATRIX_UNSPECIFIED: u8 = 2;
pub const MATRIX_BT470BG: u8 = 5;
pub const MATRIX_BT601: u8 = 6;

/// The largest segment decoded, in bytes. A 32-frame segment of 1080p AV1 at high quality is
/// a few MB; this bounds what one read can make the decoder copy and parse.
pub const MAX_SEGMENT_BYTES: usize = 64 << 20;

/// The most frames one segment may hold (the longest GOP written). Random access costs up to
/// a whole segment of decoding, so longer ones defeat the format's purpose.
pub const MAX_SEGMENT_FRAMES: usize = 1024;

/// The codec of a video's segments, as the index records it (`code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// AV1 (Main profile, 8-bit 4:2:0), low-overhead OBU stream with sizes (AV1 spec §5.2).
    Av1,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Av1 => "av1",
        }
    }

    /// The value stored in the index (docs/FORMAT.md §6).
    pub fn code(self) -> u8 {
        match self {
            Codec::Av1 => 1,
        }
    }

    pub fn from_code(code: u8) -> Option<Codec> {
        match code {
            1 => Some(Codec::Av1),
            _ => None,
        }
    }

    pub fn from_name(name: &str) -> Option<Codec> {
        match name {
            "av1" => Some(Codec::Av1),
            _ => None,
        }
    }
}

/// A video stored as segments: how to decode them and where they are in the segment table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRec {
    pub codec: u8,
    pub chroma: u8,
    pub depth: u8,
    pub matrix: u8,
    /// 0 = limited ("TV") range, 1 = full range.
    pub range: u8,
    pub width: u16,
    pub height: u16,
    pub segment_count: u32,
    pub segment_start: u64,
    /// The nominal frames per segment (every segment but the last has them, when the writer
    /// could).
    pub gop: u32,
}

/// One segment: the stream bytes `[offset, offset + len)` (then `pad` zero bytes) hold frames
/// `[first_frame, first_frame + frame_count)` of its video.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SegmentRec {
    pub offset: u64,
    pub len: u32,
    pub crc: u32,
    pub first_frame: u32,
    pub frame_count: u16,
    pub flags: u8,
    pub pad: u8,
}

impl SegmentRec {
    pub fn end(&self) -> u64 {
        self.offset + self.len as u64
    }
    pub fn frames(&self) -> std::ops::Range<usize> {
        let first = self.first_frame as usize;
        first..first + self.frame_count as usize
    }
    /// How errors and `gulpio check` name segment `number` of its video: by the frames it
    /// holds (a read of any of them needs the whole segment), then its number and bytes.
    pub fn named(&self, number: usize) -> String {
        let frames = self.frames();
        format!(
            "frames {}..{} (segment {number}, bytes {}..{})",
            frames.start,
            frames.end,
            self.offset,
            self.end()
        )
    }
    pub fn keyframe(&self) -> bool {
        self.flags & FLAG_KEYFRAME != 0
    }

    /// The frame table entries that tile this segment's record among its frames (§6.2): each
    /// frame but the last owns 4 bytes, the last the rest of the stream and the padding.
    /// `None` when the stream is too short to give every frame its 4 bytes and the last more.
    /// CRCs are of the tile bytes, which the caller supplies (`stream` is the segment's bytes).
    pub fn tiles(&self, width: u16, height: u16, stream: &[u8]) -> Option<Vec<FrameRec>> {
        let n = self.frame_count as usize;
        if n == 0 || stream.len() != self.len as usize || stream.len() <= 4 * (n - 1) {
            return None;
        }
        let tile = |i: usize, len: usize, pad: u8| FrameRec {
            offset: self.offset + 4 * i as u64,
            jpeg_len: len as u32,
            crc: crc32fast::hash(&stream[4 * i..4 * i + len]),
            width,
            height,
            channels: 3,
            pad,
        };
        let mut out: Vec<FrameRec> = (0..n - 1).map(|i| tile(i, 4, 0)).collect();
        out.push(tile(n - 1, stream.len() - 4 * (n - 1), self.pad));
        Some(out)
    }
}

pub fn encode_stream(s: &StreamRec, out: &mut Vec<u8>) {
    out.extend_from_slice(&[s.codec, s.chroma, s.depth, s.matrix, s.range, 0, 0, 0]);
    out.extend_from_slice(&s.width.to_le_bytes());
    out.extend_from_slice(&s.height.to_le_bytes());
    out.extend_from_slice(&s.segment_count.to_le_bytes());
    out.extend_from_slice(&s.segment_start.to_le_bytes());
    out.extend_from_slice(&s.gop.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
}

pub fn encode_segment(s: &SegmentRec, out: &mut Vec<u8>) {
    out.extend_from_slice(&s.offset.to_le_bytes());
    out.extend_from_slice(&s.len.to_le_bytes());
    out.extend_from_slice(&s.crc.to_le_bytes());
    out.extend_from_slice(&s.first_frame.to_le_bytes());
    out.extend_from_slice(&s.frame_count.to_le_bytes());
    out.push(s.flags);
    out.push(s.pad);
}

/// Stream entry `i` of a table; `table` must hold it (the caller checked the table's length).
pub fn stream_at(table: &[u8], i: usize) -> StreamRec {
    let b = &table[i * STREAM_ENTRY_LEN..(i + 1) * STREAM_ENTRY_LEN];
    StreamRec {
        codec: b[0],
        chroma: b[1],
        depth: b[2],
        matrix: b[3],
        range: b[4],
        width: u16_at(b, 8),
        height: u16_at(b, 10),
        segment_count: u32_at(b, 12),
        segment_start: u64_at(b, 16),
        gop: u32_at(b, 24),
    }
}

/// Whether stream entry `i`'s reserved bytes are zero.
pub fn stream_reserved_zero(table: &[u8], i: usize) -> bool {
    let b = &table[i * STREAM_ENTRY_LEN..(i + 1) * STREAM_ENTRY_LEN];
    b[5..8].iter().all(|&x| x == 0) && u32_at(b, 28) == 0
}

/// Segment entry `k` of a table; `table` must hold it.
pub fn segment_at(table: &[u8], k: usize) -> SegmentRec {
    let b = &table[k * SEGMENT_ENTRY_LEN..(k + 1) * SEGMENT_ENTRY_LEN];
    SegmentRec {
        offset: u64_at(b, 0),
        len: u32_at(b, 8),
        crc: u32_at(b, 12),
        first_frame: u32_at(b, 16),
        frame_count: u16_at(b, 20),
        flags: b[22],
        pad: b[23],
    }
}

/// The `.gmeta`'s `segments` object of a video with this stream entry and segments
/// (docs/FORMAT.md §6.2), as writers write it.
pub fn segments_meta(stream: &StreamRec, segments: &[SegmentRec]) -> Vec<u8> {
    let codec = Codec::from_code(stream.codec).map_or("unknown", Codec::name);
    super::gmeta::segments_json(
        codec,
        stream.width,
        stream.height,
        segments.iter().map(|g| g.frame_count as usize),
    )
}

/// How a `.gmeta` entry's `segments` object (`text`, its JSON; None when the entry has none)
/// contradicts the index's description of the same video (`indexed`: its stream entry and
/// segments, None for a video of JPEG frames), if it does: codec, width, height and each
/// segment's frame count must be the index's (§6.3, "Checks"). Formatting and unknown keys
/// do not count (another tool may have rewritten the file).
pub fn meta_contradicts(
    indexed: Option<(&StreamRec, &[SegmentRec])>,
    text: Option<&[u8]>,
) -> Option<String> {
    let (stream, segments, text) = match (indexed, text) {
        (None, None) => return None,
        (None, Some(_)) => {
            return Some("has a segments object, and the index stores it as JPEG frames".into())
        }
        (Some(_), None) => {
            return Some("has no segments object, and the index stores it as segments".into())
        }
        (Some((stream, segments)), Some(text)) => (stream, segments, text),
    };
    let meta = match super::gmeta::parse_segments_json(text) {
        Ok(m) => m,
        Err(m) => return Some(format!("has a segments object that does not parse ({m})")),
    };
    let codec = Codec::from_code(stream.codec).map_or("unknown", Codec::name);
    let counts: Vec<u64> = segments.iter().map(|g| g.frame_count as u64).collect();
    let mut differs = Vec::new();
    if meta.codec != codec {
        differs.push(format!("codec {:?} (the index: {codec:?})", meta.codec));
    }
    if (meta.width, meta.height) != (stream.width as u64, stream.height as u64) {
        differs.push(format!(
            "frames of {}x{} (the index: {}x{})",
            meta.width, meta.height, stream.width, stream.height
        ));
    }
    if meta.frames != counts {
        differs.push(format!(
            "segment frame counts {:?} (the index: {counts:?})",
            meta.frames
        ));
    }
    if differs.is_empty() {
        return None;
    }
    Some(format!("has a segments object with {}", differs.join(", ")))
}

/// The values a stream entry may hold, and its codec.
pub fn check_stream(s: &StreamRec) -> Result<Codec, String> {
    let codec = Codec::from_code(s.codec).ok_or_else(|| format!("unknown codec {}", s.codec))?;
    if s.chroma != CHROMA_420 || s.depth != 8 {
        return Err(format!(
            "chroma layout {} at {} bits (only 4:2:0 at 8 bits is stored)",
            s.chroma, s.depth
        ));
    }
    if ![
        MATRIX_BT709,
        MATRIX_UNSPECIFIED,
        MATRIX_BT470BG,
        MATRIX_BT601,
    ]
    .contains(&s.matrix)
    {
        return Err(format!("unknown colour matrix {}", s.matrix));
    }
    if s.range > 1 {
        return Err(format!("unknown colour range {}", s.range));
    }
    if s.width == 0 || s.height == 0 {
        return Err(format!("frames of {}x{}", s.width, s.height));
    }
    crate::pixels::check_frame_size(s.width as usize, s.height as usize)?;
    if s.gop == 0 || s.gop as usize > MAX_SEGMENT_FRAMES {
        return Err(format!("gop {} (1 to {MAX_SEGMENT_FRAMES})", s.gop));
    }
    Ok(codec)
}

/// The rules between a video's stream entry, its segments and its frame table entries
/// (§6.3, "Checks"): the segments tile the video's frames in order, each is a key-frame
/// segment within the size limits, and each one's record is exactly the union of its frames'
/// tiles. Frame entries carry the stream's size and 3 channels.
pub fn check_video_segments(
    stream: &StreamRec,
    segments: impl Iterator<Item = SegmentRec>,
    frames: &[FrameRec],
) -> Result<(), String> {
    check_stream(stream)?;
    let mut next = 0usize;
    for (k, s) in segments.enumerate() {
        let n = s.frame_count as usize;
        if s.first_frame as usize != next || n == 0 || n > MAX_SEGMENT_FRAMES {
            return Err(format!(
                "segment {k} holds frames {}..{} where frame {next} comes next",
                s.first_frame,
                s.first_frame as usize + n
            ));
        }
        if s.flags != FLAG_KEYFRAME {
            return Err(format!("segment {k} does not start with a key frame"));
        }
        if s.len as usize > MAX_SEGMENT_BYTES
            || s.pad > 3
            || !(s.len as u64 + s.pad as u64).is_multiple_of(4)
        {
            return Err(format!(
                "segment {k} is {} bytes with {} padding (at most {MAX_SEGMENT_BYTES}, records are \
                 4-byte multiples)",
                s.len, s.pad
            ));
        }
        let Some(tiles) = frames.get(next..next + n) else {
            return Err(format!("segment {k} holds frames past the video's end"));
        };
        let mut at = s.offset;
        for (i, f) in tiles.iter().enumerate() {
            let last = i + 1 == n;
            let ok = f.offset == at
                && f.width == stream.width
                && f.height == stream.height
                && f.channels == 3
                && if last {
                    f.pad == s.pad && f.jpeg_end() == s.end()
                } else {
                    f.jpeg_len == 4 && f.pad == 0
                };
            if !ok {
                return Err(format!("frame {} is not its tile of segment {k}", next + i));
            }
            at = f.record_end();
        }
        next += n;
    }
    if next != frames.len() {
        return Err(format!(
            "the segments hold {next} frames of a {}-frame video",
            frames.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> StreamRec {
        StreamRec {
            codec: 1,
            chroma: CHROMA_420,
            depth: 8,
            matrix: MATRIX_BT601,
            range: 0,
            width: 64,
            height: 48,
            segment_count: 2,
            segment_start: 0,
            gop: 3,
        }
    }

    fn segment(offset: u64, first: u32, n: u16, len: u32) -> (SegmentRec, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + offset as u32) as u8).collect();
        let seg = SegmentRec {
            offset,
            len,
            crc: crc32fast::hash(&bytes),
            first_frame: first,
            frame_count: n,
            flags: FLAG_KEYFRAME,
            pad: super::super::pad_for(len as u64),
        };
        (seg, bytes)
    }

    #[test]
    fn entries_round_trip() {
        let mut t = Vec::new();
        encode_stream(&stream(), &mut t);
        assert_eq!(t.len(), STREAM_ENTRY_LEN);
        assert_eq!(stream_at(&t, 0), stream());
        assert!(stream_reserved_zero(&t, 0));
        let (s, _) = segment(40, 3, 3, 21);
        let mut t = Vec::new();
        encode_segment(&s, &mut t);
        assert_eq!(t.len(), SEGMENT_ENTRY_LEN);
        assert_eq!(segment_at(&t, 0), s);
    }

    #[test]
    fn tiles_cover_the_record_and_pass_the_checks() {
        let (a, abytes) = segment(0, 0, 3, 21);
        let (b, bbytes) = segment(24, 3, 2, 9);
        let mut frames = a.tiles(64, 48, &abytes).unwrap();
        frames.extend(b.tiles(64, 48, &bbytes).unwrap());
        assert_eq!(frames.len(), 5);
        assert_eq!(frames[2].offset, 8);
        assert_eq!(frames[2].jpeg_len, 13);
        assert_eq!(frames[2].record_end(), 24);
        check_video_segments(&stream(), [a, b].into_iter(), &frames).unwrap();
        // Too short for its frames: 3 frames need more than 8 bytes.
        assert!(segment(0, 0, 3, 8).0.tiles(64, 48, &[0; 8]).is_none());
    }

    #[test]
    fn a_segments_object_is_judged_against_the_index() {
        let (a, _) = segment(0, 0, 3, 21);
        let (b, _) = segment(24, 3, 2, 9);
        let s = stream();
        let indexed = Some((&s, &[a, b][..]));
        let judge = |text: &str| meta_contradicts(indexed, Some(text.as_bytes()));
        let written = segments_meta(&s, &[a, b]);
        assert_eq!(meta_contradicts(indexed, Some(&written)), None);
        // Other formatting, key order and unknown keys are the same content.
        assert_eq!(
            judge(r#"{ "frames":[3,2],"height":48, "x": [1], "width":64,"codec":"av1"}"#),
            None
        );
        for (text, says) in [
            (
                r#"{"codec": "av3", "width": 64, "height": 48, "frames": [3, 2]}"#,
                "codec \"av3\"",
            ),
            (
                r#"{"codec": "av1", "width": 66, "height": 48, "frames": [3, 2]}"#,
                "66x48",
            ),
            (
                r#"{"codec": "av1", "width": 64, "height": 48, "frames": [2, 3]}"#,
                "[2, 3]",
            ),
            (
                r#"{"codec": "av1", "width": 64, "height": 48, "frames": [3, 2, 0]}"#,
                "[3, 2, 0]",
            ),
            (
                r#"{"codec": "av1", "width": 64, "height": 48, "fsames": [3, 2]}"#,
                "parse",
            ),
            (r#"[3, 2]"#, "parse"),
        ] {
            let got = judge(text).unwrap_or_default();
            assert!(got.contains(says), "{text}: {got}");
        }
        assert!(meta_contradicts(indexed, None).is_some());
        assert!(meta_contradicts(None, Some(&written)).is_some());
        assert_eq!(meta_contradicts(None, None), None);
    }

    #[test]
    fn broken_tilings_are_refused() {
        let (a, abytes) = segment(0, 0, 3, 21);
        let frames = a.tiles(64, 48, &abytes).unwrap();
        let check =
            |s: SegmentRec, f: &[FrameRec]| check_video_segments(&stream(), [s].into_iter(), f);
        assert!(check(a, &frames).is_ok());
        assert!(check(SegmentRec { flags: 0, ..a }, &frames).is_err());
        assert!(check(
            SegmentRec {
                first_frame: 1,
                ..a
            },
            &frames
        )
        .is_err());
        assert!(check(
            SegmentRec {
                frame_count: 2,
                ..a
            },
            &frames
        )
        .is_err());
        assert!(check(SegmentRec { len: 20, ..a }, &frames).is_err());
        assert!(check(a, &frames[..2]).is_err());
        let mut moved = frames.clone();
        moved[1].offset += 4;
        assert!(check(a, &moved).is_err());
        let mut resized = frames.clone();
        resized[0].width = 65;
        assert!(check(a, &resized).is_err());
        for bad in [
            StreamRec {
                codec: 9,
                ..stream()
            },
            StreamRec {
                depth: 10,
                ..stream()
            },
            StreamRec {
                matrix: 3,
                ..stream()
            },
            StreamRec {
                range: 2,
                ..stream()
            },
            StreamRec {
                width: 0,
                ..stream()
            },
            StreamRec { gop: 0, ..stream() },
        ] {
            assert!(check_video_segments(&bad, [a].into_iter(), &frames).is_err());
        }
    }
}
