//! Fluss's primary-key (KV) record batches and stored values: what PutKv
//! carries, what the KV store keeps per key, and what LimitScan and ScanKv
//! return.
//!
//! - [`batch`]: `DefaultKvRecordBatch` (PutKv's `records`): validation,
//!   record iteration, a builder into a reused buffer, and re-stamping the
//!   writer id and sequence of a finished batch.
//! - [`value_batch`]: `DefaultValueRecordBatch` (LimitScan / ScanKv
//!   responses): a builder from stored values and a validating reader.
//! - [`stored_value`]: the value bytes kept per key, `schemaId ‖ row`.
//!
//! Rows inside these are opaque bytes here; [`crate::row`] decodes them.

pub mod batch;
pub mod stored_value;
pub mod value_batch;

pub use batch::{KvBatch, KvBatchBuilder, KvBatchError, KvRecord, KvRecords};
pub use stored_value::{StoredValue, StoredValueError};
pub use value_batch::{ValueBatch, ValueBatchBuilder, ValueBatchError, ValueRecord, ValueRecords};

#[inline]
pub(crate) fn read_i16(b: &[u8], at: usize) -> i16 {
    i16::from_le_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn read_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_le_bytes(a)
}

#[inline]
pub(crate) fn read_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_le_bytes(a)
}

#[inline]
pub(crate) fn write_at(b: &mut [u8], at: usize, bytes: &[u8]) {
    b[at..at + bytes.len()].copy_from_slice(bytes);
}
