//! ListPartitionInfos (1009), CreatePartition (1036), DropPartition (1037):
//! Fjord does not create partitioned tables yet, so every existing table
//! answers as a non-partitioned table does in Fluss.

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::{table_not_exist, TablePath};
use crate::node::Node;

fn not_partitioned(node: &Node, path: &pb::PbTablePath) -> ApiError {
    let path: TablePath = match super::table_path(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    match node.catalog.table(&path) {
        Ok(Some(_)) => ApiError::new(
            ErrorCode::TableNotPartitionedException,
            format!(
                "Table {}.{} is not a partitioned table.",
                path.database, path.table
            ),
        ),
        Ok(None) => table_not_exist(&path),
        Err(e) => e,
    }
}

/// `TableNotPartitionedException` (or `TableNotExist`).
pub fn list(
    node: &Node,
    r: pb::ListPartitionInfosRequest,
) -> Result<pb::ListPartitionInfosResponse, ApiError> {
    Err(not_partitioned(node, &r.table_path))
}

/// `TableNotPartitionedException` (or `TableNotExist`).
pub fn create(
    node: &Node,
    r: pb::CreatePartitionRequest,
) -> Result<pb::CreatePartitionResponse, ApiError> {
    Err(not_partitioned(node, &r.table_path))
}

/// `TableNotPartitionedException` (or `TableNotExist`).
pub fn drop(
    node: &Node,
    r: pb::DropPartitionRequest,
) -> Result<pb::DropPartitionResponse, ApiError> {
    Err(not_partitioned(node, &r.table_path))
}
