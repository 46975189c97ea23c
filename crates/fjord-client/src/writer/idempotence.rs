//! Idempotent writing, as Fluss's `IdempotenceManager` does it: one writer
//! id per writer (InitWriter), a batch sequence per bucket stamped in each
//! batch header when it is encoded, and the rules that turn the server's
//! sequence errors into success, retry or failure.
//!
//! A retried batch is resent with the bytes (and so the sequence) it was
//! first sent with; the server answers a batch it already appended with its
//! original offsets (or DUPLICATE_SEQUENCE), so a retry never duplicates rows.

use std::collections::HashMap;

use fjord_format::log_batch::{NO_BATCH_SEQUENCE, NO_WRITER_ID};
use fjord_proto::messages as pb;
use fjord_proto::{ApiKey, ErrorCode};

use crate::admin::TablePath;
use crate::connection::ServerConnection;
use crate::error::{ClientError, Result};
use crate::writer::accumulator::BucketKey;

/// Asks the coordinator for a writer id for `path` (InitWriter).
pub(crate) async fn init_writer(coordinator: &ServerConnection, path: &TablePath) -> Result<i64> {
    let request = pb::InitWriterRequest {
        table_path: vec![path.to_pb()],
    };
    let response: pb::InitWriterResponse =
        coordinator.request(ApiKey::InitWriter, &request).await?;
    Ok(response.writer_id)
}

/// The next batch sequence of each bucket; owned by the encoder thread,
/// which stamps batches in the order the writer sealed them.
pub(crate) struct Sequences {
    writer_id: i64,
    next: HashMap<BucketKey, i32>,
}

impl Sequences {
    /// Sequences for `writer_id` (`None`: idempotence off, every batch gets
    /// [`NO_WRITER_ID`] / [`NO_BATCH_SEQUENCE`]).
    pub(crate) fn new(writer_id: Option<i64>) -> Self {
        Self {
            writer_id: writer_id.unwrap_or(NO_WRITER_ID),
            next: HashMap::new(),
        }
    }

    /// The writer id to stamp.
    pub(crate) fn writer_id(&self) -> i64 {
        self.writer_id
    }

    /// The sequence the next batch of `key` will get.
    pub(crate) fn peek(&self, key: BucketKey) -> i32 {
        if self.writer_id == NO_WRITER_ID {
            return NO_BATCH_SEQUENCE;
        }
        self.next.get(&key).copied().unwrap_or(0)
    }

    /// Takes the next sequence of `key` (once per batch).
    pub(crate) fn take(&mut self, key: BucketKey) -> i32 {
        if self.writer_id == NO_WRITER_ID {
            return NO_BATCH_SEQUENCE;
        }
        let next = self.next.entry(key).or_insert(0);
        let sequence = *next;
        // Fluss wraps to 0 after i32::MAX.
        *next = if sequence == i32::MAX {
            0
        } else {
            sequence + 1
        };
        sequence
    }
}

/// What a sequence error means for one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SequenceVerdict {
    /// The server already has the batch: complete it as a success.
    AlreadyWritten,
    /// An earlier batch of the bucket is not acknowledged yet: resend after it.
    RetryAfterEarlier,
    /// Not explained by anything in flight: fail.
    Fatal,
}

/// Judges a DUPLICATE_SEQUENCE or OUT_OF_ORDER_SEQUENCE answer for the batch
/// with `sequence`, given the bucket's last acknowledged sequence now and
/// whether an earlier sequence of the bucket was still unacknowledged when
/// the batch was sent (the server may then have seen the two out of order:
/// it runs the requests of one connection concurrently).
pub(crate) fn judge(
    code: ErrorCode,
    sequence: i32,
    last_acked: i32,
    sent_before_predecessor_acked: bool,
) -> SequenceVerdict {
    match code {
        ErrorCode::DuplicateSequenceException => SequenceVerdict::AlreadyWritten,
        ErrorCode::OutOfOrderSequenceException if sequence == NO_BATCH_SEQUENCE => {
            SequenceVerdict::Fatal
        }
        ErrorCode::OutOfOrderSequenceException => {
            if last_acked != NO_BATCH_SEQUENCE && sequence <= last_acked {
                SequenceVerdict::AlreadyWritten
            } else if sent_before_predecessor_acked || sequence > last_acked.saturating_add(1) {
                SequenceVerdict::RetryAfterEarlier
            } else {
                SequenceVerdict::Fatal
            }
        }
        _ => SequenceVerdict::Fatal,
    }
}

/// Whether `sequence` is not the one right after `last_acked` (so an
/// earlier batch of the bucket is still unacknowledged).
pub(crate) fn predecessor_pending(sequence: i32, last_acked: i32) -> bool {
    if sequence == NO_BATCH_SEQUENCE {
        return false;
    }
    let expected = if last_acked == NO_BATCH_SEQUENCE || last_acked == i32::MAX {
        0
    } else {
        last_acked + 1
    };
    sequence != expected
}

/// The error for a batch that cannot be written because an earlier batch of
/// its bucket failed for good (its sequence would never be accepted).
pub(crate) fn earlier_batch_failed(key: BucketKey, why: &str) -> ClientError {
    ClientError::Invalid(format!(
        "not written: an earlier batch of bucket {} (partition {:?}) failed, so the server would refuse the sequences after it: {why}",
        key.1, key.0
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_start_at_zero_per_bucket_and_are_absent_without_idempotence() {
        let mut s = Sequences::new(Some(7));
        assert_eq!(s.take((None, 0)), 0);
        assert_eq!(s.take((None, 0)), 1);
        assert_eq!(s.take((None, 1)), 0);
        assert_eq!(s.take((Some(3), 0)), 0);
        let mut off = Sequences::new(None);
        assert_eq!(off.take((None, 0)), NO_BATCH_SEQUENCE);
        assert_eq!(off.writer_id(), NO_WRITER_ID);
    }

    #[test]
    fn sequence_errors_are_judged_as_the_java_client_does() {
        use ErrorCode::*;
        use SequenceVerdict::*;
        let cases = [
            (DuplicateSequenceException, 4, 3, false, AlreadyWritten),
            (OutOfOrderSequenceException, 3, 5, false, AlreadyWritten),
            (OutOfOrderSequenceException, 6, 3, false, RetryAfterEarlier),
            (OutOfOrderSequenceException, 4, 3, false, Fatal),
            // Sent while 3 was in flight; 3 was acknowledged before the answer came.
            (OutOfOrderSequenceException, 4, 3, true, RetryAfterEarlier),
            (OutOfOrderSequenceException, 0, -1, false, Fatal),
            (OutOfOrderSequenceException, 1, -1, false, RetryAfterEarlier),
        ];
        for (code, sequence, last, pending, verdict) in cases {
            assert_eq!(
                judge(code, sequence, last, pending),
                verdict,
                "{code:?} {sequence} after {last}"
            );
        }
        assert!(!predecessor_pending(0, -1));
        assert!(predecessor_pending(1, -1));
        assert!(!predecessor_pending(5, 4));
        assert!(!predecessor_pending(0, i32::MAX));
    }
}
