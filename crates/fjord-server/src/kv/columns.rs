//! Rows of datums in and out of Arrow columns, for the changelog of
//! primary-key tables: [`ColumnsBuilder`] appends a row's datums to Arrow
//! builders chosen once per schema (the changelog batch of one KV batch),
//! and [`read_row_into`] reads one row of a changelog batch back as datums
//! (the KV store's replay at start-up and the changelog compaction);
//! [`read_row`] is its flat-only form, which refuses nested columns.
//!
//! The value conventions are [`Datum`]'s; the Arrow types are
//! [`fjord_format::arrow_schema::to_arrow_type`]'s (Fluss's `ArrowUtils`):
//! TIMESTAMP and TIME use the unit their precision implies, so a value
//! round-trips exactly through a changelog batch.
//!
//! ARRAY, MAP and ROW columns (`List`, `Map`, `Struct`) take their datums'
//! Fluss binary bytes, keep a copy per row, and turn them into nested Arrow
//! arrays when the batch is finished (`nested_array`); reading one back
//! ([`read_row_into`]) writes those bytes again into a caller's scratch
//! buffer. The element types come from the Arrow schema itself
//! (`fluss_type`, resolved once per batch by [`NestedColumns`]), so the
//! builder needs nothing but the schema. A row of flat columns reads as it
//! would with [`read_row`]: no nested work and no allocation (the scratch
//! buffer is left empty); a row with nested values allocates for their
//! children while writing their bytes again, which only tables with nested
//! columns pay.

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
use arrow_array::{Array, ArrayRef, ListArray, MapArray, RecordBatch, StructArray};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType as ArrowType, FieldRef, SchemaRef, TimeUnit};
use fjord_format::datum::{Datum, Timestamp, NANOS_PER_MILLI};
use fjord_format::row::compacted::CompactedRowWriter;
use fjord_format::row::nested::{
    write_array, write_map, BinaryArray, BinaryMap, NestedField, NestedType,
};
use fjord_format::types::{DataField, DataType};

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
    /// A column type this module does not handle: an Arrow type no Fluss
    /// type maps to, or a nested column given to the flat [`read_row`].
    #[error("column {column} has type {arrow_type}, which this reader does not handle")]
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
    /// An ARRAY, MAP or ROW column: each row's bytes, turned into Arrow
    /// at `finish` (a changelog batch is built once and read many times,
    /// so the nested walk happens once per batch, off the flat path).
    Nested(Box<NestedColumn>),
}

/// The rows of one nested column until the batch is finished.
struct NestedColumn {
    arrow: FieldRef,
    field: NestedField,
    bytes: Vec<u8>,
    /// Per row: the range of its value in `bytes`, `None` for NULL.
    rows: Vec<Option<(usize, usize)>>,
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
            ArrowType::List(_) | ArrowType::Map(..) | ArrowType::Struct(_) => {
                let arrow = Arc::new(arrow_schema::Field::new("", arrow_type.clone(), true));
                let field = fluss_type(&arrow)
                    .and_then(|t| NestedField::of(&t).ok())
                    .ok_or_else(|| unsupported(column, arrow_type))?;
                Column::Nested(Box::new(NestedColumn {
                    arrow,
                    field,
                    bytes: Vec::new(),
                    rows: Vec::new(),
                }))
            }
            other => return Err(unsupported(column, other)),
        })
    }

    /// The column's values as one array; the column starts over empty.
    fn finish_array(&mut self) -> Result<ArrayRef, ColumnsError> {
        let Column::Nested(nested) = self else {
            return Ok(self.builder().finish());
        };
        let datums: Vec<Datum<'_>> = nested
            .rows
            .iter()
            .map(|r| match (*r, &nested.field.ty) {
                (None, _) => Datum::Null,
                (Some((a, b)), NestedType::Array(_)) => Datum::Array(&nested.bytes[a..b]),
                (Some((a, b)), NestedType::Map { .. }) => Datum::Map(&nested.bytes[a..b]),
                (Some((a, b)), _) => Datum::Row(&nested.bytes[a..b]),
            })
            .collect();
        let array = nested_array(nested.arrow.data_type(), &nested.field, &datums);
        nested.bytes.clear();
        nested.rows.clear();
        array
    }

    /// The Arrow builder of a flat column (`finish_array` handles nested ones).
    fn builder(&mut self) -> &mut dyn ArrayBuilder {
        match self {
            Column::Nested(_) => unreachable!("nested columns have no Arrow builder"),
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
            Column::Nested(n) => n.rows.push(None),
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
            (Column::Nested(n), Datum::Array(v) | Datum::Map(v) | Datum::Row(v)) => {
                // The row decoder has checked the bytes against the types;
                // the family must still be the column's.
                let fits = matches!(
                    (&n.field.ty, datum),
                    (NestedType::Array(_), Datum::Array(_))
                        | (NestedType::Map { .. }, Datum::Map(_))
                        | (NestedType::Row(_), Datum::Row(_))
                );
                if !fits {
                    return false;
                }
                let start = n.bytes.len();
                n.bytes.extend_from_slice(v);
                n.rows.push(Some((start, n.bytes.len())));
            }
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
    /// Builders for the columns of `schema`, nested ones included.
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
            match column {
                Column::Nested(n) => {
                    n.bytes.clear();
                    n.rows.clear();
                }
                flat => drop(flat.builder().finish()),
            }
        }
        self.rows = 0;
    }

    /// The rows appended so far as one batch; the builders start over empty.
    pub fn finish(&mut self) -> Result<RecordBatch, ColumnsError> {
        let arrays = self
            .columns
            .iter_mut()
            .map(Column::finish_array)
            .collect::<Result<Vec<ArrayRef>, _>>();
        self.rows = 0;
        let arrays = match arrays {
            Ok(arrays) => arrays,
            Err(e) => {
                self.clear();
                return Err(e);
            }
        };
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
/// column; strings and bytes borrow from the batch. Flat columns only: an
/// ARRAY, MAP or ROW column is refused ([`ColumnsError::Unsupported`]);
/// [`read_row_into`] reads those too.
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

/// The Fluss type an Arrow field of a changelog schema stands for, as far
/// as nested layouts care (`to_arrow_type` inverted: the time unit gives
/// the precision's side of 3, CHAR reads as STRING, which lays out alike).
fn fluss_type(field: &arrow_schema::Field) -> Option<DataType> {
    let precision = |unit: &TimeUnit| match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    };
    let t = match field.data_type() {
        ArrowType::Boolean => DataType::boolean(),
        ArrowType::Int8 => DataType::tinyint(),
        ArrowType::Int16 => DataType::smallint(),
        ArrowType::Int32 => DataType::int(),
        ArrowType::Int64 => DataType::bigint(),
        ArrowType::Float32 => DataType::float(),
        ArrowType::Float64 => DataType::double(),
        ArrowType::Utf8 => DataType::string(),
        ArrowType::Binary => DataType::bytes(),
        ArrowType::FixedSizeBinary(n) => DataType::binary(u32::try_from(*n).ok()?).ok()?,
        ArrowType::Decimal128(p, s) => {
            DataType::decimal(u32::from(*p), u32::try_from(*s).ok()?).ok()?
        }
        ArrowType::Date32 => DataType::date(),
        ArrowType::Time32(unit) | ArrowType::Time64(unit) => {
            DataType::time(precision(unit)).ok()?
        }
        ArrowType::Timestamp(unit, None) => DataType::timestamp(precision(unit)).ok()?,
        ArrowType::Timestamp(unit, Some(_)) => DataType::timestamp_ltz(precision(unit)).ok()?,
        ArrowType::List(item) => DataType::array(fluss_type(item)?),
        ArrowType::Map(entries, _) => {
            let ArrowType::Struct(kv) = entries.data_type() else {
                return None;
            };
            DataType::map(fluss_type(kv.first()?)?, fluss_type(kv.get(1)?)?)
        }
        ArrowType::Struct(fields) => DataType::row(
            fields
                .iter()
                .map(|f| Some(DataField::new(f.name().clone(), fluss_type(f)?)))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    };
    Some(t.with_nullable(field.is_nullable()))
}

fn malformed(reason: &str) -> ColumnsError {
    ColumnsError::Arrow(format!("a nested value is malformed: {reason}"))
}

/// The Arrow array of `datums` (NULL or values of `field`) of type
/// `arrow`: flat types through a flat builder, nested ones by walking
/// their bytes into child datums and building the children first.
fn nested_array(
    arrow: &ArrowType,
    field: &NestedField,
    datums: &[Datum<'_>],
) -> Result<ArrayRef, ColumnsError> {
    let nulls = || NullBuffer::from_iter(datums.iter().map(|d| !d.is_null()));
    match (arrow, &field.ty) {
        (ArrowType::List(item), NestedType::Array(element)) => {
            let mut offsets = Vec::with_capacity(datums.len() + 1);
            offsets.push(0i32);
            let mut children = Vec::new();
            for datum in datums {
                if let Datum::Array(bytes) = datum {
                    let array = BinaryArray::parse(bytes, element).map_err(malformed)?;
                    for i in 0..array.len() {
                        children.push(array.get(i, element).map_err(malformed)?);
                    }
                }
                offsets.push(i32::try_from(children.len()).map_err(|_| malformed("too long"))?);
            }
            let child = nested_array(item.data_type(), element, &children)?;
            ListArray::try_new(
                Arc::clone(item),
                OffsetBuffer::new(offsets.into()),
                child,
                Some(nulls()),
            )
            .map(|a| Arc::new(a) as ArrayRef)
            .map_err(|e| ColumnsError::Arrow(e.to_string()))
        }
        (ArrowType::Map(entries, sorted), NestedType::Map { key, value }) => {
            let ArrowType::Struct(kv) = entries.data_type() else {
                return Err(malformed("a MAP's entries are not a struct"));
            };
            let mut offsets = vec![0i32];
            let (mut keys, mut values) = (Vec::new(), Vec::new());
            for datum in datums {
                if let Datum::Map(bytes) = datum {
                    let map = BinaryMap::parse(bytes, key, value).map_err(malformed)?;
                    for i in 0..map.len() {
                        keys.push(map.keys().get(i, key).map_err(malformed)?);
                        values.push(map.values().get(i, value).map_err(malformed)?);
                    }
                }
                offsets.push(i32::try_from(keys.len()).map_err(|_| malformed("too long"))?);
            }
            let children = vec![
                nested_array(kv[0].data_type(), key, &keys)?,
                nested_array(kv[1].data_type(), value, &values)?,
            ];
            let entries_array = StructArray::try_new(kv.clone(), children, None)
                .map_err(|e| ColumnsError::Arrow(e.to_string()))?;
            MapArray::try_new(
                Arc::clone(entries),
                OffsetBuffer::new(offsets.into()),
                entries_array,
                Some(nulls()),
                *sorted,
            )
            .map(|a| Arc::new(a) as ArrayRef)
            .map_err(|e| ColumnsError::Arrow(e.to_string()))
        }
        (ArrowType::Struct(fields), NestedType::Row(decoder)) => {
            let nested: Vec<NestedField> = fields
                .iter()
                .map(|f| fluss_type(f).and_then(|t| NestedField::of(&t).ok()))
                .collect::<Option<_>>()
                .ok_or_else(|| malformed("a ROW field has no Fluss type"))?;
            let mut columns: Vec<Vec<Datum<'_>>> =
                vec![Vec::with_capacity(datums.len()); fields.len()];
            let mut row = Vec::new();
            for datum in datums {
                match datum {
                    Datum::Row(bytes) => {
                        decoder
                            .decode(bytes, &mut row)
                            .map_err(|e| ColumnsError::Arrow(e.to_string()))?;
                        for (column, d) in columns.iter_mut().zip(&row) {
                            column.push(*d);
                        }
                    }
                    _ => columns.iter_mut().for_each(|c| c.push(Datum::Null)),
                }
            }
            let children = fields
                .iter()
                .zip(&nested)
                .zip(&columns)
                .map(|((f, n), c)| nested_array(f.data_type(), n, c))
                .collect::<Result<Vec<_>, _>>()?;
            StructArray::try_new(fields.clone(), children, Some(nulls()))
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| ColumnsError::Arrow(e.to_string()))
        }
        (arrow, _) => {
            let mut column = Column::new(0, arrow)?;
            for datum in datums {
                if !column.append(datum) {
                    return Err(ColumnsError::WrongType {
                        column: 0,
                        arrow_type: arrow.to_string(),
                        datum: datum.type_name(),
                    });
                }
            }
            column.finish_array()
        }
    }
}

/// Writes the Fluss binary bytes of non-null value `row` of nested `array`
/// (of type `field`) to `out`: the inverse of [`nested_array`].
fn encode_nested(
    array: &dyn Array,
    row: usize,
    field: &NestedField,
    out: &mut Vec<u8>,
) -> Result<(), ColumnsError> {
    // The children's datums; nested children are encoded into `scratch`
    // first, then borrowed from it.
    fn children<'a>(
        child: &'a dyn Array,
        range: std::ops::Range<usize>,
        field: &NestedField,
        scratch: &'a mut Vec<u8>,
    ) -> Result<Vec<Datum<'a>>, ColumnsError> {
        let mut spans = Vec::with_capacity(range.len());
        for i in range.clone() {
            if child.is_null(i) || matches!(field.ty, NestedType::Flat(_)) {
                spans.push(None);
            } else {
                let start = scratch.len();
                encode_nested(child, i, field, scratch)?;
                spans.push(Some((start, scratch.len())));
            }
        }
        let scratch: &'a [u8] = scratch;
        range
            .zip(spans)
            .map(|(i, span)| {
                Ok(match (span, &field.ty) {
                    (Some((a, b)), NestedType::Array(_)) => Datum::Array(&scratch[a..b]),
                    (Some((a, b)), NestedType::Map { .. }) => Datum::Map(&scratch[a..b]),
                    (Some((a, b)), _) => Datum::Row(&scratch[a..b]),
                    (None, _) => {
                        let mut d = Datum::Null;
                        read_value(child, i, &mut d)?;
                        d
                    }
                })
            })
            .collect()
    }
    let refused = |_| malformed("a value its Fluss type cannot hold");
    match &field.ty {
        NestedType::Array(element) => {
            let list = array
                .as_list_opt::<i32>()
                .ok_or_else(|| malformed("not a list"))?;
            let offsets = list.value_offsets();
            let range = offsets[row] as usize..offsets[row + 1] as usize;
            let mut scratch = Vec::new();
            let items = children(list.values().as_ref(), range, element, &mut scratch)?;
            write_array(element, &items, out).map_err(refused)
        }
        NestedType::Map { key, value } => {
            let map = array.as_map_opt().ok_or_else(|| malformed("not a map"))?;
            let offsets = map.value_offsets();
            let range = offsets[row] as usize..offsets[row + 1] as usize;
            let (mut ks, mut vs) = (Vec::new(), Vec::new());
            let keys = children(map.keys().as_ref(), range.clone(), key, &mut ks)?;
            let values = children(map.values().as_ref(), range, value, &mut vs)?;
            write_map(key, value, &keys, &values, out).map_err(refused)
        }
        NestedType::Row(decoder) => {
            let fields = array
                .as_struct_opt()
                .ok_or_else(|| malformed("not a struct"))?;
            let ArrowType::Struct(arrow_fields) = array.data_type() else {
                return Err(malformed("not a struct"));
            };
            let mut scratches: Vec<Vec<u8>> = vec![Vec::new(); arrow_fields.len()];
            let mut datums = Vec::with_capacity(arrow_fields.len());
            for ((f, column), scratch) in arrow_fields
                .iter()
                .zip(fields.columns())
                .zip(&mut scratches)
            {
                let nested = fluss_type(f)
                    .and_then(|t| NestedField::of(&t).ok())
                    .ok_or_else(|| malformed("a ROW field has no Fluss type"))?;
                datums.extend(children(column.as_ref(), row..row + 1, &nested, scratch)?);
            }
            let mut writer = CompactedRowWriter::new(out, datums.len());
            for (field, datum) in decoder.fields().iter().zip(&datums) {
                writer
                    .write_datum(*field, datum)
                    .map_err(|e| ColumnsError::Arrow(e.to_string()))?;
            }
            writer
                .finish()
                .map(|_| ())
                .map_err(|e| ColumnsError::Arrow(e.to_string()))
        }
        NestedType::Flat(_) => Err(malformed("a flat value where a nested one was expected")),
    }
}

/// Empties `v` and hands its allocation back with another lifetime: the
/// datums of one record borrow that record's bytes (or a scratch buffer,
/// see [`read_row_into`]), and the vectors are reused for the next record
/// without allocating (the in-place collect reuses the buffer; no element
/// survives, so no borrow outlives its bytes).
pub(crate) fn recycle<'a, 'b>(mut v: Vec<Datum<'a>>) -> Vec<Datum<'b>> {
    v.clear();
    v.into_iter().map(|_| Datum::Null).collect()
}

/// The ARRAY, MAP and ROW columns of one batch with their Fluss types,
/// found once per batch for [`read_row_into`] (and where each one's bytes
/// went in the current row).
pub struct NestedColumns {
    columns: Vec<NestedSlot>,
}

/// One nested column of a batch.
struct NestedSlot {
    index: usize,
    field: NestedField,
    /// Its value's bytes in the scratch buffer for the current row (None: NULL).
    span: Option<(usize, usize)>,
}

impl NestedColumns {
    /// The nested columns of `batch`; an error if one has no Fluss type.
    pub fn of(batch: &RecordBatch) -> Result<Self, ColumnsError> {
        let mut columns = Vec::new();
        for (i, (column, field)) in batch
            .columns()
            .iter()
            .zip(batch.schema_ref().fields())
            .enumerate()
        {
            if matches!(
                column.data_type(),
                ArrowType::List(_) | ArrowType::Map(..) | ArrowType::Struct(_)
            ) {
                let nested = fluss_type(field)
                    .and_then(|t| NestedField::of(&t).ok())
                    .ok_or_else(|| unsupported(i, column.data_type()))?;
                columns.push(NestedSlot {
                    index: i,
                    field: nested,
                    span: None,
                });
            }
        }
        Ok(Self { columns })
    }
}

/// Reads row `row` of `batch` into `out` like [`read_row`], nested columns
/// included: their values are written again as Fluss binary bytes into
/// `scratch` (cleared first), which the nested datums borrow. `nested` is
/// [`NestedColumns::of`] the same batch. Callers keep one `scratch` (and,
/// through [`recycle`], one `out`) across the rows of a loop, so a row
/// without nested values allocates nothing and does no nested work.
pub fn read_row_into<'a>(
    batch: &'a RecordBatch,
    row: usize,
    nested: &mut NestedColumns,
    scratch: &'a mut Vec<u8>,
    out: &mut Vec<Datum<'a>>,
) -> Result<(), ColumnsError> {
    out.clear();
    scratch.clear();
    for nested in &mut nested.columns {
        let column = batch.column(nested.index);
        nested.span = None;
        if !column.is_null(row) {
            let start = scratch.len();
            encode_nested(column.as_ref(), row, &nested.field, scratch)?;
            nested.span = Some((start, scratch.len()));
        }
    }
    let scratch: &'a [u8] = scratch;
    let mut spans = nested.columns.iter().peekable();
    for (i, column) in batch.columns().iter().enumerate() {
        if let Some(nested) = spans.next_if(|c| c.index == i) {
            out.push(match (nested.span, column.data_type()) {
                (None, _) => Datum::Null,
                (Some((a, b)), ArrowType::List(_)) => Datum::Array(&scratch[a..b]),
                (Some((a, b)), ArrowType::Map(..)) => Datum::Map(&scratch[a..b]),
                (Some((a, b)), _) => Datum::Row(&scratch[a..b]),
            });
            continue;
        }
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
    fn the_flat_reader_refuses_nested_columns() {
        let s = Schema::builder()
            .column("k", DataType::int().with_nullable(false))
            .column("a", DataType::array(DataType::int()))
            .primary_key(["k"])
            .build()
            .unwrap();
        let mut builder = ColumnsBuilder::new(to_arrow_schema(&s)).expect("nested builders");
        let mut array = Vec::new();
        let element = fjord_format::row::nested::NestedField::of(&DataType::int()).unwrap();
        fjord_format::row::nested::write_array(&element, &[Datum::Int(5)], &mut array).unwrap();
        builder
            .append(&[Datum::Int(1), Datum::Array(&array)])
            .unwrap();
        let batch = builder.finish().unwrap();
        assert!(matches!(
            read_row(&batch, 0, &mut Vec::new()),
            Err(ColumnsError::Unsupported { column: 1, .. })
        ));
    }
}

#[cfg(test)]
mod nested_tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use fjord_format::arrow_schema::to_arrow_schema;
    use fjord_format::row::nested::{write_array, write_map, NestedField};
    use fjord_format::row::{RowCodec, RowFormat};
    use fjord_format::schema::Schema;
    use fjord_format::types::{DataField, DataType};

    fn nested(t: DataType) -> NestedField {
        NestedField::of(&t).unwrap()
    }

    #[test]
    fn nested_values_go_into_arrow_and_come_back_as_the_same_bytes() {
        let inner_row = DataType::row(vec![
            DataField::new("a", DataType::int()),
            DataField::new("b", DataType::array(DataType::string())),
        ]);
        let schema = Schema::builder()
            .column("id", DataType::int().not_null())
            .column("tags", DataType::array(DataType::int()))
            .column(
                "attrs",
                DataType::map(
                    DataType::string().not_null(),
                    DataType::timestamp(6).unwrap(),
                ),
            )
            .column("inner", inner_row.clone())
            .primary_key(["id"])
            .build()
            .unwrap();
        let arrow = to_arrow_schema(&schema);
        let mut tags = Vec::new();
        write_array(
            &nested(DataType::int()),
            &[Datum::Int(1), Datum::Null, Datum::Int(3)],
            &mut tags,
        )
        .unwrap();
        let t = Timestamp::new(1_700_000_000_123, 456_000).unwrap();
        let mut attrs = Vec::new();
        write_map(
            &nested(DataType::string().not_null()),
            &nested(DataType::timestamp(6).unwrap()),
            &[Datum::String("k"), Datum::String("a longer key")],
            &[Datum::Timestamp(t), Datum::Null],
            &mut attrs,
        )
        .unwrap();
        let mut strings = Vec::new();
        write_array(
            &nested(DataType::string()),
            &[Datum::String("x"), Datum::String("hello world!")],
            &mut strings,
        )
        .unwrap();
        let mut inner = Vec::new();
        RowCodec::new(
            RowFormat::Compacted,
            &[DataType::int(), DataType::array(DataType::string())],
        )
        .unwrap()
        .encode(&[Datum::Int(7), Datum::Array(&strings)], &mut inner)
        .unwrap();
        let rows = [
            vec![
                Datum::Int(1),
                Datum::Array(&tags),
                Datum::Map(&attrs),
                Datum::Row(&inner),
            ],
            vec![Datum::Int(2), Datum::Null, Datum::Null, Datum::Null],
        ];
        let mut builder = ColumnsBuilder::new(arrow).unwrap();
        for row in &rows {
            builder.append(row).unwrap();
        }
        let batch = builder.finish().unwrap();
        let list = batch.column(1).as_list::<i32>();
        let values = list.value(0);
        let ints = values.as_primitive::<Int32Type>();
        assert_eq!(
            (ints.value(0), ints.is_null(1), ints.value(2)),
            (1, true, 3)
        );
        assert!(list.is_null(1));
        let map = batch.column(2).as_map();
        assert_eq!(map.keys().as_string::<i32>().value(1), "a longer key");
        let structs = batch.column(3).as_struct();
        assert_eq!(structs.column(0).as_primitive::<Int32Type>().value(0), 7);
        let inner_list = structs.column(1).as_list::<i32>().value(0);
        assert_eq!(inner_list.as_string::<i32>().value(1), "hello world!");

        let mut nested = NestedColumns::of(&batch).unwrap();
        for (i, row) in rows.iter().enumerate() {
            let mut scratch = Vec::new();
            let mut out = Vec::new();
            read_row_into(&batch, i, &mut nested, &mut scratch, &mut out).unwrap();
            assert_eq!(&out, row);
        }
        // The flat reader still refuses nested columns rather than guess.
        assert!(read_row(&batch, 0, &mut Vec::new()).is_err());
    }
}
