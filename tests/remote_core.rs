//! The object-store read path without a server: a dataset written locally is copied into an
//! in-memory `object_store` and read through `Store::Remote`, which exercises the listing,
//! concurrent index probes, range planning, fetching and CRC checks exactly as for S3 (the
//! Python tests repeat this against a real S3 server through a fault-injecting proxy).

use std::path::Path;
use std::sync::Arc;

use gulpio_rs::chunk::reader::IndexKind;
use gulpio_rs::directory::{ManifestMode, Opened};
use gulpio_rs::io::{runtime, LocalIo, RemoteNumber, RemoteSettings, RemoteStore, Store};
use gulpio_rs::manifest::StagedCommits;
use gulpio_rs::{ChunkPaths, ChunkWriter, Directory, Error, WriteMode};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

fn fake_jpeg(w: u16, h: u16, extra: usize) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08];
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
    v.extend((0..extra).map(|i| (i % 251) as u8));
    v.extend_from_slice(&[0xFF, 0xD9]);
    v
}

/// Three chunks of four videos of 6 frames each, locally in `dir`.
fn write_dataset(dir: &Path) {
    for k in 0..3u64 {
        let paths = ChunkPaths::numbered(dir, k);
        let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
        for v in 0..4 {
            let frames: Vec<Vec<u8>> = (0..6).map(|j| fake_jpeg(8, 4, 100 + j * 37 + v)).collect();
            let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
            w.append(&format!("c{k}v{v}"), br#"{"label": 1}"#, &refs)
                .unwrap();
        }
        w.close().unwrap();
    }
}

/// Copies every file of `dir` to `prefix/` in a new in-memory store; `edit` may change a
/// file's bytes on the way.
fn upload(dir: &Path, prefix: &str, edit: impl Fn(&str, &mut Vec<u8>)) -> Arc<dyn ObjectStore> {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    upload_into(&store, dir, prefix, &edit);
    store
}

/// [`upload`] into `store`, folders (the manifest's `_gulpio/`) as nested keys; `edit` sees
/// names relative to `dir`.
fn upload_into(
    store: &Arc<dyn ObjectStore>,
    dir: &Path,
    prefix: &str,
    edit: &dyn Fn(&str, &mut Vec<u8>),
) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if path.is_dir() {
            let inner = |n: &str, b: &mut Vec<u8>| edit(&format!("{name}/{n}"), b);
            upload_into(store, &path, &format!("{prefix}/{name}"), &inner);
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        edit(&name, &mut bytes);
        let key = ObjectPath::from(format!("{prefix}/{name}"));
        let s = store.clone();
        runtime::block_on(async move { s.put(&key, PutPayload::from(bytes)).await })
            .unwrap()
            .unwrap();
    }
}

fn remote(store: Arc<dyn ObjectStore>) -> Directory {
    let url = "memory:///ds";
    let rs = RemoteStore::from_client(url, store, RemoteSettings::default());
    Directory::open_in(Store::Remote(Arc::new(rs)), url).unwrap()
}

/// Every frame of every video, read through `read_frames`.
fn all_frames(dir: &Directory) -> Vec<(String, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    for id in dir.ids_in(0, usize::MAX).unwrap() {
        let (r, v) = dir.resolve(&id).unwrap();
        let wanted: Vec<(usize, usize)> = (0..r.frame_count(v)).map(|k| (v, k)).collect();
        let mut frames = vec![Vec::new(); wanted.len()];
        r.read_frames(&wanted, true, |i, got| frames[i] = got.unwrap().to_vec())
            .unwrap();
        out.push((id.to_owned(), frames));
    }
    out
}

#[test]
fn remote_reads_equal_local_reads() {
    let tmp = tempfile::tempdir().unwrap();
    write_dataset(tmp.path());
    let local = Directory::open(tmp.path()).unwrap();
    let pread = Directory::open_in(Store::Local(LocalIo::Pread), tmp.path()).unwrap();
    let dir = remote(upload(tmp.path(), "ds", |_, _| {}));
    assert_eq!(dir.len(), 12);
    assert!(dir.problems().is_empty(), "{:?}", dir.problems());
    let (r, _) = dir.resolve("c1v2").unwrap();
    assert_eq!(r.kind(), IndexKind::Binary);
    assert!(r.mapped().is_none());
    let want = all_frames(&local);
    assert_eq!(all_frames(&dir), want);
    assert_eq!(all_frames(&pread), want);
    // Selections in any order, repeated, with negative indices resolved first.
    let (r, v) = dir.resolve("c2v0").unwrap();
    let wanted = [(v, 5), (v, 0), (v, 5), (v, 3)];
    let mut got = vec![Vec::new(); 4];
    r.read_frames(&wanted, true, |i, b| got[i] = b.unwrap().to_vec())
        .unwrap();
    let whole = &want.iter().find(|(id, _)| id == "c2v0").unwrap().1;
    assert_eq!(
        got,
        vec![
            whole[5].clone(),
            whole[0].clone(),
            whole[5].clone(),
            whole[3].clone()
        ]
    );
}

#[test]
fn a_remote_dataset_opens_through_its_manifest_and_reads_as_listed() {
    let tmp = tempfile::tempdir().unwrap();
    write_dataset(tmp.path());
    gulpio_rs::manifest::index(tmp.path(), false).unwrap();
    // A chunk committed after the manifest was made: the tail.
    let paths = ChunkPaths::numbered(tmp.path(), 3);
    let mut w = ChunkWriter::open(&paths, WriteMode::Create).unwrap();
    w.append("late", b"{}", &[&fake_jpeg(8, 4, 9)]).unwrap();
    w.close().unwrap();
    let local = Directory::open_with(Store::default(), tmp.path(), ManifestMode::Off).unwrap();
    let dir = remote(upload(tmp.path(), "ds", |_, _| {}));
    match dir.opened() {
        Opened::Manifest { version, tail, .. } => assert_eq!((*version, *tail), (1, 1)),
        other => panic!("{other:?}"),
    }
    assert_eq!(dir.len(), 13);
    assert_eq!(all_frames(&dir), all_frames(&local));
    let (counts, shapes) = dir.video_shapes(None, false).unwrap();
    assert_eq!((counts, shapes), local.video_shapes(None, false).unwrap());
    // Damage to the manifest in the store: its front, opened by listing with the reason;
    // `LATEST` (a hint), the genesis found without it.
    for (victim, at) in [
        ("_gulpio/log/00000000000000000000.glog", 300),
        ("_gulpio/LATEST", 20),
    ] {
        let dir = remote(upload(tmp.path(), "ds", |name, b| {
            if name == victim {
                b[at] ^= 0x08;
            }
        }));
        match dir.opened() {
            Opened::Listing { reason, warned } if victim.ends_with(".glog") => {
                assert!(reason.contains("cannot be used") && *warned, "{reason}")
            }
            Opened::Manifest { .. } if victim.ends_with("LATEST") => {}
            other => panic!("{victim}: {other:?}"),
        }
        assert_eq!(all_frames(&dir), all_frames(&local));
    }
    // A damaged page: the reads that need it fail, naming the manifest file's URL.
    let dir = remote(upload(tmp.path(), "ds", |name, b| {
        if name.ends_with("0000.glog") {
            let at = b.len() - 3;
            b[at] ^= 0x08;
        }
    }));
    assert!(matches!(dir.opened(), Opened::Manifest { .. }));
    let err = dir.ids_in(0, usize::MAX).unwrap_err().to_string();
    assert!(
        err.contains("memory:///ds/_gulpio/log/") && err.contains("CRC"),
        "{err}"
    );
    // Ids whose pages are intact still resolve.
    assert!(dir.resolve("late").is_ok());
}

#[test]
fn legacy_chunks_without_index_read_remotely() {
    let tmp = tempfile::tempdir().unwrap();
    write_dataset(tmp.path());
    let local = Directory::open(tmp.path()).unwrap();
    let store = upload(tmp.path(), "ds", |_, _| {});
    let s = store.clone();
    runtime::block_on(async move { s.delete(&ObjectPath::from("ds/data_1.gidx")).await })
        .unwrap()
        .unwrap();
    let dir = remote(store);
    let (r, _) = dir.resolve("c1v0").unwrap();
    assert_eq!(r.kind(), IndexKind::Legacy);
    assert_eq!(all_frames(&dir), all_frames(&local));
}

#[test]
fn stored_damage_is_a_crc_error_naming_the_url() {
    let tmp = tempfile::tempdir().unwrap();
    write_dataset(tmp.path());
    let dir = remote(upload(tmp.path(), "ds", |name, bytes| {
        if name == "data_2.gulp" {
            bytes[40] ^= 0x10;
        }
    }));
    let (r, v) = dir.resolve("c2v0").unwrap();
    let mut errors = Vec::new();
    r.read_frames(&[(v, 0), (v, 1)], true, |i, got| {
        if let Err(e) = got {
            errors.push((i, e));
        }
    })
    .unwrap();
    assert_eq!(errors.len(), 1);
    match &errors[0].1 {
        Error::Crc {
            path, id, frame, ..
        } => {
            assert_eq!(path.to_str().unwrap(), "memory:///ds/data_2.gulp");
            assert_eq!((id.as_str(), *frame), ("c2v0", 0));
        }
        other => panic!("{other}"),
    }
    // Without checks the damaged bytes are returned as stored.
    r.read_frames(&[(v, 0)], false, |_, got| assert!(got.is_ok()))
        .unwrap();
}

#[test]
fn truncated_remote_data_fails_only_the_frames_it_cut() {
    let tmp = tempfile::tempdir().unwrap();
    write_dataset(tmp.path());
    let dir = remote(upload(tmp.path(), "ds", |name, bytes| {
        if name == "data_0.gulp" {
            bytes.truncate(bytes.len() - 50);
        }
    }));
    let (r, v) = dir.resolve("c0v3").unwrap();
    let mut results = Vec::new();
    r.read_frames(&[(v, 0), (v, 5)], true, |i, got| {
        results.push((i, got.is_ok()))
    })
    .unwrap();
    results.sort();
    assert_eq!(results, vec![(0, true), (1, false)]);
}

#[test]
fn missing_dataset_is_empty_and_missing_object_is_not_found() {
    let tmp = tempfile::tempdir().unwrap();
    write_dataset(tmp.path());
    let store = upload(tmp.path(), "ds", |_, _| {});
    let rs = Arc::new(RemoteStore::from_client(
        "memory:///ds",
        store,
        RemoteSettings::default(),
    ));
    match rs.read_all("nothing.here") {
        Err(Error::Remote { url, kind, .. }) => {
            assert_eq!(url, "memory:///ds/nothing.here");
            assert_eq!(kind, gulpio_rs::error::RemoteKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    let other = upload(tmp.path(), "elsewhere", |_, _| {});
    let rs = RemoteStore::from_client("memory:///ds", other, RemoteSettings::default());
    let empty = Directory::open_in(Store::Remote(Arc::new(rs)), "memory:///ds").unwrap();
    assert_eq!(empty.len(), 0);
    assert_eq!(empty.chunk_count(), 0);
}

#[test]
fn staged_chunks_publish_with_meta_last_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    write_dataset(tmp.path());
    let local = Directory::open(tmp.path()).unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let rs = Arc::new(RemoteStore::from_client(
        "memory:///out",
        mem.clone(),
        RemoteSettings::default(),
    ));
    let store = Store::Remote(rs.clone());
    // Chunk 1 of the local dataset published as chunk 7, then chunk 0 as chunk 0 (data and
    // index only first: not yet part of the dataset).
    let root = Path::new("memory:///out");
    let staged1 = ChunkPaths::numbered(tmp.path(), 1);
    assert_eq!(
        store
            .publish_staged(
                root,
                &staged1,
                RemoteNumber::Exactly(7),
                &StagedCommits::default()
            )
            .unwrap(),
        7
    );
    // An upload of the same chunk again (a rerun) is the same chunk; other bytes under that
    // number are a conflict, never a replacement.
    assert_eq!(
        store
            .publish_staged(
                root,
                &staged1,
                RemoteNumber::Exactly(7),
                &StagedCommits::default()
            )
            .unwrap(),
        7
    );
    let clash = store.publish_staged(
        root,
        &ChunkPaths::numbered(tmp.path(), 0),
        RemoteNumber::Exactly(7),
        &StagedCommits::default(),
    );
    assert!(matches!(clash, Err(Error::Conflict { .. })), "{clash:?}");
    let staged0 = ChunkPaths::numbered(tmp.path(), 0);
    rs.put_file("data_0.gulp", &staged0.data).unwrap();
    rs.put_file("data_0.gidx", &staged0.index).unwrap();
    let dir = Directory::open_in(store.clone(), "memory:///out").unwrap();
    assert_eq!(
        dir.len(),
        4,
        "a chunk without its .gmeta is not part of the dataset"
    );
    assert_eq!(dir.chunk(0).unwrap().number, 7);
    rs.put_file("meta_0.gmeta", &staged0.meta).unwrap();
    let dir = Directory::open_in(store.clone(), "memory:///out").unwrap();
    assert_eq!(dir.len(), 8);
    let mut want = all_frames(&local);
    want.retain(|(id, _)| id.starts_with("c0") || id.starts_with("c1"));
    assert_eq!(all_frames(&dir), want);
    // A new chunk whose number is taken takes the next free one (8: after 7, the last used).
    let staged2 = ChunkPaths::numbered(tmp.path(), 2);
    assert_eq!(
        store
            .publish_staged(
                root,
                &staged2,
                RemoteNumber::FirstFree(0),
                &StagedCommits::default()
            )
            .unwrap(),
        8
    );
    let dir = Directory::open_in(store.clone(), "memory:///out").unwrap();
    assert_eq!(
        (0..dir.chunk_count())
            .map(|c| dir.chunk(c).unwrap().number)
            .collect::<Vec<_>>(),
        [0, 7, 8]
    );
    // The plan-file primitive: created once, then refused.
    assert!(store
        .create_file(Path::new("memory:///out"), "plan.json", b"{}")
        .unwrap());
    assert!(!store
        .create_file(Path::new("memory:///out"), "plan.json", b"{}")
        .unwrap());
    // Multipart path: a staged file over one part.
    let big = tmp.path().join("big.bin");
    let bytes: Vec<u8> = (0..(gulpio_rs::io::remote::MULTIPART_PART + 12345))
        .map(|i| (i % 253) as u8)
        .collect();
    std::fs::write(&big, &bytes).unwrap();
    rs.put_file("big.bin", &big).unwrap();
    assert_eq!(rs.read_all("big.bin").unwrap().as_ref(), bytes.as_slice());
    assert_eq!(
        rs.read_range("big.bin", 5..100_005).unwrap().as_ref(),
        &bytes[5..100_005]
    );
}
