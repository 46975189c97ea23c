//! The upsert writer for primary-key tables: upserts, deletes and partial
//! updates of rows — the append writer's row API (`InternalRow`, typed
//! rows with a `write_fields` fast path, `GenericRow`, `[Datum; N]`) —
//! encoded straight into Fluss KV batches and written with PutKv.
//!
//! It is the append writer with another batch format. Shared with it
//! (`crate::writer`): the options (`client.writer.*`), the buffer-memory
//! bound and its back-pressure (`append` waits instead of growing), the
//! ledger of batches in flight (one completion per batch, never per
//! record), idempotence (InitWriter, a batch sequence per bucket, Fluss's
//! rules for sequence errors), the sender task (requests per leader,
//! in-flight bound per bucket, retries with back-off, route refreshes,
//! connection write turns), the linger task, the per-bucket slots and the
//! partition routing with dynamic creation. Its own: the record path
//! ([`accumulator`]: key, bucket and value encoded per record into the
//! bucket's KV batch, sealed by size and age), and what PutKv adds: target
//! columns for partial updates, the aggregation mode, the changelog end
//! offset of every acknowledged batch, and storage pressure, which holds a
//! bucket back (`client.writer.kv-backpressure.max-throttle`) and never
//! fails a batch.
//!
//! Per record: the partition view's lookup (partitioned tables), the
//! value written into a reused buffer, the key into the key encoder's,
//! one Murmur hash, one copy of each into the batch, under the
//! accumulator's owner lock taken the owner's way (plain loads and
//! stores). No allocation, no formatting, no reference count.

pub(crate) mod accumulator;
mod options;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use fjord_format::row::RowFormat;

use crate::admin::TableInfo;
use crate::client::FlussClient;
use crate::error::{ClientError, Result};
use crate::kv::keys::KeyPlan;
use crate::kv::TABLE_KV_FORMAT;
use crate::row::value::ValueEncoder;
use crate::row::InternalRow;
use crate::writer::accumulator::BucketKey;
use crate::writer::idempotence::Sequences;
use crate::writer::ledger::Ledger;
use crate::writer::owner_lock::{OwnerKey, OwnerLock};
use crate::writer::sender::{BatchRequest, Sender};
use crate::writer::{
    linger, Append, AppendNow, AppendsNow, PartitionRouting, SealsExpired, WriterConfig,
    WriterStats,
};
use accumulator::{KvAccumulator, KvAccumulatorConfig, KvOp, PutOutcome};

pub use options::{AggMode, UpsertOptions};

/// The changelog end offset of one bucket after the writer's last
/// acknowledged batch to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BucketOffset {
    /// The partition, for a partitioned table.
    pub partition_id: Option<i64>,
    /// The bucket.
    pub bucket: i32,
    /// The offset the bucket's changelog ends at (the next record's).
    pub log_end_offset: i64,
}

/// State shared by the writer, its linger task and its sender task.
struct UpsertShared {
    /// Owned by the [`UpsertWriter`] (its [`OwnerKey`]); the linger task
    /// takes it as a non-owner.
    acc: OwnerLock<KvAccumulator>,
    ledger: Arc<Ledger>,
}

impl SealsExpired for UpsertShared {
    fn seal_expired(&self, now: Instant) -> Result<Option<Instant>> {
        self.acc.lock_other().seal_expired(now)
    }
}

/// Upserts and deletes rows of one primary-key table. Create with
/// [`FlussClient::upsert_writer`] (or [`FlussClient::upsert_writer_with`]
/// for partial updates). Not shared between tasks: one per producer.
///
/// Guarantees: the records of one bucket reach the server in the order
/// they were written and are applied at most once (idempotence on by
/// default); a record written before a successful [`UpsertWriter::flush`]
/// is acknowledged (per `client.writer.acks`); buffered bytes never exceed
/// `client.writer.buffer.memory-size`.
pub struct UpsertWriter {
    shared: Arc<UpsertShared>,
    owner: OwnerKey,
    table: TableInfo,
    partitions: Option<PartitionRouting>,
    /// A batch short of memory: (its bucket, the bytes to reserve for it).
    deficit: Option<(BucketKey, usize)>,
    target_columns: Option<Box<[usize]>>,
    linger: tokio::task::JoinHandle<()>,
}

/// One record handed to the writer: the row and what to do with it.
pub(crate) struct KvWrite<'r, R: ?Sized> {
    row: &'r R,
    op: KvOp,
}

impl<R: ?Sized> Clone for KvWrite<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: ?Sized> Copy for KvWrite<'_, R> {}

impl<'r, R: InternalRow + ?Sized> AppendsNow<KvWrite<'r, R>> for UpsertWriter {
    type Outcome = PutOutcome;

    /// Writes the record unless something must be waited for first (a
    /// deficit left to settle, the row's partition to create).
    #[inline(always)]
    fn append_now(&mut self, write: KvWrite<'r, R>) -> Result<AppendNow<PutOutcome>> {
        if self.deficit.is_some() {
            return Ok(AppendNow::Wait(None));
        }
        let partition = match &mut self.partitions {
            None => None,
            Some(p) => match p.known(write.row)? {
                Some(id) => Some(id),
                None => return Ok(AppendNow::Wait(None)),
            },
        };
        let outcome = self.shared.acc.with_owner(&mut self.owner, |acc| {
            acc.put(partition, write.row, write.op)
        })?;
        Ok(match outcome {
            PutOutcome::Buffered => AppendNow::Appended,
            outcome => AppendNow::Wait(Some(outcome)),
        })
    }
}

impl UpsertWriter {
    /// Builds the writer's per-table state once and starts its linger and
    /// sender tasks.
    pub(crate) async fn create(
        client: &FlussClient,
        table: TableInfo,
        config: WriterConfig,
        options: UpsertOptions,
    ) -> Result<Self> {
        config.validate()?;
        let target_columns = options.resolve_target_columns(&table)?;
        let format = match table.descriptor.properties().get(TABLE_KV_FORMAT) {
            None => RowFormat::default(),
            Some(name) => name.parse::<RowFormat>().map_err(|e| {
                ClientError::Invalid(format!("{}: {TABLE_KV_FORMAT}: {e}", table.path))
            })?,
        };
        let schema_id = i16::try_from(table.schema_id).map_err(|_| {
            ClientError::Invalid(format!(
                "schema id {} of {} does not fit a KV batch header",
                table.schema_id, table.path
            ))
        })?;
        let keys = KeyPlan::new(&table)?;
        let values = ValueEncoder::new(table.descriptor.schema(), format)?;
        let partitions = if table.is_partitioned() {
            Some(PartitionRouting::new(client, &table, config.dynamic_create_partition).await?)
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
        let ledger = Arc::new(Ledger::new(config.buffer_memory_bytes));
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let accumulator = KvAccumulator::new(KvAccumulatorConfig {
            keys,
            values,
            schema_id,
            batch_size_bytes: config.batch_size_bytes,
            batch_timeout: config.batch_timeout,
            sequences: Sequences::new(writer_id),
            tx,
            ledger: Arc::clone(&ledger),
        });
        let (acc, owner) = OwnerLock::new(accumulator);
        let shared = Arc::new(UpsertShared {
            acc,
            ledger: Arc::clone(&ledger),
        });
        let request = BatchRequest::PutKv {
            target_columns: target_columns.iter().flatten().map(|&c| c as i32).collect(),
            agg_mode: options.agg_mode.wire(),
        };
        let sender = Sender::new(
            client.clone(),
            table.clone(),
            config.clone(),
            request,
            ledger,
            rx,
            initial_route,
        );
        tokio::spawn(sender.run());
        let linger = tokio::spawn(linger(Arc::downgrade(&shared), config.batch_timeout));
        Ok(Self {
            shared,
            owner,
            table,
            partitions,
            deficit: None,
            target_columns,
            linger,
        })
    }

    /// The table written.
    pub fn table(&self) -> &TableInfo {
        &self.table
    }

    /// The columns a partial update writes (positions, in the order
    /// given), or `None` when whole rows are written.
    pub fn target_columns(&self) -> Option<&[usize]> {
        self.target_columns.as_deref()
    }

    /// Upserts `row`: a whole row of the table (one value per column, in
    /// order); for a partial-update writer the values of the other columns
    /// are not written. The fast path awaits nothing: the record goes into
    /// its bucket's batch under one uncontended lock. It waits only when
    /// buffer memory is exhausted (back-pressure) or the row's partition
    /// must be created first.
    ///
    /// Errors: a row the table cannot take (its width, a value its column
    /// cannot hold, a NULL key column; nothing is written), or an earlier
    /// batch's failure (reported by the first record that would open a new
    /// batch after it; `flush` reports it too).
    ///
    /// Cancelling: as [`crate::AppendWriter::append`]: a call dropped while
    /// it waits for memory has written its record; one dropped before (to
    /// settle an earlier call's memory or create its partition) has not.
    pub fn upsert<'a, R: InternalRow + ?Sized>(
        &'a mut self,
        row: &'a R,
    ) -> impl Future<Output = Result<()>> + 'a {
        let write = KvWrite {
            row,
            op: KvOp::Upsert,
        };
        Append::new(self, write, UpsertWriter::wait_then_put::<R>)
    }

    /// Deletes the row whose primary key `row` holds: a whole row of the
    /// table, of which only the primary-key (and partition) columns are
    /// read. Deleting a key that does not exist changes nothing. For a
    /// partial-update writer it is Fluss's partial delete: the target
    /// columns are cleared, and the row goes when nothing else is left.
    /// Waits, fails and cancels as [`UpsertWriter::upsert`] does.
    pub fn delete<'a, R: InternalRow + ?Sized>(
        &'a mut self,
        row: &'a R,
    ) -> impl Future<Output = Result<()>> + 'a {
        let write = KvWrite {
            row,
            op: KvOp::Delete,
        };
        Append::new(self, write, UpsertWriter::wait_then_put::<R>)
    }

    /// [`UpsertWriter::upsert`] or `delete` after the fast path asked for a
    /// wait: settles the deficit it reported, or, with no outcome, waits
    /// for what must come first and writes the record.
    async fn wait_then_put<R: InternalRow + ?Sized>(
        &mut self,
        write: KvWrite<'_, R>,
        outcome: Option<PutOutcome>,
    ) -> Result<()> {
        if let Some(outcome) = outcome {
            return self.wait_for(outcome).await;
        }
        if self.deficit.is_some() {
            self.settle_deficit().await?;
        }
        let partition = match &mut self.partitions {
            None => None,
            Some(p) => Some(match p.known(write.row)? {
                Some(id) => id,
                None => p.ensure(write.row).await?,
            }),
        };
        let outcome = self.shared.acc.with_owner(&mut self.owner, |acc| {
            acc.put(partition, write.row, write.op)
        })?;
        self.wait_for(outcome).await
    }

    /// Waits as `outcome` asks: for memory (the back-pressure), then
    /// credits it to the batch in debt.
    async fn wait_for(&mut self, outcome: PutOutcome) -> Result<()> {
        match outcome {
            PutOutcome::Buffered => Ok(()),
            PutOutcome::Deficit { key, need_bytes } => {
                self.deficit = Some((key, need_bytes));
                self.settle_deficit().await
            }
        }
    }

    /// Reserves what a batch short of memory lacks (waiting for
    /// acknowledgements), then credits it. Kept in `self` across the wait
    /// so a cancelled call loses nothing: the next call resumes.
    async fn settle_deficit(&mut self) -> Result<()> {
        let Some((key, need)) = self.deficit else {
            return Ok(());
        };
        self.shared.ledger.pool.reserve(need).await?;
        self.deficit = None;
        self.shared
            .acc
            .with_owner(&mut self.owner, |acc| acc.settle(key, need))
    }

    /// Seals every open batch and waits until every record written so far
    /// is acknowledged. Returns the first failure since the last flush (the
    /// records of a failed batch are not written).
    pub async fn flush(&mut self) -> Result<()> {
        if self.deficit.is_some() {
            self.settle_deficit().await?;
        }
        let target = self.shared.acc.with_owner(&mut self.owner, |acc| {
            acc.seal_all()?;
            Ok::<_, ClientError>(acc.sealed_count())
        })?;
        self.shared.ledger.wait_done(target).await;
        match self.shared.ledger.take_first_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Flushes, then stops the writer's background work.
    pub async fn close(mut self) -> Result<()> {
        let result = self.flush().await;
        self.shared
            .acc
            .with_owner(&mut self.owner, |acc| acc.close());
        result
    }

    /// Counters of what the writer has done.
    pub fn stats(&self) -> WriterStats {
        self.shared.ledger.writer_stats()
    }

    /// Per bucket written so far, the offset its changelog ended at after
    /// the writer's last acknowledged batch to it (PutKv's
    /// `log_end_offset`), in partition and bucket order. After a
    /// successful [`UpsertWriter::flush`], every record written before it
    /// is in the changelog below these offsets.
    pub fn log_end_offsets(&self) -> Vec<BucketOffset> {
        self.shared
            .ledger
            .log_end_offsets()
            .into_iter()
            .map(|((partition_id, bucket), log_end_offset)| BucketOffset {
                partition_id,
                bucket,
                log_end_offset,
            })
            .collect()
    }
}

impl Drop for UpsertWriter {
    /// Hands every buffered record on to be sent (as `flush` would, without
    /// waiting), then lets the background work end once it is sent.
    fn drop(&mut self) {
        self.shared.acc.with_owner(&mut self.owner, |acc| {
            let _ = acc.seal_all();
            acc.close();
        });
        self.linger.abort();
    }
}

impl FlussClient {
    /// A writer of whole rows (upserts and deletes) to the primary-key
    /// table at `path`, with `config` (the append writer's
    /// `client.writer.*` options). Builds everything per table once (key
    /// and value encoders, bucket plan, partition router, writer id) and
    /// starts its background work on the current tokio runtime.
    pub async fn upsert_writer(
        &self,
        path: &crate::TablePath,
        config: WriterConfig,
    ) -> Result<UpsertWriter> {
        self.upsert_writer_with(path, config, UpsertOptions::default())
            .await
    }

    /// [`FlussClient::upsert_writer`] with `options`: a partial update of
    /// some columns, or another aggregation mode. Refuses target columns
    /// that leave out a primary-key column, name a NOT NULL column outside
    /// the key or an auto-increment column, as Fluss's clients do.
    pub async fn upsert_writer_with(
        &self,
        path: &crate::TablePath,
        config: WriterConfig,
        options: UpsertOptions,
    ) -> Result<UpsertWriter> {
        let table = self.table_info(path).await?;
        UpsertWriter::create(self, table, config, options).await
    }
}
