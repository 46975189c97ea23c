//! Catalog operations against the coordinator: databases, tables, table
//! info and offsets. Thin typed wrappers over single requests; nothing here
//! is on a per-record path.

use fjord_format::schema::{DatabaseDescriptor, TableDescriptor};
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
}

impl TableInfo {
    /// Number of buckets of the table.
    pub fn bucket_count(&self) -> i32 {
        self.descriptor.bucket_count().unwrap_or(1)
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
        Ok(TableInfo {
            path: path.clone(),
            table_id: response.table_id,
            schema_id: response.schema_id,
            descriptor,
        })
    }

    /// The offset `spec` names for each of `buckets` of a table, in bucket order.
    pub async fn list_offsets(
        &self,
        table: &TableInfo,
        buckets: &[i32],
        spec: OffsetSpec,
    ) -> Result<Vec<i64>> {
        let request = pb::ListOffsetsRequest {
            follower_server_id: -1,
            offset_type: spec.offset_type(),
            table_id: table.table_id,
            partition_id: None,
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
