//! Tests of request checking and decoding: refusals with the right error
//! code, zero-copy record data, and decode → encode → decode round trips.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use prost::Message;

use super::*;
use crate::frame::FrameDecoder;
use crate::messages::*;

#[test]
fn every_served_key_has_a_request_variant_and_no_other_key_does() {
    let served: Vec<ApiKey> = ApiKey::served().map(|(key, _)| key).collect();
    let mut by_enum = SERVED_BY_ENUM.to_vec();
    by_enum.sort();
    assert_eq!(served, by_enum);
}

/// Data-driven check of one refusal: the error and the Fluss code it maps to.
fn check_refused(
    api_key: i16,
    api_version: i16,
    body: &'static [u8],
    expected: RequestError,
    code: ErrorCode,
) {
    let decoded = decode_request(api_key, api_version, Bytes::from_static(body));
    assert_eq!(
        decoded,
        Err(expected.clone()),
        "key {api_key} version {api_version}"
    );
    assert_eq!(expected.error_code(), code);
    let api_error = expected.to_api_error();
    assert_eq!(api_error.code(), code);
    assert!(!api_error.message().is_empty());
}

#[test]
fn refusals_carry_fluss_error_codes() {
    check_refused(
        42,
        0,
        b"",
        RequestError::UnknownApiKey { api_key: 42 },
        ErrorCode::UnsupportedVersion,
    );
    check_refused(
        1065,
        0,
        b"",
        RequestError::UnknownApiKey { api_key: 1065 },
        ErrorCode::UnsupportedVersion,
    );
    check_refused(
        1049,
        0,
        b"\xff",
        RequestError::UnsupportedVersion {
            api_key: ApiKey::Rebalance,
            api_version: 0,
            supported: None,
        },
        ErrorCode::UnsupportedVersion,
    );
    check_refused(
        1016,
        4,
        b"",
        RequestError::UnsupportedVersion {
            api_key: ApiKey::PutKv,
            api_version: 4,
            supported: Some(VersionRange::new(0, 3)),
        },
        ErrorCode::UnsupportedVersion,
    );
    check_refused(
        1014,
        1,
        b"",
        RequestError::UnsupportedVersion {
            api_key: ApiKey::ProduceLog,
            api_version: 1,
            supported: Some(VersionRange::new(0, 0)),
        },
        ErrorCode::UnsupportedVersion,
    );
    check_refused(
        1000,
        -1,
        b"",
        RequestError::UnsupportedVersion {
            api_key: ApiKey::ApiVersions,
            api_version: -1,
            supported: Some(VersionRange::new(0, 0)),
        },
        ErrorCode::UnsupportedVersion,
    );
}

#[test]
fn malformed_body_is_corrupt_message_naming_the_api() {
    // Field 1 declared length-delimited with a length past the end.
    let error = decode_request(1014, 0, Bytes::from_static(b"\x0a\x05ab")).unwrap_err();
    assert!(matches!(
        error,
        RequestError::Malformed {
            api_key: ApiKey::ProduceLog,
            ..
        }
    ));
    assert_eq!(error.error_code(), ErrorCode::CorruptMessage);
    assert!(error.to_string().contains("PRODUCE_LOG(1014)"), "{error}");
}

#[test]
fn error_messages_name_key_and_versions() {
    let unsupported = RequestError::UnsupportedVersion {
        api_key: ApiKey::FetchLog,
        api_version: 3,
        supported: Some(VersionRange::new(0, 0)),
    };
    assert_eq!(
        unsupported.to_string(),
        "FETCH_LOG(1015) version 3 is not supported (Fjord serves versions 0..=0)"
    );
    let unknown = RequestError::UnknownApiKey { api_key: 7 };
    assert_eq!(unknown.to_string(), "unknown api key 7");
}

#[test]
fn produce_records_are_sliced_from_the_frame_not_copied() {
    let request = ProduceLogRequest {
        acks: -1,
        table_id: 3,
        timeout_ms: 30_000,
        buckets_req: vec![PbProduceLogReqForBucket {
            partition_id: None,
            bucket_id: 2,
            records: Bytes::from(vec![7u8; 4096]),
            original_partition_name: None,
            routing_bucket_count: None,
        }],
    };
    let mut wire = BytesMut::new();
    Request::ProduceLog(request.clone())
        .encode_frame(&mut wire, 0, 11)
        .unwrap();
    let frame = FrameDecoder::default()
        .decode_request(&mut wire)
        .unwrap()
        .unwrap();
    let body_range = frame.body.as_ptr_range();
    let decoded = decode_request(
        frame.header.api_key,
        frame.header.api_version,
        frame.body.clone(),
    )
    .unwrap();
    let Request::ProduceLog(decoded) = decoded else {
        panic!("wrong variant");
    };
    let records = &decoded.buckets_req[0].records;
    assert!(
        body_range.contains(&records.as_ptr()),
        "records must point into the frame body"
    );
    assert_eq!(decoded, request);
}

#[test]
fn response_round_trips_through_frame_and_decode_response() {
    let response = Response::FetchLog(FetchLogResponse {
        tables_resp: vec![PbFetchLogRespForTable {
            table_id: 1,
            buckets_resp: vec![PbFetchLogRespForBucket {
                bucket_id: 0,
                high_watermark: Some(10),
                log_start_offset: Some(0),
                records: Some(Bytes::from_static(b"batch")),
                ..Default::default()
            }],
        }],
    });
    let mut wire = BytesMut::new();
    response.encode_frame(&mut wire, 5).unwrap();
    let frame = FrameDecoder::default()
        .decode_response(&mut wire)
        .unwrap()
        .unwrap();
    let ResponseFrame::Success { request_id, body } = frame else {
        panic!("expected success, got {frame:?}");
    };
    assert_eq!(request_id, 5);
    assert_eq!(
        decode_response(ApiKey::FetchLog, 0, body).unwrap(),
        response
    );
}

use crate::frame::ResponseFrame;

fn arb_bytes(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn arb_table_path() -> impl Strategy<Value = PbTablePath> {
    ("[a-z_]{1,8}", "[a-z_0-9]{1,8}").prop_map(|(database_name, table_name)| PbTablePath {
        database_name,
        table_name,
    })
}

fn arb_produce() -> impl Strategy<Value = Request> {
    let bucket = (any::<Option<i64>>(), any::<i32>(), arb_bytes(256)).prop_map(
        |(partition_id, bucket_id, records)| PbProduceLogReqForBucket {
            partition_id,
            bucket_id,
            records,
            original_partition_name: None,
            routing_bucket_count: None,
        },
    );
    (
        prop_oneof![Just(0), Just(1), Just(-1)],
        any::<i64>(),
        any::<i32>(),
        proptest::collection::vec(bucket, 0..4),
    )
        .prop_map(|(acks, table_id, timeout_ms, buckets_req)| {
            Request::ProduceLog(ProduceLogRequest {
                acks,
                table_id,
                timeout_ms,
                buckets_req,
            })
        })
}

fn arb_fetch() -> impl Strategy<Value = Request> {
    let bucket = (
        any::<Option<i64>>(),
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
    )
        .prop_map(|(partition_id, bucket_id, fetch_offset, max_fetch_bytes)| {
            PbFetchLogReqForBucket {
                partition_id,
                bucket_id,
                fetch_offset,
                max_fetch_bytes,
                routing_bucket_count: None,
            }
        });
    let table = (
        any::<i64>(),
        any::<bool>(),
        proptest::collection::vec(any::<i32>(), 0..6),
        proptest::collection::vec(bucket, 0..4),
    )
        .prop_map(
            |(table_id, projection_pushdown_enabled, projected_fields, buckets_req)| {
                PbFetchLogReqForTable {
                    table_id,
                    projection_pushdown_enabled,
                    projected_fields,
                    buckets_req,
                    filter_predicate: None,
                    filter_schema_id: None,
                }
            },
        );
    (
        any::<i32>(),
        any::<i32>(),
        proptest::collection::vec(table, 0..3),
        any::<Option<i32>>(),
        any::<Option<i32>>(),
    )
        .prop_map(
            |(follower_server_id, max_bytes, tables_req, max_wait_ms, min_bytes)| {
                Request::FetchLog(FetchLogRequest {
                    follower_server_id,
                    max_bytes,
                    tables_req,
                    max_wait_ms,
                    min_bytes,
                    read_preference: None,
                })
            },
        )
}

fn arb_admin() -> impl Strategy<Value = Request> {
    prop_oneof![
        (arb_table_path(), arb_bytes(128), any::<bool>()).prop_map(
            |(table_path, table_json, ignore_if_exists)| {
                Request::CreateTable(CreateTableRequest {
                    table_path,
                    table_json,
                    ignore_if_exists,
                })
            }
        ),
        (
            proptest::collection::vec(arb_table_path(), 0..3),
            proptest::collection::vec(any::<i64>(), 0..3)
        )
            .prop_map(
                |(table_path, partitions_id)| Request::MetaData(MetadataRequest {
                    table_path,
                    partitions_path: vec![],
                    partitions_id,
                })
            ),
        (
            0..3i32,
            any::<i64>(),
            proptest::collection::vec(any::<i32>(), 0..4),
            any::<Option<i64>>()
        )
            .prop_map(|(offset_type, table_id, bucket_id, start_timestamp)| {
                Request::ListOffsets(ListOffsetsRequest {
                    follower_server_id: -1,
                    offset_type,
                    table_id,
                    partition_id: None,
                    bucket_id,
                    start_timestamp,
                    routing_bucket_count: None,
                })
            }),
        (".{0,16}", ".{0,16}").prop_map(|(client_software_name, client_software_version)| {
            Request::ApiVersions(ApiVersionsRequest {
                client_software_name,
                client_software_version,
            })
        }),
        ("[a-z]{1,8}", any::<bool>(), any::<bool>()).prop_map(
            |(database_name, ignore_if_not_exists, cascade)| {
                Request::DropDatabase(DropDatabaseRequest {
                    database_name,
                    ignore_if_not_exists,
                    cascade,
                })
            }
        ),
        proptest::collection::vec(arb_table_path(), 0..3)
            .prop_map(|table_path| Request::InitWriter(InitWriterRequest { table_path })),
        (
            arb_table_path(),
            any::<bool>(),
            proptest::collection::vec(("[a-z.]{1,12}", any::<Option<String>>(), 0..4i32), 0..3),
            proptest::collection::vec(("[a-z]{1,8}", arb_bytes(24), 0..2i32), 0..3),
            proptest::collection::vec("[a-z]{1,8}", 0..2),
            any::<Option<i32>>()
        )
            .prop_map(
                |(table_path, ignore_if_not_exists, configs, adds, drops, buckets)| {
                    Request::AlterTable(AlterTableRequest {
                        table_path,
                        ignore_if_not_exists,
                        config_changes: configs
                            .into_iter()
                            .map(|(config_key, config_value, op_type)| PbAlterConfig {
                                config_key,
                                config_value,
                                op_type,
                            })
                            .collect(),
                        add_columns: adds
                            .into_iter()
                            .map(|(column_name, data_type_json, column_position_type)| {
                                PbAddColumn {
                                    column_name,
                                    data_type_json,
                                    comment: None,
                                    column_position_type,
                                    agg_function_type: None,
                                    agg_function_params: vec![],
                                }
                            })
                            .collect(),
                        drop_columns: drops
                            .into_iter()
                            .map(|column_name| PbDropColumn { column_name })
                            .collect(),
                        rename_columns: vec![],
                        modify_columns: vec![],
                        modify_bucket_count: buckets
                            .map(|new_bucket_count| PbModifyBucketCount { new_bucket_count }),
                    })
                }
            ),
    ]
}

fn arb_request() -> impl Strategy<Value = Request> {
    prop_oneof![arb_produce(), arb_fetch(), arb_admin()]
}

/// Encodes `request` as a frame and decodes it back through the server path.
fn through_the_wire(request: &Request, request_id: i32) -> Request {
    let mut wire = BytesMut::new();
    request.encode_frame(&mut wire, 0, request_id).unwrap();
    let frame = FrameDecoder::default()
        .decode_request(&mut wire)
        .unwrap()
        .unwrap();
    assert!(wire.is_empty());
    assert_eq!(frame.header.request_id, request_id);
    decode_request(frame.header.api_key, frame.header.api_version, frame.body).unwrap()
}

/// The frame bytes of `request`.
fn encoded(request: &Request) -> BytesMut {
    let mut wire = BytesMut::new();
    request.encode_frame(&mut wire, 0, 1).unwrap();
    wire
}

proptest! {
    /// decode → encode → decode is the identity on typical requests.
    #[test]
    fn requests_round_trip(request in arb_request(), request_id in any::<i32>()) {
        prop_assert_eq!(&through_the_wire(&request, request_id), &request);
    }

    /// Whatever body a served key accepts, re-encoding it and decoding again
    /// gives the same request (prost may drop unknown fields, but only once).
    #[test]
    fn arbitrary_accepted_bodies_round_trip(
        key_index in 0..21usize,
        body in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let key = SERVED_BY_ENUM[key_index];
        if let Ok(request) = decode_request(key.id(), 0, Bytes::from(body)) {
            prop_assert_eq!(request.api_key(), key);
            // Compared as bytes: a float literal in a filter may be NaN.
            prop_assert_eq!(encoded(&through_the_wire(&request, 1)), encoded(&request));
        }
    }
}

#[test]
fn required_fields_are_encoded_even_at_default_values() {
    // Java's generated parsers reject a message missing a required field, so
    // a `false` / `0` required field must still be on the wire.
    let body = DropDatabaseRequest {
        database_name: String::new(),
        ignore_if_not_exists: false,
        cascade: false,
    }
    .encode_to_vec();
    assert_eq!(body, [0x0a, 0x00, 0x10, 0x00, 0x18, 0x00]);
}

#[test]
fn alter_table_decodes_what_fluss_rs_1_0_sends() {
    // table_path {d, t}, ignore_if_not_exists, one add_columns entry
    // {c, "{}", LAST}, and fluss-rs 1.0.0's field 8 (modify_bucket_count 4),
    // which Fluss 0.9.1's proto lacks.
    let body: &[u8] = &[
        0x0a, 0x06, 0x0a, 0x01, b'd', 0x12, 0x01, b't', 0x10, 0x01, 0x22, 0x09, 0x0a, 0x01, b'c',
        0x12, 0x02, b'{', b'}', 0x20, 0x00, 0x42, 0x02, 0x08, 0x04,
    ];
    let Ok(Request::AlterTable(r)) = decode_request(1044, 0, Bytes::from_static(body)) else {
        panic!("AlterTable v0 decodes");
    };
    assert_eq!(r.table_path.database_name, "d");
    assert!(r.ignore_if_not_exists);
    assert_eq!(r.add_columns.len(), 1);
    assert_eq!(r.add_columns[0].column_name, "c");
    assert_eq!(&r.add_columns[0].data_type_json[..], b"{}");
    assert_eq!(r.add_columns[0].column_position_type, 0);
    assert_eq!(
        r.modify_bucket_count,
        Some(PbModifyBucketCount {
            new_bucket_count: 4
        })
    );
    assert!(matches!(
        decode_request(1044, 1, Bytes::from_static(body)),
        Err(RequestError::UnsupportedVersion { .. })
    ));
}
