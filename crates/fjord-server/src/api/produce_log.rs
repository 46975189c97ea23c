//! ProduceLog (1014): per bucket, check the batch headers (O(header) per
//! batch: size, magic, schema id, and a V1 batch's statistics block, which
//! FetchLog filters by; the storage engine then checks CRC-32C and
//! writer sequences), append, and answer the base offset or an error code.
//!
//! acks: `0` and `1` answer once the batches are written; `-1` answers once
//! the storage engine reports them durable under its flush policy (group
//! commit: the buckets of one request share the wait). Each request's
//! appends are one job of its connection's [`AppendLane`](super::AppendLane),
//! which runs them in arrival order on the blocking pool; the durability
//! waits of a request run in one blocking-pool job of their own.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fjord_storage::AppendInfo;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::error;

use fjord_format::log_batch::{self, LogBatchError};
use fjord_proto::messages as pb;

use super::append_lane::{AppendJob, AppendTurn};
use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::TableInfo;
use crate::metrics::Metrics;
use crate::node::Node;
use crate::replica::{Replica, TableBucket};

/// Longest an acks = -1 produce waits for durability when the client gives
/// no timeout, so a stuck disk cannot pin the request slot forever.
const PRODUCE_WAIT_MS_MAX: u64 = 5 * 60 * 1000;

/// What the header walk learned about one bucket's records.
struct Checked {
    record_count: u64,
}

/// Walks the batch headers of `records`: whole batches only, known magic,
/// a schema id of the table. Never touches record bodies.
fn check_headers(table: &TableInfo, bucket: i32, records: &[u8]) -> Result<Checked, ApiError> {
    let corrupt = |position: usize, why: String| {
        ApiError::new(
            ErrorCode::CorruptMessage,
            format!(
                "table {} bucket {bucket}: batch at byte {position}: {why}",
                table.table_id
            ),
        )
    };
    let mut position = 0usize;
    let mut record_count = 0u64;
    while position < records.len() {
        let rest = &records[position..];
        let (size, magic) = match log_batch::peek_size_and_magic(rest) {
            Ok(Some(v)) => v,
            Ok(None) => {
                return Err(corrupt(
                    position,
                    format!("{} trailing bytes are not a batch header", rest.len()),
                ))
            }
            Err(e) => return Err(corrupt(position, e.to_string())),
        };
        let layout = log_batch::layout(magic)
            .ok_or_else(|| corrupt(position, LogBatchError::UnknownMagic { magic }.to_string()))?;
        if size < layout.header_size || size > rest.len() {
            return Err(corrupt(
                position,
                format!(
                    "batch length {size} does not fit the {} bytes received",
                    rest.len()
                ),
            ));
        }
        let schema_id = i16::from_le_bytes([rest[layout.schema_id], rest[layout.schema_id + 1]]);
        // Any schema id the table has had (a writer that has not seen an
        // ALTER TABLE yet writes the one before); readers decode each batch
        // with its own. A header-only batch carries no rows and so no schema.
        if size > layout.header_size && table.schema_by_id(i32::from(schema_id)).is_none() {
            return Err(ApiError::new(
                ErrorCode::SchemaNotExist,
                format!(
                    "table {} bucket {bucket}: batch at byte {position} has schema id {schema_id}, but the table's schema ids are {} to {}",
                    table.table_id, crate::meta::catalog::FIRST_SCHEMA_ID, table.schema_id
                ),
            ));
        }
        // A V1+ batch may carry a statistics block (Fluss 1.0, for tables
        // with `table.statistics.columns`). FetchLog trusts it to skip
        // batches, so it must be well formed and name columns of the
        // batch's own schema.
        if let Some(at) = layout.statistics_length {
            let raw = i32::from_le_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
            let len = usize::try_from(raw)
                .ok()
                .filter(|&n| n <= size - layout.header_size)
                .ok_or_else(|| {
                    corrupt(
                        position,
                        format!("statistics length {raw} does not fit the batch of {size} bytes"),
                    )
                })?;
            if len > 0 {
                let block = &rest[layout.header_size..layout.header_size + len];
                let schema = table.schema_by_id(i32::from(schema_id)).ok_or_else(|| {
                    corrupt(
                        position,
                        "statistics in a batch without a schema".to_owned(),
                    )
                })?;
                fjord_format::statistics::parse_statistics(block, &schema.schema)
                    .map_err(|e| corrupt(position, e.to_string()))?;
            }
        }
        let at = layout.record_count;
        let count = i32::from_le_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
        record_count += u64::try_from(count).unwrap_or(0);
        position += size;
    }
    if position == 0 {
        return Err(corrupt(
            0,
            "the request carries no batch for this bucket".to_owned(),
        ));
    }
    Ok(Checked { record_count })
}

fn bucket_error(
    bucket_id: i32,
    partition_id: Option<i64>,
    e: &ApiError,
) -> pb::PbProduceLogRespForBucket {
    pb::PbProduceLogRespForBucket {
        partition_id,
        bucket_id,
        error_code: Some(e.code().code()),
        error_message: Some(e.message().to_owned()),
        base_offset: None,
        original_partition_name: None,
    }
}

/// One bucket of a request that passed the header walk: what the blocking
/// job appends.
struct Append {
    /// Index of the bucket's entry in the response.
    response: usize,
    replica: Arc<Replica>,
    records: Bytes,
    record_count: u64,
}

/// Appends each bucket's batches and answers per bucket. With a `turn`, the
/// appends happen in the connection's arrival order (see
/// [`AppendLane`](super::AppendLane)); without one (a request not from a
/// connection's reader) they run in a blocking-pool job of their own.
///
/// The headers are checked here; the appends of all buckets then run in
/// turn on the blocking pool, and the durability waits of all buckets in
/// one further blocking-pool job: awaited for acks = -1 (group commit shares
/// the fsyncs with concurrent requests), detached for acks 0/1, which then
/// publishes the batches without holding up the answer.
pub async fn handle(
    node: &Node,
    r: pb::ProduceLogRequest,
    turn: Option<AppendTurn>,
) -> Result<pb::ProduceLogResponse, ApiError> {
    let metrics = &node.metrics;
    Metrics::add(&metrics.produce_requests, 1);
    if !matches!(r.acks, -1..=1) {
        Metrics::add(&metrics.produce_failed, 1);
        return Err(ApiError::new(
            ErrorCode::InvalidRequiredAcks,
            format!("acks must be -1, 0 or 1, got {}", r.acks),
        ));
    }
    let wait_durable = r.acks == -1;
    let table = node.catalog.table_by_id(r.table_id);
    let mut responses = Vec::with_capacity(r.buckets_req.len());
    let mut appends: Vec<Append> = Vec::with_capacity(r.buckets_req.len());
    let mut failed = false;
    for b in r.buckets_req {
        let checked = (|| {
            let table = table.as_ref().ok_or_else(|| {
                ApiError::new(
                    ErrorCode::UnknownTableOrBucketException,
                    format!("Unknown table id {}", r.table_id),
                )
            })?;
            let replica = super::replica_of(
                node,
                TableBucket {
                    table_id: r.table_id,
                    partition_id: b.partition_id,
                    bucket_id: b.bucket_id,
                },
            )?;
            let checked = check_headers(table, b.bucket_id, &b.records)?;
            Ok::<_, ApiError>((replica, checked.record_count))
        })();
        match checked {
            Ok((replica, record_count)) => {
                appends.push(Append {
                    response: responses.len(),
                    replica,
                    records: b.records,
                    record_count,
                });
                // Filled in with the base offset (or the error) below.
                responses.push(pb::PbProduceLogRespForBucket {
                    partition_id: b.partition_id,
                    bucket_id: b.bucket_id,
                    error_code: None,
                    error_message: None,
                    base_offset: None,
                    original_partition_name: None,
                });
            }
            Err(e) => {
                failed = true;
                responses.push(bucket_error(b.bucket_id, b.partition_id, &e));
            }
        }
    }
    if appends.is_empty() {
        if failed {
            Metrics::add(&metrics.produce_failed, 1);
        }
        return Ok(pb::ProduceLogResponse {
            buckets_resp: responses,
        });
    }

    let (appended_tx, appended_rx) = oneshot::channel();
    // The receiver is gone only if the request was abandoned; the appends
    // stand either way. A panic drops `appended_tx`: the request then
    // answers UnknownServerError below.
    let job: AppendJob = Box::new(move || {
        let _ = appended_tx.send(run_appends(appends));
    });
    match turn {
        Some(turn) => turn.submit(job),
        None => {
            tokio::task::spawn_blocking(job);
        }
    }
    let outcomes: Vec<(Append, Result<AppendInfo, ApiError>)> = match appended_rx.await {
        Ok(outcomes) => outcomes,
        Err(_) => {
            // The job ended before reporting (it panicked): nothing known.
            let e = ApiError::new(
                ErrorCode::UnknownServerError,
                "the append job ended without an outcome".to_owned(),
            );
            for response in &mut responses {
                if response.error_code.is_none() {
                    *response = bucket_error(response.bucket_id, response.partition_id, &e);
                }
            }
            Metrics::add(&metrics.produce_failed, 1);
            return Ok(pb::ProduceLogResponse {
                buckets_resp: responses,
            });
        }
    };
    // Response indices of the buckets whose answer waits for an fsync.
    let mut awaited: Vec<usize> = Vec::new();
    // What to make durable: (response index, replica, last offset).
    let mut to_sync: Vec<(usize, Arc<Replica>, i64)> = Vec::new();
    for (append, outcome) in outcomes {
        let response = &mut responses[append.response];
        match outcome {
            Ok(info) => {
                if !info.duplicate {
                    Metrics::add(&metrics.messages_in, append.record_count);
                    Metrics::add(&metrics.bytes_in, append.records.len() as u64);
                    if append.replica.tablet.ack_needs_sync() {
                        if wait_durable {
                            awaited.push(append.response);
                        }
                        to_sync.push((append.response, append.replica, info.last_offset));
                    }
                }
                response.base_offset = Some(info.first_offset);
            }
            Err(e) => {
                failed = true;
                *response = bucket_error(response.bucket_id, response.partition_id, &e);
            }
        }
    }
    // Every bucket's fsync waits on the blocking pool (group commit shares
    // them with concurrent requests); for acks 0/1 the waits run detached
    // and make the batches durable, and so visible, after the answer.
    let durable = (!to_sync.is_empty()).then(|| spawn_durable_waits(to_sync, wait_durable));
    if let Some(durable) = durable.filter(|_| !awaited.is_empty()) {
        // The client's timeout bounds the wait; the append itself stands (a
        // retry with the same writer sequence is then acknowledged as a
        // duplicate).
        let timeout_ms = u64::try_from(r.timeout_ms).ok().filter(|&ms| ms > 0);
        let wait = Duration::from_millis(timeout_ms.unwrap_or(PRODUCE_WAIT_MS_MAX));
        let waited: Vec<(usize, Result<(), ApiError>)> =
            match tokio::time::timeout(wait, durable).await {
                Ok(Ok(waited)) => waited,
                Ok(Err(e)) => every_durable_wait_failed(
                    &awaited,
                    ApiError::new(
                        ErrorCode::UnknownServerError,
                        format!("durability wait failed: {e}"),
                    ),
                ),
                Err(_) => every_durable_wait_failed(
                    &awaited,
                    ApiError::new(
                        ErrorCode::RequestTimeOut,
                        format!(
                        "the batches were written but not reported durable within timeout_ms = {}",
                        r.timeout_ms
                    ),
                    ),
                ),
            };
        for (i, outcome) in waited {
            if let Err(e) = outcome {
                failed = true;
                let (bucket_id, partition_id) = (responses[i].bucket_id, responses[i].partition_id);
                responses[i] = bucket_error(bucket_id, partition_id, &e);
            }
        }
    }
    if failed {
        Metrics::add(&metrics.produce_failed, 1);
    }
    Ok(pb::ProduceLogResponse {
        buckets_resp: responses,
    })
}

/// `error` for every bucket whose answer waited for durability.
fn every_durable_wait_failed(
    awaited: &[usize],
    error: ApiError,
) -> Vec<(usize, Result<(), ApiError>)> {
    awaited.iter().map(|&i| (i, Err(error.clone()))).collect()
}

/// Appends every bucket of one request, in order (blocking).
fn run_appends(appends: Vec<Append>) -> Vec<(Append, Result<AppendInfo, ApiError>)> {
    appends
        .into_iter()
        .map(|append| {
            let outcome = append.replica.append_blocking(&append.records);
            (append, outcome)
        })
        .collect()
}

/// Makes every `(response index, replica, last offset)` durable: each
/// bucket's wait on the blocking pool beside the others (a wait may run its
/// tablet's fsync itself, and each bucket is a tablet of its own, so one
/// after another a request over N buckets would pay N fsync latencies
/// instead of about one), joined by one task. Its result is each bucket's
/// outcome when `report` (acks = -1); otherwise (acks 0/1, answered
/// already) failures are logged and it is empty.
///
/// The blocking pool keeps its threads between requests, so a request
/// starts no thread of its own (a scoped thread per extra bucket cost a
/// thread's creation and exit per bucket and fsync).
///
/// Over two buckets or more, one file system sync first covers them all
/// ([`fjord_storage::sync_together`]: a request over four buckets paid
/// four fdatasyncs, ~100 µs of kernel CPU each here, where one syncfs
/// costs about one). The same blocking call then answers every log-table
/// bucket the sync made durable (its wait returns at once), so a request
/// hands work to the blocking pool once, not once per bucket; the rest
/// (a primary-key bucket, whose wait applies its changes to the KV store,
/// or a bucket the sync did not cover) wait beside each other as above.
pub(super) fn spawn_durable_waits(
    to_sync: Vec<(usize, Arc<Replica>, i64)>,
    report: bool,
) -> JoinHandle<Vec<(usize, Result<(), ApiError>)>> {
    tokio::spawn(async move {
        let mut waited = Vec::with_capacity(if report { to_sync.len() } else { 0 });
        let mut to_sync = to_sync;
        let together = to_sync
            .iter()
            .filter(|(_, r, _)| r.tablet.config().sync_file_system)
            .count();
        if together >= 2 {
            let replicas: Vec<(Arc<Replica>, i64)> =
                to_sync.iter().map(|(_, r, o)| (r.clone(), *o)).collect();
            // Per bucket, its outcome if the file system sync answered it.
            let answered = tokio::task::spawn_blocking(move || {
                let tablets: Vec<&fjord_storage::LogTablet> =
                    replicas.iter().map(|(r, _)| &*r.tablet).collect();
                fjord_storage::sync_together(&tablets);
                replicas
                    .iter()
                    .map(|(replica, last_offset)| {
                        (replica.kv.is_none() && replica.tablet.durable_offset() > *last_offset)
                            .then(|| replica.wait_durable_blocking(*last_offset))
                    })
                    .collect::<Vec<_>>()
            })
            .await
            // Had it failed, every bucket still waits below.
            .unwrap_or_default();
            let mut answered = answered.into_iter();
            let mut rest = Vec::with_capacity(to_sync.len());
            for (response, replica, last_offset) in to_sync {
                match answered.next().flatten() {
                    Some(outcome) => record(&mut waited, report, response, &replica, outcome),
                    None => rest.push((response, replica, last_offset)),
                }
            }
            to_sync = rest;
        }
        let waits: Vec<_> = to_sync
            .into_iter()
            .map(|(response, replica, last_offset)| {
                let waiter = replica.clone();
                let wait =
                    tokio::task::spawn_blocking(move || waiter.wait_durable_blocking(last_offset));
                (response, replica, wait)
            })
            .collect();
        for (response, replica, wait) in waits {
            let outcome = wait.await.unwrap_or_else(|e| {
                Err(ApiError::new(
                    ErrorCode::UnknownServerError,
                    format!(
                        "the durability wait of bucket {} failed: {e}",
                        replica.bucket
                    ),
                ))
            });
            record(&mut waited, report, response, &replica, outcome);
        }
        waited
    })
}

/// Keeps a bucket's durability outcome for the answer (`report`), or logs
/// its failure (acks 0/1: answered already).
fn record(
    waited: &mut Vec<(usize, Result<(), ApiError>)>,
    report: bool,
    response: usize,
    replica: &Replica,
    outcome: Result<(), ApiError>,
) {
    if report {
        waited.push((response, outcome));
    } else if let Err(e) = outcome {
        error!(bucket = %replica.bucket, error = %e, "background fsync failed");
    }
}
