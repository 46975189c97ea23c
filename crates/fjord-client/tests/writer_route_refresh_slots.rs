//! Route refreshes run as tasks beside the sender (writer/sender.rs
//! `Refreshes`), at most `ROUTE_REFRESHES_MAX` (8) at once. No batch may
//! wait for ever on them: not a partition queued behind a full set of
//! refreshes, not a batch whose refresh ends after the writer was dropped,
//! not a batch of a partition dropped while its refresh was held.
//!
//! The client bootstraps through a gate: a proxy in front of an in-process
//! server that forwards every frame except MetaData requests naming one of
//! the gated partitions, which it hands to the test to forward or refuse.
//! MetaData answers name the server itself, so only the coordinator
//! connection passes the gate; produce requests go straight to the leader.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use bytes::Bytes;
use fjord_client::writer::config::{OPT_NO_KEY_ASSIGNER, OPT_RETRIES};
use fjord_client::{AppendWriter, BatchCompletion, FlussClient, TablePath, WriterConfig};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use fjord_proto::messages as pb;
use fjord_proto::ErrorCode;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// MetaData's api key.
const METADATA: i16 = 1012;
/// Outer bound of every wait: turns a hang into a failure, asserts no timing.
const HANG: Duration = Duration::from_secs(120);
/// The sender's bound on refreshes in flight (sender.rs
/// `ROUTE_REFRESHES_MAX`, crate-private; restated).
const ROUTE_REFRESHES_MAX: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_beyond_the_refresh_bound_are_routed_as_slots_free_up() {
    let gated_count = ROUTE_REFRESHES_MAX + 4;
    let mut s = set_up("beyond_bound", gated_count, "0").await;

    s.gate.hold_all(&s.gated);
    let mut pending = Vec::new();
    for (i, &(ref day, id)) in s.gated.iter().enumerate() {
        pending.push((id, append(&mut s.writer, i as i64 + 10, day).await));
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
    // Answered: the slots free up and the other partitions ask in turn.
    first.into_iter().for_each(Held::forward);
    while asked.len() < gated_count {
        let held = s.gate.next_held().await;
        asked.extend(held.partitions.iter().copied());
        held.forward();
    }
    for (id, completion) in pending {
        let ack = tokio::time::timeout(HANG, completion)
            .await
            .unwrap_or_else(|_| panic!("partition {id}: no completion within {HANG:?}"))
            .unwrap_or_else(|e| panic!("partition {id}: refused: {e}"));
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

    s.gate.hold_all(&s.gated);
    let completion = append(&mut s.writer, 7, &day).await;
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
    let ack = tokio::time::timeout(HANG, completion)
        .await
        .expect("the batch completes after its writer was dropped")
        .expect("the batch is acknowledged");
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

    s.gate.hold_all(&s.gated);
    let completion = append(&mut s.writer, 7, &day).await;
    let held = s.gate.next_held().await;
    s.client
        .admin()
        .drop_partition(&s.path, &[("dt".to_owned(), day.clone())], false)
        .await
        .expect("drop partition");
    held.forward();
    // Any further refresh of it goes straight through.
    s.gate.hold_all(&[]);
    let result = tokio::time::timeout(HANG, completion)
        .await
        .expect("the batch of a dropped partition completes");
    let error = result.expect_err("a dropped partition's batch cannot be written");
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
    gate: Gate,
    path: TablePath,
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
    let server = support::TestServer::start().await;
    let gate = start_gate(server.addr.clone()).await;
    let client = FlussClient::connect(std::slice::from_ref(&gate.addr))
        .await
        .expect("client connects");
    let schema = Schema::builder()
        .column("id", DataType::bigint())
        .column("dt", DataType::string())
        .build()
        .expect("schema");
    let path = TablePath::new("slots", name);
    let admin = client.admin();
    let table = support::create_partitioned_table(&admin, &path, schema, &["dt"], Some(2)).await;
    let routed = "r0".to_owned();
    let names: Vec<String> = (0..gated).map(|i| format!("g{i}")).collect();
    for day in std::iter::once(&routed).chain(&names) {
        admin
            .create_partition(&path, &[("dt".to_owned(), day.clone())], false)
            .await
            .expect("create partition");
    }
    let partitions = admin.list_partitions(&path, None).await.expect("list");
    let id_of = |day: &str| {
        partitions
            .iter()
            .find(|p| p.name == day)
            .map(|p| p.partition_id)
            .expect("partition listed")
    };
    let gated = names.iter().map(|n| (n.clone(), id_of(n))).collect();
    let idempotence = if retries == "0" { "false" } else { "true" };
    let options = [
        (OPT_RETRIES, retries),
        ("client.writer.enable-idempotence", idempotence),
        (OPT_NO_KEY_ASSIGNER, "round_robin"),
    ];
    let config = WriterConfig::from_options(options.iter().copied()).expect("valid options");
    let mut writer = client
        .append_writer(&table.path, config)
        .await
        .expect("writer");
    let first = append(&mut writer, 0, &routed).await;
    tokio::time::timeout(HANG, first)
        .await
        .expect("first batch completes")
        .expect("first batch acknowledged");
    SetUp {
        server,
        client,
        gate,
        path,
        writer,
        gated,
    }
}

/// Appends one row `(id, day)` as its own batch; returns its completion.
async fn append(writer: &mut AppendWriter, id: i64, day: &str) -> BatchCompletion {
    let schema = writer.arrow_schema().clone();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![id])),
            Arc::new(StringArray::from(vec![day])),
        ],
    )
    .expect("batch");
    writer.append_batch(batch).await.expect("append")
}

/// The proxy in front of the server; see the module doc.
struct Gate {
    addr: String,
    /// Partitions whose MetaData requests are held.
    gated: Arc<Mutex<HashSet<i64>>>,
    held: mpsc::UnboundedReceiver<Held>,
}

impl Gate {
    /// From now on, hold every MetaData request naming one of `partitions`
    /// (none: hold nothing more).
    fn hold_all(&self, partitions: &[(String, i64)]) {
        *self.gated.lock().expect("gate") = partitions.iter().map(|&(_, id)| id).collect();
    }

    /// The next held request (within [`HANG`]).
    async fn next_held(&mut self) -> Held {
        tokio::time::timeout(HANG, self.held.recv())
            .await
            .expect("a MetaData request for a gated partition arrives")
            .expect("gate running")
    }
}

/// One held MetaData request.
struct Held {
    frame: Bytes,
    /// The partition ids it names.
    partitions: Vec<i64>,
    to_server: mpsc::UnboundedSender<Bytes>,
}

impl Held {
    /// Sends the request on to the server, which answers it as usual.
    fn forward(self) {
        self.to_server.send(self.frame).expect("connection open");
    }
}

async fn start_gate(upstream: String) -> Gate {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("gate binds");
    let addr = listener.local_addr().expect("addr").to_string();
    let gated: Arc<Mutex<HashSet<i64>>> = Arc::default();
    let (held_tx, held) = mpsc::unbounded_channel();
    let gate_gated = Arc::clone(&gated);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                return;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            let to_server = spawn_writer(server_write);
            let to_client = spawn_writer(client_write);
            tokio::spawn(forward(server_read, to_client));
            tokio::spawn(gate_requests(
                client_read,
                to_server,
                Arc::clone(&gate_gated),
                held_tx.clone(),
            ));
        }
    });
    Gate { addr, gated, held }
}

fn spawn_writer(mut to: OwnedWriteHalf) -> mpsc::UnboundedSender<Bytes> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if to.write_all(&frame).await.is_err() {
                return;
            }
        }
    });
    tx
}

/// One frame, length prefix included; `None` at EOF.
async fn read_frame(from: &mut OwnedReadHalf) -> Option<Bytes> {
    let length = from.read_u32().await.ok()? as usize;
    let mut frame = vec![0u8; 4 + length];
    frame[..4].copy_from_slice(&(length as u32).to_be_bytes());
    from.read_exact(&mut frame[4..]).await.ok()?;
    Some(Bytes::from(frame))
}

async fn forward(mut from: OwnedReadHalf, to: mpsc::UnboundedSender<Bytes>) {
    while let Some(frame) = read_frame(&mut from).await {
        if to.send(frame).is_err() {
            return;
        }
    }
}

/// Client to server: every frame forwarded, except MetaData requests
/// naming a gated partition, which go to `held`.
async fn gate_requests(
    mut from: OwnedReadHalf,
    to_server: mpsc::UnboundedSender<Bytes>,
    gated: Arc<Mutex<HashSet<i64>>>,
    held: mpsc::UnboundedSender<Held>,
) {
    while let Some(frame) = read_frame(&mut from).await {
        let is_metadata = frame.len() >= 12 && i16::from_be_bytes([frame[4], frame[5]]) == METADATA;
        let partitions = if is_metadata {
            pb::MetadataRequest::decode(&frame[12..])
                .expect("MetaData request")
                .partitions_id
        } else {
            Vec::new()
        };
        let names_gated = {
            let gated = gated.lock().expect("gate");
            partitions.iter().any(|id| gated.contains(id))
        };
        let sent = if names_gated {
            held.send(Held {
                frame,
                partitions,
                to_server: to_server.clone(),
            })
            .is_ok()
        } else {
            to_server.send(frame).is_ok()
        };
        if !sent {
            return;
        }
    }
}
