//! ListPartitionInfos (1009), CreatePartition (1036), DropPartition (1037)
//! on partitioned tables: the spec is validated against the table's
//! partition keys, creation and drop go through [`crate::partitions`] so a
//! partition and its tablets come and go together.

use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::partitions::not_partitioned;
use crate::meta::catalog::{table_not_exist, Catalog, PartitionInfo, TableInfo};
use crate::node::Node;

fn table(node: &Node, path: &pb::PbTablePath) -> Result<std::sync::Arc<TableInfo>, ApiError> {
    let path = super::table_path(path)?;
    node.catalog
        .table(&path)?
        .ok_or_else(|| table_not_exist(&path))
}

fn spec_pairs(spec: &pb::PbPartitionSpec) -> Vec<(String, String)> {
    spec.partition_key_values
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone()))
        .collect()
}

fn pb_info(table: &TableInfo, p: &PartitionInfo) -> pb::PbPartitionInfo {
    pb::PbPartitionInfo {
        partition_id: p.partition_id,
        partition_spec: pb::PbPartitionSpec {
            partition_key_values: table
                .partition_keys
                .iter()
                .zip(&p.values)
                .map(|(k, v)| pb::PbKeyValue {
                    key: k.clone(),
                    value: v.clone(),
                })
                .collect(),
        },
        remote_data_dir: None,
        bucket_count: Some(table.bucket_count),
    }
}

/// Every partition of the table, or those matching a partial spec.
pub fn list(
    node: &Node,
    r: pb::ListPartitionInfosRequest,
) -> Result<pb::ListPartitionInfosResponse, ApiError> {
    let table = table(node, &r.table_path)?;
    if !table.is_partitioned() {
        return Err(not_partitioned(&table));
    }
    // (key position, value) pairs every listed partition must match.
    let mut filter = Vec::new();
    for kv in r
        .partial_partition_spec
        .iter()
        .flat_map(|s| &s.partition_key_values)
    {
        let Some(pos) = table.partition_keys.iter().position(|k| *k == kv.key) else {
            return Err(ApiError::new(
                ErrorCode::PartitionSpecInvalidException,
                format!(
                    "'{}' in the partial partition spec is not a partition key of table {}.{} (partition keys: {:?}).",
                    kv.key, table.path.database, table.path.table, table.partition_keys
                ),
            ));
        };
        filter.push((pos, kv.value.as_str()));
    }
    let partitions_info = node
        .catalog
        .partitions(table.table_id)
        .iter()
        .filter(|p| filter.iter().all(|&(pos, v)| p.values[pos] == v))
        .map(|p| pb_info(&table, p))
        .collect();
    Ok(pb::ListPartitionInfosResponse {
        partitions_info,
        system_partitions_included: None,
    })
}

/// Creates one partition (its request's `ignore_if_not_exists` field is
/// Fluss's name for "ignore if it exists"), on the blocking pool (catalog
/// and tablet fsyncs).
pub async fn create(
    node: &std::sync::Arc<Node>,
    r: pb::CreatePartitionRequest,
) -> Result<pb::CreatePartitionResponse, ApiError> {
    super::on_blocking_pool(node, move |node| create_now(node, &r)).await
}

fn create_now(
    node: &Node,
    r: &pb::CreatePartitionRequest,
) -> Result<pb::CreatePartitionResponse, ApiError> {
    let table = table(node, &r.table_path)?;
    let values = Catalog::resolve_spec(&table, &spec_pairs(&r.partition_spec), true)?;
    if let Some(strategy) = &table.auto_partition {
        strategy.check_value(&values, node.clock.now())?;
    }
    crate::partitions::create_partition(node, &table, values, r.ignore_if_not_exists)?;
    Ok(pb::CreatePartitionResponse {})
}

/// Drops one partition and deletes its data (on the blocking pool).
pub async fn drop(
    node: &Node,
    r: pb::DropPartitionRequest,
) -> Result<pb::DropPartitionResponse, ApiError> {
    let table = table(node, &r.table_path)?;
    let values = Catalog::resolve_spec(&table, &spec_pairs(&r.partition_spec), false)?;
    let name = fjord_format::schema::partition_name(values.iter().map(String::as_str));
    if let Some((_, data)) =
        crate::partitions::drop_partition(node, &table, &name, r.ignore_if_not_exists)?
    {
        data.run_blocking().await;
    }
    Ok(pb::DropPartitionResponse {})
}
