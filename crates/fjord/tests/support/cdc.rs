//! What the CDC tests against real processes share: MariaDB's and Fjord's
//! rows of a table in one canonical text per MariaDB type, compared value by
//! value, and `fjord pipeline run` as a child process with its output in
//! files (see `cdc_fluss_mariadb.rs` for what the canonical texts are).
//!
//! Included with `#[path = "support/cdc.rs"] mod cdc;` next to `mod support;`
//! and the MariaDB harness as `mod mariadb;`.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fjord_client::{FlussClient, TablePath};

use crate::mariadb::fjord::{scan_log, scan_pk, Owned};
use crate::mariadb::MariaDb;
use crate::support::FjordServer;

/// Longest one `--until-current` run may take before the test calls it a
/// hang (debug build, small data, a loaded 2-core machine).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// A MariaDB column: name, `DATA_TYPE`, `COLUMN_TYPE`.
pub struct MyColumn {
    pub name: String,
    pub data_type: String,
    pub column_type: String,
}

impl MyColumn {
    /// The SQL expression that renders the column canonically.
    pub fn select_expr(&self) -> String {
        let c = format!("`{}`", self.name);
        match self.data_type.as_str() {
            "bit" if self.bit_width() == 1 => format!("{c}+0"),
            "bit" => format!("LPAD(HEX({c}), {}, '0')", self.bit_width().div_ceil(8) * 2),
            "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => {
                format!("HEX({c})")
            }
            "date" => format!("DATEDIFF({c}, '1970-01-01')"),
            "time" => format!(
                "HOUR({c})*3600000 + MINUTE({c})*60000 + SECOND({c})*1000 + MICROSECOND({c}) DIV 1000"
            ),
            "datetime" | "timestamp" => {
                format!("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {c})")
            }
            _ => c,
        }
    }

    pub fn bit_width(&self) -> u32 {
        self.column_type
            .trim_start_matches("bit(")
            .trim_end_matches(')')
            .parse()
            .expect("bit width")
    }

    /// The scale of a DECIMAL column (0 for BIGINT UNSIGNED, read as DECIMAL(20, 0)).
    pub fn scale(&self) -> u32 {
        match self.column_type.split_once(',') {
            Some((_, s)) if self.data_type == "decimal" => {
                s.trim_end_matches(')').trim().parse().expect("scale")
            }
            _ => 0,
        }
    }

    /// The canonical text of a value read back from Fjord.
    pub fn render(&self, v: &Owned) -> String {
        match v {
            Owned::Null => "NULL".into(),
            Owned::Bool(b) => u8::from(*b).to_string(),
            Owned::Int(i) => i.to_string(),
            Owned::Float(f) => f.to_string(),
            Owned::Double(d) => d.to_string(),
            Owned::Decimal(unscaled) => decimal_text(*unscaled, self.scale()),
            Owned::Str(s) => s.clone(),
            Owned::Bytes(b) => b.iter().map(|x| format!("{x:02X}")).collect(),
            Owned::Date(d) => d.to_string(),
            Owned::Time(ms) => ms.to_string(),
            Owned::Micros(us) => us.to_string(),
        }
    }
}

pub fn decimal_text(unscaled: i128, scale: u32) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

pub fn columns(db: &MariaDb, database: &str, table: &str) -> Vec<MyColumn> {
    db.sql(&format!(
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = '{database}' AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION"
    ))
    .lines()
    .map(|l| {
        let mut f = l.split('\t');
        MyColumn {
            name: f.next().expect("name").to_string(),
            data_type: f.next().expect("data type").to_string(),
            column_type: f.next().expect("column type").to_string(),
        }
    })
    .collect()
}

/// MariaDB's rows of a table, canonical, sorted.
pub fn mariadb_rows(db: &MariaDb, database: &str, table: &str) -> Vec<String> {
    let cols = columns(db, database, table);
    let select: Vec<String> = cols.iter().map(MyColumn::select_expr).collect();
    let mut rows: Vec<String> = db
        .sql(&format!(
            "SET time_zone = '+00:00'; SELECT {} FROM `{database}`.`{table}`",
            select.join(", ")
        ))
        .lines()
        .map(str::to_string)
        .collect();
    rows.sort();
    rows
}

/// Fjord's rows of the sink table of `database.table`, rendered for
/// MariaDB's current columns (matched by name; the sink table may keep
/// columns MariaDB dropped), sorted.
pub fn fjord_rows(
    rt: &tokio::runtime::Runtime,
    fjord: &FjordServer,
    db: &MariaDb,
    database: &str,
    table: &str,
) -> Vec<String> {
    let cols = columns(db, database, table);
    let client = rt
        .block_on(FlussClient::connect(&[fjord.bootstrap_servers()]))
        .expect("client connects");
    let info = rt
        .block_on(client.refresh_table_info(&TablePath::new(database, table)))
        .unwrap_or_else(|e| panic!("sink table {database}.{table}: {e}"));
    let sink_columns: Vec<String> = info
        .descriptor
        .schema()
        .columns()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    let positions: Vec<usize> = cols
        .iter()
        .map(|c| {
            sink_columns
                .iter()
                .position(|n| *n == c.name)
                .unwrap_or_else(|| {
                    panic!(
                        "sink table {database}.{table} has no column `{}`: {sink_columns:?}",
                        c.name
                    )
                })
        })
        .collect();
    let raw = if info.descriptor.has_primary_key() {
        rt.block_on(scan_pk(&client, &info))
    } else {
        rt.block_on(scan_log(&client, &info))
    };
    let mut rows: Vec<String> = raw
        .iter()
        .map(|row| {
            cols.iter()
                .zip(&positions)
                .map(|(c, &p)| c.render(&row[p]))
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect();
    rows.sort();
    rows
}

/// Asserts every table of `tables` holds in Fjord what it holds in MariaDB.
pub fn assert_same(
    rt: &tokio::runtime::Runtime,
    fjord: &FjordServer,
    db: &MariaDb,
    tables: &[&str],
    context: &str,
) {
    for table in tables {
        let expected = mariadb_rows(db, "shop", table);
        let got = fjord_rows(rt, fjord, db, "shop", table);
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

/// Starts `fjord pipeline run <yaml> --until-current`, stdout and stderr
/// appended to files in `dir`.
pub fn spawn_pipeline(dir: &Path, yaml: &Path) -> Child {
    spawn_pipeline_with(dir, yaml, true)
}

/// Starts `fjord pipeline run <yaml>` (with `--until-current` if asked: else
/// it runs until stopped), stdout and stderr appended to files in `dir`.
pub fn spawn_pipeline_with(dir: &Path, yaml: &Path, until_current: bool) -> Child {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("pipeline.stdout"))
        .expect("stdout file");
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("pipeline.stderr"))
        .expect("stderr file");
    Command::new(env!("CARGO_BIN_EXE_fjord"))
        .args(["pipeline", "run"])
        .arg(yaml)
        .args(until_current.then_some("--until-current"))
        .env("NO_COLOR", "1")
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn fjord pipeline run")
}

/// The last lines of the pipeline's log (stderr), for failure messages.
pub fn log_of(dir: &Path) -> String {
    let err = std::fs::read_to_string(dir.join("pipeline.stderr")).unwrap_or_default();
    let tail: Vec<&str> = err.lines().rev().take(60).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Runs the pipeline to the binlog position current at its start; panics
/// with its log if it fails. Returns its summary line.
pub fn run_to_current(dir: &Path, yaml: &Path) -> serde_json::Value {
    let before = std::fs::read_to_string(dir.join("pipeline.stdout")).unwrap_or_default();
    let mut child = spawn_pipeline(dir, yaml);
    let status = wait_exit(dir, &mut child, RUN_TIMEOUT);
    assert!(
        status.success(),
        "pipeline run failed: {status}\n{}",
        log_of(dir)
    );
    let out = std::fs::read_to_string(dir.join("pipeline.stdout")).unwrap_or_default();
    let line = out[before.len()..]
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no summary line\n{}", log_of(dir)));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("summary {line:?}: {e}"))
}

/// A tokio runtime for the tests' own client calls.
pub fn io_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Everything the pipeline wrote to its log (stderr) so far.
pub fn full_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("pipeline.stderr")).unwrap_or_default()
}

/// Waits until the pipeline's log holds `needle` at least `count` times;
/// panics with the log after `timeout` (a hang bound, not a measurement)
/// or if `child` exits first.
pub fn wait_for_log(dir: &Path, child: &mut Child, needle: &str, count: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        if full_log(dir).matches(needle).count() >= count {
            return;
        }
        if let Some(status) = child.try_wait().expect("wait") {
            panic!(
                "the pipeline exited ({status}) before its log showed {needle:?} {count} times\n{}",
                log_of(dir)
            );
        }
        assert!(
            Instant::now() < deadline,
            "the pipeline's log did not show {needle:?} {count} times within {timeout:?}\n{}",
            log_of(dir)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `child` to exit; panics with the log after `timeout` (a hang
/// bound), killing it.
pub fn wait_exit(dir: &Path, child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the pipeline did not exit within {timeout:?}\n{}",
                log_of(dir)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether every table of `tables` holds in Fjord what it holds in MariaDB
/// (sorted rows, so a row held twice differs).
pub fn all_same(
    rt: &tokio::runtime::Runtime,
    fjord: &FjordServer,
    db: &MariaDb,
    tables: &[&str],
) -> bool {
    tables
        .iter()
        .all(|t| mariadb_rows(db, "shop", t) == fjord_rows(rt, fjord, db, "shop", t))
}

/// The committed position's source text (its `data=` line) in the state
/// dir under `dir`, if a position is committed.
pub fn committed_data(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("state").join("position")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("data="))
        .map(str::to_string)
}
