//! Rows over a received Arrow batch: [`ScanRows`] iterates a batch one
//! [`ScanRow`] at a time, and a `ScanRow` implements
//! [`InternalRow`] so scanned records can be
//! handed to anything that reads rows (a writer, a bucket assigner).
//!
//! Each column is downcast to its concrete Arrow array once per batch
//! ([`ScanRows::new`]); reading a value is then a typed index into that
//! array, with no dynamic dispatch, boxing or allocation per value.

use arrow_array::RecordBatch;

use fjord_format::arrow_log::ChangeType;

use crate::error::{ClientError, Result};
use crate::row::arrow_column::ArrowColumn as Column;
use crate::row::{Datum, InternalRow};

/// The rows of one scanned batch, in offset order: the batch's columns,
/// each downcast once. Iterate with `for row in &rows` or [`ScanRows::iter`];
/// each [`ScanRow`] borrows this column list, so no row allocates.
#[derive(Debug, Clone)]
pub struct ScanRows<'a> {
    columns: Vec<Column<'a>>,
    len: usize,
    /// One change-type byte per row; `None`: append-only.
    change_types: Option<&'a [u8]>,
}

impl<'a> ScanRows<'a> {
    /// Rows over `batch`; fails naming the first column whose type rows
    /// cannot carry (ARRAY, MAP, ROW).
    pub fn new(batch: &'a RecordBatch) -> Result<Self> {
        let schema = batch.schema_ref();
        let columns = batch
            .columns()
            .iter()
            .enumerate()
            .map(|(i, array)| {
                Column::of(array.as_ref()).ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "column {} has type {}, which rows cannot carry: read it from the RecordBatch",
                        schema.field(i).name(),
                        array.data_type()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            columns,
            len: batch.num_rows(),
            change_types: None,
        })
    }

    /// These rows with their change types (one valid `ChangeType` byte a
    /// row; `None`: append-only), as [`crate::ScanBatch::rows`] gives them.
    pub(crate) fn with_change_types(mut self, change_types: Option<&'a [u8]>) -> Self {
        self.change_types = change_types.filter(|c| c.len() == self.len);
        self
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The row at `index`, or `None` past the end.
    pub fn row(&self, index: usize) -> Option<ScanRow<'_, 'a>> {
        (index < self.len).then_some(ScanRow {
            columns: &self.columns,
            row: index,
            change_types: self.change_types,
        })
    }

    /// The rows in order.
    pub fn iter(&self) -> ScanRowIter<'_, 'a> {
        ScanRowIter {
            columns: &self.columns,
            next: 0,
            end: self.len,
            change_types: self.change_types,
        }
    }
}

impl<'r, 'a> IntoIterator for &'r ScanRows<'a> {
    type Item = ScanRow<'r, 'a>;
    type IntoIter = ScanRowIter<'r, 'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Iterator over the rows of a [`ScanRows`].
#[derive(Clone, Debug)]
pub struct ScanRowIter<'r, 'a> {
    columns: &'r [Column<'a>],
    next: usize,
    end: usize,
    change_types: Option<&'a [u8]>,
}

impl<'r, 'a> Iterator for ScanRowIter<'r, 'a> {
    type Item = ScanRow<'r, 'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let row = self.next;
        self.next += 1;
        Some(ScanRow {
            columns: self.columns,
            row,
            change_types: self.change_types,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for ScanRowIter<'_, '_> {}

/// One row of a scanned batch: a position and the batch's column readers.
/// Reading a field indexes the column's array directly.
#[derive(Clone, Copy, Debug)]
pub struct ScanRow<'r, 'a> {
    columns: &'r [Column<'a>],
    row: usize,
    change_types: Option<&'a [u8]>,
}

impl<'a> ScanRow<'_, 'a> {
    /// The row's index within its batch (its offset minus the batch's base offset).
    pub fn index(&self) -> usize {
        self.row
    }

    /// The value at `pos`, borrowing from the batch; panics if
    /// `pos >= field_count()` (as slice indexing does).
    pub fn get(&self, pos: usize) -> Datum<'a> {
        self.columns[pos].datum(self.row)
    }

    /// The row's change type: `+I`, `-U`, `+U` or `-D` in a primary-key
    /// table's changelog, `+A` (append-only) in a log table or for rows
    /// made with [`ScanRows::new`].
    pub fn change_type(&self) -> ChangeType {
        match self.change_types {
            None => ChangeType::AppendOnly,
            Some(bytes) => ChangeType::from_byte(bytes[self.row]).unwrap_or(ChangeType::AppendOnly),
        }
    }
}

impl InternalRow for ScanRow<'_, '_> {
    fn field_count(&self) -> usize {
        self.columns.len()
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        self.columns[pos].datum(self.row)
    }

    fn is_null_at(&self, pos: usize) -> bool {
        self.columns[pos].is_null(self.row)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::types::Int32Type;
    use arrow_array::{
        ArrayRef, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, ListArray,
        Time32MillisecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
    };
    use arrow_array::{BinaryArray, BooleanArray, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;
    use crate::row::Timestamp;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(name, a)| Field::new(*name, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    #[test]
    fn rows_read_every_scalar_type_with_fluss_value_conventions() {
        let batch = batch(vec![
            ("b", Arc::new(BooleanArray::from(vec![Some(true), None]))),
            ("i", Arc::new(Int32Array::from(vec![Some(7), Some(-1)]))),
            ("l", Arc::new(Int64Array::from(vec![None, Some(1 << 40)]))),
            ("d", Arc::new(Float64Array::from(vec![1.5, -0.0]))),
            ("s", Arc::new(StringArray::from(vec![Some("pv"), None]))),
            ("y", Arc::new(BinaryArray::from(vec![&b"ab"[..], &b""[..]]))),
            (
                "dec",
                Arc::new(
                    Decimal128Array::from(vec![12345i128, -1])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
            ("dt", Arc::new(Date32Array::from(vec![19000, 0]))),
            ("t", Arc::new(Time32MillisecondArray::from(vec![1000, 0]))),
            (
                "ts",
                Arc::new(TimestampMillisecondArray::from(vec![1_700_000_000_123, 0])),
            ),
            (
                "ltz",
                Arc::new(TimestampMicrosecondArray::from(vec![1_500_001, -1]).with_timezone("UTC")),
            ),
        ]);
        let rows = ScanRows::new(&batch).unwrap();
        assert_eq!(rows.len(), 2);
        let all: Vec<Vec<Datum<'_>>> = rows
            .iter()
            .map(|r| (0..r.field_count()).map(|i| r.get(i)).collect())
            .collect();
        assert_eq!(
            all[0],
            vec![
                Datum::Boolean(true),
                Datum::Int(7),
                Datum::Null,
                Datum::Double(1.5),
                Datum::String("pv"),
                Datum::Binary(b"ab"),
                Datum::Decimal(12345),
                Datum::Date(19000),
                Datum::Time(1000),
                Datum::Timestamp(Timestamp::from_millis(1_700_000_000_123)),
                Datum::TimestampLtz(Timestamp::from_micros(1_500_001)),
            ]
        );
        assert_eq!(all[1][0], Datum::Null);
        assert_eq!(all[1][4], Datum::Null);
        assert_eq!(all[1][2], Datum::BigInt(1 << 40));
        assert_eq!(all[1][10], Datum::TimestampLtz(Timestamp::from_micros(-1)));
        let second = rows.row(1).unwrap();
        assert!(second.is_null_at(0));
        assert!(!second.is_null_at(1));
        assert!(rows.row(2).is_none());
    }

    #[test]
    fn nested_columns_are_refused_by_name() {
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)])]);
        let batch = batch(vec![("tags", Arc::new(list) as ArrayRef)]);
        let error = ScanRows::new(&batch).unwrap_err().to_string();
        assert!(error.contains("tags"), "{error}");
    }

    #[test]
    fn an_empty_batch_has_no_rows() {
        let batch = batch(vec![("i", Arc::new(Int32Array::from(Vec::<i32>::new())))]);
        let rows = ScanRows::new(&batch).unwrap();
        assert!(rows.is_empty());
        assert_eq!((&rows).into_iter().count(), 0);
    }
}
