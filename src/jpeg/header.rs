//! Reads a JPEG's frame header (SOF) without decoding: size, components, coding process.
//! The writer records this in the index, and refuses bytes that are not a JPEG at all.
//!
//! Every look at the markers before the scan goes through [`segments`], so all of them skip
//! stray bytes and `0xFF` fill bytes the way libjpeg does (it warns and resynchronises on the
//! next marker) and so agree on where each segment is.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegInfo {
    pub width: u16,
    pub height: u16,
    pub components: u8,
    pub precision: u8,
    /// The SOF marker's low byte: 0xC0 baseline, 0xC1 extended, 0xC2 progressive,
    /// 0xC9..0xCB arithmetic coding, ...
    pub sof: u8,
    /// The largest horizontal and vertical sampling factors of the components (2 and 2 for
    /// 4:2:0): an MCU of an interleaved scan is `8 * h_max` x `8 * v_max` pixels.
    pub h_max: u8,
    pub v_max: u8,
}

impl JpegInfo {
    pub fn is_arithmetic(&self) -> bool {
        self.sof >= 0xC9
    }
    pub fn is_lossless(&self) -> bool {
        matches!(self.sof, 0xC3 | 0xC7 | 0xCB | 0xCF)
    }
    pub fn is_progressive(&self) -> bool {
        matches!(self.sof, 0xC2 | 0xC6 | 0xCA | 0xCE)
    }
    /// `(width, height)` of an MCU in pixels: one 8x8 block for a single component (its scan
    /// is not interleaved), else the largest sampling factors' worth of blocks.
    pub fn mcu_size(&self) -> (usize, usize) {
        if self.components == 1 {
            (8, 8)
        } else {
            (8 * self.h_max as usize, 8 * self.v_max as usize)
        }
    }
}

/// One marker found before the scan data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    pub marker: u8,
    /// Position of the marker byte (the one after the `0xFF`s).
    pub at: usize,
    /// The segment's length field (it counts itself); 0 for SOS and EOI, whose segments the
    /// walk does not read.
    pub len: usize,
    /// The bytes after the length field.
    pub body: &'a [u8],
}

/// The marker segments of a JPEG in order, up to and including the first SOS or EOI (which
/// ends the walk). Standalone markers (TEM, RSTn, a repeated SOI) are skipped. An `Err` item
/// (truncated or impossible segment) is the last; the walk also ends at the end of the data.
pub fn segments(b: &[u8]) -> Result<Segments<'_>, String> {
    if b.len() < 4 || b[0] != 0xFF || b[1] != 0xD8 {
        return Err("not a JPEG (no SOI marker)".into());
    }
    Ok(Segments {
        b,
        pos: 2,
        done: false,
    })
}

pub struct Segments<'a> {
    b: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Iterator for Segments<'a> {
    type Item = Result<Segment<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let b = self.b;
        let marker = loop {
            // Markers may be preceded by stray bytes and any number of 0xFF fill bytes.
            while self.pos < b.len() && b[self.pos] != 0xFF {
                self.pos += 1;
            }
            while self.pos < b.len() && b[self.pos] == 0xFF {
                self.pos += 1;
            }
            let Some(&marker) = b.get(self.pos) else {
                self.done = true;
                return None;
            };
            self.pos += 1;
            if !matches!(marker, 0x01 | 0xD0..=0xD8) {
                break marker;
            }
        };
        let at = self.pos - 1;
        if matches!(marker, 0xD9 | 0xDA) {
            self.done = true;
            return Some(Ok(Segment {
                marker,
                at,
                len: 0,
                body: &[],
            }));
        }
        let item = match b.get(self.pos..self.pos + 2) {
            None => Err("truncated marker segment".to_string()),
            Some(l) => match u16::from_be_bytes([l[0], l[1]]) as usize {
                len if len < 2 => Err(format!("marker 0xFF{marker:02X} has invalid length {len}")),
                len => match b.get(self.pos + 2..self.pos + len) {
                    None => Err(format!("marker 0xFF{marker:02X} segment is truncated")),
                    Some(body) => {
                        self.pos += len;
                        Ok(Segment {
                            marker,
                            at,
                            len,
                            body,
                        })
                    }
                },
            },
        };
        self.done |= item.is_err();
        Some(item)
    }
}

/// The JPEG without stray bytes between its header segments (before the first scan), or None
/// when there are none. Such bytes are harmless: every decoder skips them to the next marker
/// (Pillow and zune-jpeg silently, libjpeg with an "extraneous bytes" warning that cannot be
/// told from the same warning about a damaged scan). Removing them first lets the libjpeg-turbo
/// build treat every remaining warning as damage and agree with the zune-jpeg build.
/// `0xFF` fill bytes before a marker are legal and kept out of the count.
pub fn without_header_junk(b: &[u8]) -> Option<Vec<u8>> {
    let mut end = 2; // where the previous segment ended (after SOI)
    let mut junk = false;
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for seg in segments(b).ok()? {
        let seg = seg.ok()?;
        // The marker's 0xFF is at `seg.at - 1`; anything before it but fill bytes is junk.
        let start = seg.at - 1;
        junk |= b[end..start].iter().any(|&x| x != 0xFF);
        if seg.marker == 0xDA || seg.marker == 0xD9 {
            kept.push((start, b.len()));
            break;
        }
        end = seg.at + 1 + seg.len;
        kept.push((start, end));
    }
    if !junk {
        return None;
    }
    let mut out = Vec::with_capacity(b.len());
    out.extend_from_slice(&b[..2]);
    for (s, e) in kept {
        out.extend_from_slice(&b[s..e]);
    }
    Some(out)
}

/// Start-of-frame markers: 0xC0..=0xCF except DHT (C4), JPG (C8) and DAC (CC).
fn is_sof(marker: u8) -> bool {
    (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC)
}

pub fn read_info(b: &[u8]) -> Result<JpegInfo, String> {
    for seg in segments(b)? {
        let seg = seg?;
        match seg.marker {
            0xD9 | 0xDA => return Err("no frame header (SOF) before the scan data".into()),
            m if is_sof(m) => return frame_header(m, seg.body),
            _ => {}
        }
    }
    Err("no frame header (SOF) before the end of the data".into())
}

fn frame_header(sof: u8, seg: &[u8]) -> Result<JpegInfo, String> {
    if seg.len() < 6 {
        return Err("frame header (SOF) is truncated".into());
    }
    // Each component: id, sampling factors (H << 4 | V), quantisation table. A truncated
    // list leaves the factors at 1 (libjpeg refuses such a header when decoding anyway).
    let (mut h_max, mut v_max) = (1u8, 1u8);
    for c in seg[6..].chunks_exact(3).take(seg[5] as usize) {
        h_max = h_max.max(c[1] >> 4);
        v_max = v_max.max(c[1] & 0x0F);
    }
    let info = JpegInfo {
        precision: seg[0],
        height: u16::from_be_bytes([seg[1], seg[2]]),
        width: u16::from_be_bytes([seg[3], seg[4]]),
        components: seg[5],
        sof,
        h_max: h_max.clamp(1, 4),
        v_max: v_max.clamp(1, 4),
    };
    if info.width == 0 || info.height == 0 {
        return Err(format!(
            "frame header declares a {}x{} image",
            info.width, info.height
        ));
    }
    if !matches!(info.components, 1 | 3 | 4) {
        return Err(format!(
            "frame header declares {} components (1, 3 or 4 supported)",
            info.components
        ));
    }
    Ok(info)
}

/// The first "Adobe" APP14 segment before the scan: `(position of its marker byte, segment
/// length)`. It says how CMYK is stored (inverted, as Adobe writes it) and whether the
/// colour transform is YCCK.
pub fn adobe_segment(b: &[u8]) -> Option<(usize, usize)> {
    segments(b)
        .ok()?
        .map_while(Result::ok)
        .find(|s| s.marker == 0xEE && s.body.starts_with(b"Adobe"))
        .map(|s| (s.at, s.len))
}

#[cfg(test)]
mod tests {
    use super::*;

    const JPEG: [u8; 25] = [
        0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0xAA, 0xBB, 0xFF, 0xC2, 0x00, 0x0D, 0x08, 0x00, 0x10,
        0x00, 0x20, 0x03, 0, 0, 0, 0, 0, 0xFF, 0xD9,
    ];

    #[test]
    fn finds_sof_after_app_segments() {
        let info = read_info(&JPEG).unwrap();
        assert_eq!((info.width, info.height, info.components), (32, 16, 3));
        assert_eq!(info.sof, 0xC2);
        assert!(info.is_progressive() && !info.is_arithmetic() && !info.is_lossless());
        assert!(read_info(&JPEG[..12]).is_err());
        assert!(read_info(b"\x89PNG....").is_err());
        assert!(read_info(&[]).is_err());
    }

    #[test]
    fn header_junk_is_removed_and_nothing_else() {
        assert_eq!(without_header_junk(&JPEG), None);
        // Fill bytes before a marker are legal: not junk.
        let mut filled = JPEG.to_vec();
        filled.splice(8..8, [0xFF, 0xFF]);
        assert_eq!(without_header_junk(&filled), None);
        // Stray bytes after the APP0 segment and right after SOI.
        let mut junk = JPEG.to_vec();
        junk.splice(8..8, [0x00, 0x12, 0x34]);
        junk.splice(2..2, [0x55]);
        assert_eq!(without_header_junk(&junk).as_deref(), Some(&JPEG[..]));
        // Bytes after the scan starts are the scan's: kept as they are.
        let mut sos = vec![0xFF, 0xD8, 0x07, 0xFF, 0xDA, 0x00, 0x13, 0x99];
        let clean = without_header_junk(&sos).unwrap();
        assert_eq!(clean, [0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x13, 0x99]);
        sos.remove(2);
        assert_eq!(without_header_junk(&sos), None);
        assert_eq!(without_header_junk(b"not a jpeg"), None);
    }

    #[test]
    fn fill_and_stray_bytes_are_skipped_by_every_reader() {
        // APP14 "Adobe" (short: 7 data bytes) after fill bytes and a stray byte, then the SOF.
        let mut b = vec![0xFF, 0xD8, 0x00, 0xFF, 0xFF, 0xFF, 0xEE, 0x00, 0x09];
        b.extend_from_slice(b"Adobe\x00\x64");
        let adobe_at = 6;
        b.extend_from_slice(&JPEG[8..]);
        assert_eq!(read_info(&b).unwrap().width, 32);
        assert_eq!(adobe_segment(&b), Some((adobe_at, 9)));
        let markers: Vec<u8> = segments(&b).unwrap().map(|s| s.unwrap().marker).collect();
        assert_eq!(markers, [0xEE, 0xC2, 0xD9]);
        // No Adobe segment, or only after the scan started.
        assert_eq!(adobe_segment(&JPEG), None);
    }

    #[test]
    fn truncated_segment_ends_the_walk_with_an_error() {
        let b = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x01];
        let items: Vec<_> = segments(&b).unwrap().collect();
        assert_eq!(items.len(), 1);
        assert!(items[0].is_err());
        let b = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01, 0xFF, 0xC0];
        assert!(read_info(&b).unwrap_err().contains("invalid length"));
    }
}
