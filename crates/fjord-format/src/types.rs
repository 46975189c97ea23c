//! Fluss's logical data types: what a column can hold, with nullability.
//!
//! The set and the parameter ranges mirror Fluss's `org.apache.fluss.types`
//! (and fluss-rs `metadata/datatype.rs`): BOOLEAN, TINYINT, SMALLINT, INT,
//! BIGINT, FLOAT, DOUBLE, CHAR(n), STRING, DECIMAL(p, s), DATE, TIME(p),
//! TIMESTAMP(p), TIMESTAMP_LTZ(p), BYTES, BINARY(n), ARRAY, MAP and ROW.
//! Every parametrised type is built through a checked constructor, so a
//! [`DataType`] value always has parameters a Fluss server would accept.

use std::fmt;

use crate::error::SchemaError;

/// Largest DECIMAL precision Fluss accepts (`DecimalType.MAX_PRECISION`):
/// the digits a 128-bit unscaled value can hold.
pub const DECIMAL_MAX_PRECISION: u8 = 38;
/// Largest fractional-second precision of TIME / TIMESTAMP / TIMESTAMP_LTZ
/// (`TimestampType.MAX_PRECISION`): nanoseconds.
pub const TIME_MAX_PRECISION: u8 = 9;
/// Largest CHAR / BINARY length (`CharType.MAX_LENGTH`, Java's `Integer.MAX_VALUE`);
/// it also keeps BINARY(n) representable as Arrow's `FixedSizeBinary(i32)`.
pub const MAX_LENGTH: u32 = i32::MAX as u32;
/// Field id Fluss uses for "not assigned yet" (`Column.UNKNOWN_COLUMN_ID`).
pub const UNASSIGNED_FIELD_ID: i32 = -1;

/// A Fluss data type together with its nullability.
///
/// Guarantees: parameters are within Fluss's ranges (checked by the
/// constructors); a MAP's key type is never nullable (Fluss's `MapType`
/// forces that too).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DataType {
    kind: TypeKind,
    nullable: bool,
}

/// The kind of a [`DataType`], without its nullability.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TypeKind {
    /// `BOOLEAN`.
    Boolean,
    /// `TINYINT`: signed 8-bit integer.
    TinyInt,
    /// `SMALLINT`: signed 16-bit integer.
    SmallInt,
    /// `INT` (Fluss's type root name is `INTEGER`): signed 32-bit integer.
    Int,
    /// `BIGINT`: signed 64-bit integer.
    BigInt,
    /// `FLOAT`: IEEE 754 single precision.
    Float,
    /// `DOUBLE`: IEEE 754 double precision.
    Double,
    /// `CHAR(length)`: fixed-length character string, `length >= 1`.
    Char {
        /// Declared length in characters.
        length: u32,
    },
    /// `STRING`: variable-length character string.
    String,
    /// `DECIMAL(precision, scale)`: `1 <= precision <= 38`, `scale <= precision`.
    Decimal {
        /// Total number of digits.
        precision: u8,
        /// Digits after the decimal point.
        scale: u8,
    },
    /// `DATE`: days since the epoch.
    Date,
    /// `TIME(precision)`: time of day, `precision <= 9` fractional digits.
    Time {
        /// Fractional-second digits.
        precision: u8,
    },
    /// `TIMESTAMP(precision)`: timestamp without time zone.
    Timestamp {
        /// Fractional-second digits.
        precision: u8,
    },
    /// `TIMESTAMP_LTZ(precision)`: timestamp with local time zone (an instant).
    TimestampLtz {
        /// Fractional-second digits.
        precision: u8,
    },
    /// `BYTES`: variable-length binary string.
    Bytes,
    /// `BINARY(length)`: fixed-length binary string, `length >= 1`.
    Binary {
        /// Declared length in bytes.
        length: u32,
    },
    /// `ARRAY<element>`.
    Array(Box<DataType>),
    /// `MAP<key, value>`; the key type is non-nullable.
    Map {
        /// Key type (never nullable).
        key: Box<DataType>,
        /// Value type.
        value: Box<DataType>,
    },
    /// `ROW<fields>`: a nested structure.
    Row(Vec<DataField>),
}

/// A named field of a ROW type, with the id Fluss assigns to nested fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DataField {
    /// Field name.
    pub name: String,
    /// Field type.
    pub data_type: DataType,
    /// Optional description (Fluss's `description` JSON key).
    pub description: Option<String>,
    /// Field id, [`UNASSIGNED_FIELD_ID`] when not assigned.
    pub field_id: i32,
}

impl DataField {
    /// A field with no description and an unassigned id.
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        Self {
            name: name.into(),
            data_type,
            description: None,
            field_id: UNASSIGNED_FIELD_ID,
        }
    }

    /// The same field with the given id.
    pub fn with_id(mut self, field_id: i32) -> Self {
        self.field_id = field_id;
        self
    }
}

impl DataType {
    fn of(kind: TypeKind) -> Self {
        Self {
            kind,
            nullable: true,
        }
    }

    /// Nullable `BOOLEAN`.
    pub fn boolean() -> Self {
        Self::of(TypeKind::Boolean)
    }
    /// Nullable `TINYINT`.
    pub fn tinyint() -> Self {
        Self::of(TypeKind::TinyInt)
    }
    /// Nullable `SMALLINT`.
    pub fn smallint() -> Self {
        Self::of(TypeKind::SmallInt)
    }
    /// Nullable `INT`.
    pub fn int() -> Self {
        Self::of(TypeKind::Int)
    }
    /// Nullable `BIGINT`.
    pub fn bigint() -> Self {
        Self::of(TypeKind::BigInt)
    }
    /// Nullable `FLOAT`.
    pub fn float() -> Self {
        Self::of(TypeKind::Float)
    }
    /// Nullable `DOUBLE`.
    pub fn double() -> Self {
        Self::of(TypeKind::Double)
    }
    /// Nullable `STRING`.
    pub fn string() -> Self {
        Self::of(TypeKind::String)
    }
    /// Nullable `DATE`.
    pub fn date() -> Self {
        Self::of(TypeKind::Date)
    }
    /// Nullable `BYTES`.
    pub fn bytes() -> Self {
        Self::of(TypeKind::Bytes)
    }

    /// Nullable `CHAR(length)`; `length` must be at least 1.
    pub fn char(length: u32) -> Result<Self, SchemaError> {
        if length == 0 || length > MAX_LENGTH {
            return Err(SchemaError::InvalidType {
                type_name: "CHAR",
                reason: format!("length {length} is outside 1..={MAX_LENGTH}"),
            });
        }
        Ok(Self::of(TypeKind::Char { length }))
    }

    /// Nullable `BINARY(length)`; `length` must be at least 1.
    pub fn binary(length: u32) -> Result<Self, SchemaError> {
        if length == 0 || length > MAX_LENGTH {
            return Err(SchemaError::InvalidType {
                type_name: "BINARY",
                reason: format!("length {length} is outside 1..={MAX_LENGTH}"),
            });
        }
        Ok(Self::of(TypeKind::Binary { length }))
    }

    /// Nullable `DECIMAL(precision, scale)`.
    pub fn decimal(precision: u32, scale: u32) -> Result<Self, SchemaError> {
        if precision == 0 || precision > u32::from(DECIMAL_MAX_PRECISION) {
            return Err(SchemaError::InvalidType {
                type_name: "DECIMAL",
                reason: format!("precision {precision} is outside 1..={DECIMAL_MAX_PRECISION}"),
            });
        }
        if scale > precision {
            return Err(SchemaError::InvalidType {
                type_name: "DECIMAL",
                reason: format!("scale {scale} is larger than precision {precision}"),
            });
        }
        Ok(Self::of(TypeKind::Decimal {
            precision: precision as u8,
            scale: scale as u8,
        }))
    }

    fn check_time_precision(type_name: &'static str, precision: u32) -> Result<u8, SchemaError> {
        if precision > u32::from(TIME_MAX_PRECISION) {
            return Err(SchemaError::InvalidType {
                type_name,
                reason: format!("precision {precision} is outside 0..={TIME_MAX_PRECISION}"),
            });
        }
        Ok(precision as u8)
    }

    /// Nullable `TIME(precision)`, `precision <= 9`.
    pub fn time(precision: u32) -> Result<Self, SchemaError> {
        let precision = Self::check_time_precision("TIME", precision)?;
        Ok(Self::of(TypeKind::Time { precision }))
    }

    /// Nullable `TIMESTAMP(precision)` (without time zone), `precision <= 9`.
    pub fn timestamp(precision: u32) -> Result<Self, SchemaError> {
        let precision = Self::check_time_precision("TIMESTAMP", precision)?;
        Ok(Self::of(TypeKind::Timestamp { precision }))
    }

    /// Nullable `TIMESTAMP_LTZ(precision)`, `precision <= 9`.
    pub fn timestamp_ltz(precision: u32) -> Result<Self, SchemaError> {
        let precision = Self::check_time_precision("TIMESTAMP_LTZ", precision)?;
        Ok(Self::of(TypeKind::TimestampLtz { precision }))
    }

    /// Nullable `ARRAY<element>`.
    pub fn array(element: DataType) -> Self {
        Self::of(TypeKind::Array(Box::new(element)))
    }

    /// Nullable `MAP<key, value>`; the key is made non-nullable, as Fluss does.
    pub fn map(key: DataType, value: DataType) -> Self {
        Self::of(TypeKind::Map {
            key: Box::new(key.with_nullable(false)),
            value: Box::new(value),
        })
    }

    /// Nullable `ROW<fields>`.
    pub fn row(fields: Vec<DataField>) -> Self {
        Self::of(TypeKind::Row(fields))
    }

    /// The same type with the given nullability.
    pub fn with_nullable(mut self, nullable: bool) -> Self {
        self.nullable = nullable;
        self
    }

    /// The same type, `NOT NULL`.
    pub fn not_null(self) -> Self {
        self.with_nullable(false)
    }

    /// Whether the type admits NULL.
    pub fn is_nullable(&self) -> bool {
        self.nullable
    }

    /// The kind of the type.
    pub fn kind(&self) -> &TypeKind {
        &self.kind
    }

    /// Mutable access to nested fields, for id (re)assignment.
    pub(crate) fn kind_mut(&mut self) -> &mut TypeKind {
        &mut self.kind
    }

    /// Fluss's type root name (`DataTypeRoot.name()`), as used in JSON.
    pub fn type_root(&self) -> &'static str {
        match self.kind {
            TypeKind::Boolean => "BOOLEAN",
            TypeKind::TinyInt => "TINYINT",
            TypeKind::SmallInt => "SMALLINT",
            TypeKind::Int => "INTEGER",
            TypeKind::BigInt => "BIGINT",
            TypeKind::Float => "FLOAT",
            TypeKind::Double => "DOUBLE",
            TypeKind::Char { .. } => "CHAR",
            TypeKind::String => "STRING",
            TypeKind::Decimal { .. } => "DECIMAL",
            TypeKind::Date => "DATE",
            TypeKind::Time { .. } => "TIME_WITHOUT_TIME_ZONE",
            TypeKind::Timestamp { .. } => "TIMESTAMP_WITHOUT_TIME_ZONE",
            TypeKind::TimestampLtz { .. } => "TIMESTAMP_WITH_LOCAL_TIME_ZONE",
            TypeKind::Bytes => "BYTES",
            TypeKind::Binary { .. } => "BINARY",
            TypeKind::Array(_) => "ARRAY",
            TypeKind::Map { .. } => "MAP",
            TypeKind::Row(_) => "ROW",
        }
    }

    /// Visits every nested [`DataField`] depth-first, parents before children
    /// (the order Fluss assigns and collects nested field ids in).
    pub fn for_each_nested_field(&self, f: &mut impl FnMut(&DataField)) {
        match &self.kind {
            TypeKind::Row(fields) => {
                for field in fields {
                    f(field);
                    field.data_type.for_each_nested_field(f);
                }
            }
            TypeKind::Array(element) => element.for_each_nested_field(f),
            TypeKind::Map { key, value } => {
                key.for_each_nested_field(f);
                value.for_each_nested_field(f);
            }
            _ => {}
        }
    }
}

/// SQL-like rendering, e.g. `DECIMAL(10, 2) NOT NULL`, for error messages.
impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            TypeKind::Boolean => f.write_str("BOOLEAN")?,
            TypeKind::TinyInt => f.write_str("TINYINT")?,
            TypeKind::SmallInt => f.write_str("SMALLINT")?,
            TypeKind::Int => f.write_str("INT")?,
            TypeKind::BigInt => f.write_str("BIGINT")?,
            TypeKind::Float => f.write_str("FLOAT")?,
            TypeKind::Double => f.write_str("DOUBLE")?,
            TypeKind::Char { length } => write!(f, "CHAR({length})")?,
            TypeKind::String => f.write_str("STRING")?,
            TypeKind::Decimal { precision, scale } => write!(f, "DECIMAL({precision}, {scale})")?,
            TypeKind::Date => f.write_str("DATE")?,
            TypeKind::Time { precision } => write!(f, "TIME({precision})")?,
            TypeKind::Timestamp { precision } => write!(f, "TIMESTAMP({precision})")?,
            TypeKind::TimestampLtz { precision } => write!(f, "TIMESTAMP_LTZ({precision})")?,
            TypeKind::Bytes => f.write_str("BYTES")?,
            TypeKind::Binary { length } => write!(f, "BINARY({length})")?,
            TypeKind::Array(element) => write!(f, "ARRAY<{element}>")?,
            TypeKind::Map { key, value } => write!(f, "MAP<{key}, {value}>")?,
            TypeKind::Row(fields) => {
                f.write_str("ROW<")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{}` {}", field.name, field.data_type)?;
                }
                f.write_str(">")?;
            }
        }
        if !self.nullable {
            f.write_str(" NOT NULL")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parametrised_types_reject_out_of_range_parameters() {
        assert!(DataType::char(0).is_err());
        assert!(DataType::binary(0).is_err());
        assert!(DataType::decimal(0, 0).is_err());
        assert!(DataType::decimal(39, 0).is_err());
        assert!(DataType::decimal(10, 11).is_err());
        assert!(DataType::time(10).is_err());
        assert!(DataType::timestamp(10).is_err());
        assert!(DataType::timestamp_ltz(10).is_err());
        assert!(DataType::decimal(38, 38).is_ok());
        assert!(DataType::timestamp(9).is_ok());
    }

    #[test]
    fn map_key_is_forced_non_nullable() {
        let map = DataType::map(DataType::string(), DataType::int());
        let TypeKind::Map { key, value } = map.kind() else {
            panic!("not a map")
        };
        assert!(!key.is_nullable());
        assert!(value.is_nullable());
    }

    #[test]
    fn display_renders_sql_like_names() {
        let t = DataType::row(vec![
            DataField::new("a", DataType::decimal(10, 2).unwrap().not_null()),
            DataField::new("b", DataType::array(DataType::timestamp_ltz(3).unwrap())),
        ]);
        assert_eq!(
            t.to_string(),
            "ROW<`a` DECIMAL(10, 2) NOT NULL, `b` ARRAY<TIMESTAMP_LTZ(3)>>"
        );
    }
}
