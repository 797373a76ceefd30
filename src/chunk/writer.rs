//! Writing a chunk crash-safely. New data goes to a temporary file (modes `Create`, `Next`) or
//! past the published end of the existing one (mode `Append`); `publish` then fsyncs the data,
//! writes the `.gmeta` and the index under temporary names, fsyncs them and publishes them.
//! Published bytes are never rewritten or truncated, so a reader that has the old version
//! mapped keeps working, and a crash at any point leaves the old or the new state plus
//! temporary files or an unpublished tail (both ignored by readers, removed by repair).
//!
//! Concurrent writers (docs/FORMAT.md §4): a writer holds an exclusive lock on its chunk's
//! data file for its whole life, so a second writer of the same chunk fails at once instead of
//! publishing over the first. A chunk that did not exist is published without replacing
//! anything: the index, the data and last the `.gmeta` (the commit point) are each linked
//! under their names only if the name is free; if another writer took the number first, what
//! was linked is removed again and the writer takes the next free number (`Next`) or fails
//! (`Create` of an explicit chunk). Every file is reached without following a symlink
//! (`io::local`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::chunk::reader::{ChunkReader, IndexKind};
use crate::chunk::rebuild;
use crate::error::Problem;
use crate::error::{At, Error, IoContext, Result};
use crate::format::index::{FrameRec, IndexBuilder, MAX_JPEG_LEN};
use crate::format::json::Scanner;
use crate::format::manifest::Op;
use crate::format::paths::{chunk_number, first_free_number, temp_for, ChunkPaths};
use crate::format::segments::{
    check_stream, segments_meta, SegmentRec, StreamRec, CHROMA_420, FLAG_KEYFRAME,
};
use crate::format::{gmeta, pad_for};
use crate::io::local;
use crate::jpeg::header::read_info;
use crate::jpeg::restart;
use crate::video::yuv::{Matrix, Range};
use crate::video::{verify_segment, Codec, SegmentShape, MAX_SEGMENT_BYTES, MAX_SEGMENT_FRAMES};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// gulpio's `'wb'`: start an empty chunk (replacing it when it exists; when it does not,
    /// another writer publishing it first is a [`Error::Conflict`]).
    Create,
    /// gulpio's `'ab'`: keep what the chunk holds and add to it.
    Append,
    /// A new chunk (`GulpDirectory.new_chunks`): published under the first chunk number of
    /// its directory, from the one given on, that no file uses when it is published.
    Next,
}

/// How the first publication of the chunk takes its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// The chunk existed when the writer was opened ('wb' rewrites it): renames replace it.
    Replace,
    /// Exactly the given names, which must still be free.
    Exact,
    /// The first free chunk number from the given one on.
    NextFree,
}

/// Attempts at taking a chunk number before giving up (each failed attempt means another
/// writer published a chunk meanwhile).
const MAX_CLAIMS: usize = 10_000;

struct Entry {
    id: String,
    frames: Vec<FrameRec>,
    /// Each frame's restart marker positions, for the index (empty: none usable).
    restarts: Vec<Vec<u32>>,
    /// JSON text of the whole `meta_data` list.
    meta_data: Vec<u8>,
    /// A video stored as segments: its stream entry and segments (`frames` are their tiles).
    stream: Option<Stream>,
}

struct Stream {
    rec: StreamRec,
    segments: Vec<SegmentRec>,
}

impl Entry {
    fn restart_slices(&self) -> Vec<&[u32]> {
        self.restarts.iter().map(Vec::as_slice).collect()
    }

    /// Adds this entry to an index being built.
    fn index_into(&self, builder: &mut IndexBuilder) -> std::result::Result<(), Problem> {
        match &self.stream {
            Some(st) => builder.push_segment_video(
                &self.id,
                &self.meta_data,
                &self.frames,
                st.rec,
                &st.segments,
            ),
            None => builder.push_video_with_restarts(
                &self.id,
                &self.meta_data,
                &self.frames,
                &self.restart_slices(),
            ),
        }
    }

    /// The `.gmeta`'s `segments` object of a video stored as segments.
    fn segments_json(&self) -> Option<Vec<u8>> {
        let st = self.stream.as_ref()?;
        Some(segments_meta(&st.rec, &st.segments))
    }
}

/// How a video's segments are coded (the stream entry's fields a writer chooses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSpec {
    pub codec: Codec,
    /// Colour matrix as AV1 numbers it (1 = BT.709, 6 = BT.601, ...), and full range or not.
    pub matrix: u8,
    pub full_range: bool,
    pub width: u16,
    pub height: u16,
    /// Nominal frames per segment.
    pub gop: u32,
}

pub struct ChunkWriter {
    paths: ChunkPaths,
    /// Where the data bytes currently live: a temporary file until first published.
    data_path: PathBuf,
    out: Option<BufWriter<File>>,
    data_published: bool,
    naming: Naming,
    /// While a 'wb' rewrites an existing chunk: the old data file, locked against other
    /// writers until this one is done.
    _old_data: Option<File>,
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
        local::refuse_url(&paths.data)?;
        local::refuse_url(&paths.meta)?;
        if mode == WriteMode::Next {
            return Self::create(paths, Naming::NextFree, None);
        }
        let data_exists = local::name_exists(&paths.data);
        let meta_exists = local::name_exists(&paths.meta);
        if mode == WriteMode::Append && data_exists && meta_exists {
            return Self::open_append(paths);
        }
        if !(data_exists || meta_exists || local::name_exists(&paths.index)) {
            return Self::create(paths, Naming::Exact, None);
        }
        // A rewrite (or the leftovers of an interrupted one): no other writer may work on the
        // chunk meanwhile.
        let old = if data_exists {
            Some(lock_chunk(&paths.data, local::open_to_lock(&paths.data)?)?)
        } else {
            None
        };
        Self::create(paths, Naming::Replace, old)
    }

    fn create(paths: &ChunkPaths, naming: Naming, old: Option<File>) -> Result<ChunkWriter> {
        let data_path = temp_for(&paths.data);
        let file = local::create_new(&data_path)?;
        // Fresh, so free; once published under the chunk's name it keeps the chunk locked.
        local::lock_writer(&file, &data_path)?;
        Ok(ChunkWriter {
            paths: paths.clone(),
            data_path,
            out: Some(BufWriter::with_capacity(WRITE_BUFFER, file)),
            data_published: false,
            naming,
            _old_data: old,
            entries: Vec::new(),
            by_id: HashMap::new(),
            data_len: 0,
            published_len: 0,
            crc: crc32fast::Hasher::new(),
            poisoned: false,
        })
    }

    fn open_append(paths: &ChunkPaths) -> Result<ChunkWriter> {
        // Locked before the published state is read, so a writer that finished just before
        // is seen whole, and none can publish over what this one will.
        let file = lock_chunk(&paths.data, local::open_in_place(&paths.data)?)?;
        let (reader, _) = ChunkReader::open(paths)?;
        let (entries, crc, published_len) = indexed_entries(&reader, false)?;
        drop(reader);
        let mut file = file;
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
            naming: Naming::Replace,
            _old_data: None,
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
        check_json(meta_json).map_err(|m| {
            Error::invalid_for(
                &self.paths.data,
                At::video(id),
                format!("metadata is not valid JSON: {m}"),
            )
        })?;
        self.refuse_mixed(id, frames.len())?;
        let mut recs = Vec::with_capacity(frames.len());
        let mut restarts = Vec::with_capacity(frames.len());
        let mut offset = self.data_len;
        for (k, jpeg) in frames.iter().enumerate() {
            let info = read_info(jpeg)
                .map_err(|m| Error::invalid_for(&self.paths.data, At::frame(id, k), m))?;
            // Every reader refuses such a frame: refuse it before it is stored.
            crate::pixels::check_frame_size(info.width as usize, info.height as usize).map_err(
                |m| {
                    Error::invalid_for(
                        &self.paths.data,
                        At::frame(id, k),
                        format!("{m}; not stored"),
                    )
                },
            )?;
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
                    stream: None,
                });
            }
        }
        Ok(())
    }

    /// JPEG frames may not be added to a video stored as segments (nor segments to any
    /// existing video, `append_segments`): one video, one encoding. An append without frames
    /// (one more `meta_data` element, as ingest adds frame times) is allowed.
    fn refuse_mixed(&self, id: &str, frames: usize) -> Result<()> {
        match self.by_id.get(id) {
            Some(&i) if frames > 0 && self.entries[i].stream.is_some() => Err(Error::invalid_for(
                &self.paths.data,
                At::video(id),
                "the video is stored as segments; JPEG frames cannot be added to it (one video, \
                 one encoding)",
            )),
            _ => Ok(()),
        }
    }

    /// Appends one video stored as segments (docs/FORMAT.md §6): `segments` are its AV1
    /// streams in frame order with the number of frames each holds, coded as `spec` says.
    /// The video must be new to the chunk (a video's segments are written in one call). Each
    /// segment's structure is checked (a key frame first, frame headers, sizes) before any
    /// byte is written; its pixels are not decoded here (ingest checks the encoder's output).
    pub fn append_segments(
        &mut self,
        id: &str,
        meta_json: &[u8],
        spec: &StreamSpec,
        segments: &[(&[u8], usize)],
    ) -> Result<()> {
        if self.poisoned {
            return Err(Error::InvalidArgument(format!(
                "{}: an earlier write failed; this writer can only be aborted",
                self.paths.data.display()
            )));
        }
        let refuse = |m: String| Error::invalid_for(&self.paths.data, At::video(id), m);
        if self.by_id.contains_key(id) {
            return Err(refuse(
                "the video is already in the chunk; a video stored as segments is written in \
                 one call, and not mixed with JPEG frames"
                    .into(),
            ));
        }
        check_json(meta_json).map_err(|m| refuse(format!("metadata is not valid JSON: {m}")))?;
        let rec = StreamRec {
            codec: spec.codec.code(),
            chroma: CHROMA_420,
            depth: 8,
            matrix: spec.matrix,
            range: u8::from(spec.full_range),
            width: spec.width,
            height: spec.height,
            segment_count: 0,
            segment_start: 0,
            gop: spec.gop,
        };
        check_stream(&rec).map_err(refuse)?;
        let matrix = Matrix::from_av1_code(spec.matrix)
            .ok_or_else(|| refuse(format!("colour matrix {}", spec.matrix)))?;
        let range = if spec.full_range {
            Range::Full
        } else {
            Range::Limited
        };
        let colour = (matrix, range);
        if segments.is_empty() {
            return Err(refuse("no segments".into()));
        }
        let mut offset = self.data_len;
        let mut first = 0usize;
        let mut recs = Vec::with_capacity(segments.len());
        let mut frames = Vec::new();
        for (k, &(bytes, n)) in segments.iter().enumerate() {
            let at = |m: String| {
                Error::invalid_for(
                    &self.paths.data,
                    At::frame(id, first),
                    format!("segment {k}: {m}"),
                )
            };
            if n == 0 || n > MAX_SEGMENT_FRAMES || bytes.len() > MAX_SEGMENT_BYTES {
                return Err(at(format!(
                    "{n} frames in {} bytes (1 to {MAX_SEGMENT_FRAMES} frames, at most \
                     {MAX_SEGMENT_BYTES} bytes)",
                    bytes.len()
                )));
            }
            let shape = SegmentShape {
                codec: spec.codec,
                width: usize::from(spec.width),
                height: usize::from(spec.height),
                frames: n,
            };
            verify_segment(&shape, colour, bytes).map_err(|f| {
                at(format!(
                    "frames {first}..{}: it does not decode to what is declared: {}",
                    first + n,
                    f.msg
                ))
            })?;
            let seg = SegmentRec {
                offset,
                len: bytes.len() as u32,
                crc: crc32fast::hash(bytes),
                first_frame: u32::try_from(first).map_err(|_| at("too many frames".into()))?,
                frame_count: n as u16,
                flags: FLAG_KEYFRAME,
                pad: pad_for(bytes.len() as u64),
            };
            let tiles = seg
                .tiles(spec.width, spec.height, bytes)
                .ok_or_else(|| at(format!("{} bytes cannot hold {n} frames", bytes.len())))?;
            frames.extend(tiles);
            recs.push(seg);
            offset = seg.end() + seg.pad as u64;
            first += n;
        }
        let mut meta_data = Vec::with_capacity(meta_json.len() + 2);
        meta_data.push(b'[');
        meta_data.extend_from_slice(meta_json);
        meta_data.push(b']');
        let entry = Entry {
            id: id.to_owned(),
            frames,
            restarts: Vec::new(),
            meta_data,
            stream: Some(Stream {
                rec,
                segments: recs,
            }),
        };
        // The index's own checks, before anything is written.
        entry
            .index_into(&mut IndexBuilder::new())
            .map_err(|p| Error::refused(&self.paths.data, p))?;
        let bytes: Vec<&[u8]> = segments.iter().map(|&(b, _)| b).collect();
        if let Err(e) = self.write_frames(&bytes) {
            self.poisoned = true;
            return Err(e);
        }
        self.data_len = offset;
        self.by_id.insert(id.to_owned(), self.entries.len());
        self.entries.push(entry);
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
                e.segments_json().as_deref(),
            );
        }
        gmeta::finish(&mut out);
        out
    }

    /// Makes everything appended so far durable and visible to readers (gulpio's `flush`).
    /// The first publication of a new chunk may take another number ([`WriteMode::Next`]):
    /// [`ChunkWriter::paths`] says where it went.
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
            e.index_into(&mut builder)
                .map_err(|p| Error::refused(&self.paths.data, p))?;
        }
        let index = builder.encode(
            self.data_len,
            self.crc.clone().finalize(),
            meta.len() as u64,
            crc32fast::hash(&meta),
        );
        // Everything is written and fsynced under temporary names first, so the steps that
        // publish it follow each other immediately: a crash can fall between two of them, but
        // the window is microseconds, not the time of an fsync.
        let meta_tmp = write_temp(&self.paths.meta, &meta)?;
        let index_tmp = match write_temp(&self.paths.index, &index) {
            Ok(t) => t,
            Err(e) => {
                let _ = std::fs::remove_file(&meta_tmp.0);
                return Err(e);
            }
        };
        let manifest = Manifest::of(&self.paths, &index, &meta);
        let published = if self.data_published || self.naming == Naming::Replace {
            self.replace_names(&meta_tmp.0, &index_tmp.0, &manifest)
        } else {
            self.claim(&meta_tmp, &index_tmp, &manifest)
        };
        // Gone after a rename; a second name of the published file after a link.
        let _ = std::fs::remove_file(&meta_tmp.0);
        let _ = std::fs::remove_file(&index_tmp.0);
        published?;
        sync_dir(&self.paths.index)?;
        self.published_len = self.data_len;
        manifest.published();
        Ok(())
    }

    /// Publishes by renaming over the chunk's names (a rewrite, or a later publication of a
    /// chunk this writer holds): data (first time only), `.gmeta`, then the index.
    fn replace_names(
        &mut self,
        meta_tmp: &Path,
        index_tmp: &Path,
        manifest: &Manifest<'_>,
    ) -> Result<()> {
        if !self.data_published {
            std::fs::rename(&self.data_path, &self.paths.data).at(&self.paths.data)?;
            self.data_path = self.paths.data.clone();
            self.data_published = true;
        }
        // The commit comes before the commit point (docs/FORMAT.md §7.6).
        let committed = manifest.commit(&self.paths, Op::Replace)?;
        if let Err(e) = std::fs::rename(meta_tmp, &self.paths.meta).at(&self.paths.meta) {
            manifest.abort(committed);
            return Err(e);
        }
        std::fs::rename(index_tmp, &self.paths.index).at(&self.paths.index)
    }

    /// First publication of a chunk that did not exist: takes the names without replacing
    /// anything, the next free number when another writer took this one ([`Naming::NextFree`]).
    fn claim(
        &mut self,
        meta_tmp: &(PathBuf, File),
        index_tmp: &(PathBuf, File),
        manifest: &Manifest<'_>,
    ) -> Result<()> {
        let dir = match self.paths.data.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut target = self.paths.clone();
        for _ in 0..MAX_CLAIMS {
            if self.naming == Naming::NextFree {
                let from = chunk_number(&target.data).unwrap_or(0);
                target = ChunkPaths::numbered(&dir, next_free(&dir, from)?);
            }
            if self.try_claim(&target, meta_tmp, index_tmp, manifest)? {
                let _ = std::fs::remove_file(&self.data_path);
                self.paths = target;
                self.data_path = self.paths.data.clone();
                self.data_published = true;
                return Ok(());
            }
            if self.naming != Naming::NextFree {
                return Err(Error::Conflict {
                    path: target.meta,
                    msg: "another writer published this chunk first; nothing of this writer's \
                          was published (chunks from GulpDirectory.new_chunks() take the next \
                          free number instead)"
                        .into(),
                });
            }
        }
        Err(Error::Internal(format!(
            "{}: no free chunk number after {MAX_CLAIMS} attempts",
            dir.display()
        )))
    }

    /// Links index, data and `.gmeta` (the commit point) under `target`'s names, each only if
    /// the name is free. False, with whatever was linked removed again, if one was taken.
    fn try_claim(
        &self,
        target: &ChunkPaths,
        meta_tmp: &(PathBuf, File),
        index_tmp: &(PathBuf, File),
        manifest: &Manifest<'_>,
    ) -> Result<bool> {
        if local::name_exists(&target.meta) || local::name_exists(&target.data) {
            return Ok(false);
        }
        let data = self
            .out
            .as_ref()
            .ok_or_else(|| closed(&self.data_path))?
            .get_ref();
        let steps: [(&Path, &Path, &File); 3] = [
            (&index_tmp.0, &target.index, &index_tmp.1),
            (&self.data_path, &target.data, data),
            (&meta_tmp.0, &target.meta, &meta_tmp.1),
        ];
        let mut committed = None;
        for (done, &(src, dst, _)) in steps.iter().enumerate() {
            // The number is claimed and the data published: commit the add before the
            // `.gmeta`, the commit point (docs/FORMAT.md §7.6).
            let linked = if done == 2 {
                manifest.commit(target, Op::Add).and_then(|c| {
                    committed = c;
                    local::link_new(src, dst)
                })
            } else {
                local::link_new(src, dst)
            };
            if !matches!(linked, Ok(true)) {
                manifest.abort(committed);
                for &(_, dst, file) in &steps[..done] {
                    local::remove_if_names(dst, file);
                }
                return linked;
            }
        }
        Ok(true)
    }

    /// Publishes and closes; returns where the chunk was published.
    pub fn close(mut self) -> Result<ChunkPaths> {
        self.publish()?;
        self.out = None;
        Ok(self.paths.clone())
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

/// `text` is one JSON value and nothing else.
/// The dataset manifest of the chunk's folder, if it has one: each publication commits its
/// operation before its commit point, and aborts it if the commit point is not reached.
struct Manifest<'a> {
    root: Option<PathBuf>,
    index: &'a [u8],
    meta: &'a [u8],
    /// This publication's commit, for the compaction policy once it is published.
    committed: std::cell::Cell<Option<crate::manifest::Committed>>,
}

impl<'a> Manifest<'a> {
    fn of(paths: &ChunkPaths, index: &'a [u8], meta: &'a [u8]) -> Manifest<'a> {
        let dir = match paths.data.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Manifest {
            root: crate::manifest::has_manifest(&dir).then_some(dir),
            index,
            meta,
            committed: std::cell::Cell::new(None),
        }
    }

    /// Commits `op` on the chunk at `paths`; the chunk number it committed, if any.
    fn commit(&self, paths: &ChunkPaths, op: Op) -> Result<Option<u64>> {
        let Some(root) = &self.root else {
            return Ok(None);
        };
        let number = chunk_number(&paths.data)
            .filter(|&k| {
                let canonical = ChunkPaths::numbered(root, k);
                canonical.data == paths.data && canonical.meta == paths.meta
            })
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{}: a dataset with a manifest records chunks under gulpio's names \
                     data_{{k}}.gulp and meta_{{k}}.gmeta only, not {}",
                    root.display(),
                    paths.data.display()
                ))
            })?;
        let input = crate::manifest::describe(number, op, self.index, self.meta)
            .map_err(|m| Error::Internal(format!("the chunk's own index: {m}")))?;
        let io = crate::manifest::ManifestIo::Local(root);
        self.committed
            .set(Some(crate::manifest::commit_ops_in(io, &[input])?));
        Ok(Some(number))
    }

    /// After the publication: compacts when the policy makes this writer the one (§7.6). A
    /// failure is not the publication's: a `LATEST` that lags costs readers a longer tail,
    /// never a wrong state, and the next writer due compacts.
    fn published(&self) {
        if let (Some(root), Some(c)) = (&self.root, self.committed.get()) {
            let _ = crate::manifest::compact_if_due(crate::manifest::ManifestIo::Local(root), &c);
        }
    }

    /// Commits the abort of an operation whose commit point was not reached. A failure here
    /// leaves the operation pending, which readers check at every open: never wrong, so it
    /// does not mask the error that brought us here.
    fn abort(&self, committed: Option<u64>) {
        if let (Some(root), Some(number)) = (&self.root, committed) {
            let _ = crate::manifest::abort_op(root, number);
        }
    }
}

fn check_json(text: &[u8]) -> std::result::Result<(), String> {
    let mut scan = Scanner::new(text);
    scan.skip_value(0)?;
    if scan.at_end() {
        Ok(())
    } else {
        Err("trailing data".into())
    }
}

fn closed(path: &Path) -> Error {
    Error::InvalidArgument(format!("{}: writer is closed", path.display()))
}

/// Writes `bytes` to a new temporary file beside `target` and fsyncs it; returns its path and
/// the open file (which identifies it after it is published).
fn write_temp(target: &Path, bytes: &[u8]) -> Result<(PathBuf, File)> {
    let tmp = temp_for(target);
    let result = local::create_new(&tmp).and_then(|mut f| {
        f.write_all(bytes).at(&tmp)?;
        f.sync_all().at(&tmp)?;
        Ok(f)
    });
    match result {
        Ok(f) => Ok((tmp, f)),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Writes `bytes` to a temporary file beside `target`, fsyncs it and renames it over `target`
/// (which replaces the name, never writes through it).
pub fn write_atomically(target: &Path, bytes: &[u8]) -> Result<()> {
    let (tmp, _) = write_temp(target, bytes)?;
    std::fs::rename(&tmp, target).at(target).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Takes the writer's lock of the chunk whose data file `file` was opened as `path`, and
/// checks that the name still leads to it (another writer may have replaced it between the
/// open and the lock).
fn lock_chunk(path: &Path, file: File) -> Result<File> {
    local::lock_writer(&file, path)?;
    if !local::names_file(path, &file) {
        return Err(Error::Conflict {
            path: path.to_path_buf(),
            msg: "another writer replaced the chunk while this one was opening it; try again"
                .into(),
        });
    }
    Ok(file)
}

/// The first chunk number, `from` or later, that no file in `dir` uses.
fn next_free(dir: &Path, from: u64) -> Result<u64> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).at(dir)? {
        names.push(entry.at(dir)?.file_name());
    }
    first_free_number(names.iter().filter_map(|n| n.to_str()), from).ok_or_else(|| {
        Error::InvalidArgument(format!("{}: no chunk number is left", dir.display()))
    })
}

/// Cuts the unpublished tail of a chunk's data file (bytes past its published end, left by an
/// interrupted append); returns how many bytes were cut. The file is changed only if it is a
/// regular file reached without a symlink and no writer holds the chunk.
pub fn cut_tail(paths: &ChunkPaths) -> Result<u64> {
    local::refuse_url(&paths.data)?;
    let file = lock_chunk(&paths.data, local::open_in_place(&paths.data)?)?;
    let (reader, _) = ChunkReader::open(paths)?;
    let published = reader.published_len();
    drop(reader);
    let len = file.metadata().at(&paths.data)?.len();
    if len <= published {
        return Ok(0);
    }
    file.set_len(published).at(&paths.data)?;
    file.sync_all().at(&paths.data)?;
    Ok(len - published)
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
/// Videos stored as segments without their index are rebuilt (decoding every segment) only
/// when `rebuild_segments`: an append refuses them instead of starting that silently.
fn indexed_entries(reader: &ChunkReader, rebuild_segments: bool) -> Result<(Vec<Entry>, u32, u64)> {
    let published_len = reader.published_len();
    let len = reader.source().current_len();
    if len < published_len {
        return Err(Error::format(
            &reader.paths().data,
            format!(
                "truncated: the chunk's records end at byte {published_len}, the file has \
                 {len} bytes; the chunk cannot be appended to"
            ),
        ));
    }
    if reader.has_unindexed_segments() && !rebuild_segments {
        // An index built from the tiles alone would describe JPEG frames.
        return Err(Error::format(
            &reader.paths().meta,
            "the chunk has videos stored as AV1 segments and no usable index: it cannot be \
             appended to until its index is rebuilt (`gulpio repair DIR --apply`, which \
             decodes every segment, or `gulpio_rs.write_index`)",
        ));
    }
    let legacy = reader.kind() == IndexKind::Legacy;
    let mut entries = Vec::with_capacity(reader.video_count());
    for v in 0..reader.video_count() {
        if let Some(json) = reader.unindexed_json(v) {
            let (rec, segments, frames) = rebuild::segment_video(reader, v, json)?;
            entries.push(Entry {
                id: reader.id(v).to_owned(),
                restarts: Vec::new(),
                frames,
                meta_data: reader.meta_data(v).to_vec(),
                stream: Some(Stream { rec, segments }),
            });
            continue;
        }
        let mut frames: Vec<FrameRec> = reader.frames(v).collect();
        let restarts = if legacy {
            measure_frames(reader, v, &mut frames)?
        } else {
            // Kept from the index (one of version 1 has none: the frames are not read).
            (0..frames.len())
                .map(|k| reader.restarts(v, k).unwrap_or_default())
                .collect()
        };
        let stream = reader
            .stream(v)
            .map(|(rec, segments)| Stream { rec, segments });
        entries.push(Entry {
            id: reader.id(v).to_owned(),
            frames,
            restarts,
            meta_data: reader.meta_data(v).to_vec(),
            stream,
        });
    }
    let crc = if legacy {
        data_crc(reader, published_len)?
    } else {
        reader.index().header().gulp_crc
    };
    Ok((entries, crc, published_len))
}

/// Rewrites a chunk's damaged `.gmeta` from its checksummed index (`gulpio repair`). The
/// text is rebuilt from the index and written only when it is byte for byte the one the index
/// was written with (the index records its length and CRC), so nothing is guessed. Returns
/// false, writing nothing, when the `.gmeta` is not damaged.
pub fn restore_meta(paths: &ChunkPaths) -> Result<bool> {
    let (reader, _) = ChunkReader::open(paths)?;
    if reader.kind() != IndexKind::Binary {
        return Err(Error::InvalidArgument(format!(
            "{}: the chunk is not read through an intact index; there is nothing to restore its \
             .gmeta from",
            paths.data.display()
        )));
    }
    if reader.meta_problem().is_none() {
        return Ok(false);
    }
    let index = reader.index();
    let mut text = Vec::new();
    gmeta::begin(&mut text);
    for v in 0..reader.video_count() {
        gmeta::write_entry(
            &mut text,
            v == 0,
            reader.id(v),
            reader.frames(v).map(|f| f.frame_info()),
            reader.meta_data(v),
            reader.segments_json(v).as_deref(),
        );
    }
    gmeta::finish(&mut text);
    let h = index.header();
    if text.len() as u64 != h.gmeta_len || crc32fast::hash(&text) != h.gmeta_crc {
        return Err(Error::format(
            &paths.meta,
            "the .gmeta rebuilt from the index is not the one the index was written with (was \
             the chunk written by another tool?); restore the file from a copy",
        ));
    }
    write_atomically(&paths.meta, &text)?;
    sync_dir(&paths.meta)?;
    Ok(true)
}

/// CRCs, shapes and restart markers of the frames of video `v` of a legacy chunk, computed
/// from their bytes (read a video at a time, never the whole file at once).
fn measure_frames(
    reader: &ChunkReader,
    v: usize,
    frames: &mut [FrameRec],
) -> Result<Vec<Vec<u32>>> {
    let wanted: Vec<(usize, usize)> = (0..frames.len()).map(|k| (v, k)).collect();
    let mut restarts = vec![Vec::new(); frames.len()];
    let mut failed = None;
    reader.read_frames(&wanted, false, |k, got| match got {
        Ok(jpeg) => {
            let f = &mut frames[k];
            f.crc = crc32fast::hash(&jpeg);
            let info = read_info(&jpeg).ok();
            if let Some(info) = info {
                (f.width, f.height, f.channels) = (info.width, info.height, info.components);
            }
            let markers = info.and_then(|info| restart::scan(&jpeg, &info));
            restarts[k] = markers.unwrap_or_default();
        }
        Err(e) => {
            failed.get_or_insert(e);
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(restarts),
    }
}

/// CRC of data bytes `[0, len)`, read in pieces of bounded size.
fn data_crc(reader: &ChunkReader, len: u64) -> Result<u32> {
    const PIECE: u64 = 8 << 20;
    let mut hasher = crc32fast::Hasher::new();
    let mut at = 0;
    while at < len {
        let piece = at..(at + PIECE).min(len);
        at = piece.end;
        hasher.update(&reader.source().read_range(&reader.paths().data, piece)?);
    }
    Ok(hasher.finalize())
}

/// Writes the checksummed index of a chunk that has none (or a stale one), without touching
/// its `.gulp` and `.gmeta`. CRCs are computed from the bytes as they are now; videos stored
/// as segments are rebuilt from their `.gmeta` entries and streams (`rebuild`), each segment
/// decoded once. Returns the number of videos indexed.
pub fn write_index(paths: &ChunkPaths) -> Result<usize> {
    local::refuse_url(&paths.data)?;
    local::refuse_url(&paths.meta)?;
    // No writer may publish while the index is computed from the files.
    let (data, _) = local::open_read(&paths.data)?;
    local::lock_writer(&data, &paths.data)?;
    let reader = ChunkReader::open_legacy(paths)?;
    let (entries, gulp_crc, gulp_len) = indexed_entries(&reader, true)?;
    let meta = local::read_whole(&paths.meta)?;
    let mut builder = IndexBuilder::new();
    for e in &entries {
        e.index_into(&mut builder)
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

#[cfg(test)]
mod tests;
