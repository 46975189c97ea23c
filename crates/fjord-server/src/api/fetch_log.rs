//! FetchLog (1015).

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::node::Node;

/// Reads each bucket from its offset.
pub async fn handle(
    _node: &Node,
    _r: pb::FetchLogRequest,
) -> Result<pb::FetchLogResponse, ApiError> {
    Err(ApiError::new(
        ErrorCode::LogStorageException,
        "not wired to storage yet",
    ))
}
