//! Fjord's durable log storage: one [`LogTablet`] per table bucket, owned by
//! a [`LogManager`]. No network code and no async runtime: the server calls
//! the blocking parts (`wait_durable`, `checkpoint`, retention) from
//! `spawn_blocking` or a maintenance thread.
//!
//! Layout of the crate:
//! - [`tablet`]: append (validate, assign offsets, stamp, write), group-commit
//!   durability, reads of whole batches, offset-for-timestamp, retention,
//!   truncation, checkpoint, crash recovery; [`tablet::rewrite`]: atomic
//!   replacement of sealed segments by a rewritten one with gaps between
//!   its batches (compaction of primary-key changelogs).
//! - [`segment`]: segment files, the sparse offset and time indexes, the
//!   batch scanner used by recovery.
//! - [`writer_state`]: idempotent-writer sequences (duplicate / out-of-order).
//! - [`meta`]: atomically written metadata files (recovery-point checkpoint,
//!   clean-shutdown marker).
//! - [`manager`]: tablets by table bucket under a data directory.
//! - [`kv`]: the KV stores of primary-key tables (one per bucket, in one
//!   embedded LSM engine), each with the changelog offset it has applied.
//! - [`fs`]: the file-system seam, with the real file system and a simulated
//!   disk that tears unsynced writes ([`fs::sim::SimFs`]).
//! - [`config`], [`error`]: options with their limits; typed errors.
//!
//! The on-disk format is specified in `docs/FORMAT.md`.
//!
//! # How the server uses it
//!
//! ```text
//! start-up   LogManager::new(Arc::new(OsFs), data_dir)
//!            for tb in manager.discover()? { manager.open_tablet(tb, config, now_ms)? }
//! produce    spawn_blocking: info = tablet.append(&records, now_ms)?        // pwrite, may roll
//!                            if tablet.ack_needs_sync() { tablet.wait_durable(info.last_offset)? }
//!            (a request over several tablets: sync_together(&tablets) first, one syncfs for all)
//!            reply with info.first_offset (base offset); info.duplicate = retried batch
//! fetch      tablet.read(fetch_offset, max_bytes)? -> ReadResult { records: Bytes, high_watermark, .. }
//! offsets    log_start_offset() / high_watermark() / offset_for_timestamp(ts)?
//! background every ~1 s: manager.run_maintenance(now_ms, checkpoint_due)
//! shutdown   manager.close_all(now_ms)
//! ```
//!
//! `append` and `wait_durable` block on file I/O (and `append` may fsync in
//! interval mode or when it rolls a segment), so an async server calls them
//! from `spawn_blocking` (or a dedicated I/O thread); `read` does one or a
//! few `pread`s and may also be run there. Nothing here spawns threads.

pub mod config;
pub mod error;
pub mod fs;
pub mod kv;
pub mod manager;
pub mod meta;
pub mod segment;
pub mod tablet;
pub mod writer_state;

pub use config::{Durability, LogConfig};
pub use error::{Result, StorageError};
pub use fs::{Fs, FsFile, OsFs};
pub use manager::{LogManager, TableBucket};
pub use tablet::rewrite::{RewriteMark, RewriteOutcome, SegmentRewrite};
pub use tablet::{
    sync_together, AppendInfo, FilteredRead, LogTablet, ReadResult, RetentionOutcome, SegmentInfo,
};
