//! `fjord pipeline run` with `source: mysql` on a real MariaDB and
//! `sink: fluss` on a real `fjord server`, both child processes as a user
//! runs them:
//! - tables with and without primary keys and every column type, inserts,
//!   updates (also of the key), deletes and DDL mid-stream (ADD COLUMN on
//!   both kinds of table, with rows before and after): after each
//!   `--until-current` run, every Fjord table (a KV scan of every bucket, or
//!   every row of a log table) equals `SELECT *` of its MariaDB table,
//!   value by value;
//! - the same kind of run killed with SIGKILL at random points, round after
//!   round, and restarted: the Fjord tables still equal MariaDB's, and no
//!   log-table row is there twice.
//!
//! Values are compared in one canonical text per MariaDB type (numbers as
//! MariaDB prints them, binary as hex, dates as days, times as milliseconds,
//! datetimes as microseconds since 1970): MariaDB renders them with SQL,
//! the Fjord side from the values the native client reads back.

mod support;

#[path = "../../fjord-cdc/tests/support/mod.rs"]
mod mariadb;

#[path = "support/cdc.rs"]
mod cdc;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cdc::{assert_same, io_runtime, log_of, run_to_current, spawn_pipeline};
use mariadb::{MariaDb, REPL_PASSWORD, REPL_USER};
use support::FjordServer;

fn pipeline_yaml(dir: &Path, db: &MariaDb, fjord: &FjordServer, commit_ms: u64) -> PathBuf {
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
  server-id: 5400
  scan.startup.mode: initial
sink:
  type: fluss
  name: Fjord
  bootstrap.servers: {servers}
  bucket.num: shop.accounts:3;shop.visits:2
pipeline:
  name: MariaDB to Fjord
  state-dir: {state}
  state.commit-interval-ms: {commit_ms}
  progress.interval-ms: 1000
",
            port = db.port(),
            servers = fjord.bootstrap_servers(),
            state = dir.join("state").display(),
        ),
    )
    .expect("write pipeline yaml");
    yaml
}

const ALL_TYPES_COLUMNS: &str = "
  b1 TINYINT(1), ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  f FLOAT, d DOUBLE, dec_small DECIMAL(10,2), dec_wide DECIMAL(65,30), dec_int DECIMAL(20,0),
  bit1 BIT(1), bit10 BIT(10), y YEAR,
  dt DATE, tm TIME, tm3 TIME(3), dtm DATETIME, dtm6 DATETIME(6), ts TIMESTAMP NULL, ts2 TIMESTAMP(2) NULL,
  c CHAR(4), vc VARCHAR(300), vlat VARCHAR(10) CHARACTER SET latin1, bin BINARY(4), vbin VARBINARY(8),
  tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT, tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  js JSON, e ENUM('small','medium','large'), s SET('a','b','c','d')";

/// Values of every column of [`ALL_TYPES_COLUMNS`], by variant (0..3).
fn all_types_values(id: i64, variant: u32) -> String {
    match variant % 3 {
        0 => format!(
            "({id}, 1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,
             -9223372036854775808, 18446744073709551615,
             1.5, 0.25, -12345678.91, -12345678901234567890123456789012345.123456789012345678901234567891,
             99999999999999999999, b'1', b'1010101010', 2024,
             '2024-02-29', '23:59:59', '12:34:56.789', '1000-01-01 00:00:00', '9999-12-31 23:59:59.999999',
             '1970-01-01 00:00:01', '2038-01-19 03:14:07.99',
             'ab', REPEAT('x', 300), 'café', X'0102', X'00FF00',
             'tiny', 'text with \\\"quotes\\\" and \\\\ backslash', 'medium', 'long ünïcödé 🎉',
             X'00', X'DEADBEEF', X'', X'01', '{{\"a\": [1, 2.5, \"x\"]}}', 'medium', 'a,c')"
        ),
        1 => format!(
            "({id}, 0, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0,
             -3.25, -2.75, 0.00, 0.000000000000000000000000000001, 0, b'0', b'0000000001', 1901,
             '1000-01-01', '00:00:00', '00:00:00.001', '2000-02-29 12:00:00', '1970-01-01 00:00:00.000001',
             '2000-01-01 00:00:00', NULL, '', '', '', X'', X'', '', '', '', '', X'', X'', X'', X'',
             'null', 'small', '')"
        ),
        _ => format!(
            "({id}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
             NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
             NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
        ),
    }
}

#[test]
fn mariadb_tables_equal_their_fjord_tables_value_by_value_across_dml_and_ddl() {
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let yaml = pipeline_yaml(dir.path(), &db, &fjord, 200);
    let rt = io_runtime();

    db.sql(&format!(
        "CREATE DATABASE shop;
         CREATE TABLE shop.all_types (id INT NOT NULL PRIMARY KEY, {ALL_TYPES_COLUMNS});
         CREATE TABLE shop.all_types_log (id INT NOT NULL, {ALL_TYPES_COLUMNS});
         CREATE TABLE shop.accounts (region VARCHAR(8) NOT NULL, n INT NOT NULL,
           owner VARCHAR(20), balance DECIMAL(12,2), PRIMARY KEY (region, n));
         CREATE TABLE shop.visits (user_id BIGINT, page VARCHAR(40), at DATETIME(3));"
    ));
    let mut sql = String::new();
    for id in 0..6 {
        sql.push_str(&format!(
            "INSERT INTO shop.all_types VALUES {};\n",
            all_types_values(id, id as u32)
        ));
        sql.push_str(&format!(
            "INSERT INTO shop.all_types_log VALUES {};\n",
            all_types_values(id, id as u32)
        ));
    }
    for n in 0..200 {
        sql.push_str(&format!(
            "INSERT INTO shop.accounts VALUES ('{}', {n}, 'owner{n}', {n}.{:02});\n",
            ["eu", "us", "ap"][n % 3],
            n % 100
        ));
        // Equal rows on purpose: a log table must hold each of them.
        sql.push_str(&format!(
            "INSERT INTO shop.visits VALUES ({}, '/p{}', '2024-01-01 00:00:00.{:03}');\n",
            n % 10,
            n % 4,
            n % 3
        ));
    }
    db.sql(&sql);

    // Run 1: the snapshot, then the binlog to the position current at start.
    let summary = run_to_current(dir.path(), &yaml);
    assert_eq!(
        summary["sink"]["tables"]["shop.accounts"]["rows"], 200,
        "{summary}"
    );
    let tables = ["all_types", "all_types_log", "accounts", "visits"];
    assert_same(&rt, &fjord, &db, &tables, "after the snapshot");

    // Run 2: inserts, updates (of the key too), deletes and DDL in the binlog.
    db.sql(
        "UPDATE shop.accounts SET balance = balance + 1 WHERE n % 5 = 0;
         UPDATE shop.accounts SET n = n + 1000 WHERE n % 7 = 0;
         UPDATE shop.accounts SET region = 'sa' WHERE region = 'ap' AND n % 2 = 0;
         DELETE FROM shop.accounts WHERE n % 11 = 0;
         ALTER TABLE shop.accounts ADD COLUMN note VARCHAR(30);
         UPDATE shop.accounts SET note = CONCAT('note ', n) WHERE n % 3 = 0;
         INSERT INTO shop.accounts VALUES ('eu', 5000, 'new', 1.50, 'with a note');
         ALTER TABLE shop.accounts ADD COLUMN tier INT AFTER n;
         UPDATE shop.accounts SET tier = n % 4 WHERE n % 2 = 1;
         ALTER TABLE shop.accounts MODIFY owner VARCHAR(40);
         UPDATE shop.accounts SET owner = REPEAT('o', 40) WHERE n = 1;
         ALTER TABLE shop.accounts DROP COLUMN balance;
         UPDATE shop.accounts SET owner = 'after drop' WHERE n % 10 = 3;
         INSERT INTO shop.visits VALUES (1, '/p1', '2024-01-01 00:00:00.001'),
                                        (1, '/p1', '2024-01-01 00:00:00.001'), (2, '/p2', NULL);
         ALTER TABLE shop.visits ADD COLUMN ref VARCHAR(20) AFTER user_id;
         INSERT INTO shop.visits (user_id, page, at, ref) VALUES (3, '/p3', NULL, 'ref a'), (3, '/p3', NULL, 'ref a'),
                                        (4, '/p4', '2024-01-01 00:00:00.004', NULL);
         ALTER TABLE shop.visits ADD COLUMN first_col INT FIRST;
         INSERT INTO shop.visits (user_id, page, at, ref, first_col) VALUES (6, '/p6', NULL, 'r', 7);
         INSERT INTO shop.visits (user_id, page) VALUES (5, '/p5');
         UPDATE shop.all_types SET i = 7, vc = 'updated' WHERE id % 2 = 0;
         UPDATE shop.all_types SET id = id + 100 WHERE id = 3;
         DELETE FROM shop.all_types WHERE id = 4;
         CREATE TABLE shop.late (k VARCHAR(10) PRIMARY KEY, v DOUBLE);
         INSERT INTO shop.late VALUES ('a', 0.5), ('b', NULL);
         UPDATE shop.late SET v = 2.25 WHERE k = 'b';",
    );
    let mut sql = String::new();
    for id in 10..16 {
        sql.push_str(&format!(
            "INSERT INTO shop.all_types VALUES {};\nINSERT INTO shop.all_types_log VALUES {};\n",
            all_types_values(id, id as u32),
            all_types_values(id, id as u32 + 1)
        ));
    }
    // The wide log table altered after its rows of every type.
    sql.push_str(
        "ALTER TABLE shop.all_types_log ADD COLUMN note VARCHAR(10);
         INSERT INTO shop.all_types_log (id, note) VALUES (20, 'after'), (21, NULL);\n",
    );
    db.sql(&sql);
    let summary = run_to_current(dir.path(), &yaml);
    // Five columns added (two to a primary-key table, two in the middle
    // and first of shop.visits, added last to its sink table, one to the
    // wide log table), one table created (a MODIFY to a wider VARCHAR and a
    // DROP COLUMN change nothing in the sink table under lenient).
    assert_eq!(summary["sink"]["schema_changes"], 6, "{summary}");
    let tables = ["all_types", "all_types_log", "accounts", "visits", "late"];
    assert_same(&rt, &fjord, &db, &tables, "after DML and DDL");

    // Run 3: nothing new; nothing is written twice.
    let summary = run_to_current(dir.path(), &yaml);
    assert_eq!(summary["events"], 0, "{summary}");
    assert_same(&rt, &fjord, &db, &tables, "after an idle run");
}

/// A small deterministic generator (xorshift), seeded per test run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Runs killed with SIGKILL mid-work before the last, clean run.
const KILLS_MIN: u32 = 20;
/// Rounds at most (a round whose run ends before its kill is not counted).
const ROUNDS_MAX: u32 = 80;

/// One round's writes: inserts, updates (some of the key), deletes, equal
/// rows into the log table, and now and then a DDL.
fn round_sql(round: u32, rng: &mut Rng) -> String {
    let mut sql = String::new();
    let base = i64::from(round) * 1000;
    let mut values = Vec::new();
    for i in 0..300 {
        values.push(format!(
            "({}, {}, 'r{round}i{i}')",
            base + i,
            rng.below(1000)
        ));
    }
    sql.push_str(&format!(
        "INSERT INTO shop.kv (id, v, s) VALUES {};\n",
        values.join(",")
    ));
    let mut log = Vec::new();
    for i in 0..200 {
        // Few distinct rows: many equal ones.
        log.push(format!("({}, 'tag{}')", i % 7, rng.below(3)));
    }
    sql.push_str(&format!(
        "INSERT INTO shop.log (n, tag) VALUES {};\n",
        log.join(",")
    ));
    sql.push_str(&format!(
        "UPDATE shop.kv SET v = v + 1 WHERE id % 13 = {};\n",
        rng.below(13)
    ));
    sql.push_str(&format!(
        "UPDATE shop.kv SET id = id + 1000000 WHERE id < 1000000 AND id % 17 = {};\n",
        rng.below(17)
    ));
    sql.push_str(&format!(
        "DELETE FROM shop.kv WHERE id % 19 = {};\n",
        rng.below(19)
    ));
    sql.push_str(&format!(
        "INSERT INTO shop.pairs VALUES ({round}, 1, 'a'), ({round}, 2, 'b')
         ON DUPLICATE KEY UPDATE w = CONCAT(w, '+');
         UPDATE shop.pairs SET b = b + 10 WHERE a = {};\n",
        rng.below(u64::from(round) + 1)
    ));
    match round {
        3 => sql.push_str("ALTER TABLE shop.kv ADD COLUMN extra INT;\n"),
        14 => sql.push_str(
            "CREATE TABLE shop.later (id INT PRIMARY KEY, t VARCHAR(10));
             INSERT INTO shop.later VALUES (1, 'one'), (2, 'two');\n",
        ),
        _ => {}
    }
    if round > 3 {
        sql.push_str(&format!(
            "UPDATE shop.kv SET extra = {round} WHERE id % 5 = {};\n",
            rng.below(5)
        ));
    }
    if round > 9 {
        sql.push_str("INSERT INTO shop.log VALUES (1, 'tag0'), (1, 'tag0');\n");
    }
    if round > 14 {
        sql.push_str(&format!(
            "UPDATE shop.later SET t = 'r{round}' WHERE id = {};\n",
            1 + round % 2
        ));
    }
    sql
}

#[test]
fn a_pipeline_killed_at_random_points_converges_to_mariadb_with_no_log_row_twice() {
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let yaml = pipeline_yaml(dir.path(), &db, &fjord, 50);
    let rt = io_runtime();
    let seed = std::env::var("FJORD_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos() as u64
                | 1
        });
    eprintln!("kill test seed: {seed} (FJORD_KILL_SEED={seed} repeats it)");
    let mut rng = Rng(seed);

    db.sql(
        "CREATE DATABASE shop;
         CREATE TABLE shop.kv (id BIGINT PRIMARY KEY, v INT, s VARCHAR(20));
         CREATE TABLE shop.pairs (a INT, b INT, w VARCHAR(200), PRIMARY KEY (a, b));
         CREATE TABLE shop.log (n INT, tag VARCHAR(10));",
    );
    let mut killed = 0;
    let mut round = 0;
    // How long a whole run took when one last ended on its own; kills are
    // drawn below it, so most rounds are killed somewhere inside the work.
    let mut typical = Duration::from_millis(1500);
    while killed < KILLS_MIN {
        assert!(
            round < ROUNDS_MAX,
            "only {killed} of {round} rounds were killed mid-run (seed {seed})"
        );
        db.sql(&round_sql(round, &mut rng));
        let started = Instant::now();
        let mut child = spawn_pipeline(dir.path(), &yaml);
        // Anywhere from before the connection to the end of the work.
        let wait = Duration::from_millis(rng.below(typical.as_millis() as u64 + 1));
        let mut exited = None;
        while started.elapsed() < wait {
            if let Some(status) = child.try_wait().expect("wait") {
                exited = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        match exited {
            Some(status) => {
                assert!(
                    status.success(),
                    "round {round} (seed {seed}): the pipeline failed: {status}\n{}",
                    log_of(dir.path())
                );
                typical = started.elapsed();
            }
            None => {
                // SIGKILL: nothing of the process's shutdown code runs.
                child.kill().expect("SIGKILL");
                child.wait().expect("reap");
                killed += 1;
            }
        }
        round += 1;
    }
    let summary = run_to_current(dir.path(), &yaml);
    eprintln!("{killed} of {round} rounds killed; last run: {summary}");
    assert_same(
        &rt,
        &fjord,
        &db,
        &["kv", "pairs", "log", "later"],
        &format!("after {killed} kills (seed {seed})"),
    );
}

/// A pipeline capturing many wide tables commits positions that carry every
/// table's schema (a MariaDB source's positions hold the DDL it follows):
/// past 64 KiB here, which a restart used to refuse to read back. The
/// second run resumes from that position and delivers only the new rows.
#[test]
fn a_pipeline_capturing_many_wide_tables_resumes_from_its_large_position() {
    const TABLES: usize = 40;
    let db = MariaDb::start();
    let data = tempfile::tempdir().expect("fjord data dir");
    let fjord = FjordServer::start(data.path());
    let dir = tempfile::tempdir().expect("pipeline dir");
    let yaml = pipeline_yaml(dir.path(), &db, &fjord, 200);
    let mut sql = String::from("CREATE DATABASE shop;\n");
    for t in 0..TABLES {
        sql.push_str(&format!(
            "CREATE TABLE shop.wide{t} (id INT NOT NULL PRIMARY KEY, {ALL_TYPES_COLUMNS});
             INSERT INTO shop.wide{t} VALUES {};\n",
            all_types_values(1, t as u32)
        ));
    }
    db.sql(&sql);
    let first = run_to_current(dir.path(), &yaml);
    assert_eq!(first["events"], TABLES, "{first}");
    let position = std::fs::metadata(dir.path().join("state").join("position"))
        .expect("a committed position")
        .len();
    assert!(
        position > 64 * 1024,
        "the position is {position} bytes: too small to prove anything"
    );

    let mut sql = String::new();
    for t in 0..TABLES {
        sql.push_str(&format!(
            "INSERT INTO shop.wide{t} VALUES {};\n",
            all_types_values(2, t as u32 + 1)
        ));
    }
    db.sql(&sql);
    let second = run_to_current(dir.path(), &yaml);
    assert_eq!(second["events"], TABLES, "{second}");
    let rt = io_runtime();
    let tables: Vec<String> = (0..TABLES).map(|t| format!("wide{t}")).collect();
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    assert_same(
        &rt,
        &fjord,
        &db,
        &tables,
        "after a resume from a large position",
    );
}
