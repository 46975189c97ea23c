//! [`KvTablet`]: one bucket of a primary-key table — its KV store (current
//! rows), its log tablet (the changelog, which is also the write-ahead
//! log), and the pre-write buffer between them.
//!
//! ```text
//! put(KV batch)   under the write lock, per record:
//!                   old = pre-write buffer, else KV store
//!                   merge(old, new) → outcome → changelog rows (+I, -U/+U, -D)
//!                   stage the new value in the buffer (undo kept)
//!                 one changelog batch (same writer id and batch sequence)
//!                   → log tablet append (sequence checks, duplicates)
//!                 ok: the staged values become a pending batch ending at the
//!                     changelog offset after it; error or duplicate: undone
//! flush(hw)       pending batches below the log's high watermark become
//!                 committed: they move to the in-memory committed layer
//! spill           once the committed layer passes `kv.write-buffer-size`,
//!                 it is frozen and written to the KV store as one sorted
//!                 run (new tables, past the engine's memtable), with the
//!                 offset it stands for
//! open            replay the changelog from the store's applied offset
//!                 to the high watermark (a store ahead of the log — a power
//!                 cut under interval flushing — is rebuilt from the start)
//! ```
//!
//! Besides these layers, a bucket keeps a cache of the store's rows while
//! they fit its share of `kv.row-cache-size` (one budget for the server), so
//! a merge or point lookup reads memory and knows a missing key is absent;
//! a bucket that outgrows it reads the store.
//!
//! Reads go pending → committed (active, then frozen) → store for a merge,
//! and committed → store for readers (lookups, scans): committed rows only.
//! The PutKv handler flushes before an acks=all answer, so an acknowledged
//! write is visible to the next lookup. Nothing reaches the store before
//! its changelog is durable, so after any crash the store is a prefix of the
//! changelog and the replay brings it to exactly the acknowledged writes.
//!
//! Why the committed layer: the engine's memtable is a skip list whose
//! lookups and inserts, at a few hundred thousand keys, cost more than the
//! rest of an upsert together, and an ordered map in its place still spent
//! half of it comparing keys (`benches/kv_put.rs`). A hash table over the
//! batches in flight and a [`Run`] of packed committed changes, sorted once
//! when written out, keep the engine to its tables, bloom filters and block
//! cache. Ordered reads (prefix lookups, scans) write a large committed
//! layer out first, and scan a small one.

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::{Bytes, BytesMut};
use fjord_format::arrow_log::{decode_log_batch, ArrowLogEncoder, ChangeType};
use fjord_format::datum::Datum;
use fjord_format::kv::batch::{KvBatch, KvBatchBuilder};
use fjord_format::log_batch::{self, BatchHeader, LogBatches, LOG_MAGIC_V0, NO_LEADER_EPOCH};
use fjord_format::row::compacted::CompactedRowWriter;
use fjord_format::row::indexed::{IndexedRowDecoder, IndexedRowWriter};
use fjord_format::row::{FieldType, RowFormat};
use fjord_storage::kv::{AppliedState, KvSnapshot, KvStore, KvValue};
use fjord_storage::LogTablet;
use hashbrown::HashTable;
use tracing::{info, warn};

use super::columns::{read_row_into, recycle, ColumnsBuilder, NestedColumns};
use super::key::{KvKey, KvRow, INLINE_ROW_BYTES_MAX};
use super::merge::{AggMode, MergeError, MergeOutcome, RowMerger, RowSink};
use super::run::Run;
use super::table::KvTable;
use crate::error::{ApiError, ErrorCode};
use crate::replica::{storage_error, TableBucket};

/// Bytes of the schema id in front of every stored value (`ValueEncoder`:
/// `schemaId i16 LE ‖ row`).
pub const SCHEMA_ID_BYTES: usize = 2;

/// Most bytes of keys and values the pre-write buffer may hold (changes
/// appended to the changelog but not yet applied to the KV store) before a
/// PutKv is refused with STORAGE_BACKPRESSURE. They leave as soon as the
/// changelog is durable, so only a stalled disk or KV store fills it.
pub const PENDING_BYTES_MAX: usize = 256 << 20;

/// Tables in a store's first LSM level at which writes are refused with
/// STORAGE_BACKPRESSURE until compaction catches up (the engine itself
/// starts slowing writes well before).
pub const L0_TABLES_MAX: usize = 40;

/// Default most bytes of keys and values a bucket keeps in its committed
/// layer (as [`Run::reaches`] weighs them) before
/// writing them to the KV store as one sorted run
/// (`kv.write-buffer-size`): large runs keep the store's first level
/// small; the bound is the memory a bucket holds and the changelog a
/// restart replays.
pub const DEFAULT_WRITE_BUFFER_BYTES: usize = 32 << 20;

/// Most bytes of committed changes an ordered read (a prefix lookup)
/// scans in memory; above it the committed layer is written to the store
/// first. Bounds both the scan and how often reads force small runs.
const ORDERED_READ_SCAN_BYTES_MAX: usize = 1 << 20;

/// Bytes of changelog read per step of the replay at open.
const REPLAY_READ_BYTES: usize = 8 << 20;

/// Distinct (target columns, agg mode) mergers a tablet keeps; writers use
/// one or two each, so this only bounds a client cycling through many.
const MERGERS_MAX: usize = 16;

/// The result of a put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutOutcome {
    /// The changelog offset after the batch's changelog batch (of the
    /// original, for a duplicate): what the handler waits durable for, and
    /// the `log_end_offset` answered.
    pub end_offset: i64,
    /// A retry of a batch already in the changelog: nothing was applied.
    pub duplicate: bool,
}

/// Where the latest buffered change of a key sits: change `index` of the
/// put numbered `put` ([`WriteState::put_id`] then), in its pending batch
/// or, while that put runs, in [`WriteState::staged`]. Slots name their put
/// rather than its end offset, so a put that succeeds leaves its slots as
/// they are instead of looking each up again.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Slot {
    put: u64,
    index: u32,
}

/// The changes of one KV batch, appended to the changelog, waiting to be
/// applied to the store.
struct PendingBatch {
    /// The changelog offset after this batch's changelog batch.
    end: i64,
    /// The put that staged it: its slots in the buffer carry this id.
    put: u64,
    changes: Vec<(KvKey, Option<KvRow>)>,
    /// Each change's key hash (same index), as every layer files it.
    hashes: Vec<u64>,
    row_delta: i64,
    bytes: usize,
}

/// The pre-write buffer.
struct Pending {
    /// Per buffered key, the slot of its latest change. The table holds
    /// no key and no row, only where they sit (16 bytes a key against
    /// ~100 for both), so it stays small in cache and a flush clears it
    /// without a drop per slot; keys are hashed with `hasher` and compared
    /// through [`Changes`].
    latest: HashTable<Slot>,
    hasher: foldhash::fast::RandomState,
    batches: VecDeque<PendingBatch>,
    bytes: usize,
}

impl Pending {
    /// An empty buffer filing keys with `hasher` (the committed runs' too).
    fn new(hasher: foldhash::fast::RandomState) -> Self {
        Self {
            latest: HashTable::new(),
            hasher,
            batches: VecDeque::new(),
            bytes: 0,
        }
    }

    /// The hash `latest` files `key` under.
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }
}

/// The buffered changes that [`Slot`]s point into: the pending batches and
/// the changes of the put being staged.
#[derive(Clone, Copy)]
struct Changes<'a> {
    batches: &'a VecDeque<PendingBatch>,
    staged: &'a [(KvKey, Option<KvRow>)],
}

impl<'a> Changes<'a> {
    /// The change `slot` points at. A slot of a put with no pending batch
    /// is the put being staged (the buffer only ever holds slots of
    /// pending batches and of that put).
    fn get(self, slot: Slot) -> &'a (KvKey, Option<KvRow>) {
        let changes = match self.batches.binary_search_by_key(&slot.put, |b| b.put) {
            Ok(i) => &self.batches[i].changes[..],
            Err(_) => self.staged,
        };
        &changes[slot.index as usize]
    }

    /// The key of the change `slot` points at.
    fn key(self, slot: Slot) -> &'a [u8] {
        &self.get(slot).0
    }

    /// The slot of `key` (filed under `hash`) in `latest`.
    fn find(self, latest: &HashTable<Slot>, hash: u64, key: &[u8]) -> Option<Slot> {
        latest.find(hash, |s| self.key(*s) == key).copied()
    }

    /// Points `key` (filed under `hash`) at `slot`, returning the slot it
    /// replaced. `hasher` rehashes the other keys if the table grows.
    fn set(
        self,
        latest: &mut HashTable<Slot>,
        hasher: &foldhash::fast::RandomState,
        hash: u64,
        key: &[u8],
        slot: Slot,
    ) -> Option<Slot> {
        match latest.entry(
            hash,
            |s| self.key(*s) == key,
            |s| hasher.hash_one(self.key(*s)),
        ) {
            hashbrown::hash_table::Entry::Occupied(mut e) => {
                Some(std::mem::replace(e.get_mut(), slot))
            }
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert(slot);
                None
            }
        }
    }
}

/// What a merger is built for: target column positions (`None`: full
/// rows) and the agg mode.
type MergerKey = (Option<Vec<usize>>, AggMode);

/// What the put path owns under the write lock, reused batch after batch.
///
/// Everything from `table` down to `encoder` is derived from one schema
/// (the table's latest when it was built); a put that finds the tablet's
/// table swapped ([`KvTablet::set_table`]) rebuilds it first.
struct WriteState {
    /// The table view the schema-derived state below was built for.
    table: Arc<KvTable>,
    /// The INDEXED row layout of its latest schema, for INDEXED tables.
    indexed_layout: Option<IndexedRowDecoder>,
    pending: Pending,
    /// Live rows including pending batches.
    rows: i64,
    mergers: Vec<(MergerKey, RowMerger)>,
    columns: ColumnsBuilder,
    change_types: Vec<u8>,
    encoder: ArrowLogEncoder,
    changelog: Vec<u8>,
    /// The value of a merged row being written (`schemaId ‖ row`).
    merged: Vec<u8>,
    /// Numbers the puts: the current (or last) put's id, which its staged
    /// slots and pending batch carry.
    put_id: u64,
    /// Staged changes of the batch being put.
    staged: Vec<(KvKey, Option<KvRow>)>,
    /// Per staged change (same index), its key's hash and the slot of
    /// another put it replaced, to restore on failure.
    undo: Vec<(u64, Option<Slot>)>,
    /// Reused datum vectors (see [`recycle`]).
    old_datums: Vec<Datum<'static>>,
    new_datums: Vec<Datum<'static>>,
    merged_datums: Vec<Datum<'static>>,
}

/// Decodes a stored value (`schemaId ‖ row`) with the codec of its schema
/// id, padded with NULLs to the table's current schema (Fluss's
/// `PaddingRow`: columns are only ever added last).
fn decode_stored<'a>(
    table: &KvTable,
    value: &'a [u8],
    out: &mut Vec<Datum<'a>>,
) -> Result<(), String> {
    let (id, row) = match value {
        [a, b, row @ ..] => (i16::from_le_bytes([*a, *b]), row),
        _ => return Err(format!("a value of {} bytes has no schema id", value.len())),
    };
    let rows = if id == table.schema_id {
        &table.rows
    } else {
        &table
            .schema_by_id(id)
            .ok_or_else(|| format!("the value has schema id {id}, which the table does not have"))?
            .rows
    };
    rows.decode(row, out).map_err(|e| e.to_string())?;
    out.resize(table.arity(), Datum::Null);
    Ok(())
}

/// Writes a merged row into the stored-value buffer in the table's row
/// format, after the schema id.
enum StoredRowSink<'t, 'b> {
    Compacted {
        writer: CompactedRowWriter<'b>,
        fields: &'t [FieldType],
        next: usize,
    },
    Indexed(IndexedRowWriter<'t, 'b>),
}

impl<'t, 'b> StoredRowSink<'t, 'b> {
    fn new(
        table: &'t KvTable,
        layout: Option<&'t IndexedRowDecoder>,
        out: &'b mut Vec<u8>,
    ) -> Self {
        out.clear();
        out.extend_from_slice(&table.schema_id.to_le_bytes());
        match layout {
            Some(layout) => StoredRowSink::Indexed(IndexedRowWriter::new(layout, out)),
            None => {
                let fields = table.rows.fields();
                StoredRowSink::Compacted {
                    writer: CompactedRowWriter::new(out, fields.len()),
                    fields,
                    next: 0,
                }
            }
        }
    }

    fn finish(&self) -> Result<(), ApiError> {
        let done = match self {
            StoredRowSink::Compacted { writer, .. } => writer.finish().map(|_| ()),
            StoredRowSink::Indexed(writer) => writer.finish().map(|_| ()),
        };
        done.map_err(|e| {
            ApiError::new(
                ErrorCode::UnknownServerError,
                format!("the merged row is incomplete: {e}"),
            )
        })
    }
}

impl RowSink for StoredRowSink<'_, '_> {
    fn write(&mut self, value: &Datum<'_>) -> Result<(), MergeError> {
        let written = match self {
            StoredRowSink::Compacted {
                writer,
                fields,
                next,
            } => {
                let field = fields.get(*next).copied();
                *next += 1;
                match field {
                    Some(field) => writer.write_datum(field, value),
                    None => {
                        return Err(MergeError::Sink(ApiError::new(
                            ErrorCode::UnknownServerError,
                            "the merged row has more fields than the table",
                        )))
                    }
                }
            }
            StoredRowSink::Indexed(writer) => writer.write_datum(value),
        };
        written.map_err(|e| {
            MergeError::Sink(ApiError::new(
                ErrorCode::UnknownServerError,
                format!("cannot store the merged row: {e}"),
            ))
        })
    }
}

/// One bucket of a primary-key table. Share it as `Arc<KvTablet>`.
pub struct KvTablet {
    /// The table's current view; swapped on ALTER TABLE (read once per
    /// batch, never per record).
    table: RwLock<Arc<KvTable>>,
    bucket: TableBucket,
    log: Arc<LogTablet>,
    store: KvStore,
    write: Mutex<WriteState>,
    /// Committed changes not yet in the store.
    committed: RwLock<Committed>,
    /// Serializes flushes and spills, so changes reach the layers in
    /// order; holds the store's own applied state.
    flush: Mutex<AppliedState>,
    /// See [`DEFAULT_WRITE_BUFFER_BYTES`].
    write_buffer_bytes: usize,
    /// Shared by every tablet: see [`DEFAULT_ROW_CACHE_BYTES`].
    row_cache: Arc<RowCacheBudget>,
}

impl Drop for KvTablet {
    fn drop(&mut self) {
        let committed = self.committed.get_mut().unwrap_or_else(|p| p.into_inner());
        self.row_cache.give_back(committed.clean_bytes);
    }
}

/// The server-wide budget of rows the KV tablets keep in memory besides
/// their stores (`kv.row-cache-size`), shared by every tablet.
#[derive(Debug)]
pub struct RowCacheBudget {
    limit: usize,
    used: std::sync::atomic::AtomicUsize,
}

impl RowCacheBudget {
    /// A budget of `limit` bytes of keys and values (0 turns the cache off).
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Takes `bytes` from the budget; `false` (and nothing taken) when it
    /// would pass the limit.
    fn take(&self, bytes: usize) -> bool {
        use std::sync::atomic::Ordering;
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                let after = used.checked_add(bytes)?;
                (after <= self.limit).then_some(after)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.used
            .fetch_sub(bytes, std::sync::atomic::Ordering::AcqRel);
    }

    /// Bytes in use across tablets.
    pub fn used(&self) -> usize {
        self.used.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Keys of a lookup batch whose committed changes are prefetched together
/// before any is read ([`Run::prefetch_slot`], then [`Run::prefetch`]).
const LOOKUP_PREFETCH_KEYS: usize = 16;

/// How many records ahead a put or a flush prefetches the committed run's
/// slot (twice this) and change (this) of a key.
const PUT_PREFETCH_DISTANCE: usize = 8;

/// Bytes of superseded rows and deletes the row cache may hold beyond its
/// rows' own before it is packed again: at most about twice its counted
/// bytes (and a 16-byte slot a key) in memory, and a cache that only
/// grows (inserts of new keys) is never copied.
const CLEAN_SLACK_BYTES: usize = 1 << 20;

/// Default `kv.row-cache-size`: while a bucket's rows fit the shared budget
/// they are all kept in memory besides the store, so a merge or lookup
/// reads a hash map and a key it lacks is known absent without reading the
/// store (whose point reads cost several times the rest of an upsert,
/// `benches/kv_put.rs`); a bucket that outgrows its share reads the store.
pub const DEFAULT_ROW_CACHE_BYTES: usize = 512 << 20;

/// The committed layer: changes whose changelog is durable, newest in
/// `active`; `frozen` is being written to the store; `clean` holds rows the
/// store has, in memory. Its runs share one hasher (the tablet's), so a
/// key's [`Committed::hash`] serves every layer.
struct Committed {
    active: Run,
    /// The run being written, and the state it stands for.
    frozen: Option<(Arc<Run>, AppliedState)>,
    /// Rows of the store kept in memory (copies: no request buffer is held),
    /// packed as a run's changes are: a delete is a change that reads as
    /// absent. A map of a key and a row copy each (two allocations and a
    /// rehash reading every key back as it doubled) was two fifths of the
    /// server's CPU writing 5 M new keys (`scripts/bench-cdc-fluss.sh`).
    clean: Run,
    /// Key and value bytes of the rows `clean` holds, taken from the
    /// [`RowCacheBudget`]. Superseded rows and deletes packed in it are
    /// not counted; [`Committed::absorb`] packs it again before they
    /// outweigh the rows ([`CLEAN_SLACK_BYTES`]).
    clean_bytes: usize,
    /// Whether `clean` holds every row of the store, so a key it lacks is
    /// absent. Lost for good when the tablet's rows outgrow the budget.
    complete: bool,
    /// What the layers and the store hold together: the changelog offset
    /// applied up to and the live rows.
    state: AppliedState,
}

impl Committed {
    /// An empty committed layer standing for `state`, whose runs hash keys
    /// with `hasher`.
    fn new(hasher: foldhash::fast::RandomState, state: AppliedState) -> Self {
        Self {
            active: Run::with_hasher(0, hasher.clone()),
            frozen: None,
            clean: Run::with_hasher(0, hasher),
            clean_bytes: 0,
            complete: false,
            state,
        }
    }

    /// The hash every layer files `key` under.
    fn hash(&self, key: &[u8]) -> u64 {
        self.active.hash(key)
    }

    /// The committed value of `key` (whose [`Committed::hash`] is `hash`):
    /// `Some(None)` for a committed delete or a key a complete cache lacks,
    /// `None` when only the store knows.
    fn get_ref(&self, hash: u64, key: &[u8]) -> Option<Option<&[u8]>> {
        if let Some(v) = self.active.get_hashed(hash, key) {
            return Some(v);
        }
        if let Some(v) = self
            .frozen
            .as_ref()
            .and_then(|(f, _)| f.get_hashed(hash, key))
        {
            return Some(v);
        }
        if let Some(v) = self.clean.get_hashed(hash, key) {
            return Some(v);
        }
        self.complete.then_some(None)
    }

    /// [`Run::prefetch_slot`] of the key of `hash` in the active run and
    /// the cache.
    fn prefetch_slot(&self, hash: u64) {
        self.active.prefetch_slot_hashed(hash);
        self.clean.prefetch_slot_hashed(hash);
    }

    /// [`Run::prefetch`] of the key of `hash` in the active run and the
    /// cache.
    fn prefetch(&self, hash: u64) {
        self.active.prefetch_hashed(hash);
        self.clean.prefetch_hashed(hash);
    }

    /// Brings `clean` up to date with `run`, now in the store. Past the
    /// budget, the cache is dropped and the tablet reads the store from then
    /// on.
    fn absorb(&mut self, run: &Run, budget: &RowCacheBudget, bucket: TableBucket) {
        if !self.complete {
            return;
        }
        let mut grown = 0usize;
        let mut shrunk = 0usize;
        // A row counts its key and value: an update frees the old value
        // and its key and takes them again with the new value.
        // Each key hashed once, as it enters the prefetch window: key
        // `i`'s hash sits at `i % PUT_PREFETCH_DISTANCE` until key
        // `i + PUT_PREFETCH_DISTANCE` takes its place.
        let mut hashes = [0u64; PUT_PREFETCH_DISTANCE];
        let mut ahead = run.iter();
        for (hash, (key, _)) in hashes.iter_mut().zip(ahead.by_ref()) {
            *hash = self.clean.hash(key);
            self.clean.prefetch_slot_hashed(*hash);
        }
        for (i, (key, value)) in run.iter().enumerate() {
            let hash = hashes[i % PUT_PREFETCH_DISTANCE];
            if let Some((next, _)) = ahead.next() {
                let next = self.clean.hash(next);
                hashes[i % PUT_PREFETCH_DISTANCE] = next;
                self.clean.prefetch_slot_hashed(next);
            }
            if let Some(v) = value {
                grown += key.len() + v.len();
            }
            if let Some(Some(old)) = self.clean.insert_hashed(hash, key, value) {
                shrunk += key.len() + old;
            }
        }
        if grown >= shrunk {
            let more = grown - shrunk;
            if budget.take(more) {
                self.clean_bytes += more;
            } else {
                tracing::info!(
                    %bucket,
                    rows = self.clean.len(),
                    bytes = self.clean_bytes + more,
                    "the bucket's rows outgrow the row cache (kv.row-cache-size); reading them from the KV store from now on"
                );
                budget.give_back(self.clean_bytes);
                self.clean = Run::with_hasher(0, self.clean.hasher());
                self.clean_bytes = 0;
                self.complete = false;
            }
        } else {
            let less = shrunk - grown;
            budget.give_back(less);
            self.clean_bytes -= less;
        }
        if self.clean.packed_bytes() > self.clean_bytes.saturating_mul(2) + CLEAN_SLACK_BYTES {
            self.clean = packed_again(&self.clean);
        }
    }

    /// Adds one change (of `key`, whose [`Committed::hash`] is `hash`) to
    /// the active run.
    fn insert(&mut self, hash: u64, key: &[u8], value: Option<&[u8]>) {
        self.active.insert_hashed(hash, key, value);
    }
}

/// The rows of `clean` packed into a new run, without the superseded rows
/// and the deletes.
fn packed_again(clean: &Run) -> Run {
    let mut packed = Run::with_hasher(clean.len(), clean.hasher());
    for (key, value) in clean.iter() {
        if let Some(value) = value {
            packed.insert(key, Some(value));
        }
    }
    packed
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}

fn corrupt_record(bucket: TableBucket, what: String) -> ApiError {
    ApiError::new(
        ErrorCode::CorruptRecordException,
        format!("{bucket}: {what}; nothing of the batch was written"),
    )
}

/// The part of [`WriteState`] derived from the table's latest schema.
struct SchemaState {
    encoder: ArrowLogEncoder,
    columns: ColumnsBuilder,
    indexed_layout: Option<IndexedRowDecoder>,
}

impl SchemaState {
    fn new(table: &KvTable) -> Result<Self, ApiError> {
        let encoder = ArrowLogEncoder::new(table.arrow_schema.clone(), table.compression)
            .map_err(|e| ApiError::new(ErrorCode::UnknownServerError, e.to_string()))?;
        let columns = ColumnsBuilder::new(table.arrow_schema.clone())
            .map_err(|e| ApiError::new(ErrorCode::InvalidTableException, e.to_string()))?;
        let indexed_layout =
            match table.rows.format() {
                RowFormat::Indexed => {
                    let row_type: Vec<_> = table
                        .schema
                        .columns()
                        .iter()
                        .map(|c| c.data_type.clone())
                        .collect();
                    Some(IndexedRowDecoder::new(&row_type).map_err(|e| {
                        ApiError::new(ErrorCode::InvalidTableException, e.to_string())
                    })?)
                }
                RowFormat::Compacted => None,
            };
        Ok(Self {
            encoder,
            columns,
            indexed_layout,
        })
    }
}

impl WriteState {
    /// Rebuilds the schema-derived state for `table` (a swapped-in view):
    /// encoder, column builders, row layout; cached mergers are dropped
    /// (they were built for the old schema). Nothing is pending in the
    /// builders between puts, so nothing is lost.
    fn switch_to(&mut self, table: Arc<KvTable>) -> Result<(), ApiError> {
        let state = SchemaState::new(&table)?;
        self.encoder = state.encoder;
        self.columns = state.columns;
        self.indexed_layout = state.indexed_layout;
        self.mergers.clear();
        self.table = table;
        Ok(())
    }
}

impl KvTablet {
    /// Opens the tablet of `bucket` over its changelog `log` and its store,
    /// bringing the store up to the changelog's high watermark (blocking:
    /// call it from a blocking context).
    pub fn open(
        table: Arc<KvTable>,
        bucket: TableBucket,
        log: Arc<LogTablet>,
        store: KvStore,
        write_buffer_bytes: usize,
        row_cache: Arc<RowCacheBudget>,
    ) -> Result<Self, ApiError> {
        let storage = |e| storage_error(bucket, e);
        let schema_state = SchemaState::new(&table)?;
        let mut applied = store.applied().map_err(storage)?;
        let high_watermark = log.high_watermark();
        if applied.offset > high_watermark || applied.offset < log.log_start_offset() {
            warn!(
                %bucket,
                applied = applied.offset,
                log_start = log.log_start_offset(),
                high_watermark,
                "the KV store does not match its changelog; rebuilding it from the changelog"
            );
            applied = AppliedState {
                offset: log.log_start_offset(),
                row_count: 0,
            };
            store.clear(applied).map_err(storage)?;
        }
        // One seed for the buffer and every run: a key is hashed once per
        // write and per lookup, not once per layer it is looked up in.
        let hasher = foldhash::fast::RandomState::default();
        let tablet = Self {
            write: Mutex::new(WriteState {
                table: Arc::clone(&table),
                indexed_layout: schema_state.indexed_layout,
                pending: Pending::new(hasher.clone()),
                rows: applied.row_count,
                mergers: Vec::new(),
                columns: schema_state.columns,
                change_types: Vec::new(),
                encoder: schema_state.encoder,
                changelog: Vec::new(),
                merged: Vec::new(),
                put_id: 0,
                staged: Vec::new(),
                undo: Vec::new(),
                old_datums: Vec::new(),
                new_datums: Vec::new(),
                merged_datums: Vec::new(),
            }),
            committed: RwLock::new(Committed::new(hasher, applied)),
            flush: Mutex::new(applied),
            write_buffer_bytes,
            row_cache,
            table: RwLock::new(table),
            bucket,
            log,
            store,
        };
        tablet.load_row_cache()?;
        if applied.offset < high_watermark {
            let replayed = tablet.replay(applied, high_watermark)?;
            info!(
                %bucket,
                from = applied.offset,
                to = replayed.offset,
                rows = replayed.row_count,
                "replayed the changelog into the KV store"
            );
            lock(&tablet.write).rows = replayed.row_count;
        }
        Ok(tablet)
    }

    /// Reads the store's rows into the row cache, if they fit the budget
    /// (at open, before any write): the cache is then complete. A store too
    /// large leaves the cache off for this tablet.
    fn load_row_cache(&self) -> Result<(), ApiError> {
        let mut committed = write(&self.committed);
        let mut complete = true;
        let mut bytes = 0usize;
        self.store
            .snapshot()
            .scan_from(None, |key, value| {
                let size = key.len() + value.len();
                if !self.row_cache.take(size) {
                    complete = false;
                    return false;
                }
                bytes += size;
                committed.clean.insert(key, Some(value));
                true
            })
            .map_err(|e| storage_error(self.bucket, e))?;
        if complete {
            committed.clean_bytes = bytes;
            committed.complete = true;
        } else {
            self.row_cache.give_back(bytes);
            committed.clean = Run::with_hasher(0, committed.clean.hasher());
        }
        Ok(())
    }

    /// The bucket this tablet is.
    pub fn bucket(&self) -> TableBucket {
        self.bucket
    }

    /// A point-in-time view of every committed row and the applied state
    /// it stands for: the committed layer is written to the store first
    /// (blocking), so the view is the store's.
    pub fn snapshot(&self) -> Result<(KvSnapshot, AppliedState), ApiError> {
        let mut store_state = lock(&self.flush);
        self.spill_locked(&mut store_state)?;
        Ok((self.store.snapshot(), *store_state))
    }

    /// The committed values of `keys` if memory knows them all (the
    /// committed layer and a complete row cache): no store read, so a
    /// lookup can be answered without leaving the network task; `None` when
    /// some key needs the store.
    pub fn get_all_in_memory(&self, keys: &[Bytes]) -> Option<Vec<Option<Bytes>>> {
        let committed = read(&self.committed);
        // Rows are copied into one buffer for the batch and split off it
        // (one allocation per batch, not one per key).
        let mut arena = BytesMut::new();
        let mut values = Vec::with_capacity(keys.len());
        let mut hashes = [0u64; LOOKUP_PREFETCH_KEYS];
        for group in keys.chunks(LOOKUP_PREFETCH_KEYS) {
            // The misses on each key's slot, then on its packed change,
            // would otherwise be waited for one at a time.
            for (hash, key) in hashes.iter_mut().zip(group) {
                *hash = committed.hash(key);
                committed.prefetch_slot(*hash);
            }
            for &hash in &hashes[..group.len()] {
                committed.prefetch(hash);
            }
            for (&hash, key) in hashes.iter().zip(group) {
                let value = committed.get_ref(hash, key)?.map(|v| {
                    if arena.capacity() < v.len() {
                        arena.reserve((keys.len().min(1024) * INLINE_ROW_BYTES_MAX).max(v.len()));
                    }
                    arena.extend_from_slice(v);
                    arena.split().freeze()
                });
                values.push(value);
            }
        }
        Some(values)
    }

    /// The committed value of `key` (`schemaId ‖ row`), or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, ApiError> {
        {
            let committed = read(&self.committed);
            if let Some(value) = committed.get_ref(committed.hash(key), key) {
                return Ok(value.map(Bytes::copy_from_slice));
            }
        }
        self.store
            .get(key)
            .map(|v| v.map(|v| Bytes::copy_from_slice(&v)))
            .map_err(|e| storage_error(self.bucket, e))
    }

    /// Every committed row whose key starts with `prefix`, in key order,
    /// calling `each` with its value until it returns `false` (blocking).
    pub fn scan_prefix(
        &self,
        prefix: &[u8],
        mut each: impl FnMut(&[u8]) -> bool,
    ) -> Result<(), ApiError> {
        // The committed changes under the prefix, in key order, then merged
        // with the store's rows: a large committed layer is written to the
        // store first, a small one is scanned.
        let overlay: Vec<(KvKey, Option<KvRow>)> = {
            let mut store_state = lock(&self.flush);
            if read(&self.committed).active.live_bytes() > ORDERED_READ_SCAN_BYTES_MAX {
                self.spill_locked(&mut store_state)?;
            }
            let committed = read(&self.committed);
            // A frozen run (left by a failed write) under the active one:
            // the active change of a key wins.
            let mut overlay: Vec<(KvKey, Option<KvRow>)> = committed
                .active
                .iter()
                .chain(committed.frozen.iter().flat_map(|(f, _)| f.iter()))
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (KvKey::copy_from_slice(k), v.map(KvRow::copy_from_slice)))
                .collect();
            // Stable: for equal keys the active entry, first, is kept.
            overlay.sort_by(|a, b| a.0.cmp(&b.0));
            overlay.dedup_by(|later, earlier| later.0 == earlier.0);
            overlay
        };
        let mut pending = overlay.iter().peekable();
        let mut go_on = true;
        let mut failed = None;
        self.store
            .scan_prefix(prefix, |key, value| {
                while let Some((k, _)) = pending.peek() {
                    if &k[..] > key {
                        break;
                    }
                    let (k, v) = pending.next().expect("peeked");
                    if let Some(v) = v {
                        if !each(v) {
                            go_on = false;
                            return false;
                        }
                    }
                    if &k[..] == key {
                        return true;
                    }
                }
                if !each(value) {
                    go_on = false;
                    return false;
                }
                true
            })
            .map_err(|e| failed = Some(storage_error(self.bucket, e)))
            .ok();
        if let Some(e) = failed {
            return Err(e);
        }
        if go_on {
            for v in pending.filter_map(|(_, v)| v.as_ref()) {
                if !each(v) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The table this tablet belongs to, at its current schema.
    pub fn table(&self) -> Arc<KvTable> {
        Arc::clone(&read(&self.table))
    }

    /// Swaps in the table's view at a new schema (ALTER TABLE). The next
    /// put rebuilds its schema-derived state from it and writes the
    /// changelog at its schema id; batches and stored values of every
    /// earlier schema id stay readable (the view keeps their codecs).
    pub fn set_table(&self, table: Arc<KvTable>) {
        *write(&self.table) = table;
    }

    /// The bucket's changelog.
    pub fn log(&self) -> &Arc<LogTablet> {
        &self.log
    }

    /// The bucket's KV store (committed rows: what readers see).
    pub fn store(&self) -> &KvStore {
        &self.store
    }

    /// What the committed rows stand for: the changelog offset applied up
    /// to and the live rows.
    pub fn applied(&self) -> AppliedState {
        read(&self.committed).state
    }

    /// How close the tablet is to refusing writes, 0 (none) to 1 (refusing):
    /// the larger of the pre-write buffer's fill and the store's first-level
    /// table count against their maxima.
    pub fn pressure(&self) -> f32 {
        let pending = lock(&self.write).pending.bytes as f32 / PENDING_BYTES_MAX as f32;
        let l0 = self.store.l0_table_count() as f32 / L0_TABLES_MAX as f32;
        pending.max(l0).min(1.0)
    }

    /// Merges one KV batch into the bucket and appends its changelog batch
    /// (blocking: it writes to the log). `target_columns` empty means full
    /// rows. Nothing of a refused batch is written anywhere.
    pub fn put(
        &self,
        records: &[u8],
        target_columns: &[i32],
        agg_mode: AggMode,
        now_ms: i64,
    ) -> Result<PutOutcome, ApiError> {
        let bucket = self.bucket;
        let batch = KvBatch::validate(records).map_err(|e| {
            ApiError::new(
                ErrorCode::CorruptMessage,
                format!("{bucket}: the KV batch is corrupt: {e}"),
            )
        })?;
        let mut guard = lock(&self.write);
        let st = &mut *guard;
        let current = self.table();
        if !Arc::ptr_eq(&st.table, &current) {
            st.switch_to(current)?;
        }
        let table = Arc::clone(&st.table);
        let table = &*table;
        // As Fluss's KvTablet.validateSchemaId: any schema id the table has
        // had (Fjord's ids start at 1); rows of an older one are read with
        // its schema and padded with NULLs to the latest.
        if batch.schema_id() > table.schema_id || batch.schema_id() < 1 {
            return Err(ApiError::new(
                ErrorCode::SchemaNotExist,
                format!(
                    "{bucket}: Invalid schema id: {}, latest schema id: {}",
                    batch.schema_id(),
                    table.schema_id
                ),
            ));
        }
        let targets = target_positions(table, target_columns)?;
        if st.pending.bytes >= PENDING_BYTES_MAX {
            return Err(ApiError::new(
                ErrorCode::StorageBackpressureException,
                format!(
                    "{bucket}: {} bytes of changes wait for the KV store; retry later",
                    st.pending.bytes
                ),
            ));
        }
        let merger = merger_index(st, table, targets, agg_mode)?;
        st.put_id += 1;
        let mut arena = BytesMut::with_capacity(
            records.len() + batch.record_count().max(0) as usize * SCHEMA_ID_BYTES,
        );
        st.staged.clear();
        // Taken by the last pending batch: sized once, not grown by doubling.
        st.staged.reserve(batch.record_count().max(0) as usize);
        st.undo.clear();
        st.change_types.clear();
        let mut row_delta = 0i64;
        let merged = self.merge_records(st, merger, &batch, &mut arena, &mut row_delta);
        if let Err(e) = merged {
            st.columns.clear();
            undo(st);
            return Err(e);
        }

        let header = BatchHeader {
            magic: LOG_MAGIC_V0,
            base_offset: 0,
            commit_timestamp: 0,
            leader_epoch: NO_LEADER_EPOCH,
            schema_id: table.schema_id,
            attributes: 0,
            last_offset_delta: 0,
            writer_id: batch.writer_id(),
            batch_sequence: batch.batch_sequence(),
            record_count: 0,
        };
        st.changelog.clear();
        let encoded = if st.columns.is_empty() {
            // Nothing changed: a header-only batch still takes an offset and
            // the writer's sequence, so the next batch is in order.
            log_batch::write_batch(&mut st.changelog, &header, &[], &[])
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else {
            match st.columns.finish() {
                Ok(rows) => st
                    .encoder
                    .encode(&rows, &header, Some(&st.change_types), &mut st.changelog)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        };
        if let Err(e) = encoded {
            undo(st);
            return Err(ApiError::new(
                ErrorCode::UnknownServerError,
                format!("{bucket}: cannot encode the changelog batch: {e}"),
            ));
        }
        let appended = match self.log.append(&st.changelog, now_ms) {
            Ok(info) => info,
            Err(e) => {
                undo(st);
                return Err(storage_error(bucket, e));
            }
        };
        if appended.duplicate {
            undo(st);
            return Ok(PutOutcome {
                end_offset: appended.last_offset + 1,
                duplicate: true,
            });
        }
        let end = appended.last_offset + 1;
        let bytes: usize = st
            .staged
            .iter()
            .map(|(key, value)| key.len() + value.as_ref().map_or(0, |v| v.len()))
            .sum();
        st.pending.bytes += bytes;
        st.rows += row_delta;
        st.pending.batches.push_back(PendingBatch {
            end,
            put: st.put_id,
            changes: std::mem::take(&mut st.staged),
            hashes: st.undo.iter().map(|&(hash, _)| hash).collect(),
            row_delta,
            bytes,
        });
        st.undo.clear();
        Ok(PutOutcome {
            end_offset: end,
            duplicate: false,
        })
    }

    /// Inserts a key-only row for each of `keys` (the primary key set, every
    /// other column NULL; partition key columns from `partition_values`, as
    /// (column position, value)), as Fluss's lookup with
    /// `insert_if_not_exists` does: a partial update whose targets are the
    /// primary key, so a key that exists by now is left as it is. Blocking,
    /// like [`KvTablet::put`]; the caller makes it durable and flushes.
    pub fn insert_keys(
        &self,
        keys: &[&[u8]],
        partition_values: &[(usize, &str)],
        now_ms: i64,
    ) -> Result<PutOutcome, ApiError> {
        let table = self.table();
        let table = &*table;
        let arity = table.schema.columns().len();
        let mut batch = KvBatchBuilder::start(Vec::new(), table.schema_id, -1, -1);
        let mut key_datums = Vec::new();
        let mut row: Vec<Datum<'_>> = Vec::with_capacity(arity);
        let mut encoded = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            table.key_check.decode(key, &mut key_datums).map_err(|e| {
                ApiError::new(
                    ErrorCode::CorruptMessage,
                    format!("key {i} is not an encoded primary key of the table: {e}"),
                )
            })?;
            row.clear();
            row.resize(arity, Datum::Null);
            for (&position, datum) in table.key_positions.iter().zip(&key_datums) {
                row[position] = *datum;
            }
            for &(position, value) in partition_values {
                row[position] = Datum::String(value);
            }
            encoded.clear();
            table.rows.encode(&row, &mut encoded).map_err(|e| {
                ApiError::new(
                    ErrorCode::InvalidTargetColumn,
                    format!("a key-only row cannot be written to this table: {e}"),
                )
            })?;
            batch
                .append_upsert(key, &encoded)
                .map_err(|e| ApiError::new(ErrorCode::UnknownServerError, e.to_string()))?;
        }
        let targets: Vec<i32> = table
            .schema
            .primary_key()
            .unwrap_or_default()
            .iter()
            .filter_map(|name| table.schema.column_index(name))
            .map(|i| i as i32)
            .collect();
        self.put(batch.finish(), &targets, AggMode::Default, now_ms)
    }

    /// The per-record loop of [`KvTablet::put`]: merge, changelog rows,
    /// staged values.
    fn merge_records(
        &self,
        st: &mut WriteState,
        merger: usize,
        batch: &KvBatch<'_>,
        arena: &mut BytesMut,
        row_delta: &mut i64,
    ) -> Result<(), ApiError> {
        let bucket = self.bucket;
        let table = Arc::clone(&st.table);
        let table = &*table;
        let arity = table.arity();
        // The codec of the batch's rows: its schema id's (checked by `put`).
        let batch_schema_id = batch.schema_id();
        let batch_rows = &table
            .schema_by_id(batch_schema_id)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::SchemaNotExist,
                    format!("{bucket}: the table has no schema {batch_schema_id}"),
                )
            })?
            .rows;
        let counts_rows = table.counts_rows();
        let full_image = counts_rows;
        let (old_for_upsert, old_for_delete) = {
            let m = &st.mergers[merger].1;
            (
                m.needs_old_value_for_upsert(),
                m.needs_old_value_for_delete(),
            )
        };
        // Read for the whole batch: `flush`, the one writer of the layer
        // besides a spill, waits for the write lock held here anyway.
        let committed = read(&self.committed);
        // The committed run's slot of the key 2 × PUT_PREFETCH_DISTANCE
        // records ahead, and the change of the key PUT_PREFETCH_DISTANCE
        // ahead, are loaded while this record is merged (a run at hundreds
        // of thousands of keys misses the cache on both).
        let prefetching = old_for_upsert || old_for_delete;
        // Each key is hashed once, as it enters the far window: record
        // `i`'s hash sits at `i % AHEAD` until record `i + AHEAD` takes it.
        const AHEAD: usize = 2 * PUT_PREFETCH_DISTANCE;
        let mut hashes = [0u64; AHEAD];
        let mut far = batch.records().skip(AHEAD);
        for (i, record) in batch.records().take(AHEAD).enumerate() {
            hashes[i] = st.pending.hash(record.key);
            if prefetching {
                committed.prefetch_slot(hashes[i]);
            }
        }
        if prefetching {
            for &hash in &hashes[..PUT_PREFETCH_DISTANCE] {
                committed.prefetch(hash);
            }
        }
        for (index, record) in batch.records().enumerate() {
            let hash = hashes[index % AHEAD];
            if let Some(ahead) = far.next() {
                let ahead = st.pending.hash(ahead.key);
                hashes[index % AHEAD] = ahead;
                if prefetching {
                    committed.prefetch_slot(ahead);
                }
            }
            if prefetching {
                committed.prefetch(hashes[(index + PUT_PREFETCH_DISTANCE) % AHEAD]);
            }
            table.key_check.validate_key(record.key).map_err(|e| {
                corrupt_record(
                    bucket,
                    format!("record {index}: the key is not a primary key of this table: {e}"),
                )
            })?;
            let needs_old = match record.row {
                Some(_) => old_for_upsert,
                None => old_for_delete,
            };
            let old = if needs_old {
                self.old_value(&committed, &st.pending, &st.staged, hash, record.key)?
            } else {
                None
            };
            let result = (|| -> Result<Option<(bool, bool)>, ApiError> {
                // Reused across records; lost only on the error path.
                let mut old_datums = recycle(std::mem::take(&mut st.old_datums));
                let mut new_datums = recycle(std::mem::take(&mut st.new_datums));
                let mut merged_datums = recycle(std::mem::take(&mut st.merged_datums));
                if let Some(old) = &old {
                    decode_stored(table, &old[..], &mut old_datums).map_err(|e| {
                        ApiError::new(
                            ErrorCode::KvStorageException,
                            format!("{bucket}: a stored row does not decode: {e}"),
                        )
                    })?;
                }
                let old_row = old.as_ref().map(|_| &old_datums[..]);
                let mut sink =
                    StoredRowSink::new(table, st.indexed_layout.as_ref(), &mut st.merged);
                let outcome = match record.row {
                    Some(row) => {
                        batch_rows.decode(row, &mut new_datums).map_err(|e| {
                            corrupt_record(
                                bucket,
                                format!("record {index}: the row does not match the table's schema {batch_schema_id}: {e}"),
                            )
                        })?;
                        // A row of an older schema reads as NULL in the
                        // columns added since (Fluss's PaddingRow).
                        new_datums.resize(arity, Datum::Null);
                        st.mergers[merger].1.upsert(old_row, &new_datums, &mut sink)
                    }
                    None => st.mergers[merger].1.delete(old_row, &mut sink),
                }
                .map_err(|e| prefix_error(bucket, e.into()))?;
                // Whether the key now holds the new row exactly as
                // received, as Fluss stores it (with the batch's schema id).
                let as_received = st.mergers[merger].1.stores_new_row(outcome);
                let new_value: Option<&[u8]> = match outcome {
                    MergeOutcome::Insert | MergeOutcome::Update => {
                        if as_received {
                            None
                        } else {
                            sink.finish()?;
                            table
                                .rows
                                .decode(&st.merged[SCHEMA_ID_BYTES..], &mut merged_datums)
                                .map_err(|e| {
                                    ApiError::new(
                                        ErrorCode::UnknownServerError,
                                        format!("{bucket}: the merged row does not decode: {e}"),
                                    )
                                })?;
                            Some(&st.merged)
                        }
                    }
                    MergeOutcome::Delete | MergeOutcome::NoChange => None,
                };
                let new_row: &[Datum<'_>] = if as_received {
                    &new_datums
                } else {
                    &merged_datums
                };
                let append = |st_columns: &mut ColumnsBuilder,
                              types: &mut Vec<u8>,
                              change: ChangeType,
                              row: &[Datum<'_>]| {
                    types.push(change as u8);
                    st_columns.append(row).map_err(|e| {
                        ApiError::new(
                            ErrorCode::UnknownServerError,
                            format!("{bucket}: cannot add a row to the changelog: {e}"),
                        )
                    })
                };
                let staged_value = match outcome {
                    MergeOutcome::NoChange => None,
                    MergeOutcome::Insert => {
                        append(
                            &mut st.columns,
                            &mut st.change_types,
                            ChangeType::Insert,
                            new_row,
                        )?;
                        *row_delta += 1;
                        Some(true)
                    }
                    MergeOutcome::Update => {
                        if full_image && old.is_some() {
                            append(
                                &mut st.columns,
                                &mut st.change_types,
                                ChangeType::UpdateBefore,
                                &old_datums,
                            )?;
                        }
                        append(
                            &mut st.columns,
                            &mut st.change_types,
                            ChangeType::UpdateAfter,
                            new_row,
                        )?;
                        Some(true)
                    }
                    MergeOutcome::Delete => {
                        append(
                            &mut st.columns,
                            &mut st.change_types,
                            ChangeType::Delete,
                            &old_datums,
                        )?;
                        *row_delta -= 1;
                        Some(false)
                    }
                };
                let _ = new_value;
                st.old_datums = recycle(old_datums);
                st.new_datums = recycle(new_datums);
                st.merged_datums = recycle(merged_datums);
                Ok(staged_value.map(|puts| (puts, as_received)))
            })();
            let Some((puts, as_received)) = result? else {
                continue;
            };
            let key = KvKey::new(record.key, arena);
            let value = if puts {
                Some(if as_received {
                    // Stored as received, with the schema id it was
                    // written with; readers decode it with that schema.
                    KvRow::new(
                        &batch_schema_id.to_le_bytes(),
                        record.row.unwrap_or_default(),
                        arena,
                    )
                } else {
                    KvRow::new(&[], &st.merged, arena)
                })
            } else {
                None
            };
            stage(st, hash, key, value);
        }
        if !counts_rows {
            *row_delta = 0;
        }
        Ok(())
    }

    /// The value the key has now: the buffer's latest (staged or pending),
    /// else the committed one.
    fn old_value<'c>(
        &self,
        committed: &'c Committed,
        pending: &Pending,
        staged: &[(KvKey, Option<KvRow>)],
        hash: u64,
        key: &[u8],
    ) -> Result<Option<OldValue<'c>>, ApiError> {
        let changes = Changes {
            batches: &pending.batches,
            staged,
        };
        if let Some(slot) = changes.find(&pending.latest, hash, key) {
            return Ok(changes.get(slot).1.clone().map(OldValue::Buffered));
        }
        if let Some(value) = committed.get_ref(hash, key) {
            return Ok(value.map(OldValue::Committed));
        }
        self.store
            .get(key)
            .map(|v| v.map(OldValue::Stored))
            .map_err(|e| storage_error(self.bucket, e))
    }

    /// Commits every pending batch that ends at or below `upto` (the
    /// changelog's high watermark): its changes move to the committed layer,
    /// which is written to the store once it passes the write buffer size
    /// (blocking then).
    pub fn flush(&self, upto: i64) -> Result<(), ApiError> {
        let mut store_state = lock(&self.flush);
        let full = {
            // Both locks at once (in the one order used everywhere: write,
            // then committed), so a merge never sees a change in neither
            // layer, and the changes move instead of being copied.
            let mut st = lock(&self.write);
            let Pending {
                latest,
                batches,
                bytes,
                ..
            } = &mut st.pending;
            let ready = batches.iter().take_while(|b| b.end <= upto).count();
            if ready == 0 {
                return Ok(());
            }
            let mut committed = write(&self.committed);
            if ready == batches.len() {
                // The usual case: every pending batch commits, so every
                // slot goes (slots need no drop: this clears control bytes).
                latest.clear();
            } else {
                // Each slot still pointing into a committing batch goes; a
                // key a later batch restaged keeps its slot. Slots are
                // matched by what they point at, so no key is read.
                for batch in batches.iter().take(ready) {
                    for (index, &hash) in batch.hashes.iter().enumerate() {
                        let mine = Slot {
                            put: batch.put,
                            index: index as u32,
                        };
                        if let Ok(slot) = latest.find_entry(hash, |s| *s == mine) {
                            slot.remove();
                        }
                    }
                }
            }
            for batch in batches.drain(..ready) {
                let (changes, hashes) = (&batch.changes, &batch.hashes);
                let run = &mut committed.active;
                for &hash in hashes.iter().take(2 * PUT_PREFETCH_DISTANCE) {
                    run.prefetch_slot_hashed(hash);
                }
                for (i, ((key, value), &hash)) in changes.iter().zip(hashes).enumerate() {
                    // As in `merge_records`: the slot two strides ahead,
                    // the change (an update's) one stride ahead.
                    if let Some(&ahead) = hashes.get(i + 2 * PUT_PREFETCH_DISTANCE) {
                        run.prefetch_slot_hashed(ahead);
                    }
                    if let Some(&ahead) = hashes.get(i + PUT_PREFETCH_DISTANCE) {
                        run.prefetch_hashed(ahead);
                    }
                    run.insert_hashed(hash, key, value.as_deref());
                }
                *bytes -= batch.bytes;
                committed.state = AppliedState {
                    offset: batch.end,
                    row_count: committed.state.row_count + batch.row_delta,
                };
            }
            committed.active.reaches(self.write_buffer_bytes)
        };
        if full {
            self.spill_locked(&mut store_state)?;
        }
        Ok(())
    }

    /// Writes the committed layer to the store (blocking), e.g. before a
    /// clean shutdown, so a restart replays nothing.
    pub fn spill(&self) -> Result<(), ApiError> {
        self.spill_locked(&mut lock(&self.flush))
    }

    /// Freezes the active run and writes it to the store as one sorted run
    /// with the state it stands for; readers see the frozen run until the
    /// store has it. A run whose write failed stays frozen and is written
    /// first next time. `store_state` is the flush lock's.
    fn spill_locked(&self, store_state: &mut AppliedState) -> Result<(), ApiError> {
        let (run, target, retry) = {
            let mut committed = write(&self.committed);
            match &committed.frozen {
                // An earlier write failed: retry it first; the newer changes
                // stay active until it is in.
                Some((frozen, state)) => (Arc::clone(frozen), *state, true),
                None if committed.active.is_empty() && committed.state == *store_state => {
                    return Ok(())
                }
                None => {
                    // The next run is sized as this one: growing it from
                    // empty rehashed it a dozen times per spill.
                    let sized = Run::with_hasher(committed.active.len(), committed.active.hasher());
                    let run = Arc::new(std::mem::replace(&mut committed.active, sized));
                    let state = committed.state;
                    committed.frozen = Some((Arc::clone(&run), state));
                    (run, state, false)
                }
            }
        };
        self.store
            .ingest(run.sorted(), target)
            .map_err(|e| storage_error(self.bucket, e))?;
        {
            let mut committed = write(&self.committed);
            committed.frozen = None;
            committed.absorb(&run, &self.row_cache, self.bucket);
        }
        *store_state = target;
        if retry {
            // The retried run is in; now the changes that waited.
            return self.spill_locked(store_state);
        }
        Ok(())
    }

    /// Replays the changelog from `from` to `to` into the committed layer
    /// (and so the store): `+I` and `+U` rows put their key, `-D` rows
    /// delete it, `-U` rows are skipped (every changelog row is a full
    /// image). The store holds exactly the changelog below `from` (its
    /// state is written with its rows), so the row count follows what each
    /// key held before its change. ARRAY,
    /// MAP and ROW columns are read back as their Fluss bytes
    /// ([`read_row_into`], into one scratch buffer reused across rows), so
    /// the stored rows are those the writes stored.
    fn replay(&self, from: AppliedState, to: i64) -> Result<AppliedState, ApiError> {
        let bucket = self.bucket;
        let table = self.table();
        let table = &*table;
        let storage = |e| storage_error(bucket, e);
        let corrupt = |offset: i64, why: String| {
            ApiError::new(
                ErrorCode::KvStorageException,
                format!(
                    "{bucket}: the changelog batch at offset {offset} cannot be replayed: {why}"
                ),
            )
        };
        let mut store_state = lock(&self.flush);
        let mut state = from;
        let mut datums: Vec<Datum<'_>> = Vec::new();
        // The bytes of a row's ARRAY, MAP and ROW values, written again
        // from the batch's nested Arrow columns; reused across rows.
        let mut nested_scratch: Vec<u8> = Vec::new();
        let mut key = Vec::new();
        let mut value = Vec::new();
        while state.offset < to {
            let chunk = self
                .log
                .read(state.offset, REPLAY_READ_BYTES)
                .map_err(storage)?;
            if chunk.records.is_empty() {
                break;
            }
            for batch in LogBatches::new(&chunk.records) {
                let batch = batch.map_err(|e| corrupt(state.offset, e.to_string()))?;
                let next = batch.next_offset();
                if next <= state.offset {
                    continue;
                }
                if next > to {
                    break;
                }
                if batch.record_count() > 0 {
                    // Each batch is read with the schema it was written
                    // with, and its rows stored with that schema's codec.
                    let schema_id = batch.schema_id();
                    let schema = table.schema_by_id(schema_id).ok_or_else(|| {
                        corrupt(
                            batch.base_offset(),
                            format!("it has schema id {schema_id}, which the table does not have"),
                        )
                    })?;
                    let bytes = chunk.records.slice_ref(batch.as_bytes());
                    let decoded = decode_log_batch(&bytes.into(), schema.arrow_schema.clone())
                        .map_err(|e| corrupt(batch.base_offset(), e.to_string()))?;
                    let Some(types) = decoded.change_types.as_ref() else {
                        return Err(corrupt(
                            batch.base_offset(),
                            "an append-only batch in a primary-key table's changelog".into(),
                        ));
                    };
                    let mut nested = NestedColumns::of(&decoded.records)
                        .map_err(|e| corrupt(batch.base_offset(), e.to_string()))?;
                    // One lock per batch: nothing else reads the layer while
                    // the tablet opens.
                    let mut committed = write(&self.committed);
                    for (row, &change) in types.as_slice().iter().enumerate() {
                        let change =
                            ChangeType::from_byte(change).unwrap_or(ChangeType::UpdateBefore);
                        if change == ChangeType::UpdateBefore {
                            continue;
                        }
                        let mut row_datums = recycle(std::mem::take(&mut datums));
                        read_row_into(
                            &decoded.records,
                            row,
                            &mut nested,
                            &mut nested_scratch,
                            &mut row_datums,
                        )
                        .map_err(|e| corrupt(batch.base_offset(), e.to_string()))?;
                        let width = row_datums.len();
                        // The key encoder reads rows of the current schema.
                        row_datums.resize(table.arity(), Datum::Null);
                        key.clear();
                        table
                            .keys
                            .encode_datums(&row_datums, &mut key)
                            .map_err(|e| corrupt(batch.base_offset(), e.to_string()))?;
                        let new_value = if change == ChangeType::Delete {
                            None
                        } else {
                            value.clear();
                            value.extend_from_slice(&schema_id.to_le_bytes());
                            schema
                                .rows
                                .encode(&row_datums[..width], &mut value)
                                .map_err(|e| corrupt(batch.base_offset(), e.to_string()))?;
                            Some(&value[..])
                        };
                        datums = recycle(row_datums);
                        let hash = committed.hash(&key);
                        let existed = match committed.get_ref(hash, &key) {
                            Some(v) => v.is_some(),
                            None => self.store.get(&key).map_err(storage)?.is_some(),
                        };
                        state.row_count += i64::from(new_value.is_some()) - i64::from(existed);
                        committed.insert(hash, &key, new_value);
                    }
                }
                state.offset = next;
                let full = {
                    let mut committed = write(&self.committed);
                    committed.state = state;
                    committed.active.reaches(self.write_buffer_bytes)
                };
                if full {
                    self.spill_locked(&mut store_state)?;
                }
            }
        }
        if !table.counts_rows() {
            state.row_count = 0;
            write(&self.committed).state = state;
        }
        Ok(state)
    }

    /// The live row count, if the table keeps one (committed rows).
    pub fn row_count(&self) -> Option<i64> {
        read(&self.table)
            .counts_rows()
            .then(|| self.applied().row_count)
    }
}

/// A key's current value, from the buffer, the committed layer (borrowed
/// under its read lock, not copied) or the store.
enum OldValue<'c> {
    Buffered(KvRow),
    Committed(&'c [u8]),
    Stored(KvValue),
}

impl std::ops::Deref for OldValue<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            OldValue::Buffered(b) => b,
            OldValue::Committed(v) => v,
            OldValue::Stored(v) => v,
        }
    }
}

/// Records `key → value` (`key` filed under `hash`) as the batch's latest
/// change of the key, keeping the slot of another put it replaced for
/// [`undo`].
fn stage(st: &mut WriteState, hash: u64, key: KvKey, value: Option<KvRow>) {
    let put = st.put_id;
    let slot = Slot {
        put,
        index: st.staged.len() as u32,
    };
    st.staged.push((key, value));
    let Pending {
        latest,
        hasher,
        batches,
        ..
    } = &mut st.pending;
    let changes = Changes {
        batches,
        staged: &st.staged,
    };
    let key = &st.staged[slot.index as usize].0[..];
    let previous = changes
        .set(latest, hasher, hash, key, slot)
        .filter(|prev| prev.put != put);
    st.undo.push((hash, previous));
}

/// Restores every buffer slot the batch being put replaced, newest first.
fn undo(st: &mut WriteState) {
    let put = st.put_id;
    let Pending {
        latest,
        hasher,
        batches,
        ..
    } = &mut st.pending;
    let changes = Changes {
        batches,
        staged: &st.staged,
    };
    for (index, (hash, previous)) in st.undo.drain(..).enumerate().rev() {
        let key = &changes.staged[index].0[..];
        match previous {
            Some(previous) => {
                changes.set(latest, hasher, hash, key, previous);
            }
            None => {
                // Only a slot of this put may go.
                if let Ok(slot) =
                    latest.find_entry(hash, |s| s.put == put && changes.key(*s) == key)
                {
                    slot.remove();
                }
            }
        }
    }
    st.staged.clear();
    st.change_types.clear();
}

fn prefix_error(bucket: TableBucket, e: ApiError) -> ApiError {
    ApiError::new(e.code(), format!("{bucket}: {}", e.message()))
}

/// The target column positions of a request (`None`: full rows), checked
/// against the table.
fn target_positions(
    table: &KvTable,
    target_columns: &[i32],
) -> Result<Option<Vec<usize>>, ApiError> {
    if target_columns.is_empty() {
        return Ok(None);
    }
    let arity = table.schema.columns().len();
    target_columns
        .iter()
        .map(|&c| {
            usize::try_from(c)
                .ok()
                .filter(|&c| c < arity)
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidTargetColumn,
                        format!("target column {c} is not a column of the table (it has {arity})"),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The index of the merger for (targets, mode) in the tablet's cache,
/// building it on first use.
fn merger_index(
    st: &mut WriteState,
    table: &KvTable,
    targets: Option<Vec<usize>>,
    mode: AggMode,
) -> Result<usize, ApiError> {
    if let Some(i) = st
        .mergers
        .iter()
        .position(|((t, m), _)| *t == targets && *m == mode)
    {
        return Ok(i);
    }
    let merger = RowMerger::new(&table.schema, &table.merge, targets.as_deref(), mode)?;
    if st.mergers.len() >= MERGERS_MAX {
        st.mergers.remove(0);
    }
    st.mergers.push(((targets, mode), merger));
    Ok(st.mergers.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::{Committed, RowCacheBudget, Run, TableBucket, CLEAN_SLACK_BYTES};

    /// Updates and deletes leave superseded rows in the packed cache; it is
    /// packed again before they pass its rows' bytes plus the slack, and
    /// through it all every key reads its latest row, deleted keys read as
    /// absent, and the budget holds exactly the live rows' bytes.
    #[test]
    fn the_row_cache_packs_itself_again_before_superseded_rows_outweigh_its_rows() {
        let budget = RowCacheBudget::new(64 << 20);
        let bucket = TableBucket {
            table_id: 1,
            partition_id: None,
            bucket_id: 0,
        };
        let mut committed = Committed {
            complete: true,
            ..Committed::new(
                foldhash::fast::RandomState::default(),
                super::AppliedState::default(),
            )
        };
        let keys = 100u32;
        let mut packed_at_most = 0;
        for round in 0..40u8 {
            let mut run = Run::default();
            for k in 0..keys {
                // Every tenth key is deleted in odd rounds.
                let value = (k % 10 != 0 || round % 2 == 0).then(|| vec![round; 1000]);
                run.insert(&k.to_be_bytes(), value.as_deref());
            }
            committed.absorb(&run, &budget, bucket);
            packed_at_most = packed_at_most.max(committed.clean.packed_bytes());
            let live: usize = (0..keys)
                .filter(|k| k % 10 != 0 || round % 2 == 0)
                .map(|_| 4 + 1000)
                .sum();
            assert_eq!(committed.clean_bytes, live, "round {round}");
            assert_eq!(budget.used(), live, "round {round}");
            for k in 0..keys {
                let expected = (k % 10 != 0 || round % 2 == 0).then(|| vec![round; 1000]);
                assert_eq!(
                    committed.get_ref(committed.hash(&k.to_be_bytes()), &k.to_be_bytes()),
                    Some(expected.as_deref()),
                    "key {k}, round {round}"
                );
            }
        }
        // 40 rounds of ~100 KB of rows: 4 MB packed if never packed again.
        assert!(
            packed_at_most <= 2 * 100 * 1004 + CLEAN_SLACK_BYTES,
            "the cache held {packed_at_most} bytes for ~100 KB of rows"
        );
    }
}
