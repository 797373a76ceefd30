//! Writing a chunk crash-safely. New data goes to a temporary file (mode `Create`) or past the
//! published end of the existing one (mode `Append`); `publish` then fsyncs the data, writes
//! the `.gmeta` and the index under temporary names, fsyncs them and renames them into place,
//! index last. Published bytes are never rewritten or truncated, so a reader that has the old
//! version mapped keeps working, and a crash at any point leaves the old or the new state plus
//! temporary files or an unpublished tail (both ignored by readers, removed by repair).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::chunk::reader::{ChunkReader, IndexKind};
use crate::error::{At, Error, IoContext, Result};
use crate::format::index::{FrameRec, IndexBuilder, MAX_JPEG_LEN};
use crate::format::json::Scanner;
use crate::format::paths::{temp_for, ChunkPaths};
use crate::format::{gmeta, pad_for};
use crate::jpeg::header::read_info;
use crate::jpeg::restart;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// gulpio's `'wb'`: start an empty chunk (replacing an existing one when published).
    Create,
    /// gulpio's `'ab'`: keep what the chunk holds and add to it.
    Append,
}

struct Entry {
    id: String,
    frames: Vec<FrameRec>,
    /// Each frame's restart marker positions, for the index (empty: none usable).
    restarts: Vec<Vec<u32>>,
    /// JSON text of the whole `meta_data` list.
    meta_data: Vec<u8>,
}

impl Entry {
    fn restart_slices(&self) -> Vec<&[u32]> {
        self.restarts.iter().map(Vec::as_slice).collect()
    }
}

pub struct ChunkWriter {
    paths: ChunkPaths,
    /// Where the data bytes currently live: a temporary file until first published.
    data_path: PathBuf,
    out: Option<BufWriter<File>>,
    data_published: bool,
    entries: Vec<Entry>,
    by_id: HashMap<String, usize>,
    data_len: u64,
    published_len: u64,
    /// CRC32 of data bytes `[0, data_len)`.
    crc: crc32fast::Hasher,
    /// Set after an I/O error: the file no longer matches our bookkeeping.
    poisoned: bool,
}

const WRITE_BUFFER: usize = 1 << 20;

impl ChunkWriter {
    pub fn open(paths: &ChunkPaths, mode: WriteMode) -> Result<ChunkWriter> {
        if mode == WriteMode::Append && paths.data.exists() && paths.meta.exists() {
            return Self::open_append(paths);
        }
        let data_path = temp_for(&paths.data);
        let file = File::create(&data_path).at(&data_path)?;
        Ok(ChunkWriter {
            paths: paths.clone(),
            data_path,
            out: Some(BufWriter::with_capacity(WRITE_BUFFER, file)),
            data_published: false,
            entries: Vec::new(),
            by_id: HashMap::new(),
            data_len: 0,
            published_len: 0,
            crc: crc32fast::Hasher::new(),
            poisoned: false,
        })
    }

    fn open_append(paths: &ChunkPaths) -> Result<ChunkWriter> {
        let (reader, _) = ChunkReader::open(paths)?;
        let (entries, crc, published_len) = indexed_entries(&reader)?;
        drop(reader);
        let mut file = OpenOptions::new()
            .write(true)
            .open(&paths.data)
            .at(&paths.data)?;
        // Bytes past the published end are the leftovers of an interrupted writer: never
        // published, so removing them touches nothing a reader may use.
        file.set_len(published_len).at(&paths.data)?;
        file.seek(SeekFrom::End(0)).at(&paths.data)?;
        let by_id = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.clone(), i))
            .collect();
        Ok(ChunkWriter {
            paths: paths.clone(),
            data_path: paths.data.clone(),
            out: Some(BufWriter::with_capacity(WRITE_BUFFER, file)),
            data_published: true,
            entries,
            by_id,
            data_len: published_len,
            published_len,
            crc: crc32fast::Hasher::new_with_initial_len(crc, published_len),
            poisoned: false,
        })
    }

    pub fn paths(&self) -> &ChunkPaths {
        &self.paths
    }

    pub fn video_count(&self) -> usize {
        self.entries.len()
    }

    /// Appends one video (or, as gulpio does for a repeated id, more frames and one more
    /// `meta_data` element to an existing one). `meta_json` is the JSON text of one metadata
    /// value; `frames` are complete JPEG files. Everything is validated before any byte is
    /// written, so a rejected call leaves the chunk unchanged.
    pub fn append(&mut self, id: &str, meta_json: &[u8], frames: &[&[u8]]) -> Result<()> {
        if self.poisoned {
            return Err(Error::InvalidArgument(format!(
                "{}: an earlier write failed; this writer can only be aborted",
                self.paths.data.display()
            )));
        }
        let mut scan = Scanner::new(meta_json);
        scan.skip_value(0)
            .and_then(|_| {
                if scan.at_end() {
                    Ok(())
                } else {
                    Err("trailing data".into())
                }
            })
            .map_err(|m| {
                Error::invalid_for(
                    &self.paths.data,
                    At::video(id),
                    format!("metadata is not valid JSON: {m}"),
                )
            })?;
        let mut recs = Vec::with_capacity(frames.len());
        let mut restarts = Vec::with_capacity(frames.len());
        let mut offset = self.data_len;
        for (k, jpeg) in frames.iter().enumerate() {
            let info = read_info(jpeg)
                .map_err(|m| Error::invalid_for(&self.paths.data, At::frame(id, k), m))?;
            let jpeg_len = u32::try_from(jpeg.len())
                .ok()
                .filter(|&n| n <= MAX_JPEG_LEN)
                .ok_or_else(|| {
                    Error::invalid_for(&self.paths.data, At::frame(id, k), "the JPEG is too large")
                })?;
            let pad = pad_for(jpeg.len() as u64);
            recs.push(FrameRec {
                offset,
                jpeg_len,
                crc: crc32fast::hash(jpeg),
                width: info.width,
                height: info.height,
                channels: info.components,
                pad,
            });
            // Restart markers at whole MCU rows let a crop skip the rows above it.
            restarts.push(restart::scan(jpeg, &info).unwrap_or_default());
            offset += jpeg.len() as u64 + pad as u64;
        }
        if let Err(e) = self.write_frames(frames) {
            self.poisoned = true;
            return Err(e);
        }
        self.data_len = offset;
        match self.by_id.get(id) {
            Some(&i) => {
                let e = &mut self.entries[i];
                e.frames.extend(recs);
                e.restarts.extend(restarts);
                e.meta_data = gmeta::push_meta_element(&e.meta_data, meta_json);
            }
            None => {
                let mut meta_data = Vec::with_capacity(meta_json.len() + 2);
                meta_data.push(b'[');
                meta_data.extend_from_slice(meta_json);
                meta_data.push(b']');
                self.by_id.insert(id.to_owned(), self.entries.len());
                self.entries.push(Entry {
                    id: id.to_owned(),
                    frames: recs,
                    restarts,
                    meta_data,
                });
            }
        }
        Ok(())
    }

    fn write_frames(&mut self, frames: &[&[u8]]) -> Result<()> {
        let path = self.data_path.clone();
        let out = self.out.as_mut().ok_or_else(|| closed(&path))?;
        for jpeg in frames {
            let pad = &[0u8; 3][..pad_for(jpeg.len() as u64) as usize];
            out.write_all(jpeg).at(&path)?;
            out.write_all(pad).at(&path)?;
            self.crc.update(jpeg);
            self.crc.update(pad);
        }
        Ok(())
    }

    /// The `.gmeta` text for the current content, as gulpio2's `json.dump` would write it.
    pub fn meta_text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        gmeta::begin(&mut out);
        for (i, e) in self.entries.iter().enumerate() {
            gmeta::write_entry(
                &mut out,
                i == 0,
                &e.id,
                e.frames.iter().map(|f| f.frame_info()),
                &e.meta_data,
            );
        }
        gmeta::finish(&mut out);
        out
    }

    /// Makes everything appended so far durable and visible to readers (gulpio's `flush`).
    pub fn publish(&mut self) -> Result<()> {
        if self.poisoned {
            return Err(Error::InvalidArgument(format!(
                "{}: an earlier write failed; nothing more can be published",
                self.paths.data.display()
            )));
        }
        let path = self.data_path.clone();
        let out = self.out.as_mut().ok_or_else(|| closed(&path))?;
        out.flush().at(&path)?;
        out.get_ref().sync_data().at(&path)?;
        let meta = self.meta_text();
        let mut builder = IndexBuilder::new();
        for e in &self.entries {
            builder
                .push_video_with_restarts(&e.id, &e.meta_data, &e.frames, &e.restart_slices())
                .map_err(|p| Error::refused(&self.paths.data, p))?;
        }
        let index = builder.encode(
            self.data_len,
            self.crc.clone().finalize(),
            meta.len() as u64,
            crc32fast::hash(&meta),
        );
        // Everything is written and fsynced under temporary names first, so the renames that
        // publish it follow each other immediately: a crash can fall between two renames, but
        // the window is microseconds, not the time of an fsync.
        let meta_tmp = write_temp(&self.paths.meta, &meta)?;
        let index_tmp = match write_temp(&self.paths.index, &index) {
            Ok(t) => t,
            Err(e) => {
                let _ = std::fs::remove_file(&meta_tmp);
                return Err(e);
            }
        };
        let renamed = (|| {
            if !self.data_published {
                std::fs::rename(&self.data_path, &self.paths.data).at(&self.paths.data)?;
                self.data_path = self.paths.data.clone();
                self.data_published = true;
            }
            std::fs::rename(&meta_tmp, &self.paths.meta).at(&self.paths.meta)?;
            std::fs::rename(&index_tmp, &self.paths.index).at(&self.paths.index)
        })();
        if let Err(e) = renamed {
            let _ = std::fs::remove_file(&meta_tmp);
            let _ = std::fs::remove_file(&index_tmp);
            return Err(e);
        }
        sync_dir(&self.paths.index)?;
        self.published_len = self.data_len;
        Ok(())
    }

    /// Publishes and closes.
    pub fn close(mut self) -> Result<()> {
        self.publish()?;
        self.out = None;
        Ok(())
    }

    /// Discards everything not yet published: removes the temporary data file, or cuts the
    /// unpublished tail of a published one. Published state is left exactly as it was.
    pub fn abort(mut self) -> Result<()> {
        self.discard()
    }

    fn discard(&mut self) -> Result<()> {
        let Some(out) = self.out.take() else {
            return Ok(());
        };
        // Unpublished bytes still in the buffer are dropped, not written.
        let (file, _) = out.into_parts();
        if self.data_published {
            file.set_len(self.published_len).at(&self.data_path)?;
        } else {
            drop(file);
            std::fs::remove_file(&self.data_path).at(&self.data_path)?;
        }
        Ok(())
    }
}

impl Drop for ChunkWriter {
    fn drop(&mut self) {
        // Dropped without close/abort (an error unwound past it): keep the published state.
        let _ = self.discard();
    }
}

fn closed(path: &Path) -> Error {
    Error::InvalidArgument(format!("{}: writer is closed", path.display()))
}

/// Writes `bytes` to a new temporary file beside `target` and fsyncs it; returns its path.
fn write_temp(target: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let tmp = temp_for(target);
    let result = (|| {
        let mut f = File::create(&tmp).at(&tmp)?;
        f.write_all(bytes).at(&tmp)?;
        f.sync_all().at(&tmp)
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Writes `bytes` to a temporary file beside `target`, fsyncs it and renames it over `target`.
pub fn write_atomically(target: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = write_temp(target, bytes)?;
    std::fs::rename(&tmp, target).at(target).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn sync_dir(file_in_dir: &Path) -> Result<()> {
    let dir = match file_in_dir.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// The entries of an open chunk with complete frame records (CRCs and sizes computed from the
/// data for legacy chunks), the CRC of its published data and its published length.
fn indexed_entries(reader: &ChunkReader) -> Result<(Vec<Entry>, u32, u64)> {
    let published_len = reader.published_len();
    let data = reader.whole_data()?;
    if (data.len() as u64) < published_len {
        return Err(Error::format(
            &reader.paths().data,
            format!(
                "truncated: the chunk's records end at byte {published_len}, the file has {} \
                 bytes; the chunk cannot be appended to",
                data.len()
            ),
        ));
    }
    let legacy = reader.kind() == IndexKind::Legacy;
    let mut entries = Vec::with_capacity(reader.video_count());
    for v in 0..reader.video_count() {
        let mut frames: Vec<FrameRec> = reader.frames(v).collect();
        let mut restarts = Vec::with_capacity(frames.len());
        for (k, f) in frames.iter_mut().enumerate() {
            if !legacy {
                // Kept from the index (one of version 1 has none: the frames are not read).
                restarts.push(reader.restarts(v, k).unwrap_or_default());
                continue;
            }
            let jpeg = &data[f.offset as usize..f.jpeg_end() as usize];
            f.crc = crc32fast::hash(jpeg);
            let info = read_info(jpeg).ok();
            if let Some(info) = info {
                (f.width, f.height, f.channels) = (info.width, info.height, info.components);
            }
            let markers = info.and_then(|info| restart::scan(jpeg, &info));
            restarts.push(markers.unwrap_or_default());
        }
        entries.push(Entry {
            id: reader.id(v).to_owned(),
            frames,
            restarts,
            meta_data: reader.meta_data(v).to_vec(),
        });
    }
    let crc = if legacy {
        crc32fast::hash(&data[..published_len as usize])
    } else {
        reader.index().header().gulp_crc
    };
    Ok((entries, crc, published_len))
}

/// Writes the checksummed index of a chunk that has none (or a stale one), without touching
/// its `.gulp` and `.gmeta`. CRCs are computed from the bytes as they are now. Returns the
/// number of videos indexed.
pub fn write_index(paths: &ChunkPaths) -> Result<usize> {
    let reader = ChunkReader::open_legacy(paths)?;
    let (entries, gulp_crc, gulp_len) = indexed_entries(&reader)?;
    let meta = std::fs::read(&paths.meta).at(&paths.meta)?;
    let mut builder = IndexBuilder::new();
    for e in &entries {
        builder
            .push_video_with_restarts(&e.id, &e.meta_data, &e.frames, &e.restart_slices())
            .map_err(|m| Error::format(&paths.meta, m))?;
    }
    let index = builder.encode(
        gulp_len,
        gulp_crc,
        meta.len() as u64,
        crc32fast::hash(&meta),
    );
    write_atomically(&paths.index, &index)?;
    sync_dir(&paths.index)?;
    Ok(entries.len())
}
