//! Primary-key tables over the wire, with requests built byte by byte:
//! PutKv upserts, updates and deletes with the changelog Fluss emits for
//! each (`+I`, `-U`/`+U`, `-D`, and the header-only batch when nothing
//! changes), lookups of committed rows, idempotent retries that leave no
//! duplicate in the changelog, the state across a restart and after the KV
//! store is lost (rebuilt from the changelog), prefix lookups, LimitScan,
//! ScanKv sessions, row counts, KV snapshots, and every refusal with its
//! Fluss error code and nothing written.

mod support;

use bytes::Bytes;
use fjord_format::arrow_log::{decode_log_batch, ChangeType};
use fjord_format::datum::Datum;
use fjord_format::kv::batch::KvBatchBuilder;
use fjord_format::kv::value_batch::ValueBatch;
use fjord_format::log_batch::LogBatches;
use fjord_format::row::key::KeyEncoder;
use fjord_format::row::{RowCodec, RowFormat};
use fjord_format::types::DataType;
use fjord_proto::messages as pb;
use fjord_proto::{ErrorCode, Request, Response};
use support::*;

/// `id INT NOT NULL, name STRING, n BIGINT`, primary key `id`, one bucket.
const PK_JSON: &str = r#"{"version":1,"schema":{"version":1,"columns":[{"name":"id","data_type":{"type":"INTEGER","nullable":false}},{"name":"name","data_type":{"type":"STRING"}},{"name":"n","data_type":{"type":"BIGINT"}}],"primary_key":["id"]},"partition_key":[],"bucket_key":[],"bucket_count":1,"properties":{},"custom_properties":{}}"#;

fn row_type() -> Vec<DataType> {
    vec![
        DataType::int().with_nullable(false),
        DataType::string(),
        DataType::bigint(),
    ]
}

/// The table's rows and keys, encoded as a client encodes them.
struct Codec {
    rows: RowCodec,
    keys: KeyEncoder,
}

impl Codec {
    fn new() -> Self {
        Self {
            rows: RowCodec::new(RowFormat::Compacted, &row_type()).unwrap(),
            keys: KeyEncoder::new(&row_type(), &[0]).unwrap(),
        }
    }

    fn key(&self, id: i32) -> Vec<u8> {
        let mut out = Vec::new();
        self.keys
            .encode_datums(&[Datum::Int(id), Datum::Null, Datum::Null], &mut out)
            .unwrap();
        out
    }

    fn row(&self, id: i32, name: &str, n: i64) -> Vec<u8> {
        let mut out = Vec::new();
        self.rows
            .encode(
                &[Datum::Int(id), Datum::String(name), Datum::BigInt(n)],
                &mut out,
            )
            .unwrap();
        out
    }

    /// A KV batch of `ops`: `Some((name, n))` upserts `id`, `None` deletes it.
    fn batch(&self, ops: &[(i32, Option<(&str, i64)>)], writer: (i64, i32)) -> Vec<u8> {
        let mut b = KvBatchBuilder::start(Vec::new(), 1, writer.0, writer.1);
        for (id, op) in ops {
            match op {
                Some((name, n)) => b.append_upsert(&self.key(*id), &self.row(*id, name, *n)),
                None => b.append_delete(&self.key(*id)),
            }
            .unwrap();
        }
        b.finish().to_vec()
    }

    /// The (id, name, n) a stored value holds.
    fn value(&self, stored: &[u8]) -> (i32, String, i64) {
        assert_eq!(&stored[..2], &1i16.to_le_bytes(), "schema id prefix");
        let mut datums = Vec::new();
        self.rows.decode(&stored[2..], &mut datums).unwrap();
        match datums[..] {
            [Datum::Int(id), Datum::String(name), Datum::BigInt(n)] => (id, name.to_owned(), n),
            _ => panic!("unexpected row {datums:?}"),
        }
    }
}

/// Creates database `db` (if absent) and table `db.table` from `json`;
/// returns the table id.
async fn create_db_and_table_json(c: &mut Client, db: &str, table: &str, json: &str) -> i64 {
    c.call(Request::CreateDatabase(pb::CreateDatabaseRequest {
        database_name: db.into(),
        ignore_if_exists: true,
        database_json: None,
    }))
    .await
    .expect("create database");
    c.call(Request::CreateTable(pb::CreateTableRequest {
        table_path: table_path(db, table),
        table_json: json.as_bytes().to_vec().into(),
        ignore_if_exists: false,
    }))
    .await
    .expect("create table");
    match c
        .call(Request::GetTableInfo(pb::GetTableInfoRequest {
            table_path: table_path(db, table),
        }))
        .await
        .expect("get table info")
    {
        Response::GetTableInfo(info) => info.table_id,
        other => panic!("unexpected {other:?}"),
    }
}

fn put(table_id: i64, records: Vec<u8>, acks: i32) -> Request {
    Request::PutKv(pb::PutKvRequest {
        acks,
        table_id,
        timeout_ms: 30_000,
        target_columns: Vec::new(),
        buckets_req: vec![pb::PbPutKvReqForBucket {
            partition_id: None,
            bucket_id: 0,
            records: records.into(),
            original_partition_name: None,
            routing_bucket_count: None,
        }],
        agg_mode: None,
    })
}

/// Puts one batch and returns the bucket's answer.
async fn put_bucket(c: &mut Client, table_id: i64, records: Vec<u8>) -> pb::PbPutKvRespForBucket {
    match c.call(put(table_id, records, -1)).await {
        Ok(Response::PutKv(mut r)) => r.buckets_resp.remove(0),
        other => panic!("PutKv answered {other:?}"),
    }
}

async fn lookup(
    c: &mut Client,
    codec: &Codec,
    table_id: i64,
    ids: &[i32],
) -> Vec<Option<(i32, String, i64)>> {
    let keys = ids.iter().map(|id| Bytes::from(codec.key(*id))).collect();
    lookup_bucket0(c, table_id, keys)
        .await
        .iter()
        .map(|v| v.as_ref().map(|b| codec.value(b)))
        .collect()
}

/// The changelog of bucket 0 from offset 0: (change type, id, name, n) per
/// row, and the record counts of the batches (0 for header-only ones).
async fn changelog(
    c: &mut Client,
    table_id: i64,
) -> (Vec<(ChangeType, i32, Option<String>)>, Vec<i32>) {
    let Ok(Response::FetchLog(f)) = c.call(fetch(table_id, 0, 0, None, 0)).await else {
        panic!("fetch failed")
    };
    let bucket = &f.tables_resp[0].buckets_resp[0];
    assert_eq!(bucket.error_code, None, "{:?}", bucket.error_message);
    let records = bucket.records.clone().unwrap_or_default();
    let schema = fjord_format::arrow_schema::to_arrow_schema(
        &fjord_format::json::schema_from_json(
            &serde_json::from_str::<serde_json::Value>(PK_JSON).unwrap()["schema"],
        )
        .unwrap(),
    );
    let mut rows = Vec::new();
    let mut counts = Vec::new();
    for batch in LogBatches::new(&records) {
        let batch = batch.unwrap();
        counts.push(batch.record_count());
        if batch.record_count() == 0 {
            continue;
        }
        let decoded =
            decode_log_batch(&records.slice_ref(batch.as_bytes()).into(), schema.clone()).unwrap();
        let types = decoded
            .change_types
            .expect("a changelog batch has change types");
        let ids = decoded
            .records
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::Int32Array>()
            .unwrap();
        let names = decoded
            .records
            .column(1)
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        for i in 0..decoded.records.num_rows() {
            rows.push((
                ChangeType::from_byte(types[i]).unwrap(),
                ids.value(i),
                (!arrow_array::Array::is_null(names, i)).then(|| names.value(i).to_owned()),
            ));
        }
    }
    (rows, counts)
}

#[tokio::test]
async fn upserts_updates_and_deletes_emit_fluss_changelog_and_are_visible_to_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_db_and_table_json(&mut c, "db", "pk", PK_JSON).await;
    let codec = Codec::new();
    let writer = c.init_writer().await;

    let r = put_bucket(
        &mut c,
        table_id,
        codec.batch(
            &[
                (1, Some(("a", 10))),
                (2, Some(("b", 20))),
                (3, Some(("c", 30))),
            ],
            (writer, 0),
        ),
    )
    .await;
    assert_eq!((r.error_code, r.log_end_offset), (None, Some(3)));
    let r = put_bucket(
        &mut c,
        table_id,
        codec.batch(&[(2, Some(("b2", 21))), (3, None), (9, None)], (writer, 1)),
    )
    .await;
    assert_eq!(
        (r.error_code, r.log_end_offset),
        (None, Some(6)),
        "-U +U -D"
    );
    // Nothing changes: a header-only batch still takes an offset.
    let r = put_bucket(&mut c, table_id, codec.batch(&[(9, None)], (writer, 2))).await;
    assert_eq!((r.error_code, r.log_end_offset), (None, Some(7)));

    assert_eq!(
        lookup(&mut c, &codec, table_id, &[1, 2, 3, 9]).await,
        vec![
            Some((1, "a".into(), 10)),
            Some((2, "b2".into(), 21)),
            None,
            None
        ]
    );
    let (rows, counts) = changelog(&mut c, table_id).await;
    use ChangeType::*;
    assert_eq!(
        rows,
        vec![
            (Insert, 1, Some("a".into())),
            (Insert, 2, Some("b".into())),
            (Insert, 3, Some("c".into())),
            (UpdateBefore, 2, Some("b".into())),
            (UpdateAfter, 2, Some("b2".into())),
            (Delete, 3, Some("c".into())),
        ]
    );
    assert_eq!(counts, vec![3, 3, 0]);

    // A retried batch (same writer and sequence) is a duplicate: answered
    // with the original end offset, nothing appended, nothing applied.
    let r = put_bucket(
        &mut c,
        table_id,
        codec.batch(&[(2, Some(("b2", 21))), (3, None), (9, None)], (writer, 1)),
    )
    .await;
    assert_eq!((r.error_code, r.log_end_offset), (None, Some(6)));
    assert_eq!(changelog(&mut c, table_id).await.1, vec![3, 3, 0]);
    // A sequence gap is refused and writes nothing.
    let r = put_bucket(
        &mut c,
        table_id,
        codec.batch(&[(5, Some(("e", 5)))], (writer, 9)),
    )
    .await;
    assert_eq!(
        r.error_code,
        Some(ErrorCode::OutOfOrderSequenceException.code())
    );
    assert_eq!(lookup(&mut c, &codec, table_id, &[5]).await, vec![None]);

    // Row counts and KV snapshots.
    let Ok(Response::GetTableStats(stats)) = c
        .call(Request::GetTableStats(pb::GetTableStatsRequest {
            table_id,
            buckets_req: vec![pb::PbTableStatsReqForBucket {
                partition_id: None,
                bucket_id: 0,
                routing_bucket_count: None,
            }],
            target_columns: Vec::new(),
        }))
        .await
    else {
        panic!()
    };
    assert_eq!(stats.buckets_resp[0].row_count, Some(2));
    let Ok(Response::GetLatestKvSnapshots(snaps)) = c
        .call(Request::GetLatestKvSnapshots(
            pb::GetLatestKvSnapshotsRequest {
                table_path: table_path("db", "pk"),
                partition_name: None,
            },
        ))
        .await
    else {
        panic!()
    };
    assert_eq!(snaps.table_id, table_id);
    assert_eq!(snaps.latest_snapshots.len(), 1);
    assert_eq!(snaps.latest_snapshots[0].snapshot_id, None);
    assert_eq!(snaps.latest_snapshots[0].log_offset, None);
    server.stop().await;
}

#[tokio::test]
async fn state_survives_restart_and_a_lost_kv_store_is_rebuilt_from_the_changelog() {
    let dir = tempfile::tempdir().unwrap();
    let codec = Codec::new();
    let expected = vec![Some((1, "a".into(), 10)), None, Some((3, "c3".into(), 33))];
    let table_id = {
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        let table_id = create_db_and_table_json(&mut c, "db", "pk", PK_JSON).await;
        put_bucket(
            &mut c,
            table_id,
            codec.batch(&[(1, Some(("a", 10))), (2, Some(("b", 20)))], (-1, -1)),
        )
        .await;
        put_bucket(
            &mut c,
            table_id,
            codec.batch(&[(2, None), (3, Some(("c", 30)))], (-1, -1)),
        )
        .await;
        put_bucket(
            &mut c,
            table_id,
            codec.batch(&[(3, Some(("c3", 33)))], (-1, -1)),
        )
        .await;
        server.stop().await;
        table_id
    };
    for lose_kv in [false, true] {
        if lose_kv {
            std::fs::remove_dir_all(dir.path().join("kv")).unwrap();
        }
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        assert_eq!(
            lookup(&mut c, &codec, table_id, &[1, 2, 3]).await,
            expected,
            "lose_kv={lose_kv}"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn refusals_carry_fluss_codes_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_db_and_table_json(&mut c, "db", "pk", PK_JSON).await;
    let codec = Codec::new();

    // A corrupt CRC.
    let mut bad = codec.batch(&[(1, Some(("a", 1)))], (-1, -1));
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let r = put_bucket(&mut c, table_id, bad).await;
    assert_eq!(
        r.error_code,
        Some(ErrorCode::CorruptMessage.code()),
        "{:?}",
        r.error_message
    );
    // A row that does not decode under the schema (a BIGINT where STRING is).
    let mut b = KvBatchBuilder::start(Vec::new(), 1, -1, -1);
    b.append_upsert(&codec.key(1), &[0x00, 0x02, 0xff, 0xff])
        .unwrap();
    let r = put_bucket(&mut c, table_id, b.finish().to_vec()).await;
    assert_eq!(
        r.error_code,
        Some(ErrorCode::CorruptRecordException.code()),
        "{:?}",
        r.error_message
    );
    // A key of the wrong shape (a string key for an INT primary key).
    let mut b = KvBatchBuilder::start(Vec::new(), 1, -1, -1);
    b.append_upsert(&[0x03, b'a', b'b', b'c'], &codec.row(1, "a", 1))
        .unwrap();
    let r = put_bucket(&mut c, table_id, b.finish().to_vec()).await;
    assert_eq!(
        r.error_code,
        Some(ErrorCode::CorruptRecordException.code()),
        "{:?}",
        r.error_message
    );
    // A schema id the table does not have.
    let mut b = KvBatchBuilder::start(Vec::new(), 7, -1, -1);
    b.append_upsert(&codec.key(1), &codec.row(1, "a", 1))
        .unwrap();
    let r = put_bucket(&mut c, table_id, b.finish().to_vec()).await;
    assert_eq!(
        r.error_code,
        Some(ErrorCode::SchemaNotExist.code()),
        "{:?}",
        r.error_message
    );
    // Nothing of any of them was written.
    assert_eq!(lookup(&mut c, &codec, table_id, &[1]).await, vec![None]);
    assert!(changelog(&mut c, table_id).await.1.is_empty());

    // Partial updates must name the whole key.
    let mut request = put(table_id, codec.batch(&[(1, Some(("a", 1)))], (-1, -1)), -1);
    if let Request::PutKv(p) = &mut request {
        p.target_columns = vec![1, 2];
    }
    let Ok(Response::PutKv(r)) = c.call(request).await else {
        panic!()
    };
    assert_eq!(
        r.buckets_resp[0].error_code,
        Some(ErrorCode::InvalidTargetColumn.code())
    );

    // Lookups of keys of the wrong shape.
    let request = Request::Lookup(pb::LookupRequest {
        table_id,
        buckets_req: vec![pb::PbLookupReqForBucket {
            partition_id: None,
            bucket_id: 0,
            keys: vec![Bytes::from_static(b"\x05abc")],
            original_partition_name: None,
            routing_bucket_count: None,
        }],
        insert_if_not_exists: None,
        acks: None,
        timeout_ms: None,
    });
    let Ok(Response::Lookup(r)) = c.call(request).await else {
        panic!()
    };
    assert_eq!(
        r.buckets_resp[0].error_code,
        Some(ErrorCode::CorruptMessage.code())
    );

    // PutKv on a log table.
    let (log_table_id, _) = {
        let json = PK_JSON.replace(r#","primary_key":["id"]"#, "");
        (
            create_db_and_table_json(&mut c, "db", "log", &json).await,
            (),
        )
    };
    let r = put_bucket(
        &mut c,
        log_table_id,
        codec.batch(&[(1, Some(("a", 1)))], (-1, -1)),
    )
    .await;
    assert_eq!(
        r.error_code,
        Some(ErrorCode::NonPrimaryKeyTableException.code())
    );
    // GetLatestKvSnapshots of a log table.
    let e = c
        .call(Request::GetLatestKvSnapshots(
            pb::GetLatestKvSnapshotsRequest {
                table_path: table_path("db", "log"),
                partition_name: None,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NonPrimaryKeyTableException);
    server.stop().await;
}

#[tokio::test]
async fn limit_scan_and_scan_kv_return_the_current_rows_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_db_and_table_json(&mut c, "db", "pk", PK_JSON).await;
    let codec = Codec::new();
    let ops: Vec<(i32, Option<(&str, i64)>)> =
        (0..50).map(|i| (i, Some(("row", i64::from(i))))).collect();
    put_bucket(&mut c, table_id, codec.batch(&ops, (-1, -1))).await;
    put_bucket(&mut c, table_id, codec.batch(&[(7, None)], (-1, -1))).await;
    let live: Vec<i32> = (0..50).filter(|&i| i != 7).collect();
    // Keys sort by their encoding: varints, so not numerically past 127;
    // below 64 they do.
    let ids_of = |records: &[u8]| -> Vec<i32> {
        ValueBatch::validate(records)
            .unwrap()
            .records()
            .map(|r| {
                let mut stored = 1i16.to_le_bytes().to_vec();
                stored.extend_from_slice(r.row);
                codec.value(&stored).0
            })
            .collect()
    };

    let Ok(Response::LimitScan(r)) = c
        .call(Request::LimitScan(pb::LimitScanRequest {
            table_id,
            partition_id: None,
            bucket_id: 0,
            limit: 5,
            routing_bucket_count: None,
        }))
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, None, "{:?}", r.error_message);
    assert_eq!(r.is_log_table, Some(false));
    assert_eq!(ids_of(r.records.as_ref().unwrap()), live[..5].to_vec());

    // ScanKv in small batches, from a snapshot: a write after the scan
    // opened is not seen.
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
    assert_eq!(
        first.log_offset,
        Some(51),
        "50 inserts and a delete: the offset the snapshot stands for"
    );
    put_bucket(
        &mut c,
        table_id,
        codec.batch(&[(60, Some(("late", 60)))], (-1, -1)),
    )
    .await;
    let mut seen = ids_of(first.records.as_ref().unwrap());
    let id = first.scanner_id.clone().unwrap();
    let mut more = first.has_more_results == Some(true);
    let mut seq = 0;
    // A call out of sequence is refused and the session survives it.
    let Ok(Response::ScanKv(r)) = c.call(scan(Some(id.clone()), 5)).await else {
        panic!()
    };
    assert_eq!(r.error_code, Some(ErrorCode::InvalidScanRequest.code()));
    while more {
        seq += 1;
        let Ok(Response::ScanKv(r)) = c.call(scan(Some(id.clone()), seq)).await else {
            panic!()
        };
        assert_eq!(r.error_code, None, "{:?}", r.error_message);
        seen.extend(ids_of(r.records.as_ref().unwrap()));
        more = r.has_more_results == Some(true);
    }
    assert!(seq > 1, "several batches");
    assert_eq!(seen, live);
    // The finished session is gone.
    let Ok(Response::ScanKv(r)) = c.call(scan(Some(id), seq + 1)).await else {
        panic!()
    };
    assert_eq!(r.error_code, Some(ErrorCode::UnknownScannerId.code()));
    server.stop().await;
}

/// `a INT, b STRING, c BIGINT` keyed by (a, b), bucketed by a: prefix
/// lookups by `a`.
const PREFIX_JSON: &str = r#"{"version":1,"schema":{"version":1,"columns":[{"name":"a","data_type":{"type":"INTEGER","nullable":false}},{"name":"b","data_type":{"type":"STRING","nullable":false}},{"name":"c","data_type":{"type":"BIGINT"}}],"primary_key":["a","b"]},"partition_key":[],"bucket_key":["a"],"bucket_count":1,"properties":{},"custom_properties":{}}"#;

#[tokio::test]
async fn prefix_lookup_returns_every_row_under_a_bucket_key() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_db_and_table_json(&mut c, "db", "pfx", PREFIX_JSON).await;
    let types = row_type();
    let types = vec![
        types[0].clone(),
        DataType::string().with_nullable(false),
        types[2].clone(),
    ];
    let rows = RowCodec::new(RowFormat::Compacted, &types).unwrap();
    let keys = KeyEncoder::new(&types, &[0, 1]).unwrap();
    let prefix = KeyEncoder::new(&types, &[0]).unwrap();
    let mut b = KvBatchBuilder::start(Vec::new(), 1, -1, -1);
    for (a, name) in [(1, "x"), (1, "y"), (2, "x"), (12, "z")] {
        let datums = [
            Datum::Int(a),
            Datum::String(name),
            Datum::BigInt(i64::from(a)),
        ];
        let (mut k, mut r) = (Vec::new(), Vec::new());
        keys.encode_datums(&datums, &mut k).unwrap();
        rows.encode(&datums, &mut r).unwrap();
        b.append_upsert(&k, &r).unwrap();
    }
    put_bucket(&mut c, table_id, b.finish().to_vec()).await;
    let prefix_of = |a: i32| {
        let mut k = Vec::new();
        prefix
            .encode_datums(&[Datum::Int(a), Datum::String(""), Datum::Null], &mut k)
            .unwrap();
        Bytes::from(k)
    };
    let Ok(Response::PrefixLookup(r)) = c
        .call(Request::PrefixLookup(pb::PrefixLookupRequest {
            table_id,
            buckets_req: vec![pb::PbPrefixLookupReqForBucket {
                partition_id: None,
                bucket_id: 0,
                keys: vec![prefix_of(1), prefix_of(3), prefix_of(12)],
                routing_bucket_count: None,
            }],
        }))
        .await
    else {
        panic!()
    };
    let bucket = &r.buckets_resp[0];
    assert_eq!(bucket.error_code, None, "{:?}", bucket.error_message);
    let names = |list: &pb::PbValueList| -> Vec<String> {
        list.values
            .iter()
            .map(|v| {
                let mut d = Vec::new();
                rows.decode(&v[2..], &mut d).unwrap();
                match d[1] {
                    Datum::String(s) => s.to_owned(),
                    _ => panic!(),
                }
            })
            .collect()
    };
    assert_eq!(names(&bucket.value_lists[0]), vec!["x", "y"]);
    assert!(names(&bucket.value_lists[1]).is_empty());
    assert_eq!(names(&bucket.value_lists[2]), vec!["z"]);
    server.stop().await;
}

/// Lookup with `insert_if_not_exists` inserts each missing key as a
/// key-only row and returns it (as Fluss does, with no auto-increment column
/// needed), leaving existing keys as they are; a table under the WAL image
/// answers GetTableStats per bucket with INVALID_TABLE (it keeps no count);
/// LimitScan takes any limit and returns what the bucket has.
#[tokio::test]
async fn insert_if_not_exists_wal_stats_and_large_limits_behave_as_fluss() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let table_id = create_db_and_table_json(&mut c, "db", "pk", PK_JSON).await;
    let codec = Codec::new();
    put_bucket(
        &mut c,
        table_id,
        codec.batch(&[(1, Some(("a", 10)))], (-1, -1)),
    )
    .await;
    let request = Request::Lookup(pb::LookupRequest {
        table_id,
        buckets_req: vec![pb::PbLookupReqForBucket {
            partition_id: None,
            bucket_id: 0,
            keys: [1, 2]
                .iter()
                .map(|id| Bytes::from(codec.key(*id)))
                .collect(),
            original_partition_name: None,
            routing_bucket_count: None,
        }],
        insert_if_not_exists: Some(true),
        acks: Some(-1),
        timeout_ms: Some(30_000),
    });
    let Ok(Response::Lookup(r)) = c.call(request).await else {
        panic!()
    };
    let bucket = &r.buckets_resp[0];
    assert_eq!(bucket.error_code, None, "{:?}", bucket.error_message);
    let rows = RowCodec::new(RowFormat::Compacted, &row_type()).unwrap();
    let decoded: Vec<Vec<String>> = bucket
        .values
        .iter()
        .map(|v| {
            let v = v.values.as_ref().expect("every key has a row now");
            let mut d = Vec::new();
            rows.decode(&v[2..], &mut d).unwrap();
            d.iter().map(|d| format!("{d:?}")).collect()
        })
        .collect();
    assert_eq!(decoded[0], vec!["Int(1)", "String(\"a\")", "BigInt(10)"]);
    assert_eq!(decoded[1], vec!["Int(2)", "Null", "Null"], "a key-only row");
    // The inserted row is committed: a plain lookup sees it (a key-only
    // row does not decode as (id, name, n) with values, so check its bytes).
    let again = Request::Lookup(pb::LookupRequest {
        table_id,
        buckets_req: vec![pb::PbLookupReqForBucket {
            partition_id: None,
            bucket_id: 0,
            keys: vec![Bytes::from(codec.key(2))],
            original_partition_name: None,
            routing_bucket_count: None,
        }],
        insert_if_not_exists: None,
        acks: None,
        timeout_ms: None,
    });
    let Ok(Response::Lookup(r)) = c.call(again).await else {
        panic!()
    };
    assert!(r.buckets_resp[0].values[0].values.is_some());

    let limit = |limit: i32| {
        Request::LimitScan(pb::LimitScanRequest {
            table_id,
            partition_id: None,
            bucket_id: 0,
            limit,
            routing_bucket_count: None,
        })
    };
    let Ok(Response::LimitScan(r)) = c.call(limit(10_000_000)).await else {
        panic!()
    };
    assert_eq!(r.error_code, None, "{:?}", r.error_message);
    assert_eq!(
        ValueBatch::validate(r.records.as_ref().unwrap())
            .unwrap()
            .records()
            .count(),
        2
    );

    let wal = PK_JSON.replace(
        r#""properties":{}"#,
        r#""properties":{"table.changelog.image":"WAL"}"#,
    );
    let wal_id = create_db_and_table_json(&mut c, "db", "wal", &wal).await;
    let Ok(Response::GetTableStats(stats)) = c
        .call(Request::GetTableStats(pb::GetTableStatsRequest {
            table_id: wal_id,
            buckets_req: vec![pb::PbTableStatsReqForBucket {
                partition_id: None,
                bucket_id: 0,
                routing_bucket_count: None,
            }],
            target_columns: Vec::new(),
        }))
        .await
    else {
        panic!()
    };
    assert_eq!(
        stats.buckets_resp[0].error_code,
        Some(ErrorCode::InvalidTableException.code())
    );
    assert_eq!(stats.buckets_resp[0].row_count, None);
    server.stop().await;
}
