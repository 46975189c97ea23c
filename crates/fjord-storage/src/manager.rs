//! The log manager: opens, creates and deletes the log tablets of table
//! buckets under `<data dir>/log/`. Directory layout (by table id, so a
//! table rename never moves data):
//!
//! ```text
//! <data dir>/log/<table_id>/log-<bucket>/                    non-partitioned
//! <data dir>/log/<table_id>/p<partition_id>/log-<bucket>/    partitioned
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::fs::Fs;
use crate::tablet::LogTablet;

/// Name of the directory under the data dir holding all log tablets.
pub const LOG_DIR: &str = "log";

/// Identity of a table bucket (Fluss's `TableBucket`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableBucket {
    /// Table id.
    pub table_id: i64,
    /// Partition id, for partitioned tables.
    pub partition_id: Option<i64>,
    /// Bucket number.
    pub bucket: i32,
}

/// Owner of every open log tablet, keyed by table bucket.
#[derive(Debug)]
pub struct LogManager {
    fs: Arc<dyn Fs>,
    root: PathBuf,
    tablets: Mutex<HashMap<TableBucket, Arc<LogTablet>>>,
}

impl LogManager {
    /// A manager over `<data_dir>/log` (created if missing). Opens no tablet.
    pub fn new(fs: Arc<dyn Fs>, data_dir: &Path) -> Result<Self> {
        let root = data_dir.join(LOG_DIR);
        fs.create_dir_all(&root)
            .map_err(|e| StorageError::io("creating log directory", &root, e))?;
        Ok(Self {
            fs,
            root,
            tablets: Mutex::new(HashMap::new()),
        })
    }

    fn map(&self) -> MutexGuard<'_, HashMap<TableBucket, Arc<LogTablet>>> {
        self.tablets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The directory of a bucket's tablet.
    pub fn tablet_dir(&self, tb: TableBucket) -> PathBuf {
        let mut dir = self.root.join(tb.table_id.to_string());
        if let Some(p) = tb.partition_id {
            dir.push(format!("p{p}"));
        }
        dir.push(format!("log-{}", tb.bucket));
        dir
    }

    /// Table buckets that have a tablet directory on disk (for start-up).
    pub fn discover(&self) -> Result<Vec<TableBucket>> {
        let fs = &*self.fs;
        let list = |dir: &Path| {
            fs.list(dir)
                .map_err(|e| StorageError::io("listing log directory", dir, e))
        };
        let mut found = Vec::new();
        for table in list(&self.root)? {
            let Ok(table_id) = table.parse::<i64>() else {
                continue;
            };
            let table_dir = self.root.join(&table);
            for child in list(&table_dir)? {
                if let Some(bucket) = child.strip_prefix("log-").and_then(|b| b.parse().ok()) {
                    found.push(TableBucket {
                        table_id,
                        partition_id: None,
                        bucket,
                    });
                } else if let Some(pid) = child.strip_prefix('p').and_then(|p| p.parse().ok()) {
                    for b in list(&table_dir.join(&child))? {
                        if let Some(bucket) = b.strip_prefix("log-").and_then(|b| b.parse().ok()) {
                            found.push(TableBucket {
                                table_id,
                                partition_id: Some(pid),
                                bucket,
                            });
                        }
                    }
                }
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// The open tablet of `tb`, if any.
    pub fn get(&self, tb: TableBucket) -> Option<Arc<LogTablet>> {
        self.map().get(&tb).cloned()
    }

    /// Opens (recovering) or creates the tablet of `tb` with `config`; returns
    /// the already open one if there is one.
    pub fn open_tablet(
        &self,
        tb: TableBucket,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<Arc<LogTablet>> {
        if let Some(t) = self.get(tb) {
            return Ok(t);
        }
        let dir = self.tablet_dir(tb);
        // Opening recovers outside the map lock; a racing open of the same
        // bucket is resolved below (first one wins, the other is dropped).
        let created = !self.fs.exists(&dir);
        let tablet = Arc::new(LogTablet::open(
            self.fs.clone(),
            dir.clone(),
            config,
            now_ms,
        )?);
        if created {
            // Make the new tablet's directory entries durable up the tree.
            let mut d = dir.as_path();
            while let Some(parent) = d.parent() {
                self.fs
                    .sync_dir(parent)
                    .map_err(|e| StorageError::io("syncing directory", parent, e))?;
                if parent == self.root {
                    break;
                }
                d = parent;
            }
        }
        let mut map = self.map();
        Ok(map.entry(tb).or_insert(tablet).clone())
    }

    /// Removes `tb`'s tablet and deletes its files.
    pub fn delete_tablet(&self, tb: TableBucket) -> Result<()> {
        self.map().remove(&tb);
        let dir = self.tablet_dir(tb);
        if self.fs.exists(&dir) {
            self.fs
                .remove_dir_all(&dir)
                .map_err(|e| StorageError::io("deleting tablet directory", &dir, e))?;
            if let Some(parent) = dir.parent() {
                self.fs
                    .sync_dir(parent)
                    .map_err(|e| StorageError::io("syncing directory", parent, e))?;
            }
        }
        Ok(())
    }

    /// Every open tablet.
    pub fn tablets(&self) -> Vec<(TableBucket, Arc<LogTablet>)> {
        self.map().iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    /// Periodic maintenance for the server's background thread: interval
    /// flushes, retention and checkpoints of every tablet. Errors are logged
    /// per tablet; one failing tablet does not stop the others.
    pub fn run_maintenance(&self, now_ms: i64, checkpoint: bool) {
        for (tb, t) in self.tablets() {
            if t.is_offline() {
                continue;
            }
            let result = t
                .flush_if_due(now_ms)
                .and_then(|()| t.enforce_retention(now_ms).map(|_| ()))
                .and_then(|()| {
                    if checkpoint {
                        t.checkpoint(now_ms)
                    } else {
                        Ok(())
                    }
                });
            if let Err(e) = result {
                tracing::error!(?tb, error = %e, "log maintenance failed");
            }
        }
    }

    /// Clean shutdown of every tablet no one else holds; tablets still
    /// shared are checkpointed instead.
    pub fn close_all(&self, now_ms: i64) -> Result<()> {
        let drained: Vec<(TableBucket, Arc<LogTablet>)> = self.map().drain().collect();
        let mut first_err = None;
        for (tb, t) in drained {
            let r = match Arc::try_unwrap(t) {
                Ok(t) => t.close(now_ms),
                Err(t) => t.checkpoint(now_ms),
            };
            if let Err(e) = r {
                tracing::error!(?tb, error = %e, "closing log tablet failed");
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}
