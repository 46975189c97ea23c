//! Request handlers, one module per Fluss API key, each with its parse /
//! apply / encode steps; [`dispatch`] is the one closed `match` from a
//! decoded [`Request`] to its handler.
//!
//! Coordinator handlers (databases, tables, InitWriter) call the catalog,
//! whose store write is a short fsync done inline: they are rare
//! control-plane requests. CreateTable and CreatePartition are the
//! exception: besides the catalog write they create (and fsync) a tablet
//! per bucket, and auto-partitioning may add several partitions, so they
//! run on the blocking pool ([`on_blocking_pool`]) rather than hold a
//! runtime thread that produce and fetch requests share; so does
//! AlterTable, which waits its turn behind partition creates. Tablet-server
//! handlers (produce, fetch, list offsets) go through the replica manager.

use fjord_proto::messages as pb;
use fjord_proto::{Request, Response};

use std::sync::Arc;

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::TablePath;
use crate::node::Node;
use crate::replica::{Replica, TableBucket};

mod alter_table;
mod api_versions;
mod append_lane;
mod create_database;
mod create_table;
mod database_exists;
mod drop_database;
mod drop_table;
mod fetch_log;
mod fetch_progress;
mod get_database_info;
mod get_fs_security_token;
mod get_table_info;
mod get_table_schema;
mod init_writer;
mod kv_meta;
mod kv_scans;
mod list_databases;
mod list_offsets;
mod list_tables;
mod lookup;
mod metadata;
mod partitions;
mod produce_log;
mod put_kv;
mod table_exists;

pub use append_lane::{AppendLane, AppendTurn};

/// Runs `request` against `node` and returns its response or the error to
/// answer with.
pub async fn dispatch(
    node: &Arc<Node>,
    request: Request,
    api_version: i16,
) -> Result<Response, ApiError> {
    dispatch_in_turn(node, request, api_version, None).await
}

/// As [`dispatch`]; a ProduceLog or PutKv request with a `turn` appends in
/// its connection's arrival order (see [`AppendLane`]).
pub async fn dispatch_in_turn(
    node: &Arc<Node>,
    request: Request,
    api_version: i16,
    turn: Option<AppendTurn>,
) -> Result<Response, ApiError> {
    Ok(match request {
        Request::ApiVersions(r) => Response::ApiVersions(api_versions::handle(node, r)),
        Request::CreateDatabase(r) => Response::CreateDatabase(create_database::handle(node, r)?),
        Request::DropDatabase(r) => Response::DropDatabase(drop_database::handle(node, r).await?),
        Request::ListDatabases(r) => Response::ListDatabases(list_databases::handle(node, r)?),
        Request::DatabaseExists(r) => Response::DatabaseExists(database_exists::handle(node, r)?),
        Request::GetDatabaseInfo(r) => {
            Response::GetDatabaseInfo(get_database_info::handle(node, r)?)
        }
        Request::CreateTable(r) => Response::CreateTable(create_table::handle(node, r).await?),
        Request::DropTable(r) => Response::DropTable(drop_table::handle(node, r).await?),
        Request::GetTableInfo(r) => Response::GetTableInfo(get_table_info::handle(node, r)?),
        Request::ListTables(r) => Response::ListTables(list_tables::handle(node, r)?),
        Request::TableExists(r) => Response::TableExists(table_exists::handle(node, r)?),
        Request::GetTableSchema(r) => Response::GetTableSchema(get_table_schema::handle(node, r)?),
        Request::ListPartitionInfos(r) => Response::ListPartitionInfos(partitions::list(node, r)?),
        Request::CreatePartition(r) => {
            Response::CreatePartition(partitions::create(node, r).await?)
        }
        Request::DropPartition(r) => Response::DropPartition(partitions::drop(node, r).await?),
        Request::MetaData(r) => Response::MetaData(metadata::handle(node, r)?),
        Request::InitWriter(r) => Response::InitWriter(init_writer::handle(node, r)?),
        Request::GetFileSystemSecurityToken(r) => {
            Response::GetFileSystemSecurityToken(get_fs_security_token::handle(node, r)?)
        }
        Request::ProduceLog(r) => Response::ProduceLog(produce_log::handle(node, r, turn).await?),
        Request::FetchLog(r) => Response::FetchLog(fetch_log::handle(node, r).await?),
        Request::ListOffsets(r) => Response::ListOffsets(list_offsets::handle(node, r).await?),
        Request::PutKv(r) => Response::PutKv(put_kv::handle(node, r, api_version, turn).await?),
        Request::Lookup(r) => Response::Lookup(lookup::lookup(node, r).await?),
        Request::PrefixLookup(r) => Response::PrefixLookup(lookup::prefix_lookup(node, r).await?),
        Request::LimitScan(r) => Response::LimitScan(kv_scans::limit_scan(node, r).await),
        Request::ScanKv(r) => Response::ScanKv(kv_scans::scan_kv(node, r).await),
        Request::GetLatestKvSnapshots(r) => {
            Response::GetLatestKvSnapshots(kv_meta::latest_kv_snapshots(node, r)?)
        }
        Request::GetTableStats(r) => Response::GetTableStats(kv_meta::table_stats(node, r)?),
        Request::AlterTable(r) => Response::AlterTable(alter_table::handle(node, r).await?),
    })
}

/// Runs a handler's blocking part (durable metadata and tablet creation:
/// fsyncs) on the blocking pool, so no runtime thread waits for the disk.
/// It runs to the end even if the request's connection goes away, so a
/// create is never cut off between its catalog entry and its tablets. A
/// panic in `work` answers the request with `UnknownServerError`.
async fn on_blocking_pool<T, F>(node: &Arc<Node>, work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Node) -> Result<T, ApiError> + Send + 'static,
{
    let node = Arc::clone(node);
    tokio::task::spawn_blocking(move || work(&node))
        .await
        .unwrap_or_else(|e| {
            Err(ApiError::new(
                ErrorCode::UnknownServerError,
                format!("the request's handler failed: {e}"),
            ))
        })
}

/// The table path of a request in the catalog's terms.
fn table_path(p: &pb::PbTablePath) -> Result<TablePath, ApiError> {
    Ok(TablePath {
        database: p.database_name.clone(),
        table: p.table_name.clone(),
    })
}

/// The protobuf form of a table path.
fn pb_table_path(path: &TablePath) -> pb::PbTablePath {
    pb::PbTablePath {
        database_name: path.database.clone(),
        table_name: path.table.clone(),
    }
}

/// The replica of a requested bucket (the data path's one lookup). When
/// the bucket names a partition that does not exist (never created, dropped,
/// or of another table) the error is `UnknownTableOrBucketException`, as a
/// Fluss tablet server answers it: the official clients refresh their
/// metadata on it, and the Java client's fetcher fails the scan on any
/// other code (`PartitionNotExists` included). The message says which.
fn replica_of(node: &Node, bucket: TableBucket) -> Result<Arc<Replica>, ApiError> {
    node.replicas
        .replica(bucket)
        .map_err(|e| match bucket.partition_id {
            Some(p)
                if node
                    .catalog
                    .partition_by_id(p)
                    .is_none_or(|info| info.table_id != bucket.table_id) =>
            {
                ApiError::new(
                    ErrorCode::UnknownTableOrBucketException,
                    format!(
                        "Unknown table or bucket: {bucket} (the partition id '{p}' does not exist in table id {}).",
                        bucket.table_id
                    ),
                )
            }
            _ => e,
        })
}
