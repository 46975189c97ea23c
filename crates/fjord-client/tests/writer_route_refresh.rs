//! A route refresh the coordinator is slow to answer delays only the
//! batches that need that route: one writer, a partitioned table with two
//! partitions, and the MetaData request for one partition's leaders held
//! back. The other, already routed partition's batches must still be
//! acknowledged while the refresh waits; when the coordinator finally
//! answers, the held partition's batches go out (every bucket of it on the
//! one refresh); when it refuses, they fail (or back off and retry) with
//! its error.
//!
//! The client bootstraps through a gate: a proxy in front of a real
//! in-process server that forwards every frame, except MetaData requests
//! naming the gated partition, which it hands to the test to forward or
//! refuse when the test says so. MetaData answers name the server itself,
//! so only the coordinator connection goes through the gate; produce
//! requests go straight to the leader.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use bytes::{Bytes, BytesMut};
use fjord_client::writer::config::{
    OPT_ENABLE_IDEMPOTENCE, OPT_NO_KEY_ASSIGNER, OPT_REQUEST_TIMEOUT, OPT_RETRIES,
};
use fjord_client::{
    AppendWriter, BatchAck, BatchCompletion, ClientError, FlussClient, TableInfo, TablePath,
    WriterConfig,
};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use fjord_proto::frame::encode_error_response;
use fjord_proto::messages as pb;
use fjord_proto::ErrorCode;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// MetaData's api key.
const METADATA: i16 = 1012;
/// Buckets per partition.
const BUCKETS: i32 = 2;
/// The partition whose route is always answered.
const ROUTED_DAY: &str = "20261201";
/// The partition whose route refresh the gate holds.
const GATED_DAY: &str = "20261202";
/// Request timeout of the writers: a held refresh fails this plus the
/// sender's 5 s grace after it began, so the routed partition's batch has
/// that long to be acknowledged first — seconds, where it needs
/// milliseconds, on a loaded machine too.
const REQUEST_TIMEOUT: &str = "10s";
/// Outer bound of every wait: turns a hang into a failure, asserts no timing.
const HANG: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_route_refresh_does_not_delay_another_partitions_batches() {
    let mut s = set_up("held_refresh", "0").await;

    s.gate.hold(s.gated_id);
    let mut gated = append(&mut s.writer, 1, GATED_DAY).await;
    // The sender is now refreshing the gated partition's route.
    let held = s.gate.next_held().await;

    let routed = append(&mut s.writer, 2, ROUTED_DAY).await;
    let ack = acknowledged(routed, "the routed partition's batch is acknowledged").await;
    assert_eq!(ack.partition_id, Some(s.routed_id));
    assert!(ack.base_offset >= 0, "{ack:?}");
    assert!(
        is_pending(&mut gated),
        "the routed partition's batch was acknowledged only after the gated \
         partition's route refresh had already given up: the refresh held \
         up every other batch of the writer"
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
    let gated = append(&mut s.writer, 1, GATED_DAY).await;
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
    let routed = append(&mut s.writer, 2, ROUTED_DAY).await;
    let ack = acknowledged(routed, "the routed partition's batch is acknowledged").await;
    assert_eq!(ack.partition_id, Some(s.routed_id));
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_route_refresh_is_retried_after_a_back_off() {
    // Retries on, and so idempotence (the default).
    let mut s = set_up("retried_refresh", "3").await;

    s.gate.hold(s.gated_id);
    let gated = append(&mut s.writer, 1, GATED_DAY).await;
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
    let first = append(&mut s.writer, 1, GATED_DAY).await;
    let held = s.gate.next_held().await;
    let second = append(&mut s.writer, 2, GATED_DAY).await;
    // The sender takes batches in the order they were appended: once this
    // one is acknowledged, it has seen the second gated batch too.
    let routed = append(&mut s.writer, 3, ROUTED_DAY).await;
    acknowledged(routed, "the routed partition's batch is acknowledged").await;

    held.forward();
    let first = acknowledged(first, "the first gated batch is acknowledged").await;
    let second = acknowledged(second, "the second gated batch is acknowledged").await;
    assert_eq!(first.partition_id, Some(s.gated_id));
    assert_eq!(second.partition_id, Some(s.gated_id));
    assert_ne!(first.bucket, second.bucket, "two buckets waited");
    assert!(
        s.gate.held.try_recv().is_err(),
        "one MetaData request served both buckets of the partition"
    );
    s.finish().await;
}

/// One test's server, gate, table, partitions and writer.
struct SetUp {
    server: support::TestServer,
    gate: Gate,
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
    let path = TablePath::new("refresh", name);
    let admin = client.admin();
    let table: TableInfo =
        support::create_partitioned_table(&admin, &path, schema, &["dt"], Some(BUCKETS)).await;
    for day in [ROUTED_DAY, GATED_DAY] {
        admin
            .create_partition(&path, &[("dt".to_owned(), day.to_owned())], false)
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
    let (routed_id, gated_id) = (id_of(ROUTED_DAY), id_of(GATED_DAY));

    let idempotence = if retries == "0" { "false" } else { "true" };
    let options = [
        (OPT_REQUEST_TIMEOUT, REQUEST_TIMEOUT),
        (OPT_RETRIES, retries),
        (OPT_ENABLE_IDEMPOTENCE, idempotence),
        // Consecutive batches go to different buckets.
        (OPT_NO_KEY_ASSIGNER, "round_robin"),
    ];
    let config = WriterConfig::from_options(options.iter().copied()).expect("valid options");
    let mut writer = client
        .append_writer(&table.path, config)
        .await
        .expect("writer");
    let first = append(&mut writer, 0, ROUTED_DAY).await;
    acknowledged(first, "the first batch is acknowledged").await;
    SetUp {
        server,
        gate,
        writer,
        routed_id,
        gated_id,
    }
}

/// Appends one row `(id, day)` as its own batch; returns its completion.
/// The batch's acknowledgement; `what` says what the test expected when it
/// is refused instead. [`HANG`] turns a hang into a failure.
async fn acknowledged(completion: BatchCompletion, what: &str) -> BatchAck {
    match tokio::time::timeout(HANG, completion).await {
        Ok(Ok(ack)) => ack,
        Ok(Err(e)) => panic!("{what}: refused: {e}"),
        Err(_) => panic!("{what}: no completion within {HANG:?}"),
    }
}

/// The batch's refusal; `what` says why the test expected one.
async fn refused(completion: BatchCompletion, what: &str) -> ClientError {
    match tokio::time::timeout(HANG, completion).await {
        Ok(Err(e)) => e,
        Ok(Ok(ack)) => panic!("{what}: acknowledged instead: {ack:?}"),
        Err(_) => panic!("{what}: no completion within {HANG:?}"),
    }
}

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

/// Whether `future` is still pending (polled once, without waiting).
fn is_pending<F: Future + Unpin>(future: &mut F) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(future).poll(&mut cx).is_pending()
}

/// The proxy in front of the server; see the module doc.
struct Gate {
    /// Where clients bootstrap from.
    addr: String,
    /// The partition whose MetaData requests are held (`None`: none is).
    gated: Arc<Mutex<Option<i64>>>,
    /// The requests held, in arrival order.
    held: mpsc::UnboundedReceiver<Held>,
}

impl Gate {
    /// From now on, hold every MetaData request naming `partition_id`.
    fn hold(&self, partition_id: i64) {
        *self.gated.lock().expect("gate") = Some(partition_id);
    }

    /// The next held request (within [`HANG`]).
    async fn next_held(&mut self) -> Held {
        tokio::time::timeout(HANG, self.held.recv())
            .await
            .expect("a MetaData request for the gated partition arrives")
            .expect("gate running")
    }
}

/// One MetaData request the gate holds, and the way on to each side of its
/// connection.
struct Held {
    /// The whole request frame, length prefix included.
    frame: Bytes,
    to_server: mpsc::UnboundedSender<Bytes>,
    to_client: mpsc::UnboundedSender<Bytes>,
}

impl Held {
    /// Sends the request on to the server, which answers it as usual.
    fn forward(self) {
        self.to_server.send(self.frame).expect("connection open");
    }

    /// Answers the request with an error frame of `code`.
    fn refuse(self, code: ErrorCode, message: &'static str) {
        // Request frame: length | api_key i16 | api_version i16 | request_id i32 | body.
        let request_id =
            i32::from_be_bytes([self.frame[8], self.frame[9], self.frame[10], self.frame[11]]);
        let mut out = BytesMut::new();
        encode_error_response(&mut out, request_id, &code.with_message(message))
            .expect("error frame");
        self.to_client.send(out.freeze()).expect("connection open");
    }
}

/// Starts a gate in front of the server at `upstream`.
async fn start_gate(upstream: String) -> Gate {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("gate binds");
    let addr = listener.local_addr().expect("addr").to_string();
    let gated: Arc<Mutex<Option<i64>>> = Arc::default();
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
            tokio::spawn(forward(server_read, to_client.clone()));
            tokio::spawn(gate_requests(
                client_read,
                to_server,
                to_client,
                Arc::clone(&gate_gated),
                held_tx.clone(),
            ));
        }
    });
    Gate { addr, gated, held }
}

/// A task writing every frame sent to the returned channel to `to`.
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

/// Reads one frame (length prefix included); `None` at EOF.
async fn read_frame(from: &mut OwnedReadHalf) -> Option<Bytes> {
    let length = from.read_u32().await.ok()? as usize;
    let mut frame = vec![0u8; 4 + length];
    frame[..4].copy_from_slice(&(length as u32).to_be_bytes());
    from.read_exact(&mut frame[4..]).await.ok()?;
    Some(Bytes::from(frame))
}

/// Every frame from `from`, unchanged.
async fn forward(mut from: OwnedReadHalf, to: mpsc::UnboundedSender<Bytes>) {
    while let Some(frame) = read_frame(&mut from).await {
        if to.send(frame).is_err() {
            return;
        }
    }
}

/// Client to server: every frame forwarded, except MetaData requests naming
/// the gated partition, which go to `held`.
async fn gate_requests(
    mut from: OwnedReadHalf,
    to_server: mpsc::UnboundedSender<Bytes>,
    to_client: mpsc::UnboundedSender<Bytes>,
    gated: Arc<Mutex<Option<i64>>>,
    held: mpsc::UnboundedSender<Held>,
) {
    while let Some(frame) = read_frame(&mut from).await {
        let is_metadata = frame.len() >= 12 && i16::from_be_bytes([frame[4], frame[5]]) == METADATA;
        let gated_now = *gated.lock().expect("gate");
        let names_gated = is_metadata
            && gated_now.is_some_and(|id| {
                pb::MetadataRequest::decode(&frame[12..])
                    .expect("MetaData request")
                    .partitions_id
                    .contains(&id)
            });
        let sent = if names_gated {
            held.send(Held {
                frame,
                to_server: to_server.clone(),
                to_client: to_client.clone(),
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
