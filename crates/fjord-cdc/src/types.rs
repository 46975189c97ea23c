//! The column types of change events, following Flink CDC's type system and its
//! MySQL type mapping, and how each type is stored in a [`crate::row`] slot.
//!
//! MySQL → Fjord mapping (the Flink CDC MySQL connector's table; a source maps
//! once per table schema version, never per row):
//!
//! | MySQL                                   | [`DataType`]                         |
//! |-----------------------------------------|--------------------------------------|
//! | `TINYINT(1)`, `BOOLEAN`, `BIT(1)`       | `Boolean`                            |
//! | `TINYINT`                               | `TinyInt`                            |
//! | `TINYINT UNSIGNED`, `SMALLINT`          | `SmallInt`                           |
//! | `SMALLINT UNSIGNED`, `MEDIUMINT [UNSIGNED]`, `INT`, `YEAR` | `Int`             |
//! | `INT UNSIGNED`, `BIGINT`                | `BigInt`                             |
//! | `BIGINT UNSIGNED`, `SERIAL`             | `Decimal { precision: 20, scale: 0 }` |
//! | `FLOAT`                                 | `Float`                              |
//! | `DOUBLE`, `REAL`                        | `Double`                             |
//! | `DECIMAL(p,s)`, `NUMERIC(p,s)`          | `Decimal { p, s }` (p ≤ 65)          |
//! | `CHAR(n)`                               | `Char { length: n }`                 |
//! | `VARCHAR(n)`                            | `Varchar { length: n }`              |
//! | `TEXT` family, `ENUM`, `SET`            | `String`                             |
//! | `JSON`                                  | `Json` (Flink: `STRING`)             |
//! | `BINARY(n)`                             | `Binary { length: n }`               |
//! | `VARBINARY(n)`                          | `Varbinary { length: n }`            |
//! | `BLOB` family                           | `Bytes`                              |
//! | `BIT(n)`, n > 1                         | `Binary { length: (n + 7) / 8 }`     |
//! | `DATE`                                  | `Date`                               |
//! | `TIME(p)`                               | `Time { precision: p }`              |
//! | `DATETIME(p)`                           | `Timestamp { precision: p }`         |
//! | `TIMESTAMP(p)`                          | `TimestampLtz { precision: p }`      |

use std::fmt;

/// Largest decimal precision a column may declare (MySQL's `DECIMAL(65, s)`).
/// Protects the print sink's fixed-size formatting buffers.
pub const DECIMAL_PRECISION_MAX: u8 = 65;

/// Largest decimal precision stored inline as an unscaled `i64` in the row's
/// fixed slot; wider decimals are stored as an exact digit string.
pub const DECIMAL_COMPACT_PRECISION_MAX: u8 = 18;

/// Largest fractional-second precision of `TIME`/`TIMESTAMP` types (nanoseconds).
pub const TEMPORAL_PRECISION_MAX: u8 = 9;

/// Largest fractional-second precision stored as microseconds; `7..=9` are stored
/// as nanoseconds (the range of an `i64` of nanoseconds, 1677–2262, is the range
/// Debezium's `NanoTimestamp` itself has).
pub const TEMPORAL_MICROS_PRECISION_MAX: u8 = 6;

/// A column's logical type. Constructed by a source when it maps a table's
/// definition; immutable afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `BOOLEAN`.
    Boolean,
    /// `TINYINT`, signed 8-bit.
    TinyInt,
    /// `SMALLINT`, signed 16-bit.
    SmallInt,
    /// `INT`, signed 32-bit.
    Int,
    /// `BIGINT`, signed 64-bit.
    BigInt,
    /// `FLOAT`, IEEE-754 single precision.
    Float,
    /// `DOUBLE`, IEEE-754 double precision.
    Double,
    /// `DECIMAL(precision, scale)`, exact: 1 ≤ precision ≤ [`DECIMAL_PRECISION_MAX`], scale ≤ precision.
    Decimal {
        /// Total number of digits.
        precision: u8,
        /// Digits after the decimal point.
        scale: u8,
    },
    /// `CHAR(length)`, UTF-8.
    Char {
        /// Declared length in characters.
        length: u32,
    },
    /// `VARCHAR(length)`, UTF-8.
    Varchar {
        /// Declared maximum length in characters.
        length: u32,
    },
    /// `STRING` (unbounded UTF-8).
    String,
    /// A JSON document held as UTF-8 text. Flink CDC maps it to `STRING`; Fjord
    /// keeps the distinction so the print sink can nest it as JSON.
    Json,
    /// `BINARY(length)`.
    Binary {
        /// Declared length in bytes.
        length: u32,
    },
    /// `VARBINARY(length)`.
    Varbinary {
        /// Declared maximum length in bytes.
        length: u32,
    },
    /// `BYTES` (unbounded binary).
    Bytes,
    /// `DATE`: days since 1970-01-01.
    Date,
    /// `TIME(precision)`: time of day (MySQL allows ±838 hours), signed.
    Time {
        /// Fractional-second digits, 0..=9.
        precision: u8,
    },
    /// `TIMESTAMP(precision)`: a date-time without time zone (MySQL `DATETIME`).
    Timestamp {
        /// Fractional-second digits, 0..=9.
        precision: u8,
    },
    /// `TIMESTAMP_LTZ(precision)`: an instant (MySQL `TIMESTAMP`), stored as UTC.
    TimestampLtz {
        /// Fractional-second digits, 0..=9.
        precision: u8,
    },
}

/// How a value of a [`DataType`] is stored in a row: derived once per column
/// when a [`crate::row::RowLayout`] is prepared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    /// `0`/`1` in the slot.
    Bool,
    /// Sign-extended `i64` in the slot (every integer type, `Date` days).
    Int,
    /// `f32` bits in the slot.
    Float,
    /// `f64` bits in the slot.
    Double,
    /// Unscaled `i64` in the slot (decimal precision ≤ 18).
    DecimalCompact,
    /// Variable part: unscaled digits as ASCII, optional leading `-` (precision > 18).
    DecimalDigits,
    /// Variable part: UTF-8 text.
    Text,
    /// Variable part: raw bytes.
    Bytes,
    /// `i64` in the slot: microseconds (precision ≤ 6).
    Micros,
    /// `i64` in the slot: nanoseconds (precision 7..=9).
    Nanos,
}

impl DataType {
    /// The storage kind of this type in a row slot.
    pub fn slot_kind(self) -> SlotKind {
        match self {
            DataType::Boolean => SlotKind::Bool,
            DataType::TinyInt
            | DataType::SmallInt
            | DataType::Int
            | DataType::BigInt
            | DataType::Date => SlotKind::Int,
            DataType::Float => SlotKind::Float,
            DataType::Double => SlotKind::Double,
            DataType::Decimal { precision, .. } => {
                if precision <= DECIMAL_COMPACT_PRECISION_MAX {
                    SlotKind::DecimalCompact
                } else {
                    SlotKind::DecimalDigits
                }
            }
            DataType::Char { .. }
            | DataType::Varchar { .. }
            | DataType::String
            | DataType::Json => SlotKind::Text,
            DataType::Binary { .. } | DataType::Varbinary { .. } | DataType::Bytes => {
                SlotKind::Bytes
            }
            DataType::Time { precision }
            | DataType::Timestamp { precision }
            | DataType::TimestampLtz { precision } => {
                if precision <= TEMPORAL_MICROS_PRECISION_MAX {
                    SlotKind::Micros
                } else {
                    SlotKind::Nanos
                }
            }
        }
    }

    /// Checks the type's parameters (decimal precision/scale, temporal precision).
    /// Sources call this once when they map a column, so rows never carry an
    /// invalid type.
    pub fn validate(self) -> Result<(), InvalidType> {
        let valid = match self {
            DataType::Decimal { precision, scale } => {
                precision != 0 && precision <= DECIMAL_PRECISION_MAX && scale <= precision
            }
            DataType::Time { precision }
            | DataType::Timestamp { precision }
            | DataType::TimestampLtz { precision } => precision <= TEMPORAL_PRECISION_MAX,
            _ => true,
        };
        if !valid {
            return Err(InvalidType(self));
        }
        Ok(())
    }
}

/// A type whose parameters are out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid column type {0}: decimal precision must be 1..=65 with scale <= precision, temporal precision 0..=9")]
pub struct InvalidType(pub DataType);

/// Flink SQL spelling of the type (`DECIMAL(20, 0)`, `TIMESTAMP_LTZ(3)`), used in
/// schema-change output and error messages (never per row).
impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DataType::Boolean => f.write_str("BOOLEAN"),
            DataType::TinyInt => f.write_str("TINYINT"),
            DataType::SmallInt => f.write_str("SMALLINT"),
            DataType::Int => f.write_str("INT"),
            DataType::BigInt => f.write_str("BIGINT"),
            DataType::Float => f.write_str("FLOAT"),
            DataType::Double => f.write_str("DOUBLE"),
            DataType::Decimal { precision, scale } => write!(f, "DECIMAL({precision}, {scale})"),
            DataType::Char { length } => write!(f, "CHAR({length})"),
            DataType::Varchar { length } => write!(f, "VARCHAR({length})"),
            DataType::String => f.write_str("STRING"),
            DataType::Json => f.write_str("JSON"),
            DataType::Binary { length } => write!(f, "BINARY({length})"),
            DataType::Varbinary { length } => write!(f, "VARBINARY({length})"),
            DataType::Bytes => f.write_str("BYTES"),
            DataType::Date => f.write_str("DATE"),
            DataType::Time { precision } => write!(f, "TIME({precision})"),
            DataType::Timestamp { precision } => write!(f, "TIMESTAMP({precision})"),
            DataType::TimestampLtz { precision } => write!(f, "TIMESTAMP_LTZ({precision})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_wider_than_18_digits_is_stored_as_digits() {
        assert_eq!(
            DataType::Decimal {
                precision: 18,
                scale: 2
            }
            .slot_kind(),
            SlotKind::DecimalCompact
        );
        assert_eq!(
            DataType::Decimal {
                precision: 20,
                scale: 0
            }
            .slot_kind(),
            SlotKind::DecimalDigits
        );
    }

    #[test]
    fn sub_microsecond_precision_is_stored_as_nanos() {
        assert_eq!(
            DataType::Timestamp { precision: 6 }.slot_kind(),
            SlotKind::Micros
        );
        assert_eq!(
            DataType::TimestampLtz { precision: 9 }.slot_kind(),
            SlotKind::Nanos
        );
    }

    #[test]
    fn out_of_range_parameters_are_rejected() {
        assert!(DataType::Decimal {
            precision: 66,
            scale: 0
        }
        .validate()
        .is_err());
        assert!(DataType::Decimal {
            precision: 5,
            scale: 6
        }
        .validate()
        .is_err());
        assert!(DataType::Decimal {
            precision: 0,
            scale: 0
        }
        .validate()
        .is_err());
        assert!(DataType::Time { precision: 10 }.validate().is_err());
        assert!(DataType::Decimal {
            precision: 65,
            scale: 30
        }
        .validate()
        .is_ok());
    }
}
