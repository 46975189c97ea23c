//! Fluss's JSON forms of data types, schemas, table and database descriptors.
//!
//! Key names and shapes follow Fluss's `DataTypeJsonSerde`, `ColumnJsonSerde`,
//! `SchemaJsonSerde`, `TableDescriptorJsonSerde` and
//! `DatabaseDescriptorJsonSerde` (fluss-common), which fluss-rs
//! (`metadata/json_serde.rs`) and therefore pyfluss mirror:
//!
//! ```text
//! table   {"version":1,"schema":{..},"comment"?:s,"partition_key":[s],
//!          "bucket_key"?:[s],"bucket_count"?:n,"properties":{s:s},"custom_properties":{s:s}}
//! schema  {"version":1,"columns":[column],"primary_key"?:[s],
//!          "auto_increment_column"?:[s],"highest_field_id":n}
//! column  {"name":s,"data_type":type,"comment"?:s,"agg_function"?:{"type":s,"parameters"?:{s:s}},"id":n}
//! type    {"type":ROOT,"nullable"?:false, ROOT-specific: "length" | "precision" ["scale"]
//!          | "element_type" | "key_type","value_type" | "fields":[{"name","field_type","description"?,"field_id"}]}
//! database {"version":1,"comment"?:s,"custom_properties":{s:s}}
//! ```
//!
//! Parsing is strict where clients are uniform (every required key, value
//! types, type parameters, the format version) and names the offending key;
//! unknown keys are ignored, as Fluss does, so newer clients stay readable.
//! GetTableInfo returns the same table JSON as CreateTable sends, with the
//! server's resolved bucket count and properties
//! ([`TableDescriptor::with_server_defaults`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::SchemaError;
use crate::schema::{
    AggFunction, Column, DatabaseDescriptor, Schema, TableDescriptor, TableDistribution,
};
use crate::types::{DataField, DataType, TypeKind, UNASSIGNED_FIELD_ID};

/// The only JSON format version Fluss writes for schemas, tables and databases.
pub const JSON_FORMAT_VERSION: i64 = 1;

// ---------------------------------------------------------------------------
// Reading helpers: every failure names the key and the object.

fn object<'a>(value: &'a Value, context: &str) -> Result<&'a Map<String, Value>, SchemaError> {
    value.as_object().ok_or_else(|| SchemaError::WrongField {
        field: "(value)",
        context: context.to_owned(),
        expected: "a JSON object",
    })
}

fn required<'a>(
    obj: &'a Map<String, Value>,
    field: &'static str,
    context: &str,
) -> Result<&'a Value, SchemaError> {
    match obj.get(field) {
        Some(v) if !v.is_null() => Ok(v),
        _ => Err(SchemaError::MissingField {
            field,
            context: context.to_owned(),
        }),
    }
}

fn optional<'a>(obj: &'a Map<String, Value>, field: &'static str) -> Option<&'a Value> {
    obj.get(field).filter(|v| !v.is_null())
}

fn as_str<'a>(v: &'a Value, field: &'static str, context: &str) -> Result<&'a str, SchemaError> {
    v.as_str().ok_or_else(|| SchemaError::WrongField {
        field,
        context: context.to_owned(),
        expected: "a string",
    })
}

fn as_i32(v: &Value, field: &'static str, context: &str) -> Result<i32, SchemaError> {
    v.as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| SchemaError::WrongField {
            field,
            context: context.to_owned(),
            expected: "a 32-bit integer",
        })
}

fn as_u32(v: &Value, field: &'static str, context: &str) -> Result<u32, SchemaError> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| SchemaError::WrongField {
            field,
            context: context.to_owned(),
            expected: "a non-negative 32-bit integer",
        })
}

fn string_list(v: &Value, field: &'static str, context: &str) -> Result<Vec<String>, SchemaError> {
    let wrong = || SchemaError::WrongField {
        field,
        context: context.to_owned(),
        expected: "an array of strings",
    };
    let items = v.as_array().ok_or_else(wrong)?;
    items
        .iter()
        .map(|item| item.as_str().map(str::to_owned).ok_or_else(wrong))
        .collect()
}

fn string_map(
    v: &Value,
    field: &'static str,
    context: &str,
) -> Result<BTreeMap<String, String>, SchemaError> {
    let wrong = || SchemaError::WrongField {
        field,
        context: context.to_owned(),
        expected: "an object with string values",
    };
    let obj = v.as_object().ok_or_else(wrong)?;
    obj.iter()
        .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or_else(wrong)?.to_owned())))
        .collect()
}

fn check_version(obj: &Map<String, Value>, context: &str) -> Result<(), SchemaError> {
    match optional(obj, "version") {
        None => Ok(()),
        Some(v) if v.as_i64() == Some(JSON_FORMAT_VERSION) => Ok(()),
        Some(_) => Err(SchemaError::WrongField {
            field: "version",
            context: context.to_owned(),
            expected: "1 (the only format version Fluss writes)",
        }),
    }
}

fn parse_bytes(bytes: &[u8], what: &'static str) -> Result<Value, SchemaError> {
    serde_json::from_slice(bytes).map_err(|source| SchemaError::Syntax { what, source })
}

// ---------------------------------------------------------------------------
// Data types

/// Fluss's JSON form of a data type (`DataTypeJsonSerde`).
pub fn data_type_to_json(data_type: &DataType) -> Value {
    let mut obj = Map::new();
    obj.insert("type".into(), Value::from(data_type.type_root()));
    if !data_type.is_nullable() {
        obj.insert("nullable".into(), Value::Bool(false));
    }
    match data_type.kind() {
        TypeKind::Char { length } | TypeKind::Binary { length } => {
            obj.insert("length".into(), Value::from(*length));
        }
        TypeKind::Decimal { precision, scale } => {
            obj.insert("precision".into(), Value::from(*precision));
            obj.insert("scale".into(), Value::from(*scale));
        }
        TypeKind::Time { precision }
        | TypeKind::Timestamp { precision }
        | TypeKind::TimestampLtz { precision } => {
            obj.insert("precision".into(), Value::from(*precision));
        }
        TypeKind::Array(element) => {
            obj.insert("element_type".into(), data_type_to_json(element));
        }
        TypeKind::Map { key, value } => {
            obj.insert("key_type".into(), data_type_to_json(key));
            obj.insert("value_type".into(), data_type_to_json(value));
        }
        TypeKind::Row(fields) => {
            let fields = fields
                .iter()
                .map(|f| {
                    let mut field = Map::new();
                    field.insert("name".into(), Value::from(f.name.as_str()));
                    field.insert("field_type".into(), data_type_to_json(&f.data_type));
                    if let Some(description) = &f.description {
                        field.insert("description".into(), Value::from(description.as_str()));
                    }
                    field.insert("field_id".into(), Value::from(f.field_id));
                    Value::Object(field)
                })
                .collect();
            obj.insert("fields".into(), Value::Array(fields));
        }
        TypeKind::Boolean
        | TypeKind::TinyInt
        | TypeKind::SmallInt
        | TypeKind::Int
        | TypeKind::BigInt
        | TypeKind::Float
        | TypeKind::Double
        | TypeKind::String
        | TypeKind::Date
        | TypeKind::Bytes => {}
    }
    Value::Object(obj)
}

/// Parses Fluss's JSON form of a data type; `nullable` defaults to true.
pub fn data_type_from_json(value: &Value) -> Result<DataType, SchemaError> {
    const CTX: &str = "data type";
    let obj = object(value, CTX)?;
    let root = as_str(required(obj, "type", CTX)?, "type", CTX)?;
    let length = || as_u32(required(obj, "length", root)?, "length", root);
    let precision = || as_u32(required(obj, "precision", root)?, "precision", root);
    let data_type = match root {
        "BOOLEAN" => DataType::boolean(),
        "TINYINT" => DataType::tinyint(),
        "SMALLINT" => DataType::smallint(),
        "INTEGER" => DataType::int(),
        "BIGINT" => DataType::bigint(),
        "FLOAT" => DataType::float(),
        "DOUBLE" => DataType::double(),
        "STRING" => DataType::string(),
        "DATE" => DataType::date(),
        "BYTES" => DataType::bytes(),
        "CHAR" => DataType::char(length()?)?,
        "BINARY" => DataType::binary(length()?)?,
        "DECIMAL" => {
            let scale = as_u32(required(obj, "scale", root)?, "scale", root)?;
            DataType::decimal(precision()?, scale)?
        }
        "TIME_WITHOUT_TIME_ZONE" => DataType::time(precision()?)?,
        "TIMESTAMP_WITHOUT_TIME_ZONE" => DataType::timestamp(precision()?)?,
        "TIMESTAMP_WITH_LOCAL_TIME_ZONE" => DataType::timestamp_ltz(precision()?)?,
        "ARRAY" => DataType::array(data_type_from_json(required(obj, "element_type", root)?)?),
        "MAP" => DataType::map(
            data_type_from_json(required(obj, "key_type", root)?)?,
            data_type_from_json(required(obj, "value_type", root)?)?,
        ),
        "ROW" => {
            let fields = required(obj, "fields", root)?.as_array().ok_or_else(|| {
                SchemaError::WrongField {
                    field: "fields",
                    context: root.to_owned(),
                    expected: "an array",
                }
            })?;
            let fields = fields
                .iter()
                .map(data_field_from_json)
                .collect::<Result<Vec<_>, _>>()?;
            DataType::row(fields)
        }
        other => return Err(SchemaError::UnknownType(other.to_owned())),
    };
    let nullable = match optional(obj, "nullable") {
        None => true,
        Some(v) => v.as_bool().ok_or_else(|| SchemaError::WrongField {
            field: "nullable",
            context: root.to_owned(),
            expected: "a boolean",
        })?,
    };
    Ok(data_type.with_nullable(nullable))
}

fn data_field_from_json(value: &Value) -> Result<DataField, SchemaError> {
    const CTX: &str = "ROW field";
    let obj = object(value, CTX)?;
    let name = as_str(required(obj, "name", CTX)?, "name", CTX)?;
    let context = || format!("ROW field `{name}`");
    let data_type = data_type_from_json(required(obj, "field_type", &context())?)?;
    let description = optional(obj, "description")
        .map(|v| as_str(v, "description", &context()).map(str::to_owned))
        .transpose()?;
    let field_id = optional(obj, "field_id")
        .map(|v| as_i32(v, "field_id", &context()))
        .transpose()?
        .unwrap_or(UNASSIGNED_FIELD_ID);
    Ok(DataField {
        name: name.to_owned(),
        data_type,
        description,
        field_id,
    })
}

// ---------------------------------------------------------------------------
// Columns and schemas

fn column_to_json(column: &Column) -> Value {
    let mut obj = Map::new();
    obj.insert("name".into(), Value::from(column.name.as_str()));
    obj.insert("data_type".into(), data_type_to_json(&column.data_type));
    if let Some(comment) = &column.comment {
        obj.insert("comment".into(), Value::from(comment.as_str()));
    }
    if let Some(agg) = &column.agg_function {
        let mut agg_obj = Map::new();
        agg_obj.insert("type".into(), Value::from(agg.kind.as_str()));
        if let Some(parameters) = &agg.parameters {
            let parameters = parameters
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect();
            agg_obj.insert("parameters".into(), Value::Object(parameters));
        }
        obj.insert("agg_function".into(), Value::Object(agg_obj));
    }
    obj.insert("id".into(), Value::from(column.id));
    Value::Object(obj)
}

fn column_from_json(value: &Value) -> Result<Column, SchemaError> {
    const CTX: &str = "column";
    let obj = object(value, CTX)?;
    let name = as_str(required(obj, "name", CTX)?, "name", CTX)?;
    let context = || format!("column `{name}`");
    let data_type = data_type_from_json(required(obj, "data_type", &context())?)?;
    let comment = optional(obj, "comment")
        .map(|v| as_str(v, "comment", &context()).map(str::to_owned))
        .transpose()?;
    let id = optional(obj, "id")
        .map(|v| as_i32(v, "id", &context()))
        .transpose()?
        .unwrap_or(UNASSIGNED_FIELD_ID);
    let agg_function = optional(obj, "agg_function")
        .map(|v| {
            let agg_ctx = format!("agg_function of column `{name}`");
            let agg = object(v, &agg_ctx)?;
            let kind = as_str(required(agg, "type", &agg_ctx)?, "type", &agg_ctx)?.to_owned();
            let parameters = optional(agg, "parameters")
                .map(|p| string_map(p, "parameters", &agg_ctx))
                .transpose()?;
            Ok::<_, SchemaError>(AggFunction { kind, parameters })
        })
        .transpose()?;
    Ok(Column {
        name: name.to_owned(),
        data_type,
        comment,
        id,
        agg_function,
    })
}

/// Fluss's JSON form of a schema (`SchemaJsonSerde`).
pub fn schema_to_json(schema: &Schema) -> Value {
    let mut obj = Map::new();
    obj.insert("version".into(), Value::from(JSON_FORMAT_VERSION));
    obj.insert(
        "columns".into(),
        Value::Array(schema.columns().iter().map(column_to_json).collect()),
    );
    if let Some(pk) = schema.primary_key() {
        obj.insert("primary_key".into(), Value::from(pk.to_vec()));
    }
    if !schema.auto_increment_columns().is_empty() {
        obj.insert(
            "auto_increment_column".into(),
            Value::from(schema.auto_increment_columns().to_vec()),
        );
    }
    obj.insert(
        "highest_field_id".into(),
        Value::from(schema.highest_field_id()),
    );
    Value::Object(obj)
}

/// Parses Fluss's JSON form of a schema and validates it ([`Schema::new`]).
pub fn schema_from_json(value: &Value) -> Result<Schema, SchemaError> {
    const CTX: &str = "schema";
    let obj = object(value, CTX)?;
    check_version(obj, CTX)?;
    let columns = required(obj, "columns", CTX)?
        .as_array()
        .ok_or_else(|| SchemaError::WrongField {
            field: "columns",
            context: CTX.to_owned(),
            expected: "an array",
        })?
        .iter()
        .map(column_from_json)
        .collect::<Result<Vec<_>, _>>()?;
    let primary_key = optional(obj, "primary_key")
        .map(|v| string_list(v, "primary_key", CTX))
        .transpose()?;
    let auto_increment = optional(obj, "auto_increment_column")
        .map(|v| string_list(v, "auto_increment_column", CTX))
        .transpose()?
        .unwrap_or_default();
    let highest_field_id = optional(obj, "highest_field_id")
        .map(|v| as_i32(v, "highest_field_id", CTX))
        .transpose()?;
    Schema::new(columns, primary_key, auto_increment, highest_field_id)
}

/// Parses a schema from JSON bytes (GetTableSchema's `schema_json`).
pub fn schema_from_json_bytes(bytes: &[u8]) -> Result<Schema, SchemaError> {
    schema_from_json(&parse_bytes(bytes, "schema JSON")?)
}

/// Serialises a schema to JSON bytes (GetTableSchema's `schema_json`).
pub fn schema_to_json_bytes(schema: &Schema) -> Vec<u8> {
    schema_to_json(schema).to_string().into_bytes()
}

// ---------------------------------------------------------------------------
// Table descriptors

/// Fluss's JSON form of a table descriptor (`TableDescriptorJsonSerde`).
pub fn table_to_json(table: &TableDescriptor) -> Value {
    let mut obj = Map::new();
    obj.insert("version".into(), Value::from(JSON_FORMAT_VERSION));
    obj.insert("schema".into(), schema_to_json(table.schema()));
    if let Some(comment) = table.comment() {
        obj.insert("comment".into(), Value::from(comment));
    }
    obj.insert(
        "partition_key".into(),
        Value::from(table.partition_keys().to_vec()),
    );
    if let Some(distribution) = table.distribution() {
        obj.insert(
            "bucket_key".into(),
            Value::from(distribution.bucket_keys.clone()),
        );
        if let Some(count) = distribution.bucket_count {
            obj.insert("bucket_count".into(), Value::from(count));
        }
    }
    let props = |m: &BTreeMap<String, String>| {
        Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect(),
        )
    };
    obj.insert("properties".into(), props(table.properties()));
    obj.insert("custom_properties".into(), props(table.custom_properties()));
    Value::Object(obj)
}

/// Parses Fluss's JSON form of a table descriptor and validates it
/// ([`TableDescriptor::new`]): unknown bucket/partition keys, a non-positive
/// bucket count and bad schemas are errors naming the problem.
pub fn table_from_json(value: &Value) -> Result<TableDescriptor, SchemaError> {
    const CTX: &str = "table descriptor";
    let obj = object(value, CTX)?;
    check_version(obj, CTX)?;
    let schema = schema_from_json(required(obj, "schema", CTX)?)?;
    let comment = optional(obj, "comment")
        .map(|v| as_str(v, "comment", CTX).map(str::to_owned))
        .transpose()?;
    let partition_keys = string_list(required(obj, "partition_key", CTX)?, "partition_key", CTX)?;
    let bucket_keys = optional(obj, "bucket_key")
        .map(|v| string_list(v, "bucket_key", CTX))
        .transpose()?;
    let bucket_count = optional(obj, "bucket_count")
        .map(|v| as_i32(v, "bucket_count", CTX))
        .transpose()?;
    if let Some(count) = bucket_count {
        if count < 1 {
            return Err(SchemaError::InvalidTable(format!(
                "bucket count must be at least 1, got {count}"
            )));
        }
    }
    let distribution = if bucket_keys.is_some() || bucket_count.is_some() {
        Some(TableDistribution {
            bucket_count,
            bucket_keys: bucket_keys.unwrap_or_default(),
        })
    } else {
        None
    };
    let properties = string_map(required(obj, "properties", CTX)?, "properties", CTX)?;
    let custom_properties = string_map(
        required(obj, "custom_properties", CTX)?,
        "custom_properties",
        CTX,
    )?;
    TableDescriptor::new(
        schema,
        comment,
        partition_keys,
        distribution,
        properties,
        custom_properties,
    )
}

impl TableDescriptor {
    /// Parses CreateTable's / GetTableInfo's `table_json` bytes.
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, SchemaError> {
        table_from_json(&parse_bytes(bytes, "table descriptor JSON")?)
    }

    /// Serialises to the `table_json` bytes clients parse.
    pub fn to_json_bytes(&self) -> Vec<u8> {
        table_to_json(self).to_string().into_bytes()
    }
}

impl Schema {
    /// Parses GetTableSchema's `schema_json` bytes.
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, SchemaError> {
        schema_from_json_bytes(bytes)
    }

    /// Serialises to the `schema_json` bytes clients parse.
    pub fn to_json_bytes(&self) -> Vec<u8> {
        schema_to_json_bytes(self)
    }
}

// ---------------------------------------------------------------------------
// Database descriptors

/// Fluss's JSON form of a database descriptor (`DatabaseDescriptorJsonSerde`).
pub fn database_to_json(database: &DatabaseDescriptor) -> Value {
    let mut obj = Map::new();
    obj.insert("version".into(), Value::from(JSON_FORMAT_VERSION));
    if let Some(comment) = &database.comment {
        obj.insert("comment".into(), Value::from(comment.as_str()));
    }
    obj.insert(
        "custom_properties".into(),
        Value::Object(
            database
                .custom_properties
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect(),
        ),
    );
    Value::Object(obj)
}

/// Parses Fluss's JSON form of a database descriptor.
pub fn database_from_json(value: &Value) -> Result<DatabaseDescriptor, SchemaError> {
    const CTX: &str = "database descriptor";
    let obj = object(value, CTX)?;
    check_version(obj, CTX)?;
    let comment = optional(obj, "comment")
        .map(|v| as_str(v, "comment", CTX).map(str::to_owned))
        .transpose()?;
    // fluss-rs treats a missing `custom_properties` as empty; so do we.
    let custom_properties = optional(obj, "custom_properties")
        .map(|v| string_map(v, "custom_properties", CTX))
        .transpose()?
        .unwrap_or_default();
    Ok(DatabaseDescriptor {
        comment,
        custom_properties,
    })
}

impl DatabaseDescriptor {
    /// Parses CreateDatabase's / GetDatabaseInfo's `database_json` bytes.
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, SchemaError> {
        database_from_json(&parse_bytes(bytes, "database descriptor JSON")?)
    }

    /// Serialises to the `database_json` bytes clients parse.
    pub fn to_json_bytes(&self) -> Vec<u8> {
        database_to_json(self).to_string().into_bytes()
    }
}
