//! What filters let a scan skip: partitions whose key values cannot match
//! ([`prune_partitions`]) and, when every primary-key column is fixed by an
//! equality, everything but one key ([`primary_key_equalities`]).
//!
//! Pruning evaluates the filters that mention only partition keys over a
//! batch of one row per partition (the partition names' values cast to the
//! columns' types), so every operator and function DataFusion knows
//! prunes, not a hand-picked few. Anything that cannot be evaluated keeps
//! the partition: pruning must be safe, never exact.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow_schema::{Field, Schema, SchemaRef};
use datafusion::arrow::compute::cast;
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use fjord_client::admin::PartitionInfo;
use fjord_client::TableInfo;

/// The partitions of `all` that `filters` may match.
pub(crate) fn prune_partitions(
    state: &dyn Session,
    table_schema: &SchemaRef,
    table: &TableInfo,
    filters: &[Expr],
    all: Vec<PartitionInfo>,
) -> DfResult<Vec<PartitionInfo>> {
    let keys = table.partition_keys();
    let relevant: Vec<Expr> = filters
        .iter()
        .filter(|f| {
            let columns = f.column_refs();
            !columns.is_empty() && columns.iter().all(|c| keys.contains(&c.name))
        })
        .map(|f| unnormalize_col(f.clone()))
        .collect();
    let Some(predicate) = conjunction(relevant) else {
        return Ok(all);
    };
    if all.is_empty() {
        return Ok(all);
    }
    let mut fields = Vec::with_capacity(keys.len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(keys.len());
    for key in keys {
        let field = table_schema.field_with_name(key)?;
        let values: StringArray = all
            .iter()
            .map(|p| {
                p.spec
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.as_str())
            })
            .collect();
        match cast(&values, field.data_type()) {
            Ok(typed) => {
                fields.push(Field::new(key, field.data_type().clone(), true));
                columns.push(typed);
            }
            // A partition value that does not read as its column's type:
            // prune nothing rather than guess.
            Err(_) => return Ok(all),
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
    let Ok(physical) = state.create_physical_expr(predicate, &df_schema) else {
        return Ok(all);
    };
    let Ok(result) = physical
        .evaluate(&batch)
        .and_then(|v| v.into_array(batch.num_rows()))
    else {
        return Ok(all);
    };
    let Some(keep) = result.as_any().downcast_ref::<BooleanArray>() else {
        return Ok(all);
    };
    Ok(all
        .into_iter()
        .enumerate()
        // NULL (unknown) does not pass a WHERE clause either.
        .filter(|(i, _)| keep.is_valid(*i) && keep.value(*i))
        .map(|(_, p)| p)
        .collect())
}

/// The literal each primary-key column is equal to, in primary-key order,
/// when `filters` fix every one of them (`pk = literal`, either way
/// round); `None` otherwise.
pub(crate) fn primary_key_equalities(
    table: &TableInfo,
    filters: &[Expr],
) -> Option<Vec<ScalarValue>> {
    let pk = table.descriptor.schema().primary_key()?;
    let mut fixed: HashMap<&str, &ScalarValue> = HashMap::new();
    for filter in filters {
        if let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) = filter
        {
            let pair = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, _)) | (Expr::Literal(v, _), Expr::Column(c)) => {
                    Some((c.name.as_str(), v))
                }
                _ => None,
            };
            if let Some((name, value)) = pair {
                if !value.is_null() {
                    fixed.insert(name, value);
                }
            }
        }
    }
    pk.iter()
        .map(|name| fixed.get(name.as_str()).map(|v| (*v).clone()))
        .collect()
}
