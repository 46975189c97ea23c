//! A selective filter on a log table with `table.statistics.columns` skips
//! whole batches by their statistics (the server leaves them out of the
//! fetch: the scan's skip counters move, fewer batches arrive), and every
//! query returns exactly the rows the same query returns on a twin table
//! without statistics: ranges, BETWEEN, IN, strings, OR, NULLs, NaN and
//! timestamps, projected or not.

mod support;

use fjord_sql::table::ScanStats;
use support::{pretty, query, TestServer};

/// Batches written (one INSERT each, one bucket) and rows per batch.
const BATCHES: i64 = 20;
const ROWS: i64 = 50;

fn insert(table: &str, batch: i64) -> String {
    let rows: Vec<String> = (0..ROWS)
        .map(|j| {
            let id = batch * ROWS + j;
            // Batch 5: every name NULL; batch 3: NaN scores; some NULL scores.
            let name = if batch == 5 {
                "NULL".to_owned()
            } else {
                format!("'n{id:05}'")
            };
            let score = if batch == 3 {
                "CAST('NaN' AS DOUBLE)".to_owned()
            } else if j % 7 == 0 {
                "NULL".to_owned()
            } else {
                format!("{}", id as f64 / 10.0)
            };
            format!(
                "({id}, {name}, {score}, TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{id} seconds')"
            )
        })
        .collect();
    format!("INSERT INTO fluss.{table} VALUES {}", rows.join(", "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_filter_skips_batches_and_returns_the_same_rows() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    for (table, with) in [
        ("stats", ", 'table.statistics.columns' = '*'"),
        ("plain", ""),
    ] {
        query(
            &mut s,
            &format!(
                "CREATE TABLE fluss.{table} (id BIGINT, name STRING, score DOUBLE, ts TIMESTAMP(3)) \
                 WITH ('bucket.num' = '1'{with})"
            ),
        )
        .await;
        for batch in 0..BATCHES {
            query(&mut s, &insert(table, batch)).await;
        }
    }
    let stats = engine.scan_stats();
    let skipped = || ScanStats::get(&stats.log_batches_skipped);
    let records_skipped = || ScanStats::get(&stats.log_records_skipped);
    let read = || ScanStats::get(&stats.log_batches_read);

    // The selective range: the last batch alone can match.
    let (skipped0, records0, read0) = (skipped(), records_skipped(), read());
    let rows = query(
        &mut s,
        "SELECT id, name FROM stats WHERE id >= 960 ORDER BY id",
    )
    .await;
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 40);
    assert!(skipped() > skipped0, "batches were skipped");
    assert_eq!(
        records_skipped() - records0,
        ((BATCHES - 1) * ROWS) as u64,
        "every batch but the last was left out"
    );
    assert_eq!(read() - read0, 1, "one batch arrived");
    // The same on the table without statistics skips nothing.
    let (skipped0, read0) = (skipped(), read());
    query(
        &mut s,
        "SELECT id, name FROM plain WHERE id >= 960 ORDER BY id",
    )
    .await;
    assert_eq!(skipped(), skipped0);
    assert_eq!(read() - read0, BATCHES as u64);

    let filters = [
        "id >= 960",
        "id > 2000",
        "id BETWEEN 100 AND 120",
        "id IN (7, 512, 999)",
        "name = 'n00500'",
        "name > 'n00990' OR id < 3",
        "name IS NULL",
        "name IS NOT NULL AND id < 300 AND id > 240",
        "score > 95.0",
        "score < 0.5 AND id > 5",
        "score IS NULL AND id >= 900",
        "ts >= TIMESTAMP '2026-01-01 00:16:20'",
        "ts < TIMESTAMP '2026-01-01 00:00:30' OR name = 'n00777'",
        "id <> 5",
    ];
    for filter in filters {
        for columns in ["*", "name", "count(*)"] {
            let order = if columns == "count(*)" {
                ""
            } else {
                " ORDER BY 1"
            };
            let sql = |t: &str| format!("SELECT {columns} FROM {t} WHERE {filter}{order}");
            let before = skipped();
            let got = pretty(&query(&mut s, &sql("stats")).await);
            // Every filter here but `<>` rules some batch out (so each kind
            // of literal reached the server).
            assert_eq!(
                skipped() > before,
                filter != "id <> 5",
                "{filter} ({columns}) skipped {}",
                skipped() - before
            );
            let want = pretty(&query(&mut s, &sql("plain")).await);
            assert_eq!(got, want, "{filter} ({columns})");
        }
    }
    server.stop().await;
}
