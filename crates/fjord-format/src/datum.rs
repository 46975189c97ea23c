//! One field value as Fluss rows carry it: [`Datum`] (borrowed, `Copy`)
//! and [`Timestamp`] (milliseconds plus nanoseconds of the millisecond).
//!
//! Shared by the client (rows handed to the writer, keys hashed to pick a
//! bucket) and the server (KV rows and keys decoded from the wire), so both
//! mean the same thing by a value. Value conventions follow Fluss's
//! `InternalRow` (`fluss-common/.../row/InternalRow.java`):
//! - DECIMAL is the unscaled integer; the column's scale gives the point.
//! - DATE is days since 1970-01-01, TIME is milliseconds of the day.
//! - TIMESTAMP and TIMESTAMP_LTZ are milliseconds since the epoch plus the
//!   nanoseconds within that millisecond ([`Timestamp`]); TIMESTAMP has no
//!   zone (a wall-clock reading), TIMESTAMP_LTZ is an instant.
//! - CHAR and STRING are UTF-8 text; BYTES and BINARY(n) are raw bytes.
//! - ARRAY, MAP and ROW are their Fluss binary forms, as a COMPACTED row
//!   embeds them (`BinaryArray`, `BinaryMap`, a nested COMPACTED row):
//!   kept as bytes so a datum stays borrowed and `Copy`, and a stored value
//!   goes back out byte for byte. [`crate::row::nested`] reads and builds
//!   them.

use std::fmt;

/// Nanoseconds in one millisecond: the exclusive upper bound of
/// [`Timestamp::nanos_of_milli`].
pub const NANOS_PER_MILLI: i32 = 1_000_000;

/// A point in time as Fluss rows carry it: milliseconds since the epoch and
/// the nanoseconds within that millisecond.
///
/// Guarantees: `0 <= nanos_of_milli < 1_000_000` (the constructors keep it so;
/// an instant before the epoch has negative millis and a non-negative nanos part).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    millis: i64,
    nanos_of_milli: i32,
}

impl Timestamp {
    /// The timestamp `millis` milliseconds after the epoch.
    pub const fn from_millis(millis: i64) -> Self {
        Self {
            millis,
            nanos_of_milli: 0,
        }
    }

    /// The timestamp `micros` microseconds after the epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Self {
            millis: micros.div_euclid(1_000),
            nanos_of_milli: (micros.rem_euclid(1_000) * 1_000) as i32,
        }
    }

    /// The timestamp `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: i64) -> Self {
        Self {
            millis: nanos.div_euclid(NANOS_PER_MILLI as i64),
            nanos_of_milli: nanos.rem_euclid(NANOS_PER_MILLI as i64) as i32,
        }
    }

    /// The timestamp from its two parts; `None` when `nanos_of_milli` is
    /// outside `0..1_000_000`.
    pub const fn new(millis: i64, nanos_of_milli: i32) -> Option<Self> {
        if nanos_of_milli < 0 || nanos_of_milli >= NANOS_PER_MILLI {
            return None;
        }
        Some(Self {
            millis,
            nanos_of_milli,
        })
    }

    /// Milliseconds since the epoch (rounded towards negative infinity).
    pub const fn millis(&self) -> i64 {
        self.millis
    }

    /// Nanoseconds within the millisecond, in `0..1_000_000`.
    pub const fn nanos_of_milli(&self) -> i32 {
        self.nanos_of_milli
    }
}

/// One field value, borrowed from the caller: no boxing, no allocation, `Copy`.
///
/// Each variant matches exactly one family of Fluss types (see the module
/// doc for the value conventions); the writer refuses a variant that does
/// not match its column's type rather than converting silently.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Datum<'a> {
    /// SQL NULL; accepted only by nullable columns.
    Null,
    /// BOOLEAN.
    Boolean(bool),
    /// TINYINT.
    TinyInt(i8),
    /// SMALLINT.
    SmallInt(i16),
    /// INT.
    Int(i32),
    /// BIGINT.
    BigInt(i64),
    /// FLOAT.
    Float(f32),
    /// DOUBLE.
    Double(f64),
    /// STRING or CHAR(n).
    String(&'a str),
    /// BYTES or BINARY(n).
    Binary(&'a [u8]),
    /// DECIMAL(p, s): the unscaled value (`value * 10^-s` is the number).
    Decimal(i128),
    /// DATE: days since 1970-01-01.
    Date(i32),
    /// TIME(p): milliseconds of the day.
    Time(i32),
    /// TIMESTAMP(p): a wall-clock reading without zone.
    Timestamp(Timestamp),
    /// TIMESTAMP_LTZ(p): an instant.
    TimestampLtz(Timestamp),
    /// ARRAY<T>: the bytes of a Fluss `BinaryArray` (see
    /// [`crate::row::nested`]).
    Array(&'a [u8]),
    /// MAP<K, V>: the bytes of a Fluss `BinaryMap` (key array size, key
    /// array, value array).
    Map(&'a [u8]),
    /// ROW<..>: the bytes of the nested COMPACTED row.
    Row(&'a [u8]),
}

impl<'a> Datum<'a> {
    /// Whether this is [`Datum::Null`].
    pub const fn is_null(&self) -> bool {
        matches!(self, Datum::Null)
    }

    /// The name of the type family this datum belongs to, for error messages.
    pub const fn type_name(&self) -> &'static str {
        match self {
            Datum::Null => "NULL",
            Datum::Boolean(_) => "BOOLEAN",
            Datum::TinyInt(_) => "TINYINT",
            Datum::SmallInt(_) => "SMALLINT",
            Datum::Int(_) => "INT",
            Datum::BigInt(_) => "BIGINT",
            Datum::Float(_) => "FLOAT",
            Datum::Double(_) => "DOUBLE",
            Datum::String(_) => "STRING",
            Datum::Binary(_) => "BYTES",
            Datum::Decimal(_) => "DECIMAL",
            Datum::Date(_) => "DATE",
            Datum::Time(_) => "TIME",
            Datum::Timestamp(_) => "TIMESTAMP",
            Datum::TimestampLtz(_) => "TIMESTAMP_LTZ",
            Datum::Array(_) => "ARRAY",
            Datum::Map(_) => "MAP",
            Datum::Row(_) => "ROW",
        }
    }

    /// The value of a BOOLEAN datum.
    pub const fn as_bool(&self) -> Option<bool> {
        match self {
            Datum::Boolean(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of any integer datum (TINYINT to BIGINT), widened.
    pub const fn as_i64(&self) -> Option<i64> {
        match self {
            Datum::TinyInt(v) => Some(*v as i64),
            Datum::SmallInt(v) => Some(*v as i64),
            Datum::Int(v) => Some(*v as i64),
            Datum::BigInt(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of a FLOAT or DOUBLE datum, widened.
    pub const fn as_f64(&self) -> Option<f64> {
        match self {
            Datum::Float(v) => Some(*v as f64),
            Datum::Double(v) => Some(*v),
            _ => None,
        }
    }

    /// The text of a STRING datum.
    pub const fn as_str(&self) -> Option<&'a str> {
        match self {
            Datum::String(v) => Some(v),
            _ => None,
        }
    }

    /// The bytes of a BYTES datum.
    pub const fn as_bytes(&self) -> Option<&'a [u8]> {
        match self {
            Datum::Binary(v) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for Datum<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Datum::Null => f.write_str("NULL"),
            Datum::Boolean(v) => write!(f, "{v}"),
            Datum::TinyInt(v) => write!(f, "{v}"),
            Datum::SmallInt(v) => write!(f, "{v}"),
            Datum::Int(v) => write!(f, "{v}"),
            Datum::BigInt(v) => write!(f, "{v}"),
            Datum::Float(v) => write!(f, "{v}"),
            Datum::Double(v) => write!(f, "{v}"),
            Datum::String(v) => write!(f, "{v:?}"),
            Datum::Binary(v) => write!(f, "{} bytes", v.len()),
            Datum::Decimal(v) => write!(f, "{v} (unscaled)"),
            Datum::Date(v) => write!(f, "day {v}"),
            Datum::Time(v) => write!(f, "{v} ms of day"),
            Datum::Timestamp(t) | Datum::TimestampLtz(t) => {
                write!(f, "{} ms + {} ns", t.millis, t.nanos_of_milli)
            }
            Datum::Array(v) => write!(f, "ARRAY of {} bytes", v.len()),
            Datum::Map(v) => write!(f, "MAP of {} bytes", v.len()),
            Datum::Row(v) => write!(f, "ROW of {} bytes", v.len()),
        }
    }
}

macro_rules! datum_from {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for Datum<'_> {
            fn from(v: $t) -> Self {
                Datum::$variant(v)
            }
        })*
    };
}

datum_from!(bool => Boolean, i8 => TinyInt, i16 => SmallInt, i32 => Int, i64 => BigInt, f32 => Float, f64 => Double);

impl<'a> From<&'a str> for Datum<'a> {
    fn from(v: &'a str) -> Self {
        Datum::String(v)
    }
}

impl<'a> From<&'a [u8]> for Datum<'a> {
    fn from(v: &'a [u8]) -> Self {
        Datum::Binary(v)
    }
}

impl<'a, T: Into<Datum<'a>>> From<Option<T>> for Datum<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Datum::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_split_into_millis_and_non_negative_nanos() {
        let t = Timestamp::from_nanos(1_500_000_123);
        assert_eq!((t.millis(), t.nanos_of_milli()), (1_500, 123));
        let before_epoch = Timestamp::from_nanos(-1);
        assert_eq!(
            (before_epoch.millis(), before_epoch.nanos_of_milli()),
            (-1, 999_999)
        );
        let micros = Timestamp::from_micros(-1_001);
        assert_eq!((micros.millis(), micros.nanos_of_milli()), (-2, 999_000));
        assert_eq!(Timestamp::new(0, NANOS_PER_MILLI), None);
        assert_eq!(Timestamp::new(0, -1), None);
        assert_eq!(
            Timestamp::new(5, 7),
            Some(Timestamp {
                millis: 5,
                nanos_of_milli: 7
            })
        );
    }
}
