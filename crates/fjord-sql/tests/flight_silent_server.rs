//! Statements the Flight SQL endpoint runs at `GetFlightInfo` (Fjord's
//! DDL, after the catalog refresh) and at `DoPut` wait on the Fjord
//! server. When the server stops answering (a proxy between the engine
//! and the server holds the requests), they end at `sql.query.timeout`
//! with `DEADLINE_EXCEEDED` naming the option, and once the server answers
//! again the endpoint serves the next statement.

mod support;

use std::time::Duration;

use arrow_flight::sql::client::FlightSqlServiceClient;
use fjord_proto::ApiKey;
use fjord_sql::flight;
use fjord_sql::pg::Users;
use support::within;
use tonic::transport::Channel;

#[test]
fn a_statement_on_a_silent_server_ends_at_the_query_timeout() {
    within(Duration::from_secs(120), async {
        let (server, proxy, engine) =
            support::silent::engine_behind_proxy(Duration::from_secs(1)).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(flight::serve(engine, listener, Users::default()));
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect()
            .await
            .expect("connects");
        let mut client = FlightSqlServiceClient::new(channel);
        client
            .execute("CREATE DATABASE shop".to_string(), None)
            .await
            .expect("a DDL through the proxy");

        // `None` holds every request (the catalog refresh waits), `Some`
        // only the statement's own; `true` sends it by DoPut.
        for (sql, api, update) in [
            ("CREATE DATABASE later", None, false),
            ("CREATE DATABASE later", Some(ApiKey::CreateDatabase), false),
            (
                "DROP DATABASE IF EXISTS never",
                Some(ApiKey::DropDatabase),
                true,
            ),
        ] {
            match api {
                None => proxy.freeze(),
                Some(api) => proxy.freeze_api(api),
            }
            let e = if update {
                client.execute_update(sql.to_string(), None).await.map(drop)
            } else {
                client.execute(sql.to_string(), None).await.map(drop)
            }
            .unwrap_err()
            .to_string();
            assert!(e.contains("sql.query.timeout"), "{sql}: {e}");
            assert!(
                proxy.held.load(std::sync::atomic::Ordering::SeqCst) > 0,
                "{sql}: nothing held"
            );
            proxy.thaw();
            client
                .execute("SHOW DATABASES".to_string(), None)
                .await
                .unwrap_or_else(|e| panic!("a SHOW after {sql}: {e}"));
        }
        server.stop().await;
    });
}
