//! ListTables (1008).

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::node::Node;

/// Lists the tables of a database, or `DatabaseNotExist`.
pub fn handle(node: &Node, r: pb::ListTablesRequest) -> Result<pb::ListTablesResponse, ApiError> {
    Ok(pb::ListTablesResponse {
        table_name: node.catalog.list_tables(&r.database_name)?,
    })
}
