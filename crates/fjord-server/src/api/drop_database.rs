//! DropDatabase (1002): with `cascade`, drops its tables and their data too.

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::node::Node;

/// Drops the database (and with `cascade` its tables' data).
pub async fn handle(
    node: &Node,
    r: pb::DropDatabaseRequest,
) -> Result<pb::DropDatabaseResponse, ApiError> {
    let dropped =
        node.catalog
            .drop_database(&r.database_name, r.ignore_if_not_exists, r.cascade)?;
    for table_id in dropped {
        node.replicas.drop_table(table_id).run_blocking().await;
    }
    Ok(pb::DropDatabaseResponse {})
}
