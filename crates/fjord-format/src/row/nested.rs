//! ARRAY, MAP and ROW values as a COMPACTED row embeds them: Fluss's
//! `BinaryArray`, `BinaryMap` and a nested COMPACTED row, read, checked and
//! built over caller-owned bytes.
//!
//! A COMPACTED row stores a nested value as a varint length and these bytes
//! (`CompactedRowWriter.writeArray/writeMap/writeRow`); a [`Datum::Array`],
//! [`Datum::Map`] or [`Datum::Row`] is exactly those bytes.
//!
//! ```text
//! array := num_elements:i32le  null_bits  fixed_part  var_part
//!   null_bits: 4 * ceil(n / 32) bytes; element i = bit (i % 8) of byte (i / 8), 1 = NULL
//!   fixed_part: n slots of the element's width, then zeros up to a multiple of 8
//!                 BOOLEAN, TINYINT 1; SMALLINT 2; INT, DATE, TIME, FLOAT 4;
//!                 everything else 8                       (BinaryArray.calculateFixLengthPartSize)
//!   slot of a NULL element: zero (the writer clears it; readers ignore it)
//!   8-byte slots of variable values hold (offset << 32) | size, offset from the
//!   array's first byte, into var_part; each var_part entry is padded with
//!   zeros to a multiple of 8 bytes
//!     STRING, CHAR, BYTES, BINARY  <= 7 bytes: inline, slot byte 7 = 0x80 | length,
//!                                  slot bytes 0..length = the value; else var_part
//!     DECIMAL(p <= 18)             the unscaled long
//!     DECIMAL(p > 18)              16 var_part bytes, value = minimal big-endian
//!                                  two's complement at their start, size = its length
//!     TIMESTAMP[_LTZ](p <= 3)      epoch millis
//!     TIMESTAMP[_LTZ](p > 3)       8 var_part bytes of millis; the slot's low half
//!                                  is the nanos of the millisecond instead of a size
//!     ARRAY, MAP, ROW              var_part: the nested array, map or COMPACTED row
//! map   := key_array_size:i32le  key_array  value_array      (equal element counts)
//! row   := a COMPACTED row of the ROW's field types
//! ```
//!
//! Facts from Fluss 0.9.1's `row/BinaryArray.java`, `BinaryArrayWriter`,
//! `AbstractBinaryWriter` (inline strings, decimals and timestamps),
//! `BinarySegmentUtils.readBinaryString`, `BinaryMap.valueOf/pointTo`,
//! `serializer/ArraySerializer` (a COMPACTED row's arrays nest COMPACTED
//! rows: `array/CompactedArray.getRow`), `map/CompactedMap`.
//!
//! What the checks here accept: every array whose header, slots and
//! var-part references lie within its bytes and whose values are valid for
//! their type (UTF-8 text, booleans 0/1, decimals within precision, nanos
//! below a millisecond), recursively. The content of a NULL element's slot
//! and of padding is not checked: Java's reused array writers may leave
//! stale bytes there, and the value is carried as its bytes anyway, so it
//! goes back out unchanged.

use crate::datum::{Datum, Timestamp};
use crate::types::{DataType, TypeKind};

use super::compacted::{checked_decimal, checked_timestamp, unscaled_be_bytes, utf8};
use super::compacted::{unscaled_from_be_bytes, CompactedRowDecoder};
use super::{
    decimal_fits, reason, ColumnKind, RowError, ValueRefusal, DECIMAL_COMPACT_PRECISION_MAX,
    TIMESTAMP_COMPACT_PRECISION_MAX,
};

/// Longest string or bytes value stored inside its slot
/// (`BinarySection.MAX_FIX_PART_DATA_SIZE`).
const INLINE_MAX: usize = 7;
/// The slot bit marking an inline value (`BinarySection.HIGHEST_FIRST_BIT`).
const INLINE_MARK: u64 = 0x80 << 56;

/// The type of an array element, a map key or value, as the nested codecs
/// need it: its layout and whether it may be NULL.
#[derive(Clone, Debug)]
pub struct NestedField {
    /// How values of this element are laid out.
    pub ty: NestedType,
    /// Whether the element may be NULL.
    pub nullable: bool,
}

/// The layout of a value inside a nested structure: a flat kind, or a
/// nested structure with its own element types.
#[derive(Clone, Debug)]
pub enum NestedType {
    /// A flat value ([`ColumnKind`] other than ARRAY, MAP and ROW).
    Flat(ColumnKind),
    /// ARRAY of elements of this type.
    Array(Box<NestedField>),
    /// MAP of these key and value types.
    Map {
        /// The key type.
        key: Box<NestedField>,
        /// The value type.
        value: Box<NestedField>,
    },
    /// ROW: a nested COMPACTED row, read by this decoder.
    Row(Box<CompactedRowDecoder>),
}

impl NestedField {
    /// The nested field of `data_type`, built once per column type.
    pub fn of(data_type: &DataType) -> Result<Self, RowError> {
        let ty = match data_type.kind() {
            TypeKind::Array(element) => NestedType::Array(Box::new(Self::of(element)?)),
            TypeKind::Map { key, value } => NestedType::Map {
                key: Box::new(Self::of(key)?),
                value: Box::new(Self::of(value)?),
            },
            TypeKind::Row(fields) => {
                let types: Vec<DataType> = fields.iter().map(|f| f.data_type.clone()).collect();
                NestedType::Row(Box::new(CompactedRowDecoder::new(&types)?))
            }
            other => NestedType::Flat(ColumnKind::of(other).ok_or(RowError::UnsupportedType {
                column: 0,
                type_root: data_type.type_root(),
            })?),
        };
        Ok(Self {
            ty,
            nullable: data_type.is_nullable(),
        })
    }

    /// Bytes of this element's slot in an array's fixed part.
    fn slot_width(&self) -> usize {
        match self.ty {
            NestedType::Flat(ColumnKind::Boolean | ColumnKind::TinyInt) => 1,
            NestedType::Flat(ColumnKind::SmallInt) => 2,
            NestedType::Flat(
                ColumnKind::Int | ColumnKind::Date | ColumnKind::Time | ColumnKind::Float,
            ) => 4,
            _ => 8,
        }
    }

    /// Checks that `datum`, a non-null value of this type, is well formed
    /// all the way down (nested bytes included).
    pub fn check(&self, datum: &Datum<'_>) -> Result<(), &'static str> {
        match (&self.ty, *datum) {
            (NestedType::Array(element), Datum::Array(bytes)) => {
                let array = BinaryArray::parse(bytes, element)?;
                for i in 0..array.len() {
                    let value = array.get(i, element)?;
                    if !value.is_null() {
                        element.check(&value)?;
                    }
                }
                Ok(())
            }
            (NestedType::Map { key, value }, Datum::Map(bytes)) => {
                let map = BinaryMap::parse(bytes, key, value)?;
                for (field, array) in [(key, map.keys()), (value, map.values())] {
                    for i in 0..array.len() {
                        let v = array.get(i, field)?;
                        if !v.is_null() {
                            field.check(&v)?;
                        }
                    }
                }
                Ok(())
            }
            (NestedType::Row(decoder), Datum::Row(bytes)) => decoder
                .validate(bytes)
                .map_err(|_| "a nested ROW value is not a valid COMPACTED row of its type"),
            // Flat values were checked when read.
            (NestedType::Flat(_), _) => Ok(()),
            _ => Err("a nested value of another type than its column's"),
        }
    }
}

/// A Fluss `BinaryArray` over borrowed bytes: its header checked, its
/// elements read on demand.
#[derive(Clone, Copy, Debug)]
pub struct BinaryArray<'a> {
    bytes: &'a [u8],
    len: usize,
    slots: usize,
    width: usize,
}

impl<'a> BinaryArray<'a> {
    /// The array in `bytes` with elements of type `element`; checks that
    /// its header and fixed part fit.
    pub fn parse(bytes: &'a [u8], element: &NestedField) -> Result<Self, &'static str> {
        let Some(count) = bytes.first_chunk::<4>() else {
            return Err("an ARRAY is shorter than its 4-byte element count");
        };
        let count = i32::from_le_bytes(*count);
        if count < 0 {
            return Err("an ARRAY has a negative element count");
        }
        let len = count as usize;
        let slots = header_bytes(len);
        let width = element.slot_width();
        let fixed_end = len
            .checked_mul(width)
            .and_then(|w| w.checked_add(slots))
            .filter(|end| *end <= bytes.len());
        if fixed_end.is_none() {
            return Err("an ARRAY's elements run past its bytes");
        }
        Ok(Self {
            bytes,
            len,
            slots,
            width,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether element `i` (below [`len`](Self::len)) is NULL.
    pub fn is_null(&self, i: usize) -> bool {
        self.bytes[4 + i / 8] & (1 << (i % 8)) != 0
    }

    /// Element `i` (below [`len`](Self::len)) of type `element`, the one
    /// the array was parsed with. Nested values come back as their bytes,
    /// not yet checked ([`NestedField::check`] does that).
    pub fn get(&self, i: usize, element: &NestedField) -> Result<Datum<'a>, &'static str> {
        if self.is_null(i) {
            return if element.nullable {
                Ok(Datum::Null)
            } else {
                Err("a NOT NULL ARRAY element is NULL")
            };
        }
        let at = self.slots + i * self.width;
        let slot = &self.bytes[at..at + self.width];
        let long = || u64::from_le_bytes(slot.try_into().expect("8-byte slot"));
        use ColumnKind as K;
        Ok(match &element.ty {
            NestedType::Flat(kind) => match *kind {
                K::Boolean => match slot[0] {
                    0 => Datum::Boolean(false),
                    1 => Datum::Boolean(true),
                    _ => return Err("a BOOLEAN byte is 0 or 1"),
                },
                K::TinyInt => Datum::TinyInt(slot[0] as i8),
                K::SmallInt => Datum::SmallInt(i16::from_le_bytes([slot[0], slot[1]])),
                K::Int | K::Date | K::Time => {
                    let v = i32::from_le_bytes(slot.try_into().expect("4-byte slot"));
                    match kind {
                        K::Int => Datum::Int(v),
                        K::Date => Datum::Date(v),
                        _ => Datum::Time(v),
                    }
                }
                K::Float => Datum::Float(f32::from_le_bytes(slot.try_into().expect("4 bytes"))),
                K::BigInt => Datum::BigInt(long() as i64),
                K::Double => Datum::Double(f64::from_bits(long())),
                K::String | K::Char { .. } => {
                    let text = self.var_bytes(at, long(), true)?;
                    Datum::String(utf8(text, 0).map_err(|_| "ARRAY text is not UTF-8")?)
                }
                K::Bytes | K::Binary { .. } => Datum::Binary(self.var_bytes(at, long(), true)?),
                K::Decimal { precision } => {
                    let unscaled = if precision <= DECIMAL_COMPACT_PRECISION_MAX {
                        i128::from(long() as i64)
                    } else {
                        unscaled_from_be_bytes(self.var_bytes(at, long(), false)?)?
                    };
                    checked_decimal(unscaled, precision, 0).map_err(|_| reason::DECIMAL_DIGITS)?
                }
                K::Timestamp { precision } => Datum::Timestamp(self.timestamp(long(), precision)?),
                K::TimestampLtz { precision } => {
                    Datum::TimestampLtz(self.timestamp(long(), precision)?)
                }
                K::Array | K::Map | K::Row => return Err("a flat element of a nested kind"),
            },
            NestedType::Array(_) => Datum::Array(self.var_bytes(at, long(), false)?),
            NestedType::Map { .. } => Datum::Map(self.var_bytes(at, long(), false)?),
            NestedType::Row(_) => Datum::Row(self.var_bytes(at, long(), false)?),
        })
    }

    /// The bytes a variable-width slot points at (or holds, when `inline`
    /// values are allowed and the slot is marked so).
    fn var_bytes(&self, at: usize, slot: u64, inline: bool) -> Result<&'a [u8], &'static str> {
        if slot & INLINE_MARK != 0 {
            let length = ((slot >> 56) & 0x7f) as usize;
            if !inline || length > INLINE_MAX {
                return Err("an ARRAY slot holds an invalid inline value");
            }
            return Ok(&self.bytes[at..at + length]);
        }
        let offset = (slot >> 32) as usize;
        let size = (slot & 0xffff_ffff) as usize;
        self.bytes
            .get(offset..)
            .and_then(|rest| rest.get(..size))
            .ok_or("an ARRAY value runs past the array's bytes")
    }

    fn timestamp(&self, slot: u64, precision: u8) -> Result<Timestamp, &'static str> {
        if precision <= TIMESTAMP_COMPACT_PRECISION_MAX {
            return Ok(Timestamp::from_millis(slot as i64));
        }
        let offset = (slot >> 32) as usize;
        let nanos = (slot & 0xffff_ffff) as u32 as i32;
        let millis = self
            .bytes
            .get(offset..)
            .and_then(|rest| rest.first_chunk::<8>())
            .ok_or("an ARRAY timestamp runs past the array's bytes")?;
        checked_timestamp(i64::from_le_bytes(*millis), nanos, 0)
            .map_err(|_| "nanoseconds of the millisecond outside 0..1000000")
    }
}

/// A Fluss `BinaryMap` over borrowed bytes: its key and value arrays.
#[derive(Clone, Copy, Debug)]
pub struct BinaryMap<'a> {
    keys: BinaryArray<'a>,
    values: BinaryArray<'a>,
}

impl<'a> BinaryMap<'a> {
    /// The map in `bytes` with keys of type `key` and values of type
    /// `value`; checks both arrays' headers and that they are as long.
    pub fn parse(
        bytes: &'a [u8],
        key: &NestedField,
        value: &NestedField,
    ) -> Result<Self, &'static str> {
        let Some(size) = bytes.first_chunk::<4>() else {
            return Err("a MAP is shorter than its 4-byte key array size");
        };
        let size = i32::from_le_bytes(*size);
        let rest = &bytes[4..];
        if size < 0 || size as usize > rest.len() {
            return Err("a MAP's key array size is outside its bytes");
        }
        let (key_bytes, value_bytes) = rest.split_at(size as usize);
        let keys = BinaryArray::parse(key_bytes, key)?;
        let values = BinaryArray::parse(value_bytes, value)?;
        if keys.len() != values.len() {
            return Err("a MAP has another number of keys than values");
        }
        Ok(Self { keys, values })
    }

    /// The keys, in entry order.
    pub fn keys(&self) -> BinaryArray<'a> {
        self.keys
    }

    /// The values, in entry order.
    pub fn values(&self) -> BinaryArray<'a> {
        self.values
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Bytes of an array's element count and null bitset
/// (`BinaryArray.calculateHeaderInBytes`).
const fn header_bytes(len: usize) -> usize {
    4 + len.div_ceil(32) * 4
}

const fn round_to_word(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Appends the `BinaryArray` of `elements` (one datum each, of type
/// `element`) to `out`, byte for byte what Fluss's `ArraySerializer`
/// writes. Nested elements are given as their bytes ([`Datum::Array`],
/// [`Datum::Map`], [`Datum::Row`]) and copied as they are.
///
/// Refuses NULL for a NOT NULL element, a datum of another family, and
/// values the type cannot hold; on a refusal `out` is left as it was.
pub fn write_array(
    element: &NestedField,
    elements: &[Datum<'_>],
    out: &mut Vec<u8>,
) -> Result<(), ValueRefusal> {
    let start = out.len();
    let result = write_array_inner(element, elements, out, start);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write_array_inner(
    element: &NestedField,
    elements: &[Datum<'_>],
    out: &mut Vec<u8>,
    start: usize,
) -> Result<(), ValueRefusal> {
    let n = elements.len();
    let count = i32::try_from(n).map_err(|_| ValueRefusal::OutOfRange(reason::TOO_LONG))?;
    let header = header_bytes(n);
    let width = element.slot_width();
    out.resize(start + round_to_word(header + width * n), 0);
    out[start..start + 4].copy_from_slice(&count.to_le_bytes());
    for (i, datum) in elements.iter().enumerate() {
        let at = start + header + i * width;
        if datum.is_null() {
            if !element.nullable {
                return Err(ValueRefusal::Null);
            }
            out[start + 4 + i / 8] |= 1 << (i % 8);
            continue;
        }
        write_element(element, datum, out, start, at)?;
    }
    if out.len() - start > i32::MAX as usize {
        return Err(ValueRefusal::OutOfRange(reason::TOO_LONG));
    }
    Ok(())
}

/// Writes one non-null element into its slot at `at` (and the var part).
fn write_element(
    element: &NestedField,
    datum: &Datum<'_>,
    out: &mut Vec<u8>,
    start: usize,
    at: usize,
) -> Result<(), ValueRefusal> {
    use ColumnKind as K;
    let put = |out: &mut Vec<u8>, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
    match (&element.ty, *datum) {
        (NestedType::Flat(kind), d) => match (*kind, d) {
            (K::Boolean, Datum::Boolean(v)) => put(out, &[u8::from(v)]),
            (K::TinyInt, Datum::TinyInt(v)) => put(out, &[v as u8]),
            (K::SmallInt, Datum::SmallInt(v)) => put(out, &v.to_le_bytes()),
            (K::Int, Datum::Int(v)) | (K::Date, Datum::Date(v)) | (K::Time, Datum::Time(v)) => {
                put(out, &v.to_le_bytes())
            }
            // Java's writer stores every NaN as the canonical one.
            (K::Float, Datum::Float(v)) => {
                put(out, &(if v.is_nan() { f32::NAN } else { v }).to_le_bytes())
            }
            (K::Double, Datum::Double(v)) => {
                put(out, &(if v.is_nan() { f64::NAN } else { v }).to_le_bytes())
            }
            (K::BigInt, Datum::BigInt(v)) => put(out, &v.to_le_bytes()),
            (K::String | K::Char { .. }, Datum::String(v)) => {
                put_var(out, start, at, v.as_bytes(), true)?
            }
            (K::Bytes | K::Binary { .. }, Datum::Binary(v)) => put_var(out, start, at, v, true)?,
            (K::Decimal { precision }, Datum::Decimal(v)) => {
                if !decimal_fits(v, precision) {
                    return Err(ValueRefusal::OutOfRange(reason::DECIMAL_DIGITS));
                }
                if precision <= DECIMAL_COMPACT_PRECISION_MAX {
                    put(out, &(v as i64).to_le_bytes());
                } else {
                    // A fixed 16-byte region, the minimal bytes at its start.
                    let (bytes, from) = unscaled_be_bytes(v);
                    let offset = out.len() - start;
                    out.extend_from_slice(&bytes[from..]);
                    out.resize(out.len() + from, 0);
                    set_slot(out, at, offset, bytes.len() - from);
                }
            }
            (K::Timestamp { precision }, Datum::Timestamp(t))
            | (K::TimestampLtz { precision }, Datum::TimestampLtz(t)) => {
                if precision <= TIMESTAMP_COMPACT_PRECISION_MAX {
                    put(out, &t.millis().to_le_bytes());
                } else {
                    let offset = out.len() - start;
                    out.extend_from_slice(&t.millis().to_le_bytes());
                    set_slot(out, at, offset, t.nanos_of_milli() as usize);
                }
            }
            _ => return Err(ValueRefusal::Mismatch),
        },
        (NestedType::Array(_), Datum::Array(v))
        | (NestedType::Map { .. }, Datum::Map(v))
        | (NestedType::Row(_), Datum::Row(v)) => put_var(out, start, at, v, false)?,
        _ => return Err(ValueRefusal::Mismatch),
    }
    Ok(())
}

/// A variable-width value: inline when allowed and short enough, else
/// appended to the var part, padded to a word, and pointed at.
fn put_var(
    out: &mut Vec<u8>,
    start: usize,
    at: usize,
    bytes: &[u8],
    inline: bool,
) -> Result<(), ValueRefusal> {
    if inline && bytes.len() <= INLINE_MAX {
        out[at..at + bytes.len()].copy_from_slice(bytes);
        out[at + 7] = 0x80 | bytes.len() as u8;
        return Ok(());
    }
    let offset = out.len() - start;
    if offset + bytes.len() > i32::MAX as usize {
        return Err(ValueRefusal::OutOfRange(reason::TOO_LONG));
    }
    out.extend_from_slice(bytes);
    out.resize(start + round_to_word(offset + bytes.len()), 0);
    set_slot(out, at, offset, bytes.len());
    Ok(())
}

fn set_slot(out: &mut [u8], at: usize, offset: usize, size: usize) {
    let slot = ((offset as u64) << 32) | (size as u64 & 0xffff_ffff);
    out[at..at + 8].copy_from_slice(&slot.to_le_bytes());
}

/// Appends the `BinaryMap` of `keys` and `values` (as many of each) to
/// `out`: the key array's size, the key array, the value array
/// (`BinaryMap.valueOf`). On a refusal `out` is left as it was.
pub fn write_map(
    key: &NestedField,
    value: &NestedField,
    keys: &[Datum<'_>],
    values: &[Datum<'_>],
    out: &mut Vec<u8>,
) -> Result<(), ValueRefusal> {
    if keys.len() != values.len() {
        return Err(ValueRefusal::Mismatch);
    }
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let result = write_array(key, keys, out).and_then(|()| {
        let size = (out.len() - start - 4) as i32;
        out[start..start + 4].copy_from_slice(&size.to_le_bytes());
        write_array(value, values, out)
    });
    if result.is_err() {
        out.truncate(start);
    }
    result
}
