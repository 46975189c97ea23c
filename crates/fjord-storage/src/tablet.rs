//! The log tablet: the durable, append-only log of one table bucket.
//!
//! # Concurrency
//!
//! - **Appends** serialize on the writer mutex, which owns the segment list,
//!   the log end and the idempotent-writer table. Batch validation (CRC-32C)
//!   runs before the lock is taken. Under the lock the first offset is the
//!   log end; each batch's base offset, commit timestamp and leader epoch
//!   (all before the CRC'd region) are stamped into a copy of its prefix,
//!   and prefixes and received bodies go to the file in one vectored write
//!   per `APPEND_GROUP_BATCHES` batches. A retried idempotent batch gets
//!   its original offsets back.
//! - **Durability** is a separate group-commit state: [`LogTablet::wait_durable`]
//!   either runs one fsync that covers every batch written so far, or waits
//!   for the fsync already running. The fsync runs without the writer lock,
//!   so appends continue meanwhile and join the next fsync.
//! - **Reads** take no lock per batch: they load the published high
//!   watermark (an atomic), clone the `Arc` of the segment list (one short
//!   read lock per read call), and read whole batches below the segment's
//!   published length with positional reads.
//!
//! Lock order: maintenance → writer → segment list / sync state.
//!
//! # Durability modes
//!
//! With [`Durability::Fsync`] (default) the high watermark moves only after
//! an fsync, so readers never see a batch that a power cut could take back,
//! and the server acknowledges a produce after `wait_durable(last_offset)`.
//! With [`Durability::Interval`] the high watermark moves at write time and
//! the tablet fsyncs every N records or T ms (from `append` or
//! [`LogTablet::flush_if_due`]).
//!
//! An fsync error takes the tablet offline for good: every later call fails
//! with [`StorageError::Offline`]; the fsync is never retried, because after
//! a failed fsync the kernel may already have dropped the dirty pages.
//!
//! # Gaps
//!
//! A run of sealed segments can be replaced by a rewritten segment holding a
//! subset of their batches at their original offsets ([`rewrite`], used to
//! compact primary-key changelogs). Such a segment has gaps between its
//! batches, but still ends where the next segment starts, so segments stay
//! contiguous. Reads, offset and timestamp lookups, recovery and truncation
//! never assume that a batch starts where the previous one ended.

use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use bytes::Bytes;
use fjord_format::log_batch::{
    self, peek_size_and_magic, stamp_prefix, Layout, LogBatch, LogBatchError, LogBatches,
    BASE_OFFSET_OFFSET, COMMIT_TIMESTAMP_OFFSET, HEADER_SIZE_UP_TO_MAGIC, NO_WRITER_ID,
    STAMPED_PREFIX_BYTES_MAX,
};

use crate::config::{Durability, LogConfig};
use crate::error::{Result, StorageError};
use crate::fs::Fs;
use crate::meta::{self, CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, REWRITTEN_END_FILE, TMP_SUFFIX};
use crate::segment::{
    self, scan, DamagedRange, IndexEntry, ScanStop, Segment, INDEX_SUFFIX, LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
};
use crate::writer_state::{BatchMeta, SequenceCheck, WriterStates};

mod filtered_read;
pub mod rewrite;

pub use filtered_read::FilteredRead;

/// File name of the idempotent-writer snapshot inside a tablet directory.
pub const WRITER_STATE_FILE: &str = "writer-state.snapshot";

/// Bytes of a batch header a read needs to find the batch's size and last
/// offset (up to and including `LastOffsetDelta` of a V2 header).
const READ_HEADER_BYTES: usize = 36;
const _: () = assert!(READ_HEADER_BYTES <= log_batch::MIN_HEADER_SIZE);
const _: () = assert!(log_batch::V2_LAYOUT.last_offset_delta + 4 <= READ_HEADER_BYTES);

/// The outcome of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended (or of the original, for a duplicate).
    pub first_offset: i64,
    /// Offset of the last record appended (or of the original, for a duplicate).
    pub last_offset: i64,
    /// Commit timestamp stamped into the batches.
    pub commit_timestamp: i64,
    /// `true` if this was a retry of a batch already in the log: nothing was
    /// appended and the offsets are the original ones.
    pub duplicate: bool,
}

/// Whole batches returned by [`LogTablet::read`].
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// Zero or more whole batches, contiguous, as stored (one shared buffer).
    pub records: Bytes,
    /// High watermark when the read started.
    pub high_watermark: i64,
    /// Log start offset when the read started.
    pub log_start_offset: i64,
}

/// Where a read starts ([`LogTablet::read_start`]).
struct ReadStart {
    seg: Arc<Segment>,
    /// Position of the batch holding the offset read.
    pos: u64,
    /// That batch's size.
    first_size: usize,
    /// The end of what readers may see in the segment.
    limit: u64,
    high_watermark: i64,
    log_start: i64,
}

/// One sealed segment as [`LogTablet::sealed_segments`] describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Its base offset (the first offset it covers).
    pub base_offset: i64,
    /// The offset after the last one it covers: the next segment's base.
    pub end_offset: i64,
    /// Commit timestamp of its newest batch (what retention and compaction
    /// compare with `table.log.ttl`).
    pub max_timestamp: i64,
    /// Bytes of its `.log` file.
    pub bytes: u64,
    /// Whether recovery found part of it damaged (not served, never rewritten).
    pub damaged: bool,
}

/// What [`LogTablet::enforce_retention`] deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionOutcome {
    /// Segments deleted.
    pub segments_deleted: usize,
    /// Bytes of `.log` files deleted.
    pub bytes_deleted: u64,
    /// Log start offset afterwards.
    pub log_start_offset: i64,
}

#[derive(Debug)]
struct Writer {
    /// Oldest first; the last is the active segment. Never empty.
    segments: Vec<Arc<Segment>>,
    log_end: i64,
    active_len: u64,
    bytes_since_index: u64,
    last_commit_ts: i64,
    writers: WriterStates,
    unflushed_records: u64,
    last_flush_ms: i64,
}

impl Writer {
    fn active(&self) -> &Arc<Segment> {
        // Invariant: never empty (open creates one, truncation keeps one).
        &self.segments[self.segments.len() - 1]
    }
}

/// What a sync started at one moment covers: the log end then, and the
/// active segment's length.
#[derive(Debug)]
struct Written {
    end: i64,
    len: u64,
    active: Arc<Segment>,
}

#[derive(Debug)]
struct SyncState {
    /// Every offset below this is durable.
    durable_end: i64,
    in_progress: bool,
}

/// The durable log of one table bucket. Share it as `Arc<LogTablet>`.
#[derive(Debug)]
pub struct LogTablet {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    config: LogConfig,
    maintenance: Mutex<()>,
    writer: Mutex<Writer>,
    segments: RwLock<Arc<Vec<Arc<Segment>>>>,
    high_watermark: AtomicI64,
    log_start: AtomicI64,
    log_end: AtomicI64,
    sync: Mutex<SyncState>,
    synced: Condvar,
    offline: AtomicBool,
    /// Set while a [`rewrite::SegmentRewrite`] is open: one at a time.
    rewriting: AtomicBool,
    /// See [`LogTablet::rewritten_end`].
    rewritten_end: AtomicI64,
    /// The offset the last writer-state snapshot written covers (every
    /// batch below it), or -1 before the first one.
    snapshot_offset: AtomicI64,
    /// Truncations so far: a rewrite begun before one is refused, as the
    /// segments it read may have been cut and written again.
    truncations: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Batches whose stamped prefixes and part list an append keeps on the stack
/// and writes with one vectored write (about 1.8 KiB of stack). Clients send
/// one batch per bucket per request, so an append is almost always one
/// group; one with more batches takes one write per group.
const APPEND_GROUP_BATCHES: usize = 32;

/// Per-batch facts gathered while validating an append.
#[derive(Debug, Clone, Copy)]
struct Incoming {
    size: usize,
    layout: &'static Layout,
    offset_delta: i32,
    writer_id: i64,
    batch_sequence: i32,
}

/// Adds an index entry for a batch at `position` if the index is empty or
/// enough bytes passed since the last entry.
fn maybe_index(
    entries: &mut Vec<IndexEntry>,
    bytes_since_index: &mut u64,
    interval: u32,
    entry: IndexEntry,
    size: usize,
) {
    if entries.is_empty() || *bytes_since_index >= u64::from(interval) {
        entries.push(entry);
        *bytes_since_index = 0;
    }
    *bytes_since_index += size as u64;
}

impl LogTablet {
    /// Opens (or creates) the tablet in `dir`. Without a clean-shutdown
    /// marker, every segment from the one holding the recovery point on is
    /// scanned batch by batch: a torn tail is truncated and logged with the
    /// bytes dropped, corruption below the recovery point is kept and refused
    /// on read (`docs/FORMAT.md` lists every case). Then everything kept is
    /// made durable and checkpointed. `now_ms` starts the flush interval and
    /// the writer-expiry clock.
    pub fn open(
        fs: Arc<dyn Fs>,
        dir: impl Into<PathBuf>,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<Self> {
        config.validate()?;
        let dir = dir.into();
        let recovered = recover(&*fs, &dir, &config)?;
        let Recovered {
            segments,
            log_end,
            active_len,
            bytes_since_index,
            last_commit_ts,
            writers,
            rewritten_end,
        } = recovered;
        let log_start = segments[0].base_offset;
        let tablet = Self {
            dir,
            fs,
            maintenance: Mutex::new(()),
            writer: Mutex::new(Writer {
                segments: segments.clone(),
                log_end,
                active_len,
                bytes_since_index,
                last_commit_ts,
                writers,
                unflushed_records: 0,
                last_flush_ms: now_ms,
            }),
            segments: RwLock::new(Arc::new(segments)),
            high_watermark: AtomicI64::new(log_end),
            log_start: AtomicI64::new(log_start),
            log_end: AtomicI64::new(log_end),
            sync: Mutex::new(SyncState {
                durable_end: log_end,
                in_progress: false,
            }),
            synced: Condvar::new(),
            offline: AtomicBool::new(false),
            rewriting: AtomicBool::new(false),
            rewritten_end: AtomicI64::new(rewritten_end),
            snapshot_offset: AtomicI64::new(-1),
            truncations: AtomicU64::new(0),
            config,
        };
        // Recovery made everything up to the log end durable: record it so
        // the next crash recovery starts here, then drop the marker.
        tablet.checkpoint(now_ms)?;
        let marker = tablet.dir.join(CLEAN_SHUTDOWN_FILE);
        if tablet.fs.exists(&marker) {
            tablet
                .fs
                .remove_file(&marker)
                .and_then(|()| tablet.fs.sync_dir(&tablet.dir))
                .map_err(|e| StorageError::io("removing clean-shutdown marker", &marker, e))?;
        }
        Ok(tablet)
    }

    /// The tablet directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The configuration it was opened with.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// First offset held.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start.load(Ordering::Acquire)
    }
    /// Offset after the last batch written (durable or not).
    pub fn log_end_offset(&self) -> i64 {
        self.log_end.load(Ordering::Acquire)
    }
    /// Offset after the last batch readers may see: the durable end with
    /// [`Durability::Fsync`], the log end with [`Durability::Interval`].
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }
    /// Every offset below this is durable.
    pub fn durable_offset(&self) -> i64 {
        lock(&self.sync).durable_end
    }
    /// Whether an append must be followed by [`LogTablet::wait_durable`]
    /// before it is acknowledged (true for [`Durability::Fsync`]).
    pub fn ack_needs_sync(&self) -> bool {
        self.config.durability == Durability::Fsync
    }
    /// Whether an fsync failure took the tablet offline.
    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// Every segment but the active one, oldest first, as readers see them
    /// now (cheap: no I/O). Sealed segments are durable and below the high
    /// watermark.
    pub fn sealed_segments(&self) -> Vec<SegmentInfo> {
        let segments = self
            .segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let sealed = segments.len().saturating_sub(1);
        segments[..sealed]
            .iter()
            .map(|s| SegmentInfo {
                base_offset: s.base_offset,
                end_offset: s.published_end.load(Ordering::Acquire),
                max_timestamp: s.max_timestamp.load(Ordering::Acquire),
                bytes: s.published_len.load(Ordering::Acquire),
                damaged: s.damaged.is_some(),
            })
            .collect()
    }

    /// The end of the log's rewritten prefix: every offset from the log
    /// start up to here lies in segments produced by committed rewrites
    /// ([`LogTablet::begin_rewrite`]); the log start when there is none. A
    /// hint kept in `rewritten-end.checkpoint`: after a crash it may be lower
    /// than the truth (the rewrite committed, the hint not yet written),
    /// never higher.
    pub fn rewritten_end(&self) -> i64 {
        self.rewritten_end
            .load(Ordering::Acquire)
            .max(self.log_start_offset())
    }

    fn check_online(&self) -> Result<()> {
        if self.offline.load(Ordering::Acquire) {
            return Err(StorageError::Offline {
                dir: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Takes the tablet offline after an fsync (or directory fsync) failure.
    fn go_offline(&self, path: &Path, err: &std::io::Error) -> StorageError {
        self.offline.store(true, Ordering::Release);
        tracing::error!(
            tablet = %self.dir.display(),
            file = %path.display(),
            error = %err,
            "fsync failed; log tablet is now offline and will not retry (restart to recover)"
        );
        let _guard = lock(&self.sync);
        self.synced.notify_all();
        StorageError::Offline {
            dir: self.dir.clone(),
        }
    }

    /// Appends one or more batches (e.g. a ProduceLog request's `records`
    /// for this bucket) as received, with their base offsets, commit
    /// timestamp and (V2) leader epoch stamped: those fields sit before each
    /// batch's CRC'd region, so only a stamped copy of that prefix (at most
    /// [`STAMPED_PREFIX_BYTES_MAX`] bytes a batch) is made, and the prefixes
    /// and the received bodies go to the file in one vectored write — the
    /// body is never copied in memory. Validates every batch first (length,
    /// magic, CRC-32C, size limit); nothing is appended unless all are valid.
    ///
    /// Idempotent writers: if any batch repeats one of its writer's last five
    /// sequences, nothing is appended and the original offsets are returned
    /// with `duplicate = true`; an out-of-order sequence is refused.
    ///
    /// The batches are not yet durable: with [`Durability::Fsync`] call
    /// [`LogTablet::wait_durable`]`(info.last_offset)` before acknowledging.
    /// The commit timestamp is `max(now_ms, previous commit timestamp)`, so
    /// commit timestamps never decrease within a tablet.
    pub fn append(&self, batches: &[u8], now_ms: i64) -> Result<AppendInfo> {
        self.check_online()?;
        if batches.len() > self.config.segment_bytes_max as usize {
            return Err(StorageError::BatchTooLarge {
                size: batches.len(),
                max: self.config.segment_bytes_max as usize,
            });
        }
        // Validate without the lock: CRC work does not serialize appenders.
        let mut incoming: Vec<Incoming> = Vec::with_capacity(1);
        let mut iter = LogBatches::new(batches);
        loop {
            let position = iter.position();
            let Some(item) = iter.next() else { break };
            let batch = item.map_err(|source| StorageError::CorruptBatch { position, source })?;
            if batch.size_in_bytes() > self.config.batch_bytes_max {
                return Err(StorageError::BatchTooLarge {
                    size: batch.size_in_bytes(),
                    max: self.config.batch_bytes_max,
                });
            }
            incoming.push(Incoming {
                size: batch.size_in_bytes(),
                layout: batch.layout(),
                offset_delta: batch.last_offset_delta(),
                writer_id: batch.writer_id(),
                batch_sequence: batch.batch_sequence(),
            });
        }
        if !iter.remaining().is_empty() {
            let position = iter.position();
            let remaining = iter.remaining().len();
            let needed = match peek_size_and_magic(iter.remaining()) {
                Ok(Some((size, _))) => size,
                _ => HEADER_SIZE_UP_TO_MAGIC,
            };
            return Err(StorageError::CorruptBatch {
                position,
                source: LogBatchError::Truncated {
                    needed,
                    available: remaining,
                },
            });
        }
        if incoming.is_empty() {
            return Err(StorageError::EmptyAppend { len: batches.len() });
        }
        let offsets: i64 = incoming.iter().map(|b| i64::from(b.offset_delta) + 1).sum();

        let mut w = lock(&self.writer);
        self.check_online()?;
        for (i, b) in incoming.iter().enumerate() {
            if b.writer_id == NO_WRITER_ID {
                continue;
            }
            let pending = incoming[..i]
                .iter()
                .rev()
                .find(|p| p.writer_id == b.writer_id)
                .map(|p| p.batch_sequence);
            if let SequenceCheck::Duplicate(meta) =
                w.writers.check(b.writer_id, b.batch_sequence, pending)?
            {
                return Ok(AppendInfo {
                    first_offset: meta.first_offset(),
                    last_offset: meta.last_offset,
                    commit_timestamp: meta.timestamp,
                    duplicate: true,
                });
            }
        }

        let must_roll = {
            let active = w.active();
            let entries = active.index().entries.len();
            let relative_end = w.log_end + offsets - active.base_offset;
            w.active_len > 0
                && (w.active_len + batches.len() as u64 > self.config.segment_bytes_max
                    || entries + incoming.len() > self.config.index_entries_max as usize
                    || relative_end > i64::from(u32::MAX))
        };
        if must_roll {
            self.roll(&mut w)?;
        }
        let rolled = must_roll;

        let commit_ts = now_ms.max(w.last_commit_ts);
        let first_offset = w.log_end;
        let active = w.active().clone();
        let position = w.active_len;
        if let Err(e) = self.write_stamped(
            &active,
            position,
            batches,
            &incoming,
            first_offset,
            commit_ts,
        ) {
            // Leave no partial batch behind the log end.
            if let Err(e2) = active.file.set_len(position) {
                tracing::error!(file = %active.log_path.display(), error = %e2, "could not undo a failed append");
            }
            return Err(StorageError::io("appending to", &active.log_path, e));
        }

        // Record index entries and writer state only after the write.
        {
            let mut index = active.index_mut();
            let mut offset = first_offset;
            let mut pos = position;
            for b in &incoming {
                maybe_index(
                    &mut index.entries,
                    &mut w.bytes_since_index,
                    self.config.index_interval_bytes,
                    IndexEntry {
                        relative_offset: (offset - active.base_offset) as u32,
                        position: pos as u32,
                        timestamp: commit_ts,
                    },
                    b.size,
                );
                let last = offset + i64::from(b.offset_delta);
                if b.writer_id != NO_WRITER_ID {
                    w.writers.record(
                        b.writer_id,
                        BatchMeta {
                            batch_sequence: b.batch_sequence,
                            offset_delta: b.offset_delta,
                            last_offset: last,
                            timestamp: commit_ts,
                        },
                    );
                }
                pos += b.size as u64;
                offset = last + 1;
            }
        }
        let last_offset = first_offset + offsets - 1;
        w.log_end = first_offset + offsets;
        w.active_len = position + batches.len() as u64;
        w.last_commit_ts = commit_ts;
        active.max_timestamp.store(commit_ts, Ordering::Release);
        self.log_end.store(w.log_end, Ordering::Release);

        let mut flush = false;
        if let Durability::Interval {
            messages,
            interval_ms,
        } = self.config.durability
        {
            active.publish(w.active_len, w.log_end);
            self.high_watermark.fetch_max(w.log_end, Ordering::AcqRel);
            w.unflushed_records += offsets as u64;
            if w.unflushed_records >= messages || now_ms - w.last_flush_ms >= interval_ms {
                w.unflushed_records = 0;
                w.last_flush_ms = now_ms;
                flush = true;
            }
        }
        drop(w);
        if flush {
            self.wait_durable(last_offset)?;
        }
        if rolled {
            // The sealed segment is durable: move the recovery point past it.
            if let Err(e) = self.checkpoint(now_ms) {
                tracing::error!(tablet = %self.dir.display(), error = %e, "checkpoint after segment roll failed");
            }
        }
        Ok(AppendInfo {
            first_offset,
            last_offset,
            commit_timestamp: commit_ts,
            duplicate: false,
        })
    }

    /// Writes `batches` (validated as `incoming`) to `segment` at `position`,
    /// each with its stamped prefix (base offsets from `first_offset`,
    /// `commit_ts`, the leader epoch) followed by its received rest: a group
    /// of [`APPEND_GROUP_BATCHES`] batches per vectored write, their
    /// prefixes and part list on the stack, so the write allocates nothing.
    /// On error some groups may be written; the caller truncates them.
    fn write_stamped(
        &self,
        segment: &Segment,
        position: u64,
        batches: &[u8],
        incoming: &[Incoming],
        first_offset: i64,
        commit_ts: i64,
    ) -> std::io::Result<()> {
        let mut offset = first_offset;
        let mut at = 0usize;
        let mut group_position = position;
        for group in incoming.chunks(APPEND_GROUP_BATCHES) {
            let group_start = at;
            let mut prefixes = [[0u8; STAMPED_PREFIX_BYTES_MAX]; APPEND_GROUP_BATCHES];
            for (b, prefix) in group.iter().zip(prefixes.iter_mut()) {
                let end = b.layout.crc;
                prefix[..end].copy_from_slice(&batches[at..at + end]);
                stamp_prefix(
                    prefix,
                    b.layout,
                    offset,
                    commit_ts,
                    self.config.leader_epoch,
                );
                at += b.size;
                offset += i64::from(b.offset_delta) + 1;
            }
            // Prefix, received rest, prefix, received rest, ...
            let mut parts = [IoSlice::new(&[]); 2 * APPEND_GROUP_BATCHES];
            let mut batch_at = group_start;
            for ((b, prefix), pair) in group
                .iter()
                .zip(prefixes.iter())
                .zip(parts.chunks_exact_mut(2))
            {
                let end = b.layout.crc;
                pair[0] = IoSlice::new(&prefix[..end]);
                pair[1] = IoSlice::new(&batches[batch_at + end..batch_at + b.size]);
                batch_at += b.size;
            }
            segment
                .file
                .write_all_vectored_at(&mut parts[..2 * group.len()], group_position)?;
            group_position += (at - group_start) as u64;
        }
        Ok(())
    }

    /// Seals the active segment (fsync, index persisted) and starts a new one
    /// at the log end.
    fn roll(&self, w: &mut Writer) -> Result<()> {
        let old = w.active().clone();
        if let Err(e) = old.file.sync_data() {
            return Err(self.go_offline(&old.log_path, &e));
        }
        if let Err(e) = old.persist_index(&*self.fs, false) {
            self.offline.store(true, Ordering::Release);
            tracing::error!(tablet = %self.dir.display(), error = %e, "persisting the index of a sealed segment failed; tablet is offline");
            return Err(StorageError::Offline {
                dir: self.dir.clone(),
            });
        }
        old.publish(w.active_len, w.log_end);
        self.mark_durable(w.log_end);
        let new = Arc::new(Segment::create(&*self.fs, &self.dir, w.log_end)?);
        new.publish(0, w.log_end);
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            return Err(self.go_offline(&self.dir, &e));
        }
        w.segments.push(new);
        w.active_len = 0;
        w.bytes_since_index = 0;
        self.publish_segments(w);
        tracing::debug!(tablet = %self.dir.display(), base_offset = w.log_end, "rolled segment");
        Ok(())
    }

    fn publish_segments(&self, w: &Writer) {
        let list = Arc::new(w.segments.clone());
        *self.segments.write().unwrap_or_else(|e| e.into_inner()) = list;
    }

    /// Records that every offset below `end` is durable and wakes waiters.
    fn mark_durable(&self, end: i64) {
        let mut s = lock(&self.sync);
        if end > s.durable_end {
            s.durable_end = end;
        }
        self.high_watermark.fetch_max(end, Ordering::AcqRel);
        self.synced.notify_all();
    }

    /// Blocks until every offset up to and including `offset` is durable.
    ///
    /// Group commit: if no fsync is running, this call runs one covering
    /// every batch written so far; otherwise it waits for the running one and
    /// then, if that did not cover `offset`, runs or joins the next. An async
    /// server calls it from `spawn_blocking` after [`LogTablet::append`].
    /// With [`Durability::Fsync`] it also publishes the batches to readers.
    pub fn wait_durable(&self, offset: i64) -> Result<()> {
        let mut s = lock(&self.sync);
        loop {
            self.check_online()?;
            if s.durable_end > offset {
                return Ok(());
            }
            if s.in_progress {
                s = self.synced.wait(s).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            s.in_progress = true;
            drop(s);
            let written = self.written();
            let result = written.active.file.sync_data();
            s = lock(&self.sync);
            s.in_progress = false;
            if let Err(e) = result {
                drop(s);
                return Err(self.go_offline(&written.active.log_path, &e));
            }
            let end = written.end;
            self.synced_up_to(&mut s, written);
            if end <= offset {
                // `offset` was never written: do not wait forever.
                return Err(StorageError::OffsetOutOfRange {
                    offset,
                    log_start: self.log_start_offset(),
                    log_end: end,
                });
            }
        }
    }

    /// What is written so far: what a sync started now covers.
    fn written(&self) -> Written {
        let w = lock(&self.writer);
        Written {
            end: w.log_end,
            len: w.active_len,
            active: w.active().clone(),
        }
    }

    /// Records that a sync covered `written` (the sync state's lock held):
    /// its batches become durable and, in fsync mode, visible; waiters wake.
    fn synced_up_to(&self, s: &mut SyncState, written: Written) {
        written.active.publish(written.len, written.end);
        if written.end > s.durable_end {
            s.durable_end = written.end;
        }
        self.high_watermark.fetch_max(written.end, Ordering::AcqRel);
        self.synced.notify_all();
    }

    /// With [`Durability::Interval`], fsyncs if `log.flush.interval-ms`
    /// passed since the last flush and something is unflushed. The server
    /// calls it periodically (e.g. once a second) so an idle tablet's last
    /// batches do not stay unflushed. No-op in fsync mode.
    pub fn flush_if_due(&self, now_ms: i64) -> Result<()> {
        let Durability::Interval { interval_ms, .. } = self.config.durability else {
            return Ok(());
        };
        let end = {
            let mut w = lock(&self.writer);
            if w.unflushed_records == 0 || now_ms - w.last_flush_ms < interval_ms {
                return Ok(());
            }
            w.unflushed_records = 0;
            w.last_flush_ms = now_ms;
            w.log_end
        };
        self.wait_durable(end - 1)
    }

    /// Reads whole batches starting with the one containing `from_offset`,
    /// up to about `max_bytes` but always at least one whole batch, never past
    /// the high watermark and never across a segment boundary. Returns an
    /// empty result at the high watermark.
    pub fn read(&self, from_offset: i64, max_bytes: usize) -> Result<ReadResult> {
        let start = match self.read_start(from_offset)? {
            Ok(start) => start,
            Err(empty) => return Ok(empty),
        };
        let ReadStart {
            seg,
            pos,
            first_size,
            limit,
            high_watermark,
            log_start,
        } = start;
        let available = (limit - pos) as usize;
        let want = first_size.max(max_bytes.min(available));
        let mut buf = vec![0u8; want];
        seg.file
            .read_exact_at(&mut buf, pos)
            .map_err(|e| StorageError::io("reading segment", &seg.log_path, e))?;
        // Keep whole batches below the high watermark loaded above: an
        // append published since then may already count in `published_len`,
        // and a reader must never see past the watermark it reports.
        let mut end = 0usize;
        while let Ok(Some((size, _))) = peek_size_and_magic(&buf[end..]) {
            if size == 0 || end + size > want {
                break;
            }
            let at = end + BASE_OFFSET_OFFSET;
            let base = i64::from_le_bytes(buf[at..at + 8].try_into().unwrap_or([0; 8]));
            if base >= high_watermark {
                break;
            }
            end += size;
        }
        buf.truncate(end);
        Ok(ReadResult {
            records: Bytes::from(buf),
            high_watermark,
            log_start_offset: log_start,
        })
    }

    /// Where a read of `from_offset` starts: the segment and position of
    /// the batch holding it, or the empty result to answer (at or past the
    /// high watermark, or nothing published there yet).
    fn read_start(&self, from_offset: i64) -> Result<std::result::Result<ReadStart, ReadResult>> {
        self.check_online()?;
        let high_watermark = self.high_watermark.load(Ordering::Acquire);
        let segments = self
            .segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let log_start = self.log_start.load(Ordering::Acquire);
        let empty = ReadResult {
            records: Bytes::new(),
            high_watermark,
            log_start_offset: log_start,
        };
        let log_end = self.log_end.load(Ordering::Acquire);
        if from_offset < log_start || from_offset > log_end.max(high_watermark) {
            return Err(StorageError::OffsetOutOfRange {
                offset: from_offset,
                log_start,
                log_end,
            });
        }
        if from_offset >= high_watermark {
            return Ok(Err(empty));
        }
        let i = segments.partition_point(|s| s.base_offset <= from_offset);
        let Some(seg) = i.checked_sub(1).map(|i| &segments[i]) else {
            return Ok(Err(empty));
        };
        let published_end = seg.published_end.load(Ordering::Acquire);
        if let Some(d) = seg.damaged {
            if from_offset >= d.from_offset {
                return Err(StorageError::Damaged {
                    segment: seg.log_path.clone(),
                    from_offset: d.from_offset,
                    to_offset: published_end,
                });
            }
        }
        if from_offset >= published_end {
            return Ok(Err(empty));
        }
        let limit = match seg.damaged {
            Some(d) => d.position,
            None => seg.published_len.load(Ordering::Acquire),
        };
        let relative = (from_offset - seg.base_offset) as u32;
        let mut pos = u64::from(seg.index().lookup(relative));
        let damaged = || StorageError::Damaged {
            segment: seg.log_path.clone(),
            from_offset,
            to_offset: published_end,
        };
        // Walk headers from the index point to the batch containing the offset.
        let first_size = loop {
            if pos + READ_HEADER_BYTES as u64 > limit {
                return Ok(Err(empty));
            }
            let mut head = [0u8; READ_HEADER_BYTES];
            seg.file
                .read_exact_at(&mut head, pos)
                .map_err(|e| StorageError::io("reading segment", &seg.log_path, e))?;
            let (size, magic) = match peek_size_and_magic(&head) {
                Ok(Some(v)) => v,
                _ => return Err(damaged()),
            };
            let Some(layout) = log_batch::layout(magic) else {
                return Err(damaged());
            };
            let at = layout.last_offset_delta;
            let base = i64::from_le_bytes(head[BASE_OFFSET_OFFSET..8].try_into().unwrap_or([0; 8]));
            let delta = i32::from_le_bytes(head[at..at + 4].try_into().unwrap_or([0; 4]));
            if size < log_batch::MIN_HEADER_SIZE || pos + size as u64 > limit {
                return Err(damaged());
            }
            if base.saturating_add(i64::from(delta)) >= from_offset {
                break size;
            }
            pos += size as u64;
        };
        Ok(Ok(ReadStart {
            seg: Arc::clone(seg),
            pos,
            first_size,
            limit,
            high_watermark,
            log_start,
        }))
    }

    /// The base offset of the first batch whose commit timestamp is
    /// `>= timestamp`, or `None` if every visible batch is older.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<i64>> {
        self.check_online()?;
        let segments = self
            .segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for seg in segments.iter() {
            if seg.max_timestamp.load(Ordering::Acquire) < timestamp {
                continue;
            }
            let start = u64::from(seg.index().lookup_time(timestamp));
            let limit = match seg.damaged {
                Some(d) => d.position,
                None => seg.published_len.load(Ordering::Acquire),
            };
            let mut found = None;
            scan(&*seg.file, &seg.log_path, start, limit, |batch, _| {
                if batch.commit_timestamp() >= timestamp {
                    found = Some(batch.base_offset());
                    return false;
                }
                true
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Makes everything written durable, then atomically writes the
    /// idempotent-writer snapshot and the recovery-point checkpoint, so a
    /// crash recovery scans only what comes after. Also forgets writers idle
    /// past `server.writer-id.expiration-time`. The server calls it
    /// periodically; the tablet calls it after each segment roll.
    pub fn checkpoint(&self, now_ms: i64) -> Result<()> {
        let _m = lock(&self.maintenance);
        self.checkpoint_locked(now_ms)
    }

    fn checkpoint_locked(&self, now_ms: i64) -> Result<()> {
        self.check_online()?;
        let (snapshot, end) = {
            let mut w = lock(&self.writer);
            w.writers.expire(now_ms, self.config.writer_expiration_ms);
            (w.writers.encode(w.log_end), w.log_end)
        };
        if end > 0 && self.durable_offset() < end {
            self.wait_durable(end - 1)?;
        }
        meta::write_atomic(&*self.fs, &self.dir, WRITER_STATE_FILE, &snapshot)?;
        self.snapshot_offset.store(end, Ordering::Release);
        meta::write_atomic(
            &*self.fs,
            &self.dir,
            CHECKPOINT_FILE,
            &meta::encode_checkpoint(end),
        )
    }

    /// Deletes whole sealed segments whose newest batch is older than
    /// `table.log.ttl`, then oldest sealed segments while the log exceeds
    /// the size cap; the active segment is never deleted. Advances the log
    /// start offset. Files are deleted oldest first, so a crash leaves a
    /// contiguous log.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<RetentionOutcome> {
        let _m = lock(&self.maintenance);
        self.check_online()?;
        let mut w = lock(&self.writer);
        let mut total: u64 = 0;
        for seg in &w.segments {
            total += seg
                .file
                .len()
                .map_err(|e| StorageError::io("reading segment length", &seg.log_path, e))?;
        }
        let mut n = 0usize;
        let mut bytes = 0u64;
        while n + 1 < w.segments.len() {
            let seg = &w.segments[n];
            let size = seg.file.len().unwrap_or(0);
            let max_ts = seg.max_timestamp.load(Ordering::Acquire);
            let expired = self
                .config
                .retention_ms
                .is_some_and(|ttl| now_ms.saturating_sub(max_ts) > ttl);
            let too_big = self.config.retention_bytes.is_some_and(|cap| total > cap);
            if !(expired || too_big) {
                break;
            }
            total = total.saturating_sub(size);
            bytes += size;
            n += 1;
        }
        if n > 0 {
            let gone: Vec<Arc<Segment>> = w.segments.drain(..n).collect();
            let start = w.segments[0].base_offset;
            self.log_start.store(start, Ordering::Release);
            self.publish_segments(&w);
            drop(w);
            for seg in &gone {
                seg.delete_files(&*self.fs)?;
            }
            if let Err(e) = self.fs.sync_dir(&self.dir) {
                return Err(self.go_offline(&self.dir, &e));
            }
            tracing::info!(tablet = %self.dir.display(), segments = n, bytes, log_start_offset = start, "retention deleted segments");
        }
        Ok(RetentionOutcome {
            segments_deleted: n,
            bytes_deleted: bytes,
            log_start_offset: self.log_start_offset(),
        })
    }

    /// Removes every batch at or after `offset` (a batch containing `offset`
    /// is removed whole). Returns the new log end: the removed batch's base
    /// offset, or `offset` itself when it falls in a gap of a rewritten
    /// segment. For replication; readers racing with it may see an I/O error.
    pub fn truncate_to(&self, offset: i64) -> Result<i64> {
        let _m = lock(&self.maintenance);
        self.check_online()?;
        self.truncations.fetch_add(1, Ordering::AcqRel);
        let mut w = lock(&self.writer);
        if offset >= w.log_end {
            return Ok(w.log_end);
        }
        let log_start = w.segments[0].base_offset;
        if offset < log_start {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start,
                log_end: w.log_end,
            });
        }
        let i = w.segments.partition_point(|s| s.base_offset <= offset) - 1;
        let seg = w.segments[i].clone();
        let seg_len = if i + 1 == w.segments.len() {
            w.active_len
        } else {
            seg.published_len.load(Ordering::Acquire)
        };
        // Find the batch containing `offset`, or the first one after it when
        // it falls in a gap (a rewritten segment).
        let start = u64::from(seg.index().lookup((offset - seg.base_offset) as u32));
        let mut cut = (seg_len, offset);
        scan(&*seg.file, &seg.log_path, start, seg_len, |b, pos| {
            if b.last_offset() >= offset {
                cut = (pos, b.base_offset().min(offset));
                return false;
            }
            true
        })?;
        let (pos, new_end) = cut;
        // Lower the recovery point before touching data, so a crash midway
        // never finds the cut region "below the recovery point".
        meta::write_atomic(
            &*self.fs,
            &self.dir,
            CHECKPOINT_FILE,
            &meta::encode_checkpoint(new_end.min(self.durable_offset())),
        )?;
        let later: Vec<Arc<Segment>> = w.segments.drain(i + 1..).collect();
        for s in later.iter().rev() {
            s.delete_files(&*self.fs)?;
        }
        seg.file
            .set_len(pos)
            .map_err(|e| StorageError::io("truncating", &seg.log_path, e))?;
        if let Err(e) = seg.file.sync_data() {
            return Err(self.go_offline(&seg.log_path, &e));
        }
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            return Err(self.go_offline(&self.dir, &e));
        }
        {
            let mut index = seg.index_mut();
            index.entries.retain(|e| u64::from(e.position) < pos);
            index.persisted = 0;
            w.bytes_since_index = pos - index.entries.last().map_or(0, |e| u64::from(e.position));
        }
        seg.published_len.fetch_min(pos, Ordering::AcqRel);
        seg.published_end.fetch_min(new_end, Ordering::AcqRel);
        w.active_len = pos;
        w.log_end = new_end;
        // Forgetting the truncated batches can leave a writer with none of
        // its recent history: rebuild from the snapshot and the log instead.
        w.writers = recover_writers(&*self.fs, &self.dir, &w.segments, new_end, pos)?;
        self.log_end.store(new_end, Ordering::Release);
        self.high_watermark.fetch_min(new_end, Ordering::AcqRel);
        {
            let mut s = lock(&self.sync);
            s.durable_end = s.durable_end.min(new_end);
        }
        self.publish_segments(&w);
        drop(w);
        // A writer snapshot beyond the new end is discarded at recovery; a
        // rewrite must not count on it.
        if self.snapshot_offset.load(Ordering::Acquire) > new_end {
            self.snapshot_offset.store(-1, Ordering::Release);
        }
        if self.rewritten_end.fetch_min(new_end, Ordering::AcqRel) > new_end {
            meta::write_atomic(
                &*self.fs,
                &self.dir,
                REWRITTEN_END_FILE,
                &meta::encode_rewritten_end(new_end),
            )?;
        }
        tracing::info!(tablet = %self.dir.display(), offset, log_end = new_end, "truncated log");
        Ok(new_end)
    }

    /// Clean shutdown: fsync, persist the active segment's index, write the
    /// checkpoint and writer snapshot, then the clean-shutdown marker, so the
    /// next open scans nothing.
    pub fn close(self, now_ms: i64) -> Result<()> {
        let _m = lock(&self.maintenance);
        self.checkpoint_locked(now_ms)?;
        {
            let w = lock(&self.writer);
            w.active().persist_index(&*self.fs, false)?;
        }
        meta::write_atomic(&*self.fs, &self.dir, CLEAN_SHUTDOWN_FILE, b"")?;
        Ok(())
    }
}

/// Result of recovery, ready to become a tablet.
struct Recovered {
    segments: Vec<Arc<Segment>>,
    log_end: i64,
    active_len: u64,
    bytes_since_index: u64,
    last_commit_ts: i64,
    writers: WriterStates,
    /// The rewritten-end hint, within the log.
    rewritten_end: i64,
}

/// Why recovery stopped trusting a segment's bytes at some position.
#[derive(Debug)]
enum Defect {
    /// The bytes are not a whole valid batch.
    Batch(LogBatchError),
    /// A valid batch whose base offset does not follow the previous batch
    /// (or, in a rewritten segment, lies beyond where a gap may end).
    OffsetMismatch { expected: i64, found: i64 },
    /// A valid batch whose commit timestamp is older than the previous one.
    TimestampBackwards,
    /// A batch beyond what a segment can index (`u32` positions/offsets).
    BeyondSegmentLimits,
}

impl std::fmt::Display for Defect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Defect::Batch(e) => write!(f, "{e}"),
            Defect::OffsetMismatch { expected, found } => {
                write!(f, "batch base offset {found}, expected {expected}")
            }
            Defect::TimestampBackwards => f.write_str("commit timestamp goes backwards"),
            Defect::BeyondSegmentLimits => f.write_str("batch beyond segment index limits"),
        }
    }
}

/// What scanning one segment found.
struct SegmentScan {
    /// Bytes of whole valid, contiguous batches.
    valid_len: u64,
    /// Offset after the last valid batch.
    end_offset: i64,
    /// Commit timestamp of the last valid batch (or the input).
    last_ts: i64,
    /// Bytes since the last index entry.
    bytes_since_index: u64,
    /// Why it stopped early, if it did.
    invalid: Option<Defect>,
}

/// Makes every batch written so far to `tablets` durable with one file
/// system sync ([`crate::FsFile::sync_file_system`], Linux's `syncfs`) per file
/// system holding two or more of them, instead of one `fdatasync` each: a
/// request over many buckets then pays for about one sync (on ext4 one
/// journal commit and one device cache flush, where N fdatasyncs pay N).
/// Returns how many tablets it made durable.
///
/// Best effort: a tablet whose own sync is running, that is offline, alone
/// on its file system, or on one that cannot sync as a whole (or whose
/// sync failed: logged), or whose configuration turns it off
/// ([`crate::LogConfig::sync_file_system`]) is left as it was. The caller
/// then calls [`LogTablet::wait_durable`] on each tablet as without it,
/// which returns at once for the tablets made durable here and syncs the
/// others file by file (reporting a failure as its own sync would). The
/// price: the sync also writes back whatever else is dirty on the file
/// system, as the kernel's flusher would do a little later.
pub fn sync_together(tablets: &[&LogTablet]) -> usize {
    // Claim each tablet's sync, as `wait_durable` does, and take what it
    // has written: only batches written before the file system sync
    // starts are covered by it.
    let mut claimed: Vec<(&LogTablet, Written, Option<u64>)> = Vec::with_capacity(tablets.len());
    for &tablet in tablets {
        if !tablet.config.sync_file_system || tablet.check_online().is_err() {
            continue;
        }
        let mut s = lock(&tablet.sync);
        if s.in_progress {
            continue;
        }
        s.in_progress = true;
        let durable_end = s.durable_end;
        drop(s);
        let written = tablet.written();
        if written.end <= durable_end {
            tablet.release_sync(None);
            continue;
        }
        let file_system = written.active.file.file_system_id();
        claimed.push((tablet, written, file_system));
    }
    let mut done = 0;
    while let Some((first, written, file_system)) = claimed.pop() {
        let mut group = vec![(first, written)];
        if let Some(id) = file_system {
            let mut i = 0;
            while i < claimed.len() {
                if claimed[i].2 == Some(id) {
                    let (tablet, written, _) = claimed.swap_remove(i);
                    group.push((tablet, written));
                } else {
                    i += 1;
                }
            }
        }
        let synced = group.len() >= 2
            && match group[0].1.active.file.sync_file_system() {
                Ok(synced) => synced,
                Err(e) => {
                    tracing::warn!(file = %group[0].1.active.log_path.display(), error = %e,
                        "syncing the file system failed; syncing each tablet's file instead");
                    false
                }
            };
        for (tablet, written) in group {
            tablet.release_sync(synced.then_some(written));
            done += usize::from(synced);
        }
    }
    done
}

impl LogTablet {
    /// Ends a sync claimed by [`sync_together`]: `Some` if it covered
    /// that, `None` if it did not run.
    fn release_sync(&self, synced: Option<Written>) {
        let mut s = lock(&self.sync);
        s.in_progress = false;
        match synced {
            Some(written) => self.synced_up_to(&mut s, written),
            // Waiters that joined the claimed sync run their own now.
            None => self.synced.notify_all(),
        }
    }
}

/// Scans `seg` from `start_pos` (whose first batch has `start_offset`),
/// checking offsets increase and commit timestamps do not decrease, and
/// appending index entries to its in-memory index.
///
/// A batch may start after a gap (a rewritten segment) only if it starts at
/// or below `gap_max_base`: in a sealed segment, before the next segment's
/// base; in the last segment, at or below the recovery point, where bytes
/// were durable. Above it a gap means a torn header, as before rewrites.
fn scan_segment(
    seg: &Segment,
    start_pos: u64,
    start_offset: i64,
    prev_ts: i64,
    len: u64,
    interval: u32,
    gap_max_base: i64,
) -> Result<SegmentScan> {
    let mut next = start_offset;
    let mut last_ts = prev_ts;
    let mut bad: Option<Defect> = None;
    let mut index = seg.index_mut();
    let mut since = start_pos
        - index
            .entries
            .last()
            .map_or(0, |e| u64::from(e.position).min(start_pos));
    let (stop_pos, stop) = scan(&*seg.file, &seg.log_path, start_pos, len, |b, pos| {
        let base = b.base_offset();
        if base < next || (base > next && base > gap_max_base) {
            bad = Some(Defect::OffsetMismatch {
                expected: next,
                found: b.base_offset(),
            });
            return false;
        }
        if b.commit_timestamp() < last_ts {
            bad = Some(Defect::TimestampBackwards);
            return false;
        }
        let rel = b.base_offset() - seg.base_offset;
        if rel > i64::from(u32::MAX) || pos > u64::from(u32::MAX) {
            bad = Some(Defect::BeyondSegmentLimits);
            return false;
        }
        if index
            .entries
            .last()
            .is_none_or(|e| u64::from(e.position) < pos)
        {
            maybe_index(
                &mut index.entries,
                &mut since,
                interval,
                IndexEntry {
                    relative_offset: rel as u32,
                    position: pos as u32,
                    timestamp: b.commit_timestamp(),
                },
                b.size_in_bytes(),
            );
        } else {
            since += b.size_in_bytes() as u64;
        }
        next = b.next_offset();
        last_ts = b.commit_timestamp();
        true
    })?;
    let invalid = match stop {
        ScanStop::End => None,
        ScanStop::Invalid(e) => Some(Defect::Batch(e)),
        ScanStop::Stopped => bad,
    };
    Ok(SegmentScan {
        valid_len: stop_pos,
        end_offset: next,
        last_ts,
        bytes_since_index: since,
        invalid,
    })
}

fn recover(fs: &dyn Fs, dir: &Path, config: &LogConfig) -> Result<Recovered> {
    fs.create_dir_all(dir)
        .map_err(|e| StorageError::io("creating tablet directory", dir, e))?;
    // A rewrite that committed (its `.swap` file is durable) but did not
    // finish replacing the old segments is finished first.
    rewrite::finish_interrupted(fs, dir)?;
    let names = fs
        .list(dir)
        .map_err(|e| StorageError::io("listing tablet directory", dir, e))?;
    let mut bases: Vec<i64> = Vec::new();
    for name in &names {
        if let Some(base) = segment::parse_file_name(name, LOG_SUFFIX) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    // Leftovers: temp files of an interrupted atomic write, and index files
    // of a segment whose .log is gone (an interrupted deletion).
    for name in &names {
        let orphan_index = [INDEX_SUFFIX, TIME_INDEX_SUFFIX].iter().any(|sfx| {
            segment::parse_file_name(name, sfx).is_some_and(|b| bases.binary_search(&b).is_err())
        });
        if name.ends_with(TMP_SUFFIX) || orphan_index {
            let p = dir.join(name);
            fs.remove_file(&p)
                .map_err(|e| StorageError::io("removing leftover file", &p, e))?;
        }
    }
    let clean = fs.exists(&dir.join(CLEAN_SHUTDOWN_FILE));
    let checkpoint_path = dir.join(CHECKPOINT_FILE);
    let recovery_point =
        match meta::read_small(fs, &checkpoint_path, meta::CHECKPOINT_BYTES as u64)? {
            None => 0,
            Some(bytes) => {
                meta::decode_checkpoint(&bytes).map_err(|reason| StorageError::BadFile {
                    path: checkpoint_path.clone(),
                    kind: "recovery-point checkpoint",
                    reason,
                })?
            }
        };

    if bases.is_empty() {
        if recovery_point > 0 {
            return Err(StorageError::BadFile {
                path: dir.to_path_buf(),
                kind: "log tablet directory",
                reason: "no segment files, but the recovery point says data was durable",
            });
        }
        let seg = Segment::create(fs, dir, 0)?;
        fs.sync_dir(dir)
            .map_err(|e| StorageError::io("syncing directory", dir, e))?;
        return Ok(Recovered {
            segments: vec![Arc::new(seg)],
            log_end: 0,
            active_len: 0,
            bytes_since_index: 0,
            last_commit_ts: -1,
            writers: WriterStates::default(),
            rewritten_end: 0,
        });
    }

    // Segments from `first_scanned` on are scanned whole; earlier ones are
    // trusted (index loaded, only the tail after the last index entry read).
    let first_scanned = if clean {
        bases.len()
    } else {
        bases
            .partition_point(|&b| b <= recovery_point)
            .saturating_sub(1)
    };
    let mut segments: Vec<Arc<Segment>> = Vec::with_capacity(bases.len());
    let mut expected = bases[0];
    let mut last_ts = -1i64;
    let mut active_len = 0u64;
    let mut bytes_since_index = 0u64;
    let mut truncated_from: Option<usize> = None;
    for (k, &base) in bases.iter().enumerate() {
        let path = dir.join(format!("{}{LOG_SUFFIX}", segment::file_stem(base)));
        let file = fs
            .open(&path, false)
            .map_err(|e| StorageError::io("opening segment", &path, e))?;
        let len = file
            .len()
            .map_err(|e| StorageError::io("reading segment length", &path, e))?;
        let mut seg = Segment::with_file(path.clone(), file, base);
        if base != expected {
            // A gap or overlap between segments.
            if expected < recovery_point {
                return Err(StorageError::BadFile {
                    path,
                    kind: "log segment",
                    reason: "segment does not start where the previous one ends, below the recovery point",
                });
            }
            truncated_from = Some(k);
            break;
        }
        let trusted = k < first_scanned && seg.load_index(fs, len)?;
        let (start_pos, start_offset) = if trusted {
            let index = seg.index();
            match index.entries.last() {
                Some(e) => (u64::from(e.position), base + i64::from(e.relative_offset)),
                None => (0, base),
            }
        } else {
            seg.index_mut().entries.clear();
            (0, base)
        };
        let gap_max_base = match bases.get(k + 1) {
            Some(next_base) => next_base - 1,
            None => recovery_point,
        };
        let s = scan_segment(
            &seg,
            start_pos,
            start_offset,
            last_ts,
            len,
            config.index_interval_bytes,
            gap_max_base,
        )?;
        if !trusted {
            seg.index_mut().persisted = 0;
        }
        let is_last = k + 1 == bases.len();
        if let Some(err) = &s.invalid {
            if s.end_offset < recovery_point {
                // Never truncate below the recovery point: keep the bytes,
                // refuse to serve them.
                tracing::error!(
                    segment = %path.display(),
                    position = s.valid_len,
                    offset = s.end_offset,
                    recovery_point,
                    error = %err,
                    "corrupt batch below the recovery point; the damaged range will not be served"
                );
                seg.damaged = Some(DamagedRange {
                    from_offset: s.end_offset,
                    position: s.valid_len,
                });
                let end = if is_last {
                    recovery_point
                } else {
                    bases[k + 1]
                };
                seg.publish(s.valid_len, end);
                seg.max_timestamp.store(s.last_ts, Ordering::Release);
                last_ts = s.last_ts;
                expected = end;
                segments.push(Arc::new(seg));
                continue;
            }
            let dropped_here = len - s.valid_len;
            let dropped_later: u64 = bases[k + 1..]
                .iter()
                .map(|b| {
                    let p = dir.join(format!("{}{LOG_SUFFIX}", segment::file_stem(*b)));
                    fs.open(&p, false).and_then(|f| f.len()).unwrap_or(0)
                })
                .sum();
            tracing::warn!(
                segment = %path.display(),
                position = s.valid_len,
                offset = s.end_offset,
                bytes_dropped = dropped_here + dropped_later,
                error = %err,
                "truncating torn tail of the log"
            );
            seg.file
                .set_len(s.valid_len)
                .and_then(|()| seg.file.sync_data())
                .map_err(|e| StorageError::io("truncating torn tail", &path, e))?;
            truncated_from = Some(k + 1);
        }
        seg.publish(s.valid_len, s.end_offset);
        seg.max_timestamp.store(s.last_ts, Ordering::Release);
        last_ts = s.last_ts;
        expected = s.end_offset;
        active_len = s.valid_len;
        bytes_since_index = s.bytes_since_index;
        segments.push(Arc::new(seg));
        if truncated_from.is_some() {
            break;
        }
    }
    if let Some(k) = truncated_from {
        for &base in bases[k..].iter().rev() {
            segment::delete_files(fs, dir, base)?;
        }
    }
    // A damaged last segment cannot take appends (its end is unknown): start
    // a new one at the recovery point.
    let last_damaged = segments.last().is_some_and(|s| s.damaged.is_some());
    if last_damaged {
        let seg = Segment::create(fs, dir, expected)?;
        seg.publish(0, expected);
        segments.push(Arc::new(seg));
        active_len = 0;
        bytes_since_index = 0;
    }
    let log_end = expected;
    // Make what recovery kept durable before serving it, and persist
    // rebuilt indexes of sealed segments.
    for seg in &segments {
        seg.file
            .sync_data()
            .map_err(|e| StorageError::io("syncing segment", &seg.log_path, e))?;
    }
    let sealed = segments.len() - 1;
    for seg in &segments[..sealed] {
        if seg.index().persisted == 0 && seg.damaged.is_none() {
            seg.persist_index(fs, true)?;
        }
    }
    fs.sync_dir(dir)
        .map_err(|e| StorageError::io("syncing directory", dir, e))?;

    let writers = recover_writers(fs, dir, &segments, log_end, active_len)?;
    let rewritten_end =
        rewrite::read_rewritten_end(fs, dir)?.clamp(segments[0].base_offset, log_end);
    Ok(Recovered {
        segments,
        log_end,
        active_len,
        bytes_since_index,
        last_commit_ts: last_ts,
        writers,
        rewritten_end,
    })
}

/// Loads the writer snapshot and replays the batches after it; rebuilds from
/// the whole log if the snapshot is missing, unreadable or beyond the log end.
fn recover_writers(
    fs: &dyn Fs,
    dir: &Path,
    segments: &[Arc<Segment>],
    log_end: i64,
    active_len: u64,
) -> Result<WriterStates> {
    let path = dir.join(WRITER_STATE_FILE);
    let (mut states, from) = match meta::read_small(
        fs,
        &path,
        crate::writer_state::SNAPSHOT_BYTES_MAX,
    ) {
        Ok(Some(bytes)) => match WriterStates::decode(&bytes) {
            Ok((s, offset)) if offset <= log_end => (s, offset),
            Ok(_) => {
                tracing::warn!(file = %path.display(), "writer snapshot is ahead of the log; rebuilding writer state from the log");
                (WriterStates::default(), i64::MIN)
            }
            Err(reason) => {
                tracing::warn!(file = %path.display(), reason, "unreadable writer snapshot; rebuilding writer state from the log");
                (WriterStates::default(), i64::MIN)
            }
        },
        Ok(None) => (WriterStates::default(), i64::MIN),
        Err(e) => return Err(e),
    };
    for (k, seg) in segments.iter().enumerate() {
        let is_active = k + 1 == segments.len();
        let end = if is_active {
            log_end
        } else {
            seg.published_end.load(Ordering::Acquire)
        };
        if end <= from {
            continue;
        }
        let limit = match seg.damaged {
            Some(d) => d.position,
            None if is_active => active_len,
            None => seg.published_len.load(Ordering::Acquire),
        };
        let start = if from > seg.base_offset {
            u64::from(seg.index().lookup((from - seg.base_offset) as u32))
        } else {
            0
        };
        scan(
            &*seg.file,
            &seg.log_path,
            start,
            limit,
            |b: LogBatch<'_>, _| {
                if b.base_offset() >= from && b.writer_id() != NO_WRITER_ID {
                    states.record(
                        b.writer_id(),
                        BatchMeta {
                            batch_sequence: b.batch_sequence(),
                            offset_delta: b.last_offset_delta(),
                            last_offset: b.last_offset(),
                            timestamp: b.commit_timestamp(),
                        },
                    );
                }
                true
            },
        )?;
    }
    Ok(states)
}

// Commit timestamps are read straight from the header during recovery.
const _: () = assert!(COMMIT_TIMESTAMP_OFFSET == 13);
