//! PartitionRouter against an in-process server: the cache built from the
//! listing, dynamic creation once per partition under concurrent callers,
//! dynamic creation disabled, and the server's partition limit.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fjord_client::row::Datum;
use fjord_client::{
    Admin, PartitionLookup, PartitionRouter, ServerConnection, TableInfo, TablePath,
};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use fjord_proto::ErrorCode;
use fjord_server::{Server, ServerConfig};
use tokio::sync::oneshot;

mod support;

/// Bound on every client call, so a server that never answers fails the test
/// instead of hanging it.
const STEP: Duration = Duration::from_secs(60);

/// A server for one test and the admin talking to it (the server runs until
/// the test's runtime ends; its data directory lives as long as this value).
struct Running {
    admin: Admin,
    _server: support::TestServer,
}

/// A server with extra server options (`key=value`).
async fn start_with(settings: &[&str]) -> Running {
    let server = support::TestServer::start_with(None, settings).await;
    let connection = ServerConnection::connect(&server.addr)
        .await
        .expect("connect");
    Running {
        admin: Admin::new(connection),
        _server: server,
    }
}

async fn start() -> Running {
    start_with(&[]).await
}

/// `db.<name>`: `id BIGINT, dt STRING`, partitioned by `dt`, one bucket.
async fn create_table(admin: &Admin, name: &str) -> TableInfo {
    let schema = Schema::builder()
        .column("id", DataType::bigint())
        .column("dt", DataType::string())
        .build()
        .expect("schema");
    support::create_partitioned_table(admin, &TablePath::new("db", name), schema, &["dt"], Some(1))
        .await
}

/// Table `db.<name>` (see [`create_table`]) and a router for it, creating
/// missing partitions when `dynamic` is set.
async fn routed(s: &Running, name: &str, dynamic: bool) -> (TableInfo, Arc<PartitionRouter>) {
    let table = create_table(&s.admin, name).await;
    let router = PartitionRouter::new(s.admin.clone(), &table, dynamic)
        .await
        .expect("router");
    (table, router)
}

fn row(dt: &str) -> [Datum<'_>; 2] {
    [Datum::BigInt(1), Datum::String(dt)]
}

async fn listed(admin: &Admin, path: &TablePath) -> HashMap<String, i64> {
    admin
        .list_partitions(path, None)
        .await
        .expect("list")
        .into_iter()
        .map(|p| (p.name, p.partition_id))
        .collect()
}

#[tokio::test]
async fn cache_starts_with_the_partitions_the_server_lists() {
    let s = start().await;
    let table = create_table(&s.admin, "preloaded").await;
    s.admin
        .create_partition(
            &table.path,
            &[("dt".to_owned(), "20261130".to_owned())],
            false,
        )
        .await
        .expect("create");
    let id = listed(&s.admin, &table.path).await["20261130"];

    let router = PartitionRouter::new(s.admin.clone(), &table, false)
        .await
        .expect("router");
    assert_eq!(router.known_partitions(), 1);
    assert_eq!(
        router.lookup(&row("20261130")[..]).expect("lookup"),
        PartitionLookup::Known(id)
    );
    assert_eq!(
        router.lookup(&row("20261201")[..]).expect("lookup"),
        PartitionLookup::Missing
    );
    let mut view = router.view();
    assert_eq!(
        view.lookup(&row("20261130")[..]).expect("lookup"),
        PartitionLookup::Known(id)
    );
    assert_eq!(router.create_requests_sent(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_create_each_missing_partition_once() {
    const TASKS: usize = 8;
    const DAYS: [&str; 5] = ["20261201", "20261202", "20261203", "20261204", "20261205"];
    let s = start().await;
    let (table, router) = routed(&s, "dynamic", true).await;
    let mut views_before = router.view();

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let router = Arc::clone(&router);
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            // Each task walks the days from a different start, so callers
            // collide on every partition in different orders.
            for i in 0..DAYS.len() {
                let dt = DAYS[(i + task) % DAYS.len()];
                let id = tokio::time::timeout(STEP, router.ensure(&row(dt)[..]))
                    .await
                    .expect("in time")
                    .expect("ensure");
                ids.push((dt, id));
            }
            ids
        }));
    }
    let server_ids = {
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("task"));
        }
        all
    };

    let listed = listed(&s.admin, &table.path).await;
    assert_eq!(
        listed.len(),
        DAYS.len(),
        "exactly one partition per day: {listed:?}"
    );
    for (dt, id) in server_ids {
        assert_eq!(listed[dt], id, "every caller got the server's id of {dt}");
    }
    assert_eq!(
        router.create_requests_sent(),
        DAYS.len() as u64,
        "one CreatePartition per missing partition"
    );
    // A view taken before the creations sees them without being rebuilt.
    for dt in DAYS {
        assert_eq!(
            views_before.lookup(&row(dt)[..]).expect("lookup"),
            PartitionLookup::Known(listed[dt])
        );
    }
}

#[tokio::test]
async fn disabled_dynamic_creation_names_the_missing_partition_and_creates_nothing() {
    let s = start().await;
    let (table, router) = routed(&s, "static", false).await;

    let error = router
        .ensure(&row("20261130")[..])
        .await
        .expect_err("missing");
    assert_eq!(
        error.error_code(),
        Some(ErrorCode::PartitionNotExists),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("20261130") && message.contains("dynamic-create-partition"),
        "{message}"
    );
    assert!(listed(&s.admin, &table.path).await.is_empty());
    assert_eq!(router.create_requests_sent(), 0);

    // Created by someone else after the router was built: found on the miss.
    s.admin
        .create_partition(
            &table.path,
            &[("dt".to_owned(), "20261130".to_owned())],
            false,
        )
        .await
        .expect("create");
    let id = router
        .ensure(&row("20261130")[..])
        .await
        .expect("now exists");
    assert_eq!(listed(&s.admin, &table.path).await["20261130"], id);
}

#[tokio::test]
async fn partition_limit_surfaces_the_server_error_and_is_retried_next_time() {
    let s = start_with(&["max.partition.num=1"]).await;
    let (table, router) = routed(&s, "limited", true).await;
    router
        .ensure(&row("20261130")[..])
        .await
        .expect("first fits");

    for attempt in 0..2 {
        let error = router
            .ensure(&row("20261201")[..])
            .await
            .expect_err("over the limit");
        assert_eq!(
            error.error_code(),
            Some(ErrorCode::PartitionMaxNumException),
            "attempt {attempt}: {error}"
        );
    }
    // A failed flight is not remembered: each ensure asked the server again.
    assert_eq!(router.create_requests_sent(), 3);
    assert_eq!(listed(&s.admin, &table.path).await.len(), 1);
}

#[tokio::test]
async fn a_view_routes_alternating_runs_of_partitions_each_to_its_own_id() {
    let s = start().await;
    let (_, router) = routed(&s, "alternating", true).await;
    let a = router.ensure(&row("20261129")[..]).await.expect("create a");
    let b = router.ensure(&row("20261130")[..]).await.expect("create b");
    assert_ne!(a, b);
    let mut view = router.view();
    // Runs, switches back and forth, and a miss in between: the remembered
    // partition of the previous row never answers for another name.
    for (dt, expected) in [
        ("20261129", PartitionLookup::Known(a)),
        ("20261129", PartitionLookup::Known(a)),
        ("20261130", PartitionLookup::Known(b)),
        ("20261129", PartitionLookup::Known(a)),
        ("20261201", PartitionLookup::Missing),
        ("20261130", PartitionLookup::Known(b)),
        ("20261130", PartitionLookup::Known(b)),
        ("2026113", PartitionLookup::Missing),
    ] {
        assert_eq!(view.lookup(&row(dt)[..]).expect("lookup"), expected, "{dt}");
    }
}

#[tokio::test]
async fn refresh_forgets_a_dropped_partition() {
    let s = start().await;
    let (table, router) = routed(&s, "dropped", true).await;
    let mut view = router.view();
    let id = router.ensure(&row("20261130")[..]).await.expect("create");
    assert_eq!(
        view.lookup(&row("20261130")[..]).expect("lookup"),
        PartitionLookup::Known(id)
    );

    s.admin
        .drop_partition(
            &table.path,
            &[("dt".to_owned(), "20261130".to_owned())],
            false,
        )
        .await
        .expect("drop");
    router.refresh().await.expect("refresh");
    assert_eq!(
        view.lookup(&row("20261130")[..]).expect("lookup"),
        PartitionLookup::Missing
    );
    assert_eq!(router.partition_id("20261130"), None);
}

#[tokio::test]
async fn router_refuses_a_table_without_partition_keys() {
    let s = start().await;
    let schema = Schema::builder()
        .column("id", DataType::bigint())
        .build()
        .expect("schema");
    let table = support::create_partitioned_table(
        &s.admin,
        &TablePath::new("db", "plain"),
        schema,
        &[],
        None,
    )
    .await;
    let error = PartitionRouter::new(s.admin.clone(), &table, true)
        .await
        .expect_err("not partitioned");
    assert!(error.to_string().contains("not partitioned"), "{error}");
}

#[tokio::test]
async fn several_partition_keys_route_by_the_name_the_server_lists() {
    let s = start().await;
    let schema = Schema::builder()
        .column("region", DataType::string())
        .column("id", DataType::bigint())
        .column("dt", DataType::string())
        .build()
        .expect("schema");
    // Keys in an order other than the columns': names follow the keys.
    let path = TablePath::new("db", "two_keys");
    let table =
        support::create_partitioned_table(&s.admin, &path, schema, &["dt", "region"], None).await;
    let router = PartitionRouter::new(s.admin.clone(), &table, true)
        .await
        .expect("router");

    let row = [
        Datum::String("eu"),
        Datum::BigInt(1),
        Datum::String("20261130"),
    ];
    assert_eq!(
        router.lookup(&row[..]).expect("lookup"),
        PartitionLookup::Missing
    );
    let id = router.ensure(&row[..]).await.expect("create");
    let listed = listed(&s.admin, &path).await;
    assert_eq!(listed.get("20261130$eu"), Some(&id), "{listed:?}");
    assert_eq!(
        router.lookup(&row[..]).expect("lookup"),
        PartitionLookup::Known(id)
    );
    assert_eq!(router.create_requests_sent(), 1);
}

/// Serves `dir` on `listen`; returns the address, the stop signal and the
/// server task (which ends once the server has shut down).
async fn serve(
    dir: &std::path::Path,
    listen: &str,
) -> (String, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let server = Server::bind(ServerConfig::with_data_dir(dir.to_owned()), listen)
        .await
        .expect("server starts");
    let addr = server.local_addr().to_string();
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    (addr, stop, task)
}

#[tokio::test]
async fn router_for_client_keeps_creating_after_the_coordinator_restarts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (addr, stop, task) = serve(dir.path(), "127.0.0.1:0").await;
    let client = fjord_client::FlussClient::connect(std::slice::from_ref(&addr))
        .await
        .expect("connect");
    let table = create_table(&client.admin(), "restarted").await;
    let following = PartitionRouter::for_client(&client, &table, true)
        .await
        .expect("router over the client");
    let pinned = PartitionRouter::new(client.admin(), &table, true)
        .await
        .expect("router over one connection");
    let old = client.coordinator().await.expect("coordinator");

    stop.send(()).expect("server running");
    task.await.expect("server stops");
    // Wait (bounded) until the client has seen its connection close.
    let deadline = std::time::Instant::now() + STEP;
    while !old.is_closed() {
        assert!(
            std::time::Instant::now() < deadline,
            "connection still open"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, stop_again, _task_again) = serve(dir.path(), &addr).await;

    let id = following
        .ensure(&row("20261130")[..])
        .await
        .expect("created over a fresh coordinator connection");
    assert_eq!(listed(&client.admin(), &table.path).await["20261130"], id);
    let error = pinned
        .ensure(&row("20261201")[..])
        .await
        .expect_err("the pinned connection is dead");
    assert!(
        matches!(error, fjord_client::ClientError::ConnectionClosed { .. }),
        "{error}"
    );
    let _ = stop_again.send(());
}
