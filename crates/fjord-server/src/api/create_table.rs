//! CreateTable (1005): the catalog validates and stores the table, then the
//! replica manager creates one log tablet per bucket — or, for a
//! partitioned table with auto-partitioning, the first auto-partition check
//! runs at once, so the pre-created partitions exist when the answer goes.
//! All of it runs on the blocking pool (catalog and tablet fsyncs).

use std::sync::Arc;

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::node::Node;

/// Creates the table and its tablets (and its first auto-partitions).
pub async fn handle(
    node: &Arc<Node>,
    r: pb::CreateTableRequest,
) -> Result<pb::CreateTableResponse, ApiError> {
    super::on_blocking_pool(node, move |node| create(node, &r)).await
}

fn create(node: &Node, r: &pb::CreateTableRequest) -> Result<pb::CreateTableResponse, ApiError> {
    let path = super::table_path(&r.table_path)?;
    if let Some(info) = node
        .catalog
        .create_table(&path, &r.table_json, r.ignore_if_exists)?
    {
        if let Err(e) = node.replicas.create_table(&info) {
            // Without its tablets the table is unusable: undo the create so
            // the client can retry cleanly.
            let _ = node.catalog.drop_table(&path, true);
            node.replicas.drop_table(info.table_id).run();
            return Err(e);
        }
        if info.auto_partition.is_some() {
            crate::partitions::auto_partition(node, &info, node.clock.now());
        }
    }
    Ok(pb::CreateTableResponse {})
}
