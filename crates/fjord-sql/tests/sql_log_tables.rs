//! Log tables through SQL: DDL, INSERT through the native writer, reads
//! with projection, filters, LIMIT, partition pruning, the query cut, and
//! the catalog (information_schema, SHOW).

mod support;

use fjord_client::row::{Datum, GenericRow};
use fjord_client::{TablePath, WriterConfig};
use support::{check, query, query_err, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_insert_and_select_a_log_table() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(&mut s, "CREATE DATABASE shop").await;
    query(
        &mut s,
        "CREATE TABLE shop.events (id BIGINT, kind STRING, amount DOUBLE, day DATE) WITH ('bucket.num' = '3')",
    )
    .await;
    query(
        &mut s,
        "INSERT INTO shop.events VALUES (1, 'pv', 1.5, DATE '2026-01-01'), (2, 'buy', 10.0, DATE '2026-01-02'), \
         (3, 'pv', NULL, DATE '2026-01-02'), (4, 'cart', 2.5, NULL)",
    )
    .await;
    check(
        &mut s,
        "SELECT * FROM shop.events ORDER BY id",
        "+----+------+--------+------------+
         | id | kind | amount | day        |
         +----+------+--------+------------+
         | 1  | pv   | 1.5    | 2026-01-01 |
         | 2  | buy  | 10.0   | 2026-01-02 |
         | 3  | pv   |        | 2026-01-02 |
         | 4  | cart | 2.5    |            |
         +----+------+--------+------------+",
    )
    .await;
    check(
        &mut s,
        "SELECT kind, count(*) AS n, sum(amount) AS total FROM shop.events GROUP BY kind ORDER BY kind",
        "+------+---+-------+
         | kind | n | total |
         +------+---+-------+
         | buy  | 1 | 10.0  |
         | cart | 1 | 2.5   |
         | pv   | 2 | 1.5   |
         +------+---+-------+",
    )
    .await;
    check(
        &mut s,
        "SELECT count(*) AS n FROM shop.events",
        "+---+\n| n |\n+---+\n| 4 |\n+---+",
    )
    .await;
    let limited = query(&mut s, "SELECT id FROM shop.events LIMIT 2").await;
    assert_eq!(limited.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
    // USE and unqualified names.
    query(&mut s, "USE shop").await;
    check(
        &mut s,
        "SELECT max(id) AS m FROM events",
        "+---+\n| m |\n+---+\n| 4 |\n+---+",
    )
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projected_query_fetches_only_the_projected_columns() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(
        &mut s,
        "CREATE TABLE fluss.wide (id BIGINT, payload STRING)",
    )
    .await;
    // 2000 rows with a 200-byte payload that does not compress: the
    // payload is ~95% of the bytes.
    let client = server.client().await;
    let mut writer = client
        .append_writer(&TablePath::new("fluss", "wide"), WriterConfig::default())
        .await
        .unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..2000i64 {
        let payload: String = (0..200)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                char::from(b'a' + (state >> 59) as u8 % 26)
            })
            .collect();
        let row = GenericRow::from_values(vec![Datum::BigInt(i), Datum::String(&payload)]);
        writer.append(&row).await.unwrap();
    }
    writer.flush().await.unwrap();
    let before = server.fetched_bytes();
    check(
        &mut s,
        "SELECT sum(id) AS s FROM wide",
        "+---------+\n| s       |\n+---------+\n| 1999000 |\n+---------+",
    )
    .await;
    let projected = server.fetched_bytes() - before;
    let before = server.fetched_bytes();
    check(
        &mut s,
        "SELECT count(DISTINCT payload) AS n FROM wide",
        "+------+\n| n    |\n+------+\n| 2000 |\n+------+",
    )
    .await;
    let payload_bytes = server.fetched_bytes() - before;
    assert!(
        projected * 10 < payload_bytes,
        "reading id fetched {projected} bytes, reading the payload {payload_bytes}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_stops_the_scan_after_the_first_fetch() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(
        &mut s,
        "CREATE TABLE fluss.long (id BIGINT, payload STRING)",
    )
    .await;
    // ~6 MB in one bucket, in 64 KiB batches: six times what one fetch of
    // a bucket returns (1 MiB).
    let client = server.client().await;
    let config = WriterConfig {
        batch_size_bytes: 64 << 10,
        ..WriterConfig::default()
    };
    let mut writer = client
        .append_writer(&TablePath::new("fluss", "long"), config)
        .await
        .unwrap();
    // A payload that does not compress, so bytes fetched follow rows read.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for i in 0..30_000i64 {
        let payload: String = (0..200)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                char::from(b'a' + (state >> 59) as u8 % 26)
            })
            .collect();
        let row = GenericRow::from_values(vec![Datum::BigInt(i), Datum::String(&payload)]);
        writer.append(&row).await.unwrap();
    }
    writer.flush().await.unwrap();
    let before = server.fetched_bytes();
    let rows = query(&mut s, "SELECT id, payload FROM long LIMIT 10").await;
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
    let limited = server.fetched_bytes() - before;
    let before = server.fetched_bytes();
    check(
        &mut s,
        "SELECT count(payload) AS n FROM long",
        "+-------+\n| n     |\n+-------+\n| 30000 |\n+-------+",
    )
    .await;
    let full = server.fetched_bytes() - before;
    assert!(
        limited * 3 < full,
        "LIMIT 10 fetched {limited} bytes, the whole table {full}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_on_partition_keys_prune_partitions() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(
        &mut s,
        "CREATE TABLE fluss.clicks (id BIGINT, dt STRING, region STRING) PARTITIONED BY (dt, region)",
    )
    .await;
    query(
        &mut s,
        "INSERT INTO fluss.clicks VALUES (1, '20260101', 'eu'), (2, '20260101', 'us'), (3, '20260102', 'eu'), (4, '20260103', 'us')",
    )
    .await;
    let stats = engine.scan_stats();
    let pruned = || fjord_sql::table::ScanStats::get(&stats.partitions_pruned);
    let before = pruned();
    check(
        &mut s,
        "SELECT id FROM clicks WHERE dt = '20260101' ORDER BY id",
        "+----+\n| id |\n+----+\n| 1  |\n| 2  |\n+----+",
    )
    .await;
    assert_eq!(pruned() - before, 2, "two of four partitions pruned");
    let before = pruned();
    check(
        &mut s,
        "SELECT id FROM clicks WHERE dt >= '20260102' AND region = 'us'",
        "+----+\n| id |\n+----+\n| 4  |\n+----+",
    )
    .await;
    assert_eq!(pruned() - before, 3);
    // A filter on a non-partition column prunes nothing and still filters.
    let before = pruned();
    check(
        &mut s,
        "SELECT dt FROM clicks WHERE id = 3",
        "+----------+\n| dt       |\n+----------+\n| 20260102 |\n+----------+",
    )
    .await;
    assert_eq!(pruned() - before, 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_reads_up_to_the_cut_taken_when_it_starts() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(
        &mut s,
        "CREATE TABLE fluss.growing (id BIGINT) WITH ('bucket.num' = '2')",
    )
    .await;
    query(&mut s, "INSERT INTO fluss.growing VALUES (1), (2), (3)").await;
    // Planned (cut taken) before more rows arrive; read after.
    let output = s.execute("SELECT id FROM growing").await.unwrap();
    let mut other = engine.session();
    query(&mut other, "INSERT INTO fluss.growing VALUES (4), (5)").await;
    let rows: usize = output
        .collect()
        .await
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows, 3, "the rows written after the cut are not read");
    check(
        &mut s,
        "SELECT count(*) AS n FROM growing",
        "+---+\n| n |\n+---+\n| 5 |\n+---+",
    )
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_lists_databases_tables_and_columns() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(&mut s, "CREATE DATABASE IF NOT EXISTS cat").await;
    query(
        &mut s,
        "CREATE TABLE cat.t (a INT NOT NULL, b DECIMAL(10, 2), c TIMESTAMP(3), d TIMESTAMP_LTZ(3), e BYTES, f BOOLEAN, g ARRAY<STRING>) \
         COMMENT 'types' WITH ('table.log.ttl' = '7d')",
    )
    .await;
    check(
        &mut s,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = 'cat' AND table_name = 't' ORDER BY ordinal_position",
        "+-------------+----------------------+-------------+
         | column_name | data_type            | is_nullable |
         +-------------+----------------------+-------------+
         | a           | Int32                | NO          |
         | b           | Decimal128(10, 2)    | YES         |
         | c           | Timestamp(ms)        | YES         |
         | d           | Timestamp(ms, \"UTC\") | YES         |
         | e           | Binary               | YES         |
         | f           | Boolean              | YES         |
         | g           | List(Utf8)           | YES         |
         +-------------+----------------------+-------------+",
    )
    .await;
    check(
        &mut s,
        "SHOW TABLES FROM cat",
        "+------------+\n| table name |\n+------------+\n| t          |\n+------------+",
    )
    .await;
    let dbs = support::pretty(&query(&mut s, "SHOW DATABASES").await);
    assert!(dbs.contains("cat") && dbs.contains("fluss"), "{dbs}");
    let create = support::pretty(&query(&mut s, "SHOW CREATE TABLE cat.t").await);
    assert!(
        create.contains("'table.log.ttl' = '7d'") && create.contains("`a` INT NOT NULL"),
        "{create}"
    );
    query(&mut s, "DROP TABLE cat.t").await;
    let e = query_err(&mut s, "SELECT * FROM cat.t").await;
    assert!(e.to_string().contains("cat.t"), "{e}");
    query(&mut s, "DROP DATABASE cat").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_statements_and_bad_sql_are_refused_by_name() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(&mut s, "CREATE TABLE fluss.t (a INT)").await;
    for (sql, expected) in [
        ("ALTER TABLE fluss.t ADD COLUMN b INT", "ALTER TABLE"),
        ("DELETE FROM fluss.t", "DELETE"),
        ("CREATE VIEW v AS SELECT 1", "CREATE VIEW"),
        ("INSERT OVERWRITE fluss.t VALUES (1)", "INSERT OVERWRITE"),
    ] {
        let e = query_err(&mut s, sql).await;
        assert!(e.is_unsupported(), "{sql}: {e}");
        assert!(e.to_string().contains(expected), "{sql}: {e}");
    }
    let e = query_err(&mut s, "SELEC 1").await;
    assert!(!e.to_string().is_empty());
    let e = query_err(&mut s, "SELECT nope FROM fluss.t").await;
    assert!(e.to_string().contains("nope"), "{e}");
    // The engine still serves.
    check(
        &mut s,
        "SELECT 1 AS one",
        "+-----+\n| one |\n+-----+\n| 1   |\n+-----+",
    )
    .await;
    server.stop().await;
}
