//! A walk over the OBUs ("open bitstream units") of an AV1 segment in the low-overhead
//! format (AV1 spec §5.2: every OBU carries its size), done before the decoder sees the bytes.
//! It bounds the decoder's work (frame headers, each of which can make it reconstruct a whole
//! frame, are counted) and checks that the segment starts as a segment must: a sequence header,
//! then a key frame that is decoded, not a repeat of an earlier one.

/// OBU types (AV1 spec §6.2.2); `refs` reads the same stream.
pub(super) const OBU_SEQUENCE_HEADER: u8 = 1;
pub(super) const OBU_TEMPORAL_DELIMITER: u8 = 2;
pub(super) const OBU_FRAME_HEADER: u8 = 3;
pub(super) const OBU_TILE_GROUP: u8 = 4;
pub(super) const OBU_METADATA: u8 = 5;
pub(super) const OBU_FRAME: u8 = 6;
pub(super) const OBU_REDUNDANT_FRAME_HEADER: u8 = 7;
pub(super) const OBU_PADDING: u8 = 15;

/// What the walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Where each temporal unit starts (its temporal delimiter's byte offset), in order.
    pub temporal_units: Vec<usize>,
    /// Frame headers (`OBU_FRAME` and `OBU_FRAME_HEADER`): frames decoded or shown again.
    pub frame_headers: usize,
    /// `seq_profile` of the first sequence header (0 = main: 8/10-bit 4:2:0).
    pub profile: u8,
}

/// Reads a `leb128()` (AV1 spec §4.10.5): at most 8 bytes, value below 2^32.
pub(super) fn leb128(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for i in 0..8 {
        let byte = *b
            .get(*at)
            .ok_or_else(|| format!("OBU size cut short at byte {}", *at))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return if value <= u64::from(u32::MAX) {
                Ok(value)
            } else {
                Err(format!("OBU size {value} over 2^32 - 1"))
            };
        }
    }
    Err(format!("OBU size longer than 8 bytes at byte {}", *at))
}

/// Walks every OBU of `data`. Errors name the byte offset; the stream is refused when it is
/// not a low-overhead AV1 stream, when an OBU overruns it, when its first frame header comes
/// before a sequence header or is not a new key frame, or when it has no frame at all.
pub fn walk(data: &[u8]) -> Result<Summary, String> {
    let mut at = 0usize;
    let mut profile = None;
    let mut frame_headers = 0usize;
    let mut temporal_units = Vec::new();
    while at < data.len() {
        let start = at;
        let header = data[at];
        at += 1;
        if header & 0x80 != 0 {
            return Err(format!(
                "not an AV1 OBU at byte {start} (forbidden bit set)"
            ));
        }
        let kind = (header >> 3) & 0x0f;
        let extension = header & 0x04 != 0;
        if header & 0x02 == 0 {
            return Err(format!(
                "AV1 OBU at byte {start} has no size field (only the low-overhead format with \
                 sizes is stored)"
            ));
        }
        if extension {
            at += 1;
        }
        let size = leb128(data, &mut at)?;
        let end = usize::try_from(size)
            .ok()
            .and_then(|s| at.checked_add(s))
            .filter(|&e| e <= data.len())
            .ok_or_else(|| {
                format!(
                    "AV1 OBU at byte {start} declares {size} bytes, past the end of the {}-byte \
                     segment",
                    data.len()
                )
            })?;
        let payload = &data[at.min(end)..end];
        match kind {
            OBU_SEQUENCE_HEADER => {
                let first = *payload
                    .first()
                    .ok_or_else(|| format!("empty sequence header at byte {start}"))?;
                // seq_profile (3 bits), still_picture (1), reduced_still_picture_header (1).
                if first & 0x08 != 0 {
                    return Err(format!(
                        "the sequence header at byte {start} is a reduced still-picture header, \
                         not a video's"
                    ));
                }
                profile.get_or_insert(first >> 5);
            }
            OBU_FRAME_HEADER | OBU_FRAME => {
                if frame_headers == 0 {
                    if profile.is_none() {
                        return Err(format!(
                            "the first frame (byte {start}) comes before any sequence header"
                        ));
                    }
                    // show_existing_frame (1 bit), frame_type (2 bits; 0 = KEY_FRAME).
                    let first = *payload
                        .first()
                        .ok_or_else(|| format!("empty frame header at byte {start}"))?;
                    if first & 0x80 != 0 || first & 0x60 != 0 {
                        return Err(format!(
                            "the segment does not start with a key frame (byte {start})"
                        ));
                    }
                }
                frame_headers += 1;
            }
            OBU_TEMPORAL_DELIMITER => temporal_units.push(start),
            OBU_TILE_GROUP | OBU_METADATA | OBU_REDUNDANT_FRAME_HEADER | OBU_PADDING => {}
            other => {
                return Err(format!(
                    "AV1 OBU of type {other} at byte {start} has no place in a stored segment"
                ))
            }
        }
        at = end;
    }
    match profile {
        Some(profile) if frame_headers > 0 => Ok(Summary {
            temporal_units,
            frame_headers,
            profile,
        }),
        _ => Err("the segment holds no AV1 frame".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obu(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![(kind << 3) | 0x02];
        let mut n = payload.len();
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                v.push(byte);
                break;
            }
            v.push(byte | 0x80);
        }
        v.extend_from_slice(payload);
        v
    }

    fn segment(frame_first_byte: u8) -> Vec<u8> {
        let mut s = obu(OBU_TEMPORAL_DELIMITER, &[]);
        s.extend(obu(OBU_SEQUENCE_HEADER, &[0x00, 0x00]));
        s.extend(obu(OBU_FRAME, &[frame_first_byte, 1, 2, 3]));
        s.extend(obu(OBU_TEMPORAL_DELIMITER, &[]));
        s.extend(obu(OBU_FRAME, &[0x20, 1]));
        s
    }

    #[test]
    fn counts_frames_of_a_well_formed_segment() {
        let s = walk(&segment(0x10)).unwrap();
        assert_eq!(s.frame_headers, 2);
        assert_eq!(s.profile, 0);
    }

    #[test]
    fn refuses_what_is_not_a_segment() {
        // Inter frame first, or a repeat of an earlier frame.
        assert!(walk(&segment(0x20)).unwrap_err().contains("key frame"));
        assert!(walk(&segment(0x80)).unwrap_err().contains("key frame"));
        // A JPEG, an empty buffer, an OBU that overruns, a frame before the sequence header.
        assert!(walk(&[0xFF, 0xD8, 0xFF, 0xE0]).is_err());
        assert!(walk(&[]).unwrap_err().contains("no AV1 frame"));
        let mut cut = segment(0x10);
        cut.truncate(cut.len() - 1);
        assert!(walk(&cut).unwrap_err().contains("past the end"));
        assert!(walk(&obu(OBU_FRAME, &[0x10]))
            .unwrap_err()
            .contains("before"));
        // No size field; reserved OBU types; an over-long size.
        assert!(walk(&[OBU_TEMPORAL_DELIMITER << 3]).is_err());
        assert!(walk(&obu(9, &[])).unwrap_err().contains("type 9"));
        assert!(walk(&[0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).is_err());
        assert!(walk(&[0x12, 0x80, 0x80, 0x80, 0x80, 0x10]).is_err());
    }
}
