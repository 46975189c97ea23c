//! COMPACTED rows: a null bitset, then each non-null value in column order,
//! with no offsets; and the per-value encoding that compacted keys (and the
//! client's bucket-key hashing) share.
//!
//! ```text
//! row   := null_bits value*                  values of non-null fields only, in order
//! null_bits: ceil(arity / 8) bytes           field i = bit (i % 8) of byte (i / 8), LSB first;
//!                                            1 = NULL; padding bits 0
//! value, by column type:
//!   BOOLEAN                 1 byte, 0 or 1
//!   TINYINT                 1 byte
//!   SMALLINT                2 bytes little-endian
//!   INT, DATE, TIME(p)      varint of the 32-bit two's complement (days; ms of day)
//!   BIGINT                  varint of the 64-bit two's complement
//!   FLOAT, DOUBLE           4 / 8 bytes little-endian IEEE 754
//!   STRING, CHAR(n)         varint byte length, UTF-8 bytes        (n not enforced)
//!   BYTES, BINARY(n)        varint byte length, bytes              (n not enforced)
//!   DECIMAL(p <= 18, s)     varint of the unscaled value as a 64-bit long
//!   DECIMAL(p > 18, s)      varint length, unscaled value as minimal big-endian
//!                           two's complement (Java's BigInteger.toByteArray)
//!   TIMESTAMP[_LTZ](p <= 3) varint of epoch milliseconds (64-bit)
//!   TIMESTAMP[_LTZ](p > 3)  varint millis, then varint nanos of the millisecond
//!   ARRAY, MAP, ROW         varint length, then a BinaryArray, a BinaryMap or a
//!                           nested COMPACTED row (see `nested`)
//! varint := unsigned LEB128 (see the crate's varint rules: canonical only)
//! ```
//!
//! "Little-endian" is the JVM's native order (`UnsafeUtils.putShort`), which
//! is little-endian on every platform Fluss runs on, and what fluss-rs
//! writes.
//!
//! Facts from Fluss's `row/compacted/CompactedRowWriter.java`,
//! `CompactedRowReader.java`, `CompactedRow.calculateBitSetWidthInBytes`,
//! `row/BinaryWriter.createNotNullValueWriter` (which type uses which write),
//! and fluss-rs 1.0.0's `row/compacted/compacted_row_writer.rs`,
//! `compacted_row_reader.rs` and `row/binary/binary_writer.rs`, which agree
//! byte for byte.
//!
//! Where the readers here are stricter than Fluss's: a NULL bit on a NOT
//! NULL column is an error (Java and fluss-rs ignore the bit and read a
//! value that no writer put there), BOOLEAN must be 0 or 1, varints must be
//! canonical, a DECIMAL must fit its precision (Java's
//! `Decimal.fromUnscaledBytes` returns null otherwise) and the row must end
//! exactly at its last value.

use std::str;

use crate::datum::{Datum, Timestamp};
use crate::types::DataType;
use crate::varint::{self, VarintFault};

use super::nested::NestedField;
use super::{
    check_null_padding, decimal_fits, field_types, is_null_bit_set, null_bits_bytes, reason,
    ColumnKind, Fault, FaultKind, FieldType, RowError, ValueRefusal, DECIMAL_COMPACT_PRECISION_MAX,
    DECIMAL_UNSCALED_BYTES_MAX, TIMESTAMP_COMPACT_PRECISION_MAX, VAR_LENGTH_MAX,
};

/// Appends the compacted encoding of one non-null value of a column of
/// `kind`: the bytes `CompactedRowWriter` writes for it, which are also the
/// bytes of that column in a compacted key.
///
/// Refuses NULL ([`ValueRefusal::Null`]: the caller decides what NULL
/// means), a datum of another type family, and values the type cannot hold
/// (a DECIMAL with more digits than its precision, a STRING or BYTES longer
/// than [`VAR_LENGTH_MAX`]). On a refusal nothing is appended.
///
/// Allocation-free once `out` has room; no dynamic dispatch. CHAR(n) and
/// BINARY(n) lengths are not enforced (Fluss's compacted writer does not
/// either). TIMESTAMP(p <= 3) values keep only their milliseconds.
#[inline]
pub fn write_value(
    kind: ColumnKind,
    datum: &Datum<'_>,
    out: &mut Vec<u8>,
) -> Result<(), ValueRefusal> {
    use ColumnKind as K;
    // Matched on the datum first, guarded by the kind: one branch on the
    // datum's tag, no copy of a (kind, datum) tuple.
    match *datum {
        Datum::Null => return Err(ValueRefusal::Null),
        Datum::Boolean(v) if matches!(kind, K::Boolean) => out.push(u8::from(v)),
        Datum::TinyInt(v) if matches!(kind, K::TinyInt) => out.push(v as u8),
        Datum::SmallInt(v) if matches!(kind, K::SmallInt) => {
            out.extend_from_slice(&v.to_le_bytes())
        }
        Datum::Int(v) if matches!(kind, K::Int) => varint::put_u32(out, v as u32),
        Datum::Date(v) if matches!(kind, K::Date) => varint::put_u32(out, v as u32),
        Datum::Time(v) if matches!(kind, K::Time) => varint::put_u32(out, v as u32),
        Datum::BigInt(v) if matches!(kind, K::BigInt) => varint::put_u64(out, v as u64),
        Datum::Float(v) if matches!(kind, K::Float) => out.extend_from_slice(&v.to_le_bytes()),
        Datum::Double(v) if matches!(kind, K::Double) => out.extend_from_slice(&v.to_le_bytes()),
        Datum::String(v) if matches!(kind, K::String | K::Char { .. }) => {
            put_var_bytes(out, v.as_bytes())?
        }
        Datum::Binary(v) if matches!(kind, K::Bytes | K::Binary { .. }) => put_var_bytes(out, v)?,
        Datum::Decimal(v) => match kind {
            K::Decimal { precision } => put_decimal(out, v, precision)?,
            _ => return Err(ValueRefusal::Mismatch),
        },
        Datum::Timestamp(t) => match kind {
            K::Timestamp { precision } => put_timestamp(out, t, precision),
            _ => return Err(ValueRefusal::Mismatch),
        },
        Datum::TimestampLtz(t) => match kind {
            K::TimestampLtz { precision } => put_timestamp(out, t, precision),
            _ => return Err(ValueRefusal::Mismatch),
        },
        // The bytes are checked against the element types by the row
        // codecs (`CompactedRowDecoder::encode`), which know them.
        Datum::Array(v) if matches!(kind, K::Array) => put_var_bytes(out, v)?,
        Datum::Map(v) if matches!(kind, K::Map) => put_var_bytes(out, v)?,
        Datum::Row(v) if matches!(kind, K::Row) => put_var_bytes(out, v)?,
        _ => return Err(ValueRefusal::Mismatch),
    }
    Ok(())
}

/// Varint length, then the bytes (`CompactedRowWriter.writeBytes`).
#[inline]
fn put_var_bytes(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), ValueRefusal> {
    if bytes.len() > VAR_LENGTH_MAX {
        return Err(ValueRefusal::OutOfRange(reason::TOO_LONG));
    }
    varint::put_u32(out, bytes.len() as u32);
    out.extend_from_slice(bytes);
    Ok(())
}

/// The unscaled value as a long (p <= 18) or as Java's
/// `BigInteger.toByteArray` (`CompactedRowWriter.writeDecimal`).
#[inline]
fn put_decimal(out: &mut Vec<u8>, v: i128, precision: u8) -> Result<(), ValueRefusal> {
    if !decimal_fits(v, precision) {
        return Err(ValueRefusal::OutOfRange(reason::DECIMAL_DIGITS));
    }
    if precision <= DECIMAL_COMPACT_PRECISION_MAX {
        // Fits: |v| < 10^18 < 2^63.
        varint::put_u64(out, v as i64 as u64);
    } else {
        let (bytes, start) = unscaled_be_bytes(v);
        varint::put_u32(out, (bytes.len() - start) as u32);
        out.extend_from_slice(&bytes[start..]);
    }
    Ok(())
}

/// The shortest big-endian two's complement of `v` (Java's
/// `BigInteger.toByteArray`): `bytes[start..]`, at least one byte.
#[inline]
pub(crate) fn unscaled_be_bytes(v: i128) -> ([u8; 16], usize) {
    let bytes = v.to_be_bytes();
    let sign = if v < 0 { 0xff } else { 0x00 };
    let mut start = 0;
    // Drop a leading sign byte while the next byte still carries the sign.
    while start < bytes.len() - 1 && bytes[start] == sign && (bytes[start + 1] ^ sign) & 0x80 == 0 {
        start += 1;
    }
    (bytes, start)
}

/// The unscaled value of minimal big-endian two's-complement `bytes`, or
/// why they are not such bytes.
pub(crate) fn unscaled_from_be_bytes(bytes: &[u8]) -> Result<i128, &'static str> {
    if bytes.is_empty() || bytes.len() > DECIMAL_UNSCALED_BYTES_MAX {
        return Err("a DECIMAL's unscaled bytes are 1 to 16 long");
    }
    if bytes.len() >= 2 {
        let redundant = (bytes[0] == 0x00 && bytes[1] & 0x80 == 0)
            || (bytes[0] == 0xff && bytes[1] & 0x80 != 0);
        if redundant {
            return Err("a DECIMAL's unscaled bytes have a redundant sign byte");
        }
    }
    let mut wide = if bytes[0] & 0x80 != 0 {
        [0xff; 16]
    } else {
        [0x00; 16]
    };
    wide[16 - bytes.len()..].copy_from_slice(bytes);
    Ok(i128::from_be_bytes(wide))
}

/// The error for a nested column whose element types cannot be read
/// (an element type with no layout), naming the column.
fn nested_type_error(error: RowError, column: usize, data_type: &DataType) -> RowError {
    match error {
        RowError::UnsupportedType { .. } => RowError::UnsupportedType {
            column,
            type_root: data_type.type_root(),
        },
        other => other,
    }
}

/// Millis, then nanos of the millisecond when p > 3 (`writeTimestampNtz`).
#[inline]
fn put_timestamp(out: &mut Vec<u8>, t: Timestamp, precision: u8) {
    varint::put_u64(out, t.millis() as u64);
    if precision > TIMESTAMP_COMPACT_PRECISION_MAX {
        varint::put_u32(out, t.nanos_of_milli() as u32);
    }
}

fn varint_fault(start: usize, fault: VarintFault) -> Fault {
    match fault {
        VarintFault::Truncated { read } => {
            Fault::new(start, FaultKind::Truncated { needed: read + 1 })
        }
        VarintFault::Malformed => Fault::new(start, FaultKind::BadVarint),
    }
}

#[inline]
fn read_varint_u32(bytes: &[u8], pos: &mut usize) -> Result<u32, Fault> {
    let start = *pos;
    varint::read_u32(bytes, pos).map_err(|f| varint_fault(start, f))
}

#[inline]
fn read_varint_u64(bytes: &[u8], pos: &mut usize) -> Result<u64, Fault> {
    let start = *pos;
    varint::read_u64(bytes, pos).map_err(|f| varint_fault(start, f))
}

/// The `N` bytes at `*pos`, advancing past them.
#[inline]
pub(crate) fn take<const N: usize>(bytes: &[u8], pos: &mut usize) -> Result<[u8; N], Fault> {
    match bytes.get(*pos..).and_then(|rest| rest.first_chunk::<N>()) {
        Some(chunk) => {
            *pos += N;
            Ok(*chunk)
        }
        None => Err(Fault::new(*pos, FaultKind::Truncated { needed: N })),
    }
}

/// A varint length and that many bytes (`CompactedRowReader.readBytes`).
#[inline]
fn read_var_bytes<'a>(bytes: &'a [u8], pos: &mut usize) -> Result<&'a [u8], Fault> {
    let start = *pos;
    let length = read_varint_u32(bytes, pos)?;
    if length as usize > VAR_LENGTH_MAX {
        return Err(Fault::new(
            start,
            FaultKind::BadLength {
                length: i64::from(length as i32),
            },
        ));
    }
    let from = *pos;
    match bytes
        .get(from..)
        .and_then(|rest| rest.get(..length as usize))
    {
        Some(value) => {
            *pos = from + value.len();
            Ok(value)
        }
        None => Err(Fault::new(
            from,
            FaultKind::Truncated {
                needed: length as usize,
            },
        )),
    }
}

/// Text of a STRING / CHAR value starting at `offset`.
#[inline]
pub(crate) fn utf8(bytes: &[u8], offset: usize) -> Result<&str, Fault> {
    str::from_utf8(bytes).map_err(|_| Fault::new(offset, FaultKind::InvalidUtf8))
}

/// A decoded DECIMAL, checked against its precision.
#[inline]
pub(crate) fn checked_decimal(
    v: i128,
    precision: u8,
    offset: usize,
) -> Result<Datum<'static>, Fault> {
    if decimal_fits(v, precision) {
        Ok(Datum::Decimal(v))
    } else {
        Err(Fault::new(
            offset,
            FaultKind::Invalid(reason::DECIMAL_DIGITS),
        ))
    }
}

/// A decoded timestamp from its parts, checking the nanoseconds.
#[inline]
pub(crate) fn checked_timestamp(
    millis: i64,
    nanos: i32,
    offset: usize,
) -> Result<Timestamp, Fault> {
    Timestamp::new(millis, nanos).ok_or(Fault::new(
        offset,
        FaultKind::Invalid("nanoseconds of the millisecond outside 0..1000000"),
    ))
}

/// Reads one non-null value of a column of `kind` at `*pos`, advancing
/// past it: the inverse of [`write_value`], accepting only its output.
#[inline]
pub(crate) fn read_value<'a>(
    kind: ColumnKind,
    bytes: &'a [u8],
    pos: &mut usize,
) -> Result<Datum<'a>, Fault> {
    use ColumnKind as K;
    let start = *pos;
    Ok(match kind {
        K::Boolean => match take::<1>(bytes, pos)? {
            [0] => Datum::Boolean(false),
            [1] => Datum::Boolean(true),
            _ => {
                return Err(Fault::new(
                    start,
                    FaultKind::Invalid("a BOOLEAN byte is 0 or 1"),
                ))
            }
        },
        K::TinyInt => Datum::TinyInt(take::<1>(bytes, pos)?[0] as i8),
        K::SmallInt => Datum::SmallInt(i16::from_le_bytes(take(bytes, pos)?)),
        K::Int => Datum::Int(read_varint_u32(bytes, pos)? as i32),
        K::Date => Datum::Date(read_varint_u32(bytes, pos)? as i32),
        K::Time => Datum::Time(read_varint_u32(bytes, pos)? as i32),
        K::BigInt => Datum::BigInt(read_varint_u64(bytes, pos)? as i64),
        K::Float => Datum::Float(f32::from_le_bytes(take(bytes, pos)?)),
        K::Double => Datum::Double(f64::from_le_bytes(take(bytes, pos)?)),
        K::String | K::Char { .. } => Datum::String(utf8(read_var_bytes(bytes, pos)?, start)?),
        K::Bytes | K::Binary { .. } => Datum::Binary(read_var_bytes(bytes, pos)?),
        K::Decimal { precision } => {
            let unscaled = if precision <= DECIMAL_COMPACT_PRECISION_MAX {
                i128::from(read_varint_u64(bytes, pos)? as i64)
            } else {
                unscaled_from_be_bytes(read_var_bytes(bytes, pos)?)
                    .map_err(|reason| Fault::new(start, FaultKind::Invalid(reason)))?
            };
            checked_decimal(unscaled, precision, start)?
        }
        K::Timestamp { precision } => Datum::Timestamp(read_timestamp(bytes, pos, precision)?),
        K::TimestampLtz { precision } => {
            Datum::TimestampLtz(read_timestamp(bytes, pos, precision)?)
        }
        K::Array => Datum::Array(read_var_bytes(bytes, pos)?),
        K::Map => Datum::Map(read_var_bytes(bytes, pos)?),
        K::Row => Datum::Row(read_var_bytes(bytes, pos)?),
    })
}

#[inline]
fn read_timestamp(bytes: &[u8], pos: &mut usize, precision: u8) -> Result<Timestamp, Fault> {
    let start = *pos;
    let millis = read_varint_u64(bytes, pos)? as i64;
    if precision <= TIMESTAMP_COMPACT_PRECISION_MAX {
        return Ok(Timestamp::from_millis(millis));
    }
    let nanos = read_varint_u32(bytes, pos)? as i32;
    checked_timestamp(millis, nanos, start)
}

/// Writes one COMPACTED row into a caller-owned buffer, field by field in
/// column order (Fluss's `CompactedRowWriter`).
///
/// The row starts where `out` ended when the writer was made; [`reset`]
/// rewrites it from there, so one writer writes row after row into the same
/// bytes without allocating. The typed `write_*` methods trust the caller
/// to match the column types (as Java's writer does); [`write_datum`]
/// checks each value against its column.
///
/// Guarantees: after `finish` succeeds, the bytes from the row's start are
/// exactly one row of `arity` fields in Fluss's compacted layout.
///
/// [`reset`]: CompactedRowWriter::reset
/// [`write_datum`]: CompactedRowWriter::write_datum
#[derive(Debug)]
pub struct CompactedRowWriter<'b> {
    out: &'b mut Vec<u8>,
    start: usize,
    arity: usize,
    field: usize,
}

impl<'b> CompactedRowWriter<'b> {
    /// A writer of a row of `arity` fields appended to `out`.
    pub fn new(out: &'b mut Vec<u8>, arity: usize) -> Self {
        let start = out.len();
        let mut writer = Self {
            out,
            start,
            arity: 0,
            field: 0,
        };
        writer.reset(arity);
        writer
    }

    /// Starts the row over with `arity` fields: drops what was written
    /// since the writer was made and writes an all-clear null bitset.
    pub fn reset(&mut self, arity: usize) {
        self.out.truncate(self.start);
        self.out.resize(self.start + null_bits_bytes(arity), 0);
        self.arity = arity;
        self.field = 0;
    }

    /// Fields written since the last reset.
    pub fn fields_written(&self) -> usize {
        self.field
    }

    /// Marks the next field NULL (no value bytes).
    pub fn write_null(&mut self) {
        if self.field < self.arity {
            let byte = self.start + self.field / 8;
            self.out[byte] |= 1 << (self.field % 8);
        }
        // Past the arity: counted only, so `finish` reports the extra field.
        self.field += 1;
    }

    /// Writes a BOOLEAN.
    pub fn write_boolean(&mut self, v: bool) {
        self.out.push(u8::from(v));
        self.field += 1;
    }

    /// Writes a TINYINT.
    pub fn write_tinyint(&mut self, v: i8) {
        self.out.push(v as u8);
        self.field += 1;
    }

    /// Writes a SMALLINT.
    pub fn write_smallint(&mut self, v: i16) {
        self.out.extend_from_slice(&v.to_le_bytes());
        self.field += 1;
    }

    /// Writes an INT (also DATE days and TIME milliseconds).
    pub fn write_int(&mut self, v: i32) {
        varint::put_u32(self.out, v as u32);
        self.field += 1;
    }

    /// Writes a BIGINT.
    pub fn write_bigint(&mut self, v: i64) {
        varint::put_u64(self.out, v as u64);
        self.field += 1;
    }

    /// Writes a FLOAT.
    pub fn write_float(&mut self, v: f32) {
        self.out.extend_from_slice(&v.to_le_bytes());
        self.field += 1;
    }

    /// Writes a DOUBLE.
    pub fn write_double(&mut self, v: f64) {
        self.out.extend_from_slice(&v.to_le_bytes());
        self.field += 1;
    }

    /// Writes a TIMESTAMP or TIMESTAMP_LTZ of `precision`.
    pub fn write_timestamp(&mut self, v: Timestamp, precision: u8) {
        put_timestamp(self.out, v, precision);
        self.field += 1;
    }

    /// Writes a STRING or CHAR; fails for text longer than [`VAR_LENGTH_MAX`].
    pub fn write_string(&mut self, v: &str) -> Result<(), RowError> {
        self.write_checked(ColumnKind::String, &Datum::String(v))
    }

    /// Writes a BYTES or BINARY; fails for more than [`VAR_LENGTH_MAX`] bytes.
    pub fn write_bytes(&mut self, v: &[u8]) -> Result<(), RowError> {
        self.write_checked(ColumnKind::Bytes, &Datum::Binary(v))
    }

    /// Writes a DECIMAL of `precision` from its unscaled value; fails when
    /// the value has more digits than the precision.
    pub fn write_decimal(&mut self, unscaled: i128, precision: u8) -> Result<(), RowError> {
        self.write_checked(ColumnKind::Decimal { precision }, &Datum::Decimal(unscaled))
    }

    /// Writes `datum` as the next field, a column of type `field`: NULL
    /// only if the column is nullable, otherwise a datum of the column's
    /// type family that the type can hold. On error nothing is written.
    pub fn write_datum(&mut self, field: FieldType, datum: &Datum<'_>) -> Result<(), RowError> {
        if datum.is_null() {
            if !field.nullable {
                return Err(ValueRefusal::Null.at(self.field, field.kind, datum));
            }
            self.write_null();
            return Ok(());
        }
        self.write_checked(field.kind, datum)
    }

    #[inline]
    fn write_checked(&mut self, kind: ColumnKind, datum: &Datum<'_>) -> Result<(), RowError> {
        write_value(kind, datum, self.out)
            .map_err(|refusal| refusal.at(self.field, kind, datum))?;
        self.field += 1;
        Ok(())
    }

    /// The row's bytes, once exactly `arity` fields have been written.
    pub fn finish(&self) -> Result<&[u8], RowError> {
        if self.field != self.arity {
            return Err(RowError::IncompleteRow {
                written: self.field,
                arity: self.arity,
            });
        }
        Ok(&self.out[self.start..])
    }
}

/// Decodes and validates COMPACTED rows of one row type: built once per
/// schema, used per record.
///
/// Guarantees: `decode` and `validate` accept exactly the rows
/// [`CompactedRowWriter`] (and Fluss's writers) produce for that type,
/// nested values checked all the way down ([`NestedField::check`]).
#[derive(Clone, Debug)]
pub struct CompactedRowDecoder {
    fields: Box<[FieldType]>,
    /// Per column, the nested type of an ARRAY, MAP or ROW column; empty
    /// when the row type has none, so flat rows never look at it.
    nested: Box<[Option<NestedField>]>,
    header_size: usize,
}

impl CompactedRowDecoder {
    /// The decoder of rows of `row_type`, nested columns included.
    pub fn new(row_type: &[DataType]) -> Result<Self, RowError> {
        let fields = field_types(row_type);
        let nested = if fields.iter().any(|f| f.kind.is_nested()) {
            row_type
                .iter()
                .enumerate()
                .map(|(column, t)| {
                    if ColumnKind::of_value(t.kind()).is_nested() {
                        NestedField::of(t)
                            .map(Some)
                            .map_err(|e| nested_type_error(e, column, t))
                    } else {
                        Ok(None)
                    }
                })
                .collect::<Result<_, _>>()?
        } else {
            Box::default()
        };
        let header_size = null_bits_bytes(fields.len());
        Ok(Self {
            fields,
            nested,
            header_size,
        })
    }

    /// The nested type of column `column`, if it is ARRAY, MAP or ROW.
    pub fn nested_field(&self, column: usize) -> Option<&NestedField> {
        self.nested.get(column).and_then(Option::as_ref)
    }

    /// Checks a nested datum of `column` all the way down.
    #[cold]
    fn check_nested(
        &self,
        column: usize,
        datum: &Datum<'_>,
        offset: usize,
    ) -> Result<(), RowError> {
        match self.nested_field(column) {
            Some(field) => field.check(datum).map_err(|reason| RowError::InvalidValue {
                column,
                offset,
                reason,
            }),
            None => Ok(()),
        }
    }

    /// Checks the nested datums of `row` (one per column), for encoders
    /// that copy nested bytes as they are.
    pub fn check_nested_datums(&self, row: &[Datum<'_>]) -> Result<(), RowError> {
        if self.nested.is_empty() {
            return Ok(());
        }
        for (column, datum) in row.iter().enumerate() {
            if !datum.is_null() {
                self.check_nested(column, datum, 0)?;
            }
        }
        Ok(())
    }

    /// The row type's columns.
    pub fn fields(&self) -> &[FieldType] {
        &self.fields
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

    #[inline]
    fn walk<'a>(&self, bytes: &'a [u8], mut each: impl FnMut(Datum<'a>)) -> Result<(), RowError> {
        let Some(bits) = bytes.get(..self.header_size) else {
            return Err(RowError::ShorterThanHeader {
                size: bytes.len(),
                header_size: self.header_size,
            });
        };
        check_null_padding(bits, self.fields.len())?;
        let mut pos = self.header_size;
        for (column, field) in self.fields.iter().enumerate() {
            if is_null_bit_set(bits, column) {
                if !field.nullable {
                    return Err(RowError::NullNotAllowed {
                        column,
                        column_type: field.kind.type_name(),
                    });
                }
                each(Datum::Null);
                continue;
            }
            let start = pos;
            let fault = |f: Fault| f.at(column, bytes.len());
            // The commonest kinds are built here from the plain value: a
            // datum returned as a `Result` went through memory, written
            // field by field and read back whole, which stalled store
            // forwarding on every column (the largest cost of decoding an
            // upsert's row in `scripts/bench-kv.sh`).
            let datum = match field.kind {
                ColumnKind::Int => {
                    Datum::Int(read_varint_u32(bytes, &mut pos).map_err(fault)? as i32)
                }
                ColumnKind::BigInt => {
                    Datum::BigInt(read_varint_u64(bytes, &mut pos).map_err(fault)? as i64)
                }
                ColumnKind::String | ColumnKind::Char { .. } => {
                    let value = read_var_bytes(bytes, &mut pos).map_err(fault)?;
                    Datum::String(utf8(value, start).map_err(fault)?)
                }
                ColumnKind::Timestamp { precision }
                    if precision <= TIMESTAMP_COMPACT_PRECISION_MAX =>
                {
                    let millis = read_varint_u64(bytes, &mut pos).map_err(fault)?;
                    Datum::Timestamp(Timestamp::from_millis(millis as i64))
                }
                kind => {
                    let datum = read_value(kind, bytes, &mut pos).map_err(fault)?;
                    if kind.is_nested() {
                        self.check_nested(column, &datum, start)?;
                    }
                    datum
                }
            };
            each(datum);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unscaled_bytes_are_minimal_like_big_integer() {
        // BigInteger.valueOf(v).toByteArray(), worked by hand.
        let cases: [(i128, &[u8]); 7] = [
            (0, &[0x00]),
            (-1, &[0xff]),
            (127, &[0x7f]),
            (128, &[0x00, 0x80]),
            (-128, &[0x80]),
            (-129, &[0xff, 0x7f]),
            (
                i128::MIN,
                &[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            ),
        ];
        for (v, expected) in cases {
            let (bytes, start) = unscaled_be_bytes(v);
            assert_eq!(&bytes[start..], expected, "{v}");
            assert_eq!(unscaled_from_be_bytes(expected), Ok(v));
        }
        assert!(unscaled_from_be_bytes(&[0x00, 0x7f]).is_err());
        assert!(unscaled_from_be_bytes(&[0xff, 0x80]).is_err());
        assert!(unscaled_from_be_bytes(&[]).is_err());
        assert!(unscaled_from_be_bytes(&[1; 17]).is_err());
    }
}
