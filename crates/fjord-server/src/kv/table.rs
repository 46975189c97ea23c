//! [`KvTable`]: everything about a primary-key table that the KV path
//! derives from its schema and options, computed once when the table is
//! created or loaded and shared by its buckets, so the per-record path only
//! reads it.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_schema::SchemaRef;
use fjord_format::arrow_log::ArrowCompression;
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::row::key::{KeyDecoder, KeyEncoder};
use fjord_format::row::{RowCodec, RowFormat};
use fjord_format::types::{DataType, TypeKind};
use fjord_format::Schema;

use super::merge::{ChangelogImage, MergeOptions};
use crate::error::{ApiError, ErrorCode};

/// Table option naming the format of stored rows (Fluss `table.kv.format`).
pub const TABLE_KV_FORMAT: &str = "table.kv.format";

/// Table option (Fluss `table.log.ttl`): for a primary-key table, how old a
/// sealed changelog segment must be before it is compacted
/// (`kv::changelog_compaction`); a primary-key changelog is never deleted.
pub const TABLE_LOG_TTL: &str = "table.log.ttl";

/// One schema of a primary-key table as the KV path reads it: stored
/// values and changelog batches carry the id of the schema they were
/// written with, and are decoded with that schema's codecs.
#[derive(Debug)]
pub struct KvSchema {
    /// The schema id.
    pub schema_id: i16,
    /// The schema.
    pub schema: Arc<Schema>,
    /// The codec of stored rows written with this schema.
    pub rows: RowCodec,
    /// The Arrow schema of changelog batches written with this schema.
    pub arrow_schema: SchemaRef,
}

/// A primary-key table as its KV tablets see it, at one schema id.
/// Immutable; shared as `Arc<KvTable>` by every bucket of the table (and of
/// its partitions). An ALTER TABLE builds a new one, which the tablets
/// swap in (`KvTablet::set_table`).
///
/// Schemas only evolve by columns added last (Fluss 0.9.1's only schema
/// change), so every older schema is a prefix of the latest: a row of an
/// older schema is the latest schema's row with NULLs in the columns it
/// lacks (Fluss's `PaddingRow`), and key and bucket positions never move.
#[derive(Debug)]
pub struct KvTable {
    /// The schema id rows are written with (the table's current schema).
    pub schema_id: i16,
    /// The table schema.
    pub schema: Arc<Schema>,
    /// The stored-row codec (`table.kv.format`: COMPACTED or INDEXED).
    pub rows: RowCodec,
    /// Every schema of the table by id, ascending and contiguous, the
    /// current one last.
    pub schemas: Vec<KvSchema>,
    /// Column positions of the physical primary key (the primary key minus
    /// partition keys, in primary-key order): what a stored key encodes.
    pub key_positions: Vec<usize>,
    /// Encodes physical primary keys from rows (the changelog replay).
    pub keys: KeyEncoder,
    /// Checks that bytes are one physical primary key of this table.
    pub key_check: KeyDecoder,
    /// Checks bucket keys, the prefixes of a prefix lookup; `None` when the
    /// bucket key is not a strict prefix of the physical primary key, where
    /// prefix lookups are refused.
    pub prefix_check: Option<KeyDecoder>,
    /// Merge engine, delete behaviour and changelog image.
    pub merge: MergeOptions,
    /// The changelog's Arrow schema (the table's columns).
    pub arrow_schema: SchemaRef,
    /// The changelog's Arrow body compression (`table.log.arrow.compression.*`).
    pub compression: ArrowCompression,
    /// The table's own `table.log.ttl` in milliseconds, if it sets one (0 or
    /// less: never compact); otherwise the server's `table.log.ttl` applies.
    pub log_ttl_ms: Option<i64>,
}

fn invalid_table(why: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidTableException, why)
}

/// Column types a primary key cannot have (Fluss's `KEY_UNSUPPORTED_TYPES`),
/// and that INDEXED stored rows cannot hold.
fn is_nested(kind: &TypeKind) -> bool {
    matches!(
        kind,
        TypeKind::Array(_) | TypeKind::Map { .. } | TypeKind::Row(_)
    )
}

impl KvTable {
    /// Derives the KV view of a table with one schema, refusing what Fluss
    /// refuses for primary-key tables (and what Fjord does not support yet)
    /// with Fluss's error code and a message naming the problem.
    ///
    /// ARRAY, MAP and ROW value columns are accepted with the COMPACTED kv
    /// format (the default): stored rows, changelog images, merges and the
    /// replay carry their values. With `table.kv.format` = INDEXED they are
    /// refused with INVALID_TABLE_EXCEPTION naming the column: Fjord's
    /// INDEXED rows hold flat values only. Key columns are never nested
    /// (Fluss's refusal, same code).
    pub fn new(
        schema: Arc<Schema>,
        schema_id: i32,
        partition_keys: &[String],
        bucket_keys: &[String],
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, ApiError> {
        Self::with_schemas(
            &[schema],
            schema_id,
            partition_keys,
            bucket_keys,
            properties,
        )
    }

    /// [`KvTable::new`] for a table whose schemas are `schemas`, with ids
    /// `first_schema_id`, `first_schema_id + 1`, ..., the current one last.
    /// Each schema must be a prefix of the next (columns are only added
    /// last); the current one is checked as [`KvTable::new`] checks it.
    pub fn with_schemas(
        schemas: &[Arc<Schema>],
        first_schema_id: i32,
        partition_keys: &[String],
        bucket_keys: &[String],
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, ApiError> {
        let Some(schema) = schemas.last().cloned() else {
            return Err(invalid_table("a table has at least one schema".into()));
        };
        let schema_id = i32::try_from(schemas.len() - 1)
            .ok()
            .filter(|_| first_schema_id >= 1)
            .and_then(|n| first_schema_id.checked_add(n))
            .ok_or_else(|| invalid_table("schema ids start at 1 and fit 16 bits".into()))?;
        let Some(primary_key) = schema.primary_key() else {
            return Err(ApiError::new(
                ErrorCode::NonPrimaryKeyTableException,
                "the table has no primary key",
            ));
        };
        let columns = schema.columns();
        for name in primary_key {
            let column = &columns[schema.column_index(name).unwrap_or(0)];
            if is_nested(column.data_type.kind()) {
                return Err(invalid_table(format!(
                    "Primary key column '{name}' has unsupported data type {}. Currently, primary key column does not support types: [ARRAY, MAP, ROW].",
                    column.data_type
                )));
            }
        }
        if let Some(name) = schema.auto_increment_columns().first() {
            return Err(invalid_table(format!(
                "column '{name}' is an auto-increment column, which Fjord does not support yet"
            )));
        }
        let format = match properties.get(TABLE_KV_FORMAT) {
            None => RowFormat::Compacted,
            Some(name) => name.parse::<RowFormat>().map_err(|_| {
                ApiError::new(
                    ErrorCode::InvalidConfigException,
                    format!("Invalid value for config '{TABLE_KV_FORMAT}'. Reason: '{name}' is not one of COMPACTED, INDEXED."),
                )
            })?,
        };
        if format == RowFormat::Indexed {
            if let Some(column) = columns.iter().find(|c| is_nested(c.data_type.kind())) {
                return Err(invalid_table(format!(
                    "column '{}' has type {}, which '{TABLE_KV_FORMAT}' = INDEXED cannot store: Fjord's INDEXED rows do not hold ARRAY, MAP or ROW values; use the COMPACTED kv format (the default)",
                    column.name, column.data_type
                )));
            }
        }
        let row_type: Vec<DataType> = columns.iter().map(|c| c.data_type.clone()).collect();
        let rows = RowCodec::new(format, &row_type)
            .map_err(|e| invalid_table(format!("the rows of this table cannot be stored: {e}")))?;
        let key_positions: Vec<usize> = primary_key
            .iter()
            .filter(|k| !partition_keys.contains(k))
            .filter_map(|k| schema.column_index(k))
            .collect();
        if key_positions.is_empty() {
            return Err(invalid_table(format!(
                "the primary key {primary_key:?} must hold a column that is not a partition key {partition_keys:?}"
            )));
        }
        let keys = KeyEncoder::new(&row_type, &key_positions)
            .map_err(|e| invalid_table(format!("the primary key cannot be encoded: {e}")))?;
        let bucket_positions: Vec<usize> = bucket_keys
            .iter()
            .filter_map(|k| schema.column_index(k))
            .collect();
        let is_strict_prefix = bucket_positions.len() < key_positions.len()
            && key_positions[..bucket_positions.len()] == bucket_positions[..];
        let prefix_check = if is_strict_prefix && !bucket_positions.is_empty() {
            let encoder = KeyEncoder::new(&row_type, &bucket_positions)
                .map_err(|e| invalid_table(format!("the bucket key cannot be encoded: {e}")))?;
            Some(encoder.decoder())
        } else {
            None
        };
        let merge = MergeOptions::from_table(&schema, properties)?;
        let compression = ArrowCompression::from_table_properties(properties)
            .map_err(|e| ApiError::new(ErrorCode::InvalidConfigException, e.to_string()))?;
        let log_ttl_ms = properties
            .get(TABLE_LOG_TTL)
            .map(|v| {
                crate::config::parse_duration_ms(v).ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidConfigException,
                        format!("Invalid value for config '{TABLE_LOG_TTL}'. Reason: '{v}' is not a duration such as 1 ms, 10 s, 2 h or 7 d."),
                    )
                })
            })
            .transpose()?;
        let schema_id = i16::try_from(schema_id)
            .ok()
            .filter(|&id| id >= 1)
            .ok_or_else(|| {
                invalid_table(format!(
                    "schema id {schema_id} does not fit a KV batch header"
                ))
            })?;
        let first = schema_id - (schemas.len() as i16 - 1);
        let mut versions = Vec::with_capacity(schemas.len());
        for (i, older) in schemas.iter().enumerate() {
            let prefix = older.columns().len() <= columns.len()
                && older
                    .columns()
                    .iter()
                    .zip(columns)
                    .all(|(a, b)| a.name == b.name && a.data_type == b.data_type);
            if !prefix || older.primary_key() != schema.primary_key() {
                return Err(invalid_table(format!(
                    "schema {} is not a prefix of the current schema {schema_id}: schemas only evolve by columns added last",
                    first + i as i16
                )));
            }
            let older_types: Vec<DataType> = older
                .columns()
                .iter()
                .map(|c| c.data_type.clone())
                .collect();
            versions.push(KvSchema {
                schema_id: first + i as i16,
                rows: RowCodec::new(format, &older_types).map_err(|e| {
                    invalid_table(format!("the rows of this table cannot be stored: {e}"))
                })?,
                arrow_schema: to_arrow_schema(older),
                schema: Arc::clone(older),
            });
        }
        Ok(Self {
            schema_id,
            arrow_schema: to_arrow_schema(&schema),
            schemas: versions,
            schema,
            rows,
            key_positions,
            key_check: keys.decoder(),
            keys,
            prefix_check,
            merge,
            compression,
            log_ttl_ms,
        })
    }

    /// The schema of `schema_id`, if the table has it.
    pub fn schema_by_id(&self, schema_id: i16) -> Option<&KvSchema> {
        let first = self.schemas.first()?.schema_id;
        let index = usize::try_from(schema_id.checked_sub(first)?).ok()?;
        self.schemas.get(index)
    }

    /// The number of columns of the current schema: every row a tablet
    /// merges or writes to the changelog has this many fields.
    pub fn arity(&self) -> usize {
        self.schema.columns().len()
    }

    /// Whether the table keeps a live row count: not under the WAL
    /// changelog image, whose updates do not say whether the key was new.
    pub fn counts_rows(&self) -> bool {
        self.merge.changelog_image() == ChangelogImage::Full
    }
}
