//! Which temporal units of a segment no other frame needs, so that a read can leave them out
//! when it does not return their frame (docs/DECISIONS.md, "Video segments": skipping frames
//! nothing refers to).
//!
//! A frame that is shown and refreshes no reference slot (`refresh_frame_flags` = 0) changes
//! nothing a later frame decodes from: AV1 keeps all state that crosses frames (pictures,
//! motion vectors, CDFs, segmentation and loop-filter parameters, film grain) in the slots a
//! frame refreshes (AV1 spec §7.20). SVT-AV1's hierarchical GOPs make a quarter of a segment's
//! coded frames such leaves. Left out, they cost neither entropy decoding nor reconstruction.
//!
//! The rule is applied only where it is certain: a unit qualifies when it holds exactly one
//! frame, coded in it (an `OBU_FRAME`, or an `OBU_FRAME_HEADER` with its tile groups), shown
//! at once, not a key or switch frame, with `refresh_frame_flags` read as 0, and no sequence
//! header. Anything this parser does not follow (a second, different sequence header; a header
//! cut short) leaves every unit in: the decode is then exactly what it was without this.
//!
//! Why here and not in a crate: neither decoder exposes its frame-header parser (libdav1d's C
//! API decodes; rav1d's parser is internal to it), and the part needed is the first ~40 bits of
//! the uncompressed header, read as AV1 spec §5.5 and §5.9.2 define them.

use super::obu::{
    leb128, OBU_FRAME, OBU_FRAME_HEADER, OBU_METADATA, OBU_PADDING, OBU_REDUNDANT_FRAME_HEADER,
    OBU_SEQUENCE_HEADER, OBU_TEMPORAL_DELIMITER, OBU_TILE_GROUP,
};

/// Frame types (AV1 spec §6.8.2).
const KEY_FRAME: u32 = 0;
const INTRA_ONLY_FRAME: u32 = 2;
const SWITCH_FRAME: u32 = 3;

/// `seq_force_screen_content_tools` / `seq_force_integer_mv`: the frame header chooses.
const SELECT: u32 = 2;

/// Reads bits most significant first (AV1 spec §4.10.2 `f(n)`); `None` past the end.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8]) -> Self {
        Bits { data, pos: 0 }
    }

    fn f(&mut self, n: u32) -> Option<u32> {
        let mut v = 0u32;
        for _ in 0..n {
            let byte = *self.data.get(self.pos / 8)?;
            let bit = (byte >> (7 - (self.pos % 8))) & 1;
            v = (v << 1) | u32::from(bit);
            self.pos += 1;
        }
        Some(v)
    }

    fn flag(&mut self) -> Option<bool> {
        self.f(1).map(|b| b == 1)
    }

    /// `uvlc()` (AV1 spec §4.10.3).
    fn uvlc(&mut self) -> Option<u32> {
        let mut zeros = 0u32;
        while !self.flag()? {
            zeros += 1;
            if zeros >= 32 {
                return None;
            }
        }
        self.f(zeros)
    }
}

/// The sequence header fields a frame header's first bits depend on (AV1 spec §5.5).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sequence {
    decoder_model_info_present: bool,
    equal_picture_interval: bool,
    buffer_removal_time_length: u32,
    frame_presentation_time_length: u32,
    /// Per operating point: its `operating_point_idc` when a decoder model is present for it.
    decoder_model_ops: Vec<Option<u32>>,
    frame_id_length: Option<u32>,
    force_screen_content_tools: u32,
    force_integer_mv: u32,
    order_hint_bits: u32,
}

fn sequence_header(payload: &[u8]) -> Option<Sequence> {
    let mut b = Bits::new(payload);
    let _profile = b.f(3)?;
    let _still_picture = b.f(1)?;
    if b.flag()? {
        return None; // reduced still-picture header: not a video's (obu::walk refuses it too)
    }
    let mut seq = Sequence {
        decoder_model_info_present: false,
        equal_picture_interval: false,
        buffer_removal_time_length: 0,
        frame_presentation_time_length: 0,
        decoder_model_ops: Vec::new(),
        frame_id_length: None,
        force_screen_content_tools: SELECT,
        force_integer_mv: SELECT,
        order_hint_bits: 0,
    };
    let mut buffer_delay_length = 0;
    if b.flag()? {
        // timing_info()
        b.f(32)?;
        b.f(32)?;
        seq.equal_picture_interval = b.flag()?;
        if seq.equal_picture_interval {
            b.uvlc()?;
        }
        seq.decoder_model_info_present = b.flag()?;
        if seq.decoder_model_info_present {
            buffer_delay_length = b.f(5)? + 1;
            b.f(32)?;
            seq.buffer_removal_time_length = b.f(5)? + 1;
            seq.frame_presentation_time_length = b.f(5)? + 1;
        }
    }
    let initial_display_delay_present = b.flag()?;
    let operating_points = b.f(5)? + 1;
    for _ in 0..operating_points {
        let idc = b.f(12)?;
        let level = b.f(5)?;
        if level > 7 {
            b.f(1)?;
        }
        let mut model = None;
        if seq.decoder_model_info_present && b.flag()? {
            b.f(buffer_delay_length)?;
            b.f(buffer_delay_length)?;
            b.f(1)?;
            model = Some(idc);
        }
        seq.decoder_model_ops.push(model);
        if initial_display_delay_present && b.flag()? {
            b.f(4)?;
        }
    }
    let width_bits = b.f(4)? + 1;
    let height_bits = b.f(4)? + 1;
    b.f(width_bits)?;
    b.f(height_bits)?;
    if b.flag()? {
        let delta = b.f(4)? + 2;
        let additional = b.f(3)? + 1;
        seq.frame_id_length = Some(delta + additional);
    }
    b.f(3)?; // use_128x128_superblock, enable_filter_intra, enable_intra_edge
    b.f(4)?; // interintra, masked compound, warped motion, dual filter
    let order_hint = b.flag()?;
    if order_hint {
        b.f(2)?; // enable_jnt_comp, enable_ref_frame_mvs
    }
    seq.force_screen_content_tools = if b.flag()? { SELECT } else { b.f(1)? };
    seq.force_integer_mv = if seq.force_screen_content_tools > 0 {
        if b.flag()? {
            SELECT
        } else {
            b.f(1)?
        }
    } else {
        SELECT
    };
    if order_hint {
        seq.order_hint_bits = b.f(3)? + 1;
    }
    Some(seq)
}

/// Whether a frame header (the start of an `OBU_FRAME` or `OBU_FRAME_HEADER` payload) is of a
/// frame shown at once that refreshes no reference slot (AV1 spec §5.9.2, up to
/// `refresh_frame_flags`). `None` when the header is cut short.
fn shown_leaf(seq: &Sequence, header: &[u8], temporal_id: u32, spatial_id: u32) -> Option<bool> {
    let mut b = Bits::new(header);
    if b.flag()? {
        return Some(false); // show_existing_frame: may show a key frame, which refreshes all
    }
    let frame_type = b.f(2)?;
    if !b.flag()? {
        return Some(false); // not shown now: shown later from its slot
    }
    if seq.decoder_model_info_present && !seq.equal_picture_interval {
        b.f(seq.frame_presentation_time_length)?; // temporal_point_info()
    }
    if frame_type == SWITCH_FRAME || frame_type == KEY_FRAME {
        return Some(false); // refreshes every slot
    }
    let error_resilient = b.flag()?;
    b.f(1)?; // disable_cdf_update
    let screen_content = if seq.force_screen_content_tools == SELECT {
        b.f(1)?
    } else {
        seq.force_screen_content_tools
    };
    if screen_content > 0 && seq.force_integer_mv == SELECT {
        b.f(1)?; // force_integer_mv
    }
    if let Some(n) = seq.frame_id_length {
        b.f(n)?; // current_frame_id
    }
    b.f(1)?; // frame_size_override_flag
    b.f(seq.order_hint_bits)?;
    if frame_type != INTRA_ONLY_FRAME && !error_resilient {
        b.f(3)?; // primary_ref_frame
    }
    if seq.decoder_model_info_present && b.flag()? {
        for idc in seq.decoder_model_ops.iter().flatten() {
            let in_temporal = (idc >> temporal_id) & 1 == 1;
            let in_spatial = (idc >> (spatial_id + 8)) & 1 == 1;
            if *idc == 0 || (in_temporal && in_spatial) {
                b.f(seq.buffer_removal_time_length)?;
            }
        }
    }
    Some(b.f(8)? == 0)
}

/// One OBU: its type, temporal and spatial ids and payload. `None` for what `obu::walk` would
/// have refused (it has run on the same bytes before this).
fn obus(data: &[u8]) -> impl Iterator<Item = Option<(u8, u32, u32, &[u8])>> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        if at >= data.len() {
            return None;
        }
        let header = data[at];
        at += 1;
        let kind = (header >> 3) & 0x0f;
        let (mut temporal_id, mut spatial_id) = (0, 0);
        if header & 0x04 != 0 {
            let Some(&ext) = data.get(at) else {
                at = data.len();
                return Some(None);
            };
            temporal_id = u32::from(ext >> 5);
            spatial_id = u32::from((ext >> 3) & 0x03);
            at += 1;
        }
        let Some(size) = leb128(data, &mut at)
            .ok()
            .and_then(|v| usize::try_from(v).ok())
        else {
            at = data.len();
            return Some(None);
        };
        let Some(end) = at.checked_add(size).filter(|&e| e <= data.len()) else {
            at = data.len();
            return Some(None);
        };
        let payload = &data[at..end];
        at = end;
        Some(Some((kind, temporal_id, spatial_id, payload)))
    })
}

/// The units of `data` (starting at the byte offsets `units`, one per frame) that may be left
/// out of a decode whose results are only the frames `wanted` (increasing): units before the
/// last wanted frame's whose frame is not wanted and is a shown leaf (module docs). Empty when
/// the segment has anything this parser does not follow.
pub fn skippable(data: &[u8], units: &[usize], wanted: &[usize]) -> Vec<usize> {
    let Some(&last) = wanted.last() else {
        return Vec::new();
    };
    if wanted.len() > last {
        return Vec::new(); // every frame up to the last is wanted (`wanted` is increasing)
    }
    let mut seq: Option<Sequence> = None;
    let mut skip = Vec::new();
    let mut next_wanted = 0usize;
    for (i, &start) in units.iter().enumerate().take(last) {
        let end = units.get(i + 1).copied().unwrap_or(data.len());
        let Some(unit) = data.get(start..end) else {
            return Vec::new();
        };
        let mut frames = 0usize;
        let mut leaf = false;
        let mut has_sequence_header = false;
        for obu in obus(unit) {
            let Some((kind, temporal_id, spatial_id, payload)) = obu else {
                return Vec::new();
            };
            match kind {
                OBU_SEQUENCE_HEADER => {
                    let Some(parsed) = sequence_header(payload) else {
                        return Vec::new();
                    };
                    match &seq {
                        Some(known) if *known != parsed => return Vec::new(),
                        _ => seq = Some(parsed),
                    }
                    has_sequence_header = true;
                }
                OBU_FRAME | OBU_FRAME_HEADER => {
                    let Some(known) = &seq else {
                        return Vec::new();
                    };
                    let Some(is_leaf) = shown_leaf(known, payload, temporal_id, spatial_id) else {
                        return Vec::new();
                    };
                    frames += 1;
                    leaf = is_leaf;
                }
                OBU_TEMPORAL_DELIMITER
                | OBU_TILE_GROUP
                | OBU_METADATA
                | OBU_REDUNDANT_FRAME_HEADER
                | OBU_PADDING => {}
                _ => return Vec::new(),
            }
        }
        while wanted.get(next_wanted).is_some_and(|&w| w < i) {
            next_wanted += 1;
        }
        let is_wanted = wanted.get(next_wanted) == Some(&i);
        if !is_wanted && frames == 1 && leaf && !has_sequence_header {
            skip.push(i);
        }
    }
    skip
}
