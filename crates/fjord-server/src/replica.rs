//! The replica manager: the tablet-server role's only way to reach log
//! tablets, keyed by [`TableBucket`]. On a single node every replica is the
//! leader; followers, ISR and leader epochs slot in here later without
//! changing the handlers.
//!
//! Storage calls that may block on the disk (append's write, fsync, reads)
//! run on tokio's blocking pool so they never stall the network tasks.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use fjord_storage::{AppendInfo, LogConfig, LogManager, LogTablet, OsFs, ReadResult, StorageError};
use tokio::sync::Notify;
use tracing::{error, warn};

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::TableInfo;

/// A table bucket: table id and bucket id (partitions come later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableBucket {
    /// The table.
    pub table_id: i64,
    /// The bucket within the table.
    pub bucket_id: i32,
}

impl TableBucket {
    fn storage(self) -> fjord_storage::TableBucket {
        fjord_storage::TableBucket {
            table_id: self.table_id,
            partition_id: None,
            bucket: self.bucket_id,
        }
    }
}

/// Milliseconds since the epoch (commit timestamps, writer expiry).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The Fluss error code and message for a storage failure.
pub fn storage_error(bucket: TableBucket, e: StorageError) -> ApiError {
    let code = match &e {
        StorageError::CorruptBatch { .. } | StorageError::EmptyAppend { .. } => {
            ErrorCode::CorruptMessage
        }
        StorageError::Damaged { .. } => ErrorCode::CorruptMessage,
        StorageError::BatchTooLarge { .. } => ErrorCode::RecordTooLargeException,
        StorageError::OffsetOutOfRange { .. } => ErrorCode::LogOffsetOutOfRangeException,
        StorageError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequenceException,
        StorageError::StorageFull { .. }
        | StorageError::Io { .. }
        | StorageError::Offline { .. }
        | StorageError::BadFile { .. }
        | StorageError::Config(_) => ErrorCode::StorageException,
    };
    ApiError::new(
        code,
        format!("table {} bucket {}: {e}", bucket.table_id, bucket.bucket_id),
    )
}

/// One bucket's log on this node and the signal that wakes long-polling
/// fetches when its high watermark moves.
pub struct Replica {
    /// Which bucket this is.
    pub bucket: TableBucket,
    /// The bucket's log tablet.
    pub tablet: Arc<LogTablet>,
    /// The schema id batches must carry (the table's current schema).
    pub schema_id: i32,
    /// Notified (all waiters) whenever the high watermark may have moved.
    pub appended: Notify,
}

impl Replica {
    /// Appends `records` (one bucket's batches of a ProduceLog request). The
    /// batches are written but, under the fsync policy, not yet durable nor
    /// visible: follow with [`Replica::wait_durable`] or
    /// [`Replica::publish_in_background`].
    pub async fn append(self: &Arc<Self>, records: Bytes) -> Result<AppendInfo, ApiError> {
        let replica = Arc::clone(self);
        let bucket = self.bucket;
        let joined = tokio::task::spawn_blocking(move || {
            // The tablet stamps offsets and timestamps in place, so it needs
            // its own mutable copy: one memcpy per bucket and request, not
            // per record.
            let mut owned = BytesMut::from(&records[..]);
            let info = replica.tablet.append(&mut owned, now_ms())?;
            if !replica.tablet.ack_needs_sync() {
                // Interval flushing: visible at write time.
                replica.appended.notify_waiters();
            }
            Ok::<_, StorageError>(info)
        })
        .await;
        match joined {
            Ok(result) => result.map_err(|e| storage_error(bucket, e)),
            Err(e) => Err(ApiError::new(
                ErrorCode::UnknownServerError,
                format!(
                    "append to table {} bucket {} failed: {e}",
                    bucket.table_id, bucket.bucket_id
                ),
            )),
        }
    }

    /// Waits until every offset up to `offset` is durable (group commit),
    /// then wakes long-polling fetches.
    pub async fn wait_durable(self: &Arc<Self>, offset: i64) -> Result<(), ApiError> {
        let replica = Arc::clone(self);
        let bucket = self.bucket;
        let joined = tokio::task::spawn_blocking(move || {
            let r = replica.tablet.wait_durable(offset);
            replica.appended.notify_waiters();
            r
        })
        .await;
        match joined {
            Ok(result) => result.map_err(|e| storage_error(bucket, e)),
            Err(e) => Err(ApiError::new(
                ErrorCode::UnknownServerError,
                format!("fsync wait failed: {e}"),
            )),
        }
    }

    /// For acks 0/1 under the fsync policy: make `offset` durable (and so
    /// visible) without holding up the answer.
    pub fn publish_in_background(self: &Arc<Self>, offset: i64) {
        if !self.tablet.ack_needs_sync() {
            return;
        }
        let replica = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            if let Err(e) = replica.tablet.wait_durable(offset) {
                error!(table = replica.bucket.table_id, bucket = replica.bucket.bucket_id, error = %e, "background fsync failed");
            }
            replica.appended.notify_waiters();
        });
    }

    /// Reads whole batches from `offset`, about `max_bytes` (at least one
    /// batch), never past the high watermark.
    pub async fn read(
        self: &Arc<Self>,
        offset: i64,
        max_bytes: usize,
    ) -> Result<ReadResult, ApiError> {
        let replica = Arc::clone(self);
        let bucket = self.bucket;
        match tokio::task::spawn_blocking(move || replica.tablet.read(offset, max_bytes)).await {
            Ok(r) => r.map_err(|e| storage_error(bucket, e)),
            Err(e) => Err(ApiError::new(
                ErrorCode::UnknownServerError,
                format!("read failed: {e}"),
            )),
        }
    }
}

/// All replicas of this node.
pub struct ReplicaManager {
    logs: LogManager,
    log_config: LogConfig,
    replicas: RwLock<HashMap<TableBucket, Arc<Replica>>>,
}

impl ReplicaManager {
    /// A manager keeping tablets under `<data_dir>/log`.
    pub fn open(data_dir: &Path, log_config: LogConfig) -> Result<Self, ApiError> {
        let logs = LogManager::new(Arc::new(OsFs), data_dir).map_err(|e| {
            ApiError::new(
                ErrorCode::StorageException,
                format!("cannot open the log directory: {e}"),
            )
        })?;
        Ok(Self {
            logs,
            log_config,
            replicas: RwLock::new(HashMap::new()),
        })
    }

    /// Creates (or opens, recovering) the tablets of every bucket of `table`.
    pub fn create_table(&self, table: &TableInfo) -> Result<(), ApiError> {
        for bucket_id in 0..table.bucket_count {
            let bucket = TableBucket {
                table_id: table.table_id,
                bucket_id,
            };
            if self
                .replicas
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&bucket)
            {
                continue;
            }
            let tablet = self
                .logs
                .open_tablet(bucket.storage(), self.log_config.clone(), now_ms())
                .map_err(|e| storage_error(bucket, e))?;
            let replica = Arc::new(Replica {
                bucket,
                tablet,
                schema_id: table.schema_id,
                appended: Notify::new(),
            });
            self.replicas
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .entry(bucket)
                .or_insert(replica);
        }
        Ok(())
    }

    /// Closes and deletes the tablets of a dropped table.
    pub fn drop_table(&self, table_id: i64) {
        let dropped: Vec<Arc<Replica>> = {
            let mut map = self.replicas.write().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<TableBucket> = map
                .keys()
                .filter(|b| b.table_id == table_id)
                .copied()
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for replica in dropped {
            // Wake long-polls so they answer (and drop their handle) now.
            replica.appended.notify_waiters();
            if let Err(e) = self.logs.delete_tablet(replica.bucket.storage()) {
                warn!(table_id, bucket = replica.bucket.bucket_id, error = %e, "cannot delete a dropped table's data");
            }
        }
    }

    /// Deletes tablet directories of tables the catalog no longer has (a
    /// crash between dropping a table from the catalog and deleting its
    /// data leaves them behind). Called once at start-up.
    pub fn delete_orphans(&self, is_live_table: impl Fn(i64) -> bool) -> Result<(), ApiError> {
        let found = self.logs.discover().map_err(|e| {
            ApiError::new(
                ErrorCode::StorageException,
                format!("cannot list the log directory: {e}"),
            )
        })?;
        for tb in found {
            if !is_live_table(tb.table_id) {
                tracing::info!(
                    table_id = tb.table_id,
                    bucket = tb.bucket,
                    "deleting the data of a dropped table"
                );
                if let Err(e) = self.logs.delete_tablet(tb) {
                    warn!(table_id = tb.table_id, error = %e, "cannot delete a dropped table's data");
                }
            }
        }
        Ok(())
    }

    /// The replica of `bucket`, or `UnknownTableOrBucketException`.
    pub fn replica(&self, bucket: TableBucket) -> Result<Arc<Replica>, ApiError> {
        self.replicas
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&bucket)
            .cloned()
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::UnknownTableOrBucketException,
                    format!(
                        "Unknown table or bucket: table id {}, bucket {}",
                        bucket.table_id, bucket.bucket_id
                    ),
                )
            })
    }

    /// Periodic flushes, retention and checkpoints (blocking; run from a
    /// blocking thread).
    pub fn run_maintenance(&self, checkpoint: bool) {
        self.logs.run_maintenance(now_ms(), checkpoint);
    }

    /// Closes every tablet cleanly (called once at shutdown, after the last
    /// request finished), so the next start recovers nothing.
    pub fn close(&self) {
        self.replicas
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        if let Err(e) = self.logs.close_all(now_ms()) {
            error!(error = %e, "closing log tablets failed; the next start will recover them");
        }
    }
}
