//! The MariaDB source when the database goes away under a running
//! `fjord pipeline run` (`source: mysql`, `sink: fluss`, real processes):
//! - MariaDB shut down and started again mid-stream: the source logs its
//!   reconnect attempts, resumes the binlog where it stopped, and the Fjord
//!   tables (one with a primary key, one log table) end equal to MariaDB's,
//!   with no log row twice, in the same pipeline process;
//! - MariaDB shut down and started again twice mid-snapshot, once inside a
//!   chunked table (the chunk is read again on a new connection) and once
//!   inside a keyless table read whole in one consistent view (the run
//!   resumes from its last commit and reads that table again): the tables
//!   converge, with no log row twice, in the same pipeline process;
//! - MariaDB gone for good: after `connect.max-retries` attempts the
//!   pipeline exits non-zero with an error naming `host:port` and the
//!   option, instead of hanging.

mod support;

#[path = "../../fjord-cdc/tests/support/mod.rs"]
mod mariadb;

#[path = "support/mariadbd.rs"]
mod mariadbd;

#[path = "support/cdc.rs"]
mod cdc;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use cdc::{committed_data, full_log, full_log as log_of, io_runtime};
use fjord_client::{FlussClient, TablePath};
use mariadb::fjord::{scan_log, scan_pk, Owned};
use mariadb::{MariaDb, REPL_PASSWORD, REPL_USER};
use support::FjordServer;

/// Longest the test waits for the pipeline to catch up or exit before it
/// calls it a hang (a bound, not a measurement).
const HANG: Duration = Duration::from_secs(300);

fn pipeline_yaml(dir: &Path, db: &MariaDb, fjord: &FjordServer, max_retries: u32) -> PathBuf {
    yaml_with(
        dir,
        db,
        fjord,
        &format!("connect.max-retries: {max_retries}\n  heartbeat.interval: 1s"),
        "state.commit-interval-ms: 100",
    )
}

/// The test pipeline with `source` and `pipeline` option lines added
/// (each further line indented by two spaces).
fn yaml_with(
    dir: &Path,
    db: &MariaDb,
    fjord: &FjordServer,
    source: &str,
    pipeline: &str,
) -> PathBuf {
    let yaml = dir.join("pipeline.yaml");
    std::fs::write(
        &yaml,
        format!(
            "source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: {REPL_USER}
  password: {REPL_PASSWORD}
  tables: shop.\\.*
  server-id: 5401
  scan.startup.mode: initial
  {source}
sink:
  type: fluss
  name: Fjord
  bootstrap.servers: {servers}
pipeline:
  name: reconnect test
  state-dir: {state}
  {pipeline}
",
            port = db.port(),
            servers = fjord.bootstrap_servers(),
            state = dir.join("state").display(),
        ),
    )
    .expect("write pipeline yaml");
    yaml
}

/// MariaDB's rows of `shop.table` (INT and VARCHAR columns), sorted.
fn mariadb_rows(db: &MariaDb, table: &str) -> Vec<String> {
    let mut rows: Vec<String> = db
        .sql(&format!("SELECT * FROM shop.{table}"))
        .lines()
        .map(str::to_string)
        .collect();
    rows.sort();
    rows
}

/// Fjord's rows of the sink table `shop.table`, rendered as MariaDB prints
/// them, sorted (a log row held twice shows twice). Empty if the table is
/// not there yet.
fn fjord_rows(rt: &tokio::runtime::Runtime, fjord: &FjordServer, table: &str) -> Vec<String> {
    let client = rt
        .block_on(FlussClient::connect(&[fjord.bootstrap_servers()]))
        .expect("client connects");
    let Ok(info) = rt.block_on(client.refresh_table_info(&TablePath::new("shop", table))) else {
        return Vec::new();
    };
    let raw = if info.descriptor.has_primary_key() {
        rt.block_on(scan_pk(&client, &info))
    } else {
        rt.block_on(scan_log(&client, &info))
    };
    let mut rows: Vec<String> = raw
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| match v {
                    Owned::Null => "NULL".to_string(),
                    Owned::Int(i) => i.to_string(),
                    Owned::Str(s) => s.clone(),
                    other => panic!("unexpected value {other:?}"),
                })
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect();
    rows.sort();
    rows
}

/// Waits until both tables hold in Fjord what they hold in MariaDB; panics
/// with the pipeline's log if the pipeline exits or after [`HANG`].
fn wait_same(
    rt: &tokio::runtime::Runtime,
    fjord: &FjordServer,
    db: &MariaDb,
    dir: &Path,
    child: &mut Child,
    context: &str,
) {
    let deadline = Instant::now() + HANG;
    loop {
        let same = ["kv", "log"]
            .iter()
            .all(|t| fjord_rows(rt, fjord, t) == mariadb_rows(db, t));
        if same {
            return;
        }
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("{context}: the pipeline exited ({status})\n{}", log_of(dir));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{context}: Fjord did not reach MariaDB's rows within {HANG:?}\n\
                 kv: MariaDB {} rows, Fjord {}; log: MariaDB {}, Fjord {}\n{}",
                mariadb_rows(db, "kv").len(),
                fjord_rows(rt, fjord, "kv").len(),
                mariadb_rows(db, "log").len(),
                fjord_rows(rt, fjord, "log").len(),
                log_of(dir)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn create_tables(db: &MariaDb) {
    let mut sql = String::from(
        "CREATE DATABASE shop;
         CREATE TABLE shop.kv (id INT PRIMARY KEY, v VARCHAR(20));
         CREATE TABLE shop.log (n INT, tag VARCHAR(10));\n",
    );
    for i in 0..100 {
        sql.push_str(&format!(
            "INSERT INTO shop.kv VALUES ({i}, 'v{i}'); INSERT INTO shop.log VALUES ({}, 't');\n",
            i % 5
        ));
    }
    db.sql(&sql);
}

#[test]
fn mariadb_restarted_mid_stream_the_pipeline_reconnects_and_converges() {
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let rt = io_runtime();
    create_tables(&db);
    // Enough retries to outlast a restart (waits of 1, 2, 4, 8... s).
    let yaml = pipeline_yaml(dir.path(), &db, &fjord, 10);
    let mut child = cdc::spawn_pipeline_with(dir.path(), &yaml, false);
    wait_same(
        &rt,
        &fjord,
        &db,
        dir.path(),
        &mut child,
        "after the snapshot",
    );
    db.sql("INSERT INTO shop.kv VALUES (1000, 'binlog'); INSERT INTO shop.log VALUES (9, 'b');");
    wait_same(
        &rt,
        &fjord,
        &db,
        dir.path(),
        &mut child,
        "in the binlog phase",
    );

    mariadbd::shutdown(&db);
    let _restarted = mariadbd::start_again(&db);
    db.sql(
        "UPDATE shop.kv SET v = 'after restart' WHERE id % 3 = 0;
         DELETE FROM shop.kv WHERE id % 7 = 0;
         INSERT INTO shop.kv VALUES (2000, 'new');
         INSERT INTO shop.log VALUES (1, 't'), (1, 't'), (2, 'r');",
    );
    wait_same(
        &rt,
        &fjord,
        &db,
        dir.path(),
        &mut child,
        "after the restart",
    );
    let log = log_of(dir.path());
    assert!(
        log.contains(&format!(
            "binlog connection to 127.0.0.1:{} lost",
            db.port()
        )),
        "the source did not log its reconnect attempt\n{log}"
    );
    assert!(
        log.contains("restored at"),
        "the source did not log the restored connection\n{log}"
    );
    // The same process resumed: no second snapshot (that would also write
    // the log table's rows twice, which `wait_same` would have refused).
    assert!(
        child.try_wait().expect("wait").is_none(),
        "the pipeline exited\n{log}"
    );
    // SAFETY: kill(2) on the pid of a child we own and have not reaped.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill(SIGTERM)");
    let status = cdc::wait_exit(dir.path(), &mut child, HANG);
    assert!(status.success(), "{status}\n{}", log_of(dir.path()));
}

#[test]
fn mariadb_gone_for_good_fails_the_pipeline_naming_the_server() {
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let rt = io_runtime();
    create_tables(&db);
    let yaml = pipeline_yaml(dir.path(), &db, &fjord, 2);
    let mut child = cdc::spawn_pipeline_with(dir.path(), &yaml, false);
    wait_same(
        &rt,
        &fjord,
        &db,
        dir.path(),
        &mut child,
        "after the snapshot",
    );

    mariadbd::shutdown(&db);
    let status = cdc::wait_exit(dir.path(), &mut child, HANG);
    let log = log_of(dir.path());
    assert!(!status.success(), "the pipeline exited cleanly\n{log}");
    let server = format!("127.0.0.1:{}", db.port());
    let error = log
        .lines()
        .rev()
        .find(|l| l.contains("connect.max-retries"))
        .unwrap_or_else(|| panic!("no error naming connect.max-retries\n{log}"));
    assert!(
        error.contains(&server),
        "the error does not name {server}: {error}"
    );
    // Each attempt was logged: 1 + 2 retries.
    let attempts = log
        .matches(&format!("binlog connection to {server} lost"))
        .count();
    assert_eq!(attempts, 3, "reconnect attempts logged\n{log}");
}

/// Waits until `done` holds of the committed position text and the log;
/// panics with the log if the pipeline exits or after [`HANG`].
fn wait_until(dir: &Path, child: &mut Child, what: &str, done: impl Fn(&str, &str) -> bool) {
    let deadline = Instant::now() + HANG;
    while !done(&committed_data(dir).unwrap_or_default(), &log_of(dir)) {
        if let Some(status) = child.try_wait().expect("wait") {
            panic!(
                "waiting for {what}: the pipeline exited ({status})\n{}",
                log_of(dir)
            );
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {HANG:?}\n{}",
            log_of(dir)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn mariadb_restarted_mid_snapshot_the_pipeline_reads_again_and_converges() {
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let rt = io_runtime();
    // kv is chunked by its integer key (100 chunks), then log (no key) is
    // read whole; both are big enough to be cut mid-read.
    let (kv_rows, log_rows) = (100_000, 300_000);
    db.sql(
        "CREATE DATABASE shop;
         CREATE TABLE shop.kv (id INT PRIMARY KEY, v VARCHAR(20));
         CREATE TABLE shop.log (n INT, tag VARCHAR(10));",
    );
    for start in (0..kv_rows).step_by(10_000) {
        let values: Vec<String> = (start..start + 10_000)
            .map(|i| format!("({i}, 'v{i}')"))
            .collect();
        db.sql(&format!("INSERT INTO shop.kv VALUES {};", values.join(",")));
    }
    for start in (0..log_rows).step_by(10_000) {
        let values: Vec<String> = (start..start + 10_000)
            .map(|i| format!("({}, 't{}')", i % 5, i % 3))
            .collect();
        db.sql(&format!(
            "INSERT INTO shop.log VALUES {};",
            values.join(",")
        ));
    }
    let yaml = yaml_with(
        dir.path(),
        &db,
        &fjord,
        "scan.incremental.snapshot.chunk.size: 1000\n  connect.max-retries: 10",
        "state.commit-interval-ms: 50\n  progress.interval-ms: 100",
    );
    let mut child = cdc::spawn_pipeline_with(dir.path(), &yaml, false);
    let kv_hex: String = "kv".bytes().map(|b| format!("{b:02x}")).collect();
    let log_hex: String = "log".bytes().map(|b| format!("{b:02x}")).collect();

    // 1. Inside the chunked table: some chunks committed, not all.
    wait_until(
        dir.path(),
        &mut child,
        "a committed chunk of shop.kv",
        |data, _| {
            data.split(';')
                .any(|r| r.starts_with(&format!("C,73686f70,{kv_hex},0,")))
        },
    );
    mariadbd::shutdown(&db);
    let mut restarted = vec![mariadbd::start_again(&db)];
    assert!(
        !committed_data(dir.path())
            .unwrap_or_default()
            .contains(&format!("C,73686f70,{kv_hex},1")),
        "shop.kv's snapshot finished before MariaDB went away: the test proves nothing"
    );

    // 2. Inside the table read whole: its rows reach the sink, its read is
    // not finished (no record of it in the committed progress).
    wait_until(
        dir.path(),
        &mut child,
        "rows of shop.log in the sink",
        |data, log| {
            !data.contains(&format!("W,73686f70,{log_hex},"))
                && log
                    .lines()
                    .rev()
                    .take(5)
                    .any(|l| l.contains("shop.log") && l.contains("pipeline progress"))
        },
    );
    mariadbd::shutdown(&db);
    restarted.push(mariadbd::start_again(&db));

    wait_same(
        &rt,
        &fjord,
        &db,
        dir.path(),
        &mut child,
        "after two restarts mid-snapshot",
    );
    let log = full_log(dir.path());
    assert!(
        log.contains("reading the chunk after key"),
        "the chunk was not read again after the first restart\n{log}"
    );
    assert!(
        log.contains("one consistent view")
            && log.contains("resuming from the last committed position"),
        "the whole read was not resumed after the second restart\n{log}"
    );
    assert!(
        child.try_wait().expect("wait").is_none(),
        "the pipeline exited\n{log}"
    );
    // SAFETY: kill(2) on the pid of a child we own and have not reaped.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill(SIGTERM)");
    let status = cdc::wait_exit(dir.path(), &mut child, HANG);
    assert!(status.success(), "{status}\n{}", log_of(dir.path()));
    drop(restarted);
}
