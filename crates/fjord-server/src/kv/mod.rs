//! Primary-key (KV) tables on the tablet server: [`KvTable`] (what a table's
//! schema and options imply, built once), [`KvTablet`] (one bucket: KV
//! store, changelog, pre-write buffer), [`merge`] (the merge engines),
//! [`columns`] (changelog rows in and out of Arrow), [`scanners`] (ScanKv
//! sessions) and [`changelog_compaction`] (compaction of changelogs past
//! `table.log.ttl`).
//!
//! Every KV batch, stored value and changelog batch is read with the schema
//! of its own schema id, padded with NULLs to the table's current one
//! (columns are only ever added last); changelogs are written at the
//! current schema id.

pub mod changelog_compaction;
pub mod columns;
pub mod key;
pub mod merge;
pub mod run;
pub mod scanners;
pub mod table;
pub mod tablet;

pub use table::KvTable;
pub use tablet::{KvTablet, PutOutcome};
