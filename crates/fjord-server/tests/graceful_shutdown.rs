//! Shutdown lets in-flight requests finish: a parked long-poll fetch is
//! answered (empty, with the high watermark) before its connection closes,
//! and the server's data is intact on the next start.

mod support;

use std::time::Duration;

use fjord_proto::messages as pb;
use fjord_proto::{decode_response, ApiKey, Request, Response, ResponseFrame};
use support::*;

#[tokio::test]
async fn parked_long_poll_is_answered_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let info = create_db_and_table(&mut c, "db", "t").await;
    let fetch = fetch(info.table_id, 0, 0, None, 600_000);
    let id = c.send(&fetch, 0).await;
    // A round trip on another connection after the send; the fetch is parked
    // by then or arrives during shutdown, and either way must be answered.
    server
        .client()
        .await
        .call(Request::ListDatabases(pb::ListDatabasesRequest::default()))
        .await
        .unwrap();
    let stopping = tokio::spawn(server.stop());
    let frame = tokio::time::timeout(Duration::from_secs(60), c.read_frame())
        .await
        .expect("answered during shutdown")
        .expect("a frame before the close");
    let ResponseFrame::Success { request_id, body } = frame else {
        panic!("{frame:?}")
    };
    assert_eq!(request_id, id);
    let Response::FetchLog(r) = decode_response(ApiKey::FetchLog, 0, body).unwrap() else {
        panic!()
    };
    let bucket = &r.tables_resp[0].buckets_resp[0];
    assert_eq!((bucket.error_code, bucket.high_watermark), (None, Some(0)));
    assert!(
        c.read_frame().await.is_none(),
        "connection closed after the answer"
    );
    stopping.await.unwrap();

    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let Response::TableExists(e) = c
        .call(Request::TableExists(pb::TableExistsRequest {
            table_path: table_path("db", "t"),
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert!(e.exists);
    server.stop().await;
}
