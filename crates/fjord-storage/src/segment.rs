//! One segment of a log tablet: a `.log` file of batches stored byte for
//! byte, with a sparse offset index (`.index`) and time index (`.timeindex`)
//! kept in memory and persisted when the segment is sealed or the tablet
//! closes. File names are the 20-digit zero-padded base offset, as in Fluss.
//!
//! ```text
//! .index entry (8 bytes, LE)       .timeindex entry (12 bytes, LE)
//!  0 relative_offset u32            0 timestamp       i64
//!  4 position        u32            8 relative_offset u32
//! ```
//!
//! An index entry names a batch: its base offset minus the segment's base
//! offset, and its byte position in the `.log` file. The time index entry at
//! the same ordinal names the same batch with its commit timestamp.
//!
//! Batches of a segment are in offset order. In a segment written by the
//! tablet's append path they are contiguous (each starts where the previous
//! one ended); a segment produced by a rewrite (`tablet::rewrite`, the
//! compaction of a primary-key changelog) may have gaps between them, but
//! its last batch always ends where the next segment starts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use fjord_format::log_batch::{
    peek_size_and_magic, LogBatch, LogBatchError, LogBatches, HEADER_SIZE_UP_TO_MAGIC,
};

use crate::error::{Result, StorageError};
use crate::fs::{Fs, FsFile};

/// Suffix of segment data files.
pub const LOG_SUFFIX: &str = ".log";
/// Suffix of offset index files.
pub const INDEX_SUFFIX: &str = ".index";
/// Suffix of time index files.
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Bytes of one offset index entry.
pub const INDEX_ENTRY_BYTES: usize = 8;
/// Bytes of one time index entry.
pub const TIME_INDEX_ENTRY_BYTES: usize = 12;
/// Bytes read per I/O while scanning a segment (recovery, index rebuild).
/// Bounds scan memory apart from one batch larger than it.
pub const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// The file stem of a segment with `base_offset`.
pub fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

/// Parses `00000000000000001234.log` into its base offset.
pub fn parse_file_name(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Removes the `.log`, `.index` and `.timeindex` files of the segment with
/// `base_offset` in `dir`, the `.log` first (so an interrupted deletion
/// leaves orphan indexes, which open removes, never a log without its
/// predecessor). The caller syncs the directory.
pub fn delete_files(fs: &dyn Fs, dir: &Path, base_offset: i64) -> Result<()> {
    let stem = file_stem(base_offset);
    for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        let path = dir.join(format!("{stem}{suffix}"));
        if fs.exists(&path) {
            fs.remove_file(&path)
                .map_err(|e| StorageError::io("deleting segment file", &path, e))?;
        }
    }
    Ok(())
}

/// One sparse index point: a batch's relative offset, file position and
/// commit timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Batch base offset minus segment base offset.
    pub relative_offset: u32,
    /// Byte position of the batch in the `.log` file.
    pub position: u32,
    /// Commit timestamp of the batch.
    pub timestamp: i64,
}

/// The in-memory index of a segment.
#[derive(Debug, Default)]
pub struct SegmentIndex {
    /// Entries in offset (and position, and timestamp) order.
    pub entries: Vec<IndexEntry>,
    /// How many entries are already in the index files.
    pub persisted: usize,
}

impl SegmentIndex {
    /// Position of the last indexed batch whose base offset is `<= relative`.
    pub fn lookup(&self, relative: u32) -> u32 {
        let i = self
            .entries
            .partition_point(|e| e.relative_offset <= relative);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].position
        }
    }
    /// Position of the last indexed batch with a commit timestamp `< ts`.
    pub fn lookup_time(&self, ts: i64) -> u32 {
        let i = self.entries.partition_point(|e| e.timestamp < ts);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].position
        }
    }
}

/// Offsets in a segment that failed validation below the recovery point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DamagedRange {
    /// First offset not served.
    pub from_offset: i64,
    /// Byte position where the damage starts.
    pub position: u64,
}

/// A segment: the `.log` file, its index and what readers may see of it.
#[derive(Debug)]
pub struct Segment {
    /// Offset of its first batch (its file name).
    pub base_offset: i64,
    /// Path of the `.log` file.
    pub log_path: PathBuf,
    /// The `.log` file.
    pub file: Arc<dyn FsFile>,
    index: RwLock<SegmentIndex>,
    /// Bytes of the `.log` file readers may read (whole batches below the
    /// high watermark).
    pub published_len: AtomicU64,
    /// Offset after the last batch readers may read from this segment.
    pub published_end: AtomicI64,
    /// Commit timestamp of the newest batch (for retention), -1 if empty.
    pub max_timestamp: AtomicI64,
    /// Set at open when validation failed below the recovery point.
    pub damaged: Option<DamagedRange>,
}

impl Segment {
    /// Creates a new, empty segment file (the caller syncs the directory).
    pub fn create(fs: &dyn Fs, dir: &Path, base_offset: i64) -> Result<Self> {
        let log_path = dir.join(format!("{}{LOG_SUFFIX}", file_stem(base_offset)));
        let file = fs
            .open(&log_path, true)
            .map_err(|e| StorageError::io("creating segment", &log_path, e))?;
        file.set_len(0)
            .map_err(|e| StorageError::io("creating segment", &log_path, e))?;
        Ok(Self::with_file(log_path, file, base_offset))
    }

    /// Wraps an existing `.log` file.
    pub fn with_file(log_path: PathBuf, file: Arc<dyn FsFile>, base_offset: i64) -> Self {
        Self {
            base_offset,
            log_path,
            file,
            index: RwLock::new(SegmentIndex::default()),
            published_len: AtomicU64::new(0),
            published_end: AtomicI64::new(base_offset),
            max_timestamp: AtomicI64::new(-1),
            damaged: None,
        }
    }

    /// Read access to the index.
    pub fn index(&self) -> RwLockReadGuard<'_, SegmentIndex> {
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }
    /// Write access to the index (the tablet's writer only).
    pub fn index_mut(&self) -> RwLockWriteGuard<'_, SegmentIndex> {
        self.index.write().unwrap_or_else(|e| e.into_inner())
    }

    fn sibling(&self, suffix: &str) -> PathBuf {
        self.log_path.with_extension(&suffix[1..])
    }
    /// Path of the offset index file.
    pub fn index_path(&self) -> PathBuf {
        self.sibling(INDEX_SUFFIX)
    }
    /// Path of the time index file.
    pub fn time_index_path(&self) -> PathBuf {
        self.sibling(TIME_INDEX_SUFFIX)
    }

    /// Publishes bytes and offsets to readers; never moves backwards.
    pub fn publish(&self, len: u64, end_offset: i64) {
        self.published_len.fetch_max(len, Ordering::AcqRel);
        self.published_end.fetch_max(end_offset, Ordering::AcqRel);
    }

    /// Writes index entries not yet in the index files and syncs them.
    /// With `rewrite`, the files are rewritten from scratch.
    pub fn persist_index(&self, fs: &dyn Fs, rewrite: bool) -> Result<()> {
        let mut index = self.index_mut();
        if rewrite {
            index.persisted = 0;
        }
        let from = index.persisted;
        let new = &index.entries[from..];
        let mut off = Vec::with_capacity(new.len() * INDEX_ENTRY_BYTES);
        let mut time = Vec::with_capacity(new.len() * TIME_INDEX_ENTRY_BYTES);
        for e in new {
            off.extend_from_slice(&e.relative_offset.to_le_bytes());
            off.extend_from_slice(&e.position.to_le_bytes());
            time.extend_from_slice(&e.timestamp.to_le_bytes());
            time.extend_from_slice(&e.relative_offset.to_le_bytes());
        }
        for (path, bytes, entry) in [
            (self.index_path(), &off, INDEX_ENTRY_BYTES),
            (self.time_index_path(), &time, TIME_INDEX_ENTRY_BYTES),
        ] {
            let f = fs
                .open(&path, true)
                .map_err(|e| StorageError::io("opening index", &path, e))?;
            let at = (from * entry) as u64;
            f.set_len(at)
                .and_then(|()| f.write_all_at(bytes, at))
                .and_then(|()| f.sync_data())
                .map_err(|e| StorageError::io("writing index", &path, e))?;
        }
        index.persisted = index.entries.len();
        Ok(())
    }

    /// Loads the index files if they are consistent with each other and with
    /// a `.log` of `log_len` bytes; `false` means they must be rebuilt.
    pub fn load_index(&self, fs: &dyn Fs, log_len: u64) -> Result<bool> {
        let read = |path: &Path| -> Result<Option<Vec<u8>>> {
            // An index never exceeds the segment size limit / 8 entries.
            crate::meta::read_small(fs, path, crate::config::SEGMENT_BYTES_LIMIT)
        };
        let (Some(off), Some(time)) = (read(&self.index_path())?, read(&self.time_index_path())?)
        else {
            return Ok(false);
        };
        if off.len() % INDEX_ENTRY_BYTES != 0
            || time.len() % TIME_INDEX_ENTRY_BYTES != 0
            || off.len() / INDEX_ENTRY_BYTES != time.len() / TIME_INDEX_ENTRY_BYTES
        {
            return Ok(false);
        }
        let mut entries = Vec::with_capacity(off.len() / INDEX_ENTRY_BYTES);
        for (o, t) in off
            .chunks_exact(INDEX_ENTRY_BYTES)
            .zip(time.chunks_exact(TIME_INDEX_ENTRY_BYTES))
        {
            let rel = u32::from_le_bytes([o[0], o[1], o[2], o[3]]);
            let pos = u32::from_le_bytes([o[4], o[5], o[6], o[7]]);
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&t[..8]);
            let ts = i64::from_le_bytes(ts);
            let trel = u32::from_le_bytes([t[8], t[9], t[10], t[11]]);
            let ordered = entries.last().is_none_or(|p: &IndexEntry| {
                p.relative_offset < rel && p.position < pos && p.timestamp <= ts
            });
            if trel != rel || !ordered || u64::from(pos) >= log_len {
                return Ok(false);
            }
            entries.push(IndexEntry {
                relative_offset: rel,
                position: pos,
                timestamp: ts,
            });
        }
        // The first entry names the first batch, at position 0. Its offset
        // may lie above the segment's base: a rewritten segment (compaction)
        // can start with a gap.
        if entries.first().is_some_and(|e| e.position != 0) {
            return Ok(false);
        }
        let mut index = self.index_mut();
        index.persisted = entries.len();
        index.entries = entries;
        Ok(true)
    }

    /// Removes the segment's files (the caller syncs the directory).
    pub fn delete_files(&self, fs: &dyn Fs) -> Result<()> {
        let dir = self.log_path.parent().unwrap_or(Path::new("."));
        delete_files(fs, dir, self.base_offset)
    }
}

/// Why a scan stopped.
#[derive(Debug)]
pub enum ScanStop {
    /// Reached the end of the scanned range exactly at a batch boundary.
    End,
    /// Bytes remain that are not a whole valid batch.
    Invalid(LogBatchError),
    /// The callback stopped the scan.
    Stopped,
}

/// Walks the valid batches of `file` in `[start, end)`, calling
/// `f(batch, position)` for each (return `false` to stop). Reads in chunks
/// of [`SCAN_CHUNK_BYTES`]; a batch larger than a chunk is read whole, but
/// never more than the bytes left in the range, so a corrupt length cannot
/// cause a large allocation. Returns where and why it stopped.
pub fn scan(
    file: &dyn FsFile,
    path: &Path,
    start: u64,
    end: u64,
    mut f: impl FnMut(LogBatch<'_>, u64) -> bool,
) -> Result<(u64, ScanStop)> {
    let mut buf: Vec<u8> = Vec::new();
    let mut pos = start;
    loop {
        let left = end.saturating_sub(pos);
        if left == 0 {
            return Ok((pos, ScanStop::End));
        }
        let mut want = (SCAN_CHUNK_BYTES as u64).min(left) as usize;
        // Learn the size of the first batch; read it whole if it is larger
        // than a chunk (and fits in the range).
        let mut head = [0u8; HEADER_SIZE_UP_TO_MAGIC];
        if left >= HEADER_SIZE_UP_TO_MAGIC as u64 {
            file.read_exact_at(&mut head, pos)
                .map_err(|e| StorageError::io("reading segment", path, e))?;
            match peek_size_and_magic(&head) {
                Ok(Some((size, _))) if size as u64 <= left => want = want.max(size),
                Ok(_) => {}
                Err(e) => return Ok((pos, ScanStop::Invalid(e))),
            }
        }
        buf.resize(want, 0);
        file.read_exact_at(&mut buf, pos)
            .map_err(|e| StorageError::io("reading segment", path, e))?;
        let mut batches = LogBatches::new(&buf);
        loop {
            let at = pos + batches.position() as u64;
            match batches.next() {
                None => break,
                Some(Ok(batch)) => {
                    if !f(batch, at) {
                        return Ok((at, ScanStop::Stopped));
                    }
                }
                Some(Err(e)) => return Ok((at, ScanStop::Invalid(e))),
            }
        }
        let consumed = batches.position() as u64;
        if consumed == 0 {
            // Not even one whole batch in the range: a partial tail.
            let e = match peek_size_and_magic(&buf) {
                Ok(Some((size, _))) => LogBatchError::Truncated {
                    needed: size,
                    available: buf.len(),
                },
                Ok(None) => LogBatchError::Truncated {
                    needed: HEADER_SIZE_UP_TO_MAGIC,
                    available: buf.len(),
                },
                Err(e) => e,
            };
            return Ok((pos, ScanStop::Invalid(e)));
        }
        pos += consumed;
    }
}
