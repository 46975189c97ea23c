//! GetFileSystemSecurityToken (1025): Fjord keeps all log data on local
//! disk and serves it through FetchLog, so it answers as a Fluss server whose
//! remote data dir is the local file system does: scheme `file`, an empty
//! token, no expiration. (The Java client asks for this when it creates a
//! scanner and logs an exception if refused.)

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::node::Node;

/// The local file system's (empty) token.
pub fn handle(
    _node: &Node,
    _r: pb::GetFileSystemSecurityTokenRequest,
) -> Result<pb::GetFileSystemSecurityTokenResponse, ApiError> {
    Ok(pb::GetFileSystemSecurityTokenResponse {
        schema: "file".to_owned(),
        token: Default::default(),
        expiration_time: None,
        addition_info: Vec::new(),
    })
}
