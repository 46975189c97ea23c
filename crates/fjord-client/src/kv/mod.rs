//! Primary-key tables on the client: what the upsert writer and the
//! lookuper share (`keys`: a row's key and bucket), and the rows read back
//! ([`rows`]: lookups' values decoded).

pub(crate) mod keys;
pub mod rows;

pub use rows::{KvRow, KvRowRef, KvRows};

/// Table property naming the row format of a primary-key table's values
/// (Fluss's `table.kv.format`: COMPACTED, the default, or INDEXED).
pub const TABLE_KV_FORMAT: &str = "table.kv.format";
