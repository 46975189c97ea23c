//! fjord-client: Fjord's native Rust client for the Fluss protocol.
//!
//! Layout, following a record from the caller to the server and back:
//! - [`connection`]: one TCP connection per server, requests multiplexed by
//!   request id, a reader task completing them.
//! - [`admin`]: databases, tables, table info, offsets.
//! - [`metadata`]: bucket leaders of a table, from one MetaData request.
//! - [`writer`]: the append writer (Arrow batches in, log batches out).
//! - [`scanner`]: the log scanner (fetch, decode, projection pushdown).
//!
//! Architecture invariants: everything derivable from a table (schema,
//! Arrow schema, bucket count, encoders) is resolved once when a writer or
//! scanner is created; the per-record path touches only column builders.
//! Hand-offs between tasks happen per batch.

pub mod admin;
pub mod bucket;
pub mod client;
pub mod connection;
pub mod error;
pub mod metadata;
pub mod partition;
pub mod row;
pub mod scanner;
pub mod writer;

pub use admin::{Admin, OffsetSpec, TableInfo, TablePath};
pub use client::FlussClient;
pub use connection::ServerConnection;
pub use error::{ClientError, Result};
pub use metadata::TableRoute;
pub use partition::{PartitionLookup, PartitionRouter, PartitionView};
pub use scanner::{LogScanner, ScanBatch, ScannerConfig};
pub use scanner::{OffsetReset, ScanBucket, ScanRow, ScanRows, StartOffset};
pub use writer::{AppendWriter, BatchAck, BatchCompletion, WriterConfig, WriterStats};
