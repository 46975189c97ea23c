//! ListOffsets (1021): per bucket, the earliest offset (log start), the
//! latest (high watermark), or the first offset whose batch commit timestamp
//! is at or after a timestamp (the high watermark if none is).

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::node::Node;
use crate::replica::{now_ms, storage_error, TableBucket};

/// Fluss's `ListOffsetsParam.EARLIEST_OFFSET_TYPE`.
const EARLIEST: i32 = 0;
/// Fluss's `ListOffsetsParam.LATEST_OFFSET_TYPE`.
const LATEST: i32 = 1;
/// Fluss's `ListOffsetsParam.TIMESTAMP_OFFSET_TYPE`.
const TIMESTAMP: i32 = 2;

async fn offset_of(
    node: &Node,
    r: &pb::ListOffsetsRequest,
    bucket_id: i32,
) -> Result<i64, ApiError> {
    let bucket = TableBucket {
        table_id: r.table_id,
        partition_id: r.partition_id,
        bucket_id,
    };
    let replica = super::replica_of(node, bucket)?;
    match r.offset_type {
        EARLIEST => Ok(replica.tablet.log_start_offset()),
        LATEST => Ok(replica.tablet.high_watermark()),
        TIMESTAMP => {
            let ts = r.start_timestamp.ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidTimestampException,
                    "offset type TIMESTAMP needs startTimestamp",
                )
            })?;
            if ts > now_ms() {
                return Err(ApiError::new(
                    ErrorCode::InvalidTimestampException,
                    format!("timestamp {ts} is in the future (now is {})", now_ms()),
                ));
            }
            let tablet = std::sync::Arc::clone(&replica.tablet);
            let found = tokio::task::spawn_blocking(move || tablet.offset_for_timestamp(ts))
                .await
                .map_err(|e| ApiError::new(ErrorCode::UnknownServerError, e.to_string()))?
                .map_err(|e| storage_error(bucket, e))?;
            let hw = replica.tablet.high_watermark();
            Ok(found.map_or(hw, |o| o.min(hw)))
        }
        other => Err(ApiError::new(
            ErrorCode::UnknownServerError,
            format!("invalid list offsets type {other} (0 earliest, 1 latest, 2 timestamp)"),
        )),
    }
}

/// Answers each requested bucket's offset or error.
pub async fn handle(
    node: &Node,
    r: pb::ListOffsetsRequest,
) -> Result<pb::ListOffsetsResponse, ApiError> {
    let mut buckets_resp = Vec::with_capacity(r.bucket_id.len());
    for &bucket_id in &r.bucket_id {
        buckets_resp.push(match offset_of(node, &r, bucket_id).await {
            Ok(offset) => pb::PbListOffsetsRespForBucket {
                bucket_id,
                error_code: None,
                error_message: None,
                offset: Some(offset),
            },
            Err(e) => pb::PbListOffsetsRespForBucket {
                bucket_id,
                error_code: Some(e.code().code()),
                error_message: Some(e.message().to_owned()),
                offset: None,
            },
        });
    }
    Ok(pb::ListOffsetsResponse { buckets_resp })
}
