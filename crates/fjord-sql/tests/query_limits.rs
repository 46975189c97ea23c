//! The query limits every front end shares: the memory pool
//! (`sql.query.memory-max`), the timeout (`sql.query.timeout`) and the
//! concurrent queries (`sql.query.concurrent-max`). A query over a limit
//! fails with an error naming the limit, and the engine goes on serving.

mod support;

use std::time::Duration;

use fjord_sql::{EngineOptions, SqlError};
use support::{check, query_err, TestServer};

/// A query that holds all its input in one accumulator (`array_agg` cannot
/// spill): about 16 MB of values.
const MEMORY_HUNGRY: &str = "SELECT array_agg(value) FROM range(2000000)";
/// A query that runs for hours: 10^12 rows summed. Its source yields to
/// the scheduler between batches (DataFusion's cooperative scans), so
/// stopping it at the deadline frees its threads.
const ENDLESS: &str = "SELECT sum(value) FROM range(1000000000000)";

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
