//! InitWriter (1026): hands out a writer id for idempotent produce, unique
//! across restarts (the catalog reserves ids in blocks ahead).

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::meta::catalog::table_not_exist;
use crate::node::Node;

/// Checks the named tables exist and allocates a writer id.
pub fn handle(node: &Node, r: pb::InitWriterRequest) -> Result<pb::InitWriterResponse, ApiError> {
    for p in &r.table_path {
        let path = super::table_path(p)?;
        if node.catalog.table(&path)?.is_none() {
            return Err(table_not_exist(&path));
        }
    }
    Ok(pb::InitWriterResponse {
        writer_id: node.catalog.allocate_writer_id()?,
    })
}
