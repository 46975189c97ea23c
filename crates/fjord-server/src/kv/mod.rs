//! Primary-key (KV) tables on the tablet server.

pub mod columns;
pub mod merge;
