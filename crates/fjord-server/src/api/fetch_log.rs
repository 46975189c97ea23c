//! FetchLog (1015): per bucket, whole batches from the fetch offset up to
//! the high watermark, within the request's `max_bytes` and each bucket's
//! `max_fetch_bytes`; with projection pushdown, only the projected columns'
//! Arrow buffers are sent (fjord-format's `FileLogProjection` equivalent,
//! no decoding).
//!
//! Projected positions apply to each batch's own schema, as Fluss's
//! `FileLogProjection` applies them: a plan per (schema id, projection),
//! built when a batch of that id is first read. Columns are only ever added
//! last, so a position means the same column in every schema that has it;
//! a position an older schema lacks fails the bucket's read with
//! INVALID_COLUMN_PROJECTION when a batch of that schema is reached (Fluss:
//! "Projected fields [..] is out of bound for schema with N fields.").
//!
//! Long-poll: while fewer than `min_bytes` are available, the request parks
//! until an append to one of its buckets moves a high watermark (a per-bucket
//! `Notify`, no polling), `max_wait_ms` passes (capped by
//! `fjord.server.fetch-wait-ms-max`), or the server shuts down.
//!
//! Every answer with records is noted per bucket, so a fetcher that keeps
//! asking for an offset it was already sent records at is logged
//! ([`fetch_progress`]).
//!
//! Filter (Fluss 1.0's `filter_predicate` + `filter_schema_id`, never sent
//! by 0.9.1 clients): before projecting, a batch whose statistics block
//! proves no row can match the predicate is left out
//! (`fjord_format::statistics`; a batch without statistics is always
//! kept). When batches were left out the bucket answers
//! `filtered_end_offset`, the offset after the last batch scanned, from
//! which the client continues; a read whose batches were all left out reads
//! on, up to [`FILTER_SCAN_BYTES_MAX`], so a selective scan needs few round
//! trips. Batches are judged from their header and statistics block as
//! stored; the bodies of those left out are never read
//! (`LogTablet::read_filtered`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use fjord_format::log_batch;
use fjord_format::projection::{project_batches, ProjectionError, ProjectionPlan};
use fjord_format::statistics::{self, LeafFunction, Predicate, StatValue};
use fjord_proto::messages as pb;
use fjord_storage::ReadResult;
use tokio::time::Instant;

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::TableInfo;
use crate::metrics::Metrics;
use crate::node::Node;
use crate::replica::{Replica, TableBucket};

use super::fetch_progress;

/// Fluss's `FetchParams.FETCH_FROM_EARLIEST_OFFSET`: a fetch offset meaning
/// "the log start offset", sent by clients subscribed at `EARLIEST_OFFSET`.
const FETCH_FROM_EARLIEST_OFFSET: i64 = -2;

/// Most stored bytes one bucket of one filtered fetch scans while every
/// batch read is filtered out, before answering with only
/// `filtered_end_offset`: bounds the request's work and latency.
pub const FILTER_SCAN_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Fluss's `PbPredicateType`: a leaf.
const PB_PREDICATE_LEAF: i32 = 0;
/// Fluss's `PbPredicateType`: a compound (AND / OR).
const PB_PREDICATE_COMPOUND: i32 = 1;
/// Fluss's `PbCompoundFunction.AND`.
const PB_COMPOUND_AND: i32 = 0;
/// Fluss's `PbCompoundFunction.OR`.
const PB_COMPOUND_OR: i32 = 1;
/// Deepest predicate tree accepted (protects the recursion).
const PREDICATE_DEPTH_MAX: usize = 64;

/// One bucket of the request, resolved once.
struct BucketTarget {
    bucket_id: i32,
    partition_id: Option<i64>,
    fetch_offset: i64,
    max_fetch_bytes: usize,
    replica: Result<Arc<Replica>, ApiError>,
}

/// One table of the request, resolved once (projection checked once).
struct TableTarget {
    table_id: i64,
    projection: Option<Result<Projection, ApiError>>,
    filter: Option<Result<Arc<Filter>, ApiError>>,
    buckets: Vec<BucketTarget>,
}

/// A request's projection of one table: the columns, and their plan per
/// schema id of the batches read (Fluss caches a `ProjectionInfo` per
/// table, schema id and projection the same way).
struct Projection {
    table: Arc<TableInfo>,
    columns: Vec<usize>,
    /// Plans built so far, by schema id; a request meets few ids.
    plans: Mutex<Vec<(i16, Arc<ProjectionPlan>)>>,
}

impl Projection {
    /// Checks `columns` against the table's latest schema (as before any
    /// read) and keeps that schema's plan.
    fn new(table: Arc<TableInfo>, columns: Vec<usize>) -> Result<Self, ApiError> {
        let schema_id = table.schema_id as i16;
        let plan = ProjectionPlan::new(&table.schema, schema_id, &columns)
            .map_err(|e| ApiError::new(ErrorCode::InvalidColumnProjection, e.to_string()))?;
        Ok(Self {
            table,
            columns,
            plans: Mutex::new(vec![(schema_id, Arc::new(plan))]),
        })
    }

    /// The plan for batches of `schema_id`, built on first use. A schema id
    /// the request's copy of the table lacks (altered since) is looked up
    /// in the catalog: a batch of a new id is written only after the
    /// catalog has it.
    fn plan(&self, node: &Node, schema_id: i16) -> Result<Arc<ProjectionPlan>, ApiError> {
        let mut plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, plan)) = plans.iter().find(|(id, _)| *id == schema_id) {
            return Ok(Arc::clone(plan));
        }
        let id = i32::from(schema_id);
        let latest;
        let schema = match self.table.schema_by_id(id) {
            Some(schema) => &schema.schema,
            None => {
                latest = node.catalog.table_by_id(self.table.table_id);
                &latest
                    .as_ref()
                    .and_then(|t| t.schema_by_id(id))
                    .ok_or_else(|| {
                        ApiError::new(
                            ErrorCode::SchemaNotExist,
                            format!(
                                "Schema for table {}.{} with schema id {id} does not exist.",
                                self.table.path.database, self.table.path.table
                            ),
                        )
                    })?
                    .schema
            }
        };
        let fields = schema.columns().len();
        if self.columns.iter().any(|&c| c >= fields) {
            return Err(ApiError::new(
                ErrorCode::InvalidColumnProjection,
                format!(
                    "Projected fields {:?} is out of bound for schema with {fields} fields.",
                    self.columns
                ),
            ));
        }
        let plan = Arc::new(
            ProjectionPlan::new(schema, schema_id, &self.columns)
                .map_err(|e| ApiError::new(ErrorCode::InvalidColumnProjection, e.to_string()))?,
        );
        plans.push((schema_id, Arc::clone(&plan)));
        Ok(plan)
    }
}

/// A request's filter on one table: the predicate over table column
/// indexes (columns are only ever added last, so an index names the same
/// column in every schema that has it).
struct Filter {
    table: Arc<TableInfo>,
    predicate: Predicate,
}

impl Filter {
    /// Converts the wire predicate, whose field ids refer to schema
    /// `schema_id` (the table's latest when absent).
    fn new(
        node: &Node,
        table: &Arc<TableInfo>,
        predicate: &pb::PbPredicate,
        schema_id: Option<i32>,
    ) -> Result<Self, ApiError> {
        let id = schema_id.unwrap_or(table.schema_id);
        let latest;
        let schema = match table.schema_by_id(id) {
            Some(s) => &s.schema,
            None => {
                latest = node.catalog.table_by_id(table.table_id);
                &latest
                    .as_ref()
                    .and_then(|t| t.schema_by_id(id))
                    .ok_or_else(|| {
                        ApiError::new(
                            ErrorCode::SchemaNotExist,
                            format!(
                                "filter schema id {id} does not exist for table {}",
                                table.table_id
                            ),
                        )
                    })?
                    .schema
            }
        };
        Ok(Self {
            table: Arc::clone(table),
            predicate: convert_predicate(schema, predicate, 0)?,
        })
    }

    /// Whether the batch's statistics prove no row matches. A batch
    /// without statistics, or whose block or schema cannot be read, is
    /// kept.
    /// `batch` needs to hold the header and the statistics block only. A
    /// batch of a schema id newer than the request's view of the table is
    /// kept.
    fn rules_out(&self, layout: &log_batch::Layout, batch: &[u8]) -> bool {
        let Some(at) = layout.statistics_length else {
            return false;
        };
        let len = i32::from_le_bytes(batch[at..at + 4].try_into().expect("4 bytes"));
        let Ok(len) = usize::try_from(len) else {
            return false;
        };
        let Some(block) = batch.get(layout.header_size..layout.header_size + len) else {
            return false;
        };
        if block.is_empty() {
            return false;
        }
        let at = layout.schema_id;
        let schema_id = i32::from(i16::from_le_bytes([batch[at], batch[at + 1]]));
        let at = layout.record_count;
        let records = i32::from_le_bytes(batch[at..at + 4].try_into().expect("4 bytes"));
        let Some(schema) = self.table.schema_by_id(schema_id).map(|s| &s.schema) else {
            return false;
        };
        match statistics::parse_statistics(block, schema) {
            Ok(stats) => !stats.may_match(&self.predicate, records),
            Err(_) => false,
        }
    }
}

fn invalid_predicate(why: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidScanRequest, why)
}

/// Fluss's `PbPredicate` as a [`Predicate`] over the column indexes of
/// `schema` (field ids resolved to positions).
fn convert_predicate(
    schema: &fjord_format::Schema,
    p: &pb::PbPredicate,
    depth: usize,
) -> Result<Predicate, ApiError> {
    if depth > PREDICATE_DEPTH_MAX {
        return Err(invalid_predicate(
            "filter predicate nests too deep".to_owned(),
        ));
    }
    match p.r#type {
        PB_PREDICATE_COMPOUND => {
            let c = p
                .compound
                .as_ref()
                .ok_or_else(|| invalid_predicate("compound predicate without body".to_owned()))?;
            let children = c
                .children
                .iter()
                .map(|child| convert_predicate(schema, child, depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            match c.function {
                PB_COMPOUND_AND => Ok(Predicate::And(children)),
                PB_COMPOUND_OR => Ok(Predicate::Or(children)),
                f => Err(invalid_predicate(format!("unknown compound function {f}"))),
            }
        }
        PB_PREDICATE_LEAF => {
            let leaf = p
                .leaf
                .as_ref()
                .ok_or_else(|| invalid_predicate("leaf predicate without body".to_owned()))?;
            let Some(column) = schema.columns().iter().position(|c| c.id == leaf.field_id) else {
                return Err(invalid_predicate(format!(
                    "filter field id {} is not in the schema",
                    leaf.field_id
                )));
            };
            let function = match leaf.function {
                0 => LeafFunction::Equal,
                1 => LeafFunction::NotEqual,
                2 => LeafFunction::LessThan,
                3 => LeafFunction::LessOrEqual,
                4 => LeafFunction::GreaterThan,
                5 => LeafFunction::GreaterOrEqual,
                6 => LeafFunction::IsNull,
                7 => LeafFunction::IsNotNull,
                11 => LeafFunction::In,
                8..=10 | 12 => LeafFunction::Other,
                f => return Err(invalid_predicate(format!("unknown leaf function {f}"))),
            };
            let mut literals = Vec::with_capacity(leaf.literals.len());
            for l in &leaf.literals {
                match convert_literal(l) {
                    Some(v) => literals.push(v),
                    // A literal statistics cannot compare (BINARY, BYTES):
                    // the leaf decides nothing.
                    None => {
                        return Ok(Predicate::Leaf {
                            column,
                            function: LeafFunction::Other,
                            literals: Vec::new(),
                        })
                    }
                }
            }
            Ok(Predicate::Leaf {
                column,
                function,
                literals,
            })
        }
        t => Err(invalid_predicate(format!("unknown predicate type {t}"))),
    }
}

/// A literal in [`StatValue`] form: `Some(None)` for NULL, `None` for a
/// type statistics do not cover.
fn convert_literal(l: &pb::PbLiteralValue) -> Option<Option<StatValue>> {
    if l.is_null {
        return Some(None);
    }
    let value = match l.literal_type {
        0 => StatValue::Bool(l.boolean_value?),
        1..=3 | 10 | 11 => StatValue::Int(i64::from(l.int_value?)),
        4 => StatValue::Int(l.bigint_value?),
        5 => StatValue::Float(f64::from(l.float_value?)),
        6 => StatValue::Float(l.double_value?),
        7 | 8 => StatValue::Str(l.string_value.clone()?),
        9 => match (&l.decimal_bytes, l.decimal_value) {
            (Some(bytes), _) if !bytes.is_empty() && bytes.len() <= 16 => {
                let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
                let mut full = [fill; 16];
                full[16 - bytes.len()..].copy_from_slice(bytes);
                StatValue::Decimal(i128::from_be_bytes(full))
            }
            (None, Some(v)) => StatValue::Decimal(i128::from(v)),
            _ => return None,
        },
        12 | 13 => StatValue::Timestamp {
            millis: l.timestamp_millis_value?,
            nanos: l.timestamp_nano_of_millis_value.unwrap_or(0),
        },
        _ => return None,
    };
    Some(Some(value))
}

fn resolve(node: &Node, r: &pb::FetchLogRequest) -> Vec<TableTarget> {
    r.tables_req
        .iter()
        .map(|t| {
            let table = node.catalog.table_by_id(t.table_id);
            let projection = if t.projection_pushdown_enabled {
                Some(match &table {
                    None => Err(unknown_table(t.table_id)),
                    Some(info) => {
                        let columns: Result<Vec<usize>, _> = t
                            .projected_fields
                            .iter()
                            .map(|&f| usize::try_from(f))
                            .collect();
                        match columns {
                            Err(_) => Err(ApiError::new(
                                ErrorCode::InvalidColumnProjection,
                                format!(
                                    "projected fields {:?} contain a negative index",
                                    t.projected_fields
                                ),
                            )),
                            Ok(columns) => Projection::new(Arc::clone(info), columns),
                        }
                    }
                })
            } else {
                None
            };
            let buckets = t
                .buckets_req
                .iter()
                .map(|b| BucketTarget {
                    bucket_id: b.bucket_id,
                    partition_id: b.partition_id,
                    fetch_offset: b.fetch_offset,
                    max_fetch_bytes: usize::try_from(b.max_fetch_bytes).unwrap_or(0),
                    replica: match &table {
                        None => Err(unknown_table(t.table_id)),
                        Some(_) => super::replica_of(
                            node,
                            TableBucket {
                                table_id: t.table_id,
                                partition_id: b.partition_id,
                                bucket_id: b.bucket_id,
                            },
                        ),
                    },
                })
                .collect();
            let filter = t.filter_predicate.as_ref().map(|p| match &table {
                None => Err(unknown_table(t.table_id)),
                Some(info) => Filter::new(node, info, p, t.filter_schema_id).map(Arc::new),
            });
            TableTarget {
                table_id: t.table_id,
                projection,
                filter,
                buckets,
            }
        })
        .collect()
}

fn unknown_table(table_id: i64) -> ApiError {
    ApiError::new(
        ErrorCode::UnknownTableOrBucketException,
        format!("Unknown table id {table_id}"),
    )
}

fn bucket_error(b: &BucketTarget, e: &ApiError) -> pb::PbFetchLogRespForBucket {
    pb::PbFetchLogRespForBucket {
        partition_id: b.partition_id,
        bucket_id: b.bucket_id,
        error_code: Some(e.code().code()),
        error_message: Some(e.message().to_owned()),
        ..Default::default()
    }
}

/// Applies `projection` to every whole batch of `records`, each with the
/// plan of its schema id, staying within `max_bytes` (the first batch
/// always goes, so a fetch makes progress).
fn project(
    node: &Node,
    projection: &Projection,
    records: &[u8],
    max_bytes: usize,
) -> Result<Bytes, ApiError> {
    let mut out = Vec::with_capacity(records.len().min(max_bytes));
    // Why a plan could not be had, for the answer (project_batches only
    // needs to know that it failed).
    let mut refused: Option<ApiError> = None;
    let plan_for = |schema_id: i16| {
        projection.plan(node, schema_id).map_err(|e| {
            let message = e.message().to_owned();
            refused = Some(e);
            ProjectionError::InvalidProjection(message)
        })
    };
    let projected = project_batches(records, plan_for, &mut out, max_bytes, true);
    if let Err(e) = projected {
        return Err(refused.unwrap_or_else(|| {
            ApiError::new(
                ErrorCode::CorruptMessage,
                format!("cannot project a stored batch: {e}"),
            )
        }));
    }
    Ok(Bytes::from(out))
}

/// One pass over every bucket: returns the response, the record bytes in
/// it, and whether any bucket failed or answered a `filtered_end_offset`.
async fn read_all(
    node: &Node,
    targets: &[TableTarget],
    max_bytes: usize,
) -> (pb::FetchLogResponse, usize, bool, bool) {
    let mut total = 0usize;
    let mut failed = false;
    let mut progressed = false;
    let mut tables_resp = Vec::with_capacity(targets.len());
    for t in targets {
        let mut buckets_resp = Vec::with_capacity(t.buckets.len());
        for b in &t.buckets {
            let outcome = async {
                let replica = b.replica.as_ref().map_err(Clone::clone)?;
                let projection = match &t.projection {
                    None => None,
                    Some(Ok(projection)) => Some(projection),
                    Some(Err(e)) => return Err(e.clone()),
                };
                // The request-wide budget; the first bytes of the response
                // may exceed it (one whole batch) so a consumer never stalls.
                let budget = if total == 0 {
                    b.max_fetch_bytes.max(1)
                } else {
                    max_bytes.saturating_sub(total).min(b.max_fetch_bytes)
                };
                if budget == 0 {
                    let hw = replica.tablet.high_watermark();
                    return Ok((Bytes::new(), hw, replica.tablet.log_start_offset(), None));
                }
                // Fluss's FETCH_FROM_EARLIEST_OFFSET: read from the log start.
                let offset = if b.fetch_offset == FETCH_FROM_EARLIEST_OFFSET {
                    replica.tablet.log_start_offset()
                } else {
                    b.fetch_offset
                };
                let mut filtered_end_offset = None;
                let read = match &t.filter {
                    None => replica.read(offset, budget).await?,
                    Some(Err(e)) => return Err(e.clone()),
                    Some(Ok(filter)) => {
                        let mut from = offset;
                        let mut left_out = 0usize;
                        loop {
                            let filter = Arc::clone(filter);
                            let read = replica
                                .read_filtered(
                                    from,
                                    budget,
                                    FILTER_SCAN_BYTES_MAX - left_out,
                                    move |layout, prefix| filter.rules_out(layout, prefix),
                                )
                                .await?;
                            left_out += read.left_out_bytes;
                            if read.left_out_bytes > 0 {
                                filtered_end_offset = read.end_offset;
                            }
                            let end = read.end_offset;
                            let result = ReadResult {
                                records: read.records,
                                high_watermark: read.high_watermark,
                                log_start_offset: read.log_start_offset,
                            };
                            // Everything judged was left out: read on from
                            // past it (the next segment), within the bound.
                            match end {
                                Some(end)
                                    if result.records.is_empty()
                                        && read.left_out_bytes > 0
                                        && end < result.high_watermark
                                        && left_out < FILTER_SCAN_BYTES_MAX =>
                                {
                                    from = end;
                                }
                                _ => break result,
                            }
                        }
                    }
                };
                let records = match projection {
                    Some(projection) if !read.records.is_empty() => {
                        project(node, projection, &read.records, budget)?
                    }
                    _ => read.records,
                };
                Ok((
                    records,
                    read.high_watermark,
                    read.log_start_offset,
                    filtered_end_offset,
                ))
            }
            .await;
            match outcome {
                Ok((records, high_watermark, log_start_offset, filtered_end_offset)) => {
                    total += records.len();
                    // Batches left out are progress too: answer now rather
                    // than long-poll for bytes.
                    progressed |= filtered_end_offset.is_some();
                    buckets_resp.push(pb::PbFetchLogRespForBucket {
                        partition_id: b.partition_id,
                        bucket_id: b.bucket_id,
                        high_watermark: Some(high_watermark),
                        log_start_offset: Some(log_start_offset),
                        // Always set, even empty, as a Fluss server does: the Java
                        // client reads it before checking it is there.
                        records: Some(records),
                        filtered_end_offset,
                        ..Default::default()
                    });
                }
                Err(e) => {
                    failed = true;
                    buckets_resp.push(bucket_error(b, &e));
                }
            }
        }
        tables_resp.push(pb::PbFetchLogRespForTable {
            table_id: t.table_id,
            buckets_resp,
        });
    }
    (
        pb::FetchLogResponse { tables_resp },
        total,
        failed,
        progressed,
    )
}

/// Hands the buckets of an answer to the stalled-fetcher check
/// ([`fetch_progress`]); `response` has one entry per target, in order.
fn note_progress(
    follower_server_id: i32,
    targets: &[TableTarget],
    response: &pb::FetchLogResponse,
) {
    let served = targets
        .iter()
        .zip(&response.tables_resp)
        .flat_map(|(t, tr)| {
            t.buckets
                .iter()
                .zip(&tr.buckets_resp)
                .filter_map(move |(b, resp)| {
                    Some(fetch_progress::Served {
                        table_id: t.table_id,
                        replica: b.replica.as_ref().ok()?,
                        fetch_offset: b.fetch_offset,
                        response: resp,
                    })
                })
        });
    fetch_progress::note(follower_server_id, served);
}

/// Answers the fetch, long-polling while less than `min_bytes` is available.
pub async fn handle(node: &Node, r: pb::FetchLogRequest) -> Result<pb::FetchLogResponse, ApiError> {
    Metrics::add(&node.metrics.fetch_requests, 1);
    let max_bytes = usize::try_from(r.max_bytes)
        .unwrap_or(0)
        .min(node.config.fetch_bytes_max);
    let min_bytes = usize::try_from(r.min_bytes.unwrap_or(1)).unwrap_or(0);
    let wait_ms = u64::try_from(r.max_wait_ms.unwrap_or(0))
        .unwrap_or(0)
        .min(node.config.fetch_wait_ms_max);
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let targets = resolve(node, &r);
    let replicas: Vec<Arc<Replica>> = targets
        .iter()
        .flat_map(|t| t.buckets.iter())
        .filter_map(|b| b.replica.as_ref().ok().cloned())
        .collect();
    let mut shutdown = node.shutdown.clone();
    loop {
        // Register for wake-ups before reading, so an append that lands
        // between the read and the wait is not missed.
        let mut waits: Vec<Pin<Box<tokio::sync::futures::Notified<'_>>>> = replicas
            .iter()
            .map(|r| Box::pin(r.appended.notified()))
            .collect();
        for w in &mut waits {
            w.as_mut().enable();
        }
        let (response, bytes, failed, progressed) = read_all(node, &targets, max_bytes).await;
        let done = bytes >= min_bytes
            || failed
            || progressed
            || waits.is_empty()
            || Instant::now() >= deadline
            || *shutdown.borrow();
        if done {
            if bytes > 0 {
                note_progress(r.follower_server_id, &targets, &response);
            }
            Metrics::add(&node.metrics.bytes_out, bytes as u64);
            if failed {
                Metrics::add(&node.metrics.fetch_failed, 1);
            }
            return Ok(response);
        }
        let any_append = std::future::poll_fn(|cx| {
            for w in waits.iter_mut() {
                if w.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
            }
            Poll::Pending
        });
        tokio::select! {
            _ = any_append => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.wait_for(|s| *s) => {}
        }
    }
}
