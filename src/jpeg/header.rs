//! Reads a JPEG's frame header (SOF) without decoding: size, components, coding process.
//! The writer records this in the index, and refuses bytes that are not a JPEG at all.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegInfo {
    pub width: u16,
    pub height: u16,
    pub components: u8,
    pub precision: u8,
    /// The SOF marker's low byte: 0xC0 baseline, 0xC1 extended, 0xC2 progressive,
    /// 0xC9..0xCB arithmetic coding, ...
    pub sof: u8,
}

impl JpegInfo {
    pub fn is_arithmetic(&self) -> bool {
        self.sof >= 0xC9
    }
    pub fn is_lossless(&self) -> bool {
        matches!(self.sof, 0xC3 | 0xC7 | 0xCB | 0xCF)
    }
}

pub fn read_info(b: &[u8]) -> Result<JpegInfo, String> {
    if b.len() < 4 || b[0] != 0xFF || b[1] != 0xD8 {
        return Err("not a JPEG (no SOI marker)".into());
    }
    let mut pos = 2;
    loop {
        // Markers may be preceded by any number of 0xFF fill bytes.
        while pos < b.len() && b[pos] != 0xFF {
            pos += 1;
        }
        while pos < b.len() && b[pos] == 0xFF {
            pos += 1;
        }
        let Some(&marker) = b.get(pos) else {
            return Err("no frame header (SOF) before the end of the data".into());
        };
        pos += 1;
        match marker {
            0x01 | 0xD0..=0xD8 => continue,
            0xD9 | 0xDA => return Err("no frame header (SOF) before the scan data".into()),
            _ => {}
        }
        let len = match b.get(pos..pos + 2) {
            Some(l) => u16::from_be_bytes([l[0], l[1]]) as usize,
            None => return Err("truncated marker segment".into()),
        };
        if len < 2 {
            return Err(format!("marker 0xFF{marker:02X} has invalid length {len}"));
        }
        let seg = b
            .get(pos + 2..pos + len)
            .ok_or_else(|| format!("marker 0xFF{marker:02X} segment is truncated"))?;
        if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            if seg.len() < 6 {
                return Err("frame header (SOF) is truncated".into());
            }
            let info = JpegInfo {
                precision: seg[0],
                height: u16::from_be_bytes([seg[1], seg[2]]),
                width: u16::from_be_bytes([seg[3], seg[4]]),
                components: seg[5],
                sof: marker,
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
            return Ok(info);
        }
        pos += len;
    }
}

/// The first "Adobe" APP14 segment before the scan: `(position of its marker byte, segment
/// length)`. It says how CMYK is stored (inverted, as Adobe writes it) and whether the
/// colour transform is YCCK.
pub fn adobe_segment(b: &[u8]) -> Option<(usize, usize)> {
    let mut pos = 2;
    while pos + 4 <= b.len() && b[pos] == 0xFF {
        let marker = b[pos + 1];
        if marker == 0xDA || marker == 0xD9 {
            return None;
        }
        let len = u16::from_be_bytes([b[pos + 2], b[pos + 3]]) as usize;
        if marker == 0xEE && b.get(pos + 4..pos + 9) == Some(b"Adobe") {
            return Some((pos + 1, len));
        }
        pos += 2 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sof_after_app_segments() {
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0xAA, 0xBB, 0xFF, 0xC2, 0x00, 0x0B, 0x08, 0x00,
            0x10, 0x00, 0x20, 0x03, 0, 0, 0, 0, 0, 0xFF, 0xD9,
        ];
        let info = read_info(&jpeg).unwrap();
        assert_eq!((info.width, info.height, info.components), (32, 16, 3));
        assert_eq!(info.sof, 0xC2);
        assert!(read_info(&jpeg[..12]).is_err());
        assert!(read_info(b"\x89PNG....").is_err());
        assert!(read_info(&[]).is_err());
    }
}
