//! Table schemas and descriptors as Fluss defines them: columns with ids,
//! primary key, highest field id; the table descriptor a CreateTable carries
//! (schema, partition keys, distribution, properties); the database descriptor.
//!
//! The validation rules are Fluss's (`Schema`, `TableDescriptor` in
//! fluss-common): a value of [`Schema`] or [`TableDescriptor`] can only be
//! built through the checking constructors, so anything holding one may rely
//! on unique names and ids and on keys that name existing columns.
//! JSON conversion lives in [`crate::json`].

use std::collections::{BTreeMap, HashSet};

use crate::error::SchemaError;
use crate::types::{DataField, DataType, TypeKind, UNASSIGNED_FIELD_ID};

/// Table option naming the replication factor (Fluss `table.replication.factor`).
pub const TABLE_REPLICATION_FACTOR: &str = "table.replication.factor";
/// Table option naming the Arrow body compression (Fluss `table.log.arrow.compression.type`).
pub const TABLE_LOG_ARROW_COMPRESSION_TYPE: &str = "table.log.arrow.compression.type";
/// Table option naming the ZSTD level (Fluss `table.log.arrow.compression.zstd.level`).
pub const TABLE_LOG_ARROW_COMPRESSION_ZSTD_LEVEL: &str = "table.log.arrow.compression.zstd.level";
/// Table option naming the log format (Fluss `table.log.format`, ARROW or INDEXED).
pub const TABLE_LOG_FORMAT: &str = "table.log.format";
/// Table option naming the KV format version Fluss stamps on primary-key tables.
pub const TABLE_KV_FORMAT_VERSION: &str = "table.kv.format-version";
/// KV format version a Fluss 1.0 coordinator stamps on new primary-key tables.
pub const CURRENT_KV_FORMAT_VERSION: u32 = 2;

/// Separator between the values of a partition name (Fluss's
/// `ResolvedPartitionSpec.PARTITION_SPEC_SEPARATOR`): the partition of
/// `dt=20261130, region=eu` is named `20261130$eu`. Server and client build
/// and split names with this one constant, so they always agree.
pub const PARTITION_NAME_SEPARATOR: char = '$';

/// The partition name of `values` (in partition-key order): the values
/// joined by [`PARTITION_NAME_SEPARATOR`].
pub fn partition_name<'a>(values: impl IntoIterator<Item = &'a str>) -> String {
    let mut name = String::new();
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            name.push(PARTITION_NAME_SEPARATOR);
        }
        name.push_str(value);
    }
    name
}

/// An aggregation function attached to a column (aggregation merge engine).
/// Kept so a schema round-trips through JSON unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggFunction {
    /// Function name as Fluss writes it (`AggFunctionType.toString()`).
    pub kind: String,
    /// Optional parameters; `None` when the JSON had no `parameters` object.
    pub parameters: Option<BTreeMap<String, String>>,
}

/// One column of a [`Schema`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// Column name.
    pub name: String,
    /// Column type (with nullability).
    pub data_type: DataType,
    /// Optional comment.
    pub comment: Option<String>,
    /// Column id; [`UNASSIGNED_FIELD_ID`] before the schema assigns one.
    pub id: i32,
    /// Optional aggregation function.
    pub agg_function: Option<AggFunction>,
}

impl Column {
    /// A column without comment, with an unassigned id.
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        Self {
            name: name.into(),
            data_type,
            comment: None,
            id: UNASSIGNED_FIELD_ID,
            agg_function: None,
        }
    }

    /// The same column with the given comment.
    pub fn with_comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    /// The same column with the given id.
    pub fn with_id(mut self, id: i32) -> Self {
        self.id = id;
        self
    }
}

/// A validated table schema.
///
/// Guarantees (Fluss's `Schema` checks): column names are unique; every
/// column and nested field has an id and all ids are unique;
/// `highest_field_id >= max(id)`; primary-key columns exist, are unique and
/// are NOT NULL (made so, as Fluss does); auto-increment columns exist only
/// in primary-key tables, are not part of the key and are INT or BIGINT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    columns: Vec<Column>,
    primary_key: Option<Vec<String>>,
    auto_increment_columns: Vec<String>,
    highest_field_id: i32,
}

impl Schema {
    /// Builds a schema from columns that either all carry ids or none do.
    ///
    /// Without ids (Fluss's pre-id JSON), columns get their position as id,
    /// as Fluss's `Schema.Builder.fromColumns` does. `highest_field_id`
    /// defaults to the largest id; when given it must be at least that.
    pub fn new(
        columns: Vec<Column>,
        primary_key: Option<Vec<String>>,
        auto_increment_columns: Vec<String>,
        highest_field_id: Option<i32>,
    ) -> Result<Self, SchemaError> {
        let mut columns = columns;
        let with_id = columns
            .iter()
            .filter(|c| c.id != UNASSIGNED_FIELD_ID)
            .count();
        if with_id != 0 && with_id != columns.len() {
            return Err(SchemaError::InvalidSchema(
                "all columns must have an id or none of them".into(),
            ));
        }
        if with_id == 0 {
            for (position, column) in columns.iter_mut().enumerate() {
                column.id = i32::try_from(position).map_err(|_| {
                    SchemaError::InvalidSchema("too many columns for 32-bit ids".into())
                })?;
            }
        }
        let mut ids = Vec::with_capacity(columns.len());
        for column in &columns {
            ids.push(column.id);
            column
                .data_type
                .for_each_nested_field(&mut |f| ids.push(f.field_id));
        }
        let mut seen = HashSet::with_capacity(ids.len());
        for &id in &ids {
            if id < 0 {
                return Err(SchemaError::InvalidSchema(format!(
                    "field id {id} is invalid: ids must be non-negative"
                )));
            }
            if !seen.insert(id) {
                return Err(SchemaError::InvalidSchema(format!(
                    "field id {id} is used twice (ids of columns and nested fields must be unique)"
                )));
            }
        }
        let max_id = ids.iter().copied().max().unwrap_or(-1);
        let highest_field_id = highest_field_id.unwrap_or(max_id);
        if !columns.is_empty() && highest_field_id < max_id {
            return Err(SchemaError::InvalidSchema(format!(
                "highest field id {highest_field_id} is below the largest field id {max_id}"
            )));
        }

        let mut names = HashSet::with_capacity(columns.len());
        for column in &columns {
            if !names.insert(column.name.as_str()) {
                return Err(SchemaError::InvalidSchema(format!(
                    "column `{}` is defined twice",
                    column.name
                )));
            }
        }

        match &primary_key {
            None => {
                if !auto_increment_columns.is_empty() {
                    return Err(SchemaError::InvalidSchema(
                        "auto increment columns can only be used in primary-key tables".into(),
                    ));
                }
            }
            Some(pk) => {
                if pk.is_empty() {
                    return Err(SchemaError::InvalidSchema(
                        "the primary key must name at least one column".into(),
                    ));
                }
                let mut pk_seen = HashSet::with_capacity(pk.len());
                for name in pk {
                    if !names.contains(name.as_str()) {
                        return Err(SchemaError::InvalidSchema(format!(
                            "primary key column `{name}` is not a column of the table"
                        )));
                    }
                    if !pk_seen.insert(name.as_str()) {
                        return Err(SchemaError::InvalidSchema(format!(
                            "primary key names column `{name}` twice"
                        )));
                    }
                }
                if auto_increment_columns.len() > 1 {
                    return Err(SchemaError::InvalidSchema(
                        "at most one auto increment column is supported".into(),
                    ));
                }
                for name in &auto_increment_columns {
                    let Some(column) = columns.iter().find(|c| &c.name == name) else {
                        return Err(SchemaError::InvalidSchema(format!(
                            "auto increment column `{name}` is not a column of the table"
                        )));
                    };
                    if pk_seen.contains(name.as_str()) {
                        return Err(SchemaError::InvalidSchema(format!(
                            "auto increment column `{name}` cannot be part of the primary key"
                        )));
                    }
                    if !matches!(column.data_type.kind(), TypeKind::Int | TypeKind::BigInt) {
                        return Err(SchemaError::InvalidSchema(format!(
                            "auto increment column `{name}` must be INT or BIGINT"
                        )));
                    }
                }
                for column in &mut columns {
                    if pk_seen.contains(column.name.as_str()) {
                        if column.agg_function.is_some() {
                            return Err(SchemaError::InvalidSchema(format!(
                                "primary key column `{}` cannot have an aggregation function",
                                column.name
                            )));
                        }
                        column.data_type = column.data_type.clone().not_null();
                    }
                }
            }
        }

        Ok(Self {
            columns,
            primary_key,
            auto_increment_columns,
            highest_field_id,
        })
    }

    /// Starts a schema the way Fluss's `Schema.newBuilder().column(..)` does:
    /// ids assigned in declaration order, nested fields depth-first.
    pub fn builder() -> SchemaBuilder {
        SchemaBuilder {
            columns: Vec::new(),
            primary_key: None,
            highest_field_id: -1,
        }
    }

    /// This schema with one column appended, as Fluss's ALTER TABLE ADD
    /// COLUMN builds it (`Schema.newBuilder().fromSchema(s).column(..)`):
    /// the column gets id `highest_field_id + 1`, its nested fields the
    /// ids after that (depth-first), and the highest field id moves past
    /// them; every existing column keeps its id. The caller checks what
    /// ALTER TABLE allows (a new name, a nullable type); this only refuses
    /// what no schema may hold (a duplicate name, ids past `i32::MAX`).
    pub fn with_column(
        &self,
        name: impl Into<String>,
        data_type: DataType,
        comment: Option<String>,
    ) -> Result<Schema, SchemaError> {
        let mut nested = 0i32;
        data_type.for_each_nested_field(&mut |_| nested = nested.saturating_add(1));
        let id = self
            .highest_field_id
            .checked_add(1)
            .filter(|id| id.checked_add(nested).is_some())
            .ok_or_else(|| SchemaError::InvalidSchema("no field id is left".into()))?;
        let mut highest = id;
        let mut data_type = data_type;
        reassign_nested_ids(&mut data_type, &mut highest);
        let mut column = Column::new(name, data_type).with_id(id);
        column.comment = comment;
        let mut columns = self.columns.clone();
        columns.push(column);
        Schema::new(
            columns,
            self.primary_key.clone(),
            self.auto_increment_columns.clone(),
            Some(highest),
        )
    }

    /// The columns, in table order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Primary-key column names, if the table has one.
    pub fn primary_key(&self) -> Option<&[String]> {
        self.primary_key.as_deref()
    }

    /// Auto-increment column names (at most one).
    pub fn auto_increment_columns(&self) -> &[String] {
        &self.auto_increment_columns
    }

    /// The highest field id ever assigned in this table (ids are never reused).
    pub fn highest_field_id(&self) -> i32 {
        self.highest_field_id
    }

    /// Index of the column with the given name.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The schema as a ROW type (column ids become field ids), the form the
    /// Arrow mapping and the row encoders work from.
    pub fn row_type(&self) -> Vec<DataField> {
        self.columns
            .iter()
            .map(|c| DataField {
                name: c.name.clone(),
                data_type: c.data_type.clone(),
                description: c.comment.clone(),
                field_id: c.id,
            })
            .collect()
    }
}

/// Builder assigning ids like Fluss's `Schema.Builder#column`.
#[derive(Debug)]
pub struct SchemaBuilder {
    columns: Vec<Column>,
    primary_key: Option<Vec<String>>,
    highest_field_id: i32,
}

impl SchemaBuilder {
    /// Appends a column; it and its nested fields get the next ids.
    pub fn column(mut self, name: impl Into<String>, data_type: DataType) -> Self {
        self.highest_field_id += 1;
        let id = self.highest_field_id;
        let mut data_type = data_type;
        reassign_nested_ids(&mut data_type, &mut self.highest_field_id);
        self.columns.push(Column::new(name, data_type).with_id(id));
        self
    }

    /// Sets the comment of the last column added (no-op without columns).
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        if let Some(last) = self.columns.last_mut() {
            last.comment = Some(comment.into());
        }
        self
    }

    /// Declares the primary key.
    pub fn primary_key<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.primary_key = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Validates and builds the schema.
    pub fn build(self) -> Result<Schema, SchemaError> {
        Schema::new(
            self.columns,
            self.primary_key,
            Vec::new(),
            Some(self.highest_field_id),
        )
    }
}

/// Gives every nested ROW field a fresh id, depth-first, parents first
/// (Fluss's `ReassignFieldId`).
fn reassign_nested_ids(data_type: &mut DataType, highest: &mut i32) {
    match data_type.kind_mut() {
        TypeKind::Row(fields) => {
            for field in fields {
                *highest += 1;
                field.field_id = *highest;
                reassign_nested_ids(&mut field.data_type, highest);
            }
        }
        TypeKind::Array(element) => reassign_nested_ids(element, highest),
        TypeKind::Map { key, value } => {
            reassign_nested_ids(key, highest);
            reassign_nested_ids(value, highest);
        }
        _ => {}
    }
}

/// How a table's rows are spread over buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDistribution {
    /// Number of buckets; `None` lets the server pick its default.
    pub bucket_count: Option<i32>,
    /// Columns hashed to pick a bucket; empty for sticky/round-robin log tables.
    pub bucket_keys: Vec<String>,
}

/// A validated table descriptor: what CreateTable's `table_json` carries and
/// what GetTableInfo's `table_json` returns (with a resolved bucket count).
///
/// Guarantees (Fluss's `TableDescriptor` checks): partition keys name columns
/// (and are a subset of the primary key for primary-key tables); bucket keys
/// name columns, do not overlap the partition keys, and for primary-key
/// tables are a subset of the primary key — defaulting to the primary key
/// minus the partition keys when not given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDescriptor {
    schema: Schema,
    comment: Option<String>,
    partition_keys: Vec<String>,
    distribution: Option<TableDistribution>,
    properties: BTreeMap<String, String>,
    custom_properties: BTreeMap<String, String>,
}

impl TableDescriptor {
    /// Validates and normalises a descriptor the way Fluss's constructor does.
    pub fn new(
        schema: Schema,
        comment: Option<String>,
        partition_keys: Vec<String>,
        distribution: Option<TableDistribution>,
        properties: BTreeMap<String, String>,
        custom_properties: BTreeMap<String, String>,
    ) -> Result<Self, SchemaError> {
        let distribution = normalize_distribution(&schema, &partition_keys, distribution)?;
        match schema.primary_key() {
            Some(pk) => {
                for key in &partition_keys {
                    if !pk.contains(key) {
                        return Err(SchemaError::InvalidTable(format!(
                            "partition key `{key}` must be part of the primary key {pk:?} of a partitioned primary-key table"
                        )));
                    }
                }
            }
            None => {
                for key in &partition_keys {
                    if schema.column_index(key).is_none() {
                        return Err(SchemaError::InvalidTable(format!(
                            "partition key `{key}` does not exist in the schema"
                        )));
                    }
                }
            }
        }
        if let Some(distribution) = &distribution {
            for key in &distribution.bucket_keys {
                if schema.column_index(key).is_none() {
                    return Err(SchemaError::InvalidTable(format!(
                        "bucket key `{key}` does not exist in the schema"
                    )));
                }
            }
        }
        Ok(Self {
            schema,
            comment,
            partition_keys,
            distribution,
            properties,
            custom_properties,
        })
    }

    /// The table schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
    /// The table comment.
    pub fn comment(&self) -> Option<&str> {
        self.comment.as_deref()
    }
    /// Partition key column names (empty: not partitioned).
    pub fn partition_keys(&self) -> &[String] {
        &self.partition_keys
    }
    /// The distribution, if one was declared (always present for PK tables).
    pub fn distribution(&self) -> Option<&TableDistribution> {
        self.distribution.as_ref()
    }
    /// Bucket key column names (empty when none).
    pub fn bucket_keys(&self) -> &[String] {
        self.distribution
            .as_ref()
            .map_or(&[][..], |d| d.bucket_keys.as_slice())
    }
    /// Declared bucket count, if any.
    pub fn bucket_count(&self) -> Option<i32> {
        self.distribution.as_ref().and_then(|d| d.bucket_count)
    }
    /// Table options (`table.*` keys Fluss interprets).
    pub fn properties(&self) -> &BTreeMap<String, String> {
        &self.properties
    }
    /// Custom options Fluss stores but does not interpret.
    pub fn custom_properties(&self) -> &BTreeMap<String, String> {
        &self.custom_properties
    }
    /// Whether the table has a primary key.
    pub fn has_primary_key(&self) -> bool {
        self.schema.primary_key().is_some()
    }
    /// Whether the table is partitioned.
    pub fn is_partitioned(&self) -> bool {
        !self.partition_keys.is_empty()
    }

    /// The descriptor a Fluss coordinator stores and returns in GetTableInfo:
    /// the bucket count filled in when absent and `table.replication.factor`
    /// set when absent (`CoordinatorService.applySystemDefaults`), and the KV
    /// format version stamped on primary-key tables.
    pub fn with_server_defaults(
        mut self,
        default_bucket_count: i32,
        default_replication_factor: i32,
    ) -> Self {
        match &mut self.distribution {
            Some(d) if d.bucket_count.is_some() => {}
            Some(d) => d.bucket_count = Some(default_bucket_count),
            None => {
                self.distribution = Some(TableDistribution {
                    bucket_count: Some(default_bucket_count),
                    bucket_keys: Vec::new(),
                })
            }
        }
        self.properties
            .entry(TABLE_REPLICATION_FACTOR.to_owned())
            .or_insert_with(|| default_replication_factor.to_string());
        if self.has_primary_key() {
            self.properties
                .entry(TABLE_KV_FORMAT_VERSION.to_owned())
                .or_insert_with(|| CURRENT_KV_FORMAT_VERSION.to_string());
        }
        self
    }
}

fn normalize_distribution(
    schema: &Schema,
    partition_keys: &[String],
    distribution: Option<TableDistribution>,
) -> Result<Option<TableDistribution>, SchemaError> {
    let Some(pk) = schema.primary_key() else {
        if let Some(d) = &distribution {
            check_bucket_keys_outside_partition(&d.bucket_keys, partition_keys)?;
        }
        return Ok(distribution);
    };
    let default_keys = || -> Result<Vec<String>, SchemaError> {
        let keys: Vec<String> = pk
            .iter()
            .filter(|k| !partition_keys.contains(k))
            .cloned()
            .collect();
        if keys.is_empty() {
            return Err(SchemaError::InvalidTable(format!(
                "primary key {pk:?} must not be the same as the partition keys {partition_keys:?}"
            )));
        }
        Ok(keys)
    };
    match distribution {
        None => Ok(Some(TableDistribution {
            bucket_count: None,
            bucket_keys: default_keys()?,
        })),
        Some(d) => {
            check_bucket_keys_outside_partition(&d.bucket_keys, partition_keys)?;
            if d.bucket_keys.is_empty() {
                return Ok(Some(TableDistribution {
                    bucket_count: d.bucket_count,
                    bucket_keys: default_keys()?,
                }));
            }
            if let Some(bad) = d.bucket_keys.iter().find(|k| !pk.contains(k)) {
                return Err(SchemaError::InvalidTable(format!(
                    "bucket key `{bad}` is not part of the primary key {pk:?}: bucket keys of a primary-key table must be a subset of the primary key excluding partition keys"
                )));
            }
            Ok(Some(d))
        }
    }
}

fn check_bucket_keys_outside_partition(
    bucket_keys: &[String],
    partition_keys: &[String],
) -> Result<(), SchemaError> {
    if let Some(bad) = bucket_keys.iter().find(|k| partition_keys.contains(k)) {
        return Err(SchemaError::InvalidTable(format!(
            "bucket key `{bad}` must not be a partition key (partition keys {partition_keys:?})"
        )));
    }
    Ok(())
}

/// A database's descriptor: comment and custom properties.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatabaseDescriptor {
    /// Optional comment.
    pub comment: Option<String>,
    /// Custom properties Fluss stores but does not interpret.
    pub custom_properties: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_join_values_in_key_order_with_the_fluss_separator() {
        assert_eq!(partition_name(["20261130"]), "20261130");
        assert_eq!(partition_name(["20261130", "eu"]), "20261130$eu");
        assert_eq!(partition_name(std::iter::empty()), "");
        let name = partition_name(["a", "b", "c"]);
        let back: Vec<&str> = name.split(PARTITION_NAME_SEPARATOR).collect();
        assert_eq!(back, ["a", "b", "c"]);
    }

    #[test]
    fn builder_assigns_nested_ids_depth_first_like_fluss() {
        let schema = Schema::builder()
            .column("id", DataType::int())
            .column(
                "nested",
                DataType::row(vec![
                    DataField::new("x", DataType::int()),
                    DataField::new("label", DataType::string()),
                ]),
            )
            .column(
                "deep",
                DataType::row(vec![DataField::new(
                    "inner",
                    DataType::row(vec![DataField::new("n", DataType::int())]),
                )]),
            )
            .build()
            .unwrap();
        let ids: Vec<i32> = schema.columns().iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![0, 1, 4]);
        assert_eq!(schema.highest_field_id(), 6);
        let TypeKind::Row(fields) = schema.columns()[2].data_type.kind() else {
            panic!()
        };
        assert_eq!(fields[0].field_id, 5);
    }

    #[test]
    fn an_added_column_gets_the_next_ids_and_keeps_the_others() {
        let schema = Schema::builder()
            .column("id", DataType::int())
            .column(
                "nested",
                DataType::row(vec![DataField::new("x", DataType::int())]),
            )
            .primary_key(["id"])
            .build()
            .unwrap();
        assert_eq!(schema.highest_field_id(), 2);
        let added = schema
            .with_column(
                "extra",
                DataType::row(vec![DataField::new("y", DataType::string())]),
                Some("new".into()),
            )
            .unwrap();
        let ids: Vec<i32> = added.columns().iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![0, 1, 3]);
        assert_eq!(added.highest_field_id(), 4);
        assert_eq!(added.columns()[2].comment.as_deref(), Some("new"));
        let TypeKind::Row(fields) = added.columns()[2].data_type.kind() else {
            panic!()
        };
        assert_eq!(fields[0].field_id, 4);
        assert_eq!(added.primary_key(), schema.primary_key());
        assert_eq!(&added.columns()[..2], schema.columns());
        // Ids are never reused: a schema whose highest id is past its
        // columns' continues from there.
        let gapped = Schema::new(
            vec![Column::new("a", DataType::int()).with_id(0)],
            None,
            vec![],
            Some(7),
        )
        .unwrap();
        assert_eq!(
            gapped
                .with_column("b", DataType::int(), None)
                .unwrap()
                .columns()[1]
                .id,
            8
        );
        assert!(schema.with_column("id", DataType::int(), None).is_err());
    }

    #[test]
    fn columns_without_ids_get_their_positions() {
        let schema = Schema::new(
            vec![
                Column::new("a", DataType::int()),
                Column::new("b", DataType::int()),
            ],
            None,
            vec![],
            None,
        )
        .unwrap();
        assert_eq!(schema.columns()[1].id, 1);
        assert_eq!(schema.highest_field_id(), 1);
    }

    #[test]
    fn schema_rejects_partial_ids_duplicate_ids_and_names() {
        let partial = Schema::new(
            vec![
                Column::new("a", DataType::int()).with_id(0),
                Column::new("b", DataType::int()),
            ],
            None,
            vec![],
            None,
        );
        assert!(partial.unwrap_err().to_string().contains("all columns"));
        let dup_id = Schema::new(
            vec![
                Column::new("a", DataType::int()).with_id(3),
                Column::new("b", DataType::int()).with_id(3),
            ],
            None,
            vec![],
            None,
        );
        assert!(dup_id.unwrap_err().to_string().contains("field id 3"));
        let dup_name = Schema::builder()
            .column("a", DataType::int())
            .column("a", DataType::int())
            .build();
        assert!(dup_name.unwrap_err().to_string().contains("`a`"));
    }

    #[test]
    fn highest_field_id_below_the_largest_id_is_rejected() {
        let err = Schema::new(
            vec![Column::new("a", DataType::int()).with_id(5)],
            None,
            vec![],
            Some(4),
        )
        .unwrap_err();
        assert!(err.to_string().contains("highest field id 4"), "{err}");
    }

    #[test]
    fn primary_key_columns_become_not_null() {
        let schema = Schema::builder()
            .column("k", DataType::int())
            .column("v", DataType::string())
            .primary_key(["k"])
            .build()
            .unwrap();
        assert!(!schema.columns()[0].data_type.is_nullable());
        assert!(schema.columns()[1].data_type.is_nullable());
    }

    fn log_schema() -> Schema {
        Schema::builder()
            .column("a", DataType::int())
            .column("b", DataType::string())
            .build()
            .unwrap()
    }

    #[test]
    fn unknown_bucket_key_is_rejected_by_name() {
        let err = TableDescriptor::new(
            log_schema(),
            None,
            vec![],
            Some(TableDistribution {
                bucket_count: Some(3),
                bucket_keys: vec!["nope".into()],
            }),
            BTreeMap::new(),
            BTreeMap::new(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid table: bucket key `nope` does not exist in the schema"
        );
    }

    #[test]
    fn primary_key_table_bucket_keys_default_to_key_minus_partition() {
        let schema = Schema::builder()
            .column("k", DataType::int())
            .column("p", DataType::string())
            .column("v", DataType::string())
            .primary_key(["k", "p"])
            .build()
            .unwrap();
        let table = TableDescriptor::new(
            schema,
            None,
            vec!["p".into()],
            None,
            BTreeMap::new(),
            BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(table.bucket_keys(), ["k".to_string()]);
        assert_eq!(table.bucket_count(), None);
    }

    #[test]
    fn server_defaults_fill_bucket_count_and_replication_only_when_absent() {
        let table = TableDescriptor::new(
            log_schema(),
            None,
            vec![],
            None,
            BTreeMap::from([(TABLE_REPLICATION_FACTOR.to_owned(), "3".to_owned())]),
            BTreeMap::new(),
        )
        .unwrap()
        .with_server_defaults(1, 1);
        assert_eq!(table.bucket_count(), Some(1));
        assert_eq!(table.properties()[TABLE_REPLICATION_FACTOR], "3");
    }
}
