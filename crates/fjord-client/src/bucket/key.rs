//! Fluss's compacted key encoding of bucket-key columns: the bytes the
//! official clients hash to pick a bucket (`CompactedKeyEncoder` in Java and
//! fluss-rs, used when a table does not tier to Paimon or Iceberg).
//!
//! ```text
//! key := value(col_1) value(col_2) ...     no null bitmap: keys are never NULL
//!   BOOLEAN, TINYINT         1 byte
//!   SMALLINT                 2 bytes little-endian
//!   FLOAT, DOUBLE            4 / 8 bytes little-endian IEEE 754
//!   INT, DATE, TIME (ms)     unsigned varint of the 32-bit two's complement
//!   BIGINT                   unsigned varint of the 64-bit two's complement
//!   STRING, CHAR             varint byte length, UTF-8 bytes
//!   BYTES, BINARY(n)         varint byte length, bytes
//!   DECIMAL(p <= 18, s)      as BIGINT, the unscaled value
//!   DECIMAL(p > 18, s)       varint length, unscaled value as minimal big-endian two's complement
//!   TIMESTAMP[_LTZ](p <= 3)  as BIGINT, epoch milliseconds
//!   TIMESTAMP[_LTZ](p > 3)   as BIGINT millis, then varint nanos of the millisecond
//! ```
//!
//! Little-endian stands for the JVM's native order, which is little-endian on
//! every platform Fluss runs on (and what fluss-rs writes).

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
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType as ArrowType, TimeUnit};
use fjord_format::schema::Schema;
use fjord_format::types::TypeKind;

use crate::error::{ClientError, Result};
use crate::row::{Datum, InternalRow, Timestamp};

/// Largest DECIMAL precision whose unscaled value Fluss stores as a long.
const DECIMAL_COMPACT_PRECISION_MAX: u8 = 18;
/// Largest TIMESTAMP precision Fluss stores as milliseconds alone.
const TIMESTAMP_COMPACT_PRECISION_MAX: u8 = 3;

/// How one key column encodes, decided from its Fluss type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyKind {
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    String,
    Bytes,
    Decimal { compact: bool },
    Date,
    Time,
    Timestamp { compact: bool },
    TimestampLtz { compact: bool },
}

impl KeyKind {
    fn of(kind: &TypeKind) -> Option<Self> {
        Some(match kind {
            TypeKind::Boolean => Self::Boolean,
            TypeKind::TinyInt => Self::TinyInt,
            TypeKind::SmallInt => Self::SmallInt,
            TypeKind::Int => Self::Int,
            TypeKind::BigInt => Self::BigInt,
            TypeKind::Float => Self::Float,
            TypeKind::Double => Self::Double,
            TypeKind::Char { .. } | TypeKind::String => Self::String,
            TypeKind::Bytes | TypeKind::Binary { .. } => Self::Bytes,
            TypeKind::Decimal { precision, .. } => Self::Decimal {
                compact: *precision <= DECIMAL_COMPACT_PRECISION_MAX,
            },
            TypeKind::Date => Self::Date,
            TypeKind::Time { .. } => Self::Time,
            TypeKind::Timestamp { precision } => Self::Timestamp {
                compact: *precision <= TIMESTAMP_COMPACT_PRECISION_MAX,
            },
            TypeKind::TimestampLtz { precision } => Self::TimestampLtz {
                compact: *precision <= TIMESTAMP_COMPACT_PRECISION_MAX,
            },
            TypeKind::Array(_) | TypeKind::Map { .. } | TypeKind::Row(_) => return None,
        })
    }
}

struct KeyColumn {
    pos: usize,
    name: String,
    kind: KeyKind,
}

/// Why a key value could not be encoded.
enum Refusal {
    Null,
    Mismatch,
    OutOfRange,
}

/// Encodes the bucket-key columns of rows into one reused buffer.
///
/// Guarantees: the bytes equal what the official clients' compacted key
/// encoder produces for the same values; encoding allocates nothing once the
/// buffer has grown to the longest key seen.
pub struct KeyEncoder {
    columns: Vec<KeyColumn>,
    buf: Vec<u8>,
}

impl KeyEncoder {
    /// The encoder of the `key_names` columns of `schema`, in that order.
    /// Fails when a name is not a column or its type cannot be a bucket key
    /// here (ARRAY, MAP, ROW).
    pub fn new(schema: &Schema, key_names: &[String]) -> Result<Self> {
        let mut columns = Vec::with_capacity(key_names.len());
        for name in key_names {
            let pos = schema.column_index(name).ok_or_else(|| {
                ClientError::Invalid(format!("bucket key `{name}` is not a column of the table"))
            })?;
            let data_type = &schema.columns()[pos].data_type;
            let kind = KeyKind::of(data_type.kind()).ok_or_else(|| {
                ClientError::Invalid(format!(
                    "bucket key column `{name}` has type {data_type}, which this client cannot hash"
                ))
            })?;
            columns.push(KeyColumn {
                pos,
                name: name.clone(),
                kind,
            });
        }
        if columns.is_empty() {
            return Err(ClientError::Invalid(
                "a key encoder needs at least one key column".to_owned(),
            ));
        }
        Ok(Self {
            columns,
            buf: Vec::with_capacity(64),
        })
    }

    /// The encoded key of `row` (a row of the whole table). Callers check
    /// the row's width first; fails when a key value is NULL or its datum
    /// does not match the column's type.
    pub fn encode_row<R: InternalRow + ?Sized>(&mut self, row: &R) -> Result<&[u8]> {
        self.buf.clear();
        for (i, column) in self.columns.iter().enumerate() {
            // Read again for the message rather than kept alive across the
            // encode, which would pin the datum to the stack.
            if let Err(refusal) = encode(column.kind, row.datum(column.pos), &mut self.buf) {
                return Err(self.refusal_error(i, row.datum(column.pos), refusal));
            }
        }
        Ok(&self.buf)
    }

    /// Typed views of the key columns of `batch`, made once per batch.
    pub(crate) fn batch_keys<'b>(&self, batch: &'b RecordBatch) -> Result<Vec<KeyArray<'b>>> {
        self.columns
            .iter()
            .map(|column| {
                let array = batch.column(column.pos);
                KeyArray::new(array.as_ref()).ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "bucket key column `{}` has Arrow type {}, which is not a key type",
                        column.name,
                        array.data_type()
                    ))
                })
            })
            .collect()
    }

    /// The encoded key of row `row` of the batch whose `keys` were made by
    /// [`KeyEncoder::batch_keys`].
    pub(crate) fn encode_batch_row(&mut self, keys: &[KeyArray<'_>], row: usize) -> Result<&[u8]> {
        self.buf.clear();
        for (i, (column, array)) in self.columns.iter().zip(keys).enumerate() {
            if let Err(refusal) = encode(column.kind, array.datum(row), &mut self.buf) {
                return Err(self.refusal_error(i, array.datum(row), refusal));
            }
        }
        Ok(&self.buf)
    }

    #[cold]
    fn refusal_error(&self, i: usize, datum: Datum<'_>, refusal: Refusal) -> ClientError {
        let column = &self.columns[i];
        ClientError::Invalid(match refusal {
            Refusal::Null => format!(
                "bucket key column `{}` is NULL; rows of a table with bucket keys need key values",
                column.name
            ),
            Refusal::Mismatch => format!(
                "bucket key column `{}` ({:?}) cannot take a {} value",
                column.name,
                column.kind,
                datum.type_name()
            ),
            Refusal::OutOfRange => format!(
                "bucket key column `{}` ({:?}): value {datum} does not fit",
                column.name, column.kind
            ),
        })
    }
}

#[inline]
fn put_varint_u32(buf: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
fn put_varint_u64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
fn put_bytes(buf: &mut Vec<u8>, bytes: &[u8]) -> std::result::Result<(), Refusal> {
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|len| *len <= i32::MAX as u32)
        .ok_or(Refusal::OutOfRange)?;
    put_varint_u32(buf, len);
    buf.extend_from_slice(bytes);
    Ok(())
}

/// Java's `BigInteger.toByteArray`: the shortest big-endian two's complement.
fn put_big_unscaled(buf: &mut Vec<u8>, v: i128) -> std::result::Result<(), Refusal> {
    let bytes = v.to_be_bytes();
    let sign_byte = if v < 0 { 0xff } else { 0x00 };
    let mut start = 0;
    // Drop a leading sign byte while the next byte still carries the sign.
    while start < bytes.len() - 1
        && bytes[start] == sign_byte
        && (bytes[start + 1] & 0x80) == (sign_byte & 0x80)
    {
        start += 1;
    }
    put_bytes(buf, &bytes[start..])
}

fn put_timestamp(buf: &mut Vec<u8>, t: Timestamp, compact: bool) {
    put_varint_u64(buf, t.millis() as u64);
    if !compact {
        put_varint_u32(buf, t.nanos_of_milli() as u32);
    }
}

/// Appends the encoding of one key value. Matches on the datum first (not a
/// `(kind, datum)` tuple, which copies the datum to the stack).
#[inline]
fn encode(kind: KeyKind, datum: Datum<'_>, buf: &mut Vec<u8>) -> std::result::Result<(), Refusal> {
    use KeyKind as K;
    match datum {
        Datum::Null => return Err(Refusal::Null),
        Datum::Boolean(v) if kind == K::Boolean => buf.push(u8::from(v)),
        Datum::TinyInt(v) if kind == K::TinyInt => buf.push(v as u8),
        Datum::SmallInt(v) if kind == K::SmallInt => buf.extend_from_slice(&v.to_le_bytes()),
        Datum::Int(v) if kind == K::Int => put_varint_u32(buf, v as u32),
        Datum::Date(v) if kind == K::Date => put_varint_u32(buf, v as u32),
        Datum::Time(v) if kind == K::Time => put_varint_u32(buf, v as u32),
        Datum::BigInt(v) if kind == K::BigInt => put_varint_u64(buf, v as u64),
        Datum::Float(v) if kind == K::Float => buf.extend_from_slice(&v.to_le_bytes()),
        Datum::Double(v) if kind == K::Double => buf.extend_from_slice(&v.to_le_bytes()),
        Datum::String(v) if kind == K::String => put_bytes(buf, v.as_bytes())?,
        Datum::Binary(v) if kind == K::Bytes => put_bytes(buf, v)?,
        Datum::Decimal(v) => match kind {
            K::Decimal { compact: true } => {
                let v = i64::try_from(v).map_err(|_| Refusal::OutOfRange)?;
                put_varint_u64(buf, v as u64);
            }
            K::Decimal { compact: false } => put_big_unscaled(buf, v)?,
            _ => return Err(Refusal::Mismatch),
        },
        Datum::Timestamp(t) => match kind {
            K::Timestamp { compact } => put_timestamp(buf, t, compact),
            _ => return Err(Refusal::Mismatch),
        },
        Datum::TimestampLtz(t) => match kind {
            K::TimestampLtz { compact } => put_timestamp(buf, t, compact),
            _ => return Err(Refusal::Mismatch),
        },
        _ => return Err(Refusal::Mismatch),
    }
    Ok(())
}

/// One key column of a RecordBatch, downcast once per batch.
pub(crate) struct KeyArray<'b> {
    nulls: Option<&'b NullBuffer>,
    values: KeyValues<'b>,
}

/// The typed values of a key column; timestamps carry whether they are LTZ.
enum KeyValues<'b> {
    Boolean(&'b BooleanArray),
    Int8(&'b PrimitiveArray<Int8Type>),
    Int16(&'b PrimitiveArray<Int16Type>),
    Int32(&'b PrimitiveArray<Int32Type>),
    Int64(&'b PrimitiveArray<Int64Type>),
    Float32(&'b PrimitiveArray<Float32Type>),
    Float64(&'b PrimitiveArray<Float64Type>),
    Utf8(&'b StringArray),
    Binary(&'b BinaryArray),
    FixedBinary(&'b FixedSizeBinaryArray),
    Decimal(&'b PrimitiveArray<Decimal128Type>),
    Date32(&'b PrimitiveArray<Date32Type>),
    Time32Second(&'b PrimitiveArray<Time32SecondType>),
    Time32Milli(&'b PrimitiveArray<Time32MillisecondType>),
    Time64Micro(&'b PrimitiveArray<Time64MicrosecondType>),
    Time64Nano(&'b PrimitiveArray<Time64NanosecondType>),
    TimestampSecond(&'b PrimitiveArray<TimestampSecondType>, bool),
    TimestampMilli(&'b PrimitiveArray<TimestampMillisecondType>, bool),
    TimestampMicro(&'b PrimitiveArray<TimestampMicrosecondType>, bool),
    TimestampNano(&'b PrimitiveArray<TimestampNanosecondType>, bool),
}

impl<'b> KeyArray<'b> {
    fn new(array: &'b dyn Array) -> Option<Self> {
        use KeyValues as V;
        let values = match array.data_type() {
            ArrowType::Boolean => V::Boolean(array.as_boolean()),
            ArrowType::Int8 => V::Int8(array.as_primitive()),
            ArrowType::Int16 => V::Int16(array.as_primitive()),
            ArrowType::Int32 => V::Int32(array.as_primitive()),
            ArrowType::Int64 => V::Int64(array.as_primitive()),
            ArrowType::Float32 => V::Float32(array.as_primitive()),
            ArrowType::Float64 => V::Float64(array.as_primitive()),
            ArrowType::Utf8 => V::Utf8(array.as_string()),
            ArrowType::Binary => V::Binary(array.as_binary()),
            ArrowType::FixedSizeBinary(_) => V::FixedBinary(array.as_fixed_size_binary()),
            ArrowType::Decimal128(_, _) => V::Decimal(array.as_primitive()),
            ArrowType::Date32 => V::Date32(array.as_primitive()),
            ArrowType::Time32(TimeUnit::Second) => V::Time32Second(array.as_primitive()),
            ArrowType::Time32(TimeUnit::Millisecond) => V::Time32Milli(array.as_primitive()),
            ArrowType::Time64(TimeUnit::Microsecond) => V::Time64Micro(array.as_primitive()),
            ArrowType::Time64(TimeUnit::Nanosecond) => V::Time64Nano(array.as_primitive()),
            ArrowType::Timestamp(unit, zone) => {
                let ltz = zone.is_some();
                match unit {
                    TimeUnit::Second => V::TimestampSecond(array.as_primitive(), ltz),
                    TimeUnit::Millisecond => V::TimestampMilli(array.as_primitive(), ltz),
                    TimeUnit::Microsecond => V::TimestampMicro(array.as_primitive(), ltz),
                    TimeUnit::Nanosecond => V::TimestampNano(array.as_primitive(), ltz),
                }
            }
            _ => return None,
        };
        Some(Self {
            nulls: array.nulls(),
            values,
        })
    }

    /// The value at `row` as the datum a row of the table would carry
    /// (TIME in milliseconds of the day, timestamps as millis + nanos).
    #[inline]
    fn datum(&self, row: usize) -> Datum<'b> {
        if self.nulls.is_some_and(|nulls| nulls.is_null(row)) {
            return Datum::Null;
        }
        let stamp = |t: Timestamp, ltz: bool| {
            if ltz {
                Datum::TimestampLtz(t)
            } else {
                Datum::Timestamp(t)
            }
        };
        match &self.values {
            KeyValues::Boolean(a) => Datum::Boolean(a.value(row)),
            KeyValues::Int8(a) => Datum::TinyInt(a.value(row)),
            KeyValues::Int16(a) => Datum::SmallInt(a.value(row)),
            KeyValues::Int32(a) => Datum::Int(a.value(row)),
            KeyValues::Int64(a) => Datum::BigInt(a.value(row)),
            KeyValues::Float32(a) => Datum::Float(a.value(row)),
            KeyValues::Float64(a) => Datum::Double(a.value(row)),
            KeyValues::Utf8(a) => Datum::String(a.value(row)),
            KeyValues::Binary(a) => Datum::Binary(a.value(row)),
            KeyValues::FixedBinary(a) => Datum::Binary(a.value(row)),
            KeyValues::Decimal(a) => Datum::Decimal(a.value(row)),
            KeyValues::Date32(a) => Datum::Date(a.value(row)),
            KeyValues::Time32Second(a) => Datum::Time(a.value(row).wrapping_mul(1_000)),
            KeyValues::Time32Milli(a) => Datum::Time(a.value(row)),
            KeyValues::Time64Micro(a) => Datum::Time((a.value(row) / 1_000) as i32),
            KeyValues::Time64Nano(a) => Datum::Time((a.value(row) / 1_000_000) as i32),
            KeyValues::TimestampSecond(a, ltz) => stamp(
                Timestamp::from_millis(a.value(row).saturating_mul(1_000)),
                *ltz,
            ),
            KeyValues::TimestampMilli(a, ltz) => stamp(Timestamp::from_millis(a.value(row)), *ltz),
            KeyValues::TimestampMicro(a, ltz) => stamp(Timestamp::from_micros(a.value(row)), *ltz),
            KeyValues::TimestampNano(a, ltz) => stamp(Timestamp::from_nanos(a.value(row)), *ltz),
        }
    }
}
