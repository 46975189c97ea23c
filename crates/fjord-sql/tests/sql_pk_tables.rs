//! Primary-key tables through SQL: INSERT is an upsert, reads see the
//! current rows (KV scans), an equality on the whole key is one point
//! lookup, a LIMIT is LimitScan.

mod support;

use fjord_sql::table::ScanStats;
use support::{check, query, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_key_tables_read_as_their_current_rows() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(
        &mut s,
        "CREATE TABLE fluss.users (id BIGINT, name STRING, score INT, PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '4')",
    )
    .await;
    query(
        &mut s,
        "INSERT INTO users VALUES (1, 'ann', 10), (2, 'bob', 20), (3, 'cy', 30)",
    )
    .await;
    // The same key again: an upsert, not a second row.
    query(
        &mut s,
        "INSERT INTO users VALUES (2, 'bob', 25), (4, 'dee', 40)",
    )
    .await;
    check(
        &mut s,
        "SELECT * FROM users ORDER BY id",
        "+----+------+-------+
         | id | name | score |
         +----+------+-------+
         | 1  | ann  | 10    |
         | 2  | bob  | 25    |
         | 3  | cy   | 30    |
         | 4  | dee  | 40    |
         +----+------+-------+",
    )
    .await;
    let stats = engine.scan_stats();
    let lookups = || ScanStats::get(&stats.lookups);
    let kv_scans = || ScanStats::get(&stats.kv_scans);
    let (l0, k0, f0) = (lookups(), kv_scans(), server.fetched_bytes());
    check(
        &mut s,
        "SELECT name, score FROM users WHERE id = 2",
        "+------+-------+\n| name | score |\n+------+-------+\n| bob  | 25    |\n+------+-------+",
    )
    .await;
    assert_eq!(lookups() - l0, 1, "one point lookup");
    assert_eq!(kv_scans() - k0, 0, "no scan");
    assert_eq!(server.fetched_bytes() - f0, 0, "no log read");
    // A key that is not there: one lookup, no row.
    let rows = query(&mut s, "SELECT * FROM users WHERE id = 99").await;
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    assert_eq!(lookups() - l0, 2);
    // A filter on another column scans.
    check(
        &mut s,
        "SELECT id FROM users WHERE score > 26 ORDER BY id",
        "+----+\n| id |\n+----+\n| 3  |\n| 4  |\n+----+",
    )
    .await;
    assert_eq!(lookups() - l0, 2);
    assert!(kv_scans() > k0);
    let limited = query(&mut s, "SELECT id FROM users LIMIT 2").await;
    assert_eq!(limited.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
    check(
        &mut s,
        "SELECT count(*) AS n FROM users",
        "+---+\n| n |\n+---+\n| 4 |\n+---+",
    )
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_primary_key_tables_prune_and_look_up() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(
        &mut s,
        "CREATE TABLE fluss.orders (id INT, dt STRING, amount DECIMAL(10, 2), PRIMARY KEY (id, dt) NOT ENFORCED) PARTITIONED BY (dt)",
    )
    .await;
    query(
        &mut s,
        "INSERT INTO orders VALUES (1, '2026-01-01', 9.50), (2, '2026-01-01', 1.25), (1, '2026-01-02', 7.00)",
    )
    .await;
    check(
        &mut s,
        "SELECT id, amount FROM orders WHERE dt = '2026-01-01' ORDER BY id",
        "+----+--------+\n| id | amount |\n+----+--------+\n| 1  | 9.50   |\n| 2  | 1.25   |\n+----+--------+",
    )
    .await;
    let stats = engine.scan_stats();
    let l0 = ScanStats::get(&stats.lookups);
    check(
        &mut s,
        "SELECT amount FROM orders WHERE id = 1 AND dt = '2026-01-02'",
        "+--------+\n| amount |\n+--------+\n| 7.00   |\n+--------+",
    )
    .await;
    assert_eq!(ScanStats::get(&stats.lookups) - l0, 1);
    check(
        &mut s,
        "SELECT dt, sum(amount) AS total FROM orders GROUP BY dt ORDER BY dt",
        "+------------+-------+\n| dt         | total |\n+------------+-------+\n| 2026-01-01 | 10.75 |\n| 2026-01-02 | 7.00  |\n+------------+-------+",
    )
    .await;
    server.stop().await;
}
