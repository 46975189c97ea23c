//! Benchmark (ignored by default; run with `--ignored --nocapture` on a
//! release build): `user_behavior` pre-loaded with `FJORD_BENCH_ROWS` rows
//! (default 5 000 000, generated deterministically), then
//! 1. Fjord's MySQL source from `earliest-offset` to the position current at
//!    start, counting events like the `values` sink (materializes nothing),
//! 2. the same table in `snapshot` mode, and both modes through the whole
//!    pipeline (`runtime::run`, YAML definition, `values` sink thread),
//! 3. peers on the same binlog in the same run: `mariadb-binlog
//!    --base64-output=decode-rows -v` to /dev/null, and the PyPI
//!    `mysql-replication` reader (if importable; capped rows, it is slow).
//!
//! Prints one JSON line per result with rows/s and CPU ns/row (process CPU
//! time from /proc/self/stat, so it covers our source's thread only; the
//! server is another process).
//!
//! ```text
//! cargo test --release -p fjord-cdc --test mariadb_bench -- --ignored --nocapture
//! ```
//!
//! `FJORD_BENCH_PROFILE=1` runs only our binlog reader (three times), for
//! `perf record`.

mod support;

use std::process::{Command, Stdio};
use std::time::Instant;

use fjord_cdc::event::{Event, EventBatch};
use fjord_cdc::source::{Poll, StartupMode};
use support::capture::{config, until_current};
use support::MariaDb;

const ROWS_DEFAULT: u64 = 5_000_000;
/// Rows per INSERT statement of the load.
const ROWS_PER_INSERT: u64 = 5_000;
/// Rows the slow Python peer reads (its rate is stable long before the end).
const PYTHON_ROWS_MAX: u64 = 300_000;

/// Deterministic xorshift64* generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// CPU seconds (user + system) of this process and of its waited-for children.
fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    // Fields after the command name (which is in parentheses).
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // utime, stime, cutime, cstime are fields 14..17 (1-based) = rest[11..15].
    let ticks = 100.0; // USER_HZ on Linux
    ((f[11] + f[12]) / ticks, (f[13] + f[14]) / ticks)
}

fn load(db: &MariaDb, rows: u64) {
    db.sql(
        "CREATE DATABASE bench;
         CREATE TABLE bench.user_behavior (user_id BIGINT, item_id BIGINT, category_id BIGINT,
           behavior VARCHAR(16), ts TIMESTAMP NULL) ENGINE=InnoDB",
    );
    let start = Instant::now();
    db.sql_stream(|out| {
        let mut rng = Rng(0x5eed_1234_abcd_ef01);
        let behaviors = ["pv", "cart", "fav", "buy"];
        let ts0: u64 = 1_511_539_200; // 2017-11-25, as in the public data set
        let mut written = 0;
        while written < rows {
            write!(out, "INSERT INTO bench.user_behavior VALUES ")?;
            let n = ROWS_PER_INSERT.min(rows - written);
            for i in 0..n {
                let r = rng.next();
                // Skewed users: the square of a uniform draw favours low ids.
                let u = (r >> 44) as f64 / (1u64 << 20) as f64;
                let user = 1 + (u * u * 1_000_000.0) as u64;
                let item = 1 + rng.next() % 5_000_000;
                let category = 1 + rng.next() % 10_000;
                let b = match rng.next() % 100 {
                    0..=88 => 0,
                    89..=93 => 1,
                    94..=96 => 2,
                    _ => 3,
                };
                let ts = ts0 + (written + i) / 60;
                if i > 0 {
                    out.write_all(b",")?;
                }
                write!(
                    out,
                    "({user},{item},{category},'{}',FROM_UNIXTIME({ts}))",
                    behaviors[b]
                )?;
            }
            out.write_all(b";\n")?;
            written += n;
        }
        Ok(())
    });
    eprintln!(
        "loaded {rows} rows in {:.1}s",
        start.elapsed().as_secs_f64()
    );
}

fn run_source(db: &MariaDb, startup: StartupMode, label: &str) -> u64 {
    let mut cfg = config(db, "bench.user_behavior", startup);
    cfg.snapshot_fetch_size = 4096;
    let cpu0 = cpu_seconds().0;
    let wall = Instant::now();
    let mut source = fjord_cdc::source::mysql::open(cfg, until_current()).expect("open");
    let mut batch = EventBatch::default();
    let mut events = 0u64;
    loop {
        batch.clear();
        let poll = source.next_batch(&mut batch).expect("batch");
        // The values sink: count, touch nothing else.
        events += batch
            .events()
            .filter(|e| matches!(e, Event::Change(_)))
            .count() as u64;
        if poll == Poll::End {
            break;
        }
    }
    let secs = wall.elapsed().as_secs_f64();
    let cpu = cpu_seconds().0 - cpu0;
    println!(
        "{{\"reader\":\"fjord-{label}\",\"rows\":{events},\"rows_per_s\":{:.0},\"cpu_ns_per_row\":{:.1},\"wall_s\":{secs:.2}}}",
        events as f64 / secs,
        cpu * 1e9 / events.max(1) as f64
    );
    events
}

/// The whole pipeline: Flink CDC YAML, `runtime::run`, `values` sink thread,
/// `--until-current`; its own summary (process-wide CPU).
fn run_pipeline(db: &MariaDb, mode: &str) -> u64 {
    let def = fjord_cdc::config::parse(&format!(
        "source:\n  type: mysql\n  hostname: 127.0.0.1\n  port: {}\n  username: {}\n  password: {}\n  \
         tables: bench.user_behavior\n  server-id: 5400-5404\n  scan.startup.mode: {mode}\n\
         sink:\n  type: values\n  name: Values Sink\npipeline:\n  name: Sync MariaDB to Values\n  parallelism: 1\n",
        db.port(),
        support::REPL_USER,
        support::REPL_PASSWORD
    ))
    .expect("pipeline YAML");
    let summary = fjord_cdc::runtime::run(
        def,
        fjord_cdc::runtime::RunOptions {
            until_current: true,
            ..Default::default()
        },
    )
    .expect("pipeline run");
    println!(
        "{{\"reader\":\"fjord pipeline run ({mode}, values sink)\",\"rows\":{},\"rows_per_s\":{:.0},\"cpu_ns_per_row\":{:.1},\"wall_s\":{:.2}}}",
        summary.events,
        summary.events_per_s(),
        summary.cpu_ns_per_event(),
        summary.elapsed.as_secs_f64()
    );
    summary.events
}

fn run_mariadb_binlog(db: &MariaDb, rows: u64) {
    let file = db.datadir().join("binlog.000001");
    let child_cpu0 = cpu_seconds().1;
    let wall = Instant::now();
    let status = Command::new(support::tool("mariadb-binlog"))
        .arg("--base64-output=decode-rows")
        .arg("-v")
        .arg(&file)
        .stdout(Stdio::null())
        .status()
        .expect("run mariadb-binlog");
    assert!(status.success());
    let secs = wall.elapsed().as_secs_f64();
    let cpu = cpu_seconds().1 - child_cpu0;
    println!(
        "{{\"reader\":\"mariadb-binlog --base64-output=decode-rows -v\",\"rows\":{rows},\"rows_per_s\":{:.0},\"cpu_ns_per_row\":{:.1},\"wall_s\":{secs:.2}}}",
        rows as f64 / secs,
        cpu * 1e9 / rows as f64
    );
}

fn run_python(db: &MariaDb, rows: u64) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/pyrepl_count.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(db.port().to_string())
        .arg(support::REPL_USER)
        .arg(support::REPL_PASSWORD)
        .arg(PYTHON_ROWS_MAX.min(rows).to_string())
        .output()
        .expect("run python3");
    if out.status.success() {
        print!("{}", String::from_utf8_lossy(&out.stdout));
    } else {
        eprintln!(
            "python mysql-replication peer skipped: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
}

#[test]
#[ignore = "benchmark: run explicitly with --ignored on a release build"]
fn bench_user_behavior_binlog_and_snapshot() {
    let rows = std::env::var("FJORD_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROWS_DEFAULT);
    let db = MariaDb::start_with(&["--max-binlog-size=1073741824"]);
    load(&db, rows);
    if std::env::var_os("FJORD_BENCH_PROFILE").is_some() {
        // Under a profiler: only our binlog reader, a few times.
        for _ in 0..3 {
            run_source(&db, StartupMode::EarliestOffset, "binlog-earliest-offset");
        }
        return;
    }
    // Alternate ours and the C peer so background noise hits both.
    for round in 0..2 {
        let events = run_source(&db, StartupMode::EarliestOffset, "binlog-earliest-offset");
        assert_eq!(events, rows, "round {round}");
        run_mariadb_binlog(&db, rows);
    }
    let events = run_source(&db, StartupMode::Snapshot, "snapshot");
    assert_eq!(events, rows);
    assert_eq!(run_pipeline(&db, "earliest-offset"), rows + 1); // + create_table
    assert_eq!(run_pipeline(&db, "snapshot"), rows);
    run_python(&db, rows);
}
