//! ListOffsets (1021).

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::node::Node;

/// Answers earliest / latest / by-timestamp offsets per bucket.
pub async fn handle(
    _node: &Node,
    _r: pb::ListOffsetsRequest,
) -> Result<pb::ListOffsetsResponse, ApiError> {
    Err(ApiError::new(
        ErrorCode::LogStorageException,
        "not wired to storage yet",
    ))
}
