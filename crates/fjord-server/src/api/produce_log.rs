//! ProduceLog (1014).

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::node::Node;

/// Appends each bucket's batches.
pub async fn handle(
    _node: &Node,
    _r: pb::ProduceLogRequest,
) -> Result<pb::ProduceLogResponse, ApiError> {
    Err(ApiError::new(
        ErrorCode::LogStorageException,
        "not wired to storage yet",
    ))
}
