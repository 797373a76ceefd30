//! The bytes of the base a reader opened (docs/FORMAT.md §7.5): mapped locally, so that every
//! process on the machine shares its pages; fetched by range from an object store and kept,
//! the front whole (read at open, in one request when `LATEST` gives its length) and each page
//! once fetched. A page that fails its check is dropped and fetched again (rule M4).

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::format::manifest::Source;
use crate::format::Storage;
use crate::io::RemoteStore;

/// Pages kept per opened base before the oldest are dropped: 16 MiB of 64 KiB pages.
const MAX_PAGES: usize = 256;

pub enum BaseBytes {
    Mapped(Storage),
    Fetched(Fetched),
}

pub struct Fetched {
    store: Arc<RemoteStore>,
    name: String,
    /// `[0, front_len)`, checked whole at open.
    front: Vec<u8>,
    /// The whole file when it was fetched with the front (a small base), until a page of it
    /// fails a check.
    whole: Mutex<Option<Arc<Vec<u8>>>>,
    pages: Mutex<Pages>,
}

/// Fetched pages by byte range.
type Pages = HashMap<(u64, u64), Arc<Vec<u8>>>;

impl Fetched {
    /// `bytes` is the file's start: its front (`front_len` bytes) or more.
    pub fn new(
        store: Arc<RemoteStore>,
        name: String,
        mut bytes: Vec<u8>,
        front_len: usize,
    ) -> Fetched {
        let whole = (bytes.len() > front_len).then(|| Arc::new(bytes.clone()));
        bytes.truncate(front_len);
        Fetched {
            store,
            name,
            front: bytes,
            whole: Mutex::new(whole),
            pages: Mutex::new(HashMap::new()),
        }
    }

    fn fetch(&self, range: Range<u64>) -> Result<Arc<Vec<u8>>, String> {
        let whole = self.whole.lock().ok().and_then(|w| w.clone());
        if let Some(w) = whole.filter(|w| range.end <= w.len() as u64) {
            return Ok(Arc::new(
                w[range.start as usize..range.end as usize].to_vec(),
            ));
        }
        let key = (range.start, range.end);
        if let Some(p) = self.pages.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(p);
        }
        let bytes = self
            .store
            .read_range(&self.name, range)
            .map_err(|e| e.to_string())?;
        let page = Arc::new(bytes.to_vec());
        if let Ok(mut m) = self.pages.lock() {
            if m.len() >= MAX_PAGES {
                m.clear();
            }
            m.insert(key, page.clone());
        }
        Ok(page)
    }
}

impl BaseBytes {
    /// Drops every fetched page, so that a page that failed its check is fetched again.
    pub fn forget(&self) {
        if let BaseBytes::Fetched(f) = self {
            if let Ok(mut m) = f.pages.lock() {
                m.clear();
            }
            if let Ok(mut w) = f.whole.lock() {
                *w = None;
            }
        }
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, BaseBytes::Fetched(_))
    }
}

impl Source for BaseBytes {
    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, String> {
        match self {
            BaseBytes::Mapped(s) => s.read(offset, len),
            BaseBytes::Fetched(f) => {
                let end = offset
                    .checked_add(len)
                    .ok_or_else(|| format!("bytes {offset}+{len} were asked for"))?;
                if end <= f.front.len() as u64 {
                    return Ok(Cow::Borrowed(&f.front[offset as usize..end as usize]));
                }
                let page = f.fetch(offset..end)?;
                Ok(Cow::Owned(page.as_ref().clone()))
            }
        }
    }
}
