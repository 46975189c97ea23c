//! A route refresh the coordinator is slow to answer delays only the
//! batches that need that route: one writer, a partitioned table with two
//! partitions, and the MetaData request for one partition's leaders held
//! back. The other, already routed partition's batches must still be
//! acknowledged while the refresh waits; when the coordinator finally
//! answers, the held partition's batches go out (every bucket of it on the
//! one refresh); when it refuses, they fail (or back off and retry) with
//! its error.
//!
//! The client bootstraps through a gate (`support::metadata_gate`) that
//! holds the MetaData requests naming the gated partition until the test
//! forwards or refuses them.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use support::metadata_gate::{
    acknowledged, append_day_row, create_day_partitions, refused, routed_writer, start_gated,
    MetadataGate,
};

use fjord_client::writer::config::OPT_REQUEST_TIMEOUT;
use fjord_client::{AppendWriter, FlussClient, TableInfo, TablePath};
use fjord_proto::ErrorCode;

/// Buckets per partition.
const BUCKETS: i32 = 2;
/// The partition whose route is always answered.
const ROUTED_DAY: &str = "20261201";
/// The partition whose route refresh the gate holds.
const GATED_DAY: &str = "20261202";
/// Request timeout of the writers: longer than any test's wait (`HANG`),
/// so a held refresh ends only when the test forwards or refuses it, and
/// no check here depends on how fast the machine is. Were a held refresh
/// to hold the sender again, the routed partition's batch would wait for
/// this timeout and `acknowledged` would fail after `HANG`.
const REQUEST_TIMEOUT: &str = "10min";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_route_refresh_does_not_delay_another_partitions_batches() {
    let mut s = set_up("held_refresh", "0").await;

    s.gate.hold(s.gated_id);
    let mut gated = append_day_row(&mut s.writer, 1, GATED_DAY).await;
    // The sender is now refreshing the gated partition's route.
    let held = s.gate.next_held().await;

    let routed = append_day_row(&mut s.writer, 2, ROUTED_DAY).await;
    let ack = acknowledged(routed, "the routed partition's batch is acknowledged").await;
    assert_eq!(ack.partition_id, Some(s.routed_id));
    assert!(ack.base_offset >= 0, "{ack:?}");
    assert!(
        is_pending(&mut gated),
        "the gated partition's batch completed while its route refresh was \
         still held at the gate"
    );

    // The coordinator answers at last: the waiting batch goes out.
    held.forward();
    let ack = acknowledged(
        gated,
        "the gated partition's batch is acknowledged once its route arrives",
    )
    .await;
    assert_eq!(ack.partition_id, Some(s.gated_id));
    assert!(ack.base_offset >= 0, "{ack:?}");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_route_refresh_fails_its_partitions_batch_with_the_coordinators_error() {
    let mut s = set_up("refused_refresh", "0").await;

    s.gate.hold(s.gated_id);
    let gated = append_day_row(&mut s.writer, 1, GATED_DAY).await;
    let held = s.gate.next_held().await;
    held.refuse(ErrorCode::LeaderNotAvailableException, "no leader yet");
    let error = refused(gated, "no route: the batch cannot be written").await;
    assert_eq!(
        error.error_code(),
        Some(ErrorCode::LeaderNotAvailableException),
        "the batch fails with the refresh's error: {error}"
    );
    s.writer
        .flush()
        .await
        .expect_err("flush reports the failed batch");

    // The other partition's route is untouched.
    let routed = append_day_row(&mut s.writer, 2, ROUTED_DAY).await;
    let ack = acknowledged(routed, "the routed partition's batch is acknowledged").await;
    assert_eq!(ack.partition_id, Some(s.routed_id));
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_route_refresh_is_retried_after_a_back_off() {
    // Retries on, and so idempotence (the default).
    let mut s = set_up("retried_refresh", "3").await;

    s.gate.hold(s.gated_id);
    let gated = append_day_row(&mut s.writer, 1, GATED_DAY).await;
    s.gate
        .next_held()
        .await
        .refuse(ErrorCode::LeaderNotAvailableException, "no leader yet");
    // The batch backs off, then asks for its route again.
    s.gate.next_held().await.forward();
    let ack = acknowledged(gated, "the retried refresh routes the batch").await;
    assert_eq!(ack.partition_id, Some(s.gated_id));
    assert_eq!(s.writer.stats().retries, 1, "one retry after the refusal");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_buckets_of_a_partition_wait_for_one_refresh_and_all_go_out_on_its_route() {
    let mut s = set_up("shared_refresh", "0").await;

    s.gate.hold(s.gated_id);
    let first = append_day_row(&mut s.writer, 1, GATED_DAY).await;
    let held = s.gate.next_held().await;
    let second = append_day_row(&mut s.writer, 2, GATED_DAY).await;
    // The sender takes batches in the order they were appended: once this
    // one is acknowledged, it has seen the second gated batch too.
    let routed = append_day_row(&mut s.writer, 3, ROUTED_DAY).await;
    acknowledged(routed, "the routed partition's batch is acknowledged").await;

    held.forward();
    let first = acknowledged(first, "the first gated batch is acknowledged").await;
    let second = acknowledged(second, "the second gated batch is acknowledged").await;
    assert_eq!(first.partition_id, Some(s.gated_id));
    assert_eq!(second.partition_id, Some(s.gated_id));
    assert_ne!(first.bucket, second.bucket, "two buckets waited");
    assert!(
        s.gate
            .holds_nothing_more(&s.client, &s.table, s.routed_id)
            .await,
        "one MetaData request served both buckets of the partition"
    );
    s.finish().await;
}

/// One test's server, gate, table, partitions and writer.
struct SetUp {
    server: support::TestServer,
    gate: MetadataGate,
    /// The client the writer was made from (its coordinator connection
    /// goes through the gate).
    client: FlussClient,
    table: TableInfo,
    writer: AppendWriter,
    routed_id: i64,
    gated_id: i64,
}

impl SetUp {
    /// Drops the writer, then stops the server.
    async fn finish(self) {
        drop(self.writer);
        self.server.stop().await;
    }
}

/// A server behind a gate; table `refresh.<name>` (`id BIGINT, dt STRING`,
/// partitioned by `dt`) with the partitions [`ROUTED_DAY`] and
/// [`GATED_DAY`]; a writer with `client.writer.retries` = `retries`
/// (idempotence off without retries), each batch to the next bucket
/// (round robin), that has already written one acknowledged row to
/// [`ROUTED_DAY`], so that partition is routed.
async fn set_up(name: &str, retries: &str) -> SetUp {
    let (server, gate, client) = start_gated().await;
    let path = TablePath::new("refresh", name);
    let (table, ids) =
        create_day_partitions(&client, &path, BUCKETS, &[ROUTED_DAY, GATED_DAY]).await;
    let (routed_id, gated_id) = (ids[0], ids[1]);
    let timeout = [(OPT_REQUEST_TIMEOUT, REQUEST_TIMEOUT)];
    let writer = routed_writer(&client, &path, ROUTED_DAY, retries, &timeout).await;
    SetUp {
        server,
        gate,
        client,
        table,
        writer,
        routed_id,
        gated_id,
    }
}

/// Whether `future` is still pending (polled once, without waiting).
fn is_pending<F: Future + Unpin>(future: &mut F) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(future).poll(&mut cx).is_pending()
}
