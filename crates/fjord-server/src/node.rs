//! The state one server process shares between its connections: config,
//! catalog (coordinator role), replica manager (tablet-server role), the
//! address it advertises, and the shutdown signal.

use std::sync::Arc;

use tokio::sync::watch;

use crate::config::ServerConfig;
use crate::kv::scanners::KvScanners;
use crate::meta::auto_partition::Clock;
use crate::meta::catalog::Catalog;
use crate::metrics::Metrics;
use crate::replica::ReplicaManager;

/// Everything a request handler may touch. Built once at start-up; shared
/// read-only (`Arc<Node>`) by every connection task.
pub struct Node {
    /// The parsed configuration.
    pub config: ServerConfig,
    /// Databases, tables and ids (the coordinator role's state).
    pub catalog: Catalog,
    /// Log tablets by table bucket (the tablet-server role's state).
    pub replicas: ReplicaManager,
    /// Open ScanKv sessions.
    pub kv_scanners: KvScanners,
    /// Host clients should connect to, announced in MetaData responses.
    pub advertised_host: String,
    /// Port clients should connect to, announced in MetaData responses.
    pub advertised_port: i32,
    /// The ApiVersions answer: every served key and version (fjord-proto's
    /// table, the same one its request decoder enforces), built once.
    pub api_versions: Vec<fjord_proto::messages::PbApiVersion>,
    /// Request and byte counters for the Prometheus endpoint.
    pub metrics: Arc<Metrics>,
    /// The coordinator's clock for auto-partitioning (injected by tests).
    pub clock: Arc<dyn Clock>,
    /// Becomes `true` when the server begins shutting down; long-polls and
    /// connection readers watch it.
    pub shutdown: watch::Receiver<bool>,
}

impl Node {
    /// This node's id (it is both the coordinator and the only tablet server).
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// Has shutdown begun?
    pub fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}
