//! A whole chunk (`.gmeta` + optional `.gidx` + `.gulp`, framed as `split_chunk_input`
//! describes) written to a scratch directory, then everything the Python layer does with one:
//! `Directory::open` and `resolve` (GulpDirectory), `ChunkReader::open`, every id, meta and
//! frame with its CRC check, `verify_chunk` (gulpio check), the batch planner and decoder
//! (gd.read), `write_index` (gulpio index) and an append (chunk.open("ab")).
//!
//! Invariants beyond "no panic": ids look up to their own position; a verified read returns
//! bytes whose CRC is the recorded one; an index written by `write_index` is used and every
//! frame then passes its CRC check; an append keeps every earlier frame's bytes and adds one
//! readable video.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gulpio_rs::chunk::reader::{ChunkReader, IndexKind};
use gulpio_rs::chunk::writer::{write_index, ChunkWriter, WriteMode};
use gulpio_rs::decode;
use gulpio_rs::jpeg::Colorspace;
use gulpio_rs::pool::Runner;
use gulpio_rs::verify::verify_chunk;
use gulpio_rs::{ChunkPaths, Directory};
use gulpio_rs_fuzz::split_chunk_input;
use libfuzzer_sys::fuzz_target;

/// Decoding is the jpeg target's job; here only frames small enough to keep the rate up.
const DECODE_BUDGET: usize = 1 << 20;

/// A 1x1 baseline JPEG (what `chunk.append` would be given).
const TINY_JPEG: &[u8] = include_bytes!("../tiny.jpg");

fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // tmpfs when there is one: the writer fsyncs, which is free there.
        let base = match std::env::var_os("GULPIO_FUZZ_TMP") {
            Some(dir) => PathBuf::from(dir),
            None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
            None => std::env::temp_dir(),
        };
        // One directory per process, reused for every input (a few KB, left behind on exit:
        // libFuzzer exits without running destructors; smoke.sh points this at its temp dir).
        let dir = base.join(format!("gulpio-fuzz-chunk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

fuzz_target!(|input: &[u8]| {
    let files = split_chunk_input(input);
    let dir = scratch();
    // Leftovers of the previous input (temporary files of an aborted writer included).
    for e in std::fs::read_dir(dir).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let paths = ChunkPaths::numbered(dir, 0);
    std::fs::write(&paths.data, &files.data).unwrap();
    std::fs::write(&paths.meta, &files.meta).unwrap();
    if let Some(index) = &files.index {
        std::fs::write(&paths.index, index).unwrap();
    }

    let before = ChunkReader::open_mapped(&paths).ok().map(|(r, _)| {
        read_everything(&r);
        snapshot(&r)
    });
    directory(dir);

    if files.index.is_none() && write_index(&paths).is_ok() {
        let (r, warning) = ChunkReader::open_mapped(&paths).expect("a chunk just indexed opens");
        assert!(warning.is_none(), "fresh index not used: {warning:?}");
        assert_eq!(r.kind(), IndexKind::Binary);
        for v in 0..r.video_count() {
            for k in 0..r.frame_count(v) {
                r.frame_bytes(v, k as i64, true)
                    .expect("every frame matches the index write_index made");
            }
        }
        assert_eq!(
            Some(snapshot(&r)),
            before,
            "write_index changed what the chunk holds"
        );
        let report = verify_chunk(&r, false, &Runner::Caller);
        // Bytes past the last record stay an unpublished tail; nothing else may be reported.
        assert!(
            report.findings.iter().all(|f| f.kind == "unpublished_tail"),
            "{:?}",
            report.findings
        );
    }

    append(&paths, before);
});

type Snapshot = Vec<(String, Vec<u8>, Vec<Option<Vec<u8>>>)>;

/// Ids, metadata and the (unchecked) bytes of every frame that lies inside the file.
fn snapshot(r: &ChunkReader) -> Snapshot {
    (0..r.video_count())
        .map(|v| {
            let frames = (0..r.frame_count(v))
                .map(|k| r.frame_bytes(v, k as i64, false).ok().map(<[u8]>::to_vec))
                .collect();
            (r.id(v).to_owned(), r.meta_data(v).to_vec(), frames)
        })
        .collect()
}

fn read_everything(r: &ChunkReader) {
    let _ = (r.published_len(), r.index_problem(), r.kind());
    for v in 0..r.video_count() {
        let id = r.id(v);
        assert_eq!(
            r.lookup(id),
            Some(v),
            "id {id:?} does not look up to its position"
        );
        let _ = r.meta_data(v);
        let n = r.frame_count(v);
        assert_eq!(r.frames(v).count(), n);
        for (k, rec) in r.frames(v).enumerate() {
            if let Ok(bytes) = r.frame_bytes(v, k as i64, true) {
                assert_eq!(bytes.len(), rec.jpeg_len as usize);
                if r.kind() == IndexKind::Binary {
                    assert_eq!(crc32fast::hash(bytes), rec.crc);
                }
            }
        }
        assert!(r.frame(v, n as i64).is_err() && r.frame(v, -(n as i64) - 1).is_err());
        if n > 0 {
            assert_eq!(r.frame(v, -1).unwrap().0, n - 1);
        }
        let all: Vec<i64> = (0..n as i64).collect();
        if let Ok(jobs) = decode::plan(r, v, &all, Colorspace::Auto, true, None) {
            let sizes: Vec<usize> = jobs.iter().map(|j| j.len()).collect();
            if sizes.iter().sum::<usize>() <= DECODE_BUDGET {
                let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&s| vec![0; s]).collect();
                let outs = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
                let _ = decode::decode(&jobs, outs, true, &Runner::Caller);
            }
        }
    }
    let report = verify_chunk(r, false, &Runner::Caller);
    assert_eq!(report.videos, r.video_count());
    for f in &report.findings {
        if let Some(k) = f.frame {
            let id = f.video.as_deref().expect("a frame finding names its video");
            let v = r.lookup(id).expect("a finding names a video of the chunk");
            assert!(k < r.frame_count(v));
        }
    }
}

/// What GulpDirectory does: open (probe the index front), then resolve ids lazily.
fn directory(dir: &Path) {
    let Ok(d) = Directory::open(dir) else {
        return;
    };
    let _ = d.problems();
    let Ok(ids) = d.ids_in(0, usize::MAX) else {
        return;
    };
    for (g, id) in ids.iter().enumerate() {
        assert_eq!(d.lookup(id).ok(), Some(Some(g)));
        let Ok((r, v)) = d.resolve(id) else {
            continue;
        };
        assert_eq!(
            r.id(v),
            id,
            "the directory resolved {id:?} to another video"
        );
        for k in 0..r.frame_count(v) {
            // Any source: a directory reads with positional reads by default.
            let _ = r.read_frame(v, k as i64, true);
        }
    }
}

/// `chunk.open("ab")` + `append` + close on whatever the chunk is; when it succeeds the old
/// frames must read back unchanged and the new video must read with a valid CRC.
fn append(paths: &ChunkPaths, before: Option<Snapshot>) {
    const NEW_ID: &str = "\u{1F9EA} fuzz-appended";
    let Ok(mut w) = ChunkWriter::open(paths, WriteMode::Append) else {
        return;
    };
    if w.append(NEW_ID, br#"{"new": true}"#, &[TINY_JPEG]).is_err() {
        let _ = w.abort();
        return;
    }
    if w.close().is_err() {
        return;
    }
    let (r, warning) = ChunkReader::open_mapped(paths).expect("a chunk just appended to opens");
    assert!(
        warning.is_none(),
        "index written by the append not used: {warning:?}"
    );
    let v = r.lookup(NEW_ID).expect("the appended video is there");
    let k = r.frame_count(v) - 1;
    assert_eq!(r.frame_bytes(v, k as i64, true).unwrap(), TINY_JPEG);
    assert!(r.meta_data(v).ends_with(br#"{"new": true}]"#));
    let Some(before) = before else {
        return;
    };
    let after = snapshot(&r);
    for (old, new) in before.iter().zip(&after) {
        if old.0 == NEW_ID {
            continue;
        }
        assert_eq!(old, new, "an append changed video {:?}", old.0);
    }
}
