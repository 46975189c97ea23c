//! Compaction of primary-key changelogs (Kafka's log compaction, which
//! Fluss lacks). A primary-key table's changelog is never deleted by
//! retention: a Flink source that finds no KV snapshot rebuilds the table by
//! reading it from the earliest offset. Its sealed segments older than
//! `table.log.ttl` are compacted instead, into the latest image of each live
//! key, at the offsets the rows had.
//!
//! ```text
//! plan (cheap, every maintenance round)
//!   range   the prefix of sealed segments whose newest batch is older than
//!           table.log.ttl (retention's rule), below the high watermark and
//!           the KV store's applied offset
//!   clean   segments below the log's rewritten end: compacted before, each
//!           key at most once
//!   dirty   the rest of the range; due when dirty bytes / range bytes
//!           >= kv.changelog-compaction.min-dirty-ratio
//! index     dirty rows only: encoded physical primary key -> offset of its
//!           last row, bounded by kv.changelog-compaction.index-size (fewer
//!           dirty segments when it would pass, skipped when one does)
//! rewrite   every segment of the range, oldest first; a row survives if
//!             dirty: it is its key's last row (index offset = its offset)
//!             clean: the index does not know its key
//!           and is +I or +U (written as +I) or -D (kept as a tombstone until
//!           table.log.ttl + kv.changelog-compaction.delete-retention after
//!           its commit); -U rows never survive
//!           survivors become ARROW batches (table schema and compression,
//!           change types), one per run of contiguous offsets, base offset =
//!           the run's first, commit timestamp = the newest of its rows,
//!           writer id -1; the log has gaps between batches
//!           (fjord_storage::tablet::rewrite makes the replacement atomic:
//!           old segments or new, whole, after any crash)
//! ```
//!
//! What it guarantees:
//! - **Readers from the earliest offset** rebuild exactly the table: for
//!   every key the last surviving row is its last row of the range (or the
//!   key has none and was deleted), so `+I`/`+U` put and `-D` delete
//!   materialise the same state as the full changelog did.
//! - **Readers in the middle** (positioned at `p` before a compaction,
//!   continuing after it): every surviving row at or after `p` is a key's
//!   latest; a key deleted after `p` still has its `-D` while the tombstone
//!   is kept. A reader that lags by more than `table.log.ttl` +
//!   `kv.changelog-compaction.delete-retention` may miss a delete (Kafka's
//!   `delete.retention.ms` rule); with a retention of 0 it always may.
//! - **The replay at open** never needs a compacted row: the range ends at
//!   or below the KV store's applied offset, read after the committed
//!   changes were written to the store, where the offset is durable with
//!   the rows it stands for (one ingestion), so no crash rolls it back.
//! - **Correct after a partial run**: groups of segments are replaced oldest
//!   first, each on its own; every row a committed group dropped has a later
//!   row of its key in the groups still unreplaced or a later group, so a
//!   crash or error between groups leaves a correctly compacted log. The
//!   clean boundary (`LogTablet::rewritten_end`) is only a hint: any
//!   boundary gives a correct result, a low one only redoes work.
//!
//! Runs off the request path ([`ChangelogCompactor`]): at most one
//! compaction in the background on the whole server, on a thread of its
//! own started from the maintenance when a bucket is due.
//!
//! Rows are decoded with the schema of their batch's schema id and
//! rewritten at the table's current one, padded with NULLs in the columns
//! added since (an image a reader of either schema reads the same); a batch
//! of a schema id newer than the run's view of the table stops the run
//! (logged, retried later).
//!
//! Known cost of the format: Arrow batches cannot skip offsets, so every
//! run of survivors is its own batch. Under the default full changelog
//! image an updated key's `+U` follows its `-U`, so survivors of updates are
//! runs of one row, each a whole batch (header and Arrow message: about 320
//! bytes for a three-column row, against 10 to 30 bytes a row in large
//! compressed batches). The compacted image of a table is then about that
//! size per live key, whatever the history was: bounded by the table, not
//! by its history, but larger than a short history. On 2,000 keys (three
//! columns, ZSTD, batches of 50 writes; `cargo test -p fjord-server --test
//! kv_changelog_compaction compacted_image_size -- --nocapture`): inserts
//! only, 178 KB → 31 KB; every key updated once, 210 KB → 788 KB; ten
//! times, 480 KB → 755 KB.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use fjord_format::arrow_log::{decode_log_batch, ArrowLogEncoder, ChangeType};
use fjord_format::datum::Datum;
use fjord_format::log_batch::{
    BatchHeader, LogBatches, LOG_MAGIC_V0, NO_BATCH_SEQUENCE, NO_LEADER_EPOCH, NO_WRITER_ID,
};
use fjord_storage::{LogTablet, RewriteOutcome, SegmentInfo, SegmentRewrite};
use tracing::{info, warn};

use super::columns::{read_row_into, recycle, ColumnsBuilder, NestedColumns};
use super::table::KvTable;
use super::tablet::KvTablet;
use crate::error::{ApiError, ErrorCode};
use crate::replica::{storage_error, TableBucket};

/// Default `kv.changelog-compaction.index-size`: the most memory the
/// key → last-offset index of one compaction may take (keys plus
/// [`INDEX_ENTRY_OVERHEAD_BYTES`] each). One compaction runs at a time on a
/// server, so this bounds compaction's memory; a range whose dirty keys do
/// not fit is compacted in part (fewer segments).
pub const DEFAULT_INDEX_BYTES: usize = 64 << 20;
/// Default `kv.changelog-compaction.min-dirty-ratio` (Kafka's
/// `min.cleanable.dirty.ratio`): compact when at least this share of the
/// compactable bytes was not compacted yet. Bounds how often the compacted
/// prefix is rewritten: each byte of it is rewritten about once per this
/// share of new data.
pub const DEFAULT_MIN_DIRTY_RATIO: f64 = 0.5;
/// Default `kv.changelog-compaction.delete-retention` (Kafka's
/// `delete.retention.ms`, one day): how long after `table.log.ttl` a delete
/// stays in a compacted changelog, so a reader that was in the middle of the
/// changelog when it was compacted still sees it.
pub const DEFAULT_DELETE_RETENTION_MS: i64 = 24 * 3600 * 1000;
/// Memory charged per index entry besides its key bytes: the offset, the
/// boxed key's header and the hash table's slot.
pub const INDEX_ENTRY_OVERHEAD_BYTES: usize = 48;
/// Most rows in one rewritten batch: keeps a batch, and the memory that
/// builds it, small.
pub const BATCH_ROWS_MAX: usize = 4096;
/// Bytes (estimated from the original batches) after which a rewritten
/// batch is cut, so it stays well below `log.batch.max-size`.
pub const BATCH_BYTES_TARGET: usize = 1 << 20;
/// Bytes of changelog read per step.
const READ_BYTES: usize = 4 << 20;
/// How long a bucket whose compaction failed or was skipped waits before
/// the next attempt, so a stuck bucket does not redo the work every round.
pub const RETRY_AFTER_MS: i64 = 10 * 60 * 1000;

/// Server-wide compaction options (`kv.changelog-compaction.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChangelogCompactionOptions {
    /// See [`DEFAULT_INDEX_BYTES`].
    pub index_bytes_max: usize,
    /// See [`DEFAULT_MIN_DIRTY_RATIO`]; 0 compacts whenever anything is due.
    pub min_dirty_ratio: f64,
    /// See [`DEFAULT_DELETE_RETENTION_MS`]; 0 drops deletes at once.
    pub delete_retention_ms: i64,
}

impl Default for ChangelogCompactionOptions {
    fn default() -> Self {
        Self {
            index_bytes_max: DEFAULT_INDEX_BYTES,
            min_dirty_ratio: DEFAULT_MIN_DIRTY_RATIO,
            delete_retention_ms: DEFAULT_DELETE_RETENTION_MS,
        }
    }
}

/// The `table.log.ttl` that applies to a primary-key table's changelog: its
/// own, else the server's; `None` (0 or less, or none) never compacts.
pub fn changelog_ttl_ms(table: &KvTable, server_ttl_ms: Option<i64>) -> Option<i64> {
    table.log_ttl_ms.or(server_ttl_ms).filter(|&ms| ms > 0)
}

/// What one compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionReport {
    /// First offset of the compacted range (the log start).
    pub base_offset: i64,
    /// End of the compacted range: the first offset not compacted.
    pub end_offset: i64,
    /// Where the dirty part (indexed) began.
    pub dirty_offset: i64,
    /// Segments replaced.
    pub segments_before: usize,
    /// Segments written.
    pub segments_after: usize,
    /// Bytes of the segments replaced.
    pub bytes_before: u64,
    /// Bytes of the segments written.
    pub bytes_after: u64,
    /// Changelog rows read.
    pub rows_read: u64,
    /// Rows written back.
    pub rows_kept: u64,
}

/// The outcome of [`compact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compaction {
    /// Nothing old enough, dirty enough and applied to the KV store.
    NotDue,
    /// Compacted.
    Done(CompactionReport),
    /// Due but not compacted, and why (logged by the caller).
    Skipped(String),
    /// Stopped by shutdown; the segments replaced so far stay replaced.
    Stopped,
}

/// Why a compaction stopped early.
enum Halt {
    Error(ApiError),
    Skip(String),
    Stopped,
    /// The index passed its bound (index building only).
    IndexFull,
}

impl From<ApiError> for Halt {
    fn from(e: ApiError) -> Self {
        Halt::Error(e)
    }
}

/// What part of a changelog a compaction covers.
#[derive(Debug, Clone)]
struct Plan {
    /// The range's segments, oldest first (the first starts at the log start).
    segments: Vec<SegmentInfo>,
    /// Index in `segments` of the first dirty one.
    dirty_from: usize,
}

/// The compaction due for `log` (no I/O): the expired prefix of sealed
/// segments below `limit`, if enough of it is dirty.
fn plan(
    log: &LogTablet,
    limit: i64,
    ttl_ms: i64,
    options: &ChangelogCompactionOptions,
    now_ms: i64,
) -> Option<Plan> {
    let sealed = log.sealed_segments();
    let n = sealed
        .iter()
        .take_while(|s| {
            !s.damaged && s.end_offset <= limit && now_ms.saturating_sub(s.max_timestamp) > ttl_ms
        })
        .count();
    let segments = &sealed[..n];
    let clean_end = log.rewritten_end();
    let dirty_from = segments.partition_point(|s| s.end_offset <= clean_end);
    if dirty_from == n {
        return None;
    }
    let clean: u64 = segments[..dirty_from].iter().map(|s| s.bytes).sum();
    let dirty: u64 = segments[dirty_from..].iter().map(|s| s.bytes).sum();
    if (dirty as f64) < options.min_dirty_ratio * (clean + dirty) as f64 {
        return None;
    }
    Some(Plan {
        segments: segments.to_vec(),
        dirty_from,
    })
}

/// Whether a compaction of `kv`'s changelog is due (cheap: no I/O).
pub fn is_due(
    kv: &KvTablet,
    ttl_ms: i64,
    options: &ChangelogCompactionOptions,
    now_ms: i64,
) -> bool {
    let log = kv.log();
    let limit = log.high_watermark().min(kv.applied().offset);
    plan(log, limit, ttl_ms, options, now_ms).is_some()
}

/// Compacts `kv`'s changelog if due (blocking: it reads and writes whole
/// segments). `ttl_ms` is the table's `table.log.ttl`; `stop` aborts between
/// segments. Only one compaction of a bucket runs at a time: a second one
/// is refused by the log (use [`ChangelogCompactor`] to wait instead).
pub fn compact(
    kv: &KvTablet,
    ttl_ms: i64,
    options: &ChangelogCompactionOptions,
    now_ms: i64,
    stop: &AtomicBool,
) -> Result<Compaction, ApiError> {
    let bucket = kv.bucket();
    let log = kv.log();
    let cheap_limit = log.high_watermark().min(kv.applied().offset);
    if plan(log, cheap_limit, ttl_ms, options, now_ms).is_none() {
        return Ok(Compaction::NotDue);
    }
    // The replay at open starts at the store's applied offset: write the
    // committed changes to the store first, and compact only below what it
    // holds.
    kv.spill()?;
    let applied = kv.store().applied().map_err(|e| storage_error(bucket, e))?;
    let limit = log.high_watermark().min(applied.offset);
    let Some(mut plan) = plan(log, limit, ttl_ms, options, now_ms) else {
        return Ok(Compaction::NotDue);
    };
    // The table as it is now: rows of every schema id up to its current one
    // are rewritten at the current one (padded with NULLs).
    let table = kv.table();
    let table = &*table;
    let dirty = &plan.segments[plan.dirty_from..];
    let index = match index_segments(kv, table, dirty, options.index_bytes_max, stop) {
        Ok((index, taken)) if taken == dirty.len() => index,
        Ok((_, 0)) => {
            return Ok(Compaction::Skipped(format!(
                "{bucket}: the keys of one changelog segment do not fit in kv.changelog-compaction.index-size ({} bytes)",
                options.index_bytes_max
            )))
        }
        Ok((_, taken)) => {
            // The dirty segments whose keys fit: index them again (an entry
            // the segment that did not fit updated lost its earlier offset).
            plan.segments.truncate(plan.dirty_from + taken);
            let dirty = &plan.segments[plan.dirty_from..];
            match index_segments(kv, table, dirty, options.index_bytes_max, stop) {
                Ok((index, again)) if again == taken => index,
                Ok(_) => return Ok(Compaction::Skipped(format!("{bucket}: the changelog changed while it was indexed"))),
                Err(halt) => return halted(halt),
            }
        }
        Err(halt) => return halted(halt),
    };
    let tombstone_deadline = now_ms
        .saturating_sub(ttl_ms)
        .saturating_sub(options.delete_retention_ms);
    match rewrite_range(kv, table, &plan, &index, tombstone_deadline, now_ms, stop) {
        Ok(report) => Ok(Compaction::Done(report)),
        Err(halt) => halted(halt),
    }
}

fn halted(halt: Halt) -> Result<Compaction, ApiError> {
    match halt {
        Halt::Error(e) => Err(e),
        Halt::Skip(why) => Ok(Compaction::Skipped(why)),
        Halt::Stopped => Ok(Compaction::Stopped),
        Halt::IndexFull => Ok(Compaction::Skipped(
            "the compaction index is full".to_owned(),
        )),
    }
}

/// The dirty rows' keys and the offset of each key's last row.
struct KeyIndex {
    last: HashMap<Box<[u8]>, i64>,
    bytes: usize,
}

/// Indexes the rows of `segments`, oldest first, until their keys would
/// pass `bytes_max`; returns the index and how many segments it covers
/// whole (fewer than given when one did not fit: the index then also holds
/// part of that one).
fn index_segments(
    kv: &KvTablet,
    table: &KvTable,
    segments: &[SegmentInfo],
    bytes_max: usize,
    stop: &AtomicBool,
) -> Result<(KeyIndex, usize), Halt> {
    let mut index = KeyIndex {
        last: HashMap::new(),
        bytes: 0,
    };
    for (i, seg) in segments.iter().enumerate() {
        let indexed = for_each_row(kv, table, seg, stop, |row| {
            if row.change == ChangeType::UpdateBefore {
                return Ok(());
            }
            if let Some(offset) = index.last.get_mut(row.key) {
                *offset = row.offset;
                return Ok(());
            }
            index.bytes += row.key.len() + INDEX_ENTRY_OVERHEAD_BYTES;
            if index.bytes > bytes_max {
                return Err(Halt::IndexFull);
            }
            index.last.insert(row.key.into(), row.offset);
            Ok(())
        });
        match indexed {
            Ok(()) => {}
            Err(Halt::IndexFull) => return Ok((index, i)),
            Err(other) => return Err(other),
        }
    }
    Ok((index, segments.len()))
}

/// One changelog row as compaction sees it.
struct Row<'r, 'd> {
    offset: i64,
    change: ChangeType,
    /// Commit timestamp of its batch.
    timestamp: i64,
    /// Its share of its batch's bytes (to size rewritten batches).
    bytes: usize,
    /// The encoded physical primary key.
    key: &'r [u8],
    datums: &'r [Datum<'d>],
}

/// Calls `each` with every row of `seg`, in offset order.
fn for_each_row(
    kv: &KvTablet,
    table: &KvTable,
    seg: &SegmentInfo,
    stop: &AtomicBool,
    mut each: impl FnMut(&Row<'_, '_>) -> Result<(), Halt>,
) -> Result<(), Halt> {
    let bucket = kv.bucket();
    let log = kv.log();
    let corrupt = |offset: i64, why: String| {
        Halt::Skip(format!(
            "{bucket}: the changelog batch at offset {offset} cannot be compacted: {why}"
        ))
    };
    let mut key = Vec::new();
    // Reused across rows: the datums of one row, and the bytes its ARRAY,
    // MAP and ROW values are written again into (`read_row_into`).
    let mut datums: Vec<Datum<'_>> = Vec::new();
    let mut nested_scratch: Vec<u8> = Vec::new();
    let mut next = seg.base_offset;
    while next < seg.end_offset {
        if stop.load(Ordering::Acquire) {
            return Err(Halt::Stopped);
        }
        let chunk = log
            .read(next, READ_BYTES)
            .map_err(|e| storage_error(bucket, e))?;
        if chunk.records.is_empty() {
            return Err(Halt::Skip(format!(
                "{bucket}: the changelog ends at {next}, inside a sealed segment"
            )));
        }
        for batch in LogBatches::new(&chunk.records) {
            let batch = batch.map_err(|e| corrupt(next, e.to_string()))?;
            if batch.base_offset() >= seg.end_offset {
                return Ok(());
            }
            next = batch.next_offset();
            let count = batch.record_count();
            if count <= 0 {
                continue;
            }
            // A batch of a schema id newer than the compaction's view of the
            // table (altered meanwhile) waits for the next run.
            let Some(schema) = table.schema_by_id(batch.schema_id()) else {
                return Err(Halt::Skip(format!(
                    "{bucket}: the changelog batch at offset {} has schema id {}, which the table's schema {} does not know",
                    batch.base_offset(),
                    batch.schema_id(),
                    table.schema_id
                )));
            };
            let bytes = chunk.records.slice_ref(batch.as_bytes());
            let decoded = decode_log_batch(&bytes.into(), schema.arrow_schema.clone())
                .map_err(|e| corrupt(batch.base_offset(), e.to_string()))?;
            let Some(types) = decoded.change_types.as_ref() else {
                return Err(corrupt(
                    batch.base_offset(),
                    "an append-only batch in a primary-key table's changelog".into(),
                ));
            };
            let row_bytes = batch.size_in_bytes() / count as usize;
            let mut nested = NestedColumns::of(&decoded.records)
                .map_err(|e| corrupt(batch.base_offset(), e.to_string()))?;
            for (i, &byte) in types.as_slice().iter().enumerate() {
                let change = ChangeType::from_byte(byte).unwrap_or(ChangeType::UpdateBefore);
                let mut row_datums = recycle(std::mem::take(&mut datums));
                read_row_into(
                    &decoded.records,
                    i,
                    &mut nested,
                    &mut nested_scratch,
                    &mut row_datums,
                )
                .map_err(|e| corrupt(batch.base_offset(), e.to_string()))?;
                // An older schema's row, as the current schema reads it.
                row_datums.resize(table.arity(), Datum::Null);
                key.clear();
                table
                    .keys
                    .encode_datums(&row_datums, &mut key)
                    .map_err(|e| corrupt(batch.base_offset(), e.to_string()))?;
                each(&Row {
                    offset: batch.base_offset() + i as i64,
                    change,
                    timestamp: batch.commit_timestamp(),
                    bytes: row_bytes,
                    key: &key,
                    datums: &row_datums,
                })?;
                datums = recycle(row_datums);
            }
        }
    }
    Ok(())
}

/// Survivors being gathered into one rewritten batch.
struct Run {
    columns: ColumnsBuilder,
    change_types: Vec<u8>,
    encoder: ArrowLogEncoder,
    encoded: Vec<u8>,
    schema_id: i16,
    first: i64,
    next: i64,
    timestamp: i64,
    bytes: usize,
    bytes_target: usize,
}

impl Run {
    fn new(table: &KvTable, batch_bytes_max: usize) -> Result<Self, ApiError> {
        let internal = |e: String| ApiError::new(ErrorCode::UnknownServerError, e);
        Ok(Self {
            columns: ColumnsBuilder::new(table.arrow_schema.clone())
                .map_err(|e| internal(e.to_string()))?,
            change_types: Vec::new(),
            encoder: ArrowLogEncoder::new(table.arrow_schema.clone(), table.compression)
                .map_err(|e| internal(e.to_string()))?,
            encoded: Vec::new(),
            schema_id: table.schema_id,
            first: 0,
            next: 0,
            timestamp: -1,
            bytes: 0,
            bytes_target: BATCH_BYTES_TARGET.min(batch_bytes_max / 2),
        })
    }

    /// Adds a surviving row, first writing out the run it cannot join.
    fn push(
        &mut self,
        rewrite: &mut SegmentRewrite<'_>,
        row: &Row<'_, '_>,
        change: ChangeType,
    ) -> Result<(), Halt> {
        if !self.change_types.is_empty()
            && (row.offset != self.next
                || self.change_types.len() >= BATCH_ROWS_MAX
                || self.bytes >= self.bytes_target)
        {
            self.flush(rewrite)?;
        }
        if self.change_types.is_empty() {
            self.first = row.offset;
            self.timestamp = row.timestamp;
            self.bytes = 0;
        }
        self.columns
            .append(row.datums)
            .map_err(|e| Halt::Skip(format!("a changelog row cannot be re-encoded: {e}")))?;
        self.change_types.push(change as u8);
        self.next = row.offset + 1;
        self.timestamp = self.timestamp.max(row.timestamp);
        self.bytes += row.bytes;
        Ok(())
    }

    /// Writes the run as one batch (nothing if empty).
    fn flush(&mut self, rewrite: &mut SegmentRewrite<'_>) -> Result<(), Halt> {
        if self.change_types.is_empty() {
            return Ok(());
        }
        let rows = self
            .columns
            .finish()
            .map_err(|e| Halt::Skip(format!("a changelog run cannot be re-encoded: {e}")))?;
        let header = BatchHeader {
            magic: LOG_MAGIC_V0,
            base_offset: self.first,
            commit_timestamp: self.timestamp,
            leader_epoch: NO_LEADER_EPOCH,
            schema_id: self.schema_id,
            attributes: 0,
            last_offset_delta: 0,
            writer_id: NO_WRITER_ID,
            batch_sequence: NO_BATCH_SEQUENCE,
            record_count: 0,
        };
        self.encoded.clear();
        self.encoder
            .encode(&rows, &header, Some(&self.change_types), &mut self.encoded)
            .map_err(|e| Halt::Skip(format!("a changelog run cannot be re-encoded: {e}")))?;
        self.change_types.clear();
        rewrite
            .append(&self.encoded)
            .map_err(|e| Halt::Skip(format!("the compacted changelog cannot be written: {e}")))
    }
}

/// Rewrites the plan's segments, oldest first, in groups of at most about
/// `log.segment.file-size` of output each.
fn rewrite_range(
    kv: &KvTablet,
    table: &KvTable,
    plan: &Plan,
    index: &KeyIndex,
    tombstone_deadline: i64,
    now_ms: i64,
    stop: &AtomicBool,
) -> Result<CompactionReport, Halt> {
    let bucket = kv.bucket();
    let log = kv.log();
    let storage = |e| Halt::Error(storage_error(bucket, e));
    let segments = &plan.segments;
    let group_bytes_max = log.config().segment_bytes_max;
    let mut run = Run::new(table, log.config().batch_bytes_max)?;
    let mut rewrite = log
        .begin_rewrite(segments[0].base_offset)
        .map_err(storage)?;
    let mut group_first = 0;
    let mut outcomes: Vec<RewriteOutcome> = Vec::new();
    let (mut rows_read, mut rows_kept) = (0u64, 0u64);
    let mut i = 0;
    while i < segments.len() {
        let seg = &segments[i];
        let dirty = i >= plan.dirty_from;
        let mark = rewrite.mark();
        let (mut read, mut kept) = (0u64, 0u64);
        for_each_row(kv, table, seg, stop, |row| {
            read += 1;
            let last = index.last.get(row.key).copied();
            let latest = match row.change {
                ChangeType::UpdateBefore => false,
                _ if dirty => last == Some(row.offset),
                _ => last.is_none(),
            };
            let change = match row.change {
                ChangeType::Delete if row.timestamp < tombstone_deadline => return Ok(()),
                ChangeType::Delete => ChangeType::Delete,
                _ => ChangeType::Insert,
            };
            if latest {
                kept += 1;
                run.push(&mut rewrite, row, change)?;
            }
            Ok(())
        })?;
        run.flush(&mut rewrite)?;
        if rewrite.len() > group_bytes_max && i > group_first {
            // This segment's survivors start the next group.
            rewrite.rewind(mark).map_err(storage)?;
            outcomes.push(rewrite.commit(seg.base_offset, now_ms).map_err(storage)?);
            rewrite = log.begin_rewrite(seg.base_offset).map_err(storage)?;
            group_first = i;
            continue;
        }
        rows_read += read;
        rows_kept += kept;
        i += 1;
    }
    let end_offset = segments[segments.len() - 1].end_offset;
    outcomes.push(rewrite.commit(end_offset, now_ms).map_err(storage)?);
    let report = CompactionReport {
        base_offset: segments[0].base_offset,
        end_offset,
        dirty_offset: segments[plan.dirty_from].base_offset,
        segments_before: segments.len(),
        segments_after: outcomes.len(),
        bytes_before: outcomes.iter().map(|o| o.bytes_before).sum(),
        bytes_after: outcomes.iter().map(|o| o.bytes_after).sum(),
        rows_read,
        rows_kept,
    };
    info!(
        %bucket,
        base_offset = report.base_offset,
        end_offset,
        dirty_offset = report.dirty_offset,
        segments_before = report.segments_before,
        segments_after = report.segments_after,
        bytes_before = report.bytes_before,
        bytes_after = report.bytes_after,
        rows_read,
        rows_kept,
        "compacted the changelog"
    );
    Ok(report)
}

/// Runs compactions off the request path: at most one in the background on
/// the whole server (on its own thread, started from maintenance when a
/// bucket is due), and at most one per bucket however it is started.
pub struct ChangelogCompactor {
    options: ChangelogCompactionOptions,
    /// Buckets being compacted.
    running: Mutex<HashSet<TableBucket>>,
    finished: Condvar,
    /// Buckets whose last compaction failed or was skipped: not before then.
    retry_at: Mutex<HashMap<TableBucket, i64>>,
    /// Whether the background thread is running.
    background: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Set at shutdown: compactions stop between segments.
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ChangelogCompactor {
    /// A compactor with `options`; it starts no thread until work is due.
    pub fn new(options: ChangelogCompactionOptions) -> Self {
        Self {
            options,
            running: Mutex::new(HashSet::new()),
            finished: Condvar::new(),
            retry_at: Mutex::new(HashMap::new()),
            background: AtomicBool::new(false),
            thread: Mutex::new(None),
            stop: AtomicBool::new(false),
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &ChangelogCompactionOptions {
        &self.options
    }

    /// From the periodic maintenance (cheap when nothing is due): unless a
    /// background compaction is running, starts one on its own thread for
    /// every bucket of `candidates` (tablet and `table.log.ttl`) that is
    /// due, one after another.
    pub fn run_due(self: &Arc<Self>, candidates: Vec<(Arc<KvTablet>, i64)>, now_ms: i64) {
        if self.stop.load(Ordering::Acquire) || self.background.load(Ordering::Acquire) {
            return;
        }
        let due: Vec<(Arc<KvTablet>, i64)> = {
            let retry_at = lock(&self.retry_at);
            candidates
                .into_iter()
                .filter(|(kv, ttl)| {
                    retry_at.get(&kv.bucket()).is_none_or(|&at| now_ms >= at)
                        && is_due(kv, *ttl, &self.options, now_ms)
                })
                .collect()
        };
        if due.is_empty() || self.background.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("fjord-changelog-compaction".to_owned())
            .spawn(move || {
                for (kv, ttl) in due {
                    if this.stop.load(Ordering::Acquire) {
                        break;
                    }
                    let now = crate::replica::now_ms();
                    if let Err(e) = this.compact_now(&kv, ttl, now) {
                        warn!(bucket = %kv.bucket(), error = %e, "changelog compaction failed; retried later");
                    }
                }
                this.background.store(false, Ordering::Release);
            });
        match spawned {
            Ok(handle) => {
                if let Some(old) = lock(&self.thread).replace(handle) {
                    // It cleared `background` before ending.
                    let _ = old.join();
                }
            }
            Err(e) => {
                self.background.store(false, Ordering::Release);
                warn!(error = %e, "cannot start the changelog compaction thread");
            }
        }
    }

    /// Compacts `kv`'s changelog now if due (blocking), after any running
    /// compaction of the same bucket. Failures and skips are logged and
    /// hold the bucket back from the background for [`RETRY_AFTER_MS`].
    pub fn compact_now(
        &self,
        kv: &KvTablet,
        ttl_ms: i64,
        now_ms: i64,
    ) -> Result<Compaction, ApiError> {
        let bucket = kv.bucket();
        {
            let mut running = lock(&self.running);
            while running.contains(&bucket) {
                running = self
                    .finished
                    .wait(running)
                    .unwrap_or_else(|p| p.into_inner());
            }
            running.insert(bucket);
        }
        let result = compact(kv, ttl_ms, &self.options, now_ms, &self.stop);
        lock(&self.running).remove(&bucket);
        self.finished.notify_all();
        let mut retry_at = lock(&self.retry_at);
        match &result {
            Ok(Compaction::Skipped(why)) => {
                warn!(%bucket, reason = %why, "changelog compaction skipped; retried later");
                retry_at.insert(bucket, now_ms.saturating_add(RETRY_AFTER_MS));
            }
            Err(_) => {
                retry_at.insert(bucket, now_ms.saturating_add(RETRY_AFTER_MS));
            }
            Ok(_) => {
                retry_at.remove(&bucket);
            }
        }
        result
    }

    /// Stops the background compaction (between segments; what it
    /// replaced stays replaced) and waits for its thread.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        let handle = lock(&self.thread).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}
