//! Datasets in object stores (S3 and compatibles, GCS, Azure, plain HTTP) through the Arrow
//! project's `object_store` crate. Every request runs on the process's one I/O runtime; the
//! client is rebuilt after `fork()` (its connection pool is the parent's).
//!
//! Credentials and endpoints come from the standard environment variables of each cloud
//! (`AWS_*`, `GOOGLE_*`, `AZURE_*`) and from `storage_options` (the keys `object_store` and
//! polars accept), options winning. Secrets never appear in a message: every message built
//! here passes through [`RemoteStore::redact`].
//!
//! The parts: `options` (our storage options, secrets, credential sources, AWS profiles),
//! `read` (listing and range reads, through the local block cache when there is one),
//! `readahead` (requests started before a read asks for them) and `write` (uploads).

mod fetch;
mod options;
mod read;
mod readahead;
pub mod redact;
mod retry;
mod write;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreScheme, RetryConfig};
use url::Url;

use super::fork::ProcessLocal;
use super::runtime;
use crate::error::{Error, RemoteKind, Result};
pub use options::is_secret_key;
use options::{
    apply_aws_profile, check_value, credential_source, parse_bytes, parse_seconds, store_env,
    NO_CREDENTIALS, SECRET_ENV,
};

pub use write::{ObjectVersion, MULTIPART_PART};

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
    /// Bytes of read-ahead ([`RemoteStore::prefetch`]) kept pending at most; 0 turns it off.
    pub readahead: u64,
}

impl Default for RemoteSettings {
    fn default() -> Self {
        RemoteSettings {
            concurrency: 32,
            max_retries: 8,
            retry_timeout: Duration::from_secs(60),
            timeout: Duration::from_secs(30),
            readahead: 256 << 20,
        }
    }
}

/// Two clients over the same store: reads with `object_store`'s own retries off (every read
/// is retried whole, body included, by `retry`), writes with them on (it replays payloads).
#[derive(Clone)]
struct Clients {
    read: Arc<dyn ObjectStore>,
    write: Arc<dyn ObjectStore>,
}

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
    /// The clients, in the process they were built in.
    client: Mutex<Option<ProcessLocal<Clients>>>,
    /// The local block cache (`cache_dir`), if any.
    cache: Option<crate::io::cache::DiskCache>,
    /// `name -> (size, ETag or modification time)` from the last listing: the identity of an
    /// object in the cache (nothing is cached for objects not listed).
    versions: Mutex<std::collections::HashMap<String, (u64, String)>>,
    readahead: readahead::ReadAhead,
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

/// The URL as printed and as given to the client: no query or fragment (refused by
/// [`RemoteStore::new`] anyway), no user info except an `abfs[s]://` container.
fn printable(url: &Url) -> String {
    let mut u = url.clone();
    if !matches!(url.scheme(), "abfs" | "abfss") {
        let _ = u.set_username("");
    }
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string().trim_end_matches('/').to_owned()
}

/// Refuses credentials in a dataset URL: `object_store` never sends them (keys come from
/// `storage_options` or the environment), and a URL is printed in every message and `repr`.
/// User info (`s3://KEY:SECRET@bucket`), and any query string or fragment (SAS tokens,
/// presigned signatures), are an error; `abfs[s]://container@account...` is not user info.
fn refuse_credentials(url: &Url) -> std::result::Result<(), String> {
    let container = matches!(url.scheme(), "abfs" | "abfss") && url.password().is_none();
    if url.password().is_some() || (!url.username().is_empty() && !container) {
        return Err(
            "credentials in the URL are refused (they would be printed in messages \
                    and never used): pass them in storage_options (aws_access_key_id and \
                    aws_secret_access_key, ...) or the standard environment variables"
                .into(),
        );
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(
            "a query string or fragment in a dataset URL is refused (it is not sent \
                    with requests, and may hold a secret such as a SAS token): pass SAS \
                    tokens as storage_options[\"azure_storage_sas_key\"]"
                .into(),
        );
    }
    Ok(())
}

impl RemoteStore {
    /// A store for the dataset at `url` (`s3://bucket/prefix`, `gs://`, `az://`, `abfs://`,
    /// `http(s)://`), configured from the environment and `options`.
    pub fn new(url: &str, options: &[(String, String)]) -> Result<RemoteStore> {
        let shown = redact::url(url);
        let config = |msg: String| Error::Remote {
            url: shown.clone(),
            kind: RemoteKind::Config,
            msg: redact::message(&msg, &[]),
        };
        let parsed = Url::parse(url).map_err(|e| config(format!("not a valid URL: {e}")))?;
        refuse_credentials(&parsed).map_err(config)?;
        let (scheme, prefix) = ObjectStoreScheme::parse(&parsed).map_err(|_| {
            config(format!(
                "unsupported URL scheme {:?} (s3://, gs://, az://, abfs://, http(s)://)",
                parsed.scheme()
            ))
        })?;
        if matches!(scheme, ObjectStoreScheme::Local | ObjectStoreScheme::Memory) {
            return Err(config("not a remote URL".into()));
        }
        let environment = store_env(&scheme);
        for (k, v) in &environment {
            check_value(&format!("environment variable {k}"), k, v).map_err(config)?;
        }
        let mut settings = RemoteSettings::default();
        let mut store_options = Vec::new();
        let mut profile_name = None;
        let (mut cache_dir, mut cache_size, mut cache_block) = (None, None, None);
        for (k, v) in options {
            let bad = |what: &str| config(format!("storage option {k:?}: {what}"));
            if k.chars().any(|c| c.is_control()) {
                return Err(bad("not a known key (it has a control character)"));
            }
            check_value(&format!("storage option {k:?}"), k, v).map_err(config)?;
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
                "readahead" => {
                    settings.readahead = parse_bytes(v).ok_or_else(|| {
                        bad("a size in bytes is needed (an integer, or with kB/MB/GB/KiB/MiB/GiB; 0 turns read-ahead off)")
                    })?
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
            .chain(&environment)
            .filter(|(k, v)| is_secret_key(k) && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect();
        secrets.extend(
            SECRET_ENV
                .iter()
                .filter_map(|k| std::env::var(k).ok())
                .filter(|v| v.len() >= 4),
        );
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
                _ => crate::io::cache::DEFAULT_MAX_BYTES,
            },
        };
        let cache = match cache_dir {
            Some(dir) => Some(
                crate::io::cache::DiskCache::new(
                    &dir,
                    cache_size,
                    cache_block.unwrap_or(crate::io::cache::DEFAULT_BLOCK),
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
            client: Mutex::new(None),
            cache,
            versions: Mutex::new(Default::default()),
            readahead: readahead::ReadAhead::new(settings.readahead),
            settings,
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
            client: Mutex::new(Some(ProcessLocal::new(Clients {
                read: client.clone(),
                write: client,
            }))),
            cache: None,
            versions: Mutex::new(Default::default()),
            readahead: readahead::ReadAhead::new(settings.readahead),
            settings,
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

    /// The object key of `name`: a plain name beside the chunks, or a path below the
    /// dataset's prefix such as the manifest's `_gulpio/log/{v}.glog`, each part a segment
    /// (a single segment would escape the `/`). Names come from this crate, never from input.
    fn key(&self, name: &str) -> ObjectPath {
        name.split('/')
            .fold(self.prefix.clone(), |key, part| key.join(part))
    }

    /// The client for reads, of this process; rebuilt after a fork. Its own retries are off:
    /// reads are retried by [`retry::retrying`] (see [`RemoteStore::policy`]).
    fn client(&self) -> Result<Arc<dyn ObjectStore>> {
        Ok(self.clients()?.read)
    }

    /// The client for uploads and deletes, with `object_store`'s retries.
    fn writer(&self) -> Result<Arc<dyn ObjectStore>> {
        Ok(self.clients()?.write)
    }

    fn clients(&self) -> Result<Clients> {
        let mut guard = self
            .client
            .lock()
            .map_err(|_| Error::Internal("object store client lock poisoned".into()))?;
        if let Some(held) = guard.as_ref() {
            if let Some(c) = held.get() {
                return Ok(c.clone());
            }
            if self.scheme == ObjectStoreScheme::Memory {
                // A caller-given client cannot be rebuilt; in-memory ones are fork-safe.
                if let Some(c) = held.get_inherited() {
                    return Ok(c.clone());
                }
            }
        }
        // An inherited client (its pooled connections are the parent's sockets) is replaced;
        // ProcessLocal leaks it rather than closing them here.
        let clients = Clients {
            read: self.build(RetryConfig {
                max_retries: 0,
                retry_timeout: self.settings.retry_timeout,
                ..Default::default()
            })?,
            write: self.build(RetryConfig {
                max_retries: self.settings.max_retries,
                retry_timeout: self.settings.retry_timeout,
                ..Default::default()
            })?,
        };
        *guard = Some(ProcessLocal::new(clients.clone()));
        Ok(clients)
    }

    /// How reads are retried.
    fn policy(&self) -> retry::Policy {
        retry::Policy {
            max_retries: self.settings.max_retries,
            retry_timeout: self.settings.retry_timeout,
        }
    }

    fn build(&self, retry: RetryConfig) -> Result<Arc<dyn ObjectStore>> {
        use object_store::{aws, azure, gcp, http, ClientOptions};
        let fail = |e: object_store::Error| self.config_error(e.to_string());
        let url = &self.url;
        // The runtime must exist (and be this process's) before a client is made.
        runtime::runtime()?;
        install_tls_provider();
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

    /// `msg` without secrets: every secret this store knows of (options, environment) and
    /// those in URLs (see [`redact::message`]).
    pub fn redact(&self, msg: &str) -> String {
        redact::message(msg, &self.secrets)
    }

    fn config_error(&self, msg: String) -> Error {
        Error::Remote {
            url: self.url.clone(),
            kind: RemoteKind::Config,
            msg: self.redact(&msg),
        }
    }

    /// Maps a read of `name` that failed for good (see [`retry::retrying`]) to our error,
    /// saying exactly what was retried.
    fn failed(&self, name: &str, f: retry::Failure) -> Error {
        let tried = f.what_was_tried(&self.policy());
        self.mapped(name, f.error, &tried)
    }

    /// Maps a failed upload or delete of `name` to our error; `object_store` retried it, and
    /// its message says how often when it did.
    fn error(&self, name: &str, e: object_store::Error) -> Error {
        self.mapped(name, e, "")
    }

    fn mapped(&self, name: &str, e: object_store::Error, tried: &str) -> Error {
        use object_store::Error as E;
        let url = self.url_of(name);
        let text = error_text(&e);
        let status = retry::http_status(&e);
        let denied = || {
            format!(
                "access denied (credentials: {}): {e}",
                self.credential_source
            )
        };
        let (kind, msg) = match &e {
            _ if is_missing_bucket(&text) => (
                RemoteKind::NotFound,
                format!(
                    "bucket not found: {} (check its name, and the region or endpoint the \
                     request went to)",
                    self.bucket()
                ),
            ),
            E::NotFound { .. } => (RemoteKind::NotFound, "not found".to_owned()),
            _ if status == Some(404) => (RemoteKind::NotFound, format!("not found (404): {e}")),
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
                (RemoteKind::Denied, denied())
            }
            _ if matches!(status, Some(401 | 403)) => (RemoteKind::Denied, denied()),
            _ if tried.is_empty() => (RemoteKind::Failed, format!("request failed: {e}")),
            _ => (RemoteKind::Failed, format!("request failed ({tried}): {e}")),
        };
        // Transport failures are summarised ("error sending request") above their cause.
        let cause = retry::root_cause(&e);
        let msg = if matches!(kind, RemoteKind::Failed) && !msg.contains(&cause) {
            format!("{msg} (cause: {cause})")
        } else {
            msg
        };
        let mut msg = self.redact(&msg);
        if self.credential_source.starts_with(NO_CREDENTIALS)
            && (matches!(kind, RemoteKind::Denied) || mentions_credentials(&text))
        {
            msg = format!("{msg}; {}", missing_credentials_hint(&self.scheme));
        }
        Error::Remote { url, kind, msg }
    }

    /// The bucket (or container) of the URL, for messages.
    fn bucket(&self) -> String {
        Url::parse(&self.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| self.url.clone())
    }
}

/// What to set, when no credentials were found and a request was refused or the metadata
/// service (the last resort) failed: its own error says nothing a user can act on.
fn missing_credentials_hint(scheme: &ObjectStoreScheme) -> String {
    let what = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_ENDPOINT_URL for a \
             server other than AWS, and AWS_REGION), or AWS_PROFILE for a profile in \
             ~/.aws/credentials, or pass storage_options={\"aws_access_key_id\": ..., \
             \"aws_secret_access_key\": ...}"
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            "set GOOGLE_APPLICATION_CREDENTIALS (a service account key file) or \
             GOOGLE_SERVICE_ACCOUNT, or pass storage_options={\"google_service_account\": ...}"
        }
        ObjectStoreScheme::MicrosoftAzure => {
            "set AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY (or \
             AZURE_STORAGE_SAS_KEY), or pass storage_options={\"azure_storage_account_key\": ...}"
        }
        _ => "pass credentials in storage_options",
    };
    format!("no credentials were found: {what}")
}

/// The text of an error and all its sources, for classifying it (never shown as it is).
fn error_text(e: &object_store::Error) -> String {
    let mut texts = vec![e.to_string()];
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        texts.push(s.to_string());
        source = s.source();
    }
    texts.join("\n")
}

/// S3's `NoSuchBucket`, GCS's and Azure's words for a bucket or container that is not there.
fn is_missing_bucket(text: &str) -> bool {
    text.contains("NoSuchBucket")
        || text.contains("ContainerNotFound")
        || text.contains("The specified bucket does not exist")
}

/// Whether the failure was getting credentials (the instance metadata service, a token).
fn mentions_credentials(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.contains("metadata") || lower.contains("credential") || lower.contains("169.254.")
}

/// Makes ring rustls's process-wide crypto provider, once, before any client is built: reqwest
/// is built without a provider of its own (Cargo.toml says why) and would panic without one.
/// Another provider already installed in this process (by a crate linked into the same
/// extension) is kept: either serves TLS 1.2 and 1.3.
fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _already = rustls::crypto::ring::default_provider().install_default();
    });
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
        assert!(is_secret_key("azure_storage_access_key"));
        assert!(is_secret_key("azure_storage_master_key"));
        assert!(is_secret_key("aws_sse_customer_key_base64"));
        assert!(is_secret_key("google_service_account_key"));
        assert!(!is_secret_key("aws_access_key_id"));
        assert!(!is_secret_key("aws_sse_kms_key_id"));
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
    fn missing_buckets_and_credentials_in_words() {
        assert!(is_missing_bucket(
            "status code: 404 Not Found: <Error><Code>NoSuchBucket</Code></Error>"
        ));
        assert!(!is_missing_bucket("<Error><Code>NoSuchKey</Code></Error>"));
        let forbidden = object_store::Error::Generic {
            store: "S3",
            source: "Server returned non-2xx status code: 403 Forbidden".into(),
        };
        assert_eq!(retry::http_status(&forbidden), Some(403));
        assert!(mentions_credentials(
            "Error getting credentials from instance metadata"
        ));
        let s3 = missing_credentials_hint(&ObjectStoreScheme::AmazonS3);
        for word in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"] {
            assert!(s3.contains(word), "{s3}");
        }
        let gcs = missing_credentials_hint(&ObjectStoreScheme::GoogleCloudStorage);
        assert!(gcs.contains("GOOGLE_APPLICATION_CREDENTIALS"), "{gcs}");
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

    /// Every scheme's client builds (reqwest needs rustls's process provider, which
    /// `install_tls_provider` sets) and ring is the provider: aws-lc is not in the build.
    #[test]
    fn clients_build_with_ring() {
        let opts = vec![
            ("aws_access_key_id".to_owned(), "AKIDEXAMPLE".to_owned()),
            ("aws_secret_access_key".to_owned(), "secret".to_owned()),
            ("aws_region".to_owned(), "us-east-1".to_owned()),
        ];
        let s3 = RemoteStore::new("s3://bucket/prefix", &opts).unwrap();
        s3.client().unwrap();
        let https = RemoteStore::new("https://example.invalid/data", &[]).unwrap();
        https.client().unwrap();
        let provider = rustls::crypto::CryptoProvider::get_default().unwrap();
        let ring = rustls::crypto::ring::default_provider();
        assert_eq!(provider.cipher_suites.len(), ring.cipher_suites.len());
        assert!(provider
            .cipher_suites
            .iter()
            .zip(&ring.cipher_suites)
            .all(|(a, b)| a.suite() == b.suite()));
    }
}
