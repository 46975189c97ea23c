//! GetLatestKvSnapshots (1023) and GetTableStats (1059).
//!
//! Fjord keeps no remote KV snapshots: every bucket is reported without
//! one, which tells a reader (the Flink source, the Java client) to rebuild
//! the table from the changelog's earliest offset — which is why a
//! primary-key table's changelog is never deleted by retention.
//! GetTableStats reports each bucket's live row count (primary-key tables
//! under the FULL changelog image), or its record count (log tables).

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::node::Node;
use crate::replica::TableBucket;

/// GetLatestKvSnapshots: one entry per bucket, none with a snapshot.
pub fn latest_kv_snapshots(
    node: &Node,
    r: pb::GetLatestKvSnapshotsRequest,
) -> Result<pb::GetLatestKvSnapshotsResponse, ApiError> {
    let path = super::table_path(&r.table_path)?;
    let table = node
        .catalog
        .table(&path)?
        .ok_or_else(|| crate::meta::catalog::table_not_exist(&path))?;
    let shown = format!("{}.{}", path.database, path.table);
    if !table.has_primary_key() {
        return Err(ApiError::new(
            ErrorCode::NonPrimaryKeyTableException,
            format!(
                "Table '{shown}' is not a primary key table, so it doesn't have any kv snapshots."
            ),
        ));
    }
    let partition_id = match (&r.partition_name, table.is_partitioned()) {
        (Some(_), false) => {
            return Err(ApiError::new(
                ErrorCode::TableNotPartitionedException,
                format!("Table '{shown}' is not a partitioned table."),
            ))
        }
        (None, true) => {
            return Err(ApiError::new(
                ErrorCode::PartitionNotExists,
                format!(
                    "Table '{shown}' is a partitioned table, but partition name is not provided."
                ),
            ))
        }
        (None, false) => None,
        (Some(name), true) => Some(
            node.catalog
                .partition_by_name(table.table_id, name)
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::PartitionNotExists,
                        format!("The partition '{name}' of table '{shown}' does not exist."),
                    )
                })?
                .partition_id,
        ),
    };
    Ok(pb::GetLatestKvSnapshotsResponse {
        table_id: table.table_id,
        partition_id,
        latest_snapshots: (0..table.bucket_count)
            .map(|bucket_id| pb::PbKvSnapshot {
                bucket_id,
                snapshot_id: None,
                log_offset: None,
            })
            .collect(),
    })
}

/// GetTableStats: row counts per requested bucket.
pub fn table_stats(
    node: &Node,
    r: pb::GetTableStatsRequest,
) -> Result<pb::GetTableStatsResponse, ApiError> {
    let buckets_resp = r
        .buckets_req
        .iter()
        .map(|b| {
            let bucket = TableBucket {
                table_id: r.table_id,
                partition_id: b.partition_id,
                bucket_id: b.bucket_id,
            };
            let counted = (|| {
                if node.catalog.table_by_id(r.table_id).is_none() {
                    return Err(ApiError::new(
                        ErrorCode::UnknownTableOrBucketException,
                        format!("Unknown table id {}", r.table_id),
                    ));
                }
                let replica = super::replica_of(node, bucket)?;
                match &replica.kv {
                    // As Fluss: a table whose changelog image does not say
                    // whether an update inserted its key keeps no count.
                    Some(kv) => kv.row_count().map(Some).ok_or_else(|| {
                        ApiError::new(
                            ErrorCode::InvalidTableException,
                            format!(
                                "{bucket}: the row count is not available for a table with the WAL changelog image"
                            ),
                        )
                    }),
                    None => Ok(Some(
                        replica.tablet.high_watermark() - replica.tablet.log_start_offset(),
                    )),
                }
            })();
            match counted {
                Ok(row_count) => pb::PbTableStatsRespForBucket {
                    error_code: None,
                    error_message: None,
                    partition_id: b.partition_id,
                    bucket_id: b.bucket_id,
                    row_count,
                },
                Err(e) => pb::PbTableStatsRespForBucket {
                    error_code: Some(e.code().code()),
                    error_message: Some(e.message().to_owned()),
                    partition_id: b.partition_id,
                    bucket_id: b.bucket_id,
                    row_count: None,
                },
            }
        })
        .collect();
    Ok(pb::GetTableStatsResponse { buckets_resp })
}
