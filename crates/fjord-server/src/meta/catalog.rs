//! The catalog: databases, tables and id allocation, kept in the
//! [`MetaStore`] tree, with an in-memory index of tables by id for the data
//! path.
//!
//! Tree layout (all node data is JSON with a `version` field):
//! ```text
//! /databases/<db>            {"version":1,"database_json":"..","created_time":..,"modified_time":..}
//! /databases/<db>/<table>    {"version":1,"table_id":..,"schema_id":..,"bucket_count":..,
//!                             "created_time":..,"modified_time":..,"table":{<Fluss table JSON>},
//!                             "schemas":[{"schema_id":1,"schema":{..}},..]}
//! /ids/table                 next table id, decimal
//! /ids/writer                first writer id not yet reserved, decimal
//! /ids/partition             next partition id, decimal
//! /partitions/<table_id>/<partition name>
//!                            {"version":1,"partition_id":..,"created_time":..}
//! ```
//! A table is one node, so creating, altering or dropping it is one atomic
//! store operation; a partition is one node too. The `table` descriptor
//! holds the current schema (id `schema_id`); `schemas` holds every earlier
//! one by id (absent while the table has one schema), so an ALTER TABLE is
//! one conditional write of the node and every schema id stays readable. Partitions live outside the
//! table's node (keyed by table id) so dropping a table stays one atomic
//! delete; partition nodes left by a crash between that delete and their
//! own are removed on the next open. The by-id indexes are rebuilt from the
//! tree on open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use crate::error::{ApiError, ErrorCode};
use crate::meta::auto_partition::AutoPartitionStrategy;
use crate::meta::store::{MetaError, MetaStore};

pub mod alter;
pub mod partitions;

pub use alter::{ColumnChange, OptionChange, TableAlteration};
pub use partitions::PartitionInfo;

/// Every table option (`table.*`) of Fluss 0.9.1's `ConfigOptions`: the keys
/// a table's `properties` may hold (`FlussConfigUtils.TABLE_OPTIONS`), plus
/// Fluss 1.0's `table.statistics.columns` (per-batch statistics, which the
/// FetchLog filter uses).
const FLUSS_TABLE_OPTIONS: [&str; 25] = [
    "table.auto-increment.cache-size",
    "table.auto-partition.enabled",
    "table.auto-partition.key",
    "table.auto-partition.num-precreate",
    "table.auto-partition.num-retention",
    "table.auto-partition.time-unit",
    "table.auto-partition.time-zone",
    "table.changelog.image",
    "table.datalake.auto-compaction",
    "table.datalake.auto-expire-snapshot",
    "table.datalake.enabled",
    "table.datalake.format",
    "table.datalake.freshness",
    "table.delete.behavior",
    "table.kv.format",
    "table.kv.format-version",
    "table.log.arrow.compression.type",
    "table.log.arrow.compression.zstd.level",
    "table.log.format",
    "table.log.tiered.local-segments",
    "table.log.ttl",
    "table.merge-engine",
    "table.merge-engine.versioned.ver-column",
    "table.replication.factor",
    fjord_format::statistics::TABLE_STATISTICS_COLUMNS,
];

/// Data types a partition key column may have. Partition names are the
/// key values as text, so Fjord takes Fluss's classic rule: string columns
/// only (the native writer then routes a row by its string, no formatting).
pub const PARTITION_KEY_TYPES: [&str; 2] = ["STRING", "CHAR"];

/// Longest database or table name Fluss accepts.
pub const NAME_LENGTH_MAX: usize = 200;
/// Writer ids are reserved in the store this many at a time, so InitWriter
/// costs a store write once per block while ids stay unique across restarts
/// (a restart skips the rest of the reserved block).
pub const WRITER_ID_BLOCK: i64 = 1000;
/// Partition ids are reserved in the store this many at a time, so a
/// CreatePartition (which a writer may be waiting on) costs one durable
/// metadata write instead of two; ids stay unique and never reused (a
/// restart skips the rest of the reserved block).
pub const PARTITION_ID_BLOCK: i64 = 100;
/// The schema id of a table's first schema; each ALTER TABLE that adds
/// columns makes the next id (Fluss's `currentSchemaId + 1`).
pub const FIRST_SCHEMA_ID: i32 = 1;
/// How often an id allocation retries a lost compare-and-set before giving
/// up; only concurrent allocators in this process can race.
const CAS_RETRIES_MAX: usize = 64;

const DATABASES: &str = "/databases";
const IDS: &str = "/ids";
const TABLE_ID_NODE: &str = "/ids/table";
const WRITER_ID_NODE: &str = "/ids/writer";
const PARTITION_ID_NODE: &str = "/ids/partition";
const PARTITIONS: &str = "/partitions";

/// A database and table name pair.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TablePath {
    /// Database name.
    pub database: String,
    /// Table name.
    pub table: String,
}

/// A database as stored.
#[derive(Debug, Clone)]
pub struct DatabaseInfo {
    /// The database descriptor JSON, as clients send and parse it.
    pub database_json: Vec<u8>,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// Last modification time, ms since the epoch.
    pub modified_ms: i64,
}

/// One schema of a table, by id: what GetTableSchema answers and what
/// batches written with that id are read with.
#[derive(Debug)]
pub struct TableSchema {
    /// The schema id ([`FIRST_SCHEMA_ID`] for the schema the table was
    /// created with; each ALTER TABLE that adds columns adds one).
    pub schema_id: i32,
    /// The schema JSON, as stored.
    pub schema_json: Vec<u8>,
    /// The schema, parsed once.
    pub schema: Arc<fjord_format::Schema>,
}

/// A table as stored; immutable (shared as `Arc`): an ALTER TABLE replaces
/// it in the catalog with a new one.
#[derive(Debug, Clone)]
pub struct TableInfo {
    /// The table's id, unique for the life of the data dir.
    pub table_id: i64,
    /// Database and table name.
    pub path: TablePath,
    /// The id of the table's current (latest) schema.
    pub schema_id: i32,
    /// Number of buckets (≥ 1).
    pub bucket_count: i32,
    /// The table descriptor JSON in the form clients parse (bucket count,
    /// bucket keys and defaulted properties filled in).
    pub table_json: Vec<u8>,
    /// The schema JSON (the `schema` member of `table_json`).
    pub schema_json: Vec<u8>,
    /// The schema, parsed once (projection plans, validation).
    pub schema: Arc<fjord_format::Schema>,
    /// Every schema the table has had, by id: ids [`FIRST_SCHEMA_ID`] to
    /// `schema_id`, ascending, the current one last. Batches and stored
    /// values keep the id they were written with.
    pub schemas: Arc<[TableSchema]>,
    /// Partition key column names, in order; empty for a non-partitioned
    /// table.
    pub partition_keys: Vec<String>,
    /// The auto-partitioning rules, parsed once; `None` when
    /// `table.auto-partition.enabled` is off.
    pub auto_partition: Option<Arc<AutoPartitionStrategy>>,
    /// What the KV tablets of a primary-key table derive from its schema
    /// and options, built once; `None` for a log table.
    pub kv: Option<Arc<crate::kv::KvTable>>,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// Last modification time, ms since the epoch.
    pub modified_ms: i64,
}

impl TableInfo {
    /// Has the table partition keys?
    pub fn is_partitioned(&self) -> bool {
        !self.partition_keys.is_empty()
    }

    /// Has the table a primary key?
    pub fn has_primary_key(&self) -> bool {
        self.kv.is_some()
    }

    /// The schema of `schema_id`, if the table has (had) it.
    pub fn schema_by_id(&self, schema_id: i32) -> Option<&TableSchema> {
        let index = usize::try_from(schema_id.checked_sub(FIRST_SCHEMA_ID)?).ok()?;
        self.schemas.get(index)
    }
}

/// Settings the catalog applies when creating tables.
#[derive(Debug, Clone)]
pub struct CatalogOptions {
    /// Bucket count for tables that do not name one (`default.bucket.number`).
    pub default_bucket_count: i32,
    /// Most buckets one table may have (`max.bucket.num`).
    pub bucket_count_max: i32,
    /// Replication factor for tables that do not name one
    /// (`default.replication.factor`); a single node only supports 1.
    pub default_replication_factor: i32,
    /// Most partitions one partitioned table may have (`max.partition.num`).
    pub partition_count_max: usize,
}

/// The stored tables by id (data path) and by path (admin and metadata
/// requests), kept in step.
#[derive(Default)]
struct TableIndex {
    by_id: HashMap<i64, Arc<TableInfo>>,
    by_path: HashMap<TablePath, Arc<TableInfo>>,
    /// Every partition by id (the data path's lookup).
    partitions_by_id: HashMap<i64, Arc<PartitionInfo>>,
    /// Each partitioned table's partitions by name, sorted by name.
    partitions_by_table: HashMap<i64, std::collections::BTreeMap<String, Arc<PartitionInfo>>>,
}

impl TableIndex {
    fn insert(&mut self, info: Arc<TableInfo>) {
        self.by_path.insert(info.path.clone(), Arc::clone(&info));
        self.by_id.insert(info.table_id, info);
    }

    fn remove(&mut self, info: &TableInfo) {
        self.by_id.remove(&info.table_id);
        self.by_path.remove(&info.path);
        if let Some(parts) = self.partitions_by_table.remove(&info.table_id) {
            for p in parts.values() {
                self.partitions_by_id.remove(&p.partition_id);
            }
        }
    }

    fn insert_partition(&mut self, p: Arc<PartitionInfo>) {
        self.partitions_by_table
            .entry(p.table_id)
            .or_default()
            .insert(p.name.clone(), Arc::clone(&p));
        self.partitions_by_id.insert(p.partition_id, p);
    }

    fn remove_partition(&mut self, p: &PartitionInfo) {
        self.partitions_by_id.remove(&p.partition_id);
        if let Some(parts) = self.partitions_by_table.get_mut(&p.table_id) {
            parts.remove(&p.name);
        }
    }
}

/// Databases, tables and ids on top of a [`MetaStore`].
pub struct Catalog {
    store: Arc<dyn MetaStore>,
    options: CatalogOptions,
    tables: RwLock<TableIndex>,
    /// Writer ids handed out from the reserved block: (next, end exclusive).
    writer_ids: Mutex<(i64, i64)>,
    /// Serializes partition creates and drops (with their tablet steps), so
    /// the `max.partition.num` check and the name's existence check hold
    /// until the partition is stored. Control-plane only.
    partition_ops: Mutex<()>,
    /// Partition ids handed out from the reserved block: (next, end
    /// exclusive).
    partition_ids: Mutex<(i64, i64)>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Fluss's rule for database and table names: 1..=200 ASCII alphanumerics,
/// `_` or `-`, not `.`/`..`, not starting with the reserved `__`.
fn invalid_name_reason(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the empty string is not allowed".to_owned());
    }
    if name.len() > NAME_LENGTH_MAX {
        return Some(format!(
            "the length of '{name}' is longer than the max allowed length {NAME_LENGTH_MAX}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Some(format!(
            "'{name}' contains one or more characters other than ASCII alphanumerics, '_' and '-'"
        ));
    }
    if name.starts_with("__") {
        return Some(format!("'{name}' starts with the reserved prefix '__'"));
    }
    None
}

/// Checks a database name, answering `InvalidDatabaseException`.
pub fn validate_database_name(name: &str) -> Result<(), ApiError> {
    match invalid_name_reason(name) {
        None => Ok(()),
        Some(why) => Err(ApiError::new(
            ErrorCode::InvalidDatabaseException,
            format!("Database name {name} is invalid: {why}"),
        )),
    }
}

/// Checks a table path, answering `InvalidDatabaseException` or
/// `InvalidTableException`.
pub fn validate_table_path(path: &TablePath) -> Result<(), ApiError> {
    validate_database_name(&path.database)?;
    match invalid_name_reason(&path.table) {
        None => Ok(()),
        Some(why) => Err(ApiError::new(
            ErrorCode::InvalidTableException,
            format!("Table name {} is invalid: {why}", path.table),
        )),
    }
}

fn db_node(db: &str) -> String {
    format!("{DATABASES}/{db}")
}

fn table_node(path: &TablePath) -> String {
    format!("{DATABASES}/{}/{}", path.database, path.table)
}

fn corrupt(node: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        ErrorCode::UnknownServerError,
        format!("metadata node {node} is unreadable: {why}"),
    )
}

impl Catalog {
    /// Opens the catalog on `store`, creating the top-level nodes if missing
    /// and indexing every stored table by id.
    pub fn open(store: Arc<dyn MetaStore>, options: CatalogOptions) -> Result<Self, ApiError> {
        for (node, data) in [
            (DATABASES, &b""[..]),
            (IDS, b""),
            (TABLE_ID_NODE, b"1"),
            (WRITER_ID_NODE, b"0"),
            (PARTITION_ID_NODE, b"0"),
            (PARTITIONS, b""),
        ] {
            match store.create(node, data) {
                Ok(()) | Err(MetaError::NodeExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let catalog = Self {
            store,
            options,
            tables: RwLock::new(TableIndex::default()),
            writer_ids: Mutex::new((0, 0)),
            partition_ops: Mutex::new(()),
            partition_ids: Mutex::new((0, 0)),
        };
        let mut index = TableIndex::default();
        for db in catalog.store.children(DATABASES)? {
            for table in catalog.store.children(&db_node(&db))? {
                let path = TablePath {
                    database: db.clone(),
                    table,
                };
                if let Some(info) = catalog.read_table(&path)? {
                    index.insert(Arc::new(info));
                }
            }
        }
        catalog.load_partitions(&mut index)?;
        *catalog.tables.write().unwrap_or_else(|p| p.into_inner()) = index;
        Ok(catalog)
    }

    /// The options tables are created with.
    pub fn options(&self) -> &CatalogOptions {
        &self.options
    }

    // ---- databases ----

    /// Creates a database. `database_json` is the client's descriptor (or
    /// `None` for an empty one). With `ignore_if_exists`, an existing
    /// database is not an error.
    pub fn create_database(
        &self,
        name: &str,
        database_json: Option<&[u8]>,
        ignore_if_exists: bool,
    ) -> Result<(), ApiError> {
        validate_database_name(name)?;
        let descriptor: Value = match database_json {
            Some(bytes) if !bytes.is_empty() => serde_json::from_slice(bytes).map_err(|e| {
                ApiError::new(
                    ErrorCode::InvalidDatabaseException,
                    format!("database descriptor JSON of {name} is invalid: {e}"),
                )
            })?,
            _ => json!({"version": 1, "custom_properties": {}}),
        };
        if !descriptor.is_object() {
            return Err(ApiError::new(
                ErrorCode::InvalidDatabaseException,
                format!("database descriptor of {name} must be a JSON object"),
            ));
        }
        let now = now_ms();
        let record = json!({
            "version": 1,
            "database_json": descriptor.to_string(),
            "created_time": now,
            "modified_time": now,
        });
        match self
            .store
            .create(&db_node(name), record.to_string().as_bytes())
        {
            Ok(()) => Ok(()),
            Err(MetaError::NodeExists(_)) if ignore_if_exists => Ok(()),
            Err(MetaError::NodeExists(_)) => Err(ApiError::new(
                ErrorCode::DatabaseAlreadyExist,
                format!("Database {name} already exists."),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads a database, or `None`.
    pub fn database(&self, name: &str) -> Result<Option<DatabaseInfo>, ApiError> {
        if invalid_name_reason(name).is_some() {
            return Ok(None);
        }
        let node = db_node(name);
        let Some(v) = self.store.get(&node)? else {
            return Ok(None);
        };
        let rec: Value = serde_json::from_slice(&v.data).map_err(|e| corrupt(&node, e))?;
        let json = rec["database_json"]
            .as_str()
            .ok_or_else(|| corrupt(&node, "no database_json"))?;
        Ok(Some(DatabaseInfo {
            database_json: json.as_bytes().to_vec(),
            created_ms: rec["created_time"].as_i64().unwrap_or(0),
            modified_ms: rec["modified_time"].as_i64().unwrap_or(0),
        }))
    }

    /// Names of all databases, sorted.
    pub fn list_databases(&self) -> Result<Vec<String>, ApiError> {
        Ok(self.store.children(DATABASES)?)
    }

    /// Drops a database and returns the ids of the tables dropped with it
    /// (their data is the caller's to delete). Without `cascade` a database
    /// that still has tables is refused.
    pub fn drop_database(
        &self,
        name: &str,
        ignore_if_not_exists: bool,
        cascade: bool,
    ) -> Result<Vec<i64>, ApiError> {
        let node = db_node(name);
        if invalid_name_reason(name).is_some() || self.store.get(&node)?.is_none() {
            return if ignore_if_not_exists {
                Ok(Vec::new())
            } else {
                Err(ApiError::new(
                    ErrorCode::DatabaseNotExist,
                    format!("Database {name} does not exist."),
                ))
            };
        }
        let tables = self.store.children(&node)?;
        if !tables.is_empty() && !cascade {
            return Err(ApiError::new(
                ErrorCode::DatabaseNotEmpty,
                format!(
                    "Database {name} is not empty: it has {} table(s); drop them first or drop with cascade.",
                    tables.len()
                ),
            ));
        }
        let mut dropped = Vec::with_capacity(tables.len());
        for table in tables {
            let path = TablePath {
                database: name.to_owned(),
                table,
            };
            if let Some(id) = self.drop_table(&path, true)? {
                dropped.push(id);
            }
        }
        match self.store.delete(&node, None) {
            Ok(()) | Err(MetaError::NoNode(_)) => Ok(dropped),
            Err(e) => Err(e.into()),
        }
    }

    // ---- tables ----

    /// Creates a log table from the client's table descriptor JSON:
    /// validates it, fills in defaults (bucket count, bucket keys,
    /// replication factor), allocates a table id and stores it. Returns the
    /// new table, or `None` if it existed and `ignore_if_exists` was set.
    pub fn create_table(
        &self,
        path: &TablePath,
        table_json: &[u8],
        ignore_if_exists: bool,
    ) -> Result<Option<Arc<TableInfo>>, ApiError> {
        validate_table_path(path)?;
        if self.store.get(&db_node(&path.database))?.is_none() {
            return Err(ApiError::new(
                ErrorCode::DatabaseNotExist,
                format!("Database {} does not exist.", path.database),
            ));
        }
        if self.store.get(&table_node(path))?.is_some() {
            return if ignore_if_exists {
                Ok(None)
            } else {
                Err(already_exists(path))
            };
        }
        let (descriptor, bucket_count) = self.normalize_table_json(path, table_json)?;
        let table_id = self.allocate_table_id()?;
        let now = now_ms();
        let record = json!({
            "version": 1,
            "table_id": table_id,
            "schema_id": FIRST_SCHEMA_ID,
            "bucket_count": bucket_count,
            "created_time": now,
            "modified_time": now,
            "table": descriptor,
        });
        match self
            .store
            .create(&table_node(path), record.to_string().as_bytes())
        {
            Ok(()) => {}
            Err(MetaError::NodeExists(_)) if ignore_if_exists => return Ok(None),
            Err(MetaError::NodeExists(_)) => return Err(already_exists(path)),
            Err(MetaError::NoNode(_)) => {
                return Err(ApiError::new(
                    ErrorCode::DatabaseNotExist,
                    format!("Database {} does not exist.", path.database),
                ))
            }
            Err(e) => return Err(e.into()),
        }
        let info = Arc::new(table_info_from_record(
            path.clone(),
            &record,
            &table_node(path),
        )?);
        self.tables
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(Arc::clone(&info));
        Ok(Some(info))
    }

    /// Validates a table descriptor and fills in the defaults Fluss fills
    /// in; returns the descriptor to store and its bucket count.
    fn normalize_table_json(
        &self,
        path: &TablePath,
        table_json: &[u8],
    ) -> Result<(Value, i32), ApiError> {
        let invalid = |why: String| {
            ApiError::new(
                ErrorCode::InvalidTableException,
                format!("Table {}.{} is invalid: {why}", path.database, path.table),
            )
        };
        let mut desc: Value = serde_json::from_slice(table_json)
            .map_err(|e| invalid(format!("the table descriptor is not valid JSON: {e}")))?;
        let obj = desc
            .as_object_mut()
            .ok_or_else(|| invalid("the table descriptor must be a JSON object".to_owned()))?;

        let schema = obj
            .get("schema")
            .and_then(Value::as_object)
            .ok_or_else(|| invalid("the table descriptor has no schema object".to_owned()))?;
        let columns = schema
            .get("columns")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| invalid("the schema has no columns".to_owned()))?;
        let mut names = Vec::with_capacity(columns.len());
        for col in columns {
            let name = col
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("a column has no name".to_owned()))?;
            if col.get("data_type").is_none_or(|t| !t.is_object()) {
                return Err(invalid(format!("column {name} has no data_type")));
            }
            if names.contains(&name) {
                return Err(invalid(format!("column name {name} appears twice")));
            }
            names.push(name);
        }
        let primary_key: Vec<String> = match schema.get("primary_key") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(keys)) => keys
                .iter()
                .map(|k| k.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| invalid("primary key columns must be strings".to_owned()))?,
            Some(_) => return Err(invalid("primary_key must be an array".to_owned())),
        };
        let has_primary_key = !primary_key.is_empty();
        let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
        let partition_keys: Vec<String> = match obj.get("partition_key") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(keys)) => keys
                .iter()
                .map(|k| k.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| invalid("partition keys must be strings".to_owned()))?,
            Some(_) => return Err(invalid("partition_key must be an array".to_owned())),
        };
        for (i, key) in partition_keys.iter().enumerate() {
            let Some(col) = columns.iter().find(|c| c["name"].as_str() == Some(key)) else {
                return Err(invalid(format!(
                    "Partition key '{key}' does not exist in the schema (columns: {}).",
                    names.join(", ")
                )));
            };
            if partition_keys[..i].contains(key) {
                return Err(invalid(format!("partition key {key} appears twice")));
            }
            let ty = col["data_type"]["type"].as_str().unwrap_or("");
            if !PARTITION_KEY_TYPES.contains(&ty) {
                return Err(invalid(format!(
                    "Currently, partitioned table supported partition key type are {PARTITION_KEY_TYPES:?}, but got partition key '{key}' with data type {ty}."
                )));
            }
        }

        let bucket_keys: Vec<String> = match obj.get("bucket_key") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(keys)) => keys
                .iter()
                .map(|k| k.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| invalid("bucket keys must be strings".to_owned()))?,
            Some(_) => return Err(invalid("bucket_key must be an array".to_owned())),
        };
        for key in &bucket_keys {
            if !names.contains(key) {
                return Err(invalid(format!(
                    "bucket key {key} is not a column of the table (columns: {})",
                    names.join(", ")
                )));
            }
        }
        if bucket_keys.iter().any(|k| partition_keys.contains(k)) {
            return Err(invalid(format!(
                "Bucket key {bucket_keys:?} shouldn't include any column in partition keys {partition_keys:?}."
            )));
        }
        let mut bucket_keys = bucket_keys;
        if has_primary_key {
            if let Some(key) = partition_keys.iter().find(|k| !primary_key.contains(k)) {
                return Err(invalid(format!(
                    "Partitioned Primary Key Table requires partition key {partition_keys:?} is a subset of the primary key {primary_key:?} (partition key '{key}' is not)."
                )));
            }
            if bucket_keys.is_empty() {
                bucket_keys = primary_key
                    .iter()
                    .filter(|k| !partition_keys.contains(k))
                    .cloned()
                    .collect();
                if bucket_keys.is_empty() {
                    return Err(invalid(format!(
                        "the primary key {primary_key:?} must hold a column that is not a partition key {partition_keys:?}"
                    )));
                }
            } else if let Some(key) = bucket_keys.iter().find(|k| !primary_key.contains(k)) {
                return Err(invalid(format!(
                    "Bucket keys must be a subset of primary keys excluding partition keys for primary-key tables. The primary keys are {primary_key:?}, the partition keys are {partition_keys:?}, but the user-defined bucket keys are {bucket_keys:?} ('{key}' is not a primary key column)."
                )));
            }
        }
        let bucket_count = match obj.get("bucket_count") {
            None | Some(Value::Null) => self.options.default_bucket_count,
            Some(v) => v
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| invalid("bucket_count must be an integer".to_owned()))?,
        };
        if bucket_count < 1 {
            return Err(invalid(format!(
                "the bucket count must be at least 1, got {bucket_count}"
            )));
        }
        if bucket_count > self.options.bucket_count_max {
            return Err(ApiError::new(
                ErrorCode::BucketMaxNumException,
                format!(
                    "Table {}.{} asks for {bucket_count} buckets, more than the maximum {} (max.bucket.num).",
                    path.database, path.table, self.options.bucket_count_max
                ),
            ));
        }

        let props = obj
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        let props = props
            .as_object_mut()
            .ok_or_else(|| invalid("properties must be an object".to_owned()))?;
        if props.values().any(|v| !v.is_string()) {
            return Err(invalid("property values must be strings".to_owned()));
        }
        // As Fluss's `TableDescriptorValidation`: `properties` hold only the
        // table options the server knows; anything else belongs in
        // `custom_properties`. Accepting an unknown key would let a typo
        // (or an option of a newer Fluss) pass silently.
        if let Some(key) = props
            .keys()
            .find(|k| !FLUSS_TABLE_OPTIONS.contains(&k.as_str()))
        {
            let message = if key.starts_with("table.") {
                format!(
                    "'{key}' is not a recognized Fluss table property in the current cluster version. You may be using an older Fluss cluster that does not support this property."
                )
            } else {
                format!(
                    "'{key}' is not a Fluss table property. Please use '.customProperty(..)' to set custom properties."
                )
            };
            return Err(ApiError::new(ErrorCode::InvalidConfigException, message));
        }
        if let Some(format) = props.get("table.log.format").and_then(Value::as_str) {
            if !format.eq_ignore_ascii_case("ARROW") {
                return Err(ApiError::new(
                    ErrorCode::InvalidConfigException,
                    format!(
                        "table.log.format {format} is not supported yet; only ARROW log tables are"
                    ),
                ));
            }
        }
        let rf_key = "table.replication.factor";
        let rf = match props.get(rf_key).and_then(Value::as_str) {
            Some(s) => s.trim().parse::<i32>().map_err(|_| {
                ApiError::new(
                    ErrorCode::InvalidConfigException,
                    format!("{rf_key} must be an integer, got {s}"),
                )
            })?,
            None => self.options.default_replication_factor,
        };
        if rf != 1 {
            return Err(ApiError::new(
                ErrorCode::InvalidReplicationFactor,
                format!("Replication factor {rf} is larger than the number of available tablet servers (1)."),
            ));
        }
        props.insert(rf_key.to_owned(), Value::String(rf.to_string()));
        if has_primary_key {
            let version_key = fjord_format::schema::TABLE_KV_FORMAT_VERSION;
            match props.get(version_key).and_then(Value::as_str) {
                None => {
                    props.insert(
                        version_key.to_owned(),
                        Value::String(fjord_format::schema::CURRENT_KV_FORMAT_VERSION.to_string()),
                    );
                }
                Some(v) => {
                    let version = v.trim().parse::<u32>().map_err(|_| {
                        ApiError::new(
                            ErrorCode::InvalidConfigException,
                            format!("Invalid value for config '{version_key}'. Reason: '{v}' is not an integer."),
                        )
                    })?;
                    if version > fjord_format::schema::CURRENT_KV_FORMAT_VERSION {
                        return Err(ApiError::new(
                            ErrorCode::InvalidConfigException,
                            format!(
                                "Unsupported kv format version {version}. The maximum supported version is {}.",
                                fjord_format::schema::CURRENT_KV_FORMAT_VERSION
                            ),
                        ));
                    }
                }
            }
            // As Fluss's coordinator: the three merge engines default to
            // ignoring deletes, written into the stored descriptor.
            let engine = props
                .get(crate::kv::merge::TABLE_MERGE_ENGINE)
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase);
            if matches!(
                engine.as_deref(),
                Some("first_row" | "versioned" | "aggregation")
            ) {
                props
                    .entry(crate::kv::merge::TABLE_DELETE_BEHAVIOR)
                    .or_insert_with(|| Value::String("IGNORE".to_owned()));
            }
        }
        if AutoPartitionStrategy::from_properties(props, &partition_keys)?.is_some()
            && partition_keys.len() > 1
        {
            // As Fluss does: with several partition keys, pre-creating is
            // off, and the stored descriptor says so.
            props
                .entry(crate::meta::auto_partition::NUM_PRECREATE_KEY)
                .or_insert_with(|| Value::String("0".to_owned()));
        }

        obj.insert("bucket_key".to_owned(), json!(bucket_keys));
        obj.insert("bucket_count".to_owned(), json!(bucket_count));
        obj.entry("partition_key").or_insert_with(|| json!([]));
        obj.entry("custom_properties")
            .or_insert_with(|| Value::Object(Map::new()));
        obj.entry("version").or_insert_with(|| json!(1));
        // Full validation of types and keys, exactly as Fluss parses them.
        let parsed = fjord_format::json::table_from_json(&desc)
            .map_err(|e| invalid(format!("the table descriptor is not valid: {e}")))?;
        // Merge engine, delete behaviour and changelog image options are
        // checked for every table (a log table may not set them); a
        // primary-key table's whole KV view is built once here to refuse
        // what its tablets could not serve.
        crate::kv::merge::MergeOptions::from_table(parsed.schema(), parsed.properties())?;
        // As Fluss 1.0's `StatisticsConfigUtils`: log tables only, existing
        // columns of supported types.
        fjord_format::statistics::resolve_columns(
            parsed.schema(),
            parsed
                .properties()
                .get(fjord_format::statistics::TABLE_STATISTICS_COLUMNS)
                .map(String::as_str),
        )
        .map_err(|e| ApiError::new(ErrorCode::InvalidConfigException, e.to_string()))?;
        if parsed.has_primary_key() {
            crate::kv::KvTable::new(
                Arc::new(parsed.schema().clone()),
                FIRST_SCHEMA_ID,
                parsed.partition_keys(),
                parsed.bucket_keys(),
                parsed.properties(),
            )?;
        }
        Ok((desc, bucket_count))
    }

    fn read_table(&self, path: &TablePath) -> Result<Option<TableInfo>, ApiError> {
        let node = table_node(path);
        let Some(v) = self.store.get(&node)? else {
            return Ok(None);
        };
        let rec: Value = serde_json::from_slice(&v.data).map_err(|e| corrupt(&node, e))?;
        table_info_from_record(path.clone(), &rec, &node).map(Some)
    }

    /// Reads a table by path, or `None`.
    pub fn table(&self, path: &TablePath) -> Result<Option<Arc<TableInfo>>, ApiError> {
        if validate_table_path(path).is_err() {
            return Ok(None);
        }
        // The index holds exactly the stored tables.
        let index = self.tables.read().unwrap_or_else(|p| p.into_inner());
        Ok(index.by_path.get(path).cloned())
    }

    /// Reads a table by id, or `None` (the data path's lookup).
    pub fn table_by_id(&self, table_id: i64) -> Option<Arc<TableInfo>> {
        self.tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .by_id
            .get(&table_id)
            .cloned()
    }

    /// All tables, in no particular order.
    pub fn all_tables(&self) -> Vec<Arc<TableInfo>> {
        self.tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .by_id
            .values()
            .cloned()
            .collect()
    }

    /// Table names of a database, sorted; `DatabaseNotExist` if it is missing.
    pub fn list_tables(&self, database: &str) -> Result<Vec<String>, ApiError> {
        if invalid_name_reason(database).is_some() {
            return Err(db_not_exist(database));
        }
        match self.store.children(&db_node(database)) {
            Ok(t) => Ok(t),
            Err(MetaError::NoNode(_)) => Err(db_not_exist(database)),
            Err(e) => Err(e.into()),
        }
    }

    /// Drops a table; returns its id (`None` if it did not exist and
    /// `ignore_if_not_exists`). The table's data is the caller's to delete.
    pub fn drop_table(
        &self,
        path: &TablePath,
        ignore_if_not_exists: bool,
    ) -> Result<Option<i64>, ApiError> {
        // Not racing a partition create of this table (see `partition_ops`).
        let _serial = self.partition_ops.lock().unwrap_or_else(|p| p.into_inner());
        let existing = self.table(path)?;
        let Some(info) = existing else {
            return if ignore_if_not_exists {
                Ok(None)
            } else {
                Err(table_not_exist(path))
            };
        };
        match self.store.delete(&table_node(path), None) {
            Ok(()) | Err(MetaError::NoNode(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.tables
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&info);
        // The table is gone; its partition nodes are garbage now (and are
        // collected on the next open should this fail half-way).
        self.delete_partition_nodes(info.table_id)?;
        Ok(Some(info.table_id))
    }

    // ---- ids ----

    /// Increments the counter at `node` by `count` with compare-and-set and
    /// returns the value before the increment.
    fn bump_counter(&self, node: &str, count: i64) -> Result<i64, ApiError> {
        for _ in 0..CAS_RETRIES_MAX {
            let v = self
                .store
                .get(node)?
                .ok_or_else(|| corrupt(node, "counter missing"))?;
            let current: i64 = std::str::from_utf8(&v.data)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| corrupt(node, "counter is not a number"))?;
            let next = current
                .checked_add(count)
                .ok_or_else(|| corrupt(node, "counter overflow"))?;
            match self
                .store
                .set(node, next.to_string().as_bytes(), Some(v.version))
            {
                Ok(_) => return Ok(current),
                Err(MetaError::BadVersion { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::new(
            ErrorCode::UnknownServerError,
            format!("could not allocate an id from {node}: too much contention"),
        ))
    }

    fn allocate_table_id(&self) -> Result<i64, ApiError> {
        self.bump_counter(TABLE_ID_NODE, 1)
    }

    /// A partition id never handed out before by this data dir.
    fn allocate_partition_id(&self) -> Result<i64, ApiError> {
        let mut ids = self.partition_ids.lock().unwrap_or_else(|p| p.into_inner());
        if ids.0 >= ids.1 {
            // Reserve the next block durably before handing out any of it.
            let start = self.bump_counter(PARTITION_ID_NODE, PARTITION_ID_BLOCK)?;
            *ids = (start, start + PARTITION_ID_BLOCK);
        }
        let id = ids.0;
        ids.0 += 1;
        Ok(id)
    }

    /// A writer id never handed out before by this data dir.
    pub fn allocate_writer_id(&self) -> Result<i64, ApiError> {
        let mut ids = self.writer_ids.lock().unwrap_or_else(|p| p.into_inner());
        if ids.0 >= ids.1 {
            // Reserve the next block durably before handing out any of it.
            let start = self.bump_counter(WRITER_ID_NODE, WRITER_ID_BLOCK)?;
            *ids = (start, start + WRITER_ID_BLOCK);
        }
        let id = ids.0;
        ids.0 += 1;
        Ok(id)
    }
}

fn already_exists(path: &TablePath) -> ApiError {
    ApiError::new(
        ErrorCode::TableAlreadyExist,
        format!("Table {}.{} already exists.", path.database, path.table),
    )
}

/// `TableNotExist` for `path`.
pub fn table_not_exist(path: &TablePath) -> ApiError {
    ApiError::new(
        ErrorCode::TableNotExist,
        format!("Table {}.{} does not exist.", path.database, path.table),
    )
}

/// `DatabaseNotExist` for `name`.
pub fn db_not_exist(name: &str) -> ApiError {
    ApiError::new(
        ErrorCode::DatabaseNotExist,
        format!("Database {name} does not exist."),
    )
}

fn table_info_from_record(path: TablePath, rec: &Value, node: &str) -> Result<TableInfo, ApiError> {
    let int = |k: &str| {
        rec[k]
            .as_i64()
            .ok_or_else(|| corrupt(node, format!("no {k}")))
    };
    let table = rec
        .get("table")
        .filter(|t| t.is_object())
        .ok_or_else(|| corrupt(node, "no table descriptor"))?;
    let schema = table
        .get("schema")
        .ok_or_else(|| corrupt(node, "no schema"))?;
    let schema_id = i32::try_from(int("schema_id")?)
        .ok()
        .filter(|&id| id >= FIRST_SCHEMA_ID)
        .ok_or_else(|| corrupt(node, "schema_id is out of range"))?;
    // Every earlier schema by id, then the current one: ids
    // FIRST_SCHEMA_ID..=schema_id, each present exactly once.
    let earlier: &[Value] = match rec.get("schemas") {
        None | Some(Value::Null) => &[],
        Some(Value::Array(list)) => list,
        Some(_) => return Err(corrupt(node, "schemas is not a list")),
    };
    if earlier.len() as i64 != i64::from(schema_id - FIRST_SCHEMA_ID) {
        return Err(corrupt(
            node,
            format!(
                "schema {schema_id} is current, but {} earlier schemas are stored",
                earlier.len()
            ),
        ));
    }
    let mut schemas = Vec::with_capacity(earlier.len() + 1);
    for (i, entry) in earlier.iter().enumerate() {
        let id = FIRST_SCHEMA_ID + i as i32;
        if entry.get("schema_id").and_then(Value::as_i64) != Some(i64::from(id)) {
            return Err(corrupt(
                node,
                format!("schema {id} is missing or out of order"),
            ));
        }
        let json = entry
            .get("schema")
            .ok_or_else(|| corrupt(node, format!("schema {id} has no schema")))?;
        schemas.push(table_schema(id, json).map_err(|e| corrupt(node, e))?);
    }
    schemas.push(table_schema(schema_id, schema).map_err(|e| corrupt(node, e))?);
    let parsed = Arc::clone(&schemas[schemas.len() - 1].schema);
    let partition_keys: Vec<String> = table
        .get("partition_key")
        .and_then(Value::as_array)
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let empty = Map::new();
    let props = table
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let auto_partition = AutoPartitionStrategy::from_properties(props, &partition_keys)
        .map_err(|e| corrupt(node, e))?
        .map(Arc::new);
    let kv = if parsed.primary_key().is_some() {
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|keys| {
                    keys.iter()
                        .filter_map(|k| k.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let properties: std::collections::BTreeMap<String, String> = props
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect();
        let all: Vec<Arc<fjord_format::Schema>> =
            schemas.iter().map(|s| Arc::clone(&s.schema)).collect();
        let table_kv = crate::kv::KvTable::with_schemas(
            &all,
            FIRST_SCHEMA_ID,
            &partition_keys,
            &strings(table.get("bucket_key")),
            &properties,
        )
        .map_err(|e| corrupt(node, e.message()))?;
        Some(Arc::new(table_kv))
    } else {
        None
    };
    Ok(TableInfo {
        kv,
        partition_keys,
        auto_partition,
        schema: parsed,
        schemas: schemas.into(),
        table_id: int("table_id")?,
        path,
        schema_id,
        bucket_count: int("bucket_count")? as i32,
        table_json: table.to_string().into_bytes(),
        schema_json: schema.to_string().into_bytes(),
        created_ms: int("created_time")?,
        modified_ms: int("modified_time")?,
    })
}

/// The [`TableSchema`] of id `schema_id` from its stored JSON.
fn table_schema(schema_id: i32, json: &Value) -> Result<TableSchema, String> {
    let schema = fjord_format::json::schema_from_json(json)
        .map_err(|e| format!("schema {schema_id} is invalid: {e}"))?;
    Ok(TableSchema {
        schema_id,
        schema_json: json.to_string().into_bytes(),
        schema: Arc::new(schema),
    })
}

/// What the catalog's tests (here and in its submodules) open and create.
#[cfg(test)]
mod tests_support {
    use super::*;
    use crate::meta::store::FileMetaStore;

    pub fn options() -> CatalogOptions {
        CatalogOptions {
            default_bucket_count: 1,
            bucket_count_max: 128,
            default_replication_factor: 1,
            partition_count_max: 5,
        }
    }

    /// The catalog of the data dir `dir`.
    pub fn open(dir: &std::path::Path) -> Catalog {
        let store = Arc::new(FileMetaStore::open(dir).unwrap());
        Catalog::open(store, options()).unwrap()
    }

    /// `db.<t>`.
    pub fn path(t: &str) -> TablePath {
        TablePath {
            database: "db".into(),
            table: t.into(),
        }
    }

    /// A log table: a INT, b STRING, three buckets by a.
    pub const LOG_TABLE: &str = r#"{"version":1,"schema":{"version":1,"columns":[{"name":"a","data_type":{"type":"INTEGER"}},{"name":"b","data_type":{"type":"STRING"}}]},"partition_key":[],"bucket_key":["a"],"bucket_count":3,"properties":{},"custom_properties":{}}"#;
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;
    use crate::meta::store::FileMetaStore;

    fn check_refused(json: &str, code: ErrorCode, needle: &str) {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        let err = c
            .create_table(&path("t"), json.as_bytes(), false)
            .unwrap_err();
        assert_eq!(err.code(), code, "{err}");
        assert!(err.message().contains(needle), "{err}");
    }

    #[test]
    fn tables_survive_reopen_with_defaults_filled_in() {
        let dir = tempfile::tempdir().unwrap();
        let id = {
            let c = open(dir.path());
            c.create_database("db", None, false).unwrap();
            let t = c
                .create_table(&path("t"), LOG_TABLE.as_bytes(), false)
                .unwrap()
                .unwrap();
            t.table_id
        };
        let c = open(dir.path());
        let t = c.table_by_id(id).unwrap();
        assert_eq!((t.bucket_count, t.schema_id), (3, FIRST_SCHEMA_ID));
        let v: Value = serde_json::from_slice(&t.table_json).unwrap();
        assert_eq!(v["properties"]["table.replication.factor"], "1");
        assert_eq!(c.list_tables("db").unwrap(), vec!["t"]);
    }

    #[test]
    fn missing_bucket_count_gets_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        let json = LOG_TABLE.replace(r#","bucket_count":3"#, "");
        let t = c
            .create_table(&path("t"), json.as_bytes(), false)
            .unwrap()
            .unwrap();
        assert_eq!(t.bucket_count, 1);
        let v: Value = serde_json::from_slice(&t.table_json).unwrap();
        assert_eq!(v["bucket_count"], 1);
    }

    /// A primary-key table of columns a (INT), b (STRING), c (STRING) with
    /// the given primary key, partition keys, bucket keys and properties.
    fn pk_table(pk: &[&str], partition: &[&str], bucket: &[&str], props: &str) -> String {
        let list = |names: &[&str]| serde_json::to_string(names).unwrap();
        format!(
            r#"{{"version":1,"schema":{{"version":1,"columns":[{{"name":"a","data_type":{{"type":"INTEGER","nullable":false}}}},{{"name":"b","data_type":{{"type":"STRING","nullable":false}}}},{{"name":"c","data_type":{{"type":"STRING"}}}}],"primary_key":{}}},"partition_key":{},"bucket_key":{},"bucket_count":2,"properties":{{{props}}},"custom_properties":{{}}}}"#,
            list(pk),
            list(partition),
            list(bucket)
        )
    }

    #[test]
    fn primary_key_tables_get_fluss_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        let t = c
            .create_table(
                &path("t"),
                pk_table(&["a", "b"], &["b"], &[], "").as_bytes(),
                false,
            )
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_slice(&t.table_json).unwrap();
        assert_eq!(
            v["bucket_key"],
            json!(["a"]),
            "the key minus partition keys"
        );
        assert_eq!(v["properties"]["table.kv.format-version"], "2");
        let kv = t.kv.as_ref().expect("a primary-key table has a KV view");
        assert_eq!(kv.key_positions, vec![0]);

        let t = c
            .create_table(
                &path("f"),
                pk_table(&["a"], &[], &[], r#""table.merge-engine":"first_row""#).as_bytes(),
                false,
            )
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_slice(&t.table_json).unwrap();
        assert_eq!(v["properties"]["table.delete.behavior"], "IGNORE");
        drop(c);
        let c = open(dir.path());
        assert!(c.table(&path("t")).unwrap().unwrap().has_primary_key());
        assert!(c.table(&path("f")).unwrap().unwrap().has_primary_key());
    }

    #[test]
    fn primary_key_tables_refuse_what_fluss_refuses() {
        check_refused(
            &pk_table(&["a"], &["b"], &[], ""),
            ErrorCode::InvalidTableException,
            "is a subset of the primary key",
        );
        check_refused(
            &pk_table(&["a", "b"], &[], &["c"], ""),
            ErrorCode::InvalidTableException,
            "Bucket keys must be a subset of primary keys",
        );
        check_refused(
            &LOG_TABLE.replace(
                r#""properties":{}"#,
                r#""properties":{"table.merge-engine":"first_row"}"#,
            ),
            ErrorCode::InvalidConfigException,
            "primary-key table",
        );
        check_refused(
            &LOG_TABLE.replace(
                r#""properties":{}"#,
                r#""properties":{"table.delete.behavior":"IGNORE"}"#,
            ),
            ErrorCode::InvalidConfigException,
            "table.delete.behavior",
        );
        check_refused(
            &pk_table(
                &["a"],
                &[],
                &[],
                r#""table.merge-engine":"versioned","table.merge-engine.versioned.ver-column":"a","table.delete.behavior":"ALLOW""#,
            ),
            ErrorCode::InvalidConfigException,
            "allow",
        );
        check_refused(
            &pk_table(&["a"], &[], &[], r#""table.kv.format":"PARQUET""#),
            ErrorCode::InvalidConfigException,
            "table.kv.format",
        );
        check_refused(
            &pk_table(&["a"], &[], &[], r#""table.kv.format-version":"3""#),
            ErrorCode::InvalidConfigException,
            "Unsupported kv format version 3",
        );
        check_refused(
            &pk_table(
                &["a"],
                &[],
                &[],
                r#""table.merge-engine":"aggregation","table.changelog.image":"WAL""#,
            ),
            ErrorCode::InvalidConfigException,
            "FULL",
        );
    }

    #[test]
    fn partition_keys_must_be_string_columns() {
        let json = LOG_TABLE.replace(r#""partition_key":[]"#, r#""partition_key":["a"]"#);
        let json = json.replace(r#""bucket_key":["a"]"#, r#""bucket_key":[]"#);
        check_refused(&json, ErrorCode::InvalidTableException, "partition key 'a'");
        let json = LOG_TABLE.replace(r#""partition_key":[]"#, r#""partition_key":["zz"]"#);
        check_refused(
            &json,
            ErrorCode::InvalidTableException,
            "'zz' does not exist",
        );
    }

    #[test]
    fn bucket_key_may_not_include_a_partition_key() {
        let json = LOG_TABLE.replace(r#""partition_key":[]"#, r#""partition_key":["b"]"#);
        let json = json.replace(r#""bucket_key":["a"]"#, r#""bucket_key":["b"]"#);
        check_refused(&json, ErrorCode::InvalidTableException, "shouldn't include");
    }

    #[test]
    fn bucket_key_must_name_a_column() {
        let json = LOG_TABLE.replace(r#"["a"]"#, r#"["zz"]"#);
        check_refused(&json, ErrorCode::InvalidTableException, "bucket key zz");
    }

    #[test]
    fn too_many_buckets_is_refused() {
        let json = LOG_TABLE.replace(r#""bucket_count":3"#, r#""bucket_count":100000"#);
        check_refused(&json, ErrorCode::BucketMaxNumException, "100000");
    }

    #[test]
    fn create_table_in_missing_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        let err = c
            .create_table(&path("t"), LOG_TABLE.as_bytes(), false)
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::DatabaseNotExist);
    }

    #[test]
    fn duplicate_database_and_table_are_refused_unless_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        assert_eq!(
            c.create_database("db", None, false).unwrap_err().code(),
            ErrorCode::DatabaseAlreadyExist
        );
        c.create_database("db", None, true).unwrap();
        c.create_table(&path("t"), LOG_TABLE.as_bytes(), false)
            .unwrap();
        let err = c
            .create_table(&path("t"), LOG_TABLE.as_bytes(), false)
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::TableAlreadyExist);
        assert!(c
            .create_table(&path("t"), LOG_TABLE.as_bytes(), true)
            .unwrap()
            .is_none());
    }

    #[test]
    fn invalid_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        for bad in ["", "a.b", "a/b", "__x", &"x".repeat(201)] {
            assert_eq!(
                c.create_database(bad, None, false).unwrap_err().code(),
                ErrorCode::InvalidDatabaseException,
                "{bad}"
            );
        }
    }

    #[test]
    fn drop_database_needs_cascade_when_not_empty() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        let id = c
            .create_table(&path("t"), LOG_TABLE.as_bytes(), false)
            .unwrap()
            .unwrap()
            .table_id;
        assert_eq!(
            c.drop_database("db", false, false).unwrap_err().code(),
            ErrorCode::DatabaseNotEmpty
        );
        assert_eq!(c.drop_database("db", false, true).unwrap(), vec![id]);
        assert!(c.table_by_id(id).is_none());
        assert!(c.list_databases().unwrap().is_empty());
    }

    #[test]
    fn writer_ids_stay_unique_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let first: Vec<i64> = {
            let c = open(dir.path());
            (0..3).map(|_| c.allocate_writer_id().unwrap()).collect()
        };
        let c = open(dir.path());
        let next = c.allocate_writer_id().unwrap();
        assert!(first.iter().all(|&id| id < next), "{first:?} vs {next}");
    }

    #[test]
    fn partition_nodes_of_a_table_dropped_mid_crash_are_removed_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let json = LOG_TABLE
            .replace(r#""partition_key":[]"#, r#""partition_key":["b"]"#)
            .replace(r#""bucket_key":["a"]"#, r#""bucket_key":[]"#);
        let table_id = {
            let c = open(dir.path());
            c.create_database("db", None, false).unwrap();
            let t = c
                .create_table(&path("t"), json.as_bytes(), false)
                .unwrap()
                .unwrap();
            c.create_partition(&t, vec!["x".into()], false, |_, _| Ok(()))
                .unwrap();
            t.table_id
        };
        // A crash after the table node's delete, before its partitions'.
        let store = FileMetaStore::open(dir.path()).unwrap();
        store.delete("/databases/db/t", None).unwrap();
        drop(store);
        let c = open(dir.path());
        assert!(c.partitions(table_id).is_empty());
        let store = FileMetaStore::open(dir.path()).unwrap();
        assert!(store
            .get(&format!("/partitions/{table_id}"))
            .unwrap()
            .is_none());
    }

    #[test]
    fn partitions_survive_reopen_and_failed_tablets_undo_the_create() {
        let dir = tempfile::tempdir().unwrap();
        let json = LOG_TABLE
            .replace(r#""partition_key":[]"#, r#""partition_key":["b"]"#)
            .replace(r#""bucket_key":["a"]"#, r#""bucket_key":[]"#);
        let (t, created) = {
            let c = open(dir.path());
            c.create_database("db", None, false).unwrap();
            let t = c
                .create_table(&path("t"), json.as_bytes(), false)
                .unwrap()
                .unwrap();
            let p = c
                .create_partition(&t, vec!["x".into()], false, |_, _| Ok(()))
                .unwrap()
                .unwrap();
            let failed = c.create_partition(&t, vec!["y".into()], false, |_, _| {
                Err(ApiError::new(ErrorCode::StorageException, "disk full"))
            });
            assert_eq!(failed.unwrap_err().code(), ErrorCode::StorageException);
            (t, p)
        };
        let c = open(dir.path());
        let parts = c.partitions(t.table_id);
        assert_eq!(parts.len(), 1);
        assert_eq!(*parts[0], *created);
        assert_eq!(c.partition_by_id(created.partition_id).unwrap().name, "x");
    }

    #[test]
    fn table_ids_are_not_reused_after_drop() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        c.create_database("db", None, false).unwrap();
        let a = c
            .create_table(&path("t"), LOG_TABLE.as_bytes(), false)
            .unwrap()
            .unwrap()
            .table_id;
        c.drop_table(&path("t"), false).unwrap();
        let b = c
            .create_table(&path("t"), LOG_TABLE.as_bytes(), false)
            .unwrap()
            .unwrap()
            .table_id;
        assert_ne!(a, b);
    }
}
