//! TableExists (1010).

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::node::Node;

/// Answers whether the table exists.
pub fn handle(node: &Node, r: pb::TableExistsRequest) -> Result<pb::TableExistsResponse, ApiError> {
    let path = super::table_path(&r.table_path)?;
    Ok(pb::TableExistsResponse {
        exists: node.catalog.table(&path)?.is_some(),
    })
}
