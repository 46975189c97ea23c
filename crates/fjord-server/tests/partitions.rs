//! Partitioned tables over the wire: create / list / drop partitions with
//! Fluss's error codes, data routed by partition id and read back from that
//! partition only, ids and data across a restart, drop deleting data,
//! `max.partition.num`, auto-partitioning at table creation with an
//! injected clock, and table / partition creation (fsyncs) off the runtime
//! thread.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fjord_proto::messages as pb;
use fjord_proto::{ErrorCode, Request, Response};
use fjord_server::meta::auto_partition::{day_check_delay_minutes, Clock};
use fjord_server::partitions::auto_partition_all;
use fjord_server::{Options, ServerConfig};
use support::*;

/// `id INT, name STRING` (the support batches' schema), partitioned by
/// `name`, two buckets per partition.
const PARTITIONED_JSON: &str = r#"{"version":1,"schema":{"version":1,"columns":[{"name":"id","data_type":{"type":"INTEGER"}},{"name":"name","data_type":{"type":"STRING"}}]},"partition_key":["name"],"bucket_key":[],"bucket_count":2,"properties":{},"custom_properties":{}}"#;

async fn create_table(
    c: &mut Client,
    table: &str,
    json: &str,
) -> Result<i64, fjord_proto::ApiError> {
    c.call(Request::CreateDatabase(pb::CreateDatabaseRequest {
        database_name: "db".into(),
        ignore_if_exists: true,
        database_json: None,
    }))
    .await
    .unwrap();
    c.call(Request::CreateTable(pb::CreateTableRequest {
        table_path: table_path("db", table),
        table_json: json.as_bytes().to_vec().into(),
        ignore_if_exists: false,
    }))
    .await?;
    let Response::GetTableInfo(info) = c
        .call(Request::GetTableInfo(pb::GetTableInfoRequest {
            table_path: table_path("db", table),
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    Ok(info.table_id)
}

fn spec(pairs: &[(&str, &str)]) -> pb::PbPartitionSpec {
    pb::PbPartitionSpec {
        partition_key_values: pairs
            .iter()
            .map(|(k, v)| pb::PbKeyValue {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
    }
}

async fn create_partition(
    c: &mut Client,
    table: &str,
    pairs: &[(&str, &str)],
    ignore: bool,
) -> Result<(), fjord_proto::ApiError> {
    c.call(Request::CreatePartition(pb::CreatePartitionRequest {
        table_path: table_path("db", table),
        partition_spec: spec(pairs),
        ignore_if_not_exists: ignore,
    }))
    .await
    .map(drop)
}

async fn drop_partition(
    c: &mut Client,
    table: &str,
    pairs: &[(&str, &str)],
    ignore: bool,
) -> Result<(), fjord_proto::ApiError> {
    c.call(Request::DropPartition(pb::DropPartitionRequest {
        table_path: table_path("db", table),
        partition_spec: spec(pairs),
        ignore_if_not_exists: ignore,
    }))
    .await
    .map(drop)
}

/// (partition id, values in key order) of every listed partition.
async fn list(
    c: &mut Client,
    table: &str,
    partial: Option<&[(&str, &str)]>,
) -> Vec<(i64, Vec<String>)> {
    let Response::ListPartitionInfos(r) = c
        .call(Request::ListPartitionInfos(pb::ListPartitionInfosRequest {
            table_path: table_path("db", table),
            partial_partition_spec: partial.map(spec),
            include_system_partitions: None,
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    r.partitions_info
        .into_iter()
        .map(|p| {
            let values = p
                .partition_spec
                .partition_key_values
                .into_iter()
                .map(|kv| kv.value)
                .collect();
            (p.partition_id, values)
        })
        .collect()
}

async fn produce(
    c: &mut Client,
    table_id: i64,
    partition_id: i64,
    bucket_id: i32,
    ids: std::ops::Range<i32>,
) -> pb::PbProduceLogRespForBucket {
    let Response::ProduceLog(r) = c
        .call(Request::ProduceLog(pb::ProduceLogRequest {
            acks: -1,
            table_id,
            timeout_ms: 30_000,
            buckets_req: vec![pb::PbProduceLogReqForBucket {
                partition_id: Some(partition_id),
                bucket_id,
                records: batches::batch(ids, 1, None).into(),
                ..Default::default()
            }],
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    r.buckets_resp.into_iter().next().unwrap()
}

/// The ids read from one partition bucket from offset 0.
async fn fetch_ids(
    c: &mut Client,
    table_id: i64,
    partition_id: i64,
    bucket_id: i32,
) -> Result<Vec<i32>, i32> {
    let mut req = fetch(table_id, bucket_id, 0, None, 0);
    let Request::FetchLog(f) = &mut req else {
        unreachable!()
    };
    f.tables_req[0].buckets_req[0].partition_id = Some(partition_id);
    let Response::FetchLog(r) = c.call(req).await.unwrap() else {
        panic!()
    };
    let b = &r.tables_resp[0].buckets_resp[0];
    assert_eq!(b.partition_id, Some(partition_id));
    if let Some(code) = b.error_code {
        return Err(code);
    }
    let schema = fjord_format::arrow_schema::to_arrow_schema(&batches::table_schema());
    let records = b.records.clone().unwrap_or_default();
    Ok(batches::decode_all(&records, schema)
        .iter()
        .flat_map(|rb| {
            rb.column(0)
                .as_any()
                .downcast_ref::<arrow_array::Int32Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect())
}

#[tokio::test]
async fn partitions_are_created_listed_filtered_and_dropped_with_fluss_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    create_table(&mut c, "t", PARTITIONED_JSON).await.unwrap();
    create_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap();
    create_partition(&mut c, "t", &[("name", "b")], false)
        .await
        .unwrap();
    let all = list(&mut c, "t", None).await;
    assert_eq!(
        all.iter().map(|p| p.1[0].as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_ne!(all[0].0, all[1].0);
    assert_eq!(
        list(&mut c, "t", Some(&[("name", "b")])).await,
        vec![all[1].clone()]
    );

    let err = create_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PartitionAlreadyExists, "{err}");
    create_partition(&mut c, "t", &[("name", "a")], true)
        .await
        .unwrap();
    for bad in [
        &[("zz", "a")][..],
        &[][..],
        &[("name", "a/b")][..],
        &[("name", "__x")][..],
    ] {
        let err = create_partition(&mut c, "t", bad, false).await.unwrap_err();
        assert_eq!(
            err.code(),
            ErrorCode::PartitionSpecInvalidException,
            "{bad:?}: {err}"
        );
    }

    drop_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap();
    let err = drop_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PartitionNotExists, "{err}");
    drop_partition(&mut c, "t", &[("name", "a")], true)
        .await
        .unwrap();
    assert_eq!(list(&mut c, "t", None).await, vec![all[1].clone()]);

    // A partition created again gets a new id: ids are never reused.
    create_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap();
    let again = list(&mut c, "t", Some(&[("name", "a")])).await;
    assert!(again[0].0 > all[1].0, "{again:?} vs {all:?}");

    // A non-partitioned table answers TableNotPartitioned.
    create_table(&mut c, "plain", LOG_TABLE_JSON).await.unwrap();
    let err = create_partition(&mut c, "plain", &[("name", "a")], false)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::TableNotPartitionedException, "{err}");
    server.stop().await;
}

#[tokio::test]
async fn metadata_describes_partitions_by_path_and_id_and_refuses_unknown_ones() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_table(&mut c, "t", PARTITIONED_JSON).await.unwrap();
    create_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap();
    let pid = list(&mut c, "t", None).await[0].0;
    let Response::MetaData(md) = c
        .call(Request::MetaData(pb::MetadataRequest {
            table_path: vec![table_path("db", "t")],
            partitions_path: vec![pb::PbPhysicalTablePath {
                database_name: "db".into(),
                table_name: "t".into(),
                partition_name: Some("a".into()),
            }],
            partitions_id: vec![pid],
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    // The partitioned table itself has no buckets; each partition has two.
    assert!(md.table_metadata[0].bucket_metadata.is_empty());
    assert_eq!(md.partition_metadata.len(), 2);
    for p in &md.partition_metadata {
        assert_eq!(
            (p.table_id, p.partition_id, p.partition_name.as_str()),
            (table_id, pid, "a")
        );
        assert_eq!(p.bucket_metadata.len(), 2);
    }
    let err = c
        .call(Request::MetaData(pb::MetadataRequest {
            partitions_id: vec![pid + 100],
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PartitionNotExists, "{err}");
    server.stop().await;
}

#[tokio::test]
async fn rows_written_to_a_partition_are_read_back_from_that_partition_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_table(&mut c, "t", PARTITIONED_JSON).await.unwrap();
    create_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap();
    create_partition(&mut c, "t", &[("name", "b")], false)
        .await
        .unwrap();
    let parts = list(&mut c, "t", None).await;
    let (a, b) = (parts[0].0, parts[1].0);
    let resp = produce(&mut c, table_id, a, 1, 0..3).await;
    assert_eq!(
        (resp.error_code, resp.partition_id, resp.base_offset),
        (None, Some(a), Some(0))
    );
    let resp = produce(&mut c, table_id, b, 1, 100..102).await;
    assert_eq!((resp.error_code, resp.partition_id), (None, Some(b)));
    assert_eq!(fetch_ids(&mut c, table_id, a, 1).await, Ok(vec![0, 1, 2]));
    assert_eq!(fetch_ids(&mut c, table_id, b, 1).await, Ok(vec![100, 101]));
    assert_eq!(fetch_ids(&mut c, table_id, a, 0).await, Ok(vec![]));

    // Unknown partition ids answer UnknownTableOrBucket, per bucket, as a
    // Fluss tablet server does (interop/diff).
    let resp = produce(&mut c, table_id, b + 100, 0, 0..1).await;
    assert_eq!(
        resp.error_code,
        Some(ErrorCode::UnknownTableOrBucketException.code())
    );
    assert_eq!(
        fetch_ids(&mut c, table_id, b + 100, 0).await,
        Err(ErrorCode::UnknownTableOrBucketException.code())
    );
    let Response::ListOffsets(lo) = c
        .call(Request::ListOffsets(pb::ListOffsetsRequest {
            follower_server_id: -1,
            offset_type: 1,
            table_id,
            partition_id: Some(a),
            bucket_id: vec![0, 1],
            ..Default::default()
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    let latest: Vec<_> = lo.buckets_resp.iter().map(|b| b.offset).collect();
    assert_eq!(latest, [Some(0), Some(3)]);
    server.stop().await;
}

#[tokio::test]
async fn restart_keeps_partition_ids_and_data_and_drop_deletes_data() {
    let dir = tempfile::tempdir().unwrap();
    let (table_id, parts) = {
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        let table_id = create_table(&mut c, "t", PARTITIONED_JSON).await.unwrap();
        create_partition(&mut c, "t", &[("name", "a")], false)
            .await
            .unwrap();
        create_partition(&mut c, "t", &[("name", "b")], false)
            .await
            .unwrap();
        let parts = list(&mut c, "t", None).await;
        for (part, ids) in [(parts[0].0, 0..2), (parts[1].0, 5..6)] {
            let written = produce(&mut c, table_id, part, 0, ids).await;
            assert_eq!(written.error_code, None, "{written:?}");
        }
        server.stop().await;
        (table_id, parts)
    };
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    assert_eq!(list(&mut c, "t", None).await, parts);
    assert_eq!(
        fetch_ids(&mut c, table_id, parts[0].0, 0).await,
        Ok(vec![0, 1])
    );
    assert_eq!(
        fetch_ids(&mut c, table_id, parts[1].0, 0).await,
        Ok(vec![5])
    );

    let partition_dir = dir
        .path()
        .join("log")
        .join(table_id.to_string())
        .join(format!("p{}", parts[0].0));
    assert!(partition_dir.exists());
    drop_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap();
    assert!(
        !partition_dir.exists(),
        "dropped partition's data is deleted"
    );
    assert_eq!(
        fetch_ids(&mut c, table_id, parts[0].0, 0).await,
        Err(ErrorCode::UnknownTableOrBucketException.code())
    );
    // Dropping the table deletes every partition's data.
    c.call(Request::DropTable(pb::DropTableRequest {
        table_path: table_path("db", "t"),
        ignore_if_not_exists: false,
    }))
    .await
    .unwrap();
    assert!(!dir.path().join("log").join(table_id.to_string()).exists());
    server.stop().await;
    // And nothing of it comes back after a restart.
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    create_table(&mut c, "t", PARTITIONED_JSON).await.unwrap();
    assert!(list(&mut c, "t", None).await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn max_partition_num_refuses_one_more_partition_with_fluss_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default();
    options.set("max.partition.num=2").unwrap();
    let config = ServerConfig::from_options(dir.path().to_owned(), options).unwrap();
    let server = TestServer::start_with(config).await;
    let mut c = server.client().await;
    create_table(&mut c, "t", PARTITIONED_JSON).await.unwrap();
    create_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap();
    create_partition(&mut c, "t", &[("name", "b")], false)
        .await
        .unwrap();
    let err = create_partition(&mut c, "t", &[("name", "c")], false)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PartitionMaxNumException, "{err}");
    assert!(err.message().contains("max.partition.num"), "{err}");
    // Dropping one makes room again.
    drop_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap();
    create_partition(&mut c, "t", &[("name", "c")], false)
        .await
        .unwrap();
    server.stop().await;
}

struct FixedClock(jiff::Timestamp);

impl Clock for FixedClock {
    fn now(&self) -> jiff::Timestamp {
        self.0
    }
}

#[tokio::test]
async fn auto_partitioned_table_has_its_precreated_partitions_when_created() {
    let dir = tempfile::tempdir().unwrap();
    let now: jiff::Timestamp = "2024-11-11T10:00:00Z".parse().unwrap();
    let server = TestServer::start_with_clock(
        ServerConfig::with_data_dir(dir.path().to_owned()),
        Arc::new(FixedClock(now)),
    )
    .await;
    let mut c = server.client().await;
    let json = PARTITIONED_JSON.replace(
        r#""properties":{}"#,
        r#""properties":{"table.auto-partition.enabled":"true","table.auto-partition.time-unit":"DAY","table.auto-partition.num-precreate":"3","table.auto-partition.num-retention":"2","table.auto-partition.time-zone":"UTC"}"#,
    );
    create_table(&mut c, "auto", &json).await.unwrap();
    let names: Vec<String> = list(&mut c, "auto", None)
        .await
        .into_iter()
        .map(|p| p.1[0].clone())
        .collect();
    assert_eq!(names, ["20241111", "20241112", "20241113"]);
    // Manual creation must match the unit's format and not be expired.
    let err = create_partition(&mut c, "auto", &[("name", "2024-11-20")], false)
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode::PartitionSpecInvalidException,
        "{err}"
    );
    let err = create_partition(&mut c, "auto", &[("name", "20241101")], false)
        .await
        .unwrap_err();
    assert!(err.message().contains("out-of-date"), "{err}");
    create_partition(&mut c, "auto", &[("name", "20241109")], false)
        .await
        .unwrap();
    server.stop().await;
}

#[tokio::test]
async fn concurrent_creates_of_one_partition_create_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    create_table(&mut c, "t", PARTITIONED_JSON).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let mut c = server.client().await;
        tasks.push(tokio::spawn(async move {
            create_partition(&mut c, "t", &[("name", "hot")], true).await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(list(&mut c, "t", None).await.len(), 1);
    server.stop().await;
}

/// A clock the test moves forward.
struct SteppedClock(std::sync::Mutex<jiff::Timestamp>);

impl Clock for SteppedClock {
    fn now(&self) -> jiff::Timestamp {
        *self.0.lock().unwrap()
    }
}

/// Lists until `want` holds or the bound passes (the periodic check runs
/// on its own schedule; this waits for its effect, it asserts no timing).
async fn wait_for_partitions(c: &mut Client, table: &str, want: &[&str]) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let names: Vec<String> = list(c, table, None)
            .await
            .into_iter()
            .map(|p| p.1.join("$"))
            .collect();
        if names == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "partitions {names:?}, expected {want:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn periodic_check_precreates_the_next_hours_and_drops_expired_ones_with_their_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default();
    options.set("auto-partition.check.interval=20ms").unwrap();
    let config = ServerConfig::from_options(dir.path().to_owned(), options).unwrap();
    let clock = Arc::new(SteppedClock(std::sync::Mutex::new(
        "2024-03-10T06:30:00Z".parse().unwrap(),
    )));
    let server = TestServer::start_with_clock(config, Arc::clone(&clock) as Arc<dyn Clock>).await;
    let mut c = server.client().await;
    // HOUR in New York, across the spring-forward gap (02:00 does not exist).
    let json = PARTITIONED_JSON.replace(
        r#""properties":{}"#,
        r#""properties":{"table.auto-partition.enabled":"true","table.auto-partition.time-unit":"HOUR","table.auto-partition.num-precreate":"2","table.auto-partition.num-retention":"1","table.auto-partition.time-zone":"America/New_York"}"#,
    );
    let table_id = create_table(&mut c, "hourly", &json).await.unwrap();
    wait_for_partitions(&mut c, "hourly", &["2024031001", "2024031003"]).await;
    let first = list(&mut c, "hourly", None).await[0].0;
    let written = produce(&mut c, table_id, first, 0, 0..3).await;
    assert_eq!(
        (written.error_code, written.base_offset),
        (None, Some(0)),
        "{written:?}"
    );
    // The data is there before the check that drops it: the final
    // assertion is about deletion, not a path that never existed.
    let first_dir = dir
        .path()
        .join("log")
        .join(table_id.to_string())
        .join(format!("p{first}"));
    assert!(first_dir.exists(), "{}", first_dir.display());

    // Two hours later (05:30 EDT): 01 and 03 are older than one hour back
    // (04), so they go — with 01's data — and 05, 06 are pre-created.
    *clock.0.lock().unwrap() = "2024-03-10T09:30:00Z".parse().unwrap();
    wait_for_partitions(&mut c, "hourly", &["2024031005", "2024031006"]).await;
    assert_eq!(
        fetch_ids(&mut c, table_id, first, 0).await,
        Err(ErrorCode::UnknownTableOrBucketException.code())
    );
    assert!(!first_dir.exists(), "expired partition's data is deleted");
    server.stop().await;
}

#[tokio::test]
async fn a_day_tables_scheduled_checks_lag_by_its_delay_and_its_creation_check_does_not() {
    let dir = tempfile::tempdir().unwrap();
    // 23:59: whatever the table's delay (< 23 h), a scheduled check now plans
    // for the same day as the check at creation, so the start-up check
    // (which may run before or after the table exists) changes nothing.
    let clock = Arc::new(SteppedClock(std::sync::Mutex::new(
        "2024-11-11T23:59:00Z".parse().unwrap(),
    )));
    let server = TestServer::start_with_clock(
        ServerConfig::with_data_dir(dir.path().to_owned()),
        Arc::clone(&clock) as Arc<dyn Clock>,
    )
    .await;
    let mut c = server.client().await;
    let json = PARTITIONED_JSON.replace(
        r#""properties":{}"#,
        r#""properties":{"table.auto-partition.enabled":"true","table.auto-partition.time-unit":"DAY","table.auto-partition.num-precreate":"2","table.auto-partition.num-retention":"1","table.auto-partition.time-zone":"UTC"}"#,
    );
    let table_id = create_table(&mut c, "daily", &json).await.unwrap();
    wait_for_partitions(&mut c, "daily", &["20241111", "20241112"]).await;
    let delay = day_check_delay_minutes(table_id);
    assert!(
        delay > 0,
        "table {table_id} has no delay: pick another start"
    );
    let midnight: jiff::Timestamp = "2024-11-12T00:00:00Z".parse().unwrap();
    let at = |minutes: i64| midnight + jiff::SignedDuration::from_mins(minutes);

    // A minute before the table's delayed midnight: the schedule still
    // says 11 November, so 20241113 is not pre-created yet.
    *clock.0.lock().unwrap() = at(delay - 1);
    let node = Arc::clone(&server.node);
    tokio::task::spawn_blocking(move || auto_partition_all(&node))
        .await
        .unwrap();
    wait_for_partitions(&mut c, "daily", &["20241111", "20241112"]).await;

    // A minute after it: 12 November; retention 1 keeps 20241111.
    *clock.0.lock().unwrap() = at(delay + 1);
    let node = Arc::clone(&server.node);
    tokio::task::spawn_blocking(move || auto_partition_all(&node))
        .await
        .unwrap();
    wait_for_partitions(&mut c, "daily", &["20241111", "20241112", "20241113"]).await;
    server.stop().await;
}

#[tokio::test]
async fn drop_database_cascade_deletes_partitioned_tables_data() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_table(&mut c, "t", PARTITIONED_JSON).await.unwrap();
    create_partition(&mut c, "t", &[("name", "a")], false)
        .await
        .unwrap();
    let pid = list(&mut c, "t", None).await[0].0;
    let written = produce(&mut c, table_id, pid, 0, 0..2).await;
    assert_eq!(
        (written.error_code, written.base_offset),
        (None, Some(0)),
        "the partition holds data before the drop: {written:?}"
    );
    let table_dir = dir.path().join("log").join(table_id.to_string());
    assert!(table_dir.exists());
    c.call(Request::DropDatabase(pb::DropDatabaseRequest {
        database_name: "db".into(),
        ignore_if_not_exists: false,
        cascade: true,
    }))
    .await
    .unwrap();
    assert!(
        !table_dir.exists(),
        "the partitioned table's data is deleted"
    );
    let err = c
        .call(Request::MetaData(pb::MetadataRequest {
            partitions_id: vec![pid],
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PartitionNotExists, "{err}");
    server.stop().await;
}

/// Dispatches `request` on the test's (single-threaded) runtime next to a
/// probe future polled right after its first poll; true if the probe found
/// the request still running, i.e. it gave the thread back while its
/// blocking work ran elsewhere (done inline, it would finish within its
/// first poll).
async fn runtime_free_while(node: &Arc<fjord_server::node::Node>, request: Request) -> bool {
    let done = AtomicBool::new(false);
    let work = async {
        fjord_server::api::dispatch(node, request, 0)
            .await
            .expect("request succeeds");
        done.store(true, Ordering::SeqCst);
    };
    let probe = async { !done.load(Ordering::SeqCst) };
    tokio::join!(work, probe).1
}

#[tokio::test]
async fn create_table_and_create_partition_leave_the_runtime_thread_free_while_they_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    create_table(&mut c, "first", PARTITIONED_JSON)
        .await
        .unwrap();
    let create_table = Request::CreateTable(pb::CreateTableRequest {
        table_path: table_path("db", "t"),
        table_json: PARTITIONED_JSON.as_bytes().to_vec().into(),
        ignore_if_exists: false,
    });
    assert!(
        runtime_free_while(&server.node, create_table).await,
        "CreateTable ran on the runtime thread"
    );
    let create_partition = Request::CreatePartition(pb::CreatePartitionRequest {
        table_path: table_path("db", "t"),
        partition_spec: spec(&[("name", "a")]),
        ignore_if_not_exists: false,
    });
    assert!(
        runtime_free_while(&server.node, create_partition).await,
        "CreatePartition ran on the runtime thread"
    );
    assert_eq!(list(&mut c, "t", None).await.len(), 1);
    server.stop().await;
}
