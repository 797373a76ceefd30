//! Reading a remote dataset: the listing, small files whole, and frame bytes as concurrent
//! range requests (through the local block cache when there is one).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use futures::stream::{self, StreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use super::fetch::fetch_range;
use super::readahead::{from_pending, Pending};
use super::retry::{retrying, Failure, Policy};
use super::{runtime, RemoteStore};
use crate::error::{Error, Result};

impl RemoteStore {
    /// The files directly under the dataset's prefix: `(name, size)`, sorted by name.
    pub fn list(&self) -> Result<Vec<(String, u64)>> {
        let client = self.client()?;
        let prefix = self.prefix.clone();
        // The whole listing (every page) is one attempt: a body cut mid-page is retried like
        // any transient fault.
        let listed = runtime::block_on(retrying(self.policy(), || {
            let (client, prefix) = (client.clone(), prefix.clone());
            async move {
                let p = (!prefix.as_ref().is_empty()).then_some(&prefix);
                client.list_with_delimiter(p).await
            }
        }))?
        .map_err(|f| self.failed("", f))?;
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

    /// The names of the objects directly in folder `dir` below the dataset's prefix (such as
    /// `_gulpio/snap`), sorted; every page of the listing.
    pub fn list_in(&self, dir: &str) -> Result<Vec<String>> {
        let client = self.client()?;
        let folder = self.key(dir);
        let listed = runtime::block_on(retrying(self.policy(), || {
            let (client, folder) = (client.clone(), folder.clone());
            async move { client.list_with_delimiter(Some(&folder)).await }
        }))?
        .map_err(|f| self.failed(dir, f))?;
        let mut out: Vec<String> = listed
            .objects
            .into_iter()
            .filter_map(|m| Some(m.location.filename()?.to_owned()))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The size of `name`.
    pub fn size(&self, name: &str) -> Result<u64> {
        let client = self.client()?;
        let key = self.key(name);
        let meta = runtime::block_on(retrying(self.policy(), || {
            let (client, key) = (client.clone(), key.clone());
            async move { client.head(&key).await }
        }))?
        .map_err(|f| self.failed(name, f))?;
        Ok(meta.size)
    }

    /// The whole of `name`.
    pub fn read_all(&self, name: &str) -> Result<Bytes> {
        let client = self.client()?;
        let key = self.key(name);
        let got = runtime::block_on(retrying(self.policy(), || {
            let (client, key) = (client.clone(), key.clone());
            async move { client.get(&key).await?.bytes().await }
        }))?;
        got.map_err(|f| self.failed(name, f))
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
        if let Some((name, r)) = items.iter().find(|(_, r)| r.start > r.end) {
            return Err(Error::Internal(format!(
                "{}: byte range {r:?} runs backwards",
                self.url_of(name)
            )));
        }
        match &self.cache {
            Some(cache) => self.read_cached(cache, items, each),
            None => self.fetch_named_ranges(items, each),
        }
    }

    /// The size of `name` in the last listing, if it was listed.
    pub(super) fn listed_size(&self, name: &str) -> Option<u64> {
        Some(self.versions.lock().ok()?.get(name)?.0)
    }

    /// The cache's key for `name`: the object's URL and version (None when it was not listed).
    pub(super) fn cache_key(&self, name: &str) -> Option<(String, u64)> {
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

    /// Forgets every cached byte of `name` (a fetch of it failed a check).
    pub fn forget(&self, name: &str) {
        if let Some((_, size)) = self.cache_key(name) {
            self.invalidate(name, std::slice::from_ref(&(0..size)));
        }
    }

    /// Serves `items` from cached blocks, reading from each block file only the part an item
    /// needs; the blocks that are missing are fetched whole (all at once, as one concurrent
    /// stream) and stored. Items of objects the listing did not show are fetched directly.
    fn read_cached(
        &self,
        cache: &crate::io::cache::DiskCache,
        items: &[(String, Range<u64>)],
        mut each: impl FnMut(usize, Result<Bytes>),
    ) -> Result<()> {
        use std::collections::{BTreeMap, HashMap};
        let b = cache.block();
        // The blocks of `key` (an object of `size` bytes) that `r` spans: (index, block range
        // in the object, the part of the block `r` needs).
        let spans = |r: &Range<u64>, size: u64| {
            let r = r.clone();
            (r.start / b..=(r.end - 1) / b).map(move |index| {
                let start = index * b;
                let end = (start + b).min(size);
                (
                    index,
                    start..end,
                    r.start.max(start) - start..r.end.min(end) - start,
                )
            })
        };
        let mut direct = Vec::new();
        let mut waiting: Vec<(usize, String, u64)> = Vec::new();
        // (cache key, block index) -> the object's name and the block's range in it.
        type BlockKey = (String, u64);
        let mut missing: BTreeMap<BlockKey, (String, Range<u64>)> = BTreeMap::new();
        for (i, (name, r)) in items.iter().enumerate() {
            let Some((key, size)) = self.cache_key(name).filter(|(_, size)| r.end <= *size) else {
                direct.push(i);
                continue;
            };
            if r.is_empty() {
                direct.push(i);
                continue;
            }
            let mut out = match self.buffer(name, r) {
                Ok(out) => out,
                Err(e) => {
                    each(i, Err(e));
                    continue;
                }
            };
            let mut whole = true;
            for (index, block, part) in spans(r, size) {
                match cache.read(&key, index, Some(block.end - block.start), Some(part)) {
                    Some(piece) if whole => out.extend_from_slice(&piece),
                    Some(_) => {}
                    None => {
                        whole = false;
                        missing.insert((key.clone(), index), (name.clone(), block));
                    }
                }
            }
            if whole {
                each(i, Ok(Bytes::from(out)));
            } else {
                waiting.push((i, key, size));
            }
        }
        let missing: Vec<(BlockKey, (String, Range<u64>))> = missing.into_iter().collect();
        let fetch: Vec<(String, Range<u64>)> = missing.iter().map(|(_, f)| f.clone()).collect();
        let mut fetched: HashMap<BlockKey, Bytes> = HashMap::new();
        // A block that could not be fetched stays missing: its items are fetched directly below.
        self.fetch_named_ranges(&fetch, |j, got| {
            if let Ok(bytes) = got {
                let (key, index) = &missing[j].0;
                cache.put(key, *index, &bytes);
                fetched.insert((key.clone(), *index), bytes);
            }
        })?;
        for (i, key, size) in waiting {
            let (name, r) = &items[i];
            let mut out = match self.buffer(name, r) {
                Ok(out) => out,
                Err(e) => {
                    each(i, Err(e));
                    continue;
                }
            };
            for (index, block, part) in spans(r, size) {
                let piece = match fetched.get(&(key.clone(), index)) {
                    Some(bytes) => bytes
                        .get(part.start as usize..part.end as usize)
                        .map(|p| p.to_vec()),
                    None => cache
                        .read(&key, index, Some(block.end - block.start), Some(part))
                        .map(|p| p.to_vec()),
                };
                match piece {
                    Some(p) => out.extend_from_slice(&p),
                    None => break,
                }
            }
            if out.len() as u64 == r.end - r.start {
                each(i, Ok(Bytes::from(out)));
            } else {
                direct.push(i); // a block could not be fetched, or the object changed size
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

    /// An empty buffer with room for bytes `r` of `name`; an error, not an abort, when
    /// memory for it cannot be had.
    fn buffer(&self, name: &str, r: &Range<u64>) -> Result<Vec<u8>> {
        let len = r.end.saturating_sub(r.start);
        let mut out = Vec::new();
        usize::try_from(len)
            .ok()
            .and_then(|n| out.try_reserve_exact(n).ok())
            .ok_or_else(|| Error::OutOfMemory {
                bytes: len,
                what: format!("bytes {r:?} of {}", self.url_of(name)),
            })?;
        Ok(out)
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
        let policy = self.policy();
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Bytes, Failure>)>();
        // Ranges a read-ahead is fetching (or has fetched) are taken from it. The requests are
        // boxed here, outside the spawned task, so the task's type names no borrowed lifetime.
        let requests: Vec<BoxFuture<'static, (usize, Result<Bytes, Failure>)>> = items
            .iter()
            .enumerate()
            .map(|(i, (name, r))| {
                let (client, key, r) = (client.clone(), self.key(name), r.clone());
                let size = self.listed_size(name);
                let ahead = self.readahead.take(name, &r);
                let one = fetch_one(client, key, r, size, ahead, policy);
                // A panic in the HTTP stack fails this range, not the whole stream.
                async move {
                    let got = std::panic::AssertUnwindSafe(one)
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|p| Err(Failure::panicked(&p)));
                    (i, got)
                }
                .boxed()
            })
            .collect();
        rt.spawn(async move {
            stream::iter(requests)
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
                Ok((i, r)) => each(i, r.map_err(|f| self.failed(&items[i].0, f))),
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

/// One range: from its read-ahead when there is one that got the bytes, else from the store.
async fn fetch_one(
    client: Arc<dyn ObjectStore>,
    key: ObjectPath,
    r: Range<u64>,
    size: Option<u64>,
    ahead: Option<(Pending, usize)>,
    policy: Policy,
) -> Result<Bytes, Failure> {
    if let Some((pending, offset)) = ahead {
        let len = (r.end - r.start) as usize;
        if let Some(bytes) = from_pending(pending, offset, len).await {
            return Ok(bytes);
        }
    }
    fetch_range(client, key, r, size, policy).await
}
