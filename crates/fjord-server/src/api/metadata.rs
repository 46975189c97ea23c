//! MetaData (1012): describes the cluster — this node as the coordinator and
//! as the only tablet server, with the same address — and, for each table
//! asked for, its JSON and every bucket led by this node. Clients route
//! admin requests to the coordinator and produce/fetch to bucket leaders
//! from this answer alone.

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::table_not_exist;
use crate::node::Node;

/// Answers the cluster and the requested tables' bucket leaders.
pub fn handle(node: &Node, r: pb::MetadataRequest) -> Result<pb::MetadataResponse, ApiError> {
    let me = pb::PbServerNode {
        node_id: node.node_id(),
        host: node.advertised_host.clone(),
        port: node.advertised_port,
        listeners: None,
        rack: None,
    };
    if !r.partitions_path.is_empty() || !r.partitions_id.is_empty() {
        return Err(ApiError::new(
            ErrorCode::PartitionNotExists,
            "Fjord has no partitioned tables yet, so no partition exists",
        ));
    }
    let mut table_metadata = Vec::with_capacity(r.table_path.len());
    for p in &r.table_path {
        let path = super::table_path(p)?;
        let info = node
            .catalog
            .table(&path)?
            .ok_or_else(|| table_not_exist(&path))?;
        let bucket_metadata = (0..info.bucket_count)
            .map(|bucket_id| pb::PbBucketMetadata {
                bucket_id,
                leader_id: Some(node.node_id()),
                replica_id: vec![node.node_id()],
                leader_epoch: Some(0),
                bucket_epoch: Some(0),
                isr: vec![node.node_id()],
            })
            .collect();
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
    Ok(pb::MetadataResponse {
        coordinator_server: Some(me.clone()),
        tablet_servers: vec![me],
        table_metadata,
        partition_metadata: Vec::new(),
    })
}
