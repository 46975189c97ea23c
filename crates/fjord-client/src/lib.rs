//! fjord-client: Fjord's native Rust client for the Fluss protocol.
//!
//! Layout, following a record from the caller to the server and back:
//! - [`connection`]: one TCP connection per server, requests multiplexed by
//!   request id, a reader task completing them.
//! - [`admin`]: databases, tables, table info, offsets.
//!
//! Architecture invariants: everything derivable from a table (schema,
//! Arrow schema, bucket count, encoders) is resolved once when a writer or
//! scanner is created; the per-record path touches only column builders.
//! Hand-offs between tasks happen per batch.

pub mod admin;
pub mod connection;
pub mod error;

pub use admin::{Admin, OffsetSpec, TableInfo, TablePath};
pub use connection::ServerConnection;
pub use error::{ClientError, Result};
