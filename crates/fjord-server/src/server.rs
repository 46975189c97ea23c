//! Starting and stopping a server: open the data dir (metadata, tablets),
//! bind the listener, serve until a shutdown signal, then drain.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::info;

use crate::config::ServerConfig;
use crate::meta::auto_partition::{Clock, SystemClock};
use crate::meta::catalog::Catalog;
use crate::meta::store::FileMetaStore;
use crate::metrics::Metrics;
use crate::net;
use crate::node::Node;
use crate::replica::ReplicaManager;

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The metadata store could not be opened.
    #[error("cannot open the metadata in {0}")]
    Meta(#[from] crate::meta::store::MetaError),
    /// The catalog or a tablet could not be opened.
    #[error("cannot open the data dir: {0}")]
    Open(#[from] crate::error::ApiError),
}

/// A server bound to its address with its data dir open, not yet serving.
pub struct Server {
    node: Arc<Node>,
    listener: TcpListener,
    local_addr: SocketAddr,
    shutdown_tx: watch::Sender<bool>,
}

impl Server {
    /// Opens `config.data_dir` (metadata and every table's tablets) and binds
    /// `listen` (`host:port`; port 0 picks a free one).
    pub async fn bind(config: ServerConfig, listen: &str) -> Result<Self, StartError> {
        Self::bind_with_clock(config, listen, Arc::new(SystemClock)).await
    }

    /// [`Server::bind`] with the clock auto-partitioning reads, so tests
    /// can place the server at any instant.
    pub async fn bind_with_clock(
        config: ServerConfig,
        listen: &str,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StartError> {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: listen.to_owned(),
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: listen.to_owned(),
            source,
        })?;
        let store = Arc::new(FileMetaStore::open(&config.data_dir.join("meta"))?);
        let catalog = Catalog::open(store, config.catalog.clone())?;
        // As a Fluss coordinator on its first start: with no database at
        // all, create `fluss`, which the Flink catalog checks for.
        if catalog.list_databases()?.is_empty() {
            catalog.create_database(DEFAULT_DATABASE, None, true)?;
            tracing::info!(
                "created the default database '{DEFAULT_DATABASE}' because no database exists"
            );
        }
        let replicas = ReplicaManager::open(
            &config.data_dir,
            config.log.clone(),
            &config.kv,
            config.kv_write_buffer_bytes,
            config.kv_row_cache_bytes,
        )?
        .with_changelog_compaction(config.kv_changelog_compaction.clone());
        replicas.delete_orphans(|table_id, partition_id| match partition_id {
            None => catalog
                .table_by_id(table_id)
                .is_some_and(|t| !t.is_partitioned()),
            Some(p) => catalog
                .partition_by_id(p)
                .is_some_and(|p| p.table_id == table_id),
        })?;
        for table in catalog.all_tables() {
            replicas.create_table(&table)?;
            for partition in catalog.partitions(table.table_id) {
                replicas.create_partition(&table, partition.partition_id)?;
            }
        }
        let advertised_host = match &config.advertised_host {
            Some(h) => h.clone(),
            // A wildcard address is not something a client can dial.
            None if local_addr.ip().is_unspecified() => "127.0.0.1".to_owned(),
            None => local_addr.ip().to_string(),
        };
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let kv_scanners = crate::kv::scanners::KvScanners::new(config.kv_scanners.clone());
        let node = Arc::new(Node {
            kv_scanners,
            api_versions: fjord_proto::ApiKey::served_api_versions(),
            advertised_host,
            advertised_port: i32::from(local_addr.port()),
            config,
            catalog,
            replicas,
            metrics: Arc::new(Metrics::default()),
            clock,
            shutdown: shutdown_rx,
        });
        Ok(Self {
            node,
            listener,
            local_addr,
            shutdown_tx,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The shared node state (for the metrics endpoint and tests).
    pub fn node(&self) -> Arc<Node> {
        Arc::clone(&self.node)
    }

    /// Serves until `shutdown` completes, then stops accepting, lets
    /// in-flight requests finish, and closes the tablets.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Server {
            node,
            listener,
            shutdown_tx,
            ..
        } = self;
        let accept = tokio::spawn(net::accept_loop(Arc::clone(&node), listener));
        let maintenance = tokio::spawn(maintenance_loop(Arc::clone(&node)));
        let auto_partitions =
            tokio::spawn(crate::partitions::auto_partition_loop(Arc::clone(&node)));
        shutdown.await;
        info!("shutting down: finishing in-flight requests");
        let _ = shutdown_tx.send(true);
        let _ = accept.await;
        let _ = maintenance.await;
        let _ = auto_partitions.await;
        let closing = Arc::clone(&node);
        let _ = tokio::task::spawn_blocking(move || closing.replicas.close()).await;
        info!("shutdown complete");
    }
}

/// The database a server creates when it finds none (Fluss's
/// `CoordinatorServer.DEFAULT_DATABASE`): the Flink connector's catalog
/// refuses to start without it.
pub const DEFAULT_DATABASE: &str = "fluss";

/// How often the storage engine's periodic work runs (interval flushes,
/// retention); a second keeps `log.flush.interval-ms` honest without cost.
const MAINTENANCE_INTERVAL_MS: u64 = 1_000;
/// Checkpoint (recovery point + writer snapshot) every this many maintenance
/// rounds, bounding how much a crash recovery rescans.
const CHECKPOINT_EVERY_ROUNDS: u64 = 60;

/// Runs storage maintenance on the blocking pool until shutdown.
async fn maintenance_loop(node: Arc<Node>) {
    let mut shutdown = node.shutdown.clone();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(MAINTENANCE_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut round: u64 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        round += 1;
        let checkpoint = round == CHECKPOINT_EVERY_ROUNDS;
        if checkpoint {
            round = 0;
        }
        node.kv_scanners.expire();
        let n = Arc::clone(&node);
        let _ = tokio::task::spawn_blocking(move || n.replicas.run_maintenance(checkpoint)).await;
    }
}
