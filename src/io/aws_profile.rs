//! AWS shared config and credentials files (`~/.aws/credentials`, `~/.aws/config`), which the
//! object_store crate does not read. Users of the AWS CLI and boto3 keep their keys there under
//! named profiles (`AWS_PROFILE`); without this, `s3://` URLs that work in boto3 would fail
//! here with "no credentials".
//!
//! Static keys only (`aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`) plus
//! `region` and `endpoint_url`: SSO, `credential_process`, `source_profile` role chains are the
//! AWS SDK's job, and a profile that uses them is reported as such rather than half-applied.
//! The files are INI with `[name]` sections in `credentials` and `[profile name]` (or
//! `[default]`) in `config`; `#`/`;` start comments, keys are case-insensitive.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What a profile gives, with where it came from for messages (never a secret).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    /// object_store option keys (`aws_access_key_id`, ...) and values.
    pub options: Vec<(String, String)>,
    /// `"profile 'dev' in /home/u/.aws/credentials"`.
    pub source: String,
    /// Set when the profile exists but needs a mechanism this reader does not run.
    pub unsupported: Option<String>,
}

/// Sections of an INI file: name -> key -> value (keys lower-cased).
fn parse_ini(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut sections: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_owned();
            sections.entry(name.clone()).or_default();
            current = Some(name);
        } else if let (Some(section), Some((k, v))) = (&current, line.split_once('=')) {
            // Nested blocks (`s3 =` followed by indented keys) have no value of their own and
            // are skipped with their keys, which were trimmed into plain lines: harmless, as
            // none of their keys are ones read here under the same name.
            let v = v.trim();
            if !v.is_empty() {
                if let Some(map) = sections.get_mut(section) {
                    map.insert(k.trim().to_ascii_lowercase(), v.to_owned());
                }
            }
        }
    }
    sections
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

fn file_from(var: &str, default: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => home().map(|h| h.join(".aws").join(default)),
    }
}

fn read(path: &Path) -> Option<HashMap<String, HashMap<String, String>>> {
    std::fs::read_to_string(path).ok().map(|t| parse_ini(&t))
}

/// The profile `name` (or `AWS_PROFILE`, else `default`) from the files named by
/// `AWS_SHARED_CREDENTIALS_FILE` / `AWS_CONFIG_FILE` (or their `~/.aws/` defaults). `None`
/// when no file has that profile, or when no profile was asked for and `default` is absent.
pub fn load(name: Option<&str>) -> Option<Profile> {
    let explicit = name
        .map(str::to_owned)
        .or_else(|| std::env::var("AWS_PROFILE").ok().filter(|s| !s.is_empty()));
    let name = explicit.clone().unwrap_or_else(|| "default".to_owned());
    load_from(
        &name,
        file_from("AWS_SHARED_CREDENTIALS_FILE", "credentials").as_deref(),
        file_from("AWS_CONFIG_FILE", "config").as_deref(),
    )
}

/// [`load`] with the two files given.
pub fn load_from(name: &str, credentials: Option<&Path>, config: Option<&Path>) -> Option<Profile> {
    let creds = credentials
        .and_then(read)
        .and_then(|mut s| s.remove(name).map(|m| (m, credentials)));
    let conf = config.and_then(read).and_then(|mut s| {
        let section = if name == "default" {
            s.remove("default").or_else(|| s.remove("profile default"))
        } else {
            s.remove(&format!("profile {name}"))
        };
        section.map(|m| (m, config))
    });
    if creds.is_none() && conf.is_none() {
        return None;
    }
    let mut profile = Profile {
        name: name.to_owned(),
        ..Profile::default()
    };
    let mut key_file = None;
    // Keys in `credentials` win over the same keys in `config`, as in the AWS CLI.
    for (section, path) in [conf.as_ref(), creds.as_ref()].into_iter().flatten() {
        for (key, option) in [
            ("aws_access_key_id", "aws_access_key_id"),
            ("aws_secret_access_key", "aws_secret_access_key"),
            ("aws_session_token", "aws_session_token"),
            ("region", "aws_region"),
            ("endpoint_url", "aws_endpoint"),
        ] {
            if let Some(v) = section.get(key) {
                profile.options.retain(|(k, _)| k != option);
                profile.options.push((option.to_owned(), v.clone()));
                if key == "aws_access_key_id" {
                    key_file = path.map(|p| p.display().to_string());
                }
            }
        }
        for key in [
            "sso_start_url",
            "sso_session",
            "credential_process",
            "role_arn",
            "web_identity_token_file",
        ] {
            if section.contains_key(key) && profile.unsupported.is_none() {
                profile.unsupported = Some(key.to_owned());
            }
        }
    }
    let has_key = profile
        .options
        .iter()
        .any(|(k, _)| k == "aws_access_key_id");
    if has_key {
        // Static keys make the profile usable whatever else it also says.
        profile.unsupported = None;
    }
    profile.source = format!(
        "profile {name:?} in {}",
        key_file
            .or_else(|| creds.and_then(|(_, p)| p.map(|p| p.display().to_string())))
            .or_else(|| conf.and_then(|(_, p)| p.map(|p| p.display().to_string())))
            .unwrap_or_default()
    );
    Some(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(creds: &str, config: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("credentials");
        let f = dir.path().join("config");
        std::fs::write(&c, creds).unwrap();
        std::fs::write(&f, config).unwrap();
        (dir, c, f)
    }

    fn get<'a>(p: &'a Profile, k: &str) -> Option<&'a str> {
        p.options
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn named_profile_from_both_files() {
        let (_d, c, f) = files(
            "[default]\naws_access_key_id = AKDEF\naws_secret_access_key = sdef\n\n\
             # a comment\n[dev]\naws_access_key_id=AKDEV\naws_secret_access_key = s/dev+\n\
             aws_session_token = tok\n",
            "[default]\nregion = eu-west-1\n[profile dev]\nregion = us-east-2\n\
             endpoint_url = http://127.0.0.1:9000\ns3 =\n  addressing_style = path\n",
        );
        let p = load_from("dev", Some(&c), Some(&f)).unwrap();
        assert_eq!(get(&p, "aws_access_key_id"), Some("AKDEV"));
        assert_eq!(get(&p, "aws_secret_access_key"), Some("s/dev+"));
        assert_eq!(get(&p, "aws_session_token"), Some("tok"));
        assert_eq!(get(&p, "aws_region"), Some("us-east-2"));
        assert_eq!(get(&p, "aws_endpoint"), Some("http://127.0.0.1:9000"));
        assert!(p.source.starts_with("profile \"dev\" in "), "{}", p.source);
        assert!(!p.source.contains("s/dev+"));
        let d = load_from("default", Some(&c), Some(&f)).unwrap();
        assert_eq!(get(&d, "aws_access_key_id"), Some("AKDEF"));
        assert_eq!(get(&d, "aws_region"), Some("eu-west-1"));
        assert!(load_from("nope", Some(&c), Some(&f)).is_none());
        assert!(load_from("dev", None, None).is_none());
    }

    #[test]
    fn credentials_file_wins_and_sso_is_reported() {
        let (_d, c, f) = files(
            "[p]\naws_access_key_id = FROMCREDS\naws_secret_access_key = x\n",
            "[profile p]\naws_access_key_id = FROMCONFIG\n[profile sso]\nsso_session = corp\n\
             region = us-west-2\n",
        );
        let p = load_from("p", Some(&c), Some(&f)).unwrap();
        assert_eq!(get(&p, "aws_access_key_id"), Some("FROMCREDS"));
        assert_eq!(p.unsupported, None);
        let s = load_from("sso", Some(&c), Some(&f)).unwrap();
        assert_eq!(s.unsupported.as_deref(), Some("sso_session"));
        assert_eq!(get(&s, "aws_region"), Some("us-west-2"));
    }

    #[test]
    fn odd_lines_do_not_break_parsing() {
        let sections = parse_ini("junk before any section\n[a]\n= no key\nk = v = w\n[b\n");
        assert_eq!(sections["a"]["k"], "v = w");
    }
}
