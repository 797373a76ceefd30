//! The state an open saw, carried to another process (a pickled `GulpDirectory`, a DataLoader
//! worker) so that it opens the same state: the same videos at the same positions, whatever
//! writers committed since (docs/FORMAT.md §7.5, "Copies of an open"). Not a file of the
//! dataset: bytes the library writes and reads back, checked like everything it reads.

use super::state::BaseFile;
use crate::format::manifest::{decode_hint, encode_hint, Hint, HINT_LEN};

const MAGIC: [u8; 8] = *b"GULPPIN\0";
const LAYOUT: u32 = 1;
/// A pin names at most this many pending operations (a state with more opens by listing
/// before it is ever pinned: the base's pending table is bounded by the same figure).
const MAX_PENDING: u64 = 1 << 20;

/// What a copy needs to open the state at `version` from the same base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The dataset's id (§7.2): a pin opens no other dataset.
    pub dataset_id: [u8; 16],
    pub version: u64,
    pub base_version: u64,
    /// The base's name in the dataset, whether it is a snapshot, and the `LATEST` that named
    /// it (its front and file lengths save a request remotely).
    pub base_name: String,
    pub is_snapshot: bool,
    pub hint: Option<Hint>,
    /// `(chunk, version)` of the operations that had not taken effect: they stay out of the
    /// copy's state even if published since.
    pub pending: Vec<(u64, u64)>,
    /// Videos in the state: the copy's must be the same number.
    pub total: u64,
}

impl Pin {
    pub(super) fn base_file(&self, path: std::path::PathBuf) -> BaseFile {
        BaseFile {
            name: self.base_name.clone(),
            path,
            version: self.base_version,
            is_snapshot: self.is_snapshot,
            hint: self.hint.clone(),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b =
            Vec::with_capacity(64 + self.base_name.len() + HINT_LEN + 16 * self.pending.len());
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&LAYOUT.to_le_bytes());
        b.extend_from_slice(&self.dataset_id);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&self.base_version.to_le_bytes());
        b.push(u8::from(self.is_snapshot));
        b.extend_from_slice(&(self.base_name.len() as u32).to_le_bytes());
        b.extend_from_slice(self.base_name.as_bytes());
        match &self.hint {
            Some(h) => {
                b.push(1);
                b.extend_from_slice(&encode_hint(h));
            }
            None => b.push(0),
        }
        b.extend_from_slice(&self.total.to_le_bytes());
        b.extend_from_slice(&(self.pending.len() as u64).to_le_bytes());
        for (k, v) in &self.pending {
            b.extend_from_slice(&k.to_le_bytes());
            b.extend_from_slice(&v.to_le_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Result<Pin, String> {
        let body = b
            .len()
            .checked_sub(4)
            .filter(|&n| n >= MAGIC.len())
            .ok_or("a pinned state is too short")?;
        let crc = u32::from_le_bytes([b[body], b[body + 1], b[body + 2], b[body + 3]]);
        if b[..8] != MAGIC || crc32fast::hash(&b[..body]) != crc {
            return Err("not a pinned state (bad magic or CRC)".into());
        }
        let mut r = Reader {
            b: &b[..body],
            at: 8,
        };
        if r.u32()? != LAYOUT {
            return Err("a pinned state of another layout (made by another gulpio-rs)".into());
        }
        let mut dataset_id = [0u8; 16];
        dataset_id.copy_from_slice(r.take(16)?);
        let version = r.u64()?;
        let base_version = r.u64()?;
        let is_snapshot = r.u8()? == 1;
        let name_len = r.u32()? as usize;
        let base_name = String::from_utf8(r.take(name_len)?.to_vec())
            .map_err(|_| "a pinned state's base name is not UTF-8")?;
        let hint = match r.u8()? {
            1 => Some(decode_hint(r.take(HINT_LEN)?)?),
            _ => None,
        };
        let total = r.u64()?;
        let count = r.u64()?;
        if count > MAX_PENDING || base_version > version || !is_base_name(&base_name) {
            return Err("a pinned state out of range".into());
        }
        let mut pending = Vec::with_capacity(count as usize);
        for _ in 0..count {
            pending.push((r.u64()?, r.u64()?));
        }
        if r.at != r.b.len() {
            return Err("a pinned state with trailing bytes".into());
        }
        Ok(Pin {
            dataset_id,
            version,
            base_version,
            base_name,
            is_snapshot,
            hint,
            pending,
            total,
        })
    }
}

/// A name `locate_base` can give: the genesis commit, a snapshot or a body, nothing else.
fn is_base_name(name: &str) -> bool {
    let plain = |rest: &str| {
        rest.strip_suffix(".gman").is_some_and(|stem| {
            !stem.is_empty() && stem.bytes().all(|c| c.is_ascii_hexdigit() || c == b'-')
        })
    };
    name == super::log_name(0)
        || name
            .strip_prefix(super::DIR)
            .and_then(|r| {
                r.strip_prefix("/snap/")
                    .or_else(|| r.strip_prefix("/body/"))
            })
            .is_some_and(plain)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or("a pinned state is cut short")?;
        let out = &self.b[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
}
