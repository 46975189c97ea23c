//! Writer test harness: an in-process Fjord server on a loopback port, an
//! optional TCP proxy in front of it that misbehaves on purpose (drops a
//! connection after the server has received a produce request, or delays
//! answers), and helpers to create tables and read every row back.

#![allow(dead_code)]

pub mod metadata_gate;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::RecordBatch;
use fjord_client::bucket::{BucketAssigner, NoKeyAssigner};
use fjord_client::row::{Datum, InternalRow, RowBatchBuilder};
use fjord_client::{AppendWriter, FlussClient, LogScanner, ScannerConfig, TableInfo, TablePath};
use fjord_format::schema::{
    DatabaseDescriptor, Schema, TableDescriptor, TableDistribution,
    TABLE_LOG_ARROW_COMPRESSION_TYPE,
};
use fjord_format::types::DataType;
use fjord_server::{Options, Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Outer bound of a test's waits: turns a hang into a failure, asserts no
/// timing.
pub const HANG: Duration = Duration::from_secs(120);

/// Appends `row`, failing the test if the append is refused or does not
/// finish within [`HANG`].
pub async fn append_in_time<R: InternalRow + ?Sized>(writer: &mut AppendWriter, row: &R) {
    tokio::time::timeout(HANG, writer.append(row))
        .await
        .expect("append finishes")
        .expect("append");
}

/// Rows `(id, payload)` after which a batch of `writer`'s table reaches
/// `seal_bytes` estimated bytes: the row that seals it is the last.
pub fn rows_per_full_batch(writer: &AppendWriter, payload: &str, seal_bytes: usize) -> usize {
    let mut builder = RowBatchBuilder::new(writer.arrow_schema().clone()).expect("builder");
    let mut rows = 0;
    while builder.estimated_bytes() < seal_bytes {
        builder
            .append(&[Datum::BigInt(rows as i64), Datum::String(payload)])
            .expect("row");
        rows += 1;
    }
    rows
}

/// Ids 0, 1, 2, ... routed as the writer routes rows `(id, ...)` of
/// `table` (hashed on `id`): per bucket, the first `wanted(bucket)` ids
/// that land in it.
pub fn ids_by_bucket(table: &TableInfo, wanted: impl Fn(usize) -> usize) -> Vec<Vec<i64>> {
    let mut assigner = BucketAssigner::new(table, NoKeyAssigner::Sticky).expect("assigner");
    let mut ids: Vec<Vec<i64>> = (0..table.bucket_count() as usize)
        .map(|bucket| Vec::with_capacity(wanted(bucket)))
        .collect();
    let mut full = ids
        .iter()
        .enumerate()
        .filter(|(b, _)| wanted(*b) == 0)
        .count();
    let mut id = 0i64;
    while full < ids.len() {
        let bucket = assigner
            .assign(&[Datum::BigInt(id), Datum::Null])
            .expect("bucket of a BIGINT key") as usize;
        let list = &mut ids[bucket];
        if list.len() < wanted(bucket) {
            list.push(id);
            full += usize::from(list.len() == wanted(bucket));
        }
        id += 1;
    }
    ids
}

/// Flushes `writer`, failing the test if the flush fails or does not
/// finish within [`HANG`].
pub async fn flush_in_time(writer: &mut AppendWriter) {
    tokio::time::timeout(HANG, writer.flush())
        .await
        .expect("flush finishes")
        .expect("flush succeeds");
}

/// ProduceLog's api key.
const PRODUCE_LOG: i16 = 1014;
/// PutKv's api key.
const PUT_KV: i16 = 1016;
/// Lookup's api key.
const LOOKUP: i16 = 1017;

/// How the proxy misbehaves.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Forwards everything.
    None,
    /// For the first `n` produce answers: swallows the answer and closes
    /// both sides of that connection (the server has appended the batch,
    /// the client never hears of it).
    DropProduceAnswers(usize),
    /// Holds every answer for this long before forwarding it.
    DelayAnswers(Duration),
    /// For the first `n` PutKv answers: swallows the answer and closes both
    /// sides of that connection (the server has applied the batch).
    DropPutKvAnswers(usize),
    /// For the first `n` PutKv answers: every bucket's part is rewritten
    /// to carry `error_code` (when given; the batch was applied all the
    /// same) and `pressure` (when given).
    RewritePutKvAnswers {
        /// Answers rewritten.
        n: usize,
        /// The Fluss error code each bucket answers with.
        error_code: Option<i32>,
        /// The storage pressure each bucket reports.
        pressure: Option<f32>,
    },
    /// For the first `n` Lookup answers: swallows the answer and closes
    /// both sides of that connection.
    DropLookupAnswers(usize),
    /// For the first `n` Lookup answers: every bucket's part is replaced
    /// by `error_code` (and no values).
    RewriteLookupAnswers {
        /// Answers rewritten.
        n: usize,
        /// The Fluss error code each bucket answers with.
        error_code: i32,
    },
}

impl Fault {
    /// The API whose answers the fault acts on, and how many of them.
    fn target(self) -> (i16, usize) {
        match self {
            Fault::DropProduceAnswers(n) => (PRODUCE_LOG, n),
            Fault::DropPutKvAnswers(n) | Fault::RewritePutKvAnswers { n, .. } => (PUT_KV, n),
            Fault::DropLookupAnswers(n) | Fault::RewriteLookupAnswers { n, .. } => (LOOKUP, n),
            Fault::None | Fault::DelayAnswers(_) => (PRODUCE_LOG, 0),
        }
    }
}

/// A running in-process server (and proxy, if any).
pub struct TestServer {
    /// The address clients bootstrap from (the proxy's when there is one;
    /// MetaData answers name it too, so every connection goes through it).
    pub addr: String,
    /// Answers the proxy swallowed (or rewrote) so far.
    pub dropped: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    proxy: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// A server clients talk to directly.
    pub async fn start() -> Self {
        Self::start_with(None, &[]).await
    }

    /// A server behind a proxy with `fault`. The server binds 127.0.0.1:P
    /// and advertises 127.0.0.2 (the proxy binds 127.0.0.2:P), so leader
    /// connections learned from metadata go through the proxy too.
    pub async fn start_behind_proxy(fault: Fault) -> Self {
        Self::start_with(Some(fault), &[]).await
    }

    /// A server with extra server options (`key=value`).
    pub async fn start_with(fault: Option<Fault>, settings: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut options = Options::default();
        // Interval flushing keeps acks=all fast in tests; durability is not under test.
        options
            .set("log.flush.interval-ms=1000")
            .expect("valid option");
        if fault.is_some() {
            options
                .set("fjord.server.advertised-host=127.0.0.2")
                .expect("valid option");
        }
        for s in settings {
            options.set(s).expect("valid option");
        }
        let config = ServerConfig::from_options(dir.path().to_owned(), options).expect("config");
        let server = Server::bind(config, "127.0.0.1:0")
            .await
            .expect("server starts");
        let server_addr = server.local_addr();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        let dropped = Arc::new(AtomicUsize::new(0));
        let (addr, proxy) = match fault {
            None => (server_addr.to_string(), None),
            Some(fault) => {
                let listen = format!("127.0.0.2:{}", server_addr.port());
                let listener = TcpListener::bind(&listen).await.expect("proxy binds");
                let proxy = tokio::spawn(run_proxy(
                    listener,
                    server_addr.to_string(),
                    fault,
                    Arc::clone(&dropped),
                ));
                (listen, Some(proxy))
            }
        };
        Self {
            addr,
            dropped,
            stop: Some(tx),
            task: Some(task),
            proxy,
            _dir: dir,
        }
    }

    /// A client bootstrapped from this server.
    pub async fn client(&self) -> FlussClient {
        FlussClient::connect(std::slice::from_ref(&self.addr))
            .await
            .expect("client connects")
    }

    /// Stops the server cleanly.
    pub async fn stop(mut self) {
        if let Some(proxy) = self.proxy.take() {
            proxy.abort();
        }
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

async fn run_proxy(
    listener: TcpListener,
    upstream: String,
    fault: Fault,
    dropped: Arc<AtomicUsize>,
) {
    let remaining = Arc::new(AtomicUsize::new(fault.target().1));
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let Ok(server) = TcpStream::connect(&upstream).await else {
            return;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        tokio::spawn(proxy_connection(
            client,
            server,
            fault,
            Arc::clone(&remaining),
            Arc::clone(&dropped),
        ));
    }
}

/// Reads one frame (4-byte big-endian length + body); `None` at EOF.
async fn read_frame(stream: &mut tokio::net::tcp::OwnedReadHalf) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.ok()?;
    let n = u32::from_be_bytes(len) as usize;
    let mut frame = vec![0u8; 4 + n];
    frame[..4].copy_from_slice(&len);
    stream.read_exact(&mut frame[4..]).await.ok()?;
    Some(frame)
}

async fn proxy_connection(
    client: TcpStream,
    server: TcpStream,
    fault: Fault,
    remaining: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let produce_ids: Arc<Mutex<HashSet<i32>>> = Arc::default();
    let ids = Arc::clone(&produce_ids);
    let watched = fault.target().0;
    let upstream = tokio::spawn(async move {
        // Request frame: len | api_key i16 | api_version i16 | request_id i32 | body.
        while let Some(frame) = read_frame(&mut client_read).await {
            if frame.len() >= 12 && i16::from_be_bytes([frame[4], frame[5]]) == watched {
                let id = i32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
                ids.lock().unwrap().insert(id);
            }
            if server_write.write_all(&frame).await.is_err() {
                return;
            }
        }
    });
    // Response frame: len | type i8 | request_id i32 | body.
    while let Some(mut frame) = read_frame(&mut server_read).await {
        let id = (frame.len() >= 9)
            .then(|| i32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]));
        let is_produce = id.is_some_and(|id| produce_ids.lock().unwrap().remove(&id));
        if is_produce
            && remaining
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| r.checked_sub(1))
                .is_ok()
        {
            dropped.fetch_add(1, Ordering::SeqCst);
            match fault {
                Fault::RewritePutKvAnswers {
                    error_code,
                    pressure,
                    ..
                } => frame = rewrite_put_kv_answer(&frame, error_code, pressure),
                Fault::RewriteLookupAnswers { error_code, .. } => {
                    frame = rewrite_lookup_answer(&frame, error_code);
                }
                _ => break,
            }
        }
        if let Fault::DelayAnswers(delay) = fault {
            tokio::time::sleep(delay).await;
        }
        if client_write.write_all(&frame).await.is_err() {
            break;
        }
    }
    upstream.abort();
    // Dropping both halves closes both sockets.
}

/// A PutKv response frame whose every bucket answers with `error_code`
/// (and no offset) when given, and reports `pressure` when given.
fn rewrite_put_kv_answer(frame: &[u8], error_code: Option<i32>, pressure: Option<f32>) -> Vec<u8> {
    use prost::Message;
    // len i32 | type i8 | request_id i32 | body.
    let mut response =
        fjord_proto::messages::PutKvResponse::decode(&frame[9..]).expect("a PutKv answer");
    for bucket in &mut response.buckets_resp {
        if let Some(code) = error_code {
            bucket.error_code = Some(code);
            bucket.error_message = Some("rewritten by the test proxy".to_owned());
            bucket.log_end_offset = None;
        }
        if pressure.is_some() {
            bucket.pressure = pressure;
        }
    }
    reframe(frame, &response.encode_to_vec())
}

/// A Lookup response frame whose every bucket answers with `error_code`
/// and no values.
fn rewrite_lookup_answer(frame: &[u8], error_code: i32) -> Vec<u8> {
    use prost::Message;
    let mut response =
        fjord_proto::messages::LookupResponse::decode(&frame[9..]).expect("a Lookup answer");
    for bucket in &mut response.buckets_resp {
        bucket.error_code = Some(error_code);
        bucket.error_message = Some("rewritten by the test proxy".to_owned());
        bucket.values.clear();
    }
    reframe(frame, &response.encode_to_vec())
}

/// `frame`'s header (type and request id) around a new `body`.
fn reframe(frame: &[u8], body: &[u8]) -> Vec<u8> {
    // len i32 | type i8 | request_id i32 | body.
    let mut out = Vec::with_capacity(9 + body.len());
    out.extend_from_slice(&((5 + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&frame[4..9]);
    out.extend_from_slice(body);
    out
}

/// Creates database `path.database` (if needed) and the primary-key table
/// `path`: `schema` (with its primary key), `buckets` buckets, bucketed by
/// `bucket_keys` (none: the default, the physical primary key),
/// partitioned by `partition_keys`, with `properties`.
pub async fn create_pk_table(
    client: &FlussClient,
    path: &TablePath,
    schema: Schema,
    buckets: i32,
    bucket_keys: &[&str],
    partition_keys: &[&str],
    properties: &[(&str, &str)],
) -> TableInfo {
    let descriptor = TableDescriptor::new(
        schema,
        None,
        partition_keys.iter().map(|k| (*k).to_owned()).collect(),
        Some(TableDistribution {
            bucket_count: Some(buckets),
            bucket_keys: bucket_keys.iter().map(|k| (*k).to_owned()).collect(),
        }),
        properties
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        Default::default(),
    )
    .expect("descriptor");
    create_described_table(&client.admin(), path, &descriptor).await
}

/// `id BIGINT, s STRING`: the two-column schema the writer's memory checks
/// write long strings into.
pub fn id_text_schema() -> Schema {
    Schema::builder()
        .column("id", DataType::bigint())
        .column("s", DataType::string())
        .build()
        .expect("schema")
}

/// Creates database `db` (if needed) and a log table with `buckets`
/// buckets and the given `table.log.arrow.compression.type`.
pub async fn create_log_table(
    client: &FlussClient,
    path: &TablePath,
    schema: Schema,
    buckets: i32,
    compression: &str,
) -> TableInfo {
    create_bucketed_table(client, path, schema, buckets, &[], compression).await
}

/// Like [`create_log_table`], distributed by the hash of `bucket_keys`.
pub async fn create_bucketed_table(
    client: &FlussClient,
    path: &TablePath,
    schema: Schema,
    buckets: i32,
    bucket_keys: &[&str],
    compression: &str,
) -> TableInfo {
    let mut properties = std::collections::BTreeMap::new();
    properties.insert(
        TABLE_LOG_ARROW_COMPRESSION_TYPE.to_owned(),
        compression.to_owned(),
    );
    let descriptor = TableDescriptor::new(
        schema,
        None,
        Vec::new(),
        Some(TableDistribution {
            bucket_count: Some(buckets),
            bucket_keys: bucket_keys.iter().map(|k| (*k).to_owned()).collect(),
        }),
        properties,
        Default::default(),
    )
    .expect("descriptor");
    create_described_table(&client.admin(), path, &descriptor).await
}

/// Creates database `path.database` (if needed) and the table `path` as
/// `descriptor` says; returns the table as the server describes it.
pub async fn create_described_table(
    admin: &fjord_client::Admin,
    path: &TablePath,
    descriptor: &TableDescriptor,
) -> TableInfo {
    admin
        .create_database(&path.database, &DatabaseDescriptor::default(), true)
        .await
        .expect("create database");
    admin
        .create_table(path, descriptor, false)
        .await
        .expect("create table");
    admin.table_info(path).await.expect("table info")
}

/// Creates database `path.database` (if needed) and the log table `path`
/// with `schema`, partitioned by `partition_keys` (none: a plain table),
/// with `buckets` buckets (`None`: the server's default); returns the
/// table as the server describes it.
pub async fn create_partitioned_table(
    admin: &fjord_client::Admin,
    path: &TablePath,
    schema: Schema,
    partition_keys: &[&str],
    buckets: Option<i32>,
) -> TableInfo {
    let descriptor = TableDescriptor::new(
        schema,
        None,
        partition_keys.iter().map(|k| (*k).to_owned()).collect(),
        buckets.map(|count| TableDistribution {
            bucket_count: Some(count),
            bucket_keys: Vec::new(),
        }),
        Default::default(),
        Default::default(),
    )
    .expect("descriptor");
    create_described_table(admin, path, &descriptor).await
}

/// Reads every bucket of one partition of `table` from offset 0 until
/// `expected_rows` rows arrived, failing the test after `within`; every
/// batch must come from that partition.
#[allow(dead_code)] // not every test binary reads partitions
pub async fn read_partition_batches(
    client: &FlussClient,
    table: &TableInfo,
    partition_id: i64,
    expected_rows: usize,
    within: Duration,
) -> Vec<RecordBatch> {
    read_partition_batches_by_bucket(client, table, partition_id, expected_rows, within)
        .await
        .into_iter()
        .map(|(_, batch)| batch)
        .collect()
}

/// Like [`read_partition_batches`], with the bucket each batch was read
/// from; a bucket's batches come in offset order.
pub async fn read_partition_batches_by_bucket(
    client: &FlussClient,
    table: &TableInfo,
    partition_id: i64,
    expected_rows: usize,
    within: Duration,
) -> Vec<(i32, RecordBatch)> {
    let mut scanner =
        LogScanner::new_partitioned(table.clone(), ScannerConfig::default()).expect("scanner");
    let route = client
        .partition_route(table, partition_id)
        .await
        .expect("partition route");
    for bucket in 0..table.bucket_count() {
        scanner
            .subscribe_partition(partition_id, route.clone(), bucket, 0)
            .expect("subscribe");
    }
    let deadline = std::time::Instant::now() + within;
    let mut batches = Vec::new();
    let mut rows = 0;
    while rows < expected_rows {
        assert!(
            std::time::Instant::now() < deadline,
            "partition {partition_id}: {rows} of {expected_rows} rows within {within:?}"
        );
        for batch in scanner.poll().await.expect("poll") {
            assert_eq!(batch.partition_id, Some(partition_id));
            rows += batch.records().num_rows();
            batches.push((batch.bucket, batch.records().clone()));
        }
    }
    batches
}

/// Reads every bucket of `table` from offset 0 until `expected_rows` rows
/// arrived (or a bounded number of empty polls passed), returning the
/// batches in bucket order.
pub async fn read_all(
    client: &FlussClient,
    table: &TableInfo,
    expected_rows: usize,
) -> Vec<RecordBatch> {
    read_all_by_bucket(client, table, expected_rows)
        .await
        .into_iter()
        .map(|(_, batch)| batch)
        .collect()
}

/// Like [`read_all`], with the bucket each batch was read from.
pub async fn read_all_by_bucket(
    client: &FlussClient,
    table: &TableInfo,
    expected_rows: usize,
) -> Vec<(i32, RecordBatch)> {
    let route = client.table_route(table).await.expect("route");
    let mut scanner =
        LogScanner::new(table.clone(), route, ScannerConfig::default()).expect("scanner");
    for bucket in 0..table.bucket_count() {
        scanner.subscribe(bucket, 0).expect("subscribe");
    }
    let mut out = Vec::new();
    let mut rows = 0;
    let mut empty_polls = 0;
    // Bounded: a poll long-polls at most the fetch wait (500 ms).
    while rows < expected_rows && empty_polls < 10 {
        let batches = scanner.poll().await.expect("poll");
        if batches.is_empty() {
            empty_polls += 1;
        }
        for b in batches {
            rows += b.records.num_rows();
            out.push((b.bucket, b.records));
        }
    }
    out
}

/// A ProduceLog request carrying `records` for one bucket of table 1, for
/// tests that write frames through a `ServerConnection` directly.
pub fn one_bucket_produce_request(
    bucket_id: i32,
    records: bytes::Bytes,
) -> fjord_proto::messages::ProduceLogRequest {
    fjord_proto::messages::ProduceLogRequest {
        acks: -1,
        table_id: 1,
        timeout_ms: 30_000,
        buckets_req: vec![fjord_proto::messages::PbProduceLogReqForBucket {
            partition_id: None,
            bucket_id,
            records,
            original_partition_name: None,
            routing_bucket_count: None,
        }],
    }
}
