//! Fluss's binary rows for primary-key tables: the two `table.kv.format`s
//! and the key encoding, as pure functions over caller-owned buffers.
//!
//! - [`compacted`]: COMPACTED rows (varints, no fixed offsets; the default
//!   format and the only one fluss-rs writes), and the per-value encoding
//!   the key encoder and the client's bucket-key hashing share.
//! - [`indexed`]: INDEXED rows (fixed-width values, a length list for the
//!   variable-width ones).
//! - [`key`]: the compacted key of the primary-key (or bucket-key) columns.
//! - [`RowCodec`]: one type over both formats, built per (format, row type),
//!   so the server handles either `table.kv.format` the same way.
//!
//! Everything here is built once per row type (the "row type" is the
//! table's column types, `&[DataType]`) and then used per record: decoding
//! borrows strings and bytes from the input into [`Datum`]s pushed on a
//! caller-owned `Vec`, encoding appends to a caller-owned `Vec<u8>`, so
//! the per-record path allocates nothing once those have grown.
//!
//! Decoders accept exactly the bytes the Java and fluss-rs writers produce
//! and nothing else: every length is checked before use, every varint must
//! be canonical, padding must be zero, and a row must end at its last
//! field. So `encode(decode(bytes)) == bytes` for every accepted input,
//! which the fuzz targets assert.
//!
//! Nested types (ARRAY, MAP, ROW) are value columns of COMPACTED rows
//! ([`nested`]: their bytes are carried as [`Datum::Array`], [`Datum::Map`],
//! [`Datum::Row`] and checked all the way down when a row is decoded). Key
//! columns cannot be nested, as in Fluss, and INDEXED rows refuse them
//! (Fluss has them there; Fjord does not yet).

pub mod compacted;
pub mod indexed;
pub mod key;
pub mod nested;

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use crate::datum::Datum;
use crate::types::{DataType, TypeKind};

use compacted::{CompactedRowDecoder, CompactedRowWriter};
use indexed::{IndexedRowDecoder, IndexedRowWriter};

/// Largest DECIMAL precision whose unscaled value is stored as a long
/// (`Decimal.MAX_COMPACT_PRECISION`); larger ones are stored as bytes.
pub const DECIMAL_COMPACT_PRECISION_MAX: u8 = 18;
/// Largest TIMESTAMP / TIMESTAMP_LTZ precision stored as milliseconds alone
/// (`TimestampNtz.isCompact`); larger ones add the nanoseconds of the
/// millisecond.
pub const TIMESTAMP_COMPACT_PRECISION_MAX: u8 = 3;
/// Most bytes of a non-compact DECIMAL's unscaled value: 38 digits fit in
/// 16 bytes of two's complement. A longer length is refused before it is
/// used, so a corrupt length cannot ask for a wider integer than `i128`.
pub const DECIMAL_UNSCALED_BYTES_MAX: usize = 16;
/// Longest STRING / BYTES value (and most bytes of any length-prefixed
/// value): Java's `int` lengths. A longer value is refused when written,
/// and a length field above it is refused when read.
pub const VAR_LENGTH_MAX: usize = i32::MAX as usize;

/// How one column's values are laid out, decided once from its Fluss type.
///
/// Guarantees: every flat variant has an encoding in both row formats and
/// in the key format; the nested ones (`Array`, `Map`, `Row`) only in
/// COMPACTED rows, and [`ColumnKind::of`] (what keys use) refuses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnKind {
    /// BOOLEAN.
    Boolean,
    /// TINYINT.
    TinyInt,
    /// SMALLINT.
    SmallInt,
    /// INT.
    Int,
    /// BIGINT.
    BigInt,
    /// FLOAT.
    Float,
    /// DOUBLE.
    Double,
    /// CHAR(length): like STRING in COMPACTED rows, `length` bytes in INDEXED rows.
    Char {
        /// Declared length.
        length: u32,
    },
    /// STRING.
    String,
    /// BINARY(length): like BYTES in COMPACTED rows, `length` bytes in INDEXED rows.
    Binary {
        /// Declared length.
        length: u32,
    },
    /// BYTES.
    Bytes,
    /// DECIMAL(precision, scale); the scale does not change the bytes.
    Decimal {
        /// Total digits, `1..=38`.
        precision: u8,
    },
    /// DATE.
    Date,
    /// TIME(p): milliseconds of the day whatever the precision.
    Time,
    /// TIMESTAMP(precision).
    Timestamp {
        /// Fractional-second digits.
        precision: u8,
    },
    /// TIMESTAMP_LTZ(precision).
    TimestampLtz {
        /// Fractional-second digits.
        precision: u8,
    },
    /// ARRAY: a varint length and a `BinaryArray` in COMPACTED rows.
    Array,
    /// MAP: a varint length and a `BinaryMap` in COMPACTED rows.
    Map,
    /// ROW: a varint length and a nested COMPACTED row.
    Row,
}

impl ColumnKind {
    /// The kind of a row column of type `kind`, nested types included
    /// (their element types are the row decoder's business).
    pub fn of_value(kind: &TypeKind) -> Self {
        match kind {
            TypeKind::Array(_) => Self::Array,
            TypeKind::Map { .. } => Self::Map,
            TypeKind::Row(_) => Self::Row,
            flat => Self::of(flat).expect("every flat type has a kind"),
        }
    }

    /// Whether this is ARRAY, MAP or ROW.
    pub const fn is_nested(&self) -> bool {
        matches!(self, Self::Array | Self::Map | Self::Row)
    }

    /// The kind of a column of type `kind`; `None` for ARRAY, MAP and ROW.
    pub fn of(kind: &TypeKind) -> Option<Self> {
        Some(match kind {
            TypeKind::Boolean => Self::Boolean,
            TypeKind::TinyInt => Self::TinyInt,
            TypeKind::SmallInt => Self::SmallInt,
            TypeKind::Int => Self::Int,
            TypeKind::BigInt => Self::BigInt,
            TypeKind::Float => Self::Float,
            TypeKind::Double => Self::Double,
            TypeKind::Char { length } => Self::Char { length: *length },
            TypeKind::String => Self::String,
            TypeKind::Binary { length } => Self::Binary { length: *length },
            TypeKind::Bytes => Self::Bytes,
            TypeKind::Decimal { precision, .. } => Self::Decimal {
                precision: *precision,
            },
            TypeKind::Date => Self::Date,
            TypeKind::Time { .. } => Self::Time,
            TypeKind::Timestamp { precision } => Self::Timestamp {
                precision: *precision,
            },
            TypeKind::TimestampLtz { precision } => Self::TimestampLtz {
                precision: *precision,
            },
            TypeKind::Array(_) | TypeKind::Map { .. } | TypeKind::Row(_) => return None,
        })
    }

    /// The Fluss type root of this kind (`"INT"`, `"DECIMAL"`, ...), for messages.
    pub const fn type_name(&self) -> &'static str {
        match self {
            Self::Boolean => "BOOLEAN",
            Self::TinyInt => "TINYINT",
            Self::SmallInt => "SMALLINT",
            Self::Int => "INT",
            Self::BigInt => "BIGINT",
            Self::Float => "FLOAT",
            Self::Double => "DOUBLE",
            Self::Char { .. } => "CHAR",
            Self::String => "STRING",
            Self::Binary { .. } => "BINARY",
            Self::Bytes => "BYTES",
            Self::Decimal { .. } => "DECIMAL",
            Self::Date => "DATE",
            Self::Time => "TIME",
            Self::Timestamp { .. } => "TIMESTAMP",
            Self::TimestampLtz { .. } => "TIMESTAMP_LTZ",
            Self::Array => "ARRAY",
            Self::Map => "MAP",
            Self::Row => "ROW",
        }
    }
}

impl fmt::Display for ColumnKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Char { length } | Self::Binary { length } => {
                write!(f, "{}({length})", self.type_name())
            }
            Self::Decimal { precision } => write!(f, "DECIMAL({precision})"),
            Self::Timestamp { precision } | Self::TimestampLtz { precision } => {
                write!(f, "{}({precision})", self.type_name())
            }
            _ => f.write_str(self.type_name()),
        }
    }
}

/// One column of a row type as the row codecs see it: its kind and whether
/// it may hold NULL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldType {
    /// How the column's values are laid out.
    pub kind: ColumnKind,
    /// Whether the column accepts NULL.
    pub nullable: bool,
}

impl FieldType {
    /// The field type of `data_type`; `None` for ARRAY, MAP and ROW.
    pub fn of(data_type: &DataType) -> Option<Self> {
        Some(Self {
            kind: ColumnKind::of(data_type.kind())?,
            nullable: data_type.is_nullable(),
        })
    }
}

/// The field types of `row_type`, nested columns included.
pub(crate) fn field_types(row_type: &[DataType]) -> Box<[FieldType]> {
    row_type
        .iter()
        .map(|data_type| FieldType {
            kind: ColumnKind::of_value(data_type.kind()),
            nullable: data_type.is_nullable(),
        })
        .collect()
}

/// Bytes of the null bitset of a row of `arity` fields: one bit a field,
/// rounded up to whole bytes (`CompactedRow.calculateBitSetWidthInBytes`).
pub const fn null_bits_bytes(arity: usize) -> usize {
    arity.div_ceil(8)
}

/// Whether bit `field` of the null bitset at the start of `row` is set
/// (field `i` is bit `i % 8`, least significant first, of byte `i / 8`).
/// Callers keep `field` below the arity the bitset was sized for.
#[inline]
pub(crate) fn is_null_bit_set(row: &[u8], field: usize) -> bool {
    row[field / 8] & (1 << (field % 8)) != 0
}

/// Checks that a null bitset of `arity` bits leaves its padding bits clear
/// (the writers never set them). `bits` is exactly the bitset.
pub(crate) fn check_null_padding(bits: &[u8], arity: usize) -> Result<(), RowError> {
    let used = arity % 8;
    match bits.last() {
        Some(&last) if used != 0 && last >> used != 0 => Err(RowError::NullPadding { arity }),
        _ => Ok(()),
    }
}

/// `10^p` for `p` in `0..=38`: the exclusive bound of a DECIMAL(p)'s
/// unscaled magnitude.
const POW10: [u128; 39] = {
    let mut table = [1u128; 39];
    let mut i = 1;
    while i < 39 {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

/// Whether the unscaled value `v` has at most `precision` digits.
#[inline]
pub(crate) fn decimal_fits(v: i128, precision: u8) -> bool {
    match POW10.get(usize::from(precision)) {
        Some(bound) => v.unsigned_abs() < *bound,
        None => false,
    }
}

/// What is wrong with a row, a key, or a row type.
///
/// `column` is the position in the row type (for keys: the position in the
/// row for encoding, the position within the key for decoding); `offset` is
/// a byte position within the row or key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    /// The row type has a column these codecs cannot handle.
    #[error(
        "column {column} has type {type_root}, which is not supported in primary-key rows yet"
    )]
    UnsupportedType {
        /// Position of the column.
        column: usize,
        /// Its Fluss type root.
        type_root: &'static str,
    },
    /// An INDEXED row type with a nested column: Fjord reads and writes
    /// nested values in COMPACTED rows only.
    #[error(
        "column {column} has type {type_root}, which Fjord supports in COMPACTED rows only \
         (table.kv.format = INDEXED)"
    )]
    NestedInIndexed {
        /// Position of the column.
        column: usize,
        /// Its Fluss type root.
        type_root: &'static str,
    },
    /// A key names no column.
    #[error("a key needs at least one column")]
    EmptyKey,
    /// A key position is outside the row type.
    #[error("key column position {position} is outside a row of {arity} columns")]
    KeyPositionOutOfRange {
        /// The position given.
        position: usize,
        /// Columns of the row type.
        arity: usize,
    },
    /// A row to encode has another number of fields than its type.
    #[error("the row has {given} fields but its type has {expected} columns")]
    ArityMismatch {
        /// Columns of the row type.
        expected: usize,
        /// Fields given.
        given: usize,
    },
    /// A writer was finished with another number of fields than its arity.
    #[error("{written} fields were written to a row of {arity} columns")]
    IncompleteRow {
        /// Fields written.
        written: usize,
        /// Columns of the row.
        arity: usize,
    },
    /// NULL given for, or found in, a NOT NULL or key column.
    #[error("column {column} ({column_type}) cannot be NULL")]
    NullNotAllowed {
        /// Position of the column.
        column: usize,
        /// Its type.
        column_type: &'static str,
    },
    /// A value of another type family than its column's.
    #[error("column {column} is {column_type} but the value is {value_type}")]
    TypeMismatch {
        /// Position of the column.
        column: usize,
        /// The column's type.
        column_type: &'static str,
        /// The value's type family.
        value_type: &'static str,
    },
    /// A value its column's type cannot hold.
    #[error("column {column} ({column_type}): {reason}")]
    ValueOutOfRange {
        /// Position of the column.
        column: usize,
        /// The column's type.
        column_type: &'static str,
        /// What does not fit.
        reason: &'static str,
    },
    /// The bytes are shorter than the row's fixed header.
    #[error("row of {size} bytes is shorter than its {header_size}-byte header")]
    ShorterThanHeader {
        /// Bytes given.
        size: usize,
        /// Bytes the header takes.
        header_size: usize,
    },
    /// The null bitset sets a bit past the last column.
    #[error("the null bitset of a row of {arity} columns sets a padding bit")]
    NullPadding {
        /// Columns of the row.
        arity: usize,
    },
    /// A value runs past the end of the bytes.
    #[error("column {column}: needs {needed} bytes at offset {offset}, only {available} remain")]
    Truncated {
        /// Position of the column.
        column: usize,
        /// Where the value starts.
        offset: usize,
        /// Bytes it needs.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// A varint that is too long, too wide or not in canonical form.
    #[error("column {column}: malformed varint at offset {offset}")]
    BadVarint {
        /// Position of the column.
        column: usize,
        /// Where the varint starts.
        offset: usize,
    },
    /// A length field that is negative or above the format's maximum.
    #[error("column {column}: invalid length {length} at offset {offset}")]
    BadLength {
        /// Position of the column.
        column: usize,
        /// Where the length field starts.
        offset: usize,
        /// Its value.
        length: i64,
    },
    /// STRING or CHAR bytes that are not UTF-8.
    #[error("column {column}: text at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// Position of the column.
        column: usize,
        /// Where the text starts.
        offset: usize,
    },
    /// A value whose bytes no writer produces (a boolean of 2, nanoseconds
    /// past a millisecond, a decimal wider than its precision, ...).
    #[error("column {column}: invalid value at offset {offset}: {reason}")]
    InvalidValue {
        /// Position of the column.
        column: usize,
        /// Where the value starts.
        offset: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// An INDEXED row's length list has a nonzero slot past the lengths of
    /// its non-null variable-width values (the writer leaves them zero).
    #[error("unused variable-length slot at offset {offset} is not zero")]
    UnusedLengthSlot {
        /// Position of the first nonzero byte.
        offset: usize,
    },
    /// Bytes remain after the last field.
    #[error("{size}-byte row ends at byte {end}; the rest is not part of it")]
    TrailingBytes {
        /// Where the last field ends.
        end: usize,
        /// Bytes given.
        size: usize,
    },
}

/// What went wrong reading one value, and where; [`Fault::at`] names the
/// column once the reader knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    /// Byte position the problem starts at.
    pub(crate) offset: usize,
    pub(crate) kind: FaultKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// `needed` bytes from `offset` are not all there.
    Truncated {
        needed: usize,
    },
    BadVarint,
    BadLength {
        length: i64,
    },
    InvalidUtf8,
    Invalid(&'static str),
}

impl Fault {
    pub(crate) const fn new(offset: usize, kind: FaultKind) -> Self {
        Self { offset, kind }
    }

    /// The error for this fault in `column` of a `size`-byte input.
    #[cold]
    pub(crate) fn at(self, column: usize, size: usize) -> RowError {
        let offset = self.offset;
        match self.kind {
            FaultKind::Truncated { needed } => RowError::Truncated {
                column,
                offset,
                needed,
                available: size.saturating_sub(offset),
            },
            FaultKind::BadVarint => RowError::BadVarint { column, offset },
            FaultKind::BadLength { length } => RowError::BadLength {
                column,
                offset,
                length,
            },
            FaultKind::InvalidUtf8 => RowError::InvalidUtf8 { column, offset },
            FaultKind::Invalid(reason) => RowError::InvalidValue {
                column,
                offset,
                reason,
            },
        }
    }
}

/// Why one value could not be written, for callers that add their own
/// context ([`compacted::write_value`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueRefusal {
    /// The value is NULL where the encoding has no NULL (keys).
    Null,
    /// The datum's type family is not the column's.
    Mismatch,
    /// The column's type cannot hold the value.
    OutOfRange(&'static str),
}

impl ValueRefusal {
    /// The row error for this refusal of `datum` in `column` of kind `kind`.
    #[cold]
    pub fn at(self, column: usize, kind: ColumnKind, datum: &Datum<'_>) -> RowError {
        match self {
            ValueRefusal::Null => RowError::NullNotAllowed {
                column,
                column_type: kind.type_name(),
            },
            ValueRefusal::Mismatch => RowError::TypeMismatch {
                column,
                column_type: kind.type_name(),
                value_type: datum.type_name(),
            },
            ValueRefusal::OutOfRange(reason) => RowError::ValueOutOfRange {
                column,
                column_type: kind.type_name(),
                reason,
            },
        }
    }
}

/// Reasons a value does not fit its column, shared by the writers.
pub(crate) mod reason {
    pub(crate) const DECIMAL_DIGITS: &str = "unscaled value has more digits than the precision";
    pub(crate) const TOO_LONG: &str = "value is longer than 2^31 - 1 bytes";
    pub(crate) const CHAR_TOO_LONG: &str =
        "INDEXED rows store CHAR(n) in n bytes; the UTF-8 value is longer";
    pub(crate) const BINARY_TOO_LONG: &str =
        "INDEXED rows store BINARY(n) in n bytes; the value is longer";
}

/// The row format of a primary-key table: its `table.kv.format` option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RowFormat {
    /// `COMPACTED` (Fluss's default).
    #[default]
    Compacted,
    /// `INDEXED`.
    Indexed,
}

impl RowFormat {
    /// The option value, as Fluss spells it.
    pub const fn as_str(&self) -> &'static str {
        match self {
            RowFormat::Compacted => "COMPACTED",
            RowFormat::Indexed => "INDEXED",
        }
    }
}

impl fmt::Display for RowFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `table.kv.format` value that is neither COMPACTED nor INDEXED.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported kv format `{0}` (expected COMPACTED or INDEXED)")]
pub struct UnknownRowFormat(pub String);

impl FromStr for RowFormat {
    type Err = UnknownRowFormat;

    /// Parses an option value case-insensitively (`KvFormat.fromString`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("COMPACTED") {
            Ok(RowFormat::Compacted)
        } else if s.eq_ignore_ascii_case("INDEXED") {
            Ok(RowFormat::Indexed)
        } else {
            Err(UnknownRowFormat(s.to_owned()))
        }
    }
}

/// Decoder, validator and encoder of one row type in one row format: what
/// the server builds once per (table schema, `table.kv.format`).
///
/// Guarantees: built only for row types it can read (nested columns only
/// in COMPACTED); `decode`
/// and `validate` accept the same bytes; `encode` output is accepted by
/// both and decodes to the datums given (up to the precision the format
/// keeps: TIMESTAMP(p <= 3) drops nanoseconds; INDEXED CHAR/BINARY drop
/// trailing zero bytes, as Fluss's `IndexedRow` does).
#[derive(Clone, Debug)]
pub struct RowCodec {
    inner: Inner,
}

#[derive(Clone, Debug)]
enum Inner {
    Compacted(CompactedRowDecoder),
    Indexed(IndexedRowDecoder),
}

impl RowCodec {
    /// The codec of rows of `row_type` in `format`. Fails for a nested
    /// column in INDEXED.
    pub fn new(format: RowFormat, row_type: &[DataType]) -> Result<Self, RowError> {
        let inner = match format {
            RowFormat::Compacted => Inner::Compacted(CompactedRowDecoder::new(row_type)?),
            RowFormat::Indexed => Inner::Indexed(IndexedRowDecoder::new(row_type)?),
        };
        Ok(Self { inner })
    }

    /// The format this codec reads and writes.
    pub fn format(&self) -> RowFormat {
        match self.inner {
            Inner::Compacted(_) => RowFormat::Compacted,
            Inner::Indexed(_) => RowFormat::Indexed,
        }
    }

    /// The row type's columns.
    pub fn fields(&self) -> &[FieldType] {
        match &self.inner {
            Inner::Compacted(d) => d.fields(),
            Inner::Indexed(d) => d.fields(),
        }
    }

    /// Decodes `bytes` (exactly one row) into `out`, which is cleared first
    /// and holds one datum per column on success (cleared again on error).
    pub fn decode<'a>(&self, bytes: &'a [u8], out: &mut Vec<Datum<'a>>) -> Result<(), RowError> {
        match &self.inner {
            Inner::Compacted(d) => d.decode(bytes, out),
            Inner::Indexed(d) => d.decode(bytes, out),
        }
    }

    /// Checks that `bytes` is exactly one well-formed row, as `decode`
    /// would, without producing datums.
    pub fn validate(&self, bytes: &[u8]) -> Result<(), RowError> {
        match &self.inner {
            Inner::Compacted(d) => d.validate(bytes),
            Inner::Indexed(d) => d.validate(bytes),
        }
    }

    /// Appends the encoding of `row` (one datum per column) to `out` and
    /// returns where it lies. On error `out` is left as it was.
    pub fn encode(&self, row: &[Datum<'_>], out: &mut Vec<u8>) -> Result<Range<usize>, RowError> {
        let start = out.len();
        let result = self.encode_inner(row, out);
        match result {
            Ok(()) => Ok(start..out.len()),
            Err(e) => {
                out.truncate(start);
                Err(e)
            }
        }
    }

    fn encode_inner(&self, row: &[Datum<'_>], out: &mut Vec<u8>) -> Result<(), RowError> {
        let fields = self.fields();
        if row.len() != fields.len() {
            return Err(RowError::ArityMismatch {
                expected: fields.len(),
                given: row.len(),
            });
        }
        match &self.inner {
            Inner::Compacted(decoder) => {
                decoder.check_nested_datums(row)?;
                let mut writer = CompactedRowWriter::new(out, fields.len());
                for (field, datum) in fields.iter().zip(row) {
                    writer.write_datum(*field, datum)?;
                }
                writer.finish().map(|_| ())
            }
            Inner::Indexed(decoder) => {
                let mut writer = IndexedRowWriter::new(decoder, out);
                for datum in row {
                    writer.write_datum(datum)?;
                }
                writer.finish().map(|_| ())
            }
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod nested_tests;
