//! Datasets in object stores (S3 and compatibles, GCS, Azure, plain HTTP) through the Arrow
//! project's `object_store` crate. Every request runs on the process's one I/O runtime; the
//! client is rebuilt after `fork()` (its connection pool is the parent's).
//!
//! Credentials and endpoints come from the standard environment variables of each cloud
//! (`AWS_*`, `GOOGLE_*`, `AZURE_*`) and from `storage_options` (the keys `object_store` and
//! polars accept), options winning. Secrets never appear in a message: every message built
//! here passes through [`RemoteStore::redact`].

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme, RetryConfig};
use url::Url;

use super::runtime;
use crate::error::{Error, RemoteKind, Result};

/// Settings of ours (not `object_store`'s), given as `storage_options` keys.
#[derive(Debug, Clone)]
pub struct RemoteSettings {
    /// Requests in flight at once per batch.
    pub concurrency: usize,
    /// Attempts after the first for one request (timeouts, resets, 429, 5xx, short bodies).
    pub max_retries: usize,
    /// Bound on the total time spent retrying one request.
    pub retry_timeout: Duration,
    /// Time limit of one request.
    pub timeout: Duration,
}

impl Default for RemoteSettings {
    fn default() -> Self {
        RemoteSettings {
            concurrency: 32,
            max_retries: 8,
            retry_timeout: Duration::from_secs(60),
            timeout: Duration::from_secs(30),
        }
    }
}

/// Keys that hold secrets (matched on the lower-cased key).
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "secret",
        "token",
        "password",
        "sas",
        "access_key",
        "account_key",
        "credential",
    ]
    .iter()
    .any(|s| k.contains(s))
        && !k.ends_with("_id")
        && !k.contains("access_key_id")
}

/// Environment variables whose values are secrets, for redaction.
const SECRET_ENV: &[&str] = &[
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
];

pub struct RemoteStore {
    /// The dataset's URL as given, without user info or query (printed in messages).
    url: String,
    scheme: ObjectStoreScheme,
    /// The dataset's prefix inside the bucket/container.
    prefix: ObjectPath,
    /// `object_store` options (may hold secrets: never printed).
    options: Vec<(String, String)>,
    secrets: Vec<String>,
    credential_source: String,
    settings: RemoteSettings,
    /// The client and the pid it was built in.
    client: Mutex<Option<(u32, Arc<dyn ObjectStore>)>>,
    /// The local block cache (`cache_dir`), if any.
    cache: Option<super::cache::DiskCache>,
    /// `name -> (size, ETag or modification time)` from the last listing: the identity of an
    /// object in the cache (nothing is cached for objects not listed).
    versions: Mutex<std::collections::HashMap<String, (u64, String)>>,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore")
            .field("url", &self.url)
            .field("credentials", &self.credential_source)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// True for strings this module handles: `scheme://...` other than `file://`.
pub fn is_remote_url(s: &str) -> bool {
    match s.split_once("://") {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme != "file"
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.')
        }
        None => false,
    }
}

fn printable(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string().trim_end_matches('/').to_owned()
}

impl RemoteStore {
    /// A store for the dataset at `url` (`s3://bucket/prefix`, `gs://`, `az://`, `abfs://`,
    /// `http(s)://`), configured from the environment and `options`.
    pub fn new(url: &str, options: &[(String, String)]) -> Result<RemoteStore> {
        let config = |msg: String| Error::Remote {
            url: url.split('?').next().unwrap_or(url).to_owned(),
            kind: RemoteKind::Config,
            msg,
        };
        let parsed = Url::parse(url).map_err(|e| config(format!("not a valid URL: {e}")))?;
        let (scheme, prefix) = ObjectStoreScheme::parse(&parsed).map_err(|_| {
            config(format!(
                "unsupported URL scheme {:?} (s3://, gs://, az://, abfs://, http(s)://)",
                parsed.scheme()
            ))
        })?;
        if matches!(scheme, ObjectStoreScheme::Local | ObjectStoreScheme::Memory) {
            return Err(config("not a remote URL".into()));
        }
        let mut settings = RemoteSettings::default();
        let mut store_options = Vec::new();
        let mut profile_name = None;
        let (mut cache_dir, mut cache_size, mut cache_block) = (None, None, None);
        for (k, v) in options {
            let bad = |what: &str| config(format!("storage option {k:?}: {what}"));
            match k.to_ascii_lowercase().as_str() {
                "concurrency" => {
                    settings.concurrency = v
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| bad("a positive integer is needed"))?
                }
                "max_retries" => {
                    settings.max_retries = v
                        .parse()
                        .map_err(|_| bad("a non-negative integer is needed"))?
                }
                "retry_timeout" => {
                    settings.retry_timeout = parse_seconds(v).ok_or_else(|| bad("seconds"))?
                }
                "timeout" => {
                    settings.timeout = parse_seconds(v).ok_or_else(|| bad("seconds"))?;
                    // object_store takes a duration with its unit.
                    let ms = settings.timeout.as_millis();
                    store_options.push(("timeout".into(), format!("{ms}ms")));
                }
                "aws_profile" | "profile" => profile_name = Some(v.clone()),
                "cache_dir" => cache_dir = Some(v.clone()).filter(|d| !d.is_empty()),
                "cache_size" => {
                    cache_size = Some(parse_bytes(v).ok_or_else(|| {
                        bad("a size in bytes is needed (an integer, or with kB/MB/GB/TB/KiB/MiB/GiB/TiB)")
                    })?)
                }
                "cache_block_size" => {
                    cache_block = Some(
                        parse_bytes(v)
                            .filter(|&n| n >= 4096)
                            .ok_or_else(|| bad("a size of at least 4096 bytes is needed"))?,
                    )
                }
                _ => store_options.push((k.clone(), v.clone())),
            }
        }
        let mut profile_source = None;
        if scheme == ObjectStoreScheme::AmazonS3 {
            profile_source =
                apply_aws_profile(profile_name.as_deref(), &mut store_options).map_err(config)?;
        } else if profile_name.is_some() {
            return Err(config(
                "storage option \"aws_profile\" applies to s3:// URLs only".into(),
            ));
        }
        let mut secrets: Vec<String> = store_options
            .iter()
            .filter(|(k, v)| is_secret_key(k) && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect();
        secrets.extend(
            SECRET_ENV
                .iter()
                .filter_map(|k| std::env::var(k).ok())
                .filter(|v| v.len() >= 4),
        );
        if let Some(p) = parsed.password() {
            secrets.push(p.to_owned());
        }
        let credential_source =
            profile_source.unwrap_or_else(|| credential_source(&scheme, &store_options));
        let cache_dir = cache_dir.or_else(|| {
            std::env::var("GULPIO_CACHE_DIR")
                .ok()
                .filter(|d| !d.is_empty())
        });
        let cache_size = match cache_size {
            Some(n) => n,
            None => match std::env::var("GULPIO_CACHE_SIZE") {
                Ok(v) if !v.is_empty() => parse_bytes(&v).ok_or_else(|| {
                    config(format!("GULPIO_CACHE_SIZE={v:?} is not a size in bytes"))
                })?,
                _ => super::cache::DEFAULT_MAX_BYTES,
            },
        };
        let cache = match cache_dir {
            Some(dir) => Some(
                super::cache::DiskCache::new(
                    &dir,
                    cache_size,
                    cache_block.unwrap_or(super::cache::DEFAULT_BLOCK),
                )
                .map_err(|e| config(format!("cache_dir {dir:?} cannot be created: {e}")))?,
            ),
            None => None,
        };
        let store = RemoteStore {
            url: printable(&parsed),
            scheme,
            prefix,
            options: store_options,
            secrets,
            credential_source,
            settings,
            client: Mutex::new(None),
            cache,
            versions: Mutex::new(Default::default()),
        };
        // Build once now so configuration errors (unknown keys, bad values) surface at open.
        store.client()?;
        Ok(store)
    }

    /// A store over an existing client (tests, and stores built by the caller).
    pub fn from_client(
        url: &str,
        client: Arc<dyn ObjectStore>,
        settings: RemoteSettings,
    ) -> RemoteStore {
        let prefix = Url::parse(url)
            .ok()
            .and_then(|u| ObjectStoreScheme::parse(&u).ok())
            .map(|(_, p)| p)
            .unwrap_or_default();
        RemoteStore {
            url: url.trim_end_matches('/').to_owned(),
            scheme: ObjectStoreScheme::Memory,
            prefix,
            options: Vec::new(),
            secrets: Vec::new(),
            credential_source: "a client given by the caller".into(),
            settings,
            client: Mutex::new(Some((std::process::id(), client))),
            cache: None,
            versions: Mutex::new(Default::default()),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }
    pub fn settings(&self) -> &RemoteSettings {
        &self.settings
    }
    /// Where credentials come from, for messages (never the secret itself).
    pub fn credential_source(&self) -> &str {
        &self.credential_source
    }

    /// The URL of `name` inside the dataset, for messages and as the "path" of its files.
    pub fn url_of(&self, name: &str) -> String {
        format!("{}/{}", self.url, name)
    }

    fn key(&self, name: &str) -> ObjectPath {
        self.prefix.clone().join(name)
    }

    /// The client of this process; rebuilt after a fork.
    fn client(&self) -> Result<Arc<dyn ObjectStore>> {
        let pid = std::process::id();
        let mut guard = self
            .client
            .lock()
            .map_err(|_| Error::Internal("object store client lock poisoned".into()))?;
        if let Some((p, c)) = guard.as_ref() {
            if *p == pid {
                return Ok(c.clone());
            }
            if self.scheme == ObjectStoreScheme::Memory {
                // A caller-given client cannot be rebuilt; in-memory ones are fork-safe.
                return Ok(c.clone());
            }
        }
        if let Some(inherited) = guard.take() {
            // Its pooled connections are the parent's sockets; never use or close them here.
            std::mem::forget(inherited);
        }
        let client = self.build()?;
        *guard = Some((pid, client.clone()));
        Ok(client)
    }

    fn build(&self) -> Result<Arc<dyn ObjectStore>> {
        use object_store::{aws, azure, gcp, http, ClientOptions};
        let retry = RetryConfig {
            max_retries: self.settings.max_retries,
            retry_timeout: self.settings.retry_timeout,
            ..Default::default()
        };
        let fail = |e: object_store::Error| self.config_error(e.to_string());
        let url = &self.url;
        // The runtime must exist (and be this process's) before a client is made.
        runtime::runtime()?;
        // The three cloud builders share their shape: from the environment, the URL, our
        // retry policy, then every option (unknown keys are refused by the builder).
        macro_rules! cloud {
            ($builder:ty) => {{
                let mut b = <$builder>::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry);
                for (k, v) in &self.options {
                    let key = k.to_ascii_lowercase().parse().map_err(fail)?;
                    b = b.with_config(key, v);
                }
                Arc::new(b.build().map_err(fail)?)
            }};
        }
        let client: Arc<dyn ObjectStore> = match self.scheme {
            ObjectStoreScheme::AmazonS3 => cloud!(aws::AmazonS3Builder),
            ObjectStoreScheme::GoogleCloudStorage => cloud!(gcp::GoogleCloudStorageBuilder),
            ObjectStoreScheme::MicrosoftAzure => cloud!(azure::MicrosoftAzureBuilder),
            ObjectStoreScheme::Http => {
                let mut opts = ClientOptions::new().with_allow_http(true);
                for (k, v) in &self.options {
                    let key = k.to_ascii_lowercase().parse().map_err(fail)?;
                    opts = opts.with_config(key, v);
                }
                let origin = Url::parse(url)
                    .map(|mut u| {
                        u.set_path("");
                        u.to_string()
                    })
                    .map_err(|e| self.config_error(e.to_string()))?;
                Arc::new(
                    http::HttpBuilder::new()
                        .with_url(origin)
                        .with_client_options(opts)
                        .with_retry(retry)
                        .build()
                        .map_err(fail)?,
                )
            }
            _ => return Err(self.config_error("unsupported store".into())),
        };
        Ok(client)
    }

    /// Replaces every known secret in `msg`, drops query strings from URLs (Azure SAS tokens
    /// travel there) and cuts server response bodies to their first line.
    pub fn redact(&self, msg: &str) -> String {
        let mut out: String = msg
            .split(' ')
            .map(|w| match w.split_once('?') {
                Some((base, _)) if w.starts_with("http") => base,
                _ => w,
            })
            .collect::<Vec<_>>()
            .join(" ");
        if let Some(i) = out.find("<?xml") {
            out.truncate(i);
        }
        if let Some(i) = out.find('\n') {
            out.truncate(i);
        }
        const MAX: usize = 400;
        if out.len() > MAX {
            let mut cut = MAX;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push('…');
        }
        for s in &self.secrets {
            if !s.is_empty() {
                out = out.replace(s.as_str(), "***");
            }
        }
        out.trim_end_matches([' ', ':']).to_owned()
    }

    fn config_error(&self, msg: String) -> Error {
        Error::Remote {
            url: self.url.clone(),
            kind: RemoteKind::Config,
            msg: self.redact(&msg),
        }
    }

    /// Maps an `object_store` error on `name` to ours.
    fn error(&self, name: &str, e: object_store::Error) -> Error {
        use object_store::Error as E;
        let url = self.url_of(name);
        let status = http_status(&e);
        let (kind, msg) = match &e {
            E::NotFound { .. } => (RemoteKind::NotFound, "not found".to_owned()),
            _ if status == Some(404) => (RemoteKind::NotFound, format!("not found (404): {e}")),
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => (
                RemoteKind::Denied,
                format!(
                    "access denied (credentials: {}): {e}",
                    self.credential_source
                ),
            ),
            _ if matches!(status, Some(401 | 403)) => (
                RemoteKind::Denied,
                format!(
                    "access denied (credentials: {}): {e}",
                    self.credential_source
                ),
            ),
            _ => (
                RemoteKind::Failed,
                format!(
                    "request failed (after up to {} retries within {:?}): {e}",
                    self.settings.max_retries, self.settings.retry_timeout
                ),
            ),
        };
        Error::Remote {
            url,
            kind,
            msg: self.redact(&msg),
        }
    }

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
        cache: &super::cache::DiskCache,
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

impl RemoteStore {
    /// Uploads the local file `src` as `name`: one `PUT` when small, a multipart upload (parts
    /// of `MULTIPART_PART` bytes, several in flight) otherwise. Either way the object appears
    /// whole or not at all; a failed multipart upload is aborted so no parts linger.
    pub fn put_file(&self, name: &str, src: &std::path::Path) -> Result<()> {
        use crate::error::IoContext;
        use object_store::{PutPayload, WriteMultipart};
        use std::io::Read;
        let client = self.client()?;
        let key = self.key(name);
        let mut file = std::fs::File::open(src).at(src)?;
        let len = file.metadata().at(src)?.len();
        if len <= MULTIPART_PART as u64 {
            let mut buf = Vec::with_capacity(len as usize);
            file.read_to_end(&mut buf).at(src)?;
            return runtime::block_on(
                async move { client.put(&key, PutPayload::from(buf)).await },
            )?
            .map(|_| ())
            .map_err(|e| self.error(name, e));
        }
        let (rt, _) = runtime::runtime()?;
        // `write` spawns part uploads onto the runtime, so it must run inside its context.
        let _inside = rt.enter();
        let upload = rt
            .block_on(async { client.put_multipart(&key).await })
            .map_err(|e| self.error(name, e))?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, MULTIPART_PART);
        let mut buf = vec![0u8; MULTIPART_PART];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    let _ = rt.block_on(writer.abort());
                    return Err(crate::error::Error::io(src, e));
                }
            };
            // Bounds the parts buffered in memory while earlier ones upload.
            if let Err(e) = rt.block_on(writer.wait_for_capacity(4)) {
                return Err(self.error(name, e));
            }
            writer.write(&buf[..n]);
        }
        rt.block_on(writer.finish())
            .map(|_| ())
            .map_err(|e| self.error(name, e))
    }

    /// Writes `bytes` as `name` only if no object of that name exists; false if one does.
    pub fn put_new(&self, name: &str, bytes: Vec<u8>) -> Result<bool> {
        use object_store::{PutMode, PutOptions, PutPayload};
        let client = self.client()?;
        let key = self.key(name);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let got = runtime::block_on(async move {
            client.put_opts(&key, PutPayload::from(bytes), opts).await
        })?;
        match got {
            Ok(_) => Ok(true),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(false),
            Err(e) => Err(self.error(name, e)),
        }
    }

    /// Deletes `name` (no error if it does not exist).
    pub fn delete(&self, name: &str) -> Result<()> {
        let client = self.client()?;
        let key = self.key(name);
        match runtime::block_on(async move { client.delete(&key).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(name, e)),
        }
    }
}

/// Part size of multipart uploads (S3's minimum is 5 MiB).
pub const MULTIPART_PART: usize = 16 << 20;

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

/// The HTTP status behind an `object_store` error, if any. The crate keeps its retry error
/// type private, so the status is read from the error chain's text ("status code: 404").
fn http_status(e: &object_store::Error) -> Option<u16> {
    let mut texts = vec![e.to_string()];
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        texts.push(s.to_string());
        source = s.source();
    }
    texts.iter().find_map(|t| {
        let i = t.find("status code: ")? + "status code: ".len();
        t.get(i..i + 3)?.parse().ok()
    })
}

/// A random duration in `[d/2, d)`, so clients that failed together do not retry together.
fn jitter(d: Duration) -> Duration {
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;
    let r = RandomState::new().hash_one(std::time::Instant::now()) % 1000;
    d / 2 + d.mul_f64(r as f64 / 2000.0)
}

fn parse_seconds(v: &str) -> Option<Duration> {
    let v = v.trim();
    let v = v.strip_suffix('s').unwrap_or(v);
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Adds the AWS profile's keys, region and endpoint (`~/.aws/credentials`, `~/.aws/config`;
/// `aws_profile` option, else `AWS_PROFILE`, else `default`) to `options` where neither the
/// options nor the environment set them; returns the credential source for messages when the
/// keys came from the profile. A profile asked for by name that does not exist, or that only
/// has SSO / process / role credentials, is an error naming it (never a value).
fn apply_aws_profile(
    name: Option<&str>,
    options: &mut Vec<(String, String)>,
) -> std::result::Result<Option<String>, String> {
    fn given(options: &[(String, String)], names: &[&str]) -> bool {
        options
            .iter()
            .any(|(k, _)| names.contains(&k.to_ascii_lowercase().as_str()))
    }
    let env = |names: &[&str]| names.iter().any(|n| std::env::var_os(n).is_some());
    let has_keys =
        given(options, &["aws_access_key_id", "access_key_id"]) || env(&["AWS_ACCESS_KEY_ID"]);
    let asked = name.is_some() || env(&["AWS_PROFILE"]);
    if has_keys && name.is_none() {
        // Explicit keys win over AWS_PROFILE, as in the AWS SDKs.
        return Ok(None);
    }
    let Some(profile) = super::aws_profile::load(name) else {
        return if asked {
            let name = name
                .map(str::to_owned)
                .or_else(|| std::env::var("AWS_PROFILE").ok())
                .unwrap_or_default();
            Err(format!(
                "AWS profile {name:?} is in neither the credentials nor the config file \
                 (AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE, default ~/.aws/)"
            ))
        } else {
            Ok(None)
        };
    };
    if let Some(mechanism) = &profile.unsupported {
        if asked {
            return Err(format!(
                "AWS profile {:?} gets its credentials through {mechanism}, which gulpio-rs does \
                 not run; export them first (aws configure export-credentials --profile {} \
                 --format env) or pass storage_options",
                profile.name, profile.name
            ));
        }
    }
    let mut from_profile = false;
    for (key, value) in profile.options {
        let (names, vars): (&[&str], &[&str]) = match key.as_str() {
            "aws_region" => (
                &[
                    "aws_region",
                    "region",
                    "aws_default_region",
                    "default_region",
                ],
                &["AWS_REGION", "AWS_DEFAULT_REGION"],
            ),
            "aws_endpoint" => (
                &[
                    "aws_endpoint",
                    "aws_endpoint_url",
                    "endpoint",
                    "endpoint_url",
                ],
                &["AWS_ENDPOINT", "AWS_ENDPOINT_URL"],
            ),
            // Keys come as a set: all from the profile or none.
            _ if has_keys => continue,
            _ => (&[], &[]),
        };
        if given(options, names) || env(vars) {
            continue;
        }
        from_profile |= key == "aws_access_key_id";
        options.push((key, value));
    }
    Ok(from_profile.then_some(profile.source))
}

/// A byte count: an integer, or with a unit (`kB`, `MB`, `GB`, `TB`: powers of 1000; `KiB`,
/// `MiB`, `GiB`, `TiB`: powers of 1024), as in `cache_size="20GB"`.
fn parse_bytes(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (number, unit) = v.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "tb" | "t" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let n = number * scale;
    (n.is_finite() && n >= 0.0 && n < u64::MAX as f64).then_some(n as u64)
}

/// Which credentials a store will use, for messages: the option or variable name, never its
/// value.
fn credential_source(scheme: &ObjectStoreScheme, options: &[(String, String)]) -> String {
    let has_opt = |names: &[&str]| {
        options
            .iter()
            .find(|(k, _)| names.contains(&k.to_ascii_lowercase().as_str()))
            .map(|(k, _)| k.clone())
    };
    let has_env = |names: &[&'static str]| {
        names
            .iter()
            .find(|n| std::env::var_os(n).is_some())
            .map(|n| n.to_string())
    };
    match scheme {
        ObjectStoreScheme::AmazonS3 => {
            if let Some(k) = has_opt(&["aws_access_key_id", "access_key_id"]) {
                format!("storage_options[{k:?}]")
            } else if let Some(k) = has_env(&["AWS_ACCESS_KEY_ID"]) {
                format!("environment variable {k}")
            } else if has_opt(&["aws_skip_signature", "skip_signature"]).is_some() {
                "unsigned requests (skip_signature)".into()
            } else {
                "no static credentials: web identity, container or instance metadata".into()
            }
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            if let Some(k) = has_opt(&[
                "google_service_account",
                "service_account",
                "google_service_account_key",
                "service_account_key",
                "google_application_credentials",
            ]) {
                format!("storage_options[{k:?}]")
            } else if let Some(k) = has_env(&[
                "GOOGLE_SERVICE_ACCOUNT",
                "GOOGLE_SERVICE_ACCOUNT_KEY",
                "GOOGLE_APPLICATION_CREDENTIALS",
            ]) {
                format!("environment variable {k}")
            } else {
                "no static credentials: instance metadata".into()
            }
        }
        ObjectStoreScheme::MicrosoftAzure => {
            if let Some(k) = has_opt(&[
                "azure_storage_account_key",
                "account_key",
                "azure_storage_sas_key",
                "sas_key",
                "azure_client_secret",
                "client_secret",
                "azure_storage_token",
                "bearer_token",
            ]) {
                format!("storage_options[{k:?}]")
            } else if let Some(k) = has_env(&[
                "AZURE_STORAGE_ACCOUNT_KEY",
                "AZURE_STORAGE_SAS_KEY",
                "AZURE_CLIENT_SECRET",
            ]) {
                format!("environment variable {k}")
            } else {
                "no static credentials: managed identity".into()
            }
        }
        _ => "none (plain HTTP)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert!(is_remote_url("s3://b/p"));
        assert!(is_remote_url("https://h/p"));
        assert!(!is_remote_url("file:///tmp/x"));
        assert!(!is_remote_url("/tmp/x"));
        assert!(!is_remote_url("relative/dir"));
        assert!(!is_remote_url("C:\\x"));
    }

    #[test]
    fn secret_keys() {
        assert!(is_secret_key("aws_secret_access_key"));
        assert!(is_secret_key("AWS_SESSION_TOKEN"));
        assert!(is_secret_key("azure_storage_account_key"));
        assert!(!is_secret_key("aws_access_key_id"));
        assert!(!is_secret_key("aws_region"));
    }

    #[test]
    fn secrets_never_in_messages() {
        let opts = vec![
            ("aws_access_key_id".to_owned(), "AKIDEXAMPLE".to_owned()),
            (
                "aws_secret_access_key".to_owned(),
                "very-secret-value".to_owned(),
            ),
            ("aws_region".to_owned(), "us-east-1".to_owned()),
            ("not_a_key".to_owned(), "very-secret-value".to_owned()),
        ];
        let err = RemoteStore::new("s3://bucket/prefix", &opts).unwrap_err();
        let msg = err.to_string();
        assert!(!msg.contains("very-secret-value"), "{msg}");
        assert!(msg.contains("s3://bucket/prefix"), "{msg}");
    }

    #[test]
    fn options_of_ours() {
        let opts = vec![
            ("concurrency".to_owned(), "0".to_owned()),
            ("aws_region".to_owned(), "us-east-1".to_owned()),
        ];
        let msg = RemoteStore::new("s3://bucket/prefix", &opts)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("concurrency"), "{msg}");
    }
}
