//! A gate in front of an in-process server for route-refresh tests: a TCP
//! proxy that forwards every frame unchanged, except MetaData requests
//! naming a gated partition, which it hands to the test to forward or
//! refuse when the test says so. MetaData answers name the server itself,
//! so only the connection clients bootstrap through passes the gate;
//! produce requests go straight to the leader. Also the one-row batches
//! and the bounded waits these tests write with.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use arrow_array::{Int64Array, RecordBatch, StringArray};
use bytes::{Bytes, BytesMut};
use fjord_client::writer::config::{OPT_ENABLE_IDEMPOTENCE, OPT_NO_KEY_ASSIGNER, OPT_RETRIES};
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
pub use super::HANG;

/// The proxy; see the module doc.
pub struct MetadataGate {
    /// Where clients bootstrap from.
    pub addr: String,
    /// Partitions whose MetaData requests are held.
    gated: Arc<Mutex<HashSet<i64>>>,
    /// The requests held, in arrival order.
    pub held: mpsc::UnboundedReceiver<Held>,
}

impl MetadataGate {
    /// Starts a gate in front of the server at `upstream`; it holds nothing
    /// until told to.
    pub async fn start(upstream: String) -> Self {
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
        Self { addr, gated, held }
    }

    /// From now on, hold every MetaData request naming `partition_id`.
    pub fn hold(&self, partition_id: i64) {
        self.hold_all([partition_id]);
    }

    /// From now on, hold every MetaData request naming one of
    /// `partition_ids` (none: hold nothing more).
    pub fn hold_all(&self, partition_ids: impl IntoIterator<Item = i64>) {
        *self.gated.lock().expect("gate") = partition_ids.into_iter().collect();
    }

    /// The next held request (within [`HANG`]).
    pub async fn next_held(&mut self) -> Held {
        tokio::time::timeout(HANG, self.held.recv())
            .await
            .expect("a MetaData request for a gated partition arrives")
            .expect("gate running")
    }

    /// Whether no request is held beyond those taken already, checked
    /// behind a request of `client`'s own for the ungated `partition_id`
    /// of `table`. The gate reads a connection's requests in order, and
    /// `client`'s coordinator connection is the one its writers' route
    /// refreshes use: once that request is answered, any request a writer
    /// sent before it is held already, not on its way.
    pub async fn holds_nothing_more(
        &mut self,
        client: &FlussClient,
        table: &TableInfo,
        partition_id: i64,
    ) -> bool {
        client
            .refresh_route(table, Some(partition_id))
            .await
            .expect("the ungated partition's route");
        self.held.try_recv().is_err()
    }
}

/// One MetaData request the gate holds, and the way on to each side of its
/// connection.
pub struct Held {
    /// The whole request frame, length prefix included.
    frame: Bytes,
    /// The partition ids it names.
    pub partitions: Vec<i64>,
    to_server: mpsc::UnboundedSender<Bytes>,
    to_client: mpsc::UnboundedSender<Bytes>,
}

impl Held {
    /// Sends the request on to the server, which answers it as usual.
    pub fn forward(self) {
        self.to_server.send(self.frame).expect("connection open");
    }

    /// Answers the request with an error frame of `code`.
    pub fn refuse(self, code: ErrorCode, message: &'static str) {
        // Request frame: length | api_key i16 | api_version i16 | request_id i32 | body.
        let request_id =
            i32::from_be_bytes([self.frame[8], self.frame[9], self.frame[10], self.frame[11]]);
        let mut out = BytesMut::new();
        encode_error_response(&mut out, request_id, &code.with_message(message))
            .expect("error frame");
        self.to_client.send(out.freeze()).expect("connection open");
    }
}

/// Creates `path` as `id BIGINT, dt STRING`, partitioned by `dt`, with
/// `buckets` buckets and the partitions `days`; returns the table and the
/// partitions' ids, in the order of `days`.
pub async fn create_day_partitions(
    client: &FlussClient,
    path: &TablePath,
    buckets: i32,
    days: &[&str],
) -> (TableInfo, Vec<i64>) {
    let schema = Schema::builder()
        .column("id", DataType::bigint())
        .column("dt", DataType::string())
        .build()
        .expect("schema");
    let admin = client.admin();
    let table = super::create_partitioned_table(&admin, path, schema, &["dt"], Some(buckets)).await;
    for day in days {
        admin
            .create_partition(path, &[("dt".to_owned(), (*day).to_owned())], false)
            .await
            .expect("create partition");
    }
    let partitions = admin.list_partitions(path, None).await.expect("list");
    let ids = days
        .iter()
        .map(|day| {
            partitions
                .iter()
                .find(|p| p.name == *day)
                .map(|p| p.partition_id)
                .expect("partition listed")
        })
        .collect();
    (table, ids)
}

/// A server, a gate in front of it, and a client that bootstraps through
/// the gate: its coordinator connection, which the writers' route
/// refreshes use, goes through the gate.
pub async fn start_gated() -> (super::TestServer, MetadataGate, FlussClient) {
    let server = super::TestServer::start().await;
    let gate = MetadataGate::start(server.addr.clone()).await;
    let client = FlussClient::connect(std::slice::from_ref(&gate.addr))
        .await
        .expect("client connects");
    (server, gate, client)
}

/// A writer for `path` with `client.writer.retries` = `retries`
/// (idempotence on only with retries), each batch to the next bucket
/// (round robin), and the `extra` options; it has written one
/// acknowledged row to the partition `routed_day`, so that partition is
/// routed.
pub async fn routed_writer(
    client: &FlussClient,
    path: &TablePath,
    routed_day: &str,
    retries: &str,
    extra: &[(&str, &str)],
) -> AppendWriter {
    let idempotence = if retries == "0" { "false" } else { "true" };
    let options = [
        (OPT_RETRIES, retries),
        (OPT_ENABLE_IDEMPOTENCE, idempotence),
        // Consecutive batches go to different buckets.
        (OPT_NO_KEY_ASSIGNER, "round_robin"),
    ];
    let config =
        WriterConfig::from_options(options.iter().chain(extra).copied()).expect("valid options");
    let mut writer = client.append_writer(path, config).await.expect("writer");
    let first = append_day_row(&mut writer, 0, routed_day).await;
    acknowledged(first, "the first batch is acknowledged").await;
    writer
}

/// Appends one row `(id, day)` of an `id BIGINT, <day> STRING` table as its
/// own batch; returns its completion.
pub async fn append_day_row(writer: &mut AppendWriter, id: i64, day: &str) -> BatchCompletion {
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

/// The batch's acknowledgement; `what` says what the test expected when it
/// is refused instead. [`HANG`] turns a hang into a failure.
pub async fn acknowledged(completion: BatchCompletion, what: &str) -> BatchAck {
    match tokio::time::timeout(HANG, completion).await {
        Ok(Ok(ack)) => ack,
        Ok(Err(e)) => panic!("{what}: refused: {e}"),
        Err(_) => panic!("{what}: no completion within {HANG:?}"),
    }
}

/// The batch's refusal; `what` says why the test expected one.
pub async fn refused(completion: BatchCompletion, what: &str) -> ClientError {
    match tokio::time::timeout(HANG, completion).await {
        Ok(Err(e)) => e,
        Ok(Ok(ack)) => panic!("{what}: acknowledged instead: {ack:?}"),
        Err(_) => panic!("{what}: no completion within {HANG:?}"),
    }
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
/// a gated partition, which go to `held`.
async fn gate_requests(
    mut from: OwnedReadHalf,
    to_server: mpsc::UnboundedSender<Bytes>,
    to_client: mpsc::UnboundedSender<Bytes>,
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
