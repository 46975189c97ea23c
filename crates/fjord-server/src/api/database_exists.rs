//! DatabaseExists (1004).

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::node::Node;

/// Answers whether the database exists.
pub fn handle(
    node: &Node,
    r: pb::DatabaseExistsRequest,
) -> Result<pb::DatabaseExistsResponse, ApiError> {
    Ok(pb::DatabaseExistsResponse {
        exists: node.catalog.database(&r.database_name)?.is_some(),
    })
}
