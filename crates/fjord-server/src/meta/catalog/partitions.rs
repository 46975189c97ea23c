//! The partitions of partitioned tables in the catalog: spec validation
//! (Fluss's `PartitionUtils.validatePartitionSpec`), creation with a
//! never-reused id under `max.partition.num`, drop, listing and the
//! by-id / by-name lookups the data path and MetaData use.
//!
//! A partition's name is its values in partition-key order joined by `$`
//! (Fluss's `ResolvedPartitionSpec`); values follow the database/table name
//! rule, so a name is always a valid metadata-store path segment.

use std::sync::Arc;

use serde_json::{json, Value};
use tracing::warn;

use super::{corrupt, invalid_name_reason, now_ms, Catalog, TableIndex, TableInfo, PARTITIONS};
use crate::error::{ApiError, ErrorCode};
use crate::meta::store::MetaError;
use fjord_format::schema::{partition_name, PARTITION_NAME_SEPARATOR};

/// One partition of a partitioned table; immutable once created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Unique for the life of the data dir, never reused after a drop.
    pub partition_id: i64,
    /// The table it belongs to.
    pub table_id: i64,
    /// The values joined by `$`, in partition-key order.
    pub name: String,
    /// One value per partition key, in key order.
    pub values: Vec<String>,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
}

fn table_partitions_node(table_id: i64) -> String {
    format!("{PARTITIONS}/{table_id}")
}

fn partition_node(table_id: i64, name: &str) -> String {
    format!("{PARTITIONS}/{table_id}/{name}")
}

fn spec_invalid(why: String) -> ApiError {
    ApiError::new(ErrorCode::PartitionSpecInvalidException, why)
}

/// `TableNotPartitionedException` for `table`.
pub fn not_partitioned(table: &TableInfo) -> ApiError {
    ApiError::new(
        ErrorCode::TableNotPartitionedException,
        format!(
            "Table {}.{} is not a partitioned table.",
            table.path.database, table.path.table
        ),
    )
}

/// `PartitionNotExists` for the partition `name` of `table`.
pub fn partition_not_exist(table: &TableInfo, name: &str) -> ApiError {
    ApiError::new(
        ErrorCode::PartitionNotExists,
        format!(
            "Partition '{name}' does not exist in table {}.{}.",
            table.path.database, table.path.table
        ),
    )
}

fn spec_text(spec: &[(String, String)]) -> String {
    let pairs: Vec<String> = spec.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", pairs.join(", "))
}

impl Catalog {
    /// Resolves a full partition spec (key/value pairs in any order) to the
    /// values in partition-key order, validated as Fluss validates them:
    /// every key named once, nothing else, each value a legal name (and, to
    /// create, not starting with the reserved `__`).
    pub fn resolve_spec(
        table: &TableInfo,
        spec: &[(String, String)],
        is_create: bool,
    ) -> Result<Vec<String>, ApiError> {
        if !table.is_partitioned() {
            return Err(not_partitioned(table));
        }
        let path = &table.path;
        if spec.len() != table.partition_keys.len() {
            return Err(spec_invalid(format!(
                "PartitionSpec size is not equal to partition keys size for partitioned table {}.{}: spec {} vs partition keys {:?}.",
                path.database, path.table, spec_text(spec), table.partition_keys
            )));
        }
        let mut values = Vec::with_capacity(spec.len());
        for key in &table.partition_keys {
            let mut matching = spec.iter().filter(|(k, _)| k == key);
            let (Some((_, value)), None) = (matching.next(), matching.next()) else {
                return Err(spec_invalid(format!(
                    "PartitionSpec {} does not contain partition key '{key}' exactly once for partitioned table {}.{}.",
                    spec_text(spec), path.database, path.table
                )));
            };
            let reason = invalid_name_reason(value).filter(|_| {
                // Only creation refuses the reserved prefix (Fluss's rule),
                // so such a partition could still be dropped or listed.
                is_create || !value.starts_with("__")
            });
            if let Some(why) = reason {
                return Err(spec_invalid(format!(
                    "The partition value {value} is invalid: {why}"
                )));
            }
            values.push(value.clone());
        }
        Ok(values)
    }

    /// Creates the partition `values` of `table`: checks `max.partition.num`,
    /// allocates an id, stores it, runs `open_tablets` with the table as it
    /// is now (the partition's log tablets), and only then publishes it to lookups, so no client learns
    /// of a partition it cannot write. Returns `None` if it existed and
    /// `ignore_if_exists` was set.
    pub fn create_partition(
        &self,
        table: &TableInfo,
        values: Vec<String>,
        ignore_if_exists: bool,
        open_tablets: impl FnOnce(&TableInfo, &PartitionInfo) -> Result<(), ApiError>,
    ) -> Result<Option<Arc<PartitionInfo>>, ApiError> {
        let _serial = self.partition_ops.lock().unwrap_or_else(|p| p.into_inner());
        let name = partition_name(values.iter().map(String::as_str));
        let (count, latest) = {
            let index = self.tables.read().unwrap_or_else(|p| p.into_inner());
            // The table as it is now: an ALTER TABLE may have replaced the
            // caller's copy, and the tablets must open at the latest schema.
            let Some(latest) = index.by_id.get(&table.table_id).cloned() else {
                return Err(super::table_not_exist(&table.path));
            };
            let parts = index.partitions_by_table.get(&table.table_id);
            if parts.is_some_and(|p| p.contains_key(&name)) {
                return if ignore_if_exists {
                    Ok(None)
                } else {
                    Err(ApiError::new(
                        ErrorCode::PartitionAlreadyExists,
                        format!(
                            "Partition '{name}' already exists in table {}.{}.",
                            table.path.database, table.path.table
                        ),
                    ))
                };
            }
            (parts.map_or(0, |p| p.len()), latest)
        };
        if count + 1 > self.options.partition_count_max {
            return Err(ApiError::new(
                ErrorCode::PartitionMaxNumException,
                format!(
                    "Exceed the maximum number of partitions for table {}.{}, only allow {} partitions (max.partition.num); drop partitions or raise the limit.",
                    table.path.database, table.path.table, self.options.partition_count_max
                ),
            ));
        }
        let partition_id = self.allocate_partition_id()?;
        let created_ms = now_ms();
        match self
            .store
            .create(&table_partitions_node(table.table_id), b"")
        {
            Ok(()) | Err(MetaError::NodeExists(_)) => {}
            Err(e) => return Err(e.into()),
        }
        let node = partition_node(table.table_id, &name);
        let record = json!({
            "version": 1,
            "partition_id": partition_id,
            "created_time": created_ms,
        });
        self.store.create(&node, record.to_string().as_bytes())?;
        let info = PartitionInfo {
            partition_id,
            table_id: table.table_id,
            name,
            values,
            created_ms,
        };
        if let Err(e) = open_tablets(&latest, &info) {
            // Without tablets the partition is unusable: undo so the
            // client can retry cleanly.
            if let Err(undo) = self.store.delete(&node, None) {
                warn!(node, error = %undo, "cannot undo a partition whose tablets failed");
            }
            return Err(e);
        }
        let info = Arc::new(info);
        self.tables
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert_partition(Arc::clone(&info));
        Ok(Some(info))
    }

    /// Drops the partition `name` of `table`: unpublishes it, deletes its
    /// node, then runs `delete_tablets` (its data). Returns `None` if it did
    /// not exist and `ignore_if_not_exists` was set.
    pub fn drop_partition(
        &self,
        table: &TableInfo,
        name: &str,
        ignore_if_not_exists: bool,
        delete_tablets: impl FnOnce(&PartitionInfo),
    ) -> Result<Option<Arc<PartitionInfo>>, ApiError> {
        let _serial = self.partition_ops.lock().unwrap_or_else(|p| p.into_inner());
        let Some(info) = self.partition_by_name(table.table_id, name) else {
            return if ignore_if_not_exists {
                Ok(None)
            } else {
                Err(partition_not_exist(table, name))
            };
        };
        match self
            .store
            .delete(&partition_node(table.table_id, name), None)
        {
            Ok(()) | Err(MetaError::NoNode(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.tables
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove_partition(&info);
        delete_tablets(&info);
        Ok(Some(info))
    }

    /// The partitions of a table, sorted by name.
    pub fn partitions(&self, table_id: i64) -> Vec<Arc<PartitionInfo>> {
        self.tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .partitions_by_table
            .get(&table_id)
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default()
    }

    /// A partition by id, or `None` (the data path's lookup).
    pub fn partition_by_id(&self, partition_id: i64) -> Option<Arc<PartitionInfo>> {
        self.tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .partitions_by_id
            .get(&partition_id)
            .cloned()
    }

    /// A partition of a table by name, or `None`.
    pub fn partition_by_name(&self, table_id: i64, name: &str) -> Option<Arc<PartitionInfo>> {
        self.tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .partitions_by_table
            .get(&table_id)
            .and_then(|p| p.get(name))
            .cloned()
    }

    /// Indexes every stored partition of a live table; deletes the partition
    /// nodes of tables that no longer exist (left by a crash mid-drop).
    pub(super) fn load_partitions(&self, index: &mut TableIndex) -> Result<(), ApiError> {
        for table in self.store.children(PARTITIONS)? {
            let table_id = table.parse::<i64>().ok();
            let Some(info) = table_id.and_then(|id| index.by_id.get(&id).cloned()) else {
                if let Some(id) = table_id {
                    self.delete_partition_nodes(id)?;
                }
                continue;
            };
            let parent = table_partitions_node(info.table_id);
            for name in self.store.children(&parent)? {
                let node = partition_node(info.table_id, &name);
                let Some(v) = self.store.get(&node)? else {
                    continue;
                };
                let rec: Value = serde_json::from_slice(&v.data).map_err(|e| corrupt(&node, e))?;
                let values: Vec<String> = name
                    .split(PARTITION_NAME_SEPARATOR)
                    .map(str::to_owned)
                    .collect();
                if values.len() != info.partition_keys.len() {
                    return Err(corrupt(
                        &node,
                        format!(
                            "{} values for {} partition keys",
                            values.len(),
                            info.partition_keys.len()
                        ),
                    ));
                }
                index.insert_partition(Arc::new(PartitionInfo {
                    partition_id: rec["partition_id"]
                        .as_i64()
                        .ok_or_else(|| corrupt(&node, "no partition_id"))?,
                    table_id: info.table_id,
                    name,
                    values,
                    created_ms: rec["created_time"].as_i64().unwrap_or(0),
                }));
            }
        }
        Ok(())
    }

    /// Deletes every partition node of `table_id` and their parent, in one
    /// store write.
    pub(super) fn delete_partition_nodes(&self, table_id: i64) -> Result<(), ApiError> {
        match self
            .store
            .delete_recursive(&table_partitions_node(table_id))
        {
            Ok(()) | Err(MetaError::NoNode(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
