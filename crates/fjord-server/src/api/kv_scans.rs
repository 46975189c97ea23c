//! LimitScan (1033) and ScanKv (1061): a bucket's rows in key order.
//!
//! LimitScan answers one request: for a primary-key table the first
//! `limit` rows of the KV store as a value batch; for a log table the
//! batches holding the last `limit` records below the high watermark (as
//! Fluss's `limitLogScan`). ScanKv streams a bucket's whole state through a
//! session ([`KvScanners`](crate::kv::scanners::KvScanners)) over a store
//! snapshot, a batch of at most `batch_size_bytes` per request. Both put
//! their errors in the response body, as Fluss does.

use bytes::Bytes;
use fjord_format::kv::value_batch::ValueBatchBuilder;
use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::kv::scanners::ScanSession;
use crate::node::Node;
use crate::replica::{storage_error, TableBucket};

/// Most bytes of log batches a LimitScan of a log table returns.
pub const LIMIT_SCAN_LOG_BYTES_MAX: usize = 16 << 20;

/// Most bytes of rows a LimitScan of a primary-key table returns, whatever
/// its limit (Fluss sets none; its answer must still fit a frame).
pub const LIMIT_SCAN_KV_BYTES_MAX: usize = 64 << 20;

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(ApiError::new(
            ErrorCode::UnknownServerError,
            format!("the scan failed: {e}"),
        ))
    })
}

/// LimitScan.
pub async fn limit_scan(node: &Node, r: pb::LimitScanRequest) -> pb::LimitScanResponse {
    match limit_scan_inner(node, r).await {
        Ok(response) => response,
        Err(e) => pb::LimitScanResponse {
            error_code: Some(e.code().code()),
            error_message: Some(e.message().to_owned()),
            is_log_table: None,
            records: None,
        },
    }
}

async fn limit_scan_inner(
    node: &Node,
    r: pb::LimitScanRequest,
) -> Result<pb::LimitScanResponse, ApiError> {
    if node.catalog.table_by_id(r.table_id).is_none() {
        return Err(ApiError::new(
            ErrorCode::UnknownTableOrBucketException,
            format!("Unknown table id {}", r.table_id),
        ));
    }
    let replica = super::replica_of(
        node,
        TableBucket {
            table_id: r.table_id,
            partition_id: r.partition_id,
            bucket_id: r.bucket_id,
        },
    )?;
    // As Fluss: no upper bound; a limit of 0 or less returns nothing.
    let limit = usize::try_from(r.limit).unwrap_or(0);
    match replica.kv.clone() {
        Some(kv) => {
            let records = blocking(move || {
                let (snapshot, _) = kv.snapshot()?;
                let mut out = Vec::new();
                let mut batch = ValueBatchBuilder::start(&mut out);
                let mut rows = 0;
                let mut refused = None;
                snapshot
                    .scan_from(None, |_, value| {
                        if rows >= limit {
                            return false;
                        }
                        if batch.size_in_bytes() + value.len() > LIMIT_SCAN_KV_BYTES_MAX {
                            refused = Some(format!(
                                "the first {limit} rows pass {LIMIT_SCAN_KV_BYTES_MAX} bytes; ask for fewer"
                            ));
                            return false;
                        }
                        if let Err(e) = batch.append_value(value) {
                            refused = Some(e.to_string());
                            return false;
                        }
                        rows += 1;
                        rows < limit
                    })
                    .map_err(|e| storage_error(kv.bucket(), e))?;
                if let Some(e) = refused {
                    return Err(ApiError::new(
                        ErrorCode::RecordTooLargeException,
                        format!("{}: {e}", kv.bucket()),
                    ));
                }
                batch.finish();
                Ok(Bytes::from(out))
            })
            .await?;
            Ok(pb::LimitScanResponse {
                error_code: None,
                error_message: None,
                is_log_table: Some(false),
                records: Some(records),
            })
        }
        None => {
            let tablet = &replica.tablet;
            let high_watermark = tablet.high_watermark();
            let from = tablet
                .log_start_offset()
                .max(high_watermark - i64::from(r.limit));
            let records = if from >= high_watermark {
                Bytes::new()
            } else {
                replica.read(from, LIMIT_SCAN_LOG_BYTES_MAX).await?.records
            };
            Ok(pb::LimitScanResponse {
                error_code: None,
                error_message: None,
                is_log_table: Some(true),
                records: Some(records),
            })
        }
    }
}

fn scan_error(e: &ApiError, scanner_id: Option<Bytes>) -> pb::ScanKvResponse {
    pb::ScanKvResponse {
        error_code: Some(e.code().code()),
        error_message: Some(e.message().to_owned()),
        scanner_id,
        has_more_results: None,
        records: None,
        log_offset: None,
    }
}

fn invalid(why: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidScanRequest, why.to_owned())
}

/// ScanKv.
pub async fn scan_kv(node: &Node, r: pb::ScanKvRequest) -> pb::ScanKvResponse {
    let scanners = &node.kv_scanners;
    scanners.expire();
    if r.bucket_scan_req.is_some() && r.scanner_id.is_some() {
        return scan_error(
            &invalid("ScanKvRequest must not set both bucket_scan_req and scanner_id."),
            None,
        );
    }
    let close = r.close_scanner == Some(true);
    if r.bucket_scan_req.is_some() && close {
        return scan_error(
            &invalid("ScanKvRequest must not set close_scanner together with bucket_scan_req."),
            None,
        );
    }
    let batch_bytes = if close {
        0
    } else {
        match r.batch_size_bytes {
            None => {
                return scan_error(
                    &invalid("batch_size_bytes is required for data-fetching scan requests."),
                    None,
                )
            }
            Some(n) if n <= 0 => {
                return scan_error(&invalid("batch_size_bytes must be greater than 0."), None)
            }
            Some(n) => (n as usize).min(scanners.batch_bytes_max()),
        }
    };

    // Open a new session, or take the one the request continues.
    let (id, mut session, log_offset) = match (r.bucket_scan_req, r.scanner_id) {
        (Some(req), _) => {
            let opened = (|| {
                if node.catalog.table_by_id(req.table_id).is_none() {
                    return Err(ApiError::new(
                        ErrorCode::UnknownTableOrBucketException,
                        format!("Unknown table id {}", req.table_id),
                    ));
                }
                let bucket = TableBucket {
                    table_id: req.table_id,
                    partition_id: req.partition_id,
                    bucket_id: req.bucket_id,
                };
                let replica = super::replica_of(node, bucket)?;
                let kv = replica.kv.clone().ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::NonPrimaryKeyTableException,
                        format!("the primary key table not exists for {bucket}"),
                    )
                })?;
                scanners.check_room(bucket)?;
                let limit = req.limit.filter(|&l| l > 0).map(|l| l as u64);
                // The snapshot and the offset it stands for are taken
                // together: the store only moves under the flush lock.
                let (snapshot, applied) = kv.snapshot()?;
                Ok((
                    scanners.new_id(),
                    ScanSession::new(bucket, snapshot, limit),
                    Some(applied.offset),
                ))
            })();
            match opened {
                Ok(opened) => opened,
                Err(e) => return scan_error(&e, None),
            }
        }
        (None, Some(id)) => match scanners.take(&id) {
            Ok(session) if close => {
                drop(session);
                return pb::ScanKvResponse {
                    error_code: None,
                    error_message: None,
                    scanner_id: Some(id),
                    has_more_results: Some(false),
                    records: None,
                    log_offset: None,
                };
            }
            Ok(session) => (id, session, None),
            Err(_) if close => {
                return pb::ScanKvResponse {
                    error_code: None,
                    error_message: None,
                    scanner_id: Some(id),
                    has_more_results: Some(false),
                    records: None,
                    log_offset: None,
                }
            }
            Err(e) => return scan_error(&e, None),
        },
        (None, None) => {
            return scan_error(
                &invalid(
                    "ScanKvRequest must have either bucket_scan_req (new scan) or scanner_id (continuation).",
                ),
                None,
            )
        }
    };

    // The first call of a session is 0, then 1, 2, ...: a retried or
    // reordered call is refused (a continuation keeps its session).
    let expected = session.call_seq + 1;
    let refusal = match r.call_seq_id {
        None => Some(invalid(
            "call_seq_id is required for ScanKV requests to ensure in-order processing and at-least-once semantics.",
        )),
        Some(seq) if seq != expected => Some(invalid(&format!(
            "Out-of-order scan request: expected callSeqId={expected} but got {seq}."
        ))),
        Some(seq) => {
            session.call_seq = seq;
            None
        }
    };
    if let Some(e) = refusal {
        if log_offset.is_none() {
            scanners.put_back(id, session);
        }
        return scan_error(&e, None);
    }

    let read = tokio::task::spawn_blocking(move || {
        let batch = read_batch(&mut session, batch_bytes);
        (session, batch)
    })
    .await;
    let (session, batch) = match read {
        Ok(done) => done,
        Err(e) => {
            return scan_error(
                &ApiError::new(
                    ErrorCode::UnknownServerError,
                    format!("the scan failed: {e}"),
                ),
                None,
            )
        }
    };
    let (records, has_more) = match batch {
        Ok(done) => done,
        Err(e) => return scan_error(&e, None),
    };
    if log_offset.is_some() && records.is_none() {
        // An empty bucket: no session, only the offset the scan stands for.
        return pb::ScanKvResponse {
            error_code: None,
            error_message: None,
            scanner_id: None,
            has_more_results: Some(false),
            records: None,
            log_offset,
        };
    }
    if has_more {
        let kept = if log_offset.is_some() {
            scanners.register(id.clone(), session)
        } else {
            scanners.put_back(id.clone(), session);
            Ok(())
        };
        if let Err(e) = kept {
            return scan_error(&e, None);
        }
    }
    pb::ScanKvResponse {
        error_code: None,
        error_message: None,
        scanner_id: Some(id),
        has_more_results: Some(has_more),
        records,
        log_offset,
    }
}

/// Reads the session's next batch: rows after its last key, at least one,
/// until `batch_bytes` or its limit. Returns the value batch (`None` when
/// no row was left) and whether rows remain.
fn read_batch(
    session: &mut ScanSession,
    batch_bytes: usize,
) -> Result<(Option<Bytes>, bool), ApiError> {
    let mut out = Vec::new();
    let mut batch = ValueBatchBuilder::start(&mut out);
    let mut rows = 0u64;
    let mut more = false;
    let mut last_key: Option<Vec<u8>> = None;
    let mut refused = None;
    let remaining = session.remaining;
    session
        .snapshot
        .scan_from(session.last_key.as_deref(), |key, value| {
            let full = rows > 0 && batch.size_in_bytes() >= batch_bytes;
            let limited = remaining.is_some_and(|r| rows >= r);
            if full || limited {
                more = !limited;
                return false;
            }
            if let Err(e) = batch.append_value(value) {
                refused = Some(e);
                return false;
            }
            rows += 1;
            match &mut last_key {
                Some(k) => {
                    k.clear();
                    k.extend_from_slice(key);
                }
                None => last_key = Some(key.to_vec()),
            }
            true
        })
        .map_err(|e| storage_error(session.bucket, e))?;
    if let Some(e) = refused {
        return Err(ApiError::new(
            ErrorCode::KvStorageException,
            format!("{}: a stored value cannot be returned: {e}", session.bucket),
        ));
    }
    batch.finish();
    if let Some(r) = &mut session.remaining {
        *r -= rows;
        if *r == 0 {
            more = false;
        }
    }
    if last_key.is_some() {
        session.last_key = last_key;
    }
    Ok(((rows > 0).then(|| Bytes::from(out)), more))
}
