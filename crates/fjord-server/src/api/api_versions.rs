//! ApiVersions (1000): advertises exactly the api keys and versions Fjord
//! serves (fjord-proto's table, the same one the request decoder enforces).
//!
//! `server_type` is left unset: this one port serves both the coordinator
//! and the tablet server, and both official clients skip their server-type
//! check when the field is absent.

use fjord_proto::messages as pb;

use crate::node::Node;

/// Answers with the served versions (built once at start-up).
pub fn handle(node: &Node, _request: pb::ApiVersionsRequest) -> pb::ApiVersionsResponse {
    pb::ApiVersionsResponse {
        api_versions: node.api_versions.clone(),
        server_type: None,
    }
}
