//! Primary-key tables from the command line, against a real `fjord
//! server`: `fjord produce` upserts and deletes (`--delete`, or a change-type
//! column `op` in CSV and JSON lines) and partially updates (`--columns`);
//! `fjord lookup` finds rows by key and by prefix (from `--key` and from a
//! keys file) and says which keys it did not find; `fjord scan` prints the
//! current rows (all, `--limit`, `--bucket`, `--partition`) and the changelog
//! (`--changelog`). Each is compared with a model of what was written.
//! Mistakes (unknown tables and columns, a log table where a primary-key
//! table is needed, an unknown change type, a server that went away) fail
//! with a message naming what was wrong.

mod support;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt::Debug;
use std::io::Write;
use std::process::{Command, Output, Stdio};

use fjord_client::{Admin, ServerConnection, TablePath};
use fjord_format::schema::{DatabaseDescriptor, Schema, TableDescriptor, TableDistribution};
use fjord_format::types::DataType;
use support::FjordServer;

const DATABASE: &str = "pk";

/// Runs the `fjord` binary with `args`, feeding `stdin`.
fn fjord<S: AsRef<OsStr>>(args: &[S], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fjord"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fjord");
    let mut input = child.stdin.take().expect("stdin is piped");
    let data = stdin.as_bytes().to_vec();
    let feeder = std::thread::spawn(move || {
        // The command may stop reading early (bad input): ignore EPIPE.
        let _ = input.write_all(&data);
    });
    let output = wait_bounded(child);
    feeder.join().expect("stdin feeder");
    output
}

/// Waits for `child`, killing it (and failing the test) if it runs longer
/// than [`support::STEP_TIMEOUT`]: a command that never ends must not hang
/// the suite.
fn wait_bounded(mut child: std::process::Child) -> Output {
    let deadline = std::time::Instant::now() + support::STEP_TIMEOUT;
    // Drain stdout and stderr while waiting, so a full pipe cannot block the child.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let status = loop {
        match child.try_wait().expect("try_wait") {
            Some(status) => break status,
            None if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            None => {
                let _ = child.kill();
                panic!("fjord did not exit within {:?}", support::STEP_TIMEOUT);
            }
        }
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

/// Runs a command that must succeed; returns its stdout and stderr.
fn ok<S: AsRef<OsStr> + Debug>(args: &[S], stdin: &str) -> (String, String) {
    let output = fjord(args, stdin);
    assert!(
        output.status.success(),
        "fjord {args:?} failed ({}):\n{}",
        output.status,
        stderr(&output)
    );
    (stdout(&output), stderr(&output))
}

/// Runs a command that must fail with an error, not a panic; returns its
/// stderr.
fn fails<S: AsRef<OsStr> + Debug>(args: &[S], stdin: &str) -> String {
    let output = fjord(args, stdin);
    assert!(
        !output.status.success(),
        "fjord {args:?} succeeded, expected a failure; stdout:\n{}",
        stdout(&output)
    );
    let message = stderr(&output);
    assert!(
        message.contains("Error: ") && !message.contains("panicked"),
        "fjord {args:?} must fail with an error, not a panic:\n{message}"
    );
    message
}

/// A table to create: its schema, bucket key, partition keys and buckets.
struct TableSpec {
    name: &'static str,
    schema: Schema,
    bucket_keys: &'static [&'static str],
    partition_keys: &'static [&'static str],
    buckets: i32,
}

/// `id BIGINT` (the key), `name STRING`, `score DOUBLE`.
fn users(name: &'static str, buckets: i32) -> TableSpec {
    TableSpec {
        name,
        schema: Schema::builder()
            .column("id", DataType::bigint().not_null())
            .column("name", DataType::string())
            .column("score", DataType::double())
            .primary_key(["id"])
            .build()
            .expect("schema"),
        bucket_keys: &[],
        partition_keys: &[],
        buckets,
    }
}

/// A `fjord server` for one test with its tables created under `pk.`.
/// Fields drop in order: the server stops before its data directory is
/// removed.
struct Cli {
    server: FjordServer,
    bootstrap: String,
    dir: tempfile::TempDir,
}

impl Cli {
    fn start(tables: Vec<TableSpec>) -> Cli {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = FjordServer::start(dir.path());
        let bootstrap = server.bootstrap_servers();
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let connection = ServerConnection::connect(&bootstrap)
                .await
                .expect("connect");
            let admin = Admin::new(connection);
            admin
                .create_database(DATABASE, &DatabaseDescriptor::default(), true)
                .await
                .expect("create database");
            for table in tables {
                let descriptor = TableDescriptor::new(
                    table.schema,
                    None,
                    table
                        .partition_keys
                        .iter()
                        .map(|k| (*k).to_owned())
                        .collect(),
                    Some(TableDistribution {
                        bucket_count: Some(table.buckets),
                        bucket_keys: table.bucket_keys.iter().map(|k| (*k).to_owned()).collect(),
                    }),
                    Default::default(),
                    Default::default(),
                )
                .expect("descriptor");
                admin
                    .create_table(&TablePath::new(DATABASE, table.name), &descriptor, false)
                    .await
                    .expect("create table");
            }
        });
        Cli {
            server,
            bootstrap,
            dir,
        }
    }

    /// `fjord <verb> --bootstrap <server> --table pk.<table> <extra>...`.
    fn run(&self, verb: &str, table: &str, extra: &[&str], stdin: &str) -> (String, String) {
        ok(&self.args(verb, table, extra), stdin)
    }

    /// As [`Cli::run`], for a command that must fail; returns its stderr.
    fn fail(&self, verb: &str, table: &str, extra: &[&str], stdin: &str) -> String {
        fails(&self.args(verb, table, extra), stdin)
    }

    fn args(&self, verb: &str, table: &str, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            verb.to_owned(),
            "--bootstrap".to_owned(),
            self.bootstrap.clone(),
            "--table".to_owned(),
            format!("{DATABASE}.{table}"),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    }

    /// A file in the test's directory holding `text`; its path.
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write file");
        path.to_str().expect("utf-8 path").to_owned()
    }
}

/// The data lines of CSV output (the header left out), sorted.
fn sorted_rows(csv: &str) -> Vec<String> {
    let mut rows: Vec<String> = csv.lines().skip(1).map(str::to_owned).collect();
    rows.sort();
    rows
}

/// The changelog printed by `scan --changelog --format csv` whose columns
/// are `_change_type,id,...`: per id, its changes in order as
/// `<change type> <the rest of the row>`.
fn changes_by_id(csv: &str) -> BTreeMap<i64, Vec<String>> {
    let mut lines = csv.lines();
    assert_eq!(
        lines
            .next()
            .map(|h| h.split(',').take(2).collect::<Vec<_>>()),
        Some(vec!["_change_type", "id"]),
        "{csv}"
    );
    let mut changes: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for line in lines {
        let mut fields = line.splitn(3, ',');
        let change = fields.next().expect("change type");
        let id: i64 = fields.next().expect("id").parse().expect("numeric id");
        let rest = fields.next().unwrap_or("");
        changes
            .entry(id)
            .or_default()
            .push(format!("{change} {rest}"));
    }
    changes
}

#[test]
fn upserts_and_deletes_read_back_by_lookup_and_by_scan() {
    let cli = Cli::start(vec![users("users", 2)]);
    let (_, summary) = cli.run(
        "produce",
        "users",
        &["--header", "-q"],
        "id,name,score\n1,alice,1.0\n2,bob,2.0\n3,carol,3.0\n4,dave,4.0\n5,eve,5.0\n",
    );
    assert!(
        summary.contains("produced 5 rows") && summary.contains("5 upserts, 0 deletes"),
        "{summary}"
    );
    // --delete reads only the key: a header may name just that.
    let (_, summary) = cli.run(
        "produce",
        "users",
        &["--header", "--delete", "-q"],
        "id\n2\n",
    );
    assert!(summary.contains("0 upserts, 1 deletes"), "{summary}");
    // A change-type column decides per row, Fluss's and Debezium's spellings.
    let changes = "\
op,id,name,score
+I,6,frank,6.0
-U,1,alice,1.0
+U,1,alicia,1.5
-D,3,,
d,4,,

c,7,gina,7.0
u,5,eve2,5.5
r,8,hank,8.0
";
    let (_, summary) = cli.run("produce", "users", &["--header", "-q"], changes);
    assert!(
        summary.contains("produced 8 rows")
            && summary.contains("5 upserts, 2 deletes, 1 skipped (-U)"),
        "{summary}"
    );
    // JSON lines: an `op` key, or none (an upsert).
    cli.run(
        "produce",
        "users",
        &["--format", "json", "-q"],
        "{\"op\": \"d\", \"id\": 8}\n{\"id\": 9, \"name\": \"ivy\", \"score\": 9.0}\n",
    );

    let model = [
        "1,alicia,1.5",
        "5,eve2,5.5",
        "6,frank,6.0",
        "7,gina,7.0",
        "9,ivy,9.0",
    ];
    let (state, _) = cli.run("scan", "users", &["--format", "csv", "-q"], "");
    assert_eq!(state.lines().next(), Some("id,name,score"), "{state}");
    assert_eq!(sorted_rows(&state), model);

    // Found keys print in key order; missing ones are named on stderr.
    let (found, said) = cli.run(
        "lookup",
        "users",
        &[
            "--key", "id=5", "--key", "id=3", "--key", "id=1", "--format", "csv",
        ],
        "",
    );
    assert_eq!(found, "id,name,score\n5,eve2,5.5\n1,alicia,1.5\n");
    assert!(said.contains("not found: id=3"), "{said}");
    assert!(said.contains("2 found, 1 not found"), "{said}");
    let (json, _) = cli.run(
        "lookup",
        "users",
        &["--key", "id=9", "--format", "json"],
        "",
    );
    let row: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON line");
    assert_eq!(row["name"], "ivy");
    let (table, said) = cli.run("lookup", "users", &["--key", "id=42"], "");
    assert!(table.contains("(no rows)"), "{table}");
    assert!(said.contains("not found: id=42"), "{said}");
    // A keys file: CSV with a header, or JSON lines.
    let csv_keys = cli.file("keys.csv", "id\n7\n8\n6\n");
    let (found, said) = cli.run(
        "lookup",
        "users",
        &["--keys-file", &csv_keys, "--format", "csv"],
        "",
    );
    assert_eq!(found, "id,name,score\n7,gina,7.0\n6,frank,6.0\n");
    assert!(said.contains("not found: id=8"), "{said}");
    let json_keys = cli.file("keys.jsonl", "{\"id\": 1}\n{\"id\": 2}\n");
    let (found, _) = cli.run(
        "lookup",
        "users",
        &["--keys-file", &json_keys, "--format", "csv"],
        "",
    );
    assert_eq!(found, "id,name,score\n1,alicia,1.5\n");

    // The changelog: each key's changes in the order written.
    let (log, _) = cli.run(
        "scan",
        "users",
        &["--changelog", "--format", "csv", "-q"],
        "",
    );
    let expected: BTreeMap<i64, Vec<&str>> = [
        (1, vec!["+I alice,1.0", "-U alice,1.0", "+U alicia,1.5"]),
        (2, vec!["+I bob,2.0", "-D bob,2.0"]),
        (3, vec!["+I carol,3.0", "-D carol,3.0"]),
        (4, vec!["+I dave,4.0", "-D dave,4.0"]),
        (5, vec!["+I eve,5.0", "-U eve,5.0", "+U eve2,5.5"]),
        (6, vec!["+I frank,6.0"]),
        (7, vec!["+I gina,7.0"]),
        (8, vec!["+I hank,8.0", "-D hank,8.0"]),
        (9, vec!["+I ivy,9.0"]),
    ]
    .into_iter()
    .collect();
    let changes = changes_by_id(&log);
    let changes: BTreeMap<i64, Vec<&str>> = changes
        .iter()
        .map(|(id, c)| (*id, c.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(changes, expected, "{log}");
    // A projection keeps the change type first.
    let (projected, _) = cli.run(
        "scan",
        "users",
        &["--changelog", "--format", "csv", "--columns", "name", "-q"],
        "",
    );
    assert_eq!(projected.lines().next(), Some("_change_type,name"));
    assert_eq!(projected.lines().count(), 1 + 17, "{projected}");
}

#[test]
fn partial_updates_write_only_the_named_columns() {
    let cli = Cli::start(vec![users("scores", 1)]);
    cli.run("produce", "scores", &["-q"], "1,alice,1.0\n2,bob,2.0\n");
    // Header-less, in --columns order; with a header, in any order.
    cli.run(
        "produce",
        "scores",
        &["--columns", "score,id", "-q"],
        "10.5,1\n",
    );
    cli.run(
        "produce",
        "scores",
        &["--columns", "id,name", "--header", "-q"],
        "name,id\nbobby,2\n",
    );
    // A key not yet there: the other columns are NULL.
    cli.run(
        "produce",
        "scores",
        &["--columns", "id,score", "-q"],
        "3,3.5\n",
    );
    let (state, _) = cli.run("scan", "scores", &["--format", "csv", "-q"], "");
    assert_eq!(
        sorted_rows(&state),
        ["1,alice,10.5", "2,bobby,2.0", "3,,3.5"]
    );
    // A partial delete clears the named columns; the row stays while
    // another column holds a value.
    cli.run(
        "produce",
        "scores",
        &["--columns", "id,score", "--header", "-q"],
        "op,id,score\n-D,1,\n",
    );
    let (row, _) = cli.run(
        "lookup",
        "scores",
        &["--key", "id=1", "--format", "csv"],
        "",
    );
    assert_eq!(row, "id,name,score\n1,alice,\n");

    let message = cli.fail("produce", "scores", &["--columns", "name,score"], "a,1.0\n");
    assert!(
        message.contains("--columns") && message.contains("\"id\" is missing"),
        "{message}"
    );
    let message = cli.fail("produce", "scores", &["--columns", "id,nope"], "1,2\n");
    assert!(message.contains("\"nope\""), "{message}");
    let message = cli.fail(
        "produce",
        "scores",
        &["--columns", "id,score", "--header"],
        "id,name\n1,x\n",
    );
    assert!(
        message.contains("line 1") && message.contains("`name`"),
        "{message}"
    );
}

#[test]
fn a_partitioned_table_is_looked_up_and_scanned_with_its_partition_columns() {
    let days = TableSpec {
        name: "days",
        schema: Schema::builder()
            .column("dt", DataType::string().not_null())
            .column("id", DataType::int().not_null())
            .column("sub", DataType::int().not_null())
            .column("v", DataType::string())
            .primary_key(["dt", "id", "sub"])
            .build()
            .expect("schema"),
        bucket_keys: &["id"],
        partition_keys: &["dt"],
        buckets: 2,
    };
    let cli = Cli::start(vec![days]);
    let mut rows = String::new();
    for (dt, id, sub) in [
        ("20261130", 1, 0),
        ("20261130", 1, 1),
        ("20261130", 2, 0),
        ("20261201", 1, 0),
        ("20261201", 3, 5),
    ] {
        rows.push_str(&format!(
            "{{\"dt\": \"{dt}\", \"id\": {id}, \"sub\": {sub}, \"v\": \"{dt}-{id}-{sub}\"}}\n"
        ));
    }
    rows.push_str("{\"op\": \"-D\", \"dt\": \"20261130\", \"id\": 2, \"sub\": 0}\n");
    cli.run("produce", "days", &["--format", "json", "-q"], &rows);

    let (found, said) = cli.run(
        "lookup",
        "days",
        &[
            "--key",
            "dt=20261201,id=3,sub=5",
            // Columns in any order.
            "--key",
            "sub=1,id=1,dt=20261130",
            "--key",
            "dt=20261130,id=2,sub=0",
            // No such partition: not found either.
            "--key",
            "dt=19990101,id=1,sub=0",
            "--format",
            "csv",
        ],
        "",
    );
    assert_eq!(
        found,
        "dt,id,sub,v\n20261201,3,5,20261201-3-5\n20261130,1,1,20261130-1-1\n"
    );
    assert!(said.contains("not found: dt=20261130,id=2,sub=0"), "{said}");
    assert!(said.contains("not found: dt=19990101,id=1,sub=0"), "{said}");

    // Every row under a prefix (partition and bucket key), in key order.
    let (under, said) = cli.run(
        "lookup",
        "days",
        &[
            "--prefix",
            "dt,id",
            "--key",
            "dt=20261130,id=1",
            "--key",
            "dt=20261201,id=2",
            "--format",
            "csv",
        ],
        "",
    );
    assert_eq!(
        under,
        "dt,id,sub,v\n20261130,1,0,20261130-1-0\n20261130,1,1,20261130-1-1\n"
    );
    assert!(said.contains("not found: dt=20261201,id=2"), "{said}");
    let keys = cli.file("prefixes.csv", "id,dt\n1,20261201\n");
    let (under, _) = cli.run(
        "lookup",
        "days",
        &["--prefix", "dt,id", "--keys-file", &keys, "--format", "csv"],
        "",
    );
    assert_eq!(under, "dt,id,sub,v\n20261201,1,0,20261201-1-0\n");
    let message = cli.fail("lookup", "days", &["--prefix", "id", "--key", "id=1"], "");
    assert!(message.contains("dt"), "{message}");
    // A key column left out is named, with the whole key.
    let message = cli.fail("lookup", "days", &["--key", "dt=20261130,id=1"], "");
    assert!(
        message.contains("\"sub\" is missing") && message.contains("dt, id, sub"),
        "{message}"
    );

    let scan = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["--format", "csv", "-q"];
        args.extend_from_slice(extra);
        sorted_rows(&cli.run("scan", "days", &args, "").0)
    };
    assert_eq!(
        scan(&[]),
        [
            "20261130,1,0,20261130-1-0",
            "20261130,1,1,20261130-1-1",
            "20261201,1,0,20261201-1-0",
            "20261201,3,5,20261201-3-5",
        ]
    );
    assert_eq!(
        scan(&["--partition", "20261201", "--columns", "sub,id"]),
        ["0,1", "5,3"]
    );
    let changelog = scan(&[
        "--changelog",
        "--partition",
        "20261130",
        "--columns",
        "id,sub",
    ]);
    assert_eq!(changelog, ["+I,1,0", "+I,1,1", "+I,2,0", "-D,2,0"]);
}

#[test]
fn a_limited_scan_and_a_bucket_scan_read_part_of_the_current_rows() {
    let cli = Cli::start(vec![users("many", 3)]);
    let mut rows = String::new();
    for id in 0..100 {
        rows.push_str(&format!("{id},n{id},{id}.5\n"));
    }
    cli.run("produce", "many", &["-q"], &rows);
    // Overwrite every row once: the state still holds 100.
    cli.run("produce", "many", &["-q"], &rows.replace(",n", ",m"));
    let all: Vec<String> = (0..100).map(|id| format!("{id},m{id},{id}.5")).collect();
    let mut all_sorted = all.clone();
    all_sorted.sort();

    let scan = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["--format", "csv", "-q"];
        args.extend_from_slice(extra);
        sorted_rows(&cli.run("scan", "many", &args, "").0)
    };
    let limited = scan(&["--limit", "10"]);
    assert_eq!(limited.len(), 10);
    assert!(limited.iter().all(|r| all.contains(r)), "{limited:?}");
    // A limit past every row reads them all, by LimitScan or past its
    // largest by ScanKv.
    assert_eq!(scan(&["--limit", "1000"]), all_sorted);
    assert_eq!(scan(&["--limit", "1000000"]), all_sorted);

    let mut by_bucket: Vec<String> = Vec::new();
    for bucket in ["0", "1", "2"] {
        let rows = scan(&["--bucket", bucket]);
        assert!(!rows.is_empty(), "bucket {bucket} holds rows");
        by_bucket.extend(rows);
    }
    by_bucket.sort();
    assert_eq!(by_bucket, all_sorted);
    let message = cli.fail("scan", "many", &["--bucket", "3"], "");
    assert!(message.contains("--bucket 3"), "{message}");
    // The changelog of one bucket: its rows' two versions each.
    let changes = scan(&["--changelog", "--bucket", "0", "--columns", "id"]);
    assert_eq!(changes.len(), 3 * scan(&["--bucket", "0"]).len());
    let message = cli.fail("scan", "many", &["--from", "latest"], "");
    assert!(message.contains("--changelog"), "{message}");
}

#[test]
fn mistakes_are_refused_naming_what_was_wrong() {
    let log = TableSpec {
        name: "log",
        schema: Schema::builder()
            .column("id", DataType::bigint())
            .build()
            .expect("schema"),
        bucket_keys: &[],
        partition_keys: &[],
        buckets: 1,
    };
    let cli = Cli::start(vec![users("keyed", 1), log]);

    // Unknown tables.
    let message = cli.fail("lookup", "nope", &["--key", "id=1"], "");
    assert!(message.contains("pk.nope"), "{message}");
    let message = cli.fail("produce", "nope", &["--delete"], "1\n");
    assert!(message.contains("pk.nope"), "{message}");
    // A log table where a primary-key table is needed.
    let message = cli.fail("lookup", "log", &["--key", "id=1"], "");
    assert!(
        message.contains("pk.log") && message.contains("log table"),
        "{message}"
    );
    let message = cli.fail("produce", "log", &["--delete"], "1\n");
    assert!(
        message.contains("--delete") && message.contains("primary-key"),
        "{message}"
    );
    let message = cli.fail("produce", "log", &["--columns", "id"], "1\n");
    assert!(message.contains("--columns"), "{message}");

    // A change type that is not one: its line and value; nothing of its
    // batch is written.
    let message = cli.fail(
        "produce",
        "keyed",
        &["--header"],
        "id,name,score,op\n1,a,1.0,+I\n\n2,b,2.0,X\n",
    );
    assert!(
        message.contains("line 4") && message.contains("\"X\""),
        "{message}"
    );
    let message = cli.fail(
        "produce",
        "keyed",
        &["--format", "json"],
        "{\"id\": 1, \"op\": \"c\"}\n{\"id\": 2, \"op\": \"upsert\"}\n",
    );
    assert!(
        message.contains("line 2") && message.contains("\"upsert\""),
        "{message}"
    );
    let message = cli.fail(
        "produce",
        "keyed",
        &["--header", "--delete"],
        "id,op\n1,-D\n",
    );
    assert!(message.contains("--delete"), "{message}");
    // A header without the key column; a value its column cannot take; a
    // row without its key.
    let message = cli.fail("produce", "keyed", &["--header"], "name,score\na,1.0\n");
    assert!(
        message.contains("line 1") && message.contains("`id` is missing"),
        "{message}"
    );
    let message = cli.fail("produce", "keyed", &[], "1,a,1.0\n2,b,high\n");
    assert!(
        message.contains("line 2") && message.contains("column score") && message.contains("high"),
        "{message}"
    );
    let message = cli.fail("produce", "keyed", &["--delete"], "1,a,1.0\n,b,2.0\n");
    assert!(message.contains("'id'"), "{message}");
    let (state, _) = cli.run("scan", "keyed", &["--format", "csv", "-q"], "");
    assert_eq!(state, "", "nothing was written");

    // Keys of the wrong shape.
    cli.run("produce", "keyed", &["-q"], "1,a,1.0\n");
    for (key, says) in [
        ("name=a", "\"name\""),
        ("id=1,id=2", "twice"),
        ("id", "column=value"),
        ("id=one", "id"),
    ] {
        let message = cli.fail("lookup", "keyed", &["--key", "id=1", "--key", key], "");
        assert!(
            message.contains(&format!("--key {key:?}")) && message.contains(says),
            "{key}: {message}"
        );
        assert!(!message.contains("not found"), "nothing is looked up");
    }
    let days = cli.file("bad-keys.csv", "id,name\n1,a\n");
    let message = cli.fail("lookup", "keyed", &["--keys-file", &days], "");
    assert!(
        message.contains("line 1") && message.contains("`name`"),
        "{message}"
    );
    let message = cli.fail("lookup", "keyed", &[], "");
    assert!(message.contains("--key"), "{message}");
}

#[test]
fn a_server_that_went_away_is_an_error_not_a_hang() {
    let mut cli = Cli::start(vec![users("gone", 1)]);
    cli.run("produce", "gone", &["-q"], "1,a,1.0\n");

    // A produce under way when the server goes: one row per batch, so the
    // first is written while the second is not yet read.
    let args = cli.args(
        "produce",
        "gone",
        &[
            "--batch-rows",
            "1",
            "-q",
            "--set",
            "client.writer.retries=3",
        ],
    );
    let mut producer = Command::new(env!("CARGO_BIN_EXE_fjord"))
        .args(&args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fjord produce");
    let mut input = producer.stdin.take().expect("stdin is piped");
    input.write_all(b"2,b,2.0\n").expect("first row");
    input.flush().expect("flush");
    // The first row is there: the producer is connected and writing.
    let lookup = cli.args("lookup", "gone", &["--key", "id=2", "--format", "csv"]);
    let deadline = std::time::Instant::now() + support::STEP_TIMEOUT;
    while ok(&lookup, "").0.lines().count() < 2 {
        assert!(std::time::Instant::now() < deadline, "the row never came");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    cli.server.kill();
    input.write_all(b"3,c,3.0\n").expect("second row");
    drop(input);
    let output = wait_bounded(producer);
    assert!(!output.status.success(), "the produce failed");
    let message = stderr(&output);
    assert!(message.contains("pk.gone"), "{message}");

    // Commands started after it went away.
    let message = fails(&lookup, "");
    assert!(message.contains(&cli.bootstrap), "{message}");
    let message = cli.fail("scan", "gone", &[], "");
    assert!(message.contains(&cli.bootstrap), "{message}");
}
