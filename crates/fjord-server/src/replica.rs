//! The replica manager: the tablet-server role's only way to reach log
//! tablets, keyed by [`TableBucket`]. On a single node every replica is the
//! leader; followers, ISR and leader epochs slot in here later without
//! changing the handlers.
//!
//! Storage calls that may block on the disk (append's write, fsync, reads)
//! run on tokio's blocking pool so they never stall the network tasks;
//! ProduceLog appends through a per-connection lane drained by one job (no
//! hand-off between queued requests) and waits for durability in one job per
//! request.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use fjord_format::log_batch::LogBatchError;
use fjord_storage::kv::{KvEngine, KvEngineOptions};
use fjord_storage::{AppendInfo, LogConfig, LogManager, LogTablet, OsFs, ReadResult, StorageError};
use tokio::sync::Notify;
use tracing::{error, warn};

use crate::error::{ApiError, ErrorCode};
use crate::kv::changelog_compaction::{
    changelog_ttl_ms, ChangelogCompactionOptions, ChangelogCompactor, Compaction,
};
use crate::kv::KvTablet;
use crate::meta::catalog::TableInfo;

/// A table bucket: table id, partition id (partitioned tables only) and
/// bucket id — Fluss's `TableBucket`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableBucket {
    /// The table.
    pub table_id: i64,
    /// The partition, for a partitioned table; `None` otherwise.
    pub partition_id: Option<i64>,
    /// The bucket within the table (or partition).
    pub bucket_id: i32,
}

impl TableBucket {
    fn storage(self) -> fjord_storage::TableBucket {
        fjord_storage::TableBucket {
            table_id: self.table_id,
            partition_id: self.partition_id,
            bucket: self.bucket_id,
        }
    }
}

impl std::fmt::Display for TableBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.partition_id {
            None => write!(f, "table {} bucket {}", self.table_id, self.bucket_id),
            Some(p) => write!(
                f,
                "table {} partition {p} bucket {}",
                self.table_id, self.bucket_id
            ),
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
        // As Fluss: a whole batch whose checksum or header fails validation
        // is a corrupt *record* (`CorruptRecordException`, 14, from
        // `LogRecordBatch.ensureValid`); bytes that do not even frame a
        // batch are a corrupt *message* (3).
        StorageError::CorruptBatch {
            source:
                LogBatchError::CrcMismatch { .. }
                | LogBatchError::ShorterThanHeader { .. }
                | LogBatchError::NegativeCount { .. }
                | LogBatchError::BadStatisticsLength { .. },
            ..
        } => ErrorCode::CorruptRecordException,
        StorageError::CorruptBatch { .. } | StorageError::EmptyAppend { .. } => {
            ErrorCode::CorruptMessage
        }
        StorageError::Damaged { .. } => ErrorCode::CorruptMessage,
        StorageError::BatchTooLarge { .. } => ErrorCode::RecordTooLargeException,
        StorageError::OffsetOutOfRange { .. } => ErrorCode::LogOffsetOutOfRangeException,
        StorageError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequenceException,
        StorageError::Kv { .. } => ErrorCode::KvStorageException,
        StorageError::StorageFull { .. }
        | StorageError::Io { .. }
        | StorageError::Offline { .. }
        | StorageError::BadFile { .. }
        | StorageError::Config(_)
        | StorageError::RewriteRefused(_) => ErrorCode::StorageException,
    };
    ApiError::new(code, format!("{bucket}: {e}"))
}

/// One bucket's log on this node and the signal that wakes long-polling
/// fetches when its high watermark moves.
pub struct Replica {
    /// Which bucket this is.
    pub bucket: TableBucket,
    /// The bucket's log tablet.
    pub tablet: Arc<LogTablet>,
    /// The table's latest schema id (batches may carry it or any earlier
    /// one); moves on ALTER TABLE ([`ReplicaManager::alter_table`]).
    schema_id: AtomicI32,
    /// Notified (all waiters) whenever the high watermark may have moved.
    pub appended: Notify,
    /// The bucket's KV tablet, for a primary-key table (whose log tablet
    /// is then its changelog); `None` for a log table.
    pub kv: Option<Arc<KvTablet>>,
}

impl Replica {
    /// The table's latest schema id.
    pub fn schema_id(&self) -> i32 {
        self.schema_id.load(Ordering::Acquire)
    }

    /// Appends `records` (one bucket's batches of a ProduceLog request) as
    /// received: the storage engine writes stamped copies of the batch
    /// prefixes and the received bodies with one vectored write, so the
    /// payload is not copied here. The batches are written but, under the
    /// fsync policy, not yet durable nor visible: follow with
    /// [`Replica::wait_durable_blocking`].
    ///
    /// Blocking (the write may wait for the disk): call it from the blocking
    /// pool, as ProduceLog does from its connection's append lane.
    pub fn append_blocking(&self, records: &[u8]) -> Result<AppendInfo, ApiError> {
        let info = self
            .tablet
            .append(records, now_ms())
            .map_err(|e| storage_error(self.bucket, e))?;
        if !self.tablet.ack_needs_sync() {
            // Interval flushing: visible at write time.
            self.appended.notify_waiters();
        }
        Ok(info)
    }

    /// Blocks until every offset up to `offset` is durable (group commit:
    /// one fsync covers every append made before it started), then wakes
    /// long-polling fetches. Call it from the blocking pool.
    pub fn wait_durable_blocking(&self, offset: i64) -> Result<(), ApiError> {
        let result = self.tablet.wait_durable(offset);
        // A primary-key table's changes reach its KV store once their
        // changelog is durable, before the answer: an acknowledged write
        // is visible to the next lookup.
        let flushed = match (&self.kv, &result) {
            (Some(kv), Ok(())) => kv.flush(self.tablet.high_watermark()),
            _ => Ok(()),
        };
        self.appended.notify_waiters();
        result.map_err(|e| storage_error(self.bucket, e))?;
        flushed
    }

    /// Makes appends that are visible without an fsync (interval flushing)
    /// take effect: a primary-key table's changes go to its KV store, and
    /// long-polling fetches wake. Blocking.
    pub fn publish(&self) {
        if let Some(kv) = &self.kv {
            if let Err(e) = kv.flush(self.tablet.high_watermark()) {
                warn!(bucket = %self.bucket, error = %e, "applying changes to the KV store failed; retried on the next write");
            }
        }
        self.appended.notify_waiters();
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

    /// Reads as [`Replica::read`], leaving out without reading their bodies
    /// the batches `leave_out` judges by header and statistics block
    /// ([`fjord_storage::LogTablet::read_filtered`]).
    pub async fn read_filtered(
        self: &Arc<Self>,
        offset: i64,
        max_bytes: usize,
        scan_bytes_max: usize,
        mut leave_out: impl FnMut(&fjord_format::log_batch::Layout, &[u8]) -> bool + Send + 'static,
    ) -> Result<fjord_storage::FilteredRead, ApiError> {
        let replica = Arc::clone(self);
        let bucket = self.bucket;
        let read = tokio::task::spawn_blocking(move || {
            replica
                .tablet
                .read_filtered(offset, max_bytes, scan_bytes_max, &mut leave_out)
        });
        match read.await {
            Ok(r) => r.map_err(|e| storage_error(bucket, e)),
            Err(e) => Err(ApiError::new(
                ErrorCode::UnknownServerError,
                format!("read failed: {e}"),
            )),
        }
    }
}

/// Most threads deleting dropped tablets at once. A tablet delete ends with
/// a directory fsync, so dropping a 1,000-partition table one tablet at a
/// time took 18.6 s and with 8 overlapping deletes 2.9–3.6 s
/// (`cargo bench -p fjord-server --bench partitions`, `drop_table`; see
/// docs/bench-notes/partitions.md). Bounded so a drop cannot flood the disk
/// queue or the thread count.
pub const DELETE_THREADS_MAX: usize = 8;

/// Tablets already out of service (no request reaches them any more) whose
/// data is still on disk. Dropping is decided (and durable in the catalog)
/// before this runs, and start-up deletes whatever a crash leaves behind, so
/// running it late is safe; callers on the async path run it on the
/// blocking pool ([`PendingDeletion::run_blocking`]).
#[must_use = "the dropped data stays on disk until the deletion runs"]
pub struct PendingDeletion {
    logs: Arc<LogManager>,
    kv: Arc<KvEngine>,
    buckets: Vec<TableBucket>,
    /// Directories that held the tablets, removed once empty, innermost
    /// first (a leftover empty directory is harmless).
    dirs: Vec<PathBuf>,
}

impl PendingDeletion {
    /// Deletes the tablets' data, up to [`DELETE_THREADS_MAX`] at a time
    /// (blocking). Failures are logged: the catalog no longer knows the
    /// data, and the next start-up deletes it.
    pub fn run(self) {
        let delete = |bucket: &TableBucket| {
            if let Err(e) = self.logs.delete_tablet(bucket.storage()) {
                warn!(bucket = %bucket, error = %e, "cannot delete dropped data");
            }
            if let Err(e) = self.kv.delete_store(bucket.storage()) {
                warn!(bucket = %bucket, error = %e, "cannot delete a dropped KV store");
            }
        };
        if self.buckets.len() <= 1 {
            self.buckets.iter().for_each(delete);
        } else {
            let threads = self.buckets.len().min(DELETE_THREADS_MAX);
            let per_thread = self.buckets.len().div_ceil(threads);
            std::thread::scope(|scope| {
                for part in self.buckets.chunks(per_thread) {
                    scope.spawn(|| part.iter().for_each(delete));
                }
            });
        }
        for dir in &self.dirs {
            if let Err(e) = std::fs::remove_dir(dir) {
                tracing::debug!(dir = %dir.display(), error = %e, "dropped data directory not removed");
            }
        }
    }

    /// [`PendingDeletion::run`] on the blocking pool, awaited.
    pub async fn run_blocking(self) {
        if let Err(e) = tokio::task::spawn_blocking(move || self.run()).await {
            error!(error = %e, "deleting dropped data failed; the next start-up deletes it");
        }
    }
}

/// All replicas of this node.
pub struct ReplicaManager {
    logs: Arc<LogManager>,
    /// The KV stores of primary-key tables' buckets.
    kv: Arc<KvEngine>,
    /// `kv.write-buffer-size`: see [`crate::kv::tablet::DEFAULT_WRITE_BUFFER_BYTES`].
    kv_write_buffer_bytes: usize,
    /// `kv.row-cache-size`, shared by every KV tablet.
    kv_row_cache: Arc<crate::kv::tablet::RowCacheBudget>,
    log_config: LogConfig,
    /// Compacts primary-key changelogs past `table.log.ttl`
    /// ([`crate::kv::changelog_compaction`]).
    compactor: Arc<ChangelogCompactor>,
    /// `<data dir>/log`, where dropped tables' and partitions' directories
    /// are removed from.
    log_root: PathBuf,
    replicas: RwLock<HashMap<TableBucket, Arc<Replica>>>,
}

impl ReplicaManager {
    /// A manager keeping log tablets under `<data_dir>/log` and the KV
    /// stores of primary-key tables under `<data_dir>/kv`.
    pub fn open(
        data_dir: &Path,
        log_config: LogConfig,
        kv_options: &KvEngineOptions,
        kv_write_buffer_bytes: usize,
        kv_row_cache_bytes: usize,
    ) -> Result<Self, ApiError> {
        let logs = LogManager::new(Arc::new(OsFs), data_dir).map_err(|e| {
            ApiError::new(
                ErrorCode::StorageException,
                format!("cannot open the log directory: {e}"),
            )
        })?;
        let kv = KvEngine::open(data_dir, kv_options).map_err(|e| {
            ApiError::new(
                ErrorCode::KvStorageException,
                format!("cannot open the KV engine: {e}"),
            )
        })?;
        Ok(Self {
            kv: Arc::new(kv),
            kv_write_buffer_bytes,
            kv_row_cache: Arc::new(crate::kv::tablet::RowCacheBudget::new(kv_row_cache_bytes)),
            logs: Arc::new(logs),
            log_config,
            compactor: Arc::new(ChangelogCompactor::new(
                ChangelogCompactionOptions::default(),
            )),
            log_root: data_dir.join(fjord_storage::manager::LOG_DIR),
            replicas: RwLock::new(HashMap::new()),
        })
    }

    /// The manager with changelog compaction options other than the
    /// defaults (`kv.changelog-compaction.*`).
    pub fn with_changelog_compaction(mut self, options: ChangelogCompactionOptions) -> Self {
        self.compactor = Arc::new(ChangelogCompactor::new(options));
        self
    }

    /// Creates (or opens, recovering) the tablets of every bucket of a
    /// non-partitioned `table`; a partitioned table's tablets belong to its
    /// partitions ([`ReplicaManager::create_partition`]).
    pub fn create_table(&self, table: &TableInfo) -> Result<(), ApiError> {
        if table.is_partitioned() {
            return Ok(());
        }
        self.open_buckets(table, None)
    }

    /// Creates (or opens, recovering) the tablets of every bucket of one
    /// partition of `table`.
    pub fn create_partition(&self, table: &TableInfo, partition_id: i64) -> Result<(), ApiError> {
        self.open_buckets(table, Some(partition_id))
    }

    fn open_buckets(&self, table: &TableInfo, partition_id: Option<i64>) -> Result<(), ApiError> {
        for bucket_id in 0..table.bucket_count {
            let bucket = TableBucket {
                table_id: table.table_id,
                partition_id,
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
            let mut config = self.log_config.clone();
            if table.has_primary_key() {
                // A primary-key table's changelog is its write-ahead log and
                // the only way a reader without a KV snapshot rebuilds the
                // table: retention never deletes it; compaction bounds it
                // (`kv::changelog_compaction`, from `run_maintenance`).
                config.retention_ms = None;
                config.retention_bytes = None;
            }
            let tablet = self
                .logs
                .open_tablet(bucket.storage(), config, now_ms())
                .map_err(|e| storage_error(bucket, e))?;
            let kv = match &table.kv {
                Some(kv_table) => {
                    let store = self
                        .kv
                        .open_store(bucket.storage())
                        .map_err(|e| storage_error(bucket, e))?;
                    Some(Arc::new(KvTablet::open(
                        Arc::clone(kv_table),
                        bucket,
                        Arc::clone(&tablet),
                        store,
                        self.kv_write_buffer_bytes,
                        Arc::clone(&self.kv_row_cache),
                    )?))
                }
                None => None,
            };
            let replica = Arc::new(Replica {
                bucket,
                tablet,
                schema_id: AtomicI32::new(table.schema_id),
                appended: Notify::new(),
                kv,
            });
            self.replicas
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .entry(bucket)
                .or_insert(replica);
        }
        Ok(())
    }

    /// Makes every replica of `table` (every partition's too) serve its
    /// new schema: the latest schema id, and for a primary-key table the
    /// KV view its tablets merge and write the changelog with. Cheap (a
    /// swap per tablet); the catalog calls it under its index lock while
    /// altering the table.
    pub fn alter_table(&self, table: &TableInfo) {
        let replicas = self.replicas.read().unwrap_or_else(|p| p.into_inner());
        for replica in replicas
            .values()
            .filter(|r| r.bucket.table_id == table.table_id)
        {
            replica.schema_id.store(table.schema_id, Ordering::Release);
            if let (Some(kv), Some(kv_table)) = (&replica.kv, &table.kv) {
                kv.set_table(Arc::clone(kv_table));
            }
        }
    }

    /// Takes every tablet of a dropped table (every partition's too) out of
    /// service; the returned [`PendingDeletion`] deletes their data.
    pub fn drop_table(&self, table_id: i64) -> PendingDeletion {
        let table_dir = self.log_root.join(table_id.to_string());
        let buckets = self.take_where(|b| b.table_id == table_id);
        let mut partitions: Vec<i64> = buckets.iter().filter_map(|b| b.partition_id).collect();
        partitions.sort_unstable();
        partitions.dedup();
        let mut dirs: Vec<PathBuf> = partitions
            .iter()
            .map(|p| table_dir.join(format!("p{p}")))
            .collect();
        dirs.push(table_dir);
        PendingDeletion {
            logs: Arc::clone(&self.logs),
            kv: Arc::clone(&self.kv),
            buckets,
            dirs,
        }
    }

    /// Takes the tablets of one dropped partition out of service; the
    /// returned [`PendingDeletion`] deletes their data.
    pub fn drop_partition(&self, table_id: i64, partition_id: i64) -> PendingDeletion {
        let buckets =
            self.take_where(|b| b.table_id == table_id && b.partition_id == Some(partition_id));
        PendingDeletion {
            logs: Arc::clone(&self.logs),
            kv: Arc::clone(&self.kv),
            buckets,
            dirs: vec![self
                .log_root
                .join(table_id.to_string())
                .join(format!("p{partition_id}"))],
        }
    }

    /// Removes every replica `doomed` picks from service and wakes its
    /// long-polls (so they answer and drop their handle now).
    fn take_where(&self, doomed: impl Fn(&TableBucket) -> bool) -> Vec<TableBucket> {
        let taken: Vec<Arc<Replica>> = {
            let mut map = self.replicas.write().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<TableBucket> = map.keys().filter(|b| doomed(b)).copied().collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for replica in &taken {
            replica.appended.notify_waiters();
        }
        taken.iter().map(|r| r.bucket).collect()
    }

    /// Deletes tablet directories of tables the catalog no longer has (a
    /// crash between dropping a table from the catalog and deleting its
    /// data leaves them behind). Called once at start-up.
    pub fn delete_orphans(
        &self,
        is_live: impl Fn(i64, Option<i64>) -> bool,
    ) -> Result<(), ApiError> {
        let found = self.logs.discover().map_err(|e| {
            ApiError::new(
                ErrorCode::StorageException,
                format!("cannot list the log directory: {e}"),
            )
        })?;
        for tb in found {
            if !is_live(tb.table_id, tb.partition_id) {
                tracing::info!(
                    table_id = tb.table_id,
                    partition_id = ?tb.partition_id,
                    bucket = tb.bucket,
                    "deleting the data of a dropped table or partition"
                );
                if let Err(e) = self.logs.delete_tablet(tb) {
                    warn!(table_id = tb.table_id, error = %e, "cannot delete a dropped table's data");
                }
            }
        }
        for tb in self.kv.stores() {
            if !is_live(tb.table_id, tb.partition_id) {
                if let Err(e) = self.kv.delete_store(tb) {
                    warn!(table_id = tb.table_id, error = %e, "cannot delete a dropped table's KV store");
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
                    format!("Unknown table or bucket: {bucket}"),
                )
            })
    }

    /// Periodic flushes, retention, checkpoints and the start of due
    /// changelog compactions (blocking; run from a blocking thread).
    pub fn run_maintenance(&self, checkpoint: bool) {
        self.logs.run_maintenance(now_ms(), checkpoint);
        // Changes whose changelog an interval flush or a background fsync
        // made durable, and any flush that failed before, reach the stores.
        let replicas: Vec<Arc<Replica>> = self
            .replicas
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|r| r.kv.is_some())
            .cloned()
            .collect();
        for replica in &replicas {
            if let Some(kv) = &replica.kv {
                if let Err(e) = kv.flush(replica.tablet.high_watermark()) {
                    warn!(bucket = %replica.bucket, error = %e, "applying changes to the KV store failed; retried next round");
                }
            }
        }
        // Changelogs past `table.log.ttl` are compacted on the compactor's
        // own thread; this returns at once.
        self.compactor
            .run_due(self.compaction_candidates(&replicas), now_ms());
    }

    /// The KV tablets of `replicas` whose changelog may be compacted, each
    /// with the `table.log.ttl` that applies to it.
    fn compaction_candidates(&self, replicas: &[Arc<Replica>]) -> Vec<(Arc<KvTablet>, i64)> {
        replicas
            .iter()
            .filter_map(|r| {
                let kv = r.kv.as_ref()?;
                let ttl = changelog_ttl_ms(&kv.table(), self.log_config.retention_ms)?;
                Some((Arc::clone(kv), ttl))
            })
            .collect()
    }

    /// Compacts now every primary-key changelog that is due (blocking;
    /// after any compaction of the same bucket already running) and says
    /// what each did. The maintenance compacts on its own; this is for
    /// tests and tools.
    pub fn compact_changelogs_now(&self) -> Vec<(TableBucket, Result<Compaction, ApiError>)> {
        let replicas: Vec<Arc<Replica>> = self
            .replicas
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        self.compaction_candidates(&replicas)
            .into_iter()
            .map(|(kv, ttl)| (kv.bucket(), self.compactor.compact_now(&kv, ttl, now_ms())))
            .collect()
    }

    /// Closes every tablet cleanly (called once at shutdown, after the last
    /// request finished), so the next start recovers nothing.
    pub fn close(&self) {
        // A compaction in progress stops between segments.
        self.compactor.shutdown();
        // The committed layers go to the stores, so the next start replays
        // no changelog.
        let kv_tablets: Vec<Arc<KvTablet>> = self
            .replicas
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter_map(|r| r.kv.clone())
            .collect();
        for kv in kv_tablets {
            if let Err(e) = kv.spill() {
                warn!(bucket = %kv.bucket(), error = %e, "writing a KV store at shutdown failed; the next start replays its changelog");
            }
        }
        self.replicas
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        if let Err(e) = self.logs.close_all(now_ms()) {
            error!(error = %e, "closing log tablets failed; the next start will recover them");
        }
        if let Err(e) = self.kv.persist() {
            error!(error = %e, "syncing the KV stores failed; the next start replays their changelogs");
        }
    }
}
