//! Rows through the native writer into a partitioned table, against an
//! in-process server: partitions created dynamically (each once, even with
//! several writers racing), every row read back from its own partition only,
//! and a clear refusal when dynamic creation is disabled.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, Int64Array, StringArray};
use fjord_client::admin::PartitionInfo;
use fjord_client::row::Datum;
use fjord_client::{AppendWriter, FlussClient, TableInfo, TablePath, WriterConfig};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use fjord_proto::ErrorCode;

mod support;

/// Bound on every step, so a server that never answers fails the test
/// instead of hanging it.
const STEP: Duration = Duration::from_secs(60);
/// Buckets per partition: more than one, so rows of a partition spread.
const BUCKETS: i32 = 2;
const DAYS: [&str; 5] = ["20261201", "20261202", "20261203", "20261204", "20261205"];

/// A server for one test and the client talking to it (the server runs until
/// the test's runtime ends; its data directory lives as long as this value).
struct Running {
    client: FlussClient,
    _server: support::TestServer,
}

impl Running {
    /// Every partition of `table`, as the server lists them.
    async fn partitions(&self, table: &TableInfo) -> Vec<PartitionInfo> {
        self.client
            .admin()
            .list_partitions(&table.path, None)
            .await
            .expect("list")
    }
}

/// Flushes `w`, failing the test if that takes longer than [`STEP`].
async fn flush_in_time(w: &mut AppendWriter) {
    tokio::time::timeout(STEP, w.flush())
        .await
        .expect("flush in time")
        .expect("flush");
}

async fn start() -> Running {
    let server = support::TestServer::start().await;
    let client = server.client().await;
    Running {
        client,
        _server: server,
    }
}

/// `db.<name>`: `id BIGINT, dt STRING`, partitioned by `dt`.
async fn create_table(client: &FlussClient, name: &str) -> TableInfo {
    let schema = Schema::builder()
        .column("id", DataType::bigint())
        .column("dt", DataType::string())
        .build()
        .expect("schema");
    let path = TablePath::new("db", name);
    support::create_partitioned_table(&client.admin(), &path, schema, &["dt"], Some(BUCKETS)).await
}

/// Reads every row of one partition (all buckets from offset 0) until
/// `expected` rows arrived; returns (id, dt) of each.
async fn read_partition(
    client: &FlussClient,
    table: &TableInfo,
    partition_id: i64,
    expected: usize,
) -> Vec<(i64, String)> {
    let mut rows = Vec::new();
    for records in
        support::read_partition_batches(client, table, partition_id, expected, STEP).await
    {
        let ids = records
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("id column");
        let dts = records
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("dt column");
        for i in 0..records.num_rows() {
            rows.push((ids.value(i), dts.value(i).to_owned()));
        }
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_create_each_partition_once_and_rows_stay_in_their_partition() {
    const WRITERS: i64 = 4;
    const ROWS_PER_DAY: i64 = 50;
    let s = start().await;
    let table = create_table(&s.client, "events").await;

    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let client = s.client.clone();
        let path = table.path.clone();
        tasks.push(tokio::spawn(async move {
            let mut w = client
                .append_writer(&path, WriterConfig::default())
                .await
                .expect("writer");
            // Each writer starts on a different day, so writers race on
            // creating every partition.
            for i in 0..ROWS_PER_DAY * DAYS.len() as i64 {
                let day = (i + writer) as usize % DAYS.len();
                let id = writer * 1_000_000 + i;
                w.append(&[Datum::BigInt(id), Datum::String(DAYS[day])][..])
                    .await
                    .expect("append");
            }
            flush_in_time(&mut w).await;
        }));
    }
    for task in tasks {
        task.await.expect("writer task");
    }

    let partitions = s.partitions(&table).await;
    let mut names: Vec<&str> = partitions.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, DAYS, "exactly one partition per day");

    let per_partition = (WRITERS * ROWS_PER_DAY) as usize;
    let mut seen_ids = HashMap::new();
    for p in &partitions {
        let rows = read_partition(&s.client, &table, p.partition_id, per_partition).await;
        assert_eq!(rows.len(), per_partition, "partition {}", p.name);
        for (id, dt) in rows {
            assert_eq!(dt, p.name, "row {id} read from partition {}", p.name);
            assert!(seen_ids.insert(id, dt).is_none(), "row {id} read twice");
        }
    }
}

#[tokio::test]
async fn writer_without_dynamic_creation_refuses_a_row_for_a_missing_partition() {
    let s = start().await;
    let table = create_table(&s.client, "static").await;
    let config =
        WriterConfig::from_options([("client.writer.dynamic-create-partition.enabled", "false")])
            .expect("config");
    let mut w = s
        .client
        .append_writer(&table.path, config)
        .await
        .expect("writer");
    let outcome = match w
        .append(&[Datum::BigInt(1), Datum::String("20261130")][..])
        .await
    {
        Ok(()) => w.flush().await,
        Err(e) => Err(e),
    };
    let error = outcome.expect_err("missing partition refused");
    assert_eq!(
        error.error_code(),
        Some(ErrorCode::PartitionNotExists),
        "{error}"
    );
    assert!(error.to_string().contains("20261130"), "{error}");
    let listed = s.partitions(&table).await;
    assert!(listed.is_empty(), "nothing created: {listed:?}");
}

/// A RecordBatch of `(id, dt)` rows.
fn id_dt_batch(table: &TableInfo, rows: &[(i64, Option<&str>)]) -> arrow_array::RecordBatch {
    let ids: Int64Array = rows.iter().map(|(id, _)| Some(*id)).collect();
    let dts: StringArray = rows.iter().map(|(_, dt)| *dt).collect();
    let schema = fjord_format::arrow_schema::to_arrow_schema(table.descriptor.schema());
    arrow_array::RecordBatch::try_new(schema, vec![Arc::new(ids), Arc::new(dts)]).expect("batch")
}

#[tokio::test]
async fn a_record_batch_spanning_partitions_lands_row_by_row_in_its_own_partitions() {
    let s = start().await;
    let table = create_table(&s.client, "batches").await;
    let mut w = s
        .client
        .append_writer(&table.path, WriterConfig::default())
        .await
        .expect("writer");
    // Interleaved days: day 0 appears in two separate runs, so its rows are
    // gathered, the others sliced; days 0-2 do not exist yet.
    let rows: Vec<(i64, Option<&str>)> = vec![
        (1, Some(DAYS[0])),
        (2, Some(DAYS[0])),
        (3, Some(DAYS[1])),
        (4, Some(DAYS[0])),
        (5, Some(DAYS[2])),
        (6, Some(DAYS[2])),
    ];
    let completion = w
        .append_batch(id_dt_batch(&table, &rows))
        .await
        .expect("append batch");
    let ack = tokio::time::timeout(STEP, completion)
        .await
        .expect("ack in time")
        .expect("ack");
    assert_eq!(ack.records, 6);
    assert!(ack.partition_id.is_some());
    flush_in_time(&mut w).await;

    let partitions = s.partitions(&table).await;
    let mut names: Vec<&str> = partitions.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, &DAYS[..3], "each day's partition created once");
    for p in &partitions {
        let expected: Vec<(i64, String)> = rows
            .iter()
            .filter(|(_, dt)| *dt == Some(p.name.as_str()))
            .map(|(id, dt)| (*id, dt.unwrap_or_default().to_owned()))
            .collect();
        let mut got = read_partition(&s.client, &table, p.partition_id, expected.len()).await;
        got.sort_unstable();
        assert_eq!(got, expected, "partition {}", p.name);
    }
}

#[tokio::test]
async fn a_record_batch_with_a_null_partition_value_is_refused_whole() {
    let s = start().await;
    let table = create_table(&s.client, "null_key").await;
    let mut w = s
        .client
        .append_writer(&table.path, WriterConfig::default())
        .await
        .expect("writer");
    let batch = id_dt_batch(&table, &[(1, Some(DAYS[0])), (2, None)]);
    let error = w
        .append_batch(batch)
        .await
        .err()
        .expect("a NULL partition value is refused");
    assert!(error.to_string().contains("`dt` has NULL"), "{error}");
    flush_in_time(&mut w).await;
    let listed = s.partitions(&table).await;
    assert!(listed.is_empty(), "nothing created: {listed:?}");
    assert_eq!(w.stats().batches, 0, "nothing written");
}
