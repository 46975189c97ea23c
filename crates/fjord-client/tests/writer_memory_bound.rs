//! Checks of the writer's memory bound
//! (`client.writer.buffer.memory-size`, issue 4: "bounded buffer memory ...
//! with back-pressure instead of unbounded growth") now that a batch's
//! buffers are sized for its seal threshold when it opens: the heap the
//! writer holds for open batches, measured by a counting allocator
//! (`counting_heap`). Its count is process-wide: this binary holds one test,
//! so no other test's allocations land in it.

mod counting_heap;
mod support;

use std::time::Duration;

use fjord_client::row::Datum;
use fjord_client::{TablePath, WriterConfig};
use support::{create_log_table, TestServer};

/// Buckets of the table: each takes one row, so each holds an open batch.
/// Few enough that their reservations (128 KiB each) fit the memory, so no
/// batch is sealed early by back-pressure and nothing reaches the server
/// (whose allocations, in this process, would blur the count).
const BUCKETS: i32 = 24;
/// The writer's `client.writer.buffer.memory-size`.
const MEMORY_BYTES: usize = 4 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_batches_hold_no_more_heap_than_the_buffer_memory_allows() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let schema = support::id_text_schema();
    let path = TablePath::new("db", "wide");
    create_log_table(&client, &path, schema, BUCKETS, "NONE").await;
    let config = WriterConfig::from_options([
        ("client.writer.buffer.memory-size", "4mb"),
        ("client.writer.bucket.no-key-assigner", "ROUND_ROBIN"),
        // No batch is sealed by age while the heap is measured.
        ("client.writer.batch-timeout", "10 min"),
    ])
    .expect("config");
    let mut writer = client.append_writer(&path, config).await.expect("writer");
    // Warm-up: one batch per bucket, flushed, so per-writer state exists.
    for i in 0..i64::from(BUCKETS) {
        writer
            .append(&[Datum::BigInt(i), Datum::String("warm")][..])
            .await
            .expect("append");
    }
    tokio::time::timeout(Duration::from_secs(60), writer.flush())
        .await
        .expect("flush in time")
        .expect("flush");

    let before = counting_heap::live();
    // One row per bucket: an open batch of a few bytes in each.
    for i in 0..i64::from(BUCKETS) {
        writer
            .append(&[Datum::BigInt(i), Datum::String("row")][..])
            .await
            .expect("append");
    }
    let grown = usize::try_from(counting_heap::live() - before).unwrap_or(0);
    assert_eq!(writer.stats().memory_waits, 0, "no back-pressure");
    assert_eq!(
        writer.stats().batches,
        u64::from(BUCKETS as u32),
        "warm-up only sent"
    );
    // A row of ~20 bytes per bucket, whatever their batches' buffers: the
    // bound is the configured memory (twice, for slack), not one seal
    // threshold (here a quarter of the memory) per open batch.
    assert!(
        grown <= 2 * MEMORY_BYTES,
        "{BUCKETS} open batches of one row hold {grown} bytes of heap; \
         buffer.memory-size is {MEMORY_BYTES}, the pool counts {}",
        writer.stats().buffered_bytes
    );
    tokio::time::timeout(Duration::from_secs(60), writer.flush())
        .await
        .expect("flush in time")
        .expect("flush");
}
