//! FetchLog (1015): per bucket, whole batches from the fetch offset up to
//! the high watermark, within the request's `max_bytes` and each bucket's
//! `max_fetch_bytes`; with projection pushdown, only the projected columns'
//! Arrow buffers are sent (fjord-format's `FileLogProjection` equivalent,
//! no decoding).
//!
//! Long-poll: while fewer than `min_bytes` are available, the request parks
//! until an append to one of its buckets moves a high watermark (a per-bucket
//! `Notify`, no polling), `max_wait_ms` passes (capped by
//! `fjord.server.fetch-wait-ms-max`), or the server shuts down.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use fjord_format::projection::{project_batches, ProjectionError, ProjectionPlan};
use fjord_proto::messages as pb;
use tokio::time::Instant;

use crate::error::{ApiError, ErrorCode};
use crate::metrics::Metrics;
use crate::node::Node;
use crate::replica::{Replica, TableBucket};

/// Fluss's `FetchParams.FETCH_FROM_EARLIEST_OFFSET`: a fetch offset meaning
/// "the log start offset", sent by clients subscribed at `EARLIEST_OFFSET`.
const FETCH_FROM_EARLIEST_OFFSET: i64 = -2;

/// One bucket of the request, resolved once.
struct BucketTarget {
    bucket_id: i32,
    partition_id: Option<i64>,
    fetch_offset: i64,
    max_fetch_bytes: usize,
    replica: Result<Arc<Replica>, ApiError>,
}

/// One table of the request, resolved once (projection planned once).
struct TableTarget {
    table_id: i64,
    plan: Option<Result<Arc<ProjectionPlan>, ApiError>>,
    buckets: Vec<BucketTarget>,
}

fn resolve(node: &Node, r: &pb::FetchLogRequest) -> Vec<TableTarget> {
    r.tables_req
        .iter()
        .map(|t| {
            let table = node.catalog.table_by_id(t.table_id);
            let plan = if t.projection_pushdown_enabled {
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
                            Ok(columns) => {
                                ProjectionPlan::new(&info.schema, info.schema_id as i16, &columns)
                                    .map(Arc::new)
                                    .map_err(|e| {
                                        ApiError::new(
                                            ErrorCode::InvalidColumnProjection,
                                            e.to_string(),
                                        )
                                    })
                            }
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
            TableTarget {
                table_id: t.table_id,
                plan,
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

/// Applies `plan` to every whole batch of `records`, staying within
/// `max_bytes` (the first batch always goes, so a fetch makes progress).
/// A batch of another schema id than the plan's cannot be projected with it.
fn project(
    plan: &Arc<ProjectionPlan>,
    records: &[u8],
    max_bytes: usize,
) -> Result<Bytes, ApiError> {
    let mut out = Vec::with_capacity(records.len().min(max_bytes));
    let plan_for = |schema_id: i16| {
        if schema_id == plan.schema_id() {
            Ok(Arc::clone(plan))
        } else {
            Err(ProjectionError::SchemaIdMismatch {
                batch: schema_id,
                plan: plan.schema_id(),
            })
        }
    };
    project_batches(records, plan_for, &mut out, max_bytes, true).map_err(|e| {
        ApiError::new(
            ErrorCode::CorruptMessage,
            format!("cannot project a stored batch: {e}"),
        )
    })?;
    Ok(Bytes::from(out))
}

/// One pass over every bucket: returns the response, the record bytes in
/// it, and whether any bucket failed.
async fn read_all(
    targets: &[TableTarget],
    max_bytes: usize,
) -> (pb::FetchLogResponse, usize, bool) {
    let mut total = 0usize;
    let mut failed = false;
    let mut tables_resp = Vec::with_capacity(targets.len());
    for t in targets {
        let mut buckets_resp = Vec::with_capacity(t.buckets.len());
        for b in &t.buckets {
            let outcome = async {
                let replica = b.replica.as_ref().map_err(Clone::clone)?;
                let plan = match &t.plan {
                    None => None,
                    Some(Ok(plan)) => Some(plan),
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
                    return Ok((Bytes::new(), hw, replica.tablet.log_start_offset()));
                }
                // Fluss's FETCH_FROM_EARLIEST_OFFSET: read from the log start.
                let offset = if b.fetch_offset == FETCH_FROM_EARLIEST_OFFSET {
                    replica.tablet.log_start_offset()
                } else {
                    b.fetch_offset
                };
                let read = replica.read(offset, budget).await?;
                let records = match plan {
                    Some(plan) if !read.records.is_empty() => project(plan, &read.records, budget)?,
                    _ => read.records,
                };
                Ok((records, read.high_watermark, read.log_start_offset))
            }
            .await;
            match outcome {
                Ok((records, high_watermark, log_start_offset)) => {
                    total += records.len();
                    buckets_resp.push(pb::PbFetchLogRespForBucket {
                        partition_id: b.partition_id,
                        bucket_id: b.bucket_id,
                        high_watermark: Some(high_watermark),
                        log_start_offset: Some(log_start_offset),
                        // Always set, even empty, as a Fluss server does: the Java
                        // client reads it before checking it is there.
                        records: Some(records),
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
    (pb::FetchLogResponse { tables_resp }, total, failed)
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
        let (response, bytes, failed) = read_all(&targets, max_bytes).await;
        let done = bytes >= min_bytes
            || failed
            || waits.is_empty()
            || Instant::now() >= deadline
            || *shutdown.borrow();
        if done {
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
