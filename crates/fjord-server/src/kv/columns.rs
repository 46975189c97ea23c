//! Rows of datums in and out of Arrow columns, for the changelog of
//! primary-key tables: [`ColumnsBuilder`] appends a row's datums to Arrow
//! builders chosen once per schema (the changelog batch of one KV batch),
//! and [`read_row`] reads one row of a changelog batch back as datums (the
//! KV store's replay at start-up).
//!
//! The value conventions are [`Datum`]'s; the Arrow types are
//! [`fjord_format::arrow_schema::to_arrow_type`]'s (Fluss's `ArrowUtils`):
//! TIMESTAMP and TIME use the unit their precision implies, so a value
//! round-trips exactly through a changelog batch.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder,
    FixedSizeBinaryBuilder, Float32Builder, Float64Builder, Int16Builder, Int32Builder,
    Int64Builder, Int8Builder, StringBuilder, Time32MillisecondBuilder, Time32SecondBuilder,
    Time64MicrosecondBuilder, Time64NanosecondBuilder, TimestampMicrosecondBuilder,
    TimestampMillisecondBuilder, TimestampNanosecondBuilder, TimestampSecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType as ArrowType, SchemaRef, TimeUnit};
use fjord_format::datum::{Datum, Timestamp, NANOS_PER_MILLI};

/// Why a row could not go into (or come out of) the columns. Only a row that
/// does not match its schema, which the row decoder has already ruled out
/// for rows from a validated KV batch, or a stored batch whose columns are
/// not the table's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColumnsError {
    /// A datum of the wrong type family for its column.
    #[error("column {column} ({arrow_type}) cannot hold a {datum} value")]
    WrongType {
        /// Column position.
        column: usize,
        /// The column's Arrow type.
        arrow_type: String,
        /// The datum's type family.
        datum: &'static str,
    },
    /// A row with another number of fields than the schema has columns.
    #[error("a row of {fields} fields for {columns} columns")]
    Arity {
        /// Fields in the row.
        fields: usize,
        /// Columns of the schema.
        columns: usize,
    },
    /// A column type this module does not handle (nested types).
    #[error("column {column} has type {arrow_type}, which primary-key tables do not support yet")]
    Unsupported {
        /// Column position.
        column: usize,
        /// The column's Arrow type.
        arrow_type: String,
    },
    /// Arrow refused to build the batch.
    #[error("cannot build the changelog batch: {0}")]
    Arrow(String),
}

/// One column's builder, by Arrow type.
enum Column {
    Boolean(BooleanBuilder),
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Utf8(StringBuilder),
    Binary(BinaryBuilder),
    FixedBinary(FixedSizeBinaryBuilder),
    Decimal(Decimal128Builder),
    Date(Date32Builder),
    TimeSecond(Time32SecondBuilder),
    TimeMilli(Time32MillisecondBuilder),
    TimeMicro(Time64MicrosecondBuilder),
    TimeNano(Time64NanosecondBuilder),
    TsSecond(TimestampSecondBuilder),
    TsMilli(TimestampMillisecondBuilder),
    TsMicro(TimestampMicrosecondBuilder),
    TsNano(TimestampNanosecondBuilder),
}

fn unsupported(column: usize, arrow_type: &ArrowType) -> ColumnsError {
    ColumnsError::Unsupported {
        column,
        arrow_type: arrow_type.to_string(),
    }
}

impl Column {
    fn new(column: usize, arrow_type: &ArrowType) -> Result<Self, ColumnsError> {
        Ok(match arrow_type {
            ArrowType::Boolean => Column::Boolean(BooleanBuilder::new()),
            ArrowType::Int8 => Column::Int8(Int8Builder::new()),
            ArrowType::Int16 => Column::Int16(Int16Builder::new()),
            ArrowType::Int32 => Column::Int32(Int32Builder::new()),
            ArrowType::Int64 => Column::Int64(Int64Builder::new()),
            ArrowType::Float32 => Column::Float32(Float32Builder::new()),
            ArrowType::Float64 => Column::Float64(Float64Builder::new()),
            ArrowType::Utf8 => Column::Utf8(StringBuilder::new()),
            ArrowType::Binary => Column::Binary(BinaryBuilder::new()),
            ArrowType::FixedSizeBinary(n) => Column::FixedBinary(FixedSizeBinaryBuilder::new(*n)),
            ArrowType::Decimal128(p, s) => Column::Decimal(
                Decimal128Builder::new()
                    .with_precision_and_scale(*p, *s)
                    .map_err(|e| ColumnsError::Arrow(e.to_string()))?,
            ),
            ArrowType::Date32 => Column::Date(Date32Builder::new()),
            ArrowType::Time32(TimeUnit::Second) => Column::TimeSecond(Time32SecondBuilder::new()),
            ArrowType::Time32(TimeUnit::Millisecond) => {
                Column::TimeMilli(Time32MillisecondBuilder::new())
            }
            ArrowType::Time64(TimeUnit::Microsecond) => {
                Column::TimeMicro(Time64MicrosecondBuilder::new())
            }
            ArrowType::Time64(TimeUnit::Nanosecond) => {
                Column::TimeNano(Time64NanosecondBuilder::new())
            }
            ArrowType::Timestamp(unit, tz) => {
                let tz = tz.clone();
                match unit {
                    TimeUnit::Second => {
                        Column::TsSecond(TimestampSecondBuilder::new().with_timezone_opt(tz))
                    }
                    TimeUnit::Millisecond => {
                        Column::TsMilli(TimestampMillisecondBuilder::new().with_timezone_opt(tz))
                    }
                    TimeUnit::Microsecond => {
                        Column::TsMicro(TimestampMicrosecondBuilder::new().with_timezone_opt(tz))
                    }
                    TimeUnit::Nanosecond => {
                        Column::TsNano(TimestampNanosecondBuilder::new().with_timezone_opt(tz))
                    }
                }
            }
            other => return Err(unsupported(column, other)),
        })
    }

    fn builder(&mut self) -> &mut dyn ArrayBuilder {
        match self {
            Column::Boolean(b) => b,
            Column::Int8(b) => b,
            Column::Int16(b) => b,
            Column::Int32(b) => b,
            Column::Int64(b) => b,
            Column::Float32(b) => b,
            Column::Float64(b) => b,
            Column::Utf8(b) => b,
            Column::Binary(b) => b,
            Column::FixedBinary(b) => b,
            Column::Decimal(b) => b,
            Column::Date(b) => b,
            Column::TimeSecond(b) => b,
            Column::TimeMilli(b) => b,
            Column::TimeMicro(b) => b,
            Column::TimeNano(b) => b,
            Column::TsSecond(b) => b,
            Column::TsMilli(b) => b,
            Column::TsMicro(b) => b,
            Column::TsNano(b) => b,
        }
    }

    fn append_null(&mut self) {
        match self {
            Column::Boolean(b) => b.append_null(),
            Column::Int8(b) => b.append_null(),
            Column::Int16(b) => b.append_null(),
            Column::Int32(b) => b.append_null(),
            Column::Int64(b) => b.append_null(),
            Column::Float32(b) => b.append_null(),
            Column::Float64(b) => b.append_null(),
            Column::Utf8(b) => b.append_null(),
            Column::Binary(b) => b.append_null(),
            Column::FixedBinary(b) => b.append_null(),
            Column::Decimal(b) => b.append_null(),
            Column::Date(b) => b.append_null(),
            Column::TimeSecond(b) => b.append_null(),
            Column::TimeMilli(b) => b.append_null(),
            Column::TimeMicro(b) => b.append_null(),
            Column::TimeNano(b) => b.append_null(),
            Column::TsSecond(b) => b.append_null(),
            Column::TsMilli(b) => b.append_null(),
            Column::TsMicro(b) => b.append_null(),
            Column::TsNano(b) => b.append_null(),
        }
    }

    /// Appends `datum`; `false` when its type family does not fit.
    fn append(&mut self, datum: &Datum<'_>) -> bool {
        match (self, *datum) {
            (column, Datum::Null) => column.append_null(),
            (Column::Boolean(b), Datum::Boolean(v)) => b.append_value(v),
            (Column::Int8(b), Datum::TinyInt(v)) => b.append_value(v),
            (Column::Int16(b), Datum::SmallInt(v)) => b.append_value(v),
            (Column::Int32(b), Datum::Int(v)) => b.append_value(v),
            (Column::Int64(b), Datum::BigInt(v)) => b.append_value(v),
            (Column::Float32(b), Datum::Float(v)) => b.append_value(v),
            (Column::Float64(b), Datum::Double(v)) => b.append_value(v),
            (Column::Utf8(b), Datum::String(v)) => b.append_value(v),
            (Column::Binary(b), Datum::Binary(v)) => b.append_value(v),
            (Column::FixedBinary(b), Datum::Binary(v)) => {
                if b.append_value(v).is_err() {
                    return false;
                }
            }
            (Column::Decimal(b), Datum::Decimal(v)) => b.append_value(v),
            (Column::Date(b), Datum::Date(v)) => b.append_value(v),
            (Column::TimeSecond(b), Datum::Time(ms)) => b.append_value(ms.div_euclid(1_000)),
            (Column::TimeMilli(b), Datum::Time(ms)) => b.append_value(ms),
            (Column::TimeMicro(b), Datum::Time(ms)) => b.append_value(i64::from(ms) * 1_000),
            (Column::TimeNano(b), Datum::Time(ms)) => b.append_value(i64::from(ms) * 1_000_000),
            (column, Datum::Timestamp(ts) | Datum::TimestampLtz(ts)) => match column {
                Column::TsSecond(b) => b.append_value(ts.millis().div_euclid(1_000)),
                Column::TsMilli(b) => b.append_value(ts.millis()),
                Column::TsMicro(b) => {
                    b.append_value(ts.millis() * 1_000 + i64::from(ts.nanos_of_milli() / 1_000))
                }
                Column::TsNano(b) => b.append_value(
                    ts.millis() * i64::from(NANOS_PER_MILLI) + i64::from(ts.nanos_of_milli()),
                ),
                _ => return false,
            },
            _ => return false,
        }
        true
    }
}

/// Arrow column builders for one schema, filled a row at a time and
/// finished into a [`RecordBatch`]; reused batch after batch (the builders
/// keep their capacity).
pub struct ColumnsBuilder {
    schema: SchemaRef,
    columns: Vec<Column>,
    rows: usize,
}

impl ColumnsBuilder {
    /// Builders for the columns of `schema`; refuses nested column types.
    pub fn new(schema: SchemaRef) -> Result<Self, ColumnsError> {
        let columns = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| Column::new(i, f.data_type()))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            schema,
            columns,
            rows: 0,
        })
    }

    /// Rows appended since the last [`ColumnsBuilder::finish`].
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether no row was appended since the last finish.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends one row. On error the builders are emptied (every row since
    /// the last finish is dropped): the caller fails the whole KV batch, so
    /// nothing of it may reach the changelog.
    pub fn append(&mut self, row: &[Datum<'_>]) -> Result<(), ColumnsError> {
        if row.len() != self.columns.len() {
            self.clear();
            return Err(ColumnsError::Arity {
                fields: row.len(),
                columns: self.columns.len(),
            });
        }
        for (i, (column, datum)) in self.columns.iter_mut().zip(row).enumerate() {
            if !column.append(datum) {
                let error = ColumnsError::WrongType {
                    column: i,
                    arrow_type: self.schema.field(i).data_type().to_string(),
                    datum: datum.type_name(),
                };
                self.clear();
                return Err(error);
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// Drops every row appended since the last finish.
    pub fn clear(&mut self) {
        for column in &mut self.columns {
            drop(column.builder().finish());
        }
        self.rows = 0;
    }

    /// The rows appended so far as one batch; the builders start over empty.
    pub fn finish(&mut self) -> Result<RecordBatch, ColumnsError> {
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|c| c.builder().finish())
            .collect();
        self.rows = 0;
        RecordBatch::try_new(Arc::clone(&self.schema), arrays)
            .map_err(|e| ColumnsError::Arrow(e.to_string()))
    }
}

/// Reads value `row` of `array` into `out`, in [`Datum`]'s conventions.
fn read_value<'a>(
    array: &'a dyn Array,
    row: usize,
    out: &mut Datum<'a>,
) -> Result<(), ColumnsError> {
    if array.is_null(row) {
        *out = Datum::Null;
        return Ok(());
    }
    let ts = |millis: i64, nanos: i64| {
        Timestamp::new(millis, nanos as i32).unwrap_or(Timestamp::from_millis(millis))
    };
    let ltz = matches!(array.data_type(), ArrowType::Timestamp(_, Some(_)));
    let stamp = |t: Timestamp| {
        if ltz {
            Datum::TimestampLtz(t)
        } else {
            Datum::Timestamp(t)
        }
    };
    *out = match array.data_type() {
        ArrowType::Boolean => Datum::Boolean(array.as_boolean().value(row)),
        ArrowType::Int8 => Datum::TinyInt(array.as_primitive::<Int8Type>().value(row)),
        ArrowType::Int16 => Datum::SmallInt(array.as_primitive::<Int16Type>().value(row)),
        ArrowType::Int32 => Datum::Int(array.as_primitive::<Int32Type>().value(row)),
        ArrowType::Int64 => Datum::BigInt(array.as_primitive::<Int64Type>().value(row)),
        ArrowType::Float32 => Datum::Float(array.as_primitive::<Float32Type>().value(row)),
        ArrowType::Float64 => Datum::Double(array.as_primitive::<Float64Type>().value(row)),
        ArrowType::Utf8 => Datum::String(array.as_string::<i32>().value(row)),
        ArrowType::Binary => Datum::Binary(array.as_binary::<i32>().value(row)),
        ArrowType::FixedSizeBinary(_) => Datum::Binary(array.as_fixed_size_binary().value(row)),
        ArrowType::Decimal128(_, _) => {
            Datum::Decimal(array.as_primitive::<Decimal128Type>().value(row))
        }
        ArrowType::Date32 => Datum::Date(array.as_primitive::<Date32Type>().value(row)),
        ArrowType::Time32(TimeUnit::Second) => {
            Datum::Time(array.as_primitive::<Time32SecondType>().value(row) * 1_000)
        }
        ArrowType::Time32(TimeUnit::Millisecond) => {
            Datum::Time(array.as_primitive::<Time32MillisecondType>().value(row))
        }
        ArrowType::Time64(TimeUnit::Microsecond) => {
            Datum::Time((array.as_primitive::<Time64MicrosecondType>().value(row) / 1_000) as i32)
        }
        ArrowType::Time64(TimeUnit::Nanosecond) => Datum::Time(
            (array.as_primitive::<Time64NanosecondType>().value(row) / 1_000_000) as i32,
        ),
        ArrowType::Timestamp(TimeUnit::Second, _) => stamp(Timestamp::from_millis(
            array.as_primitive::<TimestampSecondType>().value(row) * 1_000,
        )),
        ArrowType::Timestamp(TimeUnit::Millisecond, _) => stamp(Timestamp::from_millis(
            array.as_primitive::<TimestampMillisecondType>().value(row),
        )),
        ArrowType::Timestamp(TimeUnit::Microsecond, _) => {
            let v = array.as_primitive::<TimestampMicrosecondType>().value(row);
            stamp(ts(v.div_euclid(1_000), v.rem_euclid(1_000) * 1_000))
        }
        ArrowType::Timestamp(TimeUnit::Nanosecond, _) => {
            let v = array.as_primitive::<TimestampNanosecondType>().value(row);
            let per_milli = i64::from(NANOS_PER_MILLI);
            stamp(ts(v.div_euclid(per_milli), v.rem_euclid(per_milli)))
        }
        other => return Err(unsupported(0, other)),
    };
    Ok(())
}

/// Reads row `row` of `batch` into `out` (cleared first), one datum per
/// column; strings and bytes borrow from the batch.
pub fn read_row<'a>(
    batch: &'a RecordBatch,
    row: usize,
    out: &mut Vec<Datum<'a>>,
) -> Result<(), ColumnsError> {
    out.clear();
    for (i, column) in batch.columns().iter().enumerate() {
        let mut datum = Datum::Null;
        read_value(column.as_ref(), row, &mut datum).map_err(|e| match e {
            ColumnsError::Unsupported { arrow_type, .. } => ColumnsError::Unsupported {
                column: i,
                arrow_type,
            },
            other => other,
        })?;
        out.push(datum);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fjord_format::arrow_schema::to_arrow_schema;
    use fjord_format::schema::Schema;
    use fjord_format::types::DataType;

    fn schema() -> Schema {
        Schema::builder()
            .column("b", DataType::boolean())
            .column("i8", DataType::tinyint())
            .column("i16", DataType::smallint())
            .column("i32", DataType::int())
            .column("i64", DataType::bigint().with_nullable(false))
            .column("f", DataType::float())
            .column("d", DataType::double())
            .column("s", DataType::string())
            .column("c", DataType::char(2).unwrap())
            .column("bytes", DataType::bytes())
            .column("bin", DataType::binary(2).unwrap())
            .column("dec", DataType::decimal(10, 2).unwrap())
            .column("bigdec", DataType::decimal(30, 4).unwrap())
            .column("date", DataType::date())
            .column("t0", DataType::time(0).unwrap())
            .column("t3", DataType::time(3).unwrap())
            .column("t6", DataType::time(6).unwrap())
            .column("t9", DataType::time(9).unwrap())
            .column("ts0", DataType::timestamp(0).unwrap())
            .column("ts3", DataType::timestamp(3).unwrap())
            .column("ts6", DataType::timestamp(6).unwrap())
            .column("ts9", DataType::timestamp(9).unwrap())
            .column("ltz3", DataType::timestamp_ltz(3).unwrap())
            .column("ltz9", DataType::timestamp_ltz(9).unwrap())
            .primary_key(["i64"])
            .build()
            .unwrap()
    }

    fn row(n: i64) -> Vec<Datum<'static>> {
        let ts9 = Timestamp::new(1_700_000_000_123 + n, 456_789).unwrap();
        let ts6 = Timestamp::new(1_700_000_000_123 - n, 456_000).unwrap();
        vec![
            Datum::Boolean(n % 2 == 0),
            Datum::TinyInt(-3),
            Datum::SmallInt(300),
            Datum::Int(-70_000),
            Datum::BigInt(n),
            Datum::Float(1.5),
            Datum::Double(-2.25),
            Datum::String("héllo"),
            Datum::String("ab"),
            Datum::Binary(b"\x00\xff\x10"),
            Datum::Binary(b"xy"),
            Datum::Decimal(12_345),
            Datum::Decimal(-123_456_789_012_345_678_901_234_567),
            Datum::Date(19_000),
            Datum::Time(45_296_000),
            Datum::Time(45_296_789),
            Datum::Time(45_296_789),
            Datum::Time(45_296_789),
            Datum::Timestamp(Timestamp::from_millis(-5_000)),
            Datum::Timestamp(Timestamp::from_millis(1_700_000_000_123)),
            Datum::Timestamp(ts6),
            Datum::Timestamp(ts9),
            Datum::TimestampLtz(Timestamp::from_millis(-1)),
            Datum::TimestampLtz(ts9),
        ]
    }

    #[test]
    fn every_scalar_type_round_trips_through_the_columns() {
        let arrow = to_arrow_schema(&schema());
        let mut builder = ColumnsBuilder::new(Arc::clone(&arrow)).unwrap();
        let rows: Vec<_> = (0..3).map(row).collect();
        for r in &rows {
            builder.append(r).unwrap();
        }
        let mut nulls = vec![Datum::Null; rows[0].len()];
        nulls[4] = Datum::BigInt(99);
        builder.append(&nulls).unwrap();
        assert_eq!(builder.len(), 4);
        let batch = builder.finish().unwrap();
        assert!(builder.is_empty());
        let mut out = Vec::new();
        for (i, expected) in rows.iter().chain([&nulls]).enumerate() {
            read_row(&batch, i, &mut out).unwrap();
            assert_eq!(&out, expected, "row {i}");
        }
    }

    #[test]
    fn a_refused_row_drops_the_rows_since_the_last_finish() {
        let arrow = to_arrow_schema(&schema());
        let mut builder = ColumnsBuilder::new(arrow).unwrap();
        builder.append(&row(1)).unwrap();
        let mut bad = row(2);
        bad[7] = Datum::Int(5);
        assert!(matches!(
            builder.append(&bad),
            Err(ColumnsError::WrongType { column: 7, .. })
        ));
        assert!(builder.is_empty());
        builder.append(&row(3)).unwrap();
        assert!(matches!(
            builder.append(&bad[..3]),
            Err(ColumnsError::Arity { fields: 3, .. })
        ));
        builder.append(&row(4)).unwrap();
        let batch = builder.finish().unwrap();
        assert_eq!(batch.num_rows(), 1);
        let mut out = Vec::new();
        read_row(&batch, 0, &mut out).unwrap();
        assert_eq!(out, row(4));
    }

    #[test]
    fn nested_columns_are_refused() {
        let s = Schema::builder()
            .column("k", DataType::int().with_nullable(false))
            .column("a", DataType::array(DataType::int()))
            .primary_key(["k"])
            .build()
            .unwrap();
        assert!(matches!(
            ColumnsBuilder::new(to_arrow_schema(&s)),
            Err(ColumnsError::Unsupported { column: 1, .. })
        ));
    }
}
