//! fjord-server: the coordinator and tablet-server roles of a single-node
//! Fluss-protocol cluster.
//!
//! Layout, following a request's path:
//! - [`meta`]: the metadata store seam (ZooKeeper-like tree) and the catalog
//!   of databases, tables and ids on it.
//! - [`error`]: the error type every handler answers with (a Fluss error
//!   code and a message).

pub mod error;
pub mod meta;
