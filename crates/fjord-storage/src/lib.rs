//! Fjord's durable log storage: one [`LogTablet`] per table bucket, owned by
//! a [`LogManager`]. No network code and no async runtime: the server calls
//! the blocking parts (`wait_durable`, `checkpoint`, retention) from
//! `spawn_blocking` or a maintenance thread.
//!
//! Layout of the crate:
//! - [`tablet`]: append (validate, assign offsets, stamp, write), group-commit
//!   durability, reads of whole batches, offset-for-timestamp, retention,
//!   truncation, checkpoint, crash recovery.
//! - [`segment`]: segment files, the sparse offset and time indexes, the
//!   batch scanner used by recovery.
//! - [`writer_state`]: idempotent-writer sequences (duplicate / out-of-order).
//! - [`meta`]: atomically written metadata files (recovery-point checkpoint,
//!   clean-shutdown marker).
//! - [`manager`]: tablets by table bucket under a data directory.
//! - [`fs`]: the file-system seam, with the real file system and a simulated
//!   disk that tears unsynced writes ([`fs::sim::SimFs`]).
//! - [`config`], [`error`]: options with their limits; typed errors.
//!
//! The on-disk format is specified in `docs/FORMAT.md`.

pub mod config;
pub mod error;
pub mod fs;
pub mod manager;
pub mod meta;
pub mod segment;
pub mod tablet;
pub mod writer_state;

pub use config::{Durability, LogConfig};
pub use error::{Result, StorageError};
pub use fs::{Fs, FsFile, OsFs};
pub use manager::{LogManager, TableBucket};
pub use tablet::{AppendInfo, LogTablet, ReadResult, RetentionOutcome};
