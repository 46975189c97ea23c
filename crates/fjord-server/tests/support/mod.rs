//! Test harness: a real server on an ephemeral loopback port and a raw
//! protocol client built on fjord-proto's client-side codec.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use bytes::BytesMut;
use fjord_proto::messages as pb;
use fjord_proto::{
    decode_response, ApiError, ApiKey, FrameDecoder, Request, Response, ResponseFrame,
};
use fjord_server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running server; `stop` shuts it down cleanly.
pub struct TestServer {
    pub addr: SocketAddr,
    /// The server's shared state, for tests that drive its background work
    /// (e.g. an auto-partition check) directly.
    #[allow(dead_code)]
    pub node: std::sync::Arc<fjord_server::node::Node>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestServer {
    pub async fn start(dir: &Path) -> Self {
        Self::start_with(ServerConfig::with_data_dir(dir.to_owned())).await
    }

    pub async fn start_with(config: ServerConfig) -> Self {
        let server = Server::bind(config, "127.0.0.1:0")
            .await
            .expect("server starts");
        Self::run(server)
    }

    /// A server whose auto-partitioning reads `clock`.
    pub async fn start_with_clock(
        config: ServerConfig,
        clock: std::sync::Arc<dyn fjord_server::meta::auto_partition::Clock>,
    ) -> Self {
        let server = Server::bind_with_clock(config, "127.0.0.1:0", clock)
            .await
            .expect("server starts");
        Self::run(server)
    }

    fn run(server: Server) -> Self {
        let addr = server.local_addr();
        let node = server.node();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        Self {
            addr,
            node,
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task ends cleanly");
        }
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr).await
    }
}

/// A raw protocol client: one request at a time unless `send` is used.
pub struct Client {
    stream: TcpStream,
    buf: BytesMut,
    next_id: i32,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Self {
        Self {
            stream: TcpStream::connect(addr).await.expect("connect"),
            buf: BytesMut::new(),
            next_id: 1,
        }
    }

    /// Writes raw bytes.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// Sends `request` with an explicit header version; returns its id.
    pub async fn send(&mut self, request: &Request, version: i16) -> i32 {
        let id = self.next_id;
        self.next_id += 1;
        let mut out = BytesMut::new();
        request.encode_frame(&mut out, version, id).expect("encode");
        self.send_raw(&out).await;
        id
    }

    /// Reads the next response frame, `None` at end of stream.
    pub async fn read_frame(&mut self) -> Option<ResponseFrame> {
        let decoder = FrameDecoder::default();
        loop {
            if let Some(frame) = decoder
                .decode_response(&mut self.buf)
                .expect("valid response frame")
            {
                return Some(frame);
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Sends `request` (version 0) and waits for its answer.
    pub async fn call(&mut self, request: Request) -> Result<Response, ApiError> {
        let key = request.api_key();
        let id = self.send(&request, 0).await;
        match self.read_frame().await.expect("a response") {
            ResponseFrame::Success { request_id, body } => {
                assert_eq!(request_id, id);
                Ok(decode_response(key, 0, body).expect("decodable response"))
            }
            ResponseFrame::Error { request_id, error } => {
                assert_eq!(request_id, id);
                Err(error)
            }
            ResponseFrame::ServerFailure { error } => panic!("server failure: {error}"),
        }
    }

    /// A fresh idempotent writer id (InitWriter).
    pub async fn init_writer(&mut self) -> i64 {
        match self
            .call(Request::InitWriter(pb::InitWriterRequest::default()))
            .await
        {
            Ok(Response::InitWriter(w)) => w.writer_id,
            other => panic!("InitWriter answered {other:?}"),
        }
    }
}

pub fn table_path(db: &str, table: &str) -> pb::PbTablePath {
    pb::PbTablePath {
        database_name: db.into(),
        table_name: table.into(),
    }
}

/// A log table descriptor as fluss-rs sends it: id INT, name STRING.
pub const LOG_TABLE_JSON: &str = r#"{"version":1,"schema":{"version":1,"columns":[{"name":"id","data_type":{"type":"INTEGER"}},{"name":"name","data_type":{"type":"STRING"}}]},"partition_key":[],"bucket_key":[],"bucket_count":3,"properties":{},"custom_properties":{}}"#;

pub async fn create_db_and_table(
    client: &mut Client,
    db: &str,
    table: &str,
) -> pb::GetTableInfoResponse {
    client
        .call(Request::CreateDatabase(pb::CreateDatabaseRequest {
            database_name: db.into(),
            ignore_if_exists: true,
            database_json: None,
        }))
        .await
        .expect("create database");
    client
        .call(Request::CreateTable(pb::CreateTableRequest {
            table_path: table_path(db, table),
            table_json: LOG_TABLE_JSON.as_bytes().to_vec().into(),
            ignore_if_exists: false,
        }))
        .await
        .expect("create table");
    match client
        .call(Request::GetTableInfo(pb::GetTableInfoRequest {
            table_path: table_path(db, table),
        }))
        .await
        .expect("get table info")
    {
        Response::GetTableInfo(info) => info,
        other => panic!("unexpected {other:?}"),
    }
}

/// A server on `dir` with a client connected and the log table `db.t`
/// (three buckets, [`LOG_TABLE_JSON`]) created: where most produce and fetch
/// tests start. `dir` must outlive the server.
pub async fn server_with_log_table(dir: &Path) -> (TestServer, Client, pb::GetTableInfoResponse) {
    let server = TestServer::start(dir).await;
    let mut client = server.client().await;
    let info = create_db_and_table(&mut client, "db", "t").await;
    (server, client, info)
}

pub fn api_key(key: ApiKey) -> i16 {
    key.id()
}

/// Log batches for the `LOG_TABLE_JSON` schema, built with fjord-format's
/// ARROW log encoder as a client would.
pub mod batches {
    use std::sync::Arc;

    use arrow_array::{Int32Array, RecordBatch, StringArray};
    use fjord_format::arrow_log::{ArrowCompression, ArrowLogEncoder};
    use fjord_format::arrow_schema::to_arrow_schema;
    use fjord_format::log_batch::BatchHeader;

    pub fn table_schema() -> fjord_format::Schema {
        let v: serde_json::Value = serde_json::from_str(super::LOG_TABLE_JSON).unwrap();
        fjord_format::json::schema_from_json(&v["schema"]).unwrap()
    }

    pub fn rows(ids: std::ops::Range<i32>) -> RecordBatch {
        let schema = to_arrow_schema(&table_schema());
        let names: Vec<String> = ids.clone().map(|i| format!("name-{i}")).collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from_iter_values(ids)),
                Arc::new(StringArray::from(names)),
            ],
        )
        .unwrap()
    }

    /// One log batch of `rows(ids)`, with an optional idempotent writer.
    pub fn batch(ids: std::ops::Range<i32>, schema_id: i16, writer: Option<(i64, i32)>) -> Vec<u8> {
        let records = rows(ids);
        let mut enc = ArrowLogEncoder::new(records.schema(), ArrowCompression::None).unwrap();
        let mut header = BatchHeader::append_only(schema_id, records.num_rows() as i32);
        if let Some((writer_id, seq)) = writer {
            header.writer_id = writer_id;
            header.batch_sequence = seq;
        }
        let mut out = Vec::new();
        enc.encode(&records, &header, None, &mut out).unwrap();
        out
    }

    /// Decodes every batch of `records` with the given (possibly projected)
    /// Arrow schema.
    pub fn decode_all(records: &[u8], schema: arrow_schema::SchemaRef) -> Vec<RecordBatch> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < records.len() {
            let (size, _) = fjord_format::log_batch::peek_size_and_magic(&records[pos..])
                .unwrap()
                .unwrap();
            let decoded = fjord_format::arrow_log::decode_log_batch_from_slice(
                &records[pos..pos + size],
                schema.clone(),
            )
            .unwrap();
            out.push(decoded.records);
            pos += size;
        }
        out
    }
}

/// A FetchLog request for one bucket from `offset`, optionally projected,
/// long-polling up to `max_wait_ms` for at least one byte.
pub fn fetch(
    table_id: i64,
    bucket_id: i32,
    offset: i64,
    projection: Option<Vec<i32>>,
    max_wait_ms: i32,
) -> Request {
    Request::FetchLog(pb::FetchLogRequest {
        follower_server_id: -1,
        max_bytes: 16 * 1024 * 1024,
        tables_req: vec![pb::PbFetchLogReqForTable {
            table_id,
            projection_pushdown_enabled: projection.is_some(),
            projected_fields: projection.unwrap_or_default(),
            buckets_req: vec![pb::PbFetchLogReqForBucket {
                bucket_id,
                fetch_offset: offset,
                max_fetch_bytes: 1024 * 1024,
                ..Default::default()
            }],
            ..Default::default()
        }],
        max_wait_ms: Some(max_wait_ms),
        min_bytes: Some(1),
        read_preference: None,
    })
}

/// Looks `keys` up in bucket 0 of `table_id` in one Lookup request: each
/// key's stored value (schema id, then the row), `None` where the key has
/// none. Panics if the request or the bucket fails.
pub async fn lookup_bucket0(
    c: &mut Client,
    table_id: i64,
    keys: Vec<bytes::Bytes>,
) -> Vec<Option<bytes::Bytes>> {
    let count = keys.len();
    let request = Request::Lookup(pb::LookupRequest {
        table_id,
        buckets_req: vec![pb::PbLookupReqForBucket {
            partition_id: None,
            bucket_id: 0,
            keys,
            original_partition_name: None,
            routing_bucket_count: None,
        }],
        insert_if_not_exists: None,
        acks: None,
        timeout_ms: None,
    });
    let Ok(Response::Lookup(mut r)) = c.call(request).await else {
        panic!("lookup failed")
    };
    let bucket = r.buckets_resp.remove(0);
    assert_eq!(bucket.error_code, None, "{:?}", bucket.error_message);
    assert_eq!(bucket.values.len(), count, "one value per key");
    bucket.values.into_iter().map(|v| v.values).collect()
}
