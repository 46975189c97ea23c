//! The replica manager: the tablet-server role's only way to reach log
//! tablets, keyed by [`TableBucket`]. On a single node every replica is the
//! leader; followers, ISR and leader epochs slot in here later without
//! changing the handlers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use tokio::sync::Notify;

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

/// One bucket's log on this node and the signal that wakes long-polling
/// fetches when it grows.
pub struct Replica {
    /// Which bucket this is.
    pub bucket: TableBucket,
    /// Notified (all waiters) after every append that moved the high
    /// watermark, so FetchLog long-polls wake without polling.
    pub appended: Notify,
}

/// All replicas of this node.
pub struct ReplicaManager {
    dir: PathBuf,
    replicas: RwLock<HashMap<TableBucket, Arc<Replica>>>,
}

impl ReplicaManager {
    /// A manager keeping tablets under `dir` (one sub-directory per bucket).
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            replicas: RwLock::new(HashMap::new()),
        }
    }

    /// The directory of one bucket's tablet.
    pub fn tablet_dir(&self, bucket: TableBucket) -> PathBuf {
        self.dir
            .join(format!("table-{}", bucket.table_id))
            .join(format!("bucket-{}", bucket.bucket_id))
    }

    /// Creates (or opens) the tablets of every bucket of `table`.
    pub fn create_table(&self, table: &TableInfo) -> Result<(), ApiError> {
        let mut map = self.replicas.write().unwrap_or_else(|p| p.into_inner());
        for bucket_id in 0..table.bucket_count {
            let bucket = TableBucket {
                table_id: table.table_id,
                bucket_id,
            };
            map.entry(bucket).or_insert_with(|| {
                Arc::new(Replica {
                    bucket,
                    appended: Notify::new(),
                })
            });
        }
        Ok(())
    }

    /// Closes and deletes the tablets of a dropped table.
    pub fn drop_table(&self, table_id: i64) {
        let mut map = self.replicas.write().unwrap_or_else(|p| p.into_inner());
        map.retain(|b, _| b.table_id != table_id);
        let dir = self.dir.join(format!("table-{table_id}"));
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot delete a dropped table's data");
            }
        }
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
}

impl ReplicaManager {
    /// Closes every tablet cleanly (called once at shutdown, after the last
    /// request finished).
    pub fn close(&self) {
        self.replicas
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}
