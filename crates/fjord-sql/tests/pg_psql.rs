//! The Postgres endpoint with the real psql (Debian's postgresql-client,
//! installed by scripts/install-deps.sh): `\dt`, `\d table`, queries,
//! DDL, errors, and SCRAM users.

mod support;

use std::process::Command;

use fjord_sql::pg::{self, Users};
use support::{query, TestServer};

/// Runs psql against `port` as `user` (with `password`, if any) with the
/// given commands (`-c` each); returns (success, stdout, stderr).
fn psql(
    port: u16,
    user: &str,
    password: Option<&str>,
    commands: &[&str],
) -> (bool, String, String) {
    let mut cmd = Command::new("psql");
    cmd.args([
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-U",
        user,
        "-d",
        "fjord",
    ])
    .args(["-X", "-v", "ON_ERROR_STOP=1", "-P", "pager=off"])
    .env_remove("PGPASSWORD")
    .env("PGCONNECT_TIMEOUT", "10");
    if let Some(p) = password {
        cmd.env("PGPASSWORD", p);
    } else {
        cmd.arg("-w");
    }
    for c in commands {
        cmd.args(["-c", c]);
    }
    let out = cmd
        .output()
        .expect("psql runs (scripts/install-deps.sh installs postgresql-client)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn serve(server: &TestServer, users: Users) -> u16 {
    let engine = server.engine().await;
    let mut s = engine.session();
    query(&mut s, "CREATE DATABASE IF NOT EXISTS shop").await;
    query(
        &mut s,
        "CREATE TABLE IF NOT EXISTS shop.orders (id BIGINT, item STRING, qty INT, price DECIMAL(10, 2), PRIMARY KEY (id) NOT ENFORCED)",
    )
    .await;
    query(
        &mut s,
        "INSERT INTO shop.orders VALUES (1, 'tea', 2, 3.50), (2, 'cake', 1, 4.25)",
    )
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(pg::serve(engine, listener, users));
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_lists_describes_queries_and_sees_errors() {
    let server = TestServer::start().await;
    let port = serve(&server, Users::default()).await;
    let run = move |commands: Vec<&'static str>| {
        tokio::task::spawn_blocking(move || psql(port, "anyone", None, &commands))
    };
    let (ok, out, err) = run(vec!["\\dt shop.*"]).await.unwrap();
    assert!(ok, "{err}");
    assert!(out.contains("orders"), "\\dt shop.*:\n{out}");
    let (ok, out, err) = run(vec!["\\d shop.orders"]).await.unwrap();
    assert!(ok, "{err}");
    for column in ["id", "item", "qty", "price"] {
        assert!(out.contains(column), "\\d shop.orders:\n{out}");
    }
    let (ok, out, err) = run(vec![
        "SELECT item, qty * price AS total FROM shop.orders ORDER BY id",
    ])
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert!(
        out.contains("tea") && out.contains("7.00") && out.contains("(2 rows)"),
        "{out}"
    );
    // Flink DDL and writes through psql.
    let (ok, out, err) = run(vec![
        "CREATE TABLE shop.visits (id BIGINT, page STRING) WITH ('bucket.num' = '2')",
        "INSERT INTO shop.visits VALUES (1, 'home'), (2, 'cart')",
        "SELECT count(*) AS n FROM shop.visits",
    ])
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert!(
        out.contains("CREATE TABLE") && out.contains("INSERT 0 2"),
        "{out}"
    );
    // An error: psql prints it and exits non-zero; the endpoint goes on.
    let (ok, _, err) = run(vec!["SELECT nope FROM shop.orders"]).await.unwrap();
    assert!(!ok);
    assert!(err.contains("ERROR") && err.contains("nope"), "{err}");
    let (ok, _, err) = run(vec!["ALTER TABLE shop.orders ADD COLUMN x INT"])
        .await
        .unwrap();
    assert!(!ok);
    assert!(
        err.contains("unsupported") && err.contains("ALTER TABLE"),
        "{err}"
    );
    let (ok, out, err) = run(vec!["SELECT 1 AS still_serving"]).await.unwrap();
    assert!(ok && out.contains("still_serving"), "{err}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_users_are_checked() {
    let server = TestServer::start().await;
    let mut users = Users::default();
    users
        .passwords
        .insert("alice".to_owned(), "s3cret".to_owned());
    let port = serve(&server, users).await;
    let run = move |user: &'static str, password: &'static str| {
        tokio::task::spawn_blocking(move || {
            psql(port, user, Some(password), &["SELECT 42 AS answer"])
        })
    };
    let (ok, out, err) = run("alice", "s3cret").await.unwrap();
    assert!(ok && out.contains("42"), "{err}");
    let (ok, _, err) = run("alice", "wrong").await.unwrap();
    assert!(!ok);
    assert!(
        err.contains("password authentication failed") || err.contains("authentication"),
        "{err}"
    );
    let (ok, _, err) = run("mallory", "s3cret").await.unwrap();
    assert!(!ok);
    assert!(err.contains("mallory"), "{err}");
    server.stop().await;
}

#[test]
fn an_endpoint_without_users_serves_only_loopback() {
    let users = Users::default();
    assert!(pg::check_auth("pg", &"127.0.0.1:5432".parse().unwrap(), &users).is_ok());
    assert!(pg::check_auth("pg", &"[::1]:5432".parse().unwrap(), &users).is_ok());
    let e = pg::check_auth("pg", &"0.0.0.0:5432".parse().unwrap(), &users).unwrap_err();
    assert!(e.to_string().contains("sql.users"), "{e}");
    let mut users = Users::default();
    users.passwords.insert("a".into(), "b".into());
    assert!(pg::check_auth("pg", &"0.0.0.0:5432".parse().unwrap(), &users).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_over_the_limits_fail_clearly_and_the_endpoint_goes_on() {
    let server = TestServer::start().await;
    let engine = server
        .engine_with(fjord_sql::EngineOptions {
            memory_bytes_max: 4 << 20,
            query_timeout: std::time::Duration::from_secs(1),
            ..fjord_sql::EngineOptions::default()
        })
        .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(pg::serve(engine, listener, Users::default()));
    let run = move |command: &'static str| {
        tokio::task::spawn_blocking(move || psql(port, "anyone", None, &[command]))
    };
    // 10^12 rows: stopped at the deadline.
    let (ok, _, err) = run("SELECT sum(value) FROM range(1000000000000)")
        .await
        .unwrap();
    assert!(!ok);
    assert!(
        err.contains("ERROR") && err.contains("sql.query.timeout"),
        "{err}"
    );
    // All values in one accumulator: over the memory pool.
    let (ok, _, err) = run("SELECT array_agg(value) FROM range(2000000)")
        .await
        .unwrap();
    assert!(!ok);
    assert!(
        err.contains("ERROR") && err.contains("sql.query.memory-max"),
        "{err}"
    );
    let (ok, out, err) = run("SELECT 1 AS still_serving").await.unwrap();
    assert!(ok && out.contains("still_serving"), "{err}");
    server.stop().await;
}
