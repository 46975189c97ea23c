//! AlterTable (1044), as Fluss 0.9.1's `CoordinatorService.alterTable`:
//!
//! ```text
//! parse    the table path is checked; each config change becomes SET or
//!          RESET (APPEND, SUBTRACT, unknown op types: a plain exception in
//!          Fluss, so UNKNOWN_SERVER_ERROR); each column change is converted
//!          in wire order (adds, drops, renames, modifies): its type JSON
//!          parsed, its position LAST (anything else: UNKNOWN_SERVER_ERROR)
//! refuse   options and columns in one request (INVALID_ALTER_TABLE)
//! apply    the catalog alters the table (`meta::catalog::alter`: what may
//!          change and every other refusal) in one metadata write; the
//!          tablets take the new schema before the answer
//! ```
//!
//! A request without changes is answered at once, table or no table (as
//! Fluss, which then calls nothing). Two fields newer than Fluss 0.9.1 are
//! refused when set instead of being silently ignored as a 0.9.1 server
//! would: `modify_bucket_count` (fluss-rs 1.0.0's proto) and an added
//! column's aggregation function. Runs on the blocking pool (the metadata
//! write is fsynced).

use std::sync::Arc;

use fjord_format::error::SchemaError;
use fjord_format::types::DataType;
use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::alter::{illegal_argument, unmapped_exception};
use crate::meta::catalog::{validate_table_path, ColumnChange, OptionChange, TableAlteration};
use crate::node::Node;

/// Wire value of `ColumnPositionType.LAST`, the only position Fluss 0.9.1
/// accepts.
const COLUMN_POSITION_LAST: i32 = 0;

/// Alters the table, or refuses with Fluss's code and message.
pub async fn handle(
    node: &Arc<Node>,
    r: pb::AlterTableRequest,
) -> Result<pb::AlterTableResponse, ApiError> {
    super::on_blocking_pool(node, move |node| alter(node, &r)).await
}

fn alter(node: &Node, r: &pb::AlterTableRequest) -> Result<pb::AlterTableResponse, ApiError> {
    let path = super::table_path(&r.table_path)?;
    validate_table_path(&path)?;
    let options = r
        .config_changes
        .iter()
        .map(option_change)
        .collect::<Result<Vec<_>, _>>()?;
    let columns = column_changes(r)?;
    if let Some(change) = &r.modify_bucket_count {
        return Err(ApiError::new(
            ErrorCode::InvalidAlterTableException,
            format!(
                "Changing the bucket count (to {}) is not supported: Fjord serves Fluss 0.9.1's ALTER TABLE, which has no such change; create a table with the bucket count you need and copy the data.",
                change.new_bucket_count
            ),
        ));
    }
    let alteration = match (options.is_empty(), columns.is_empty()) {
        (true, true) => return Ok(pb::AlterTableResponse {}),
        (false, true) => TableAlteration::Options(options),
        (true, false) => TableAlteration::Columns(columns),
        (false, false) => {
            return Err(ApiError::new(
                ErrorCode::InvalidAlterTableException,
                "Table alteration can only be applied to one of the following: table properties or table schema.",
            ))
        }
    };
    node.catalog
        .alter_table(&path, &alteration, r.ignore_if_not_exists, |info| {
            node.replicas.alter_table(info)
        })?;
    Ok(pb::AlterTableResponse {})
}

/// What Fluss's generated getter throws for an absent field.
fn not_set(field: &str) -> ApiError {
    unmapped_exception(
        "java.lang.IllegalStateException",
        format!("Field '{field}' is not set"),
    )
}

/// Fluss's `ServerRpcMessageUtils.toTableChange`.
fn option_change(c: &pb::PbAlterConfig) -> Result<OptionChange, ApiError> {
    match c.op_type {
        0 => Ok(OptionChange::Set {
            key: c.config_key.clone(),
            value: c
                .config_value
                .clone()
                .ok_or_else(|| not_set("config_value"))?,
        }),
        1 => Ok(OptionChange::Reset {
            key: c.config_key.clone(),
        }),
        2 | 3 => Err(illegal_argument(format!(
            "Unsupported alter configs op type {}",
            c.op_type
        ))),
        other => Err(illegal_argument(format!(
            "Unsupported AlterConfigOpType: {other}"
        ))),
    }
}

/// A column type from its JSON, failing as Fluss's `JsonSerdeUtils.readValue`
/// does (malformed JSON: `UncheckedIOException`; a bad type: an illegal
/// argument; both UNKNOWN_SERVER_ERROR).
fn data_type(json: &[u8]) -> Result<DataType, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(json)
        .map_err(|e| unmapped_exception("java.io.UncheckedIOException", e))?;
    fjord_format::json::data_type_from_json(&value).map_err(|e| match e {
        SchemaError::Syntax { .. } => unmapped_exception("java.io.UncheckedIOException", e),
        other => illegal_argument(other),
    })
}

/// Fluss's `toColumnPosition`: LAST or an illegal argument.
fn check_position(position: i32) -> Result<(), ApiError> {
    if position == COLUMN_POSITION_LAST {
        Ok(())
    } else {
        Err(illegal_argument(format!(
            "Unsupported ColumnPositionType: {position}"
        )))
    }
}

/// Fluss's `toAlterTableSchemaChanges`: adds, drops, renames, modifies.
fn column_changes(r: &pb::AlterTableRequest) -> Result<Vec<ColumnChange>, ApiError> {
    let mut changes = Vec::with_capacity(
        r.add_columns.len()
            + r.drop_columns.len()
            + r.rename_columns.len()
            + r.modify_columns.len(),
    );
    for add in &r.add_columns {
        let data_type = data_type(&add.data_type_json)?;
        check_position(add.column_position_type)?;
        if add.agg_function_type.is_some() || !add.agg_function_params.is_empty() {
            return Err(ApiError::new(
                ErrorCode::InvalidAlterTableException,
                format!(
                    "Column {} cannot be added with an aggregation function: Fjord serves Fluss 0.9.1's ALTER TABLE, which has none; add it without one (it then aggregates as last_value_ignore_nulls).",
                    add.column_name
                ),
            ));
        }
        changes.push(ColumnChange::Add {
            name: add.column_name.clone(),
            data_type,
            comment: add.comment.clone(),
        });
    }
    for drop in &r.drop_columns {
        changes.push(ColumnChange::Drop {
            name: drop.column_name.clone(),
        });
    }
    for rename in &r.rename_columns {
        changes.push(ColumnChange::Rename {
            old_name: rename.old_column_name.clone(),
            new_name: rename.new_column_name.clone(),
        });
    }
    for modify in &r.modify_columns {
        data_type(
            modify
                .data_type_json
                .as_deref()
                .ok_or_else(|| not_set("data_type_json"))?,
        )?;
        if let Some(position) = modify.column_position_type {
            check_position(position)?;
        }
        changes.push(ColumnChange::Modify {
            name: modify.column_name.clone(),
        });
    }
    Ok(changes)
}
