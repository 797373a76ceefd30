//! Opening a chunk: which index it reads through (the checksummed `.gidx` when it is intact
//! and current, the `.gmeta` otherwise), and what is said about the one not used.

use super::legacy::legacy_index_of;
use super::trust::{data_written_after_index, frames_still_match, judge_meta, MetaVerdict};
use super::{ChunkReader, IndexKind};
use crate::chunk::probe::{probe_index_in, until_settled, KnownSizes};
use crate::error::{Error, Result};
use crate::format::index::{Index, HEADER_LEN};
use crate::format::paths::ChunkPaths;
use crate::format::Storage;
use crate::io::Store;
use std::sync::OnceLock;

/// Which index a chunk's opener expects: the one whose header it probed, or the one a dataset
/// manifest recorded (its length and its header's CRC field, docs/FORMAT.md §7.7 M3).
#[derive(Clone, Copy)]
pub enum ExpectedIndex<'a> {
    Header(&'a [u8; HEADER_LEN]),
    Recorded { len: u64, header_crc: u32 },
}

impl ExpectedIndex<'_> {
    fn matches(&self, index: &Index) -> bool {
        let h = index.header_bytes();
        match self {
            ExpectedIndex::Header(header) => h == &header[..],
            // The header passed its own CRC check: a matching CRC field is the same header.
            ExpectedIndex::Recorded { len, header_crc } => {
                index.byte_len() == *len && h[124..128] == header_crc.to_le_bytes()
            }
        }
    }
}

impl ChunkReader {
    /// Opens a chunk, using its index when one exists and is intact and current, and the
    /// `.gmeta` otherwise. The second value says why an existing index was not used.
    pub fn open(paths: &ChunkPaths) -> Result<(ChunkReader, Option<Error>)> {
        if !paths.index.exists() {
            return Ok((Self::open_legacy(paths)?, None));
        }
        Self::open_in(&Store::default(), paths, KnownSizes::default())
    }

    /// [`ChunkReader::open`] with the `.gulp` memory-mapped, so that
    /// [`ChunkReader::frame_bytes`] hands out slices of it (the default reads with `pread`).
    pub fn open_mapped(paths: &ChunkPaths) -> Result<(ChunkReader, Option<Error>)> {
        Self::open_in(
            &Store::Local(crate::io::LocalIo::Mmap),
            paths,
            KnownSizes::default(),
        )
    }

    /// [`ChunkReader::open`] in any store; `sizes.index` must be known to exist (None for
    /// local files, which are looked for).
    pub fn open_in(
        store: &Store,
        paths: &ChunkPaths,
        sizes: KnownSizes,
    ) -> Result<(ChunkReader, Option<Error>)> {
        let has_index = match store {
            Store::Local(_) => paths.index.exists(),
            Store::Remote(_) => sizes.index.is_some(),
        };
        if !has_index {
            return Ok((Self::open_legacy_in(store, paths, sizes)?, None));
        }
        let opened = probe_index_in(store, paths, sizes).and_then(|p| {
            Self::from_index_in(store, paths, ExpectedIndex::Header(&p.header_bytes), sizes)
        });
        match opened {
            Ok(r) => Ok((r, None)),
            // A damaged or stale index must not make a chunk with a good `.gmeta` unreadable.
            // (On object stores, bytes damaged in transit were fetched again first: only
            // damage at rest gets here.)
            Err(e @ (Error::StaleIndex { .. } | Error::Format { .. })) => {
                let mut legacy = Self::open_legacy_in(store, paths, sizes)?;
                legacy.index_problem = Some(e.to_string());
                Ok((legacy, Some(e)))
            }
            Err(e) => Err(e),
        }
    }

    /// Completes opening a probed chunk: maps the index and checks it is the one probed
    /// (`header` carries every section's CRC), checks the frame table and meta blob, and
    /// compares the `.gmeta` with the one the index was written with.
    pub fn from_index(paths: &ChunkPaths, header: &[u8; HEADER_LEN]) -> Result<ChunkReader> {
        Self::from_index_in(
            &Store::default(),
            paths,
            ExpectedIndex::Header(header),
            KnownSizes::default(),
        )
    }

    /// [`ChunkReader::from_index`] in any store. A `.gmeta` that differs from the one the
    /// index was written for is judged ([`judge_meta`]): written later by another tool (a
    /// `StaleIndex` error: the caller reads through the `.gmeta`), or damaged (the chunk reads
    /// through its checksummed index and [`ChunkReader::meta_problem`] says why).
    pub fn from_index_in(
        store: &Store,
        paths: &ChunkPaths,
        expected: ExpectedIndex<'_>,
        sizes: KnownSizes,
    ) -> Result<ChunkReader> {
        let index = until_settled(store, &paths.index, |seen| {
            let bytes = store.map_or_read(&paths.index)?;
            if store.is_remote() {
                seen.update(&bytes);
            }
            let index = Index::parse(bytes).map_err(|m| Error::format(&paths.index, m))?;
            if !expected.matches(&index) {
                return Err(Error::stale(
                    &paths.index,
                    match expected {
                        ExpectedIndex::Header(_) => {
                            "the index file was replaced after the chunk was opened"
                        }
                        ExpectedIndex::Recorded { .. } => {
                            "the index is not the one the dataset manifest records"
                        }
                    },
                ));
            }
            index
                .verify_full()
                .map_err(|m| Error::format(&paths.index, m))?;
            Ok(index)
        })?;
        let h = index.header();
        let (want_len, want_crc) = (h.gmeta_len, h.gmeta_crc);
        // The `.gmeta` as it is when it does not match (after refetches on object stores).
        let mut differs: Option<(Storage, u32)> = None;
        let fetched = until_settled(store, &paths.meta, |seen| {
            let meta = store.read_all(&paths.meta)?;
            let crc = crc32fast::hash(&meta);
            seen.update(&crc.to_le_bytes());
            if meta.len() as u64 == want_len && crc == want_crc {
                return Ok(());
            }
            differs = Some((meta, crc));
            Err(Error::stale(&paths.meta, "differs from its index"))
        });
        let data = store.open_data(&paths.data, sizes.data)?;
        let meta_problem = match (fetched, differs) {
            (Ok(()), _) => None,
            (Err(Error::StaleIndex { .. }), Some((meta, crc))) => {
                let what = format!(
                    "{} has CRC {crc:#010x} ({} bytes); the index was written for CRC \
                     {want_crc:#010x} ({want_len} bytes)",
                    paths.meta.display(),
                    meta.len(),
                );
                let verdict = match judge_meta(&index, &meta, data.len()) {
                    // A `.gmeta` that contradicts the index is damage only if the data still
                    // holds the index's frames; otherwise another tool rewrote the chunk.
                    MetaVerdict::Damaged(_) if !frames_still_match(&index, &data, &paths.data) => {
                        MetaVerdict::Newer(
                            "and the data file no longer holds the frames the index \
                             describes: the chunk was rewritten by another tool"
                                .into(),
                        )
                    }
                    MetaVerdict::Damaged(_) if data_written_after_index(store, paths) => {
                        MetaVerdict::Newer(
                            "and the data file was written after the index: the chunk was \
                             rewritten by another tool"
                                .into(),
                        )
                    }
                    verdict => verdict,
                };
                match verdict {
                    MetaVerdict::Same => None,
                    MetaVerdict::Newer(how) => {
                        return Err(Error::stale(&paths.index, format!("{what}: {how}")))
                    }
                    MetaVerdict::Damaged(how) => Some(format!(
                        "{what}, and {how}: it is damaged (or was edited by hand), so the chunk \
                         is read through its checksummed index, which holds every id, frame \
                         and metadata value; `gulpio repair --apply` rewrites the .gmeta from \
                         the index"
                    )),
                }
            }
            (Err(e), _) => return Err(e),
        };
        Ok(ChunkReader {
            data,
            paths: paths.clone(),
            index,
            kind: IndexKind::Binary,
            index_problem: None,
            meta_problem,
            by_id: OnceLock::new(),
            unindexed_segments: Vec::new(),
        })
    }

    /// Opens a chunk through its `.gmeta` alone (no CRCs to verify).
    pub fn open_legacy(paths: &ChunkPaths) -> Result<ChunkReader> {
        Self::open_legacy_in(&Store::default(), paths, KnownSizes::default())
    }

    /// [`ChunkReader::open_legacy`] in any store.
    pub fn open_legacy_in(
        store: &Store,
        paths: &ChunkPaths,
        sizes: KnownSizes,
    ) -> Result<ChunkReader> {
        let text = store.read_all(&paths.meta)?;
        let (index, unindexed_segments) =
            legacy_index_of(&text).map_err(|m| Error::format(&paths.meta, m))?;
        Ok(ChunkReader {
            data: store.open_data(&paths.data, sizes.data)?,
            paths: paths.clone(),
            index,
            kind: IndexKind::Legacy,
            index_problem: None,
            meta_problem: None,
            by_id: OnceLock::new(),
            unindexed_segments,
        })
    }
}
