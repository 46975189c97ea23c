//! ApiVersions (1000): advertises exactly the api keys and versions Fjord
//! serves (fjord-proto's table, the same one the request decoder enforces).
//!
//! `server_type` is left unset: this one port serves both the coordinator
//! and the tablet server, and both official clients skip their server-type
//! check when the field is absent.

use fjord_proto::messages as pb;
use fjord_proto::ApiKey;

use crate::node::Node;

/// Answers with the served versions.
pub fn handle(_node: &Node, _request: pb::ApiVersionsRequest) -> pb::ApiVersionsResponse {
    pb::ApiVersionsResponse {
        api_versions: ApiKey::served()
            .map(|(key, range)| pb::PbApiVersion {
                api_key: i32::from(key.id()),
                min_version: i32::from(range.min),
                max_version: i32::from(range.max),
            })
            .collect(),
        server_type: None,
    }
}
