//! Fluss data type → Arrow type mapping, as Fluss's `ArrowUtils.toArrowType`
//! and fluss-rs `to_arrow_type` define it.
//!
//! | Fluss | Arrow |
//! |---|---|
//! | BOOLEAN / TINYINT / SMALLINT / INT / BIGINT | Boolean / Int8 / Int16 / Int32 / Int64 |
//! | FLOAT / DOUBLE | Float32 / Float64 |
//! | CHAR(n), STRING | Utf8 |
//! | BYTES / BINARY(n) | Binary / FixedSizeBinary(n) |
//! | DECIMAL(p, s) | Decimal128(p, s) |
//! | DATE | Date32 |
//! | TIME(p) | p=0: Time32(s); 1–3: Time32(ms); 4–6: Time64(µs); 7–9: Time64(ns) |
//! | TIMESTAMP(p) | Timestamp(unit by p as for TIME, no zone) |
//! | TIMESTAMP_LTZ(p) | Timestamp(unit by p, "UTC") — fluss-rs's choice; Java writes no zone |
//! | ARRAY\<T\> | List(item: T) |
//! | MAP\<K, V\> | Map(entries: Struct(key: K not null, value: V), unsorted) |
//! | ROW\<..\> | Struct(..) |
//!
//! The zone and nested field names are not on the wire (an IPC RecordBatch
//! message carries no schema), so they only matter to in-process readers;
//! the physical layout — which decides buffers and field nodes — is what
//! both clients agree on.

use std::sync::Arc;

use arrow_schema::{DataType as ArrowType, Field, Fields, Schema as ArrowSchema, TimeUnit};

use crate::schema::Schema;
use crate::types::{DataField, DataType, TypeKind};

/// Time zone fluss-rs attaches to TIMESTAMP_LTZ columns.
pub const LTZ_TIME_ZONE: &str = "UTC";

fn time_unit(precision: u8) -> TimeUnit {
    match precision {
        0 => TimeUnit::Second,
        1..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    }
}

/// The Arrow type of a Fluss type (nullability lives on the [`Field`]).
pub fn to_arrow_type(data_type: &DataType) -> ArrowType {
    match data_type.kind() {
        TypeKind::Boolean => ArrowType::Boolean,
        TypeKind::TinyInt => ArrowType::Int8,
        TypeKind::SmallInt => ArrowType::Int16,
        TypeKind::Int => ArrowType::Int32,
        TypeKind::BigInt => ArrowType::Int64,
        TypeKind::Float => ArrowType::Float32,
        TypeKind::Double => ArrowType::Float64,
        TypeKind::Char { .. } | TypeKind::String => ArrowType::Utf8,
        TypeKind::Bytes => ArrowType::Binary,
        // The constructor bounds the length to i32::MAX.
        TypeKind::Binary { length } => ArrowType::FixedSizeBinary(*length as i32),
        // The constructor bounds precision to 38 and scale to precision.
        TypeKind::Decimal { precision, scale } => ArrowType::Decimal128(*precision, *scale as i8),
        TypeKind::Date => ArrowType::Date32,
        TypeKind::Time { precision } => match time_unit(*precision) {
            unit @ (TimeUnit::Second | TimeUnit::Millisecond) => ArrowType::Time32(unit),
            unit => ArrowType::Time64(unit),
        },
        TypeKind::Timestamp { precision } => ArrowType::Timestamp(time_unit(*precision), None),
        TypeKind::TimestampLtz { precision } => {
            ArrowType::Timestamp(time_unit(*precision), Some(LTZ_TIME_ZONE.into()))
        }
        TypeKind::Array(element) => ArrowType::List(Arc::new(Field::new_list_field(
            to_arrow_type(element),
            element.is_nullable(),
        ))),
        TypeKind::Map { key, value } => {
            let entries = Fields::from(vec![
                Field::new("key", to_arrow_type(key), key.is_nullable()),
                Field::new("value", to_arrow_type(value), value.is_nullable()),
            ]);
            ArrowType::Map(
                Arc::new(Field::new("entries", ArrowType::Struct(entries), false)),
                false,
            )
        }
        TypeKind::Row(fields) => ArrowType::Struct(to_arrow_fields(fields)),
    }
}

/// The Arrow field of a named Fluss column or ROW field.
pub fn to_arrow_field(name: &str, data_type: &DataType) -> Field {
    Field::new(name, to_arrow_type(data_type), data_type.is_nullable())
}

fn to_arrow_fields(fields: &[DataField]) -> Fields {
    fields
        .iter()
        .map(|f| to_arrow_field(&f.name, &f.data_type))
        .collect()
}

/// The Arrow schema of a table schema (one field per column, in order).
pub fn to_arrow_schema(schema: &Schema) -> Arc<ArrowSchema> {
    Arc::new(ArrowSchema::new(
        schema
            .columns()
            .iter()
            .map(|c| to_arrow_field(&c.name, &c.data_type))
            .collect::<Fields>(),
    ))
}

/// The Arrow schema of the given columns of a table schema, in the given
/// order; `None` if an index is out of range.
pub fn to_projected_arrow_schema(schema: &Schema, columns: &[usize]) -> Option<Arc<ArrowSchema>> {
    let all = schema.columns();
    let fields = columns
        .iter()
        .map(|&i| all.get(i).map(|c| to_arrow_field(&c.name, &c.data_type)))
        .collect::<Option<Fields>>()?;
    Some(Arc::new(ArrowSchema::new(fields)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(data_type: DataType, expected: ArrowType) {
        assert_eq!(to_arrow_type(&data_type), expected, "for {data_type}");
    }

    #[test]
    fn scalar_types_map_like_fluss_arrow_utils() {
        check(DataType::boolean(), ArrowType::Boolean);
        check(DataType::tinyint(), ArrowType::Int8);
        check(DataType::smallint(), ArrowType::Int16);
        check(DataType::int(), ArrowType::Int32);
        check(DataType::bigint(), ArrowType::Int64);
        check(DataType::float(), ArrowType::Float32);
        check(DataType::double(), ArrowType::Float64);
        check(DataType::char(3).unwrap(), ArrowType::Utf8);
        check(DataType::string(), ArrowType::Utf8);
        check(DataType::bytes(), ArrowType::Binary);
        check(
            DataType::binary(16).unwrap(),
            ArrowType::FixedSizeBinary(16),
        );
        check(
            DataType::decimal(38, 10).unwrap(),
            ArrowType::Decimal128(38, 10),
        );
        check(DataType::date(), ArrowType::Date32);
    }

    #[test]
    fn time_units_follow_precision() {
        let cases = [
            (0, TimeUnit::Second),
            (1, TimeUnit::Millisecond),
            (3, TimeUnit::Millisecond),
            (4, TimeUnit::Microsecond),
            (6, TimeUnit::Microsecond),
            (7, TimeUnit::Nanosecond),
            (9, TimeUnit::Nanosecond),
        ];
        for (p, unit) in cases {
            check(
                DataType::timestamp(p).unwrap(),
                ArrowType::Timestamp(unit, None),
            );
            check(
                DataType::timestamp_ltz(p).unwrap(),
                ArrowType::Timestamp(unit, Some("UTC".into())),
            );
        }
        check(
            DataType::time(0).unwrap(),
            ArrowType::Time32(TimeUnit::Second),
        );
        check(
            DataType::time(3).unwrap(),
            ArrowType::Time32(TimeUnit::Millisecond),
        );
        check(
            DataType::time(6).unwrap(),
            ArrowType::Time64(TimeUnit::Microsecond),
        );
        check(
            DataType::time(9).unwrap(),
            ArrowType::Time64(TimeUnit::Nanosecond),
        );
    }

    #[test]
    fn nested_types_keep_child_nullability() {
        let t = DataType::map(
            DataType::string(),
            DataType::array(DataType::int().not_null()),
        );
        let ArrowType::Map(entries, sorted) = to_arrow_type(&t) else {
            panic!("not a map")
        };
        assert!(!sorted);
        assert!(!entries.is_nullable());
        let ArrowType::Struct(kv) = entries.data_type() else {
            panic!("entries not a struct")
        };
        assert!(!kv[0].is_nullable(), "map keys are never null");
        let ArrowType::List(item) = kv[1].data_type() else {
            panic!("value not a list")
        };
        assert!(!item.is_nullable());
        assert_eq!(item.data_type(), &ArrowType::Int32);
    }

    #[test]
    fn schema_fields_carry_column_names_and_nullability() {
        let schema = Schema::builder()
            .column("id", DataType::bigint().not_null())
            .column("name", DataType::string())
            .build()
            .unwrap();
        let arrow = to_arrow_schema(&schema);
        assert_eq!(arrow.field(0).name(), "id");
        assert!(!arrow.field(0).is_nullable());
        assert!(arrow.field(1).is_nullable());
        let projected = to_projected_arrow_schema(&schema, &[1]).unwrap();
        assert_eq!(projected.fields().len(), 1);
        assert_eq!(projected.field(0).name(), "name");
        assert!(to_projected_arrow_schema(&schema, &[2]).is_none());
    }
}
