//! Primary-key tables with ARRAY, MAP and ROW value columns, written and
//! read by the official Rust client, `fluss-rs` 1.0.0 (lib `fluss`), used
//! unmodified against the real `fjord server` binary.
//!
//! A table `id INT NOT NULL, tags ARRAY<INT>, attrs MAP<STRING, INT>,
//! inner ROW<a INT, b STRING>` (primary key `id`, two buckets, created
//! through fluss-rs's admin) takes fluss-rs upserts of nested values with
//! NULLs inside, whole-NULL nested values and empty ones, updates and a
//! delete; then:
//! - a lookup of every key returns exactly the last row written (or none);
//! - the changelog read with the `LogScanner` from the earliest offset holds,
//!   per key and in order, the `+I`, `-U`/`+U` and `-D` rows whose nested
//!   values are those written (fluss-rs reads them from Arrow `List`, `Map`
//!   and `Struct` columns);
//! - limit scans of each bucket return the live rows;
//! - after a clean restart, and after a restart with the KV store deleted
//!   (rebuilt by replaying the changelog), lookups and scans are unchanged
//!   and writes go on.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use fluss::client::{FlussConnection, FlussTable, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::metadata::{
    DataField, DataTypes, RowType, Schema, TableBucket, TableDescriptor, TablePath,
};
use fluss::record::ChangeType;
use fluss::row::binary_array::FlussArrayWriter;
use fluss::row::binary_map::FlussMapWriter;
use fluss::row::{ColumnarRow, DataGetters, Datum, GenericRow, InternalArray, InternalMap};
use support::{FjordServer, STEP_TIMEOUT};
use tempfile::TempDir;

const DB: &str = "interop_kv_nested";
const BUCKETS: i32 = 2;
/// How long one `poll` waits for data before the scan loop checks its deadline.
const POLL_WAIT: Duration = Duration::from_millis(300);

/// One row of the table, owned and comparable.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Value {
    id: i32,
    tags: Option<Vec<Option<i32>>>,
    attrs: Option<Vec<(String, Option<i32>)>>,
    inner: Option<(Option<i32>, Option<String>)>,
}

fn inner_type() -> fluss::metadata::DataType {
    DataTypes::row(vec![
        DataField::new("a", DataTypes::int(), None),
        DataField::new("b", DataTypes::string(), None),
    ])
}

fn row_type() -> RowType {
    RowType::new(vec![
        DataField::new("id", DataTypes::int().as_non_nullable(), None),
        DataField::new("tags", DataTypes::array(DataTypes::int()), None),
        DataField::new(
            "attrs",
            DataTypes::map(DataTypes::string(), DataTypes::int()),
            None,
        ),
        DataField::new("inner", inner_type(), None),
    ])
}

fn descriptor() -> TableDescriptor {
    TableDescriptor::builder()
        .schema(
            Schema::builder()
                .column("id", DataTypes::int().as_non_nullable())
                .column("tags", DataTypes::array(DataTypes::int()))
                .column(
                    "attrs",
                    DataTypes::map(DataTypes::string(), DataTypes::int()),
                )
                .column("inner", inner_type())
                .primary_key(vec!["id"])
                .expect("primary key")
                .build()
                .expect("schema"),
        )
        .distributed_by(Some(BUCKETS), vec![])
        .build()
        .expect("descriptor")
}

fn int_datum(v: Option<i32>) -> Datum<'static> {
    v.map_or(Datum::Null, Datum::from)
}

/// The fluss-rs row of `v`, nested values built with fluss-rs's writers.
fn generic_row(v: &Value) -> GenericRow<'static> {
    let mut row = GenericRow::new(4);
    row.set_field(0, v.id);
    match &v.tags {
        Some(tags) => {
            let mut w = FlussArrayWriter::new(tags.len(), &DataTypes::int());
            for (i, t) in tags.iter().enumerate() {
                match t {
                    Some(x) => w.write_int(i, *x),
                    None => w.set_null_at(i),
                }
            }
            row.set_field(1, Datum::Array(w.complete().expect("array")));
        }
        None => row.set_field(1, Datum::Null),
    }
    match &v.attrs {
        Some(attrs) => {
            let mut w = FlussMapWriter::new(attrs.len(), &DataTypes::string(), &DataTypes::int());
            for (k, x) in attrs {
                w.write_entry(Datum::from(k.clone()), int_datum(*x))
                    .expect("map entry");
            }
            row.set_field(2, Datum::Map(w.complete().expect("map")));
        }
        None => row.set_field(2, Datum::Null),
    }
    match &v.inner {
        Some((a, b)) => {
            let mut inner = GenericRow::new(2);
            inner.set_field(0, int_datum(*a));
            match b {
                Some(s) => inner.set_field(1, Datum::from(s.clone())),
                None => inner.set_field(1, Datum::Null),
            }
            row.set_field(3, Datum::Row(Box::new(inner)));
        }
        None => row.set_field(3, Datum::Null),
    }
    row
}

fn read_ints(a: &dyn InternalArray) -> fluss::error::Result<Vec<Option<i32>>> {
    (0..a.size())
        .map(|i| {
            if a.is_null_at(i)? {
                Ok(None)
            } else {
                a.get_int(i).map(Some)
            }
        })
        .collect()
}

/// The value of a row fluss-rs read (a lookup's compacted row or a
/// changelog / scan row over Arrow columns).
fn read_value(row: &dyn DataGetters) -> fluss::error::Result<Value> {
    let tags = if row.is_null_at(1)? {
        None
    } else {
        Some(read_ints(&row.get_array(1)?)?)
    };
    let attrs = if row.is_null_at(2)? {
        None
    } else {
        let map = row.get_map(2)?;
        let (keys, values) = (map.key_array(), map.value_array());
        let ints = read_ints(values)?;
        Some(
            (0..map.size())
                .map(|i| Ok((keys.get_string(i)?.to_owned(), ints[i])))
                .collect::<fluss::error::Result<_>>()?,
        )
    };
    let inner = if row.is_null_at(3)? {
        None
    } else {
        let r = row.get_row(3)?;
        let a = (!r.is_null_at(0)?).then(|| r.get_int(0)).transpose()?;
        let b = (!r.is_null_at(1)?)
            .then(|| r.get_string(1).map(str::to_owned))
            .transpose()?;
        Some((a, b))
    };
    Ok(Value {
        id: row.get_int(0)?,
        tags,
        attrs,
        inner,
    })
}

fn full(id: i32, n: i32) -> Value {
    Value {
        id,
        tags: Some(vec![Some(n), None, Some(n + 1)]),
        attrs: Some(vec![
            ("k".into(), Some(n)),
            ("a longer key than eight bytes".into(), None),
        ]),
        inner: Some((
            Some(n),
            Some(format!("inner {n}, long enough to go out of line")),
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

fn nulls_inside(id: i32) -> Value {
    Value {
        id,
        tags: Some(vec![None, None]),
        attrs: Some(vec![]),
        inner: Some((None, None)),
    }
}

/// A change as compared: fluss-rs's `ChangeType` is not `Ord`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ch {
    Insert,
    UpdateBefore,
    UpdateAfter,
    Delete,
}

fn ch(c: &ChangeType) -> Ch {
    match c {
        ChangeType::Insert => Ch::Insert,
        ChangeType::UpdateBefore => Ch::UpdateBefore,
        ChangeType::UpdateAfter => Ch::UpdateAfter,
        ChangeType::Delete => Ch::Delete,
        other => panic!("unexpected change type {other:?} in a primary-key changelog"),
    }
}

async fn connect(server: &FjordServer) -> FlussConnection {
    let config = Config {
        bootstrap_servers: server.bootstrap_servers(),
        writer_retries: 5,
        lookup_batch_timeout_ms: 5,
        ..Config::default()
    };
    server.step("connect", FlussConnection::new(config)).await
}

/// Upserts (`Ok`) and deletes (`Err(id)`), each write's own result awaited.
async fn write(server: &FjordServer, table: &FlussTable<'_>, ops: &[Result<Value, i32>]) {
    let writer = table
        .new_upsert()
        .expect("new_upsert")
        .create_writer()
        .expect("upsert writer");
    let mut acks = Vec::new();
    for op in ops {
        let ack = match op {
            Ok(v) => writer.upsert(&generic_row(v)),
            Err(id) => writer.delete(&generic_row(&all_null(*id))),
        }
        .unwrap_or_else(|e| panic!("{op:?} refused by fluss-rs: {e:?}"));
        acks.push(ack);
    }
    server.step("flush", writer.flush()).await;
    for (op, ack) in ops.iter().zip(acks) {
        server.step(&format!("result of {op:?}"), ack).await;
    }
}

async fn lookup(server: &FjordServer, table: &FlussTable<'_>, ids: &[i32]) -> Vec<Option<Value>> {
    let mut lookuper = table
        .new_lookup()
        .expect("new_lookup")
        .create_lookuper()
        .expect("lookuper");
    let mut out = Vec::new();
    for &id in ids {
        let mut key = GenericRow::new(1);
        key.set_field(0, id);
        let result = server
            .step(&format!("lookup {id}"), lookuper.lookup(&key))
            .await;
        let row = result.get_single_row().expect("single row");
        out.push(row.map(|r| read_value(&r).expect("lookup row")));
    }
    out
}

/// Every live row, from limit scans of each bucket, sorted by id.
async fn limit_scans(server: &FjordServer, table: &FlussTable<'_>) -> Vec<Value> {
    let table_id = table.get_table_info().get_table_id();
    let row_type = Arc::new(row_type());
    let mut rows = Vec::new();
    for bucket in 0..BUCKETS {
        let mut scanner = table
            .new_scan()
            .limit(100)
            .expect("limit")
            .create_bucket_batch_scanner(TableBucket::new(table_id, bucket))
            .expect("bucket batch scanner");
        let batches = server
            .step(
                &format!("limit scan of bucket {bucket}"),
                scanner.collect_all_batches(),
            )
            .await;
        for batch in batches {
            let rb = Arc::new(batch.batch().clone());
            for i in 0..rb.num_rows() {
                let row = ColumnarRow::new(Arc::clone(&rb), Arc::clone(&row_type), i, None)
                    .expect("columnar row");
                rows.push(read_value(&row).expect("scan row"));
            }
        }
    }
    rows.sort();
    rows
}

/// The changelog from the earliest offset, per key in offset order, once
/// `expected` records arrived.
async fn changelog(
    server: &FjordServer,
    table: &FlussTable<'_>,
    expected: usize,
) -> BTreeMap<i32, Vec<(Ch, Value)>> {
    let scanner = table.new_scan().create_log_scanner().expect("log scanner");
    let offsets: HashMap<i32, i64> = (0..BUCKETS).map(|b| (b, EARLIEST_OFFSET)).collect();
    server
        .step("subscribe", scanner.subscribe_buckets(&offsets))
        .await;
    let mut by_bucket: BTreeMap<i32, Vec<(i64, Ch, Value)>> = BTreeMap::new();
    let mut received = 0;
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let mut extra_polls = 2;
    while received < expected || extra_polls > 0 {
        if received >= expected {
            extra_polls -= 1;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the changelog gave {received} of {expected} records\n--- fjord server stderr ---\n{}",
            server.stderr_log()
        );
        let records = server.step("poll", scanner.poll(POLL_WAIT)).await;
        for (tb, records) in records.into_records_by_buckets() {
            for r in records {
                let value = read_value(r.row()).unwrap_or_else(|e| {
                    panic!("changelog record at {} of {tb}: {e:?}", r.offset())
                });
                by_bucket.entry(tb.bucket_id()).or_default().push((
                    r.offset(),
                    ch(r.change_type()),
                    value,
                ));
                received += 1;
            }
        }
    }
    let mut by_key: BTreeMap<i32, Vec<(Ch, Value)>> = BTreeMap::new();
    for rows in by_bucket.values_mut() {
        rows.sort_by_key(|r| r.0);
        for (_, c, v) in rows.drain(..) {
            by_key.entry(v.id).or_default().push((c, v));
        }
    }
    by_key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fluss_rs_upserts_nested_values_and_reads_them_back_equal() {
    let dir = TempDir::new().expect("temp data dir");
    let mut server = FjordServer::start(dir.path());
    let path = TablePath::new(DB, "nested");
    {
        let conn = connect(&server).await;
        let admin = conn.get_admin().expect("admin");
        server
            .step("create database", admin.create_database(DB, None, true))
            .await;
        server
            .step(
                "create table",
                admin.create_table(&path, &descriptor(), false),
            )
            .await;
    }
    let (one, one_b) = (full(1, 10), full(1, 11));
    let (two, two_b) = (all_null(2), full(2, 20));
    let (three, four, four_b) = (nulls_inside(3), nulls_inside(4), all_null(4));
    let five = full(5, 50);
    let ids = [1, 2, 3, 4, 5, 6];
    let expected = vec![
        Some(one_b.clone()),
        Some(two_b.clone()),
        None,
        Some(four_b.clone()),
        Some(five.clone()),
        None,
    ];
    let live = vec![one_b.clone(), two_b.clone(), four_b.clone(), five.clone()];
    {
        let conn = connect(&server).await;
        let table = server.step("get table", conn.get_table(&path)).await;
        write(
            &server,
            &table,
            &[
                Ok(one.clone()),
                Ok(two.clone()),
                Ok(three.clone()),
                Ok(four.clone()),
            ],
        )
        .await;
        assert_eq!(
            lookup(&server, &table, &[1, 2, 3, 4]).await,
            vec![
                Some(one.clone()),
                Some(two.clone()),
                Some(three.clone()),
                Some(four.clone())
            ]
        );
        write(
            &server,
            &table,
            &[
                Ok(one_b.clone()),
                Ok(two_b.clone()),
                Err(3),
                Ok(four_b.clone()),
                Ok(five.clone()),
            ],
        )
        .await;
        assert_eq!(lookup(&server, &table, &ids).await, expected);
        use Ch::*;
        let want: BTreeMap<i32, Vec<(Ch, Value)>> = [
            (
                1,
                vec![
                    (Insert, one.clone()),
                    (UpdateBefore, one.clone()),
                    (UpdateAfter, one_b.clone()),
                ],
            ),
            (
                2,
                vec![
                    (Insert, two.clone()),
                    (UpdateBefore, two.clone()),
                    (UpdateAfter, two_b.clone()),
                ],
            ),
            (3, vec![(Insert, three.clone()), (Delete, three.clone())]),
            (
                4,
                vec![
                    (Insert, four.clone()),
                    (UpdateBefore, four.clone()),
                    (UpdateAfter, four_b.clone()),
                ],
            ),
            (5, vec![(Insert, five.clone())]),
        ]
        .into_iter()
        .collect();
        assert_eq!(changelog(&server, &table, 12).await, want);
        assert_eq!(limit_scans(&server, &table).await, live);
    }

    // A clean restart, then one with the KV store deleted: rebuilt by
    // replaying the changelog's nested columns.
    for lose_kv in [false, true] {
        server.stop();
        if lose_kv {
            std::fs::remove_dir_all(dir.path().join("kv")).expect("remove the kv store");
        }
        server = FjordServer::start(dir.path());
        let conn = connect(&server).await;
        let table = server.step("get table", conn.get_table(&path)).await;
        assert_eq!(
            lookup(&server, &table, &ids).await,
            expected,
            "lose_kv={lose_kv}"
        );
        assert_eq!(
            limit_scans(&server, &table).await,
            live,
            "lose_kv={lose_kv}"
        );
        let six = full(6, 60 + i32::from(lose_kv));
        write(&server, &table, &[Ok(six.clone())]).await;
        assert_eq!(lookup(&server, &table, &[6]).await, vec![Some(six)]);
        write(&server, &table, &[Err(6)]).await;
    }
    server.stop();
}
