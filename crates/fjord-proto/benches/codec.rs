//! Micro-benchmarks of the per-request protocol work on the hot paths:
//! cutting a ProduceLog frame and decoding its request (cost must not grow
//! with the record bytes, which are sliced, not copied), and encoding a
//! FetchLog response by copy versus as pass-through chunks.
//!
//! Run: `cargo bench -p fjord-proto --bench codec`

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use fjord_proto::messages::*;
use fjord_proto::{
    decode_request, encode_fetch_log_response_chunks, encode_success_response, FrameDecoder,
    Request,
};

/// Record bytes per bucket in the benchmarked requests and responses.
const RECORDS_PER_BUCKET_BYTES: usize = 1024 * 1024;
/// Buckets per request or response, as in a 3-bucket table.
const BUCKETS: i32 = 3;

fn produce_frame() -> BytesMut {
    let request = Request::ProduceLog(ProduceLogRequest {
        acks: -1,
        table_id: 1,
        timeout_ms: 30_000,
        buckets_req: (0..BUCKETS)
            .map(|bucket_id| PbProduceLogReqForBucket {
                partition_id: None,
                bucket_id,
                records: Bytes::from(vec![0x5a; RECORDS_PER_BUCKET_BYTES]),
                original_partition_name: None,
                routing_bucket_count: None,
            })
            .collect(),
    });
    let mut frame = BytesMut::new();
    request.encode_frame(&mut frame, 0, 1).expect("fits");
    frame
}

fn fetch_response() -> FetchLogResponse {
    FetchLogResponse {
        tables_resp: vec![PbFetchLogRespForTable {
            table_id: 1,
            buckets_resp: (0..BUCKETS)
                .map(|bucket_id| PbFetchLogRespForBucket {
                    bucket_id,
                    high_watermark: Some(1_000_000),
                    log_start_offset: Some(0),
                    records: Some(Bytes::from(vec![0x5a; RECORDS_PER_BUCKET_BYTES])),
                    ..Default::default()
                })
                .collect(),
        }],
    }
}

fn bench_produce_decode(c: &mut Criterion) {
    let frame = produce_frame();
    let decoder = FrameDecoder::default();
    let mut group = c.benchmark_group("produce_log_3x1MiB");
    group.throughput(Throughput::Bytes(frame.len() as u64));
    group.bench_function("frame_and_request_decode", |b| {
        b.iter_batched(
            || frame.clone(),
            |mut buf| {
                let frame = decoder.decode_request(&mut buf).unwrap().unwrap();
                let header = frame.header;
                black_box(decode_request(header.api_key, header.api_version, frame.body).unwrap())
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn bench_fetch_encode(c: &mut Criterion) {
    let response = fetch_response();
    let mut group = c.benchmark_group("fetch_log_response_3x1MiB");
    group.throughput(Throughput::Bytes(
        (BUCKETS as usize * RECORDS_PER_BUCKET_BYTES) as u64,
    ));
    group.bench_function("encode_copying", |b| {
        let mut buf = BytesMut::new();
        b.iter(|| {
            buf.clear();
            encode_success_response(&mut buf, 1, &response).unwrap();
            black_box(buf.len())
        })
    });
    group.bench_function("encode_chunks", |b| {
        let mut scratch = BytesMut::new();
        let mut chunks = Vec::new();
        b.iter_batched(
            || response.clone(),
            |response| {
                chunks.clear();
                encode_fetch_log_response_chunks(&mut scratch, 1, response, &mut chunks).unwrap();
                black_box(chunks.len())
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_produce_decode, bench_fetch_encode);
criterion_main!(benches);
