//! Writes the bodies of requests as Fjord's native client encodes them, one
//! file per request, so that the Java interop test
//! `FlussParsesFjordRequestsTest` can parse them with the message classes
//! the Apache Fluss Java server parses requests with. That shows the real
//! server reads our encoding, in particular the ProduceLog request of
//! [`encode_produce_log_request_chunks`], which writes each bucket's
//! `records` after the bucket's other fields (Fluss's own encoder writes
//! them in field-number order).
//!
//! Run from the repository root:
//! `cargo run -q -p fjord-proto --example dump_requests -- <out-dir>`
//!
//! Each file holds exactly the protobuf message a server reads after the
//! frame's length prefix and request header: the encoded frame is cut where
//! [`FrameDecoder`] cuts it. The field values are chosen so that a field
//! lost or read from the wrong place shows: few are defaults, and within a
//! message few repeat another field's value. The Java test asserts each of
//! them, so the two must change together.

use std::error::Error;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use fjord_proto::messages::*;
use fjord_proto::{
    encode_produce_log_request_chunks, encode_request, ApiKey, FrameDecoder, RequestHeader,
    INLINE_RECORDS_MAX_BYTES,
};
use prost::Message;

/// What every step returns: a failure is reported by `main` and ends the
/// program with a non-zero exit code, which fails the Java test's build step.
type Outcome<T> = Result<T, Box<dyn Error>>;

/// The table id every request names: above 2^32, so a varint cut to 32
/// bits would show.
const TABLE_ID: i64 = 0x1234_5678_9abc;
/// The partition id of the partitioned bucket in ProduceLog, FetchLog,
/// ListOffsets and MetaData.
const PARTITION_ID: i64 = 1_000_000_007;
/// The partitioned bucket's id.
const PARTITIONED_BUCKET: i32 = 7;
/// The id of the bucket without a partition.
const PLAIN_BUCKET: i32 = 2;
/// The bytes of the large records payload: longer than
/// [`INLINE_RECORDS_MAX_BYTES`], so the chunked encoder passes it through
/// as a chunk of its own (the zero-copy path).
const LARGE_RECORDS_LEN: usize = 600;
// Fails to compile if the inline limit grew past the large payload, which
// would quietly take the pass-through path out of the test.
const _: () = assert!(LARGE_RECORDS_LEN > INLINE_RECORDS_MAX_BYTES);
/// A records payload small enough to be copied inline into the scaffolding.
const SMALL_RECORDS: &[u8] = b"fjord-inline-records";

/// `LARGE_RECORDS_LEN` bytes of a pattern the Java test recomputes: byte
/// `i` is `(7 i + 3) mod 256`.
fn large_records() -> Bytes {
    (0..LARGE_RECORDS_LEN)
        .map(|i| (i.wrapping_mul(7).wrapping_add(3) & 0xff) as u8)
        .collect::<Vec<u8>>()
        .into()
}

fn table_path() -> PbTablePath {
    PbTablePath {
        database_name: "fjord_db".into(),
        table_name: "orders_log".into(),
    }
}

/// The header the client puts on a request of `api`: the highest version
/// Fjord serves of it, 0 where it serves none.
fn header(api: ApiKey, request_id: i32) -> RequestHeader {
    RequestHeader {
        api_key: api.id(),
        api_version: api.served_versions().map_or(0, |v| v.max),
        request_id,
    }
}

/// The body of the one request frame `wire` holds, cut by the frame
/// decoder; errors unless `wire` is exactly that frame under `expected`.
fn body_of(mut wire: BytesMut, expected: RequestHeader) -> Outcome<Bytes> {
    let frame = FrameDecoder::default()
        .decode_request(&mut wire)?
        .ok_or("the encoded frame is incomplete")?;
    if !wire.is_empty() {
        return Err(format!("{} bytes follow the frame", wire.len()).into());
    }
    if frame.header != expected {
        return Err(format!("header {:?}, expected {expected:?}", frame.header).into());
    }
    Ok(frame.body)
}

/// ProduceLog through the client's chunked path: one bucket with a
/// partition id and large records, one without and with small ones.
fn produce_log() -> Outcome<Bytes> {
    let request = ProduceLogRequest {
        acks: -1,
        table_id: TABLE_ID,
        timeout_ms: 30_123,
        buckets_req: vec![
            PbProduceLogReqForBucket {
                partition_id: Some(PARTITION_ID),
                bucket_id: PARTITIONED_BUCKET,
                records: large_records(),
                original_partition_name: None,
                routing_bucket_count: None,
            },
            PbProduceLogReqForBucket {
                partition_id: None,
                bucket_id: PLAIN_BUCKET,
                records: Bytes::from_static(SMALL_RECORDS),
                original_partition_name: None,
                routing_bucket_count: None,
            },
        ],
    };
    let header = header(ApiKey::ProduceLog, 11);
    let mut chunks = Vec::new();
    encode_produce_log_request_chunks(&mut BytesMut::new(), header, request, &mut chunks)?;
    // Head, the large records passed through, then the tail: proof that
    // this is the path that writes records last, not a plain encoding.
    if chunks.len() != 3 || chunks[1].len() != LARGE_RECORDS_LEN {
        return Err("the large records were not passed through as their own chunk".into());
    }
    let mut wire = BytesMut::new();
    for chunk in &chunks {
        wire.extend_from_slice(chunk);
    }
    body_of(wire, header)
}

/// A request of `api` through `encode_request`, as the client writes every
/// request but ProduceLog.
fn plain(api: ApiKey, request_id: i32, body: &impl Message) -> Outcome<Bytes> {
    let header = header(api, request_id);
    let mut wire = BytesMut::new();
    encode_request(&mut wire, header, body)?;
    body_of(wire, header)
}

fn fetch_log() -> Outcome<Bytes> {
    let request = FetchLogRequest {
        follower_server_id: -1,
        max_bytes: 16_777_219,
        tables_req: vec![PbFetchLogReqForTable {
            table_id: TABLE_ID,
            projection_pushdown_enabled: true,
            projected_fields: vec![0, 2, 5],
            buckets_req: vec![
                PbFetchLogReqForBucket {
                    partition_id: Some(PARTITION_ID),
                    bucket_id: PARTITIONED_BUCKET,
                    fetch_offset: 9_876_543_210,
                    max_fetch_bytes: 1_048_579,
                    routing_bucket_count: None,
                },
                PbFetchLogReqForBucket {
                    partition_id: None,
                    bucket_id: PLAIN_BUCKET,
                    fetch_offset: 12,
                    max_fetch_bytes: 1_048_581,
                    routing_bucket_count: None,
                },
            ],
            filter_predicate: None,
            filter_schema_id: None,
        }],
        max_wait_ms: Some(517),
        min_bytes: Some(3),
        read_preference: None,
    };
    plain(ApiKey::FetchLog, 12, &request)
}

fn init_writer() -> Outcome<Bytes> {
    let request = InitWriterRequest {
        table_path: vec![table_path()],
    };
    plain(ApiKey::InitWriter, 13, &request)
}

/// The client sends either the table path or the partition id; both here,
/// so one file covers the string and the packed int64 fields.
fn metadata() -> Outcome<Bytes> {
    let request = MetadataRequest {
        table_path: vec![table_path()],
        partitions_path: Vec::new(),
        partitions_id: vec![PARTITION_ID, 42],
    };
    plain(ApiKey::MetaData, 14, &request)
}

fn list_offsets() -> Outcome<Bytes> {
    let request = ListOffsetsRequest {
        follower_server_id: -1,
        // Fluss's timestamp offset type.
        offset_type: 2,
        table_id: TABLE_ID,
        partition_id: Some(PARTITION_ID),
        bucket_id: vec![PARTITIONED_BUCKET, 0, PLAIN_BUCKET],
        start_timestamp: Some(1_764_547_200_123),
        routing_bucket_count: None,
    };
    plain(ApiKey::ListOffsets, 15, &request)
}

fn create_table() -> Outcome<Bytes> {
    let request = CreateTableRequest {
        table_path: table_path(),
        table_json: Bytes::from_static(
            br#"{"version":1,"schema":{"version":1,"columns":[{"name":"id","data_type":{"type":"BIGINT"}}]},"partition_key":[],"bucket_count":3,"properties":{},"custom_properties":{}}"#,
        ),
        ignore_if_exists: true,
    };
    plain(ApiKey::CreateTable, 16, &request)
}

fn main() -> Outcome<()> {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: dump_requests <out-dir>")?
        .into();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let bodies = [
        ("produce_log.bin", produce_log()?),
        ("fetch_log.bin", fetch_log()?),
        ("init_writer.bin", init_writer()?),
        ("metadata.bin", metadata()?),
        ("list_offsets.bin", list_offsets()?),
        ("create_table.bin", create_table()?),
    ];
    for (name, body) in bodies {
        let path = dir.join(name);
        std::fs::write(&path, body).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
