//! Finding out which index a chunk is read through, in one place: the open-time probe of an
//! index's front sections, and the rule for fetches that fail a check on an object store
//! (bytes damaged in transit are fetched again; only bytes that fail the same way twice are
//! the file's). The directory drives the probe; the reader completes it.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, IoContext, RemoteKind, Result};
use crate::format::index::{check_front, decode_header, front_len, Header, HEADER_LEN};
use crate::format::paths::ChunkPaths;
use crate::io::Store;

/// What opening a directory reads of an index: the header and the front sections (videos
/// and ids), with ordinary reads rather than a mapping (mapping would fault in 64 KiB per file
/// through the kernel's fault-around, most of it frame entries not needed yet).
pub struct Probe {
    pub header: Header,
    pub header_bytes: [u8; HEADER_LEN],
    pub front: Vec<u8>,
    /// The `.gmeta`'s size now. When it differs from `header.gmeta_len` the `.gmeta` was
    /// changed (another tool appended to the chunk) or damaged; the reader tells which.
    pub meta_len: u64,
}

impl Probe {
    /// True when the `.gmeta` has the size the index was written for (its CRC is checked
    /// before the chunk's first read).
    pub fn meta_size_matches(&self) -> bool {
        self.meta_len == self.header.gmeta_len
    }
}

/// Sizes of a chunk's files when a listing already gave them (object stores list sizes for
/// free; asking again would cost a round trip per file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KnownSizes {
    pub data: Option<u64>,
    pub meta: Option<u64>,
    pub index: Option<u64>,
}

/// Bytes of an index fetched in the first request when probing a remote chunk: enough for the
/// header and the video and id tables of a chunk of a few hundred videos, so one round trip
/// usually does.
const PROBE_GUESS: u64 = 64 << 10;

/// How many times bytes from an object store that fail a check (an index's CRCs, a `.gmeta`
/// that does not match its index) are fetched before deciding. Damage at rest gives the same
/// bytes every time and is recognised on the second fetch; a connection that damages data
/// gives different bytes each time, and four independent faults in a row are improbable
/// enough that the chunk is reported as unreadable rather than read without its checks.
pub const TRANSIT_ATTEMPTS: usize = 4;

/// Reads and checks the front of `paths.index` (a local file) and the `.gmeta`'s size.
pub fn probe_index(paths: &ChunkPaths) -> Result<Probe> {
    probe_index_in(&Store::default(), paths, KnownSizes::default())
}

/// [`probe_index`] in any store. On an object store a front that fails its checks is fetched
/// again ([`until_settled`]).
pub fn probe_index_in(store: &Store, paths: &ChunkPaths, sizes: KnownSizes) -> Result<Probe> {
    let path = &paths.index;
    let (header_bytes, header, front, _) = until_settled(store, path, |seen| {
        let front = match store {
            Store::Local(_) => read_front_local(path)?,
            Store::Remote(_) => read_front_remote(store, path, sizes.index, seen)?,
        };
        check_front(&front.2, front.3).map_err(|m| Error::format(path, m))?;
        Ok(front)
    })?;
    let meta_len = store.size(&paths.meta, sizes.meta)?;
    Ok(Probe {
        header,
        header_bytes,
        front,
        meta_len,
    })
}

type Front = ([u8; HEADER_LEN], Header, Vec<u8>, u64);

fn too_short(path: &Path, len: u64) -> Result<()> {
    if len < HEADER_LEN as u64 {
        return Err(Error::format(
            path,
            format!("index is {len} bytes, shorter than its {HEADER_LEN}-byte header"),
        ));
    }
    Ok(())
}

/// The front sections' length, checked against the file's real length before anything is
/// allocated: a hostile header cannot make us allocate more than the file holds.
fn front_need(path: &Path, header: &Header, len: u64) -> Result<usize> {
    let need = front_len(header).map_err(|m| Error::format(path, m))?;
    if need as u64 > len {
        return Err(Error::format(
            path,
            format!("index is {len} bytes, its header describes at least {need}"),
        ));
    }
    Ok(need)
}

/// One open, one `fstat`, two reads: opening a directory does this for every chunk.
fn read_front_local(path: &Path) -> Result<Front> {
    let (mut file, len) = crate::io::local::open_read(path)?;
    too_short(path, len)?;
    let mut header_bytes = [0u8; HEADER_LEN];
    file.read_exact(&mut header_bytes).at(path)?;
    let header = decode_header(&header_bytes).map_err(|m| Error::format(path, m))?;
    let need = front_need(path, &header, len)?;
    let mut front = vec![0u8; need];
    front[..HEADER_LEN].copy_from_slice(&header_bytes);
    file.read_exact(&mut front[HEADER_LEN..]).at(path)?;
    Ok((header_bytes, header, front, len))
}

/// A guessed prefix first (one round trip for most chunks), the rest only if needed. Every
/// byte fetched goes into `seen`, so that a failed attempt can be told from the next.
fn read_front_remote(
    store: &Store,
    path: &Path,
    known: Option<u64>,
    seen: &mut crc32fast::Hasher,
) -> Result<Front> {
    let len = store.size(path, known)?;
    seen.update(&len.to_le_bytes());
    too_short(path, len)?;
    let mut front = store.read_range(path, 0..len.min(PROBE_GUESS))?;
    seen.update(&front);
    let mut header_bytes = [0u8; HEADER_LEN];
    header_bytes.copy_from_slice(&front[..HEADER_LEN]);
    let header = decode_header(&header_bytes).map_err(|m| Error::format(path, m))?;
    let need = front_need(path, &header, len)?;
    if front.len() < need {
        let rest = store.read_range(path, front.len() as u64..need as u64)?;
        seen.update(&rest);
        front.extend_from_slice(&rest);
    }
    front.truncate(need);
    Ok((header_bytes, header, front, len))
}

/// Runs `attempt`, which fetches something and checks it. Locally it runs once: a failed
/// check is the file's. On an object store a failed check (`Format`, `StaleIndex`) may be a
/// byte flipped in transit, so the fetch is repeated (with the cached copy of `path`, if any,
/// dropped first) until it passes, or until two attempts saw the same bytes (`attempt` feeds
/// everything it fetched into the hasher it is given): then the damage is the stored file's
/// and the check's error is returned, as for a local file. Attempts that saw different bytes
/// every time end in a `Remote` error: such a chunk is unreadable for now, never read without
/// its checks.
pub fn until_settled<T>(
    store: &Store,
    path: &Path,
    mut attempt: impl FnMut(&mut crc32fast::Hasher) -> Result<T>,
) -> Result<T> {
    if !store.is_remote() {
        return attempt(&mut crc32fast::Hasher::new());
    }
    let mut seen: Vec<u32> = Vec::with_capacity(TRANSIT_ATTEMPTS);
    let mut last = None;
    for _ in 0..TRANSIT_ATTEMPTS {
        let mut hasher = crc32fast::Hasher::new();
        match attempt(&mut hasher) {
            Err(e @ (Error::Format { .. } | Error::StaleIndex { .. })) => {
                let fingerprint = hasher.finalize();
                if seen.contains(&fingerprint) {
                    return Err(e);
                }
                seen.push(fingerprint);
                last = Some(e);
                store.forget_cached(path);
            }
            other => return other,
        }
    }
    let why = last.map(|e| e.to_string()).unwrap_or_default();
    Err(Error::Remote {
        url: path.display().to_string(),
        kind: RemoteKind::Failed,
        msg: format!(
            "{TRANSIT_ATTEMPTS} fetches failed their checks with different bytes each time (a \
             connection that damages data?), so the chunk is not read without its checks; the \
             last: {why}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_attempts_run_once() {
        let mut calls = 0;
        let got: Result<()> = until_settled(&Store::default(), Path::new("x"), |_| {
            calls += 1;
            Err(Error::format("x", "bad"))
        });
        assert!(matches!(got, Err(Error::Format { .. })));
        assert_eq!(calls, 1);
    }
}
