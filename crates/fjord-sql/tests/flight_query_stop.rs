//! A Flight SQL client (arrow-rs's `FlightSqlServiceClient`) that stops
//! reading a CPU-bound query's answer, dropping its DoGet stream, stops the
//! query's work: the engine's query memory goes back to nothing and the
//! next query answers, with the query timeout an hour away.

mod support;

use std::time::Duration;

use arrow_flight::sql::client::FlightSqlServiceClient;
use fjord_sql::engine::EngineOptions;
use fjord_sql::flight;
use fjord_sql::pg::Users;
use support::{check, until_queries_end, within, TestServer};
use tonic::transport::Channel;

/// 10^12 pairs: hours of work on any machine.
const CPU_BOUND: &str =
    "SELECT count(*), sum(a.value + b.value) FROM range(1000000) a CROSS JOIN range(1000000) b";

#[test]
fn a_client_that_drops_its_stream_stops_the_query() {
    within(Duration::from_secs(120), async {
        let server = TestServer::start().await;
        let engine = server
            .engine_with(EngineOptions {
                query_timeout: Duration::from_secs(3600),
                target_partitions: 2,
                ..EngineOptions::default()
            })
            .await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(flight::serve(engine.clone(), listener, Users::default()));
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect()
            .await
            .expect("connects");
        let mut client = FlightSqlServiceClient::new(channel);

        let info = client
            .execute(CPU_BOUND.to_string(), None)
            .await
            .expect("execute");
        let ticket = info.endpoint[0].ticket.clone().expect("a ticket");
        let stream = client.do_get(ticket).await.expect("do_get");
        // Running: the join holds its build side in the engine's pool.
        while engine.memory_reserved() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(stream);
        drop(client);
        until_queries_end(&engine).await;
        let mut s = engine.session();
        check(
            &mut s,
            "SELECT count(*) AS still_serving FROM range(10)",
            "+---------------+
             | still_serving |
             +---------------+
             | 10            |
             +---------------+",
        )
        .await;
        server.stop().await;
    });
}
