//! The writer under faults, through a misbehaving TCP proxy: an answer lost
//! with its connection after the server appended the batch is retried
//! without duplicating a row (idempotence), and a slow server makes the
//! writer wait instead of buffering beyond `client.writer.buffer.memory-size`.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::RecordBatch;
use fjord_client::row::Datum;
use fjord_client::{TablePath, WriterConfig};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use support::{create_log_table, read_all, Fault, TestServer};

fn schema() -> Schema {
    Schema::builder()
        .column("id", DataType::bigint())
        .column("payload", DataType::string())
        .build()
        .expect("schema")
}

fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    let mut ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_produce_answers_are_retried_without_duplicates() {
    let server = TestServer::start_behind_proxy(Fault::DropProduceAnswers(2)).await;
    let client = server.client().await;
    let path = TablePath::new("faults", "dropped_answers");
    let table = create_log_table(&client, &path, schema(), 2, "ZSTD").await;
    let options = [
        ("client.writer.batch-size", "16kb"),
        ("client.writer.batch-timeout", "1h"),
    ];
    let mut writer = client
        .append_writer(&path, WriterConfig::from_options(options).unwrap())
        .await
        .expect("writer");
    const ROWS: i64 = 50_000;
    for id in 0..ROWS {
        writer
            .append(&[Datum::BigInt(id), Datum::String("payload")])
            .await
            .expect("append");
    }
    writer
        .flush()
        .await
        .expect("every batch acknowledged after retries");
    assert_eq!(
        server.dropped.load(Ordering::SeqCst),
        2,
        "the proxy dropped two answers"
    );
    assert!(
        writer.stats().retries >= 2,
        "retries: {}",
        writer.stats().retries
    );
    let read = ids(&read_all(&client, &table, ROWS as usize).await);
    assert_eq!(read.len(), ROWS as usize, "no row lost or duplicated");
    assert_eq!(read, (0..ROWS).collect::<Vec<_>>());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_server_back_pressure_keeps_buffered_bytes_within_the_bound() {
    let server =
        TestServer::start_behind_proxy(Fault::DelayAnswers(Duration::from_millis(20))).await;
    let client = server.client().await;
    let path = TablePath::new("faults", "slow_server");
    let table = create_log_table(&client, &path, schema(), 4, "NONE").await;
    const BOUND: u64 = 256 * 1024;
    let options = [
        ("client.writer.buffer.memory-size", "256kb"),
        ("client.writer.batch-size", "16kb"),
    ];
    let mut writer = client
        .append_writer(&path, WriterConfig::from_options(options).unwrap())
        .await
        .expect("writer");
    // About 4 MiB of rows: sixteen times the bound.
    const ROWS: i64 = 100_000;
    let payload = "x".repeat(24);
    for id in 0..ROWS {
        writer
            .append(&[Datum::BigInt(id), Datum::String(&payload)])
            .await
            .expect("append");
    }
    writer.flush().await.expect("flush");
    let stats = writer.stats();
    assert!(
        stats.bytes > 8 * BOUND,
        "wrote well beyond the bound: {stats:?}"
    );
    assert!(stats.max_buffered_bytes <= BOUND, "{stats:?}");
    assert!(stats.memory_waits > 0, "the writer had to wait: {stats:?}");
    assert_eq!(
        stats.buffered_bytes, 0,
        "everything acknowledged: {stats:?}"
    );
    let read = ids(&read_all(&client, &table, ROWS as usize).await);
    assert_eq!(read, (0..ROWS).collect::<Vec<_>>());
    server.stop().await;
}
