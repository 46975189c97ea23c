//! Interop with the official Rust client, `fluss-rs` 1.0.0 (lib `fluss`), used
//! unmodified against the real `fjord server` binary.
//!
//! These tests define "done" for the log-table server: what a Fluss user does
//! first (create a database and a table, append, flush, list offsets, scan,
//! project, restart the server, drop) and the errors such a user meets. Values
//! are compared column by column with what was written, so any encoding,
//! routing or projection mistake on the server shows up as a named column and
//! row.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array,
    Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, RecordBatch, StringArray,
    TimestampMicrosecondArray, TimestampMillisecondArray,
};
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use arrow::datatypes::{DataType as ArrowType, Field, Schema as ArrowSchema, SchemaRef, TimeUnit};
use fluss::client::{FlussConnection, FlussTable, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::error::FlussError;
use fluss::metadata::{DataTypes, DatabaseDescriptor, Schema, TableDescriptor, TablePath};
use fluss::record::ScanBatch;
use fluss::rpc::message::OffsetSpec;
use support::{FjordServer, STEP_TIMEOUT};
use tempfile::TempDir;

/// Buckets of the test table: more than one, so routing by bucket key and
/// per-bucket offsets are exercised.
const BUCKETS: i32 = 3;
/// Rows of the main round trip (the figure).
const ROWS: i64 = 100_000;
/// Rows appended per Arrow batch handed to the writer.
const ROWS_PER_APPEND: i64 = 10_000;
/// How long one `poll` waits for data before the scan loop checks its deadline.
const POLL_WAIT: Duration = Duration::from_millis(500);

/// Opens a client connection to `server`. Writer retries are bounded so that a
/// server answering with a persistent error fails the test with that error
/// instead of retrying until the step timeout.
async fn connect(server: &FjordServer) -> FlussConnection {
    let config = Config {
        bootstrap_servers: server.bootstrap_servers(),
        writer_retries: 5,
        ..Config::default()
    };
    server
        .step(
            "connect (FlussConnection::new)",
            FlussConnection::new(config),
        )
        .await
}

/// The Fluss schema of the test table: one column per common type, the key
/// NOT NULL and the others nullable.
fn fluss_schema() -> Schema {
    Schema::builder()
        .column("id", DataTypes::bigint().as_non_nullable())
        .column("tiny", DataTypes::tinyint())
        .column("small", DataTypes::smallint())
        .column("num", DataTypes::int())
        .column("ratio", DataTypes::float())
        .column("score", DataTypes::double())
        .column("flag", DataTypes::boolean())
        .column("name", DataTypes::string())
        .column("price", DataTypes::decimal(12, 2))
        .column("day", DataTypes::date())
        .column("ts", DataTypes::timestamp_with_precision(6))
        .column("ts_ltz", DataTypes::timestamp_ltz_with_precision(3))
        .column("payload", DataTypes::bytes())
        .build()
        .expect("valid schema")
}

/// The Arrow schema the client maps [`fluss_schema`] to; scans must return it.
fn arrow_schema() -> SchemaRef {
    Arc::new(ArrowSchema::new(vec![
        Field::new("id", ArrowType::Int64, false),
        Field::new("tiny", ArrowType::Int8, true),
        Field::new("small", ArrowType::Int16, true),
        Field::new("num", ArrowType::Int32, true),
        Field::new("ratio", ArrowType::Float32, true),
        Field::new("score", ArrowType::Float64, true),
        Field::new("flag", ArrowType::Boolean, true),
        Field::new("name", ArrowType::Utf8, true),
        Field::new("price", ArrowType::Decimal128(12, 2), true),
        Field::new("day", ArrowType::Date32, true),
        Field::new(
            "ts",
            ArrowType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Field::new(
            "ts_ltz",
            ArrowType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
        Field::new("payload", ArrowType::Binary, true),
    ]))
}

fn log_table_descriptor() -> TableDescriptor {
    TableDescriptor::builder()
        .schema(fluss_schema())
        .distributed_by(Some(BUCKETS), vec!["id".to_string()])
        .comment("fjord interop test table")
        .build()
        .expect("valid table descriptor")
}

/// Deterministic rows `first_id .. first_id + count`: every value is a function
/// of `id`, with nulls at different strides per column and negative, empty and
/// non-ASCII values mixed in.
fn rows(first_id: i64, count: i64) -> RecordBatch {
    let ids: Vec<i64> = (first_id..first_id + count).collect();
    let nth = |id: i64, every: i64| id % every == 0;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(Int8Array::from_iter(
            ids.iter().map(|&id| Some((id % 256 - 128) as i8)),
        )),
        Arc::new(Int16Array::from_iter(ids.iter().map(|&id| {
            (!nth(id, 5)).then_some((id * 7 % 65_536 - 32_768) as i16)
        }))),
        Arc::new(Int32Array::from_iter(ids.iter().map(|&id| {
            (!nth(id, 10)).then_some(id.wrapping_mul(2_654_435_761) as i32)
        }))),
        Arc::new(Float32Array::from_iter(
            ids.iter().map(|&id| Some(id as f32 / 3.0)),
        )),
        Arc::new(Float64Array::from_iter(
            ids.iter()
                .map(|&id| (!nth(id, 7)).then_some(id as f64 * -1.5e-3)),
        )),
        Arc::new(BooleanArray::from_iter(
            ids.iter().map(|&id| (!nth(id, 11)).then_some(id % 2 == 0)),
        )),
        Arc::new(StringArray::from_iter(ids.iter().map(|&id| {
            (!nth(id, 13)).then(|| match id % 4 {
                0 => String::new(),
                1 => format!("user-{id}"),
                2 => format!("Fjörð-{id}-ß✓"),
                _ => "x".repeat((id % 97) as usize),
            })
        }))),
        Arc::new(
            Decimal128Array::from_iter(
                ids.iter()
                    .map(|&id| (!nth(id, 17)).then_some(i128::from(id) * 37 - 500_000)),
            )
            .with_precision_and_scale(12, 2)
            .expect("decimal(12,2)"),
        ),
        Arc::new(Date32Array::from_iter(ids.iter().map(|&id| {
            (!nth(id, 19)).then_some(19_000 + (id % 4_000) as i32)
        }))),
        Arc::new(TimestampMicrosecondArray::from_iter(ids.iter().map(
            |&id| (!nth(id, 23)).then_some(1_700_000_000_000_000 + id * 1_001),
        ))),
        Arc::new(
            TimestampMillisecondArray::from_iter(
                ids.iter()
                    .map(|&id| (!nth(id, 29)).then_some(1_700_000_000_000 + id * 17)),
            )
            .with_timezone("UTC"),
        ),
        Arc::new(BinaryArray::from_iter(ids.iter().map(|&id| {
            (!nth(id, 31)).then(|| id.to_le_bytes()[..(id % 9) as usize].to_vec())
        }))),
    ];
    RecordBatch::try_new(arrow_schema(), columns).expect("rows match the schema")
}

/// Appends rows `first_id .. first_id + count` in batches, flushes, and checks
/// every batch was acknowledged (flush only waits; errors arrive per write).
async fn append_rows(server: &FjordServer, table: &FlussTable<'_>, first_id: i64, count: i64) {
    let writer = table
        .new_append()
        .expect("new_append on a log table")
        .create_writer()
        .expect("create append writer");
    let mut acks = Vec::new();
    let mut next = first_id;
    while next < first_id + count {
        let n = ROWS_PER_APPEND.min(first_id + count - next);
        let ack = writer
            .append_arrow_batch(rows(next, n))
            .expect("append_arrow_batch accepts rows of the table schema");
        acks.push((next, ack));
        next += n;
    }
    server.step("flush appended rows", writer.flush()).await;
    for (first, ack) in acks {
        server
            .step(&format!("acknowledgement of rows from id {first}"), ack)
            .await;
    }
}

/// What a scan returned: all rows (in arrival order) and, per bucket, the
/// `(base_offset, last_offset)` of each batch in arrival order.
struct Scanned {
    rows: RecordBatch,
    batches_by_bucket: HashMap<i32, Vec<(i64, i64)>>,
}

/// Subscribes to every bucket at `start_offsets` and polls until `expected_rows`
/// rows arrived, failing the test if they do not within [`STEP_TIMEOUT`].
async fn scan(
    server: &FjordServer,
    table: &FlussTable<'_>,
    projection: Option<&[usize]>,
    start_offsets: &HashMap<i32, i64>,
    expected_rows: usize,
) -> Scanned {
    let mut scan = table.new_scan();
    if let Some(columns) = projection {
        scan = scan.project(columns).expect("valid projection");
    }
    let scanner = scan
        .create_record_batch_log_scanner()
        .expect("create record batch log scanner");
    server
        .step(
            "subscribe to all buckets",
            scanner.subscribe_buckets(start_offsets),
        )
        .await;

    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let mut batches: Vec<ScanBatch> = Vec::new();
    let mut received = 0;
    while received < expected_rows {
        assert!(
            tokio::time::Instant::now() < deadline,
            "scan returned {received} of {expected_rows} rows within {STEP_TIMEOUT:?}\n\
             --- fjord server stderr ---\n{}",
            server.stderr_log()
        );
        for batch in server.step("poll", scanner.poll(POLL_WAIT)).await {
            received += batch.num_records();
            batches.push(batch);
        }
    }
    assert_eq!(
        received, expected_rows,
        "scan returned more rows than were written"
    );

    let mut batches_by_bucket: HashMap<i32, Vec<(i64, i64)>> = HashMap::new();
    for batch in &batches {
        batches_by_bucket
            .entry(batch.bucket().bucket_id())
            .or_default()
            .push((batch.base_offset(), batch.last_offset()));
    }
    let schema = batches
        .first()
        .map(|b| b.batch().schema())
        .expect("at least one batch was scanned");
    let record_batches: Vec<RecordBatch> = batches.iter().map(|b| b.batch().clone()).collect();
    let rows = concat_batches(&schema, &record_batches).expect("scanned batches share a schema");
    Scanned {
        rows,
        batches_by_bucket,
    }
}

/// Sorts `batch` by its column named `id`.
fn sorted_by_id(batch: &RecordBatch) -> RecordBatch {
    let id = batch.column_by_name("id").expect("batch has an id column");
    let order = sort_to_indices(id, None, None).expect("sortable id column");
    take_record_batch(batch, &order).expect("take rows in id order")
}

/// Asserts that `actual` holds exactly the columns of `expected` (same names,
/// types and values, row for row), naming the first differing column and row.
fn assert_same_rows(actual: &RecordBatch, expected: &RecordBatch) {
    let actual_fields: Vec<(String, ArrowType)> = actual
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    let expected_fields: Vec<(String, ArrowType)> = expected
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    assert_eq!(
        actual_fields, expected_fields,
        "scanned columns differ from the written ones"
    );
    assert_eq!(actual.num_rows(), expected.num_rows(), "row count differs");
    for (i, (name, _)) in expected_fields.iter().enumerate() {
        let (a, e) = (actual.column(i), expected.column(i));
        if a.as_ref() != e.as_ref() {
            let row = (0..e.len())
                .find(|&r| a.slice(r, 1).as_ref() != e.slice(r, 1).as_ref())
                .unwrap_or(0);
            panic!(
                "column '{name}' differs first at row {row} (sorted by id): scanned {:?}, written {:?}",
                a.slice(row, 1),
                e.slice(row, 1)
            );
        }
    }
}

/// Asserts that each bucket's scanned batches cover `start ..` contiguously,
/// in order, ending at `end` (exclusive), as the bucket's log offsets promise.
fn assert_contiguous_offsets(
    scanned: &Scanned,
    starts: &HashMap<i32, i64>,
    ends: &HashMap<i32, i64>,
) {
    for bucket in 0..BUCKETS {
        let mut next = starts[&bucket];
        for &(base, last) in scanned.batches_by_bucket.get(&bucket).into_iter().flatten() {
            assert_eq!(
                base, next,
                "bucket {bucket}: batch starts at {base}, expected {next}"
            );
            assert!(
                last >= base,
                "bucket {bucket}: batch {base}..={last} is inverted"
            );
            next = last + 1;
        }
        assert_eq!(next, ends[&bucket], "bucket {bucket}: scan ended at {next}");
    }
}

fn all_buckets() -> Vec<i32> {
    (0..BUCKETS).collect()
}

fn from_earliest() -> HashMap<i32, i64> {
    all_buckets()
        .into_iter()
        .map(|b| (b, EARLIEST_OFFSET))
        .collect()
}

fn zeros() -> HashMap<i32, i64> {
    all_buckets().into_iter().map(|b| (b, 0)).collect()
}

/// Projects `batch` onto the named columns (in that order).
fn project(batch: &RecordBatch, names: &[&str]) -> RecordBatch {
    let indices: Vec<usize> = names
        .iter()
        .map(|n| batch.schema().index_of(n).expect("column exists"))
        .collect();
    batch.project(&indices).expect("valid projection")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_table_round_trip_with_projection_and_restart() {
    let dir = TempDir::new().expect("temp data dir");
    let mut server = FjordServer::start(dir.path());
    let db = "interop_rs";
    let path = TablePath::new(db, "events");

    {
        let conn = connect(&server).await;
        let admin = conn.get_admin().expect("admin");
        let descriptor = DatabaseDescriptor::builder()
            .comment("interop database")
            .build();
        server
            .step(
                "create database",
                admin.create_database(db, Some(&descriptor), false),
            )
            .await;
        server
            .step(
                "create table",
                admin.create_table(&path, &log_table_descriptor(), false),
            )
            .await;

        let table = server.step("get table", conn.get_table(&path)).await;
        assert_eq!(table.get_table_info().get_num_buckets(), BUCKETS);
        append_rows(&server, &table, 0, ROWS).await;

        // Offsets: every bucket starts at 0, got some rows, and they add up.
        let earliest = server
            .step(
                "list earliest offsets",
                admin.list_offsets(&path, &all_buckets(), OffsetSpec::Earliest),
            )
            .await;
        let latest = server
            .step(
                "list latest offsets",
                admin.list_offsets(&path, &all_buckets(), OffsetSpec::Latest),
            )
            .await;
        assert_eq!(earliest, zeros(), "earliest offsets of a fresh table");
        for bucket in all_buckets() {
            assert!(
                latest[&bucket] > 0,
                "bucket {bucket} got no rows: latest={latest:?}"
            );
        }
        assert_eq!(
            latest.values().sum::<i64>(),
            ROWS,
            "latest offsets {latest:?}"
        );

        // Full scan: every value comes back, each bucket's offsets contiguous.
        let scanned = scan(&server, &table, None, &from_earliest(), ROWS as usize).await;
        assert_contiguous_offsets(&scanned, &zeros(), &latest);
        assert_same_rows(&sorted_by_id(&scanned.rows), &rows(0, ROWS));

        // Projection pushdown, in schema order and reordered.
        let scanned = scan(
            &server,
            &table,
            Some(&[0, 7, 8, 11]),
            &zeros(),
            ROWS as usize,
        )
        .await;
        assert_same_rows(
            &sorted_by_id(&scanned.rows),
            &project(&rows(0, ROWS), &["id", "name", "price", "ts_ltz"]),
        );
        let scanned = scan(&server, &table, Some(&[12, 3, 0]), &zeros(), ROWS as usize).await;
        assert_same_rows(
            &sorted_by_id(&scanned.rows),
            &project(&rows(0, ROWS), &["payload", "num", "id"]),
        );

        // Restart on the same data dir and port: metadata, data and offsets survive.
        drop(table);
        server
            .step("close connection", conn.close(Duration::from_secs(5)))
            .await;
    }
    let latest_before_restart = {
        let conn = connect(&server).await;
        let admin = conn.get_admin().expect("admin");
        server
            .step(
                "list latest offsets",
                admin.list_offsets(&path, &all_buckets(), OffsetSpec::Latest),
            )
            .await
    };
    server.restart();

    let conn = connect(&server).await;
    let admin = conn.get_admin().expect("admin");
    assert!(
        server
            .step("database exists after restart", admin.database_exists(db))
            .await
    );
    let info = server
        .step("get table info after restart", admin.get_table_info(&path))
        .await;
    assert_eq!(info.get_num_buckets(), BUCKETS);
    assert_eq!(info.get_bucket_keys(), ["id".to_string()]);
    let latest = server
        .step(
            "list latest offsets after restart",
            admin.list_offsets(&path, &all_buckets(), OffsetSpec::Latest),
        )
        .await;
    assert_eq!(
        latest, latest_before_restart,
        "latest offsets changed across a restart"
    );

    let table = server
        .step("get table after restart", conn.get_table(&path))
        .await;
    let scanned = scan(&server, &table, None, &zeros(), ROWS as usize).await;
    assert_contiguous_offsets(&scanned, &zeros(), &latest);
    assert_same_rows(&sorted_by_id(&scanned.rows), &rows(0, ROWS));

    // Appends after the restart continue each bucket's offsets.
    const MORE: i64 = 1_000;
    append_rows(&server, &table, ROWS, MORE).await;
    let latest_after = server
        .step(
            "list latest offsets after more appends",
            admin.list_offsets(&path, &all_buckets(), OffsetSpec::Latest),
        )
        .await;
    assert_eq!(
        latest_after.values().sum::<i64>(),
        ROWS + MORE,
        "{latest_after:?}"
    );
    let scanned = scan(&server, &table, None, &latest, MORE as usize).await;
    assert_contiguous_offsets(&scanned, &latest, &latest_after);
    assert_same_rows(&sorted_by_id(&scanned.rows), &rows(ROWS, MORE));

    // Drop: the table, then the now empty database, are gone.
    drop(table);
    server
        .step("drop table", admin.drop_table(&path, false))
        .await;
    assert!(
        !server
            .step("table exists after drop", admin.table_exists(&path))
            .await
    );
    let tables = server
        .step("list tables after drop", admin.list_tables(db))
        .await;
    assert!(tables.is_empty(), "tables left after drop: {tables:?}");
    server
        .step("drop database", admin.drop_database(db, false, false))
        .await;
    assert!(
        !server
            .step("database exists after drop", admin.database_exists(db))
            .await
    );
    server
        .step("close connection", conn.close(Duration::from_secs(5)))
        .await;
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_rows_survive_a_server_crash() {
    let dir = TempDir::new().expect("temp data dir");
    let mut server = FjordServer::start(dir.path());
    let path = TablePath::new("interop_crash", "events");
    const N: i64 = 5_000;
    {
        let conn = connect(&server).await;
        let admin = conn.get_admin().expect("admin");
        server
            .step(
                "create database",
                admin.create_database("interop_crash", None, false),
            )
            .await;
        server
            .step(
                "create table",
                admin.create_table(&path, &log_table_descriptor(), false),
            )
            .await;
        let table = server.step("get table", conn.get_table(&path)).await;
        // acks=all (the client default): a flushed row is durable on the server.
        append_rows(&server, &table, 0, N).await;
    }
    // SIGKILL: no shutdown code runs on the server.
    let listen = server.addr().to_string();
    server.kill();
    let server = FjordServer::start_listening(dir.path(), &listen);

    let conn = connect(&server).await;
    let admin = conn.get_admin().expect("admin");
    let latest = server
        .step(
            "list latest offsets after crash",
            admin.list_offsets(&path, &all_buckets(), OffsetSpec::Latest),
        )
        .await;
    assert_eq!(
        latest.values().sum::<i64>(),
        N,
        "acknowledged rows lost: {latest:?}"
    );
    let table = server
        .step("get table after crash", conn.get_table(&path))
        .await;
    let scanned = scan(&server, &table, None, &zeros(), N as usize).await;
    assert_same_rows(&sorted_by_id(&scanned.rows), &rows(0, N));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_and_table_metadata_round_trip() {
    let dir = TempDir::new().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let conn = connect(&server).await;
    let admin = conn.get_admin().expect("admin");
    let db = "interop_meta";

    let descriptor = DatabaseDescriptor::builder()
        .comment("metadata test")
        .custom_property("owner", "interop")
        .build();
    server
        .step(
            "create database",
            admin.create_database(db, Some(&descriptor), false),
        )
        .await;
    let databases = server.step("list databases", admin.list_databases()).await;
    assert!(
        databases.iter().any(|d| d == db),
        "{db} not in {databases:?}"
    );
    let info = server
        .step("get database info", admin.get_database_info(db))
        .await;
    assert_eq!(info.database_name(), db);
    assert_eq!(info.database_descriptor().comment(), Some("metadata test"));
    assert_eq!(
        info.database_descriptor()
            .custom_properties()
            .get("owner")
            .map(String::as_str),
        Some("interop")
    );

    let names = ["b_table", "a_table"];
    for name in names {
        let path = TablePath::new(db, name);
        server
            .step(
                "create table",
                admin.create_table(&path, &log_table_descriptor(), false),
            )
            .await;
        assert!(server.step("table exists", admin.table_exists(&path)).await);
    }
    let mut tables = server.step("list tables", admin.list_tables(db)).await;
    tables.sort();
    assert_eq!(tables, ["a_table", "b_table"]);

    let path = TablePath::new(db, "a_table");
    let info = server
        .step("get table info", admin.get_table_info(&path))
        .await;
    assert_eq!(info.get_table_path(), &path);
    assert_eq!(info.get_num_buckets(), BUCKETS);
    assert_eq!(info.get_bucket_keys(), ["id".to_string()]);
    assert!(!info.has_primary_key());
    assert!(!info.is_partitioned());
    assert_eq!(info.get_comment(), Some("fjord interop test table"));
    assert_eq!(
        info.get_schema(),
        &fluss_schema(),
        "schema changed in the server's table JSON"
    );
    let schema_info = server
        .step("get table schema", admin.get_table_schema(&path, None))
        .await;
    assert_eq!(schema_info.schema_id(), info.get_schema_id());
    assert_eq!(schema_info.schema(), &fluss_schema());

    let nodes = server
        .step("get server nodes", admin.get_server_nodes())
        .await;
    assert!(!nodes.is_empty(), "MetaData response names no server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_mistakes_get_the_fluss_error_codes() {
    let dir = TempDir::new().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let conn = connect(&server).await;
    let admin = conn.get_admin().expect("admin");
    let db = "interop_errors";
    let missing = TablePath::new(db, "missing");
    let expect_code = |what: &str, err: fluss::error::Error, code: FlussError| {
        assert_eq!(err.api_error(), Some(code), "{what}: wrong error {err:?}");
    };

    let err = server
        .step_err(
            "create table in a missing database",
            admin.create_table(&missing, &log_table_descriptor(), false),
        )
        .await;
    expect_code(
        "create table in a missing database",
        err,
        FlussError::DatabaseNotExist,
    );
    let err = server
        .step_err(
            "get info of a missing database",
            admin.get_database_info(db),
        )
        .await;
    expect_code(
        "get info of a missing database",
        err,
        FlussError::DatabaseNotExist,
    );
    let err = server
        .step_err(
            "drop a missing database",
            admin.drop_database(db, false, true),
        )
        .await;
    expect_code("drop a missing database", err, FlussError::DatabaseNotExist);
    server
        .step(
            "drop a missing database with ignore_if_not_exists",
            admin.drop_database(db, true, true),
        )
        .await;

    server
        .step("create database", admin.create_database(db, None, false))
        .await;
    let err = server
        .step_err(
            "create the database again",
            admin.create_database(db, None, false),
        )
        .await;
    expect_code(
        "create the database again",
        err,
        FlussError::DatabaseAlreadyExist,
    );
    server
        .step(
            "create the database again with ignore_if_exists",
            admin.create_database(db, None, true),
        )
        .await;

    let err = server
        .step_err(
            "get info of a missing table",
            admin.get_table_info(&missing),
        )
        .await;
    expect_code(
        "get info of a missing table",
        err,
        FlussError::TableNotExist,
    );
    let open_missing = async {
        conn.get_table(&missing)
            .await
            .map(|t| t.table_path().clone())
    };
    let err = server.step_err("open a missing table", open_missing).await;
    expect_code("open a missing table", err, FlussError::TableNotExist);
    let err = server
        .step_err("drop a missing table", admin.drop_table(&missing, false))
        .await;
    expect_code("drop a missing table", err, FlussError::TableNotExist);
    server
        .step(
            "drop a missing table with ignore_if_not_exists",
            admin.drop_table(&missing, true),
        )
        .await;
    assert!(
        !server
            .step("missing table exists", admin.table_exists(&missing))
            .await
    );

    let path = TablePath::new(db, "present");
    server
        .step(
            "create table",
            admin.create_table(&path, &log_table_descriptor(), false),
        )
        .await;
    let err = server
        .step_err(
            "create the table again",
            admin.create_table(&path, &log_table_descriptor(), false),
        )
        .await;
    expect_code("create the table again", err, FlussError::TableAlreadyExist);
    server
        .step(
            "create the table again with ignore_if_exists",
            admin.create_table(&path, &log_table_descriptor(), true),
        )
        .await;

    let err = server
        .step_err(
            "drop a non-empty database without cascade",
            admin.drop_database(db, false, false),
        )
        .await;
    expect_code(
        "drop a non-empty database without cascade",
        err,
        FlussError::DatabaseNotEmpty,
    );
    assert!(
        server
            .step("table survives refused drop", admin.table_exists(&path))
            .await
    );

    // A primary key of a type Fluss refuses in keys (ARRAY) is refused
    // by the server with an API error, and nothing is left behind.
    let pk_path = TablePath::new(db, "with_pk");
    let pk_descriptor = TableDescriptor::builder()
        .schema(
            Schema::builder()
                .column("id", DataTypes::bigint())
                .column("v", DataTypes::array(DataTypes::string()))
                .primary_key(["v"])
                .expect("primary key")
                .build()
                .expect("valid schema"),
        )
        .build()
        .expect("valid descriptor");
    let err = server
        .step_err(
            "create a primary-key table",
            admin.create_table(&pk_path, &pk_descriptor, false),
        )
        .await;
    assert!(
        err.api_error().is_some(),
        "refusal must be a Fluss API error, got {err:?}"
    );
    assert!(
        !server
            .step("refused table exists", admin.table_exists(&pk_path))
            .await
    );

    server
        .step(
            "drop database with cascade",
            admin.drop_database(db, false, true),
        )
        .await;
    assert!(
        !server
            .step("table exists after cascade", admin.table_exists(&path))
            .await
    );
    assert!(
        !server
            .step("database exists after cascade", admin.database_exists(db))
            .await
    );
}
