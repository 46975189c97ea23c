//! One Fjord table as a DataFusion [`TableProvider`]: what a query asks of
//! it (columns, filters, a limit) becomes the cheapest reads the native
//! client can do.
//!
//! - **Log tables** are read from each bucket's earliest offset to the
//!   high watermark it has when the query is planned: one cut per table
//!   per query, so a query over a table that keeps growing ends and sees
//!   one consistent prefix of every bucket ([`crate::log_scan`]).
//! - **Primary-key tables** are read as their current rows through the KV
//!   scans (ScanKv, or LimitScan under a LIMIT); an equality on every
//!   primary-key column is one point lookup ([`crate::kv_scan`]).
//! - Pushed down: the projection (FetchLog projection; KV rows are
//!   projected after decoding), LIMIT, partition pruning on filters over
//!   partition keys ([`crate::pruning`]) and, for log tables, per-batch
//!   statistics.
//!
//! Filters are all reported `Inexact`: DataFusion keeps its own filter
//! above the scan, so pruning only has to be safe, never exact.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow_schema::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use fjord_client::admin::PartitionInfo;
use fjord_client::{FlussClient, LookupConfig, Lookuper, TableInfo};
use fjord_format::arrow_schema::to_arrow_schema;

use crate::error::client_err;
use crate::{insert, kv_scan, log_scan, pruning};

/// Default `sql.scan.kv-batch-size`: bytes of rows one ScanKv answer
/// carries (Fluss's `client.scanner.kv.fetch.max-bytes` default).
pub const KV_BATCH_BYTES_DEFAULT: i32 = 4 << 20;

/// What every table of one engine shares: the client, the lookupers built
/// so far (one per table and schema, reused by every point query), and
/// counters of what the scans did (for tests and EXPLAIN ANALYZE-like
/// checks).
pub(crate) struct TableServices {
    pub client: FlussClient,
    lookupers: Mutex<HashMap<(i64, i32), Lookuper>>,
    pub stats: ScanStats,
}

impl std::fmt::Debug for TableServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableServices").finish_non_exhaustive()
    }
}

/// Counters of the reads queries made, per engine (relaxed atomics,
/// counted per request or batch).
#[derive(Debug, Default)]
pub struct ScanStats {
    /// Point lookups sent (one per key looked up).
    pub lookups: std::sync::atomic::AtomicU64,
    /// Log batches received.
    pub log_batches_read: std::sync::atomic::AtomicU64,
    /// Log batches the server left out by their statistics (a FetchLog
    /// filter), counted as runs of consecutive batches: the client sees
    /// only the offsets skipped, so this is a lower bound on batches.
    pub log_batches_skipped: std::sync::atomic::AtomicU64,
    /// Log records in the batches the server left out.
    pub log_records_skipped: std::sync::atomic::AtomicU64,
    /// Partitions left out by partition pruning.
    pub partitions_pruned: std::sync::atomic::AtomicU64,
    /// KV scan answers (ScanKv or LimitScan) received.
    pub kv_scans: std::sync::atomic::AtomicU64,
}

impl ScanStats {
    pub(crate) fn add(counter: &std::sync::atomic::AtomicU64, n: u64) {
        counter.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// A snapshot of one counter.
    pub fn get(counter: &std::sync::atomic::AtomicU64) -> u64 {
        counter.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl TableServices {
    pub(crate) fn new(client: FlussClient) -> Self {
        Self {
            client,
            lookupers: Mutex::new(HashMap::new()),
            stats: ScanStats::default(),
        }
    }

    /// The lookuper of `table` (its current schema), built once.
    pub(crate) async fn lookuper(&self, table: &TableInfo) -> DfResult<Lookuper> {
        let key = (table.table_id, table.schema_id);
        if let Some(l) = self
            .lookupers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(l.clone());
        }
        let lookuper = self
            .client
            .lookuper(&table.path, LookupConfig::default())
            .await
            .map_err(client_err)?;
        let mut map = self.lookupers.lock().unwrap_or_else(|e| e.into_inner());
        // Tables dropped or altered leave their lookupers behind: bound the map.
        if map.len() >= LOOKUPERS_MAX {
            map.clear();
        }
        Ok(map.entry(key).or_insert(lookuper).clone())
    }
}

/// Lookupers kept per engine before the cache is emptied (each holds a
/// batcher task and per-table encoders).
const LOOKUPERS_MAX: usize = 256;

/// One table of the catalog, as it was when the query was planned.
#[derive(Debug)]
pub struct FjordTable {
    services: Arc<TableServices>,
    info: TableInfo,
    schema: SchemaRef,
}

impl FjordTable {
    pub(crate) fn new(services: Arc<TableServices>, info: TableInfo) -> DfResult<Self> {
        let schema = to_arrow_schema(info.descriptor.schema());
        Ok(Self {
            services,
            info,
            schema,
        })
    }

    /// The table's info (id, schema, options).
    pub fn info(&self) -> &TableInfo {
        &self.info
    }

    /// The partitions a scan has to read: all of a non-partitioned table
    /// (`[None]`), the partitions `filters` leave of a partitioned one.
    async fn partitions(
        &self,
        state: &dyn Session,
        filters: &[Expr],
    ) -> DfResult<Vec<Option<PartitionInfo>>> {
        if !self.info.is_partitioned() {
            return Ok(vec![None]);
        }
        let all = self
            .services
            .client
            .admin()
            .list_partitions(&self.info.path, None)
            .await
            .map_err(client_err)?;
        let count = all.len();
        let kept = pruning::prune_partitions(state, &self.schema, &self.info, filters, all)?;
        ScanStats::add(
            &self.services.stats.partitions_pruned,
            (count - kept.len()) as u64,
        );
        Ok(kept.into_iter().map(Some).collect())
    }
}

#[async_trait]
impl TableProvider for FjordTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Every filter is used where it can prune (partitions, batches,
        // lookups) and re-applied by DataFusion above the scan.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let request = ScanRequest {
            services: Arc::clone(&self.services),
            table: self.info.clone(),
            table_schema: self.schema.clone(),
            projection: projection.cloned(),
            limit,
            target_partitions: state.config().target_partitions().max(1),
        };
        if self.info.descriptor.has_primary_key() {
            if let Some(keys) = pruning::primary_key_equalities(&self.info, filters) {
                return kv_scan::lookup_plan(request, keys);
            }
            let partitions = self.partitions(state, filters).await?;
            return kv_scan::scan_plan(request, partitions);
        }
        let partitions = self.partitions(state, filters).await?;
        let filter = pruning::statistics_filter(&self.info, filters);
        log_scan::scan_plan(request, partitions, filter).await
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        insert::plan(
            Arc::clone(&self.services),
            self.info.clone(),
            input,
            insert_op,
        )
    }
}

/// What a scan was asked for, handed to the log or KV scan planner.
pub(crate) struct ScanRequest {
    pub services: Arc<TableServices>,
    pub table: TableInfo,
    pub table_schema: SchemaRef,
    /// Column indexes of the table, in output order; `None` for all.
    pub projection: Option<Vec<usize>>,
    pub limit: Option<usize>,
    pub target_partitions: usize,
}

impl ScanRequest {
    /// The schema of the batches the scan returns.
    pub fn output_schema(&self) -> DfResult<SchemaRef> {
        Ok(match &self.projection {
            None => self.table_schema.clone(),
            Some(p) => Arc::new(self.table_schema.project(p)?),
        })
    }
}
