//! The log scanner: reads buckets of one log table (or of its partitions)
//! from chosen offsets and returns Arrow `RecordBatch`es, or rows over them,
//! with column projection pushed to the server.
//!
//! Layout:
//! - this file: subscriptions, the fetch loop, per-bucket error policy,
//!   offset resolution (earliest, latest, timestamp).
//! - `config`: [`ScannerConfig`] and Fluss's `client.scanner.log.*` options.
//! - `decode`: the records bytes of one bucket → Arrow batches.
//! - `rows`: a row view over a received batch implementing `InternalRow`.
//!
//! One FetchLog request per leader per poll covers every subscribed bucket
//! it leads (requests to different leaders run concurrently); the response's
//! record bytes are decoded batch by batch without copying them: Arrow
//! buffers slice the received frame where Arrow allows (an uncompressed
//! buffer that is 8-byte aligned in memory; Arrow's reader copies a
//! misaligned one, and compressed ones are decompressed into new buffers).
//! Everything derived from the table and the projection (the
//! Arrow schema of fetched batches, the column order to return) is computed
//! once in [`LogScanner::new`].
//!
//! Per-bucket errors follow the Fluss Java client (`AbstractLogFetchCollector`):
//! - leadership and availability errors (NOT_LEADER_OR_FOLLOWER,
//!   UNKNOWN_TABLE_OR_BUCKET, LEADER_NOT_AVAILABLE, storage errors, FENCED_LEADER_EPOCH,
//!   REQUEST_TIME_OUT, UNKNOWN_SERVER_ERROR) and lost connections skip the
//!   bucket for this poll and refresh the leaders before the next (through
//!   the [`FlussClient`] given to [`LogScanner::with_client`], for partitions
//!   too); after
//!   [`MAX_RETRIABLE_BUCKET_ERRORS`] such errors in a row the poll fails;
//! - LOG_OFFSET_OUT_OF_RANGE fails the poll with the offset, the log start and
//!   the high watermark, unless [`OffsetReset::Earliest`] is configured, in
//!   which case a bucket whose offset fell below the log start (retention
//!   removed the records) moves to the log start;
//! - any other error fails the poll.
//!
//! A poll that fails moves no position, so nothing is lost: the caller may
//! poll again after fixing the cause.

mod config;
mod decode;
#[cfg(test)]
mod policy_tests;
mod rows;

pub use config::{
    OffsetReset, ScanFilter, ScannerConfig, DEFAULT_FETCH_MAX_BYTES,
    DEFAULT_FETCH_MAX_BYTES_FOR_BUCKET, DEFAULT_FETCH_MAX_WAIT_MS, DEFAULT_FETCH_MIN_BYTES,
};
pub use fjord_format::arrow_log::ChangeType;
pub use rows::{ScanRow, ScanRowIter, ScanRows};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_schema::SchemaRef;
use fjord_format::arrow_schema::{to_arrow_schema, to_projected_arrow_schema};
use fjord_proto::messages as pb;
use fjord_proto::{ApiKey, ErrorCode};
use tokio::task::JoinSet;

use crate::admin::TableInfo;
use crate::client::FlussClient;
use crate::connection::ServerConnection;
use crate::error::{ClientError, Result};
use crate::metadata::TableRoute;
use decode::{decode_records, DecodePlan};

/// Consecutive polls in which one bucket may answer with a leadership or
/// availability error before the poll fails. Bounds how long a scanner
/// retries a bucket whose table was dropped or whose leader never returns.
pub const MAX_RETRIABLE_BUCKET_ERRORS: u32 = 10;

/// Pause before refreshing the leaders after a retriable bucket error, so a
/// server that keeps refusing is not asked again in a tight loop.
pub const ROUTE_REFRESH_BACKOFF: Duration = Duration::from_millis(100);

/// Where a scan starts in a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartOffset {
    /// The log start offset (the oldest record kept).
    Earliest,
    /// The high watermark: only records written from now on.
    Latest,
    /// The first record whose batch was committed at or after this time (ms
    /// since the epoch).
    Timestamp(i64),
    /// This offset.
    Offset(i64),
}

/// One bucket of the scanned table: a bucket of the table itself, or of one
/// of its partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScanBucket {
    /// The partition, for a partitioned table.
    pub partition_id: Option<i64>,
    /// The bucket.
    pub bucket: i32,
}

impl ScanBucket {
    /// A bucket of a non-partitioned table.
    pub const fn new(bucket: i32) -> Self {
        Self {
            partition_id: None,
            bucket,
        }
    }

    /// A bucket of one partition.
    pub const fn of_partition(partition_id: i64, bucket: i32) -> Self {
        Self {
            partition_id: Some(partition_id),
            bucket,
        }
    }
}

impl std::fmt::Display for ScanBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.partition_id {
            None => write!(f, "bucket {}", self.bucket),
            Some(p) => write!(f, "bucket {} of partition {p}", self.bucket),
        }
    }
}

/// Records read from one bucket.
#[derive(Debug, Clone)]
pub struct ScanBatch {
    /// The partition read, for a partitioned table.
    pub partition_id: Option<i64>,
    /// The bucket read.
    pub bucket: i32,
    /// Offset of the first record of `records`; the records have
    /// consecutive offsets from it.
    pub base_offset: i64,
    /// The records, with the scanner's projection in the order asked for.
    /// Their buffers are slices of the received response (no copy).
    pub records: RecordBatch,
    /// One change-type byte per record (a primary-key table's changelog),
    /// each a valid [`ChangeType`]; `None` for an append-only batch (a log
    /// table's), whose records are all [`ChangeType::AppendOnly`].
    change_types: Option<Buffer>,
}

impl ScanBatch {
    /// The records as Arrow.
    pub fn records(&self) -> &RecordBatch {
        &self.records
    }

    /// Number of records.
    pub fn num_rows(&self) -> usize {
        self.records.num_rows()
    }

    /// The offset after the last record.
    pub fn next_offset(&self) -> i64 {
        self.base_offset + self.records.num_rows() as i64
    }

    /// The records one row at a time; each row implements
    /// [`InternalRow`](crate::row::InternalRow) and says its change type.
    /// Fails when a column has a nested type (ARRAY, MAP, ROW), which rows
    /// cannot carry: read those through [`ScanBatch::records`].
    pub fn rows(&self) -> Result<ScanRows<'_>> {
        Ok(ScanRows::new(&self.records)?.with_change_types(self.change_types()))
    }

    /// The change type of record `index` (its offset minus
    /// [`ScanBatch::base_offset`]): `+I`, `-U`, `+U` or `-D` in a
    /// primary-key table's changelog, [`ChangeType::AppendOnly`] in a log
    /// table. Panics if `index` is not below [`ScanBatch::num_rows`].
    pub fn change_type(&self, index: usize) -> ChangeType {
        assert!(
            index < self.records.num_rows(),
            "record {index} of {}",
            self.records.num_rows()
        );
        match &self.change_types {
            None => ChangeType::AppendOnly,
            // Every byte was checked when the batch was decoded.
            Some(bytes) => {
                ChangeType::from_byte(bytes.as_slice()[index]).unwrap_or(ChangeType::AppendOnly)
            }
        }
    }

    /// The change-type bytes, one per record; `None` for an append-only
    /// batch.
    pub fn change_types(&self) -> Option<&[u8]> {
        self.change_types.as_ref().map(Buffer::as_slice)
    }
}

/// Where one subscribed bucket stands.
#[derive(Clone, Copy, Debug)]
struct BucketState {
    /// The next offset to fetch.
    offset: i64,
    /// The high watermark of the last fetch response, -1 before one.
    high_watermark: i64,
    /// Retriable errors in a row (reset by a successful fetch).
    retriable_errors: u32,
}

/// Reads subscribed buckets of one log table.
pub struct LogScanner {
    table: TableInfo,
    /// Leaders of a non-partitioned table's buckets.
    route: Option<TableRoute>,
    /// Leaders of each subscribed partition's buckets.
    partition_routes: HashMap<i64, TableRoute>,
    config: ScannerConfig,
    /// The columns asked of the server (table order), empty for all.
    projected_fields: Vec<i32>,
    /// The schema of returned batches.
    arrow_schema: SchemaRef,
    plan: DecodePlan,
    buckets: BTreeMap<ScanBucket, BucketState>,
    /// A bucket answered with a leadership error: refresh leaders first.
    route_stale: bool,
    /// The partitions whose buckets answered so: only their routes are
    /// asked for again (one MetaData request each).
    stale_partitions: BTreeSet<i64>,
    /// Where fresh routes come from, when the caller gave a client.
    client: Option<FlussClient>,
    /// With a filter: runs of batches the server left out, and their
    /// records (see [`LogScanner::filtered`]).
    filtered: FilteredCounts,
}

/// What a filtered scan was spared, counted from the offsets received.
#[derive(Debug, Default)]
struct FilteredCounts {
    runs: std::sync::atomic::AtomicU64,
    records: std::sync::atomic::AtomicU64,
}

/// The Arrow schemas of `table`'s earlier schema ids that pad to the
/// current one; a batch of any other id is decoded with the current schema
/// and fails there if it does not fit.
fn earlier_arrow_schemas(table: &TableInfo) -> Vec<(i16, SchemaRef)> {
    table
        .paddable_earlier_schemas()
        .filter_map(|(id, old)| Some((i16::try_from(id).ok()?, to_arrow_schema(old))))
        .collect()
}

impl LogScanner {
    /// A scanner of the non-partitioned `table` reading from the leaders in
    /// `route`. Refuses a projection with a duplicate or out-of-range column.
    ///
    /// CRC policy: batches are CRC-checked (when `check_crc`) only without a
    /// projection. A Fluss server builds a projected batch by cutting columns
    /// out of the stored one and copies the stored header, CRC included
    /// (`FileLogProjection`), so that CRC no longer matches the bytes; the
    /// Java client skips the check for projected fetches for that reason and
    /// fluss-rs never checks. Fjord's server recomputes it, but the scanner
    /// must read real Fluss servers too.
    pub fn new(table: TableInfo, route: TableRoute, config: ScannerConfig) -> Result<Self> {
        if table.is_partitioned() {
            return Err(ClientError::Invalid(format!(
                "{} is partitioned: scan it with LogScanner::new_partitioned and subscribe_partition",
                table.path
            )));
        }
        Self::build(table, Some(route), config)
    }

    /// A scanner of the partitioned `table`; partitions are added with
    /// [`LogScanner::subscribe_partition`], each with its own route.
    pub fn new_partitioned(table: TableInfo, config: ScannerConfig) -> Result<Self> {
        if !table.is_partitioned() {
            return Err(ClientError::Invalid(format!(
                "{} is not partitioned: scan it with LogScanner::new",
                table.path
            )));
        }
        Self::build(table, None, config)
    }

    fn build(table: TableInfo, route: Option<TableRoute>, config: ScannerConfig) -> Result<Self> {
        let schema = table.descriptor.schema();
        let full = to_arrow_schema(schema);
        let (fetched_schema, projected_fields, reorder, arrow_schema) = match &config.projection {
            None => (full.clone(), Vec::new(), None, full),
            Some(columns) => {
                let plan = ProjectionPlan::new(columns, schema.columns().len()).map_err(|why| {
                    ClientError::Invalid(format!(
                        "projection {columns:?} of {} ({} columns): {why}",
                        table.path,
                        schema.columns().len()
                    ))
                })?;
                let fetched = to_projected_arrow_schema(schema, &plan.sorted).ok_or_else(|| {
                    ClientError::Invalid(format!("projection {columns:?} of {}", table.path))
                })?;
                let returned = match &plan.reorder {
                    None => fetched.clone(),
                    Some(order) => std::sync::Arc::new(fetched.project(order).map_err(|e| {
                        ClientError::Invalid(format!("projection {columns:?}: {e}"))
                    })?),
                };
                let fields = plan.sorted.iter().map(|&c| c as i32).collect();
                (fetched, fields, plan.reorder, returned)
            }
        };
        let plan = DecodePlan {
            fetched_schema,
            reorder,
            verify_crc: config.check_crc && projected_fields.is_empty(),
            earlier_schemas: if projected_fields.is_empty() {
                earlier_arrow_schemas(&table)
            } else {
                Vec::new()
            },
        };
        Ok(Self {
            table,
            route,
            partition_routes: HashMap::new(),
            config,
            projected_fields,
            arrow_schema,
            plan,
            buckets: BTreeMap::new(),
            route_stale: false,
            stale_partitions: BTreeSet::new(),
            client: None,
            filtered: FilteredCounts::default(),
        })
    }

    /// Refreshes leaders through `client` after leadership errors (cached
    /// routes shared with the client's writers), for the table and for every
    /// subscribed partition. Without a client the scanner asks the table's
    /// leaders for the table's route, each distinct one in bucket order until
    /// one answers, and cannot refresh partition routes: their buckets are
    /// retried on the old route, up to the bound.
    pub fn with_client(mut self, client: FlussClient) -> Self {
        self.client = Some(client);
        self
    }

    /// The Arrow schema of the batches this scanner returns.
    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow_schema
    }

    /// The table scanned.
    pub fn table(&self) -> &TableInfo {
        &self.table
    }

    /// Starts (or moves) reading `bucket` of a non-partitioned table at `offset`.
    pub fn subscribe(&mut self, bucket: i32, offset: i64) -> Result<()> {
        let Some(route) = &self.route else {
            return Err(ClientError::Invalid(format!(
                "{} is partitioned: subscribe to its partitions with subscribe_partition",
                self.table.path
            )));
        };
        check_bucket(&self.table, route, bucket)?;
        check_offset(offset)?;
        self.set_offset(ScanBucket::new(bucket), offset);
        Ok(())
    }

    /// Starts (or moves) reading `bucket` of partition `partition_id` at
    /// `offset`, reaching its leaders through `route` (which replaces any
    /// route given earlier for that partition).
    pub fn subscribe_partition(
        &mut self,
        partition_id: i64,
        route: TableRoute,
        bucket: i32,
        offset: i64,
    ) -> Result<()> {
        if self.route.is_some() {
            return Err(ClientError::Invalid(format!(
                "{} is not partitioned: subscribe to its buckets with subscribe",
                self.table.path
            )));
        }
        check_bucket(&self.table, &route, bucket)?;
        check_offset(offset)?;
        self.partition_routes.insert(partition_id, route);
        self.set_offset(ScanBucket::of_partition(partition_id, bucket), offset);
        Ok(())
    }

    fn set_offset(&mut self, key: ScanBucket, offset: i64) {
        self.buckets.insert(key, BucketState::at(offset));
    }

    /// Stops reading `bucket` (of a partition when given); returns whether
    /// it was subscribed.
    pub fn unsubscribe(&mut self, key: ScanBucket) -> bool {
        self.buckets.remove(&key).is_some()
    }

    /// The next offset to be read of each subscribed bucket of a
    /// non-partitioned table, by bucket.
    pub fn positions(&self) -> BTreeMap<i32, i64> {
        self.buckets
            .iter()
            .filter(|(k, _)| k.partition_id.is_none())
            .map(|(k, s)| (k.bucket, s.offset))
            .collect()
    }

    /// The next offset to be read of a subscribed bucket.
    pub fn position(&self, key: ScanBucket) -> Option<i64> {
        self.buckets.get(&key).map(|s| s.offset)
    }

    /// The subscribed buckets, in order.
    pub fn subscriptions(&self) -> impl Iterator<Item = ScanBucket> + '_ {
        self.buckets.keys().copied()
    }

    /// The high watermark of a subscribed bucket as of its last fetch
    /// response; `None` before the first.
    pub fn high_watermark(&self, key: ScanBucket) -> Option<i64> {
        self.buckets
            .get(&key)
            .map(|s| s.high_watermark)
            .filter(|&hw| hw >= 0)
    }

    /// The offset `start` names in `bucket` of a non-partitioned table, asked
    /// of the bucket's leader (ListOffsets), or the offset itself.
    pub async fn resolve_offset(&self, bucket: i32, start: StartOffset) -> Result<i64> {
        let Some(route) = &self.route else {
            return Err(ClientError::Invalid(format!(
                "{} is partitioned: use resolve_partition_offset",
                self.table.path
            )));
        };
        check_bucket(&self.table, route, bucket)?;
        resolve(&self.table, route, None, bucket, start).await
    }

    /// Like [`LogScanner::resolve_offset`], for a bucket of a partition
    /// whose leaders are in `route`.
    pub async fn resolve_partition_offset(
        &self,
        partition_id: i64,
        route: &TableRoute,
        bucket: i32,
        start: StartOffset,
    ) -> Result<i64> {
        check_bucket(&self.table, route, bucket)?;
        resolve(&self.table, route, Some(partition_id), bucket, start).await
    }

    fn leader(&self, key: ScanBucket) -> Option<&ServerConnection> {
        let route = match key.partition_id {
            None => self.route.as_ref()?,
            Some(id) => self.partition_routes.get(&id)?,
        };
        (key.bucket < route.bucket_count()).then(|| route.leader(key.bucket))
    }

    /// Fetches once from the leaders of the subscribed buckets; returns what
    /// arrived (possibly nothing after the long-poll wait, or when no bucket
    /// is subscribed). On error no position moves.
    pub async fn poll(&mut self) -> Result<Vec<ScanBatch>> {
        if self.buckets.is_empty() {
            return Ok(Vec::new());
        }
        if self.route_stale {
            self.refresh_route().await?;
        }
        let mut requests = JoinSet::new();
        for (connection, buckets) in self.requests_by_leader() {
            let request = pb::FetchLogRequest {
                follower_server_id: -1,
                max_bytes: self.config.fetch_max_bytes,
                tables_req: vec![pb::PbFetchLogReqForTable {
                    table_id: self.table.table_id,
                    projection_pushdown_enabled: !self.projected_fields.is_empty(),
                    projected_fields: self.projected_fields.clone(),
                    buckets_req: buckets,
                    filter_predicate: self.config.filter.as_ref().map(|f| f.predicate.clone()),
                    filter_schema_id: self.config.filter.as_ref().map(|f| f.schema_id),
                }],
                max_wait_ms: Some(self.config.fetch_max_wait_ms),
                min_bytes: Some(self.config.fetch_min_bytes),
                read_preference: None,
            };
            requests.spawn(async move {
                let result = connection
                    .request::<_, pb::FetchLogResponse>(ApiKey::FetchLog, &request)
                    .await;
                (request, result)
            });
        }
        // Positions move only once every response was taken: a failure
        // half-way leaves the scanner where it was.
        let mut out = Vec::new();
        let mut updates: Vec<(ScanBucket, BucketState)> = Vec::new();
        let mut out_of_range = Vec::new();
        let mut stale = false;
        let mut stale_partitions = Vec::new();
        while let Some(joined) = requests.join_next().await {
            let (request, result) =
                joined.map_err(|e| ClientError::Invalid(format!("fetch task failed: {e}")))?;
            let response = match result {
                Ok(response) => response,
                // A lost connection (leader restarted or moved): every bucket
                // of the request is retried after the leaders are refreshed.
                Err(error @ (ClientError::ConnectionClosed { .. } | ClientError::Io { .. })) => {
                    for asked in request.tables_req.iter().flat_map(|t| &t.buckets_req) {
                        let key = ScanBucket {
                            partition_id: asked.partition_id,
                            bucket: asked.bucket_id,
                        };
                        let Some(&state) = self.buckets.get(&key) else {
                            continue;
                        };
                        let errors = state.retriable_errors + 1;
                        if errors >= MAX_RETRIABLE_BUCKET_ERRORS {
                            return Err(error);
                        }
                        updates.push((
                            key,
                            BucketState {
                                retriable_errors: errors,
                                ..state
                            },
                        ));
                        stale_partitions.extend(key.partition_id);
                    }
                    tracing::debug!(table = %self.table.path, %error, "fetch connection lost; refreshing leaders");
                    stale = true;
                    continue;
                }
                Err(error) => return Err(error),
            };
            for table in response.tables_resp {
                if table.table_id != self.table.table_id {
                    continue;
                }
                for bucket in table.buckets_resp {
                    match self.take_bucket(bucket, &mut out)? {
                        Outcome::Read(key, state) => updates.push((key, state)),
                        Outcome::Retry(key, state) => {
                            stale = true;
                            stale_partitions.extend(key.partition_id);
                            updates.push((key, state));
                        }
                        Outcome::OutOfRange(key, error) => out_of_range.push((key, error)),
                        Outcome::Ignored => {}
                    }
                }
            }
        }
        for (key, error) in out_of_range {
            // The error carries the bucket's high watermark: keep it, so
            // `high_watermark` does not go back to unknown after a reset.
            let high_watermark = error
                .high_watermark
                .or_else(|| self.high_watermark(key))
                .unwrap_or(-1);
            let offset = self.reset_offset(key, error).await?;
            updates.push((
                key,
                BucketState {
                    offset,
                    high_watermark,
                    retriable_errors: 0,
                },
            ));
        }
        for (key, state) in updates {
            if let Some(current) = self.buckets.get_mut(&key) {
                *current = state;
            }
        }
        self.route_stale |= stale;
        self.stale_partitions.extend(stale_partitions);
        Ok(out)
    }

    /// One FetchLog bucket list per distinct leader.
    fn requests_by_leader(&self) -> Vec<(ServerConnection, Vec<pb::PbFetchLogReqForBucket>)> {
        let mut by_leader: Vec<(ServerConnection, Vec<pb::PbFetchLogReqForBucket>)> = Vec::new();
        for (&key, state) in &self.buckets {
            // Subscribing checked the bucket against its route.
            let Some(leader) = self.leader(key) else {
                continue;
            };
            let entry = pb::PbFetchLogReqForBucket {
                partition_id: key.partition_id,
                bucket_id: key.bucket,
                fetch_offset: state.offset,
                max_fetch_bytes: self.config.fetch_max_bytes_for_bucket,
                routing_bucket_count: None,
            };
            match by_leader
                .iter_mut()
                .find(|(c, _)| c.addr() == leader.addr())
            {
                Some((_, buckets)) => buckets.push(entry),
                None => by_leader.push((leader.clone(), vec![entry])),
            }
        }
        by_leader
    }

    /// Takes one bucket of a response: decodes its records into `out`, or
    /// classifies its error per the module's policy.
    fn take_bucket(
        &self,
        bucket: pb::PbFetchLogRespForBucket,
        out: &mut Vec<ScanBatch>,
    ) -> Result<Outcome> {
        let key = ScanBucket {
            partition_id: bucket.partition_id,
            bucket: bucket.bucket_id,
        };
        // A bucket not (or no longer) subscribed: nothing to do with it.
        let Some(&state) = self.buckets.get(&key) else {
            return Ok(Outcome::Ignored);
        };
        if let Some(code) = bucket.error_code.filter(|&c| c != 0) {
            let code = ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError);
            let error = BucketError {
                code,
                message: bucket.error_message.unwrap_or_default(),
                log_start_offset: bucket.log_start_offset,
                high_watermark: bucket.high_watermark,
            };
            return self.bucket_error(key, state, error);
        }
        let mut next = BucketState {
            offset: state.offset,
            high_watermark: bucket.high_watermark.unwrap_or(state.high_watermark),
            retriable_errors: 0,
        };
        if let Some(records) = bucket.records {
            let decoded = decode_records(records, state.offset, &self.plan).map_err(|e| {
                ClientError::Format(format!(
                    "{key} of {} at offset {}: {e}",
                    self.table.path, state.offset
                ))
            })?;
            if self.config.filter.is_some() {
                self.count_filtered(
                    state.offset,
                    decoded
                        .batches
                        .iter()
                        .map(|(base, _, records)| (*base, records.num_rows() as i64)),
                    bucket.filtered_end_offset,
                );
            }
            out.extend(
                decoded
                    .batches
                    .into_iter()
                    .map(|(base_offset, change_types, records)| ScanBatch {
                        partition_id: key.partition_id,
                        bucket: key.bucket,
                        base_offset,
                        records,
                        change_types,
                    }),
            );
            next.offset = decoded.next_offset;
        }
        // The server left batches out: continue past them.
        if let Some(end) = bucket.filtered_end_offset {
            next.offset = next.offset.max(end);
        }
        Ok(Outcome::Read(key, next))
    }

    /// Counts the offset gaps of a filtered answer read from `from`: before,
    /// between and after the batches received (up to `filtered_end`).
    fn count_filtered(
        &self,
        from: i64,
        batches: impl Iterator<Item = (i64, i64)>,
        filtered_end: Option<i64>,
    ) {
        use std::sync::atomic::Ordering::Relaxed;
        let mut expected = from;
        let gap = |to: i64, expected: i64| {
            if to > expected {
                self.filtered.runs.fetch_add(1, Relaxed);
                self.filtered
                    .records
                    .fetch_add((to - expected) as u64, Relaxed);
            }
        };
        for (base, rows) in batches {
            gap(base, expected);
            expected = expected.max(base + rows);
        }
        if let Some(end) = filtered_end {
            gap(end, expected);
        }
    }

    /// With [`ScannerConfig::filter`]: the runs of consecutive batches the
    /// server left out so far (each run is one or more batches: the client
    /// sees only the offsets it skipped), and the records in them.
    pub fn filtered(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.filtered.runs.load(Relaxed),
            self.filtered.records.load(Relaxed),
        )
    }

    fn bucket_error(
        &self,
        key: ScanBucket,
        state: BucketState,
        error: BucketError,
    ) -> Result<Outcome> {
        match error.code {
            ErrorCode::NotLeaderOrFollower
            | ErrorCode::UnknownTableOrBucketException
            | ErrorCode::LeaderNotAvailableException
            | ErrorCode::LogStorageException
            | ErrorCode::KvStorageException
            | ErrorCode::StorageException
            | ErrorCode::FencedLeaderEpochException
            | ErrorCode::RequestTimeOut
            | ErrorCode::UnknownServerError => {
                let errors = state.retriable_errors + 1;
                if errors >= MAX_RETRIABLE_BUCKET_ERRORS {
                    return Err(self.fetch_error(
                        key,
                        state.offset,
                        &error,
                        "giving up after repeated errors",
                    ));
                }
                tracing::debug!(%key, table = %self.table.path, code = error.code.name(), message = %error.message, "fetch error; refreshing leaders");
                Ok(Outcome::Retry(
                    key,
                    BucketState {
                        retriable_errors: errors,
                        ..state
                    },
                ))
            }
            ErrorCode::LogOffsetOutOfRangeException
                if self.config.offset_reset == OffsetReset::Earliest =>
            {
                Ok(Outcome::OutOfRange(key, error))
            }
            _ => Err(self.fetch_error(key, state.offset, &error, "")),
        }
    }

    /// The error a poll fails with for one bucket, naming the table, the
    /// bucket, the offset and what the server said.
    fn fetch_error(
        &self,
        key: ScanBucket,
        offset: i64,
        error: &BucketError,
        why: &str,
    ) -> ClientError {
        let mut text = format!("{key} of {} at offset {offset}", self.table.path);
        if let Some(start) = error.log_start_offset {
            text.push_str(&format!(" (log start {start}"));
            match error.high_watermark {
                Some(hw) => text.push_str(&format!(", high watermark {hw})")),
                None => text.push(')'),
            }
        }
        text.push_str(": ");
        if !why.is_empty() {
            text.push_str(why);
            text.push_str(": ");
        }
        text.push_str(&error.message);
        ClientError::Server {
            api: ApiKey::FetchLog.name(),
            error: error.code.with_message(text),
        }
    }

    /// Where a bucket whose offset is out of range continues under
    /// [`OffsetReset::Earliest`]: the log start when the offset fell below
    /// it; an offset beyond the end is an error.
    async fn reset_offset(&self, key: ScanBucket, error: BucketError) -> Result<i64> {
        let offset = self.buckets.get(&key).map_or(-1, |s| s.offset);
        let route = self.route_of(key)?;
        let start = resolve(
            &self.table,
            route,
            key.partition_id,
            key.bucket,
            StartOffset::Earliest,
        )
        .await?;
        if offset >= start {
            let error = BucketError {
                log_start_offset: Some(start),
                ..error
            };
            return Err(self.fetch_error(
                key,
                offset,
                &error,
                "offset is beyond the end of the log",
            ));
        }
        tracing::warn!(%key, table = %self.table.path, from = offset, to = start, "fetch offset below the log start; continuing from the log start");
        Ok(start)
    }

    fn route_of(&self, key: ScanBucket) -> Result<&TableRoute> {
        let route = match key.partition_id {
            None => self.route.as_ref(),
            Some(id) => self.partition_routes.get(&id),
        };
        route.ok_or_else(|| {
            ClientError::Invalid(format!("{key} of {} has no route", self.table.path))
        })
    }

    /// Asks for leaders again after a leadership error: the table's, or
    /// (through the client) those of the partitions whose buckets failed.
    /// Without a client a partition's route came from the caller, who
    /// refreshes it by subscribing again; until then its buckets keep being
    /// retried.
    async fn refresh_route(&mut self) -> Result<()> {
        tokio::time::sleep(ROUTE_REFRESH_BACKOFF).await;
        match (&self.client, &self.route) {
            (Some(client), Some(_)) => {
                self.route = Some(client.refresh_route(&self.table, None).await?);
            }
            (Some(client), None) => {
                // Only the partitions that answered with an error: the
                // others' leaders are still good, and each refresh is one
                // MetaData request.
                for &id in &self.stale_partitions {
                    if !self.partition_routes.contains_key(&id) {
                        continue;
                    }
                    let route = client.refresh_route(&self.table, Some(id)).await?;
                    self.partition_routes.insert(id, route);
                }
            }
            (None, Some(route)) => {
                self.route = Some(route_from_any_leader(&self.table, route).await?);
            }
            (None, None) => {}
        }
        self.route_stale = false;
        self.stale_partitions.clear();
        Ok(())
    }
}

/// The route of `table` asked of the leaders in `route`, one distinct
/// address at a time in bucket order, until one answers MetaData (any server
/// of the cluster does). Each is reached on a new connection, as the old one
/// may be what died, and the leader the refresh follows is often dead too:
/// asking only one would fail while the others are alive. Fails only when
/// every leader failed, naming how many were tried and the last error.
/// Runs after errors only, so its connects and its list of the addresses
/// tried cost nothing on the fetch path.
async fn route_from_any_leader(table: &TableInfo, route: &TableRoute) -> Result<TableRoute> {
    let mut tried: Vec<&str> = Vec::new();
    let mut last_error = None;
    for bucket in 0..route.bucket_count() {
        let addr = route.leader(bucket).addr();
        if tried.contains(&addr) {
            continue;
        }
        tried.push(addr);
        let answer = match ServerConnection::connect(addr).await {
            Ok(connection) => TableRoute::resolve(&connection, table).await,
            Err(error) => Err(error),
        };
        match answer {
            Ok(fresh) => return Ok(fresh),
            Err(error) => {
                tracing::warn!(%addr, table = %table.path, %error, "leader did not answer MetaData; trying the next");
                last_error = Some(error);
            }
        }
    }
    Err(match last_error {
        Some(last) => ClientError::Unreachable {
            what: format!("refreshing the leaders of {} (MetaData)", table.path),
            tried: tried.len(),
            servers: "distinct leaders",
            last: Box::new(last),
        },
        None => ClientError::Invalid(format!(
            "refreshing the leaders of {}: its route has no leader to ask",
            table.path
        )),
    })
}

/// What one bucket of a response led to.
enum Outcome {
    /// Records (maybe none) were read; the bucket's new state.
    Read(ScanBucket, BucketState),
    /// A retriable error; the bucket's new state (error count raised).
    Retry(ScanBucket, BucketState),
    /// The offset is out of range and the policy is to reset.
    OutOfRange(ScanBucket, BucketError),
    /// The bucket is not subscribed.
    Ignored,
}

/// A bucket's error as the server sent it.
#[derive(Debug)]
struct BucketError {
    code: ErrorCode,
    message: String,
    log_start_offset: Option<i64>,
    high_watermark: Option<i64>,
}

impl BucketState {
    /// A bucket about to be read from `offset`, nothing known of it yet.
    fn at(offset: i64) -> Self {
        Self {
            offset,
            high_watermark: -1,
            retriable_errors: 0,
        }
    }
}

/// The Fluss `ListOffsetsRequest.offset_type` of earliest, latest, timestamp.
const OFFSET_TYPE_EARLIEST: i32 = 0;
const OFFSET_TYPE_LATEST: i32 = 1;
const OFFSET_TYPE_TIMESTAMP: i32 = 2;

/// Resolves `start` for one bucket by asking its leader (ListOffsets is
/// answered by the leader in Fluss).
async fn resolve(
    table: &TableInfo,
    route: &TableRoute,
    partition_id: Option<i64>,
    bucket: i32,
    start: StartOffset,
) -> Result<i64> {
    let (offset_type, start_timestamp) = match start {
        StartOffset::Offset(offset) => {
            check_offset(offset)?;
            return Ok(offset);
        }
        StartOffset::Earliest => (OFFSET_TYPE_EARLIEST, None),
        StartOffset::Latest => (OFFSET_TYPE_LATEST, None),
        StartOffset::Timestamp(ts) => (OFFSET_TYPE_TIMESTAMP, Some(ts)),
    };
    let request = pb::ListOffsetsRequest {
        follower_server_id: -1,
        offset_type,
        table_id: table.table_id,
        partition_id,
        bucket_id: vec![bucket],
        start_timestamp,
        routing_bucket_count: None,
    };
    let response: pb::ListOffsetsResponse = route
        .leader(bucket)
        .request(ApiKey::ListOffsets, &request)
        .await?;
    let key = ScanBucket {
        partition_id,
        bucket,
    };
    let answer = response
        .buckets_resp
        .into_iter()
        .find(|b| b.bucket_id == bucket)
        .ok_or_else(|| ClientError::Protocol {
            api: ApiKey::ListOffsets.name(),
            message: format!("no answer for {key} of {}", table.path),
        })?;
    if let Some(code) = answer.error_code.filter(|&c| c != 0) {
        let code = ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError);
        return Err(ClientError::Server {
            api: ApiKey::ListOffsets.name(),
            error: code.with_message(format!(
                "{key} of {}: {}",
                table.path,
                answer.error_message.unwrap_or_default()
            )),
        });
    }
    match answer.offset {
        Some(offset) if offset >= 0 => Ok(offset),
        other => Err(ClientError::Protocol {
            api: ApiKey::ListOffsets.name(),
            message: format!("offset {other:?} for {key} of {}", table.path),
        }),
    }
}

fn check_bucket(table: &TableInfo, route: &TableRoute, bucket: i32) -> Result<()> {
    if bucket < 0 || bucket >= route.bucket_count() {
        return Err(ClientError::Invalid(format!(
            "bucket {bucket} out of range: {} has {} buckets",
            table.path,
            route.bucket_count()
        )));
    }
    Ok(())
}

fn check_offset(offset: i64) -> Result<()> {
    if offset < 0 {
        return Err(ClientError::Invalid(format!(
            "offset {offset} is negative: offsets start at 0"
        )));
    }
    Ok(())
}

/// A projection checked against the table: the sorted column set the
/// server is asked for and how to put it back in the caller's order.
#[derive(Debug, PartialEq, Eq)]
struct ProjectionPlan {
    /// The columns, ascending (Fluss servers require it).
    sorted: Vec<usize>,
    /// For each requested column, its position in `sorted`; `None` when the
    /// request was ascending already.
    reorder: Option<Vec<usize>>,
}

impl ProjectionPlan {
    fn new(columns: &[usize], column_count: usize) -> std::result::Result<Self, String> {
        if columns.is_empty() {
            return Err("no columns selected".to_owned());
        }
        if let Some(&c) = columns.iter().find(|&&c| c >= column_count) {
            return Err(format!("column index {c} is out of range"));
        }
        let mut sorted = columns.to_vec();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("column index {} is selected twice", w[0]));
        }
        let reorder = (sorted != columns).then(|| {
            columns
                .iter()
                .map(|c| {
                    sorted
                        .binary_search(c)
                        .expect("every column is in the sorted set")
                })
                .collect()
        });
        Ok(Self { sorted, reorder })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projections_are_sorted_for_the_server_and_reordered_for_the_caller() {
        let check = |columns: &[usize], sorted: &[usize], reorder: Option<&[usize]>| {
            let plan = ProjectionPlan::new(columns, 5).expect("valid projection");
            assert_eq!(plan.sorted, sorted, "{columns:?}");
            assert_eq!(plan.reorder.as_deref(), reorder, "{columns:?}");
        };
        check(&[0, 3], &[0, 3], None);
        check(&[3, 0], &[0, 3], Some(&[1, 0]));
        check(&[4, 1, 2], &[1, 2, 4], Some(&[2, 0, 1]));
    }

    #[test]
    fn projections_with_duplicates_gaps_or_nothing_are_refused() {
        let check = |columns: &[usize], expected: &str| {
            let why = ProjectionPlan::new(columns, 3).expect_err("invalid projection");
            assert!(why.contains(expected), "{columns:?}: {why}");
        };
        check(&[1, 1], "selected twice");
        check(&[2, 0, 2], "selected twice");
        check(&[3], "out of range");
        check(&[], "no columns");
    }
}
