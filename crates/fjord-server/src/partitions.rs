//! Partition lifecycle in the coordinator role: creating a partition (its
//! catalog entry, then its log tablets), dropping one (entry, then data),
//! and auto-partitioning — one check per table that pre-creates upcoming
//! partitions and drops expired ones, run when an auto-partitioned table is
//! created, at start-up, and every `auto-partition.check.interval`.
//!
//! Handlers and the periodic task both go through these functions, so a
//! partition never exists in the catalog without its tablets.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tracing::{info, warn};

use crate::error::{ApiError, ErrorCode};
use crate::meta::catalog::{PartitionInfo, TableInfo};
use crate::node::Node;
use crate::replica::PendingDeletion;

/// Creates the partition `values` of `table` with its tablets; `None` if it
/// existed and `ignore_if_exists`.
pub fn create_partition(
    node: &Node,
    table: &TableInfo,
    values: Vec<String>,
    ignore_if_exists: bool,
) -> Result<Option<Arc<PartitionInfo>>, ApiError> {
    node.catalog
        .create_partition(table, values, ignore_if_exists, |latest, p| {
            node.replicas
                .create_partition(latest, p.partition_id)
                .inspect_err(|_| {
                    node.replicas
                        .drop_partition(table.table_id, p.partition_id)
                        .run()
                })
        })
}

/// Drops the partition `name` of `table`: gone from the catalog and out of
/// service on return; the returned [`PendingDeletion`] deletes its data.
/// `None` if it did not exist and `ignore_if_not_exists`.
pub fn drop_partition(
    node: &Node,
    table: &TableInfo,
    name: &str,
    ignore_if_not_exists: bool,
) -> Result<Option<(Arc<PartitionInfo>, PendingDeletion)>, ApiError> {
    let mut pending = None;
    let dropped = node
        .catalog
        .drop_partition(table, name, ignore_if_not_exists, |p| {
            pending = Some(node.replicas.drop_partition(table.table_id, p.partition_id));
        })?;
    Ok(dropped.zip(pending))
}

/// One auto-partition check of `table` at `now`: drops expired partitions
/// (logged), then pre-creates missing upcoming ones. Failures are logged
/// per partition and do not stop the rest (Fluss's behaviour: e.g. at
/// `max.partition.num` the create is skipped with a warning).
pub fn auto_partition(node: &Node, table: &TableInfo, now: Timestamp) {
    let Some(strategy) = &table.auto_partition else {
        return;
    };
    let existing = node.catalog.partitions(table.table_id);
    let plan = strategy.plan(now, existing.iter().map(|p| p.name.as_str()));
    for name in &plan.drop {
        match drop_partition(node, table, name, true) {
            Ok(Some((p, data))) => {
                data.run();
                info!(
                table = %format_args!("{}.{}", table.path.database, table.path.table),
                partition = %p.name,
                partition_id = p.partition_id,
                retention = ?strategy.num_retention,
                "auto-partitioning dropped an expired partition"
                )
            }
            Ok(None) => {}
            Err(e) => warn!(
                table = %format_args!("{}.{}", table.path.database, table.path.table),
                partition = %name,
                error = %e,
                "auto-partitioning could not drop an expired partition"
            ),
        }
    }
    for values in plan.create {
        match create_partition(node, table, values, true) {
            Ok(Some(p)) => info!(
                table = %format_args!("{}.{}", table.path.database, table.path.table),
                partition = %p.name,
                partition_id = p.partition_id,
                "auto-partitioning created a partition"
            ),
            Ok(None) => {}
            Err(e) if e.code() == ErrorCode::PartitionMaxNumException => warn!(
                table = %format_args!("{}.{}", table.path.database, table.path.table),
                error = %e,
                "auto-partitioning skipped a partition: too many partitions"
            ),
            Err(e) => warn!(
                table = %format_args!("{}.{}", table.path.database, table.path.table),
                error = %e,
                "auto-partitioning could not create a partition"
            ),
        }
    }
}

/// The scheduled auto-partition check of every auto-partitioned table at
/// the node's clock's now (a DAY table's at its delayed instant, see
/// [`crate::meta::auto_partition::day_check_delay_minutes`]). Blocking
/// (metadata writes, tablet creation).
pub fn auto_partition_all(node: &Node) {
    let now = node.clock.now();
    for table in node.catalog.all_tables() {
        if let Some(strategy) = &table.auto_partition {
            let at = strategy.scheduled_instant(table.table_id, now);
            auto_partition(node, &table, at);
        }
    }
}

/// Runs [`auto_partition_all`] at start and then every
/// `auto-partition.check.interval` on the blocking pool, until shutdown.
pub async fn auto_partition_loop(node: Arc<Node>) {
    let mut shutdown = node.shutdown.clone();
    let period = Duration::from_millis(node.config.auto_partition_check_interval_ms);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let n = Arc::clone(&node);
        let _ = tokio::task::spawn_blocking(move || auto_partition_all(&n)).await;
    }
}
