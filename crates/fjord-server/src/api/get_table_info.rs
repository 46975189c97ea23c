//! GetTableInfo (1007): the stored table JSON in the form clients parse.

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::meta::catalog::table_not_exist;
use crate::node::Node;

/// Answers the table's id, schema id, JSON and times, or `TableNotExist`.
pub fn handle(
    node: &Node,
    r: pb::GetTableInfoRequest,
) -> Result<pb::GetTableInfoResponse, ApiError> {
    let path = super::table_path(&r.table_path)?;
    let info = node
        .catalog
        .table(&path)?
        .ok_or_else(|| table_not_exist(&path))?;
    Ok(pb::GetTableInfoResponse {
        table_id: info.table_id,
        schema_id: info.schema_id,
        table_json: info.table_json.clone().into(),
        created_time: info.created_ms,
        modified_time: info.modified_ms,
        remote_data_dir: None,
        bucket_count_epoch: None,
    })
}
