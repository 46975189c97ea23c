//! The upsert writer's record path: each upsert or delete is encoded (key,
//! and for an upsert the value row) and appended straight into its
//! bucket's open KV batch; a batch is sealed when the next record would
//! take it past `client.writer.batch-size`, when it is older than
//! `client.writer.batch-timeout` (the linger task), on memory pressure, or
//! on flush. A sealed batch is finished in place (record count, CRC-32C),
//! stamped with the writer id and the bucket's next batch sequence, and
//! handed to the sender task.
//!
//! Everything a record needs is built once per writer: the key plan, the
//! value encoder, the slots. Per record: the value is written into one
//! reused buffer, the key into the key encoder's, and both are copied once
//! into the batch's buffer, which is reused across batches (acknowledged
//! batches give theirs back). Memory is reserved from
//! `client.writer.buffer.memory-size` in steps, never per record; the
//! sequence, the clock and the earlier-failure flag are read once per
//! batch, when a record opens one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use fjord_format::kv::batch::{record_size, KvBatchBuilder, HEADER_SIZE};
use tokio::sync::mpsc::UnboundedSender;

use crate::error::{ClientError, Result};
use crate::kv::keys::KeyPlan;
use crate::row::value::ValueEncoder;
use crate::row::InternalRow;
use crate::writer::accumulator::{BucketKey, RESERVE_CHUNK_BYTES};
use crate::writer::encode::EncodedBatch;
use crate::writer::idempotence::Sequences;
use crate::writer::ledger::Ledger;
use crate::writer::slots::Slots;

/// Smallest reservation step, so a writer with a tiny batch size does not
/// reserve memory per record.
const RESERVE_CHUNK_MIN_BYTES: usize = 4 * 1024;

/// A bucket's next batch is presized for at most its last batch plus this
/// fraction (1/4) of it: full batches refill without growing, while a
/// bucket whose batches are sealed by time holds little unused room.
const PRESIZE_GROWTH_DIVISOR: usize = 4;

/// What one call writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KvOp {
    /// The row's key gets the row (a whole row, or its target columns for
    /// a partial update).
    Upsert,
    /// The row's key is deleted (only its key columns are read).
    Delete,
}

/// What writing one record led to.
pub(crate) enum PutOutcome {
    /// The record is in its batch, within reserved memory.
    Buffered,
    /// The record is in its batch, but the memory pool is exhausted: the
    /// caller reserves `need_bytes` (waiting for acknowledgements, the
    /// back-pressure), then [`KvAccumulator::settle`]s them to `key`'s batch.
    Deficit {
        /// The bucket whose batch is short of memory.
        key: BucketKey,
        /// Memory it needs.
        need_bytes: usize,
    },
}

/// One bucket's open KV batch.
struct Slot {
    /// The open batch; `None` while the bucket has none (its buffer went
    /// with the last batch).
    builder: Option<KvBatchBuilder>,
    opened_at: Instant,
    /// Memory reserved for the batch so far.
    reserved_bytes: usize,
    /// Memory the batch uses beyond `reserved_bytes`, which the writer is
    /// waiting to reserve; the linger task leaves such a batch open.
    debt_bytes: usize,
    /// The batch has no room for another record like its last: sealed as
    /// soon as its memory is settled.
    full: bool,
    /// Bytes the batch's buffer was presized for (counted in
    /// [`Batches::presized_bytes`] while it is open).
    presized_bytes: usize,
    /// Size of the bucket's last batch, to presize the next.
    last_batch_bytes: usize,
}

impl Slot {
    fn idle() -> Result<Self> {
        Ok(Self {
            builder: None,
            opened_at: Instant::now(),
            reserved_bytes: 0,
            debt_bytes: 0,
            full: false,
            presized_bytes: 0,
            last_batch_bytes: 0,
        })
    }
}

/// A record's key, bucket and value (`None`: a delete), borrowed from the
/// encoders' buffers.
type Encoded<'a> = (&'a [u8], i32, Option<&'a [u8]>);

/// Encodes a record's key, bucket and value: what the accumulator reads
/// per record, built once per writer.
struct RecordEncoder {
    keys: KeyPlan,
    values: ValueEncoder,
    /// The value of the record being written.
    value: Vec<u8>,
}

impl RecordEncoder {
    /// The key, bucket and (for an upsert) value of `row`.
    #[inline(always)]
    fn encode<R: InternalRow + ?Sized>(&mut self, row: &R, op: KvOp) -> Result<Encoded<'_>> {
        let value = match op {
            KvOp::Upsert => {
                self.value.clear();
                self.values.encode(row, &mut self.value)?;
                Some(&self.value[..])
            }
            KvOp::Delete => {
                if row.field_count() != self.values.arity() {
                    return Err(ClientError::Invalid(format!(
                        "row has {} fields but the table has {} columns",
                        row.field_count(),
                        self.values.arity()
                    )));
                }
                None
            }
        };
        let (key, bucket) = self.keys.key_and_bucket(row)?;
        Ok((key, bucket, value))
    }
}

/// The open batches of one writer and the rules that seal them.
struct Batches {
    schema_id: i16,
    /// A batch is sealed before a record would take it past this.
    batch_size_bytes: usize,
    batch_timeout: Duration,
    sequences: Sequences,
    slots: Slots<Slot>,
    /// Buckets with an open batch; the linger task and flush walk these.
    open: Vec<BucketKey>,
    tx: Option<UnboundedSender<EncodedBatch>>,
    /// Batches handed on so far; flush waits until this many are completed.
    sealed_count: u64,
    /// What the open batches' buffers were presized for, together: at most
    /// buffer memory.
    presized_bytes: usize,
    /// Memory the open batches have reserved, together: the rest of what
    /// the pool lent is held by batches handed on and not yet acknowledged.
    open_reserved_bytes: usize,
    ledger: Arc<Ledger>,
}

/// The upsert writer's per-bucket KV batches; see the module doc.
pub(crate) struct KvAccumulator {
    records: RecordEncoder,
    batches: Batches,
}

/// Settings of a [`KvAccumulator`], fixed when the writer is made.
pub(crate) struct KvAccumulatorConfig {
    pub keys: KeyPlan,
    pub values: ValueEncoder,
    pub schema_id: i16,
    pub batch_size_bytes: usize,
    pub batch_timeout: Duration,
    pub sequences: Sequences,
    pub tx: UnboundedSender<EncodedBatch>,
    pub ledger: Arc<Ledger>,
}

impl KvAccumulator {
    pub(crate) fn new(config: KvAccumulatorConfig) -> Self {
        let pool_bytes = config.ledger.pool.total_bytes();
        let bucket_count = config.keys.bucket_count();
        // At most a quarter of buffer memory, so several buckets can fill
        // at once (the append writer's rule).
        let batch_size_bytes = config
            .batch_size_bytes
            .min((pool_bytes / 4).max(HEADER_SIZE + 1));
        Self {
            records: RecordEncoder {
                keys: config.keys,
                values: config.values,
                value: Vec::with_capacity(256),
            },
            batches: Batches {
                schema_id: config.schema_id,
                batch_size_bytes,
                batch_timeout: config.batch_timeout,
                sequences: config.sequences,
                slots: Slots::new(bucket_count),
                open: Vec::new(),
                tx: Some(config.tx),
                sealed_count: 0,
                presized_bytes: 0,
                open_reserved_bytes: 0,
                ledger: config.ledger,
            },
        }
    }

    /// Writes `op` of `row` (a whole row of the table) into its bucket's
    /// batch in `partition`. Errors: a row the table cannot take (width,
    /// a value, a NULL key), an earlier batch's failure (reported by the
    /// record that opens a new batch), a closed writer.
    #[inline(always)]
    pub(crate) fn put<R: InternalRow + ?Sized>(
        &mut self,
        partition: Option<i64>,
        row: &R,
        op: KvOp,
    ) -> Result<PutOutcome> {
        let (key, bucket, value) = self.records.encode(row, op)?;
        self.batches.append((partition, bucket), key, value)
    }

    /// Credits `bytes`, reserved by the caller after a
    /// [`PutOutcome::Deficit`], to `key`'s batch; seals it if full.
    pub(crate) fn settle(&mut self, key: BucketKey, bytes: usize) -> Result<()> {
        self.batches.settle(key, bytes)
    }

    /// Batches sealed so far.
    pub(crate) fn sealed_count(&self) -> u64 {
        self.batches.sealed_count
    }

    /// Seals every open batch (flush, close).
    pub(crate) fn seal_all(&mut self) -> Result<()> {
        self.batches.seal_all()
    }

    /// Seals the batches older than the batch timeout; when the next open
    /// batch expires (`None`: none is open).
    pub(crate) fn seal_expired(&mut self, now: Instant) -> Result<Option<Instant>> {
        self.batches.seal_expired(now)
    }

    /// Stops handing batches on: the sender ends once it has completed
    /// what it was given.
    pub(crate) fn close(&mut self) {
        self.batches.tx = None;
    }
}

impl Batches {
    /// Appends one record to `key`'s batch: nearly always into the open
    /// batch, within its reservation (inlined); the rest is out of line.
    #[inline(always)]
    fn append(&mut self, key: BucketKey, k: &[u8], v: Option<&[u8]>) -> Result<PutOutcome> {
        let size = record_size(k, v);
        let batch_size = self.batch_size_bytes;
        let slot = self.slots.get(key, Slot::idle)?;
        if let Some(builder) = slot.builder.as_mut() {
            if builder.size_in_bytes() + size <= batch_size {
                append_record(builder, k, v)?;
                let bytes = builder.size_in_bytes();
                // Nearly every record: within the reservation, and room
                // left for another like it.
                if bytes <= slot.reserved_bytes && bytes + size <= batch_size {
                    return Ok(PutOutcome::Buffered);
                }
                return self.after_append(key, size);
            }
        }
        self.append_slow(key, k, v, size)
    }

    /// [`Batches::append`] for a record that opens its bucket's batch, or
    /// does not fit the open one (which is sealed first).
    #[inline(never)]
    fn append_slow(
        &mut self,
        key: BucketKey,
        k: &[u8],
        v: Option<&[u8]>,
        size: usize,
    ) -> Result<PutOutcome> {
        let total = self.ledger.pool.total_bytes();
        if HEADER_SIZE + size > total {
            return Err(self.ledger.pool.too_large(HEADER_SIZE + size));
        }
        self.seal(key)?;
        self.open_batch(key, size)?;
        let slot = self.slots.get(key, Slot::idle)?;
        let builder = slot.builder.as_mut().expect("the batch was just opened");
        if let Err(e) = append_record(builder, k, v) {
            // Nothing went in: the empty batch is given up (its sequence
            // was only looked at, not taken).
            self.abandon_empty(key)?;
            return Err(e);
        }
        self.after_append(key, size)
    }

    /// After a record of `size` bytes went into `key`'s batch past its
    /// reservation or near its end: reserves memory, and seals the batch
    /// when another such record would not fit (so it leaves now rather
    /// than with the next record or the linger task).
    #[inline(never)]
    fn after_append(&mut self, key: BucketKey, size: usize) -> Result<PutOutcome> {
        let outcome = self.reserve(key)?;
        let batch_size = self.batch_size_bytes;
        let slot = self.slots.get(key, Slot::idle)?;
        let bytes = slot
            .builder
            .as_ref()
            .map_or(0, KvBatchBuilder::size_in_bytes);
        slot.full = bytes + size > batch_size;
        if slot.full && matches!(outcome, PutOutcome::Buffered) {
            self.seal(key)?;
        }
        Ok(outcome)
    }

    /// Opens `key`'s batch for a first record of `size` bytes: once per
    /// batch. Reports an earlier batch's failure instead.
    fn open_batch(&mut self, key: BucketKey, size: usize) -> Result<()> {
        if let Some(e) = self.ledger.failure() {
            return Err(e);
        }
        if self.tx.is_none() {
            return Err(ClientError::WriterClosed("the writer was closed"));
        }
        let total = self.ledger.pool.total_bytes();
        let room = total.saturating_sub(self.presized_bytes);
        let batch_size = self.batch_size_bytes;
        let sequence = self.sequences.peek(key);
        let writer_id = self.sequences.writer_id();
        let schema_id = self.schema_id;
        let slot = self.slots.get(key, Slot::idle)?;
        let last = slot.last_batch_bytes;
        let likely = batch_size
            .min(last.saturating_add(last / PRESIZE_GROWTH_DIVISOR))
            .min(room)
            .max(RESERVE_CHUNK_MIN_BYTES)
            .max(HEADER_SIZE + size);
        let buffer = self.ledger.outputs.take(likely);
        slot.builder = Some(KvBatchBuilder::start(
            buffer, schema_id, writer_id, sequence,
        ));
        slot.opened_at = Instant::now();
        slot.presized_bytes = likely;
        self.presized_bytes += likely;
        self.open.push(key);
        Ok(())
    }

    /// Reserves memory for what `key`'s batch holds beyond its reservation,
    /// a step at a time. When the pool is exhausted the caller waits for
    /// the deficit; if the batches in flight do not hold that much (their
    /// acknowledgements alone would never free it), every other open batch
    /// is sealed first. Sealing them regardless would, for records spread
    /// over many buckets, seal batches of a record or two at every step.
    fn reserve(&mut self, key: BucketKey) -> Result<PutOutcome> {
        let pool = &self.ledger.pool;
        let chunk = (self.batch_size_bytes / 4).clamp(RESERVE_CHUNK_MIN_BYTES, RESERVE_CHUNK_BYTES);
        let slot = self.slots.get(key, Slot::idle)?;
        let bytes = slot
            .builder
            .as_ref()
            .map_or(0, KvBatchBuilder::size_in_bytes);
        if bytes <= slot.reserved_bytes {
            return Ok(PutOutcome::Buffered);
        }
        let need = (bytes - slot.reserved_bytes)
            .max(chunk)
            .min(pool.total_bytes().saturating_sub(slot.reserved_bytes));
        if pool.try_reserve(need) {
            slot.reserved_bytes += need;
            self.open_reserved_bytes += need;
            return Ok(PutOutcome::Buffered);
        }
        slot.debt_bytes = need;
        let in_flight = pool.used_bytes().saturating_sub(self.open_reserved_bytes);
        if in_flight < need {
            let others: Vec<BucketKey> = self.open.iter().copied().filter(|k| *k != key).collect();
            for other in others {
                self.seal(other)?;
            }
        }
        Ok(PutOutcome::Deficit {
            key,
            need_bytes: need,
        })
    }

    fn settle(&mut self, key: BucketKey, bytes: usize) -> Result<()> {
        let slot = self.slots.get(key, Slot::idle)?;
        if slot.builder.is_none() {
            // Sealed meanwhile (only on close): nothing to credit.
            self.ledger.pool.release(bytes);
            return Ok(());
        }
        slot.reserved_bytes += bytes;
        self.open_reserved_bytes += bytes;
        slot.debt_bytes = 0;
        if slot.full {
            self.seal(key)?;
        }
        Ok(())
    }

    /// Seals `key`'s open batch, if any, and hands it to the sender.
    fn seal(&mut self, key: BucketKey) -> Result<()> {
        let slot = self.slots.get(key, Slot::idle)?;
        let Some(mut builder) = slot.builder.take() else {
            return Ok(());
        };
        let records = builder.record_count() as i32;
        builder.finish();
        let bytes = Bytes::from(builder.into_buffer());
        slot.last_batch_bytes = bytes.len();
        // What the batch holds is what stays reserved until it is
        // acknowledged (less, for a batch still in debt on close).
        let reserved = std::mem::take(&mut slot.reserved_bytes);
        self.open_reserved_bytes -= reserved;
        let reserved_bytes = reserved.min(bytes.len());
        self.ledger.pool.release(reserved - reserved_bytes);
        slot.debt_bytes = 0;
        slot.full = false;
        let presized = std::mem::take(&mut slot.presized_bytes);
        self.presized_bytes -= presized;
        if let Some(at) = self.open.iter().position(|k| *k == key) {
            self.open.swap_remove(at);
        }
        let sequence = self.sequences.take(key);
        self.sealed_count += 1;
        let batch = EncodedBatch {
            key,
            bytes,
            records,
            sequence,
            reserved_bytes,
            attempts: 0,
            sent_before_predecessor_acked: false,
            completion: None,
        };
        let Some(tx) = &self.tx else {
            self.ledger.complete(
                Err(ClientError::WriterClosed("the writer was closed")),
                None,
                reserved_bytes,
            );
            return Ok(());
        };
        if let Err(returned) = tx.send(batch) {
            self.ledger.complete(
                Err(ClientError::WriterClosed("the sender task stopped")),
                None,
                returned.0.reserved_bytes,
            );
        }
        Ok(())
    }

    /// Gives up `key`'s batch opened for a record that did not go in.
    #[cold]
    fn abandon_empty(&mut self, key: BucketKey) -> Result<()> {
        let slot = self.slots.get(key, Slot::idle)?;
        if let Some(builder) = slot.builder.take() {
            self.ledger.outputs.give(Bytes::from(builder.into_buffer()));
        }
        let reserved = std::mem::take(&mut slot.reserved_bytes);
        self.open_reserved_bytes -= reserved;
        self.ledger.pool.release(reserved);
        self.presized_bytes -= std::mem::take(&mut slot.presized_bytes);
        if let Some(at) = self.open.iter().position(|k| *k == key) {
            self.open.swap_remove(at);
        }
        Ok(())
    }

    fn seal_all(&mut self) -> Result<()> {
        while let Some(&key) = self.open.last() {
            self.seal(key)?;
        }
        Ok(())
    }

    fn seal_expired(&mut self, now: Instant) -> Result<Option<Instant>> {
        let mut next: Option<Instant> = None;
        let timeout = self.batch_timeout;
        let mut i = 0;
        while i < self.open.len() {
            let key = self.open[i];
            let slot = self.slots.get(key, Slot::idle)?;
            if slot.debt_bytes > 0 {
                // The writer waits for memory for this batch and settles it;
                // no wake-up for it here (its deadline may be past: that
                // would spin).
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
}

/// Appends one record to `builder`.
#[inline(always)]
fn append_record(builder: &mut KvBatchBuilder, k: &[u8], v: Option<&[u8]>) -> Result<()> {
    let appended = match v {
        Some(row) => builder.append_upsert(k, row),
        None => builder.append_delete(k),
    };
    appended.map_err(|e| ClientError::Format(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use fjord_format::kv::batch::KvBatch;
    use fjord_format::schema::{Schema, TableDescriptor, TableDistribution};
    use fjord_format::types::DataType;
    use tokio::sync::mpsc::UnboundedReceiver;

    use super::*;
    use crate::admin::{TableInfo, TablePath};
    use crate::row::Datum;
    use fjord_format::row::RowFormat;

    /// `id BIGINT NOT NULL, s STRING`, primary key `id`, `buckets` buckets.
    fn table(buckets: i32) -> TableInfo {
        let schema = Schema::builder()
            .column("id", DataType::bigint().with_nullable(false))
            .column("s", DataType::string())
            .primary_key(["id"])
            .build()
            .unwrap();
        let descriptor = TableDescriptor::new(
            schema,
            None,
            Vec::new(),
            Some(TableDistribution {
                bucket_count: Some(buckets),
                bucket_keys: Vec::new(),
            }),
            BTreeMap::new(),
            BTreeMap::new(),
        )
        .unwrap();
        TableInfo {
            path: TablePath::new("db", "t"),
            table_id: 1,
            schema_id: 3,
            descriptor,
            earlier_schemas: Vec::new(),
        }
    }

    fn accumulator(
        buckets: i32,
        batch_size_bytes: usize,
        memory_bytes: usize,
    ) -> (KvAccumulator, UnboundedReceiver<EncodedBatch>) {
        let table = table(buckets);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let acc = KvAccumulator::new(KvAccumulatorConfig {
            keys: KeyPlan::new(&table).unwrap(),
            values: ValueEncoder::new(table.descriptor.schema(), RowFormat::Compacted).unwrap(),
            schema_id: 3,
            batch_size_bytes,
            batch_timeout: Duration::from_secs(3600),
            sequences: Sequences::new(Some(77)),
            tx,
            ledger: Arc::new(Ledger::new(memory_bytes)),
        });
        (acc, rx)
    }

    /// A batch handed on: (bucket, sequence, its records as (key, has a row)).
    type Sent = (i32, i32, Vec<(Vec<u8>, bool)>);

    /// Every batch handed on so far.
    fn sent(rx: &mut UnboundedReceiver<EncodedBatch>) -> Vec<Sent> {
        let mut out = Vec::new();
        while let Ok(batch) = rx.try_recv() {
            let kv = KvBatch::validate(&batch.bytes).expect("a valid KV batch");
            assert_eq!(kv.writer_id(), 77);
            assert_eq!(kv.batch_sequence(), batch.sequence);
            assert_eq!(kv.schema_id(), 3);
            assert_eq!(kv.record_count(), batch.records);
            let records = kv
                .records()
                .map(|r| (r.key.to_vec(), r.row.is_some()))
                .collect();
            out.push((batch.key.1, batch.sequence, records));
        }
        out
    }

    #[test]
    fn records_fill_batches_up_to_the_size_in_order_with_a_sequence_per_bucket() {
        let (mut acc, mut rx) = accumulator(3, 4 << 10, 1 << 20);
        let text = "x".repeat(50);
        for id in 0..1_000i64 {
            let op = if id % 7 == 0 {
                KvOp::Delete
            } else {
                KvOp::Upsert
            };
            let outcome = acc
                .put(None, &[Datum::BigInt(id), Datum::String(&text)], op)
                .unwrap();
            assert!(matches!(outcome, PutOutcome::Buffered));
        }
        acc.seal_all().unwrap();
        let batches = sent(&mut rx);
        let mut next_sequence = [0; 3];
        let mut records = 0;
        for (bucket, sequence, batch) in &batches {
            assert_eq!(
                *sequence, next_sequence[*bucket as usize],
                "bucket {bucket}"
            );
            next_sequence[*bucket as usize] += 1;
            records += batch.len();
        }
        assert_eq!(records, 1_000);
        assert!(
            batches.len() >= 15,
            "{} batches of at most 4 KiB",
            batches.len()
        );
        assert_eq!(acc.sealed_count(), batches.len() as u64);
        // In each bucket, the records in write order: keys rise.
        let mut keys = PlanKeys::default();
        for id in 0..1_000i64 {
            keys.expect(&mut acc, id);
        }
        for (bucket, _, batch) in &batches {
            for (key, has_row) in batch {
                let id = keys.id_of(key);
                assert_eq!(*has_row, id % 7 != 0, "id {id}: a delete has no row");
                assert_eq!(keys.bucket(id), *bucket, "id {id}");
                keys.check_order(*bucket, id);
            }
        }
    }

    /// The key and bucket of ids as the accumulator's plan computes them,
    /// and the last id seen per bucket.
    #[derive(Default)]
    struct PlanKeys {
        by_key: std::collections::HashMap<Vec<u8>, (i64, i32)>,
        last: std::collections::HashMap<i32, i64>,
    }

    impl PlanKeys {
        fn expect(&mut self, acc: &mut KvAccumulator, id: i64) {
            let (key, bucket) = acc
                .records
                .keys
                .key_and_bucket(&[Datum::BigInt(id), Datum::Null])
                .unwrap();
            self.by_key.insert(key.to_vec(), (id, bucket));
        }

        fn id_of(&self, key: &[u8]) -> i64 {
            self.by_key[key].0
        }

        fn bucket(&self, id: i64) -> i32 {
            self.by_key.values().find(|(i, _)| *i == id).unwrap().1
        }

        fn check_order(&mut self, bucket: i32, id: i64) {
            if let Some(last) = self.last.insert(bucket, id) {
                assert!(last < id, "bucket {bucket}: {id} after {last}");
            }
        }
    }

    #[test]
    fn no_batch_passes_the_batch_size_unless_one_record_does() {
        let (mut acc, mut rx) = accumulator(1, 1 << 10, 1 << 20);
        for (id, len) in [(1i64, 10usize), (2, 400), (3, 400), (4, 3_000), (5, 10)] {
            let text = "y".repeat(len);
            acc.put(
                None,
                &[Datum::BigInt(id), Datum::String(&text)],
                KvOp::Upsert,
            )
            .unwrap();
        }
        acc.seal_all().unwrap();
        let mut sizes = Vec::new();
        while let Ok(batch) = rx.try_recv() {
            sizes.push((batch.records, batch.bytes.len()));
        }
        // 1, 2 and 3 fill a batch (sealed at once: another record like 3
        // would not fit); 4 is alone and larger than the batch size; 5
        // opens the last.
        assert_eq!(
            sizes.iter().map(|s| s.0).collect::<Vec<_>>(),
            [3, 1, 1],
            "{sizes:?}"
        );
        assert!(
            sizes
                .iter()
                .all(|(records, bytes)| *records == 1 || *bytes <= 1 << 10),
            "{sizes:?}"
        );
    }

    #[test]
    fn a_record_larger_than_buffer_memory_is_refused_and_nothing_is_written() {
        let (mut acc, mut rx) = accumulator(1, 1 << 10, 16 << 10);
        let huge = "z".repeat(20 << 10);
        let e = acc
            .put(
                None,
                &[Datum::BigInt(1), Datum::String(&huge)],
                KvOp::Upsert,
            )
            .err()
            .expect("refused");
        assert!(e.to_string().contains("memory-size"), "{e}");
        acc.seal_all().unwrap();
        assert!(rx.try_recv().is_err(), "nothing was handed on");
        assert_eq!(acc.batches.ledger.pool.used_bytes(), 0);
    }

    #[test]
    fn an_exhausted_pool_reports_a_deficit_and_the_writer_settles_it() {
        // 16 KiB of memory, 4 KiB batches: reservations run out after a few.
        let (mut acc, mut rx) = accumulator(1, 4 << 10, 16 << 10);
        let text = "w".repeat(100);
        let mut deficit = None;
        for id in 0..1_000i64 {
            match acc
                .put(
                    None,
                    &[Datum::BigInt(id), Datum::String(&text)],
                    KvOp::Upsert,
                )
                .unwrap()
            {
                PutOutcome::Buffered => {}
                PutOutcome::Deficit { key, need_bytes } => {
                    deficit = Some((id, key, need_bytes));
                    break;
                }
            }
        }
        let (id, key, need) = deficit.expect("the pool ran out");
        let ledger = Arc::clone(&acc.batches.ledger);
        assert!(ledger.pool.used_bytes() <= ledger.pool.total_bytes());
        // Acknowledging what was handed on frees the memory the deficit needs.
        for batch in std::iter::from_fn(|| rx.try_recv().ok()) {
            ledger.complete(
                Ok(crate::writer::BatchAck {
                    partition_id: None,
                    bucket: 0,
                    base_offset: -1,
                    records: batch.records,
                    log_end_offset: None,
                }),
                None,
                batch.reserved_bytes,
            );
        }
        assert!(
            ledger.pool.try_reserve(need),
            "memory came back for record {id}"
        );
        acc.settle(key, need).unwrap();
        acc.seal_all().unwrap();
        let sealed: usize = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|b| b.records as usize)
            .sum();
        assert!(sealed > 0);
    }
}
