//! Cluster metadata: which server leads each bucket of a table. Learned from
//! one MetaData request when a writer or scanner is created (and again when
//! a request fails with an error that calls for a refresh), never per record.

use std::collections::HashMap;

use fjord_proto::messages as pb;
use fjord_proto::ApiKey;

use crate::admin::{TableInfo, TablePath};
use crate::connection::ServerConnection;
use crate::error::{ClientError, Result};

/// The leaders of one table's buckets, as connections.
#[derive(Clone)]
pub struct TableRoute {
    leaders: Vec<ServerConnection>,
}

impl TableRoute {
    /// Asks `bootstrap` for the table's bucket leaders and connects to each
    /// distinct leader once.
    pub async fn resolve(bootstrap: &ServerConnection, table: &TableInfo) -> Result<TableRoute> {
        let request = pb::MetadataRequest {
            table_path: vec![table.path.to_pb()],
            partitions_path: Vec::new(),
            partitions_id: Vec::new(),
        };
        let response: pb::MetadataResponse = bootstrap.request(ApiKey::MetaData, &request).await?;
        let nodes: HashMap<i32, String> = response
            .tablet_servers
            .iter()
            .map(|n| (n.node_id, format!("{}:{}", n.host, n.port)))
            .collect();
        let metadata = response
            .table_metadata
            .iter()
            .find(|t| t.table_id == table.table_id)
            .ok_or_else(|| missing(&table.path, "the table"))?;
        let bucket_count = table.bucket_count();
        let mut by_addr: HashMap<String, ServerConnection> = HashMap::new();
        let mut leaders = Vec::with_capacity(bucket_count as usize);
        for bucket in 0..bucket_count {
            let leader = metadata
                .bucket_metadata
                .iter()
                .find(|b| b.bucket_id == bucket)
                .and_then(|b| b.leader_id)
                .ok_or_else(|| missing(&table.path, "a bucket leader"))?;
            let addr = nodes
                .get(&leader)
                .ok_or_else(|| missing(&table.path, "the leader's address"))?;
            let connection = match by_addr.get(addr) {
                Some(c) => c.clone(),
                // The bootstrap server is usually the leader on one node.
                None if addr == bootstrap.addr() => bootstrap.clone(),
                None => ServerConnection::connect(addr).await?,
            };
            by_addr.insert(addr.clone(), connection.clone());
            leaders.push(connection);
        }
        Ok(TableRoute { leaders })
    }

    /// The connection to the leader of `bucket`.
    pub fn leader(&self, bucket: i32) -> &ServerConnection {
        &self.leaders[bucket as usize]
    }

    /// Number of buckets routed.
    pub fn bucket_count(&self) -> i32 {
        self.leaders.len() as i32
    }
}

fn missing(path: &TablePath, what: &str) -> ClientError {
    ClientError::Protocol {
        api: ApiKey::MetaData.name(),
        message: format!("MetaData response for {path} lacks {what}"),
    }
}
