//! How many threads of its own the AV1 decoder runs: none with libdav1d (one frame context,
//! decoding on the caller's thread, so a fork can never copy a decoder thread's state), two
//! with rav1d (the two frame contexts it needs, `video::av1`). A binary of its own, because it
//! counts the whole process's threads.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gulpio_rs::video::av1::{Decoder, BACKEND, FRAME_CONTEXTS};

fn threads_alive() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc (Linux)")
        .count()
}

/// One test in this binary: the harness runs tests on threads of their own, which would be
/// counted.
#[test]
fn a_decoder_runs_its_frame_contexts_beyond_one_as_threads() {
    let expected = if cfg!(feature = "dav1d") {
        ("libdav1d", 1)
    } else {
        ("rav1d", 2)
    };
    assert_eq!((BACKEND, FRAME_CONTEXTS), expected);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/segments/bt601-128x72-0.av1");
    let bytes = std::fs::read(&path).expect("tests/segments");
    let before = threads_alive();
    let mut dec = Decoder::new(128 * 72).expect("a decoder");
    let mut pending = dec.start(&bytes).expect("the segment");
    let first = dec.next(&mut pending).expect("decodes").expect("a picture");
    assert_eq!((first.width(), first.height()), (128, 72));
    let own = if FRAME_CONTEXTS > 1 {
        FRAME_CONTEXTS as usize
    } else {
        0
    };
    // rav1d's workers start as it opens, and have all started once a picture is out.
    assert_eq!(threads_alive() - before, own, "{BACKEND}");
    drop(first);
    drop(pending);
    drop(dec);
    // Closed, its threads (if any) exit; they are joined asynchronously, so wait for them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while threads_alive() > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(threads_alive(), before, "{BACKEND}");
}
