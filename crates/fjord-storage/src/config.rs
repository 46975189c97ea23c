//! Log tablet configuration: Fluss's option names where Fluss has the option,
//! each limit with what it protects.

use crate::error::{Result, StorageError};

/// Default `log.segment.file-size`: 1 GiB, as Fluss.
pub const DEFAULT_SEGMENT_BYTES_MAX: u64 = 1 << 30;
/// Largest allowed segment: positions in the offset index are `u32`, and a
/// batch must fit, so a segment stays below 2 GiB.
pub const SEGMENT_BYTES_LIMIT: u64 = i32::MAX as u64;
/// Default `log.index.interval-size`: one index entry per ~4 KiB of batches,
/// as Fluss. Bounds how far a read scans headers after an index lookup.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u32 = 4096;
/// Default number of index entries per segment before it rolls
/// (`log.index.file-size` 10 MiB / 8-byte entries, as Fluss). Bounds the
/// in-memory index of a segment.
pub const DEFAULT_INDEX_ENTRIES_MAX: u32 = (10 << 20) / 8;
/// Default largest accepted batch: 10 MiB. Protects memory and the segment
/// from one huge request.
pub const DEFAULT_BATCH_BYTES_MAX: usize = 10 << 20;
/// Default `table.log.ttl`: 7 days.
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;
/// Default `server.writer-id.expiration-time`: 7 days, as Fluss. Bounds the
/// writer-state table by forgetting idle writers.
pub const DEFAULT_WRITER_EXPIRATION_MS: i64 = 7 * 24 * 3600 * 1000;

/// When an appended batch is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Default. A batch becomes visible to readers (high watermark) and is
    /// acknowledged only after an fsync covers it. Concurrent appenders share
    /// one fsync (group commit).
    Fsync,
    /// Fluss's and Kafka's default: acknowledge after the write reaches the
    /// page cache and fsync once `messages` records (offsets, as Fluss
    /// counts them) are unflushed or `interval_ms` milliseconds passed,
    /// whichever comes first (`log.flush.interval-messages`,
    /// `log.flush.interval-ms`). A power loss can lose up to one interval of
    /// acknowledged batches; a process crash loses nothing.
    Interval {
        /// Records appended between fsyncs (`log.flush.interval-messages`).
        messages: u64,
        /// Milliseconds between fsyncs (`log.flush.interval-ms`).
        interval_ms: i64,
    },
}

/// Configuration of one log tablet. Computed once at open; the append path
/// only reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `log.segment.file-size`: roll the active segment beyond this size.
    pub segment_bytes_max: u64,
    /// `log.index.interval-size`: bytes of batches between offset-index entries.
    pub index_interval_bytes: u32,
    /// Index entries per segment before it rolls (from `log.index.file-size`).
    pub index_entries_max: u32,
    /// Largest accepted batch (`log.batch.max-size`, Fjord's option).
    pub batch_bytes_max: usize,
    /// When a batch is acknowledged.
    pub durability: Durability,
    /// `log.flush.sync-file-system` (Fjord's option, default true): whether
    /// [`crate::sync_together`] may make this tablet durable with one sync
    /// of its whole file system (`syncfs`) shared with the other buckets
    /// of a request. That sync also writes back whatever else is dirty on
    /// the file system, so a server sharing its disk with heavy writers of
    /// its own may turn it off; each bucket then syncs its own file.
    pub sync_file_system: bool,
    /// `table.log.ttl`: delete sealed segments whose newest batch is older;
    /// `None` keeps them forever.
    pub retention_ms: Option<i64>,
    /// Delete oldest sealed segments while the log is larger than this
    /// (`table.log.retention-bytes`, Fjord's option); `None` has no cap.
    pub retention_bytes: Option<u64>,
    /// `server.writer-id.expiration-time`: forget an idempotent writer after
    /// this long without a batch.
    pub writer_expiration_ms: i64,
    /// Leader epoch stamped into V2 batches (single node: 0).
    pub leader_epoch: i32,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes_max: DEFAULT_SEGMENT_BYTES_MAX,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            index_entries_max: DEFAULT_INDEX_ENTRIES_MAX,
            batch_bytes_max: DEFAULT_BATCH_BYTES_MAX,
            durability: Durability::Fsync,
            sync_file_system: true,
            retention_ms: Some(DEFAULT_RETENTION_MS),
            retention_bytes: None,
            writer_expiration_ms: DEFAULT_WRITER_EXPIRATION_MS,
            leader_epoch: 0,
        }
    }
}

impl LogConfig {
    /// Checks every value is in range; called at tablet open.
    pub fn validate(&self) -> Result<()> {
        if self.segment_bytes_max < 1024 || self.segment_bytes_max > SEGMENT_BYTES_LIMIT {
            return Err(StorageError::Config(
                "log.segment.file-size must be between 1 KiB and 2 GiB - 1",
            ));
        }
        if self.batch_bytes_max as u64 > self.segment_bytes_max
            || self.batch_bytes_max < fjord_format::log_batch::V2_HEADER_SIZE
        {
            return Err(StorageError::Config(
                "log.batch.max-size must fit in a segment and hold a batch header",
            ));
        }
        if self.index_entries_max < 2 {
            return Err(StorageError::Config("log.index.file-size is too small"));
        }
        if let Durability::Interval {
            messages,
            interval_ms,
        } = self.durability
        {
            if messages == 0 || interval_ms < 0 {
                return Err(StorageError::Config(
                    "log.flush.interval-messages must be >= 1 and log.flush.interval-ms >= 0",
                ));
            }
        }
        Ok(())
    }
}
