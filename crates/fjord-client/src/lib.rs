//! fjord-client: Fjord's native Rust client for the Fluss protocol.
//!
//! Layout, following a record from the caller to the server and back:
//! - [`client`]: [`FlussClient`], the entry point: bootstrap list with
//!   fallback, one connection per server, metadata cache.
//! - [`connection`]: one TCP connection per server, requests multiplexed by
//!   request id, a reader task completing them.
//! - [`admin`]: databases, tables, partitions, table info, offsets.
//! - [`metadata`]: bucket leaders of a table or partition, from one
//!   MetaData request.
//! - [`row`]: typed rows ([`row::Datum`], [`row::InternalRow`]; a row type
//!   of the caller's own writes its fields with [`row::FieldWriter`]) and
//!   the row → Arrow builder.
//! - [`bucket`]: bucket assignment (sticky, round-robin, key hash as the
//!   official clients compute it).
//! - [`partition`]: row → partition id, dynamic partition creation.
//! - [`writer`]: the append writer (rows or Arrow batches in; per-bucket
//!   builders, encoder thread, sender task; log batches out).
//! - [`scanner`]: the log scanner (fetch, decode, projection pushdown).
//! - [`upsert`]: the upsert writer for primary-key tables (upserts,
//!   deletes, partial updates in KV batches, through the append writer's
//!   memory bound, idempotence and sender).
//! - [`lookup`]: the lookuper (point and prefix lookups, batched per
//!   server and pipelined).
//! - [`kv`]: what the primary-key paths share (keys and buckets, rows read
//!   back) and the bucket scans (LimitScan, ScanKv).
//!
//! Architecture invariants: everything derivable from a table (schema,
//! Arrow schema, bucket count, encoders, assigners) is resolved once when a
//! writer or scanner is created; the per-record path touches only column
//! builders (behind one uncontended lock on the writer's side). Hand-offs
//! between threads and tasks happen per batch. A table's
//! [`admin::TableInfo`] carries every earlier schema, so rows and batches
//! of an older schema id read with NULL in the columns added since.

pub mod admin;
pub mod bucket;
pub mod client;
pub mod connection;
pub mod error;
pub mod kv;
pub mod lookup;
pub mod metadata;
mod options;
pub mod partition;
pub mod row;
pub mod scanner;
pub mod upsert;
pub mod writer;

pub use admin::{Admin, OffsetSpec, TableChange, TableInfo, TablePath};
pub use client::FlussClient;
pub use connection::ServerConnection;
pub use error::{ClientError, Result};
pub use kv::{KvBucket, KvRow, KvRowRef, KvRows, KvScanner};
pub use lookup::{LookupConfig, Lookuper, PrefixLookuper};
pub use metadata::TableRoute;
pub use partition::{PartitionLookup, PartitionRouter, PartitionView};
pub use scanner::{ChangeType, LogScanner, ScanBatch, ScannerConfig};
pub use scanner::{OffsetReset, ScanBucket, ScanRow, ScanRows, StartOffset};
pub use upsert::{AggMode, BucketOffset, UpsertOptions, UpsertWriter};
pub use writer::{AppendWriter, BatchAck, BatchCompletion, WriterConfig, WriterStats};
