//! The query limits every front end shares: the memory pool
//! (`sql.query.memory-max`), the timeout (`sql.query.timeout`) and the
//! concurrent queries (`sql.query.concurrent-max`). A query over a limit
//! fails with an error naming the limit, and the engine goes on serving.

mod support;

use std::time::Duration;

use fjord_sql::{EngineOptions, SqlError};
use support::{check, query, query_err, until_queries_end, within, TestServer};

/// A query that holds all its input in one accumulator (`array_agg` cannot
/// spill): about 16 MB of values.
const MEMORY_HUNGRY: &str = "SELECT array_agg(value) FROM range(2000000)";
/// A query that runs for hours: 10^12 rows summed. Its source yields to
/// the scheduler between batches (DataFusion's cooperative scans), so
/// stopping it at the deadline frees its threads.
const ENDLESS: &str = "SELECT sum(value) FROM range(1000000000000)";
/// Queries that run for hours inside one poll of their stream: an
/// aggregate over a cross join of 10^12 pairs, where the join makes a
/// batch per row of its build side out of each probe batch and the
/// aggregate reads them in one loop; no scan is polled between them.
/// Over two Fjord tables (scans repartitioned, the aggregate run on
/// DataFusion's tasks) and over `range` (one partition: the whole loop on
/// the task reading the answer).
const CPU_BOUND: [&str; 2] = [
    "SELECT count(*), sum(a.id + b.id) FROM fluss.million_a a CROSS JOIN fluss.million_b b",
    "SELECT count(*), sum(a.value + b.value) FROM range(1000000) a CROSS JOIN range(1000000) b",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_the_memory_limit_fails_and_the_next_runs() {
    let server = TestServer::start().await;
    let engine = server
        .engine_with(EngineOptions {
            memory_bytes_max: 4 << 20,
            ..EngineOptions::default()
        })
        .await;
    let mut s = engine.session();
    let e = query_err(&mut s, MEMORY_HUNGRY).await;
    let message = e.to_string();
    assert!(
        message.contains("query limit") && message.contains("sql.query.memory-max"),
        "{message}"
    );
    check(
        &mut s,
        "SELECT count(*) AS n FROM range(2000000)",
        "+---------+
         | n       |
         +---------+
         | 2000000 |
         +---------+",
    )
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_the_timeout_is_stopped_and_the_next_runs() {
    let server = TestServer::start().await;
    let engine = server
        .engine_with(EngineOptions {
            query_timeout: Duration::from_secs(1),
            ..EngineOptions::default()
        })
        .await;
    let mut s = engine.session();
    let e = query_err(&mut s, ENDLESS).await;
    let message = e.to_string();
    assert!(
        message.contains("query limit") && message.contains("sql.query.timeout"),
        "{message}"
    );
    check(
        &mut s,
        "SELECT 1 AS still_serving",
        "+---------------+
         | still_serving |
         +---------------+
         | 1             |
         +---------------+",
    )
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_the_concurrency_limit_is_refused_until_one_ends() {
    let server = TestServer::start().await;
    let engine = server
        .engine_with(EngineOptions {
            concurrent_queries_max: 1,
            ..EngineOptions::default()
        })
        .await;
    let mut first = engine.session();
    let mut second = engine.session();
    // A query holds its slot while its rows are unread.
    let running = first.execute("SELECT value FROM range(10)").await.unwrap();
    let e = query_err(&mut second, "SELECT 1").await;
    assert!(matches!(e, SqlError::Limit(_)), "{e:?}");
    assert!(e.to_string().contains("sql.query.concurrent-max"), "{e}");
    // Its rows read to the end, the slot is free again.
    let rows = running.collect().await.unwrap();
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
    check(
        &mut second,
        "SELECT 1 AS n",
        "+---+
         | n |
         +---+
         | 1 |
         +---+",
    )
    .await;
    // A query dropped unread frees its slot too.
    drop(second.execute("SELECT value FROM range(10)").await.unwrap());
    check(
        &mut first,
        "SELECT 2 AS n",
        "+---+
         | n |
         +---+
         | 2 |
         +---+",
    )
    .await;
    server.stop().await;
}

/// Issue 23: a CPU-bound query past the timeout answers the timeout's
/// error, its work ends (the memory it held is given back, which happens
/// only when its tasks end), and the engine answers the next query.
#[test]
fn a_cpu_bound_query_over_the_timeout_is_stopped_and_the_next_runs() {
    within(Duration::from_secs(120), async {
        let server = TestServer::start().await;
        let engine = server
            .engine_with(EngineOptions {
                query_timeout: Duration::from_secs(1),
                // Two partitions on any machine: hours of work whatever the cores.
                target_partitions: 2,
                ..EngineOptions::default()
            })
            .await;
        let mut s = engine.session();
        for table in ["million_a", "million_b"] {
            query(&mut s, &format!("CREATE TABLE fluss.{table} (id BIGINT)")).await;
            query(
                &mut s,
                &format!("INSERT INTO fluss.{table} SELECT value FROM range(1000000)"),
            )
            .await;
        }
        for sql in CPU_BOUND {
            let e = query_err(&mut s, sql).await;
            let message = e.to_string();
            assert!(
                message.contains("query limit") && message.contains("sql.query.timeout"),
                "{sql}: {message}"
            );
            until_queries_end(&engine).await;
            check(
                &mut s,
                "SELECT count(*) AS still_serving FROM fluss.million_a",
                "+---------------+
                 | still_serving |
                 +---------------+
                 | 1000000       |
                 +---------------+",
            )
            .await;
        }
        server.stop().await;
    });
}
