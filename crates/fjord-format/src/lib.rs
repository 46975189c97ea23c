//! Fjord's data formats: pure functions over bytes, no I/O.
//!
//! - [`log_batch`]: the Fluss log record batch header (magic V0/V1/V2),
//!   its validation (length, magic, CRC-32C) and the in-place stamping of
//!   server-assigned fields.
//! - [`types`]: Fluss's logical data types with nullability.
//! - [`datum`]: one field value ([`datum::Datum`], [`datum::Timestamp`]),
//!   shared by the client's rows and the KV row codecs.
//! - [`schema`]: table schemas (columns with ids, primary key), table and
//!   database descriptors, validated as Fluss validates them.
//! - [`json`]: the exact JSON forms Fluss clients send and parse.
//! - [`arrow_schema`]: Fluss type → Arrow type mapping.
//! - [`arrow_log`]: the ARROW log format: encode a `RecordBatch` into a
//!   complete log batch, decode one back.
//! - [`projection`]: Fluss `FileLogProjection`: keep only some columns of
//!   a stored ARROW batch without decoding it.
//! - [`statistics`]: Fluss 1.0's per-batch column statistics: written from
//!   an Arrow batch, parsed, and whether a predicate may match a batch.
//! - [`row`]: the primary-key row formats (COMPACTED, INDEXED) and the
//!   compacted key: codecs built once per row type, used per record over
//!   caller-owned buffers.
//! - [`kv`]: the KV record batch (PutKv), the value batch (LimitScan,
//!   ScanKv) and the stored value (`schemaId ‖ row`).
//! - [`fixtures`]: deterministic sample data (`user_behavior`, nested
//!   columns) for tests, benchmarks and fuzzing.
//! - [`error`]: the error type of the metadata modules.
//! - `fuzzing` (hidden): the checks the fuzz targets of the KV and row
//!   decoders run, shared with the crash-regression test that replays
//!   `fuzz/regressions/<target>/`.

pub mod arrow_log;
pub mod arrow_schema;
pub mod datum;
pub mod error;
pub mod fixtures;
#[doc(hidden)]
pub mod fuzzing;
mod ipc;
mod ipc_write;
pub mod json;
pub mod kv;
pub mod log_batch;
pub mod projection;
mod records;
pub mod row;
pub mod schema;
pub mod statistics;
pub mod types;
mod varint;

pub use error::SchemaError;
pub use ipc::{IpcMessageError, MAX_DECODED_BODY_BYTES};
pub use schema::{Column, DatabaseDescriptor, Schema, TableDescriptor, TableDistribution};
pub use types::{DataField, DataType, TypeKind};
