//! The per-connection in-flight limit: with one slot, a second request on a
//! connection is not read until the first (a parked long-poll) is answered,
//! so answers come back in that order.

mod support;

use fjord_proto::messages as pb;
use fjord_proto::{Request, ResponseFrame};
use fjord_server::{Options, ServerConfig};
use support::batches::batch;
use support::*;

#[tokio::test]
async fn second_request_waits_for_the_in_flight_slot() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default();
    options
        .set("fjord.server.in-flight-requests-per-connection-max=1")
        .unwrap();
    let server =
        TestServer::start_with(ServerConfig::from_options(dir.path().to_owned(), options).unwrap())
            .await;
    let mut admin = server.client().await;
    let info = create_db_and_table(&mut admin, "db", "t").await;

    let mut c = server.client().await;
    let fetch = fetch(info.table_id, 0, 0, None, 600_000);
    let fetch_id = c.send(&fetch, 0).await;
    let list_id = c
        .send(
            &Request::ListDatabases(pb::ListDatabasesRequest::default()),
            0,
        )
        .await;
    // Data arrives on another connection and releases the long-poll.
    admin
        .call(Request::ProduceLog(pb::ProduceLogRequest {
            acks: -1,
            table_id: info.table_id,
            timeout_ms: 30_000,
            buckets_req: vec![pb::PbProduceLogReqForBucket {
                bucket_id: 0,
                records: batch(0..2, 1, None).into(),
                ..Default::default()
            }],
        }))
        .await
        .unwrap();
    let ids: Vec<i32> = [c.read_frame().await.unwrap(), c.read_frame().await.unwrap()]
        .into_iter()
        .map(|f| match f {
            ResponseFrame::Success { request_id, .. } => request_id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, vec![fetch_id, list_id]);
    server.stop().await;
}
