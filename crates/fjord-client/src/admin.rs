//! Catalog operations against the coordinator: databases, tables, table
//! info, partitions and offsets. Thin typed wrappers over single requests;
//! nothing here is on a per-record path.

use fjord_format::schema::{DatabaseDescriptor, Schema, TableDescriptor};
use fjord_proto::messages as pb;
use fjord_proto::ApiKey;

use crate::connection::ServerConnection;
use crate::error::{ClientError, Result};

/// A table's name: database and table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TablePath {
    /// Database name.
    pub database: String,
    /// Table name within the database.
    pub table: String,
}

impl TablePath {
    /// A table path from its two names.
    pub fn new(database: impl Into<String>, table: impl Into<String>) -> Self {
        Self {
            database: database.into(),
            table: table.into(),
        }
    }

    pub(crate) fn to_pb(&self) -> pb::PbTablePath {
        pb::PbTablePath {
            database_name: self.database.clone(),
            table_name: self.table.clone(),
        }
    }
}

impl std::fmt::Display for TablePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.database, self.table)
    }
}

/// What the server knows of a table: id, current schema id and descriptor.
#[derive(Clone, Debug)]
pub struct TableInfo {
    /// The table's path.
    pub path: TablePath,
    /// Server-assigned table id, used by produce and fetch requests.
    pub table_id: i64,
    /// Id of the current schema; batches are written with it.
    pub schema_id: i32,
    /// The descriptor as the server stores it (with server defaults applied).
    pub descriptor: TableDescriptor,
    /// The table's earlier schemas, `(schema id, schema)` oldest first;
    /// empty for a table never altered. Rows and batches written before an
    /// ALTER TABLE carry these ids, and readers decode them with these.
    pub earlier_schemas: Vec<(i32, Schema)>,
}

impl TableInfo {
    /// Number of buckets of the table.
    pub fn bucket_count(&self) -> i32 {
        self.descriptor.bucket_count().unwrap_or(1)
    }

    /// The partition key column names, in the order that builds partition
    /// names; empty when the table is not partitioned.
    pub fn partition_keys(&self) -> &[String] {
        self.descriptor.partition_keys()
    }

    /// Whether the table has partition keys.
    pub fn is_partitioned(&self) -> bool {
        self.descriptor.is_partitioned()
    }

    /// The earlier schemas a reader can pad to the current one: those whose
    /// columns are the current schema's first columns (same names and
    /// types), as every schema Fluss's ALTER TABLE (columns added last)
    /// leaves behind is. Rows of these ids read NULL in the columns added
    /// since, as Fluss's `PaddingRow`.
    pub fn paddable_earlier_schemas(&self) -> impl Iterator<Item = (i32, &Schema)> {
        let current = self.descriptor.schema().columns();
        self.earlier_schemas
            .iter()
            .filter(move |(_, old)| {
                old.columns().len() <= current.len()
                    && old
                        .columns()
                        .iter()
                        .zip(current)
                        .all(|(o, c)| o.name == c.name && o.data_type.kind() == c.data_type.kind())
            })
            .map(|(id, old)| (*id, old))
    }

    /// The schema a row or batch of `schema_id` was written with: the
    /// current one or an earlier one; `None` for an id this info does not
    /// know (newer than it, or never the table's).
    pub fn schema_by_id(&self, schema_id: i32) -> Option<&Schema> {
        if schema_id == self.schema_id {
            return Some(self.descriptor.schema());
        }
        self.earlier_schemas
            .iter()
            .find(|(id, _)| *id == schema_id)
            .map(|(_, schema)| schema)
    }
}

/// Separator between the values of a partition name (Fluss's
/// `ResolvedPartitionSpec.PARTITION_SPEC_SEPARATOR`), shared with the server.
pub use fjord_format::schema::PARTITION_NAME_SEPARATOR;

/// One partition of a partitioned table, as the coordinator lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Server-assigned id, unique across the cluster and stable across
    /// restarts; produce, fetch and offset requests address the partition by it.
    pub partition_id: i64,
    /// The partition name: the values of `spec` joined by
    /// [`PARTITION_NAME_SEPARATOR`], in partition-key order.
    pub name: String,
    /// Partition key → value, in the order the server sent them (the table's
    /// partition-key order).
    pub spec: Vec<(String, String)>,
}

impl PartitionInfo {
    fn from_pb(info: pb::PbPartitionInfo) -> Self {
        let spec: Vec<(String, String)> = info
            .partition_spec
            .partition_key_values
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect();
        let name = fjord_format::schema::partition_name(spec.iter().map(|(_, v)| v.as_str()));
        Self {
            partition_id: info.partition_id,
            name,
            spec,
        }
    }
}

fn spec_to_pb(spec: &[(String, String)]) -> pb::PbPartitionSpec {
    pb::PbPartitionSpec {
        partition_key_values: spec
            .iter()
            .map(|(key, value)| pb::PbKeyValue {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
    }
}

/// Which offset [`Admin::list_offsets`] asks for; the numbers are Fluss's
/// `ListOffsetsRequest.offset_type` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The high watermark (the offset the next record will get).
    Latest,
    /// The first offset whose commit timestamp is at or after this time (ms).
    Timestamp(i64),
}

impl OffsetSpec {
    fn offset_type(self) -> i32 {
        match self {
            OffsetSpec::Earliest => 0,
            OffsetSpec::Latest => 1,
            OffsetSpec::Timestamp(_) => 2,
        }
    }
}

/// `PbAlterConfig.op_type` of a SET (Fluss's `AlterConfigOpType.SET`).
const ALTER_CONFIG_SET: i32 = 0;
/// `PbAlterConfig.op_type` of a reset to the default (`DELETE`).
const ALTER_CONFIG_DELETE: i32 = 1;
/// `PbAddColumn.column_position_type` of LAST, the only position Fluss
/// 0.9.1 accepts.
const COLUMN_POSITION_LAST: i32 = 0;

/// One change of an [`Admin::alter_table`] request: what Fluss 0.9.1's
/// ALTER TABLE can do to a table.
#[derive(Clone, Debug, PartialEq)]
pub enum TableChange {
    /// Sets a table option (`table.*` or a custom property).
    SetOption {
        /// Option key.
        key: String,
        /// New value.
        value: String,
    },
    /// Resets a table option to its default.
    ResetOption {
        /// Option key.
        key: String,
    },
    /// Adds a column after the last one. The server requires it nullable;
    /// rows written before read it as NULL.
    AddColumnLast {
        /// Column name.
        name: String,
        /// Column type (nullable).
        data_type: fjord_format::types::DataType,
        /// Column comment.
        comment: Option<String>,
    },
}

/// Catalog client over a connection to the coordinator.
#[derive(Clone)]
pub struct Admin {
    connection: ServerConnection,
}

impl Admin {
    /// An admin client over `connection` (to the coordinator).
    pub fn new(connection: ServerConnection) -> Self {
        Self { connection }
    }

    /// Creates a database; with `ignore_if_exists` an existing one is fine.
    pub async fn create_database(
        &self,
        name: &str,
        descriptor: &DatabaseDescriptor,
        ignore_if_exists: bool,
    ) -> Result<()> {
        let request = pb::CreateDatabaseRequest {
            database_name: name.to_owned(),
            ignore_if_exists,
            database_json: Some(descriptor.to_json_bytes().into()),
        };
        let _: pb::CreateDatabaseResponse = self
            .connection
            .request(ApiKey::CreateDatabase, &request)
            .await?;
        Ok(())
    }

    /// Drops a database; `cascade` drops its tables too.
    pub async fn drop_database(
        &self,
        name: &str,
        ignore_if_not_exists: bool,
        cascade: bool,
    ) -> Result<()> {
        let request = pb::DropDatabaseRequest {
            database_name: name.to_owned(),
            ignore_if_not_exists,
            cascade,
        };
        let _: pb::DropDatabaseResponse = self
            .connection
            .request(ApiKey::DropDatabase, &request)
            .await?;
        Ok(())
    }

    /// The names of all databases.
    pub async fn list_databases(&self) -> Result<Vec<String>> {
        let request = pb::ListDatabasesRequest {
            include_summary: None,
        };
        let response: pb::ListDatabasesResponse = self
            .connection
            .request(ApiKey::ListDatabases, &request)
            .await?;
        Ok(response.database_name)
    }

    /// The names of the tables of database `database`.
    pub async fn list_tables(&self, database: &str) -> Result<Vec<String>> {
        let request = pb::ListTablesRequest {
            database_name: database.to_owned(),
        };
        let response: pb::ListTablesResponse = self
            .connection
            .request(ApiKey::ListTables, &request)
            .await?;
        Ok(response.table_name)
    }

    /// Creates a table; with `ignore_if_exists` an existing one is fine.
    pub async fn create_table(
        &self,
        path: &TablePath,
        descriptor: &TableDescriptor,
        ignore_if_exists: bool,
    ) -> Result<()> {
        let request = pb::CreateTableRequest {
            table_path: path.to_pb(),
            table_json: descriptor.to_json_bytes().into(),
            ignore_if_exists,
        };
        let _: pb::CreateTableResponse = self
            .connection
            .request(ApiKey::CreateTable, &request)
            .await?;
        Ok(())
    }

    /// Drops a table.
    pub async fn drop_table(&self, path: &TablePath, ignore_if_not_exists: bool) -> Result<()> {
        let request = pb::DropTableRequest {
            table_path: path.to_pb(),
            ignore_if_not_exists,
        };
        let _: pb::DropTableResponse = self.connection.request(ApiKey::DropTable, &request).await?;
        Ok(())
    }

    /// Alters a table in one request, as Fluss 0.9.1's coordinator applies
    /// it: either option changes or column changes, not both (the server
    /// refuses a mix with `INVALID_ALTER_TABLE_EXCEPTION`). On success the
    /// table has a new schema id when columns were added; writers and
    /// readers holding the old [`TableInfo`] keep working (batches carry
    /// their schema id) and pick the new schema up from
    /// [`Admin::table_info`]. With `ignore_if_not_exists` a missing table is
    /// no error.
    pub async fn alter_table(
        &self,
        path: &TablePath,
        changes: &[TableChange],
        ignore_if_not_exists: bool,
    ) -> Result<()> {
        let mut request = pb::AlterTableRequest {
            table_path: path.to_pb(),
            ignore_if_not_exists,
            ..Default::default()
        };
        for change in changes {
            match change {
                TableChange::SetOption { key, value } => {
                    request.config_changes.push(pb::PbAlterConfig {
                        config_key: key.clone(),
                        config_value: Some(value.clone()),
                        op_type: ALTER_CONFIG_SET,
                    })
                }
                TableChange::ResetOption { key } => {
                    request.config_changes.push(pb::PbAlterConfig {
                        config_key: key.clone(),
                        config_value: None,
                        op_type: ALTER_CONFIG_DELETE,
                    })
                }
                TableChange::AddColumnLast {
                    name,
                    data_type,
                    comment,
                } => request.add_columns.push(pb::PbAddColumn {
                    column_name: name.clone(),
                    data_type_json: fjord_format::json::data_type_to_json(data_type)
                        .to_string()
                        .into_bytes()
                        .into(),
                    comment: comment.clone(),
                    column_position_type: COLUMN_POSITION_LAST,
                    agg_function_type: None,
                    agg_function_params: Vec::new(),
                }),
            }
        }
        let _: pb::AlterTableResponse = self
            .connection
            .request(ApiKey::AlterTable, &request)
            .await?;
        Ok(())
    }

    /// Fetches a table's id, schema id and descriptor.
    pub async fn table_info(&self, path: &TablePath) -> Result<TableInfo> {
        let request = pb::GetTableInfoRequest {
            table_path: path.to_pb(),
        };
        let response: pb::GetTableInfoResponse = self
            .connection
            .request(ApiKey::GetTableInfo, &request)
            .await?;
        let descriptor = TableDescriptor::from_json_bytes(&response.table_json).map_err(|e| {
            ClientError::Protocol {
                api: ApiKey::GetTableInfo.name(),
                message: format!("table JSON of {path} does not parse: {e}"),
            }
        })?;
        // Schema ids start at 1 and grow by one per ALTER TABLE that adds
        // columns; a never-altered table costs no further request.
        let mut earlier_schemas = Vec::new();
        for schema_id in 1..response.schema_id {
            earlier_schemas.push((schema_id, self.table_schema(path, schema_id).await?));
        }
        Ok(TableInfo {
            path: path.clone(),
            table_id: response.table_id,
            schema_id: response.schema_id,
            descriptor,
            earlier_schemas,
        })
    }

    /// The table's schema of `schema_id` (GetTableSchema); the server
    /// answers `SCHEMA_NOT_EXIST` for an id the table never had.
    pub async fn table_schema(&self, path: &TablePath, schema_id: i32) -> Result<Schema> {
        let request = pb::GetTableSchemaRequest {
            table_path: path.to_pb(),
            schema_id: Some(schema_id),
        };
        let response: pb::GetTableSchemaResponse = self
            .connection
            .request(ApiKey::GetTableSchema, &request)
            .await?;
        Schema::from_json_bytes(&response.schema_json).map_err(|e| ClientError::Protocol {
            api: ApiKey::GetTableSchema.name(),
            message: format!("schema {schema_id} of {path} does not parse: {e}"),
        })
    }

    /// Creates the partition of a partitioned table whose key values are
    /// `spec` (every partition key once, in any order); with
    /// `ignore_if_exists` an existing partition is fine. The server refuses a
    /// table without partition keys (`TABLE_NOT_PARTITIONED_EXCEPTION`), a
    /// spec that does not name exactly the partition keys or has an invalid
    /// value (`PARTITION_SPEC_INVALID_EXCEPTION`) and a partition beyond
    /// `max.partition.num` (`PARTITION_MAX_NUM_EXCEPTION`).
    pub async fn create_partition(
        &self,
        path: &TablePath,
        spec: &[(String, String)],
        ignore_if_exists: bool,
    ) -> Result<()> {
        let request = pb::CreatePartitionRequest {
            table_path: path.to_pb(),
            partition_spec: spec_to_pb(spec),
            // Fluss names this field `ignore_if_not_exists` in CreatePartition
            // too; it means "ignore if the partition already exists".
            ignore_if_not_exists: ignore_if_exists,
        };
        let _: pb::CreatePartitionResponse = self
            .connection
            .request(ApiKey::CreatePartition, &request)
            .await?;
        Ok(())
    }

    /// Drops the partition whose key values are `spec`, with its data; with
    /// `ignore_if_not_exists` a missing partition is fine, otherwise the
    /// server answers `PARTITION_NOT_EXISTS`.
    pub async fn drop_partition(
        &self,
        path: &TablePath,
        spec: &[(String, String)],
        ignore_if_not_exists: bool,
    ) -> Result<()> {
        let request = pb::DropPartitionRequest {
            table_path: path.to_pb(),
            partition_spec: spec_to_pb(spec),
            ignore_if_not_exists,
        };
        let _: pb::DropPartitionResponse = self
            .connection
            .request(ApiKey::DropPartition, &request)
            .await?;
        Ok(())
    }

    /// The partitions of a partitioned table; with `partial_spec`, only those
    /// whose values match it (a subset of the partition keys).
    pub async fn list_partitions(
        &self,
        path: &TablePath,
        partial_spec: Option<&[(String, String)]>,
    ) -> Result<Vec<PartitionInfo>> {
        let request = pb::ListPartitionInfosRequest {
            table_path: path.to_pb(),
            partial_partition_spec: partial_spec.map(spec_to_pb),
            include_system_partitions: None,
        };
        let response: pb::ListPartitionInfosResponse = self
            .connection
            .request(ApiKey::ListPartitionInfos, &request)
            .await?;
        Ok(response
            .partitions_info
            .into_iter()
            .map(PartitionInfo::from_pb)
            .collect())
    }

    /// The offset `spec` names for each of `buckets` of a table, in bucket order.
    pub async fn list_offsets(
        &self,
        table: &TableInfo,
        buckets: &[i32],
        spec: OffsetSpec,
    ) -> Result<Vec<i64>> {
        self.list_offsets_of(table, None, buckets, spec).await
    }

    /// Like [`Admin::list_offsets`], for the buckets of one partition of a
    /// partitioned table.
    pub async fn list_partition_offsets(
        &self,
        table: &TableInfo,
        partition_id: i64,
        buckets: &[i32],
        spec: OffsetSpec,
    ) -> Result<Vec<i64>> {
        self.list_offsets_of(table, Some(partition_id), buckets, spec)
            .await
    }

    async fn list_offsets_of(
        &self,
        table: &TableInfo,
        partition_id: Option<i64>,
        buckets: &[i32],
        spec: OffsetSpec,
    ) -> Result<Vec<i64>> {
        let request = pb::ListOffsetsRequest {
            follower_server_id: -1,
            offset_type: spec.offset_type(),
            table_id: table.table_id,
            partition_id,
            bucket_id: buckets.to_vec(),
            start_timestamp: match spec {
                OffsetSpec::Timestamp(ts) => Some(ts),
                _ => None,
            },
            routing_bucket_count: None,
        };
        let response: pb::ListOffsetsResponse = self
            .connection
            .request(ApiKey::ListOffsets, &request)
            .await?;
        let mut offsets = Vec::with_capacity(buckets.len());
        for &bucket in buckets {
            let entry = response
                .buckets_resp
                .iter()
                .find(|b| b.bucket_id == bucket)
                .ok_or_else(|| ClientError::Protocol {
                    api: ApiKey::ListOffsets.name(),
                    message: format!("no answer for bucket {bucket} of {}", table.path),
                })?;
            if let Some(code) = entry.error_code.filter(|&c| c != 0) {
                let error = fjord_proto::ErrorCode::from_code(code)
                    .unwrap_or(fjord_proto::ErrorCode::UnknownServerError)
                    .with_message(entry.error_message.clone().unwrap_or_default());
                return Err(ClientError::Server {
                    api: ApiKey::ListOffsets.name(),
                    error,
                });
            }
            offsets.push(entry.offset.unwrap_or(-1));
        }
        Ok(offsets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: i64, spec: &[(&str, &str)]) -> pb::PbPartitionInfo {
        pb::PbPartitionInfo {
            partition_id: id,
            partition_spec: pb::PbPartitionSpec {
                partition_key_values: spec
                    .iter()
                    .map(|(k, v)| pb::PbKeyValue {
                        key: (*k).to_owned(),
                        value: (*v).to_owned(),
                    })
                    .collect(),
            },
            remote_data_dir: None,
            bucket_count: None,
        }
    }

    #[test]
    fn partition_name_joins_values_with_dollar_in_spec_order() {
        let p = PartitionInfo::from_pb(info(7, &[("dt", "20261130"), ("region", "eu")]));
        assert_eq!(p.partition_id, 7);
        assert_eq!(p.name, "20261130$eu");
        assert_eq!(
            p.spec,
            vec![
                ("dt".to_owned(), "20261130".to_owned()),
                ("region".to_owned(), "eu".to_owned())
            ]
        );
    }

    #[test]
    fn single_key_partition_name_is_the_value() {
        assert_eq!(
            PartitionInfo::from_pb(info(1, &[("dt", "2026")])).name,
            "2026"
        );
    }

    #[test]
    fn spec_to_pb_keeps_order_and_pairs() {
        let spec = vec![
            ("b".to_owned(), "2".to_owned()),
            ("a".to_owned(), "1".to_owned()),
        ];
        let pb = spec_to_pb(&spec);
        let pairs: Vec<(&str, &str)> = pb
            .partition_key_values
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_str()))
            .collect();
        assert_eq!(pairs, vec![("b", "2"), ("a", "1")]);
    }
}
