//! Admin partition calls against an in-process server: create, list (all and
//! by partial spec), drop, and the Fluss error codes of each refusal.

use std::time::Duration;

use fjord_client::admin::PartitionInfo;
use fjord_client::{Admin, ServerConnection, TablePath};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use fjord_proto::ErrorCode;

mod support;

/// Bound on every client call, so a server that never answers fails the test
/// instead of hanging it.
const STEP: Duration = Duration::from_secs(30);

/// A server for one test and the admin talking to it (the server runs until
/// the test's runtime ends; its data directory lives as long as this value).
struct Running {
    admin: Admin,
    _server: support::TestServer,
}

async fn start() -> Running {
    let server = support::TestServer::start().await;
    let connection = ServerConnection::connect(&server.addr)
        .await
        .expect("connect");
    let admin = Admin::new(connection);
    Running {
        admin,
        _server: server,
    }
}

/// Creates `db.<name>` with `id BIGINT` plus one STRING column per
/// partition key, partitioned by `keys`.
async fn create_table(admin: &Admin, name: &str, keys: &[&str]) -> TablePath {
    let mut schema = Schema::builder().column("id", DataType::bigint());
    for key in keys {
        schema = schema.column(*key, DataType::string());
    }
    let path = TablePath::new("db", name);
    support::create_partitioned_table(admin, &path, schema.build().expect("schema"), keys, Some(2))
        .await
        .path
}

fn spec(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

async fn list(
    admin: &Admin,
    path: &TablePath,
    partial: Option<&[(&str, &str)]>,
) -> Vec<PartitionInfo> {
    let partial = partial.map(spec);
    let mut partitions =
        tokio::time::timeout(STEP, admin.list_partitions(path, partial.as_deref()))
            .await
            .expect("in time")
            .expect("list partitions");
    partitions.sort_by(|a, b| a.name.cmp(&b.name));
    partitions
}

fn names(partitions: &[PartitionInfo]) -> Vec<&str> {
    partitions.iter().map(|p| p.name.as_str()).collect()
}

#[tokio::test]
async fn created_partitions_are_listed_with_name_id_and_spec() {
    let s = start().await;
    let path = create_table(&s.admin, "one_key", &["dt"]).await;
    assert!(list(&s.admin, &path, None).await.is_empty());

    for dt in ["20261130", "20261201"] {
        s.admin
            .create_partition(&path, &spec(&[("dt", dt)]), false)
            .await
            .expect("create partition");
    }
    let listed = list(&s.admin, &path, None).await;
    assert_eq!(names(&listed), ["20261130", "20261201"]);
    assert_eq!(listed[0].spec, spec(&[("dt", "20261130")]));
    assert_ne!(listed[0].partition_id, listed[1].partition_id);

    let table = s.admin.table_info(&path).await.expect("table info");
    assert!(table.is_partitioned());
    assert_eq!(table.partition_keys(), ["dt".to_owned()]);
}

#[tokio::test]
async fn multi_key_names_follow_key_order_and_partial_spec_filters() {
    let s = start().await;
    let path = create_table(&s.admin, "two_keys", &["dt", "region"]).await;
    for (dt, region) in [("20261130", "eu"), ("20261130", "us"), ("20261201", "eu")] {
        // Spec given in the opposite order: the server orders it by key.
        s.admin
            .create_partition(&path, &spec(&[("region", region), ("dt", dt)]), false)
            .await
            .expect("create partition");
    }
    let all = list(&s.admin, &path, None).await;
    assert_eq!(names(&all), ["20261130$eu", "20261130$us", "20261201$eu"]);
    assert_eq!(all[1].spec, spec(&[("dt", "20261130"), ("region", "us")]));

    let eu = list(&s.admin, &path, Some(&[("region", "eu")])).await;
    assert_eq!(names(&eu), ["20261130$eu", "20261201$eu"]);
    let one = list(
        &s.admin,
        &path,
        Some(&[("dt", "20261201"), ("region", "eu")]),
    )
    .await;
    assert_eq!(names(&one), ["20261201$eu"]);
    assert_eq!(one[0].partition_id, all[2].partition_id);
}

#[tokio::test]
async fn dropped_partition_is_gone_and_its_id_not_reused() {
    let s = start().await;
    let path = create_table(&s.admin, "drop_me", &["dt"]).await;
    let dt = spec(&[("dt", "20261130")]);
    s.admin
        .create_partition(&path, &dt, false)
        .await
        .expect("create");
    let first_id = list(&s.admin, &path, None).await[0].partition_id;

    s.admin
        .drop_partition(&path, &dt, false)
        .await
        .expect("drop");
    assert!(list(&s.admin, &path, None).await.is_empty());

    s.admin
        .create_partition(&path, &dt, false)
        .await
        .expect("re-create");
    let again = list(&s.admin, &path, None).await;
    assert_eq!(names(&again), ["20261130"]);
    assert_ne!(
        again[0].partition_id, first_id,
        "a new partition gets a new id"
    );
}

#[tokio::test]
async fn refusals_carry_fluss_error_codes() {
    let s = start().await;
    let path = create_table(&s.admin, "refusals", &["dt"]).await;
    let dt = spec(&[("dt", "20261130")]);
    s.admin
        .create_partition(&path, &dt, false)
        .await
        .expect("create");

    let exists = s
        .admin
        .create_partition(&path, &dt, false)
        .await
        .expect_err("exists");
    assert_eq!(
        exists.error_code(),
        Some(ErrorCode::PartitionAlreadyExists),
        "{exists}"
    );
    s.admin
        .create_partition(&path, &dt, true)
        .await
        .expect("ignore_if_exists accepts an existing partition");

    let other = spec(&[("dt", "20991231")]);
    let missing = s
        .admin
        .drop_partition(&path, &other, false)
        .await
        .expect_err("missing");
    assert_eq!(
        missing.error_code(),
        Some(ErrorCode::PartitionNotExists),
        "{missing}"
    );
    s.admin
        .drop_partition(&path, &other, true)
        .await
        .expect("ignore_if_not_exists accepts a missing partition");

    let wrong_key = s
        .admin
        .create_partition(&path, &spec(&[("day", "20261130")]), false)
        .await
        .expect_err("wrong key");
    assert_eq!(
        wrong_key.error_code(),
        Some(ErrorCode::PartitionSpecInvalidException),
        "{wrong_key}"
    );

    let plain = create_table(&s.admin, "plain", &[]).await;
    let not_partitioned = s
        .admin
        .create_partition(&plain, &dt, false)
        .await
        .expect_err("plain");
    assert_eq!(
        not_partitioned.error_code(),
        Some(ErrorCode::TableNotPartitionedException),
        "{not_partitioned}"
    );
}
