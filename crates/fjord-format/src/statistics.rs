//! Per-batch column statistics (Fluss 1.0's V1 log batch statistics block):
//! which columns a table collects them for (`table.statistics.columns`),
//! writing the block from a finished Arrow batch, parsing it, and deciding
//! from it whether any row of the batch can satisfy a predicate.
//!
//! The block sits between a V1 header and the records. All integers are
//! little-endian:
//!
//! ```text
//! Version      u8            always 1
//! ColumnCount  i16           N > 0
//! Columns      N × i16       table column index of each statistics column
//! NullCounts   N × i32
//! MinLength    i32, MinRow   an AlignedRow (binary row) of the N columns
//! MaxLength    i32, MaxRow
//! ```
//!
//! An AlignedRow is a null bit set (8 header bits, then one bit per field,
//! rounded up to whole 8-byte words), one 8-byte slot per field, then a
//! variable part. Fixed-size values sit at the start of their slot;
//! strings of up to 7 bytes are inlined in the slot (length | 0x80 in the
//! slot's last byte), longer ones are word-aligned in the variable part and
//! the slot holds `offset << 32 | length`; a non-compact DECIMAL (precision
//! above 18) stores its unscaled value as big-endian two's complement bytes
//! the same way; a non-compact timestamp (precision above 3) stores its
//! epoch milliseconds in the variable part and `offset << 32 | nanos of the
//! millisecond` in the slot. A column whose values are all NULL is NULL in
//! both rows.
//!
//! Facts from Fluss's `LogRecordBatchStatisticsWriter`, `..Parser`,
//! `StatisticsConfigUtils`, `AlignedRow`/`AlignedRowWriter` and
//! fluss-rust's `record/statistics.rs`.
//!
//! Skipping is conservative: [`BatchStatistics::may_match`] answers `false`
//! only when the min, max and null count prove no row makes the predicate
//! TRUE. NaN bounds or literals, type mismatches, a missing column and the
//! functions it does not reason about all answer `true`.

use std::cmp::Ordering;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowPrimitiveType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType as ArrowType, TimeUnit};

use crate::schema::Schema;
use crate::types::{DataType, TypeKind};

/// The table option naming the columns statistics are collected for: `*`
/// (every column of a supported type) or a comma-separated list of names.
/// Not set: no statistics (magic V0 batches).
pub const TABLE_STATISTICS_COLUMNS: &str = "table.statistics.columns";
/// The only statistics block version Fluss 1.0 writes and reads.
pub const STATISTICS_VERSION: u8 = 1;
/// Most statistics columns a block can name (the count is an `i16`).
pub const STATISTICS_COLUMNS_MAX: usize = i16::MAX as usize;

/// Bits before the first field's null bit in an AlignedRow.
const ROW_HEADER_BITS: usize = 8;
/// Bytes of a value inlined in its 8-byte slot.
const INLINE_BYTES_MAX: usize = 7;
/// Marker bit of an inlined value in the slot's last byte.
const INLINE_MARKER: u8 = 0x80;
/// Largest DECIMAL precision stored as a compact `i64`.
const DECIMAL_COMPACT_PRECISION_MAX: u8 = 18;
/// Largest timestamp precision stored as compact epoch milliseconds.
const TIMESTAMP_COMPACT_PRECISION_MAX: u8 = 3;
/// Bytes a non-compact DECIMAL reserves in the variable part.
const DECIMAL_VAR_BYTES: usize = 16;

/// Why statistics could not be resolved, written or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatisticsError {
    /// `table.statistics.columns` names a column the schema lacks.
    #[error("Column '{0}' specified in statistics collection does not exist in table schema")]
    UnknownColumn(String),
    /// `table.statistics.columns` names a column of a type without statistics.
    #[error("Column '{name}' of type '{data_type}' is not supported for statistics collection. Supported types are: BOOLEAN, TINYINT, SMALLINT, INTEGER, BIGINT, FLOAT, DOUBLE, STRING, CHAR, DECIMAL, DATE, TIME, TIMESTAMP, and TIMESTAMP_LTZ.")]
    UnsupportedType {
        /// The column.
        name: String,
        /// Its type, as Fluss spells it.
        data_type: String,
    },
    /// `table.statistics.columns` is set but names nothing.
    #[error("Statistics columns configuration cannot be empty. Use '*' to collect statistics for all supported columns, or remove the property to disable statistics collection.")]
    Empty,
    /// Statistics on a primary-key table (Fluss refuses them).
    #[error("Statistics columns are not supported for primary key tables. Please remove the 'table.statistics.columns' property.")]
    PrimaryKeyTable,
    /// The Arrow batch does not match the schema the statistics are for.
    #[error("statistics: column {index} is {found}, not the Arrow type of {expected}")]
    ArrowMismatch {
        /// Column index.
        index: usize,
        /// The Arrow type found.
        found: String,
        /// The Fluss type expected.
        expected: String,
    },
    /// The bytes are not a well-formed statistics block.
    #[error("malformed statistics block: {0}")]
    Malformed(&'static str),
}

/// Whether Fluss collects statistics for columns of `kind`.
pub fn is_supported_type(kind: &TypeKind) -> bool {
    matches!(
        kind,
        TypeKind::Boolean
            | TypeKind::TinyInt
            | TypeKind::SmallInt
            | TypeKind::Int
            | TypeKind::BigInt
            | TypeKind::Float
            | TypeKind::Double
            | TypeKind::Char { .. }
            | TypeKind::String
            | TypeKind::Decimal { .. }
            | TypeKind::Date
            | TypeKind::Time { .. }
            | TypeKind::Timestamp { .. }
            | TypeKind::TimestampLtz { .. }
    )
}

/// The table column indexes statistics are collected for, from the value of
/// `table.statistics.columns` (`None`: not set, no statistics). `*` takes
/// every column of a supported type; a list must name existing columns of
/// supported types (Fluss's `StatisticsConfigUtils`).
pub fn resolve_columns(
    schema: &Schema,
    option: Option<&str>,
) -> Result<Option<Vec<usize>>, StatisticsError> {
    let Some(option) = option else {
        return Ok(None);
    };
    if schema.primary_key().is_some() {
        return Err(StatisticsError::PrimaryKeyTable);
    }
    let columns = schema.columns();
    let indexes: Vec<usize> = if option.trim() == "*" {
        (0..columns.len())
            .filter(|&i| is_supported_type(columns[i].data_type.kind()))
            .collect()
    } else {
        let mut indexes = Vec::new();
        for name in option.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let index = schema
                .column_index(name)
                .ok_or_else(|| StatisticsError::UnknownColumn(name.to_owned()))?;
            let data_type = &columns[index].data_type;
            if !is_supported_type(data_type.kind()) {
                return Err(StatisticsError::UnsupportedType {
                    name: name.to_owned(),
                    data_type: data_type.to_string(),
                });
            }
            if !indexes.contains(&index) {
                indexes.push(index);
            }
        }
        if indexes.is_empty() {
            return Err(StatisticsError::Empty);
        }
        indexes
    };
    // `*` over a table with no supported column collects nothing.
    if indexes.is_empty() || indexes.len() > STATISTICS_COLUMNS_MAX {
        return Ok(None);
    }
    Ok(Some(indexes))
}

/// One bound (min or max) of a statistics column, in a form comparable
/// across the types that share it.
#[derive(Debug, Clone, PartialEq)]
pub enum StatValue {
    /// BOOLEAN.
    Bool(bool),
    /// TINYINT, SMALLINT, INT, BIGINT, DATE (days), TIME (milliseconds).
    Int(i64),
    /// FLOAT, DOUBLE.
    Float(f64),
    /// CHAR, STRING (compared bytewise, as Fluss's `BinaryString`).
    Str(String),
    /// DECIMAL, as its unscaled value (the scale is the column's).
    Decimal(i128),
    /// TIMESTAMP, TIMESTAMP_LTZ: epoch milliseconds and nanoseconds within
    /// the millisecond.
    Timestamp {
        /// Epoch milliseconds.
        millis: i64,
        /// Nanoseconds of the millisecond, `0..1_000_000`.
        nanos: i32,
    },
}

impl StatValue {
    /// Orders two values of the same variant; `None` for different variants
    /// or a NaN, where nothing may be concluded.
    pub fn compare(&self, other: &StatValue) -> Option<Ordering> {
        match (self, other) {
            (StatValue::Bool(a), StatValue::Bool(b)) => Some(a.cmp(b)),
            (StatValue::Int(a), StatValue::Int(b)) => Some(a.cmp(b)),
            (StatValue::Float(a), StatValue::Float(b)) => a.partial_cmp(b),
            (StatValue::Str(a), StatValue::Str(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (StatValue::Decimal(a), StatValue::Decimal(b)) => Some(a.cmp(b)),
            (
                StatValue::Timestamp { millis, nanos },
                StatValue::Timestamp {
                    millis: m2,
                    nanos: n2,
                },
            ) => Some((millis, nanos).cmp(&(m2, n2))),
            _ => None,
        }
    }
}

/// Writes the statistics block of `batch` (a batch of the whole table
/// schema `schema`) for the table columns `columns` into `out`. Does
/// nothing for an empty batch or an empty column list (no block).
pub fn write_statistics(
    batch: &RecordBatch,
    schema: &Schema,
    columns: &[usize],
    out: &mut Vec<u8>,
) -> Result<(), StatisticsError> {
    if batch.num_rows() == 0 || columns.is_empty() {
        return Ok(());
    }
    let table = schema.columns();
    let mut bounds = Vec::with_capacity(columns.len());
    for &index in columns {
        let (Some(column), Some(table_column)) = (
            (index < batch.num_columns()).then(|| batch.column(index)),
            table.get(index),
        ) else {
            return Err(StatisticsError::Malformed("statistics column out of range"));
        };
        bounds.push(column_bounds(
            index,
            column.as_ref(),
            &table_column.data_type,
        )?);
    }
    let count = i16::try_from(columns.len())
        .map_err(|_| StatisticsError::Malformed("too many statistics columns"))?;
    out.push(STATISTICS_VERSION);
    out.extend_from_slice(&count.to_le_bytes());
    for &index in columns {
        let index = i16::try_from(index).map_err(|_| StatisticsError::Malformed("column index"))?;
        out.extend_from_slice(&index.to_le_bytes());
    }
    for &index in columns {
        let nulls = batch.column(index).null_count() as i32;
        out.extend_from_slice(&nulls.to_le_bytes());
    }
    let types: Vec<&DataType> = columns.iter().map(|&i| &table[i].data_type).collect();
    for pick_max in [false, true] {
        let row = encode_row(
            bounds.iter().map(|b| {
                b.as_ref()
                    .map(|(min, max)| if pick_max { max } else { min })
            }),
            &types,
        );
        out.extend_from_slice(&(row.len() as i32).to_le_bytes());
        out.extend_from_slice(&row);
    }
    Ok(())
}

fn null_bits_bytes(arity: usize) -> usize {
    (arity + 63 + ROW_HEADER_BITS) / 64 * 8
}

fn round_to_word(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// An AlignedRow of `values` (one per field, `None` for NULL).
fn encode_row<'a>(
    values: impl Iterator<Item = Option<&'a StatValue>>,
    types: &[&DataType],
) -> Vec<u8> {
    let bits = null_bits_bytes(types.len());
    let fixed = bits + 8 * types.len();
    let mut row = vec![0u8; fixed];
    let slot_at = |i: usize| bits + 8 * i;
    for (i, value) in values.enumerate() {
        let at = slot_at(i);
        let Some(value) = value else {
            let bit = i + ROW_HEADER_BITS;
            row[bit / 8] |= 1 << (bit % 8);
            continue;
        };
        let slot: [u8; 8] = match (value, types[i].kind()) {
            (StatValue::Bool(b), _) => [u8::from(*b), 0, 0, 0, 0, 0, 0, 0],
            (StatValue::Int(v), TypeKind::TinyInt) => {
                let mut s = [0; 8];
                s[0] = *v as i8 as u8;
                s
            }
            (StatValue::Int(v), TypeKind::SmallInt) => {
                let mut s = [0; 8];
                s[..2].copy_from_slice(&(*v as i16).to_le_bytes());
                s
            }
            (StatValue::Int(v), TypeKind::BigInt) => v.to_le_bytes(),
            (StatValue::Int(v), _) => {
                let mut s = [0; 8];
                s[..4].copy_from_slice(&(*v as i32).to_le_bytes());
                s
            }
            (StatValue::Float(v), TypeKind::Float) => {
                let mut s = [0; 8];
                s[..4].copy_from_slice(&(*v as f32).to_le_bytes());
                s
            }
            (StatValue::Float(v), _) => v.to_le_bytes(),
            (StatValue::Str(text), _) => var_slot(&mut row, text.as_bytes(), true),
            (StatValue::Decimal(unscaled), TypeKind::Decimal { precision, .. })
                if *precision > DECIMAL_COMPACT_PRECISION_MAX =>
            {
                let bytes = minimal_be_bytes(*unscaled);
                let offset = row.len();
                row.resize(offset + DECIMAL_VAR_BYTES, 0);
                row[offset..offset + bytes.len()].copy_from_slice(&bytes);
                (((offset as u64) << 32) | bytes.len() as u64).to_le_bytes()
            }
            (StatValue::Decimal(unscaled), _) => (*unscaled as i64).to_le_bytes(),
            (StatValue::Timestamp { millis, nanos }, kind) => {
                let precision = match kind {
                    TypeKind::Timestamp { precision } | TypeKind::TimestampLtz { precision } => {
                        *precision
                    }
                    _ => TIMESTAMP_COMPACT_PRECISION_MAX,
                };
                if precision <= TIMESTAMP_COMPACT_PRECISION_MAX {
                    millis.to_le_bytes()
                } else {
                    let offset = row.len();
                    row.extend_from_slice(&millis.to_le_bytes());
                    (((offset as u64) << 32) | (*nanos as u32 as u64)).to_le_bytes()
                }
            }
        };
        row[at..at + 8].copy_from_slice(&slot);
    }
    row
}

/// The slot of a variable-length value: inlined when short, else appended
/// word-aligned to the variable part of `row`.
fn var_slot(row: &mut Vec<u8>, bytes: &[u8], inline: bool) -> [u8; 8] {
    if inline && bytes.len() <= INLINE_BYTES_MAX {
        let mut s = [0u8; 8];
        s[..bytes.len()].copy_from_slice(bytes);
        s[7] = INLINE_MARKER | bytes.len() as u8;
        return s;
    }
    let offset = row.len();
    row.resize(offset + round_to_word(bytes.len()), 0);
    row[offset..offset + bytes.len()].copy_from_slice(bytes);
    (((offset as u64) << 32) | bytes.len() as u64).to_le_bytes()
}

/// Java's `BigInteger.toByteArray`: the shortest big-endian two's
/// complement form.
fn minimal_be_bytes(v: i128) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        let redundant = (b == 0 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    bytes[start..].to_vec()
}

type Bounds = Option<(StatValue, StatValue)>;

fn primitive_bounds<T: ArrowPrimitiveType>(
    column: &dyn Array,
    cmp: impl Fn(&T::Native, &T::Native) -> Ordering,
) -> Option<(T::Native, T::Native)> {
    let array = column.as_primitive_opt::<T>()?;
    let mut bounds: Option<(T::Native, T::Native)> = None;
    for v in array.iter().flatten() {
        bounds = Some(match bounds {
            None => (v, v),
            Some((lo, hi)) => (
                if cmp(&v, &lo) == Ordering::Less {
                    v
                } else {
                    lo
                },
                if cmp(&v, &hi) == Ordering::Greater {
                    v
                } else {
                    hi
                },
            ),
        });
    }
    bounds
}

fn column_bounds(
    index: usize,
    column: &dyn Array,
    data_type: &DataType,
) -> Result<Bounds, StatisticsError> {
    let mismatch = || StatisticsError::ArrowMismatch {
        index,
        found: column.data_type().to_string(),
        expected: data_type.to_string(),
    };
    if column.null_count() == column.len() {
        return Ok(None);
    }
    macro_rules! ints {
        ($t:ty, $scale:expr) => {{
            column.as_primitive_opt::<$t>().ok_or_else(mismatch)?;
            primitive_bounds::<$t>(column, |a, b| a.cmp(b)).map(|(lo, hi)| {
                (
                    StatValue::Int(i64::from(lo) * $scale),
                    StatValue::Int(i64::from(hi) * $scale),
                )
            })
        }};
    }
    macro_rules! floats {
        ($t:ty) => {{
            column.as_primitive_opt::<$t>().ok_or_else(mismatch)?;
            // Total order: a NaN becomes a bound, which readers treat as
            // "unknown" rather than as a value.
            primitive_bounds::<$t>(column, |a, b| a.total_cmp(b)).map(|(lo, hi)| {
                (
                    StatValue::Float(f64::from(lo)),
                    StatValue::Float(f64::from(hi)),
                )
            })
        }};
    }
    macro_rules! timestamps {
        ($t:ty, $to:expr) => {{
            column.as_primitive_opt::<$t>().ok_or_else(mismatch)?;
            primitive_bounds::<$t>(column, |a, b| a.cmp(b)).map(|(lo, hi)| ($to(lo), $to(hi)))
        }};
    }
    let ts = |millis: i64, nanos: i64| StatValue::Timestamp {
        millis,
        nanos: nanos as i32,
    };
    let bounds = match (data_type.kind(), column.data_type()) {
        (TypeKind::Boolean, ArrowType::Boolean) => {
            let array = column.as_boolean();
            let (mut any_true, mut any_false) = (false, false);
            for v in array.iter().flatten() {
                any_true |= v;
                any_false |= !v;
            }
            Some((StatValue::Bool(!any_false), StatValue::Bool(any_true)))
        }
        (TypeKind::TinyInt, _) => ints!(Int8Type, 1),
        (TypeKind::SmallInt, _) => ints!(Int16Type, 1),
        (TypeKind::Int, _) => ints!(Int32Type, 1),
        (TypeKind::BigInt, _) => ints!(Int64Type, 1),
        (TypeKind::Date, _) => ints!(Date32Type, 1),
        (TypeKind::Time { .. }, ArrowType::Time32(TimeUnit::Second)) => {
            ints!(Time32SecondType, 1000)
        }
        (TypeKind::Time { .. }, ArrowType::Time32(_)) => ints!(Time32MillisecondType, 1),
        (TypeKind::Time { .. }, ArrowType::Time64(TimeUnit::Microsecond)) => {
            column
                .as_primitive_opt::<Time64MicrosecondType>()
                .ok_or_else(mismatch)?;
            primitive_bounds::<Time64MicrosecondType>(column, |a, b| a.cmp(b))
                .map(|(lo, hi)| (StatValue::Int(lo / 1000), StatValue::Int(hi / 1000)))
        }
        (TypeKind::Time { .. }, ArrowType::Time64(_)) => {
            column
                .as_primitive_opt::<Time64NanosecondType>()
                .ok_or_else(mismatch)?;
            primitive_bounds::<Time64NanosecondType>(column, |a, b| a.cmp(b)).map(|(lo, hi)| {
                (
                    StatValue::Int(lo / 1_000_000),
                    StatValue::Int(hi / 1_000_000),
                )
            })
        }
        (TypeKind::Float, _) => floats!(Float32Type),
        (TypeKind::Double, _) => floats!(Float64Type),
        (TypeKind::Char { .. } | TypeKind::String, ArrowType::Utf8) => {
            let array = column.as_string::<i32>();
            let mut bounds: Option<(&str, &str)> = None;
            for v in array.iter().flatten() {
                bounds = Some(match bounds {
                    None => (v, v),
                    Some((lo, hi)) => (lo.min(v), hi.max(v)),
                });
            }
            bounds.map(|(lo, hi)| (StatValue::Str(lo.to_owned()), StatValue::Str(hi.to_owned())))
        }
        (TypeKind::Decimal { .. }, ArrowType::Decimal128(..)) => {
            primitive_bounds::<Decimal128Type>(column, |a, b| a.cmp(b))
                .map(|(lo, hi)| (StatValue::Decimal(lo), StatValue::Decimal(hi)))
        }
        (
            TypeKind::Timestamp { .. } | TypeKind::TimestampLtz { .. },
            ArrowType::Timestamp(unit, _),
        ) => match unit {
            TimeUnit::Second => timestamps!(TimestampSecondType, |v: i64| ts(v * 1000, 0)),
            TimeUnit::Millisecond => timestamps!(TimestampMillisecondType, |v: i64| ts(v, 0)),
            TimeUnit::Microsecond => timestamps!(TimestampMicrosecondType, |v: i64| ts(
                v.div_euclid(1000),
                v.rem_euclid(1000) * 1000
            )),
            TimeUnit::Nanosecond => timestamps!(TimestampNanosecondType, |v: i64| ts(
                v.div_euclid(1_000_000),
                v.rem_euclid(1_000_000)
            )),
        },
        _ => return Err(mismatch()),
    };
    Ok(bounds)
}

/// A parsed statistics block.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchStatistics {
    /// Table column index of each statistics column.
    pub columns: Vec<usize>,
    /// NULLs per statistics column.
    pub null_counts: Vec<i32>,
    /// Minimum per statistics column (`None`: all NULL, or not readable).
    pub min: Vec<Option<StatValue>>,
    /// Maximum per statistics column.
    pub max: Vec<Option<StatValue>>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StatisticsError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(StatisticsError::Malformed("truncated"))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn i16(&mut self) -> Result<i16, StatisticsError> {
        Ok(i16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, StatisticsError> {
        Ok(i32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
}

/// The column indexes a block names, reading only its head: enough to check
/// a produced batch's block against its table without decoding values.
pub fn parse_columns(bytes: &[u8]) -> Result<Vec<usize>, StatisticsError> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(1)?[0] != STATISTICS_VERSION {
        return Err(StatisticsError::Malformed("unknown version"));
    }
    let count = r.i16()?;
    if count <= 0 {
        return Err(StatisticsError::Malformed("no columns"));
    }
    let mut columns = Vec::with_capacity(count as usize);
    for _ in 0..count {
        columns.push(
            usize::try_from(r.i16()?).map_err(|_| StatisticsError::Malformed("column index"))?,
        );
    }
    Ok(columns)
}

/// Parses a statistics block of a batch whose schema is `schema`. Every
/// length and index is checked; malformed bytes are an error.
pub fn parse_statistics(bytes: &[u8], schema: &Schema) -> Result<BatchStatistics, StatisticsError> {
    let columns = parse_columns(bytes)?;
    let mut r = Reader {
        bytes,
        at: 3 + 2 * columns.len(),
    };
    let table = schema.columns();
    let mut types = Vec::with_capacity(columns.len());
    for &c in &columns {
        let column = table
            .get(c)
            .ok_or(StatisticsError::Malformed("column index beyond the schema"))?;
        if !is_supported_type(column.data_type.kind()) {
            return Err(StatisticsError::Malformed("column type has no statistics"));
        }
        types.push(column.data_type.kind());
    }
    let mut null_counts = Vec::with_capacity(columns.len());
    for _ in 0..columns.len() {
        null_counts.push(r.i32()?);
    }
    let mut rows = Vec::with_capacity(2);
    for _ in 0..2 {
        let len = r.i32()?;
        let len = usize::try_from(len).map_err(|_| StatisticsError::Malformed("row length"))?;
        let row = r.take(len)?;
        rows.push(if len == 0 {
            vec![None; columns.len()]
        } else {
            decode_row(row, &types)?
        });
    }
    let max = rows.pop().expect("two rows");
    let min = rows.pop().expect("two rows");
    Ok(BatchStatistics {
        columns,
        null_counts,
        min,
        max,
    })
}

fn decode_row(row: &[u8], types: &[&TypeKind]) -> Result<Vec<Option<StatValue>>, StatisticsError> {
    let bits = null_bits_bytes(types.len());
    if row.len() < bits + 8 * types.len() {
        return Err(StatisticsError::Malformed(
            "row shorter than its fixed part",
        ));
    }
    let var = |slot: u64, min_len: usize| -> Result<&[u8], StatisticsError> {
        let offset = (slot >> 32) as usize;
        let len = (slot & 0xffff_ffff) as usize;
        row.get(offset..offset + len.max(min_len))
            .map(|s| &s[..len.max(min_len)])
            .ok_or(StatisticsError::Malformed("variable part out of range"))
    };
    let mut values = Vec::with_capacity(types.len());
    for (i, kind) in types.iter().enumerate() {
        let bit = i + ROW_HEADER_BITS;
        if row[bit / 8] & (1 << (bit % 8)) != 0 {
            values.push(None);
            continue;
        }
        let at = bits + 8 * i;
        let s: [u8; 8] = row[at..at + 8].try_into().expect("8 bytes");
        let slot = u64::from_le_bytes(s);
        let i32_at = i32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        let value = match kind {
            TypeKind::Boolean => StatValue::Bool(s[0] != 0),
            TypeKind::TinyInt => StatValue::Int(i64::from(s[0] as i8)),
            TypeKind::SmallInt => StatValue::Int(i64::from(i16::from_le_bytes([s[0], s[1]]))),
            TypeKind::Int | TypeKind::Date | TypeKind::Time { .. } => {
                StatValue::Int(i64::from(i32_at))
            }
            TypeKind::BigInt => StatValue::Int(slot as i64),
            TypeKind::Float => {
                StatValue::Float(f64::from(f32::from_le_bytes([s[0], s[1], s[2], s[3]])))
            }
            TypeKind::Double => StatValue::Float(f64::from_le_bytes(s)),
            TypeKind::Char { .. } | TypeKind::String => {
                let bytes = if s[7] & INLINE_MARKER != 0 {
                    let len = usize::from(s[7] & !INLINE_MARKER);
                    if len > INLINE_BYTES_MAX {
                        return Err(StatisticsError::Malformed("inline length"));
                    }
                    &row[at..at + len]
                } else {
                    var(slot, 0)?
                };
                StatValue::Str(
                    std::str::from_utf8(bytes)
                        .map_err(|_| StatisticsError::Malformed("string is not UTF-8"))?
                        .to_owned(),
                )
            }
            TypeKind::Decimal { precision, .. } if *precision > DECIMAL_COMPACT_PRECISION_MAX => {
                let bytes = var(slot, 0)?;
                if bytes.is_empty() || bytes.len() > 16 {
                    return Err(StatisticsError::Malformed("decimal length"));
                }
                let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
                let mut full = [fill; 16];
                full[16 - bytes.len()..].copy_from_slice(bytes);
                StatValue::Decimal(i128::from_be_bytes(full))
            }
            TypeKind::Decimal { .. } => StatValue::Decimal(i128::from(slot as i64)),
            TypeKind::Timestamp { precision } | TypeKind::TimestampLtz { precision } => {
                if *precision <= TIMESTAMP_COMPACT_PRECISION_MAX {
                    StatValue::Timestamp {
                        millis: slot as i64,
                        nanos: 0,
                    }
                } else {
                    let offset = (slot >> 32) as usize;
                    let millis = row
                        .get(offset..offset + 8)
                        .ok_or(StatisticsError::Malformed("timestamp out of range"))?;
                    StatValue::Timestamp {
                        millis: i64::from_le_bytes(millis.try_into().expect("8 bytes")),
                        nanos: (slot & 0xffff_ffff) as i32,
                    }
                }
            }
            _ => return Err(StatisticsError::Malformed("column type has no statistics")),
        };
        values.push(Some(value));
    }
    Ok(values)
}

/// A leaf predicate's function (Fluss's `PbLeafFunction` numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafFunction {
    /// `= literal`.
    Equal,
    /// `<> literal`.
    NotEqual,
    /// `< literal`.
    LessThan,
    /// `<= literal`.
    LessOrEqual,
    /// `> literal`.
    GreaterThan,
    /// `>= literal`.
    GreaterOrEqual,
    /// `IS NULL`.
    IsNull,
    /// `IS NOT NULL`.
    IsNotNull,
    /// `IN (literals)`.
    In,
    /// Anything statistics cannot decide (`NOT IN`, `LIKE`-style functions).
    Other,
}

/// A predicate over table columns, evaluated against statistics.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// Every child must hold.
    And(Vec<Predicate>),
    /// Some child must hold.
    Or(Vec<Predicate>),
    /// A function of one column and literals (`None`: a NULL literal).
    Leaf {
        /// Table column index.
        column: usize,
        /// The function.
        function: LeafFunction,
        /// Its literals, in the column's [`StatValue`] form.
        literals: Vec<Option<StatValue>>,
    },
}

impl BatchStatistics {
    /// Whether some row of the batch (of `record_count` rows) may make
    /// `predicate` TRUE. `false` is a proof; `true` may be wrong.
    pub fn may_match(&self, predicate: &Predicate, record_count: i32) -> bool {
        match predicate {
            Predicate::And(children) => children.iter().all(|c| self.may_match(c, record_count)),
            Predicate::Or(children) => children.iter().any(|c| self.may_match(c, record_count)),
            Predicate::Leaf {
                column,
                function,
                literals,
            } => self.leaf_may_match(*column, *function, literals, record_count),
        }
    }

    fn leaf_may_match(
        &self,
        column: usize,
        function: LeafFunction,
        literals: &[Option<StatValue>],
        record_count: i32,
    ) -> bool {
        let Some(i) = self.columns.iter().position(|&c| c == column) else {
            return true;
        };
        let nulls = self.null_counts[i];
        match function {
            LeafFunction::IsNull => return nulls > 0,
            LeafFunction::IsNotNull => return nulls < record_count,
            LeafFunction::Other => return true,
            _ => {}
        }
        let (Some(min), Some(max)) = (&self.min[i], &self.max[i]) else {
            // No bounds: only an all-NULL column proves a comparison false.
            return !(record_count > 0 && nulls >= record_count);
        };
        // A comparison with a bound is decided only when both bounds order.
        let between = |v: &StatValue| -> Option<bool> {
            let lo = min.compare(v)?;
            let hi = max.compare(v)?;
            Some(lo != Ordering::Greater && hi != Ordering::Less)
        };
        let decide = |literal: &Option<StatValue>| -> bool {
            let Some(v) = literal else {
                // A comparison with NULL is never TRUE; still, keep it.
                return true;
            };
            let verdict = match function {
                LeafFunction::Equal | LeafFunction::In => between(v),
                LeafFunction::NotEqual => (|| {
                    Some(
                        !(min.compare(v)? == Ordering::Equal && max.compare(v)? == Ordering::Equal),
                    )
                })(),
                LeafFunction::LessThan => min.compare(v).map(|o| o == Ordering::Less),
                LeafFunction::LessOrEqual => min.compare(v).map(|o| o != Ordering::Greater),
                LeafFunction::GreaterThan => max.compare(v).map(|o| o == Ordering::Greater),
                LeafFunction::GreaterOrEqual => max.compare(v).map(|o| o != Ordering::Less),
                _ => None,
            };
            verdict.unwrap_or(true)
        };
        match function {
            LeafFunction::In => literals.iter().any(decide),
            _ => match literals {
                [one] => decide(one),
                _ => true,
            },
        }
    }
}

#[cfg(test)]
mod tests;
