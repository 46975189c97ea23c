//! fjord-sql: SQL on live Fjord tables, with Apache DataFusion as the
//! engine and the native client (fjord-client) as its only way to the data.
//!
//! Layout, following a statement:
//! - [`engine`]: [`SqlEngine`] (the DataFusion runtime and its memory
//!   pool, the catalog, the query limits) and [`SqlSession`] (one user's
//!   statements and current database).
//! - [`ddl`]: Fjord's own statements in Flink SQL syntax (CREATE/DROP
//!   DATABASE and TABLE, SHOW, USE), parsed and run over the admin client;
//!   unsupported statements refused by name.
//! - [`catalog`]: Fjord databases as schemas of the catalog `fjord`.
//! - [`table`]: one table as a `TableProvider`: the scan planner that
//!   picks log scans, KV scans or a point lookup, and INSERT.
//! - [`auth`]: the endpoints' users (`sql.users`) and the loopback rule.
//! - [`pg`]: the Postgres front end (pgwire, datafusion-postgres's
//!   handlers and `pg_catalog`, SCRAM users).
//! - [`flight`]: the Arrow Flight SQL front end (arrow-flight over tonic,
//!   basic auth and bearer tokens).
//! - `log_scan`, `kv_scan`, `pruning`, `insert`: the reads and
//!   writes, each through the native client.
//!
//! Architecture invariants: nothing here speaks the wire protocol or
//! touches storage — every read and write goes through fjord-client, so
//! the engine works against any Fluss-protocol server. Filters are only
//! ever used to skip data that cannot match (DataFusion re-applies them).
//! A query's reads are bounded by the cut taken when it is planned.
//! **Must not be depended on by** fjord-server: the binary wires the two.

pub mod auth;
pub mod catalog;
pub mod ddl;
pub mod engine;
pub mod error;
pub mod flight;
mod insert;
mod kv_scan;
mod log_scan;
pub mod pg;
mod pruning;
pub mod table;

/// The engine's crate, for front ends that handle its types.
pub use datafusion;
pub use engine::{EngineOptions, Output, SqlEngine, SqlSession};
pub use error::SqlError;
