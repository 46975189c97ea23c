//! The ledger of a writer's batches between being handed on and being
//! completed: what the append writer (log batches, ProduceLog) and the
//! upsert writer (KV batches, PutKv) share with their sender task.
//!
//! It holds the buffer memory those batches reserve ([`MemoryPool`]), the
//! count of completed batches that `flush` waits for, the first failure
//! since the last flush, the counters of [`super::WriterStats`], the
//! buffers of acknowledged batches kept for reuse, and, for KV batches,
//! the changelog end offset each bucket's last acknowledged batch reached.
//! Every method here runs once per batch, never per record.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::sync::{oneshot, Notify};

use crate::error::{ClientError, Result};
use crate::writer::accumulator::BucketKey;
use crate::writer::encode::OutputPool;
use crate::writer::memory::MemoryPool;
use crate::writer::{BatchAck, WriterStats};

/// Counters of what a writer's batches did, read by `stats()`.
#[derive(Default)]
pub(crate) struct Counters {
    pub batches: AtomicU64,
    pub bytes: AtomicU64,
    pub retries: AtomicU64,
    /// Times a bucket was held back because the server said its storage
    /// was under pressure (the `pressure` of a PutKv answer, or
    /// STORAGE_BACKPRESSURE).
    pub throttles: AtomicU64,
}

/// See the module doc. Shared (`Arc`) by a writer, its background work and
/// its sender task.
pub(crate) struct Ledger {
    /// `client.writer.buffer.memory-size`: open and unacknowledged batches.
    pub(crate) pool: MemoryPool,
    done: AtomicU64,
    done_notify: Notify,
    failed: AtomicBool,
    first_error: Mutex<Option<ClientError>>,
    pub(crate) stats: Counters,
    /// Buffers of acknowledged batches, for the next batches to be written into.
    pub(crate) outputs: OutputPool,
    /// Per bucket, the changelog end offset after its last acknowledged KV
    /// batch (PutKv answers only; at most one entry per bucket written).
    log_end_offsets: Mutex<HashMap<BucketKey, i64>>,
}

impl Ledger {
    /// A ledger whose batches may hold `buffer_memory_bytes` at once.
    pub(crate) fn new(buffer_memory_bytes: usize) -> Self {
        Self {
            pool: MemoryPool::new(buffer_memory_bytes),
            done: AtomicU64::new(0),
            done_notify: Notify::new(),
            failed: AtomicBool::new(false),
            first_error: Mutex::new(None),
            stats: Counters::default(),
            outputs: OutputPool::default(),
            log_end_offsets: Mutex::new(HashMap::new()),
        }
    }

    /// Completes one batch: gives its memory back, reports the outcome to
    /// its completion (if any) and, for a failure, to the next `flush`.
    pub(crate) fn complete(
        &self,
        result: Result<BatchAck>,
        completion: Option<oneshot::Sender<Result<BatchAck>>>,
        reserved_bytes: usize,
    ) {
        self.pool.release(reserved_bytes);
        let result = match result {
            Ok(ack) => {
                if let Some(end) = ack.log_end_offset {
                    let key = (ack.partition_id, ack.bucket);
                    let mut offsets = self
                        .log_end_offsets
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    let entry = offsets.entry(key).or_insert(end);
                    // Acknowledgements of one bucket come in sequence order,
                    // but a duplicate's answer may carry no newer offset.
                    *entry = (*entry).max(end);
                }
                Ok(ack)
            }
            Err(e) => {
                let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
                if first.is_none() {
                    *first = Some(e.duplicate());
                }
                self.failed.store(true, Ordering::Release);
                Err(e)
            }
        };
        if let Some(tx) = completion {
            let _ = tx.send(result);
        }
        self.done.fetch_add(1, Ordering::AcqRel);
        self.done_notify.notify_waiters();
    }

    /// The first failure since the last flush, if any batch failed: read
    /// once per batch on the row path, so one atomic load when none did.
    pub(crate) fn failure(&self) -> Option<ClientError> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        let first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        first.as_ref().map(ClientError::duplicate)
    }

    /// Takes the first failure since the last flush (the next flush starts
    /// clean).
    pub(crate) fn take_first_error(&self) -> Option<ClientError> {
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        self.failed.store(false, Ordering::Release);
        first.take()
    }

    /// Waits until `target` batches are completed.
    pub(crate) async fn wait_done(&self, target: u64) {
        loop {
            let notified = self.done_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.done.load(Ordering::Acquire) >= target {
                return;
            }
            notified.await;
        }
    }

    /// What the writer has done so far.
    pub(crate) fn writer_stats(&self) -> WriterStats {
        let s = &self.stats;
        WriterStats {
            batches: s.batches.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
            retries: s.retries.load(Ordering::Relaxed),
            buffered_bytes: self.pool.used_bytes() as u64,
            max_buffered_bytes: self.pool.max_used_bytes() as u64,
            memory_waits: self.pool.waits(),
            throttles: s.throttles.load(Ordering::Relaxed),
        }
    }

    /// Per bucket written so far, the changelog end offset after its last
    /// acknowledged KV batch, sorted by partition and bucket.
    pub(crate) fn log_end_offsets(&self) -> Vec<(BucketKey, i64)> {
        let offsets = self
            .log_end_offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<(BucketKey, i64)> = offsets.iter().map(|(k, v)| (*k, *v)).collect();
        all.sort_unstable();
        all
    }
}
