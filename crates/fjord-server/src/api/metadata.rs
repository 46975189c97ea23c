//! MetaData (1012): describes the cluster — this node as the coordinator and
//! as the only tablet server, with the same address — and, for each table
//! asked for, its JSON and every bucket led by this node; for each
//! partition asked for (by path or by id), its name, id and buckets. A
//! partitioned table's own entry has no buckets (they belong to its
//! partitions), as in Fluss. Clients route admin requests to the
//! coordinator and produce/fetch to bucket leaders from this answer alone.
//! An unknown partition fails the whole answer with `PartitionNotExists`,
//! as Fluss does.

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::partitions::partition_not_exist;
use crate::meta::catalog::{table_not_exist, PartitionInfo, TableInfo, TablePath};
use crate::node::Node;

/// Every bucket of a table or partition, led by this node.
fn buckets(node: &Node, count: i32) -> Vec<pb::PbBucketMetadata> {
    (0..count)
        .map(|bucket_id| pb::PbBucketMetadata {
            bucket_id,
            leader_id: Some(node.node_id()),
            replica_id: vec![node.node_id()],
            leader_epoch: Some(0),
            bucket_epoch: Some(0),
            isr: vec![node.node_id()],
        })
        .collect()
}

fn partition_metadata_of(
    node: &Node,
    table: &TableInfo,
    p: &PartitionInfo,
) -> pb::PbPartitionMetadata {
    pb::PbPartitionMetadata {
        table_id: table.table_id,
        partition_name: p.name.clone(),
        partition_id: p.partition_id,
        bucket_metadata: buckets(node, table.bucket_count),
        bucket_count: Some(table.bucket_count),
    }
}

/// Answers the cluster and the requested tables' bucket leaders.
pub fn handle(node: &Node, r: pb::MetadataRequest) -> Result<pb::MetadataResponse, ApiError> {
    let me = pb::PbServerNode {
        node_id: node.node_id(),
        host: node.advertised_host.clone(),
        port: node.advertised_port,
        listeners: None,
        rack: None,
    };
    let mut table_metadata = Vec::with_capacity(r.table_path.len());
    for p in &r.table_path {
        let path = super::table_path(p)?;
        let info = node
            .catalog
            .table(&path)?
            .ok_or_else(|| table_not_exist(&path))?;
        let bucket_metadata = if info.is_partitioned() {
            Vec::new()
        } else {
            buckets(node, info.bucket_count)
        };
        table_metadata.push(pb::PbTableMetadata {
            table_path: super::pb_table_path(&path),
            table_id: info.table_id,
            schema_id: info.schema_id,
            table_json: info.table_json.clone().into(),
            bucket_metadata,
            created_time: info.created_ms,
            modified_time: info.modified_ms,
            remote_data_dir: None,
            bucket_count_epoch: None,
        });
    }
    let mut partition_metadata =
        Vec::with_capacity(r.partitions_path.len() + r.partitions_id.len());
    for p in &r.partitions_path {
        // Straight to the catalog's path: no intermediate PbTablePath copy.
        let path = TablePath {
            database: p.database_name.clone(),
            table: p.table_name.clone(),
        };
        let info = node
            .catalog
            .table(&path)?
            .ok_or_else(|| table_not_exist(&path))?;
        let name = p.partition_name.as_deref().unwrap_or("");
        let partition = node
            .catalog
            .partition_by_name(info.table_id, name)
            .ok_or_else(|| partition_not_exist(&info, name))?;
        partition_metadata.push(partition_metadata_of(node, &info, &partition));
    }
    for &id in &r.partitions_id {
        let unknown = || {
            ApiError::new(
                ErrorCode::PartitionNotExists,
                format!("The partition id '{id}' does not exist."),
            )
        };
        let partition = node.catalog.partition_by_id(id).ok_or_else(unknown)?;
        let info = node
            .catalog
            .table_by_id(partition.table_id)
            .ok_or_else(unknown)?;
        partition_metadata.push(partition_metadata_of(node, &info, &partition));
    }
    Ok(pb::MetadataResponse {
        coordinator_server: Some(me.clone()),
        tablet_servers: vec![me],
        table_metadata,
        partition_metadata,
    })
}
