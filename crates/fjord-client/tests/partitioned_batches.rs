//! Checks of the partitioned write path against an
//! in-process server: a whole RecordBatch split by partition when it is a
//! slice of a larger batch (offset, NULL key outside the slice) and with two
//! partition keys in the reverse of their column order; rows alternating
//! between partitions of two keys (the last-partition shortcut of the view
//! and of the accumulator); and a partition dropped and re-created under a
//! writer, whose rows go to the new partition once the writer's cache
//! learns of it. Also what a refused batch leaves behind, and what a slice
//! of a larger batch is charged against the buffer memory.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Int64Array, RecordBatch, StringArray};
use fjord_client::row::Datum;
use fjord_client::{AppendWriter, FlussClient, TableInfo, TablePath};
use fjord_client::{WriterConfig, WriterStats};
use fjord_format::schema::{Schema, TableDescriptor, TableDistribution};
use fjord_format::types::DataType;
use support::{create_described_table, TestServer};

/// Bound on every step, so a server that never answers fails the test.
const STEP: Duration = Duration::from_secs(60);
/// Buckets per partition.
const BUCKETS: i32 = 2;

/// `db.<name>`: `id BIGINT, region STRING, dt STRING`, partitioned by
/// `keys` (in that order).
async fn create_table(client: &FlussClient, name: &str, keys: &[&str]) -> TableInfo {
    let schema = Schema::builder()
        .column("id", DataType::bigint())
        .column("region", DataType::string())
        .column("dt", DataType::string())
        .build()
        .expect("schema");
    let descriptor = TableDescriptor::new(
        schema,
        None,
        keys.iter().map(|k| (*k).to_owned()).collect(),
        Some(TableDistribution {
            bucket_count: Some(BUCKETS),
            bucket_keys: Vec::new(),
        }),
        BTreeMap::new(),
        BTreeMap::new(),
    )
    .expect("descriptor");
    let path = TablePath::new("db", name);
    create_described_table(&client.admin(), &path, &descriptor).await
}

/// A server, a client, table `db.<name>` (see [`create_table`]) and a
/// writer for it with the default configuration; the server runs while the
/// returned [`TestServer`] is held.
async fn writing(name: &str, keys: &[&str]) -> (TestServer, FlussClient, TableInfo, AppendWriter) {
    let server = TestServer::start().await;
    let client = server.client().await;
    let table = create_table(&client, name, keys).await;
    let writer = client
        .append_writer(&table.path, WriterConfig::default())
        .await
        .expect("writer");
    (server, client, table, writer)
}

/// A batch of `(id, region, dt)` rows of the table's schema.
fn batch(table: &TableInfo, rows: &[(i64, &str, Option<&str>)]) -> RecordBatch {
    let ids: Int64Array = rows.iter().map(|r| Some(r.0)).collect();
    let regions: StringArray = rows.iter().map(|r| Some(r.1)).collect();
    let dts: StringArray = rows.iter().map(|r| r.2).collect();
    let schema = fjord_format::arrow_schema::to_arrow_schema(table.descriptor.schema());
    RecordBatch::try_new(
        schema,
        vec![Arc::new(ids), Arc::new(regions), Arc::new(dts)],
    )
    .expect("batch")
}

/// Partition name → its id, as the server lists them.
async fn partitions(client: &FlussClient, table: &TableInfo) -> BTreeMap<String, i64> {
    client
        .admin()
        .list_partitions(&table.path, None)
        .await
        .expect("list")
        .into_iter()
        .map(|p| (p.name, p.partition_id))
        .collect()
}

/// Every row `(id, region, dt)` of one partition, once `expected` arrived,
/// sorted by id.
async fn read_partition(
    client: &FlussClient,
    table: &TableInfo,
    partition_id: i64,
    expected: usize,
) -> Vec<(i64, String, String)> {
    let mut rows = Vec::new();
    for records in
        support::read_partition_batches(client, table, partition_id, expected, STEP).await
    {
        let ids = records.column(0).as_primitive::<Int64Type>();
        let regions = records.column(1).as_string::<i32>();
        let dts = records.column(2).as_string::<i32>();
        for i in 0..records.num_rows() {
            rows.push((
                ids.value(i),
                regions.value(i).to_owned(),
                dts.value(i).to_owned(),
            ));
        }
    }
    rows.sort_unstable();
    rows
}

async fn flush(w: &mut AppendWriter) -> WriterStats {
    tokio::time::timeout(STEP, w.flush())
        .await
        .expect("flush in time")
        .expect("flush");
    w.stats()
}

/// Checks that every partition holds exactly the rows of `written` whose
/// name (values of `keys`, joined by `$`) is its name.
async fn check_partitions(
    client: &FlussClient,
    table: &TableInfo,
    written: &[(i64, &str, &str)],
    name_of: impl Fn(&(i64, &str, &str)) -> String,
) {
    let listed = partitions(client, table).await;
    let mut expected: BTreeMap<String, Vec<(i64, String, String)>> = BTreeMap::new();
    for row in written {
        expected
            .entry(name_of(row))
            .or_default()
            .push((row.0, row.1.to_owned(), row.2.to_owned()));
    }
    assert_eq!(
        listed.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "one partition per name"
    );
    for (name, mut rows) in expected {
        rows.sort_unstable();
        let got = read_partition(client, table, listed[&name], rows.len()).await;
        assert_eq!(got, rows, "partition {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sliced_batch_with_two_keys_lands_each_row_in_its_own_partition() {
    // Keys in the reverse of their column order: dt (column 2), region (1).
    let (_server, client, table, mut w) = writing("sliced", &["dt", "region"]).await;
    // Rows 0-1 (one with a NULL dt) are outside the slice and must not
    // count; inside it, runs change on either key, and (d1, eu) comes back
    // after other partitions, so its rows are gathered, not sliced.
    let all = batch(
        &table,
        &[
            (0, "eu", None),
            (1, "eu", Some("d0")),
            (2, "eu", Some("d1")),
            (3, "eu", Some("d1")),
            (4, "us", Some("d1")),
            (5, "us", Some("d2")),
            (6, "eu", Some("d1")),
            (7, "eu", Some("d2")),
            (8, "eu", Some("d2")),
        ],
    );
    let completion = w.append_batch(all.slice(2, 7)).await.expect("append");
    let ack = tokio::time::timeout(STEP, completion)
        .await
        .expect("ack in time")
        .expect("ack");
    assert_eq!(ack.records, 7);
    flush(&mut w).await;
    let written = [
        (2, "eu", "d1"),
        (3, "eu", "d1"),
        (4, "us", "d1"),
        (5, "us", "d2"),
        (6, "eu", "d1"),
        (7, "eu", "d2"),
        (8, "eu", "d2"),
    ];
    check_partitions(&client, &table, &written, |r| format!("{}${}", r.2, r.1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_alternating_between_partitions_of_two_keys_each_land_in_their_own() {
    let (_server, client, table, mut w) = writing("alternating", &["region", "dt"]).await;
    // Consecutive rows differ in one key only, either one, and partitions
    // recur after others: the previous row's partition is right only for
    // the second row of each pair.
    let pattern = [
        ("eu", "d1"),
        ("eu", "d1"),
        ("eu", "d2"),
        ("us", "d2"),
        ("us", "d1"),
        ("eu", "d1"),
        ("us", "d2"),
        ("us", "d2"),
    ];
    let mut written = Vec::new();
    for round in 0..3 {
        for (i, (region, dt)) in pattern.iter().enumerate() {
            let id = (round * pattern.len() + i) as i64;
            w.append(&[Datum::BigInt(id), Datum::String(region), Datum::String(dt)][..])
                .await
                .expect("append");
            written.push((id, *region, *dt));
        }
    }
    flush(&mut w).await;
    check_partitions(&client, &table, &written, |r| format!("{}${}", r.1, r.2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_after_a_partition_is_dropped_and_recreated_go_to_the_new_partition() {
    let (_server, client, table, mut w) = writing("recreated", &["dt"]).await;
    let row =
        |id: i64, dt: &'static str| [Datum::BigInt(id), Datum::String("eu"), Datum::String(dt)];
    w.append(&row(1, "d1")[..]).await.expect("append");
    flush(&mut w).await;
    let old = partitions(&client, &table).await["d1"];

    let spec = [("dt".to_owned(), "d1".to_owned())];
    let admin = client.admin();
    admin
        .drop_partition(&table.path, &spec, false)
        .await
        .expect("drop");
    admin
        .create_partition(&table.path, &spec, false)
        .await
        .expect("re-create");
    let new = partitions(&client, &table).await["d1"];
    assert_ne!(old, new, "a re-created partition has a new id");

    // A row for a partition the writer does not know makes it reload the
    // partition list; from then on d1's rows must go to the new d1, not to
    // the id the writer remembered for the previous row of d1.
    w.append(&row(2, "d2")[..]).await.expect("append");
    w.append(&row(3, "d1")[..]).await.expect("append");
    w.append(&row(4, "d1")[..]).await.expect("append");
    flush(&mut w).await;
    let got = read_partition(&client, &table, new, 2).await;
    assert_eq!(
        got,
        [
            (3, "eu".to_owned(), "d1".to_owned()),
            (4, "eu".to_owned(), "d1".to_owned())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_refused_for_size_writes_none_of_its_partitions() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let table = create_table(&client, "oversized", &["dt"]).await;
    let config =
        WriterConfig::from_options([("client.writer.buffer.memory-size", "1mb")]).expect("config");
    let mut w = client
        .append_writer(&table.path, config)
        .await
        .expect("writer");
    // d1's part is a few bytes; d2's holds a 2 MiB region, more than the
    // whole buffer memory, so the batch cannot be buffered.
    let huge = "x".repeat(2 << 20);
    let error = w
        .append_batch(batch(
            &table,
            &[(1, "eu", Some("d1")), (2, huge.as_str(), Some("d2"))],
        ))
        .await
        .err()
        .expect("a batch larger than the buffer memory is refused");
    assert!(error.to_string().contains("memory-size"), "{error}");
    let stats = flush(&mut w).await;
    // The caller was told the batch failed: none of it may be written, or
    // a retry of the batch duplicates d1's rows.
    assert_eq!(
        stats.batches, 0,
        "d1's part was written although the batch was refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_slice_of_a_large_batch_is_charged_its_own_bytes() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let schema = support::id_text_schema();
    let path = TablePath::new("db", "sliced");
    let table = support::create_log_table(&client, &path, schema, 1, "NONE").await;
    let config =
        WriterConfig::from_options([("client.writer.buffer.memory-size", "1mb")]).expect("config");
    let mut writer = client.append_writer(&path, config).await.expect("writer");
    // Row 0 holds 2 MiB of text, more than the buffer memory; the slice
    // appended is row 1 only, a few bytes (the partitioned path already
    // charges a slice its own share).
    let huge = "x".repeat(2 << 20);
    let ids = Int64Array::from(vec![0, 1]);
    let texts = StringArray::from(vec![huge.as_str(), "small"]);
    let arrow_schema = fjord_format::arrow_schema::to_arrow_schema(table.descriptor.schema());
    let parent =
        RecordBatch::try_new(arrow_schema, vec![Arc::new(ids), Arc::new(texts)]).expect("batch");
    let completion = writer
        .append_batch(parent.slice(1, 1))
        .await
        .expect("a one-row slice fits the buffer memory");
    let ack = tokio::time::timeout(STEP, completion)
        .await
        .expect("ack in time")
        .expect("ack");
    assert_eq!(ack.records, 1);
}
