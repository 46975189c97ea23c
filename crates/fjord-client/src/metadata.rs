//! Cluster metadata: which server leads each bucket of a table (or of one
//! partition of a table). Learned from one MetaData request when a writer or
//! scanner is created, and again when a request fails with an error that
//! calls for a refresh (not leader, unknown bucket, connection lost) — never
//! per record.

use std::collections::HashMap;

use fjord_proto::messages as pb;
use fjord_proto::ApiKey;

use crate::admin::{TableInfo, TablePath};
use crate::connection::{ConnectionPool, ServerConnection};
use crate::error::{ClientError, Result};

/// The leaders of one table's buckets (or of one partition's buckets), as
/// connections.
#[derive(Clone)]
pub struct TableRoute {
    partition_id: Option<i64>,
    leaders: Vec<ServerConnection>,
}

impl TableRoute {
    /// Asks `bootstrap` for the table's bucket leaders and connects to each
    /// distinct leader once.
    pub async fn resolve(bootstrap: &ServerConnection, table: &TableInfo) -> Result<TableRoute> {
        let pool = ConnectionPool::default();
        pool.insert(bootstrap.clone());
        Self::fetch(&pool, bootstrap, table, None).await
    }

    /// A route with no buckets: a placeholder until the first real one.
    pub(crate) fn empty() -> TableRoute {
        TableRoute {
            partition_id: None,
            leaders: Vec::new(),
        }
    }

    /// Asks `coordinator` for the leaders of `table` (of its partition
    /// `partition_id` when given), connecting through `pool`.
    pub(crate) async fn fetch(
        pool: &ConnectionPool,
        coordinator: &ServerConnection,
        table: &TableInfo,
        partition_id: Option<i64>,
    ) -> Result<TableRoute> {
        let request = pb::MetadataRequest {
            table_path: if partition_id.is_none() {
                vec![table.path.to_pb()]
            } else {
                Vec::new()
            },
            partitions_path: Vec::new(),
            partitions_id: partition_id.into_iter().collect(),
        };
        let response: pb::MetadataResponse =
            coordinator.request(ApiKey::MetaData, &request).await?;
        let nodes: HashMap<i32, (&str, i32)> = response
            .tablet_servers
            .iter()
            .map(|n| (n.node_id, (n.host.as_str(), n.port)))
            .collect();
        let (buckets, bucket_count) = match partition_id {
            None => {
                let metadata = response
                    .table_metadata
                    .iter()
                    .find(|t| t.table_id == table.table_id)
                    .ok_or_else(|| missing(&table.path, partition_id, "the table"))?;
                (&metadata.bucket_metadata, table.bucket_count())
            }
            Some(id) => {
                let metadata = response
                    .partition_metadata
                    .iter()
                    .find(|p| p.partition_id == id && p.table_id == table.table_id)
                    .ok_or_else(|| missing(&table.path, partition_id, "the partition"))?;
                let count = metadata
                    .bucket_count
                    .unwrap_or_else(|| table.bucket_count());
                (&metadata.bucket_metadata, count)
            }
        };
        let mut leaders = Vec::with_capacity(bucket_count.max(0) as usize);
        for bucket in 0..bucket_count {
            let leader = buckets
                .iter()
                .find(|b| b.bucket_id == bucket)
                .and_then(|b| b.leader_id)
                .ok_or_else(|| missing(&table.path, partition_id, "a bucket leader"))?;
            let (host, port) = nodes
                .get(&leader)
                .ok_or_else(|| missing(&table.path, partition_id, "the leader's address"))?;
            let addr = format!("{host}:{port}");
            leaders.push(pool.get(&addr).await?);
        }
        Ok(TableRoute {
            partition_id,
            leaders,
        })
    }

    /// The connection to the leader of `bucket`.
    ///
    /// # Panics
    /// When `bucket` is not below [`TableRoute::bucket_count`]; callers check
    /// buckets once when subscribing or assigning.
    pub fn leader(&self, bucket: i32) -> &ServerConnection {
        &self.leaders[bucket as usize]
    }

    /// Number of buckets routed.
    pub fn bucket_count(&self) -> i32 {
        self.leaders.len() as i32
    }

    /// The partition this route is for; `None` for a non-partitioned table.
    pub fn partition_id(&self) -> Option<i64> {
        self.partition_id
    }

    /// Whether any leader connection has died (the route needs refreshing).
    pub fn is_stale(&self) -> bool {
        self.leaders.iter().any(ServerConnection::is_closed)
    }
}

fn missing(path: &TablePath, partition_id: Option<i64>, what: &str) -> ClientError {
    let message = match partition_id {
        None => format!("MetaData response for {path} lacks {what}"),
        Some(id) => format!("MetaData response for {path} partition {id} lacks {what}"),
    };
    ClientError::Protocol {
        api: ApiKey::MetaData.name(),
        message,
    }
}
