//! The encoder thread: turns sealed Arrow batches into Fluss log batches
//! (ARROW format with the table's body compression; header and CRC-32C
//! written in place in front of the body, no copy of it), stamps writer id
//! and batch sequence, learns the compression ratio, and hands the bytes to
//! the sender task.
//!
//! It is a plain thread, not a tokio task, so compression (the dominant
//! cost with ZSTD) runs on the second core while the caller appends rows,
//! whatever runtime the caller uses.

use std::sync::{mpsc, Arc};

use bytes::Bytes;
use fjord_format::arrow_log::ArrowLogEncoder;
use fjord_format::log_batch::BatchHeader;
use tokio::sync::mpsc::UnboundedSender;

use crate::error::ClientError;
use crate::writer::accumulator::{BucketKey, SealedBatch};
use crate::writer::idempotence::Sequences;
use crate::writer::Shared;

/// Output headroom reserved beyond the compressed estimate, so the
/// encoder's buffer rarely grows while encoding.
const ENCODE_HEADROOM_BYTES: usize = 4096;

/// Most encoded-batch buffers kept after acknowledgement for the next
/// batches to encode into: bounds the memory held beyond
/// `client.writer.buffer.memory-size` (which counts them only while their
/// batch is unacknowledged) to this many buffers of about one encoded
/// batch each (plus [`OUTPUT_BUFFER_HEADROOM_DIVISOR`]). Acknowledgements
/// arrive a request (several batches) at a time; this absorbs a few.
pub(crate) const OUTPUT_BUFFERS_MAX: usize = 8;

/// A fresh encode buffer gets `1 / this` more room than the batch needs,
/// so a kept buffer also fits the next batches, which grow by a few bytes
/// as the compression ratio is learned (without it, most kept buffers were
/// a few bytes short and dropped).
const OUTPUT_BUFFER_HEADROOM_DIVISOR: usize = 16;

/// Encoded-batch buffers given back by the sender once their batch was
/// acknowledged: a fresh multi-megabyte allocation per batch is returned to
/// the kernel when freed and faults its pages in again on the next batch
/// (encoder-thread page faults per 3 M `none` rows: 3.5–10 k without the
/// pool, 2–3 k with it; docs/bench-notes/client.md, "Fourth pass").
/// Locked once per batch on each side.
#[derive(Default)]
pub(crate) struct OutputPool {
    buffers: std::sync::Mutex<Vec<Vec<u8>>>,
}

impl OutputPool {
    /// Keeps the buffer of an acknowledged batch if nothing else holds it
    /// and the pool has room.
    pub(crate) fn give(&self, bytes: Bytes) {
        let Ok(buffer) = bytes.try_into_mut() else {
            return;
        };
        let mut buffer = Vec::from(buffer);
        buffer.clear();
        let mut buffers = self.buffers.lock().unwrap_or_else(|e| e.into_inner());
        if buffers.len() < OUTPUT_BUFFERS_MAX {
            buffers.push(buffer);
        }
    }

    /// An empty buffer with room for `bytes`: a kept one if it is large
    /// enough, else a fresh one (growing an empty kept buffer would copy
    /// its stale contents).
    pub(crate) fn take(&self, bytes: usize) -> Vec<u8> {
        let kept = self.buffers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match kept {
            Some(buffer) if buffer.capacity() >= bytes => buffer,
            _ => Vec::with_capacity(bytes + bytes / OUTPUT_BUFFER_HEADROOM_DIVISOR),
        }
    }

    /// Buffers kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.buffers.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The columns a table collects batch statistics for
/// (`table.statistics.columns`), with the schema its batches are written in.
pub(crate) struct StatisticsPlan {
    /// The writer's schema (the batches' columns).
    pub schema: fjord_format::schema::Schema,
    /// Table column indexes with statistics.
    pub columns: Vec<usize>,
    /// The block of the batch being encoded, reused batch to batch.
    pub block: Vec<u8>,
}

/// An encoded batch on its way to (or in) the sender.
pub(crate) struct EncodedBatch {
    /// Where it goes.
    pub key: BucketKey,
    /// The complete log batch.
    pub bytes: Bytes,
    /// Rows in it.
    pub records: i32,
    /// Its batch sequence (`NO_BATCH_SEQUENCE` without idempotence).
    pub sequence: i32,
    /// Buffer memory held until acknowledged.
    pub reserved_bytes: usize,
    /// Sends so far.
    pub attempts: i32,
    /// Whether, at the last send, an earlier batch of the bucket was not
    /// yet acknowledged (explains an OUT_OF_ORDER_SEQUENCE answer).
    pub sent_before_predecessor_acked: bool,
    /// The caller's completion for a RecordBatch appended whole.
    pub completion: Option<tokio::sync::oneshot::Sender<crate::error::Result<super::BatchAck>>>,
}

/// Starts the encoder thread; it ends when `rx` closes (the writer closed)
/// after encoding everything it was given.
pub(crate) fn spawn(
    mut encoder: ArrowLogEncoder,
    schema_id: i16,
    mut statistics: Option<StatisticsPlan>,
    mut sequences: Sequences,
    rx: mpsc::Receiver<SealedBatch>,
    tx: UnboundedSender<EncodedBatch>,
    shared: Arc<Shared>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("fjord-writer-encode".to_owned())
        .spawn(move || {
            // Marks the thread's end however it ends, so a caller waiting
            // for the backlog to drain gets an error instead of a hang.
            let _stopped = StoppedGuard(Arc::clone(&shared));
            for sealed in rx {
                encode_one(
                    &mut encoder,
                    schema_id,
                    statistics.as_mut(),
                    &mut sequences,
                    sealed,
                    &tx,
                    &shared,
                );
                shared.backlog.on_encoded();
            }
        })
}

/// Tells the backlog the encoder thread ended, when dropped.
struct StoppedGuard(Arc<Shared>);

impl Drop for StoppedGuard {
    fn drop(&mut self) {
        self.0.backlog.on_stopped();
    }
}

fn encode_one(
    encoder: &mut ArrowLogEncoder,
    schema_id: i16,
    statistics: Option<&mut StatisticsPlan>,
    sequences: &mut Sequences,
    sealed: SealedBatch,
    tx: &UnboundedSender<EncodedBatch>,
    shared: &Shared,
) {
    let SealedBatch {
        key,
        batch,
        estimated_bytes,
        mut reserved_bytes,
        completion,
    } = sealed;
    let records = batch.num_rows() as i32;
    let mut header = BatchHeader::append_only(schema_id, records);
    header.writer_id = sequences.writer_id();
    let ratio = shared.ratio();
    let uncompressed = if estimated_bytes > 0 {
        estimated_bytes
    } else {
        batch.get_array_memory_size()
    };
    let mut out = shared
        .ledger
        .outputs
        .take((uncompressed as f64 * f64::from(ratio)) as usize + ENCODE_HEADROOM_BYTES);
    // The sequence is taken only for a batch that encodes: a failed encode
    // must not leave a gap the server would refuse.
    header.batch_sequence = sequences.peek(key);
    // arrow-rs reports some inconsistencies only by panicking; a panic here
    // must fail this batch, not leave its completion (and flush) waiting.
    let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match statistics {
        None => encoder
            .encode(&batch, &header, None, &mut out)
            .map_err(|e| e.to_string()),
        Some(plan) => {
            plan.block.clear();
            fjord_format::statistics::write_statistics(
                &batch,
                &plan.schema,
                &plan.columns,
                &mut plan.block,
            )
            .map_err(|e| e.to_string())?;
            header.magic = fjord_format::log_batch::LOG_MAGIC_V1;
            encoder
                .encode_with_statistics(&batch, &header, None, &plan.block, &mut out)
                .map_err(|e| e.to_string())
        }
    }));
    let failure = match encoded {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e),
        Err(_) => Some("the Arrow IPC writer panicked".to_owned()),
    };
    if let Some(why) = failure {
        let error = ClientError::Format(format!("encoding a batch for bucket {}: {why}", key.1));
        shared
            .ledger
            .complete(Err(error), completion, reserved_bytes);
        return;
    }
    let sequence = sequences.take(key);
    if estimated_bytes > 0 {
        shared.learn_ratio(out.len() as f32 / estimated_bytes as f32);
        // Built from rows by the accumulator: nothing else holds its
        // buffers, so the next batches can write into them.
        shared.recycled.give(batch);
    } else {
        // The caller's RecordBatch: its buffers are the caller's.
        drop(batch);
    }
    // The Arrow batch is gone; the buffer now holds only the encoded bytes.
    if out.len() < reserved_bytes {
        shared.ledger.pool.release(reserved_bytes - out.len());
        reserved_bytes = out.len();
    }
    let encoded = EncodedBatch {
        key,
        bytes: Bytes::from(out),
        records,
        sequence,
        reserved_bytes,
        attempts: 0,
        sent_before_predecessor_acked: false,
        completion,
    };
    if let Err(returned) = tx.send(encoded) {
        let batch = returned.0;
        shared.ledger.complete(
            Err(ClientError::WriterClosed("the sender task stopped")),
            batch.completion,
            batch.reserved_bytes,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acknowledged_buffer_is_reused_empty_and_a_shared_one_is_not() {
        let pool = OutputPool::default();
        let mut first = Vec::with_capacity(1 << 16);
        first.extend_from_slice(b"batch one");
        let address = first.as_ptr();
        pool.give(Bytes::from(first));
        let reused = pool.take(1 << 10);
        assert_eq!(reused.as_ptr(), address, "the kept buffer comes back");
        assert!(reused.is_empty(), "with nothing of the old batch in it");
        // Still referenced elsewhere (e.g. a request not yet written): not kept.
        let shared = Bytes::from(reused);
        let _other = shared.clone();
        pool.give(shared);
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn the_pool_is_bounded_and_too_small_buffers_are_not_handed_out() {
        let pool = OutputPool::default();
        for _ in 0..OUTPUT_BUFFERS_MAX + 2 {
            pool.give(Bytes::from(Vec::with_capacity(64)));
        }
        assert_eq!(pool.len(), OUTPUT_BUFFERS_MAX);
        let big = pool.take(1 << 20);
        assert!(big.capacity() >= 1 << 20);
    }
}
