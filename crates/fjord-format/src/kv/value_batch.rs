//! `DefaultValueRecordBatch`: the rows of a primary-key table a LimitScan
//! or ScanKv response carries, each with its own schema id; no keys, no CRC.
//!
//! ```text
//! offset  field         type
//!  0      Length        i32   bytes after this field (total - 4)
//!  4      Magic         i8    0
//!  5      RecordCount   i32
//!  9      Records       RecordCount x record
//!
//! record := Length   i32      bytes after this field (2 + row)
//!           SchemaId i16      \ together: the stored value
//!           Row               / (super::stored_value), to the end of the record
//! ```
//!
//! Little-endian throughout. Facts from Fluss's
//! `record/DefaultValueRecordBatch.java` (layout; the `Builder`, whose
//! `append(byte[] valueBytes)` writes a stored value as one slice after its
//! length), `DefaultValueRecord.java` (record layout), and fluss-rs 1.0.0's
//! `record/kv/value_record_batch.rs`, which agree. There is no CRC field.
//!
//! Stricter than the readers there: the records must number `RecordCount`
//! and fill the batch exactly, and every record must hold at least its
//! schema id.

use std::iter::FusedIterator;
use std::ops::Range;

use super::stored_value::SCHEMA_ID_BYTES;
use super::{read_i16, read_i32, write_at};

/// The only value batch magic Fluss defines
/// (`ValueRecordBatch.VALUE_BATCH_MAGIC_VALUE_V0`).
pub const VALUE_BATCH_MAGIC_V0: u8 = 0;

const LENGTH_BYTES: usize = 4;
const MAGIC_BYTES: usize = 1;
const RECORD_COUNT_BYTES: usize = 4;

/// Byte position of `Length`.
pub const LENGTH_OFFSET: usize = 0;
/// Byte position of `Magic`.
pub const MAGIC_OFFSET: usize = LENGTH_OFFSET + LENGTH_BYTES;
/// Byte position of `RecordCount`.
pub const RECORD_COUNT_OFFSET: usize = MAGIC_OFFSET + MAGIC_BYTES;
/// Size of the header; the first record starts here.
pub const HEADER_SIZE: usize = RECORD_COUNT_OFFSET + RECORD_COUNT_BYTES;
/// Bytes before the region the `Length` field counts.
pub const BATCH_OVERHEAD: usize = LENGTH_OFFSET + LENGTH_BYTES;
/// Bytes of a record's own `Length` field.
pub const RECORD_LENGTH_BYTES: usize = 4;

/// Largest batch the format can describe (`Length` is an `i32`); the
/// builder refuses to grow past it so no length it writes is truncated.
pub const MAX_BATCH_SIZE_BYTES: usize = BATCH_OVERHEAD + i32::MAX as usize;
/// Most records a batch may hold (`RecordCount` is an `i32`). Validation
/// counts the records present and never allocates by the count.
pub const MAX_RECORD_COUNT: usize = i32::MAX as usize;

const _: () = assert!(MAGIC_OFFSET == 4 && RECORD_COUNT_OFFSET == 5 && HEADER_SIZE == 9);
const _: () = assert!(BATCH_OVERHEAD == 4);

/// What is wrong with bytes that claim to be a value batch, or with a value
/// a builder was asked to append.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueBatchError {
    /// Fewer bytes than the batch declares (or than its header).
    #[error("value batch truncated: needs {needed} bytes, only {available} present")]
    Truncated {
        /// Bytes the batch needs.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// The `Length` field is negative or smaller than the header.
    #[error("value batch length field {length} is negative or shorter than the header")]
    BadLength {
        /// The raw field.
        length: i32,
    },
    /// More bytes than the batch's `Length` accounts for.
    #[error("value batch declares {declared} bytes but {available} were given")]
    TrailingBytes {
        /// Total size from the `Length` field.
        declared: usize,
        /// Bytes given.
        available: usize,
    },
    /// The magic byte is not 0.
    #[error("unsupported value batch magic {magic} (known: 0)")]
    UnknownMagic {
        /// The magic byte found.
        magic: u8,
    },
    /// `RecordCount` is negative.
    #[error("value batch record count is negative ({record_count})")]
    NegativeRecordCount {
        /// The raw field.
        record_count: i32,
    },
    /// The records present are not as many as `RecordCount` says.
    #[error("value batch declares {declared} records but holds {found}")]
    RecordCountMismatch {
        /// `RecordCount`.
        declared: i32,
        /// Records present.
        found: usize,
    },
    /// A record's length field or body runs past the end of the batch.
    #[error(
        "value record {index} at offset {offset} needs {needed} bytes, only {available} remain"
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
    /// A record's length is negative or leaves no room for the schema id.
    #[error("value record {index} at offset {offset} has invalid length {length}")]
    BadRecordLength {
        /// Index of the record.
        index: usize,
        /// Where the record starts.
        offset: usize,
        /// The raw field.
        length: i32,
    },
    /// A stored value to append is shorter than its schema id.
    #[error("a stored value of {size} bytes has no room for its schema id")]
    ValueTooShort {
        /// Bytes given.
        size: usize,
    },
    /// Appending would make the batch larger than [`MAX_BATCH_SIZE_BYTES`].
    #[error("value batch of {size} bytes would exceed the format maximum {MAX_BATCH_SIZE_BYTES}")]
    TooLarge {
        /// Size the batch would have.
        size: usize,
    },
    /// Appending would exceed [`MAX_RECORD_COUNT`] records.
    #[error("value batch cannot hold more than {MAX_RECORD_COUNT} records")]
    TooManyRecords,
}

/// One record of a value batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRecord<'a> {
    /// The schema the row was written with.
    pub schema_id: i16,
    /// The row bytes.
    pub row: &'a [u8],
}

/// Writes one value batch after whatever `out` already holds: the server
/// appends each stored value as it reads it, then finishes the header.
///
/// Guarantees: after `finish`, the returned range of `out` is exactly one
/// batch that [`ValueBatch::validate`] accepts, records in append order.
#[derive(Debug)]
pub struct ValueBatchBuilder<'b> {
    out: &'b mut Vec<u8>,
    start: usize,
    record_count: usize,
}

impl<'b> ValueBatchBuilder<'b> {
    /// Starts a batch at the end of `out` (its header written by `finish`).
    pub fn start(out: &'b mut Vec<u8>) -> Self {
        let start = out.len();
        out.resize(start + HEADER_SIZE, 0);
        Self {
            out,
            start,
            record_count: 0,
        }
    }

    /// Appends a stored value (`schemaId i16 LE ‖ row`) as one record, as
    /// the KV store holds it; fails for fewer than 2 bytes.
    pub fn append_value(&mut self, stored_value: &[u8]) -> Result<(), ValueBatchError> {
        if stored_value.len() < SCHEMA_ID_BYTES {
            return Err(ValueBatchError::ValueTooShort {
                size: stored_value.len(),
            });
        }
        self.append_parts(&[], stored_value)
    }

    /// Appends the row `row` written with `schema_id` as one record.
    pub fn append(&mut self, schema_id: i16, row: &[u8]) -> Result<(), ValueBatchError> {
        self.append_parts(&schema_id.to_le_bytes(), row)
    }

    fn append_parts(&mut self, head: &[u8], rest: &[u8]) -> Result<(), ValueBatchError> {
        if self.record_count >= MAX_RECORD_COUNT {
            return Err(ValueBatchError::TooManyRecords);
        }
        let value = head.len() + rest.len();
        let size = (self.size_in_bytes())
            .saturating_add(RECORD_LENGTH_BYTES)
            .saturating_add(value);
        if size > MAX_BATCH_SIZE_BYTES {
            return Err(ValueBatchError::TooLarge { size });
        }
        self.out.reserve(RECORD_LENGTH_BYTES + value);
        // Fits in i32: the whole batch does.
        self.out.extend_from_slice(&(value as i32).to_le_bytes());
        self.out.extend_from_slice(head);
        self.out.extend_from_slice(rest);
        self.record_count += 1;
        Ok(())
    }

    /// Bytes of the batch so far, header included.
    pub fn size_in_bytes(&self) -> usize {
        self.out.len() - self.start
    }

    /// Records appended so far.
    pub fn record_count(&self) -> usize {
        self.record_count
    }

    /// Writes the header and returns where the batch lies in `out`.
    pub fn finish(self) -> Range<usize> {
        let batch = &mut self.out[self.start..];
        let length = (batch.len() - BATCH_OVERHEAD) as i32;
        write_at(batch, LENGTH_OFFSET, &length.to_le_bytes());
        batch[MAGIC_OFFSET] = VALUE_BATCH_MAGIC_V0;
        let count = self.record_count as i32;
        write_at(batch, RECORD_COUNT_OFFSET, &count.to_le_bytes());
        self.start..self.out.len()
    }
}

/// Parses the record at `at`, returning it and where the next one starts.
#[inline]
fn parse_record(
    batch: &[u8],
    at: usize,
    index: usize,
) -> Result<(ValueRecord<'_>, usize), ValueBatchError> {
    let available = batch.len() - at;
    if available < RECORD_LENGTH_BYTES {
        return Err(ValueBatchError::RecordTruncated {
            index,
            offset: at,
            needed: RECORD_LENGTH_BYTES,
            available,
        });
    }
    let length = read_i32(batch, at);
    if length < SCHEMA_ID_BYTES as i32 {
        return Err(ValueBatchError::BadRecordLength {
            index,
            offset: at,
            length,
        });
    }
    let size = RECORD_LENGTH_BYTES + length as usize;
    let Some(record) = batch.get(at..).and_then(|rest| rest.get(..size)) else {
        return Err(ValueBatchError::RecordTruncated {
            index,
            offset: at,
            needed: size,
            available,
        });
    };
    let schema_id = read_i16(record, RECORD_LENGTH_BYTES);
    let row = &record[RECORD_LENGTH_BYTES + SCHEMA_ID_BYTES..];
    Ok((ValueRecord { schema_id, row }, at + size))
}

/// A value batch whose length, magic, record count and every record's
/// framing have been checked. Only [`ValueBatch::validate`] builds one, so
/// [`ValueBatch::records`] cannot fail.
#[derive(Clone, Copy, Debug)]
pub struct ValueBatch<'a> {
    bytes: &'a [u8],
}

impl<'a> ValueBatch<'a> {
    /// Validates that `bytes` is exactly one well-formed value batch: the
    /// length field matches the slice, the magic is 0, `RecordCount` is
    /// non-negative and equals the records present, and the records fill
    /// the batch exactly, each at least a schema id long.
    pub fn validate(bytes: &'a [u8]) -> Result<Self, ValueBatchError> {
        if bytes.len() < HEADER_SIZE {
            return Err(ValueBatchError::Truncated {
                needed: HEADER_SIZE,
                available: bytes.len(),
            });
        }
        let length = read_i32(bytes, LENGTH_OFFSET);
        if length < (HEADER_SIZE - BATCH_OVERHEAD) as i32 {
            return Err(ValueBatchError::BadLength { length });
        }
        let size = BATCH_OVERHEAD + length as usize;
        let magic = bytes[MAGIC_OFFSET];
        if magic != VALUE_BATCH_MAGIC_V0 {
            return Err(ValueBatchError::UnknownMagic { magic });
        }
        if bytes.len() < size {
            return Err(ValueBatchError::Truncated {
                needed: size,
                available: bytes.len(),
            });
        }
        if bytes.len() > size {
            return Err(ValueBatchError::TrailingBytes {
                declared: size,
                available: bytes.len(),
            });
        }
        let declared = read_i32(bytes, RECORD_COUNT_OFFSET);
        if declared < 0 {
            return Err(ValueBatchError::NegativeRecordCount {
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
            return Err(ValueBatchError::RecordCountMismatch { declared, found });
        }
        Ok(Self { bytes })
    }

    /// The batch's bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Records in the batch (non-negative, and the number `records` yields).
    pub fn record_count(&self) -> i32 {
        read_i32(self.bytes, RECORD_COUNT_OFFSET)
    }

    /// The records, in order.
    pub fn records(&self) -> ValueRecords<'a> {
        ValueRecords {
            batch: self.bytes,
            at: HEADER_SIZE,
            index: 0,
            remaining: self.record_count() as usize,
        }
    }
}

/// The records of a validated [`ValueBatch`]: cannot fail.
#[derive(Clone, Debug)]
pub struct ValueRecords<'a> {
    batch: &'a [u8],
    at: usize,
    index: usize,
    remaining: usize,
}

impl<'a> Iterator for ValueRecords<'a> {
    type Item = ValueRecord<'a>;

    fn next(&mut self) -> Option<ValueRecord<'a>> {
        if self.remaining == 0 {
            return None;
        }
        // Validation parsed these very bytes with the same function.
        let (record, next) = parse_record(self.batch, self.at, self.index)
            .expect("records of a validated ValueBatch");
        self.at = next;
        self.index += 1;
        self.remaining -= 1;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for ValueRecords<'_> {}
impl FusedIterator for ValueRecords<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Data-driven check: validating `bytes` gives `expected`.
    fn check(bytes: &[u8], expected: Result<(), ValueBatchError>) {
        assert_eq!(
            ValueBatch::validate(bytes).map(|_| ()),
            expected,
            "{bytes:02x?}"
        );
    }

    #[test]
    fn known_bytes_match_the_java_builder() {
        // DefaultValueRecordBatch.Builder: append(short, row) then
        // append(byte[] value), worked field by field.
        #[rustfmt::skip]
        let expected = [
            22, 0, 0, 0,            // Length = 26 - 4
            0,                      // Magic
            2, 0, 0, 0,             // RecordCount
            5, 0, 0, 0, 7, 0, 1, 2, 3, // record: length, schema id 7, row 01 02 03
            4, 0, 0, 0, 8, 0, 9, 9,    // record: the stored value 08 00 09 09
        ];
        let mut out = vec![0xee];
        let mut builder = ValueBatchBuilder::start(&mut out);
        builder.append(7, &[1, 2, 3]).expect("fits");
        builder.append_value(&[8, 0, 9, 9]).expect("fits");
        assert_eq!(builder.size_in_bytes(), expected.len());
        let range = builder.finish();
        assert_eq!(&out[range.clone()], &expected);
        let batch = ValueBatch::validate(&out[range]).expect("valid");
        let records: Vec<_> = batch.records().collect();
        assert_eq!(
            records,
            [
                ValueRecord {
                    schema_id: 7,
                    row: &[1, 2, 3]
                },
                ValueRecord {
                    schema_id: 8,
                    row: &[9, 9]
                }
            ]
        );
        assert_eq!(out[0], 0xee, "bytes before the batch are kept");
    }

    #[test]
    fn an_empty_batch_is_nine_bytes() {
        let mut out = Vec::new();
        let range = ValueBatchBuilder::start(&mut out).finish();
        assert_eq!(&out[range], &[5, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            ValueBatch::validate(&out).expect("valid").records().count(),
            0
        );
    }

    #[test]
    fn validation_names_each_defect() {
        let mut out = Vec::new();
        let mut b = ValueBatchBuilder::start(&mut out);
        b.append(1, &[5]).expect("fits");
        b.finish();
        let good = out;
        check(&good, Ok(()));
        check(
            &good[..4],
            Err(ValueBatchError::Truncated {
                needed: 9,
                available: 4,
            }),
        );
        check(
            &good[..good.len() - 1],
            Err(ValueBatchError::Truncated {
                needed: good.len(),
                available: good.len() - 1,
            }),
        );
        let mut longer = good.clone();
        longer.push(0);
        check(
            &longer,
            Err(ValueBatchError::TrailingBytes {
                declared: good.len(),
                available: good.len() + 1,
            }),
        );
        let mut negative = good.clone();
        negative[..4].copy_from_slice(&(-1i32).to_le_bytes());
        check(&negative, Err(ValueBatchError::BadLength { length: -1 }));
        let mut magic = good.clone();
        magic[MAGIC_OFFSET] = 1;
        check(&magic, Err(ValueBatchError::UnknownMagic { magic: 1 }));
        let mut count = good.clone();
        count[RECORD_COUNT_OFFSET..HEADER_SIZE].copy_from_slice(&2i32.to_le_bytes());
        check(
            &count,
            Err(ValueBatchError::RecordCountMismatch {
                declared: 2,
                found: 1,
            }),
        );
        count[RECORD_COUNT_OFFSET..HEADER_SIZE].copy_from_slice(&(-2i32).to_le_bytes());
        check(
            &count,
            Err(ValueBatchError::NegativeRecordCount { record_count: -2 }),
        );
        let mut record = good.clone();
        record[HEADER_SIZE..HEADER_SIZE + 4].copy_from_slice(&1i32.to_le_bytes());
        check(
            &record,
            Err(ValueBatchError::BadRecordLength {
                index: 0,
                offset: 9,
                length: 1,
            }),
        );
        record[HEADER_SIZE..HEADER_SIZE + 4].copy_from_slice(&9i32.to_le_bytes());
        check(
            &record,
            Err(ValueBatchError::RecordTruncated {
                index: 0,
                offset: 9,
                needed: 13,
                available: 7,
            }),
        );
        let mut builder_out = Vec::new();
        let mut b = ValueBatchBuilder::start(&mut builder_out);
        assert_eq!(
            b.append_value(&[1]),
            Err(ValueBatchError::ValueTooShort { size: 1 })
        );
    }

    proptest! {
        #[test]
        fn built_batches_round_trip(
            values in proptest::collection::vec(
                (any::<i16>(), proptest::collection::vec(any::<u8>(), 0..20)), 0..12),
            prefix in proptest::collection::vec(any::<u8>(), 0..4),
        ) {
            let mut out = prefix.clone();
            let mut builder = ValueBatchBuilder::start(&mut out);
            for (schema_id, row) in &values {
                builder.append(*schema_id, row).expect("fits");
            }
            let range = builder.finish();
            prop_assert_eq!(&out[..prefix.len()], &prefix[..]);
            let batch = ValueBatch::validate(&out[range]).expect("valid");
            prop_assert_eq!(batch.records().len(), values.len());
            for (record, (schema_id, row)) in batch.records().zip(&values) {
                prop_assert_eq!(record.schema_id, *schema_id);
                prop_assert_eq!(record.row, &row[..]);
            }
        }

        #[test]
        fn every_truncation_is_refused(
            values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 2..9), 1..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut out = Vec::new();
            let mut builder = ValueBatchBuilder::start(&mut out);
            for value in &values {
                builder.append_value(value).expect("fits");
            }
            builder.finish();
            let cut = cut.index(out.len());
            prop_assert!(ValueBatch::validate(&out[..cut]).is_err());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(batch) = ValueBatch::validate(&bytes) {
                prop_assert_eq!(batch.records().count(), batch.record_count() as usize);
            }
        }
    }
}
