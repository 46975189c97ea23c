//! Idempotent-writer state of a tablet: per writer id, the last few batch
//! sequences with their offsets, following Fluss's `WriterStateManager`,
//! `WriterStateEntry` and `WriterAppendInfo`:
//!
//! - a batch whose `(writer_id, batch_sequence)` matches one of the writer's
//!   last [`BATCHES_RETAINED`] batches is a retried duplicate: the original
//!   offsets are returned and nothing is appended;
//! - otherwise its sequence must be the writer's last + 1 (or 0 after
//!   `i32::MAX`); a writer with no state must start at 0. Anything else is an
//!   out-of-order sequence;
//! - a writer with no batch for `server.writer-id.expiration-time` is forgotten.
//!
//! The state survives restart through a snapshot file written atomically at
//! checkpoint and by replaying the log after the snapshot's offset.
//!
//! ```text
//! writer-state.snapshot (little-endian)
//!  0 magic            [u8; 4] = "FJWS"
//!  4 version          u16     = 1
//!  6 reserved         u16     = 0
//!  8 snapshot_offset  i64     state covers every batch below this offset
//! 16 writer_count     u32
//! 20 writers, each:   writer_id i64 | last_timestamp i64 | batch_count u32 (1..=5)
//!                     then batch_count x (batch_sequence i32 | offset_delta i32 |
//!                                         last_offset i64 | timestamp i64)
//!  . crc32c           u32     over every byte before it
//! ```

use std::collections::HashMap;

use fjord_format::log_batch::NO_BATCH_SEQUENCE;

use crate::error::{Result, StorageError};

/// Batches remembered per writer for duplicate detection (Fluss's
/// `NUM_BATCHES_TO_RETAIN`); clients keep at most this many in flight.
pub const BATCHES_RETAINED: usize = 5;
/// Largest writer-state snapshot accepted: protects memory from a corrupt
/// or hostile file (about 290k writers at full history).
pub const SNAPSHOT_BYTES_MAX: u64 = 64 << 20;

const MAGIC: [u8; 4] = *b"FJWS";
const VERSION: u16 = 1;
const HEADER_BYTES: usize = 20;
const ENTRY_HEADER_BYTES: usize = 20;
const BATCH_BYTES: usize = 24;

/// One remembered batch of a writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    /// The batch's sequence.
    pub batch_sequence: i32,
    /// `last_offset - first_offset`.
    pub offset_delta: i32,
    /// Offset of its last record.
    pub last_offset: i64,
    /// Its commit timestamp.
    pub timestamp: i64,
}

impl BatchMeta {
    /// Offset of its first record.
    pub fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

/// The remembered batches of one writer, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriterEntry {
    batches: Vec<BatchMeta>,
    last_timestamp: i64,
}

impl WriterEntry {
    /// Sequence of the newest remembered batch, -1 if none.
    pub fn last_sequence(&self) -> i32 {
        self.batches
            .last()
            .map_or(NO_BATCH_SEQUENCE, |b| b.batch_sequence)
    }
    fn push(&mut self, meta: BatchMeta) {
        if self.batches.len() == BATCHES_RETAINED {
            self.batches.remove(0);
        }
        self.batches.push(meta);
        self.last_timestamp = meta.timestamp;
    }
}

/// Whether `next` may follow `last` (Fluss `WriterAppendInfo.inSequence`, as
/// leader: an unknown writer must start at 0).
pub fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

/// What the writer state says about an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// In sequence: append it.
    Append,
    /// A retry of a batch already appended at these offsets.
    Duplicate(BatchMeta),
}

/// The idempotent-writer table of one tablet. Owned by the tablet's writer;
/// no lock of its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriterStates {
    writers: HashMap<i64, WriterEntry>,
}

impl WriterStates {
    /// Number of writers with state.
    pub fn len(&self) -> usize {
        self.writers.len()
    }
    /// Whether no writer has state.
    pub fn is_empty(&self) -> bool {
        self.writers.is_empty()
    }
    /// The entry of `writer_id`, if any.
    pub fn get(&self, writer_id: i64) -> Option<&WriterEntry> {
        self.writers.get(&writer_id)
    }

    /// Checks `batch_sequence` from `writer_id`. `pending_last` is the
    /// sequence of an earlier batch of the same writer in the same append,
    /// which is not yet recorded.
    pub fn check(
        &self,
        writer_id: i64,
        batch_sequence: i32,
        pending_last: Option<i32>,
    ) -> Result<SequenceCheck> {
        let entry = self.writers.get(&writer_id);
        if let Some(dup) = entry.and_then(|e| {
            e.batches
                .iter()
                .find(|b| b.batch_sequence == batch_sequence)
        }) {
            return Ok(SequenceCheck::Duplicate(*dup));
        }
        let last =
            pending_last.unwrap_or_else(|| entry.map_or(NO_BATCH_SEQUENCE, |e| e.last_sequence()));
        if in_sequence(last, batch_sequence) {
            Ok(SequenceCheck::Append)
        } else {
            Err(StorageError::OutOfOrderSequence {
                writer_id,
                batch_sequence,
                last_sequence: last,
            })
        }
    }

    /// Records an appended (or replayed) batch.
    pub fn record(&mut self, writer_id: i64, meta: BatchMeta) {
        self.writers.entry(writer_id).or_default().push(meta);
    }

    /// Forgets writers idle for longer than `expiration_ms` at `now_ms`.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) {
        self.writers
            .retain(|_, e| now_ms.saturating_sub(e.last_timestamp) <= expiration_ms);
    }

    /// Forgets every batch at or after `offset` (after a truncation); a
    /// writer left with no batch is forgotten.
    pub fn truncate(&mut self, offset: i64) {
        self.writers.retain(|_, e| {
            e.batches.retain(|b| b.last_offset < offset);
            e.last_timestamp = e.batches.last().map_or(e.last_timestamp, |b| b.timestamp);
            !e.batches.is_empty()
        });
    }

    /// Encodes a snapshot covering every batch below `snapshot_offset`.
    pub fn encode(&self, snapshot_offset: i64) -> Vec<u8> {
        let mut ids: Vec<&i64> = self.writers.keys().collect();
        ids.sort_unstable();
        let mut out = Vec::with_capacity(
            HEADER_BYTES + self.writers.len() * (ENTRY_HEADER_BYTES + 2 * BATCH_BYTES) + 4,
        );
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&snapshot_offset.to_le_bytes());
        out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
        for id in ids {
            let e = &self.writers[id];
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&e.last_timestamp.to_le_bytes());
            out.extend_from_slice(&(e.batches.len() as u32).to_le_bytes());
            for b in &e.batches {
                out.extend_from_slice(&b.batch_sequence.to_le_bytes());
                out.extend_from_slice(&b.offset_delta.to_le_bytes());
                out.extend_from_slice(&b.last_offset.to_le_bytes());
                out.extend_from_slice(&b.timestamp.to_le_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a snapshot: `(states, snapshot_offset)`. Rejects a bad magic,
    /// unknown version, bad checksum, or any count that does not fit.
    pub fn decode(bytes: &[u8]) -> Result<(Self, i64), &'static str> {
        if bytes.len() < HEADER_BYTES + 4 {
            return Err("too short");
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) != crc32c::crc32c(body) {
            return Err("checksum mismatch");
        }
        if body[0..4] != MAGIC {
            return Err("bad magic");
        }
        if u16::from_le_bytes([body[4], body[5]]) != VERSION {
            return Err("unknown version");
        }
        let mut r = Reader { b: body, at: 8 };
        let snapshot_offset = r.i64()?;
        let count = r.u32()? as usize;
        // Each writer needs at least a header and one batch.
        if count > body.len() / (ENTRY_HEADER_BYTES + BATCH_BYTES) {
            return Err("writer count does not fit");
        }
        let mut writers = HashMap::with_capacity(count);
        for _ in 0..count {
            let id = r.i64()?;
            let last_timestamp = r.i64()?;
            let n = r.u32()? as usize;
            if n == 0 || n > BATCHES_RETAINED {
                return Err("batch count out of range");
            }
            let mut batches = Vec::with_capacity(BATCHES_RETAINED);
            for _ in 0..n {
                batches.push(BatchMeta {
                    batch_sequence: r.i32()?,
                    offset_delta: r.i32()?,
                    last_offset: r.i64()?,
                    timestamp: r.i64()?,
                });
            }
            writers.insert(
                id,
                WriterEntry {
                    batches,
                    last_timestamp,
                },
            );
        }
        if r.at != body.len() {
            return Err("trailing bytes");
        }
        Ok((Self { writers }, snapshot_offset))
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        let s = self.b.get(self.at..self.at + N).ok_or("truncated")?;
        self.at += N;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn i64(&mut self) -> Result<i64, &'static str> {
        self.take::<8>().map(i64::from_le_bytes)
    }
    fn i32(&mut self) -> Result<i32, &'static str> {
        self.take::<4>().map(i32::from_le_bytes)
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        self.take::<4>().map(u32::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seq: i32, last: i64) -> BatchMeta {
        BatchMeta {
            batch_sequence: seq,
            offset_delta: 1,
            last_offset: last,
            timestamp: 100 + last,
        }
    }

    #[test]
    fn unknown_writer_must_start_at_sequence_zero() {
        let s = WriterStates::default();
        assert_eq!(s.check(7, 0, None).ok(), Some(SequenceCheck::Append));
        assert!(matches!(
            s.check(7, 1, None),
            Err(StorageError::OutOfOrderSequence {
                last_sequence: -1,
                ..
            })
        ));
    }

    #[test]
    fn retried_batches_within_the_last_five_are_duplicates() {
        let mut s = WriterStates::default();
        for seq in 0..7 {
            s.record(1, meta(seq, i64::from(seq) * 2 + 1));
        }
        assert_eq!(
            s.check(1, 6, None).ok(),
            Some(SequenceCheck::Duplicate(meta(6, 13)))
        );
        assert_eq!(
            s.check(1, 2, None).ok(),
            Some(SequenceCheck::Duplicate(meta(2, 5)))
        );
        // Sequence 1 fell out of the window: it is out of order now.
        assert!(s.check(1, 1, None).is_err());
        assert_eq!(s.check(1, 7, None).ok(), Some(SequenceCheck::Append));
        assert!(s.check(1, 9, None).is_err());
        assert_eq!(s.check(1, 8, Some(7)).ok(), Some(SequenceCheck::Append));
    }

    #[test]
    fn sequence_wraps_after_i32_max() {
        assert!(in_sequence(i32::MAX, 0));
        assert!(!in_sequence(i32::MAX, i32::MIN));
    }

    #[test]
    fn expiry_and_truncation_forget_writers() {
        let mut s = WriterStates::default();
        s.record(1, meta(0, 1));
        s.record(2, meta(0, 3));
        s.record(2, meta(1, 5));
        s.truncate(4);
        assert!(s.get(1).is_some());
        assert_eq!(s.get(2).map(|e| e.last_sequence()), Some(0));
        s.expire(101 + 1 + 10, 10);
        assert!(s.get(1).is_none(), "idle past expiration");
    }

    #[test]
    fn snapshot_round_trips_and_rejects_damage() {
        let mut s = WriterStates::default();
        for seq in 0..6 {
            s.record(9, meta(seq, i64::from(seq)));
        }
        s.record(-5, meta(0, 10));
        let bytes = s.encode(42);
        assert_eq!(WriterStates::decode(&bytes), Ok((s, 42)));
        for i in 0..bytes.len() {
            let mut d = bytes.clone();
            d[i] ^= 1;
            assert!(WriterStates::decode(&d).is_err(), "flip at {i} accepted");
        }
        assert!(WriterStates::decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
