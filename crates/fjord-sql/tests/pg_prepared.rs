//! Prepared statements over the Postgres endpoint, as a Rust program sends
//! them (tokio-postgres: Parse once, then Bind/Execute/Sync per call): a
//! bound primary-key equality is still one point lookup, not a scan, and
//! every call answers its own key.

mod support;

use fjord_sql::pg::{self, Users};
use fjord_sql::table::ScanStats;
use support::{query, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_primary_key_equality_is_one_lookup() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(&mut s, "CREATE DATABASE IF NOT EXISTS pshop").await;
    query(
        &mut s,
        "CREATE TABLE pshop.users (id BIGINT, name STRING, score INT, PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '2')",
    )
    .await;
    query(
        &mut s,
        "INSERT INTO pshop.users VALUES (1, 'ann', 10), (2, 'bob', 25), (3, 'cy', 30)",
    )
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(pg::serve(engine.clone(), listener, Users::default()));

    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=anyone dbname=fjord"),
        tokio_postgres::NoTls,
    )
    .await
    .expect("connects");
    tokio::spawn(connection);
    let statement = client
        .prepare("SELECT name, score FROM pshop.users WHERE id = $1")
        .await
        .expect("prepares");
    assert_eq!(
        statement.params(),
        &[tokio_postgres::types::Type::INT8],
        "the parameter takes the key column's type"
    );

    let stats = engine.scan_stats();
    let lookups = || ScanStats::get(&stats.lookups);
    let kv_scans = || ScanStats::get(&stats.kv_scans);
    let (l0, k0, f0) = (lookups(), kv_scans(), server.fetched_bytes());
    for (key, name, score) in [(2i64, "bob", 25i32), (1, "ann", 10), (3, "cy", 30)] {
        let rows = client.query(&statement, &[&key]).await.expect("runs");
        assert_eq!(rows.len(), 1, "key {key}");
        assert_eq!(rows[0].get::<_, &str>(0), name);
        assert_eq!(rows[0].get::<_, i32>(1), score);
    }
    let rows = client.query(&statement, &[&99i64]).await.expect("runs");
    assert!(rows.is_empty(), "an absent key answers no row");
    assert_eq!(lookups() - l0, 4, "one point lookup per call");
    assert_eq!(kv_scans() - k0, 0, "no scan");
    assert_eq!(server.fetched_bytes() - f0, 0, "no log read");
    drop(client);
    server.stop().await;
}
