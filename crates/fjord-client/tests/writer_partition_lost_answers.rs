//! A partitioned writer whose leader connection dies under it: the proxy
//! swallows produce answers (after the server appended the batches) and
//! closes the connection. Each failure drops the partition's route; the
//! sender refreshes it in a task (writer/sender.rs `Refreshes`) while the
//! partition's batches wait in their queues, then resends on the fresh
//! route, where idempotence recognises the batches already written. Every
//! row of every partition must be written exactly once, in order per
//! bucket.

mod support;

use std::sync::atomic::Ordering;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use fjord_client::row::Datum;
use fjord_client::{TablePath, WriterConfig};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use support::{append_in_time, flush_in_time, Fault, TestServer, HANG};

/// Partitions written, rows interleaved between them.
const DAYS: [&str; 3] = ["20261201", "20261202", "20261203"];
/// Rows written in all.
const ROWS: i64 = 30_000;
/// Produce answers the proxy swallows (each closing its connection).
const DROPPED: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_answers_across_partitions_are_resent_on_refreshed_routes_without_duplicates() {
    let server = TestServer::start_behind_proxy(Fault::DropProduceAnswers(DROPPED)).await;
    let client = server.client().await;
    let path = TablePath::new("lost", "partitioned");
    let schema = Schema::builder()
        .column("id", DataType::bigint())
        .column("dt", DataType::string())
        .build()
        .expect("schema");
    let table =
        support::create_partitioned_table(&client.admin(), &path, schema, &["dt"], Some(2)).await;
    let options = [
        ("client.writer.batch-size", "16kb"),
        ("client.writer.batch-timeout", "1h"),
    ];
    let mut writer = client
        .append_writer(&path, WriterConfig::from_options(options).expect("options"))
        .await
        .expect("writer");
    for id in 0..ROWS {
        // Runs of 100 rows per partition, partitions in turn.
        let day = DAYS[(id / 100) as usize % DAYS.len()];
        append_in_time(&mut writer, &[Datum::BigInt(id), Datum::String(day)]).await;
    }
    // Every batch acknowledged, after retries.
    flush_in_time(&mut writer).await;
    assert_eq!(server.dropped.load(Ordering::SeqCst), DROPPED);
    assert!(
        writer.stats().retries >= DROPPED as u64,
        "retries: {}",
        writer.stats().retries
    );

    let partitions = client
        .admin()
        .list_partitions(&path, None)
        .await
        .expect("list");
    assert_eq!(partitions.len(), DAYS.len());
    for (index, day) in DAYS.iter().enumerate() {
        let partition = partitions
            .iter()
            .find(|p| p.name == *day)
            .expect("partition listed");
        let expected: Vec<i64> = (0..ROWS)
            .filter(|id| (id / 100) as usize % DAYS.len() == index)
            .collect();
        let batches = support::read_partition_batches_by_bucket(
            &client,
            &table,
            partition.partition_id,
            expected.len(),
            HANG,
        )
        .await;
        // A bucket's rows, in offset order, are in append order: the
        // sticky assigner fills one bucket's batch with consecutive appends
        // of this partition, so ids only rise within a bucket, across
        // batches too (a resend out of order would break that).
        let mut per_bucket: Vec<Vec<i64>> = vec![Vec::new(); table.bucket_count() as usize];
        for (bucket, batch) in &batches {
            let values = batch.column(0).as_primitive::<Int64Type>().values();
            per_bucket[*bucket as usize].extend_from_slice(values);
        }
        for (bucket, ids) in per_bucket.iter().enumerate() {
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "partition {day}, bucket {bucket}: rows out of append order"
            );
        }
        let mut ids: Vec<i64> = per_bucket.concat();
        ids.sort_unstable();
        assert_eq!(ids, expected, "partition {day}: no row lost or duplicated");
    }
    writer.close().await.expect("close");
    server.stop().await;
}
