//! The produce path under pipelining and large frames: frames bigger than
//! the reader's wake-up threshold (`SO_RCVLOWAT`) arriving in pieces, small
//! frames arriving in pieces after them,
//! several requests in one write, appends in arrival order per connection,
//! and when acks 1 / all answers come relative to durability (one
//! blocking-pool job per request does the appends and the waits).

mod support;

use std::time::Duration;

use bytes::BytesMut;
use fjord_proto::messages as pb;
use fjord_proto::{decode_response, ApiKey, Request, Response, ResponseFrame};
use support::batches::*;
use support::*;

fn produce(table_id: i64, buckets: Vec<(i32, Vec<u8>)>, acks: i32) -> Request {
    Request::ProduceLog(pb::ProduceLogRequest {
        acks,
        table_id,
        timeout_ms: 30_000,
        buckets_req: buckets
            .into_iter()
            .map(|(bucket_id, records)| pb::PbProduceLogReqForBucket {
                bucket_id,
                records: records.into(),
                ..Default::default()
            })
            .collect(),
    })
}

/// Reads one frame and decodes it as a successful ProduceLog answer,
/// returned with the request id it answers.
async fn read_any_produce_answer(c: &mut Client) -> (i32, pb::ProduceLogResponse) {
    match c.read_frame().await.expect("an answer") {
        ResponseFrame::Success { request_id, body } => {
            match decode_response(ApiKey::ProduceLog, 0, body).expect("decodable") {
                Response::ProduceLog(r) => (request_id, r),
                other => panic!("unexpected {other:?}"),
            }
        }
        ResponseFrame::Error { error, .. } => panic!("request failed: {error}"),
        ResponseFrame::ServerFailure { error } => panic!("server failure: {error}"),
    }
}

/// Reads one frame and decodes it as the ProduceLog answer to `id`.
async fn read_produce_answer(c: &mut Client, id: i32) -> pb::ProduceLogResponse {
    let (request_id, answer) = read_any_produce_answer(c).await;
    assert_eq!(request_id, id);
    answer
}

/// The ids of the rows of `bucket`, read from offset 0 to the high
/// watermark (several fetches: each returns about 1 MiB).
async fn fetched_ids(c: &mut Client, table_id: i64, bucket: i32, max_wait_ms: i32) -> Vec<i32> {
    let mut ids = Vec::new();
    loop {
        let (more, high_watermark) =
            fetch_ids_from(c, table_id, bucket, ids.len() as i64, max_wait_ms).await;
        ids.extend(more);
        if ids.len() as i64 >= high_watermark {
            return ids;
        }
    }
}

/// One fetch from `offset` (a batch boundary): the ids read and the high
/// watermark.
async fn fetch_ids_from(
    c: &mut Client,
    table_id: i64,
    bucket: i32,
    offset: i64,
    max_wait_ms: i32,
) -> (Vec<i32>, i64) {
    let Response::FetchLog(r) = c
        .call(fetch(table_id, bucket, offset, None, max_wait_ms))
        .await
        .expect("fetch")
    else {
        panic!("not a fetch answer")
    };
    let bucket = r.tables_resp[0].buckets_resp[0].clone();
    assert_eq!(bucket.error_code, None);
    let records = bucket.records.unwrap_or_default();
    let schema = fjord_format::arrow_schema::to_arrow_schema(&table_schema());
    let ids = decode_all(&records, schema)
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<arrow_array::Int32Array>()
                .expect("id column")
                .values()
                .to_vec()
        })
        .collect();
    (ids, bucket.high_watermark.expect("high watermark"))
}

#[tokio::test]
async fn a_frame_larger_than_the_wake_up_threshold_arriving_in_pieces_is_appended_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    // ~1 MiB of records: more than the reader's 512 KiB low-water cap, so
    // the reader waits for the frame in several steps.
    let ids = 0..60_000;
    let records = batch(ids.clone(), 1, None);
    assert!(records.len() > 900 * 1024, "{} bytes", records.len());
    let mut frame = BytesMut::new();
    produce(info.table_id, vec![(2, records)], -1)
        .encode_frame(&mut frame, 0, 77)
        .expect("encode");
    // Half a length prefix, then most of the frame, then the rest: the
    // reader must cope with every partial state.
    let cuts = [0, 2, 300 * 1024, frame.len()];
    for pair in cuts.windows(2) {
        c.send_raw(&frame[pair[0]..pair[1]]).await;
        // Let the server read (and park on) the partial frame.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answer = read_produce_answer(&mut c, 77).await;
    assert_eq!(answer.buckets_resp[0].error_code, None);
    assert_eq!(answer.buckets_resp[0].base_offset, Some(0));
    assert_eq!(
        fetched_ids(&mut c, info.table_id, 2, 0).await,
        ids.collect::<Vec<_>>()
    );
    // The connection is still in a clean state for small frames.
    let next = produce(info.table_id, vec![(2, batch(0..3, 1, None))], -1);
    let Response::ProduceLog(r) = c.call(next).await.expect("small produce") else {
        panic!()
    };
    assert_eq!(r.buckets_resp[0].base_offset, Some(60_000));
    server.stop().await;
}

#[tokio::test]
async fn small_frames_arriving_in_pieces_after_a_large_frame_are_each_read() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    // A frame above the large-frame threshold, sent in two pieces, raises
    // the reader's wake-up threshold; the small frames after it must not
    // wait for bytes that never come.
    let large = batch(0..10_000, 1, None);
    assert!(large.len() > 128 * 1024, "{} bytes", large.len());
    let mut frame = BytesMut::new();
    produce(info.table_id, vec![(0, large)], -1)
        .encode_frame(&mut frame, 0, 10)
        .expect("encode");
    c.send_raw(&frame[..1000]).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    c.send_raw(&frame[1000..]).await;
    assert_eq!(
        read_produce_answer(&mut c, 10).await.buckets_resp[0].base_offset,
        Some(0)
    );
    let mut first = 10_000;
    for id in 11..14 {
        let mut frame = BytesMut::new();
        produce(
            info.table_id,
            vec![(0, batch(first..first + 5, 1, None))],
            -1,
        )
        .encode_frame(&mut frame, 0, id)
        .expect("encode");
        // Part of the length prefix, then part of the body, then the rest:
        // each piece is read as it arrives.
        let cuts = [0, 3, frame.len() / 2, frame.len()];
        for pair in cuts.windows(2) {
            c.send_raw(&frame[pair[0]..pair[1]]).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let answer = read_produce_answer(&mut c, id).await;
        assert_eq!(answer.buckets_resp[0].error_code, None);
        assert_eq!(answer.buckets_resp[0].base_offset, Some(i64::from(first)));
        first += 5;
    }
    assert_eq!(
        fetched_ids(&mut c, info.table_id, 0, 0).await,
        (0..first).collect::<Vec<_>>()
    );
    server.stop().await;
}

#[tokio::test]
async fn pipelined_idempotent_produces_in_one_write_append_in_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let writer_id = c.init_writer().await;
    // Sequences 0..16 of one bucket, 10 rows each, every frame in one write
    // without waiting for an answer. Any reordering of the appends would be
    // refused as an out-of-order sequence.
    const REQUESTS: i32 = 16;
    let mut frames = BytesMut::new();
    for seq in 0..REQUESTS {
        let rows = seq * 10..seq * 10 + 10;
        produce(
            info.table_id,
            vec![(0, batch(rows, 1, Some((writer_id, seq))))],
            -1,
        )
        .encode_frame(&mut frames, 0, 1000 + seq)
        .expect("encode");
    }
    c.send_raw(&frames).await;
    let mut base_offsets = Vec::new();
    for _ in 0..REQUESTS {
        let (request_id, r) = read_any_produce_answer(&mut c).await;
        let bucket = &r.buckets_resp[0];
        assert_eq!(bucket.error_code, None, "{:?}", bucket.error_message);
        base_offsets.push((request_id - 1000, bucket.base_offset.expect("offset")));
    }
    base_offsets.sort_unstable();
    let expected: Vec<(i32, i64)> = (0..REQUESTS).map(|s| (s, i64::from(s) * 10)).collect();
    assert_eq!(base_offsets, expected);
    assert_eq!(
        fetched_ids(&mut c, info.table_id, 0, 0).await,
        (0..REQUESTS * 10).collect::<Vec<_>>()
    );
    server.stop().await;
}

#[tokio::test]
async fn an_acks_all_answer_for_several_buckets_comes_after_all_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let request = produce(
        info.table_id,
        vec![
            (0, batch(0..4, 1, None)),
            (1, batch(10..15, 1, None)),
            (2, batch(20..26, 1, None)),
        ],
        -1,
    );
    let Response::ProduceLog(r) = c.call(request).await.expect("produce") else {
        panic!()
    };
    assert!(r.buckets_resp.iter().all(|b| b.error_code.is_none()));
    // Under the default fsync policy a batch is visible only once durable,
    // so a fetch that does not wait must already see every bucket's rows.
    for (bucket, ids) in [(0, 0..4), (1, 10..15), (2, 20..26)] {
        assert_eq!(
            fetched_ids(&mut c, info.table_id, bucket, 0).await,
            ids.collect::<Vec<_>>(),
            "bucket {bucket}"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn an_acks_one_batch_becomes_visible_without_a_later_write() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let Response::ProduceLog(r) = c
        .call(produce(info.table_id, vec![(1, batch(0..7, 1, None))], 1))
        .await
        .expect("produce")
    else {
        panic!()
    };
    assert_eq!(r.buckets_resp[0].base_offset, Some(0));
    // Answered before the fsync; the request's job makes it durable (and
    // visible) after answering. A long-poll sees it without another write.
    assert_eq!(
        fetched_ids(&mut c, info.table_id, 1, 30_000).await,
        (0..7).collect::<Vec<_>>()
    );
    server.stop().await;
}

/// acks = 1 over several buckets: answered before durability, then one
/// file system sync covers the buckets in the background. Each bucket's
/// rows must still become durable and visible (the sync's outcome is not
/// reported to anyone, but its buckets are published).
#[tokio::test]
async fn an_acks_one_request_over_several_buckets_becomes_visible_in_each() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let request = produce(
        info.table_id,
        vec![
            (0, batch(0..3, 1, None)),
            (1, batch(10..14, 1, None)),
            (2, batch(20..25, 1, None)),
        ],
        1,
    );
    let Response::ProduceLog(r) = c.call(request).await.expect("produce") else {
        panic!()
    };
    assert!(r.buckets_resp.iter().all(|b| b.error_code.is_none()));
    for (bucket, ids) in [(0, 0..3), (1, 10..14), (2, 20..25)] {
        assert_eq!(
            fetched_ids(&mut c, info.table_id, bucket, 30_000).await,
            ids.collect::<Vec<_>>(),
            "bucket {bucket}"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn large_frames_back_to_back_each_keep_their_own_bytes_when_buffers_are_reused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let writer_id = c.init_writer().await;
    // More large frames than a connection keeps spare buffers, of growing
    // and shrinking sizes (a reused buffer must grow, and a smaller frame in
    // a bigger buffer must not see the previous frame's tail), then small
    // ones, all in one write.
    let rows_per_request = [
        5_000, 30_000, 4_000, 60_000, 5_000, 6_000, 7_000, 8_000, 10, 20,
    ];
    let mut frames = BytesMut::new();
    let mut first = 0;
    for (seq, rows) in rows_per_request.iter().enumerate() {
        let seq = seq as i32;
        produce(
            info.table_id,
            vec![(1, batch(first..first + rows, 1, Some((writer_id, seq))))],
            -1,
        )
        .encode_frame(&mut frames, 0, 500 + seq)
        .expect("encode");
        first += rows;
    }
    c.send_raw(&frames).await;
    for _ in rows_per_request {
        let (_, r) = read_any_produce_answer(&mut c).await;
        assert_eq!(
            r.buckets_resp[0].error_code, None,
            "{:?}",
            r.buckets_resp[0].error_message
        );
    }
    assert_eq!(
        fetched_ids(&mut c, info.table_id, 1, 0).await,
        (0..first).collect::<Vec<_>>()
    );
    server.stop().await;
}

#[tokio::test]
async fn a_pipelined_request_that_fails_early_does_not_stall_the_appends_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    let writer_id = c.init_writer().await;
    // seq 0, then a request refused before it appends (acks 5), an unknown
    // table, then seq 1 and 2: all in one write.
    let mut frames = BytesMut::new();
    let requests = [
        produce(
            info.table_id,
            vec![(0, batch(0..3, 1, Some((writer_id, 0))))],
            -1,
        ),
        produce(info.table_id, vec![(0, batch(100..103, 1, None))], 5),
        produce(987_654, vec![(0, batch(200..203, 1, None))], -1),
        produce(
            info.table_id,
            vec![(0, batch(3..6, 1, Some((writer_id, 1))))],
            -1,
        ),
        produce(
            info.table_id,
            vec![(0, batch(6..9, 1, Some((writer_id, 2))))],
            -1,
        ),
    ];
    for (id, request) in requests.iter().enumerate() {
        request
            .encode_frame(&mut frames, 0, id as i32)
            .expect("encode");
    }
    c.send_raw(&frames).await;
    let mut outcomes = Vec::new();
    for _ in 0..requests.len() {
        match c.read_frame().await.expect("an answer") {
            ResponseFrame::Success { request_id, body } => {
                let Response::ProduceLog(r) = decode_response(ApiKey::ProduceLog, 0, body).unwrap()
                else {
                    panic!()
                };
                let b = &r.buckets_resp[0];
                outcomes.push((request_id, b.error_code.is_none(), b.base_offset));
            }
            ResponseFrame::Error { request_id, .. } => outcomes.push((request_id, false, None)),
            ResponseFrame::ServerFailure { error } => panic!("server failure: {error}"),
        }
    }
    outcomes.sort_unstable();
    assert_eq!(
        outcomes,
        vec![
            (0, true, Some(0)),
            (1, false, None),
            (2, false, None),
            (3, true, Some(3)),
            (4, true, Some(6)),
        ]
    );
    assert_eq!(
        fetched_ids(&mut c, info.table_id, 0, 0).await,
        (0..9).collect::<Vec<_>>()
    );
    server.stop().await;
}
