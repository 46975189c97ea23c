//! Primary-key (KV) tables on the tablet server: [`KvTable`] (what a table's
//! schema and options imply, built once), [`KvTablet`] (one bucket: KV
//! store, changelog, pre-write buffer), [`merge`] (the merge engines) and
//! [`columns`] (changelog rows in and out of Arrow).

pub mod columns;
pub mod merge;
pub mod scanners;
pub mod table;
pub mod tablet;

pub use table::KvTable;
pub use tablet::{KvTablet, PutOutcome};
