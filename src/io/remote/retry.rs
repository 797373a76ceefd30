//! Retrying reads: the one owner of which failed read is tried again, how long to wait, and
//! what the final message says was done.
//!
//! Reads (listings, `HEAD`, whole objects, ranges) go through a client whose own retries are
//! off, and every attempt of the whole operation runs here: the request *and* its body. The
//! client's retries covered only the request, so a listing whose body was cut (a reset, an
//! early close, a body slower than `timeout`) failed at once while its message claimed
//! retries. Counting attempts here is what lets the message say exactly how many were made.
//! Uploads keep the client's own retries (their payloads are replayed by `object_store`).

use std::future::Future;
use std::time::{Duration, Instant};

use object_store::client::HttpError;

/// First wait after a failure; doubled after each, up to `MAX_DELAY`, with jitter.
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(8);

/// How many times, and for how long, one read is retried.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    pub max_retries: usize,
    pub retry_timeout: Duration,
}

/// A read that failed for good, with what was tried.
#[derive(Debug)]
pub(super) struct Failure {
    pub error: object_store::Error,
    /// Retries made (attempts after the first).
    pub retries: usize,
    pub elapsed: Duration,
    /// True if the last error was transient: the retries ran out rather than being pointless.
    pub transient: bool,
}

impl Failure {
    /// A read whose future panicked (caught where it ran; see `runtime::block_on`).
    pub fn panicked(panic: &Box<dyn std::any::Any + Send>) -> Failure {
        Failure {
            error: permanent(format!(
                "the HTTP stack panicked: {}",
                crate::io::runtime::panic_text(panic)
            )),
            retries: 0,
            elapsed: Duration::ZERO,
            transient: false,
        }
    }

    /// What was done, for the message: exact counts, never "up to".
    pub fn what_was_tried(&self, policy: &Policy) -> String {
        let secs = self.elapsed.as_secs_f64();
        match (self.transient, self.retries) {
            (false, _) => "not retried: retrying cannot fix this error".to_owned(),
            (true, 0) if policy.max_retries == 0 => "not retried: max_retries is 0".to_owned(),
            (true, n) if n >= policy.max_retries => {
                format!("gave up after {n} retries in {secs:.1} s (max_retries {n})")
            }
            (true, n) => format!(
                "gave up after {n} retries in {secs:.1} s (retry_timeout {:.0} s)",
                policy.retry_timeout.as_secs_f64()
            ),
        }
    }
}

/// Runs `attempt` until it succeeds, fails with an error retrying cannot fix, or the policy's
/// retries or time run out; waits with exponential backoff and jitter in between.
pub(super) async fn retrying<T, F, Fut>(policy: Policy, mut attempt: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    let start = Instant::now();
    let mut retries = 0;
    let mut delay = FIRST_DELAY;
    loop {
        let error = match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let transient = is_transient(&error);
        let wait = jitter(delay);
        if !transient
            || retries >= policy.max_retries
            || start.elapsed() + wait > policy.retry_timeout
        {
            return Err(Failure {
                error,
                retries,
                elapsed: start.elapsed(),
                transient,
            });
        }
        tokio::time::sleep(wait).await;
        retries += 1;
        delay = (delay * 2).min(MAX_DELAY);
    }
}

/// A fault of ours to retry (a short body, a slice the server would not give): the error
/// type lets [`is_transient`] recognise it without reading text.
#[derive(Debug)]
pub(super) struct Transient(pub String);

impl std::fmt::Display for Transient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Transient {}

/// An `object_store` error carrying a [`Transient`] fault.
pub(super) fn transient(msg: String) -> object_store::Error {
    object_store::Error::Generic {
        store: "gulpio",
        source: Box::new(Transient(msg)),
    }
}

/// An `object_store` error that retrying cannot fix (wrong bytes are never returned instead).
pub(super) fn permanent(msg: String) -> object_store::Error {
    object_store::Error::Generic {
        store: "gulpio",
        source: msg.into(),
    }
}

/// True for faults that another attempt may not meet: 5xx, 429 and 408 answers, connection
/// and transport failures (resets, timeouts, bodies cut short, also of listings), listings
/// that do not parse (a body cut where the transport could not tell), and our own
/// [`Transient`] faults. Not: 404, 401/403, other 4xx, preconditions, bad paths or keys.
pub(super) fn is_transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    if matches!(
        e,
        E::NotFound { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::Precondition { .. }
            | E::NotModified { .. }
            | E::AlreadyExists { .. }
            | E::NotSupported { .. }
            | E::NotImplemented { .. }
            | E::InvalidPath { .. }
            | E::UnknownConfigurationKey { .. }
    ) {
        return false;
    }
    if let Some(status) = http_status(e) {
        return status >= 500 || status == 429 || status == 408;
    }
    if tls_refused(e) {
        return false;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.downcast_ref::<Transient>().is_some() {
            return true;
        }
        if let Some(h) = s.downcast_ref::<HttpError>() {
            return !matches!(h.kind(), object_store::client::HttpErrorKind::Unknown)
                || cut_short(s);
        }
        source = s.source();
    }
    // The clouds' list clients keep their error types private: a listing body that does not
    // parse is recognised by its message ("invalid list response", "PROPFIND response").
    let text = e.to_string().to_ascii_lowercase();
    text.contains("list response") || text.contains("propfind response")
}

/// Whether TLS refused the connection (a certificate the client does not trust, no common
/// protocol version): the same answer on every attempt, so not retried. rustls's error reaches
/// us inside an `io::Error`, whose `source()` skips the error it wraps, so that is looked into.
pub(super) fn tls_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        let inner = s
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|i| i as &(dyn std::error::Error + 'static));
        if s.is::<rustls::Error>() || inner.is_some_and(|i| i.is::<rustls::Error>()) {
            return true;
        }
        source = inner.or_else(|| s.source());
    }
    false
}

/// The innermost cause of `e`, with what an `io::Error` wraps: the words that say why a
/// transport failed ("invalid peer certificate: UnknownIssuer", "Connection refused"), which
/// `object_store` and reqwest summarise as "error sending request".
pub(super) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    loop {
        let inner = last
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|i| i as &(dyn std::error::Error + 'static));
        match inner.or_else(|| last.source()) {
            Some(next) => last = next,
            None => return last.to_string(),
        }
    }
}

/// An error of unknown kind whose causes say the connection ended early.
fn cut_short(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            if matches!(
                io.kind(),
                K::ConnectionReset | K::ConnectionAborted | K::UnexpectedEof | K::TimedOut
            ) {
                return true;
            }
        }
        source = s.source();
    }
    false
}

/// The HTTP status behind an `object_store` error, if any. The crate keeps its retry error
/// type private, so the status is read from the error chain's text ("status code: 404").
pub(super) fn http_status(e: &object_store::Error) -> Option<u16> {
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
pub(super) fn jitter(d: Duration) -> Duration {
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;
    let r = RandomState::new().hash_one(Instant::now()) % 1000;
    d / 2 + d.mul_f64(r as f64 / 2000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a test runtime")
            .block_on(f)
    }

    fn policy(max_retries: usize) -> Policy {
        Policy {
            max_retries,
            retry_timeout: Duration::from_secs(60),
        }
    }

    /// An operation failing with `fail` the first `n` times, counting its attempts.
    fn flaky(
        n: usize,
        fail: fn() -> object_store::Error,
        calls: &AtomicUsize,
    ) -> impl FnMut() -> futures::future::Ready<object_store::Result<u32>> + '_ {
        move || {
            let k = calls.fetch_add(1, Ordering::SeqCst);
            futures::future::ready(if k < n { Err(fail()) } else { Ok(7) })
        }
    }

    fn cut() -> object_store::Error {
        transient("short body: 3 of 9 bytes".into())
    }

    fn missing() -> object_store::Error {
        object_store::Error::NotFound {
            path: "x".into(),
            source: "404".into(),
        }
    }

    /// A certificate refusal as reqwest delivers it: rustls's error inside an `io::Error`
    /// inside the transport's errors. Not retried, and its words are the root cause.
    #[test]
    fn tls_refusals_are_permanent_and_named() {
        let refusal = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, refusal);
        let e = object_store::Error::Generic {
            store: "HTTP",
            source: Box::new(io),
        };
        assert!(tls_refused(&e));
        assert!(!is_transient(&e));
        assert!(
            root_cause(&e).contains("UnknownIssuer"),
            "{}",
            root_cause(&e)
        );
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let e = object_store::Error::Generic {
            store: "HTTP",
            source: Box::new(reset),
        };
        assert!(!tls_refused(&e));
        assert_eq!(root_cause(&e), "reset by peer");
    }

    #[test]
    fn transient_faults_are_retried_until_they_pass() {
        let calls = AtomicUsize::new(0);
        let got = block_on(retrying(policy(8), flaky(3, cut, &calls)));
        assert_eq!(got.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn the_count_in_the_message_is_the_count_made() {
        let calls = AtomicUsize::new(0);
        let p = policy(2);
        let f = block_on(retrying(p, flaky(usize::MAX, cut, &calls))).unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(f.retries, 2);
        assert!(f.what_was_tried(&p).starts_with("gave up after 2 retries"));
    }

    #[test]
    fn errors_that_retrying_cannot_fix_are_not_retried() {
        let calls = AtomicUsize::new(0);
        let p = policy(8);
        let f = block_on(retrying(p, flaky(usize::MAX, missing, &calls))).unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(f.retries, 0);
        assert!(f.what_was_tried(&p).contains("not retried"));
        let p0 = policy(0);
        let f = block_on(retrying(p0, flaky(usize::MAX, cut, &calls))).unwrap_err();
        assert_eq!(f.what_was_tried(&p0), "not retried: max_retries is 0");
    }

    #[test]
    fn retry_timeout_bounds_the_retries() {
        let calls = AtomicUsize::new(0);
        let p = Policy {
            max_retries: 1000,
            retry_timeout: Duration::from_millis(300),
        };
        let f = block_on(retrying(p, flaky(usize::MAX, cut, &calls))).unwrap_err();
        assert!(f.retries < 10, "{}", f.retries);
        assert!(f.what_was_tried(&p).contains("retry_timeout"));
    }

    #[test]
    fn classification() {
        assert!(is_transient(&cut()));
        assert!(!is_transient(&missing()));
        assert!(!is_transient(&permanent("wrong size".into())));
        let listing = object_store::Error::Generic {
            store: "S3",
            source: "Got invalid list response: unexpected end of input".into(),
        };
        assert!(is_transient(&listing));
        let status = |code: &str| object_store::Error::Generic {
            store: "S3",
            source: format!("Server returned non-2xx status code: {code}: body").into(),
        };
        assert!(is_transient(&status("503 Service Unavailable")));
        assert!(is_transient(&status("429 Too Many Requests")));
        assert!(!is_transient(&status("400 Bad Request")));
    }
}
