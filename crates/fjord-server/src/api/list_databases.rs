//! ListDatabases (1003), optionally with per-database summaries.

use fjord_proto::messages as pb;

use crate::error::ApiError;
use crate::node::Node;

/// Lists database names, or, when asked for summaries, the summaries
/// alone: a Fluss server fills one list or the other, never both.
pub fn handle(
    node: &Node,
    r: pb::ListDatabasesRequest,
) -> Result<pb::ListDatabasesResponse, ApiError> {
    let mut names = node.catalog.list_databases()?;
    let mut summaries = Vec::new();
    if r.include_summary == Some(true) {
        for name in &names {
            let Some(info) = node.catalog.database(name)? else {
                continue;
            };
            let table_count = node.catalog.list_tables(name).map(|t| t.len()).unwrap_or(0);
            summaries.push(pb::PbDatabaseSummary {
                database_name: name.clone(),
                created_time: info.created_ms,
                table_count: i32::try_from(table_count).unwrap_or(i32::MAX),
            });
        }
        names.clear();
    }
    Ok(pb::ListDatabasesResponse {
        database_name: names,
        database_summary: summaries,
    })
}
