//! A whole `RecordBatch` appended to a partitioned table, split into one
//! batch per partition.
//!
//! The partition of each row comes from its partition-key columns (STRING, as
//! Fluss requires). Rows are scanned as runs of equal key values, so a batch
//! whose rows are grouped by partition (the usual shape: a time-ordered
//! replay, one `dt` per run) costs one string compare per row and one
//! partition lookup per run, and each single-run partition is a zero-copy
//! slice of the caller's batch. Rows of one partition keep their order.

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch, StringArray, UInt32Array};

use crate::error::{ClientError, Result};
use crate::partition::{PartitionLookup, PartitionView};
use crate::row::{Datum, InternalRow};

/// The partition-key columns of a writer's table: positions in its rows,
/// resolved once per writer.
#[derive(Debug, Clone)]
pub(crate) struct KeyPositions(Box<[usize]>);

impl KeyPositions {
    /// Positions of `keys` among `columns`; fails naming a key that is not
    /// a column.
    pub(crate) fn new<'a>(
        columns: impl IntoIterator<Item = &'a str> + Clone,
        keys: &[String],
    ) -> Result<Self> {
        keys.iter()
            .map(|key| {
                columns
                    .clone()
                    .into_iter()
                    .position(|c| c == key)
                    .ok_or_else(|| {
                        ClientError::Invalid(format!(
                            "partition key `{key}` is not a column of the table"
                        ))
                    })
            })
            .collect::<Result<Vec<_>>>()
            .map(|p| Self(p.into_boxed_slice()))
    }
}

/// One row of a batch seen only through its partition-key columns: what
/// the partition cache reads to name the row's partition. Other positions
/// read as NULL (the cache never asks for them).
struct KeyRow<'a> {
    field_count: usize,
    keys: &'a [(usize, &'a StringArray)],
    row: usize,
}

impl InternalRow for KeyRow<'_> {
    fn field_count(&self) -> usize {
        self.field_count
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        match self.keys.iter().find(|(p, _)| *p == pos) {
            Some((_, array)) if array.is_valid(self.row) => Datum::String(array.value(self.row)),
            _ => Datum::Null,
        }
    }
}

/// Maximal runs `(start, len)` of consecutive rows with equal key values,
/// in row order; empty for an empty batch. The keys hold no NULL (the
/// caller refuses those first), so only values are compared, per row.
fn runs_of_equal_keys(keys: &[(usize, &StringArray)], rows: usize) -> Vec<(usize, usize)> {
    let same = |a: usize, b: usize| {
        keys.iter()
            .all(|(_, array)| array.value(a) == array.value(b))
    };
    let mut runs = Vec::new();
    let mut start = 0;
    for row in 1..=rows {
        if row == rows || !same(row - 1, row) {
            runs.push((start, row - start));
            start = row;
        }
    }
    runs
}

/// Splits `batch` into one batch per partition, in the order the
/// partitions first appear, resolving each run's partition through `view`
/// (creating missing partitions when the writer's router may). Errors: a key
/// column that is not STRING, a NULL key value (before anything is created),
/// or the router's refusal.
pub(crate) async fn split_by_partition(
    batch: &RecordBatch,
    positions: &KeyPositions,
    view: &mut PartitionView,
) -> Result<Vec<(i64, RecordBatch)>> {
    let schema = batch.schema_ref();
    let keys: Vec<(usize, &StringArray)> = positions
        .0
        .iter()
        .map(|&pos| {
            batch
                .column(pos)
                .as_string_opt::<i32>()
                .map(|array| (pos, array))
                .ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "partition column `{}` has type {}: partition keys are STRING",
                        schema.field(pos).name(),
                        schema.field(pos).data_type()
                    ))
                })
        })
        .collect::<Result<_>>()?;
    // Checked before any partition is looked up or created, so a refused
    // batch leaves no trace.
    if let Some((pos, _)) = keys.iter().find(|(_, array)| array.null_count() > 0) {
        return Err(ClientError::Invalid(format!(
            "partition column `{}` has NULL values: every row needs a partition",
            schema.field(*pos).name()
        )));
    }
    let field_count = batch.num_columns();

    // Partition id → its runs, in first-appearance order (few partitions
    // per batch: a linear search beats a map).
    let mut parts: Vec<(i64, Vec<(usize, usize)>)> = Vec::new();
    for (start, len) in runs_of_equal_keys(&keys, batch.num_rows()) {
        let row = KeyRow {
            field_count,
            keys: &keys,
            row: start,
        };
        let id = match view.lookup(&row)? {
            PartitionLookup::Known(id) => id,
            PartitionLookup::Missing => view.router().clone().ensure(&row).await?,
        };
        match parts.iter_mut().find(|(p, _)| *p == id) {
            Some((_, runs)) => runs.push((start, len)),
            None => parts.push((id, vec![(start, len)])),
        }
    }

    parts
        .into_iter()
        .map(|(id, runs)| {
            let part = match runs.as_slice() {
                [(_, len)] if *len == batch.num_rows() => batch.clone(),
                [(start, len)] => batch.slice(*start, *len),
                _ => {
                    let rows: UInt32Array = runs
                        .iter()
                        .flat_map(|&(start, len)| start as u32..(start + len) as u32)
                        .collect();
                    arrow_select::take::take_record_batch(batch, &rows).map_err(|e| {
                        ClientError::Format(format!("splitting a batch by partition: {e}"))
                    })?
                }
            };
            Ok((id, part))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[Option<&str>]) -> StringArray {
        values.iter().copied().collect()
    }

    #[test]
    fn runs_follow_changes_of_any_key_column() {
        let dt = strings(&[Some("d1"), Some("d1"), Some("d2"), Some("d2"), Some("d2")]);
        let region = strings(&[Some("eu"), Some("eu"), Some("eu"), Some("us"), Some("us")]);
        assert_eq!(runs_of_equal_keys(&[(0, &dt)], 5), [(0, 2), (2, 3)]);
        assert_eq!(
            runs_of_equal_keys(&[(0, &dt), (1, &region)], 5),
            [(0, 2), (2, 1), (3, 2)]
        );
    }

    #[test]
    fn equal_values_form_one_run_and_empty_batches_have_none() {
        let dt = strings(&[Some("d1"), Some("d1"), Some("d2"), Some("d1")]);
        assert_eq!(runs_of_equal_keys(&[(0, &dt)], 4), [(0, 2), (2, 1), (3, 1)]);
        assert!(runs_of_equal_keys(&[(0, &dt)], 0).is_empty());
    }

    #[test]
    fn key_rows_expose_only_key_columns() {
        let dt = strings(&[Some("d1"), None]);
        let keys = [(2, &dt)];
        let row = KeyRow {
            field_count: 3,
            keys: &keys,
            row: 0,
        };
        assert_eq!(row.field_count(), 3);
        assert!(matches!(row.datum(2), Datum::String("d1")));
        assert!(matches!(row.datum(0), Datum::Null));
        let null_row = KeyRow { row: 1, ..row };
        assert!(matches!(null_row.datum(2), Datum::Null));
    }

    #[test]
    fn key_positions_name_a_missing_key() {
        let columns = ["id", "dt"];
        let found = KeyPositions::new(columns.iter().copied(), &["dt".to_owned()]).unwrap();
        assert_eq!(&*found.0, [1]);
        let e = KeyPositions::new(columns.iter().copied(), &["region".to_owned()])
            .expect_err("missing key refused");
        assert!(e.to_string().contains("`region`"), "{e}");
    }
}
