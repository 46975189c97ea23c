//! INDEXED rows: a null bitset, a fixed-size list of the lengths of the
//! variable-width values, then the values; every fixed-width value has its
//! type's width, so a reader finds a field by adding widths.
//!
//! ```text
//! row := null_bits var_lengths value*          values of non-null fields only, in order
//! null_bits:   ceil(arity / 8) bytes           field i = bit (i % 8) of byte (i / 8), LSB first
//! var_lengths: 4 bytes x (variable-width columns of the type), i32 little-endian:
//!              the lengths of the NON-NULL variable-width values, in column order,
//!              packed from the first slot; slots left over (for NULL values) are 0
//! value, by column type (no alignment, no padding between values):
//!   BOOLEAN 1 (0 or 1), TINYINT 1, SMALLINT 2, INT / DATE / TIME(p) 4,
//!   BIGINT 8, FLOAT 4, DOUBLE 8      little-endian
//!   CHAR(n)                 n bytes: the UTF-8 text, then zero bytes
//!   BINARY(n)               n bytes: the value, then zero bytes
//!   STRING, BYTES           the bytes                               (variable)
//!   DECIMAL(p <= 18)        8 bytes: the unscaled long
//!   DECIMAL(p > 18)         minimal big-endian two's complement     (variable)
//!   TIMESTAMP[_LTZ](p <= 3) 8 bytes: epoch millis
//!   TIMESTAMP[_LTZ](p > 3)  8 bytes millis, then 4 bytes nanos of the millisecond
//!   ARRAY, MAP, ROW         nested binary                           (variable; Fluss has them, Fjord refuses them here)
//! ```
//!
//! Facts from Fluss's `row/indexed/IndexedRowWriter.java` (the writer:
//! header zeroed on reset, `writeVarLengthToVarLengthList` only for values
//! written, CHAR and BINARY zero-padded to their length) and `IndexedRow.java`
//! (`isFixedLength`, `getLength`, `calculateColumnLengths`, and `getChar` /
//! `getBinary`, which drop trailing zero bytes). Java is the reference for
//! INDEXED; fluss-rs 1.0.0 does not write it.
//!
//! As in [`super::compacted`], the reader is stricter than Java's: NULL in a
//! NOT NULL column, a BOOLEAN other than 0/1, a negative length, a nonzero
//! unused length slot, a DECIMAL wider than its precision, or bytes after
//! the last value are errors.

use crate::datum::{Datum, Timestamp};
use crate::types::DataType;

use super::compacted::{
    checked_decimal, checked_timestamp, unscaled_be_bytes, unscaled_from_be_bytes, utf8,
};
use super::{
    check_null_padding, decimal_fits, field_types, is_null_bit_set, null_bits_bytes, reason,
    ColumnKind, Fault, FaultKind, FieldType, RowError, ValueRefusal, DECIMAL_COMPACT_PRECISION_MAX,
    TIMESTAMP_COMPACT_PRECISION_MAX, VAR_LENGTH_MAX,
};

/// Bytes of one entry of the variable-length list (`VARIABLE_COLUMN_LENGTH_SIZE`).
pub const VAR_LENGTH_SLOT_BYTES: usize = 4;

/// Width of a value of `kind` when it is fixed (`IndexedRow.getLength`),
/// `None` when its length is in the variable-length list.
pub const fn fixed_width(kind: ColumnKind) -> Option<usize> {
    use ColumnKind as K;
    Some(match kind {
        K::Boolean | K::TinyInt => 1,
        K::SmallInt => 2,
        K::Int | K::Float | K::Date | K::Time => 4,
        K::BigInt | K::Double => 8,
        K::Decimal { precision } if precision <= DECIMAL_COMPACT_PRECISION_MAX => 8,
        K::Timestamp { precision } | K::TimestampLtz { precision } => {
            if precision <= TIMESTAMP_COMPACT_PRECISION_MAX {
                8
            } else {
                12
            }
        }
        K::Char { length } | K::Binary { length } => length as usize,
        K::String | K::Bytes | K::Decimal { .. } => return None,
        // Variable in Fluss's INDEXED rows; the decoder refuses them.
        K::Array | K::Map | K::Row => return None,
    })
}

/// Decodes and validates INDEXED rows of one row type, and lays out the
/// rows [`IndexedRowWriter`] writes: built once per schema.
///
/// Guarantees: built only for row types without nested columns; `decode`
/// and `validate` accept exactly the rows [`IndexedRowWriter`] (and Fluss's
/// `IndexedRowWriter`) produce for that type.
#[derive(Clone, Debug)]
pub struct IndexedRowDecoder {
    fields: Box<[FieldType]>,
    null_bytes: usize,
    header_size: usize,
}

impl IndexedRowDecoder {
    /// The decoder of rows of `row_type`; fails for a nested column
    /// ([`RowError::NestedInIndexed`]: Fjord has nested values in COMPACTED
    /// rows only).
    pub fn new(row_type: &[DataType]) -> Result<Self, RowError> {
        let fields = field_types(row_type);
        if let Some(column) = fields.iter().position(|f| f.kind.is_nested()) {
            return Err(RowError::NestedInIndexed {
                column,
                type_root: row_type[column].type_root(),
            });
        }
        let null_bytes = null_bits_bytes(fields.len());
        let variable = fields
            .iter()
            .filter(|f| fixed_width(f.kind).is_none())
            .count();
        Ok(Self {
            header_size: null_bytes + VAR_LENGTH_SLOT_BYTES * variable,
            null_bytes,
            fields,
        })
    }

    /// The row type's columns.
    pub fn fields(&self) -> &[FieldType] {
        &self.fields
    }

    /// Bytes before the first value: the null bitset and the length list
    /// (`IndexedRow.getHeaderSizeInBytes`).
    pub fn header_size(&self) -> usize {
        self.header_size
    }

    /// Decodes `bytes` (exactly one row) into `out`: cleared first, one
    /// datum per column on success, cleared again on error. Strings and
    /// bytes borrow from `bytes`.
    pub fn decode<'a>(&self, bytes: &'a [u8], out: &mut Vec<Datum<'a>>) -> Result<(), RowError> {
        out.clear();
        out.reserve(self.fields.len());
        let result = self.walk(bytes, |datum| out.push(datum));
        if result.is_err() {
            out.clear();
        }
        result
    }

    /// Checks that `bytes` is exactly one well-formed row, as `decode` does.
    pub fn validate(&self, bytes: &[u8]) -> Result<(), RowError> {
        self.walk(bytes, |_| {})
    }

    fn walk<'a>(&self, bytes: &'a [u8], mut each: impl FnMut(Datum<'a>)) -> Result<(), RowError> {
        let Some(header) = bytes.get(..self.header_size) else {
            return Err(RowError::ShorterThanHeader {
                size: bytes.len(),
                header_size: self.header_size,
            });
        };
        check_null_padding(&header[..self.null_bytes], self.fields.len())?;
        let mut slot = self.null_bytes;
        let mut pos = self.header_size;
        for (column, field) in self.fields.iter().enumerate() {
            if is_null_bit_set(header, column) {
                if !field.nullable {
                    return Err(RowError::NullNotAllowed {
                        column,
                        column_type: field.kind.type_name(),
                    });
                }
                each(Datum::Null);
                continue;
            }
            let width = match fixed_width(field.kind) {
                Some(width) => width,
                None => {
                    // In bounds: one slot per variable-width column.
                    let length = read_i32(&header[slot..slot + VAR_LENGTH_SLOT_BYTES]);
                    if length < 0 {
                        return Err(RowError::BadLength {
                            column,
                            offset: slot,
                            length: i64::from(length),
                        });
                    }
                    slot += VAR_LENGTH_SLOT_BYTES;
                    length as usize
                }
            };
            let Some(value) = bytes.get(pos..).and_then(|rest| rest.get(..width)) else {
                return Err(RowError::Truncated {
                    column,
                    offset: pos,
                    needed: width,
                    available: bytes.len() - pos.min(bytes.len()),
                });
            };
            let datum =
                read_value(field.kind, value, pos).map_err(|f| f.at(column, bytes.len()))?;
            each(datum);
            pos += width;
        }
        if let Some(at) = header[slot..].iter().position(|b| *b != 0) {
            return Err(RowError::UnusedLengthSlot { offset: slot + at });
        }
        if pos != bytes.len() {
            return Err(RowError::TrailingBytes {
                end: pos,
                size: bytes.len(),
            });
        }
        Ok(())
    }
}

#[inline]
fn read_i32(four: &[u8]) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(four);
    i32::from_le_bytes(a)
}

/// The first `N` bytes of a value whose width the layout fixed at `N` or more.
#[inline]
fn le<const N: usize>(value: &[u8], offset: usize) -> Result<[u8; N], Fault> {
    value
        .first_chunk::<N>()
        .copied()
        .ok_or(Fault::new(offset, FaultKind::Truncated { needed: N }))
}

/// `value` without its trailing zero bytes (`IndexedRow.getChar` / `getBinary`).
#[inline]
fn trim_zeros(value: &[u8]) -> &[u8] {
    let end = value.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    &value[..end]
}

/// One non-null value of `kind` from exactly its bytes, which start at
/// `offset` of the row.
#[inline]
fn read_value(kind: ColumnKind, value: &[u8], offset: usize) -> Result<Datum<'_>, Fault> {
    use ColumnKind as K;
    Ok(match kind {
        K::Boolean => match value {
            [0] => Datum::Boolean(false),
            [1] => Datum::Boolean(true),
            _ => {
                return Err(Fault::new(
                    offset,
                    FaultKind::Invalid("a BOOLEAN byte is 0 or 1"),
                ))
            }
        },
        K::TinyInt => Datum::TinyInt(le::<1>(value, offset)?[0] as i8),
        K::SmallInt => Datum::SmallInt(i16::from_le_bytes(le(value, offset)?)),
        K::Int => Datum::Int(i32::from_le_bytes(le(value, offset)?)),
        K::Date => Datum::Date(i32::from_le_bytes(le(value, offset)?)),
        K::Time => Datum::Time(i32::from_le_bytes(le(value, offset)?)),
        K::BigInt => Datum::BigInt(i64::from_le_bytes(le(value, offset)?)),
        K::Float => Datum::Float(f32::from_le_bytes(le(value, offset)?)),
        K::Double => Datum::Double(f64::from_le_bytes(le(value, offset)?)),
        K::Char { .. } => Datum::String(utf8(trim_zeros(value), offset)?),
        K::String => Datum::String(utf8(value, offset)?),
        K::Binary { .. } => Datum::Binary(trim_zeros(value)),
        K::Bytes => Datum::Binary(value),
        K::Decimal { precision } => {
            let unscaled = if precision <= DECIMAL_COMPACT_PRECISION_MAX {
                i128::from(i64::from_le_bytes(le(value, offset)?))
            } else {
                unscaled_from_be_bytes(value)
                    .map_err(|reason| Fault::new(offset, FaultKind::Invalid(reason)))?
            };
            checked_decimal(unscaled, precision, offset)?
        }
        K::Timestamp { precision } => Datum::Timestamp(read_timestamp(value, precision, offset)?),
        K::TimestampLtz { precision } => {
            Datum::TimestampLtz(read_timestamp(value, precision, offset)?)
        }
        // Never built for such a row type (`IndexedRowDecoder::new`).
        K::Array | K::Map | K::Row => {
            return Err(Fault::new(
                offset,
                FaultKind::Invalid("nested values in INDEXED rows are not supported"),
            ))
        }
    })
}

#[inline]
fn read_timestamp(value: &[u8], precision: u8, offset: usize) -> Result<Timestamp, Fault> {
    let millis = i64::from_le_bytes(le(value, offset)?);
    if precision <= TIMESTAMP_COMPACT_PRECISION_MAX {
        return Ok(Timestamp::from_millis(millis));
    }
    let nanos = i32::from_le_bytes(le(value.get(8..).unwrap_or_default(), offset + 8)?);
    checked_timestamp(millis, nanos, offset)
}

/// Writes one INDEXED row of the row type of `layout` into a caller-owned
/// buffer, one datum per column in order (Fluss's `IndexedRowWriter`).
///
/// The row is appended where `out` ended when the writer was made.
///
/// Guarantees: after `finish` succeeds, the bytes from the row's start are
/// exactly one row of the layout's type, which `layout` decodes back.
#[derive(Debug)]
pub struct IndexedRowWriter<'t, 'b> {
    layout: &'t IndexedRowDecoder,
    out: &'b mut Vec<u8>,
    start: usize,
    field: usize,
    /// Position in `out` of the next unused length slot.
    slot: usize,
}

impl<'t, 'b> IndexedRowWriter<'t, 'b> {
    /// A writer of one row of `layout`'s type appended to `out`; writes the
    /// zeroed header.
    pub fn new(layout: &'t IndexedRowDecoder, out: &'b mut Vec<u8>) -> Self {
        let start = out.len();
        out.resize(start + layout.header_size, 0);
        Self {
            layout,
            out,
            start,
            field: 0,
            slot: start + layout.null_bytes,
        }
    }

    /// Fields written so far.
    pub fn fields_written(&self) -> usize {
        self.field
    }

    /// Writes `datum` as the next field: NULL only if the column is
    /// nullable, otherwise a datum of the column's type family that the
    /// type can hold (CHAR(n) text and BINARY(n) values at most n bytes).
    /// On error nothing is written.
    pub fn write_datum(&mut self, datum: &Datum<'_>) -> Result<(), RowError> {
        let arity = self.layout.fields.len();
        let Some(field) = self.layout.fields.get(self.field).copied() else {
            return Err(RowError::ArityMismatch {
                expected: arity,
                given: self.field + 1,
            });
        };
        if datum.is_null() {
            if !field.nullable {
                return Err(ValueRefusal::Null.at(self.field, field.kind, datum));
            }
            let byte = self.start + self.field / 8;
            self.out[byte] |= 1 << (self.field % 8);
        } else {
            self.write_value(field.kind, datum)
                .map_err(|refusal| refusal.at(self.field, field.kind, datum))?;
        }
        self.field += 1;
        Ok(())
    }

    fn write_value(&mut self, kind: ColumnKind, datum: &Datum<'_>) -> Result<(), ValueRefusal> {
        use ColumnKind as K;
        let out = &mut *self.out;
        match (kind, *datum) {
            (K::Boolean, Datum::Boolean(v)) => out.push(u8::from(v)),
            (K::TinyInt, Datum::TinyInt(v)) => out.push(v as u8),
            (K::SmallInt, Datum::SmallInt(v)) => out.extend_from_slice(&v.to_le_bytes()),
            (K::Int, Datum::Int(v)) | (K::Date, Datum::Date(v)) | (K::Time, Datum::Time(v)) => {
                out.extend_from_slice(&v.to_le_bytes())
            }
            (K::BigInt, Datum::BigInt(v)) => out.extend_from_slice(&v.to_le_bytes()),
            (K::Float, Datum::Float(v)) => out.extend_from_slice(&v.to_le_bytes()),
            (K::Double, Datum::Double(v)) => out.extend_from_slice(&v.to_le_bytes()),
            (K::Char { length }, Datum::String(v)) => {
                put_padded(out, v.as_bytes(), length, reason::CHAR_TOO_LONG)?
            }
            (K::Binary { length }, Datum::Binary(v)) => {
                put_padded(out, v, length, reason::BINARY_TOO_LONG)?
            }
            (K::String, Datum::String(v)) => self.put_variable(v.as_bytes())?,
            (K::Bytes, Datum::Binary(v)) => self.put_variable(v)?,
            (K::Decimal { precision }, Datum::Decimal(v)) => {
                if !decimal_fits(v, precision) {
                    return Err(ValueRefusal::OutOfRange(reason::DECIMAL_DIGITS));
                }
                if precision <= DECIMAL_COMPACT_PRECISION_MAX {
                    out.extend_from_slice(&(v as i64).to_le_bytes());
                } else {
                    let (bytes, start) = unscaled_be_bytes(v);
                    self.put_variable(&bytes[start..])?;
                }
            }
            (K::Timestamp { precision }, Datum::Timestamp(t))
            | (K::TimestampLtz { precision }, Datum::TimestampLtz(t)) => {
                out.extend_from_slice(&t.millis().to_le_bytes());
                if precision > TIMESTAMP_COMPACT_PRECISION_MAX {
                    out.extend_from_slice(&t.nanos_of_milli().to_le_bytes());
                }
            }
            _ => return Err(ValueRefusal::Mismatch),
        }
        Ok(())
    }

    /// A variable-width value: its length in the next slot, then the bytes.
    fn put_variable(&mut self, bytes: &[u8]) -> Result<(), ValueRefusal> {
        if bytes.len() > VAR_LENGTH_MAX {
            return Err(ValueRefusal::OutOfRange(reason::TOO_LONG));
        }
        // In bounds: one slot per variable-width column, used at most once.
        self.out[self.slot..self.slot + VAR_LENGTH_SLOT_BYTES]
            .copy_from_slice(&(bytes.len() as i32).to_le_bytes());
        self.slot += VAR_LENGTH_SLOT_BYTES;
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    /// The row's bytes, once every column has been written.
    pub fn finish(&self) -> Result<&[u8], RowError> {
        let arity = self.layout.fields.len();
        if self.field != arity {
            return Err(RowError::IncompleteRow {
                written: self.field,
                arity,
            });
        }
        Ok(&self.out[self.start..])
    }
}

/// `bytes` zero-padded to `length` (`IndexedRowWriter.writeChar` / `writeBinary`).
fn put_padded(
    out: &mut Vec<u8>,
    bytes: &[u8],
    length: u32,
    too_long: &'static str,
) -> Result<(), ValueRefusal> {
    let length = length as usize;
    if bytes.len() > length {
        return Err(ValueRefusal::OutOfRange(too_long));
    }
    out.extend_from_slice(bytes);
    out.resize(out.len() + (length - bytes.len()), 0);
    Ok(())
}
