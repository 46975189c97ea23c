//! `fjord produce` and `fjord scan` as a user runs them, against a real
//! `fjord server`: CSV and JSON lines in, every output format out, with
//! projection, limits, start offsets and timestamps; bad input and unknown
//! tables fail with a non-zero exit and a message that says where.

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use fjord_client::{Admin, ServerConnection, TablePath};
use fjord_format::schema::{DatabaseDescriptor, Schema, TableDescriptor, TableDistribution};
use fjord_format::types::DataType;
use support::FjordServer;

const DATABASE: &str = "cli";

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Runs the `fjord` binary with `args`, feeding `stdin`.
fn fjord(args: &[&str], stdin: &str) -> Output {
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
    let output = child.wait_with_output().expect("wait for fjord");
    feeder.join().expect("stdin feeder");
    output
}

/// Waits for `child` to exit, killing it (and failing the test) if it runs
/// longer than [`support::STEP_TIMEOUT`]: a scan that never ends must not
/// hang the suite.
fn wait_bounded(mut child: std::process::Child) -> Output {
    let deadline = std::time::Instant::now() + support::STEP_TIMEOUT;
    // Drain stdout while waiting, so a full pipe cannot block the child.
    let mut out = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut bytes);
        bytes
    });
    loop {
        match child.try_wait().expect("try_wait") {
            Some(_) => break,
            None if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            None => {
                let _ = child.kill();
                panic!("fjord did not exit within {:?}", support::STEP_TIMEOUT);
            }
        }
    }
    let mut output = child.wait_with_output().expect("collect output");
    output.stdout = reader.join().expect("stdout reader");
    output
}

/// A `fjord` process read line by line, killed when dropped or after
/// [`support::STEP_TIMEOUT`] (its stdout then closes), so a line that never
/// comes fails the test instead of hanging it.
struct Watched {
    out: std::io::BufReader<std::process::ChildStdout>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    watchdog: Option<std::thread::JoinHandle<()>>,
}

impl Watched {
    fn spawn(args: &[&str]) -> Watched {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fjord"))
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fjord");
        let out = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        let watchdog = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + support::STEP_TIMEOUT;
            while !flag.load(std::sync::atomic::Ordering::SeqCst)
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        });
        Watched {
            out,
            done,
            watchdog: Some(watchdog),
        }
    }

    /// The next line of stdout; `None` once it closed.
    fn line(&mut self) -> Option<String> {
        let mut line = String::new();
        match std::io::BufRead::read_line(&mut self.out, &mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
        }
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

/// Runs a command that must succeed; returns its stdout.
fn ok(args: &[&str], stdin: &str) -> String {
    let output = fjord(args, stdin);
    assert!(
        output.status.success(),
        "fjord {args:?} failed ({}):\n{}",
        output.status,
        stderr(&output)
    );
    stdout(&output)
}

/// Runs a command that must fail; returns its stderr.
fn fails(args: &[&str], stdin: &str) -> String {
    let output = fjord(args, stdin);
    assert!(
        !output.status.success(),
        "fjord {args:?} succeeded, expected a failure; stdout:\n{}",
        stdout(&output)
    );
    stderr(&output)
}

/// `id BIGINT NOT NULL, name STRING, score DOUBLE, ts TIMESTAMP(3)`: the
/// columns of the CSV and JSON inputs below.
fn people_schema() -> Schema {
    Schema::builder()
        .column("id", DataType::bigint().not_null())
        .column("name", DataType::string())
        .column("score", DataType::double())
        .column("ts", DataType::timestamp(3).expect("precision"))
        .build()
        .expect("schema")
}

/// A `fjord server` for one test with one table `cli.<name>` created, and
/// the arguments that name both to the CLI. Fields drop in order: the
/// server stops before its data directory is removed.
struct Cli {
    _server: FjordServer,
    bootstrap: String,
    table: String,
    dir: tempfile::TempDir,
}

impl Cli {
    /// `cli.<name>` with [`people_schema`] and `buckets` buckets.
    fn start(name: &str, buckets: i32) -> Cli {
        Cli::start_with(name, people_schema(), &[], buckets)
    }

    /// `cli.<name>` with `schema`, partitioned by `partition_keys` (none
    /// for a plain table), with `buckets` buckets.
    fn start_with(name: &str, schema: Schema, partition_keys: &[&str], buckets: i32) -> Cli {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = FjordServer::start(dir.path());
        let bootstrap = server.bootstrap_servers();
        let descriptor = TableDescriptor::new(
            schema,
            None,
            partition_keys.iter().map(|k| (*k).to_owned()).collect(),
            Some(TableDistribution {
                bucket_count: Some(buckets),
                bucket_keys: Vec::new(),
            }),
            Default::default(),
            Default::default(),
        )
        .expect("descriptor");
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
            admin
                .create_table(&TablePath::new(DATABASE, name), &descriptor, false)
                .await
                .expect("create table");
        });
        Cli {
            _server: server,
            bootstrap,
            table: format!("{DATABASE}.{name}"),
            dir,
        }
    }

    /// `fjord <verb> --bootstrap <server> --table <table> <extra>...`.
    fn args<'a>(&'a self, verb: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![verb, "--bootstrap", &self.bootstrap, "--table", &self.table];
        args.extend_from_slice(extra);
        args
    }
}

const CSV: &str = "\
id,name,score,ts
1,alice,1.5,2026-11-30T10:00:00.001
2,bob,,2026-11-30T10:00:00.002

3,carol,3.25,2026-11-30T10:00:00.003
";

const JSON: &str = r#"{"id": 10, "name": "dave", "score": 0.5, "ts": "2026-11-30T11:00:00.010"}
{"id": 11, "name": null, "score": 2.0, "ts": "2026-11-30T11:00:00.011"}
"#;

/// The `id`s printed by a CSV scan whose first column is `id`, sorted.
fn csv_ids(out: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = out
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().expect("id"))
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn produced_csv_and_json_lines_scan_back_in_every_format() {
    let cli = Cli::start("people", 2);
    let file = cli.dir.path().join("people.csv");
    std::fs::write(&file, CSV).expect("write csv");
    let file = file.to_str().expect("utf-8 path");
    let produce_csv = cli.args("produce", &["--format", "csv", "--header", "--quiet", file]);
    let output = fjord(&produce_csv, "");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("produced 3 rows"),
        "summary: {}",
        stderr(&output)
    );
    // stderr is a pipe here: no progress line, whatever --quiet says.
    let loud = fjord(
        &cli.args("produce", &["--format", "csv", "--header", file]),
        "",
    );
    assert!(loud.status.success(), "{}", stderr(&loud));
    assert!(!stderr(&loud).contains('\r'), "{}", stderr(&loud));
    ok(&cli.args("produce", &["--format", "json", "-"]), JSON);

    // CSV: every row, header first, nulls empty.
    let scan = |extra: &[&str]| -> String {
        let mut args = cli.args("scan", &["--quiet"]);
        args.extend_from_slice(extra);
        ok(&args, "")
    };
    let csv = scan(&["--format", "csv"]);
    assert_eq!(csv.lines().next(), Some("id,name,score,ts"), "{csv}");
    assert_eq!(csv_ids(&csv), vec![1, 1, 2, 2, 3, 3, 10, 11]);
    assert!(csv.contains("2,bob,,2026-11-30T10:00:00.002"), "{csv}");

    // JSON lines: one object per row, the null name left out.
    let json = scan(&["--format", "json"]);
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(rows.len(), 8);
    let dave = rows.iter().find(|r| r["id"] == 10).expect("dave");
    assert_eq!(dave["name"], "dave");
    assert_eq!(dave["score"], 0.5);
    let eleven = rows.iter().find(|r| r["id"] == 11).expect("row 11");
    assert!(eleven.get("name").is_none() || eleven["name"].is_null());

    // Table: a header row and every name.
    let pretty = scan(&[]);
    assert!(pretty.lines().any(|l| l.contains("| id ")), "{pretty}");
    for name in ["alice", "bob", "carol", "dave", "NULL"] {
        assert!(pretty.contains(name), "{name} missing from\n{pretty}");
    }

    // Projection in a different order than the table's.
    let projected = scan(&["--format", "csv", "--columns", "name,id"]);
    assert_eq!(projected.lines().next(), Some("name,id"), "{projected}");
    assert!(projected.lines().any(|l| l == "carol,3"), "{projected}");

    // Scanner options by their Fluss names: tiny fetches still read everything.
    let small = scan(&[
        "--format",
        "csv",
        "--set",
        "client.scanner.log.fetch.max-bytes-for-bucket=1b",
    ]);
    assert_eq!(csv_ids(&small), csv_ids(&csv));

    // Limit.
    let limited = scan(&["--format", "csv", "--limit", "2"]);
    assert_eq!(limited.lines().count(), 1 + 2, "{limited}");

    // From latest: nothing; from past the end: nothing, and no error.
    assert_eq!(
        scan(&["--format", "csv", "--from", "latest"])
            .lines()
            .count(),
        0
    );
    assert_eq!(
        scan(&["--format", "csv", "--from", "1000"]).lines().count(),
        0
    );
    let all = csv_ids(&csv).len();

    // From a timestamp: everything was committed after the distant past; a
    // time in the future is refused by the server, and the message says so.
    assert_eq!(
        csv_ids(&scan(&["--format", "csv", "--from", "ts:0"])).len(),
        all
    );
    let message = fails(&cli.args("scan", &["--from", "ts:4102444800000"]), "");
    assert!(message.contains("future"), "{message}");
}

#[test]
fn a_scan_from_an_offset_starts_there() {
    let cli = Cli::start("ordered", 1);
    let produce = cli.args("produce", &["--header", "-q"]);
    ok(&produce, CSV);
    ok(&produce, CSV);
    let scan = |from: &str| -> Vec<i64> {
        let args = cli.args("scan", &["-q", "--format", "csv", "--from", from]);
        // One bucket: offsets are the order of the rows as produced.
        ok(&args, "")
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap().parse().expect("id"))
            .collect()
    };
    assert_eq!(scan("earliest"), vec![1, 2, 3, 1, 2, 3]);

    // A header may name the columns in another order; a wrong one is refused.
    let reordered = "ts,score,name,id\n2026-11-30T12:00:00,8.5,hana,8\n";
    ok(&produce, reordered);
    assert_eq!(scan("6"), vec![8]);
    let message = fails(&produce, "id,name,score\n1,a,1.0\n");
    assert!(
        message.contains("line 1") && message.contains("header"),
        "{message}"
    );

    // A third input after the clock passed a point later than every commit
    // so far: scanning from that point returns the third input only.
    let between = now_millis() + 1;
    while now_millis() <= between {
        std::thread::yield_now();
    }
    ok(
        &produce,
        "id,name,score,ts\n7,gina,7.0,2026-11-30T12:00:00\n",
    );
    assert_eq!(scan(&format!("ts:{between}")), vec![7]);
    assert_eq!(scan("earliest").len(), 8);
    assert_eq!(scan("1"), vec![2, 3, 1, 2, 3, 8, 7]);
    assert_eq!(scan("4"), vec![2, 3, 8, 7]);
    assert_eq!(scan("8"), Vec::<i64>::new());
}

#[test]
fn bad_input_fails_naming_the_line_and_column() {
    let cli = Cli::start("strict", 1);
    let csv = "1,a,1.0,2026-11-30T10:00:00\n2,b,oops,2026-11-30T10:00:00\n";
    let message = fails(&cli.args("produce", &["--format", "csv"]), csv);
    assert!(message.contains("line 2"), "{message}");
    assert!(message.contains("score"), "{message}");

    let produce_json = cli.args("produce", &["--format", "json"]);
    let json = "{\"id\": 1}\n\n{\"id\": \"x\"}\n";
    let message = fails(&produce_json, json);
    assert!(message.contains("line 3"), "{message}");
    assert!(message.contains("id"), "{message}");
    let unknown = fails(&produce_json, "{\"id\": 1, \"nope\": 2}\n");
    assert!(
        unknown.contains("line 1") && unknown.contains("nope"),
        "{unknown}"
    );

    // Nothing of a failed input was written: the bad line was in the first batch.
    let out = ok(&cli.args("scan", &["--format", "csv", "-q"]), "");
    assert_eq!(out.lines().count(), 0, "{out}");
}

#[test]
fn unknown_tables_and_columns_are_clear_errors() {
    let cli = Cli::start("known", 1);
    let bootstrap = cli.bootstrap.as_str();
    let unknown_table = ["--bootstrap", bootstrap, "--table", "cli.nope"];

    let message = fails(&[&["scan"][..], &unknown_table].concat(), "");
    assert!(message.contains("cli.nope"), "{message}");
    let message = fails(
        &[&["produce"][..], &unknown_table].concat(),
        "1,a,1.0,2026-11-30T10:00:00\n",
    );
    assert!(message.contains("cli.nope"), "{message}");
    let message = fails(&cli.args("scan", &["--columns", "id,missing"]), "");
    assert!(message.contains("missing"), "{message}");
    let message = fails(&cli.args("scan", &["--columns", "id,id"]), "");
    assert!(message.contains("twice"), "{message}");
}

#[test]
fn partitioned_tables_are_produced_by_row_and_scanned_whole_or_by_partition() {
    let schema = Schema::builder()
        .column("id", DataType::bigint().not_null())
        .column("dt", DataType::string().not_null())
        .build()
        .expect("schema");
    let cli = Cli::start_with("events", schema, &["dt"], 2);
    let produce = cli.args("produce", &["--format", "json", "-q"]);
    // The writer creates each partition on first use.
    ok(
        &produce,
        "{\"id\": 1, \"dt\": \"20261129\"}\n{\"id\": 2, \"dt\": \"20261130\"}\n{\"id\": 3, \"dt\": \"20261130\"}\n",
    );
    let scan = |extra: &[&str]| -> Vec<i64> {
        let mut args = cli.args("scan", &["-q", "--format", "csv"]);
        args.extend_from_slice(extra);
        csv_ids(&ok(&args, ""))
    };
    assert_eq!(scan(&[]), vec![1, 2, 3]);

    // Following the whole table, a partition created after the scan showed
    // the existing rows (so after its first listing) is picked up.
    let args = cli.args(
        "scan",
        &["-q", "--follow", "--limit", "4", "--format", "csv"],
    );
    let mut follower = Watched::spawn(&args);
    let mut lines = Vec::new();
    while lines.len() < 4 {
        lines.push(follower.line().expect("the existing rows are shown"));
    }
    ok(&produce, "{\"id\": 4, \"dt\": \"20261201\"}\n");
    lines.push(follower.line().expect("the new partition's row is shown"));
    assert_eq!(csv_ids(&lines.concat()), vec![1, 2, 3, 4]);
    assert_eq!(follower.line(), None, "the scan ends at its limit");
    assert_eq!(scan(&["--partition", "20261130"]), vec![2, 3]);
    assert_eq!(scan(&["--partition", "20261201"]), vec![4]);
    assert_eq!(
        scan(&["--partition", "20261129", "--columns", "id"]),
        vec![1]
    );
    let message = fails(&cli.args("scan", &["--partition", "19990101"]), "");
    assert!(message.contains("19990101"), "{message}");
}

#[test]
fn a_scan_into_a_closed_pipe_ends_quietly() {
    let cli = Cli::start("many", 1);
    // Far more output than a pipe buffers, so the scan meets the closed pipe.
    let mut input = String::new();
    for i in 0..20_000 {
        input.push_str(&format!("{i},name-{i},{i}.5,2026-11-30T10:00:00\n"));
    }
    ok(&cli.args("produce", &["-q"]), &input);
    let mut child = Command::new(env!("CARGO_BIN_EXE_fjord"))
        .args(cli.args("scan", &["-q", "--format", "csv"]))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fjord scan");
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("the scan prints");
    drop(stdout);
    let output = child.wait_with_output().expect("wait for fjord scan");
    assert!(
        output.status.success(),
        "{}: {}",
        output.status,
        stderr(&output)
    );
    // Quietly: no broken-pipe error or panic message either.
    assert_eq!(stderr(&output).trim(), "", "the scan says nothing");
}

#[test]
fn a_following_scan_sees_rows_written_after_it_started() {
    let cli = Cli::start("live", 1);
    let produce = cli.args("produce", &["-q"]);
    ok(
        &produce,
        "1,a,1.0,2026-11-30T10:00:00\n2,b,2.0,2026-11-30T10:00:00\n",
    );
    // From offset 0, so whether the scan starts before or after the second
    // write does not matter: it must see all four rows and then stop.
    let follower = Command::new(env!("CARGO_BIN_EXE_fjord"))
        .args(cli.args(
            "scan",
            &[
                "-q", "--format", "csv", "--follow", "--limit", "4", "--from", "0",
            ],
        ))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fjord scan --follow");
    ok(
        &produce,
        "3,c,3.0,2026-11-30T10:00:00\n4,d,4.0,2026-11-30T10:00:00\n",
    );
    let output = wait_bounded(follower);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(csv_ids(&stdout(&output)), vec![1, 2, 3, 4]);
}

#[test]
fn a_following_scan_shows_rows_before_it_ends() {
    let cli = Cli::start("tail", 1);
    ok(
        &cli.args("produce", &["-q"]),
        "1,a,1.0,2026-11-30T10:00:00\n",
    );
    for format in ["json", "table"] {
        // No --limit: the scan never ends by itself, so the row must reach
        // stdout while it runs (not at exit, when buffers are flushed anyway).
        let mut follower =
            Watched::spawn(&cli.args("scan", &["-q", "--follow", "--format", format]));
        let mut seen = String::new();
        let mut found = false;
        while let Some(line) = follower.line() {
            seen.push_str(&line);
            if line.contains("\"a\"") || line.contains("| a ") {
                found = true;
                break;
            }
        }
        drop(follower);
        assert!(
            found,
            "{format}: the row did not appear while following:\n{seen}"
        );
    }
}
