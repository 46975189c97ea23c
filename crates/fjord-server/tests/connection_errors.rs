//! What a connection survives and what closes it: unknown api keys and
//! versions are answered and the connection stays usable; an oversized or
//! malformed frame closes only that connection.

mod support;

use fjord_proto::messages as pb;
use fjord_proto::{ErrorCode, Request, ResponseFrame};
use fjord_server::{Options, ServerConfig};
use support::*;

fn list_databases() -> Request {
    Request::ListDatabases(pb::ListDatabasesRequest {
        include_summary: None,
    })
}

#[tokio::test]
async fn unknown_api_key_is_answered_and_connection_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    // api key 999 (undefined), version 0, request id 77, empty body.
    let mut frame = 8i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&999i16.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&77i32.to_be_bytes());
    c.send_raw(&frame).await;
    match c.read_frame().await.expect("an answer") {
        ResponseFrame::Error { request_id, error } => {
            assert_eq!(request_id, 77);
            assert_eq!(error.code(), ErrorCode::UnsupportedVersion);
        }
        other => panic!("unexpected {other:?}"),
    }
    c.call(list_databases())
        .await
        .expect("connection still usable");
    server.stop().await;
}

#[tokio::test]
async fn unsupported_version_is_answered_and_connection_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let id = c.send(&list_databases(), 42).await;
    match c.read_frame().await.expect("an answer") {
        ResponseFrame::Error { request_id, error } => {
            assert_eq!(request_id, id);
            assert_eq!(error.code(), ErrorCode::UnsupportedVersion);
        }
        other => panic!("unexpected {other:?}"),
    }
    c.call(list_databases())
        .await
        .expect("connection still usable");
    server.stop().await;
}

#[tokio::test]
async fn malformed_body_is_answered_with_corrupt_message() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    // CreateDatabase (1001) with a body that is not protobuf (a truncated varint).
    let mut frame = 9i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&1001i16.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&5i32.to_be_bytes());
    frame.push(0x0a);
    c.send_raw(&frame).await;
    match c.read_frame().await.expect("an answer") {
        ResponseFrame::Error { request_id, error } => {
            assert_eq!(request_id, 5);
            assert_eq!(error.code(), ErrorCode::CorruptMessage);
        }
        other => panic!("unexpected {other:?}"),
    }
    c.call(list_databases())
        .await
        .expect("connection still usable");
    server.stop().await;
}

#[tokio::test]
async fn oversized_frame_closes_only_that_connection() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default();
    options.set("fjord.server.frame-bytes-max=4096").unwrap();
    let config = ServerConfig::from_options(dir.path().to_owned(), options).unwrap();
    let server = TestServer::start_with(config).await;
    let mut bystander = server.client().await;
    let mut bad = server.client().await;
    bad.send_raw(&(1i32 << 20).to_be_bytes()).await;
    assert!(
        bad.read_frame().await.is_none(),
        "the offending connection is closed"
    );
    bystander
        .call(list_databases())
        .await
        .expect("other connections unaffected");
    server
        .client()
        .await
        .call(list_databases())
        .await
        .expect("new connections accepted");
    server.stop().await;
}

#[tokio::test]
async fn negative_length_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut bad = server.client().await;
    bad.send_raw(&(-5i32).to_be_bytes()).await;
    assert!(bad.read_frame().await.is_none());
    server
        .client()
        .await
        .call(list_databases())
        .await
        .expect("server still serving");
    server.stop().await;
}

#[tokio::test]
async fn api_versions_advertises_what_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let resp = c
        .call(Request::ApiVersions(pb::ApiVersionsRequest {
            client_software_name: "test".into(),
            client_software_version: "0".into(),
        }))
        .await
        .unwrap();
    let fjord_proto::Response::ApiVersions(v) = resp else {
        panic!()
    };
    let keys: Vec<i32> = v.api_versions.iter().map(|a| a.api_key).collect();
    for key in [
        1000, 1001, 1005, 1012, 1014, 1015, 1016, 1017, 1021, 1023, 1026, 1033, 1034, 1059, 1061,
    ] {
        assert!(keys.contains(&key), "{key} advertised");
    }
    let put_kv = v.api_versions.iter().find(|a| a.api_key == 1016).unwrap();
    assert_eq!(
        put_kv.max_version, 3,
        "PutKv up to the version fluss-rs 1.0.0 asks for"
    );
    assert!(!keys.contains(&1049), "Rebalance is not served");
    server.stop().await;
}
