//! fjord-server: the coordinator and tablet-server roles of a single-node
//! Fluss-protocol cluster, in one process.
//!
//! Layout, following a request's path:
//! - [`server`]: open the data dir, bind, serve, shut down cleanly.
//! - [`net`]: the accept loop and per-connection reader / request tasks /
//!   writer, with every limit from [`config`].
//! - [`api`]: one module per Fluss API key; a closed `match` dispatches.
//! - [`node`]: the state handlers share (config, catalog, replicas).
//! - [`meta`]: the metadata store seam (ZooKeeper-like tree) and the catalog
//!   of databases, tables and ids on it (coordinator role).
//! - [`replica`]: log tablets by table bucket (tablet-server role).
//! - [`config`]: Fluss option names, `server.yaml` and `--set`.
//! - [`metrics`]: counters under Fluss's metric names.
//! - [`error`]: the error every handler answers with.
//!
//! Architecture invariants: only fjord-proto knows the wire format (handlers
//! see typed messages); nothing here decodes record bodies; every client
//! error maps to a Fluss error code.

pub mod api;
pub mod config;
pub mod error;
pub mod meta;
pub mod metrics;
pub mod net;
pub mod node;
pub mod replica;
pub mod server;

pub use config::{Options, ServerConfig};
pub use server::{Server, StartError};
