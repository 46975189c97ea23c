//! Partitioned tables with the official Rust client, `fluss-rs` 1.0.0 (lib
//! `fluss`), unmodified against the real `fjord server` binary: create, list
//! (all and by partial spec) and drop partitions with the names, ids and specs
//! the client parses; write rows to two partitions and scan each partition
//! back with only its own rows; the errors a user meets (partition exists,
//! missing partition, bad spec, non-partitioned table).

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType as ArrowType, Field, Schema as ArrowSchema, SchemaRef};
use fluss::client::{FlussConnection, FlussTable, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::error::FlussError;
use fluss::metadata::{DataTypes, PartitionSpec, Schema, TableDescriptor, TablePath};
use fluss::rpc::message::OffsetSpec;
use support::{described_partitions as described, FjordServer, STEP_TIMEOUT};
use tempfile::TempDir;

/// Buckets per partition: more than one, so per-bucket routing inside a
/// partition is exercised.
const BUCKETS: i32 = 2;
/// How long one `poll` waits for data before the scan loop checks its deadline.
const POLL_WAIT: Duration = Duration::from_millis(500);

async fn connect(server: &FjordServer) -> FlussConnection {
    let config = Config {
        bootstrap_servers: server.bootstrap_servers(),
        writer_retries: 5,
        ..Config::default()
    };
    server.step("connect", FlussConnection::new(config)).await
}

/// `id BIGINT NOT NULL, name STRING, dt STRING`, partitioned by `dt`.
fn descriptor() -> TableDescriptor {
    let schema = Schema::builder()
        .column("id", DataTypes::bigint().as_non_nullable())
        .column("name", DataTypes::string())
        .column("dt", DataTypes::string())
        .build()
        .expect("valid schema");
    TableDescriptor::builder()
        .schema(schema)
        .distributed_by(Some(BUCKETS), vec![])
        .partitioned_by(vec!["dt"])
        .build()
        .expect("valid partitioned table descriptor")
}

fn arrow_schema() -> SchemaRef {
    Arc::new(ArrowSchema::new(vec![
        Field::new("id", ArrowType::Int64, false),
        Field::new("name", ArrowType::Utf8, true),
        Field::new("dt", ArrowType::Utf8, true),
    ]))
}

/// Rows `ids` of partition `dt` (fluss-rs takes a batch's partition from its
/// first row, so one batch holds one partition).
fn rows(dt: &str, ids: std::ops::Range<i64>) -> RecordBatch {
    let names: Vec<String> = ids.clone().map(|i| format!("user-{i}")).collect();
    let dts: Vec<&str> = ids.clone().map(|_| dt).collect();
    RecordBatch::try_new(
        arrow_schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(ids)),
            Arc::new(StringArray::from(names)),
            Arc::new(StringArray::from(dts)),
        ],
    )
    .expect("rows match the schema")
}

fn spec(dt: &str) -> PartitionSpec {
    PartitionSpec::new(HashMap::from([("dt", dt)]))
}

/// Subscribes to every bucket of one partition from the earliest offset and
/// polls until `expected` rows arrived; returns (id, dt) of each, sorted.
async fn scan_partition(
    server: &FjordServer,
    table: &FlussTable<'_>,
    partition_id: i64,
    expected: usize,
) -> Vec<(i64, String)> {
    let scanner = table
        .new_scan()
        .create_record_batch_log_scanner()
        .expect("create record batch log scanner");
    let offsets: HashMap<(i64, i32), i64> = (0..BUCKETS)
        .map(|b| ((partition_id, b), EARLIEST_OFFSET))
        .collect();
    server
        .step(
            "subscribe to a partition's buckets",
            scanner.subscribe_partition_buckets(&offsets),
        )
        .await;
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let mut seen = Vec::new();
    while seen.len() < expected {
        assert!(
            tokio::time::Instant::now() < deadline,
            "partition {partition_id}: scanned {} of {expected} rows\n--- fjord server stderr ---\n{}",
            seen.len(),
            server.stderr_log()
        );
        for batch in server.step("poll", scanner.poll(POLL_WAIT)).await {
            assert_eq!(batch.bucket().partition_id(), Some(partition_id));
            let rb = batch.batch();
            let ids = rb
                .column_by_name("id")
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
                .expect("id column");
            let dts = rb
                .column_by_name("dt")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .expect("dt column");
            for i in 0..rb.num_rows() {
                seen.push((ids.value(i), dts.value(i).to_owned()));
            }
        }
    }
    // A last poll: nothing beyond the expected rows may arrive.
    let extra: usize = server
        .step("poll", scanner.poll(POLL_WAIT))
        .await
        .iter()
        .map(|b| b.num_records())
        .sum();
    assert_eq!(extra, 0, "partition {partition_id}: unexpected extra rows");
    seen.sort();
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_created_listed_written_scanned_and_dropped_with_fluss_rs() {
    let dir = TempDir::new().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let conn = connect(&server).await;
    let admin = conn.get_admin().expect("admin");
    let path = TablePath::new("interop_parts", "events");
    server
        .step(
            "create database",
            admin.create_database("interop_parts", None, false),
        )
        .await;
    server
        .step(
            "create partitioned table",
            admin.create_table(&path, &descriptor(), false),
        )
        .await;

    for dt in ["20240101", "20240102"] {
        server
            .step(
                "create partition",
                admin.create_partition(&path, &spec(dt), false),
            )
            .await;
    }
    let listed = described(
        &server
            .step("list partitions", admin.list_partition_infos(&path))
            .await,
    );
    assert_eq!(
        listed.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
        ["20240101", "20240102"]
    );
    assert_ne!(listed[0].1, listed[1].1, "partition ids are distinct");
    assert_eq!(listed[1].2, [("dt".to_owned(), "20240102".to_owned())]);
    let filtered = server
        .step(
            "list partitions by partial spec",
            admin.list_partition_infos_with_spec(&path, Some(&spec("20240102"))),
        )
        .await;
    assert_eq!(described(&filtered), listed[1..]);
    let (day1, day2) = (listed[0].1, listed[1].1);

    // Errors a user meets.
    let err = server
        .step_err(
            "create an existing partition",
            admin.create_partition(&path, &spec("20240101"), false),
        )
        .await;
    assert_eq!(
        err.api_error(),
        Some(FlussError::PartitionAlreadyExists),
        "{err:?}"
    );
    server
        .step(
            "create an existing partition, ignored",
            admin.create_partition(&path, &spec("20240101"), true),
        )
        .await;
    let bad = PartitionSpec::new(HashMap::from([("region", "eu")]));
    let err = server
        .step_err(
            "create a partition with a bad spec",
            admin.create_partition(&path, &bad, false),
        )
        .await;
    assert_eq!(
        err.api_error(),
        Some(FlussError::PartitionSpecInvalidException),
        "{err:?}"
    );
    let err = server
        .step_err(
            "drop a missing partition",
            admin.drop_partition(&path, &spec("19990101"), false),
        )
        .await;
    assert_eq!(
        err.api_error(),
        Some(FlussError::PartitionNotExists),
        "{err:?}"
    );

    // Write to both partitions, then read each back alone.
    let table = server.step("get table", conn.get_table(&path)).await;
    let writer = table
        .new_append()
        .expect("new_append")
        .create_writer()
        .expect("append writer");
    let first = writer
        .append_arrow_batch(rows("20240101", 0..40))
        .expect("append day 1");
    let second = writer
        .append_arrow_batch(rows("20240102", 1000..1025))
        .expect("append day 2");
    server.step("flush", writer.flush()).await;
    server.step("ack day 1", first).await;
    server.step("ack day 2", second).await;

    let latest = server
        .step(
            "list latest offsets of day 1",
            admin.list_partition_offsets(&path, "20240101", &[0, 1], OffsetSpec::Latest),
        )
        .await;
    assert_eq!(latest.values().sum::<i64>(), 40, "{latest:?}");

    let scanned = scan_partition(&server, &table, day1, 40).await;
    assert_eq!(
        scanned,
        (0..40)
            .map(|i| (i, "20240101".to_owned()))
            .collect::<Vec<_>>()
    );
    let scanned = scan_partition(&server, &table, day2, 25).await;
    assert_eq!(
        scanned,
        (1000..1025)
            .map(|i| (i, "20240102".to_owned()))
            .collect::<Vec<_>>()
    );

    // Drop day 1: its listing and offsets are gone, day 2 is untouched.
    server
        .step(
            "drop partition",
            admin.drop_partition(&path, &spec("20240101"), false),
        )
        .await;
    let listed_after = described(
        &server
            .step("list partitions", admin.list_partition_infos(&path))
            .await,
    );
    assert_eq!(listed_after, listed[1..]);
    let err = server
        .step_err(
            "list offsets of a dropped partition",
            admin.list_partition_offsets(&path, "20240101", &[0], OffsetSpec::Latest),
        )
        .await;
    assert_eq!(
        err.api_error(),
        Some(FlussError::PartitionNotExists),
        "{err:?}"
    );
    // Re-created, it gets a new id (ids are never reused) and no old data.
    server
        .step(
            "create the partition again",
            admin.create_partition(&path, &spec("20240101"), false),
        )
        .await;
    let again = server
        .step("list partitions", admin.list_partition_infos(&path))
        .await;
    let day1_again = described(&again)[0].1;
    assert!(day1_again > day2, "new id {day1_again} vs {day1}/{day2}");
    let latest = server
        .step(
            "list latest offsets of the new day 1",
            admin.list_partition_offsets(&path, "20240101", &[0, 1], OffsetSpec::Latest),
        )
        .await;
    assert_eq!(latest.values().sum::<i64>(), 0, "{latest:?}");

    // A table without partition keys refuses partition operations.
    let plain = TablePath::new("interop_parts", "plain");
    let plain_descriptor = TableDescriptor::builder()
        .schema(
            Schema::builder()
                .column("id", DataTypes::bigint())
                .build()
                .expect("schema"),
        )
        .build()
        .expect("descriptor");
    server
        .step(
            "create plain table",
            admin.create_table(&plain, &plain_descriptor, false),
        )
        .await;
    let err = server
        .step_err(
            "create a partition of a plain table",
            admin.create_partition(&plain, &spec("20240101"), false),
        )
        .await;
    assert_eq!(
        err.api_error(),
        Some(FlussError::TableNotPartitionedException),
        "{err:?}"
    );
    drop(table);
    server
        .step("close", conn.close(Duration::from_secs(5)))
        .await;
}
