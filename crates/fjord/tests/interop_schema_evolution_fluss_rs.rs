//! Schema evolution with the official Rust client, `fluss-rs` 1.0.0,
//! unmodified, against the real `fjord server` binary. fluss-rs creates a
//! log table and a primary-key table, writes rows, adds a column with its
//! own `alter_table` (ALTER TABLE ADD COLUMN, AlterTable v0), writes again
//! and reads everything back (a fluss-rs writer created before the alter
//! writes the new schema once its metadata is refreshed, so batches of the
//! old id after an alter are covered by fjord-server's own tests):
//! - its log scanner (fixed-schema mode, its default) returns every row in
//!   the schema it was created with: rows written before the alter with the
//!   new column NULL, and a scanner created before the alter sees rows
//!   written after it without the column; it fetches the older schema by id
//!   (GetTableSchema with `schema_id`) when it meets a batch of that id;
//! - a projected scan of columns every schema has reads every batch;
//!   projecting the added column fails on the first batch of the older
//!   schema with INVALID_COLUMN_PROJECTION, as against a Fluss 0.9.1 server
//!   (`FileLogProjection`);
//! - its lookuper decodes rows stored with either schema id and aligns them
//!   to its table's schema;
//! - a primary-key table's changelog is read like the log table;
//! - refused alters come back with Fluss's error codes;
//! - all of it again after a restart.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use fluss::client::{FlussConnection, FlussTable, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::error::FlussError;
use fluss::metadata::{
    AddColumn, AlterConfig, AlterConfigOpType, AlterTableChanges, ColumnPositionType, DataTypes,
    DropColumn, JsonSerde, Schema, TableDescriptor, TablePath,
};
use fluss::record::ChangeType;
use fluss::row::{Datum, GenericRow, InternalRow};
use support::{FjordServer, STEP_TIMEOUT};
use tempfile::TempDir;

const DB: &str = "interop_evolution";
/// How long one `poll` waits for data.
const POLL_WAIT: Duration = Duration::from_millis(300);

/// A row as the test compares it: id, name, and the added column `n`
/// (`None` when NULL; absent from rows read at the old schema).
type Row = (i32, String, Option<i64>);

fn log_path() -> TablePath {
    TablePath::new(DB, "events")
}

fn pk_path() -> TablePath {
    TablePath::new(DB, "users")
}

fn descriptor(primary_key: bool) -> TableDescriptor {
    let id = if primary_key {
        DataTypes::int().as_non_nullable()
    } else {
        DataTypes::int()
    };
    let builder = Schema::builder()
        .column("id", id)
        .column("name", DataTypes::string());
    let schema = if primary_key {
        builder
            .primary_key(vec!["id".to_owned()])
            .expect("primary key")
            .build()
    } else {
        builder.build()
    }
    .expect("schema");
    TableDescriptor::builder()
        .schema(schema)
        .distributed_by(Some(1), vec![])
        .build()
        .expect("descriptor")
}

async fn connect(server: &FjordServer) -> FlussConnection {
    let config = Config {
        bootstrap_servers: server.bootstrap_servers(),
        writer_retries: 5,
        lookup_batch_timeout_ms: 5,
        ..Config::default()
    };
    server.step("connect", FlussConnection::new(config)).await
}

/// ALTER TABLE ADD COLUMN n BIGINT (nullable, last), as fluss-rs sends it.
fn add_n() -> AlterTableChanges {
    let json = DataTypes::bigint().serialize_json().expect("type JSON");
    AlterTableChanges {
        add_columns: vec![AddColumn {
            column_name: "n".to_owned(),
            data_type_json: serde_json::to_vec(&json).expect("JSON bytes"),
            comment: Some("added by the test".to_owned()),
            position: ColumnPositionType::Last,
        }],
        ..AlterTableChanges::default()
    }
}

/// The fields of a row as fluss-rs hands it over (2 or 3 columns).
fn row_of<R: InternalRow + ?Sized>(row: &R) -> Row {
    let n = if row.get_field_count() > 2 && !row.is_null_at(2).expect("n null bit") {
        Some(row.get_long(2).expect("n"))
    } else {
        None
    };
    (
        row.get_int(0).expect("id"),
        row.get_string(1).expect("name").to_owned(),
        n,
    )
}

/// Every record of bucket 0 from the start up to `count` records: its change
/// type, the number of fields fluss-rs gave its row, and the row.
async fn scan(
    server: &FjordServer,
    scanner: &fluss::client::LogScanner,
    count: usize,
) -> Result<Vec<(ChangeType, usize, Row)>, fluss::error::Error> {
    scanner.subscribe(0, EARLIEST_OFFSET).await?;
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let mut out = Vec::new();
    while out.len() < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "read {} of {count} records within {STEP_TIMEOUT:?}\n--- fjord server stderr ---\n{}",
            out.len(),
            server.stderr_log()
        );
        let records = scanner.poll(POLL_WAIT).await?;
        for (_, records) in records.into_records_by_buckets() {
            for r in records {
                let row = r.row();
                out.push((*r.change_type(), row.get_field_count(), row_of(row)));
            }
        }
    }
    Ok(out)
}

/// Appends `rows` (each 2 or 3 values wide, as `width` says) and waits for
/// every acknowledgement.
async fn append(server: &FjordServer, table: &FlussTable<'_>, width: usize, rows: &[Row]) {
    let writer = table
        .new_append()
        .expect("new_append")
        .create_writer()
        .expect("append writer");
    append_with(server, &writer, width, rows).await;
}

async fn append_with(
    server: &FjordServer,
    writer: &fluss::client::AppendWriter,
    width: usize,
    rows: &[Row],
) {
    let mut acks = Vec::new();
    for row in rows {
        acks.push(writer.append(&generic(width, row)).expect("append"));
    }
    server.step("flush appends", writer.flush()).await;
    for ack in acks {
        server.step("append acknowledged", ack).await;
    }
}

fn generic(width: usize, (id, name, n): &Row) -> GenericRow<'static> {
    let mut values = vec![Datum::Int32(*id), Datum::from(name.clone())];
    if width == 3 {
        values.push(n.map_or(Datum::Null, Datum::Int64));
    }
    GenericRow { values }
}

async fn upsert_with(
    server: &FjordServer,
    writer: &fluss::client::UpsertWriter,
    width: usize,
    rows: &[Row],
) {
    let mut acks = Vec::new();
    for row in rows {
        acks.push(writer.upsert(&generic(width, row)).expect("upsert"));
    }
    server.step("flush upserts", writer.flush()).await;
    for ack in acks {
        server.step("upsert acknowledged", ack).await;
    }
}

/// Looks up `ids` with a lookuper of `table`.
async fn lookup(server: &FjordServer, table: &FlussTable<'_>, ids: &[i32]) -> Vec<Option<Row>> {
    let mut lookuper = table
        .new_lookup()
        .expect("new_lookup")
        .create_lookuper()
        .expect("lookuper");
    let mut out = Vec::new();
    for &id in ids {
        let key = GenericRow {
            values: vec![Datum::Int32(id)],
        };
        let result = server.step("lookup", lookuper.lookup(&key)).await;
        let row = result.get_single_row().expect("single row");
        out.push(row.map(|r| row_of(&r)));
    }
    out
}

fn row(id: i32, name: &str, n: Option<i64>) -> Row {
    (id, name.to_owned(), n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fluss_rs_alters_tables_and_reads_rows_of_every_schema_id() {
    let dir = TempDir::new().expect("tempdir");
    let mut server = FjordServer::start(dir.path());
    let old = [row(1, "a", None), row(2, "b", None)];
    let new = [row(3, "c", Some(30)), row(4, "d", None)];
    let all: Vec<Row> = old.iter().chain(&new).cloned().collect();
    {
        let conn = connect(&server).await;
        let admin = conn.get_admin().expect("admin");
        server
            .step("create database", admin.create_database(DB, None, true))
            .await;
        for (path, pk) in [(log_path(), false), (pk_path(), true)] {
            server
                .step(
                    "create table",
                    admin.create_table(&path, &descriptor(pk), false),
                )
                .await;
        }

        // Schema 1: rows of two columns.
        let log_v1 = server.step("get table", conn.get_table(&log_path())).await;
        let pk_v1 = server.step("get table", conn.get_table(&pk_path())).await;
        append(&server, &log_v1, 2, &old).await;
        let upserter = pk_v1
            .new_upsert()
            .expect("new_upsert")
            .create_writer()
            .expect("writer");
        upsert_with(&server, &upserter, 2, &old).await;
        let scanner_v1 = log_v1.new_scan().create_log_scanner().expect("scanner");

        // ALTER TABLE ADD COLUMN through fluss-rs's admin.
        for path in [log_path(), pk_path()] {
            server
                .step("alter table", admin.alter_table(&path, false, add_n()))
                .await;
            let info = server.step("table info", admin.get_table_info(&path)).await;
            assert_eq!(info.get_schema_id(), 2);
            let names: Vec<&str> = info
                .get_schema()
                .columns()
                .iter()
                .map(|c| c.name())
                .collect();
            assert_eq!(names, ["id", "name", "n"]);
            let v1 = server
                .step("schema 1", admin.get_table_schema(&path, Some(1)))
                .await;
            assert_eq!(v1.schema().columns().len(), 2);
        }

        // Schema 2 through writers of the altered tables.
        let log_v2 = server.step("get table", conn.get_table(&log_path())).await;
        let pk_v2 = server.step("get table", conn.get_table(&pk_path())).await;
        assert_eq!(log_v2.get_table_info().get_schema_id(), 2);
        append(&server, &log_v2, 3, &new).await;
        let new_upserter = pk_v2
            .new_upsert()
            .expect("new_upsert")
            .create_writer()
            .expect("writer");
        upsert_with(&server, &new_upserter, 3, &new).await;

        // The log scanner of the new table: every row at schema 2.
        let scanner = log_v2.new_scan().create_log_scanner().expect("scanner");
        let got = scan(&server, &scanner, all.len()).await.expect("scan");
        assert_eq!(
            got.iter()
                .map(|(_, w, r)| (*w, r.clone()))
                .collect::<Vec<_>>(),
            all.iter().map(|r| (3, r.clone())).collect::<Vec<_>>()
        );
        // The scanner made before the alter: every row at schema 1.
        let got = scan(&server, &scanner_v1, all.len()).await.expect("scan");
        assert_eq!(
            got.iter()
                .map(|(_, w, r)| (*w, r.clone()))
                .collect::<Vec<_>>(),
            all.iter()
                .map(|(id, name, _)| (2, (*id, name.clone(), None)))
                .collect::<Vec<_>>()
        );
        // Projected on columns every schema has: every batch.
        let projected = log_v2
            .new_scan()
            .project(&[0, 1])
            .expect("project")
            .create_log_scanner()
            .expect("scanner");
        let got = scan(&server, &projected, all.len()).await.expect("scan");
        assert_eq!(got.len(), all.len());
        assert!(got.iter().all(|(_, w, _)| *w == 2));
        // Projected on the added column: refused at the first old batch,
        // as a Fluss 0.9.1 server refuses it.
        let added = log_v2
            .new_scan()
            .project(&[0, 2])
            .expect("project")
            .create_log_scanner()
            .expect("scanner");
        let err = scan(&server, &added, 1)
            .await
            .expect_err("old batches lack n");
        assert!(
            format!("{err:?}").contains("out of bound for schema with 2 fields"),
            "{err:?}"
        );

        // Lookups of rows stored with either schema id.
        let expected: Vec<Option<Row>> = all.iter().cloned().map(Some).collect();
        assert_eq!(lookup(&server, &pk_v2, &[1, 2, 3, 4]).await, expected);
        // The primary-key table's changelog, at the new schema.
        let changelog = pk_v2.new_scan().create_log_scanner().expect("scanner");
        let got = scan(&server, &changelog, all.len()).await.expect("scan");
        let inserted: BTreeMap<i32, Row> = got
            .iter()
            .filter(|(c, _, _)| *c == ChangeType::Insert)
            .map(|(_, _, r)| (r.0, r.clone()))
            .collect();
        assert_eq!(inserted.into_values().collect::<Vec<_>>(), all);

        // Refusals with Fluss's codes.
        let err = server
            .step_err(
                "add an existing column",
                admin.alter_table(&pk_path(), false, add_n()),
            )
            .await;
        assert_eq!(
            err.api_error(),
            Some(FlussError::InvalidAlterTableException),
            "{err:?}"
        );
        let err = server
            .step_err(
                "drop a column",
                admin.alter_table(
                    &log_path(),
                    false,
                    AlterTableChanges {
                        drop_columns: vec![DropColumn {
                            column_name: "name".to_owned(),
                        }],
                        ..AlterTableChanges::default()
                    },
                ),
            )
            .await;
        assert_eq!(
            err.api_error(),
            Some(FlussError::UnknownServerError),
            "{err:?}"
        );
        let err = server
            .step_err(
                "alter an option Fluss does not let change",
                admin.alter_table(
                    &log_path(),
                    false,
                    AlterTableChanges {
                        config_changes: vec![AlterConfig::new(
                            "table.log.ttl",
                            Some("1 d".to_owned()),
                            AlterConfigOpType::Set,
                        )],
                        ..AlterTableChanges::default()
                    },
                ),
            )
            .await;
        assert_eq!(
            err.api_error(),
            Some(FlussError::InvalidAlterTableException),
            "{err:?}"
        );
        // Options Fluss lets change.
        server
            .step(
                "alter an option",
                admin.alter_table(
                    &log_path(),
                    false,
                    AlterTableChanges {
                        config_changes: vec![AlterConfig::new(
                            "table.datalake.freshness",
                            Some("1 min".to_owned()),
                            AlterConfigOpType::Set,
                        )],
                        ..AlterTableChanges::default()
                    },
                ),
            )
            .await;
        let info = server
            .step("table info", admin.get_table_info(&log_path()))
            .await;
        assert_eq!(info.get_schema_id(), 2);
        assert_eq!(
            info.get_properties()
                .get("table.datalake.freshness")
                .map(String::as_str),
            Some("1 min")
        );
    }

    // After a restart: the same rows through the same paths.
    server.restart();
    let conn = connect(&server).await;
    let log = server.step("get table", conn.get_table(&log_path())).await;
    let scanner = log.new_scan().create_log_scanner().expect("scanner");
    let got = scan(&server, &scanner, all.len()).await.expect("scan");
    assert_eq!(got.into_iter().map(|(_, _, r)| r).collect::<Vec<_>>(), all);
    let pk = server.step("get table", conn.get_table(&pk_path())).await;
    let expected: Vec<Option<Row>> = all.iter().cloned().map(Some).collect();
    assert_eq!(lookup(&server, &pk, &[1, 2, 3, 4]).await, expected);
}
