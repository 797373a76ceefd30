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
            dir.join(format!("data_{k}.{DATA_EXT}")),
            dir.join(format!("meta_{k}.{META_EXT}")),
        )
    }
}

/// The chunk number gulpio derives from a file name: the first run of digits in the basename.
pub fn chunk_number(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let start = name.find(|c: char| c.is_ascii_digit())?;
    let digits: String = name[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
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
    target.with_file_name(format!("{TMP_PREFIX}{name}.{}-{n}", std::process::id()))
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
}
