//! Writes hand-made valid frames into the seed corpora of the `frame_decode`
//! and `request_decode` fuzz targets.
//!
//! Run from the repository root:
//! `cargo run -p fjord-proto --example write_fuzz_seeds -- fuzz/corpus`
//! Files are named after what they hold, so re-running overwrites instead of
//! piling up. Frames captured from the official clients (named
//! `<client>-<api_key>-<n>` in `frame_decode`) are also turned into
//! `request_decode` seeds, so that target starts from real client bodies.

use std::path::Path;

use bytes::{Bytes, BytesMut};
use fjord_proto::messages::*;
use fjord_proto::{
    encode_error_response, encode_server_failure, ApiKey, ErrorCode, FrameDecoder, Request,
    Response,
};

/// Requests shaped like the ones fluss-rs 1.0.0 sends in its connect,
/// create-table, append and scan flows.
fn requests() -> Vec<(&'static str, Request)> {
    let path = || PbTablePath {
        database_name: "fjord".into(),
        table_name: "user_behavior".into(),
    };
    let table_json = Bytes::from_static(
        br#"{"version":1,"schema":{"version":1,"columns":[{"name":"user_id","data_type":{"type":"BIGINT"}},{"name":"behavior","data_type":{"type":"STRING"}}]},"partition_key":[],"bucket_key":["user_id"],"bucket_count":3,"properties":{},"custom_properties":{}}"#,
    );
    // A stand-in for a log batch: the proto layer never looks inside.
    let records = Bytes::from(vec![0xab; 96]);
    vec![
        (
            "api_versions",
            Request::ApiVersions(ApiVersionsRequest {
                client_software_name: "fluss-rust".into(),
                client_software_version: "1.0.0".into(),
            }),
        ),
        (
            "create_database",
            Request::CreateDatabase(CreateDatabaseRequest {
                database_name: "fjord".into(),
                ignore_if_exists: true,
                database_json: Some(Bytes::from_static(br#"{"version":1}"#)),
            }),
        ),
        (
            "create_table",
            Request::CreateTable(CreateTableRequest {
                table_path: path(),
                table_json,
                ignore_if_exists: false,
            }),
        ),
        (
            "get_table_info",
            Request::GetTableInfo(GetTableInfoRequest { table_path: path() }),
        ),
        (
            "metadata",
            Request::MetaData(MetadataRequest {
                table_path: vec![path()],
                partitions_path: vec![],
                partitions_id: vec![],
            }),
        ),
        (
            "init_writer",
            Request::InitWriter(InitWriterRequest {
                table_path: vec![path()],
            }),
        ),
        (
            "produce_log",
            Request::ProduceLog(ProduceLogRequest {
                acks: -1,
                table_id: 1,
                timeout_ms: 30_000,
                buckets_req: vec![PbProduceLogReqForBucket {
                    partition_id: None,
                    bucket_id: 0,
                    records,
                    original_partition_name: None,
                    routing_bucket_count: None,
                }],
            }),
        ),
        (
            "list_offsets",
            Request::ListOffsets(ListOffsetsRequest {
                follower_server_id: -1,
                offset_type: 1,
                table_id: 1,
                partition_id: None,
                bucket_id: vec![0, 1, 2],
                start_timestamp: None,
                routing_bucket_count: None,
            }),
        ),
        (
            "fetch_log_projected",
            Request::FetchLog(FetchLogRequest {
                follower_server_id: -1,
                max_bytes: 16 * 1024 * 1024,
                tables_req: vec![PbFetchLogReqForTable {
                    table_id: 1,
                    projection_pushdown_enabled: true,
                    projected_fields: vec![0, 1],
                    buckets_req: (0..3)
                        .map(|bucket_id| PbFetchLogReqForBucket {
                            partition_id: None,
                            bucket_id,
                            fetch_offset: 0,
                            max_fetch_bytes: 1024 * 1024,
                            routing_bucket_count: None,
                        })
                        .collect(),
                    filter_predicate: None,
                    filter_schema_id: None,
                }],
                max_wait_ms: Some(500),
                min_bytes: Some(1),
                read_preference: None,
            }),
        ),
        (
            "get_file_system_security_token",
            Request::GetFileSystemSecurityToken(GetFileSystemSecurityTokenRequest {}),
        ),
        (
            "drop_database_cascade",
            Request::DropDatabase(DropDatabaseRequest {
                database_name: "fjord".into(),
                ignore_if_not_exists: true,
                cascade: true,
            }),
        ),
    ]
}

fn responses() -> Vec<(&'static str, Response)> {
    vec![
        (
            "api_versions",
            Response::ApiVersions(ApiVersionsResponse {
                api_versions: ApiKey::served_api_versions(),
                server_type: None,
            }),
        ),
        (
            "produce_log",
            Response::ProduceLog(ProduceLogResponse {
                buckets_resp: vec![PbProduceLogRespForBucket {
                    partition_id: None,
                    bucket_id: 0,
                    error_code: None,
                    error_message: None,
                    base_offset: Some(42),
                    original_partition_name: None,
                }],
            }),
        ),
    ]
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(name), bytes)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/corpus".into());
    let frame_dir = Path::new(&root).join("frame_decode");
    let request_dir = Path::new(&root).join("request_decode");
    let served: Vec<ApiKey> = ApiKey::served().map(|(key, _)| key).collect();
    let selector = |key: ApiKey| -> u8 {
        let index = served
            .iter()
            .position(|k| *k == key)
            .expect("seed keys are served");
        u8::try_from(index).expect("fewer than 0xf0 served keys")
    };

    let mut all = BytesMut::new();
    for (request_id, (name, request)) in (1..).zip(requests()) {
        let mut frame = BytesMut::new();
        request.encode_frame(&mut frame, 0, request_id)?;
        write(&frame_dir, &format!("request_{name}"), &frame)?;
        all.extend_from_slice(&frame);

        let mut body = BytesMut::new();
        request.encode_frame(&mut body, 0, 0)?;
        let mut seed = vec![selector(request.api_key())];
        // Skip the length prefix and the 8-byte request header.
        seed.extend_from_slice(&body[12..]);
        write(&request_dir, &format!("request_{name}"), &seed)?;
    }
    write(&frame_dir, "requests_concatenated", &all)?;

    for (name, response) in responses() {
        let mut frame = BytesMut::new();
        response.encode_frame(&mut frame, 9)?;
        write(&frame_dir, &format!("response_{name}"), &frame)?;
        let mut seed = vec![selector(response.api_key())];
        seed.extend_from_slice(&frame[9..]);
        write(&request_dir, &format!("response_{name}"), &seed)?;
    }

    let mut frame = BytesMut::new();
    let error = ErrorCode::TableNotExist.with_message("table fjord.user_behavior does not exist");
    encode_error_response(&mut frame, 5, &error)?;
    write(&frame_dir, "response_error", &frame)?;
    let mut frame = BytesMut::new();
    encode_server_failure(
        &mut frame,
        &ErrorCode::UnknownServerError.with_message("shutting down"),
    )?;
    write(&frame_dir, "response_server_failure", &frame)?;

    // Captured client frames become request_decode seeds: selector + body.
    for entry in std::fs::read_dir(&frame_dir)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(name) = name.filter(|n| !n.starts_with("request") && !n.starts_with("response"))
        else {
            continue;
        };
        let mut buf = BytesMut::from(&std::fs::read(&path)?[..]);
        let Ok(Some(frame)) = FrameDecoder::default().decode_request(&mut buf) else {
            continue;
        };
        let Some(key) = ApiKey::from_id(frame.header.api_key).filter(|k| served.contains(k)) else {
            continue;
        };
        let mut seed = vec![selector(key)];
        seed.extend_from_slice(&frame.body);
        write(&request_dir, &format!("captured-{name}"), &seed)?;
    }

    // A refused key (PutKv) and an unknown one, through the raw-key path.
    write(&request_dir, "refused_put_kv", &[0xff, 0x03, 0xf8, 0, 0])?;
    write(&request_dir, "unknown_key", &[0xff, 0x7f, 0xff, 0, 0])?;
    Ok(())
}
