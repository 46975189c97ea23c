//! GetFileSystemSecurityToken (1025): Fjord has no remote storage yet, so
//! there is no token to hand out.

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::node::Node;

/// Always `SecurityTokenException`: no remote file system is configured.
pub fn handle(
    _node: &Node,
    _r: pb::GetFileSystemSecurityTokenRequest,
) -> Result<pb::GetFileSystemSecurityTokenResponse, ApiError> {
    Err(ApiError::new(
        ErrorCode::SecurityTokenException,
        "no remote file system is configured on this Fjord server; all log data is served by FetchLog",
    ))
}
