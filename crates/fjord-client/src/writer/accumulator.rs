//! The row path: per-bucket Arrow column builders that rows are appended
//! straight into, and the rules that seal a bucket's batch (size, age,
//! memory pressure, flush).
//!
//! The accumulator lives behind one lock shared by the caller's
//! [`super::AppendWriter`] and the linger task, because the batch timeout
//! must fire while the caller is idle. The lock is biased toward the writer
//! (`owner_lock.rs`): its way in and out is plain loads and stores, where
//! an uncontended mutex's two locked instructions cost about 6 ns of a
//! typed row (docs/bench-notes/history.md, the ninth session's A/B); the
//! linger task, once per `batch-timeout`, pays a process-wide barrier
//! instead.
//! Nothing here allocates per row: the builders are created once per
//! bucket and reused after every seal.

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use tokio::sync::oneshot;

use crate::bucket::BucketAssigner;
use crate::error::{ClientError, Result};
use crate::row::{InternalRow, RowBatchBuilder};
use crate::writer::backlog::EncodeBacklog;
use crate::writer::memory::MemoryPool;
use crate::writer::slots::Slots;
use crate::writer::{BatchAck, Shared};

/// A bucket of a table: `(partition id, bucket id)`; the partition is `None`
/// for a non-partitioned table.
pub(crate) type BucketKey = (Option<i64>, i32);

/// Largest step in which an open batch reserves buffer memory (Fluss's
/// `client.writer.buffer.page-size` default). Reserving per step, not per
/// row, keeps the semaphore off the row path.
pub(crate) const RESERVE_CHUNK_BYTES: usize = 128 * 1024;

/// Smallest step, so a writer with a tiny batch size does not reserve per row.
const RESERVE_CHUNK_MIN_BYTES: usize = 4 * 1024;

/// Largest uncompressed batch, whatever the compression ratio suggests:
/// bounds the memory one bucket's builder holds and the encode time of one
/// batch.
pub(crate) const MAX_UNCOMPRESSED_BATCH_BYTES: usize = 64 << 20;

/// A bucket's next batch is presized for at most its last batch plus this
/// fraction (1/4): enough for a sticky writer's batches, which grow a few
/// percent a batch while the compression ratio is learned, to fill without
/// reallocating; small enough that a bucket whose batches are sealed by
/// time holds little unused room.
const PRESIZE_GROWTH_MAX_DIVISOR: usize = 4;

/// Compression ratio assumed before the first batch is encoded (1.0: a batch
/// is sealed at `batch-size` uncompressed bytes, the safe side).
pub(crate) const INITIAL_COMPRESSION_RATIO: f32 = 1.0;

/// Lowest compression ratio used to size batches: stops a freak batch of
/// constant values from making the next batches huge.
const MIN_COMPRESSION_RATIO: f32 = 0.05;

/// Most row batches kept for their buffers after encoding, waiting to be
/// written into again by whichever bucket opens a batch next: bounds the
/// memory the writer holds beyond `client.writer.buffer.memory-size` (which
/// counts open and unacknowledged batches only) to this many batches and
/// [`RECYCLED_BYTES_MAX`]. With the encoder backlog bounded
/// ([`crate::writer::backlog::ENCODE_BACKLOG_MAX`]), a sticky writer
/// circulates one open batch plus at most that many sealed ones, so this
/// covers the steady state; the rest absorb bursts of small batches.
pub(crate) const RECYCLED_BATCHES_MAX: usize = 4;

/// Most bytes of buffers kept for reuse (see [`RECYCLED_BATCHES_MAX`]): a
/// batch that would take the pool beyond it is dropped instead.
pub(crate) const RECYCLED_BYTES_MAX: usize = 32 << 20;

/// Row batches the encoder is done with, kept (bounded) so the next batches
/// write into memory that is already paged in instead of fresh allocations,
/// whose page faults and zeroing were ~8 % of the row path's samples
/// (docs/bench-notes/client.md, "Why the misses"). Filled by the
/// encoder thread and drained by the accumulator, once per batch each.
#[derive(Default)]
pub(crate) struct Recycled {
    batches: std::sync::Mutex<(Vec<RecordBatch>, usize)>,
}

impl Recycled {
    /// Keeps `batch` for its buffers if the pool has room; drops it
    /// otherwise. Only for batches the builders made: the caller holds no
    /// other reference to them, so their buffers can be written again.
    pub(crate) fn give(&self, batch: RecordBatch) {
        let bytes = batch.get_array_memory_size();
        let mut pool = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        let (batches, held) = &mut *pool;
        if batches.len() < RECYCLED_BATCHES_MAX && *held + bytes <= RECYCLED_BYTES_MAX {
            batches.push(batch);
            *held += bytes;
        }
    }

    /// The most recently encoded batch kept, if any.
    fn take(&self) -> Option<RecordBatch> {
        let mut pool = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        let (batches, held) = &mut *pool;
        let batch = batches.pop()?;
        *held = held.saturating_sub(batch.get_array_memory_size());
        Some(batch)
    }

    /// Batches kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.batches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .len()
    }
}

/// A sealed batch on its way to the encoder.
pub(crate) struct SealedBatch {
    /// Where it goes.
    pub key: BucketKey,
    /// Its rows.
    pub batch: RecordBatch,
    /// Uncompressed estimate the seal decision used (0 for a RecordBatch
    /// appended whole); the encoder learns the compression ratio from it.
    pub estimated_bytes: usize,
    /// Buffer memory it holds until acknowledged.
    pub reserved_bytes: usize,
    /// The caller's completion for a RecordBatch appended whole.
    pub completion: Option<oneshot::Sender<Result<BatchAck>>>,
}

/// One bucket's open batch.
struct Slot {
    builder: RowBatchBuilder,
    opened_at: Instant,
    /// Memory reserved for the rows in `builder`.
    reserved_bytes: usize,
    /// Seal when `estimated_bytes` reaches this (batch-size / ratio).
    seal_at_bytes: usize,
    /// Reservation step of this batch.
    chunk_bytes: usize,
    /// Memory the batch's rows use beyond `reserved_bytes`, which the
    /// writer is waiting to reserve; the linger task leaves such a batch
    /// open (the writer settles it, then keeps filling it).
    debt_bytes: usize,
    /// Bytes the batch's buffers were presized for when it opened
    /// ([`open_batch`]); counted in [`Accumulator::presized_bytes`] while
    /// the batch is open.
    presized_bytes: usize,
}

impl Slot {
    fn new(schema: &SchemaRef) -> Result<Self> {
        Ok(Self {
            builder: RowBatchBuilder::new(schema.clone())?,
            opened_at: Instant::now(),
            reserved_bytes: 0,
            seal_at_bytes: 0,
            chunk_bytes: RESERVE_CHUNK_BYTES,
            debt_bytes: 0,
            presized_bytes: 0,
        })
    }
}

/// What appending one row led to.
pub(crate) enum RowOutcome {
    /// The row is in a builder, within reserved memory.
    Buffered,
    /// The row is in its batch, but the memory pool is exhausted: the
    /// caller must reserve `need_bytes` (waiting for acknowledgements), then
    /// [`Accumulator::settle`] them to the batch at `key`.
    Deficit {
        /// The bucket whose batch is short of memory.
        key: BucketKey,
        /// Memory it needs.
        need_bytes: usize,
    },
    /// The row sealed its batch and the encoder is behind: the caller waits
    /// ([`EncodeBacklog::wait_until_not_full`]) before the next row.
    EncoderBusy,
    /// The row was NOT appended: with the rows before it, its batch would
    /// have outgrown buffer memory, so that batch was sealed; the caller
    /// appends the row again (into a batch of its own), after waiting for
    /// the encoder if it is behind.
    AppendAgain,
}

/// What appending a run of rows led to ([`Accumulator::append_run`]).
pub(crate) struct Run {
    /// Rows of the run appended (a prefix).
    pub appended: usize,
    /// As for one row, after the last row appended.
    pub outcome: RowOutcome,
    /// Why the row after the appended ones was refused, if it was.
    pub refused: Option<ClientError>,
}

/// Most rows one [`Accumulator::append_run`] appends: bounds how long the
/// accumulator's lock is held (the linger task waits at most one run) and
/// keeps a run's datums in cache while its columns are filled one after
/// another.
pub(crate) const ROWS_PER_RUN_MAX: usize = 256;

/// Per-bucket builders of one writer, and the seal rules.
pub(crate) struct Accumulator {
    schema: SchemaRef,
    assigner: BucketAssigner,
    batch_size_bytes: usize,
    batch_timeout: Duration,
    /// One slot per bucket (of each partition), created on first use.
    slots: Slots<Slot>,
    /// Slots with rows; lets the linger task and flush skip empty buckets.
    open: Vec<BucketKey>,
    encode_tx: Option<mpsc::Sender<SealedBatch>>,
    /// Batches sent to the encoder and not yet encoded.
    backlog: Arc<EncodeBacklog>,
    /// Batches handed on (or held by a deficit) so far; flush waits until
    /// this many are completed.
    sealed_count: u64,
    /// What the open batches' buffers were presized for, together: a new
    /// batch is presized for at most buffer memory less this, so many
    /// buckets opening batches after a burst hold about buffer memory of
    /// presized heap, not buckets x batch size.
    presized_bytes: usize,
}

impl Accumulator {
    pub(crate) fn new(
        schema: SchemaRef,
        assigner: BucketAssigner,
        bucket_count: i32,
        batch_size_bytes: usize,
        batch_timeout: Duration,
        encode_tx: mpsc::Sender<SealedBatch>,
        backlog: Arc<EncodeBacklog>,
    ) -> Self {
        Self {
            schema,
            assigner,
            batch_size_bytes,
            batch_timeout,
            slots: Slots::new(bucket_count),
            open: Vec::new(),
            encode_tx: Some(encode_tx),
            backlog,
            sealed_count: 0,
            presized_bytes: 0,
        }
    }

    /// Batches sealed so far.
    pub(crate) fn sealed_count(&self) -> u64 {
        self.sealed_count
    }

    /// The slot of `key`, created (once per bucket) on first use
    /// ([`Slots::get`]).
    #[inline(always)]
    fn slot(&mut self, key: BucketKey) -> Result<&mut Slot> {
        let schema = &self.schema;
        self.slots.get(key, || Slot::new(schema))
    }

    /// Drops, from every bucket's open batch, the values a row left when
    /// its `write_fields` or `datum` panicked part way (see
    /// [`RowBatchBuilder::drop_partial_row`]). Whole rows are untouched.
    /// Only called while such a panic unwinds through the lock.
    #[cold]
    #[inline(never)]
    pub(crate) fn drop_partial_rows(&mut self) {
        for slot in self.slots.iter_mut() {
            slot.builder.drop_partial_row();
        }
    }

    /// Appends `row` to its bucket's builder (bucket from the assigner) in
    /// `partition`; seals the batch when it reaches the batch size.
    pub(crate) fn append_row<R: InternalRow + ?Sized>(
        &mut self,
        partition: Option<i64>,
        row: &R,
        shared: &Shared,
    ) -> Result<RowOutcome> {
        let bucket = self.assigner.assign(row)?;
        let key = (partition, bucket);
        let (slot, was_empty) = self.opened_slot(key, shared)?;
        if let Err(e) = slot.builder.append(row) {
            return Err(refused_first_row(slot, was_empty, e));
        }
        let bytes = slot.builder.estimated_bytes();
        // Nearly every row: its batch was open, and stays within the memory
        // it reserved (never more than buffer memory, so within the hard
        // limit) and under the seal size. Nothing else to do.
        if !was_empty && bytes <= slot.reserved_bytes && bytes < slot.seal_at_bytes {
            return Ok(RowOutcome::Buffered);
        }
        self.after_row(key, was_empty, bytes, shared)
    }

    /// The rest of [`Accumulator::append_row`] for a row that opened its
    /// batch, passed its reservation or reached the seal size: about once
    /// a reservation step, out of the per-row path.
    #[inline(never)]
    fn after_row(
        &mut self,
        key: BucketKey,
        was_empty: bool,
        bytes: usize,
        shared: &Shared,
    ) -> Result<RowOutcome> {
        if bytes > hard_limit(shared) {
            return self.take_back_row(key, shared);
        }
        self.appended(key, was_empty, shared)
    }

    /// The row just appended to `key`'s batch took it past what buffer
    /// memory can ever hold: the row is taken back out; the batch before it
    /// is sealed and the row is to be appended again, into a batch of its
    /// own — or, alone in its batch, it is refused (waiting for memory
    /// could never end).
    #[cold]
    #[inline(never)]
    fn take_back_row(&mut self, key: BucketKey, shared: &Shared) -> Result<RowOutcome> {
        let slot = self.slot(key)?;
        let bytes = slot.builder.estimated_bytes();
        let rows = slot.builder.len();
        slot.builder.truncate_rows(rows - 1);
        if rows == 1 {
            // The row's room (larger than buffer memory) is not kept for a
            // batch that may never come.
            slot.builder.release_memory();
            return Err(shared.ledger.pool.too_large(bytes));
        }
        self.seal(key)?;
        Ok(RowOutcome::AppendAgain)
    }

    /// Appends the longest prefix of `rows` that goes into one batch of a
    /// non-partitioned table whose assigner is sticky (every row of a run
    /// goes to the current bucket), at most [`ROWS_PER_RUN_MAX`]: the rows
    /// a row-by-row writer would put into this batch (the run that reaches
    /// the seal threshold is cut, from its rows' own sizes, after the row
    /// that reaches it: [`RowBatchBuilder::run_length`]). Rows go in column by column
    /// ([`RowBatchBuilder::append_rows`]). When a row is refused (wrong
    /// value, or too large for buffer memory even alone), the rows before
    /// it are appended and the refusal is returned with them.
    pub(crate) fn append_run<R: InternalRow>(
        &mut self,
        rows: &[R],
        shared: &Shared,
    ) -> Result<Run> {
        let Some(first) = rows.first() else {
            return Ok(Run {
                appended: 0,
                outcome: RowOutcome::Buffered,
                refused: None,
            });
        };
        let bucket = self.assigner.assign(first)?;
        let key = (None, bucket);
        let (slot, was_empty) = self.opened_slot(key, shared)?;
        let before = slot.builder.len();
        // A guess from the rows so far: most runs end well before the seal
        // threshold. The run that reaches it (once per batch) is redone
        // exactly below, and the guess may copy at most the room left of
        // STRING/BYTES data, so rows far larger than the ones before cannot
        // make the batch hold far more than its threshold first.
        let room = slot
            .seal_at_bytes
            .saturating_sub(slot.builder.estimated_bytes());
        let fit = room / slot.builder.row_bytes_hint() + 1;
        let mut appended = fit.min(rows.len()).min(ROWS_PER_RUN_MAX);
        let mut refused = None;
        let mut exact = false;
        // A refusal names a refused row, not necessarily the first: rows
        // before it may fail a later column. Retry the shorter prefix until
        // it goes in whole (each try is shorter, the empty one cannot fail).
        loop {
            match slot.builder.try_append_rows_within(&rows[..appended], room) {
                Ok(()) => break,
                Err(Some((index, error))) => {
                    appended = index;
                    refused = Some(error);
                }
                // Nothing appended: the run's data passes the room left.
                Err(None) => {
                    exact = true;
                    break;
                }
            }
        }
        if !exact && appended > 0 && slot.builder.estimated_bytes() >= slot.seal_at_bytes {
            slot.builder.truncate_rows(before);
            exact = true;
        }
        let (mut seal, mut too_large) = (false, None);
        if exact {
            // Keep exactly the rows a row-by-row writer would have put in
            // this batch, from their own sizes, and none that buffer memory
            // could never hold.
            let length =
                slot.builder
                    .run_length(&rows[..appended], slot.seal_at_bytes, hard_limit(shared));
            if length.rows < appended {
                // The refused row (if any) is not next any more.
                refused = None;
                (seal, too_large) = (length.seal, length.too_large);
            }
            appended = length.rows;
            while let Err((index, error)) = slot.builder.try_append_rows(&rows[..appended]) {
                appended = index;
                refused = Some(error);
                (seal, too_large) = (false, None);
            }
        }
        if let Some(bytes) = too_large {
            refused = Some(shared.ledger.pool.too_large(bytes));
        }
        let mut outcome = if appended == 0 {
            if was_empty {
                // As for a refused first row (`refused_first_row`).
                self.slot(key)?.builder.release_memory();
            }
            RowOutcome::Buffered
        } else {
            self.appended(key, was_empty, shared)?
        };
        if seal && matches!(outcome, RowOutcome::Buffered) {
            // The next row needs a batch of its own.
            self.seal(key)?;
            if self.backlog.is_full() {
                outcome = RowOutcome::EncoderBusy;
            }
        }
        Ok(Run {
            appended,
            outcome,
            refused,
        })
    }

    /// `key`'s slot with its batch open (opened now if it was empty), and
    /// whether it was empty.
    #[inline(always)]
    fn opened_slot(&mut self, key: BucketKey, shared: &Shared) -> Result<(&mut Slot, bool)> {
        let batch_size = self.batch_size_bytes;
        // Read before the slot is borrowed; this (empty) slot's batch is
        // not among the open ones counted.
        let open_presized = self.presized_bytes;
        let slot = self.slot(key)?;
        let was_empty = slot.builder.is_empty();
        if was_empty {
            let presize_room = shared
                .ledger
                .pool
                .total_bytes()
                .saturating_sub(open_presized);
            open_batch(slot, batch_size, presize_room, shared)?;
        }
        Ok((slot, was_empty))
    }

    /// Counts `key`'s batch, which just took its first rows, as open: in
    /// the list the linger task and flush walk, and its presized buffers
    /// in [`Accumulator::presized_bytes`]. Undone by [`Accumulator::take`].
    fn mark_open(&mut self, key: BucketKey) -> Result<()> {
        let presized = self.slot(key)?.presized_bytes;
        self.presized_bytes += presized;
        self.open.push(key);
        Ok(())
    }

    /// After rows went into `key`'s batch: reserves the memory they use
    /// (or reports the deficit) and seals the batch when full.
    #[inline(always)]
    fn appended(&mut self, key: BucketKey, was_empty: bool, shared: &Shared) -> Result<RowOutcome> {
        let pool = &shared.ledger.pool;
        let slot = self.slot(key)?;
        let bytes = slot.builder.estimated_bytes();
        let seal_at = slot.seal_at_bytes;
        if bytes > slot.reserved_bytes {
            // A whole step, but never past buffer memory: a batch of up to
            // all of it (the hard limit) stays reservable.
            let need = (bytes - slot.reserved_bytes)
                .max(slot.chunk_bytes)
                .min(pool.total_bytes().saturating_sub(slot.reserved_bytes));
            if pool.try_reserve(need) {
                slot.reserved_bytes += need;
            } else {
                // Memory is exhausted: the batch stays open, in debt, while
                // the caller waits for memory; every other open batch is
                // sealed so acknowledgements free memory soon.
                slot.debt_bytes = need;
                if was_empty {
                    self.mark_open(key)?;
                }
                let others: Vec<BucketKey> =
                    self.open.iter().copied().filter(|k| *k != key).collect();
                for other in others {
                    self.seal(other)?;
                }
                return Ok(RowOutcome::Deficit {
                    key,
                    need_bytes: need,
                });
            }
        }
        if was_empty {
            self.mark_open(key)?;
        }
        if bytes >= seal_at {
            self.seal(key)?;
            if self.backlog.is_full() {
                return Ok(RowOutcome::EncoderBusy);
            }
        }
        Ok(RowOutcome::Buffered)
    }

    /// Credits `bytes`, reserved by the caller after a
    /// [`RowOutcome::Deficit`], to `key`'s batch; seals it if full.
    pub(crate) fn settle(&mut self, key: BucketKey, bytes: usize, pool: &MemoryPool) -> Result<()> {
        let slot = self.slot(key)?;
        if slot.builder.is_empty() {
            // Sealed meanwhile (only on close): nothing to credit.
            pool.release(bytes);
            return Ok(());
        }
        slot.reserved_bytes += bytes;
        slot.debt_bytes = 0;
        if slot.builder.estimated_bytes() >= slot.seal_at_bytes {
            self.seal(key)?;
        }
        Ok(())
    }

    /// Seals `key`'s open batch, if any, and hands it to the encoder.
    pub(crate) fn seal(&mut self, key: BucketKey) -> Result<()> {
        if let Some(batch) = self.take(key)? {
            self.send(batch)?;
        }
        Ok(())
    }

    /// Takes `key`'s open batch out of its builder (counted as sealed).
    fn take(&mut self, key: BucketKey) -> Result<Option<SealedBatch>> {
        let slot = self.slot(key)?;
        if slot.builder.is_empty() {
            return Ok(None);
        }
        let estimated_bytes = slot.builder.estimated_bytes();
        // The idle builder keeps no memory: its next batch takes a recycled
        // one's buffers (any bucket's, any partition's) when it opens.
        let batch = slot.builder.finish_and_release()?;
        let reserved_bytes = std::mem::take(&mut slot.reserved_bytes);
        slot.debt_bytes = 0;
        let presized = slot.presized_bytes;
        if let Some(at) = self.open.iter().position(|k| *k == key) {
            self.open.swap_remove(at);
            self.presized_bytes -= presized;
        }
        self.assigner.on_batch_sealed(key.1);
        self.sealed_count += 1;
        Ok(Some(SealedBatch {
            key,
            batch,
            estimated_bytes,
            reserved_bytes,
            completion: None,
        }))
    }

    /// Hands a sealed batch to the encoder thread.
    pub(crate) fn send(&mut self, batch: SealedBatch) -> Result<()> {
        let tx = self
            .encode_tx
            .as_ref()
            .ok_or(ClientError::WriterClosed("the writer was closed"))?;
        tx.send(batch)
            .map_err(|_| ClientError::WriterClosed("the encoder thread stopped"))?;
        self.backlog.on_sent();
        Ok(())
    }

    /// Counts and sends a batch sealed outside the builders (a RecordBatch
    /// appended whole), after sealing the bucket's open rows so the bucket's
    /// order is kept.
    pub(crate) fn send_whole(&mut self, batch: SealedBatch) -> Result<()> {
        self.seal(batch.key)?;
        self.sealed_count += 1;
        self.send(batch)
    }

    /// Seals every open batch (flush, memory exhaustion, close).
    pub(crate) fn seal_all(&mut self) -> Result<()> {
        while let Some(&key) = self.open.last() {
            self.seal(key)?;
        }
        Ok(())
    }

    /// Seals batches older than the batch timeout; returns when the next
    /// open batch expires (`None` when none is open).
    pub(crate) fn seal_expired(&mut self, now: Instant) -> Result<Option<Instant>> {
        let mut next: Option<Instant> = None;
        let timeout = self.batch_timeout;
        let mut i = 0;
        while i < self.open.len() {
            let key = self.open[i];
            let slot = self.slot(key)?;
            if slot.debt_bytes > 0 {
                // The writer is waiting for memory for this batch and seals
                // or fills it once it has it; no wake-up for it here (its
                // deadline may be past: that would spin).
                i += 1;
                continue;
            }
            let deadline = slot.opened_at + timeout;
            if deadline <= now {
                // `seal` swap-removes `open[i]`; look at index i again.
                self.seal(key)?;
            } else {
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
                i += 1;
            }
        }
        Ok(next)
    }

    /// Assigns a bucket to a whole RecordBatch (sticky, round-robin, or the
    /// bucket of its first row for a hash-distributed table).
    pub(crate) fn assigner(&mut self) -> &mut BucketAssigner {
        &mut self.assigner
    }

    /// Stops accepting batches: the encoder thread ends once it has
    /// encoded what it was given.
    pub(crate) fn close(&mut self) {
        self.encode_tx = None;
    }
}

/// `error`, a refusal of the row `slot`'s batch was just opened for: the
/// batch stays empty, so it is not counted open (`mark_open`) and its
/// presized buffers would be held, uncounted by
/// [`Accumulator::presized_bytes`], until the bucket's next batch: they are
/// released (the next row opens the batch again).
#[cold]
#[inline(never)]
fn refused_first_row(slot: &mut Slot, was_empty: bool, error: ClientError) -> ClientError {
    if was_empty {
        slot.builder.release_memory();
    }
    error
}

/// The most a batch may estimate: all of buffer memory (its reservation
/// steps are capped at what is left of it, so such a batch can always be
/// reserved once the others are acknowledged).
#[inline]
fn hard_limit(shared: &Shared) -> usize {
    shared.ledger.pool.total_bytes()
}

/// Readies `slot`'s empty batch for its first row: once per batch, not per
/// row. `presize_room` is what the other open batches' presizing left of
/// buffer memory.
fn open_batch(
    slot: &mut Slot,
    batch_size: usize,
    presize_room: usize,
    shared: &Shared,
) -> Result<()> {
    // An earlier batch's failure is reported instead of opening another
    // batch.
    if let Some(e) = shared.failure() {
        return Err(e);
    }
    let pool = &shared.ledger.pool;
    // Its age and size rules (set again by the next row should this one be
    // refused).
    slot.opened_at = Instant::now();
    slot.seal_at_bytes = seal_threshold(batch_size, shared.ratio(), pool.total_bytes());
    slot.chunk_bytes = (slot.seal_at_bytes / 4).clamp(RESERVE_CHUNK_MIN_BYTES, RESERVE_CHUNK_BYTES);
    // Its memory: a recycled batch's buffers (sized by the batches before),
    // with room for the batch it will likely be: the seal size, but at most
    // PRESIZE_GROWTH_MAX beyond this bucket's last batch, and at most what
    // the other open batches' presizing left of buffer memory (at least
    // one reservation step). Not the seal size alone, nor the last batch
    // alone: many buckets opening batches after a burst of full ones would
    // hold buckets x batch size of heap that buffer memory does not count
    // (tests/writer_heap_many_buckets.rs). The growth allowance is what
    // keeps a batch from reallocating (copying all its rows) while the
    // learned compression ratio still grows batches from one to the next.
    let last = slot.builder.last_batch_bytes();
    let likely = slot
        .seal_at_bytes
        .min(last.saturating_add(last / PRESIZE_GROWTH_MAX_DIVISOR))
        .min(presize_room)
        .max(slot.chunk_bytes);
    slot.builder.prepare(shared.recycled.take(), likely);
    slot.presized_bytes = likely;
    Ok(())
}

/// Uncompressed bytes at which a batch is sealed so that its compressed size
/// is about `batch_size`: `batch_size / ratio`, within sane bounds (at most
/// a quarter of the buffer memory, so several buckets can fill at once).
pub(crate) fn seal_threshold(batch_size: usize, ratio: f32, pool_bytes: usize) -> usize {
    let ratio = if ratio.is_finite() {
        ratio.clamp(MIN_COMPRESSION_RATIO, 1.0)
    } else {
        1.0
    };
    let bytes = (batch_size as f64 / f64::from(ratio)).round() as usize;
    bytes
        .min(MAX_UNCOMPRESSED_BATCH_BYTES)
        .min((pool_bytes / 4).max(1))
        .max(1)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicU32;

    use fjord_format::arrow_schema::to_arrow_schema;
    use fjord_format::schema::{Schema, TableDescriptor, TableDistribution};
    use fjord_format::types::DataType;

    use super::*;
    use crate::admin::{TableInfo, TablePath};
    use crate::bucket::NoKeyAssigner;
    use crate::row::Datum;
    use crate::writer::ledger::Ledger;

    fn one_bucket_accumulator() -> (Accumulator, mpsc::Receiver<SealedBatch>) {
        one_bucket_accumulator_of(
            Schema::builder()
                .column("id", DataType::bigint())
                .build()
                .unwrap(),
        )
    }

    /// An accumulator of a one-bucket sticky table of `schema`, 1 MiB batches.
    fn one_bucket_accumulator_of(schema: Schema) -> (Accumulator, mpsc::Receiver<SealedBatch>) {
        let descriptor = TableDescriptor::new(
            schema,
            None,
            Vec::new(),
            Some(TableDistribution {
                bucket_count: Some(1),
                bucket_keys: Vec::new(),
            }),
            BTreeMap::new(),
            BTreeMap::new(),
        )
        .unwrap();
        let table = TableInfo {
            path: TablePath::new("db", "t"),
            table_id: 1,
            schema_id: 0,
            descriptor,
            earlier_schemas: Vec::new(),
        };
        let assigner = BucketAssigner::new(&table, NoKeyAssigner::Sticky).unwrap();
        let (tx, rx) = mpsc::channel();
        let acc = Accumulator::new(
            to_arrow_schema(table.descriptor.schema()),
            assigner,
            1,
            1 << 20,
            Duration::from_secs(3600),
            tx,
            Arc::default(),
        );
        (acc, rx)
    }

    #[test]
    fn an_earlier_failure_is_reported_by_the_row_that_opens_the_next_batch() {
        let (acc, _unused) = one_bucket_accumulator();
        let shared = Shared {
            acc: crate::writer::owner_lock::OwnerLock::new(acc).0,
            ledger: Arc::new(Ledger::new(1 << 24)),
            ratio_bits: AtomicU32::new(INITIAL_COMPRESSION_RATIO.to_bits()),
            recycled: Recycled::default(),
            backlog: Arc::default(),
        };
        let (mut acc, rx) = one_bucket_accumulator();
        let row = |id| [Datum::BigInt(id)];
        acc.append_row(None, &row(1), &shared).unwrap();
        shared
            .ledger
            .complete(Err(ClientError::WriterClosed("batch 0 failed")), None, 0);
        // The open batch keeps filling: the check is once per batch.
        acc.append_row(None, &row(2), &shared).unwrap();
        acc.seal_all().unwrap();
        assert_eq!(
            rx.try_recv()
                .expect("the open batch was sealed")
                .batch
                .num_rows(),
            2
        );
        let e = acc
            .append_row(None, &row(3), &shared)
            .err()
            .expect("the row opening a new batch reports the failure");
        assert!(e.to_string().contains("batch 0 failed"), "{e}");
        assert!(acc.open.is_empty(), "the refused row opened no batch");
        // Once flush has taken the failure, rows are accepted again.
        assert!(shared.ledger.take_first_error().is_some());
        acc.append_row(None, &row(3), &shared).unwrap();
    }

    fn idle_shared() -> Shared {
        let (acc, _unused) = one_bucket_accumulator();
        Shared {
            acc: crate::writer::owner_lock::OwnerLock::new(acc).0,
            ledger: Arc::new(Ledger::new(1 << 24)),
            ratio_bits: AtomicU32::new(INITIAL_COMPRESSION_RATIO.to_bits()),
            recycled: Recycled::default(),
            backlog: Arc::default(),
        }
    }

    fn ids(batch: &RecordBatch) -> Vec<i64> {
        use arrow_array::cast::AsArray;
        batch
            .column(0)
            .as_primitive::<arrow_array::types::Int64Type>()
            .values()
            .to_vec()
    }

    /// Appends `ids` to `partition`'s bucket and seals it.
    fn sealed(
        acc: &mut Accumulator,
        rx: &mpsc::Receiver<SealedBatch>,
        shared: &Shared,
        partition: Option<i64>,
        ids: std::ops::Range<i64>,
    ) -> RecordBatch {
        for id in ids {
            acc.append_row(partition, &[Datum::BigInt(id)], shared)
                .unwrap();
        }
        acc.seal_all().unwrap();
        rx.try_recv().expect("a sealed batch").batch
    }

    #[test]
    fn a_row_that_seals_a_batch_while_the_encoder_is_behind_asks_the_caller_to_wait() {
        let shared = idle_shared();
        let (mut acc, rx) = one_bucket_accumulator();
        // Every row fills its batch.
        acc.batch_size_bytes = 1;
        let backlog = Arc::clone(&acc.backlog);
        let mut outcomes = Vec::new();
        for id in 0..crate::writer::backlog::ENCODE_BACKLOG_MAX as i64 + 1 {
            outcomes.push(acc.append_row(None, &[Datum::BigInt(id)], &shared).unwrap());
        }
        assert!(outcomes[..outcomes.len() - 1]
            .iter()
            .all(|o| matches!(o, RowOutcome::Buffered)));
        assert!(matches!(outcomes.last(), Some(RowOutcome::EncoderBusy)));
        assert!(backlog.is_full());
        // The row was taken all the same: it is in the batch just sealed.
        let sent: Vec<_> = rx.try_iter().collect();
        assert_eq!(sent.len(), outcomes.len());
        assert_eq!(
            ids(&sent.last().unwrap().batch),
            [outcomes.len() as i64 - 1]
        );
        // Once the encoder finishes one, sealing goes on without a wait.
        backlog.on_encoded();
        backlog.on_encoded();
        let next = acc.append_row(None, &[Datum::BigInt(99)], &shared).unwrap();
        assert!(matches!(next, RowOutcome::Buffered));
    }

    #[test]
    fn batches_after_recycling_hold_exactly_their_own_rows_in_any_partition() {
        let shared = idle_shared();
        let (mut acc, rx) = one_bucket_accumulator();
        let first = sealed(&mut acc, &rx, &shared, None, 0..1_000);
        let memory = first.column(0).to_data().buffers()[0].as_ptr();
        shared.recycled.give(first);
        assert_eq!(shared.recycled.len(), 1);
        let second = sealed(&mut acc, &rx, &shared, None, 1_000..1_003);
        assert_eq!(ids(&second), [1_000, 1_001, 1_002]);
        assert_eq!(second.column(0).to_data().buffers()[0].as_ptr(), memory);
        assert_eq!(shared.recycled.len(), 0, "the open batch took it");
        // A partition's first batch takes what another bucket gave back.
        shared.recycled.give(second);
        let third = sealed(&mut acc, &rx, &shared, Some(42), 7..9);
        assert_eq!(ids(&third), [7, 8]);
        assert_eq!(third.column(0).to_data().buffers()[0].as_ptr(), memory);
        // Without a recycled batch the builder starts from fresh memory.
        let fourth = sealed(&mut acc, &rx, &shared, None, 9..10);
        assert_eq!(ids(&fourth), [9]);
    }

    #[test]
    fn a_refused_row_in_a_recycled_batch_leaves_only_the_accepted_rows() {
        let shared = idle_shared();
        let (mut acc, rx) = one_bucket_accumulator();
        let first = sealed(&mut acc, &rx, &shared, None, 0..100);
        shared.recycled.give(first);
        assert!(acc
            .append_row(None, &[Datum::String("not a bigint")], &shared)
            .is_err());
        let next = sealed(&mut acc, &rx, &shared, None, 5..7);
        assert_eq!(ids(&next), [5, 6]);
    }

    #[test]
    fn rows_alternating_between_partitions_land_in_their_own_partitions_batches() {
        let shared = idle_shared();
        let (mut acc, rx) = one_bucket_accumulator();
        for (partition, id) in [(1, 10), (1, 11), (2, 20), (1, 12), (3, 30), (2, 21)] {
            acc.append_row(Some(partition), &[Datum::BigInt(id)], &shared)
                .unwrap();
        }
        acc.seal_all().unwrap();
        let mut by_partition: Vec<(Option<i64>, Vec<i64>)> = rx
            .try_iter()
            .map(|sealed| (sealed.key.0, ids(&sealed.batch)))
            .collect();
        by_partition.sort();
        assert_eq!(
            by_partition,
            [
                (Some(1), vec![10, 11, 12]),
                (Some(2), vec![20, 21]),
                (Some(3), vec![30])
            ]
        );
    }

    #[test]
    fn a_bucket_outside_the_table_is_refused_on_both_slot_paths() {
        let shared = idle_shared();
        let (mut acc, _rx) = one_bucket_accumulator();
        acc.append_row(Some(1), &[Datum::BigInt(1)], &shared)
            .unwrap();
        // Partition 1 is the previous row's (inline path), 2 is not.
        for key in [
            (None, 1),
            (None, -1),
            (Some(1), 1),
            (Some(1), -1),
            (Some(2), 7),
        ] {
            let e = acc.slot(key).err().expect("refused");
            assert!(e.to_string().contains("out of range"), "{key:?}: {e}");
        }
        assert!(acc.slot((Some(1), 0)).is_ok());
    }

    #[test]
    fn the_recycling_pool_keeps_at_most_its_bound() {
        let shared = idle_shared();
        let (mut acc, rx) = one_bucket_accumulator();
        let batches: Vec<RecordBatch> = (0..RECYCLED_BATCHES_MAX as i64 + 2)
            .map(|i| sealed(&mut acc, &rx, &shared, None, i..i + 1))
            .collect();
        batches.into_iter().for_each(|b| shared.recycled.give(b));
        assert_eq!(shared.recycled.len(), RECYCLED_BATCHES_MAX);
    }

    #[test]
    fn seal_threshold_scales_by_ratio_within_bounds() {
        assert_eq!(seal_threshold(1000, 1.0, 1 << 30), 1000);
        assert_eq!(seal_threshold(1000, 0.5, 1 << 30), 2000);
        assert_eq!(seal_threshold(1000, 0.0001, 1 << 30), 20_000);
        assert_eq!(seal_threshold(1000, f32::NAN, 1 << 30), 1000);
        assert_eq!(
            seal_threshold(1 << 30, 1.0, 1 << 40),
            MAX_UNCOMPRESSED_BATCH_BYTES
        );
        assert_eq!(seal_threshold(1 << 20, 1.0, 1 << 20), 1 << 18);
    }

    #[test]
    fn a_small_row_is_accepted_by_a_buffer_memory_of_one_reservation_step() {
        let mut shared = idle_shared();
        shared.ledger = Arc::new(Ledger::new(RESERVE_CHUNK_MIN_BYTES));
        let (mut acc, _rx) = one_bucket_accumulator();
        // Before hard_limit, this 8-byte row reserved one 4 KiB step and
        // went in (the batch seals at a quarter of the pool).
        let refused = acc.append_row(None, &[Datum::BigInt(1)], &shared).err();
        assert!(refused.is_none(), "an 8-byte row was refused: {refused:?}");
    }

    /// A one-bucket sticky accumulator of `id BIGINT, s STRING`.
    fn id_text_accumulator() -> (Accumulator, mpsc::Receiver<SealedBatch>) {
        one_bucket_accumulator_of(
            Schema::builder()
                .column("id", DataType::bigint())
                .column("s", DataType::string())
                .build()
                .unwrap(),
        )
    }

    #[test]
    fn a_batch_larger_than_the_last_as_the_ratio_is_learned_fills_without_reallocating() {
        let (mut acc, rx) = id_text_accumulator();
        acc.batch_size_bytes = 64 << 10;
        let shared = idle_shared();
        let fill_one_batch = |acc: &mut Accumulator| {
            // The builder's allocation after each row of the batch.
            let mut allocated = Vec::new();
            for id in 0.. {
                acc.append_row(None, &[Datum::BigInt(id), Datum::String("cart")], &shared)
                    .unwrap();
                if let Ok(sealed) = rx.try_recv() {
                    return (sealed.batch.num_rows(), allocated);
                }
                allocated.push(acc.slot((None, 0)).unwrap().builder.allocated_bytes());
            }
            unreachable!()
        };
        let (first_rows, _) = fill_one_batch(&mut acc);
        // The encoder learned a better ratio: the next batch seals a tenth
        // later, as a sticky writer's batches grow while it learns.
        shared
            .ratio_bits
            .store(0.9f32.to_bits(), std::sync::atomic::Ordering::Relaxed);
        let (second_rows, allocated) = fill_one_batch(&mut acc);
        assert!(
            second_rows > first_rows + first_rows / 20,
            "{second_rows} rows after {first_rows}"
        );
        assert!(
            allocated.windows(2).all(|w| w[0] == w[1]),
            "the batch of {second_rows} rows grew its buffers while filling: {:?}",
            allocated.windows(2).find(|w| w[0] != w[1])
        );
    }

    #[test]
    fn every_row_of_an_open_batch_is_covered_by_reserved_buffer_memory() {
        let (mut acc, rx) = id_text_accumulator();
        let mut shared = idle_shared();
        // 4 MiB of buffer memory: batches seal at 1 MiB, reserved in steps.
        shared.ledger = Arc::new(Ledger::new(4 << 20));
        let text = "x".repeat(1 << 10);
        for i in 0..900 {
            let outcome = acc
                .append_row(None, &[Datum::BigInt(i), Datum::String(&text)], &shared)
                .unwrap();
            assert!(matches!(outcome, RowOutcome::Buffered), "row {i}");
            let estimated = acc.slot((None, 0)).unwrap().builder.estimated_bytes();
            let reserved = shared.ledger.pool.used_bytes();
            assert!(
                reserved >= estimated,
                "row {i}: the open batch estimates {estimated} bytes but only {reserved} are reserved"
            );
            assert!(
                reserved <= estimated + RESERVE_CHUNK_BYTES,
                "row {i}: {reserved} bytes reserved for {estimated}: more than one step ahead"
            );
        }
        assert!(
            rx.try_recv().is_err(),
            "the batch stayed open (under 1 MiB)"
        );
    }

    #[test]
    fn a_run_of_rows_larger_than_the_ones_before_holds_no_more_heap_than_buffer_memory() {
        let (mut acc, rx) = id_text_accumulator();
        let mut shared = idle_shared();
        // 4 MiB of buffer memory: batches seal at 1 MiB.
        shared.ledger = Arc::new(Ledger::new(4 << 20));
        let small: Vec<[Datum<'_>; 2]> = (0..10)
            .map(|i| [Datum::BigInt(i), Datum::String("ab")])
            .collect();
        let run = acc.append_run(&small, &shared).unwrap();
        assert_eq!(run.appended, 10);
        // 64 KiB values: 16 of them reach the seal threshold.
        let text = "x".repeat(64 << 10);
        let big: Vec<[Datum<'_>; 2]> = (0..256)
            .map(|i| [Datum::BigInt(i), Datum::String(&text)])
            .collect();
        let run = acc.append_run(&big, &shared).unwrap();
        assert_eq!(run.appended, 16, "the rows a row-by-row writer would take");
        let sealed = rx.try_recv().expect("the batch reached its threshold");
        assert_eq!(sealed.batch.num_rows(), 26);
        let heap = sealed.batch.get_array_memory_size();
        assert!(
            heap <= shared.ledger.pool.total_bytes(),
            "a batch of {} estimated bytes holds {heap} bytes of heap, more than the {} bytes of buffer memory",
            sealed.estimated_bytes,
            shared.ledger.pool.total_bytes()
        );
    }
}
