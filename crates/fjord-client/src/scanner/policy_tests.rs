//! The scanner's per-bucket error policy against a scripted fake server:
//! each FetchLog is answered with the next scripted response, MetaData with
//! the scripted leaders, ListOffsets with a fixed answer, so every error path
//! is reached on purpose; a server can be stopped to play a dead leader.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::{Int64Array, RecordBatch};
use bytes::{Bytes, BytesMut};
use fjord_format::arrow_log::{ArrowCompression, ArrowLogEncoder};
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::log_batch::BatchHeader;
use fjord_format::schema::{Schema, TableDescriptor, TableDistribution};
use fjord_format::types::DataType;
use fjord_proto::{encode_success_response, FrameDecoder, DEFAULT_MAX_FRAME_BYTES};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::*;
use crate::admin::TablePath;

const TABLE_ID: i64 = 7;
const BUCKETS: i32 = 2;
/// The log start the fake server reports to ListOffsets (earliest).
const LOG_START: i64 = 5;

/// `db.t` with one column, `id BIGINT NOT NULL`, not partitioned.
fn table() -> TableInfo {
    let schema = Schema::builder()
        .column("id", DataType::bigint().not_null())
        .build()
        .unwrap();
    table_with(schema, &[])
}

/// `db.t` with `schema`, partitioned by `partition_keys` (none: a plain
/// table), with [`BUCKETS`] buckets.
fn table_with(schema: Schema, partition_keys: &[&str]) -> TableInfo {
    table_with_buckets(schema, partition_keys, BUCKETS)
}

/// Like [`table_with`], with `buckets` buckets.
fn table_with_buckets(schema: Schema, partition_keys: &[&str], buckets: i32) -> TableInfo {
    let descriptor = TableDescriptor::new(
        schema,
        None,
        partition_keys.iter().map(|k| (*k).to_owned()).collect(),
        Some(TableDistribution {
            bucket_count: Some(buckets),
            bucket_keys: Vec::new(),
        }),
        Default::default(),
        Default::default(),
    )
    .unwrap();
    TableInfo {
        path: TablePath::new("db", "t"),
        table_id: TABLE_ID,
        schema_id: 0,
        descriptor,
        earlier_schemas: Vec::new(),
    }
}

/// One log batch of the ids `base..base + count`, stamped at offset `base`.
fn records(base: i64, count: i64) -> Bytes {
    let table = table();
    let schema = to_arrow_schema(table.descriptor.schema());
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from_iter_values(base..base + count))],
    )
    .unwrap();
    let mut encoder = ArrowLogEncoder::new(schema, ArrowCompression::None).unwrap();
    let mut out = Vec::new();
    let header = BatchHeader::append_only(0, count as i32);
    encoder.encode(&batch, &header, None, &mut out).unwrap();
    out[..8].copy_from_slice(&base.to_le_bytes());
    Bytes::from(out)
}

fn ok_bucket(bucket: i32, records: Option<Bytes>) -> pb::PbFetchLogRespForBucket {
    pb::PbFetchLogRespForBucket {
        bucket_id: bucket,
        high_watermark: Some(100),
        log_start_offset: Some(LOG_START),
        records,
        ..Default::default()
    }
}

fn error_bucket(bucket: i32, code: ErrorCode) -> pb::PbFetchLogRespForBucket {
    pb::PbFetchLogRespForBucket {
        bucket_id: bucket,
        error_code: Some(code.code()),
        error_message: Some("scripted".to_owned()),
        high_watermark: Some(100),
        log_start_offset: Some(LOG_START),
        ..Default::default()
    }
}

fn fetch_response(buckets: Vec<pb::PbFetchLogRespForBucket>) -> pb::FetchLogResponse {
    pb::FetchLogResponse {
        tables_resp: vec![pb::PbFetchLogRespForTable {
            table_id: TABLE_ID,
            buckets_resp: buckets,
        }],
    }
}

/// A fake server: answers FetchLog from a script (empty responses once it
/// runs out), MetaData with the scripted leaders (itself for each of
/// [`BUCKETS`] buckets until [`FakeServer::lead`]), ListOffsets with
/// [`LOG_START`].
struct FakeServer {
    addr: String,
    fetches: Arc<Mutex<VecDeque<pb::FetchLogResponse>>>,
    metadata_requests: Arc<AtomicUsize>,
    /// The partition ids MetaData requests asked for, in order.
    partitions_asked: Arc<Mutex<Vec<i64>>>,
    /// The leader of each bucket MetaData names, by bucket (for the table
    /// and for every partition).
    leaders: Arc<Mutex<Vec<SocketAddr>>>,
    /// The accept loop, which owns the connections' tasks: stopping it
    /// closes the listener and every connection.
    accept: JoinHandle<()>,
}

impl FakeServer {
    async fn start(script: Vec<pb::FetchLogResponse>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fetches = Arc::new(Mutex::new(VecDeque::from(script)));
        let metadata_requests = Arc::new(AtomicUsize::new(0));
        let partitions_asked = Arc::new(Mutex::new(Vec::new()));
        let leaders = Arc::new(Mutex::new(vec![addr; BUCKETS as usize]));
        let (f, m, p, l) = (
            fetches.clone(),
            metadata_requests.clone(),
            partitions_asked.clone(),
            leaders.clone(),
        );
        let accept = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                connections.spawn(serve(socket, f.clone(), m.clone(), p.clone(), l.clone()));
            }
        });
        Self {
            addr: addr.to_string(),
            fetches,
            metadata_requests,
            partitions_asked,
            leaders,
            accept,
        }
    }

    fn socket_addr(&self) -> SocketAddr {
        self.addr.parse().unwrap()
    }

    /// From now on MetaData names `leaders[b]` the leader of bucket `b`.
    fn lead(&self, leaders: &[SocketAddr]) {
        *self.leaders.lock().unwrap() = leaders.to_vec();
    }

    /// Plays a dead server: the listener and every connection are gone when
    /// this returns (dropping the accept loop drops the connections' tasks,
    /// which are never polled again).
    async fn stop(self) {
        self.accept.abort();
        assert!(self.accept.await.unwrap_err().is_cancelled());
    }

    async fn scanner(&self, config: ScannerConfig) -> LogScanner {
        let connection = ServerConnection::connect(&self.addr).await.unwrap();
        let route = TableRoute::resolve(&connection, &table()).await.unwrap();
        LogScanner::new(table(), route, config).unwrap()
    }

    fn script(&self, response: pb::FetchLogResponse) {
        self.fetches.lock().unwrap().push_back(response);
    }
}

async fn serve(
    mut socket: tokio::net::TcpStream,
    fetches: Arc<Mutex<VecDeque<pb::FetchLogResponse>>>,
    metadata_requests: Arc<AtomicUsize>,
    partitions_asked: Arc<Mutex<Vec<i64>>>,
    leaders: Arc<Mutex<Vec<SocketAddr>>>,
) {
    let decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_BYTES);
    let mut buf = BytesMut::new();
    loop {
        while let Ok(Some(frame)) = decoder.decode_request(&mut buf) {
            let mut out = BytesMut::new();
            let id = frame.header.request_id;
            let key = frame.header.api_key;
            if key == ApiKey::MetaData.id() {
                metadata_requests.fetch_add(1, Ordering::SeqCst);
                let request = pb::MetadataRequest::decode(frame.body).unwrap();
                partitions_asked
                    .lock()
                    .unwrap()
                    .extend(&request.partitions_id);
                // Node ids: each distinct leader's place in `nodes`.
                let mut nodes: Vec<SocketAddr> = Vec::new();
                let leader_ids: Vec<i32> = leaders
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|addr| match nodes.iter().position(|n| n == addr) {
                        Some(id) => id as i32,
                        None => {
                            nodes.push(*addr);
                            nodes.len() as i32 - 1
                        }
                    })
                    .collect();
                let leaders = || {
                    leader_ids
                        .iter()
                        .enumerate()
                        .map(|(b, &id)| pb::PbBucketMetadata {
                            bucket_id: b as i32,
                            leader_id: Some(id),
                            ..Default::default()
                        })
                        .collect::<Vec<_>>()
                };
                let response = pb::MetadataResponse {
                    partition_metadata: request
                        .partitions_id
                        .iter()
                        .map(|&id| pb::PbPartitionMetadata {
                            table_id: TABLE_ID,
                            partition_id: id,
                            bucket_metadata: leaders(),
                            ..Default::default()
                        })
                        .collect(),
                    tablet_servers: nodes
                        .iter()
                        .enumerate()
                        .map(|(id, node)| pb::PbServerNode {
                            node_id: id as i32,
                            host: node.ip().to_string(),
                            port: i32::from(node.port()),
                            ..Default::default()
                        })
                        .collect(),
                    table_metadata: vec![pb::PbTableMetadata {
                        table_id: TABLE_ID,
                        bucket_metadata: leaders(),
                        ..Default::default()
                    }],
                    ..Default::default()
                };
                encode_success_response(&mut out, id, &response).unwrap();
            } else if key == ApiKey::ListOffsets.id() {
                let request = pb::ListOffsetsRequest::decode(frame.body).unwrap();
                let response = pb::ListOffsetsResponse {
                    buckets_resp: request
                        .bucket_id
                        .iter()
                        .map(|&b| pb::PbListOffsetsRespForBucket {
                            bucket_id: b,
                            offset: Some(LOG_START),
                            ..Default::default()
                        })
                        .collect(),
                };
                encode_success_response(&mut out, id, &response).unwrap();
            } else if key == ApiKey::FetchLog.id() {
                let response = fetches
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or_else(|| fetch_response(Vec::new()));
                encode_success_response(&mut out, id, &response).unwrap();
            } else {
                return;
            }
            if socket.write_all(&out).await.is_err() {
                return;
            }
        }
        match socket.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

fn ids(batches: &[ScanBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            b.records
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect()
}

#[tokio::test]
async fn a_leadership_error_skips_the_bucket_refreshes_the_leaders_and_retries() {
    let server = FakeServer::start(vec![fetch_response(vec![
        ok_bucket(0, Some(records(0, 3))),
        error_bucket(1, ErrorCode::NotLeaderOrFollower),
    ])])
    .await;
    let mut scanner = server.scanner(ScannerConfig::default()).await;
    scanner.subscribe(0, 0).unwrap();
    scanner.subscribe(1, 0).unwrap();
    let first = scanner.poll().await.unwrap();
    assert_eq!(ids(&first), vec![0, 1, 2]);
    assert_eq!(scanner.position(ScanBucket::new(0)), Some(3));
    assert_eq!(scanner.position(ScanBucket::new(1)), Some(0));
    assert_eq!(server.metadata_requests.load(Ordering::SeqCst), 1);

    server.script(fetch_response(vec![ok_bucket(1, Some(records(0, 2)))]));
    let second = scanner.poll().await.unwrap();
    assert_eq!(ids(&second), vec![0, 1]);
    assert_eq!(second[0].bucket, 1);
    assert_eq!(scanner.position(ScanBucket::new(1)), Some(2));
    assert_eq!(
        server.metadata_requests.load(Ordering::SeqCst),
        2,
        "the leaders were asked for again"
    );
}

#[tokio::test]
async fn a_bucket_that_keeps_failing_fails_the_poll_after_the_bound() {
    let script = (0..MAX_RETRIABLE_BUCKET_ERRORS)
        .map(|_| {
            fetch_response(vec![error_bucket(
                0,
                ErrorCode::LeaderNotAvailableException,
            )])
        })
        .collect();
    let server = FakeServer::start(script).await;
    let mut scanner = server.scanner(ScannerConfig::default()).await;
    scanner.subscribe(0, 0).unwrap();
    for _ in 1..MAX_RETRIABLE_BUCKET_ERRORS {
        assert!(scanner.poll().await.unwrap().is_empty());
    }
    let error = scanner.poll().await.unwrap_err();
    assert_eq!(
        error.error_code(),
        Some(ErrorCode::LeaderNotAvailableException)
    );
    assert!(error.to_string().contains("bucket 0 of db.t"), "{error}");
}

#[tokio::test]
async fn an_out_of_range_offset_fails_with_the_log_range_and_moves_nothing() {
    let server = FakeServer::start(vec![fetch_response(vec![
        ok_bucket(0, Some(records(0, 3))),
        error_bucket(1, ErrorCode::LogOffsetOutOfRangeException),
    ])])
    .await;
    let mut scanner = server.scanner(ScannerConfig::default()).await;
    scanner.subscribe(0, 0).unwrap();
    scanner.subscribe(1, 2).unwrap();
    let error = scanner.poll().await.unwrap_err().to_string();
    assert!(
        error.contains("bucket 1 of db.t at offset 2 (log start 5, high watermark 100)"),
        "{error}"
    );
    // Bucket 0's records were not returned, so its position did not move either.
    assert_eq!(scanner.position(ScanBucket::new(0)), Some(0));
    assert_eq!(scanner.position(ScanBucket::new(1)), Some(2));
}

#[tokio::test]
async fn the_high_watermark_is_the_last_one_a_fetch_reported_and_unknown_after_subscribing() {
    let with_high_watermark =
        |records: Option<Bytes>, high_watermark: Option<i64>| pb::PbFetchLogRespForBucket {
            high_watermark,
            ..ok_bucket(0, records)
        };
    let server = FakeServer::start(vec![
        fetch_response(vec![with_high_watermark(Some(records(0, 3)), Some(3))]),
        fetch_response(vec![with_high_watermark(None, None)]),
        fetch_response(vec![error_bucket(0, ErrorCode::NotLeaderOrFollower)]),
    ])
    .await;
    let key = ScanBucket::new(0);
    let mut scanner = server.scanner(ScannerConfig::default()).await;
    scanner.subscribe(0, 0).unwrap();
    assert_eq!(scanner.high_watermark(key), None, "before any fetch");
    assert_eq!(ids(&scanner.poll().await.unwrap()), vec![0, 1, 2]);
    assert_eq!(scanner.high_watermark(key), Some(3));
    // A response without one, and a leadership error (whose high watermark
    // is not the leader's), leave the last known one.
    assert!(scanner.poll().await.unwrap().is_empty());
    assert_eq!(scanner.high_watermark(key), Some(3));
    assert!(scanner.poll().await.unwrap().is_empty());
    assert_eq!(scanner.high_watermark(key), Some(3));
    scanner.subscribe(0, 1).unwrap();
    assert_eq!(scanner.high_watermark(key), None, "moved by subscribing");
}

#[tokio::test]
async fn offset_reset_earliest_moves_a_bucket_below_the_log_start_to_it() {
    let server = FakeServer::start(vec![fetch_response(vec![error_bucket(
        0,
        ErrorCode::LogOffsetOutOfRangeException,
    )])])
    .await;
    let config = ScannerConfig {
        offset_reset: OffsetReset::Earliest,
        ..ScannerConfig::default()
    };
    let mut scanner = server.scanner(config).await;
    scanner.subscribe(0, 1).unwrap();
    assert!(scanner.poll().await.unwrap().is_empty());
    assert_eq!(scanner.position(ScanBucket::new(0)), Some(LOG_START));
    assert_eq!(
        scanner.high_watermark(ScanBucket::new(0)),
        Some(100),
        "the reset keeps the high watermark the error carried"
    );

    // Beyond the end, the reset policy does not apply: still an error.
    server.script(fetch_response(vec![error_bucket(
        0,
        ErrorCode::LogOffsetOutOfRangeException,
    )]));
    scanner.subscribe(0, 500).unwrap();
    let error = scanner.poll().await.unwrap_err().to_string();
    assert!(error.contains("beyond the end"), "{error}");
    assert_eq!(scanner.position(ScanBucket::new(0)), Some(500));
}

#[tokio::test]
async fn malformed_records_fail_the_poll_without_moving_or_panicking() {
    let mut garbage = records(0, 3).to_vec();
    garbage.truncate(40); // Shorter than the header it declares...
    garbage[8..12].copy_from_slice(&20i32.to_le_bytes()); // ...and than any header.
    let server = FakeServer::start(vec![fetch_response(vec![ok_bucket(
        0,
        Some(Bytes::from(garbage)),
    )])])
    .await;
    let mut scanner = server.scanner(ScannerConfig::default()).await;
    scanner.subscribe(0, 0).unwrap();
    let error = scanner.poll().await.unwrap_err().to_string();
    assert!(error.contains("bucket 0 of db.t at offset 0"), "{error}");
    assert_eq!(scanner.position(ScanBucket::new(0)), Some(0));
}

#[tokio::test]
async fn start_offsets_resolve_through_the_leader_or_stand_as_given() {
    let server = FakeServer::start(Vec::new()).await;
    let scanner = server.scanner(ScannerConfig::default()).await;
    assert_eq!(
        scanner
            .resolve_offset(1, StartOffset::Earliest)
            .await
            .unwrap(),
        LOG_START
    );
    assert_eq!(
        scanner
            .resolve_offset(1, StartOffset::Offset(42))
            .await
            .unwrap(),
        42
    );
    assert!(scanner
        .resolve_offset(2, StartOffset::Earliest)
        .await
        .is_err());
    assert!(scanner
        .resolve_offset(0, StartOffset::Offset(-1))
        .await
        .is_err());
}

#[tokio::test]
async fn subscribing_checks_buckets_offsets_and_the_kind_of_table() {
    let server = FakeServer::start(Vec::new()).await;
    let mut scanner = server.scanner(ScannerConfig::default()).await;
    assert!(scanner.subscribe(BUCKETS, 0).is_err());
    assert!(scanner.subscribe(-1, 0).is_err());
    assert!(scanner.subscribe(0, -3).is_err());
    let connection = ServerConnection::connect(&server.addr).await.unwrap();
    let route = TableRoute::resolve(&connection, &table()).await.unwrap();
    let error = scanner.subscribe_partition(1, route, 0, 0).unwrap_err();
    assert!(error.to_string().contains("not partitioned"), "{error}");
    assert!(LogScanner::new_partitioned(table(), ScannerConfig::default()).is_err());
    assert!(
        scanner.poll().await.unwrap().is_empty(),
        "nothing subscribed"
    );
}

#[tokio::test]
async fn a_projected_batch_with_the_unprojected_crc_is_read_and_an_unprojected_one_is_not() {
    // What a Fluss server sends for a projected fetch: the stored header,
    // CRC included, over the cut-down body. Here: a CRC that does not match.
    let mut stale_crc = records(0, 3).to_vec();
    stale_crc[fjord_format::log_batch::V0_LAYOUT.crc] ^= 0x5a;
    let stale_crc = Bytes::from(stale_crc);
    let server = FakeServer::start(vec![
        fetch_response(vec![ok_bucket(0, Some(stale_crc.clone()))]),
        fetch_response(vec![ok_bucket(0, Some(stale_crc))]),
    ])
    .await;
    let projected = ScannerConfig {
        projection: Some(vec![0]),
        ..ScannerConfig::default()
    };
    let mut scanner = server.scanner(projected).await;
    scanner.subscribe(0, 0).unwrap();
    assert_eq!(ids(&scanner.poll().await.unwrap()), vec![0, 1, 2]);

    let mut checked = server.scanner(ScannerConfig::default()).await;
    checked.subscribe(0, 0).unwrap();
    let error = checked.poll().await.unwrap_err().to_string();
    assert!(error.contains("CRC"), "{error}");
}

#[tokio::test]
async fn only_the_partitions_whose_buckets_failed_are_asked_for_new_leaders() {
    const FAILING: i64 = 11;
    const HEALTHY: i64 = 12;
    let in_partition = |id: i64, bucket: pb::PbFetchLogRespForBucket| pb::PbFetchLogRespForBucket {
        partition_id: Some(id),
        ..bucket
    };
    let server = FakeServer::start(vec![fetch_response(vec![
        in_partition(FAILING, error_bucket(0, ErrorCode::NotLeaderOrFollower)),
        in_partition(HEALTHY, ok_bucket(0, Some(records(0, 2)))),
    ])])
    .await;
    let schema = Schema::builder()
        .column("id", DataType::bigint().not_null())
        .column("dt", DataType::string().not_null())
        .build()
        .unwrap();
    let partitioned = table_with(schema, &["dt"]);
    let client = FlussClient::connect(std::slice::from_ref(&server.addr))
        .await
        .unwrap();
    // Only `id` is fetched, the one column the scripted records hold.
    let config = ScannerConfig {
        projection: Some(vec![0]),
        ..ScannerConfig::default()
    };
    let mut scanner = LogScanner::new_partitioned(partitioned.clone(), config)
        .unwrap()
        .with_client(client.clone());
    for id in [FAILING, HEALTHY] {
        let route = client.partition_route(&partitioned, id).await.unwrap();
        scanner.subscribe_partition(id, route, 0, 0).unwrap();
    }
    server.partitions_asked.lock().unwrap().clear();

    let first = scanner.poll().await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].partition_id, Some(HEALTHY));
    assert_eq!(
        scanner.position(ScanBucket::of_partition(FAILING, 0)),
        Some(0)
    );
    assert_eq!(
        scanner.position(ScanBucket::of_partition(HEALTHY, 0)),
        Some(2)
    );
    assert!(scanner.poll().await.unwrap().is_empty());
    assert_eq!(
        *server.partitions_asked.lock().unwrap(),
        vec![FAILING],
        "one MetaData request, for the partition that failed"
    );
}

#[tokio::test]
async fn with_a_client_the_leaders_are_refreshed_through_it() {
    let server = FakeServer::start(vec![fetch_response(vec![error_bucket(
        0,
        ErrorCode::NotLeaderOrFollower,
    )])])
    .await;
    let client = FlussClient::connect(std::slice::from_ref(&server.addr))
        .await
        .unwrap();
    let route = client.table_route(&table()).await.unwrap();
    let mut scanner = LogScanner::new(table(), route, ScannerConfig::default())
        .unwrap()
        .with_client(client);
    scanner.subscribe(0, 0).unwrap();
    assert!(scanner.poll().await.unwrap().is_empty());
    let before = server.metadata_requests.load(Ordering::SeqCst);
    server.script(fetch_response(vec![ok_bucket(0, Some(records(0, 1)))]));
    assert_eq!(ids(&scanner.poll().await.unwrap()), vec![0]);
    assert_eq!(server.metadata_requests.load(Ordering::SeqCst), before + 1);
}

/// Buckets of the two-server cluster of [`split_cluster`].
const SPLIT_BUCKETS: i32 = 4;

/// Two fake servers, A leading buckets 0 and 1 and B buckets 2 and 3 (as
/// both say), and a scanner without a client subscribed to every bucket
/// from offset 0, its route given by A.
async fn split_cluster() -> (FakeServer, FakeServer, LogScanner) {
    let (a, b) = (
        FakeServer::start(Vec::new()).await,
        FakeServer::start(Vec::new()).await,
    );
    let split = [
        a.socket_addr(),
        a.socket_addr(),
        b.socket_addr(),
        b.socket_addr(),
    ];
    a.lead(&split);
    b.lead(&split);
    let table = table_with_buckets(table().descriptor.schema().clone(), &[], SPLIT_BUCKETS);
    let connection = ServerConnection::connect(&a.addr).await.unwrap();
    let route = TableRoute::resolve(&connection, &table).await.unwrap();
    assert_eq!(route.leader(0).addr(), a.addr);
    assert_eq!(route.leader(3).addr(), b.addr);
    let mut scanner = LogScanner::new(table, route, ScannerConfig::default()).unwrap();
    for bucket in 0..SPLIT_BUCKETS {
        scanner.subscribe(bucket, 0).unwrap();
    }
    (a, b, scanner)
}

fn buckets_read(batches: &[ScanBatch]) -> Vec<i32> {
    let mut buckets: Vec<i32> = batches.iter().map(|b| b.bucket).collect();
    buckets.sort_unstable();
    buckets
}

#[tokio::test]
async fn without_a_client_a_dead_first_leader_does_not_stop_the_refresh_through_another_leader() {
    let (a, b, mut scanner) = split_cluster().await;
    // A dies; B takes over every bucket.
    a.stop().await;
    b.lead(&[b.socket_addr(); SPLIT_BUCKETS as usize]);
    b.script(fetch_response(vec![
        ok_bucket(2, Some(records(0, 2))),
        ok_bucket(3, Some(records(0, 2))),
    ]));
    let first = scanner.poll().await.unwrap();
    assert_eq!(
        buckets_read(&first),
        vec![2, 3],
        "A's buckets lost their connection"
    );

    b.script(fetch_response(vec![
        ok_bucket(0, Some(records(0, 3))),
        ok_bucket(1, Some(records(0, 3))),
    ]));
    let second = scanner
        .poll()
        .await
        .expect("bucket 0's leader is dead, B answers MetaData");
    assert_eq!(buckets_read(&second), vec![0, 1], "A's buckets, now from B");
    assert_eq!(
        scanner.positions(),
        BTreeMap::from([(0, 3), (1, 3), (2, 2), (3, 2)])
    );
}

#[tokio::test]
async fn without_a_client_the_refresh_fails_only_when_every_leader_is_gone() {
    let (a, b, mut scanner) = split_cluster().await;
    a.stop().await;
    b.stop().await;
    assert!(
        scanner.poll().await.unwrap().is_empty(),
        "both connections lost"
    );
    let error = scanner.poll().await.unwrap_err();
    assert!(error.is_retriable(), "servers that may come back: {error}");
    let error = error.to_string();
    assert!(
        error.contains("none of the 2 distinct leaders tried answered"),
        "{error}"
    );
    assert_eq!(
        scanner.positions(),
        BTreeMap::from([(0, 0), (1, 0), (2, 0), (3, 0)]),
        "a failed poll moves nothing"
    );
}
