//! GetTableSchema (1011): the schema JSON of the table's current schema, or
//! of the schema id asked for.

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::table_not_exist;
use crate::node::Node;

/// Answers the schema, `TableNotExist` or `SchemaNotExist`.
pub fn handle(
    node: &Node,
    r: pb::GetTableSchemaRequest,
) -> Result<pb::GetTableSchemaResponse, ApiError> {
    let path = super::table_path(&r.table_path)?;
    let info = node
        .catalog
        .table(&path)?
        .ok_or_else(|| table_not_exist(&path))?;
    if let Some(id) = r.schema_id {
        if id != info.schema_id {
            return Err(ApiError::new(
                ErrorCode::SchemaNotExist,
                format!(
                    "Schema {id} of table {}.{} does not exist (the table has schema {}).",
                    path.database, path.table, info.schema_id
                ),
            ));
        }
    }
    Ok(pb::GetTableSchemaResponse {
        schema_id: info.schema_id,
        schema_json: info.schema_json.clone().into(),
    })
}
