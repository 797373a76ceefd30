//! Storage options and credentials: which keys are secrets, sizes and durations given as
//! text, AWS profiles (which `object_store` does not read) and, for messages, where the
//! credentials come from (never their values).

use std::time::Duration;

use object_store::ObjectStoreScheme;

/// Keys (storage options, environment variables) that hold secrets, matched on the
/// lower-cased name: keys of every kind (access, account, master, SSE-C, encryption,
/// service account JSON), tokens, passwords, SAS, credentials; not identifiers (`*_id`).
/// The one rule: `repr(storage_options)` in Python asks it too (`_native.is_secret_option`).
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["secret", "token", "password", "sas", "key", "credential"]
        .iter()
        .any(|s| k.contains(s))
        && !k.ends_with("_id")
}

/// Environment variables whose values are secrets, for redaction.
pub(super) const SECRET_ENV: &[&str] = &[
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
];

pub(super) fn parse_seconds(v: &str) -> Option<Duration> {
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
pub(super) fn apply_aws_profile(
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
    let Some(profile) = crate::io::aws_profile::load(name) else {
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
        check_value(&format!("{}: {key}", profile.source), &key, &value)?;
        from_profile |= key == "aws_access_key_id";
        options.push((key, value));
    }
    Ok(from_profile.then_some(profile.source))
}

/// A byte count: an integer, or with a unit (`kB`, `MB`, `GB`, `TB`: powers of 1000; `KiB`,
/// `MiB`, `GiB`, `TiB`: powers of 1024), as in `cache_size="20GB"`.
pub(super) fn parse_bytes(v: &str) -> Option<u64> {
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

/// How [`credential_source`] starts when no key was found anywhere (options, environment,
/// profile): the client then asks web identity, the container or instance metadata.
pub(super) const NO_CREDENTIALS: &str = "no static credentials";

/// Which credentials a store will use, for messages: the option or variable name, never its
/// value.
pub(super) fn credential_source(
    scheme: &ObjectStoreScheme,
    options: &[(String, String)],
) -> String {
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
                format!("{NO_CREDENTIALS}: web identity, container or instance metadata")
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
                format!("{NO_CREDENTIALS}: instance metadata")
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
                format!("{NO_CREDENTIALS}: managed identity")
            }
        }
        _ => "none (plain HTTP)".into(),
    }
}

/// Refuses a setting whose value holds a control character (U+0000-U+001F, U+007F): values
/// end up in request headers and URLs, where `object_store` builds requests with `unwrap`,
/// so `AWS_REGION=$'us-east-1\r'` was a panic. `what` names the setting (an option key or
/// an environment variable); the message never shows the value, which may be a secret.
/// Values that are documents (a service account key's JSON) may hold line breaks and tabs.
pub(super) fn check_value(what: &str, key: &str, value: &str) -> std::result::Result<(), String> {
    let document = matches!(
        key.to_ascii_lowercase().as_str(),
        "google_service_account_key" | "service_account_key"
    );
    let bad = value
        .char_indices()
        .find(|&(_, c)| c.is_ascii_control() && !(document && matches!(c, '\t' | '\n' | '\r')));
    if let Some((at, c)) = bad {
        return Err(format!(
            "{what}: the value has a control character (U+{:04X}) at byte {at}; settings \
             go into request headers and URLs, which cannot hold one (a line ending copied \
             from a Windows file?)",
            c as u32
        ));
    }
    check_url_value(what, key, value)
}

/// Settings that are URLs (endpoints, proxies, credential services) must be absolute
/// `http(s)://` URLs of printable ASCII, and a container credentials path a path:
/// `object_store` joins and parses them with `unwrap` when it sends a request, so an
/// endpoint of `" "` or `"é"` was a panic. Matched on the lower-cased key or variable name.
fn check_url_value(what: &str, key: &str, value: &str) -> std::result::Result<(), String> {
    let k = key.to_ascii_lowercase();
    let printable = !value.is_empty() && value.chars().all(|c| c.is_ascii_graphic());
    if k.ends_with("relative_uri") {
        return if printable && value.starts_with('/') {
            Ok(())
        } else {
            Err(format!(
                "{what}: a path starting with \"/\" (printable ASCII, no spaces) is needed"
            ))
        };
    }
    let is_url = k.ends_with("endpoint")
        || k.contains("endpoint_url")
        || k.ends_with("_url")
        || k.ends_with("full_uri")
        || k.ends_with("authority_host");
    let is_host = [
        "metadata_host",
        "metadata_root",
        "metadata_ip",
        "workload_host",
    ]
    .iter()
    .any(|h| k.ends_with(h));
    if is_host {
        return if printable && !value.contains(['/', '?', '#', '@']) {
            Ok(())
        } else {
            Err(format!(
                "{what}: a host name (printable ASCII, no spaces, no path) is needed"
            ))
        };
    }
    if !is_url {
        return Ok(());
    }
    let absolute = url::Url::parse(value)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
    match absolute {
        Some(_) if printable => Ok(()),
        _ => Err(format!(
            "{what}: an absolute http:// or https:// URL of printable ASCII (no spaces; \
             international host names in their xn-- form) is needed"
        )),
    }
}

/// The environment variables `object_store` reads for a store of `scheme` (its builders'
/// `from_env` take every `AWS_*` / `GOOGLE_*` / `AZURE_*` variable whose lower-cased name is
/// a configuration key, and their credential providers a few more by name), with their
/// values; variables that are not UTF-8 are skipped, as `object_store` skips them.
pub(super) fn store_env(scheme: &ObjectStoreScheme) -> Vec<(String, String)> {
    use object_store::{aws::AmazonS3ConfigKey, azure::AzureConfigKey, gcp::GoogleConfigKey};
    use std::str::FromStr;
    let (prefix, extra, is_key): (&str, &[&str], fn(&str) -> bool) = match scheme {
        ObjectStoreScheme::AmazonS3 => ("AWS_", &[], |k| AmazonS3ConfigKey::from_str(k).is_ok()),
        ObjectStoreScheme::GoogleCloudStorage => (
            "GOOGLE_",
            &[
                "SERVICE_ACCOUNT",
                "GCE_METADATA_HOST",
                "GCE_METADATA_ROOT",
                "GCE_METADATA_IP",
            ],
            |k| GoogleConfigKey::from_str(k).is_ok(),
        ),
        ObjectStoreScheme::MicrosoftAzure => (
            "AZURE_",
            &[
                "IDENTITY_ENDPOINT",
                "IDENTITY_HEADER",
                "AZURITE_BLOB_STORAGE_URL",
            ],
            |k| AzureConfigKey::from_str(k).is_ok(),
        ),
        _ => return Vec::new(),
    };
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| {
            (k.starts_with(prefix) && is_key(&k.to_ascii_lowercase()))
                || extra.contains(&k.as_str())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_refused_by_name() {
        let e = check_value("storage option \"aws_region\"", "aws_region", "us-east-1\r");
        let msg = e.unwrap_err();
        assert!(
            msg.contains("aws_region") && msg.contains("U+000D"),
            "{msg}"
        );
        assert!(!msg.contains("us-east-1"), "{msg}");
        assert!(check_value("x", "aws_region", "us-east-1").is_ok());
        // A service account key is a JSON document: line breaks are fine, NUL is not.
        assert!(check_value("x", "google_service_account_key", "{\r\n}").is_ok());
        assert!(check_value("x", "google_service_account_key", "{\0}").is_err());
    }

    #[test]
    fn urls_hosts_and_paths_are_checked() {
        for bad in ["", " ", "é", "a b", "us-east-1 ", "ftp://h", "http://"] {
            assert!(check_value("e", "aws_endpoint", bad).is_err(), "{bad:?}");
        }
        assert!(check_value("e", "aws_endpoint", "http://127.0.0.1:9000").is_ok());
        assert!(check_value("e", "AZURE_MSI_ENDPOINT", "https://x.example/t").is_ok());
        assert!(check_value("e", "proxy_url", "http://proxy:3128").is_ok());
        assert!(check_value("e", "aws_container_credentials_relative_uri", "/v2/c").is_ok());
        assert!(check_value("e", "aws_container_credentials_relative_uri", "v2").is_err());
        assert!(check_value("e", "GCE_METADATA_HOST", "metadata.google.internal").is_ok());
        assert!(check_value("e", "GCE_METADATA_HOST", "http://x/").is_err());
        assert!(check_value("e", "aws_region", "é").is_ok()); // not a URL: the store decides
    }
}
