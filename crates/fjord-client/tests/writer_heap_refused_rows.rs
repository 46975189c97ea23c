//! Refused rows must not make the writer hold heap that buffer memory
//! (`client.writer.buffer.memory-size`) and the presize cap do not see.
//!
//! A row that opens its bucket's batch first readies the batch: its
//! buffers are presized (accumulator.rs `open_batch`, for up to the
//! bucket's last batch plus a quarter). The cap on what open batches are
//! presized for together (`Accumulator::presized_bytes`) counts that room
//! only once the row is accepted (`mark_open`). A row refused there (a
//! value of the wrong type, say) leaves the bucket's builder empty — not
//! open, not counted — yet still holding the presized buffers, until that
//! bucket's next batch is sealed. After a burst of full batches, one bad
//! row per bucket then holds buckets x batch size of heap, the very growth
//! the cap exists to stop (tests/writer_heap_many_buckets.rs).
//!
//! A counting `#[global_allocator]` (`counting_heap`) measures the live
//! heap of the whole process around the refused rows. Nothing else runs
//! then: every batch was acknowledged, the batch timeout is far off, and
//! a refused row goes nowhere near the server.

mod counting_heap;
mod support;

use support::{append_in_time, flush_in_time};

use fjord_client::row::Datum;
use fjord_client::{TablePath, WriterConfig};
use support::{
    create_bucketed_table, id_text_schema, ids_by_bucket, rows_per_full_batch, TestServer,
};

/// Buckets of the table: each receives one full batch, then one bad row.
const BUCKETS: usize = 128;
/// `client.writer.buffer.memory-size`: a quarter of one full batch per
/// bucket.
const MEMORY_BYTES: usize = 8 << 20;
/// `client.writer.batch-size` (no compression: batches seal at this).
const BATCH_BYTES: usize = 256 << 10;
/// The least a batch is presized for, whatever the cap leaves (accumulator.rs
/// `open_batch`: one reservation step, the seal size / 4 within [4 KiB,
/// 128 KiB]; crate-private, restated).
const CHUNK_BYTES: usize = BATCH_BYTES / 4;
/// Heap of a presized batch beyond the estimate it was presized for: one
/// row more (`RowBatchBuilder::prepare`) and the 64-byte rounding of its
/// buffers.
const PRESIZE_SLACK_BYTES: usize = 8 + 4 + PAYLOAD_BYTES + 1 + 5 * 64;
/// What the presize cap lets open batches hold together: buffer memory,
/// and one reservation step for each bucket beyond it, with each batch's
/// slack. Refused rows open no batch, so they should hold far less; this
/// is the cap's own bound, whichever way a fix counts them.
const CAP_BYTES: usize = MEMORY_BYTES + BUCKETS * (CHUNK_BYTES + PRESIZE_SLACK_BYTES);
/// Bytes of every row's STRING value.
const PAYLOAD_BYTES: usize = 1000;
/// Bytes of the oversized rows' STRING value: four times the 1 MiB of
/// buffer memory of [`refused_oversized_rows_leave_no_heap_behind_in_their_buckets`].
const OVERSIZED_BYTES: usize = 4 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_first_rows_after_a_burst_hold_no_more_heap_than_the_presize_cap_allows() {
    let _turn = TURN.lock().await;
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("refused", "heap");
    let table = create_bucketed_table(
        &client,
        &path,
        id_text_schema(),
        BUCKETS as i32,
        &["id"],
        "NONE",
    )
    .await;
    let config = WriterConfig::from_options([
        ("client.writer.buffer.memory-size", "8mb"),
        ("client.writer.batch-size", "256kb"),
        ("client.writer.batch-timeout", "10 min"),
    ])
    .expect("valid options");
    let mut writer = client.append_writer(&path, config).await.expect("writer");
    let payload = "x".repeat(PAYLOAD_BYTES);
    let rows_per_batch = rows_per_full_batch(&writer, &payload, BATCH_BYTES);

    // Ids per bucket, routed as the writer routes them (hash of `id`).
    let ids = ids_by_bucket(&table, |_| rows_per_batch);

    // The burst, bucket after bucket (a backfill sorted by key): every
    // bucket's last batch is a full one, sealed by its size.
    for list in &ids {
        for &id in list {
            let row = [Datum::BigInt(id), Datum::String(&payload)];
            append_in_time(&mut writer, &row[..]).await;
        }
    }
    flush_in_time(&mut writer).await;
    assert_eq!(
        writer.stats().batches,
        BUCKETS as u64,
        "one full batch per bucket"
    );

    // One bad row per bucket: its STRING column given a BIGINT.
    let before = counting_heap::live();
    for list in &ids {
        let bad = [Datum::BigInt(list[0]), Datum::BigInt(0)];
        writer
            .append(&bad[..])
            .await
            .expect_err("a BIGINT for a STRING column is refused");
    }
    let growth = counting_heap::live() - before;
    assert!(
        growth <= CAP_BYTES as isize,
        "{BUCKETS} refused rows (no batch open, nothing buffered) left {growth} bytes of heap \
         held, more than the {CAP_BYTES} bytes the presize cap allows even open batches: each \
         refused first row leaves its bucket's presized buffers, which the cap does not count"
    );
    writer.close().await.expect("close");
    server.stop().await;
}

/// One test at a time: the counter is process-wide (an async lock: it is
/// held across the test's awaits, each test on its own runtime).
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_oversized_rows_leave_no_heap_behind_in_their_buckets() {
    let _turn = TURN.lock().await;
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("refused", "oversized");
    let buckets = 8;
    let table =
        create_bucketed_table(&client, &path, id_text_schema(), buckets, &["id"], "NONE").await;
    let config = WriterConfig::from_options([
        ("client.writer.buffer.memory-size", "1mb"),
        ("client.writer.batch-timeout", "10 min"),
    ])
    .expect("valid options");
    let mut writer = client.append_writer(&path, config).await.expect("writer");
    // Four times buffer memory: refused whatever else the batch holds.
    let giant = "g".repeat(OVERSIZED_BYTES);
    // The first id of each bucket, routed as the writer routes it.
    let first_id = ids_by_bucket(&table, |_| 1);

    let before = counting_heap::live();
    for id in first_id.into_iter().flatten() {
        let row = [Datum::BigInt(id), Datum::String(&giant)];
        let error = writer
            .append(&row[..])
            .await
            .expect_err("a row larger than buffer memory is refused");
        assert!(error.to_string().contains("cannot be buffered"), "{error}");
    }
    let growth = counting_heap::live() - before;
    assert!(
        growth <= (1 << 20),
        "{buckets} refused rows of {OVERSIZED_BYTES} bytes (nothing buffered) left {growth} \
         bytes of heap held, more than the 1 MiB of buffer memory: each bucket's builder keeps \
         the refused row's room"
    );
    writer.close().await.expect("close");
    server.stop().await;
}
