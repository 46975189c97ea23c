//! Fjord's own statements (DDL, SHOW) and the catalog refresh before every
//! statement wait on the Fjord server. When the server stops answering
//! (here: a proxy between the engine and the server stops forwarding, its
//! connections left open), such a statement over the Postgres endpoint
//! ends at `sql.query.timeout` or at the client's cancel request (SQLSTATE
//! 57014), in the simple and the extended protocol, instead of holding
//! the connection until the client's own request timeout; once the server
//! answers again the connection serves the next statement.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fjord_proto::ApiKey;
use fjord_sql::pg::{self, Users};
use support::silent::FreezingProxy;
use support::{within, TestServer};
use tokio::net::TcpListener;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

/// A server that advertises 127.0.0.2, a proxy on 127.0.0.2 in front of
/// it (so every connection the engine learns from metadata goes through
/// the proxy too), an engine over the proxy with `query_timeout`, and a
/// Postgres client of the engine's endpoint.
async fn connect(query_timeout: Duration) -> (TestServer, FreezingProxy, Client) {
    let (server, proxy, engine) = support::silent::engine_behind_proxy(query_timeout).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let pg_port = listener.local_addr().unwrap().port();
    tokio::spawn(pg::serve(engine, listener, Users::default()));
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={pg_port} user=anyone dbname=fjord"),
        NoTls,
    )
    .await
    .expect("connects");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // Every connection to the server is open before the proxy freezes.
    client
        .simple_query("CREATE DATABASE shop")
        .await
        .expect("a DDL through the proxy");
    client
        .query("SHOW DATABASES", &[])
        .await
        .expect("a SHOW in the extended protocol");
    (server, proxy, client)
}

/// A statement that asks the server: the simple or the extended protocol.
async fn statement(
    client: &Client,
    extended: bool,
    sql: &str,
) -> Result<(), tokio_postgres::Error> {
    if extended {
        client.query(sql, &[]).await.map(drop)
    } else {
        client.simple_query(sql).await.map(drop)
    }
}

/// The server answers again, and so does the connection.
async fn serving_again(client: &Client, proxy: &FreezingProxy) {
    proxy.thaw();
    let rows = client
        .simple_query("SHOW DATABASES")
        .await
        .expect("a SHOW after the server answers again");
    assert!(
        rows.iter().any(|m| matches!(
            m,
            tokio_postgres::SimpleQueryMessage::Row(r) if r.get(0) == Some("shop")
        )),
        "{rows:?}"
    );
}

/// Where a statement waits: `None` holds every request (the catalog
/// refresh before the statement waits), `Some(api)` only the statement's
/// own request.
const SILENT: [(bool, &str, Option<ApiKey>); 4] = [
    (false, "CREATE DATABASE later", None),
    (true, "SHOW TABLES FROM shop", None),
    (false, "CREATE DATABASE later", Some(ApiKey::CreateDatabase)),
    (
        true,
        "DROP DATABASE IF EXISTS never",
        Some(ApiKey::DropDatabase),
    ),
];

fn freeze(proxy: &FreezingProxy, api: Option<ApiKey>) {
    match api {
        None => proxy.freeze(),
        Some(api) => proxy.freeze_api(api),
    }
}

#[test]
fn a_fjord_statement_on_a_silent_server_ends_at_the_query_timeout() {
    within(Duration::from_secs(120), async {
        let (server, proxy, client) = connect(Duration::from_secs(1)).await;
        for (extended, sql, api) in SILENT {
            freeze(&proxy, api);
            let e = statement(&client, extended, sql).await.unwrap_err();
            let db = e.as_db_error().unwrap_or_else(|| panic!("{sql}: {e:?}"));
            assert_eq!(db.code(), &SqlState::QUERY_CANCELED, "{sql}: {db:?}");
            assert!(db.message().contains("sql.query.timeout"), "{sql}: {db:?}");
            assert!(proxy.held.load(Ordering::SeqCst) > 0, "{sql}: nothing held");
            serving_again(&client, &proxy).await;
        }
        server.stop().await;
    });
}

#[test]
fn a_cancel_request_stops_a_fjord_statement_on_a_silent_server() {
    within(Duration::from_secs(120), async {
        // A timeout far past the test's bound: only the cancel stops it.
        let (server, proxy, client) = connect(Duration::from_secs(3600)).await;
        let client = Arc::new(client);
        for (extended, sql, api) in SILENT {
            freeze(&proxy, api);
            let running = tokio::spawn({
                let client = Arc::clone(&client);
                async move { statement(&client, extended, sql).await }
            });
            proxy.until_held().await;
            client
                .cancel_token()
                .cancel_query(NoTls)
                .await
                .expect("cancel request sent");
            let e = running.await.unwrap().unwrap_err();
            let db = e.as_db_error().unwrap_or_else(|| panic!("{sql}: {e:?}"));
            assert_eq!(db.code(), &SqlState::QUERY_CANCELED, "{sql}: {db:?}");
            assert!(db.message().contains("user request"), "{sql}: {db:?}");
            serving_again(&client, &proxy).await;
        }
        server.stop().await;
    });
}
