//! GetDatabaseInfo (1035).

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::meta::catalog::db_not_exist;
use crate::node::Node;

/// Answers the stored descriptor JSON and times, or `DatabaseNotExist`.
pub fn handle(
    node: &Node,
    r: pb::GetDatabaseInfoRequest,
) -> Result<pb::GetDatabaseInfoResponse, ApiError> {
    let info = node
        .catalog
        .database(&r.database_name)?
        .ok_or_else(|| db_not_exist(&r.database_name))?;
    Ok(pb::GetDatabaseInfoResponse {
        database_json: info.database_json.into(),
        created_time: info.created_ms,
        modified_time: info.modified_ms,
    })
}
