//! A CPU-bound query over the Postgres endpoint is stopped — its work
//! ends, not just its answer — by `sql.query.timeout` and by the client's
//! cancel request (tokio-postgres's `CancelToken`, what psql's Ctrl-C
//! sends), in the simple and the extended protocol; the connection then
//! answers the next query.

mod support;

use std::sync::Arc;
use std::time::Duration;

use fjord_sql::pg::{self, Users};
use fjord_sql::{EngineOptions, SqlEngine};
use support::{until_queries_end, within, TestServer};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

/// An aggregate over a cross join of 10^12 pairs: hours of work inside
/// one poll of its stream (see query_limits.rs).
const CPU_BOUND: &str =
    "SELECT count(*), sum(a.value + b.value) FROM range(1000000) a CROSS JOIN range(1000000) b";

/// A server, an engine with `query_timeout` on it and a Postgres client
/// over the engine's endpoint.
async fn connect(query_timeout: Duration) -> (TestServer, Arc<SqlEngine>, Client) {
    let (server, engine, client, _connection) = connect_owned(query_timeout).await;
    (server, engine, client)
}

/// [`connect`], with the task that owns the client's socket (aborting it
/// closes the socket).
async fn connect_owned(
    query_timeout: Duration,
) -> (
    TestServer,
    Arc<SqlEngine>,
    Client,
    tokio::task::JoinHandle<()>,
) {
    let server = TestServer::start().await;
    let engine = server
        .engine_with(EngineOptions {
            query_timeout,
            target_partitions: 2,
            ..EngineOptions::default()
        })
        .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(pg::serve(engine.clone(), listener, Users::default()));
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=anyone dbname=fjord"),
        NoTls,
    )
    .await
    .expect("connects");
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    (server, engine, client, connection)
}

/// The connection answers a query after a stopped one.
async fn still_serving(client: &Client) {
    let rows = client
        .simple_query("SELECT 1 AS still_serving")
        .await
        .expect("the next query runs");
    assert!(
        rows.iter().any(|m| matches!(
            m,
            tokio_postgres::SimpleQueryMessage::Row(r) if r.get(0) == Some("1")
        )),
        "{rows:?}"
    );
}

#[test]
fn a_cpu_bound_query_over_the_timeout_is_stopped() {
    within(Duration::from_secs(120), async {
        let (server, engine, client) = connect(Duration::from_secs(1)).await;
        for extended in [false, true] {
            let e = if extended {
                client.query(CPU_BOUND, &[]).await.map(drop).unwrap_err()
            } else {
                client.simple_query(CPU_BOUND).await.map(drop).unwrap_err()
            };
            let db = e.as_db_error().unwrap_or_else(|| panic!("{e:?}"));
            assert_eq!(db.code(), &SqlState::QUERY_CANCELED, "{db:?}");
            assert!(db.message().contains("sql.query.timeout"), "{db:?}");
            until_queries_end(&engine).await;
            still_serving(&client).await;
        }
        server.stop().await;
    });
}

#[test]
fn a_cancel_request_stops_a_cpu_bound_query() {
    within(Duration::from_secs(120), async {
        // A timeout far past the test's bound: only the cancel stops it.
        let (server, engine, client) = connect(Duration::from_secs(3600)).await;
        let client = Arc::new(client);
        for extended in [false, true] {
            let running = tokio::spawn({
                let client = Arc::clone(&client);
                async move {
                    if extended {
                        client.query(CPU_BOUND, &[]).await.map(drop)
                    } else {
                        client.simple_query(CPU_BOUND).await.map(drop)
                    }
                }
            });
            // Running: its join holds its build side. (A cancel request
            // that arrives before a query starts is dropped, as Postgres's.)
            while engine.memory_reserved() == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            client
                .cancel_token()
                .cancel_query(NoTls)
                .await
                .expect("cancel request sent");
            let e = running.await.unwrap().unwrap_err();
            let db = e.as_db_error().unwrap_or_else(|| panic!("{e:?}"));
            assert_eq!(db.code(), &SqlState::QUERY_CANCELED, "{db:?}");
            assert!(db.message().contains("user request"), "{db:?}");
            until_queries_end(&engine).await;
            still_serving(&client).await;
        }
        server.stop().await;
    });
}

/// A client that goes away mid-query (its socket closed, no cancel
/// request) stops the query's work long before its timeout, though the
/// aggregate sends nothing that would find the socket closed.
#[test]
fn a_client_that_goes_away_stops_its_query() {
    within(Duration::from_secs(120), async {
        // A timeout far past the test's bound: only the hang-up stops it.
        let (server, engine, client, connection) = connect_owned(Duration::from_secs(3600)).await;
        let client = Arc::new(client);
        let running = tokio::spawn({
            let client = Arc::clone(&client);
            async move { client.simple_query(CPU_BOUND).await.map(drop) }
        });
        while engine.memory_reserved() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        connection.abort();
        assert!(
            running.await.unwrap().is_err(),
            "the client lost its socket"
        );
        until_queries_end(&engine).await;
        server.stop().await;
    });
}
