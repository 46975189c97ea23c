//! Primary-key tables with ARRAY, MAP and ROW value columns over the wire
//! (COMPACTED kv format, Fluss's default): upserts, updates and deletes of
//! rows whose nested values hold NULLs or are NULL themselves, read back
//! equal through lookups, LimitScan and ScanKv (stored values) and through
//! the changelog (`+I`, `-U`/`+U`, `-D` images, Arrow `List`/`Map`/`Struct`
//! columns); the same state after a restart and after the KV store is lost
//! and rebuilt by replaying that changelog. Also what stays refused: nested
//! columns under `table.kv.format` = INDEXED, and aggregation functions
//! that cannot aggregate a nested column (Fluss's `validateDataType`),
//! while `last_value_ignore_nulls` (the aggregation default) and partial
//! updates carry nested values.

mod support;

use bytes::Bytes;
use fjord_format::arrow_log::{decode_log_batch, ChangeType};
use fjord_format::datum::Datum;
use fjord_format::kv::batch::KvBatchBuilder;
use fjord_format::kv::value_batch::ValueBatch;
use fjord_format::log_batch::LogBatches;
use fjord_format::row::key::KeyEncoder;
use fjord_format::row::nested::{write_array, write_map, BinaryArray, BinaryMap, NestedField};
use fjord_format::row::{RowCodec, RowFormat};
use fjord_format::types::{DataField, DataType};
use fjord_proto::messages as pb;
use fjord_proto::{ErrorCode, Request, Response};
use fjord_server::kv::columns::{read_row_into, NestedColumns};
use support::*;

/// `id INT NOT NULL, tags ARRAY<INT>, attrs MAP<STRING, INT>,
/// inner ROW<a INT, b STRING>`, primary key `id`, one bucket; `properties`
/// spliced in as the table's properties.
fn table_json(properties: &str) -> String {
    format!(
        r#"{{"version":1,"schema":{{"version":1,"columns":[{{"name":"id","data_type":{{"type":"INTEGER","nullable":false}}}},{{"name":"tags","data_type":{{"type":"ARRAY","element_type":{{"type":"INTEGER"}}}}}},{{"name":"attrs","data_type":{{"type":"MAP","key_type":{{"type":"STRING","nullable":false}},"value_type":{{"type":"INTEGER"}}}}}},{{"name":"inner","data_type":{{"type":"ROW","fields":[{{"name":"a","field_type":{{"type":"INTEGER"}},"field_id":4}},{{"name":"b","field_type":{{"type":"STRING"}},"field_id":5}}]}}}}],"primary_key":["id"]}},"partition_key":[],"bucket_key":[],"bucket_count":1,"properties":{{{properties}}},"custom_properties":{{}}}}"#
    )
}

fn inner_type() -> Vec<DataType> {
    vec![DataType::int(), DataType::string()]
}

fn row_type() -> Vec<DataType> {
    vec![
        DataType::int().with_nullable(false),
        DataType::array(DataType::int()),
        DataType::map(DataType::string().with_nullable(false), DataType::int()),
        DataType::row(vec![
            DataField::new("a", DataType::int()),
            DataField::new("b", DataType::string()),
        ]),
    ]
}

/// One row of the table, owned.
#[derive(Clone, Debug, PartialEq)]
struct Value {
    id: i32,
    tags: Option<Vec<Option<i32>>>,
    attrs: Option<Vec<(String, Option<i32>)>>,
    inner: Option<(Option<i32>, Option<String>)>,
}

/// Rows and keys encoded as a client encodes them, and decoded back.
struct Codec {
    rows: RowCodec,
    inner: RowCodec,
    keys: KeyEncoder,
    int: NestedField,
    key: NestedField,
}

impl Codec {
    fn new() -> Self {
        Self {
            rows: RowCodec::new(RowFormat::Compacted, &row_type()).unwrap(),
            inner: RowCodec::new(RowFormat::Compacted, &inner_type()).unwrap(),
            keys: KeyEncoder::new(&row_type(), &[0]).unwrap(),
            int: NestedField::of(&DataType::int()).unwrap(),
            key: NestedField::of(&DataType::string().with_nullable(false)).unwrap(),
        }
    }

    fn key(&self, id: i32) -> Vec<u8> {
        let mut out = Vec::new();
        let row = [Datum::Int(id), Datum::Null, Datum::Null, Datum::Null];
        self.keys.encode_datums(&row, &mut out).unwrap();
        out
    }

    /// The COMPACTED row of `v`, nested values as Fluss lays them out.
    fn row(&self, v: &Value) -> Vec<u8> {
        let mut tags = Vec::new();
        if let Some(t) = &v.tags {
            let items: Vec<Datum<'_>> = t
                .iter()
                .map(|x| x.map_or(Datum::Null, Datum::Int))
                .collect();
            write_array(&self.int, &items, &mut tags).unwrap();
        }
        let mut attrs = Vec::new();
        if let Some(m) = &v.attrs {
            let keys: Vec<Datum<'_>> = m.iter().map(|(k, _)| Datum::String(k)).collect();
            let values: Vec<Datum<'_>> = m
                .iter()
                .map(|(_, x)| x.map_or(Datum::Null, Datum::Int))
                .collect();
            write_map(&self.key, &self.int, &keys, &values, &mut attrs).unwrap();
        }
        let mut inner = Vec::new();
        if let Some((a, b)) = &v.inner {
            let fields = [
                a.map_or(Datum::Null, Datum::Int),
                b.as_deref().map_or(Datum::Null, Datum::String),
            ];
            self.inner.encode(&fields, &mut inner).unwrap();
        }
        let datums = [
            Datum::Int(v.id),
            v.tags.as_ref().map_or(Datum::Null, |_| Datum::Array(&tags)),
            v.attrs.as_ref().map_or(Datum::Null, |_| Datum::Map(&attrs)),
            v.inner.as_ref().map_or(Datum::Null, |_| Datum::Row(&inner)),
        ];
        let mut out = Vec::new();
        self.rows.encode(&datums, &mut out).unwrap();
        out
    }

    fn int(d: Datum<'_>) -> Option<i32> {
        match d {
            Datum::Int(x) => Some(x),
            Datum::Null => None,
            other => panic!("not an INT: {other:?}"),
        }
    }

    /// The value of a row's datums.
    fn value_of(&self, d: &[Datum<'_>]) -> Value {
        assert_eq!(d.len(), 4, "{d:?}");
        let tags = match d[1] {
            Datum::Array(bytes) => {
                let array = BinaryArray::parse(bytes, &self.int).unwrap();
                Some(
                    (0..array.len())
                        .map(|i| Self::int(array.get(i, &self.int).unwrap()))
                        .collect(),
                )
            }
            Datum::Null => None,
            ref other => panic!("not an ARRAY: {other:?}"),
        };
        let attrs = match d[2] {
            Datum::Map(bytes) => {
                let map = BinaryMap::parse(bytes, &self.key, &self.int).unwrap();
                Some(
                    (0..map.len())
                        .map(|i| {
                            let Datum::String(k) = map.keys().get(i, &self.key).unwrap() else {
                                panic!("a MAP key is not a STRING")
                            };
                            let v = Self::int(map.values().get(i, &self.int).unwrap());
                            (k.to_owned(), v)
                        })
                        .collect(),
                )
            }
            Datum::Null => None,
            ref other => panic!("not a MAP: {other:?}"),
        };
        let inner = match d[3] {
            Datum::Row(bytes) => {
                let mut fields = Vec::new();
                self.inner.decode(bytes, &mut fields).unwrap();
                let b = match fields[1] {
                    Datum::String(s) => Some(s.to_owned()),
                    Datum::Null => None,
                    ref other => panic!("not a STRING: {other:?}"),
                };
                Some((Self::int(fields[0]), b))
            }
            Datum::Null => None,
            ref other => panic!("not a ROW: {other:?}"),
        };
        let Datum::Int(id) = d[0] else {
            panic!("no id in {d:?}")
        };
        Value {
            id,
            tags,
            attrs,
            inner,
        }
    }

    /// The value a stored value (`schemaId ‖ row`) holds.
    fn stored(&self, stored: &[u8]) -> Value {
        assert_eq!(&stored[..2], &1i16.to_le_bytes(), "schema id prefix");
        let mut datums = Vec::new();
        self.rows.decode(&stored[2..], &mut datums).unwrap();
        self.value_of(&datums)
    }

    /// A KV batch: `Ok(v)` upserts `v`, `Err(id)` deletes `id`.
    fn batch(&self, ops: &[Result<Value, i32>]) -> Vec<u8> {
        let mut b = KvBatchBuilder::start(Vec::new(), 1, -1, -1);
        for op in ops {
            match op {
                Ok(v) => b.append_upsert(&self.key(v.id), &self.row(v)),
                Err(id) => b.append_delete(&self.key(*id)),
            }
            .unwrap();
        }
        b.finish().to_vec()
    }
}

fn full(id: i32, n: i32) -> Value {
    Value {
        id,
        tags: Some(vec![Some(n), None, Some(n + 1)]),
        attrs: Some(vec![
            ("k".into(), Some(n)),
            ("a longer key than eight".into(), None),
        ]),
        inner: Some((
            Some(n),
            Some(format!("inner {n}, long enough to be out of line")),
        )),
    }
}

fn all_null(id: i32) -> Value {
    Value {
        id,
        tags: None,
        attrs: None,
        inner: None,
    }
}

/// Nulls and emptiness inside the nested values.
fn nulls_inside(id: i32) -> Value {
    Value {
        id,
        tags: Some(vec![None, None]),
        attrs: Some(vec![]),
        inner: Some((None, None)),
    }
}

async fn create_table(c: &mut Client, table: &str, properties: &str) -> Result<i64, ErrorCode> {
    c.call(Request::CreateDatabase(pb::CreateDatabaseRequest {
        database_name: "db".into(),
        ignore_if_exists: true,
        database_json: None,
    }))
    .await
    .expect("create database");
    if let Err(e) = c
        .call(Request::CreateTable(pb::CreateTableRequest {
            table_path: table_path("db", table),
            table_json: table_json(properties).into_bytes().into(),
            ignore_if_exists: false,
        }))
        .await
    {
        return Err(e.code());
    }
    match c
        .call(Request::GetTableInfo(pb::GetTableInfoRequest {
            table_path: table_path("db", table),
        }))
        .await
        .expect("get table info")
    {
        Response::GetTableInfo(info) => Ok(info.table_id),
        other => panic!("unexpected {other:?}"),
    }
}

async fn put_bucket(
    c: &mut Client,
    table_id: i64,
    records: Vec<u8>,
    target_columns: Vec<i32>,
) -> pb::PbPutKvRespForBucket {
    let request = Request::PutKv(pb::PutKvRequest {
        acks: -1,
        table_id,
        timeout_ms: 30_000,
        target_columns,
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
        Ok(Response::PutKv(mut r)) => {
            let bucket = r.buckets_resp.remove(0);
            assert_eq!(bucket.error_code, None, "{:?}", bucket.error_message);
            bucket
        }
        other => panic!("PutKv answered {other:?}"),
    }
}

/// Looks `ids` up: the value of each, `None` where the key has none.
async fn lookup(c: &mut Client, codec: &Codec, table_id: i64, ids: &[i32]) -> Vec<Option<Value>> {
    let keys = ids.iter().map(|id| Bytes::from(codec.key(*id))).collect();
    lookup_bucket0(c, table_id, keys)
        .await
        .iter()
        .map(|v| v.as_ref().map(|b| codec.stored(b)))
        .collect()
}

/// The changelog of bucket 0 from offset 0, each row read back from its
/// Arrow columns (`read_row_into`, as the replay reads it).
async fn changelog(c: &mut Client, codec: &Codec, table_id: i64) -> Vec<(ChangeType, Value)> {
    let Ok(Response::FetchLog(f)) = c.call(fetch(table_id, 0, 0, None, 0)).await else {
        panic!("fetch failed")
    };
    let bucket = &f.tables_resp[0].buckets_resp[0];
    assert_eq!(bucket.error_code, None, "{:?}", bucket.error_message);
    let records = bucket.records.clone().unwrap_or_default();
    let schema = fjord_format::arrow_schema::to_arrow_schema(
        &fjord_format::json::schema_from_json(
            &serde_json::from_str::<serde_json::Value>(&table_json("")).unwrap()["schema"],
        )
        .unwrap(),
    );
    let mut rows = Vec::new();
    let mut scratch = Vec::new();
    for batch in LogBatches::new(&records) {
        let batch = batch.unwrap();
        if batch.record_count() == 0 {
            continue;
        }
        let decoded =
            decode_log_batch(&records.slice_ref(batch.as_bytes()).into(), schema.clone()).unwrap();
        let types = decoded.change_types.expect("change types");
        let mut nested = NestedColumns::of(&decoded.records).unwrap();
        for i in 0..decoded.records.num_rows() {
            let mut datums = Vec::new();
            read_row_into(&decoded.records, i, &mut nested, &mut scratch, &mut datums).unwrap();
            rows.push((
                ChangeType::from_byte(types[i]).unwrap(),
                codec.value_of(&datums),
            ));
        }
    }
    rows
}

/// LimitScan's and a whole ScanKv session's rows.
async fn scans(c: &mut Client, codec: &Codec, table_id: i64) -> (Vec<Value>, Vec<Value>) {
    let values_of = |records: &[u8]| -> Vec<Value> {
        ValueBatch::validate(records)
            .unwrap()
            .records()
            .map(|r| {
                let mut stored = 1i16.to_le_bytes().to_vec();
                stored.extend_from_slice(r.row);
                codec.stored(&stored)
            })
            .collect()
    };
    let Ok(Response::LimitScan(r)) = c
        .call(Request::LimitScan(pb::LimitScanRequest {
            table_id,
            partition_id: None,
            bucket_id: 0,
            limit: 100,
            routing_bucket_count: None,
        }))
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, None, "{:?}", r.error_message);
    let limited = r.records.as_deref().map(values_of).unwrap_or_default();
    let scan = |scanner_id: Option<Bytes>, seq: i32| {
        Request::ScanKv(pb::ScanKvRequest {
            scanner_id: scanner_id.clone(),
            bucket_scan_req: scanner_id.is_none().then_some(pb::PbScanReqForBucket {
                table_id,
                partition_id: None,
                bucket_id: 0,
                limit: None,
                routing_bucket_count: None,
            }),
            call_seq_id: Some(seq),
            batch_size_bytes: Some(64),
            close_scanner: None,
        })
    };
    let Ok(Response::ScanKv(first)) = c.call(scan(None, 0)).await else {
        panic!()
    };
    assert_eq!(first.error_code, None, "{:?}", first.error_message);
    let mut scanned = first.records.as_deref().map(values_of).unwrap_or_default();
    let mut more = first.has_more_results == Some(true);
    let mut seq = 0;
    while more {
        seq += 1;
        let id = first.scanner_id.clone();
        let Ok(Response::ScanKv(r)) = c.call(scan(id, seq)).await else {
            panic!()
        };
        assert_eq!(r.error_code, None, "{:?}", r.error_message);
        scanned.extend(r.records.as_deref().map(values_of).unwrap_or_default());
        more = r.has_more_results == Some(true);
    }
    (limited, scanned)
}

#[tokio::test]
async fn nested_value_columns_are_upserted_updated_deleted_looked_up_scanned_logged_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let codec = Codec::new();
    let (one, one_b) = (full(1, 10), full(1, 11));
    let (two, two_b) = (all_null(2), full(2, 20));
    let (three, four) = (nulls_inside(3), nulls_inside(4));
    // Four updated to all NULL: nested values replaced by NULL.
    let four_b = all_null(4);
    let expected = vec![
        Some(one_b.clone()),
        Some(two_b.clone()),
        None,
        Some(four_b.clone()),
    ];
    let table_id = {
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        let table_id = create_table(&mut c, "nested", "").await.unwrap();
        put_bucket(
            &mut c,
            table_id,
            codec.batch(&[
                Ok(one.clone()),
                Ok(two.clone()),
                Ok(three.clone()),
                Ok(four.clone()),
            ]),
            vec![],
        )
        .await;
        assert_eq!(
            lookup(&mut c, &codec, table_id, &[1, 2, 3, 4]).await,
            vec![
                Some(one.clone()),
                Some(two.clone()),
                Some(three.clone()),
                Some(four.clone())
            ]
        );
        put_bucket(
            &mut c,
            table_id,
            codec.batch(&[
                Ok(one_b.clone()),
                Ok(two_b.clone()),
                Err(3),
                Ok(four_b.clone()),
            ]),
            vec![],
        )
        .await;
        assert_eq!(
            lookup(&mut c, &codec, table_id, &[1, 2, 3, 4]).await,
            expected
        );
        use ChangeType::*;
        assert_eq!(
            changelog(&mut c, &codec, table_id).await,
            vec![
                (Insert, one.clone()),
                (Insert, two.clone()),
                (Insert, three.clone()),
                (Insert, four.clone()),
                (UpdateBefore, one.clone()),
                (UpdateAfter, one_b.clone()),
                (UpdateBefore, two.clone()),
                (UpdateAfter, two_b.clone()),
                (Delete, three.clone()),
                (UpdateBefore, four.clone()),
                (UpdateAfter, four_b.clone()),
            ]
        );
        let live = vec![one_b.clone(), two_b.clone(), four_b.clone()];
        assert_eq!(scans(&mut c, &codec, table_id).await, (live.clone(), live));
        server.stop().await;
        table_id
    };
    // A restart, then a restart with the KV store lost: rebuilt by
    // replaying the changelog's nested columns.
    for lose_kv in [false, true] {
        if lose_kv {
            std::fs::remove_dir_all(dir.path().join("kv")).unwrap();
        }
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        assert_eq!(
            lookup(&mut c, &codec, table_id, &[1, 2, 3, 4]).await,
            expected,
            "lose_kv={lose_kv}"
        );
        let live = vec![one_b.clone(), two_b.clone(), four_b.clone()];
        assert_eq!(
            scans(&mut c, &codec, table_id).await,
            (live.clone(), live),
            "lose_kv={lose_kv}"
        );
        // Writes go on after the replay.
        put_bucket(
            &mut c,
            table_id,
            codec.batch(&[Ok(full(1, 12 + i32::from(lose_kv)))]),
            vec![],
        )
        .await;
        assert_eq!(
            lookup(&mut c, &codec, table_id, &[1]).await,
            vec![Some(full(1, 12 + i32::from(lose_kv)))]
        );
        put_bucket(&mut c, table_id, codec.batch(&[Ok(one_b.clone())]), vec![]).await;
        server.stop().await;
    }
}

#[tokio::test]
async fn nested_values_merge_under_partial_updates_and_the_aggregation_engine() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let codec = Codec::new();

    // Partial update of (id, tags): attrs and inner are kept.
    let table_id = create_table(&mut c, "partial", "").await.unwrap();
    put_bucket(&mut c, table_id, codec.batch(&[Ok(full(1, 1))]), vec![]).await;
    let mut partial = all_null(1);
    partial.tags = Some(vec![Some(7)]);
    put_bucket(&mut c, table_id, codec.batch(&[Ok(partial)]), vec![0, 1]).await;
    let mut want = full(1, 1);
    want.tags = Some(vec![Some(7)]);
    assert_eq!(
        lookup(&mut c, &codec, table_id, &[1]).await,
        vec![Some(want)]
    );

    // Aggregation: every nested column takes last_value_ignore_nulls (the
    // default), so a NULL keeps the stored value; last_value replaces it.
    let table_id = create_table(&mut c, "agg", r#""table.merge-engine":"aggregation""#)
        .await
        .unwrap();
    put_bucket(&mut c, table_id, codec.batch(&[Ok(full(1, 1))]), vec![]).await;
    let mut next = all_null(1);
    next.attrs = Some(vec![("z".into(), Some(26))]);
    put_bucket(&mut c, table_id, codec.batch(&[Ok(next)]), vec![]).await;
    let mut want = full(1, 1);
    want.attrs = Some(vec![("z".into(), Some(26))]);
    assert_eq!(
        lookup(&mut c, &codec, table_id, &[1]).await,
        vec![Some(want.clone())]
    );
    use ChangeType::*;
    assert_eq!(
        changelog(&mut c, &codec, table_id).await,
        vec![
            (Insert, full(1, 1)),
            (UpdateBefore, full(1, 1)),
            (UpdateAfter, want)
        ]
    );
    server.stop().await;
}

#[tokio::test]
async fn nested_columns_are_refused_under_indexed_rows_and_by_functions_that_cannot_aggregate_them()
{
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    // INDEXED stored rows: refused at creation, naming the column.
    assert_eq!(
        create_table(&mut c, "indexed", r#""table.kv.format":"INDEXED""#).await,
        Err(ErrorCode::InvalidTableException)
    );
    let err = c
        .call(Request::CreateTable(pb::CreateTableRequest {
            table_path: table_path("db", "indexed"),
            table_json: table_json(r#""table.kv.format":"INDEXED""#)
                .into_bytes()
                .into(),
            ignore_if_exists: false,
        }))
        .await
        .unwrap_err();
    assert!(
        err.message().contains("'tags'") && err.message().contains("INDEXED"),
        "{err}"
    );
    // `sum` over an ARRAY column: Fluss's validateDataType refuses it.
    let json = table_json(r#""table.merge-engine":"aggregation""#).replace(
        r#"{"name":"tags","data_type":{"type":"ARRAY","element_type":{"type":"INTEGER"}}}"#,
        r#"{"name":"tags","data_type":{"type":"ARRAY","element_type":{"type":"INTEGER"}},"agg_function":{"type":"sum"}}"#,
    );
    let err = c
        .call(Request::CreateTable(pb::CreateTableRequest {
            table_path: table_path("db", "summed"),
            table_json: json.into_bytes().into(),
            ignore_if_exists: false,
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidConfigException, "{err}");
    assert!(err.message().contains("'tags'"), "{err}");
    // With COMPACTED rows (the default) the table is created.
    assert!(
        create_table(&mut c, "compacted", r#""table.kv.format":"COMPACTED""#)
            .await
            .is_ok()
    );
    server.stop().await;
}
