//! Bytes -> what the reader does with a stored video segment: `decode_segment` with a declared
//! shape (from the first 4 bytes: width, height, frame count, which frames are wanted) into
//! buffers of that shape, and `probe_segment` on the same stream. Decoded unchecked: the
//! damage a CRC would catch is what is fuzzed.
//!
//! Invariants beyond "no panic, no abort": a successful decode fills exactly the wanted
//! buffers, and decoding is deterministic.
#![no_main]

use gulpio_rs::video::{decode_segment, probe_segment, Codec, Integrity, SegmentShape};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, stream)) = data.split_first_chunk::<4>() else {
        return;
    };
    // Small declared frames keep each run fast; the stream may declare anything.
    let shape = SegmentShape {
        codec: Codec::Av1,
        width: 16 + head[0] as usize,
        height: 16 + head[1] as usize,
        frames: 1 + (head[2] as usize % 32),
    };
    let wanted: Vec<usize> = (0..shape.frames)
        .filter(|i| head[3] >> (i % 8) & 1 == 1)
        .collect();
    let mut bufs = vec![vec![0x5Au8; shape.frame_len()]; wanted.len()];
    let first = {
        let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        decode_segment(&shape, stream, Integrity::Unchecked, &wanted, &mut outs)
    };
    if first.is_ok() && !bufs.is_empty() {
        let mut again = vec![vec![0xA5u8; shape.frame_len()]; wanted.len()];
        let mut outs: Vec<&mut [u8]> = again.iter_mut().map(|b| b.as_mut_slice()).collect();
        decode_segment(&shape, stream, Integrity::Unchecked, &wanted, &mut outs)
            .expect("second decode");
        assert!(again == bufs, "two decodes of the same segment differ");
    }
    let _ = probe_segment(Codec::Av1, stream, shape.frames, 1 << 16);
});
