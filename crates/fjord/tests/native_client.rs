//! Fjord's native client against a real `fjord server`: Arrow batches
//! written with `AppendWriter::append_batch` are read back unchanged by
//! `LogScanner`, per bucket, from a middle offset, and with a projection
//! pushed to the server; offsets and errors are what a Fluss user expects.

mod support;

use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array, StringArray};
use fjord_client::{
    Admin, FlussClient, LogScanner, OffsetSpec, ScanBatch, ScannerConfig, ServerConnection,
    TablePath, TableRoute, WriterConfig,
};
use fjord_format::fixtures::{user_behavior_batch, user_behavior_schema};
use fjord_format::schema::{DatabaseDescriptor, TableDescriptor, TableDistribution};
use support::FjordServer;

const BUCKETS: i32 = 2;

/// Polls until `rows` rows arrived (bounded), returning every batch.
async fn scan_rows(scanner: &mut LogScanner, rows: usize) -> Vec<ScanBatch> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    let mut seen = 0;
    while seen < rows {
        assert!(
            Instant::now() < deadline,
            "only {seen} of {rows} rows arrived"
        );
        for batch in scanner.poll().await.expect("poll") {
            seen += batch.records.num_rows();
            out.push(batch);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_writer_and_scanner_round_trip_with_projection_and_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = FjordServer::start(dir.path());
    let addr = server.addr().to_string();
    let connection = ServerConnection::connect(&addr).await.expect("connect");
    let admin = Admin::new(connection.clone());
    let path = TablePath::new("native", "user_behavior");
    admin
        .create_database("native", &DatabaseDescriptor::default(), false)
        .await
        .expect("create database");
    let descriptor = TableDescriptor::new(
        user_behavior_schema(),
        None,
        Vec::new(),
        Some(TableDistribution {
            bucket_count: Some(BUCKETS),
            bucket_keys: Vec::new(),
        }),
        Default::default(),
        Default::default(),
    )
    .expect("descriptor");
    admin
        .create_table(&path, &descriptor, false)
        .await
        .expect("create table");
    let table = admin.table_info(&path).await.expect("table info");
    assert_eq!(table.bucket_count(), BUCKETS);
    let route = TableRoute::resolve(&connection, &table)
        .await
        .expect("route");

    // Four batches, round-robin: buckets a, b, a, b.
    let batches: Vec<_> = (0..4)
        .map(|seed| user_behavior_batch(1000 + seed as usize, seed))
        .collect();
    let client = FlussClient::connect(std::slice::from_ref(&addr))
        .await
        .expect("client");
    let config =
        WriterConfig::from_options([("client.writer.bucket.no-key-assigner", "ROUND_ROBIN")])
            .expect("writer options");
    let mut writer = client.append_writer(&path, config).await.expect("writer");
    let mut completions = Vec::new();
    for batch in &batches {
        completions.push(writer.append_batch(batch.clone()).await.expect("append"));
    }
    writer.flush().await.expect("flush");
    let mut acks = Vec::new();
    for completion in completions {
        acks.push(completion.await.expect("batch acknowledged"));
    }
    let (a, b) = (acks[0].bucket, acks[1].bucket);
    let acked: Vec<(i32, i64)> = acks.iter().map(|a| (a.bucket, a.base_offset)).collect();
    assert_ne!(a, b);
    assert_eq!(acked, vec![(a, 0), (b, 0), (a, 1000), (b, 1001)]);

    let ends = admin
        .list_offsets(&table, &[a, b], OffsetSpec::Latest)
        .await
        .expect("latest");
    assert_eq!(ends, vec![1000 + 1002, 1001 + 1003]);
    let starts = admin
        .list_offsets(&table, &[0, 1], OffsetSpec::Earliest)
        .await
        .expect("earliest");
    assert_eq!(starts, vec![0, 0]);

    // Bucket a holds batches 0 and 2, in order, byte for byte the same values.
    let mut scanner =
        LogScanner::new(table.clone(), route.clone(), ScannerConfig::default()).expect("scanner");
    scanner.subscribe(a, 0).expect("subscribe");
    let read = scan_rows(&mut scanner, 1000 + 1002).await;
    let columns: Vec<_> = read.iter().map(|b| b.records.clone()).collect();
    let all = arrow::compute::concat_batches(batches[0].schema_ref(), &columns).expect("concat");
    let expected = arrow::compute::concat_batches(
        batches[0].schema_ref(),
        &[batches[0].clone(), batches[2].clone()],
    )
    .expect("concat");
    assert_eq!(all, expected);
    assert_eq!(scanner.positions().get(&a), Some(&2002));

    // From the middle of a batch: the scanner skips the records before the offset.
    let mut middle =
        LogScanner::new(table.clone(), route.clone(), ScannerConfig::default()).expect("scanner");
    middle.subscribe(b, 500).expect("subscribe");
    let read = scan_rows(&mut middle, 1003 + 501).await;
    assert_eq!(read[0].base_offset, 500);
    let first_user = read[0]
        .records
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("i64")
        .value(0);
    let want = batches[1]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("i64")
        .value(500);
    assert_eq!(first_user, want);

    // Projection pushdown: only user_id and behavior come back.
    let mut projected = LogScanner::new(
        table.clone(),
        route,
        ScannerConfig {
            projection: Some(vec![0, 3]),
            ..ScannerConfig::default()
        },
    )
    .expect("scanner");
    projected.subscribe(b, 0).expect("subscribe");
    let read = scan_rows(&mut projected, 1001 + 1003).await;
    let schema = read[0].records.schema();
    let names: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["user_id", "behavior"]);
    let behavior = read[0]
        .records
        .column(1)
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("string");
    let want = batches[1]
        .column(3)
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("string");
    assert_eq!(behavior.len(), want.len());
    assert_eq!(behavior, want);

    // Mistakes get the server's Fluss error, and a bad projection is refused locally.
    let missing = admin
        .table_info(&TablePath::new("native", "nope"))
        .await
        .expect_err("no such table");
    assert_eq!(
        missing.error_code().map(|c| c.name()),
        Some("TABLE_NOT_EXIST")
    );
    assert!(LogScanner::new(
        table.clone(),
        TableRoute::resolve(&connection, &table)
            .await
            .expect("route"),
        ScannerConfig {
            projection: Some(vec![3, 3]),
            ..ScannerConfig::default()
        }
    )
    .is_err());
}
