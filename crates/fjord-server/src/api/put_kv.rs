//! PutKv (1016): per bucket, merge the KV batch into the bucket's KV tablet,
//! which appends exactly one changelog batch (same writer id and batch
//! sequence) to the bucket's log; answer with the changelog's end offset or
//! an error code.
//!
//! Ordering and durability are ProduceLog's: each request's puts are one
//! job of its connection's [`AppendLane`](super::AppendLane), so a writer's
//! pipelined batches are merged in the order it sent them; `acks = -1`
//! answers once the changelog is durable and the changes are in the KV
//! store (visible to lookups); `0` and `1` answer after the append and
//! finish both in the background.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

use fjord_proto::messages as pb;

use super::append_lane::{AppendJob, AppendTurn};
use crate::error::{ApiError, ErrorCode};
use crate::kv::merge::AggMode;
use crate::kv::{KvTablet, PutOutcome};
use crate::metrics::Metrics;
use crate::node::Node;
use crate::replica::{now_ms, Replica, TableBucket};

/// Longest an acks = -1 put waits for durability when the client gives no
/// timeout, so a stuck disk cannot pin the request slot forever.
const PUT_WAIT_MS_MAX: u64 = 5 * 60 * 1000;

/// The first PutKv version whose clients understand STORAGE_BACKPRESSURE;
/// older ones get KV_STORAGE_EXCEPTION, which they retry too.
const BACKPRESSURE_ERROR_VERSION: i16 = 2;

fn bucket_error(
    bucket_id: i32,
    partition_id: Option<i64>,
    e: &ApiError,
) -> pb::PbPutKvRespForBucket {
    pb::PbPutKvRespForBucket {
        partition_id,
        bucket_id,
        error_code: Some(e.code().code()),
        error_message: Some(e.message().to_owned()),
        log_end_offset: None,
        pressure: None,
        original_partition_name: None,
    }
}

/// One bucket of a request that passed the checks: what the job puts.
struct Put {
    response: usize,
    replica: Arc<Replica>,
    kv: Arc<KvTablet>,
    records: Bytes,
}

/// Puts each bucket's KV batch and answers per bucket.
pub async fn handle(
    node: &Node,
    r: pb::PutKvRequest,
    api_version: i16,
    turn: Option<AppendTurn>,
) -> Result<pb::PutKvResponse, ApiError> {
    let metrics = &node.metrics;
    if !matches!(r.acks, -1..=1) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequiredAcks,
            format!("acks must be -1, 0 or 1, got {}", r.acks),
        ));
    }
    let table = node.catalog.table_by_id(r.table_id);
    let mut responses = Vec::with_capacity(r.buckets_req.len());
    let mut puts: Vec<Put> = Vec::with_capacity(r.buckets_req.len());
    for b in r.buckets_req {
        let checked = (|| {
            let table = table.as_ref().ok_or_else(|| {
                ApiError::new(
                    ErrorCode::UnknownTableOrBucketException,
                    format!("Unknown table id {}", r.table_id),
                )
            })?;
            if let Some(name) = &b.original_partition_name {
                return Err(ApiError::new(
                    ErrorCode::PartitionNotExists,
                    format!(
                        "writes to the historical partition '{name}' are not supported by Fjord"
                    ),
                ));
            }
            let replica = super::replica_of(
                node,
                TableBucket {
                    table_id: r.table_id,
                    partition_id: b.partition_id,
                    bucket_id: b.bucket_id,
                },
            )?;
            let kv = replica.kv.clone().ok_or_else(|| {
                ApiError::new(
                    ErrorCode::NonPrimaryKeyTableException,
                    format!(
                        "Table {}.{} is not a primary key table; write it with ProduceLog",
                        table.path.database, table.path.table
                    ),
                )
            })?;
            Ok::<_, ApiError>((replica, kv))
        })();
        match checked {
            Ok((replica, kv)) => {
                puts.push(Put {
                    response: responses.len(),
                    replica,
                    kv,
                    records: b.records,
                });
                responses.push(pb::PbPutKvRespForBucket {
                    partition_id: b.partition_id,
                    bucket_id: b.bucket_id,
                    error_code: None,
                    error_message: None,
                    log_end_offset: None,
                    pressure: None,
                    original_partition_name: None,
                });
            }
            Err(e) => responses.push(bucket_error(b.bucket_id, b.partition_id, &e)),
        }
    }
    if puts.is_empty() {
        return Ok(pb::PutKvResponse {
            buckets_resp: responses,
        });
    }

    let agg_mode = AggMode::from_wire(r.agg_mode.unwrap_or(0));
    let targets = r.target_columns;
    let (done_tx, done_rx) = oneshot::channel();
    let job: AppendJob = Box::new(move || {
        let now = now_ms();
        let outcomes: Vec<(Put, Result<PutOutcome, ApiError>)> = puts
            .into_iter()
            .map(|put| {
                let outcome = put.kv.put(&put.records, &targets, agg_mode, now);
                if outcome.is_ok() && !put.replica.tablet.ack_needs_sync() {
                    // Interval flushing: durable enough at write time.
                    put.replica.publish();
                }
                (put, outcome)
            })
            .collect();
        let _ = done_tx.send(outcomes);
    });
    match turn {
        Some(turn) => turn.submit(job),
        None => {
            tokio::task::spawn_blocking(job);
        }
    }
    let Ok(outcomes) = done_rx.await else {
        let e = ApiError::new(
            ErrorCode::UnknownServerError,
            "the put job ended without an outcome".to_owned(),
        );
        for response in &mut responses {
            if response.error_code.is_none() {
                *response = bucket_error(response.bucket_id, response.partition_id, &e);
            }
        }
        return Ok(pb::PutKvResponse {
            buckets_resp: responses,
        });
    };

    let wait_durable = r.acks == -1;
    let mut awaited: Vec<usize> = Vec::new();
    let mut to_sync: Vec<(usize, Arc<Replica>, i64)> = Vec::new();
    for (put, outcome) in outcomes {
        let response = &mut responses[put.response];
        match outcome {
            Ok(outcome) => {
                if !outcome.duplicate {
                    Metrics::add(&metrics.bytes_in, put.records.len() as u64);
                }
                if put.replica.tablet.ack_needs_sync() {
                    if wait_durable {
                        awaited.push(put.response);
                    }
                    to_sync.push((
                        put.response,
                        Arc::clone(&put.replica),
                        outcome.end_offset - 1,
                    ));
                }
                response.log_end_offset = Some(outcome.end_offset);
                let pressure = put.kv.pressure();
                if pressure > 0.0 {
                    response.pressure = Some(pressure);
                }
            }
            Err(e) => {
                let e = if e.code() == ErrorCode::StorageBackpressureException
                    && api_version < BACKPRESSURE_ERROR_VERSION
                {
                    ApiError::new(ErrorCode::KvStorageException, e.message().to_owned())
                } else {
                    e
                };
                *response = bucket_error(response.bucket_id, response.partition_id, &e);
            }
        }
    }
    let durable = (!to_sync.is_empty())
        .then(|| super::produce_log::spawn_durable_waits(to_sync, wait_durable));
    if let Some(durable) = durable.filter(|_| !awaited.is_empty()) {
        let timeout_ms = u64::try_from(r.timeout_ms).ok().filter(|&ms| ms > 0);
        let wait = Duration::from_millis(timeout_ms.unwrap_or(PUT_WAIT_MS_MAX));
        let failed = |e: ApiError| -> Vec<(usize, Result<(), ApiError>)> {
            awaited.iter().map(|&i| (i, Err(e.clone()))).collect()
        };
        let waited = match tokio::time::timeout(wait, durable).await {
            Ok(Ok(waited)) => waited,
            Ok(Err(e)) => failed(ApiError::new(
                ErrorCode::UnknownServerError,
                format!("durability wait failed: {e}"),
            )),
            Err(_) => failed(ApiError::new(
                ErrorCode::RequestTimeOut,
                format!(
                    "the changelog was written but not reported durable within timeout_ms = {}",
                    r.timeout_ms
                ),
            )),
        };
        for (i, outcome) in waited {
            if let Err(e) = outcome {
                let (bucket_id, partition_id) = (responses[i].bucket_id, responses[i].partition_id);
                responses[i] = bucket_error(bucket_id, partition_id, &e);
            }
        }
    }
    Ok(pb::PutKvResponse {
        buckets_resp: responses,
    })
}
