//! GetTableSchema (1011): the schema JSON of the table's current schema, or
//! of the schema id asked for (any id the table has had: clients decode
//! batches and stored values of older ids with it).

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::node::Node;

/// Fluss's `MetadataManager.getSchemaById` refusal.
fn schema_not_exist(path: &crate::meta::catalog::TablePath, schema_id: i32) -> ApiError {
    ApiError::new(
        ErrorCode::SchemaNotExist,
        format!(
            "Schema for table {}.{} with schema id {schema_id} does not exist.",
            path.database, path.table
        ),
    )
}

/// Answers the schema, or `SchemaNotExist`: for a schema id the table never
/// had, and for a missing table too, as Fluss does (its schema lookup fails
/// before any table check: a missing table's latest schema id reads as 0),
/// so a client sees the same `SchemaNotExistException` from both servers.
pub fn handle(
    node: &Node,
    r: pb::GetTableSchemaRequest,
) -> Result<pb::GetTableSchemaResponse, ApiError> {
    let path = super::table_path(&r.table_path)?;
    let info = node
        .catalog
        .table(&path)?
        .ok_or_else(|| schema_not_exist(&path, r.schema_id.unwrap_or(0)))?;
    let Some(id) = r.schema_id else {
        return Ok(pb::GetTableSchemaResponse {
            schema_id: info.schema_id,
            schema_json: info.schema_json.clone().into(),
        });
    };
    let schema = info
        .schema_by_id(id)
        .ok_or_else(|| schema_not_exist(&path, id))?;
    Ok(pb::GetTableSchemaResponse {
        schema_id: schema.schema_id,
        schema_json: schema.schema_json.clone().into(),
    })
}
