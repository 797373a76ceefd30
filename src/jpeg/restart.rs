//! Restart markers as row boundaries: decoding only the rows a crop needs.
//!
//! A decoder must Huffman-decode every row above a crop, because each block's DC value is
//! coded as a difference from the previous block's. A restart marker (`RSTn`, every `Ri` MCUs
//! as the `DRI` segment says) resets those predictions, so the entropy-coded data between two
//! markers decodes on its own. When the interval is a whole number of MCU rows (frames
//! gulpio-rs encodes put one after every MCU row), the rows a crop needs are a run of
//! intervals, and a JPEG made of the original headers (with the frame height patched), just
//! those intervals (their markers renumbered from `RST0`) and an `EOI` decodes to exactly
//! those rows. Pixels near the cut differ (chroma upsampling and block smoothing look at the
//! neighbouring rows), so one MCU row of margin is kept on each side of the rows asked for:
//! inside them the pixels are those of the whole frame.
//!
//! The index stores each frame's marker positions ([`scan`] finds them when a chunk is
//! written), so a read needs no scan; a frame without them is decoded whole.

use std::ops::Range;

use super::header::{segments, JpegInfo};

/// What [`cut`] needs to know of a frame beside its marker positions: where the frame height
/// and the entropy-coded data are, and how many MCU rows each restart interval holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Position of the SOF segment's height field (2 bytes, big-endian).
    height_at: usize,
    /// First byte of the entropy-coded data (after the SOS segment).
    data_at: usize,
    /// MCU rows per restart interval.
    rows_per_interval: usize,
    /// MCU rows in the frame, and their height in pixels.
    mcu_rows: usize,
    mcu_height: usize,
    height: usize,
}

impl Layout {
    /// Restart intervals in the frame.
    pub fn intervals(&self) -> usize {
        self.mcu_rows.div_ceil(self.rows_per_interval)
    }
}

/// The layout of `jpeg` if its restart intervals are whole MCU rows: a sequential Huffman
/// JPEG (SOF0/SOF1) with one scan holding every component and a non-zero `DRI` that is a
/// multiple of the MCUs per row. None for anything else (progressive, arithmetic, several
/// scans, no restarts, intervals that end inside a row).
pub fn layout(jpeg: &[u8], info: &JpegInfo) -> Option<Layout> {
    if !matches!(info.sof, 0xC0 | 0xC1) {
        return None;
    }
    let (mut height_at, mut interval, mut sos) = (None, 0usize, None);
    for seg in segments(jpeg).ok()? {
        let seg = seg.ok()?;
        match seg.marker {
            0xC0 | 0xC1 => height_at = Some(seg.at + 4),
            0xDD if seg.body.len() >= 2 => {
                interval = u16::from_be_bytes([seg.body[0], seg.body[1]]) as usize
            }
            0xDA => {
                sos = Some(seg.at);
                break;
            }
            _ => {}
        }
    }
    let (height_at, sos) = (height_at?, sos?);
    // The SOS segment: its length, then the number of components in the scan.
    let sos_len = u16::from_be_bytes([*jpeg.get(sos + 1)?, *jpeg.get(sos + 2)?]) as usize;
    if *jpeg.get(sos + 3)? != info.components {
        return None;
    }
    let data_at = sos + 1 + sos_len;
    let (mcu_w, mcu_h) = info.mcu_size();
    let per_row = (info.width as usize).div_ceil(mcu_w);
    if interval == 0 || per_row == 0 || interval % per_row != 0 || data_at > jpeg.len() {
        return None;
    }
    Some(Layout {
        height_at,
        data_at,
        rows_per_interval: interval / per_row,
        mcu_rows: (info.height as usize).div_ceil(mcu_h),
        mcu_height: mcu_h,
        height: info.height as usize,
    })
}

/// Positions of the restart markers (of their `0xFF`) of `jpeg`, if its intervals are whole
/// MCU rows ([`layout`]) and the scan holds exactly the markers that implies, numbered in
/// order and followed by `EOI`; None otherwise (the frame is then always decoded whole).
pub fn scan(jpeg: &[u8], info: &JpegInfo) -> Option<Vec<u32>> {
    let layout = layout(jpeg, info)?;
    let expected = layout.intervals() - 1;
    let mut found = Vec::with_capacity(expected);
    let mut i = layout.data_at;
    loop {
        i += jpeg.get(i..)?.iter().position(|&b| b == 0xFF)?;
        // Fill bytes may repeat the 0xFF before a marker.
        let mut j = i + 1;
        while *jpeg.get(j)? == 0xFF {
            j += 1;
        }
        match jpeg[j] {
            0x00 => {} // a stuffed 0xFF data byte
            m @ 0xD0..=0xD7 => {
                if (m - 0xD0) as usize != found.len() % 8 || j != i + 1 {
                    return None;
                }
                found.push(u32::try_from(i).ok()?);
            }
            0xD9 => break,
            _ => return None, // another scan, DNL, ...: not a plain one-scan frame
        }
        i = j + 1;
    }
    (found.len() == expected && expected > 0).then_some(found)
}

/// The MCU rows a decode of pixel rows `rows` needs, for a frame with `info`'s sampling
/// decoded at `eighths / 8` scale. Beside the rows' own MCU rows: with chroma subsampled
/// vertically, libjpeg's "fancy" upsampling computes a row from the nearest two chroma rows,
/// so a row at an MCU row's edge also needs the neighbouring MCU row's chroma. The exception
/// is a DCT-scaled decode in which libjpeg makes chroma full-size in the IDCT instead (its
/// `jpeg_core_output_dimensions`: both factors 2 and the doubled scaled block at most 8
/// pixels), which leaves nothing to upsample. Exact, not a margin for safety: the tests
/// compare with whole-frame decodes at every scale and subsampling.
pub fn mcu_rows_for(info: &JpegInfo, rows: Range<usize>, eighths: usize) -> Range<usize> {
    let (_, mh) = info.mcu_size();
    let (start, end) = (rows.start, rows.end.max(rows.start + 1));
    let chroma_full_size = info.h_max == 2 && info.v_max == 2 && 2 * eighths <= 8;
    // Fancy upsampling exists for a vertical factor of 2 only (others replicate rows).
    if chroma_full_size || info.v_max != 2 || info.components == 1 {
        return start / mh..end.div_ceil(mh);
    }
    if eighths < 8 {
        // Upsampled at a reduced scale: the context is in scaled rows, whose parity does not
        // follow the full-size rows'; a whole MCU row each side always holds it.
        return (start / mh).saturating_sub(1)..end.div_ceil(mh) + 1;
    }
    // Luma row 2i is made from chroma rows i and i - 1, row 2i + 1 from i and i + 1.
    let first_chroma = if start % 2 == 0 {
        (start / 2).saturating_sub(1)
    } else {
        start / 2
    };
    let last = end - 1;
    let last_chroma = if last % 2 == 1 {
        last / 2 + 1
    } else {
        last / 2
    };
    let chroma_per_mcu = mh / 2;
    first_chroma / chroma_per_mcu..(last_chroma / chroma_per_mcu + 1)
}

/// Builds in `out` a JPEG of MCU rows `mcu_rows` of `jpeg` (rounded out to whole restart
/// intervals; [`mcu_rows_for`] says which a decode needs), from the frame's `layout` and
/// restart marker positions `markers`. Returns the first pixel row of the cut, or None when
/// the cut would be the whole frame or `markers` do not fit the frame (then decode it whole).
pub fn cut(
    jpeg: &[u8],
    layout: &Layout,
    markers: &[u32],
    mcu_rows: Range<usize>,
    out: &mut Vec<u8>,
) -> Option<usize> {
    let intervals = layout.intervals();
    let (first_mcu, end_mcu) = (mcu_rows.start, mcu_rows.end.min(layout.mcu_rows));
    if markers.len() + 1 != intervals || first_mcu >= end_mcu {
        return None;
    }
    let (mh, per) = (layout.mcu_height, layout.rows_per_interval);
    let (first, end) = (first_mcu / per, end_mcu.div_ceil(per));
    if first == 0 && end == intervals {
        return None;
    }
    // The index's positions must be this frame's markers: a table that does not fit (an
    // index written for other bytes) means decoding the whole frame, never a wrong cut.
    // Inside the scan, in order: there, `FF D0`..`FF D7` can only be restart markers (data
    // bytes `FF` are followed by `00`), so such a list is the frame's own.
    let is_marker = |&m: &u32| {
        let m = m as usize;
        m >= layout.data_at
            && jpeg.get(m) == Some(&0xFF)
            && jpeg.get(m + 1).is_some_and(|b| (0xD0..=0xD7).contains(b))
    };
    if !markers.iter().all(is_marker) || !markers.windows(2).all(|w| w[0] < w[1]) {
        return None;
    }
    let eoi = jpeg.windows(2).rposition(|w| w == [0xFF, 0xD9])?;
    // Interval k's data: from after the marker before it (or the SOS) to its own marker.
    let bounds = |k: usize| -> Option<Range<usize>> {
        let start = match k {
            0 => layout.data_at,
            _ => *markers.get(k - 1)? as usize + 2,
        };
        let end = match markers.get(k) {
            Some(&m) => m as usize,
            None => eoi,
        };
        (start <= end && end <= jpeg.len()).then_some(start..end)
    };
    let top = first * per * mh;
    let height = (end * per * mh).min(layout.height) - top;
    out.clear();
    out.extend_from_slice(jpeg.get(..layout.data_at)?);
    let h = u16::try_from(height).ok()?.to_be_bytes();
    out.get_mut(layout.height_at..layout.height_at + 2)?
        .copy_from_slice(&h);
    for (n, k) in (first..end).enumerate() {
        if n > 0 {
            out.extend_from_slice(&[0xFF, 0xD0 + ((n - 1) % 8) as u8]);
        }
        out.extend_from_slice(jpeg.get(bounds(k)?)?);
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    Some(top)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jpeg::header::read_info;

    /// A hand-made frame header and scan: 64x48 gray (8x8 MCUs: 8 per row, 6 rows), DRI of
    /// `interval` MCUs, entropy data `scan` (not decodable: only the structure is checked).
    fn frame(interval: u16, scan_data: &[u8]) -> Vec<u8> {
        let mut b = vec![0xFF, 0xD8];
        b.extend_from_slice(&[0xFF, 0xC0, 0, 11, 8, 0, 48, 0, 64, 1, 1, 0x11, 0]);
        b.extend_from_slice(&[0xFF, 0xDD, 0, 4]);
        b.extend_from_slice(&interval.to_be_bytes());
        b.extend_from_slice(&[0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 63, 0]);
        b.extend_from_slice(scan_data);
        b.extend_from_slice(&[0xFF, 0xD9]);
        b
    }

    /// Six one-row intervals: bytes `r0 r0 ...` then `FF D0`, `r1 ...`, with a stuffed byte.
    fn six_rows() -> Vec<u8> {
        let mut s = Vec::new();
        for r in 0..6u8 {
            if r > 0 {
                s.extend_from_slice(&[0xFF, 0xD0 + (r - 1) % 8]);
            }
            s.extend_from_slice(&[0x10 + r, 0xFF, 0x00, 0x10 + r]);
        }
        s
    }

    #[test]
    fn markers_of_whole_row_intervals_are_found() {
        let jpeg = frame(8, &six_rows());
        let info = read_info(&jpeg).unwrap();
        let l = layout(&jpeg, &info).unwrap();
        assert_eq!((l.rows_per_interval, l.mcu_rows, l.intervals()), (1, 6, 6));
        let m = scan(&jpeg, &info).unwrap();
        assert_eq!(m.len(), 5);
        assert!(m.iter().all(|&p| jpeg[p as usize] == 0xFF));
        // Intervals inside a row, none at all, or a marker missing: not usable.
        assert!(layout(&frame(4, &six_rows()), &info).is_none());
        assert!(layout(&frame(0, &six_rows()), &info).is_none());
        let mut short = six_rows();
        short.truncate(short.len() - 6);
        assert!(scan(&frame(8, &short), &info).is_none());
        // Markers out of order.
        let mut swapped = six_rows();
        let at = swapped.iter().position(|&b| b == 0xD1).unwrap();
        swapped[at] = 0xD3;
        assert!(scan(&frame(8, &swapped), &info).is_none());
    }

    #[test]
    fn a_cut_keeps_the_needed_rows_with_a_margin_and_renumbers() {
        let jpeg = frame(8, &six_rows());
        let info = read_info(&jpeg).unwrap();
        let l = layout(&jpeg, &info).unwrap();
        let m = scan(&jpeg, &info).unwrap();
        let mut out = Vec::new();
        // Rows 20..27 are in MCU rows 2..4 (8 px each), the gray frame needs no more.
        assert_eq!(mcu_rows_for(&info, 20..27, 8), 2..4);
        let top = cut(&jpeg, &l, &m, 1..5, &mut out).unwrap();
        assert_eq!(top, 8);
        let cut_info = read_info(&out).unwrap();
        assert_eq!((cut_info.width, cut_info.height), (64, 32));
        let data = &out[l.data_at..out.len() - 2];
        assert_eq!(
            data,
            [
                0x11, 0xFF, 0x00, 0x11, 0xFF, 0xD0, 0x12, 0xFF, 0x00, 0x12, 0xFF, 0xD1, 0x13, 0xFF,
                0x00, 0x13, 0xFF, 0xD2, 0x14, 0xFF, 0x00, 0x14
            ]
        );
        assert_eq!(scan(&out, &cut_info).map(|v| v.len()), Some(3));
        // The whole frame is not cut.
        assert!(cut(&jpeg, &l, &m, 0..6, &mut out).is_none());
        assert!(cut(&jpeg, &l, &m, 0..60, &mut out).is_none());
        // The bottom rows: the last interval ends at the EOI.
        assert_eq!(cut(&jpeg, &l, &m, 4..6, &mut out), Some(32));
        assert_eq!(read_info(&out).unwrap().height, 16);
        // Markers that do not belong to this frame are refused.
        assert!(cut(&jpeg, &l, &m[1..], 1..5, &mut out).is_none());
        let shifted: Vec<u32> = m.iter().map(|p| p + 1).collect();
        assert!(cut(&jpeg, &l, &shifted, 1..5, &mut out).is_none());
        let mut swapped = m.clone();
        swapped.swap(0, 1);
        assert!(cut(&jpeg, &l, &swapped, 1..5, &mut out).is_none());
    }

    #[test]
    fn rows_needed_with_vertical_chroma_subsampling() {
        let mut info = read_info(&frame(8, &six_rows())).unwrap();
        (info.components, info.h_max, info.v_max, info.height) = (3, 2, 2, 96);
        // 16-row MCUs. Rows inside an MCU row need only it; a first row at an MCU row's top
        // or a last row at its bottom also needs the neighbour's chroma.
        assert_eq!(mcu_rows_for(&info, 20..28, 8), 1..2);
        assert_eq!(mcu_rows_for(&info, 16..28, 8), 0..2);
        assert_eq!(mcu_rows_for(&info, 17..31, 8), 1..2);
        assert_eq!(mcu_rows_for(&info, 17..32, 8), 1..3);
        assert_eq!(mcu_rows_for(&info, 0..96, 8), 0..7);
        // 4:2:0 at 1/2 scale or less (chroma made full-size by the IDCT), and no vertical
        // subsampling: just the rows' own MCU rows. At 3/4 the chroma is upsampled.
        assert_eq!(mcu_rows_for(&info, 16..32, 4), 1..2);
        assert_eq!(mcu_rows_for(&info, 20..28, 6), 0..3);
        info.h_max = 1; // 4:4:0: no scale makes its chroma full-size
        assert_eq!(mcu_rows_for(&info, 20..28, 4), 0..3);
        info.v_max = 1; // 8-row MCUs
        assert_eq!(mcu_rows_for(&info, 16..32, 8), 2..4);
    }
}
