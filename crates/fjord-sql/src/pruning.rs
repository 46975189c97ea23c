//! What filters let a scan skip: partitions whose key values cannot match
//! ([`prune_partitions`]), when every primary-key column is fixed by an
//! equality, everything but one key ([`primary_key_equalities`]), and log
//! batches whose statistics rule the filters out ([`statistics_filter`]:
//! the filters become Fluss 1.0's FetchLog predicate, which the server
//! evaluates against each batch's min/max).
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
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use fjord_client::admin::PartitionInfo;
use fjord_client::scanner::ScanFilter;
use fjord_client::TableInfo;
use fjord_format::statistics;
use fjord_format::types::TypeKind;
use fjord_proto::messages as pb;

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

/// Fluss's `PbPredicateType` of a leaf and of a compound.
const PB_LEAF: i32 = 0;
const PB_COMPOUND: i32 = 1;
/// Fluss's `PbCompoundFunction` AND and OR.
const PB_AND: i32 = 0;
const PB_OR: i32 = 1;
/// Fluss's `PbLeafFunction` values used here.
const PB_EQUAL: i32 = 0;
const PB_NOT_EQUAL: i32 = 1;
const PB_LESS_THAN: i32 = 2;
const PB_LESS_OR_EQUAL: i32 = 3;
const PB_GREATER_THAN: i32 = 4;
const PB_GREATER_OR_EQUAL: i32 = 5;
const PB_IS_NULL: i32 = 6;
const PB_IS_NOT_NULL: i32 = 7;
const PB_IN: i32 = 11;
/// Most IN-list values sent; a longer list is not pushed (the server
/// compares each against every batch).
const IN_LIST_MAX: usize = 256;

/// The FetchLog filter `filters` imply for a log table with
/// `table.statistics.columns`, or `None` when none of them can use the
/// statistics. Comparisons, ranges, IN lists and NULL checks of a
/// statistics column against a literal of its own type, under AND and OR,
/// are sent; anything else is dropped from an AND (a weaker filter skips
/// less, never wrongly) and makes an OR unusable. The server's verdict is
/// only a skip of whole batches: DataFusion still filters every row.
pub(crate) fn statistics_filter(table: &TableInfo, filters: &[Expr]) -> Option<ScanFilter> {
    let schema = table.descriptor.schema();
    let option = table
        .descriptor
        .properties()
        .get(statistics::TABLE_STATISTICS_COLUMNS)?;
    let columns = statistics::resolve_columns(schema, Some(option)).ok()??;
    let ctx = Columns { table, columns };
    let mut leaves: Vec<pb::PbPredicate> = filters.iter().filter_map(|f| ctx.convert(f)).collect();
    let predicate = match leaves.len() {
        0 => return None,
        1 => leaves.pop()?,
        _ => compound(PB_AND, leaves),
    };
    Some(ScanFilter {
        predicate,
        schema_id: table.schema_id,
    })
}

fn compound(function: i32, children: Vec<pb::PbPredicate>) -> pb::PbPredicate {
    pb::PbPredicate {
        r#type: PB_COMPOUND,
        leaf: None,
        compound: Some(pb::PbCompoundPredicate { function, children }),
    }
}

struct Columns<'a> {
    table: &'a TableInfo,
    /// Table column indexes with statistics.
    columns: Vec<usize>,
}

impl Columns<'_> {
    /// The statistics column `e` names: (field id, its Fluss type).
    fn column(&self, e: &Expr) -> Option<(i32, &TypeKind)> {
        let Expr::Column(c) = e else {
            return None;
        };
        let schema = self.table.descriptor.schema();
        let index = schema.column_index(&c.name)?;
        if !self.columns.contains(&index) {
            return None;
        }
        let column = &schema.columns()[index];
        Some((column.id, column.data_type.kind()))
    }

    fn leaf(
        &self,
        function: i32,
        field_id: i32,
        literals: Vec<pb::PbLiteralValue>,
    ) -> pb::PbPredicate {
        pb::PbPredicate {
            r#type: PB_LEAF,
            leaf: Some(pb::PbLeafPredicate {
                function,
                field_id,
                literals,
            }),
            compound: None,
        }
    }

    fn convert(&self, e: &Expr) -> Option<pb::PbPredicate> {
        match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
                Operator::And => {
                    let children: Vec<_> = [left, right]
                        .into_iter()
                        .filter_map(|c| self.convert(c))
                        .collect();
                    match children.len() {
                        0 => None,
                        1 => children.into_iter().next(),
                        _ => Some(compound(PB_AND, children)),
                    }
                }
                Operator::Or => Some(compound(
                    PB_OR,
                    vec![self.convert(left)?, self.convert(right)?],
                )),
                _ => {
                    let function = |op: &Operator| match op {
                        Operator::Eq => Some(PB_EQUAL),
                        Operator::NotEq => Some(PB_NOT_EQUAL),
                        Operator::Lt => Some(PB_LESS_THAN),
                        Operator::LtEq => Some(PB_LESS_OR_EQUAL),
                        Operator::Gt => Some(PB_GREATER_THAN),
                        Operator::GtEq => Some(PB_GREATER_OR_EQUAL),
                        _ => None,
                    };
                    let (column, op, value) = match (left.as_ref(), right.as_ref()) {
                        (c @ Expr::Column(_), Expr::Literal(v, _)) => (c, *op, v),
                        (Expr::Literal(v, _), c @ Expr::Column(_)) => (c, op.swap()?, v),
                        _ => return None,
                    };
                    let (field_id, kind) = self.column(column)?;
                    let literal = literal(kind, value)?;
                    Some(self.leaf(function(&op)?, field_id, vec![literal]))
                }
            },
            Expr::Between(Between {
                expr,
                negated: false,
                low,
                high,
            }) => {
                let (field_id, kind) = self.column(expr)?;
                let (Expr::Literal(low, _), Expr::Literal(high, _)) = (low.as_ref(), high.as_ref())
                else {
                    return None;
                };
                Some(compound(
                    PB_AND,
                    vec![
                        self.leaf(PB_GREATER_OR_EQUAL, field_id, vec![literal(kind, low)?]),
                        self.leaf(PB_LESS_OR_EQUAL, field_id, vec![literal(kind, high)?]),
                    ],
                ))
            }
            Expr::InList(InList {
                expr,
                list,
                negated: false,
            }) if list.len() <= IN_LIST_MAX => {
                let (field_id, kind) = self.column(expr)?;
                let literals = list
                    .iter()
                    .map(|v| match v {
                        Expr::Literal(v, _) => literal(kind, v),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(self.leaf(PB_IN, field_id, literals))
            }
            Expr::IsNull(inner) => {
                let (field_id, _) = self.column(inner)?;
                Some(self.leaf(PB_IS_NULL, field_id, Vec::new()))
            }
            Expr::IsNotNull(inner) => {
                let (field_id, _) = self.column(inner)?;
                Some(self.leaf(PB_IS_NOT_NULL, field_id, Vec::new()))
            }
            _ => None,
        }
    }
}

/// `value` as a Fluss literal of a column of `kind`, or `None` when it is
/// NULL or not of the column's own type (a literal converted here could
/// compare differently than DataFusion compares it, so nothing is cast).
fn literal(kind: &TypeKind, value: &ScalarValue) -> Option<pb::PbLiteralValue> {
    let mut l = pb::PbLiteralValue::default();
    let int = |v: i64, l: &mut pb::PbLiteralValue, literal_type: i32| {
        l.literal_type = literal_type;
        l.int_value = Some(i32::try_from(v).ok()?);
        Some(())
    };
    match (kind, value) {
        (TypeKind::Boolean, ScalarValue::Boolean(Some(b))) => {
            l.literal_type = 0;
            l.boolean_value = Some(*b);
        }
        (TypeKind::TinyInt, ScalarValue::Int8(Some(v))) => int(i64::from(*v), &mut l, 1)?,
        (TypeKind::SmallInt, ScalarValue::Int16(Some(v))) => int(i64::from(*v), &mut l, 2)?,
        (TypeKind::Int, ScalarValue::Int32(Some(v))) => int(i64::from(*v), &mut l, 3)?,
        (TypeKind::BigInt, ScalarValue::Int64(Some(v))) => {
            l.literal_type = 4;
            l.bigint_value = Some(*v);
        }
        (TypeKind::Float, ScalarValue::Float32(Some(v))) => {
            l.literal_type = 5;
            l.float_value = Some(*v);
        }
        (TypeKind::Double, ScalarValue::Float64(Some(v))) => {
            l.literal_type = 6;
            l.double_value = Some(*v);
        }
        (
            TypeKind::String,
            ScalarValue::Utf8(Some(v))
            | ScalarValue::LargeUtf8(Some(v))
            | ScalarValue::Utf8View(Some(v)),
        ) => {
            l.literal_type = 8;
            l.string_value = Some(v.clone());
        }
        (TypeKind::Date, ScalarValue::Date32(Some(v))) => int(i64::from(*v), &mut l, 10)?,
        (TypeKind::Decimal { precision, scale }, ScalarValue::Decimal128(Some(v), _, s))
            if i16::from(*s) == i16::from(*scale) =>
        {
            l.literal_type = 9;
            if *precision <= 18 {
                l.decimal_value = Some(i64::try_from(*v).ok()?);
            } else {
                l.decimal_bytes = Some(v.to_be_bytes().to_vec().into());
            }
        }
        (TypeKind::Timestamp { .. } | TypeKind::TimestampLtz { .. }, ts) => {
            let (millis, nanos) = match ts {
                ScalarValue::TimestampSecond(Some(v), _) => (v.checked_mul(1000)?, 0),
                ScalarValue::TimestampMillisecond(Some(v), _) => (*v, 0),
                ScalarValue::TimestampMicrosecond(Some(v), _) => {
                    (v.div_euclid(1000), v.rem_euclid(1000) * 1000)
                }
                ScalarValue::TimestampNanosecond(Some(v), _) => {
                    (v.div_euclid(1_000_000), v.rem_euclid(1_000_000))
                }
                _ => return None,
            };
            l.literal_type = if matches!(kind, TypeKind::Timestamp { .. }) {
                12
            } else {
                13
            };
            l.timestamp_millis_value = Some(millis);
            l.timestamp_nano_of_millis_value = Some(nanos as i32);
        }
        _ => return None,
    }
    Some(l)
}
