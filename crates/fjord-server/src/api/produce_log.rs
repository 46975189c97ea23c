//! ProduceLog (1014): per bucket, check the batch headers (O(header) per
//! batch: size, magic, schema id; the storage engine then checks CRC-32C and
//! writer sequences), append, and answer the base offset or an error code.
//!
//! acks: `0` and `1` answer once the batches are written; `-1` answers once
//! the storage engine reports them durable under its flush policy (group
//! commit: the buckets of one request share the wait).

use std::time::Duration;

use tokio::sync::oneshot;

use fjord_format::log_batch::{self, LogBatchError};
use fjord_proto::messages as pb;

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
/// the table's schema id. Never touches record bodies.
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
        // A header-only batch carries no rows and so no schema to check.
        if size > layout.header_size && i32::from(schema_id) != table.schema_id {
            return Err(ApiError::new(
                ErrorCode::SchemaNotExist,
                format!(
                    "table {} bucket {bucket}: batch at byte {position} has schema id {schema_id}, but the table's schema id is {}",
                    table.table_id, table.schema_id
                ),
            ));
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

/// A ProduceLog request's place in its connection's order of appends.
///
/// Requests of one connection run concurrently (a slow fsync or long-poll
/// must not hold up the next request), but a client pipelining several
/// batches of one bucket relies on them being appended in the order it sent
/// them: an idempotent writer's batch sequences are checked in that order,
/// and a reordering would be refused as out of order and retried. So each
/// ProduceLog waits for the previous one's appends (not its durability wait)
/// before appending, and releases the next when its own appends are done —
/// or when it is dropped, so an early error never stalls the connection.
pub struct AppendTurn {
    previous: Option<oneshot::Receiver<()>>,
    appended: oneshot::Sender<()>,
}

impl AppendTurn {
    /// The turn after `previous` (None for a connection's first ProduceLog),
    /// and the receiver the next turn waits on.
    pub fn after(previous: Option<oneshot::Receiver<()>>) -> (Self, oneshot::Receiver<()>) {
        let (appended, next) = oneshot::channel();
        (Self { previous, appended }, next)
    }

    /// Waits until the previous request has appended (or given up).
    async fn wait(&mut self) {
        if let Some(previous) = self.previous.take() {
            // An Err means the previous request ended without appending:
            // equally our turn.
            let _ = previous.await;
        }
    }

    /// Lets the next request append.
    fn done(self) {
        let _ = self.appended.send(());
    }
}

/// Appends each bucket's batches and answers per bucket. With a `turn`, the
/// appends happen after the previous ProduceLog of the connection appended.
pub async fn handle(
    node: &Node,
    r: pb::ProduceLogRequest,
    mut turn: Option<AppendTurn>,
) -> Result<pb::ProduceLogResponse, ApiError> {
    if let Some(turn) = turn.as_mut() {
        turn.wait().await;
    }
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
    // (index into responses, replica, last offset) of appends still to be made durable.
    let mut pending: Vec<(usize, std::sync::Arc<Replica>, i64)> = Vec::new();
    let mut failed = false;
    for b in r.buckets_req {
        let result = async {
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
            let bytes = b.records.len() as u64;
            let info = replica.append(b.records).await?;
            if !info.duplicate {
                Metrics::add(&metrics.messages_in, checked.record_count);
                Metrics::add(&metrics.bytes_in, bytes);
            }
            Ok((replica, info))
        }
        .await;
        match result {
            Ok((replica, info)) => {
                if !info.duplicate {
                    if wait_durable && replica.tablet.ack_needs_sync() {
                        pending.push((responses.len(), replica, info.last_offset));
                    } else {
                        replica.publish_in_background(info.last_offset);
                    }
                }
                responses.push(pb::PbProduceLogRespForBucket {
                    partition_id: b.partition_id,
                    bucket_id: b.bucket_id,
                    error_code: None,
                    error_message: None,
                    base_offset: Some(info.first_offset),
                    original_partition_name: None,
                });
            }
            Err(e) => {
                failed = true;
                responses.push(bucket_error(b.bucket_id, b.partition_id, &e));
            }
        }
    }
    if let Some(turn) = turn {
        turn.done();
    }
    // acks = -1: wait for every bucket's fsync at once (they run in parallel
    // on the blocking pool and share fsyncs with concurrent requests).
    let waits: Vec<_> = pending
        .into_iter()
        .map(|(i, replica, offset)| {
            (
                i,
                tokio::spawn(async move { replica.wait_durable(offset).await }),
            )
        })
        .collect();
    // The client's timeout bounds the wait; the append itself stands (a
    // retry with the same writer sequence is then acknowledged as a duplicate).
    let timeout_ms = u64::try_from(r.timeout_ms).ok().filter(|&ms| ms > 0);
    let deadline = tokio::time::Instant::now()
        + Duration::from_millis(timeout_ms.unwrap_or(PRODUCE_WAIT_MS_MAX));
    for (i, wait) in waits {
        let outcome = match tokio::time::timeout_at(deadline, wait).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(ApiError::new(
                ErrorCode::UnknownServerError,
                format!("durability wait failed: {e}"),
            )),
            Err(_) => Err(ApiError::new(
                ErrorCode::RequestTimeOut,
                format!(
                    "the batches were written but not reported durable within timeout_ms = {}",
                    r.timeout_ms
                ),
            )),
        };
        if let Err(e) = outcome {
            failed = true;
            let (bucket_id, partition_id) = (responses[i].bucket_id, responses[i].partition_id);
            responses[i] = bucket_error(bucket_id, partition_id, &e);
        }
    }
    if failed {
        Metrics::add(&metrics.produce_failed, 1);
    }
    Ok(pb::ProduceLogResponse {
        buckets_resp: responses,
    })
}
