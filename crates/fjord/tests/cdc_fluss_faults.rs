//! `fjord pipeline run` (MariaDB → `sink: fluss`) while the Fjord server it
//! writes to goes away, all real processes:
//! - `fjord server` killed with SIGKILL and started again on the same port
//!   and data dir, once during the snapshot and once during the binlog
//!   phase (with rows written to MariaDB while it is down): the pipeline
//!   waits, resumes from its last committed position, and every Fjord table
//!   ends equal to its MariaDB table value by value, no log-table row twice;
//! - `fjord server` killed for good: the pipeline gives up after its retry
//!   budget and exits non-zero with an error naming the server.
//!
//! Kills are triggered by what the pipeline's log shows (tables created,
//! the outage noticed), never by elapsed time; the only time bounds are
//! outer ones that turn a hang into a failure.

mod support;

#[path = "../../fjord-cdc/tests/support/mod.rs"]
mod mariadb;

#[path = "support/cdc.rs"]
mod cdc;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cdc::{
    all_same, assert_same, full_log, io_runtime, log_of, spawn_pipeline_with, wait_exit,
    wait_for_log,
};
use mariadb::{MariaDb, REPL_PASSWORD, REPL_USER};
use support::FjordServer;

/// Outer bound of each wait on the pipeline (a hang bound on a loaded
/// 2-core machine with debug builds, not a measurement).
const HANG: Duration = Duration::from_secs(300);

/// The log line the pipeline writes each time it finds the server away.
const OUTAGE_NOTICED: &str = "is unavailable";

/// Rows per table before the pipeline starts (the snapshot).
const SNAPSHOT_ROWS: i64 = 20_000;

/// The pipeline definition: every `shop` table into `fjord`, commits every
/// 100 ms, with `extra_sink` lines appended to the sink's options.
fn pipeline_yaml(dir: &Path, db: &MariaDb, fjord: &FjordServer, extra_sink: &str) -> PathBuf {
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
sink:
  type: fluss
  bootstrap.servers: {servers}
  bucket.num: shop.kv:2;shop.log:2
{extra_sink}
pipeline:
  name: MariaDB to Fjord, server faults
  state-dir: {state}
  state.commit-interval-ms: 100
  progress.interval-ms: 500
",
            port = db.port(),
            servers = fjord.bootstrap_servers(),
            state = dir.join("state").display(),
        ),
    )
    .expect("write pipeline yaml");
    yaml
}

fn create_tables(db: &MariaDb) {
    db.sql(
        "CREATE DATABASE shop;
         CREATE TABLE shop.kv (id BIGINT PRIMARY KEY, v INT, s VARCHAR(40));
         CREATE TABLE shop.log (n INT, tag VARCHAR(20), at DATETIME(3));",
    );
}

/// Inserts `count` rows into each table from `first` on; the log table
/// gets many equal rows on purpose (each must be held exactly as often as
/// MariaDB holds it).
fn insert_rows(db: &MariaDb, first: i64, count: i64) {
    let mut sql = String::new();
    for chunk in (first..first + count).collect::<Vec<_>>().chunks(1000) {
        let kv: Vec<String> = chunk
            .iter()
            .map(|i| format!("({i}, {}, 'row {i}')", i % 97))
            .collect();
        let log: Vec<String> = chunk
            .iter()
            .map(|i| {
                format!(
                    "({}, 'tag{}', '2024-01-01 00:00:0{}.{:03}')",
                    i % 5,
                    i % 3,
                    i % 10,
                    i % 7
                )
            })
            .collect();
        sql.push_str(&format!(
            "INSERT INTO shop.kv VALUES {};\nINSERT INTO shop.log VALUES {};\n",
            kv.join(","),
            log.join(",")
        ));
    }
    db.sql(&sql);
}

/// Updates and deletes in the primary-key table (binlog phase).
fn change_rows(db: &MariaDb, round: i64) {
    db.sql(&format!(
        "UPDATE shop.kv SET v = v + 1, s = 'round {round}' WHERE id % 7 = {r7};
         DELETE FROM shop.kv WHERE id % 53 = {r53};
         INSERT INTO shop.log VALUES (1, 'tag0', NULL), (1, 'tag0', NULL);",
        r7 = round % 7,
        r53 = round % 53,
    ));
}

/// Waits until the Fjord tables equal MariaDB's; panics with the
/// difference and the pipeline's log after [`HANG`].
fn wait_until_same(
    rt: &tokio::runtime::Runtime,
    fjord: &FjordServer,
    db: &MariaDb,
    dir: &Path,
    tables: &[&str],
) {
    let deadline = Instant::now() + HANG;
    while !all_same(rt, fjord, db, tables) {
        if Instant::now() > deadline {
            eprintln!("pipeline log:\n{}", log_of(dir));
            assert_same(rt, fjord, db, tables, "the pipeline did not catch up");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Sends SIGTERM (a clean stop: the last position is committed).
fn terminate(child: &std::process::Child) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
    // SAFETY: kill(2) on the pid of a child we own and have not reaped yet.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill(SIGTERM): {}", std::io::Error::last_os_error());
}

#[test]
fn a_fjord_server_killed_and_restarted_mid_run_loses_nothing_and_holds_no_log_row_twice() {
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let mut fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let yaml = pipeline_yaml(dir.path(), &db, &fjord, "");
    let rt = io_runtime();
    let tables = ["kv", "log"];
    create_tables(&db);
    insert_rows(&db, 0, SNAPSHOT_ROWS);

    let mut pipeline = spawn_pipeline_with(dir.path(), &yaml, false);
    // The snapshot phase: the sink tables exist, rows are being written.
    wait_for_log(dir.path(), &mut pipeline, "created sink table", 2, HANG);
    kill_and_restart_once_noticed(&mut fjord, dir.path(), &mut pipeline, &db, None);
    wait_until_same(&rt, &fjord, &db, dir.path(), &tables);

    // The binlog phase: changes flowing, the server killed among them, more
    // changes while it is down.
    let mut next = SNAPSHOT_ROWS;
    for round in 0..3 {
        insert_rows(&db, next, 2000);
        change_rows(&db, round);
        next += 2000;
    }
    kill_and_restart_once_noticed(&mut fjord, dir.path(), &mut pipeline, &db, Some(next));
    next += 2000;
    for round in 3..6 {
        change_rows(&db, round);
        insert_rows(&db, next, 1000);
        next += 1000;
    }
    wait_until_same(&rt, &fjord, &db, dir.path(), &tables);

    terminate(&pipeline);
    let status = wait_exit(dir.path(), &mut pipeline, HANG);
    assert!(
        status.success(),
        "clean stop failed: {status}\n{}",
        log_of(dir.path())
    );
    assert_same(&rt, &fjord, &db, &tables, "after the pipeline stopped");
    let log = full_log(dir.path());
    assert!(
        log.matches(OUTAGE_NOTICED).count() >= 2,
        "each outage is logged\n{}",
        log_of(dir.path())
    );
}

/// Kills the server (SIGKILL), writes rows from `rows_from` (2000 of them)
/// to MariaDB while it is down if asked, waits until the pipeline's log
/// shows it noticed, and starts the server again on the same port and dir.
fn kill_and_restart_once_noticed(
    fjord: &mut FjordServer,
    dir: &Path,
    pipeline: &mut std::process::Child,
    db: &MariaDb,
    rows_from: Option<i64>,
) {
    let noticed = full_log(dir).matches(OUTAGE_NOTICED).count();
    fjord.kill();
    if let Some(first) = rows_from {
        insert_rows(db, first, 2000);
    }
    wait_for_log(dir, pipeline, OUTAGE_NOTICED, noticed + 1, HANG);
    let listen = fjord.addr().to_string();
    let data_dir = fjord.data_dir().to_path_buf();
    *fjord = FjordServer::start_listening(&data_dir, &listen);
}

#[test]
fn a_fjord_server_gone_for_good_fails_the_pipeline_with_an_error_naming_it() {
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let mut fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    // A small budget keeps the test short; the default is larger.
    let yaml = pipeline_yaml(
        dir.path(),
        &db,
        &fjord,
        "  properties.client.writer.retries: 2",
    );
    create_tables(&db);
    insert_rows(&db, 0, 100);
    let mut pipeline = spawn_pipeline_with(dir.path(), &yaml, false);
    wait_for_log(dir.path(), &mut pipeline, "created sink table", 2, HANG);
    let server = fjord.bootstrap_servers();
    fjord.kill();
    insert_rows(&db, 100, 100);
    let status = wait_exit(dir.path(), &mut pipeline, HANG);
    assert!(
        !status.success(),
        "the pipeline must fail\n{}",
        log_of(dir.path())
    );
    // The error's cause, as the binary prints it (`Caused by:` and the
    // cause on the next line).
    let log = full_log(dir.path());
    let cause = log
        .lines()
        .skip_while(|l| !l.starts_with("Caused by:"))
        .nth(1)
        .unwrap_or_else(|| panic!("no error cause printed\n{}", log_of(dir.path())));
    assert!(
        cause.contains(&server) && cause.contains(OUTAGE_NOTICED),
        "the error names the server ({server}) and the outage: {cause}"
    );
    assert!(
        cause.contains("Connection refused"),
        "and the cause: {cause}"
    );
}
