//! File naming. A chunk is `data_{k}.gulp` + `meta_{k}.gmeta` (gulpio's names) plus our index
//! sidecar `data_{k}.gidx`. Temporary files start with a dot so that neither gulpio's globs
//! (`data*.gulp`, `meta*.gmeta`) nor ours ever see them.

use std::path::{Path, PathBuf};

pub const DATA_EXT: &str = "gulp";
pub const META_EXT: &str = "gmeta";
pub const INDEX_EXT: &str = "gidx";
/// Prefix of every temporary file we create; `gulpio repair` removes leftovers.
pub const TMP_PREFIX: &str = ".gulpio-tmp.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkPaths {
    pub data: PathBuf,
    pub meta: PathBuf,
    pub index: PathBuf,
}

impl ChunkPaths {
    /// The paths of a chunk given its data and meta files; the index sits beside the data file.
    pub fn new(data: impl Into<PathBuf>, meta: impl Into<PathBuf>) -> Self {
        let data = data.into();
        let index = data.with_extension(INDEX_EXT);
        ChunkPaths {
            data,
            meta: meta.into(),
            index,
        }
    }

    /// gulpio's names for chunk `k` in `dir`.
    pub fn numbered(dir: &Path, k: u64) -> Self {
        Self::new(
            dir.join(FileKind::Data.file_name(k)),
            dir.join(FileKind::Meta.file_name(k)),
        )
    }
}

/// The three files of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Data,
    Meta,
    Index,
}

impl FileKind {
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Data => "data",
            FileKind::Meta => "meta",
            FileKind::Index => "index",
        }
    }

    /// `data_{k}.gulp`, `meta_{k}.gmeta` or `data_{k}.gidx`.
    pub fn file_name(self, k: u64) -> String {
        match self {
            FileKind::Data => format!("data_{k}.{DATA_EXT}"),
            FileKind::Meta => format!("meta_{k}.{META_EXT}"),
            FileKind::Index => format!("data_{k}.{INDEX_EXT}"),
        }
    }
}

/// The kind of a file gulpio's globs list as part of a chunk: `data*.gulp` or `meta*.gmeta`
/// (whatever is between). Temporary files never match: they start with a dot.
pub fn glob_kind(name: &str) -> Option<FileKind> {
    let matches = |prefix: &str, ext: &str| {
        name.starts_with(prefix) && name.strip_suffix(ext).is_some_and(|s| s.ends_with('.'))
    };
    if matches("data", DATA_EXT) {
        Some(FileKind::Data)
    } else if matches("meta", META_EXT) {
        Some(FileKind::Meta)
    } else {
        None
    }
}

/// The chunk number gulpio derives from a file name: the first run of digits in the basename.
/// This is what a reader pairs data and meta files by, so two names with the same number
/// (`data_7.gulp`, `data_007.gulp`) claim the same chunk.
pub fn chunk_number(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let start = name.find(|c: char| c.is_ascii_digit())?;
    let digits: String = name[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// The kind and number of a file named as this package names chunk files
/// (`data_{k}.gulp`, `meta_{k}.gmeta`, `data_{k}.gidx`; `k` in decimal digits).
pub fn parse_chunk_file_name(name: &str) -> Option<(FileKind, u64)> {
    let (stem, ext) = name.rsplit_once('.')?;
    let (prefix, digits) = stem.split_once('_')?;
    let kind = match (prefix, ext) {
        ("data", DATA_EXT) => FileKind::Data,
        ("meta", META_EXT) => FileKind::Meta,
        ("data", INDEX_EXT) => FileKind::Index,
        _ => return None,
    };
    Some((kind, decimal(digits)?))
}

/// The first chunk number, `from` or later, that none of the file names `names` uses: not
/// gulpio's `data*.gulp` / `meta*.gmeta` (by the number gulpio reads from the name, which is
/// what readers pair by) and not an index (`data_{k}.gidx`, a chunk being published). None
/// when no number is left.
pub fn first_free_number<'a>(names: impl IntoIterator<Item = &'a str>, from: u64) -> Option<u64> {
    let mut last = None;
    for name in names {
        let number = match (glob_kind(name), parse_chunk_file_name(name)) {
            (Some(_), _) => chunk_number(Path::new(name)),
            (None, Some((FileKind::Index, k))) => Some(k),
            _ => None,
        };
        last = last.max(number);
    }
    match last {
        Some(k) => k.checked_add(1).map(|next| next.max(from)),
        None => Some(from),
    }
}

fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The name of a writer's temporary file for the file named `target`:
/// `.gulpio-tmp.{target}.{pid}-{seq}`.
pub fn temp_name(target: &str, pid: u32, seq: u64) -> String {
    format!("{TMP_PREFIX}{target}.{pid}-{seq}")
}

/// A fresh temporary name next to `target`, unique per process and call.
pub fn temp_for(target: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = target
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(temp_name(&name, std::process::id(), n))
}

/// If `name` is a writer's temporary file (see [`temp_name`]): the name of the file it
/// stands in for and the pid of the process that made it. Repair removes those whose process
/// is gone.
pub fn parse_temp_name(name: &str) -> Option<(&str, u32)> {
    let rest = name.strip_prefix(TMP_PREFIX)?;
    let (target, suffix) = rest.rsplit_once('.')?;
    let (pid, seq) = suffix.split_once('-')?;
    decimal(seq)?;
    let pid = u32::try_from(decimal(pid)?).ok()?;
    (!target.is_empty()).then_some((target, pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        let p = ChunkPaths::numbered(Path::new("/d"), 12);
        assert_eq!(p.data, Path::new("/d/data_12.gulp"));
        assert_eq!(p.meta, Path::new("/d/meta_12.gmeta"));
        assert_eq!(p.index, Path::new("/d/data_12.gidx"));
        assert_eq!(chunk_number(&p.data), Some(12));
        assert_eq!(chunk_number(Path::new("data.gulp")), None);
        let t = temp_for(&p.meta);
        assert!(t
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(".gulpio-tmp.meta_12"));
    }

    #[test]
    fn our_names_parse_back() {
        for k in [0, 7, 12, u64::MAX] {
            for kind in [FileKind::Data, FileKind::Meta, FileKind::Index] {
                let name = kind.file_name(k);
                assert_eq!(parse_chunk_file_name(&name), Some((kind, k)), "{name}");
            }
        }
        for other in [
            "data_.gulp",
            "data_1.gmeta",
            "meta_1.gidx",
            "data_-1.gulp",
            "data_1x.gulp",
            "data1.gulp",
            "data_99999999999999999999.gulp",
            ".gulpio-tmp.data_1.gulp.5-0",
        ] {
            assert_eq!(parse_chunk_file_name(other), None, "{other}");
        }
    }

    #[test]
    fn free_numbers() {
        let names = [
            "data_0.gulp",
            "meta_0.gmeta",
            "data_007.gulp",
            "label2idx.json",
        ];
        assert_eq!(first_free_number(names, 0), Some(8));
        assert_eq!(first_free_number(names, 12), Some(12));
        assert_eq!(first_free_number(["data_9.gidx"], 3), Some(10));
        assert_eq!(
            first_free_number([".gulpio-tmp.data_5.gulp.1-1"], 0),
            Some(0)
        );
        assert_eq!(
            first_free_number(["meta_18446744073709551615.gmeta"], 0),
            None
        );
    }

    #[test]
    fn gulpio_globs() {
        assert_eq!(glob_kind("data_3.gulp"), Some(FileKind::Data));
        assert_eq!(glob_kind("data.gulp"), Some(FileKind::Data));
        assert_eq!(glob_kind("meta-x-4.gmeta"), Some(FileKind::Meta));
        assert_eq!(glob_kind("data_3.gidx"), None);
        assert_eq!(glob_kind("xdata_3.gulp"), None);
        assert_eq!(glob_kind("data_3.gulpx"), None);
        assert_eq!(glob_kind(".gulpio-tmp.data_3.gulp.1-2"), None);
    }

    #[test]
    fn temporaries_name_their_target_and_pid() {
        let t = temp_for(Path::new("/d/data_3.gidx"));
        let name = t.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            parse_temp_name(name),
            Some(("data_3.gidx", std::process::id()))
        );
        assert_eq!(
            parse_temp_name(&temp_name("meta_1.gmeta", 42, 9)),
            Some(("meta_1.gmeta", 42))
        );
        for other in [
            "data_3.gidx",
            ".gulpio-tmp.data_3.gidx",
            ".gulpio-tmp.data_3.gidx.42",
            ".gulpio-tmp.data_3.gidx.42-",
            ".gulpio-tmp.data_3.gidx.x-1",
            ".gulpio-tmp..1-2",
            ".gulpio-tmp.data_3.gidx.99999999999-1",
        ] {
            assert_eq!(parse_temp_name(other), None, "{other}");
        }
    }
}
