//! The chunked, resumable snapshot of the MariaDB source under a real
//! `fjord pipeline run` (`sink: fluss`, real processes):
//! - a table of many chunks (`scan.incremental.snapshot.chunk.size`),
//!   written to (updates, deletes, inserts, key changes) during the whole
//!   run that snapshots it, next to a table read whole (composite key) and
//!   a log table: after catching up, every Fjord table equals MariaDB's;
//! - rows a killed run delivered but never committed, of keys MariaDB
//!   deleted or moved before the next run, do not outlive the next run;
//! - a pipeline SIGKILLed mid-snapshot commits its finished chunks: the
//!   state it left records them, the next run resumes after the last one
//!   (it delivers fewer rows than the tables hold), and the tables converge
//!   with no log row twice.

mod support;

#[path = "../../fjord-cdc/tests/support/mod.rs"]
mod mariadb;

#[path = "support/cdc.rs"]
mod cdc;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cdc::{committed_data, full_log, log_of, run_to_current, spawn_pipeline, spawn_pipeline_with};
use fjord_client::{FlussClient, TablePath};
use mariadb::fjord::{scan_log, scan_pk, Owned};
use mariadb::{MariaDb, REPL_PASSWORD, REPL_USER};
use support::FjordServer;

/// Longest one run may take before the test calls it a hang (a bound, not
/// a measurement).
const HANG: Duration = Duration::from_secs(300);

const TABLES: [&str; 3] = ["kv", "log", "pairs"];

fn pipeline_yaml(dir: &Path, db: &MariaDb, fjord: &FjordServer, chunk_rows: u32) -> PathBuf {
    pipeline_yaml_committing(dir, db, fjord, chunk_rows, 20)
}

fn pipeline_yaml_committing(
    dir: &Path,
    db: &MariaDb,
    fjord: &FjordServer,
    chunk_rows: u32,
    commit_ms: u64,
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
  server-id: 5402
  scan.startup.mode: initial
  scan.incremental.snapshot.chunk.size: {chunk_rows}
sink:
  type: fluss
  name: Fjord
  bootstrap.servers: {servers}
pipeline:
  name: chunked snapshot test
  state-dir: {state}
  state.commit-interval-ms: {commit_ms}
",
            port = db.port(),
            servers = fjord.bootstrap_servers(),
            state = dir.join("state").display(),
        ),
    )
    .expect("write pipeline yaml");
    yaml
}

fn mariadb_rows(db: &MariaDb, table: &str) -> Vec<String> {
    let mut rows: Vec<String> = db
        .sql(&format!("SELECT * FROM shop.{table}"))
        .lines()
        .map(str::to_string)
        .collect();
    rows.sort();
    rows
}

/// Fjord's rows of `shop.table` rendered as MariaDB prints them, sorted (a
/// log row held twice shows twice).
fn fjord_rows(rt: &tokio::runtime::Runtime, fjord: &FjordServer, table: &str) -> Vec<String> {
    let client = rt
        .block_on(FlussClient::connect(&[fjord.bootstrap_servers()]))
        .expect("client connects");
    let info = rt
        .block_on(client.refresh_table_info(&TablePath::new("shop", table)))
        .unwrap_or_else(|e| panic!("sink table shop.{table}: {e}"));
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

fn assert_same(rt: &tokio::runtime::Runtime, fjord: &FjordServer, db: &MariaDb, context: &str) {
    for table in TABLES {
        let expected = mariadb_rows(db, table);
        let got = fjord_rows(rt, fjord, table);
        if got != expected {
            let missing: Vec<&String> = expected.iter().filter(|r| !got.contains(r)).collect();
            let extra: Vec<&String> = got.iter().filter(|r| !expected.contains(r)).collect();
            panic!(
                "{context}: shop.{table} differs: {} rows in MariaDB, {} in Fjord\n\
                 first missing from Fjord: {:?}\nfirst extra in Fjord: {:?}",
                expected.len(),
                got.len(),
                missing.iter().take(5).collect::<Vec<_>>(),
                extra.iter().take(5).collect::<Vec<_>>(),
            );
        }
    }
}

fn io_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

/// `kv_rows` keyed rows, a table with a composite key and a log table.
fn create_tables(db: &MariaDb, kv_rows: i64) {
    db.sql(
        "CREATE DATABASE shop;
         CREATE TABLE shop.kv (id BIGINT PRIMARY KEY, v INT, s VARCHAR(20));
         CREATE TABLE shop.pairs (a INT, b INT, w VARCHAR(20), PRIMARY KEY (a, b));
         CREATE TABLE shop.log (n INT, tag VARCHAR(10));",
    );
    let mut start = 1;
    while start <= kv_rows {
        let end = (start + 9_999).min(kv_rows);
        let values: Vec<String> = (start..=end)
            .map(|i| format!("({i}, {}, 's{i}')", i % 1000))
            .collect();
        db.sql(&format!("INSERT INTO shop.kv VALUES {};", values.join(",")));
        start = end + 1;
    }
    let pairs: Vec<String> = (0..50)
        .map(|i| format!("({}, {i}, 'w{i}')", i % 5))
        .collect();
    // Few distinct rows: a log table must hold each equal row.
    let log: Vec<String> = (0..200)
        .map(|i| format!("({}, 't{}')", i % 7, i % 3))
        .collect();
    db.sql(&format!(
        "INSERT INTO shop.pairs VALUES {}; INSERT INTO shop.log VALUES {};",
        pairs.join(","),
        log.join(",")
    ));
}

#[test]
fn a_snapshot_of_many_chunks_written_to_meanwhile_equals_mariadb() {
    let db = Arc::new(MariaDb::start());
    let data = tempfile::tempdir().expect("fjord data dir");
    let fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let rt = io_runtime();
    let kv_rows = 6_000;
    create_tables(&db, kv_rows);
    // 60 chunks.
    let yaml = pipeline_yaml(dir.path(), &db, &fjord, 100);

    // Writes across the whole key range for as long as the first run lasts.
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let db = Arc::clone(&db);
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut round = 0i64;
            while !done.load(Ordering::Relaxed) {
                let k = (round * 977) % kv_rows + 1;
                db.sql(&format!(
                    "UPDATE shop.kv SET v = v + 1, s = 'u{round}' WHERE id IN ({k}, {}, {});
                     DELETE FROM shop.kv WHERE id = {};
                     INSERT INTO shop.kv VALUES ({}, {round}, 'new') ON DUPLICATE KEY UPDATE v = -1;
                     UPDATE IGNORE shop.kv SET id = id + 1000000 WHERE id = {};
                     INSERT INTO shop.log VALUES (1, 't0');
                     UPDATE shop.pairs SET w = 'p{round}' WHERE a = {};",
                    (k + 1) % kv_rows + 1,
                    (k * 7) % kv_rows + 1,
                    (k * 13) % kv_rows + 1,
                    (k * 31) % (kv_rows * 2) + 1,
                    (k * 17) % kv_rows + 1,
                    round % 5,
                ));
                round += 1;
            }
            round
        })
    };
    let first = run_to_current(dir.path(), &yaml);
    done.store(true, Ordering::Relaxed);
    let rounds = writer.join().expect("writer");
    assert!(rounds > 0, "no write happened during the snapshot");
    assert!(
        first["events"].as_u64().unwrap_or(0) >= kv_rows as u64 / 2,
        "{first}"
    );
    // The second run reads the binlog up to now (writes after the first
    // run's stop point), with the snapshot's skip rule where it applies.
    run_to_current(dir.path(), &yaml);
    assert_same(&rt, &fjord, &db, "after the snapshot and the binlog");
}

/// The last finished chunk's upper key of `shop.kv` in a committed
/// snapshot position (`chunks2;...;C,<db hex>,<table hex>,<done>,<upper>,<file>,<pos>...`),
/// if the position is a snapshot's with at least one finished chunk of it
/// and the table not done.
fn finished_kv_chunks_upper(data: &str) -> Option<i64> {
    let kv_hex: String = "kv".bytes().map(|b| format!("{b:02x}")).collect();
    let record = data
        .split(';')
        .find(|r| r.starts_with("C,") && r.split(',').nth(2) == Some(kv_hex.as_str()))?;
    let fields: Vec<&str> = record.split(',').collect();
    if fields.get(3) != Some(&"0") || fields.len() < 7 {
        return None;
    }
    fields[fields.len() - 3].parse().ok()
}

#[test]
fn a_pipeline_killed_mid_snapshot_resumes_after_its_finished_chunks() {
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let rt = io_runtime();
    let kv_rows = 100_000;
    create_tables(&db, kv_rows);
    let total_rows = kv_rows as u64 + 50 + 200;
    // 200 chunks.
    let yaml = pipeline_yaml(dir.path(), &db, &fjord, 500);

    let mut child = spawn_pipeline(dir.path(), &yaml);
    let deadline = Instant::now() + HANG;
    let upper = loop {
        if let Some(upper) = committed_data(dir.path())
            .as_deref()
            .and_then(finished_kv_chunks_upper)
        {
            if upper >= 1_000 {
                break upper;
            }
        }
        if let Some(status) = child.try_wait().expect("wait") {
            panic!(
                "the pipeline ended ({status}) before it was seen mid-snapshot with a finished \
                 chunk committed\n{}",
                log_of(dir.path())
            );
        }
        assert!(
            Instant::now() < deadline,
            "no chunk committed within {HANG:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    child.kill().expect("SIGKILL the pipeline");
    let _ = child.wait();
    // What the killed run left: the state it resumes from.
    let data_after_kill = committed_data(dir.path()).expect("a committed position");
    let resume_after = finished_kv_chunks_upper(&data_after_kill).unwrap_or_else(|| {
        panic!("the committed position is not mid-snapshot of shop.kv: {data_after_kill}")
    });
    assert!(resume_after >= upper, "{resume_after} < {upper}");
    assert!(resume_after < kv_rows, "{data_after_kill}");

    let summary = run_to_current(dir.path(), &yaml);
    let events = summary["events"].as_u64().expect("events");
    let left = (kv_rows - resume_after) as u64;
    // The resumed run re-read nothing before the last finished chunk: it
    // delivered the rows after it (its current chunk included) and the
    // other tables, not the whole snapshot again.
    assert!(
        events >= left && events < total_rows,
        "resumed after key {resume_after}: {events} events (expected {left}..{total_rows})\n{summary}"
    );
    assert!(
        full_log(dir.path()).contains("resuming the snapshot"),
        "{}",
        log_of(dir.path())
    );
    assert_same(&rt, &fjord, &db, "after the resumed snapshot");
}

/// Rows of `shop.table` in Fjord, or None while the table does not exist.
fn fjord_row_count(
    rt: &tokio::runtime::Runtime,
    fjord: &FjordServer,
    table: &str,
) -> Option<usize> {
    let client = rt
        .block_on(FlussClient::connect(&[fjord.bootstrap_servers()]))
        .ok()?;
    let info = rt
        .block_on(client.refresh_table_info(&TablePath::new("shop", table)))
        .ok()?;
    Some(if info.descriptor.has_primary_key() {
        rt.block_on(scan_pk(&client, &info)).len()
    } else {
        rt.block_on(scan_log(&client, &info)).len()
    })
}

/// A run that delivered the whole snapshot to Fjord and was killed before
/// it committed any of it, then deletes and key changes in MariaDB: the
/// next run reads every table again, as of a later binlog position, and
/// must still delete in Fjord the rows the killed run delivered for keys
/// MariaDB no longer has, in a chunked table and in one read whole (a new
/// read alone never deletes; the binlog events that do are older than the
/// new read, so the resumed snapshot must not skip them), also across a
/// column added meanwhile (the replay decodes the older events with the
/// schema they were written under).
#[test]
fn rows_a_killed_run_delivered_uncommitted_go_when_mariadb_deleted_them_since() {
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let rt = io_runtime();
    let kv_rows = 2_000;
    create_tables(&db, kv_rows);
    // Four chunks; no commit of a position within the run's life.
    let yaml = pipeline_yaml_committing(dir.path(), &db, &fjord, 500, 3_600_000);

    // Runs until killed (no --until-current, whose end commits).
    let mut child = spawn_pipeline_with(dir.path(), &yaml, false);
    let deadline = Instant::now() + HANG;
    let expected = [("kv", kv_rows as usize), ("pairs", 50), ("log", 200)];
    while !expected
        .iter()
        .all(|(t, n)| fjord_row_count(&rt, &fjord, t) == Some(*n))
    {
        if let Some(status) = child.try_wait().expect("wait") {
            panic!(
                "the pipeline ended ({status}) before its snapshot reached Fjord\n{}",
                log_of(dir.path())
            );
        }
        assert!(
            Instant::now() < deadline,
            "the snapshot did not reach Fjord within {HANG:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL the pipeline");
    let _ = child.wait();
    // The killed run committed no finished table: the next run reads all again.
    if let Some(data) = committed_data(dir.path()) {
        assert!(
            !data
                .split(';')
                .any(|r| r.starts_with("C,") || r.starts_with("W,")),
            "the killed run committed snapshot progress: {data}"
        );
    }

    // Deletes and key changes, then a column added and more changes: the
    // binlog replay from the floor crosses the DDL.
    db.sql(
        "DELETE FROM shop.kv WHERE id % 7 = 0;
         UPDATE shop.kv SET id = id + 1000000 WHERE id % 11 = 0;
         DELETE FROM shop.pairs WHERE b % 3 = 0;
         UPDATE shop.pairs SET b = b + 100 WHERE b % 4 = 1;
         INSERT INTO shop.log VALUES (9, 'after');
         ALTER TABLE shop.kv ADD COLUMN extra INT;
         UPDATE shop.kv SET extra = id % 3 WHERE id % 5 = 0;
         DELETE FROM shop.kv WHERE id % 13 = 0;",
    );
    run_to_current(dir.path(), &yaml);
    assert_same(
        &rt,
        &fjord,
        &db,
        "after a run that delivered without committing",
    );
}
