//! Reading a remote dataset: the listing, small files whole, and frame bytes as concurrent
//! range requests (through the local block cache when there is one).

use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use super::{runtime, RemoteStore};
use crate::error::{Error, Result};

impl RemoteStore {
    /// The files directly under the dataset's prefix: `(name, size)`, sorted by name.
    pub fn list(&self) -> Result<Vec<(String, u64)>> {
        let client = self.client()?;
        let prefix = self.prefix.clone();
        let listed = runtime::block_on(async move {
            let p = if prefix.as_ref().is_empty() {
                None
            } else {
                Some(&prefix)
            };
            client.list_with_delimiter(p).await
        })?
        .map_err(|e| self.error("", e))?;
        let mut versions = std::collections::HashMap::new();
        let mut out: Vec<(String, u64)> = listed
            .objects
            .into_iter()
            .filter_map(|m| {
                let name = m.location.filename()?.to_owned();
                let version = m
                    .e_tag
                    .clone()
                    .unwrap_or_else(|| format!("{:?}", m.last_modified));
                versions.insert(name.clone(), (m.size, version));
                Some((name, m.size))
            })
            .collect();
        out.sort();
        if let Ok(mut v) = self.versions.lock() {
            *v = versions;
        }
        Ok(out)
    }

    /// The size of `name`.
    pub fn size(&self, name: &str) -> Result<u64> {
        let client = self.client()?;
        let key = self.key(name);
        let meta = runtime::block_on(async move { client.head(&key).await })?
            .map_err(|e| self.error(name, e))?;
        Ok(meta.size)
    }

    /// The whole of `name`.
    pub fn read_all(&self, name: &str) -> Result<Bytes> {
        let client = self.client()?;
        let key = self.key(name);
        let got = runtime::block_on(async move {
            match client.get(&key).await {
                Ok(r) => r.bytes().await,
                Err(e) => Err(e),
            }
        })?;
        got.map_err(|e| self.error(name, e))
    }

    /// Bytes `range` of `name`, exactly (a short body is retried, then an error).
    pub fn read_range(&self, name: &str, range: Range<u64>) -> Result<Bytes> {
        let mut out = None;
        self.read_ranges(name, std::slice::from_ref(&range), |_, r| out = Some(r))?;
        out.unwrap_or_else(|| Err(Error::Internal("range request produced no result".into())))
    }

    /// Fetches `ranges` of `name` concurrently (at most `concurrency` in flight) and calls
    /// `each(i, bytes)` on the calling thread as each arrives, in completion order, so the
    /// caller can start decoding before the last range is in.
    pub fn read_ranges(
        &self,
        name: &str,
        ranges: &[Range<u64>],
        each: impl FnMut(usize, Result<Bytes>),
    ) -> Result<()> {
        let items: Vec<(String, Range<u64>)> = ranges
            .iter()
            .map(|r| (name.to_owned(), r.clone()))
            .collect();
        self.read_named_ranges(&items, each)
    }

    /// [`RemoteStore::read_ranges`] over ranges of several objects: `items[i] = (name,
    /// range)`, all in one stream of at most `concurrency` requests in flight; through the
    /// local block cache when there is one.
    pub fn read_named_ranges(
        &self,
        items: &[(String, Range<u64>)],
        each: impl FnMut(usize, Result<Bytes>),
    ) -> Result<()> {
        match &self.cache {
            Some(cache) => self.read_cached(cache, items, each),
            None => self.fetch_named_ranges(items, each),
        }
    }

    /// The cache's key for `name`: the object's URL and version (None when it was not listed).
    fn cache_key(&self, name: &str) -> Option<(String, u64)> {
        let versions = self.versions.lock().ok()?;
        let (size, version) = versions.get(name)?;
        Some((format!("{}@{size}:{version}", self.url_of(name)), *size))
    }

    /// Forgets cached bytes of `name` covering `ranges` (they failed a CRC check), so that
    /// the next read fetches them from the store.
    pub fn invalidate(&self, name: &str, ranges: &[Range<u64>]) {
        if let (Some(cache), Some((key, _))) = (&self.cache, self.cache_key(name)) {
            for r in ranges {
                cache.invalidate(&key, r.clone());
            }
        }
    }

    /// Serves `items` from cached blocks, fetching the missing blocks (all at once, as one
    /// concurrent stream) and storing them. Items of objects the listing did not show are
    /// fetched directly.
    fn read_cached(
        &self,
        cache: &crate::io::cache::DiskCache,
        items: &[(String, Range<u64>)],
        mut each: impl FnMut(usize, Result<Bytes>),
    ) -> Result<()> {
        use std::collections::BTreeMap;
        let b = cache.block();
        let mut blocks: BTreeMap<(usize, u64), Option<Bytes>> = BTreeMap::new();
        let mut keys: Vec<Option<(String, u64)>> = Vec::with_capacity(items.len());
        let mut direct = Vec::new();
        for (i, (name, r)) in items.iter().enumerate() {
            let key = self.cache_key(name).filter(|(_, size)| r.end <= *size);
            if key.is_none() || r.is_empty() {
                direct.push(i);
            } else {
                for index in r.start / b..=(r.end - 1) / b {
                    blocks.entry((i, index)).or_insert(None);
                }
            }
            keys.push(key);
        }
        // One entry per (object, block), whichever items share it.
        let mut unique: BTreeMap<(String, u64), Option<Bytes>> = BTreeMap::new();
        for &(i, index) in blocks.keys() {
            if let Some((key, _)) = &keys[i] {
                unique.entry((key.clone(), index)).or_insert(None);
            }
        }
        for ((key, index), slot) in unique.iter_mut() {
            *slot = cache.get(key, *index);
        }
        let mut fetch_items = Vec::new();
        let mut fetch_keys = Vec::new();
        for ((key, index), slot) in &unique {
            if slot.is_some() {
                continue;
            }
            // The name and size of the object this key belongs to.
            let Some((i, _)) = blocks
                .keys()
                .find(|(i, idx)| idx == index && keys[*i].as_ref().is_some_and(|k| &k.0 == key))
            else {
                continue;
            };
            let size = keys[*i].as_ref().map_or(0, |k| k.1);
            let start = index * b;
            fetch_items.push((items[*i].0.clone(), start..(start + b).min(size)));
            fetch_keys.push((key.clone(), *index));
        }
        // A block that could not be fetched stays None: its items are fetched directly below.
        self.fetch_named_ranges(&fetch_items, |j, got| {
            if let Ok(bytes) = got {
                let (key, index) = &fetch_keys[j];
                cache.put(key, *index, &bytes);
                unique.insert((key.clone(), *index), Some(bytes));
            }
        })?;
        for (i, (_, r)) in items.iter().enumerate() {
            let Some((key, _)) = &keys[i] else { continue };
            if direct.contains(&i) {
                continue;
            }
            let first = r.start / b;
            let parts: Option<Vec<&Bytes>> = (first..=(r.end - 1) / b)
                .map(|index| unique.get(&(key.clone(), index)).and_then(|x| x.as_ref()))
                .collect();
            let Some(parts) = parts else {
                direct.push(i);
                continue;
            };
            // Cut the item's range out of its blocks (block n covers first*b + n*b ..).
            let mut out = Vec::with_capacity((r.end - r.start) as usize);
            for (n, part) in parts.iter().enumerate() {
                let block_start = (first + n as u64) * b;
                let lo = r.start.saturating_sub(block_start) as usize;
                let hi = ((r.end - block_start) as usize).min(part.len());
                match part.get(lo..hi) {
                    Some(piece) => out.extend_from_slice(piece),
                    None => break,
                }
            }
            if out.len() as u64 == r.end - r.start {
                each(i, Ok(Bytes::from(out)));
            } else {
                direct.push(i); // a short block (the object changed size): ask the store
            }
        }
        // Objects not listed, and items whose blocks could not be fetched: directly, so the
        // error (if any) is the store's own, for this item's range.
        if !direct.is_empty() {
            let ranges: Vec<(String, Range<u64>)> =
                direct.iter().map(|&i| items[i].clone()).collect();
            self.fetch_named_ranges(&ranges, |j, got| each(direct[j], got))?;
        }
        Ok(())
    }

    /// [`RemoteStore::read_named_ranges`] without the cache.
    fn fetch_named_ranges(
        &self,
        items: &[(String, Range<u64>)],
        mut each: impl FnMut(usize, Result<Bytes>),
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let client = self.client()?;
        let (rt, _) = runtime::runtime()?;
        let concurrency = self.settings.concurrency.max(1);
        let (tx, rx) = std::sync::mpsc::channel::<(usize, object_store::Result<Bytes>)>();
        let owned: Vec<(usize, ObjectPath, Range<u64>)> = items
            .iter()
            .enumerate()
            .map(|(i, (name, r))| (i, self.key(name), r.clone()))
            .collect();
        rt.spawn(async move {
            stream::iter(owned)
                .map(|(i, key, r)| {
                    let client = client.clone();
                    async move { (i, get_exact(client.as_ref(), &key, r).await) }
                })
                .buffer_unordered(concurrency)
                .for_each(|res| {
                    // The receiver may have gone (the caller failed early): nothing to do.
                    let _ = tx.send(res);
                    async {}
                })
                .await;
        });
        for _ in 0..items.len() {
            match rx.recv() {
                Ok((i, r)) => each(i, r.map_err(|e| self.error(&items[i].0, e))),
                Err(_) => {
                    return Err(Error::Internal(
                        "the I/O runtime stopped before all ranges arrived".into(),
                    ))
                }
            }
        }
        Ok(())
    }
}

/// `get_range`, checked to have returned exactly the bytes asked for: a body cut short by the
/// server or a proxy is retried (with backoff) like any transient fault, never returned.
async fn get_exact(
    client: &dyn ObjectStore,
    key: &ObjectPath,
    range: Range<u64>,
) -> object_store::Result<Bytes> {
    let want = range.end - range.start;
    let mut delay = Duration::from_millis(50);
    let mut last = None;
    for _ in 0..4 {
        match client.get_range(key, range.clone()).await {
            Ok(b) if b.len() as u64 == want => return Ok(b),
            Ok(b) => {
                last = Some(object_store::Error::Generic {
                    store: "gulpio",
                    source: format!("short body: {} of {want} bytes", b.len()).into(),
                })
            }
            Err(e) => return Err(e),
        }
        tokio::time::sleep(jitter(delay)).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
    Err(last.unwrap_or_else(|| object_store::Error::Generic {
        store: "gulpio",
        source: "short body".into(),
    }))
}

/// A random duration in `[d/2, d)`, so clients that failed together do not retry together.
fn jitter(d: Duration) -> Duration {
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;
    let r = RandomState::new().hash_one(std::time::Instant::now()) % 1000;
    d / 2 + d.mul_f64(r as f64 / 2000.0)
}
