//! Scans of log tables: every bucket (of every partition left after
//! pruning) from its earliest offset to the high watermark it had when the
//! query was planned, through the native [`LogScanner`] with the query's
//! columns pushed to the server as a FetchLog projection and, for tables
//! with `table.statistics.columns`, the query's filters as a FetchLog
//! filter ([`crate::pruning::statistics_filter`]): the server leaves out
//! batches whose statistics rule them out.
//!
//! The buckets are dealt round-robin to at most `target_partitions`
//! DataFusion partitions; each partition is one scanner fed by a task that
//! keeps one fetch ahead of the consumer (a channel of
//! [`PREFETCH_BATCHES`]), and stops when the consumer goes away (a LIMIT
//! reached, the query cancelled).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::SchemaRef;
use datafusion::error::Result as DfResult;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use fjord_client::admin::PartitionInfo;
use fjord_client::scanner::{ScanBucket, ScanFilter};
use fjord_client::{
    Admin, LogScanner, OffsetReset, OffsetSpec, ScannerConfig, TableInfo, TableRoute,
};
use fjord_format::types::TypeKind;
use tokio::sync::mpsc;

use crate::error::client_err;
use crate::table::{ScanRequest, ScanStats, TableServices};

/// Batches a partition's fetch task may have decoded ahead of its consumer.
pub const PREFETCH_BATCHES: usize = 4;

/// One bucket's part of the cut: `[start, end)`.
#[derive(Clone)]
pub(crate) struct BucketRange {
    pub partition_id: Option<i64>,
    pub route: TableRoute,
    pub bucket: i32,
    pub start: i64,
    pub end: i64,
}

/// The plan of a log-table scan: the cut is taken here.
pub(crate) async fn scan_plan(
    req: ScanRequest,
    partitions: Vec<Option<PartitionInfo>>,
    filter: Option<ScanFilter>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let schema = req.output_schema()?;
    let client = &req.services.client;
    let table = &req.table;
    let mut ranges = Vec::new();
    for partition in &partitions {
        let partition_id = partition.as_ref().map(|p| p.partition_id);
        let route = match partition_id {
            None => client.table_route(table).await,
            Some(id) => client.partition_route(table, id).await,
        }
        .map_err(client_err)?;
        let buckets: Vec<i32> = (0..route.bucket_count()).collect();
        let starts = offsets(table, &route, partition_id, &buckets, OffsetSpec::Earliest).await?;
        let ends = offsets(table, &route, partition_id, &buckets, OffsetSpec::Latest).await?;
        for ((&bucket, start), end) in buckets.iter().zip(starts).zip(ends) {
            if start < end {
                ranges.push(BucketRange {
                    partition_id,
                    route: route.clone(),
                    bucket,
                    start,
                    end,
                });
            }
        }
    }
    let fetch_projection = fetch_projection(&req);
    let groups = req.target_partitions.min(ranges.len()).max(1);
    let mut parts: Vec<Vec<BucketRange>> = vec![Vec::new(); groups];
    for (i, range) in ranges.into_iter().enumerate() {
        parts[i % groups].push(range);
    }
    let streams = parts
        .into_iter()
        .map(|ranges| {
            Arc::new(LogPartition {
                services: Arc::clone(&req.services),
                table: req.table.clone(),
                schema: schema.clone(),
                ranges,
                fetch_projection: fetch_projection.clone(),
                filter: filter.clone(),
                limit: req.limit,
            }) as Arc<dyn PartitionStream>
        })
        .collect();
    Ok(Arc::new(StreamingTableExec::try_new(
        schema,
        streams,
        None,
        [],
        false,
        req.limit,
    )?))
}

/// The columns to fetch: the projection, or for a projection of no column
/// (`count(*)`) the narrowest fixed-width column, since a FetchLog
/// projection names at least one.
fn fetch_projection(req: &ScanRequest) -> FetchColumns {
    match &req.projection {
        None => FetchColumns::All,
        Some(p) if !p.is_empty() => FetchColumns::Some(p.clone()),
        Some(_) => {
            let columns = req.table.descriptor.schema().columns();
            let width = |kind: &TypeKind| match kind {
                TypeKind::Boolean | TypeKind::TinyInt => 1,
                TypeKind::SmallInt => 2,
                TypeKind::Int | TypeKind::Float | TypeKind::Date => 4,
                TypeKind::BigInt | TypeKind::Double => 8,
                _ => 16,
            };
            let narrowest = (0..columns.len())
                .min_by_key(|&i| width(columns[i].data_type.kind()))
                .unwrap_or(0);
            FetchColumns::RowsOnly(narrowest)
        }
    }
}

#[derive(Clone, Debug)]
enum FetchColumns {
    All,
    Some(Vec<usize>),
    /// Only the row count is wanted; this column is fetched to count.
    RowsOnly(usize),
}

/// The offsets `spec` names for `buckets`, asking each bucket's leader.
async fn offsets(
    table: &TableInfo,
    route: &TableRoute,
    partition_id: Option<i64>,
    buckets: &[i32],
    spec: OffsetSpec,
) -> DfResult<Vec<i64>> {
    // Group buckets by leader: one ListOffsets per leader.
    let mut by_leader: Vec<(String, Vec<i32>)> = Vec::new();
    for &b in buckets {
        let addr = route.leader(b).addr();
        match by_leader.iter_mut().find(|(a, _)| a == addr) {
            Some((_, list)) => list.push(b),
            None => by_leader.push((addr.to_owned(), vec![b])),
        }
    }
    let mut result: HashMap<i32, i64> = HashMap::with_capacity(buckets.len());
    for (_, list) in by_leader {
        let admin = Admin::new(route.leader(list[0]).clone());
        let answer = match partition_id {
            None => admin.list_offsets(table, &list, spec).await,
            Some(id) => admin.list_partition_offsets(table, id, &list, spec).await,
        }
        .map_err(client_err)?;
        result.extend(list.into_iter().zip(answer));
    }
    Ok(buckets.iter().map(|b| result[b]).collect())
}

/// One DataFusion partition of a log scan.
struct LogPartition {
    services: Arc<TableServices>,
    table: TableInfo,
    schema: SchemaRef,
    ranges: Vec<BucketRange>,
    fetch_projection: FetchColumns,
    filter: Option<ScanFilter>,
    limit: Option<usize>,
}

impl std::fmt::Debug for LogPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FjordLogScan({}, {} buckets)",
            self.table.path,
            self.ranges.len()
        )
    }
}

impl PartitionStream for LogPartition {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let (tx, rx) = mpsc::channel(PREFETCH_BATCHES);
        let task = LogTask {
            services: Arc::clone(&self.services),
            table: self.table.clone(),
            schema: self.schema.clone(),
            ranges: self.ranges.clone(),
            fetch_projection: self.fetch_projection.clone(),
            filter: self.filter.clone(),
            limit: self.limit,
        };
        tokio::spawn(async move {
            if let Err(e) = task.run(&tx).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        channel_stream(self.schema.clone(), rx)
    }
}

/// A stream of what a fetch task sends.
pub(crate) fn channel_stream(
    schema: SchemaRef,
    rx: mpsc::Receiver<DfResult<RecordBatch>>,
) -> SendableRecordBatchStream {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

struct LogTask {
    services: Arc<TableServices>,
    table: TableInfo,
    schema: SchemaRef,
    ranges: Vec<BucketRange>,
    fetch_projection: FetchColumns,
    filter: Option<ScanFilter>,
    limit: Option<usize>,
}

impl LogTask {
    async fn run(self, tx: &mpsc::Sender<DfResult<RecordBatch>>) -> DfResult<()> {
        let Some(first) = self.ranges.first() else {
            return Ok(());
        };
        let mut config = ScannerConfig {
            // Retention may remove records between the cut and the read.
            offset_reset: OffsetReset::Earliest,
            filter: self.filter.clone(),
            ..ScannerConfig::default()
        };
        config.projection = match &self.fetch_projection {
            FetchColumns::All => None,
            FetchColumns::Some(p) => Some(p.clone()),
            FetchColumns::RowsOnly(c) => Some(vec![*c]),
        };
        let client = self.services.client.clone();
        let mut scanner = if self.table.is_partitioned() {
            LogScanner::new_partitioned(self.table.clone(), config)
        } else {
            LogScanner::new(self.table.clone(), first.route.clone(), config)
        }
        .map_err(client_err)?
        .with_client(client);
        let mut ends = HashMap::with_capacity(self.ranges.len());
        for r in &self.ranges {
            match r.partition_id {
                None => scanner.subscribe(r.bucket, r.start),
                Some(id) => scanner.subscribe_partition(id, r.route.clone(), r.bucket, r.start),
            }
            .map_err(client_err)?;
            ends.insert(
                ScanBucket {
                    partition_id: r.partition_id,
                    bucket: r.bucket,
                },
                r.end,
            );
        }
        let rows_only = matches!(self.fetch_projection, FetchColumns::RowsOnly(_));
        let stats = &self.services.stats;
        let mut remaining = self.limit.unwrap_or(usize::MAX);
        let mut skipped = (0u64, 0u64);
        let mut done = Vec::new();
        while remaining > 0 && scanner.subscriptions().next().is_some() {
            let batches = scanner.poll().await.map_err(client_err)?;
            ScanStats::add(&stats.log_batches_read, batches.len() as u64);
            // What the server's filter left out, counted as it happens (the
            // loop may end early when the consumer goes away).
            let filtered = scanner.filtered();
            ScanStats::add(&stats.log_batches_skipped, filtered.0 - skipped.0);
            ScanStats::add(&stats.log_records_skipped, filtered.1 - skipped.1);
            skipped = filtered;
            for scanned in batches {
                let key = ScanBucket {
                    partition_id: scanned.partition_id,
                    bucket: scanned.bucket,
                };
                let end = ends.get(&key).copied().unwrap_or(i64::MAX);
                if scanned.base_offset >= end {
                    continue;
                }
                let mut records = scanned.records;
                let in_cut = (end - scanned.base_offset).min(records.num_rows() as i64) as usize;
                let rows = in_cut.min(remaining);
                if rows < records.num_rows() {
                    records = records.slice(0, rows);
                }
                if rows == 0 {
                    continue;
                }
                remaining -= rows;
                let out = if rows_only {
                    RecordBatch::try_new_with_options(
                        self.schema.clone(),
                        vec![],
                        &RecordBatchOptions::new().with_row_count(Some(rows)),
                    )?
                } else {
                    RecordBatch::try_new(self.schema.clone(), records.columns().to_vec())?
                };
                if tx.send(Ok(out)).await.is_err() {
                    // The consumer is gone (LIMIT reached, query cancelled).
                    return Ok(());
                }
                if remaining == 0 {
                    break;
                }
            }
            done.clear();
            done.extend(scanner.subscriptions().filter(|&key| {
                let end = ends.get(&key).copied().unwrap_or(i64::MAX);
                scanner.position(key).is_some_and(|p| p >= end)
            }));
            for &key in &done {
                scanner.unsubscribe(key);
            }
        }
        Ok(())
    }
}
