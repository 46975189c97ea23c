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

use arrow_array::RecordBatch;
use fjord_format::schema::Schema;
use fjord_format::types::TypeKind;

use crate::error::{ClientError, Result};
use crate::row::arrow_column::ArrowColumn;
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
                KeyArray::of(array.as_ref()).ok_or_else(|| {
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
pub(crate) type KeyArray<'b> = ArrowColumn<'b>;
