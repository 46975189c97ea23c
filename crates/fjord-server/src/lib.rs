//! fjord-server: the coordinator and tablet-server roles of a single-node
//! Fluss-protocol cluster, in one process.
//!
//! Layout, following a request's path:
//! - [`server`]: open the data dir (metadata, tablets), bind, serve until a
//!   shutdown signal, drain in-flight requests, close tablets cleanly.
//! - [`net`]: the accept loop (bounded by `fjord.server.connections-max`)
//!   and, per connection, a reader cutting frames with fjord-proto's decoder
//!   (`fjord.server.frame-bytes-max`), one task per request (bounded by
//!   `fjord.server.in-flight-requests-per-connection-max`) and a writer that
//!   answers in completion order with vectored writes.
//! - [`api`]: one module per Fluss API key; one closed `match` over
//!   fjord-proto's `Request` dispatches.
//! - [`kv`]: primary-key tables: what a table's schema and options imply
//!   ([`kv::KvTable`]), one bucket's merge, changelog and memory layers
//!   ([`kv::KvTablet`]), the merge engines, ScanKv sessions and the
//!   compaction of changelogs.
//! - [`node`]: the state handlers share (config, catalog, replicas, metrics).
//! - [`meta`]: the metadata store seam ([`meta::store::MetaStore`], a
//!   ZooKeeper-like tree; [`meta::store::FileMetaStore`] embedded and
//!   crash-safe), the [`meta::catalog::Catalog`] of databases, tables,
//!   partitions and ids on it — the coordinator role — and the pure
//!   auto-partition schedule ([`meta::auto_partition`]).
//! - [`partitions`]: partition lifecycle (catalog entry + tablets) and the
//!   auto-partitioning check the coordinator runs periodically.
//! - [`replica`]: log tablets (fjord-storage) by table bucket, with the
//!   per-bucket notification that wakes long-polls — the tablet-server role.
//! - [`config`]: Fluss option names, `server.yaml` and `--set`, every limit
//!   named with its default.
//! - [`metrics`]: counters under Fluss's metric names and a Prometheus text
//!   endpoint.
//! - [`error`]: the error every handler answers with (fjord-proto's
//!   `ApiError`: a Fluss error code and a message).
//!
//! Architecture invariants:
//! - Only fjord-proto knows the wire format; handlers see typed messages.
//! - Nothing here decodes log record bodies: produce reads batch headers
//!   only, fetch projection rewrites Arrow metadata without decoding values.
//!   KV records are decoded once, to merge them and build the changelog.
//! - Every error a client can cause maps to a Fluss error code; a bad frame
//!   closes only its connection; nothing a client sends can panic the server.
//! - Handlers reach data only through the replica manager and metadata only
//!   through the catalog, so replication and an external metadata store can
//!   slot in without handler changes.
//! - Storage calls that may block on the disk run on the blocking pool.

pub mod api;
pub mod config;
pub mod error;
pub mod kv;
pub mod meta;
pub mod metrics;
pub mod net;
pub mod node;
pub mod partitions;
pub mod replica;
pub mod server;

pub use config::{Options, ServerConfig};
pub use server::{Server, StartError};
