//! Local files, opened by the rules that keep hostile or odd directory entries harmless. The one
//! owner of those rules; every local open of a dataset file goes through here.
//!
//! Reading: only regular files, within the size limit of their kind (docs/FORMAT.md §5),
//! checked with `fstat` on the opened descriptor before anything is read. The open is
//! non-blocking, so a FIFO in place of a chunk file cannot hang it, and a symlink to
//! `/dev/zero` is refused rather than read without end. Symlinks to regular files are read
//! (datasets assembled from links are common).
//!
//! Writing: a file written or truncated in place is opened without following a symlink
//! (`O_NOFOLLOW`), must be a regular file with no other hard link, and is then changed only
//! through that descriptor, so what was checked is what is written (no check-then-use race).
//! New files are created exclusively (`O_EXCL`: never through an existing name, symlink or
//! not). Names are published with renames (which replace a name, never write through it) or
//! with no-replace links.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::format::paths::{DATA_EXT, INDEX_EXT, META_EXT};

/// Largest `.gmeta` read (it is read whole into memory): docs/FORMAT.md §5.
pub const MAX_GMETA_LEN: u64 = 1 << 34;
/// Largest other small file read whole (`label2idx.json` and other sidecars).
pub const MAX_SIDE_FILE_LEN: u64 = 1 << 30;

/// The size limit of a file by its kind (its extension): `.gulp` 2^48 bytes, `.gmeta` 16 GiB,
/// anything else 1 GiB. A `.gidx` is mapped, not read whole, and its exact length is then
/// checked against what its header describes (§3), so it gets the `.gulp` bound here.
pub fn limit_for(path: &Path) -> u64 {
    match path.extension().and_then(|e| e.to_str()) {
        Some(DATA_EXT) | Some(INDEX_EXT) => crate::format::index::MAX_GULP_LEN,
        Some(META_EXT) => MAX_GMETA_LEN,
        _ => MAX_SIDE_FILE_LEN,
    }
}

/// `s3://...`, `file://...` and other `scheme://` strings are never local paths: an error
/// instead of a file named `s3:/bucket/...` under the working directory.
pub fn refuse_url(path: &Path) -> Result<()> {
    let Some(s) = path.to_str() else {
        return Ok(());
    };
    let Some((scheme, _)) = s.split_once("://") else {
        return Ok(());
    };
    let schemeish = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !schemeish {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{s} is a URL, not a local path: open remote datasets with GulpDirectory(url) and write \
         to them with GulpDirectory(url).new_chunks() or GulpIngestor (staged locally, then \
         published, docs/REMOTE.md)"
    )))
}

fn kind_of(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Opens a dataset file for reading: a regular file no larger than `limit`. Returns the file
/// and its length (from the same `fstat`).
pub fn open_read_limited(path: &Path, limit: u64) -> Result<(File, u64)> {
    refuse_url(path)?;
    let file = OpenOptions::new()
        .read(true)
        // A FIFO would block the open until a writer appears; regular files ignore the flag.
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .at(path)?;
    let meta = file.metadata().at(path)?;
    if !meta.is_file() {
        return Err(Error::format(
            path,
            format!(
                "is {} (dataset files must be regular files); refused before reading",
                kind_of(&meta)
            ),
        ));
    }
    let len = meta.len();
    if len > limit {
        return Err(Error::format(
            path,
            format!(
                "is {len} bytes, more than the {limit} bytes a file of its kind may have \
                 (docs/FORMAT.md §5); refused before reading"
            ),
        ));
    }
    Ok((file, len))
}

/// [`open_read_limited`] with the limit of the file's kind ([`limit_for`]).
pub fn open_read(path: &Path) -> Result<(File, u64)> {
    open_read_limited(path, limit_for(path))
}

/// The whole of a (small) file: exactly the length `fstat` gave, checked against its limit
/// first. A file that shrank while being read is an error; one that grew is read up to the
/// length it had.
pub fn read_whole(path: &Path) -> Result<Vec<u8>> {
    let (file, len) = open_read(path)?;
    let len_usize = usize::try_from(len)
        .map_err(|_| Error::format(path, format!("is {len} bytes, too large for this machine")))?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(len_usize).map_err(|_| {
        Error::format(
            path,
            format!("is {len} bytes: not enough memory to read it whole"),
        )
    })?;
    file.take(len).read_to_end(&mut buf).at(path)?;
    if (buf.len() as u64) < len {
        return Err(Error::format(
            path,
            format!(
                "truncated while being read: {} of its {len} bytes were there",
                buf.len()
            ),
        ));
    }
    Ok(buf)
}

/// Opens an existing file to be written or truncated in place: not through a symlink, a
/// regular file, and its only name (another hard link would be changed too; another path may
/// lead outside the dataset).
pub fn open_in_place(path: &Path) -> Result<File> {
    refuse_url(path)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| nofollow_error(path, e, "write to"))?;
    let meta = file.metadata().at(path)?;
    check_writable_meta(path, &meta, "write to")?;
    Ok(file)
}

/// Opens an existing file only to lock it (read-only, not through a symlink, regular).
pub fn open_to_lock(path: &Path) -> Result<File> {
    refuse_url(path)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| nofollow_error(path, e, "replace"))?;
    let meta = file.metadata().at(path)?;
    if !meta.is_file() {
        return Err(unsafe_file(
            path,
            format!("is {}; refusing to replace it", kind_of(&meta)),
        ));
    }
    Ok(file)
}

fn check_writable_meta(path: &Path, meta: &Metadata, what: &str) -> Result<()> {
    if !meta.is_file() {
        return Err(unsafe_file(
            path,
            format!("is {}; refusing to {what} it", kind_of(meta)),
        ));
    }
    if meta.nlink() != 1 {
        return Err(unsafe_file(
            path,
            format!(
                "has {} hard links: changing it in place would change the other names too \
                 (which may lie outside the dataset); refusing to {what} it",
                meta.nlink()
            ),
        ));
    }
    Ok(())
}

fn nofollow_error(path: &Path, e: std::io::Error, what: &str) -> Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return unsafe_file(
            path,
            format!(
                "is a symbolic link; refusing to {what} it (gulpio never writes, truncates or \
                 deletes through a symlink: it could lead outside the dataset). Replace the \
                 link with the file itself"
            ),
        );
    }
    Error::io(path, e)
}

fn unsafe_file(path: &Path, msg: String) -> Error {
    Error::Unsafe {
        path: path.to_path_buf(),
        msg,
    }
}

/// Creates a new file for writing; fails if the name exists in any form (a symlink
/// included), so it never writes into something that was there.
pub fn create_new(path: &Path) -> Result<File> {
    refuse_url(path)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .at(path)
}

/// True when `a` and `b` are the same file (device and inode).
pub fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// True when the name `path` (not following a symlink) is the file `file`.
pub fn names_file(path: &Path, file: &File) -> bool {
    match (std::fs::symlink_metadata(path), file.metadata()) {
        (Ok(a), Ok(b)) => same_file(&a, &b),
        _ => false,
    }
}

/// True when `path` exists as a name (a dangling symlink counts).
pub fn name_exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Takes the exclusive writer's lock of a chunk: `flock` on its data file, held while the
/// descriptor stays open (the kernel drops it when the process dies, even by SIGKILL). Fails
/// at once, with [`Error::Conflict`], when another writer (process or thread) holds it.
pub fn lock_writer(file: &File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this `File` owns; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Err(Error::Conflict {
            path: path.to_path_buf(),
            msg: "another writer (process or thread) is writing this chunk; one chunk has one \
                  writer at a time"
                .into(),
        });
    }
    Err(Error::io(path, e))
}

/// Publishes `src` (a complete temporary) under the new name `dst` unless `dst` exists:
/// a hard link, which fails atomically if the name is taken, or where the file system has no
/// hard links a `renameat2(RENAME_NOREPLACE)`. True when `dst` now names `src`'s file.
pub fn link_new(src: &Path, dst: &Path) -> Result<bool> {
    refuse_url(dst)?;
    match std::fs::hard_link(src, dst) {
        Ok(()) => return Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e)
            if !matches!(
                e.raw_os_error(),
                Some(libc::EPERM | libc::EOPNOTSUPP | libc::ENOSYS | libc::EMLINK)
            ) =>
        {
            return Err(Error::io(dst, e))
        }
        Err(_) => {}
    }
    rename_noreplace(src, dst)
}

fn rename_noreplace(src: &Path, dst: &Path) -> Result<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let cstr = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| Error::InvalidArgument(format!("{}: NUL in path", p.display())))
    };
    let (s, d) = (cstr(src)?, cstr(dst)?);
    // SAFETY: both are valid NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            s.as_ptr(),
            libc::AT_FDCWD,
            d.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EEXIST) => Ok(false),
        Some(libc::EINVAL | libc::ENOSYS) => Err(Error::io(
            dst,
            std::io::Error::new(
                e.kind(),
                "this file system supports neither hard links nor no-replace renames, so a \
                 chunk cannot be published without risking another writer's chunk",
            ),
        )),
        _ => Err(Error::io(dst, e)),
    }
}

/// Removes the name `path` if it still names `file` (a publication rolled back: never a file
/// another writer put there since).
pub fn remove_if_names(path: &Path, file: &File) {
    if names_file(path, file) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("meta_0.gmeta");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_whole(&fifo).unwrap_err().to_string();
        assert!(err.contains("a FIFO"), "{err}");
        let zero = dir.path().join("meta_1.gmeta");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = read_whole(&zero).unwrap_err().to_string();
        assert!(err.contains("character device"), "{err}");
        assert!(read_whole(dir.path()).is_err());
    }

    #[test]
    fn size_limits_are_checked_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.json");
        std::fs::write(&f, b"0123456789").unwrap();
        let err = open_read_limited(&f, 4).unwrap_err().to_string();
        assert!(err.contains("10 bytes, more than the 4"), "{err}");
        assert_eq!(read_whole(&f).unwrap(), b"0123456789");
    }

    #[test]
    fn writes_refuse_symlinks_and_hard_links() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"keep me").unwrap();
        let link = dir.path().join("data_0.gulp");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let err = open_in_place(&link).unwrap_err();
        assert!(matches!(err, Error::Unsafe { .. }), "{err}");
        assert!(create_new(&link).is_err());
        let hard = dir.path().join("data_1.gulp");
        std::fs::hard_link(&outside, &hard).unwrap();
        assert!(matches!(open_in_place(&hard), Err(Error::Unsafe { .. })));
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep me");
    }

    #[test]
    fn link_new_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, t) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("t"),
        );
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        assert!(link_new(&a, &t).unwrap());
        assert!(!link_new(&b, &t).unwrap());
        assert_eq!(std::fs::read(&t).unwrap(), b"a");
        assert!(!rename_noreplace(&b, &t).unwrap());
    }

    #[test]
    fn urls_are_not_paths() {
        for url in [
            "s3://b/x/data_0.gulp",
            "file:///tmp/x",
            "gs://b/meta_1.gmeta",
        ] {
            assert!(refuse_url(Path::new(url)).is_err(), "{url}");
        }
        for path in ["/tmp/x", "rel/a:b", "/x/s3://y", "://x"] {
            assert!(refuse_url(Path::new(path)).is_ok(), "{path}");
        }
    }
}
