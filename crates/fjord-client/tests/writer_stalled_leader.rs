//! One writer, two bucket leaders, one of which stops reading its socket:
//! the healthy leader's batches must still be acknowledged while the other
//! is stalled, and the stalled batches must fail (retriably) once the
//! request timeout has passed, not hang. And when a leader's connection
//! died and the coordinator stops answering MetaData, the refresh of the
//! route fails (retriably) instead of holding the writer for ever.
//!
//! The cluster: a real in-process server leads bucket [`HEALTHY_BUCKET`];
//! a listener that reads the first bytes of a request and then nothing
//! more ("the stall node") leads bucket [`STALLED_BUCKET`]. The client
//! bootstraps through a proxy in front of the real server that rewrites
//! its MetaData answers to say so. A batch far larger than loopback socket
//! buffers goes to the stall node first, so its frame's write can never
//! complete; only once the stall node has seen it arrive is the healthy
//! batch appended.

mod support;

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use fjord_client::bucket::{BatchBuckets, BucketAssigner, NoKeyAssigner};
use fjord_client::writer::config::{OPT_ENABLE_IDEMPOTENCE, OPT_REQUEST_TIMEOUT, OPT_RETRIES};
use fjord_client::{AppendWriter, ClientError, FlussClient, TableInfo, TablePath, WriterConfig};
use fjord_proto::messages as pb;
use fjord_proto::ErrorCode;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::mpsc;

use support::{create_bucketed_table, id_text_schema, TestServer};

/// The bucket the real server leads.
const HEALTHY_BUCKET: i32 = 0;
/// The bucket the stall node leads.
const STALLED_BUCKET: i32 = 1;
/// Node id the rewritten MetaData answers give the stall node.
const STALL_NODE_ID: i32 = 7_001;
/// MetaData's api key.
const METADATA: i16 = 1012;
/// ProduceLog's api key.
const PRODUCE_LOG: i16 = 1014;
/// Receive buffer of the stall node's sockets: tiny, so the bytes it
/// absorbs without reading are mostly the client's send buffer.
const STALL_RECV_BUFFER_BYTES: u32 = 4 * 1024;
/// Rows of the stalled batch and the bytes of each row's string: 16 MiB in
/// all, several times what the client's send buffer (at most
/// `net.ipv4.tcp_wmem`'s 4 MiB by default) and the stall node's receive
/// buffer hold, so its frame's write cannot complete.
const STALLED_ROWS: usize = 16 * 1024;
const STALLED_ROW_TEXT_BYTES: usize = 1024;
/// Server-side produce timeout: the stalled frame's write fails this plus
/// the sender's 5 s grace after it began. Long enough that the healthy
/// batch is acknowledged well before, on a loaded machine too.
const REQUEST_TIMEOUT: &str = "5s";
/// Outer bound of every wait: turns a hang into a failure, asserts no timing.
const HANG: Duration = Duration::from_secs(120);

/// How the node leading [`STALLED_BUCKET`] behaves.
#[derive(Clone, Copy)]
enum Node {
    /// Reads the first request header of a connection, then nothing more.
    StopsReading,
    /// Closes a connection once the first request header arrived.
    Closes,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_stops_reading_does_not_delay_the_other_leaders_batches() {
    let server = TestServer::start().await;
    let (stall_addr, mut stalled_frames) = start_node(Node::StopsReading).await;
    let proxy = start_metadata_proxy(server.addr.clone(), stall_addr.clone()).await;

    let client = FlussClient::connect(&[proxy.addr])
        .await
        .expect("client connects");
    let path = TablePath::new("stall", "two_leaders");
    let table = create_bucketed_table(&client, &path, id_text_schema(), 2, &["id"], "NONE").await;
    let route = client.table_route(&table).await.expect("route");
    assert_eq!(route.leader(STALLED_BUCKET).addr(), stall_addr);
    assert_eq!(route.leader(HEALTHY_BUCKET).addr(), server.addr);

    // No retries (so no idempotence, which needs them): the stalled batch
    // fails at its first timeout, which the test then observes.
    let options = [
        (OPT_REQUEST_TIMEOUT, REQUEST_TIMEOUT),
        (OPT_RETRIES, "0"),
        (OPT_ENABLE_IDEMPOTENCE, "false"),
    ];
    let config = WriterConfig::from_options(options.iter().copied()).expect("valid options");
    let mut writer = client.append_writer(&path, config).await.expect("writer");
    let schema = writer.arrow_schema().clone();
    let stalled_id = id_in_bucket(&table, &schema, STALLED_BUCKET);
    let healthy_id = id_in_bucket(&table, &schema, HEALTHY_BUCKET);

    let text = "x".repeat(STALLED_ROW_TEXT_BYTES);
    let mut stalled = writer
        .append_batch(batch(&schema, stalled_id, &text, STALLED_ROWS))
        .await
        .expect("append the stalled batch");
    // The sender is now writing the stalled frame, which cannot complete.
    let api_key = tokio::time::timeout(HANG, stalled_frames.recv())
        .await
        .expect("the stalled frame reaches the stall node")
        .expect("stall node running");
    assert_eq!(api_key, PRODUCE_LOG);

    let healthy = writer
        .append_batch(batch(&schema, healthy_id, "healthy", 1))
        .await
        .expect("append the healthy batch");
    let ack = tokio::time::timeout(HANG, healthy)
        .await
        .expect("the healthy leader's batch completes")
        .expect("the healthy leader acknowledges its batch");
    assert_eq!(ack.bucket, HEALTHY_BUCKET);
    assert!(ack.base_offset >= 0, "{ack:?}");
    assert!(
        is_pending(&mut stalled),
        "the healthy batch was acknowledged only after the stalled one had \
         already failed: the stalled leader held up the other leader's batch"
    );

    // A write that never completes fails its batches after the timeout.
    let error = tokio::time::timeout(HANG, stalled)
        .await
        .expect("the stalled batch fails after the request timeout instead of hanging")
        .expect_err("the stall node never read the batch");
    assert!(
        error.is_retriable(),
        "a stalled write is retriable: {error}"
    );
    assert!(
        error.to_string().contains(&stall_addr),
        "the error names the stalled server {stall_addr}: {error}"
    );
    drop(writer);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_stops_answering_fails_the_route_refresh_instead_of_holding_the_writer()
{
    let server = TestServer::start().await;
    let (closing_addr, mut frames) = start_node(Node::Closes).await;
    let proxy = start_metadata_proxy(server.addr.clone(), closing_addr).await;
    let client = FlussClient::connect(&[proxy.addr])
        .await
        .expect("client connects");
    let path = TablePath::new("stall", "silent_coordinator");
    let table = create_bucketed_table(&client, &path, id_text_schema(), 2, &["id"], "NONE").await;
    let options = [
        (OPT_REQUEST_TIMEOUT, "1s"),
        (OPT_RETRIES, "0"),
        (OPT_ENABLE_IDEMPOTENCE, "false"),
    ];
    let config = WriterConfig::from_options(options.iter().copied()).expect("valid options");
    let mut writer = client.append_writer(&path, config).await.expect("writer");

    // The closing node drops its connection: the route is now stale.
    let error = one_row_failing(&mut writer, &table, STALLED_BUCKET, "lost").await;
    assert!(error.is_retriable(), "{error}");
    let seen = tokio::time::timeout(HANG, frames.recv()).await;
    assert!(
        matches!(seen, Ok(Some(PRODUCE_LOG))),
        "the closing node saw the request"
    );
    writer
        .flush()
        .await
        .expect_err("flush reports the lost batch");

    // The next batch needs fresh leaders, and the coordinator is silent.
    proxy.swallow_metadata.store(true, Ordering::SeqCst);
    // It fails once the refresh times out, instead of waiting for ever.
    let error = one_row_failing(&mut writer, &table, HEALTHY_BUCKET, "next").await;
    assert!(error.is_retriable(), "{error}");
    assert_eq!(
        error.error_code(),
        Some(ErrorCode::RequestTimeOut),
        "{error}"
    );
    drop(writer);
    server.stop().await;
}

/// Appends one row for `bucket` and returns the error its batch completes
/// with (it must fail, within [`HANG`]).
async fn one_row_failing(
    writer: &mut AppendWriter,
    table: &TableInfo,
    bucket: i32,
    text: &str,
) -> ClientError {
    let schema = writer.arrow_schema().clone();
    let id = id_in_bucket(table, &schema, bucket);
    let completion = writer
        .append_batch(batch(&schema, id, text, 1))
        .await
        .expect("append");
    tokio::time::timeout(HANG, completion)
        .await
        .expect("the batch completes")
        .expect_err("the batch cannot be written")
}

/// `rows` rows `(id, text)`: one Arrow batch of the table's schema.
fn batch(schema: &SchemaRef, id: i64, text: &str, rows: usize) -> RecordBatch {
    let ids: Int64Array = std::iter::repeat_n(Some(id), rows).collect();
    let texts: StringArray = std::iter::repeat_n(Some(text), rows).collect();
    RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(texts)]).expect("batch")
}

/// The first id whose rows the table's bucketing sends to `bucket`.
fn id_in_bucket(table: &TableInfo, schema: &SchemaRef, bucket: i32) -> i64 {
    let mut assigner = BucketAssigner::new(table, NoKeyAssigner::Sticky).expect("assigner");
    (0..1_000)
        .find(|&id| {
            assigner
                .assign_batch(&batch(schema, id, "", 1))
                .expect("assign")
                == BatchBuckets::Single(bucket)
        })
        .expect("some id hashes to each bucket")
}

/// Whether `future` is still pending (polled once, without waiting).
fn is_pending<F: Future + Unpin>(future: &mut F) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(future).poll(&mut cx).is_pending()
}

/// A server that accepts connections and reads the first request header of
/// each (reporting its api key), then behaves as `node` says. Returns its
/// address and the reports.
async fn start_node(node: Node) -> (String, mpsc::UnboundedReceiver<i16>) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .set_recv_buffer_size(STALL_RECV_BUFFER_BYTES)
        .expect("receive buffer");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let listener = socket.listen(16).expect("listen");
    let addr = listener.local_addr().expect("addr").to_string();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            let tx = tx.clone();
            let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
            tokio::spawn(async move {
                // length (4), api key (2): then never read again.
                let mut header = [0u8; 6];
                if stream.read_exact(&mut header).await.is_ok() {
                    let _ = tx.send(i16::from_be_bytes([header[4], header[5]]));
                }
                if let Node::StopsReading = node {
                    // Keep the socket open (unread) until the node stops.
                    let _ = done_rx.await;
                }
                drop(stream);
            });
            held.push(done_tx);
        }
    });
    (addr, rx)
}

/// The proxy in front of the real server.
struct MetadataProxy {
    /// Where clients bootstrap from.
    addr: String,
    /// Set: MetaData requests are swallowed (never forwarded nor answered).
    swallow_metadata: Arc<AtomicBool>,
}

/// A proxy in front of the server at `upstream` that rewrites its MetaData
/// answers: the node at `stall_addr` joins the tablet servers and leads
/// [`STALLED_BUCKET`] of every table.
async fn start_metadata_proxy(upstream: String, stall_addr: String) -> MetadataProxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
    let addr = listener.local_addr().expect("addr").to_string();
    let swallow_metadata = Arc::new(AtomicBool::new(false));
    let swallow = Arc::clone(&swallow_metadata);
    let stall_port: i32 = stall_addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("stall port");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                return;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            let metadata_ids: Arc<Mutex<HashSet<i32>>> = Arc::default();
            tokio::spawn(forward_requests(
                client_read,
                server_write,
                Arc::clone(&metadata_ids),
                Arc::clone(&swallow),
            ));
            tokio::spawn(forward_answers(
                server_read,
                client_write,
                metadata_ids,
                stall_port,
            ));
        }
    });
    MetadataProxy {
        addr,
        swallow_metadata,
    }
}

/// Reads one frame (4-byte big-endian length, then the body); `None` at EOF.
async fn read_frame(stream: &mut OwnedReadHalf) -> Option<Bytes> {
    let length = stream.read_u32().await.ok()? as usize;
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.ok()?;
    Some(Bytes::from(body))
}

/// Client to server, unchanged, noting the request ids of MetaData requests
/// (or dropping them while `swallow` is set).
async fn forward_requests(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    metadata_ids: Arc<Mutex<HashSet<i32>>>,
    swallow: Arc<AtomicBool>,
) {
    // Request: api_key i16 | api_version i16 | request_id i32 | body.
    while let Some(frame) = read_frame(&mut from).await {
        if frame.len() >= 8 && i16::from_be_bytes([frame[0], frame[1]]) == METADATA {
            if swallow.load(Ordering::SeqCst) {
                continue;
            }
            let id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            metadata_ids.lock().expect("ids").insert(id);
        }
        let mut out = BytesMut::with_capacity(4 + frame.len());
        out.put_u32(frame.len() as u32);
        out.put_slice(&frame);
        if to.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// Server to client, with successful MetaData answers rewritten.
async fn forward_answers(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    metadata_ids: Arc<Mutex<HashSet<i32>>>,
    stall_port: i32,
) {
    // Response: type i8 (0 = success) | request_id i32 | body.
    while let Some(frame) = read_frame(&mut from).await {
        let mut frame = frame;
        if frame.len() >= 5 && frame[0] == 0 {
            let id = i32::from_be_bytes([frame[1], frame[2], frame[3], frame[4]]);
            if metadata_ids.lock().expect("ids").remove(&id) {
                let mut body = frame.slice(5..);
                let mut answer = pb::MetadataResponse::decode(&mut body).expect("MetaData answer");
                lead_stalled_bucket(&mut answer, stall_port);
                let mut out = BytesMut::from(&frame[..5]);
                answer.encode(&mut out).expect("encode MetaData");
                frame = out.freeze();
            }
        }
        let mut out = BytesMut::with_capacity(4 + frame.len());
        out.put_u32(frame.len() as u32);
        out.put_slice(frame.chunk());
        if to.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// Adds the stall node and makes it the leader of [`STALLED_BUCKET`].
fn lead_stalled_bucket(answer: &mut pb::MetadataResponse, stall_port: i32) {
    answer.tablet_servers.push(pb::PbServerNode {
        node_id: STALL_NODE_ID,
        host: "127.0.0.1".to_owned(),
        port: stall_port,
        listeners: None,
        rack: None,
    });
    let buckets = answer
        .table_metadata
        .iter_mut()
        .flat_map(|t| t.bucket_metadata.iter_mut())
        .chain(
            answer
                .partition_metadata
                .iter_mut()
                .flat_map(|p| p.bucket_metadata.iter_mut()),
        );
    for bucket in buckets.filter(|b| b.bucket_id == STALLED_BUCKET) {
        bucket.leader_id = Some(STALL_NODE_ID);
    }
}
