//! Cluster metadata: the [`store::MetaStore`] seam and the [`catalog`] of
//! databases, tables and ids built on it.

pub mod auto_partition;
pub mod catalog;
pub mod store;
