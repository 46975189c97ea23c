//! `DefaultKvRecordBatch`: the batch of upserts and deletes a PutKv request
//! carries for one bucket (exactly one batch per bucket: the Java server
//! reads `PbPutKvReqForBucket.records` as a single batch in
//! `ServerRpcMessageUtils.getPutKvData`, so there is no splitter here).
//!
//! ```text
//! offset  field          type
//!  0      Length         i32   bytes after this field (total - 4)
//!  4      Magic          i8    0
//!  5      CRC            u32   CRC-32C (Castagnoli) of bytes 9..end
//!  9      SchemaId       i16   schema of every row in the batch
//! 11      Attributes     i8    0 (no bit is used)
//! 12      WriterId       i64   -1 = no writer (not idempotent)
//! 20      BatchSequence  i32   -1 = no writer
//! 24      RecordCount    i32
//! 28      Records        RecordCount x record
//!
//! record := Length i32            bytes after this field
//!           KeyLength varint      unsigned, canonical
//!           Key                   KeyLength bytes, the compacted key (never empty)
//!           Row                   the rest of the record; no bytes = delete
//! ```
//!
//! Every multi-byte field is little-endian (`MemorySegment.putInt` in the
//! JVM's native order; fluss-rs `put_i32_le`). The row has no length or
//! schema id of its own: its length is what the record has left, its
//! schema is the batch's.
//!
//! Facts from Fluss's `record/DefaultKvRecordBatch.java` (layout, CRC
//! range), `DefaultKvRecord.java` (record layout, `writeTo` / `readFrom`),
//! `KvRecordBatchBuilder.java` (header written last, attributes 0, the
//! record-count limit) and fluss-rs 1.0.0's `record/kv/kv_record_batch.rs`,
//! `kv_record.rs` and `kv_record_batch_builder.rs`, which agree.
//!
//! Stricter than the Java server, which never checks the CRC on the KV
//! path and reads only `RecordCount` records: [`KvBatch::validate`] checks
//! the CRC, that the records fill the batch exactly and number
//! `RecordCount`, that key lengths are canonical varints (Java recomputes
//! the varint's size from its value, so an overlong one would misparse
//! there), and that no key is empty (every compacted key value takes a
//! byte, and Fluss's bucketing refuses an empty key).

use std::iter::FusedIterator;

pub use crate::log_batch::{NO_BATCH_SEQUENCE, NO_WRITER_ID};
use crate::varint;

use super::{read_i16, read_i32, read_i64, write_at};

/// The only KV batch magic Fluss defines (`KvRecordBatch.KV_MAGIC_VALUE_V0`).
pub const KV_MAGIC_V0: u8 = 0;

const LENGTH_BYTES: usize = 4;
const MAGIC_BYTES: usize = 1;
const CRC_BYTES: usize = 4;
const SCHEMA_ID_BYTES: usize = 2;
const ATTRIBUTES_BYTES: usize = 1;
const WRITER_ID_BYTES: usize = 8;
const BATCH_SEQUENCE_BYTES: usize = 4;
const RECORD_COUNT_BYTES: usize = 4;

/// Byte position of `Length`.
pub const LENGTH_OFFSET: usize = 0;
/// Byte position of `Magic`.
pub const MAGIC_OFFSET: usize = LENGTH_OFFSET + LENGTH_BYTES;
/// Byte position of `CRC`.
pub const CRC_OFFSET: usize = MAGIC_OFFSET + MAGIC_BYTES;
/// Byte position of `SchemaId`; the CRC covers from here to the end.
pub const SCHEMA_ID_OFFSET: usize = CRC_OFFSET + CRC_BYTES;
/// Byte position of `Attributes`.
pub const ATTRIBUTES_OFFSET: usize = SCHEMA_ID_OFFSET + SCHEMA_ID_BYTES;
/// Byte position of `WriterId`.
pub const WRITER_ID_OFFSET: usize = ATTRIBUTES_OFFSET + ATTRIBUTES_BYTES;
/// Byte position of `BatchSequence`.
pub const BATCH_SEQUENCE_OFFSET: usize = WRITER_ID_OFFSET + WRITER_ID_BYTES;
/// Byte position of `RecordCount`.
pub const RECORD_COUNT_OFFSET: usize = BATCH_SEQUENCE_OFFSET + BATCH_SEQUENCE_BYTES;
/// Size of the header; the first record starts here.
pub const HEADER_SIZE: usize = RECORD_COUNT_OFFSET + RECORD_COUNT_BYTES;
/// Bytes before the region the `Length` field counts (`KV_OVERHEAD`).
pub const KV_OVERHEAD: usize = LENGTH_OFFSET + LENGTH_BYTES;
/// Bytes of a record's own `Length` field.
pub const RECORD_LENGTH_BYTES: usize = 4;
/// The smallest record: its length, a one-byte key length, a one-byte key.
pub const MIN_RECORD_SIZE: usize = RECORD_LENGTH_BYTES + 1 + 1;

/// Largest batch the format can describe: `Length` is an `i32`. The
/// server's request-size limit is far smaller; this bound keeps every size
/// computation here within `i32` so lengths written are never truncated.
pub const MAX_BATCH_SIZE_BYTES: usize = KV_OVERHEAD + i32::MAX as usize;
/// Most records a batch may hold: `KvRecordBatchBuilder` refuses the
/// `Integer.MAX_VALUE`-th. Validation never allocates by the count (it
/// counts the records actually present), so a corrupt count cannot cost
/// memory; the builder refuses to write a count beyond this.
pub const MAX_RECORD_COUNT: usize = i32::MAX as usize - 1;

// The layout Fluss's Java `DefaultKvRecordBatch` and fluss-rs agree on.
const _: () = assert!(KV_OVERHEAD == 4);
const _: () = assert!(MAGIC_OFFSET == 4 && CRC_OFFSET == 5 && SCHEMA_ID_OFFSET == 9);
const _: () = assert!(ATTRIBUTES_OFFSET == 11 && WRITER_ID_OFFSET == 12);
const _: () = assert!(BATCH_SEQUENCE_OFFSET == 20 && RECORD_COUNT_OFFSET == 24);
const _: () = assert!(HEADER_SIZE == 28);
// Everything the writer id re-stamp touches is inside the CRC'd region.
const _: () = assert!(WRITER_ID_OFFSET >= SCHEMA_ID_OFFSET);

/// What is wrong with bytes that claim to be a KV batch, or with a record a
/// builder was asked to append.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvBatchError {
    /// Fewer bytes than the batch declares (or than its length and magic).
    #[error("kv batch truncated: needs {needed} bytes, only {available} present")]
    Truncated {
        /// Bytes the batch needs.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// The `Length` field is negative.
    #[error("kv batch length field is negative ({length})")]
    NegativeLength {
        /// The raw field.
        length: i32,
    },
    /// The magic byte is not 0.
    #[error("unsupported kv batch magic {magic} (known: 0)")]
    UnknownMagic {
        /// The magic byte found.
        magic: u8,
    },
    /// The declared size is smaller than the header.
    #[error("kv batch of {size} bytes is smaller than the {HEADER_SIZE}-byte header")]
    ShorterThanHeader {
        /// Total size from the `Length` field.
        size: usize,
    },
    /// More bytes than the batch's `Length` accounts for (PutKv carries one
    /// batch per bucket).
    #[error("kv batch declares {declared} bytes but {available} were given")]
    TrailingBytes {
        /// Total size from the `Length` field.
        declared: usize,
        /// Bytes given.
        available: usize,
    },
    /// The stored CRC-32C does not match the bytes.
    #[error("kv batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC in the header.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// `RecordCount` is negative.
    #[error("kv batch record count is negative ({record_count})")]
    NegativeRecordCount {
        /// The raw field.
        record_count: i32,
    },
    /// The records present are not as many as `RecordCount` says.
    #[error("kv batch declares {declared} records but holds {found}")]
    RecordCountMismatch {
        /// `RecordCount`.
        declared: i32,
        /// Records present.
        found: usize,
    },
    /// A record's length field or body runs past the end of the batch.
    #[error(
        "kv record {index} at offset {offset} needs {needed} bytes, only {available} remain in the batch"
    )]
    RecordTruncated {
        /// Index of the record.
        index: usize,
        /// Where the record starts.
        offset: usize,
        /// Bytes it needs.
        needed: usize,
        /// Bytes left in the batch.
        available: usize,
    },
    /// A record's length field is negative.
    #[error("kv record {index} at offset {offset} has negative length {length}")]
    NegativeRecordLength {
        /// Index of the record.
        index: usize,
        /// Where the record starts.
        offset: usize,
        /// The raw field.
        length: i32,
    },
    /// A record's key length is not a canonical varint, or the key runs past
    /// the record.
    #[error("kv record {index} at offset {offset} has a malformed key length")]
    BadKeyLength {
        /// Index of the record.
        index: usize,
        /// Where the record starts.
        offset: usize,
    },
    /// A record's key is empty.
    #[error("kv record {index} at offset {offset} has an empty key")]
    EmptyKey {
        /// Index of the record.
        index: usize,
        /// Where the record starts (or would start, for a builder).
        offset: usize,
    },
    /// An upsert with no row bytes: on the wire it would read as a delete.
    #[error("kv record {index}: an upsert needs row bytes (none would mean delete)")]
    EmptyRow {
        /// Index of the record.
        index: usize,
    },
    /// Appending would make the batch larger than [`MAX_BATCH_SIZE_BYTES`].
    #[error("kv batch of {size} bytes would exceed the format maximum {MAX_BATCH_SIZE_BYTES}")]
    TooLarge {
        /// Size the batch would have.
        size: usize,
    },
    /// Appending would exceed [`MAX_RECORD_COUNT`] records.
    #[error("kv batch cannot hold more than {MAX_RECORD_COUNT} records")]
    TooManyRecords,
}

/// One record of a validated batch: the key and, for an upsert, the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvRecord<'a> {
    /// The compacted key; never empty.
    pub key: &'a [u8],
    /// The row bytes of an upsert (never empty); `None` for a delete.
    pub row: Option<&'a [u8]>,
}

impl KvRecord<'_> {
    /// Whether this record deletes its key.
    pub fn is_delete(&self) -> bool {
        self.row.is_none()
    }
}

/// Bytes a record of `key` and `row` (`None` = delete) takes in a batch,
/// its length field included (`DefaultKvRecord.sizeOf`): what a writer
/// adds to [`KvBatchBuilder::size_in_bytes`] to decide whether it fits.
pub fn record_size(key: &[u8], row: Option<&[u8]>) -> usize {
    let key_length_bytes = varint::size_u32(u32::try_from(key.len()).unwrap_or(u32::MAX));
    RECORD_LENGTH_BYTES + key_length_bytes + key.len() + row.map_or(0, <[u8]>::len)
}

/// Parses the record at `at` of a batch whose bytes end at `batch.len()`,
/// returning it and where the next one starts.
#[inline]
fn parse_record(
    batch: &[u8],
    at: usize,
    index: usize,
) -> Result<(KvRecord<'_>, usize), KvBatchError> {
    let available = batch.len() - at;
    if available < RECORD_LENGTH_BYTES {
        return Err(KvBatchError::RecordTruncated {
            index,
            offset: at,
            needed: RECORD_LENGTH_BYTES,
            available,
        });
    }
    let length = read_i32(batch, at);
    if length < 0 {
        return Err(KvBatchError::NegativeRecordLength {
            index,
            offset: at,
            length,
        });
    }
    let size = RECORD_LENGTH_BYTES + length as usize;
    let Some(record) = batch.get(at..).and_then(|rest| rest.get(..size)) else {
        return Err(KvBatchError::RecordTruncated {
            index,
            offset: at,
            needed: size,
            available,
        });
    };
    let mut pos = RECORD_LENGTH_BYTES;
    let bad_key = KvBatchError::BadKeyLength { index, offset: at };
    let key_length = varint::read_u32(record, &mut pos).map_err(|_| bad_key.clone())? as usize;
    let Some(key) = record.get(pos..).and_then(|rest| rest.get(..key_length)) else {
        return Err(bad_key);
    };
    if key.is_empty() {
        return Err(KvBatchError::EmptyKey { index, offset: at });
    }
    let row = &record[pos + key_length..];
    let row = if row.is_empty() { None } else { Some(row) };
    Ok((KvRecord { key, row }, at + size))
}

/// A KV batch whose length, magic, CRC-32C, record count and every record's
/// framing have been checked. Only [`KvBatch::validate`] builds one, so the
/// accessors read in bounds and [`KvBatch::records`] cannot fail.
#[derive(Clone, Copy, Debug)]
pub struct KvBatch<'a> {
    bytes: &'a [u8],
}

impl<'a> KvBatch<'a> {
    /// Validates that `bytes` is exactly one well-formed batch: the length
    /// field matches the slice, the magic is 0, the CRC-32C over
    /// `SchemaId..end` matches, `RecordCount` is non-negative and equals the
    /// records present, and those records fill the batch exactly, each
    /// inside it, with a canonical key length and a non-empty key.
    pub fn validate(bytes: &'a [u8]) -> Result<Self, KvBatchError> {
        if bytes.len() < MAGIC_OFFSET + MAGIC_BYTES {
            return Err(KvBatchError::Truncated {
                needed: MAGIC_OFFSET + MAGIC_BYTES,
                available: bytes.len(),
            });
        }
        let length = read_i32(bytes, LENGTH_OFFSET);
        if length < 0 {
            return Err(KvBatchError::NegativeLength { length });
        }
        let size = KV_OVERHEAD + length as usize;
        let magic = bytes[MAGIC_OFFSET];
        if magic != KV_MAGIC_V0 {
            return Err(KvBatchError::UnknownMagic { magic });
        }
        if size < HEADER_SIZE {
            return Err(KvBatchError::ShorterThanHeader { size });
        }
        if bytes.len() < size {
            return Err(KvBatchError::Truncated {
                needed: size,
                available: bytes.len(),
            });
        }
        if bytes.len() > size {
            return Err(KvBatchError::TrailingBytes {
                declared: size,
                available: bytes.len(),
            });
        }
        let stored = read_i32(bytes, CRC_OFFSET) as u32;
        let computed = crc32c::crc32c(&bytes[SCHEMA_ID_OFFSET..]);
        if stored != computed {
            return Err(KvBatchError::CrcMismatch { stored, computed });
        }
        let declared = read_i32(bytes, RECORD_COUNT_OFFSET);
        if declared < 0 {
            return Err(KvBatchError::NegativeRecordCount {
                record_count: declared,
            });
        }
        let mut at = HEADER_SIZE;
        let mut found = 0;
        while at < bytes.len() {
            at = parse_record(bytes, at, found)?.1;
            found += 1;
        }
        if found != declared as usize {
            return Err(KvBatchError::RecordCountMismatch { declared, found });
        }
        Ok(Self { bytes })
    }

    /// The batch's bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Total size in bytes (`Length` + 4).
    pub fn size_in_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The magic byte (always [`KV_MAGIC_V0`]).
    pub fn magic(&self) -> u8 {
        self.bytes[MAGIC_OFFSET]
    }

    /// The stored CRC-32C.
    pub fn crc(&self) -> u32 {
        read_i32(self.bytes, CRC_OFFSET) as u32
    }

    /// The schema id of every row in the batch.
    pub fn schema_id(&self) -> i16 {
        read_i16(self.bytes, SCHEMA_ID_OFFSET)
    }

    /// The attributes byte (no bit is defined; Fluss writes 0).
    pub fn attributes(&self) -> u8 {
        self.bytes[ATTRIBUTES_OFFSET]
    }

    /// The writer id, [`NO_WRITER_ID`] for a non-idempotent writer.
    pub fn writer_id(&self) -> i64 {
        read_i64(self.bytes, WRITER_ID_OFFSET)
    }

    /// The batch sequence, [`NO_BATCH_SEQUENCE`] for a non-idempotent writer.
    pub fn batch_sequence(&self) -> i32 {
        read_i32(self.bytes, BATCH_SEQUENCE_OFFSET)
    }

    /// Records in the batch (non-negative, and the number `records` yields).
    pub fn record_count(&self) -> i32 {
        read_i32(self.bytes, RECORD_COUNT_OFFSET)
    }

    /// The records, in order.
    pub fn records(&self) -> KvRecords<'a> {
        KvRecords {
            batch: self.bytes,
            at: HEADER_SIZE,
            index: 0,
            remaining: self.record_count() as usize,
        }
    }
}

/// The records of a validated [`KvBatch`]: cannot fail.
#[derive(Clone, Debug)]
pub struct KvRecords<'a> {
    batch: &'a [u8],
    at: usize,
    index: usize,
    remaining: usize,
}

impl<'a> Iterator for KvRecords<'a> {
    type Item = KvRecord<'a>;

    #[inline]
    fn next(&mut self) -> Option<KvRecord<'a>> {
        if self.remaining == 0 {
            return None;
        }
        // Validation parsed these very bytes with the same function.
        let (record, next) =
            parse_record(self.batch, self.at, self.index).expect("records of a validated KvBatch");
        self.at = next;
        self.index += 1;
        self.remaining -= 1;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for KvRecords<'_> {}
impl FusedIterator for KvRecords<'_> {}

/// Writes one KV batch into a reused buffer: header first (length, count
/// and CRC left for [`finish`]), then each record as it is appended.
///
/// The builder owns the buffer while a batch is built, so it can live in a
/// writer's accumulator between appends; [`restart`] begins the next batch
/// in the same allocation and [`into_buffer`] hands it back.
///
/// Guarantees: after `finish`, the buffer holds exactly one batch that
/// [`KvBatch::validate`] accepts, with the records in append order.
///
/// [`finish`]: KvBatchBuilder::finish
/// [`restart`]: KvBatchBuilder::restart
/// [`into_buffer`]: KvBatchBuilder::into_buffer
#[derive(Debug)]
pub struct KvBatchBuilder {
    buf: Vec<u8>,
    record_count: usize,
}

impl KvBatchBuilder {
    /// Starts a batch of rows of `schema_id` from `writer_id` (with
    /// `batch_sequence`; [`NO_WRITER_ID`] / [`NO_BATCH_SEQUENCE`] for a
    /// non-idempotent writer) in `buf`, which is cleared first.
    pub fn start(buf: Vec<u8>, schema_id: i16, writer_id: i64, batch_sequence: i32) -> Self {
        let mut builder = Self {
            buf,
            record_count: 0,
        };
        builder.restart(schema_id, writer_id, batch_sequence);
        builder
    }

    /// Drops what was built and starts a new batch in the same buffer.
    pub fn restart(&mut self, schema_id: i16, writer_id: i64, batch_sequence: i32) {
        self.buf.clear();
        self.buf.resize(HEADER_SIZE, 0);
        self.buf[MAGIC_OFFSET] = KV_MAGIC_V0;
        write_at(&mut self.buf, SCHEMA_ID_OFFSET, &schema_id.to_le_bytes());
        write_at(&mut self.buf, WRITER_ID_OFFSET, &writer_id.to_le_bytes());
        write_at(
            &mut self.buf,
            BATCH_SEQUENCE_OFFSET,
            &batch_sequence.to_le_bytes(),
        );
        self.record_count = 0;
    }

    /// Appends an upsert of `key` to `row` (both non-empty).
    pub fn append_upsert(&mut self, key: &[u8], row: &[u8]) -> Result<(), KvBatchError> {
        if row.is_empty() {
            return Err(KvBatchError::EmptyRow {
                index: self.record_count,
            });
        }
        self.append(key, row)
    }

    /// Appends a delete of `key` (non-empty).
    pub fn append_delete(&mut self, key: &[u8]) -> Result<(), KvBatchError> {
        self.append(key, &[])
    }

    fn append(&mut self, key: &[u8], row: &[u8]) -> Result<(), KvBatchError> {
        if key.is_empty() {
            return Err(KvBatchError::EmptyKey {
                index: self.record_count,
                offset: self.buf.len(),
            });
        }
        if self.record_count >= MAX_RECORD_COUNT {
            return Err(KvBatchError::TooManyRecords);
        }
        let record = record_size(key, Some(row));
        let size = self.buf.len().saturating_add(record);
        if size > MAX_BATCH_SIZE_BYTES {
            return Err(KvBatchError::TooLarge { size });
        }
        // Both fit in i32: the whole batch does.
        let length = (record - RECORD_LENGTH_BYTES) as i32;
        self.buf.reserve(record);
        self.buf.extend_from_slice(&length.to_le_bytes());
        varint::put_u32(&mut self.buf, key.len() as u32);
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(row);
        self.record_count += 1;
        Ok(())
    }

    /// Bytes of the batch so far, header included: with [`record_size`],
    /// what a writer compares with its batch-size limit before appending.
    pub fn size_in_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Records appended since the batch started.
    pub fn record_count(&self) -> usize {
        self.record_count
    }

    /// Writes the length, record count, attributes and CRC and returns the
    /// batch. Appending after `finish` and finishing again is allowed.
    pub fn finish(&mut self) -> &[u8] {
        let length = (self.buf.len() - KV_OVERHEAD) as i32;
        write_at(&mut self.buf, LENGTH_OFFSET, &length.to_le_bytes());
        self.buf[ATTRIBUTES_OFFSET] = 0;
        let count = self.record_count as i32;
        write_at(&mut self.buf, RECORD_COUNT_OFFSET, &count.to_le_bytes());
        let crc = crc32c::crc32c(&self.buf[SCHEMA_ID_OFFSET..]);
        write_at(&mut self.buf, CRC_OFFSET, &crc.to_le_bytes());
        &self.buf
    }

    /// The buffer, to reuse for another batch (or to keep a finished one).
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }
}

/// Re-stamps the writer id and batch sequence of the finished batch in
/// `batch` and recomputes its CRC: what an idempotent writer does when it
/// (re)assigns a sequence to a batch built earlier. The batch is validated
/// first, so a corrupt batch is never given a fresh, valid CRC.
pub fn restamp_writer(
    batch: &mut [u8],
    writer_id: i64,
    batch_sequence: i32,
) -> Result<(), KvBatchError> {
    KvBatch::validate(batch)?;
    write_at(batch, WRITER_ID_OFFSET, &writer_id.to_le_bytes());
    write_at(batch, BATCH_SEQUENCE_OFFSET, &batch_sequence.to_le_bytes());
    let crc = crc32c::crc32c(&batch[SCHEMA_ID_OFFSET..]);
    write_at(batch, CRC_OFFSET, &crc.to_le_bytes());
    Ok(())
}

// The same "no writer" values as the log batch (`KvRecordBatch.NO_WRITER_ID`).
const _: () = assert!(NO_WRITER_ID == -1 && NO_BATCH_SEQUENCE == -1);

#[cfg(test)]
mod tests;
