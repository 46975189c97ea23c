//! DropTable (1006): removes the table from the catalog, then its tablets
//! and their data (on the blocking pool: one directory fsync per tablet).

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::node::Node;

/// Drops the table; `TableNotExist` unless `ignore_if_not_exists`.
pub async fn handle(
    node: &Node,
    r: pb::DropTableRequest,
) -> Result<pb::DropTableResponse, ApiError> {
    let path = super::table_path(&r.table_path)?;
    if let Some(table_id) = node.catalog.drop_table(&path, r.ignore_if_not_exists)? {
        node.replicas.drop_table(table_id).run_blocking().await;
    }
    Ok(pb::DropTableResponse {})
}
