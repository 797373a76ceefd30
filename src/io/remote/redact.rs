//! Secrets out of text: the one place that decides what of a URL or a message may be shown.
//! Every message and `repr` that can hold a URL passes through here (the Python layer calls
//! [`url`] as `_native.redact_url`).
//!
//! Credentials in dataset URLs are refused (`RemoteStore::new`), so this is what keeps them
//! out of the message that refuses them, and out of messages that quote request URLs
//! (`object_store` errors name them, query string included: Azure SAS tokens and presigned
//! signatures travel there).

/// Query parameters whose values are secrets (matched on the lower-cased name): SAS tokens
/// (`sig`, `sv`...`sig`), presigned S3 (`X-Amz-Signature`, `X-Amz-Credential`,
/// `X-Amz-Security-Token`), GCS (`X-Goog-Signature`), and generic tokens and keys.
fn secret_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "sig",
        "signature",
        "token",
        "credential",
        "key",
        "secret",
        "password",
        "passwd",
        "auth",
        "sas",
        "code",
    ]
    .iter()
    .any(|s| n.contains(s))
}

/// `s` with the user info of every URL in it replaced by `***` (a user name alone is kept
/// for `abfs[s]://`, where it is the container), and the values of secret-looking query
/// parameters by `***`. Text that is not a URL is returned as is.
pub fn url(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let scheme_start = rest[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |j| j + 1);
        let scheme = &rest[scheme_start..i];
        out.push_str(&rest[..i + 3]);
        let after = &rest[i + 3..];
        // The URL runs to the next whitespace or quote (messages quote URLs with " or ').
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>'))
            .unwrap_or(after.len());
        out.push_str(&one(scheme, &after[..end]));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// One URL after its `scheme://`.
fn one(scheme: &str, u: &str) -> String {
    let auth_end = u.find(['/', '?', '#']).unwrap_or(u.len());
    let (authority, tail) = u.split_at(auth_end);
    let mut out = String::with_capacity(u.len());
    match authority.rfind('@') {
        Some(at) => {
            let info = &authority[..at];
            let container = matches!(scheme.to_ascii_lowercase().as_str(), "abfs" | "abfss");
            if container && !info.contains(':') {
                out.push_str(info);
            } else {
                out.push_str("***");
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    out.push_str(path);
    if let Some(q) = query {
        let (q, fragment) = match q.split_once('#') {
            Some((q, f)) => (q, Some(f)),
            None => (q, None),
        };
        out.push('?');
        let params: Vec<String> = q
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if secret_param(k) => format!("{k}=***"),
                None if secret_param(p) => "***".to_owned(),
                _ => p.to_owned(),
            })
            .collect();
        out.push_str(&params.join("&"));
        if fragment.is_some() {
            out.push_str("#***");
        }
    }
    out
}

/// `msg` fit for a message: URLs through [`url`], every known secret replaced by `***`,
/// server response bodies cut to their first line (no XML documents), at most 400 bytes.
pub fn message(msg: &str, secrets: &[String]) -> String {
    let mut out = url(msg);
    if let Some(i) = out.find("<?xml") {
        out.truncate(i);
    }
    if let Some(i) = out.find('\n') {
        out.truncate(i);
    }
    for s in secrets {
        if !s.is_empty() {
            out = out.replace(s.as_str(), "***");
        }
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
    out.trim_end_matches([' ', ':']).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_is_hidden() {
        assert_eq!(url("s3://KEY:SECRET@bucket/ds"), "s3://***@bucket/ds");
        assert_eq!(url("https://TOKEN@host/x"), "https://***@host/x");
        assert_eq!(
            url("abfss://container@acct.dfs.core.windows.net/p"),
            "abfss://container@acct.dfs.core.windows.net/p"
        );
        assert_eq!(
            url("abfss://user:pw@acct.dfs.core.windows.net/p"),
            "abfss://***@acct.dfs.core.windows.net/p"
        );
        assert_eq!(url("s3://bucket/ds"), "s3://bucket/ds");
        assert_eq!(url("/local/path"), "/local/path");
    }

    #[test]
    fn secret_query_values_are_hidden() {
        let sas = "https://a.blob.core.windows.net/c/x?sv=2022&sp=r&sig=abc%2Fdef&se=2030";
        assert_eq!(
            url(sas),
            "https://a.blob.core.windows.net/c/x?sv=2022&sp=r&sig=***&se=2030"
        );
        let presigned = "https://b.s3.amazonaws.com/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=ff";
        assert_eq!(
            url(presigned),
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***"
        );
        assert_eq!(
            url("http://h/b?list-type=2&prefix=ds%2F"),
            "http://h/b?list-type=2&prefix=ds%2F"
        );
    }

    #[test]
    fn urls_inside_messages() {
        let msg = "Error performing GET http://u:p@127.0.0.1:9/b?sig=zz in 3ms - \"s3://K:S@b/x\"";
        let got = message(msg, &[]);
        assert!(
            !got.contains(":p@") && !got.contains("zz") && !got.contains("K:S"),
            "{got}"
        );
        assert!(got.contains("127.0.0.1:9/b"), "{got}");
    }

    #[test]
    fn known_secrets_and_bodies() {
        let got = message(
            "denied: very-secret <?xml version=\"1.0\"?><Error/>",
            &["very-secret".into()],
        );
        assert_eq!(got, "denied: ***");
        let long = "x".repeat(1000);
        assert!(message(&long, &[]).chars().count() <= 401);
    }
}
