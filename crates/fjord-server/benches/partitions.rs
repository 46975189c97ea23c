//! What partitions cost the server, measured on an in-process node through
//! the request dispatcher (no network, no client):
//!
//! - `produce`: ProduceLog of pre-built 1,000-row batches to a table without
//!   partitions vs to a table partitioned by day over 30 days (each request
//!   to the next day's partition). The partitioned path adds one lookup per
//!   bucket and request; this shows whether it is visible per record.
//!   The two runs alternate, three rounds each.
//! - `create_partition`: latency of CreatePartition as a table fills up to
//!   `max.partition.num` (the metadata file is rewritten whole on every
//!   change, so this is where partition count shows).
//! - `drop_table`: dropping a table with that many partitions.
//!
//! Prints one JSON line per result. CPU time is the process's user+system
//! time from `/proc/self/stat` (10 ms ticks; runs last seconds).
//! `FJORD_BENCH_DIR` picks the data directory's parent (default: the temp dir).
//!
//! Run: `cargo bench -p fjord-server --bench partitions`

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use fjord_format::arrow_log::{ArrowCompression, ArrowLogEncoder};
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::json::schema_from_json_bytes;
use fjord_format::log_batch::BatchHeader;
use fjord_proto::messages as pb;
use fjord_proto::{Request, Response};
use fjord_server::node::Node;
use fjord_server::{Options, Server, ServerConfig};

/// Rows per produced batch (one batch per request).
const ROWS_PER_BATCH: usize = 1_000;
/// Produce requests per measured run.
const REQUESTS: usize = 3_000;
/// Partitions of the partitioned table in the produce comparison (30 days).
const DAYS: usize = 30;
/// Partitions created in the creation-latency run (Fluss's default
/// `max.partition.num`).
const PARTITIONS: usize = 1_000;

const SCHEMA_JSON: &str = r#"{"version":1,"columns":[{"name":"user_id","data_type":{"type":"BIGINT"}},{"name":"behavior","data_type":{"type":"STRING"}},{"name":"dt","data_type":{"type":"STRING"}}]}"#;

fn table_json(partitioned: bool) -> String {
    let keys = if partitioned { r#"["dt"]"# } else { "[]" };
    format!(
        r#"{{"version":1,"schema":{SCHEMA_JSON},"partition_key":{keys},"bucket_key":[],"bucket_count":1,"properties":{{}},"custom_properties":{{}}}}"#
    )
}

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 here.
    (ticks(11) + ticks(12)) / 100.0
}

fn batch(day: &str) -> Vec<u8> {
    // The Arrow schema the server derives from the table's own schema, so
    // the batch cannot drift from SCHEMA_JSON.
    let schema = schema_from_json_bytes(SCHEMA_JSON.as_bytes()).expect("schema");
    let schema = to_arrow_schema(&schema);
    let behaviors = ["pv", "cart", "fav", "buy"];
    let rows = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..ROWS_PER_BATCH as i64)),
            Arc::new(StringArray::from_iter_values(
                (0..ROWS_PER_BATCH).map(|i| behaviors[i % 4]),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..ROWS_PER_BATCH).map(|_| day),
            )),
        ],
    )
    .expect("rows");
    let mut enc = ArrowLogEncoder::new(schema, ArrowCompression::None).expect("encoder");
    let mut out = Vec::new();
    enc.encode(
        &rows,
        &BatchHeader::append_only(1, ROWS_PER_BATCH as i32),
        None,
        &mut out,
    )
    .expect("encode");
    out
}

async fn call(node: &Arc<Node>, request: Request) -> Response {
    fjord_server::api::dispatch(node, request, 0)
        .await
        .expect("request succeeds")
}

fn path(table: &str) -> pb::PbTablePath {
    pb::PbTablePath {
        database_name: "bench".into(),
        table_name: table.into(),
    }
}

async fn create_table(node: &Arc<Node>, table: &str, partitioned: bool) -> i64 {
    call(
        node,
        Request::CreateTable(pb::CreateTableRequest {
            table_path: path(table),
            table_json: table_json(partitioned).into_bytes().into(),
            ignore_if_exists: false,
        }),
    )
    .await;
    let Response::GetTableInfo(info) = call(
        node,
        Request::GetTableInfo(pb::GetTableInfoRequest {
            table_path: path(table),
        }),
    )
    .await
    else {
        unreachable!()
    };
    info.table_id
}

async fn create_partition(node: &Arc<Node>, table: &str, day: &str) {
    call(
        node,
        Request::CreatePartition(pb::CreatePartitionRequest {
            table_path: path(table),
            partition_spec: pb::PbPartitionSpec {
                partition_key_values: vec![pb::PbKeyValue {
                    key: "dt".into(),
                    value: day.into(),
                }],
            },
            ignore_if_not_exists: false,
        }),
    )
    .await;
}

async fn partition_ids(node: &Arc<Node>, table: &str) -> Vec<i64> {
    let Response::ListPartitionInfos(r) = call(
        node,
        Request::ListPartitionInfos(pb::ListPartitionInfosRequest {
            table_path: path(table),
            partial_partition_spec: None,
            include_system_partitions: None,
        }),
    )
    .await
    else {
        unreachable!()
    };
    r.partitions_info.iter().map(|p| p.partition_id).collect()
}

/// Produces `REQUESTS` batches round-robin over `targets` (partition ids, or
/// `[None]`); returns (wall ns per record, CPU ns per record).
async fn produce_run(
    node: &Arc<Node>,
    table_id: i64,
    targets: &[Option<i64>],
    records: &bytes::Bytes,
) -> (f64, f64) {
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    for i in 0..REQUESTS {
        let Response::ProduceLog(r) = call(
            node,
            Request::ProduceLog(pb::ProduceLogRequest {
                acks: 1,
                table_id,
                timeout_ms: 30_000,
                buckets_req: vec![pb::PbProduceLogReqForBucket {
                    partition_id: targets[i % targets.len()],
                    bucket_id: 0,
                    records: records.clone(),
                    ..Default::default()
                }],
            }),
        )
        .await
        else {
            unreachable!()
        };
        assert_eq!(r.buckets_resp[0].error_code, None);
    }
    let n = (REQUESTS * ROWS_PER_BATCH) as f64;
    (
        wall.elapsed().as_nanos() as f64 / n,
        (cpu_seconds() - cpu) * 1e9 / n,
    )
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let parent = std::env::var_os("FJORD_BENCH_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::tempdir_in(parent).expect("bench dir");
        let mut options = Options::default();
        // Interval flushing, so fsync latency does not hide CPU differences.
        options.set("log.flush.interval-ms=1000").expect("option");
        let config = ServerConfig::from_options(dir.path().to_owned(), options).expect("config");
        let server = Server::bind(config, "127.0.0.1:0").await.expect("server");
        let node = server.node();
        call(
            &node,
            Request::CreateDatabase(pb::CreateDatabaseRequest {
                database_name: "bench".into(),
                ignore_if_exists: false,
                database_json: None,
            }),
        )
        .await;

        // produce: plain vs partitioned by day over 30 days.
        let plain = create_table(&node, "plain", false).await;
        let daily = create_table(&node, "daily", true).await;
        for d in 0..DAYS {
            create_partition(&node, "daily", &format!("202411{:02}", d + 1)).await;
        }
        let days: Vec<Option<i64>> = partition_ids(&node, "daily").await.into_iter().map(Some).collect();
        let records = bytes::Bytes::from(batch("20241101"));
        for round in 0..3 {
            for (name, table_id, targets) in [("plain", plain, vec![None]), ("daily_30", daily, days.clone())] {
                let (wall_ns, cpu_ns) = produce_run(&node, table_id, &targets, &records).await;
                println!(
                    r#"{{"bench":"produce","table":"{name}","round":{round},"records":{},"wall_ns_per_record":{wall_ns:.1},"cpu_ns_per_record":{cpu_ns:.1}}}"#,
                    REQUESTS * ROWS_PER_BATCH
                );
            }
        }

        // create_partition latency as the table fills up.
        create_table(&node, "many", true).await;
        let mut start = Instant::now();
        for i in 0..PARTITIONS {
            create_partition(&node, "many", &format!("p{i:04}")).await;
            if (i + 1) % 100 == 0 {
                println!(
                    r#"{{"bench":"create_partition","partitions_before":{},"count":100,"ms_per_create":{:.2}}}"#,
                    i + 1 - 100,
                    start.elapsed().as_secs_f64() * 1e3 / 100.0
                );
                start = Instant::now();
            }
        }
        let start = Instant::now();
        call(
            &node,
            Request::DropTable(pb::DropTableRequest {
                table_path: path("many"),
                ignore_if_not_exists: false,
            }),
        )
        .await;
        println!(
            r#"{{"bench":"drop_table","partitions":{PARTITIONS},"ms":{:.1}}}"#,
            start.elapsed().as_secs_f64() * 1e3
        );
    });
}
