//! The append writer for log tables: rows (typed, no boxing) or Arrow
//! `RecordBatch`es in, Fluss log batches out.
//!
//! The pipeline, one stage per file:
//! - [`accumulator`]: rows go straight into their bucket's Arrow column
//!   builders (bucket from the [`crate::bucket::BucketAssigner`], partition
//!   from the [`crate::partition::PartitionRouter`]); a batch is sealed when
//!   its estimated compressed size reaches `client.writer.batch-size`, when
//!   it is older than `client.writer.batch-timeout` (a linger task does this
//!   while the caller is idle), on memory pressure, or on flush.
//! - [`encode`]: a thread encodes sealed batches (Arrow IPC with the table's
//!   compression, header and CRC-32C in place), stamping writer id and batch
//!   sequence ([`idempotence`]); compression runs beside the caller, at
//!   most `backlog::ENCODE_BACKLOG_MAX` sealed batches behind it (a row
//!   sealing more waits), so a few column-buffer sets are reused instead
//!   of buffer memory filling with fresh uncompressed ones.
//! - [`sender`]: a task groups encoded batches per leader into ProduceLog
//!   requests, bounds in-flight batches per bucket, retries with back-off,
//!   refreshes metadata when an error calls for it, and completes one
//!   future per batch (never per record).
//! - [`memory`]: `client.writer.buffer.memory-size` bounds the bytes of open
//!   and unacknowledged batches; `append` waits instead of growing.
//!
//! Per-row cost: the row path takes the accumulator's `owner_lock` by
//! the owner's way, plain loads and stores with no locked instruction (the
//! accumulator is shared with the linger task, which needs it to seal idle
//! batches and pays a process-wide barrier to take it), one bucket
//! assignment, one builder append and two integer compares.
//! `append_rows` pays that once per run of up to 256 rows (for
//! a non-partitioned table with the sticky assigner) and reads the run
//! column by column. The clock, the learned compression ratio and the shared
//! failure flag are read once per batch, when a row opens one. Everything
//! per table (Arrow schema, builders, encoder, assigner, options) is built
//! once in [`crate::FlussClient::append_writer`].

pub mod accumulator;
mod backlog;
pub mod config;
pub mod encode;
pub mod idempotence;
pub(crate) mod ledger;
pub mod memory;
pub(crate) mod owner_lock;
mod partitioned_batch;
pub mod sender;
pub(crate) mod slots;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use owner_lock::{OwnerGuard, OwnerKey, OwnerLock};
use std::task::{Context, Poll};
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use fjord_format::arrow_log::{ArrowCompression, ArrowLogEncoder};
use fjord_format::arrow_schema::to_arrow_schema;
use tokio::sync::oneshot;

use crate::admin::TableInfo;
use crate::bucket::{BatchBuckets, BucketAssigner};
use crate::client::FlussClient;
use crate::error::{ClientError, Result};
use crate::partition::{PartitionLookup, PartitionRouter, PartitionView};
use crate::row::InternalRow;
use accumulator::{Accumulator, RowOutcome, SealedBatch, INITIAL_COMPRESSION_RATIO};
use ledger::Ledger;

pub use config::WriterConfig;

/// Where one batch landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchAck {
    /// The partition it went to (`None` for a non-partitioned table).
    pub partition_id: Option<i64>,
    /// The bucket it went to.
    pub bucket: i32,
    /// Offset of its first record (-1 when the server did not say, e.g. a
    /// retried batch the server had already appended).
    pub base_offset: i64,
    /// Rows in it.
    pub records: i32,
    /// For a KV batch (upsert writer), the bucket's changelog end offset
    /// once the batch was applied (`PbPutKvRespForBucket.log_end_offset`);
    /// `None` for log batches and when the server did not say.
    pub log_end_offset: Option<i64>,
}

/// Completion of one appended `RecordBatch`: resolves once the server
/// acknowledged it (per `client.writer.acks`) or it failed for good.
/// Dropping it does not cancel the write.
pub struct BatchCompletion {
    parts: Vec<oneshot::Receiver<Result<BatchAck>>>,
    records: i32,
    first: Option<BatchAck>,
}

impl Future for BatchCompletion {
    /// The acknowledgement; for a batch split across buckets (hash-bucketed
    /// tables) the first part's partition, bucket and offset with the total
    /// row count.
    type Output = Result<BatchAck>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        // Parts in append order; at most one per bucket, so removing from
        // the front is cheap.
        while let Some(part) = this.parts.first_mut() {
            match Pin::new(part).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => {
                    return Poll::Ready(Err(ClientError::WriterClosed(
                        "the writer stopped before the batch completed",
                    )))
                }
                Poll::Ready(Ok(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(Ok(ack))) => {
                    this.parts.remove(0);
                    this.first.get_or_insert(ack);
                }
            }
        }
        let mut ack = this.first.unwrap_or(BatchAck {
            partition_id: None,
            bucket: -1,
            base_offset: -1,
            records: 0,
            log_end_offset: None,
        });
        ack.records = this.records;
        Poll::Ready(Ok(ack))
    }
}

/// What a writer has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Batches acknowledged.
    pub batches: u64,
    /// Encoded bytes acknowledged.
    pub bytes: u64,
    /// Resends after retriable errors.
    pub retries: u64,
    /// Buffer memory reserved now (open batches + unacknowledged batches).
    pub buffered_bytes: u64,
    /// Most buffer memory ever reserved at once; never above
    /// `client.writer.buffer.memory-size`.
    pub max_buffered_bytes: u64,
    /// Times `append` had to wait for buffer memory (back-pressure).
    pub memory_waits: u64,
    /// Times a bucket was held back because the server reported storage
    /// pressure (primary-key tables: a PutKv answer's `pressure`, or
    /// STORAGE_BACKPRESSURE); always 0 for log tables.
    pub throttles: u64,
}

/// The locked accumulator ([`Shared::lock`]). Unlocked when dropped; if
/// that happens while a panic unwinds — a row type's `write_fields` or
/// `datum` that panicked part way through its row, under the lock — the
/// open batches first drop what the torn row left in their columns, so
/// they hold whole rows when the writer is used again (a caller that
/// catches the panic) or delivers them (a writer dropped by it). The
/// check on every unlock is one load of the global panic count.
pub(crate) struct AccumulatorGuard<'a>(OwnerGuard<'a, Accumulator>);

impl std::ops::Deref for AccumulatorGuard<'_> {
    type Target = Accumulator;

    #[inline(always)]
    fn deref(&self) -> &Accumulator {
        &self.0
    }
}

impl std::ops::DerefMut for AccumulatorGuard<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Accumulator {
        &mut self.0
    }
}

impl Drop for AccumulatorGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.drop_partial_rows();
        }
    }
}

/// The accumulator for one call of [`Shared::with_owner`], which forgets
/// it when the call returns: dropped only while a panic unwinds, it drops
/// what a row that panicked part way left in the open batches, as
/// [`AccumulatorGuard`] does.
struct RepairOnPanic<'a>(&'a mut Accumulator);

impl Drop for RepairOnPanic<'_> {
    fn drop(&mut self) {
        self.0.drop_partial_rows();
    }
}

/// State shared by the writer, the linger task, the encoder thread and the
/// sender task. The row path touches only `acc` (its lock); the ledger's
/// failure flag is read once per batch, when a row opens one.
pub(crate) struct Shared {
    /// Owned by the [`AppendWriter`] (its [`OwnerKey`]); the linger task
    /// takes it as a non-owner.
    acc: OwnerLock<Accumulator>,
    /// Buffer memory, completions and counters, shared with the sender.
    pub(crate) ledger: Arc<Ledger>,
    ratio_bits: AtomicU32,
    /// Encoded row batches whose buffers the next batches write into.
    pub(crate) recycled: accumulator::Recycled,
    /// Sealed batches not yet encoded (the accumulator holds the same).
    pub(crate) backlog: Arc<backlog::EncodeBacklog>,
}

impl Shared {
    /// The accumulator, locked by the writer that owns it: taken once per
    /// row, by plain loads and stores while the linger task leaves it
    /// alone ([`OwnerLock`]). What a panic under it would leave half done,
    /// its guard repairs.
    #[inline(always)]
    fn lock_owner<'a>(&'a self, key: &'a mut OwnerKey) -> AccumulatorGuard<'a> {
        AccumulatorGuard(self.acc.lock_owner(key))
    }

    /// `f` on the accumulator, locked by the writer that owns it: the row
    /// path's [`Shared::lock_owner`], with no guard to drop but the panic
    /// repair.
    #[inline(always)]
    fn with_owner<R>(&self, key: &mut OwnerKey, f: impl FnOnce(&mut Accumulator) -> R) -> R {
        self.acc.with_owner(key, |acc| {
            // Dropped only if `f` unwinds, repairing before the lock is
            // left; forgotten when `f` returns, so a row that does not
            // panic pays nothing for it (not even a look at the panic count).
            let repair = RepairOnPanic(acc);
            let out = f(&mut *repair.0);
            std::mem::forget(repair);
            out
        })
    }

    /// The accumulator, locked by anyone but its writer (the linger task):
    /// waits, briefly, for the writer's row in progress.
    fn lock_other(&self) -> AccumulatorGuard<'_> {
        AccumulatorGuard(self.acc.lock_other())
    }

    /// The compression ratio (encoded / uncompressed) learned so far.
    pub(crate) fn ratio(&self) -> f32 {
        f32::from_bits(self.ratio_bits.load(Ordering::Relaxed))
    }

    /// Learns from one encoded batch, as Fluss's `ArrowWriter` does: a
    /// worse ratio is taken at once (batches must not overshoot), a better
    /// one only gradually.
    pub(crate) fn learn_ratio(&self, observed: f32) {
        if !observed.is_finite() || observed <= 0.0 {
            return;
        }
        let current = self.ratio();
        let next = if observed > current {
            observed
        } else {
            current - (current - observed) * 0.05
        };
        self.ratio_bits.store(next.to_bits(), Ordering::Relaxed);
    }

    /// The first failure since the last flush (see [`Ledger::failure`]).
    pub(crate) fn failure(&self) -> Option<ClientError> {
        self.ledger.failure()
    }
}

/// One writer's partition routing (its own view of the table's shared
/// router), for the append and the upsert writer alike.
pub(crate) struct PartitionRouting {
    pub(crate) view: PartitionView,
    pub(crate) router: Arc<PartitionRouter>,
}

impl PartitionRouting {
    /// The routing of a writer of the partitioned `table`: a router that
    /// creates missing partitions when `dynamic_create` allows.
    pub(crate) async fn new(
        client: &FlussClient,
        table: &TableInfo,
        dynamic_create: bool,
    ) -> Result<Self> {
        let router = PartitionRouter::for_client(client, table, dynamic_create).await?;
        Ok(Self {
            view: router.view(),
            router,
        })
    }

    /// The id of `row`'s partition when it exists already; `None` when it
    /// must be created first ([`PartitionRouting::ensure`]). Per row: the
    /// view's lookup, no lock.
    #[inline(always)]
    pub(crate) fn known<R: InternalRow + ?Sized>(&mut self, row: &R) -> Result<Option<i64>> {
        if let Some(id) = self.view.same_as_last(row) {
            return Ok(Some(id));
        }
        Ok(match self.view.lookup(row)? {
            PartitionLookup::Known(id) => Some(id),
            PartitionLookup::Missing => None,
        })
    }

    /// The id of `row`'s partition, created first if it is missing (and
    /// the writer may create partitions).
    pub(crate) async fn ensure<R: InternalRow + ?Sized>(&self, row: &R) -> Result<i64> {
        self.router.ensure(row).await
    }
}

/// Per-writer partition routing, present only for partitioned tables.
struct Partitions {
    routing: PartitionRouting,
    /// Where the partition keys sit in the table's rows (for splitting a
    /// whole RecordBatch by partition).
    key_positions: partitioned_batch::KeyPositions,
}

/// Appends rows or Arrow record batches to one log table. Create with
/// [`FlussClient::append_writer`]. Not shared between tasks: one per
/// producer (it owns its partition view and pending state).
pub struct AppendWriter {
    shared: Arc<Shared>,
    /// This writer's key to `shared`'s accumulator: its rows take the
    /// lock's cheap way.
    owner: OwnerKey,
    table: TableInfo,
    arrow_schema: SchemaRef,
    partitions: Option<Partitions>,
    /// A batch short of memory: (its bucket, the bytes to reserve for it).
    deficit: Option<(accumulator::BucketKey, usize)>,
    /// Whether [`AppendWriter::append_rows`] appends in runs: every row
    /// goes to the same bucket until its batch is sealed (a
    /// non-partitioned table, sticky assigner). Fixed at creation.
    runs: bool,
    linger: tokio::task::JoinHandle<()>,
}

impl AppendWriter {
    /// Builds the writer's per-table state once and starts its linger task,
    /// encoder thread and sender task.
    pub(crate) async fn create(
        client: &FlussClient,
        table: TableInfo,
        config: WriterConfig,
    ) -> Result<Self> {
        config.validate()?;
        if table.descriptor.has_primary_key() {
            return Err(ClientError::Invalid(format!(
                "{} has a primary key: append writers write log tables only",
                table.path
            )));
        }
        let compression = ArrowCompression::from_table_properties(table.descriptor.properties())
            .map_err(|e| ClientError::Format(e.to_string()))?;
        let arrow_schema = to_arrow_schema(table.descriptor.schema());
        let encoder = ArrowLogEncoder::new(arrow_schema.clone(), compression)
            .map_err(|e| ClientError::Format(e.to_string()))?;
        // Only tables that ask for statistics get V1 batches with a
        // statistics block; every other table keeps the V0 hot path.
        let statistics = fjord_format::statistics::resolve_columns(
            table.descriptor.schema(),
            table
                .descriptor
                .properties()
                .get(fjord_format::statistics::TABLE_STATISTICS_COLUMNS)
                .map(String::as_str),
        )
        .map_err(|e| ClientError::Invalid(e.to_string()))?
        .map(|columns| encode::StatisticsPlan {
            schema: table.descriptor.schema().clone(),
            columns,
            block: Vec::new(),
        });
        let schema_id = i16::try_from(table.schema_id).map_err(|_| {
            ClientError::Invalid(format!(
                "schema id {} of {} does not fit a log batch header",
                table.schema_id, table.path
            ))
        })?;
        let assigner = BucketAssigner::new(&table, config.no_key_assigner)?;
        let partitions = if table.is_partitioned() {
            let routing =
                PartitionRouting::new(client, &table, config.dynamic_create_partition).await?;
            let columns = table.descriptor.schema().columns();
            Some(Partitions {
                routing,
                key_positions: partitioned_batch::KeyPositions::new(
                    columns.iter().map(|c| c.name.as_str()),
                    table.partition_keys(),
                )?,
            })
        } else {
            None
        };
        let initial_route = match &partitions {
            None => client.table_route(&table).await?,
            // Partition routes are learned per partition by the sender.
            Some(_) => crate::metadata::TableRoute::empty(),
        };
        let writer_id = if config.enable_idempotence {
            Some(client.init_writer(&table.path).await?)
        } else {
            None
        };

        let runs = partitions.is_none() && assigner.is_sticky();
        let (encode_tx, encode_rx) = std::sync::mpsc::channel();
        let backlog = Arc::new(backlog::EncodeBacklog::default());
        let (send_tx, send_rx) = tokio::sync::mpsc::unbounded_channel();
        let accumulator = Accumulator::new(
            arrow_schema.clone(),
            assigner,
            table.bucket_count(),
            config.batch_size_bytes,
            config.batch_timeout,
            encode_tx,
            Arc::clone(&backlog),
        );
        let (acc, owner) = OwnerLock::new(accumulator);
        let shared = Arc::new(Shared {
            acc,
            ledger: Arc::new(Ledger::new(config.buffer_memory_bytes)),
            ratio_bits: AtomicU32::new(INITIAL_COMPRESSION_RATIO.to_bits()),
            recycled: accumulator::Recycled::default(),
            backlog,
        });
        encode::spawn(
            encoder,
            schema_id,
            statistics,
            idempotence::Sequences::new(writer_id),
            encode_rx,
            send_tx,
            Arc::clone(&shared),
        )
        .map_err(|e| ClientError::Invalid(format!("cannot start the encoder thread: {e}")))?;
        let sender = sender::Sender::new(
            client.clone(),
            table.clone(),
            config.clone(),
            sender::BatchRequest::ProduceLog,
            Arc::clone(&shared.ledger),
            send_rx,
            initial_route,
        );
        tokio::spawn(sender.run());
        let linger = tokio::spawn(linger(Arc::downgrade(&shared), config.batch_timeout));
        Ok(Self {
            shared,
            owner,
            table,
            arrow_schema,
            partitions,
            deficit: None,
            runs,
            linger,
        })
    }

    /// The Arrow schema rows and batches must have.
    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow_schema
    }

    /// The table written.
    pub fn table(&self) -> &TableInfo {
        &self.table
    }

    /// Appends one row. The fast path awaits nothing: the row goes into its
    /// bucket's builder under one uncontended lock. It waits only when the
    /// buffer memory is exhausted (back-pressure) or the row's partition
    /// must be created first, or the encoder is behind. Errors: a row that
    /// does not match the schema or that buffer memory could never hold,
    /// even in a batch of its own (nothing appended; a row that fits only
    /// alone is put in a batch of its own), or an earlier batch's failure (reported by the
    /// first row that would open a new batch after it; rows already in an
    /// open batch are still sent, and `flush` reports the failure too).
    ///
    /// Cancelling: a call dropped before it completes loses no buffer
    /// memory, but whether its row was appended depends on what it was
    /// waiting for. Waiting for memory or the encoder after its row went
    /// in, the row is in and will be sent; waiting before appending it (to
    /// settle an earlier call's memory, for its partition to be created, or
    /// for the encoder before appending a row again into a batch of its
    /// own), it is not. A caller that gives up on a call and appends the
    /// row again may write it twice.
    pub fn append<'a, R: InternalRow + ?Sized>(
        &'a mut self,
        row: &'a R,
    ) -> impl Future<Output = Result<()>> + 'a {
        Append::new(self, row, AppendWriter::wait_then_append::<R>)
    }

    /// The partition of `row` when it exists already (`Some(None)` for a
    /// table without partitions); `None` when it must be created first.
    /// An earlier batch's failure is checked by the accumulator once per
    /// batch (when a row opens one), not here per row.
    #[inline(always)]
    fn known_partition<R: InternalRow + ?Sized>(&mut self, row: &R) -> Result<Option<Option<i64>>> {
        match &mut self.partitions {
            None => Ok(Some(None)),
            Some(p) => Ok(p.routing.known(row)?.map(Some)),
        }
    }

    /// [`AppendWriter::append`] after [`AppendWriter::append_now`] asked
    /// for a wait: waits for what `outcome` asks, then appends the row
    /// again if it was not appended; with no outcome, the whole waiting
    /// path ([`AppendWriter::append_waiting`]).
    async fn wait_then_append<R: InternalRow + ?Sized>(
        &mut self,
        row: &R,
        outcome: Option<RowOutcome>,
    ) -> Result<()> {
        if let Some(outcome) = outcome {
            if !self.wait_for(outcome).await? {
                return Ok(());
            }
        }
        self.append_waiting(row).await
    }

    /// [`AppendWriter::append`] with every wait it may need: settling a
    /// deficit left by an earlier (maybe cancelled) call, creating the row's
    /// partition, memory and the encoder.
    async fn append_waiting<R: InternalRow + ?Sized>(&mut self, row: &R) -> Result<()> {
        if self.deficit.is_some() {
            self.settle_deficit().await?;
        }
        let partition = match self.known_partition(row)? {
            Some(partition) => partition,
            None => match &self.partitions {
                Some(p) => Some(p.routing.ensure(row).await?),
                None => None,
            },
        };
        loop {
            let shared = &*self.shared;
            let outcome = shared
                .lock_owner(&mut self.owner)
                .append_row(partition, row, shared)?;
            if matches!(outcome, RowOutcome::Buffered) || !self.wait_for(outcome).await? {
                return Ok(());
            }
        }
    }

    /// Waits as `outcome` asks: for memory (the back-pressure), then credits
    /// it to the batch in debt; or for the encoder. True when the row was
    /// not appended and must be appended again ([`RowOutcome::AppendAgain`]).
    async fn wait_for(&mut self, outcome: RowOutcome) -> Result<bool> {
        match outcome {
            RowOutcome::Buffered => Ok(false),
            RowOutcome::Deficit { key, need_bytes } => {
                self.deficit = Some((key, need_bytes));
                self.settle_deficit().await?;
                Ok(false)
            }
            RowOutcome::EncoderBusy => {
                self.shared.backlog.wait_until_not_full().await?;
                Ok(false)
            }
            RowOutcome::AppendAgain => {
                if self.shared.backlog.is_full() {
                    self.shared.backlog.wait_until_not_full().await?;
                }
                Ok(true)
            }
        }
    }

    /// Appends `rows` in order, as many [`AppendWriter::append`] calls
    /// would — same batches, buckets, back-pressure and errors — for less
    /// CPU per row: for a non-partitioned table with the sticky bucket
    /// assigner (the default for tables without bucket keys) the rows go
    /// in runs of up to 256, each under one lock and read column by column
    /// ([`RowBatchBuilder::append_rows`](crate::row::RowBatchBuilder::append_rows));
    /// other tables (partitioned, hashed or round-robin: a bucket per row)
    /// take them one at a time. When a row is refused (a value that does
    /// not fit its column, or a row buffer memory could never hold), the
    /// rows before it are appended and the error names the refused row's
    /// index in `rows`. A call cancelled while it waits (for memory or the
    /// encoder) has appended a prefix of `rows` whose length it cannot
    /// report: call `append` row by row where that matters.
    pub async fn append_rows<R: InternalRow>(&mut self, rows: &[R]) -> Result<()> {
        if !self.runs {
            for (index, row) in rows.iter().enumerate() {
                self.append(row).await.map_err(|e| at_row(index, e))?;
            }
            return Ok(());
        }
        let mut done = 0;
        while done < rows.len() {
            if self.deficit.is_some() {
                self.settle_deficit().await?;
            }
            let shared = &*self.shared;
            let run = shared
                .lock_owner(&mut self.owner)
                .append_run(&rows[done..], shared)?;
            done += run.appended;
            // A run never asks to append again: it ends before such a row.
            self.wait_for(run.outcome).await?;
            if let Some(e) = run.refused {
                return Err(at_row(done, e));
            }
        }
        Ok(())
    }

    /// Reserves what a batch short of memory lacks (waiting for
    /// acknowledgements: this is the back-pressure), then credits it. Kept
    /// in `self` across the wait so a cancelled `append` loses nothing: the
    /// next call resumes.
    async fn settle_deficit(&mut self) -> Result<()> {
        let Some((key, need)) = self.deficit else {
            return Ok(());
        };
        self.shared.ledger.pool.reserve(need).await?;
        self.deficit = None;
        self.shared
            .lock_owner(&mut self.owner)
            .settle(key, need, &self.shared.ledger.pool)
    }

    /// Appends a whole RecordBatch of the writer's schema as its own log
    /// batch (split per partition for a partitioned table — missing
    /// partitions are created as for rows — and per bucket for a
    /// hash-bucketed table), after any rows already buffered for that bucket. Waits only for buffer memory.
    /// The returned completion resolves when the server acknowledged it.
    pub async fn append_batch(&mut self, batch: RecordBatch) -> Result<BatchCompletion> {
        if self.deficit.is_some() {
            self.settle_deficit().await?;
        }
        if let Some(e) = self.shared.failure() {
            return Err(e);
        }
        if batch.schema_ref().fields() != self.arrow_schema.fields() {
            return Err(ClientError::Invalid(format!(
                "record batch schema {:?} does not match the Arrow schema of {} ({:?})",
                batch.schema_ref().fields(),
                self.table.path,
                self.arrow_schema.fields()
            )));
        }
        let records = i32::try_from(batch.num_rows()).map_err(|_| {
            ClientError::Invalid(format!("a batch of {} rows is too large", batch.num_rows()))
        })?;
        let mut completion = BatchCompletion {
            parts: Vec::new(),
            records,
            first: None,
        };
        if records == 0 {
            return Ok(completion);
        }
        let by_partition: Vec<(Option<i64>, RecordBatch)> = match &mut self.partitions {
            None => vec![(None, batch)],
            Some(p) => {
                partitioned_batch::split_by_partition(&batch, &p.key_positions, &mut p.routing.view)
                    .await?
                    .into_iter()
                    .map(|(id, part)| (Some(id), part))
                    .collect()
            }
        };
        // Every part is split off and sized before any is sent: a batch the
        // buffer memory can never hold is refused whole, not after some of
        // its partitions went out (a retry would duplicate those).
        let mut parts = Vec::new();
        for (partition, batch) in by_partition {
            self.split_partition_batch(partition, batch, &mut parts)?;
        }
        for part in &parts {
            self.shared.ledger.pool.check_fits(part.2)?;
        }
        for (key, part, reserved_bytes) in parts {
            // No wait for the encoder backlog here: the caller's batches
            // bring their own buffers (the backlog bounds the writer's), and
            // a wait per batch costs a wake-up that small batches (the
            // `long` workload's) feel; buffer memory bounds them.
            self.shared.ledger.pool.reserve(reserved_bytes).await?;
            let (tx, rx) = oneshot::channel();
            completion.parts.push(rx);
            let sealed = SealedBatch {
                key,
                batch: part,
                estimated_bytes: 0,
                reserved_bytes,
                completion: Some(tx),
            };
            self.shared.lock_owner(&mut self.owner).send_whole(sealed)?;
        }
        Ok(completion)
    }

    /// Splits the rows of one partition (or of the whole non-partitioned
    /// table) into one part per bucket they go to, each with the buffer
    /// memory it will hold: its own rows' bytes, not those of the caller's
    /// batch it may be a slice of.
    fn split_partition_batch(
        &mut self,
        partition: Option<i64>,
        batch: RecordBatch,
        parts: &mut Vec<(accumulator::BucketKey, RecordBatch, usize)>,
    ) -> Result<()> {
        let buckets = self
            .shared
            .lock_owner(&mut self.owner)
            .assigner()
            .assign_batch(&batch)?;
        let by_bucket: Vec<(i32, RecordBatch)> = match buckets {
            BatchBuckets::Single(bucket) => vec![(bucket, batch)],
            BatchBuckets::PerRow(per_row) => split_by_bucket(&batch, &per_row)?,
        };
        for (bucket, part) in by_bucket {
            let bytes = sliced_bytes(&part);
            parts.push(((partition, bucket), part, bytes));
        }
        Ok(())
    }

    /// Seals every open batch and waits until every row and batch appended
    /// so far is acknowledged. Returns the first failure since the last
    /// flush (the rows of a failed batch are not written).
    pub async fn flush(&mut self) -> Result<()> {
        if self.deficit.is_some() {
            self.settle_deficit().await?;
        }
        let target = {
            let mut acc = self.shared.lock_owner(&mut self.owner);
            acc.seal_all()?;
            acc.sealed_count()
        };
        self.shared.ledger.wait_done(target).await;
        match self.shared.ledger.take_first_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Flushes, then stops the writer's background work.
    pub async fn close(mut self) -> Result<()> {
        let result = self.flush().await;
        self.shared.lock_owner(&mut self.owner).close();
        result
    }

    /// Counters of what the writer has done.
    pub fn stats(&self) -> WriterStats {
        self.shared.ledger.writer_stats()
    }
}

impl<'r, R: InternalRow + ?Sized> AppendsNow<&'r R> for AppendWriter {
    type Outcome = RowOutcome;

    /// [`AppendWriter::append`] without waiting: appends the row unless
    /// something must be waited for first (a deficit left to settle, the
    /// row's partition to create).
    #[inline(always)]
    fn append_now(&mut self, row: &'r R) -> Result<AppendNow<RowOutcome>> {
        if self.deficit.is_some() {
            return Ok(AppendNow::Wait(None));
        }
        let Some(partition) = self.known_partition(row)? else {
            return Ok(AppendNow::Wait(None));
        };
        let shared = &*self.shared;
        let appended = shared.with_owner(&mut self.owner, move |acc| {
            acc.append_row(partition, row, shared)
        });
        Ok(match appended? {
            RowOutcome::Buffered => AppendNow::Appended,
            outcome => AppendNow::Wait(Some(outcome)),
        })
    }
}

impl Drop for AppendWriter {
    /// Hands every buffered row on to be sent (as `flush` would, without
    /// waiting), then lets the background work end once it is sent.
    fn drop(&mut self) {
        let mut acc = self.shared.lock_owner(&mut self.owner);
        let _ = acc.seal_all();
        acc.close();
        drop(acc);
        self.linger.abort();
    }
}

/// What a writer's row path did with a row without waiting
/// ([`AppendsNow::append_now`]).
pub(crate) enum AppendNow<O> {
    /// The row is in its batch; nothing to wait for.
    Appended,
    /// The row led to a wait: what its outcome asks (it may be in its batch
    /// already), or, with `None`, whatever must be waited for before it is
    /// tried (a deficit to settle, a partition to create).
    Wait(Option<O>),
}

/// A writer whose row path first tries to take a row without waiting:
/// the append writer (rows) and the upsert writer (upserts and deletes).
/// `Row` is what one call hands over (a reference, or a reference with
/// the kind of write), copied into the [`Append`] future.
pub(crate) trait AppendsNow<Row> {
    /// What a row that needs a wait reports.
    type Outcome;

    /// Takes `row` unless something must be waited for.
    fn append_now(&mut self, row: Row) -> Result<AppendNow<Self::Outcome>>;
}

/// The future a writer's `append` (or `upsert`, `delete`) returns. Its
/// first poll takes the row when nothing must be waited for — nearly every
/// row — at little more than the take's own cost: the future is five
/// words. The waiting path (memory, the encoder, a partition to create),
/// built by `then_wait` only when a row needs it, is boxed: one allocation
/// per wait, about once a batch, where an `async fn` here carried that
/// path's state inline (2 KB) and cost about 40 instructions a row more in
/// building, polling and dropping it (docs/bench-notes/client.md, "Seventh
/// pass"). Boxed, it is also `Unpin`, so nothing here needs pinning by hand.
pub(crate) struct Append<'a, Wr, Row, W, F> {
    /// Taken by the first poll.
    writer: Option<&'a mut Wr>,
    row: Row,
    /// Builds the waiting path; taken when it is built.
    then_wait: Option<W>,
    /// The waiting path, once built.
    waiting: Option<Pin<Box<F>>>,
}

impl<'a, Wr, Row, W, F> Append<'a, Wr, Row, W, F> {
    /// The future of one row handed to `writer`; `then_wait` builds the
    /// waiting path should the first poll need one.
    #[inline(always)]
    pub(crate) fn new(writer: &'a mut Wr, row: Row, then_wait: W) -> Self {
        Self {
            writer: Some(writer),
            row,
            then_wait: Some(then_wait),
            waiting: None,
        }
    }
}

impl<'a, Wr, Row, W, F> Future for Append<'a, Wr, Row, W, F>
where
    Wr: AppendsNow<Row>,
    Row: Copy + Unpin,
    W: FnOnce(&'a mut Wr, Row, Option<Wr::Outcome>) -> F + Unpin,
    F: Future<Output = Result<()>>,
{
    type Output = Result<()>;

    // Always inlined into the caller's loop: left to the compiler, rows of
    // `[Datum; N]` got it as a call, 478 instead of 443 instructions a row
    // on the caller's thread (`scripts/callgrind-caller.sh`, 300 k rows;
    // docs/bench-notes/client.md, "Ninth pass").
    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        if let Some(waiting) = this.waiting.as_mut() {
            return waiting.as_mut().poll(cx);
        }
        let writer = this
            .writer
            .take()
            .expect("an append polled again after it completed");
        let outcome = match writer.append_now(this.row) {
            Ok(AppendNow::Appended) => return Poll::Ready(Ok(())),
            Err(e) => return Poll::Ready(Err(e)),
            Ok(AppendNow::Wait(outcome)) => outcome,
        };
        let then_wait = this
            .then_wait
            .take()
            .expect("the waiting path is built once");
        this.waiting
            .insert(Box::pin(then_wait(writer, this.row, outcome)))
            .as_mut()
            .poll(cx)
    }
}

/// `error` of the row at `index` of an [`AppendWriter::append_rows`] call:
/// a refused row's error names it; other errors (an earlier batch's
/// failure, a closed writer) are about the writer and pass unchanged.
#[cold]
fn at_row(index: usize, error: ClientError) -> ClientError {
    match error {
        ClientError::Invalid(reason) => ClientError::Invalid(format!("row {index}: {reason}")),
        other => other,
    }
}

/// State whose open batches the linger task seals when they grow old:
/// the append writer's [`Shared`] and the upsert writer's.
pub(crate) trait SealsExpired: Send + Sync + 'static {
    /// Seals the batches opened before `now - batch-timeout` (taking the
    /// accumulator's lock as a non-owner) and says when the next open one
    /// expires (`None`: none is open).
    fn seal_expired(&self, now: Instant) -> Result<Option<Instant>>;
}

impl SealsExpired for Shared {
    fn seal_expired(&self, now: Instant) -> Result<Option<Instant>> {
        self.lock_other().seal_expired(now)
    }
}

/// Seals batches older than the batch timeout, also while the caller is
/// idle. Ends when the writer is gone.
pub(crate) async fn linger<S: SealsExpired>(shared: Weak<S>, timeout: std::time::Duration) {
    let mut wake = Instant::now() + timeout;
    loop {
        tokio::time::sleep_until(wake.into()).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let now = Instant::now();
        wake = match shared.seal_expired(now) {
            Ok(Some(at)) => at,
            Ok(None) => now + timeout,
            Err(e) => {
                tracing::error!(error = %e, "sealing expired batches failed");
                now + timeout
            }
        };
    }
}

/// Bytes of the buffer ranges `batch`'s columns use (a slice's share of
/// its parent's buffers).
fn sliced_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| {
            c.to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| c.get_array_memory_size())
        })
        .sum()
}

/// Splits `batch` into one batch per bucket, rows kept in order.
fn split_by_bucket(batch: &RecordBatch, buckets: &[i32]) -> Result<Vec<(i32, RecordBatch)>> {
    // Rows per bucket in a vector indexed by bucket id (one push per row, no
    // search), parts emitted in the order their buckets first appear.
    let mut rows_of: Vec<Vec<u32>> = Vec::new();
    let mut order: Vec<i32> = Vec::new();
    for (row, &bucket) in buckets.iter().enumerate() {
        let index = usize::try_from(bucket)
            .map_err(|_| ClientError::Invalid(format!("negative bucket {bucket} for row {row}")))?;
        if index >= rows_of.len() {
            rows_of.resize_with(index + 1, Vec::new);
        }
        if rows_of[index].is_empty() {
            order.push(bucket);
        }
        rows_of[index].push(row as u32);
    }
    order
        .into_iter()
        .map(|bucket| (bucket, std::mem::take(&mut rows_of[bucket as usize])))
        .map(|(bucket, rows)| {
            let rows = arrow_array::UInt32Array::from(rows);
            arrow_select::take::take_record_batch(batch, &rows)
                .map(|part| (bucket, part))
                .map_err(|e| ClientError::Format(format!("splitting a batch by bucket: {e}")))
        })
        .collect()
}
