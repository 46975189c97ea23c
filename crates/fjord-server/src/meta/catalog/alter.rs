//! ALTER TABLE in the catalog, as Fluss 0.9.1's coordinator does it
//! (`MetadataManager.alterTableSchema` / `alterTableProperties`,
//! `SchemaUpdate`, `TableDescriptorValidation.validateAlterTableProperties`,
//! `FlussConfigUtils.ALTERABLE_TABLE_OPTIONS`).
//!
//! ```text
//! options  every `table.*` key changed must be alterable (INVALID_ALTER_TABLE
//!          otherwise); the new values must parse (INVALID_CONFIG); nothing
//!          changed: nothing written; else properties and custom properties
//!          replaced, modified_time = now, schema id unchanged
//! columns  applied in order (adds, then drops, renames, modifies):
//!          add: a new name (INVALID_ALTER_TABLE), a nullable type (a plain
//!          exception in Fluss: UNKNOWN_SERVER_ERROR), id = highest field
//!          id + 1; drop / rename / modify: SchemaChangeException (no error
//!          code of its own: UNKNOWN_SERVER_ERROR)
//!          the result is schema id current + 1; the current schema moves to
//!          the node's `schemas`; modified_time unchanged (as Fluss)
//! ```
//!
//! Either is one conditional write of the table's node; the new
//! [`TableInfo`] replaces the old one in the index only after it, and the
//! caller's `apply` (the tablets picking up the new schema) runs in between,
//! under the index's write lock, so no reader finds a batch of a schema id
//! the catalog does not know yet.

use std::collections::BTreeMap;
use std::sync::Arc;

use fjord_format::types::DataType;
use serde_json::{json, Map, Value};

use super::{
    corrupt, now_ms, table_info_from_record, table_node, table_not_exist, Catalog, TableInfo,
    TablePath,
};
use crate::error::{ApiError, ErrorCode};
use crate::meta::store::MetaError;

/// Table options Fluss 0.9.1 lets ALTER TABLE change
/// (`FlussConfigUtils.ALTERABLE_TABLE_OPTIONS`); any other `table.*` key is
/// refused with INVALID_ALTER_TABLE.
pub const ALTERABLE_TABLE_OPTIONS: [&str; 3] = [
    TABLE_DATALAKE_ENABLED,
    TABLE_DATALAKE_FRESHNESS,
    TABLE_TIERED_LOG_LOCAL_SEGMENTS,
];

/// Keys with this prefix are table options; any other key is a custom
/// property (Fluss's `FlussConfigUtils.isTableStorageConfig`).
const TABLE_PREFIX: &str = "table.";
const TABLE_DATALAKE_ENABLED: &str = "table.datalake.enabled";
const TABLE_DATALAKE_FRESHNESS: &str = "table.datalake.freshness";
const TABLE_TIERED_LOG_LOCAL_SEGMENTS: &str = "table.log.tiered.local-segments";
const TABLE_DATALAKE_FORMAT: &str = "table.datalake.format";

/// One change of a table's options (a `PbAlterConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionChange {
    /// SET `key` = `value`.
    Set {
        /// The option or custom property.
        key: String,
        /// Its new value.
        value: String,
    },
    /// DELETE (Fluss's RESET): back to the default.
    Reset {
        /// The option or custom property.
        key: String,
    },
}

/// One column change, as Fluss's `TableChange` (the wire's
/// `PbAddColumn`, ... converted, positions already checked).
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnChange {
    /// ADD COLUMN `name` at the end.
    Add {
        /// The new column's name.
        name: String,
        /// Its type.
        data_type: DataType,
        /// Its comment.
        comment: Option<String>,
    },
    /// DROP COLUMN (refused, as Fluss 0.9.1 refuses it).
    Drop {
        /// The column.
        name: String,
    },
    /// RENAME COLUMN (refused, as Fluss 0.9.1 refuses it).
    Rename {
        /// The column.
        old_name: String,
        /// Its new name.
        new_name: String,
    },
    /// MODIFY COLUMN (refused, as Fluss 0.9.1 refuses it).
    Modify {
        /// The column.
        name: String,
    },
}

/// What one ALTER TABLE asks: options or columns, never both (Fluss
/// refuses the mix before it reaches the catalog).
#[derive(Debug, Clone, PartialEq)]
pub enum TableAlteration {
    /// Option and custom property changes, in request order.
    Options(Vec<OptionChange>),
    /// Column changes: adds, then drops, renames and modifies.
    Columns(Vec<ColumnChange>),
}

fn invalid_alter(message: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidAlterTableException, message)
}

/// What a Fluss server answers for an exception without an error code of
/// its own: UNKNOWN_SERVER_ERROR, the message starting with the exception
/// class (the first line of the stack trace it sends).
pub fn unmapped_exception(class: &str, message: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::UnknownServerError, format!("{class}: {message}"))
}

/// Java's `IllegalArgumentException`, as a Fluss server answers it.
pub fn illegal_argument(message: impl std::fmt::Display) -> ApiError {
    unmapped_exception("java.lang.IllegalArgumentException", message)
}

fn schema_change_refused(what: &str) -> ApiError {
    unmapped_exception(
        "org.apache.fluss.exception.SchemaChangeException",
        format!("Not support {what} column now."),
    )
}

fn invalid_value(key: &str, value: &str) -> ApiError {
    ApiError::new(
        ErrorCode::InvalidConfigException,
        format!("Invalid value for config '{key}'. Reason: Could not parse value '{value}' for key '{key}'."),
    )
}

/// Fluss's `Boolean.parseBoolean`: true only for "true", any case.
fn is_true(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Fluss's `TableConfig.isDataLakeEnabled`.
fn datalake_enabled(properties: &BTreeMap<String, String>) -> bool {
    is_true(properties.get(TABLE_DATALAKE_ENABLED).map(String::as_str))
}

/// Checks the values of the alterable options as Fluss's
/// `validateTableDescriptor` does (`validateOptionValue`, `checkTieredLog`).
fn check_option_values(properties: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if let Some(v) = properties.get(TABLE_DATALAKE_ENABLED) {
        if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
            return Err(invalid_value(TABLE_DATALAKE_ENABLED, v));
        }
    }
    if let Some(v) = properties.get(TABLE_DATALAKE_FRESHNESS) {
        if crate::config::parse_duration_ms(v).is_none() {
            return Err(invalid_value(TABLE_DATALAKE_FRESHNESS, v));
        }
    }
    if let Some(v) = properties.get(TABLE_TIERED_LOG_LOCAL_SEGMENTS) {
        let segments: i32 = v
            .trim()
            .parse()
            .map_err(|_| invalid_value(TABLE_TIERED_LOG_LOCAL_SEGMENTS, v))?;
        if segments <= 0 {
            return Err(ApiError::new(
                ErrorCode::InvalidConfigException,
                format!("'{TABLE_TIERED_LOG_LOCAL_SEGMENTS}' must be greater than 0."),
            ));
        }
    }
    Ok(())
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

fn json_map(map: &BTreeMap<String, String>) -> Value {
    Value::Object(
        map.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect::<Map<String, Value>>(),
    )
}

impl Catalog {
    /// Alters the table at `path` (see the module doc for what is allowed
    /// and how each refusal is answered). On a change, the table's node is
    /// rewritten in one conditional write, `apply` runs with the new table
    /// (under the index's write lock: the tablets pick up the new schema
    /// there), and the new table replaces the old in the index; it is
    /// returned. `None`: nothing changed (the same options again), or the
    /// table does not exist and `ignore_if_not_exists` was set.
    pub fn alter_table(
        &self,
        path: &TablePath,
        alteration: &TableAlteration,
        ignore_if_not_exists: bool,
        apply: impl FnOnce(&Arc<TableInfo>),
    ) -> Result<Option<Arc<TableInfo>>, ApiError> {
        // Not racing a partition create (whose tablets must be opened with
        // the table's latest schema), a drop, or another alter.
        let _serial = self.partition_ops.lock().unwrap_or_else(|p| p.into_inner());
        let missing = || {
            if ignore_if_not_exists {
                Ok(None)
            } else {
                Err(table_not_exist(path))
            }
        };
        let Some(current) = self.table(path)? else {
            return missing();
        };
        let node = table_node(path);
        let Some(stored) = self.store.get(&node)? else {
            return missing();
        };
        let mut record: Value =
            serde_json::from_slice(&stored.data).map_err(|e| corrupt(&node, e))?;
        let changed = match alteration {
            TableAlteration::Options(changes) => alter_options(&current, &mut record, changes)?,
            TableAlteration::Columns(changes) => alter_columns(&current, &mut record, changes)?,
        };
        if !changed {
            return Ok(None);
        }
        let info = Arc::new(table_info_from_record(path.clone(), &record, &node)?);
        match self
            .store
            .set(&node, record.to_string().as_bytes(), Some(stored.version))
        {
            Ok(_) => {}
            Err(MetaError::NoNode(_)) => return missing(),
            Err(MetaError::BadVersion { .. }) => {
                return Err(ApiError::new(
                    ErrorCode::UnknownServerError,
                    format!(
                        "Table {}.{} changed while it was being altered; retry.",
                        path.database, path.table
                    ),
                ))
            }
            Err(e) => return Err(e.into()),
        }
        let mut index = self.tables.write().unwrap_or_else(|p| p.into_inner());
        apply(&info);
        index.insert(Arc::clone(&info));
        Ok(Some(info))
    }
}

/// Applies option changes to the stored `record`; `false` if nothing
/// changed.
fn alter_options(
    current: &TableInfo,
    record: &mut Value,
    changes: &[OptionChange],
) -> Result<bool, ApiError> {
    let node = table_node(&current.path);
    let table = record
        .get_mut("table")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| corrupt(&node, "no table descriptor"))?;
    let properties = string_map(table.get("properties"));
    let custom = string_map(table.get("custom_properties"));

    // Fluss's validateAlterTableProperties, over the keys changed.
    let key = |c: &OptionChange| match c {
        OptionChange::Set { key, .. } | OptionChange::Reset { key } => key.clone(),
    };
    let has_format = properties.contains_key(TABLE_DATALAKE_FORMAT);
    for k in changes
        .iter()
        .map(key)
        .filter(|k| k.starts_with(TABLE_PREFIX))
    {
        if !ALTERABLE_TABLE_OPTIONS.contains(&k.as_str()) {
            return Err(invalid_alter(format!(
                "The option '{k}' is not supported to alter yet."
            )));
        }
        if !has_format && k == TABLE_DATALAKE_ENABLED {
            return Err(invalid_alter(format!(
                "The option '{TABLE_DATALAKE_ENABLED}' cannot be altered for tables that were created before the Fluss cluster enabled datalake."
            )));
        }
    }
    if let (true, Some(format)) = (
        datalake_enabled(&properties),
        properties.get(TABLE_DATALAKE_FORMAT),
    ) {
        let prefix = format!("{}.", format.to_ascii_lowercase());
        if let Some(k) = changes
            .iter()
            .map(key)
            .find(|k| !k.starts_with(TABLE_PREFIX) && k.starts_with(&prefix))
        {
            return Err(ApiError::new(
                ErrorCode::InvalidConfigException,
                format!("Property '{k}' is not supported to alter which is for datalake table."),
            ));
        }
    }

    // Sets first, then resets (a key both set and reset is reset), as
    // Fluss's TablePropertyChanges applies them.
    let mut new_properties = properties.clone();
    let mut new_custom = custom.clone();
    for change in changes {
        if let OptionChange::Set { key, value } = change {
            let target = if key.starts_with(TABLE_PREFIX) {
                &mut new_properties
            } else {
                &mut new_custom
            };
            target.insert(key.clone(), value.clone());
        }
    }
    for change in changes {
        if let OptionChange::Reset { key } = change {
            new_properties.remove(key);
            new_custom.remove(key);
        }
    }
    if new_properties == properties && new_custom == custom {
        return Ok(false);
    }
    check_option_values(&new_properties)?;
    // Fluss's preAlterTableProperties: a lake-enabled result needs the lake
    // catalog, which a Fjord cluster never has.
    if datalake_enabled(&new_properties) {
        return Err(invalid_alter(format!(
            "Cannot alter table {}.{} in data lake, because the Fluss cluster doesn't enable datalake tables.",
            current.path.database, current.path.table
        )));
    }
    table.insert("properties".to_owned(), json_map(&new_properties));
    table.insert("custom_properties".to_owned(), json_map(&new_custom));
    record["modified_time"] = json!(now_ms());
    Ok(true)
}

/// Applies column changes to the stored `record` (a new schema id); always
/// `true` (every change that does not fail changes the schema).
fn alter_columns(
    current: &TableInfo,
    record: &mut Value,
    changes: &[ColumnChange],
) -> Result<bool, ApiError> {
    let node = table_node(&current.path);
    let mut schema = (*current.schema).clone();
    for change in changes {
        match change {
            ColumnChange::Add {
                name,
                data_type,
                comment,
            } => {
                if schema.column_index(name).is_some() {
                    return Err(invalid_alter(format!("Column {name} already exists.")));
                }
                if !data_type.is_nullable() {
                    return Err(illegal_argument(format!("Column {name} must be nullable.")));
                }
                schema = schema
                    .with_column(name.clone(), data_type.clone(), comment.clone())
                    .map_err(|e| unmapped_exception("java.lang.IllegalStateException", e))?;
            }
            ColumnChange::Drop { .. } => return Err(schema_change_refused("drop")),
            ColumnChange::Rename { .. } => return Err(schema_change_refused("rename")),
            ColumnChange::Modify { .. } => return Err(schema_change_refused("modify")),
        }
    }
    let properties = string_map(record.get("table").and_then(|t| t.get("properties")));
    if datalake_enabled(&properties) {
        return Err(invalid_alter(format!(
            "Cannot alter schema for datalake enabled table {}.{}, because the Fluss cluster doesn't enable datalake tables.",
            current.path.database, current.path.table
        )));
    }
    let schema_id = current
        .schema_id
        .checked_add(1)
        .filter(|&id| i16::try_from(id).is_ok())
        .ok_or_else(|| {
            invalid_alter(format!(
                "Table {}.{} has schema id {}, the last a batch header can carry.",
                current.path.database, current.path.table, current.schema_id
            ))
        })?;
    if let Some(kv) = &current.kv {
        // What the tablets will have to serve, checked before anything is
        // written (Fjord's own limits on primary-key tables, such as no
        // nested columns under the INDEXED kv format, apply to added
        // columns too).
        let mut all: Vec<Arc<fjord_format::Schema>> = current
            .schemas
            .iter()
            .map(|s| Arc::clone(&s.schema))
            .collect();
        all.push(Arc::new(schema.clone()));
        let partition_keys = current.partition_keys.clone();
        let bucket_keys: Vec<String> = record["table"]["bucket_key"]
            .as_array()
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| k.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        crate::kv::KvTable::with_schemas(
            &all,
            super::FIRST_SCHEMA_ID,
            &partition_keys,
            &bucket_keys,
            &properties,
        )?;
        debug_assert_eq!(i32::from(kv.schema_id), current.schema_id);
    }
    let table = record
        .get_mut("table")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| corrupt(&node, "no table descriptor"))?;
    let old_schema = table
        .insert(
            "schema".to_owned(),
            fjord_format::json::schema_to_json(&schema),
        )
        .ok_or_else(|| corrupt(&node, "no schema"))?;
    let rec = record
        .as_object_mut()
        .ok_or_else(|| corrupt(&node, "not an object"))?;
    let earlier = rec
        .entry("schemas")
        .or_insert_with(|| Value::Array(Vec::new()));
    if earlier.is_null() {
        *earlier = Value::Array(Vec::new());
    }
    earlier
        .as_array_mut()
        .ok_or_else(|| corrupt(&node, "schemas is not a list"))?
        .push(json!({"schema_id": current.schema_id, "schema": old_schema}));
    rec.insert("schema_id".to_owned(), json!(schema_id));
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{open, path, LOG_TABLE};
    use super::*;

    fn add(name: &str, data_type: DataType) -> ColumnChange {
        ColumnChange::Add {
            name: name.into(),
            data_type,
            comment: None,
        }
    }

    fn set(key: &str, value: &str) -> OptionChange {
        OptionChange::Set {
            key: key.into(),
            value: value.into(),
        }
    }

    /// Creates `db.t` from `json` and alters it with `alteration`; returns
    /// the error's code and message.
    fn refused(json: &str, alteration: TableAlteration) -> (ErrorCode, String) {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        c.create_table(&path("t"), json.as_bytes(), false).unwrap();
        let before = c.table(&path("t")).unwrap().unwrap();
        let e = c
            .alter_table(&path("t"), &alteration, false, |_| {
                panic!("a refused alter applies nothing")
            })
            .unwrap_err();
        let after = open(dir.path()).table(&path("t")).unwrap().unwrap();
        assert_eq!(after.table_json, before.table_json, "nothing written");
        assert_eq!(after.schema_id, before.schema_id);
        (e.code(), e.message().to_owned())
    }

    #[test]
    fn an_added_column_makes_the_next_schema_id_and_every_id_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (id, modified) = {
            let c = open(dir.path());
            c.create_database("db", None, false).unwrap();
            let t = c
                .create_table(&path("t"), LOG_TABLE.as_bytes(), false)
                .unwrap()
                .unwrap();
            let mut applied = None;
            let altered = c
                .alter_table(
                    &path("t"),
                    &TableAlteration::Columns(vec![
                        add("c", DataType::bigint()),
                        ColumnChange::Add {
                            name: "d".into(),
                            data_type: DataType::string(),
                            comment: Some("the d".into()),
                        },
                    ]),
                    false,
                    |info| applied = Some(info.schema_id),
                )
                .unwrap()
                .unwrap();
            assert_eq!(applied, Some(2), "apply saw the new table");
            assert_eq!(altered.schema_id, 2);
            assert!(Arc::ptr_eq(&altered, &c.table_by_id(t.table_id).unwrap()));
            (t.table_id, t.modified_ms)
        };
        let c = open(dir.path());
        let t = c.table_by_id(id).unwrap();
        assert_eq!(t.schema_id, 2);
        assert_eq!(
            t.modified_ms, modified,
            "a schema change leaves modified_time"
        );
        let names: Vec<&str> = t.schema.columns().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        let ids: Vec<i32> = t.schema.columns().iter().map(|c| c.id).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        assert_eq!(t.schema.highest_field_id(), 3);
        assert_eq!(t.schema.columns()[3].comment.as_deref(), Some("the d"));
        let v: Value = serde_json::from_slice(&t.table_json).unwrap();
        assert_eq!(v["schema"]["columns"][2]["name"], "c");
        assert_eq!(v["schema"]["highest_field_id"], 3);
        assert_eq!(t.schema_by_id(1).unwrap().schema.columns().len(), 2);
        assert_eq!(t.schema_by_id(2).unwrap().schema_json, t.schema_json);
        assert!(t.schema_by_id(3).is_none() && t.schema_by_id(0).is_none());

        // A second alter keeps both earlier schemas.
        c.alter_table(
            &path("t"),
            &TableAlteration::Columns(vec![add("e", DataType::int())]),
            false,
            |_| {},
        )
        .unwrap();
        let t = open(dir.path()).table_by_id(id).unwrap();
        assert_eq!(t.schema_id, 3);
        assert_eq!(t.schemas.len(), 3);
        assert_eq!(t.schema_by_id(2).unwrap().schema.columns().len(), 4);
        assert_eq!(t.schema.columns()[4].id, 4);
    }

    #[test]
    fn primary_key_tables_get_a_kv_view_of_every_schema() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        let json = r#"{"version":1,"schema":{"version":1,"columns":[{"name":"a","data_type":{"type":"INTEGER","nullable":false}},{"name":"b","data_type":{"type":"STRING"}}],"primary_key":["a"]},"partition_key":[],"bucket_key":[],"bucket_count":1,"properties":{},"custom_properties":{}}"#;
        c.create_table(&path("t"), json.as_bytes(), false).unwrap();
        let t = c
            .alter_table(
                &path("t"),
                &TableAlteration::Columns(vec![add("c", DataType::double())]),
                false,
                |_| {},
            )
            .unwrap()
            .unwrap();
        let kv = t.kv.as_ref().unwrap();
        assert_eq!(kv.schema_id, 2);
        assert_eq!(kv.schemas.len(), 2);
        assert_eq!(kv.schema_by_id(1).unwrap().schema.columns().len(), 2);
        assert_eq!(kv.arity(), 3);
        // A nested column is added to a COMPACTED table (the default) ...
        let t = c
            .alter_table(
                &path("t"),
                &TableAlteration::Columns(vec![add("n", DataType::array(DataType::int()))]),
                false,
                |_| {},
            )
            .unwrap()
            .unwrap();
        assert_eq!(t.kv.as_ref().unwrap().arity(), 4);
        // ... but Fjord's own limit on INDEXED tables holds for added columns.
        let indexed = json.replace(
            r#""properties":{}"#,
            r#""properties":{"table.kv.format":"INDEXED"}"#,
        );
        let (code, message) = refused(
            &indexed,
            TableAlteration::Columns(vec![add("n", DataType::array(DataType::int()))]),
        );
        assert_eq!(code, ErrorCode::InvalidTableException, "{message}");
        assert!(message.contains("'n'"), "{message}");
    }

    #[test]
    fn column_changes_fluss_refuses_are_refused_with_its_codes() {
        let check = |changes: Vec<ColumnChange>, code: ErrorCode, message: &str| {
            let (c, m) = refused(LOG_TABLE, TableAlteration::Columns(changes));
            assert_eq!((c, m.as_str()), (code, message));
        };
        check(
            vec![add("b", DataType::int())],
            ErrorCode::InvalidAlterTableException,
            "Column b already exists.",
        );
        check(
            vec![add("c", DataType::int()), add("c", DataType::int())],
            ErrorCode::InvalidAlterTableException,
            "Column c already exists.",
        );
        check(
            vec![add("c", DataType::int().not_null())],
            ErrorCode::UnknownServerError,
            "java.lang.IllegalArgumentException: Column c must be nullable.",
        );
        check(
            vec![ColumnChange::Drop { name: "b".into() }],
            ErrorCode::UnknownServerError,
            "org.apache.fluss.exception.SchemaChangeException: Not support drop column now.",
        );
        check(
            vec![
                add("c", DataType::int()),
                ColumnChange::Rename {
                    old_name: "b".into(),
                    new_name: "x".into(),
                },
            ],
            ErrorCode::UnknownServerError,
            "org.apache.fluss.exception.SchemaChangeException: Not support rename column now.",
        );
        check(
            vec![ColumnChange::Modify { name: "b".into() }],
            ErrorCode::UnknownServerError,
            "org.apache.fluss.exception.SchemaChangeException: Not support modify column now.",
        );
        let lake = LOG_TABLE.replace(
            r#""properties":{}"#,
            r#""properties":{"table.datalake.enabled":"true"}"#,
        );
        let (code, message) = refused(
            &lake,
            TableAlteration::Columns(vec![add("c", DataType::int())]),
        );
        assert_eq!(code, ErrorCode::InvalidAlterTableException);
        assert!(message.starts_with("Cannot alter schema for datalake enabled table db.t"));
    }

    #[test]
    fn options_fluss_allows_are_set_and_reset_others_refused() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        let t = c
            .create_table(&path("t"), LOG_TABLE.as_bytes(), false)
            .unwrap()
            .unwrap();
        let options = |changes: Vec<OptionChange>| TableAlteration::Options(changes);
        let altered = c
            .alter_table(
                &path("t"),
                &options(vec![
                    set("table.datalake.freshness", "5 min"),
                    set("table.log.tiered.local-segments", "3"),
                    set("owner", "cdc"),
                ]),
                false,
                |_| {},
            )
            .unwrap()
            .unwrap();
        assert_eq!(altered.schema_id, 1, "options keep the schema id");
        assert!(altered.modified_ms >= t.modified_ms);
        // The same again changes nothing and writes nothing.
        assert!(c
            .alter_table(
                &path("t"),
                &options(vec![set("owner", "cdc")]),
                false,
                |_| panic!("nothing to apply")
            )
            .unwrap()
            .is_none());
        c.alter_table(
            &path("t"),
            &options(vec![
                OptionChange::Reset {
                    key: "table.log.tiered.local-segments".into(),
                },
                OptionChange::Reset {
                    key: "owner".into(),
                },
            ]),
            false,
            |_| {},
        )
        .unwrap()
        .unwrap();
        let t = open(dir.path()).table(&path("t")).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&t.table_json).unwrap();
        assert_eq!(v["properties"]["table.datalake.freshness"], "5 min");
        assert!(v["properties"]
            .get("table.log.tiered.local-segments")
            .is_none());
        assert_eq!(v["custom_properties"], json!({}));
        assert_eq!(v["properties"]["table.replication.factor"], "1");

        let check = |changes: Vec<OptionChange>, code: ErrorCode, message: &str| {
            let (c, m) = refused(LOG_TABLE, options(changes));
            assert_eq!((c, m.as_str()), (code, message));
        };
        check(
            vec![set("table.log.ttl", "1 d")],
            ErrorCode::InvalidAlterTableException,
            "The option 'table.log.ttl' is not supported to alter yet.",
        );
        check(
            vec![OptionChange::Reset {
                key: "table.replication.factor".into(),
            }],
            ErrorCode::InvalidAlterTableException,
            "The option 'table.replication.factor' is not supported to alter yet.",
        );
        check(
            vec![set("table.datalake.enabled", "true")],
            ErrorCode::InvalidAlterTableException,
            "The option 'table.datalake.enabled' cannot be altered for tables that were created before the Fluss cluster enabled datalake.",
        );
        check(
            vec![set("table.datalake.freshness", "soon")],
            ErrorCode::InvalidConfigException,
            "Invalid value for config 'table.datalake.freshness'. Reason: Could not parse value 'soon' for key 'table.datalake.freshness'.",
        );
        check(
            vec![set("table.log.tiered.local-segments", "0")],
            ErrorCode::InvalidConfigException,
            "'table.log.tiered.local-segments' must be greater than 0.",
        );
        let with_format = LOG_TABLE.replace(
            r#""properties":{}"#,
            r#""properties":{"table.datalake.format":"paimon"}"#,
        );
        let (code, message) = refused(
            &with_format,
            options(vec![set("table.datalake.enabled", "true")]),
        );
        assert_eq!(code, ErrorCode::InvalidAlterTableException);
        assert_eq!(
            message,
            "Cannot alter table db.t in data lake, because the Fluss cluster doesn't enable datalake tables."
        );
    }

    #[test]
    fn a_missing_table_is_refused_unless_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        let alteration = TableAlteration::Columns(vec![add("c", DataType::int())]);
        let e = c
            .alter_table(&path("t"), &alteration, false, |_| {})
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::TableNotExist);
        assert!(c
            .alter_table(&path("t"), &alteration, true, |_| {})
            .unwrap()
            .is_none());
    }
}
