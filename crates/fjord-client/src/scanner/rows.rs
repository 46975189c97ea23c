//! Rows over a received Arrow batch: [`ScanRows`] iterates a batch one
//! [`ScanRow`] at a time, and a `ScanRow` implements
//! [`InternalRow`](crate::row::InternalRow) so scanned records can be
//! handed to anything that reads rows (a writer, a bucket assigner).
//!
//! Each column is downcast to its concrete Arrow array once per batch
//! ([`ScanRows::new`]); reading a value is then a typed index into that
//! array, with no dynamic dispatch, boxing or allocation per value.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{
    Array, BinaryArray, BooleanArray, FixedSizeBinaryArray, PrimitiveArray, RecordBatch,
    StringArray,
};
use arrow_schema::{DataType, TimeUnit};

use crate::error::{ClientError, Result};
use crate::row::{Datum, InternalRow, Timestamp};

/// Milliseconds in a second, for TIME(0) and TIMESTAMP(0) columns.
const MILLIS_PER_SECOND: i64 = 1_000;

/// One column of a batch, downcast to its concrete array type.
#[derive(Debug, Clone, Copy)]
enum Column<'a> {
    Boolean(&'a BooleanArray),
    TinyInt(&'a PrimitiveArray<Int8Type>),
    SmallInt(&'a PrimitiveArray<Int16Type>),
    Int(&'a PrimitiveArray<Int32Type>),
    BigInt(&'a PrimitiveArray<Int64Type>),
    Float(&'a PrimitiveArray<Float32Type>),
    Double(&'a PrimitiveArray<Float64Type>),
    String(&'a StringArray),
    Bytes(&'a BinaryArray),
    FixedBytes(&'a FixedSizeBinaryArray),
    Decimal(&'a PrimitiveArray<Decimal128Type>),
    Date(&'a PrimitiveArray<Date32Type>),
    TimeSecond(&'a PrimitiveArray<Time32SecondType>),
    TimeMilli(&'a PrimitiveArray<Time32MillisecondType>),
    TimeMicro(&'a PrimitiveArray<Time64MicrosecondType>),
    TimeNano(&'a PrimitiveArray<Time64NanosecondType>),
    TimestampSecond(&'a PrimitiveArray<TimestampSecondType>, bool),
    TimestampMilli(&'a PrimitiveArray<TimestampMillisecondType>, bool),
    TimestampMicro(&'a PrimitiveArray<TimestampMicrosecondType>, bool),
    TimestampNano(&'a PrimitiveArray<TimestampNanosecondType>, bool),
}

impl<'a> Column<'a> {
    /// The column reader of `array`; `None` for a type rows cannot carry.
    fn of(array: &'a dyn Array) -> Option<Self> {
        Some(match array.data_type() {
            DataType::Boolean => Column::Boolean(array.as_boolean()),
            DataType::Int8 => Column::TinyInt(array.as_primitive()),
            DataType::Int16 => Column::SmallInt(array.as_primitive()),
            DataType::Int32 => Column::Int(array.as_primitive()),
            DataType::Int64 => Column::BigInt(array.as_primitive()),
            DataType::Float32 => Column::Float(array.as_primitive()),
            DataType::Float64 => Column::Double(array.as_primitive()),
            DataType::Utf8 => Column::String(array.as_string()),
            DataType::Binary => Column::Bytes(array.as_binary()),
            DataType::FixedSizeBinary(_) => Column::FixedBytes(array.as_fixed_size_binary()),
            DataType::Decimal128(_, _) => Column::Decimal(array.as_primitive()),
            DataType::Date32 => Column::Date(array.as_primitive()),
            DataType::Time32(TimeUnit::Second) => Column::TimeSecond(array.as_primitive()),
            DataType::Time32(TimeUnit::Millisecond) => Column::TimeMilli(array.as_primitive()),
            DataType::Time64(TimeUnit::Microsecond) => Column::TimeMicro(array.as_primitive()),
            DataType::Time64(TimeUnit::Nanosecond) => Column::TimeNano(array.as_primitive()),
            DataType::Timestamp(unit, zone) => {
                let ltz = zone.is_some();
                match unit {
                    TimeUnit::Second => Column::TimestampSecond(array.as_primitive(), ltz),
                    TimeUnit::Millisecond => Column::TimestampMilli(array.as_primitive(), ltz),
                    TimeUnit::Microsecond => Column::TimestampMicro(array.as_primitive(), ltz),
                    TimeUnit::Nanosecond => Column::TimestampNano(array.as_primitive(), ltz),
                }
            }
            _ => return None,
        })
    }

    fn is_null(&self, row: usize) -> bool {
        match self {
            Column::Boolean(a) => a.is_null(row),
            Column::TinyInt(a) => a.is_null(row),
            Column::SmallInt(a) => a.is_null(row),
            Column::Int(a) => a.is_null(row),
            Column::BigInt(a) => a.is_null(row),
            Column::Float(a) => a.is_null(row),
            Column::Double(a) => a.is_null(row),
            Column::String(a) => a.is_null(row),
            Column::Bytes(a) => a.is_null(row),
            Column::FixedBytes(a) => a.is_null(row),
            Column::Decimal(a) => a.is_null(row),
            Column::Date(a) => a.is_null(row),
            Column::TimeSecond(a) => a.is_null(row),
            Column::TimeMilli(a) => a.is_null(row),
            Column::TimeMicro(a) => a.is_null(row),
            Column::TimeNano(a) => a.is_null(row),
            Column::TimestampSecond(a, _) => a.is_null(row),
            Column::TimestampMilli(a, _) => a.is_null(row),
            Column::TimestampMicro(a, _) => a.is_null(row),
            Column::TimestampNano(a, _) => a.is_null(row),
        }
    }

    fn datum(&self, row: usize) -> Datum<'a> {
        if self.is_null(row) {
            return Datum::Null;
        }
        let timestamp = |t: Timestamp, ltz: bool| {
            if ltz {
                Datum::TimestampLtz(t)
            } else {
                Datum::Timestamp(t)
            }
        };
        match *self {
            Column::Boolean(a) => Datum::Boolean(a.value(row)),
            Column::TinyInt(a) => Datum::TinyInt(a.value(row)),
            Column::SmallInt(a) => Datum::SmallInt(a.value(row)),
            Column::Int(a) => Datum::Int(a.value(row)),
            Column::BigInt(a) => Datum::BigInt(a.value(row)),
            Column::Float(a) => Datum::Float(a.value(row)),
            Column::Double(a) => Datum::Double(a.value(row)),
            Column::String(a) => Datum::String(a.value(row)),
            Column::Bytes(a) => Datum::Binary(a.value(row)),
            Column::FixedBytes(a) => Datum::Binary(a.value(row)),
            Column::Decimal(a) => Datum::Decimal(a.value(row)),
            Column::Date(a) => Datum::Date(a.value(row)),
            // TIME is milliseconds of the day in rows (Fluss's InternalRow);
            // finer precisions are truncated to the millisecond.
            Column::TimeSecond(a) => Datum::Time(a.value(row).saturating_mul(1_000)),
            Column::TimeMilli(a) => Datum::Time(a.value(row)),
            Column::TimeMicro(a) => Datum::Time((a.value(row) / 1_000) as i32),
            Column::TimeNano(a) => Datum::Time((a.value(row) / 1_000_000) as i32),
            Column::TimestampSecond(a, ltz) => timestamp(
                Timestamp::from_millis(a.value(row).saturating_mul(MILLIS_PER_SECOND)),
                ltz,
            ),
            Column::TimestampMilli(a, ltz) => timestamp(Timestamp::from_millis(a.value(row)), ltz),
            Column::TimestampMicro(a, ltz) => timestamp(Timestamp::from_micros(a.value(row)), ltz),
            Column::TimestampNano(a, ltz) => timestamp(Timestamp::from_nanos(a.value(row)), ltz),
        }
    }
}

/// The rows of one scanned batch, in offset order: the batch's columns,
/// each downcast once. Iterate with `for row in &rows` or [`ScanRows::iter`];
/// each [`ScanRow`] borrows this column list, so no row allocates.
#[derive(Debug, Clone)]
pub struct ScanRows<'a> {
    columns: Vec<Column<'a>>,
    len: usize,
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
        })
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
        })
    }

    /// The rows in order.
    pub fn iter(&self) -> ScanRowIter<'_, 'a> {
        ScanRowIter {
            columns: &self.columns,
            next: 0,
            end: self.len,
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

    use arrow_array::{
        ArrayRef, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, ListArray,
        Time32MillisecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
    };
    use arrow_schema::{Field, Schema};

    use super::*;

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
