//! FetchLog with a filter (Fluss 1.0's `filter_predicate`): batches whose
//! statistics rule the predicate out are left out, whole or projected, and
//! the bucket answers `filtered_end_offset` (even with nothing left);
//! batches without statistics are never left out; CreateTable accepts
//! `table.statistics.columns` only as Fluss 1.0 does, and ProduceLog
//! refuses a malformed statistics block.

mod support;

use fjord_format::arrow_log::{ArrowCompression, ArrowLogEncoder};
use fjord_format::log_batch::{BatchHeader, LOG_MAGIC_V1};
use fjord_proto::messages as pb;
use fjord_proto::{ErrorCode, Request, Response};
use support::batches::*;
use support::*;

/// [`LOG_TABLE_JSON`] with statistics collected on every column.
fn stats_table_json(option: &str) -> String {
    LOG_TABLE_JSON.replace(
        r#""properties":{}"#,
        &format!(r#""properties":{{"table.statistics.columns":"{option}"}}"#),
    )
}

async fn create(c: &mut Client, name: &str, json: &str) -> Result<i64, ErrorCode> {
    c.call(Request::CreateDatabase(pb::CreateDatabaseRequest {
        database_name: "db".into(),
        ignore_if_exists: true,
        database_json: None,
    }))
    .await
    .unwrap();
    match c
        .call(Request::CreateTable(pb::CreateTableRequest {
            table_path: table_path("db", name),
            table_json: json.as_bytes().to_vec().into(),
            ignore_if_exists: false,
        }))
        .await
    {
        Ok(_) => {}
        Err(e) => return Err(e.code()),
    }
    match c
        .call(Request::GetTableInfo(pb::GetTableInfoRequest {
            table_path: table_path("db", name),
        }))
        .await
        .unwrap()
    {
        Response::GetTableInfo(info) => Ok(info.table_id),
        other => panic!("unexpected {other:?}"),
    }
}

/// A V1 batch of `rows(ids)` with statistics on both columns.
fn stats_batch(ids: std::ops::Range<i32>) -> Vec<u8> {
    let records = rows(ids);
    let mut block = Vec::new();
    fjord_format::statistics::write_statistics(&records, &table_schema(), &[0, 1], &mut block)
        .unwrap();
    let mut enc = ArrowLogEncoder::new(records.schema(), ArrowCompression::None).unwrap();
    let mut header = BatchHeader::append_only(1, records.num_rows() as i32);
    header.magic = LOG_MAGIC_V1;
    let mut out = Vec::new();
    enc.encode_with_statistics(&records, &header, None, &block, &mut out)
        .unwrap();
    out
}

async fn produce(c: &mut Client, table_id: i64, records: Vec<u8>) -> pb::PbProduceLogRespForBucket {
    let Response::ProduceLog(r) = c
        .call(Request::ProduceLog(pb::ProduceLogRequest {
            acks: -1,
            table_id,
            timeout_ms: 30_000,
            buckets_req: vec![pb::PbProduceLogReqForBucket {
                bucket_id: 0,
                records: records.into(),
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

/// `id > value` on field id 0 (the `id` column).
fn id_greater_than(value: i32) -> pb::PbPredicate {
    pb::PbPredicate {
        r#type: 0,
        leaf: Some(pb::PbLeafPredicate {
            function: 4,
            field_id: 0,
            literals: vec![pb::PbLiteralValue {
                literal_type: 3,
                is_null: false,
                int_value: Some(value),
                ..Default::default()
            }],
        }),
        compound: None,
    }
}

async fn fetch_filtered(
    c: &mut Client,
    table_id: i64,
    projection: Option<Vec<i32>>,
    filter: Option<pb::PbPredicate>,
) -> pb::PbFetchLogRespForBucket {
    let mut req = fetch(table_id, 0, 0, projection, 0);
    let Request::FetchLog(r) = &mut req else {
        unreachable!()
    };
    r.tables_req[0].filter_schema_id = filter.as_ref().map(|_| 1);
    r.tables_req[0].filter_predicate = filter;
    let Response::FetchLog(r) = c.call(req).await.unwrap() else {
        panic!()
    };
    r.tables_resp[0].buckets_resp[0].clone()
}

fn ids(records: &[u8], schema: arrow_schema::SchemaRef) -> Vec<i32> {
    decode_all(records, schema)
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<arrow_array::Int32Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect()
}

#[tokio::test]
async fn batches_ruled_out_by_statistics_are_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table = create(&mut c, "s", &stats_table_json("*")).await.unwrap();
    for range in [0..10, 10..20, 20..30] {
        let r = produce(&mut c, table, stats_batch(range)).await;
        assert_eq!(r.error_code, None, "{r:?}");
    }
    let full = fjord_format::arrow_schema::to_arrow_schema(&table_schema());

    // No filter: everything, no filtered_end_offset (0.9.1 behaviour).
    let all = fetch_filtered(&mut c, table, None, None).await;
    assert_eq!(ids(all.records.as_ref().unwrap(), full.clone()).len(), 30);
    assert_eq!(all.filtered_end_offset, None);

    // id > 24: only the last batch can match.
    let some = fetch_filtered(&mut c, table, None, Some(id_greater_than(24))).await;
    let got = ids(some.records.as_ref().unwrap(), full.clone());
    assert_eq!(got, (20..30).collect::<Vec<_>>());
    assert_eq!(some.filtered_end_offset, Some(30));

    // Projected to `name` (the filter column is not fetched): same batches.
    let projected = fetch_filtered(&mut c, table, Some(vec![1]), Some(id_greater_than(24))).await;
    let names = decode_all(
        projected.records.as_ref().unwrap(),
        std::sync::Arc::new(full.project(&[1]).unwrap()),
    );
    assert_eq!(names.iter().map(|b| b.num_rows()).sum::<usize>(), 10);

    // Nothing can match: empty records, and where to continue from.
    let none = fetch_filtered(&mut c, table, None, Some(id_greater_than(1000))).await;
    assert_eq!(none.error_code, None);
    assert!(none.records.as_ref().unwrap().is_empty());
    assert_eq!(none.filtered_end_offset, Some(30));
    assert_eq!(none.high_watermark, Some(30));

    // OR of two ruled-out leaves is ruled out; AND with a possible one too.
    let or = pb::PbPredicate {
        r#type: 1,
        leaf: None,
        compound: Some(pb::PbCompoundPredicate {
            function: 1,
            children: vec![id_greater_than(1000), id_greater_than(500)],
        }),
    };
    let r = fetch_filtered(&mut c, table, None, Some(or)).await;
    assert!(r.records.as_ref().unwrap().is_empty());
}

#[tokio::test]
async fn batches_without_statistics_are_never_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    for range in [0..10, 10..20] {
        let r = produce(&mut c, info.table_id, batch(range, 1, None)).await;
        assert_eq!(r.error_code, None);
    }
    let r = fetch_filtered(&mut c, info.table_id, None, Some(id_greater_than(1000))).await;
    let full = fjord_format::arrow_schema::to_arrow_schema(&table_schema());
    assert_eq!(ids(r.records.as_ref().unwrap(), full).len(), 20);
    assert_eq!(r.filtered_end_offset, None);
    drop(server);
}

#[tokio::test]
async fn the_statistics_option_and_blocks_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    assert!(create(&mut c, "list", &stats_table_json("id, name"))
        .await
        .is_ok());
    assert_eq!(
        create(&mut c, "bad", &stats_table_json("nope")).await,
        Err(ErrorCode::InvalidConfigException)
    );
    let pk = stats_table_json("*").replace(
        r#""columns":[{"name":"id","data_type":{"type":"INTEGER"}}"#,
        r#""columns":[{"name":"id","data_type":{"type":"INTEGER","nullable":false}}"#,
    );
    let pk = pk.replace(
        r#""schema":{"version":1,"#,
        r#""schema":{"version":1,"primary_key":["id"],"#,
    );
    assert_eq!(
        create(&mut c, "pk", &pk).await,
        Err(ErrorCode::InvalidConfigException)
    );

    // A statistics block naming a column the schema lacks.
    let table = create(&mut c, "s", &stats_table_json("*")).await.unwrap();
    let mut bytes = stats_batch(0..5);
    let header = fjord_format::log_batch::V1_HEADER_SIZE;
    bytes[header + 3] = 9; // first column index
    let crc_start = fjord_format::log_batch::V1_LAYOUT.schema_id;
    let crc = crc32c::crc32c(&bytes[crc_start..]);
    let at = fjord_format::log_batch::V1_LAYOUT.crc;
    bytes[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    let r = produce(&mut c, table, bytes).await;
    assert_eq!(
        r.error_code,
        Some(ErrorCode::CorruptMessage.code()),
        "{r:?}"
    );
    let r = produce(&mut c, table, stats_batch(0..5)).await;
    assert_eq!(r.error_code, None);
}
