//! [`FlussClient`]: the entry point. Bootstraps from a list of servers
//! (each tried in turn), keeps one multiplexed connection per server, and
//! caches metadata (table info, bucket routes) until an error calls for a
//! refresh. Cheap to clone; clones share connections and caches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::admin::{Admin, TableInfo, TablePath};
use crate::connection::{ConnectionPool, ServerConnection};
use crate::error::{ClientError, Result};
use crate::metadata::TableRoute;
use crate::writer::{idempotence, AppendWriter, WriterConfig};

/// One client of a Fluss-protocol cluster.
#[derive(Clone)]
pub struct FlussClient {
    inner: Arc<Inner>,
}

struct Inner {
    bootstrap: Vec<String>,
    pool: ConnectionPool,
    /// The server answering catalog and metadata requests (the first
    /// bootstrap server that answered).
    coordinator: Mutex<ServerConnection>,
    tables: Mutex<HashMap<TablePath, TableInfo>>,
    routes: Mutex<HashMap<(i64, Option<i64>), TableRoute>>,
}

impl FlussClient {
    /// Connects to the first of `bootstrap` (`host:port` each) that accepts;
    /// fails naming every address tried when none does.
    pub async fn connect(bootstrap: &[String]) -> Result<Self> {
        if bootstrap.is_empty() {
            return Err(ClientError::Invalid(
                "no bootstrap server given (expected host:port)".to_owned(),
            ));
        }
        let pool = ConnectionPool::default();
        let coordinator = connect_any(&pool, bootstrap).await?;
        Ok(Self {
            inner: Arc::new(Inner {
                bootstrap: bootstrap.to_vec(),
                pool,
                coordinator: Mutex::new(coordinator),
                tables: Mutex::new(HashMap::new()),
                routes: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The bootstrap servers given to [`FlussClient::connect`].
    pub fn bootstrap(&self) -> &[String] {
        &self.inner.bootstrap
    }

    /// Catalog operations over the current coordinator connection.
    pub fn admin(&self) -> Admin {
        Admin::new(self.current_coordinator())
    }

    fn current_coordinator(&self) -> ServerConnection {
        self.inner
            .coordinator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The live coordinator connection: the current one, or the next
    /// bootstrap server that accepts when it has died.
    pub async fn coordinator(&self) -> Result<ServerConnection> {
        let current = self.current_coordinator();
        if !current.is_closed() {
            return Ok(current);
        }
        let fresh = connect_any(&self.inner.pool, &self.inner.bootstrap).await?;
        *self
            .inner
            .coordinator
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        Ok(fresh)
    }

    /// The table's id, schema id and descriptor; cached after the first call
    /// (see [`FlussClient::refresh_table_info`]).
    pub async fn table_info(&self, path: &TablePath) -> Result<TableInfo> {
        if let Some(info) = self
            .inner
            .tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
        {
            return Ok(info.clone());
        }
        self.refresh_table_info(path).await
    }

    /// Asks the coordinator for the table's info again and caches it.
    pub async fn refresh_table_info(&self, path: &TablePath) -> Result<TableInfo> {
        let info = Admin::new(self.coordinator().await?)
            .table_info(path)
            .await?;
        self.inner
            .tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.clone(), info.clone());
        Ok(info)
    }

    /// Alters the table ([`Admin::alter_table`]) and refreshes the cached
    /// table info, so writers, lookupers and scanners created afterwards by
    /// this client use the new schema id and columns. Ones created before
    /// keep the schema they were built with (the server reads each batch
    /// with its own schema id).
    pub async fn alter_table(
        &self,
        path: &TablePath,
        changes: &[crate::admin::TableChange],
        ignore_if_not_exists: bool,
    ) -> Result<()> {
        let altered = Admin::new(self.coordinator().await?)
            .alter_table(path, changes, ignore_if_not_exists)
            .await;
        // Dropped even on failure: the table may have changed or vanished.
        self.inner
            .tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(path);
        altered
    }

    /// The bucket leaders of a non-partitioned table (cached while every
    /// leader connection is alive).
    pub async fn table_route(&self, table: &TableInfo) -> Result<TableRoute> {
        self.route(table, None).await
    }

    /// The bucket leaders of one partition of a partitioned table.
    pub async fn partition_route(
        &self,
        table: &TableInfo,
        partition_id: i64,
    ) -> Result<TableRoute> {
        self.route(table, Some(partition_id)).await
    }

    async fn route(&self, table: &TableInfo, partition_id: Option<i64>) -> Result<TableRoute> {
        let key = (table.table_id, partition_id);
        if let Some(route) = self
            .inner
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .filter(|r| !r.is_stale())
        {
            return Ok(route.clone());
        }
        self.refresh_route(table, partition_id).await
    }

    /// Asks for the leaders again (after NotLeaderOrFollower, an unknown
    /// bucket or a lost connection) and caches the answer.
    pub async fn refresh_route(
        &self,
        table: &TableInfo,
        partition_id: Option<i64>,
    ) -> Result<TableRoute> {
        let coordinator = self.coordinator().await?;
        let route = TableRoute::fetch(&self.inner.pool, &coordinator, table, partition_id).await?;
        self.inner
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((table.table_id, partition_id), route.clone());
        Ok(route)
    }

    /// Asks the coordinator for an idempotent writer id for `path`.
    pub(crate) async fn init_writer(&self, path: &TablePath) -> Result<i64> {
        idempotence::init_writer(&self.coordinator().await?, path).await
    }

    /// A writer appending to the log table at `path` with `config`. Builds
    /// everything per table once (schema, builders, encoder, bucket
    /// assigner, partition router, writer id) and starts its background
    /// work on the current tokio runtime.
    pub async fn append_writer(
        &self,
        path: &TablePath,
        config: WriterConfig,
    ) -> Result<AppendWriter> {
        let table = self.table_info(path).await?;
        AppendWriter::create(self, table, config).await
    }
}

/// Connects to the first address that accepts. When none does the error
/// is the retriable [`ClientError::Unreachable`] (the servers may come
/// back), carrying the last address's error; each failure is logged.
async fn connect_any(pool: &ConnectionPool, bootstrap: &[String]) -> Result<ServerConnection> {
    // A malformed address is a configuration mistake, not a server that is
    // down: refused (not retriable) before anything is tried, as Fluss's
    // clients refuse an invalid `bootstrap.servers` entry.
    if let Some(bad) = bootstrap.iter().find(|addr| !is_host_port(addr)) {
        return Err(ClientError::Invalid(format!(
            "bootstrap server `{bad}` is not host:port"
        )));
    }
    let mut last = None;
    for addr in bootstrap {
        match pool.get(addr).await {
            Ok(connection) => return Ok(connection),
            Err(e) => {
                tracing::warn!(%addr, error = %e, "bootstrap server unavailable; trying the next");
                last = Some(e);
            }
        }
    }
    let Some(last) = last else {
        return Err(ClientError::Invalid(
            "no bootstrap server given (expected host:port)".to_owned(),
        ));
    };
    Err(ClientError::Unreachable {
        what: format!("no bootstrap server reachable ({})", bootstrap.join(", ")),
        tried: bootstrap.len(),
        servers: "bootstrap servers",
        last: Box::new(last),
    })
}

/// Whether `addr` has the `host:port` shape (an IPv6 host in brackets).
fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}
