//! The data path over the wire: produce batches built with fjord-format,
//! fetch them back (whole and projected), idempotent retries, sequence and
//! schema errors, long-poll wake-up, list offsets, and restart durability.

mod support;

use std::time::Duration;

use fjord_proto::messages as pb;
use fjord_proto::{ErrorCode, Request, Response};
use support::batches::*;
use support::*;

fn produce(table_id: i64, bucket_id: i32, records: Vec<u8>, acks: i32) -> Request {
    Request::ProduceLog(pb::ProduceLogRequest {
        acks,
        table_id,
        timeout_ms: 30_000,
        buckets_req: vec![pb::PbProduceLogReqForBucket {
            bucket_id,
            records: records.into(),
            ..Default::default()
        }],
    })
}

async fn produce_one(
    c: &mut Client,
    table_id: i64,
    bucket_id: i32,
    records: Vec<u8>,
) -> pb::PbProduceLogRespForBucket {
    let Response::ProduceLog(r) = c
        .call(produce(table_id, bucket_id, records, -1))
        .await
        .unwrap()
    else {
        panic!()
    };
    r.buckets_resp.into_iter().next().unwrap()
}

async fn fetch_one(c: &mut Client, req: Request) -> pb::PbFetchLogRespForBucket {
    let Response::FetchLog(r) = c.call(req).await.unwrap() else {
        panic!()
    };
    r.tables_resp
        .into_iter()
        .next()
        .unwrap()
        .buckets_resp
        .into_iter()
        .next()
        .unwrap()
}

fn ids_of(batches: &[arrow_array::RecordBatch]) -> Vec<i32> {
    batches
        .iter()
        .flat_map(|b| {
            let col = b
                .column(0)
                .as_any()
                .downcast_ref::<arrow_array::Int32Array>()
                .unwrap();
            col.values().to_vec()
        })
        .collect()
}

fn full_schema() -> arrow_schema::SchemaRef {
    fjord_format::arrow_schema::to_arrow_schema(&table_schema())
}

#[tokio::test]
async fn produced_batch_is_fetched_back_with_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let first = produce_one(&mut c, info.table_id, 1, batch(0..10, 1, None)).await;
    assert_eq!((first.error_code, first.base_offset), (None, Some(0)));
    let second = produce_one(&mut c, info.table_id, 1, batch(10..15, 1, None)).await;
    assert_eq!(second.base_offset, Some(10));

    let got = fetch_one(&mut c, fetch(info.table_id, 1, 0, None, 0)).await;
    assert_eq!(got.error_code, None);
    assert_eq!(got.high_watermark, Some(15));
    let records = got.records.expect("records");
    assert_eq!(
        ids_of(&decode_all(&records, full_schema())),
        (0..15).collect::<Vec<_>>()
    );

    // Fluss's FETCH_FROM_EARLIEST_OFFSET (-2) reads from the log start.
    let got = fetch_one(&mut c, fetch(info.table_id, 1, -2, None, 0)).await;
    assert_eq!(
        ids_of(&decode_all(&got.records.unwrap(), full_schema())),
        (0..15).collect::<Vec<_>>()
    );

    // From the middle of the log: starts at the batch holding offset 12.
    let got = fetch_one(&mut c, fetch(info.table_id, 1, 12, None, 0)).await;
    assert_eq!(
        ids_of(&decode_all(&got.records.unwrap(), full_schema())),
        (10..15).collect::<Vec<_>>()
    );
    server.stop().await;
}

#[tokio::test]
async fn retried_idempotent_batch_is_acknowledged_without_appending_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let writer_id = c.init_writer().await;
    let b0 = batch(0..5, 1, Some((writer_id, 0)));
    let first = produce_one(&mut c, info.table_id, 0, b0.clone()).await;
    let retry = produce_one(&mut c, info.table_id, 0, b0).await;
    assert_eq!(retry.error_code, None);
    assert_eq!(retry.base_offset, first.base_offset);
    let next = produce_one(
        &mut c,
        info.table_id,
        0,
        batch(5..7, 1, Some((writer_id, 1))),
    )
    .await;
    assert_eq!(next.base_offset, Some(5));
    let got = fetch_one(&mut c, fetch(info.table_id, 0, 0, None, 0)).await;
    assert_eq!(got.high_watermark, Some(7));
    server.stop().await;
}

#[tokio::test]
async fn out_of_order_sequence_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    produce_one(&mut c, info.table_id, 0, batch(0..5, 1, Some((7, 0)))).await;
    let gap = produce_one(&mut c, info.table_id, 0, batch(5..6, 1, Some((7, 5)))).await;
    assert_eq!(
        gap.error_code,
        Some(ErrorCode::OutOfOrderSequenceException.code())
    );
    assert!(gap.error_message.unwrap().contains("out of order"));
    server.stop().await;
}

#[tokio::test]
async fn batch_with_wrong_schema_id_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let r = produce_one(&mut c, info.table_id, 0, batch(0..5, 9, None)).await;
    assert_eq!(r.error_code, Some(ErrorCode::SchemaNotExist.code()));
    assert!(r.error_message.unwrap().contains("schema id 9"));
    server.stop().await;
}

#[tokio::test]
async fn batch_with_bad_crc_is_rejected_and_nothing_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let mut bad = batch(0..5, 1, None);
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let r = produce_one(&mut c, info.table_id, 0, bad).await;
    // Fluss answers a checksum failure with CORRUPT_RECORD_EXCEPTION (14),
    // not CORRUPT_MESSAGE (interop/diff found the difference).
    assert_eq!(r.error_code, Some(ErrorCode::CorruptRecordException.code()));
    let got = fetch_one(&mut c, fetch(info.table_id, 0, 0, None, 0)).await;
    assert_eq!(got.high_watermark, Some(0));
    server.stop().await;
}

#[tokio::test]
async fn produce_to_unknown_bucket_answers_per_bucket_error() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let r = produce_one(&mut c, info.table_id, 99, batch(0..1, 1, None)).await;
    assert_eq!(
        r.error_code,
        Some(ErrorCode::UnknownTableOrBucketException.code())
    );
    let err = c
        .call(produce(info.table_id, 0, batch(0..1, 1, None), 5))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequiredAcks);
    server.stop().await;
}

#[tokio::test]
async fn long_poll_fetch_wakes_when_data_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let mut poller = server.client().await;
    // Sent before any data exists; it must park, not answer empty.
    let id = poller
        .send(&fetch(info.table_id, 2, 0, None, 60_000), 0)
        .await;
    produce_one(&mut c, info.table_id, 2, batch(0..3, 1, None)).await;
    let frame = tokio::time::timeout(Duration::from_secs(60), poller.read_frame())
        .await
        .expect("the long-poll answers")
        .unwrap();
    let fjord_proto::ResponseFrame::Success { request_id, body } = frame else {
        panic!()
    };
    assert_eq!(request_id, id);
    let Response::FetchLog(r) =
        fjord_proto::decode_response(fjord_proto::ApiKey::FetchLog, 0, body).unwrap()
    else {
        panic!()
    };
    let b = &r.tables_resp[0].buckets_resp[0];
    assert_eq!(
        ids_of(&decode_all(b.records.as_ref().unwrap(), full_schema())),
        vec![0, 1, 2]
    );
    server.stop().await;
}

#[tokio::test]
async fn projected_fetch_sends_only_the_selected_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    produce_one(&mut c, info.table_id, 0, batch(0..4, 1, None)).await;
    let got = fetch_one(&mut c, fetch(info.table_id, 0, 0, Some(vec![1]), 0)).await;
    assert_eq!(got.error_code, None);
    let projected =
        fjord_format::arrow_schema::to_projected_arrow_schema(&table_schema(), &[1]).unwrap();
    let batches = decode_all(&got.records.unwrap(), projected);
    let names = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap();
    assert_eq!(names.value(3), "name-3");
    assert_eq!(batches[0].num_columns(), 1);

    let bad = fetch_one(&mut c, fetch(info.table_id, 0, 0, Some(vec![5]), 0)).await;
    assert_eq!(
        bad.error_code,
        Some(ErrorCode::InvalidColumnProjection.code())
    );
    server.stop().await;
}

#[tokio::test]
async fn list_offsets_answers_earliest_latest_and_by_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    produce_one(&mut c, info.table_id, 0, batch(0..4, 1, None)).await;
    let list = |offset_type: i32, ts: Option<i64>| {
        Request::ListOffsets(pb::ListOffsetsRequest {
            follower_server_id: -1,
            offset_type,
            table_id: info.table_id,
            partition_id: None,
            bucket_id: vec![0],
            start_timestamp: ts,
            routing_bucket_count: None,
        })
    };
    let offset = |r: Response| match r {
        Response::ListOffsets(r) => r.buckets_resp[0].offset,
        _ => panic!(),
    };
    assert_eq!(offset(c.call(list(0, None)).await.unwrap()), Some(0));
    assert_eq!(offset(c.call(list(1, None)).await.unwrap()), Some(4));
    assert_eq!(offset(c.call(list(2, Some(0))).await.unwrap()), Some(0));
    let Response::ListOffsets(future) = c.call(list(2, Some(i64::MAX))).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        future.buckets_resp[0].error_code,
        Some(ErrorCode::InvalidTimestampException.code())
    );
    server.stop().await;
}

#[tokio::test]
async fn restart_keeps_appended_data() {
    let dir = tempfile::tempdir().unwrap();
    let table_id = {
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        let info = create_db_and_table(&mut c, "db", "t").await;
        produce_one(&mut c, info.table_id, 1, batch(0..20, 1, None)).await;
        server.stop().await;
        info.table_id
    };
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let got = fetch_one(&mut c, fetch(table_id, 1, 0, None, 0)).await;
    assert_eq!(got.high_watermark, Some(20));
    assert_eq!(
        ids_of(&decode_all(&got.records.unwrap(), full_schema())),
        (0..20).collect::<Vec<_>>()
    );
    let next = produce_one(&mut c, table_id, 1, batch(20..21, 1, None)).await;
    assert_eq!(next.base_offset, Some(20));
    server.stop().await;
}

/// A bucket with nothing to return still carries `records` (empty), as a
/// Fluss server's answer does: the Java client reads the field before
/// checking for it, and without it silently drops the whole response
/// (Flink streaming reads then stall with no error anywhere).
#[tokio::test]
async fn empty_bucket_answers_with_records_present_and_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let bucket = fetch_one(&mut c, fetch(info.table_id, 0, 0, None, 0)).await;
    assert_eq!(bucket.error_code, None);
    assert_eq!(bucket.high_watermark, Some(0));
    assert_eq!(bucket.records.as_deref(), Some(&[][..]));
    // Caught up after a write: the next fetch is empty, and still present.
    produce_one(&mut c, info.table_id, 0, batch(0..3, 1, None)).await;
    let bucket = fetch_one(&mut c, fetch(info.table_id, 0, 3, None, 0)).await;
    assert_eq!(bucket.high_watermark, Some(3));
    assert_eq!(bucket.records.as_deref(), Some(&[][..]));
    server.stop().await;
}
