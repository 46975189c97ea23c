//! Primary-key tables on the client: what the upsert writer and the
//! lookuper share (`keys`: a row's key and bucket), the rows read back
//! ([`rows`]: lookups' and scans' values decoded), and the bucket scans
//! ([`scan`]: LimitScan and ScanKv sessions).

pub(crate) mod keys;
pub mod rows;
pub mod scan;

pub use rows::{KvRow, KvRowRef, KvRows};
pub use scan::{KvBucket, KvScanner};

/// Table property naming the row format of a primary-key table's values
/// (Fluss's `table.kv.format`: COMPACTED, the default, or INDEXED).
pub const TABLE_KV_FORMAT: &str = "table.kv.format";
