//! GetTableSchema (1011): the schema JSON of the table's current schema, or
//! of the schema id asked for.

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::node::Node;

/// Answers the schema, or `SchemaNotExist`: for a missing table too, as
/// Fluss does (its schema lookup fails before any table check), so a client
/// sees the same `SchemaNotExistException` from both servers.
pub fn handle(
    node: &Node,
    r: pb::GetTableSchemaRequest,
) -> Result<pb::GetTableSchemaResponse, ApiError> {
    let path = super::table_path(&r.table_path)?;
    let info = node.catalog.table(&path)?.ok_or_else(|| {
        ApiError::new(
            ErrorCode::SchemaNotExist,
            format!(
                "Schema for table {}.{} with schema id {} does not exist.",
                path.database,
                path.table,
                r.schema_id.unwrap_or(0)
            ),
        )
    })?;
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
