//! A local disk cache of blocks of remote objects (`cache_dir=`), so a second epoch over a
//! dataset in object storage reads from local disk instead of the network.
//!
//! Fixed-size aligned blocks (4 MiB by default) of each object, one file per block, named by a
//! hash of the object's identity (URL, size and ETag or modification time, so a replaced
//! object is never served from an older copy) and the block number. Why blocks and not whole
//! chunks or the requested ranges: a training job reads random subsets of each chunk, so
//! whole-chunk caching would fetch gigabytes for a few clips, and caching requested ranges
//! would hit only when the same frames are asked for again; blocks cost at most one block of
//! read-ahead per request and hit for any later read that falls inside them (fsspec's block
//! cache makes the same trade).
//!
//! Safety: a block is written to a temporary file in the cache folder and renamed into place,
//! so a reader in any process sees a whole block or none. A file holds the full key (hash
//! collisions are detected), the block's length and a CRC32 of every 64 KiB piece of it:
//! reads take only the part of a block they need (a batch of clips reads kilobytes of each
//! 4 MiB block) and check the CRCs of the pieces they touch, so a damaged file is deleted and
//! fetched again, never served, whether or not the caller has CRCs of its own (chunks
//! without an index have none). Size: after a write, when the files exceed `max_bytes`, the
//! least recently used ones (by modification time, which a hit refreshes) are deleted down to
//! 90% of the bound; several processes may evict at once, and a block deleted under a reader
//! that had not opened it yet is simply a miss.
//!
//! File layout (little-endian): `GLPCACH2`, key length (u32), key, block length (u64), one
//! CRC32 (u32) per 64 KiB piece, the block. Files of another layout are misses.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

const MAGIC: &[u8; 8] = b"GLPCACH2";
/// The piece of a block one CRC covers: what a read checks beyond the bytes it needs.
const PIECE: u64 = 64 << 10;
/// Default block size: large enough that a block is one efficient object-store request.
pub const DEFAULT_BLOCK: u64 = 4 << 20;
/// Default bound on the cache's size.
pub const DEFAULT_MAX_BYTES: u64 = 20_000_000_000;
/// Temporaries older than this belong to dead writers and are removed when evicting.
const STALE_TEMP: Duration = Duration::from_secs(3600);

#[derive(Debug)]
pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
    block: u64,
    /// This process's estimate of the folder's size (None until first scanned).
    used: AtomicU64,
    scanned: std::sync::Once,
}

/// FNV-1a, 64 bits: stable across runs and Rust versions (the std hasher is not promised to
/// be); collisions are caught by the key stored in every file.
fn fnv64(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl DiskCache {
    /// A cache in `dir` (created) of at most `max_bytes` in blocks of `block` bytes.
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64, block: u64) -> std::io::Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        Ok(DiskCache {
            dir,
            max_bytes,
            block: block.max(4096),
            used: AtomicU64::new(0),
            scanned: std::sync::Once::new(),
        })
    }

    pub fn block(&self) -> u64 {
        self.block
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str, index: u64) -> PathBuf {
        self.dir.join(format!("{:016x}-{index}", fnv64(key)))
    }

    /// True if a file for block `index` of `key` exists (not checked: [`DiskCache::get`] is).
    pub fn has(&self, key: &str, index: u64) -> bool {
        self.path(key, index).exists()
    }

    /// Block `index` of the object `key`, if cached whole and intact.
    pub fn get(&self, key: &str, index: u64) -> Option<Bytes> {
        self.read(key, index, None, None)
    }

    /// Bytes `part` of block `index` of `key` (the whole block when None), if the block is
    /// cached for that key, `block_len` bytes long (when given), and the pieces holding
    /// `part` match their CRCs. A file that fails a check is deleted.
    pub fn read(
        &self,
        key: &str,
        index: u64,
        block_len: Option<u64>,
        part: Option<std::ops::Range<u64>>,
    ) -> Option<Bytes> {
        let path = self.path(key, index);
        let got = read_part(&path, key, block_len, part);
        match got {
            Ok(Some(bytes)) => {
                // A hit is a use: the LRU order is the files' modification times. Only a
                // regular file reached without a symlink is touched (the folder may be shared).
                if let Ok(f) = super::local::open_in_place(&path) {
                    let _ = f.set_modified(SystemTime::now());
                }
                Some(bytes)
            }
            // Damaged, cut, another layout, or another key with the same hash.
            Ok(None) => {
                let _ = fs::remove_file(&path);
                None
            }
            Err(_) => None, // not cached (or unreadable): a miss
        }
    }

    /// Stores block `index` of `key` (best effort: a full disk only costs the cache).
    pub fn put(&self, key: &str, index: u64, data: &[u8]) {
        if data.len() as u64 > self.max_bytes {
            return;
        }
        // Before this block exists, so the first scan does not count it twice.
        self.scan_once();
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| -> std::io::Result<u64> {
            let key_len = u32::try_from(key.len()).map_err(std::io::Error::other)?;
            let mut head = Vec::with_capacity(24 + key.len() + data.len() / 16384);
            head.extend_from_slice(MAGIC);
            head.extend_from_slice(&key_len.to_le_bytes());
            head.extend_from_slice(key.as_bytes());
            head.extend_from_slice(&(data.len() as u64).to_le_bytes());
            for piece in data.chunks(PIECE as usize) {
                head.extend_from_slice(&crc32fast::hash(piece).to_le_bytes());
            }
            // Created exclusively: never through a name someone else put there.
            let mut f = super::local::create_new(&tmp).map_err(std::io::Error::other)?;
            f.write_all(&head)?;
            f.write_all(data)?;
            fs::rename(&tmp, self.path(key, index))?;
            Ok(f.metadata()?.len())
        })();
        match written {
            Ok(n) => {
                let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
                if used > self.max_bytes {
                    self.evict();
                }
            }
            Err(_) => {
                let _ = fs::remove_file(&tmp);
            }
        }
    }

    /// Deletes the cached blocks of `key` that cover `range` (their bytes failed a check).
    pub fn invalidate(&self, key: &str, range: std::ops::Range<u64>) {
        if range.is_empty() {
            return;
        }
        for index in range.start / self.block..=(range.end - 1) / self.block {
            let _ = fs::remove_file(self.path(key, index));
        }
    }

    fn scan_once(&self) {
        self.scanned.call_once(|| {
            let total = self.entries().iter().map(|e| e.1).sum();
            self.used.store(total, Ordering::Relaxed);
        });
    }

    /// `(modified, size, path)` of every block file; removes stale temporaries.
    fn entries(&self) -> Vec<(SystemTime, u64, PathBuf)> {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let now = SystemTime::now();
        let mut out = Vec::new();
        for entry in dir.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                if now.duration_since(modified).unwrap_or_default() > STALE_TEMP {
                    let _ = fs::remove_file(entry.path());
                }
                continue;
            }
            if meta.is_file() {
                out.push((modified, meta.len(), entry.path()));
            }
        }
        out
    }

    /// Deletes the least recently used blocks until the folder holds at most 90% of the bound.
    fn evict(&self) {
        let mut entries = self.entries();
        entries.sort();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        let target = self.max_bytes / 10 * 9;
        for (_, size, path) in entries {
            if total <= target {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(size);
            }
        }
        self.used.store(total, Ordering::Relaxed);
    }
}

/// Reads `part` (default: all) of the block in the cache file at `path` for `key`. `Err` when
/// the file cannot be read (a miss); `Ok(None)` when it is not a good block for `key` (to be
/// deleted): another layout or key, a length other than `block_len` or the file's, a CRC
/// mismatch in a piece that holds `part`.
fn read_part(
    path: &Path,
    key: &str,
    block_len: Option<u64>,
    part: Option<std::ops::Range<u64>>,
) -> std::io::Result<Option<Bytes>> {
    use std::os::unix::fs::FileExt;
    // A regular file only, opened without blocking (a FIFO here would hang the reader).
    let (file, file_len) = match super::local::open_read_limited(path, u64::MAX) {
        Ok(opened) => opened,
        Err(crate::error::Error::Io { source, .. }) => {
            return Err(std::sync::Arc::try_unwrap(source)
                .unwrap_or_else(|shared| std::io::Error::new(shared.kind(), shared.to_string())))
        }
        Err(_) => return Ok(None),
    };
    let fixed = MAGIC.len() + 4 + key.len() + 8;
    let mut head = vec![0u8; fixed];
    if file.read_exact_at(&mut head, 0).is_err()
        || !head.starts_with(MAGIC)
        || head[MAGIC.len()..MAGIC.len() + 4] != (key.len() as u32).to_le_bytes()
        || &head[MAGIC.len() + 4..fixed - 8] != key.as_bytes()
    {
        return Ok(None);
    }
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&head[fixed - 8..]);
    let len = u64::from_le_bytes(len8);
    let pieces = len.div_ceil(PIECE);
    let data_at = fixed as u64 + 4 * pieces;
    if block_len.is_some_and(|b| b != len) || data_at.checked_add(len) != Some(file_len) {
        return Ok(None);
    }
    let part = part.unwrap_or(0..len);
    if part.start > part.end || part.end > len {
        // The caller's mistake, not the file's: a miss, the block stays.
        return Err(std::io::Error::other("range outside the block"));
    }
    if part.is_empty() {
        return Ok(Some(Bytes::new()));
    }
    // The pieces that hold `part`, and their CRCs.
    let (first, last) = (part.start / PIECE, (part.end - 1) / PIECE);
    let mut crcs = vec![0u8; 4 * (last - first + 1) as usize];
    let mut bytes = vec![0u8; ((last + 1) * PIECE).min(len) as usize - (first * PIECE) as usize];
    if file
        .read_exact_at(&mut crcs, fixed as u64 + 4 * first)
        .is_err()
        || file
            .read_exact_at(&mut bytes, data_at + first * PIECE)
            .is_err()
    {
        return Ok(None);
    }
    for (piece, crc) in bytes.chunks(PIECE as usize).zip(crcs.chunks_exact(4)) {
        if crc32fast::hash(piece).to_le_bytes() != crc {
            return Ok(None);
        }
    }
    let from = (part.start - first * PIECE) as usize;
    let mut bytes = Bytes::from(bytes);
    Ok(Some(
        bytes
            .split_off(from)
            .split_to((part.end - part.start) as usize),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_damage_and_collisions() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path(), 1 << 20, 4096).unwrap();
        assert!(cache.get("s3://b/p/data_0.gulp@10:e1", 0).is_none());
        cache.put("s3://b/p/data_0.gulp@10:e1", 0, b"0123456789");
        assert_eq!(
            cache.get("s3://b/p/data_0.gulp@10:e1", 0).as_deref(),
            Some(&b"0123456789"[..])
        );
        // Another version of the object is another key.
        assert!(cache.get("s3://b/p/data_0.gulp@10:e2", 0).is_none());
        // A flipped byte in the file: not served, and the file is gone.
        let path = cache.path("s3://b/p/data_0.gulp@10:e1", 0);
        let mut raw = fs::read(&path).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        fs::write(&path, raw).unwrap();
        assert!(cache.get("s3://b/p/data_0.gulp@10:e1", 0).is_none());
        assert!(!path.exists());
        // A file holding another key under this name (a hash collision): not served.
        cache.put("other", 0, b"x");
        fs::rename(cache.path("other", 0), cache.path("k", 3)).unwrap();
        assert!(cache.get("k", 3).is_none());
    }

    #[test]
    fn parts_of_a_block() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path(), 1 << 20, 4096).unwrap();
        assert!(cache.read("k", 0, Some(10), Some(2..5)).is_none());
        cache.put("k", 0, b"0123456789");
        assert_eq!(
            cache.read("k", 0, Some(10), Some(2..5)).as_deref(),
            Some(&b"234"[..])
        );
        assert_eq!(
            cache.read("k", 0, Some(10), Some(0..10)).as_deref(),
            Some(&b"0123456789"[..])
        );
        assert!(
            cache.read("k", 0, Some(10), Some(8..11)).is_none(),
            "past the block"
        );
        // Another key's file under this name: not served, deleted.
        fs::rename(cache.path("k", 0), cache.path("q", 0)).unwrap();
        assert!(cache.read("q", 0, Some(10), Some(0..1)).is_none());
        assert!(!cache.path("q", 0).exists());
        // A block of another length (cut, or the object changed): not served, deleted.
        cache.put("k", 1, b"01234");
        assert!(cache.read("k", 1, Some(10), Some(0..1)).is_none());
        assert!(!cache.path("k", 1).exists());
        // A block of many pieces: a flipped byte fails the reads of its piece only (and the
        // first failure deletes the file).
        let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        cache.put("b", 0, &big);
        let path = cache.path("b", 0);
        let mut raw = fs::read(&path).unwrap();
        let at = raw.len() - big.len() + 150_000; // in the third piece
        raw[at] ^= 1;
        fs::write(&path, &raw).unwrap();
        let n = big.len() as u64;
        assert_eq!(
            cache.read("b", 0, Some(n), Some(10..20)).as_deref(),
            Some(&big[10..20])
        );
        assert_eq!(
            cache.read("b", 0, Some(n), Some(65_530..65_540)).as_deref(),
            Some(&big[65_530..65_540]),
            "across two good pieces"
        );
        assert!(cache
            .read("b", 0, Some(n), Some(140_000..140_010))
            .is_none());
        assert!(!path.exists());
    }

    #[test]
    fn bounded_by_evicting_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path(), 10_000, 4096).unwrap();
        let block = vec![7u8; 3000];
        for i in 0..3 {
            cache.put("obj", i, &block);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(cache.get("obj", 0).is_some()); // now the most recently used
        std::thread::sleep(Duration::from_millis(20));
        cache.put("obj", 3, &block); // over 10,000: evict down to 9,000
        let size: u64 = cache.entries().iter().map(|e| e.1).sum();
        assert!(size <= 10_000, "{size}");
        assert!(
            cache.get("obj", 0).is_some(),
            "a recently used block was evicted"
        );
        assert!(cache.get("obj", 1).is_none(), "the oldest block was kept");
        cache.invalidate("obj", 0..1);
        assert!(cache.get("obj", 0).is_none());
    }
}
