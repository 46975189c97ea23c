//! What a sink table looks like: the Fluss type of each CDC type (Flink
//! CDC's `FlussConversions`), the descriptor the sink creates a table
//! with, and the check of an existing table's definition against it.
//!
//! Decisions beyond Flink CDC's connector, each for a reason:
//! - Columns outside the primary key are created nullable, so a column the
//!   source drops (lenient: kept, NULL from then on) or renames never needs
//!   an ALTER the server may not offer.
//! - `DECIMAL` wider than 38 digits becomes `STRING` (as Flink CDC's MySQL
//!   connector maps it); `CHAR(0)` / `BINARY(0)` become `STRING` / `BYTES`
//!   (Fluss needs a length of at least 1).

use std::collections::BTreeMap;

use fjord_format::schema::{Schema, TableDescriptor, TableDistribution};
use fjord_format::types::{DataType as FlussType, TypeKind};

use super::convert::FLUSS_DECIMAL_PRECISION_MAX;
use super::options::FlussSinkOptions;
use crate::schema::{TableId, TableSchema};
use crate::types::DataType;

/// The Fluss type of a CDC type (nullable).
pub fn fluss_type(t: DataType) -> Result<FlussType, String> {
    let bad = |e: fjord_format::error::SchemaError| format!("type {t}: {e}");
    Ok(match t {
        DataType::Boolean => FlussType::boolean(),
        DataType::TinyInt => FlussType::tinyint(),
        DataType::SmallInt => FlussType::smallint(),
        DataType::Int => FlussType::int(),
        DataType::BigInt => FlussType::bigint(),
        DataType::Float => FlussType::float(),
        DataType::Double => FlussType::double(),
        DataType::Decimal { precision, scale } => {
            if precision <= FLUSS_DECIMAL_PRECISION_MAX {
                FlussType::decimal(u32::from(precision), u32::from(scale)).map_err(bad)?
            } else {
                FlussType::string()
            }
        }
        DataType::Char { length } if length >= 1 => FlussType::char(length).map_err(bad)?,
        DataType::Char { .. } | DataType::Varchar { .. } | DataType::String | DataType::Json => {
            FlussType::string()
        }
        DataType::Binary { length } if length >= 1 => FlussType::binary(length).map_err(bad)?,
        DataType::Binary { .. } | DataType::Varbinary { .. } | DataType::Bytes => {
            FlussType::bytes()
        }
        DataType::Date => FlussType::date(),
        DataType::Time { precision } => FlussType::time(u32::from(precision)).map_err(bad)?,
        DataType::Timestamp { precision } => {
            FlussType::timestamp(u32::from(precision)).map_err(bad)?
        }
        DataType::TimestampLtz { precision } => {
            FlussType::timestamp_ltz(u32::from(precision)).map_err(bad)?
        }
    })
}

/// Whether a column of type `existing` holds every value of a column of
/// type `wanted` (same kind, or a wider one): then a source type change
/// needs no ALTER.
pub fn holds(existing: &FlussType, wanted: &FlussType) -> bool {
    use TypeKind as K;
    let rank = |k: &K| match k {
        K::TinyInt => 1,
        K::SmallInt => 2,
        K::Int => 3,
        K::BigInt => 4,
        _ => 0,
    };
    match (existing.kind(), wanted.kind()) {
        (a, b) if a == b => true,
        (K::SmallInt | K::Int | K::BigInt, K::TinyInt | K::SmallInt | K::Int) => {
            rank(existing.kind()) >= rank(wanted.kind())
        }
        (K::Double, K::Float) => true,
        (K::String, K::Char { .. }) => true,
        (K::Bytes, K::Binary { .. }) => true,
        (
            K::Decimal {
                precision: p1,
                scale: s1,
            },
            K::Decimal {
                precision: p2,
                scale: s2,
            },
        ) => s1 >= s2 && p1 - s1 >= p2 - s2,
        (K::Time { .. }, K::Time { .. })
        | (K::Timestamp { .. }, K::Timestamp { .. })
        | (K::TimestampLtz { .. }, K::TimestampLtz { .. }) => true,
        _ => false,
    }
}

/// What the sink wants a table to be: its descriptor and, for the clash
/// check, its keys.
pub struct Wanted {
    /// The descriptor to create the table with.
    pub descriptor: TableDescriptor,
    /// Primary key (empty: a log table).
    pub primary_key: Vec<String>,
    /// Bucket keys as the sink would create them.
    pub bucket_keys: Vec<String>,
}

/// The table the sink creates for `schema` under the name `sink`.
pub fn wanted(
    sink: &TableId,
    schema: &TableSchema,
    options: &FlussSinkOptions,
) -> Result<Wanted, String> {
    let key: Vec<String> = schema.primary_key_names().map(str::to_string).collect();
    let mut builder = Schema::builder();
    for (i, column) in schema.columns().iter().enumerate() {
        let mut t =
            fluss_type(column.data_type).map_err(|e| format!("column `{}`: {e}", column.name))?;
        if schema.primary_key().contains(&(i as u16)) {
            if matches!(t.kind(), TypeKind::String)
                && matches!(column.data_type, DataType::Decimal { .. })
            {
                return Err(format!(
                    "primary-key column `{}` is a DECIMAL wider than {FLUSS_DECIMAL_PRECISION_MAX} digits, which a Fluss key cannot hold",
                    column.name
                ));
            }
            t = t.not_null();
        }
        builder = builder.column(column.name.to_string(), t);
    }
    if !key.is_empty() {
        builder = builder.primary_key(key.iter().cloned());
    }
    let fluss_schema = builder.build().map_err(|e| e.to_string())?;
    let bucket_keys = match options.bucket_keys.get(sink) {
        Some(keys) => keys.clone(),
        // Fluss's default: the primary key minus partition keys (none here).
        None => key.clone(),
    };
    let bucket_count = options.bucket_nums.get(sink).copied();
    let distribution = if bucket_count.is_some() || options.bucket_keys.contains_key(sink) {
        Some(TableDistribution {
            bucket_count,
            bucket_keys: options.bucket_keys.get(sink).cloned().unwrap_or_default(),
        })
    } else {
        None
    };
    let properties: BTreeMap<String, String> = options.table_properties.clone();
    let descriptor = TableDescriptor::new(
        fluss_schema,
        None,
        Vec::new(),
        distribution,
        properties,
        BTreeMap::new(),
    )
    .map_err(|e| e.to_string())?;
    let bucket_keys = if descriptor.bucket_keys().is_empty() {
        bucket_keys
    } else {
        descriptor.bucket_keys().to_vec()
    };
    Ok(Wanted {
        descriptor,
        primary_key: key,
        bucket_keys,
    })
}

/// Checks an existing table against what the sink would create: same
/// primary key, bucket keys and partition keys (Flink CDC's
/// `FlussMetaDataApplier` check), or an error naming both definitions.
pub fn check_existing(
    sink: &TableId,
    existing: &TableDescriptor,
    wanted: &Wanted,
) -> Result<(), String> {
    let existing_key: Vec<String> = existing
        .schema()
        .primary_key()
        .map(<[String]>::to_vec)
        .unwrap_or_default();
    let existing_buckets = existing.bucket_keys().to_vec();
    let existing_parts = existing.partition_keys().to_vec();
    if existing_key == wanted.primary_key
        && existing_buckets == wanted.bucket_keys
        && existing_parts.is_empty()
    {
        return Ok(());
    }
    Err(format!(
        "the sink table {sink} exists with primary key {existing_key:?}, bucket keys {existing_buckets:?}, \
         partition keys {existing_parts:?}, but the pipeline's source table needs primary key {:?}, \
         bucket keys {:?}, partition keys []: drop or rename the existing table, or route the source \
         table to another sink table",
        wanted.primary_key, wanted.bucket_keys
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Column;

    fn source(key: &[&str]) -> TableSchema {
        TableSchema::new(
            TableId::new("app", "t"),
            1,
            vec![
                Column::new("id", DataType::BigInt, false),
                Column::new("k", DataType::Varchar { length: 10 }, false),
                Column::new(
                    "v",
                    DataType::Decimal {
                        precision: 50,
                        scale: 2,
                    },
                    false,
                ),
            ],
            key,
        )
        .unwrap()
    }

    #[test]
    fn primary_key_tables_bucket_by_the_key_and_other_columns_are_nullable() {
        let id = TableId::new("app", "t");
        let w = wanted(&id, &source(&["id", "k"]), &FlussSinkOptions::default()).unwrap();
        assert_eq!(w.primary_key, vec!["id", "k"]);
        assert_eq!(w.bucket_keys, vec!["id", "k"]);
        let cols = w.descriptor.schema().columns();
        assert!(!cols[0].data_type.is_nullable());
        assert!(cols[2].data_type.is_nullable());
        assert_eq!(cols[2].data_type.kind(), &TypeKind::String);
        assert!(check_existing(&id, &w.descriptor, &w).is_ok());

        let mut options = FlussSinkOptions::default();
        options.bucket_keys.insert(id.clone(), vec!["id".into()]);
        options.bucket_nums.insert(id.clone(), 3);
        let w2 = wanted(&id, &source(&["id", "k"]), &options).unwrap();
        assert_eq!(w2.bucket_keys, vec!["id"]);
        assert_eq!(w2.descriptor.bucket_count(), Some(3));
        let err = check_existing(&id, &w.descriptor, &w2).unwrap_err();
        assert!(
            err.contains("[\"id\", \"k\"]") && err.contains("[\"id\"]"),
            "{err}"
        );
    }

    #[test]
    fn tables_without_a_key_are_log_tables_and_wide_decimal_keys_are_refused() {
        let id = TableId::new("app", "t");
        let w = wanted(&id, &source(&[]), &FlussSinkOptions::default()).unwrap();
        assert!(w.primary_key.is_empty());
        assert!(w.bucket_keys.is_empty());
        assert!(!w.descriptor.has_primary_key());
        assert!(wanted(&id, &source(&["v"]), &FlussSinkOptions::default()).is_err());
    }

    #[test]
    fn wider_types_hold_narrower_ones() {
        assert!(holds(&FlussType::bigint(), &FlussType::int()));
        assert!(!holds(&FlussType::int(), &FlussType::bigint()));
        assert!(holds(
            &FlussType::decimal(12, 3).unwrap(),
            &FlussType::decimal(10, 2).unwrap()
        ));
        assert!(!holds(
            &FlussType::decimal(10, 3).unwrap(),
            &FlussType::decimal(10, 2).unwrap()
        ));
        assert!(holds(&FlussType::string(), &FlussType::char(3).unwrap()));
        assert!(!holds(&FlussType::string(), &FlussType::int()));
    }
}
