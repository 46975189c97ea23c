//! The native append writer against an in-process server: rows and whole
//! RecordBatches arrive exactly once, batches are sealed by size and by
//! age (an idle writer's rows arrive without flush, a busy writer's while
//! the linger task seals under it), every acks level
//! writes every row, and bad options are refused with a clear error.

mod support;

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Int64Array, RecordBatch, StringArray};
use fjord_client::row::Datum;
use fjord_client::{AppendWriter, FlussClient, TableInfo, TablePath, WriterConfig};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use support::{create_bucketed_table, create_log_table, read_all, read_all_by_bucket, TestServer};

const NAMES: [&str; 4] = ["pv", "cart", "fav", "buy"];

fn id_name_schema() -> Schema {
    Schema::builder()
        .column("id", DataType::bigint())
        .column("name", DataType::string())
        .build()
        .expect("schema")
}

fn config(opts: &[(&str, &str)]) -> WriterConfig {
    WriterConfig::from_options(opts.iter().copied()).expect("valid writer options")
}

/// The sorted ids of every row read back.
fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    let mut ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    ids
}

/// Appends one row per id, one at a time: the id and its name,
/// `NAMES[id % 4]` (what [`named_rows`] checks).
async fn append_ids(writer: &mut AppendWriter, ids: std::ops::Range<i64>) {
    for id in ids {
        writer
            .append(&[Datum::BigInt(id), Datum::String(NAMES[id as usize % 4])])
            .await
            .expect("append");
    }
}

/// Rows of `batches` whose name is the one [`append_ids`] gave their id.
fn named_rows(batches: &[RecordBatch]) -> usize {
    batches
        .iter()
        .map(|b| {
            let ids = b.column(0).as_primitive::<Int64Type>();
            let names = b.column(1).as_string::<i32>();
            (0..b.num_rows())
                .filter(|&i| names.value(i) == NAMES[ids.value(i) as usize % 4])
                .count()
        })
        .sum()
}

async fn table(client: &FlussClient, name: &str, buckets: i32, compression: &str) -> TableInfo {
    let path = TablePath::new("writer_tests", name);
    create_log_table(client, &path, id_name_schema(), buckets, compression).await
}

fn id_batch(writer_schema: &arrow_schema::SchemaRef, ids: std::ops::Range<i64>) -> RecordBatch {
    let names: Vec<&str> = ids.clone().map(|i| NAMES[i as usize % 4]).collect();
    RecordBatch::try_new(
        Arc::clone(writer_schema),
        vec![
            Arc::new(Int64Array::from_iter_values(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .expect("batch")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_and_record_batches_arrive_exactly_once() {
    let server = TestServer::start().await;
    let client = server.client().await;
    for compression in ["ZSTD", "LZ4_FRAME", "NONE"] {
        let table = table(
            &client,
            &format!("round_trip_{compression}"),
            4,
            compression,
        )
        .await;
        let mut writer = client
            .append_writer(&table.path, WriterConfig::default())
            .await
            .expect("writer");
        append_ids(&mut writer, 0..10_000).await;
        let schema = writer.arrow_schema().clone();
        let first = writer
            .append_batch(id_batch(&schema, 10_000..11_000))
            .await
            .expect("append batch");
        let second = writer
            .append_batch(id_batch(&schema, 11_000..13_000))
            .await
            .expect("append batch");
        writer.flush().await.expect("flush");
        assert_eq!(first.await.expect("first batch acked").records, 1000);
        assert_eq!(second.await.expect("second batch acked").records, 2000);

        let batches = read_all(&client, &table, 13_000).await;
        assert_eq!(
            ids(&batches),
            (0..13_000).collect::<Vec<_>>(),
            "{compression}"
        );
        assert_eq!(
            named_rows(&batches),
            13_000,
            "every name matches its id ({compression})"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_writer_rows_arrive_without_flush_after_the_batch_timeout() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let table = table(&client, "linger", 2, "ZSTD").await;
    let mut writer = client
        .append_writer(
            &table.path,
            config(&[("client.writer.batch-timeout", "20ms")]),
        )
        .await
        .expect("writer");
    append_ids(&mut writer, 0..10).await;
    // No flush: only the linger task can send these rows.
    let batches = read_all(&client, &table, 10).await;
    assert_eq!(ids(&batches), (0..10).collect::<Vec<_>>());
    drop(writer);
    server.stop().await;
}

/// The linger task takes the accumulator from under a writer that keeps
/// appending (the writer's lock is biased toward the writer:
/// `writer/owner_lock.rs`): with a 1 ms batch timeout and a batch size
/// the rows never reach, only the linger task seals. Rows go in, a chunk
/// at a time with no flush, until it has sealed (and the server
/// acknowledged) [`LINGER_SEALS`] batches under them, however long that
/// takes on this machine; every row arrives once, in order, in whole rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_appended_while_the_linger_task_seals_arrive_once_in_order() {
    /// Batches the linger task must seal while rows go in.
    const LINGER_SEALS: u64 = 100;
    /// Rows appended between looks at the writer's acknowledged batches.
    const CHUNK: i64 = 10_000;
    /// Rows after which a linger task that never sealed fails the test
    /// rather than letting it run on.
    const ROWS_MAX: i64 = 5_000_000;
    let server = TestServer::start().await;
    let client = server.client().await;
    let table = table(&client, "linger_race", 1, "NONE").await;
    let mut writer = client
        .append_writer(
            &table.path,
            config(&[("client.writer.batch-timeout", "1ms")]),
        )
        .await
        .expect("writer");
    let mut rows = 0;
    while writer.stats().batches < LINGER_SEALS {
        assert!(
            rows < ROWS_MAX,
            "the linger task sealed {} batches under {rows} rows",
            writer.stats().batches
        );
        append_ids(&mut writer, rows..rows + CHUNK).await;
        rows += CHUNK;
    }
    // The linger task came through the race alive: rows of an idle writer
    // still arrive without flush.
    append_ids(&mut writer, rows..rows + 10).await;
    let batches = read_all(&client, &table, rows as usize + 10).await;
    let read: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(
        read,
        (0..rows + 10).collect::<Vec<_>>(),
        "once and in order"
    );
    assert_eq!(named_rows(&batches), read.len(), "whole rows");
    writer.close().await.expect("close");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_batches_are_sealed_by_size_without_flush() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let table = table(&client, "by_size", 1, "NONE").await;
    let mut writer = client
        .append_writer(
            &table.path,
            config(&[
                ("client.writer.batch-size", "8kb"),
                // The timeout cannot fire during this test.
                ("client.writer.batch-timeout", "1h"),
            ]),
        )
        .await
        .expect("writer");
    for id in 0..20_000i64 {
        writer
            .append(&[Datum::BigInt(id), Datum::String("cart")])
            .await
            .expect("append");
    }
    // Without flush, only batches sealed by size can have been sent: the
    // last, partial batch stays buffered.
    let batches = read_all(&client, &table, 19_000).await;
    let read = ids(&batches);
    assert!(
        read.len() >= 19_000 && read.len() < 20_000,
        "read {} rows",
        read.len()
    );
    assert_eq!(read, (0..read.len() as i64).collect::<Vec<_>>());
    assert!(batches.len() > 10, "many small batches: {}", batches.len());
    writer.flush().await.expect("flush");
    assert_eq!(ids(&read_all(&client, &table, 20_000).await).len(), 20_000);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acks_level_writes_every_row() {
    let server = TestServer::start().await;
    let client = server.client().await;
    for (acks, idempotence) in [
        ("0", "false"),
        ("1", "false"),
        ("all", "false"),
        ("all", "true"),
    ] {
        let name = format!("acks_{acks}_{idempotence}");
        let table = table(&client, &name, 3, "LZ4_FRAME").await;
        let mut writer = client
            .append_writer(
                &table.path,
                config(&[
                    ("client.writer.acks", acks),
                    ("client.writer.enable-idempotence", idempotence),
                ]),
            )
            .await
            .expect("writer");
        for id in 0..3_000i64 {
            writer
                .append(&[Datum::BigInt(id), Datum::String("fav")])
                .await
                .expect("append");
        }
        writer.flush().await.expect("flush");
        let read = ids(&read_all(&client, &table, 3_000).await);
        assert_eq!(read, (0..3_000).collect::<Vec<_>>(), "acks={acks}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_row_that_does_not_match_the_schema_is_refused_and_nothing_is_lost() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let table = table(&client, "mismatch", 1, "ZSTD").await;
    let mut writer = client
        .append_writer(&table.path, WriterConfig::default())
        .await
        .expect("writer");
    writer
        .append(&[Datum::BigInt(1), Datum::String("pv")])
        .await
        .expect("append");
    let e = writer
        .append(&[Datum::String("oops"), Datum::String("pv")])
        .await
        .expect_err("type mismatch");
    assert!(e.to_string().contains("id"), "names the column: {e}");
    writer
        .append(&[Datum::BigInt(2), Datum::String("pv")])
        .await
        .expect("append");
    writer.flush().await.expect("flush");
    assert_eq!(ids(&read_all(&client, &table, 2).await), vec![1, 2]);
    server.stop().await;
}

#[test]
fn bad_writer_options_are_refused_naming_option_and_value() {
    let e = WriterConfig::from_options([("client.writer.batch-size", "abc")]).unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("client.writer.batch-size") && message.contains("abc"),
        "{message}"
    );
    let e = WriterConfig::from_options([("client.writer.acks", "1")]).unwrap_err();
    assert!(e.to_string().contains("enable-idempotence"), "{e}");
}

#[tokio::test]
async fn bootstrap_falls_back_to_the_next_server() {
    let server = TestServer::start().await;
    // Port 1 on loopback refuses connections.
    let client = FlussClient::connect(&["127.0.0.1:1".to_owned(), server.addr.clone()])
        .await
        .expect("second bootstrap server used");
    client
        .admin()
        .create_database("fallback", &Default::default(), true)
        .await
        .expect("the connection works");
    let e = match FlussClient::connect(&["127.0.0.1:1".to_owned()]).await {
        Ok(_) => panic!("nothing listens on port 1"),
        Err(e) => e,
    };
    assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_batch_for_a_hashed_table_is_split_into_the_buckets_its_rows_hash_to() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let by_rows = TablePath::new("writer_tests", "hashed_rows");
    let by_batch = TablePath::new("writer_tests", "hashed_batch");
    let rows_table =
        create_bucketed_table(&client, &by_rows, id_name_schema(), 4, &["id"], "ZSTD").await;
    let batch_table =
        create_bucketed_table(&client, &by_batch, id_name_schema(), 4, &["id"], "ZSTD").await;
    let mut row_writer = client
        .append_writer(&by_rows, WriterConfig::default())
        .await
        .expect("writer");
    append_ids(&mut row_writer, 0..2_000).await;
    row_writer.flush().await.expect("flush");
    let mut batch_writer = client
        .append_writer(&by_batch, WriterConfig::default())
        .await
        .expect("writer");
    let schema = batch_writer.arrow_schema().clone();
    let done = batch_writer
        .append_batch(id_batch(&schema, 0..2_000))
        .await
        .expect("append batch");
    batch_writer.flush().await.expect("flush");
    assert_eq!(done.await.expect("acknowledged").records, 2_000);

    let per_bucket = |read: Vec<(i32, RecordBatch)>| {
        let mut buckets = vec![Vec::new(); 4];
        for (bucket, batch) in read {
            buckets[bucket as usize].extend(ids(&[batch]));
        }
        for ids in &mut buckets {
            ids.sort_unstable();
        }
        buckets
    };
    let from_rows = per_bucket(read_all_by_bucket(&client, &rows_table, 2_000).await);
    let from_batch = per_bucket(read_all_by_bucket(&client, &batch_table, 2_000).await);
    assert_eq!(from_rows.iter().map(Vec::len).sum::<usize>(), 2_000);
    assert!(
        from_rows.iter().all(|ids| !ids.is_empty()),
        "rows spread over every bucket"
    );
    assert_eq!(from_rows, from_batch);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_dropped_without_flush_still_delivers_its_rows() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let table = table(&client, "dropped_writer", 2, "LZ4_FRAME").await;
    let mut writer = client
        .append_writer(
            &table.path,
            config(&[("client.writer.batch-timeout", "1h")]),
        )
        .await
        .expect("writer");
    for id in 0..500i64 {
        writer
            .append(&[Datum::BigInt(id), Datum::String("buy")])
            .await
            .expect("append");
    }
    drop(writer);
    let read = ids(&read_all(&client, &table, 500).await);
    assert_eq!(read, (0..500).collect::<Vec<_>>());
    server.stop().await;
}
