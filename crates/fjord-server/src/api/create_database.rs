//! CreateDatabase (1001).

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::node::Node;

/// Creates the database; `DatabaseAlreadyExist` unless `ignore_if_exists`.
pub fn handle(
    node: &Node,
    r: pb::CreateDatabaseRequest,
) -> Result<pb::CreateDatabaseResponse, ApiError> {
    node.catalog.create_database(
        &r.database_name,
        r.database_json.as_deref(),
        r.ignore_if_exists,
    )?;
    Ok(pb::CreateDatabaseResponse {})
}
