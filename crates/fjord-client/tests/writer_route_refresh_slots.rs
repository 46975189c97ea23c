//! Route refreshes run as tasks beside the sender (writer/sender.rs
//! `Refreshes`), at most `ROUTE_REFRESHES_MAX` (8) at once. No batch may
//! wait for ever on them: not a partition queued behind a full set of
//! refreshes, not a batch whose refresh ends after the writer was dropped,
//! not a batch of a partition dropped while its refresh was held.
//!
//! The client bootstraps through a gate (`support::metadata_gate`) that
//! holds the MetaData requests naming the gated partitions until the test
//! forwards them.

mod support;

use support::metadata_gate::{
    acknowledged, append_day_row, create_day_partitions, refused, routed_writer, start_gated, Held,
    MetadataGate,
};

use fjord_client::{AppendWriter, FlussClient, TableInfo, TablePath};
use fjord_proto::ErrorCode;

/// The sender's bound on refreshes in flight (sender.rs
/// `ROUTE_REFRESHES_MAX`, crate-private; restated).
const ROUTE_REFRESHES_MAX: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_beyond_the_refresh_bound_are_routed_as_slots_free_up() {
    let gated_count = ROUTE_REFRESHES_MAX + 4;
    let mut s = set_up("beyond_bound", gated_count, "0").await;

    s.gate.hold_all(s.gated.iter().map(|&(_, id)| id));
    let mut pending = Vec::new();
    for (i, &(ref day, id)) in s.gated.iter().enumerate() {
        pending.push((id, append_day_row(&mut s.writer, i as i64 + 10, day).await));
    }
    // A full set of refreshes is held: the partitions beyond it wait for a
    // slot with their batches queued.
    let mut asked: Vec<i64> = Vec::new();
    let mut first = Vec::new();
    while asked.len() < ROUTE_REFRESHES_MAX {
        let held = s.gate.next_held().await;
        asked.extend(held.partitions.iter().copied());
        first.push(held);
    }
    // And no more while they are held.
    assert!(
        s.gate
            .holds_nothing_more(&s.client, &s.table, s.routed_id)
            .await,
        "no refresh beyond the {ROUTE_REFRESHES_MAX} held"
    );
    // Answered: the slots free up and the other partitions ask in turn.
    first.into_iter().for_each(Held::forward);
    while asked.len() < gated_count {
        let held = s.gate.next_held().await;
        asked.extend(held.partitions.iter().copied());
        held.forward();
    }
    for (id, completion) in pending {
        let ack = acknowledged(completion, &format!("partition {id}")).await;
        assert_eq!(ack.partition_id, Some(id));
    }
    asked.sort_unstable();
    let mut expected: Vec<i64> = s.gated.iter().map(|&(_, id)| id).collect();
    expected.sort_unstable();
    assert_eq!(asked, expected, "one refresh per partition");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_answered_after_the_writer_was_dropped_still_sends_its_batch() {
    let mut s = set_up("after_drop", 1, "0").await;
    let (day, id) = s.gated[0].clone();

    s.gate.hold_all(s.gated.iter().map(|&(_, id)| id));
    let completion = append_day_row(&mut s.writer, 7, &day).await;
    let held = s.gate.next_held().await;
    // The writer goes away while its batch waits for the route; dropping
    // it hands every buffered row on to be sent.
    let SetUp {
        server,
        gate,
        writer,
        ..
    } = s;
    drop(writer);
    held.forward();
    let ack = acknowledged(completion, "the batch after its writer was dropped").await;
    assert_eq!(ack.partition_id, Some(id));
    drop(gate);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_partition_was_dropped_during_its_refresh_fails_instead_of_waiting() {
    // Retries and idempotence on (the defaults): the partition's absence
    // must still end the batch.
    let mut s = set_up("dropped", 1, "2147483647").await;
    let (day, _) = s.gated[0].clone();

    s.gate.hold_all(s.gated.iter().map(|&(_, id)| id));
    let completion = append_day_row(&mut s.writer, 7, &day).await;
    let held = s.gate.next_held().await;
    s.client
        .admin()
        .drop_partition(&s.path, &[("dt".to_owned(), day.clone())], false)
        .await
        .expect("drop partition");
    held.forward();
    // Any further refresh of it goes straight through.
    s.gate.hold_all([]);
    let error = refused(completion, "a dropped partition's batch cannot be written").await;
    assert_eq!(
        error.error_code(),
        Some(ErrorCode::PartitionNotExists),
        "the batch fails because its partition is gone: {error}"
    );
    s.finish().await;
}

/// One test's server, gate, table, partitions and writer.
struct SetUp {
    server: support::TestServer,
    client: FlussClient,
    gate: MetadataGate,
    path: TablePath,
    table: TableInfo,
    /// The partition the writer has a route for.
    routed_id: i64,
    writer: AppendWriter,
    /// The gated partitions: (name, id).
    gated: Vec<(String, i64)>,
}

impl SetUp {
    async fn finish(self) {
        drop(self.writer);
        self.server.stop().await;
    }
}

/// A server behind a gate; table `slots.<name>` (`id BIGINT, dt STRING`,
/// partitioned by `dt`, 2 buckets) with one routed partition and `gated`
/// more; a writer with `client.writer.retries` = `retries` (idempotence
/// off without retries) that has written one acknowledged row to the
/// routed partition.
async fn set_up(name: &str, gated: usize, retries: &str) -> SetUp {
    let (server, gate, client) = start_gated().await;
    let path = TablePath::new("slots", name);
    let routed = "r0".to_owned();
    let names: Vec<String> = (0..gated).map(|i| format!("g{i}")).collect();
    let days: Vec<&str> = std::iter::once(&routed)
        .chain(&names)
        .map(String::as_str)
        .collect();
    let (table, ids) = create_day_partitions(&client, &path, 2, &days).await;
    let routed_id = ids[0];
    let gated = names.into_iter().zip(ids[1..].iter().copied()).collect();
    let writer = routed_writer(&client, &path, &routed, retries, &[]).await;
    SetUp {
        server,
        client,
        gate,
        path,
        table,
        routed_id,
        writer,
        gated,
    }
}
