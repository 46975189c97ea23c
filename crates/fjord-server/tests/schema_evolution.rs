//! Schema evolution over the wire, with requests built by hand: AlterTable
//! (options, added columns, every refusal with Fluss 0.9.1's code and
//! message), GetTableSchema by id, and the data path across schema ids —
//! log batches of old and new ids produced and fetched whole and projected
//! (each projected with its own schema, as Fluss's `FileLogProjection`),
//! primary-key rows of old and new ids merged padded with NULLs, the
//! changelog always at the latest id, stored values kept with the id they
//! were written with, partitions opened before and after an alter — and all
//! of it again after a restart and after the KV store is rebuilt from the
//! changelog.

mod support;

use arrow_array::{Array, Int32Array, Int64Array, RecordBatch, StringArray};
use bytes::Bytes;
use fjord_format::arrow_log::{decode_log_batch, ArrowCompression, ArrowLogEncoder, ChangeType};
use fjord_format::arrow_schema::{to_arrow_schema, to_projected_arrow_schema};
use fjord_format::datum::Datum;
use fjord_format::kv::batch::KvBatchBuilder;
use fjord_format::log_batch::{BatchHeader, LogBatches};
use fjord_format::row::key::KeyEncoder;
use fjord_format::row::{RowCodec, RowFormat};
use fjord_format::Schema;
use fjord_proto::messages as pb;
use fjord_proto::{ApiError, ErrorCode, Request, Response};
use std::sync::Arc;
use support::*;

/// `id INT NOT NULL, name STRING`, primary key `id`, one bucket.
const PK_JSON: &str = r#"{"version":1,"schema":{"version":1,"columns":[{"name":"id","data_type":{"type":"INTEGER","nullable":false}},{"name":"name","data_type":{"type":"STRING"}}],"primary_key":["id"]},"partition_key":[],"bucket_key":[],"bucket_count":1,"properties":{},"custom_properties":{}}"#;

/// The JSON of a nullable BIGINT, as clients send a column type.
const BIGINT: &[u8] = br#"{"type":"BIGINT"}"#;

/// One row as the tests see it: id, name, and the `n` column added by the
/// alter (`None` where the row's schema lacks it or it is NULL).
type Row = (i32, Option<String>, Option<i64>);

fn row(id: i32, name: &str, n: Option<i64>) -> Row {
    (id, Some(name.to_owned()), n)
}

async fn create_table(c: &mut Client, table: &str, json: &str) -> i64 {
    c.call(Request::CreateDatabase(pb::CreateDatabaseRequest {
        database_name: "db".into(),
        ignore_if_exists: true,
        database_json: None,
    }))
    .await
    .expect("create database");
    c.call(Request::CreateTable(pb::CreateTableRequest {
        table_path: table_path("db", table),
        table_json: json.as_bytes().to_vec().into(),
        ignore_if_exists: false,
    }))
    .await
    .expect("create table");
    table_info(c, table).await.table_id
}

async fn table_info(c: &mut Client, table: &str) -> pb::GetTableInfoResponse {
    match c
        .call(Request::GetTableInfo(pb::GetTableInfoRequest {
            table_path: table_path("db", table),
        }))
        .await
    {
        Ok(Response::GetTableInfo(info)) => info,
        other => panic!("GetTableInfo answered {other:?}"),
    }
}

async fn table_schema(
    c: &mut Client,
    table: &str,
    schema_id: Option<i32>,
) -> Result<(i32, Schema), ApiError> {
    match c
        .call(Request::GetTableSchema(pb::GetTableSchemaRequest {
            table_path: table_path("db", table),
            schema_id,
        }))
        .await?
    {
        Response::GetTableSchema(r) => Ok((
            r.schema_id,
            fjord_format::json::schema_from_json_bytes(&r.schema_json).unwrap(),
        )),
        other => panic!("GetTableSchema answered {other:?}"),
    }
}

/// An AlterTable request for `db.<table>`, shaped by `f`.
fn alter_request(table: &str, f: impl FnOnce(&mut pb::AlterTableRequest)) -> Request {
    let mut r = pb::AlterTableRequest {
        table_path: table_path("db", table),
        ignore_if_not_exists: false,
        config_changes: vec![],
        add_columns: vec![],
        drop_columns: vec![],
        rename_columns: vec![],
        modify_columns: vec![],
        modify_bucket_count: None,
    };
    f(&mut r);
    Request::AlterTable(r)
}

async fn alter(c: &mut Client, request: Request) -> Result<(), ApiError> {
    match c.call(request).await? {
        Response::AlterTable(_) => Ok(()),
        other => panic!("AlterTable answered {other:?}"),
    }
}

fn add_column(name: &str, data_type_json: &[u8]) -> pb::PbAddColumn {
    pb::PbAddColumn {
        column_name: name.into(),
        data_type_json: Bytes::copy_from_slice(data_type_json),
        comment: None,
        column_position_type: 0,
        agg_function_type: None,
        agg_function_params: vec![],
    }
}

fn set(key: &str, value: &str) -> pb::PbAlterConfig {
    pb::PbAlterConfig {
        config_key: key.into(),
        config_value: Some(value.into()),
        op_type: 0,
    }
}

/// Adds the nullable BIGINT column `n` to `db.<table>`.
async fn add_n(c: &mut Client, table: &str) {
    alter(
        c,
        alter_request(table, |r| r.add_columns.push(add_column("n", BIGINT))),
    )
    .await
    .expect("ALTER TABLE ADD COLUMN n");
}

// ---- log tables ----

/// A log batch of `rows` in `schema` (two columns, or three with `n`).
fn log_batch(schema: &Schema, schema_id: i16, rows: &[Row]) -> Vec<u8> {
    let arrow = to_arrow_schema(schema);
    let mut columns: Vec<Arc<dyn Array>> = vec![
        Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1.clone()))),
    ];
    if schema.columns().len() == 3 {
        columns.push(Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.2))));
    }
    let records = RecordBatch::try_new(arrow.clone(), columns).unwrap();
    let mut enc = ArrowLogEncoder::new(arrow, ArrowCompression::None).unwrap();
    let header = BatchHeader::append_only(schema_id, rows.len() as i32);
    let mut out = Vec::new();
    enc.encode(&records, &header, None, &mut out).unwrap();
    out
}

/// The rows of one decoded batch whose columns are `names` (a projection
/// or a whole schema).
fn rows_of(batch: &RecordBatch, names: &[&str]) -> Vec<Row> {
    let column = |name: &str| {
        names
            .iter()
            .position(|n| *n == name)
            .map(|i| batch.column(i))
    };
    let ids = column("id").map(|c| c.as_any().downcast_ref::<Int32Array>().unwrap().clone());
    let texts = column("name").map(|c| c.as_any().downcast_ref::<StringArray>().unwrap().clone());
    let ns = column("n").map(|c| c.as_any().downcast_ref::<Int64Array>().unwrap().clone());
    (0..batch.num_rows())
        .map(|i| {
            (
                ids.as_ref().map_or(-1, |a| a.value(i)),
                texts
                    .as_ref()
                    .filter(|a| !a.is_null(i))
                    .map(|a| a.value(i).to_owned()),
                ns.as_ref().filter(|a| !a.is_null(i)).map(|a| a.value(i)),
            )
        })
        .collect()
}

/// Every batch of a fetch answer: its schema id and rows, decoded with the
/// schema of its id (`schemas[id - 1]`), projected to `projection` if given.
fn fetched(
    records: &Bytes,
    schemas: &[Schema],
    projection: Option<&[usize]>,
) -> Vec<(i16, Vec<Row>)> {
    LogBatches::new(records)
        .map(|batch| {
            let batch = batch.unwrap();
            let schema = &schemas[batch.schema_id() as usize - 1];
            let (arrow, names): (_, Vec<&str>) = match projection {
                None => (
                    to_arrow_schema(schema),
                    schema.columns().iter().map(|c| c.name.as_str()).collect(),
                ),
                Some(cols) => (
                    to_projected_arrow_schema(schema, cols).unwrap(),
                    cols.iter()
                        .map(|&i| schema.columns()[i].name.as_str())
                        .collect(),
                ),
            };
            if batch.record_count() == 0 {
                return (batch.schema_id(), Vec::new());
            }
            let decoded =
                decode_log_batch(&records.slice_ref(batch.as_bytes()).into(), arrow).unwrap();
            (batch.schema_id(), rows_of(&decoded.records, &names))
        })
        .collect()
}

async fn produce(c: &mut Client, table_id: i64, records: Vec<u8>) -> pb::PbProduceLogRespForBucket {
    let request = Request::ProduceLog(pb::ProduceLogRequest {
        acks: -1,
        table_id,
        timeout_ms: 30_000,
        buckets_req: vec![pb::PbProduceLogReqForBucket {
            bucket_id: 0,
            records: records.into(),
            ..Default::default()
        }],
    });
    match c.call(request).await {
        Ok(Response::ProduceLog(mut r)) => r.buckets_resp.remove(0),
        other => panic!("ProduceLog answered {other:?}"),
    }
}

/// Bucket 0 from `offset` (at most `max_fetch_bytes`), optionally projected.
async fn fetch_bucket(
    c: &mut Client,
    table_id: i64,
    offset: i64,
    projection: Option<Vec<i32>>,
    max_fetch_bytes: i32,
) -> pb::PbFetchLogRespForBucket {
    let mut request = fetch(table_id, 0, offset, projection, 0);
    if let Request::FetchLog(f) = &mut request {
        f.tables_req[0].buckets_req[0].max_fetch_bytes = max_fetch_bytes;
    }
    match c.call(request).await {
        Ok(Response::FetchLog(mut f)) => f.tables_resp.remove(0).buckets_resp.remove(0),
        other => panic!("FetchLog answered {other:?}"),
    }
}

#[tokio::test]
async fn an_added_column_makes_a_new_schema_id_and_every_id_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_table(&mut c, "t", LOG_TABLE_JSON).await;
    let (id, v1) = table_schema(&mut c, "t", None).await.unwrap();
    assert_eq!(id, 1);

    alter(
        &mut c,
        alter_request("t", |r| {
            let mut n = add_column("n", BIGINT);
            n.comment = Some("added".into());
            r.add_columns.push(n);
        }),
    )
    .await
    .unwrap();
    let info = table_info(&mut c, "t").await;
    assert_eq!((info.table_id, info.schema_id), (table_id, 2));
    let json: serde_json::Value = serde_json::from_slice(&info.table_json).unwrap();
    let columns = json["schema"]["columns"].as_array().unwrap();
    assert_eq!(columns.len(), 3);
    assert_eq!(columns[2]["name"], "n");
    assert_eq!(columns[2]["id"], 2, "the highest field id + 1");
    assert_eq!(columns[2]["comment"], "added");
    assert_eq!(json["schema"]["highest_field_id"], 2);

    let (id, v2) = table_schema(&mut c, "t", None).await.unwrap();
    assert_eq!((id, v2.columns().len()), (2, 3));
    assert_eq!(table_schema(&mut c, "t", Some(1)).await.unwrap(), (1, v1));
    assert_eq!(table_schema(&mut c, "t", Some(2)).await.unwrap().1, v2);
    for missing in [3, 0, -1] {
        let e = table_schema(&mut c, "t", Some(missing)).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::SchemaNotExist);
        assert_eq!(
            e.message(),
            format!("Schema for table db.t with schema id {missing} does not exist.")
        );
    }

    // Options the alter may change, and custom properties; the schema id
    // stays.
    alter(
        &mut c,
        alter_request("t", |r| {
            r.config_changes = vec![
                set("table.datalake.freshness", "1 min"),
                set("owner", "cdc"),
            ]
        }),
    )
    .await
    .unwrap();
    let info = table_info(&mut c, "t").await;
    assert_eq!(info.schema_id, 2);
    let json: serde_json::Value = serde_json::from_slice(&info.table_json).unwrap();
    assert_eq!(json["properties"]["table.datalake.freshness"], "1 min");
    assert_eq!(json["custom_properties"]["owner"], "cdc");
    assert!(info.modified_time >= info.created_time);

    // A second added column: schema 3, every earlier schema kept.
    alter(
        &mut c,
        alter_request("t", |r| {
            r.add_columns.push(add_column("m", br#"{"type":"STRING"}"#))
        }),
    )
    .await
    .unwrap();
    server.stop().await;

    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let info = table_info(&mut c, "t").await;
    assert_eq!(info.schema_id, 3);
    assert_eq!(table_schema(&mut c, "t", Some(2)).await.unwrap().1, v2);
    let (_, v3) = table_schema(&mut c, "t", None).await.unwrap();
    let ids: Vec<i32> = v3.columns().iter().map(|c| c.id).collect();
    assert_eq!(ids, [0, 1, 2, 3]);
    let json: serde_json::Value = serde_json::from_slice(&info.table_json).unwrap();
    assert_eq!(json["custom_properties"]["owner"], "cdc");
    server.stop().await;
}

#[tokio::test]
async fn alter_table_refusals_carry_fluss_codes_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    create_table(&mut c, "t", LOG_TABLE_JSON).await;

    let cases: Vec<(Request, ErrorCode, &str)> = vec![
        (
            alter_request("nope", |r| r.add_columns.push(add_column("n", BIGINT))),
            ErrorCode::TableNotExist,
            "Table db.nope does not exist.",
        ),
        (
            alter_request("a.b", |r| r.add_columns.push(add_column("n", BIGINT))),
            ErrorCode::InvalidTableException,
            "Table name a.b is invalid",
        ),
        (
            alter_request("t", |r| {
                r.add_columns.push(add_column("n", BIGINT));
                r.config_changes.push(set("owner", "x"));
            }),
            ErrorCode::InvalidAlterTableException,
            "Table alteration can only be applied to one of the following: table properties or table schema.",
        ),
        (
            alter_request("t", |r| {
                r.config_changes.push(pb::PbAlterConfig {
                    op_type: 2,
                    ..set("owner", "x")
                })
            }),
            ErrorCode::UnknownServerError,
            "java.lang.IllegalArgumentException: Unsupported alter configs op type 2",
        ),
        (
            alter_request("t", |r| {
                r.config_changes.push(pb::PbAlterConfig {
                    op_type: 9,
                    ..set("owner", "x")
                })
            }),
            ErrorCode::UnknownServerError,
            "java.lang.IllegalArgumentException: Unsupported AlterConfigOpType: 9",
        ),
        (
            alter_request("t", |r| {
                r.config_changes.push(pb::PbAlterConfig {
                    config_value: None,
                    ..set("owner", "x")
                })
            }),
            ErrorCode::UnknownServerError,
            "java.lang.IllegalStateException: Field 'config_value' is not set",
        ),
        (
            alter_request("t", |r| r.config_changes.push(set("table.log.ttl", "1 d"))),
            ErrorCode::InvalidAlterTableException,
            "The option 'table.log.ttl' is not supported to alter yet.",
        ),
        (
            alter_request("t", |r| {
                r.config_changes
                    .push(set("table.datalake.enabled", "true"))
            }),
            ErrorCode::InvalidAlterTableException,
            "The option 'table.datalake.enabled' cannot be altered for tables that were created before the Fluss cluster enabled datalake.",
        ),
        (
            alter_request("t", |r| {
                r.config_changes
                    .push(set("table.log.tiered.local-segments", "x"))
            }),
            ErrorCode::InvalidConfigException,
            "Invalid value for config 'table.log.tiered.local-segments'. Reason: Could not parse value 'x' for key 'table.log.tiered.local-segments'.",
        ),
        (
            alter_request("t", |r| {
                r.add_columns.push(pb::PbAddColumn {
                    column_position_type: 1,
                    ..add_column("n", BIGINT)
                })
            }),
            ErrorCode::UnknownServerError,
            "java.lang.IllegalArgumentException: Unsupported ColumnPositionType: 1",
        ),
        (
            alter_request("t", |r| r.add_columns.push(add_column("n", b"{\"type\":"))),
            ErrorCode::UnknownServerError,
            "java.io.UncheckedIOException: ",
        ),
        (
            alter_request("t", |r| {
                r.add_columns
                    .push(add_column("n", br#"{"type":"UUID"}"#))
            }),
            ErrorCode::UnknownServerError,
            "java.lang.IllegalArgumentException: ",
        ),
        (
            alter_request("t", |r| r.add_columns.push(add_column("name", BIGINT))),
            ErrorCode::InvalidAlterTableException,
            "Column name already exists.",
        ),
        (
            alter_request("t", |r| {
                r.add_columns
                    .push(add_column("n", br#"{"type":"BIGINT","nullable":false}"#))
            }),
            ErrorCode::UnknownServerError,
            "java.lang.IllegalArgumentException: Column n must be nullable.",
        ),
        (
            alter_request("t", |r| {
                r.drop_columns.push(pb::PbDropColumn {
                    column_name: "name".into(),
                })
            }),
            ErrorCode::UnknownServerError,
            "org.apache.fluss.exception.SchemaChangeException: Not support drop column now.",
        ),
        (
            alter_request("t", |r| {
                r.rename_columns.push(pb::PbRenameColumn {
                    old_column_name: "name".into(),
                    new_column_name: "label".into(),
                })
            }),
            ErrorCode::UnknownServerError,
            "org.apache.fluss.exception.SchemaChangeException: Not support rename column now.",
        ),
        (
            alter_request("t", |r| {
                r.modify_columns.push(pb::PbModifyColumn {
                    column_name: "id".into(),
                    data_type_json: Some(Bytes::from_static(BIGINT)),
                    comment: None,
                    column_position_type: None,
                })
            }),
            ErrorCode::UnknownServerError,
            "org.apache.fluss.exception.SchemaChangeException: Not support modify column now.",
        ),
        (
            alter_request("t", |r| {
                r.modify_bucket_count = Some(pb::PbModifyBucketCount {
                    new_bucket_count: 6,
                })
            }),
            ErrorCode::InvalidAlterTableException,
            "Changing the bucket count (to 6) is not supported",
        ),
        (
            alter_request("t", |r| {
                r.add_columns.push(pb::PbAddColumn {
                    agg_function_type: Some("sum".into()),
                    ..add_column("n", BIGINT)
                })
            }),
            ErrorCode::InvalidAlterTableException,
            "Column n cannot be added with an aggregation function",
        ),
    ];
    for (request, code, message) in cases {
        let e = alter(&mut c, request.clone()).await.unwrap_err();
        assert_eq!(e.code(), code, "{request:?}: {e}");
        assert!(
            e.message().starts_with(message),
            "{request:?}: {:?} does not start with {message:?}",
            e.message()
        );
    }
    // Nothing of any of them changed the table.
    let info = table_info(&mut c, "t").await;
    assert_eq!(info.schema_id, 1);
    let json: serde_json::Value = serde_json::from_slice(&info.table_json).unwrap();
    assert_eq!(json["custom_properties"], serde_json::json!({}));
    // A missing table with ignore_if_not_exists, and a request without
    // changes (Fluss calls nothing then), are answered without error.
    alter(
        &mut c,
        alter_request("nope", |r| {
            r.ignore_if_not_exists = true;
            r.add_columns.push(add_column("n", BIGINT));
        }),
    )
    .await
    .unwrap();
    alter(&mut c, alter_request("nope", |_| {})).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn log_batches_of_every_schema_id_are_fetched_each_projected_with_its_own_schema() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_table(&mut c, "t", LOG_TABLE_JSON).await;
    let (_, v1) = table_schema(&mut c, "t", None).await.unwrap();
    let r = produce(
        &mut c,
        table_id,
        log_batch(&v1, 1, &[row(0, "a", None), row(1, "b", None)]),
    )
    .await;
    assert_eq!((r.error_code, r.base_offset), (None, Some(0)));

    add_n(&mut c, "t").await;
    let (_, v2) = table_schema(&mut c, "t", None).await.unwrap();
    let schemas = [v1.clone(), v2.clone()];
    // A writer at the new schema, and one that has not seen the alter yet.
    let r = produce(
        &mut c,
        table_id,
        log_batch(&v2, 2, &[row(2, "c", Some(20)), row(3, "d", None)]),
    )
    .await;
    assert_eq!((r.error_code, r.base_offset), (None, Some(2)));
    let r = produce(&mut c, table_id, log_batch(&v1, 1, &[row(4, "e", None)])).await;
    assert_eq!((r.error_code, r.base_offset), (None, Some(4)));
    // Schema ids the table does not have.
    for bad in [3, 0] {
        let r = produce(&mut c, table_id, log_batch(&v1, bad, &[row(9, "z", None)])).await;
        assert_eq!(
            r.error_code,
            Some(ErrorCode::SchemaNotExist.code()),
            "{bad}"
        );
        assert!(r
            .error_message
            .unwrap()
            .contains(&format!("schema id {bad}")));
    }

    let everything = vec![
        (1, vec![row(0, "a", None), row(1, "b", None)]),
        (2, vec![row(2, "c", Some(20)), row(3, "d", None)]),
        (1, vec![row(4, "e", None)]),
    ];
    let whole = fetch_bucket(&mut c, table_id, 0, None, 1 << 20).await;
    assert_eq!(whole.error_code, None, "{:?}", whole.error_message);
    assert_eq!(
        fetched(whole.records.as_ref().unwrap(), &schemas, None),
        everything
    );

    // Positions every schema has: each batch projected with its own schema.
    let names = fetch_bucket(&mut c, table_id, 0, Some(vec![0, 1]), 1 << 20).await;
    assert_eq!(names.error_code, None, "{:?}", names.error_message);
    let without_n: Vec<(i16, Vec<Row>)> = everything
        .iter()
        .map(|(id, rows)| (*id, rows.iter().map(|r| (r.0, r.1.clone(), None)).collect()))
        .collect();
    assert_eq!(
        fetched(names.records.as_ref().unwrap(), &schemas, Some(&[0, 1])),
        without_n
    );

    // A position the older schema lacks: the bucket's read fails when it
    // reaches a batch of that schema, as Fluss's FileLogProjection does...
    let added = fetch_bucket(&mut c, table_id, 0, Some(vec![0, 2]), 1 << 20).await;
    assert_eq!(
        added.error_code,
        Some(ErrorCode::InvalidColumnProjection.code())
    );
    assert_eq!(
        added.error_message.as_deref(),
        Some("Projected fields [0, 2] is out of bound for schema with 2 fields.")
    );
    // ... and reads batches of the schema that has it.
    let only_new = fetch_bucket(&mut c, table_id, 2, Some(vec![0, 2]), 1).await;
    assert_eq!(only_new.error_code, None, "{:?}", only_new.error_message);
    assert_eq!(
        fetched(only_new.records.as_ref().unwrap(), &schemas, Some(&[0, 2])),
        vec![(2, vec![(2, None, Some(20)), (3, None, None)])]
    );
    // A position no schema has is refused before any read.
    let r = fetch_bucket(&mut c, table_id, 0, Some(vec![3]), 1 << 20).await;
    assert_eq!(
        r.error_code,
        Some(ErrorCode::InvalidColumnProjection.code())
    );
    server.stop().await;

    // After a restart: the same batches, and old writers still accepted.
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let r = produce(&mut c, table_id, log_batch(&v1, 1, &[row(5, "f", None)])).await;
    assert_eq!((r.error_code, r.base_offset), (None, Some(5)));
    let whole = fetch_bucket(&mut c, table_id, 0, None, 1 << 20).await;
    let mut expected = everything.clone();
    expected.push((1, vec![row(5, "f", None)]));
    assert_eq!(
        fetched(whole.records.as_ref().unwrap(), &schemas, None),
        expected
    );
    server.stop().await;
}

// ---- primary-key tables ----

/// The rows and keys of the primary-key table at its two schemas, encoded
/// as a client encodes them.
struct Codec {
    /// Row codecs of schema ids 1 and 2 (`id, name` and `id, name, n`).
    rows: [RowCodec; 2],
    keys: KeyEncoder,
}

impl Codec {
    fn new() -> Self {
        use fjord_format::types::DataType;
        let v1 = [DataType::int().with_nullable(false), DataType::string()];
        let v2 = [
            DataType::int().with_nullable(false),
            DataType::string(),
            DataType::bigint(),
        ];
        Self {
            rows: [
                RowCodec::new(RowFormat::Compacted, &v1).unwrap(),
                RowCodec::new(RowFormat::Compacted, &v2).unwrap(),
            ],
            keys: KeyEncoder::new(&v1, &[0]).unwrap(),
        }
    }

    fn key(&self, id: i32) -> Vec<u8> {
        let mut out = Vec::new();
        self.keys
            .encode_datums(&[Datum::Int(id), Datum::Null], &mut out)
            .unwrap();
        out
    }

    /// A KV batch of schema `schema_id`: `Some(row)` upserts, `None`
    /// deletes `id`.
    fn batch(&self, schema_id: i16, ops: &[(i32, Option<Row>)]) -> Vec<u8> {
        let mut b = KvBatchBuilder::start(Vec::new(), schema_id, -1, -1);
        for (id, op) in ops {
            match op {
                Some((id, name, n)) => {
                    let mut datums = vec![
                        Datum::Int(*id),
                        name.as_deref().map_or(Datum::Null, Datum::String),
                    ];
                    if schema_id == 2 {
                        datums.push(n.map_or(Datum::Null, Datum::BigInt));
                    }
                    let mut row = Vec::new();
                    self.rows[schema_id as usize - 1]
                        .encode(&datums, &mut row)
                        .unwrap();
                    b.append_upsert(&self.key(*id), &row)
                }
                None => b.append_delete(&self.key(*id)),
            }
            .unwrap();
        }
        b.finish().to_vec()
    }

    /// A stored value: its schema id and its row, decoded with that id's
    /// schema (so `n` is `None` for a schema 1 value).
    fn value(&self, stored: &[u8]) -> (i16, Row) {
        let schema_id = i16::from_le_bytes([stored[0], stored[1]]);
        let mut datums = Vec::new();
        self.rows[schema_id as usize - 1]
            .decode(&stored[2..], &mut datums)
            .unwrap();
        let id = match datums[0] {
            Datum::Int(id) => id,
            ref other => panic!("id {other:?}"),
        };
        let name = match datums[1] {
            Datum::String(s) => Some(s.to_owned()),
            Datum::Null => None,
            ref other => panic!("name {other:?}"),
        };
        let n = match datums.get(2) {
            Some(Datum::BigInt(n)) => Some(*n),
            None | Some(Datum::Null) => None,
            Some(other) => panic!("n {other:?}"),
        };
        (schema_id, (id, name, n))
    }
}

async fn put(
    c: &mut Client,
    table_id: i64,
    records: Vec<u8>,
    targets: Vec<i32>,
) -> pb::PbPutKvRespForBucket {
    let request = Request::PutKv(pb::PutKvRequest {
        acks: -1,
        table_id,
        timeout_ms: 30_000,
        target_columns: targets,
        buckets_req: vec![pb::PbPutKvReqForBucket {
            partition_id: None,
            bucket_id: 0,
            records: records.into(),
            original_partition_name: None,
            routing_bucket_count: None,
        }],
        agg_mode: None,
    });
    match c.call(request).await {
        Ok(Response::PutKv(mut r)) => r.buckets_resp.remove(0),
        other => panic!("PutKv answered {other:?}"),
    }
}

/// The stored value of each id (schema id and row), as Lookup answers it.
async fn lookup(
    c: &mut Client,
    codec: &Codec,
    table_id: i64,
    ids: &[i32],
) -> Vec<Option<(i16, Row)>> {
    let keys = ids.iter().map(|id| Bytes::from(codec.key(*id))).collect();
    lookup_bucket0(c, table_id, keys)
        .await
        .iter()
        .map(|v| v.as_ref().map(|b| codec.value(b)))
        .collect()
}

/// The changelog of bucket 0 from offset 0, per batch: its schema id and
/// its (change type, row) pairs, decoded with its schema.
async fn changelog(
    c: &mut Client,
    table_id: i64,
    schemas: &[Schema],
) -> Vec<(i16, Vec<(ChangeType, Row)>)> {
    let bucket = fetch_bucket(c, table_id, 0, None, 1 << 20).await;
    assert_eq!(bucket.error_code, None, "{:?}", bucket.error_message);
    let records = bucket.records.unwrap_or_default();
    LogBatches::new(&records)
        .map(|batch| {
            let batch = batch.unwrap();
            let schema = &schemas[batch.schema_id() as usize - 1];
            if batch.record_count() == 0 {
                return (batch.schema_id(), Vec::new());
            }
            let decoded = decode_log_batch(
                &records.slice_ref(batch.as_bytes()).into(),
                to_arrow_schema(schema),
            )
            .unwrap();
            let names: Vec<&str> = schema.columns().iter().map(|c| c.name.as_str()).collect();
            let types = decoded.change_types.expect("a changelog has change types");
            let rows = rows_of(&decoded.records, &names);
            (
                batch.schema_id(),
                types
                    .iter()
                    .map(|&t| ChangeType::from_byte(t).unwrap())
                    .zip(rows)
                    .collect(),
            )
        })
        .collect()
}

/// The rows the stored values stand for, whatever schema they carry.
fn logical(values: &[Option<(i16, Row)>]) -> Vec<Option<Row>> {
    values.iter().map(|v| v.clone().map(|(_, r)| r)).collect()
}

#[tokio::test]
async fn primary_key_rows_of_old_and_new_schema_ids_are_merged_padded_and_kept_as_written() {
    use ChangeType::{Insert, UpdateAfter, UpdateBefore};
    let dir = tempfile::tempdir().unwrap();
    let codec = Codec::new();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_table(&mut c, "pk", PK_JSON).await;
    let (_, v1) = table_schema(&mut c, "pk", None).await.unwrap();
    let ok = |r: pb::PbPutKvRespForBucket| assert_eq!(r.error_code, None, "{:?}", r.error_message);
    ok(put(
        &mut c,
        table_id,
        codec.batch(
            1,
            &[(1, Some(row(1, "a", None))), (2, Some(row(2, "b", None)))],
        ),
        vec![],
    )
    .await);

    // No restart: the tablet takes the new schema from the alter.
    add_n(&mut c, "pk").await;
    let (_, v2) = table_schema(&mut c, "pk", None).await.unwrap();
    let schemas = [v1, v2];
    ok(put(
        &mut c,
        table_id,
        codec.batch(
            2,
            &[
                (2, Some(row(2, "b2", Some(20)))),
                (3, Some(row(3, "c", Some(30)))),
            ],
        ),
        vec![],
    )
    .await);
    // A writer that has not seen the alter: its rows read as NULL in `n`.
    ok(put(
        &mut c,
        table_id,
        codec.batch(
            1,
            &[(3, Some(row(3, "c1", None))), (4, Some(row(4, "d", None)))],
        ),
        vec![],
    )
    .await);
    // A partial update of `n` over a row stored at schema 1.
    ok(put(
        &mut c,
        table_id,
        codec.batch(2, &[(1, Some((1, None, Some(100))))]),
        vec![0, 2],
    )
    .await);
    // Schema ids the table does not have.
    for bad in [3, 0] {
        let mut b = KvBatchBuilder::start(Vec::new(), bad, -1, -1);
        let mut one = Vec::new();
        codec.rows[0]
            .encode(&[Datum::Int(9), Datum::String("z")], &mut one)
            .unwrap();
        b.append_upsert(&codec.key(9), &one).unwrap();
        let r = put(&mut c, table_id, b.finish().to_vec(), vec![]).await;
        assert_eq!(
            r.error_code,
            Some(ErrorCode::SchemaNotExist.code()),
            "{bad}: {:?}",
            r.error_message
        );
        assert!(r
            .error_message
            .unwrap()
            .ends_with(&format!("Invalid schema id: {bad}, latest schema id: 2")));
    }

    // Stored values keep the schema id they were written with (Fluss's
    // default merger stores the incoming value itself); merged rows (the
    // partial update) are written at the latest.
    let stored = vec![
        Some((2, row(1, "a", Some(100)))),
        Some((2, row(2, "b2", Some(20)))),
        Some((1, row(3, "c1", None))),
        Some((1, row(4, "d", None))),
    ];
    assert_eq!(
        lookup(&mut c, &codec, table_id, &[1, 2, 3, 4]).await,
        stored
    );
    // The changelog: at the latest schema id from the alter on, rows of
    // older schemas padded with NULLs.
    let expected_changelog = vec![
        (
            1,
            vec![(Insert, row(1, "a", None)), (Insert, row(2, "b", None))],
        ),
        (
            2,
            vec![
                (UpdateBefore, row(2, "b", None)),
                (UpdateAfter, row(2, "b2", Some(20))),
                (Insert, row(3, "c", Some(30))),
            ],
        ),
        (
            2,
            vec![
                (UpdateBefore, row(3, "c", Some(30))),
                (UpdateAfter, row(3, "c1", None)),
                (Insert, row(4, "d", None)),
            ],
        ),
        (
            2,
            vec![
                (UpdateBefore, row(1, "a", None)),
                (UpdateAfter, row(1, "a", Some(100))),
            ],
        ),
    ];
    assert_eq!(
        changelog(&mut c, table_id, &schemas).await,
        expected_changelog
    );
    server.stop().await;

    // After a restart, and after the KV store is rebuilt from a changelog
    // of both schema ids: the same rows (a rebuilt value carries its
    // changelog batch's schema id).
    for lose_kv in [false, true] {
        if lose_kv {
            std::fs::remove_dir_all(dir.path().join("kv")).unwrap();
        }
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        let values = lookup(&mut c, &codec, table_id, &[1, 2, 3, 4]).await;
        if lose_kv {
            assert_eq!(logical(&values), logical(&stored));
        } else {
            assert_eq!(values, stored);
        }
        assert_eq!(
            changelog(&mut c, table_id, &schemas).await,
            expected_changelog
        );
        server.stop().await;
    }

    // Writers of both schema ids still go through after all that.
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    ok(put(
        &mut c,
        table_id,
        codec.batch(1, &[(5, Some(row(5, "e", None)))]),
        vec![],
    )
    .await);
    ok(put(
        &mut c,
        table_id,
        codec.batch(2, &[(5, Some(row(5, "e", Some(5))))]),
        vec![],
    )
    .await);
    assert_eq!(
        lookup(&mut c, &codec, table_id, &[5]).await,
        vec![Some((2, row(5, "e", Some(5))))]
    );
    server.stop().await;
}

/// `id INT NOT NULL, p STRING NOT NULL, name STRING`, primary key
/// `(id, p)`, partitioned by `p`, one bucket.
const PARTITIONED_JSON: &str = r#"{"version":1,"schema":{"version":1,"columns":[{"name":"id","data_type":{"type":"INTEGER","nullable":false}},{"name":"p","data_type":{"type":"STRING","nullable":false}},{"name":"name","data_type":{"type":"STRING"}}],"primary_key":["id","p"]},"partition_key":["p"],"bucket_key":[],"bucket_count":1,"properties":{},"custom_properties":{}}"#;

async fn create_partition(c: &mut Client, value: &str) -> i64 {
    c.call(Request::CreatePartition(pb::CreatePartitionRequest {
        table_path: table_path("db", "parts"),
        partition_spec: pb::PbPartitionSpec {
            partition_key_values: vec![pb::PbKeyValue {
                key: "p".into(),
                value: value.into(),
            }],
        },
        ignore_if_not_exists: false,
    }))
    .await
    .expect("create partition");
    let Ok(Response::ListPartitionInfos(list)) = c
        .call(Request::ListPartitionInfos(pb::ListPartitionInfosRequest {
            table_path: table_path("db", "parts"),
            partial_partition_spec: None,
            include_system_partitions: None,
        }))
        .await
    else {
        panic!("list partitions")
    };
    list.partitions_info
        .iter()
        .find(|p| p.partition_spec.partition_key_values[0].value == value)
        .expect("the partition just created")
        .partition_id
}

#[tokio::test]
async fn partitions_created_before_and_after_an_alter_serve_the_new_schema() {
    use fjord_format::types::DataType;
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_table(&mut c, "parts", PARTITIONED_JSON).await;
    let before = create_partition(&mut c, "a").await;
    alter(
        &mut c,
        alter_request("parts", |r| r.add_columns.push(add_column("n", BIGINT))),
    )
    .await
    .unwrap();
    let after = create_partition(&mut c, "b").await;

    let types = [
        DataType::int().with_nullable(false),
        DataType::string().with_nullable(false),
        DataType::string(),
        DataType::bigint(),
    ];
    let rows = RowCodec::new(RowFormat::Compacted, &types).unwrap();
    let keys = KeyEncoder::new(&types, &[0]).unwrap();
    for (partition_id, p) in [(before, "a"), (after, "b")] {
        let datums = [
            Datum::Int(1),
            Datum::String(p),
            Datum::String("x"),
            Datum::BigInt(7),
        ];
        let (mut key, mut value) = (Vec::new(), Vec::new());
        keys.encode_datums(&datums, &mut key).unwrap();
        rows.encode(&datums, &mut value).unwrap();
        let mut b = KvBatchBuilder::start(Vec::new(), 2, -1, -1);
        b.append_upsert(&key, &value).unwrap();
        let request = Request::PutKv(pb::PutKvRequest {
            acks: -1,
            table_id,
            timeout_ms: 30_000,
            target_columns: vec![],
            buckets_req: vec![pb::PbPutKvReqForBucket {
                partition_id: Some(partition_id),
                bucket_id: 0,
                records: b.finish().to_vec().into(),
                original_partition_name: None,
                routing_bucket_count: None,
            }],
            agg_mode: None,
        });
        let Ok(Response::PutKv(r)) = c.call(request).await else {
            panic!("PutKv failed")
        };
        let r = &r.buckets_resp[0];
        assert_eq!(r.error_code, None, "partition {p}: {:?}", r.error_message);
        // The changelog of both partitions is at the new schema.
        let mut request = fetch(table_id, 0, 0, None, 0);
        if let Request::FetchLog(f) = &mut request {
            f.tables_req[0].buckets_req[0].partition_id = Some(partition_id);
        }
        let Ok(Response::FetchLog(f)) = c.call(request).await else {
            panic!("FetchLog failed")
        };
        let records = f.tables_resp[0].buckets_resp[0].records.clone().unwrap();
        let ids: Vec<i16> = LogBatches::new(&records)
            .map(|b| b.unwrap().schema_id())
            .collect();
        assert_eq!(ids, [2], "partition {p}");
    }
    server.stop().await;
}
