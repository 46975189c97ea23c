//! Primary-key tables through the native client against an in-process
//! server: every supported type written by the upsert writer (as
//! `[Datum; N]`, `GenericRow` and a typed row with its own
//! `write_fields`) reads back equal through point and prefix lookups, in
//! both `table.kv.format`s; deletes and partial updates change exactly
//! what Fluss says, and the changelog read by the `LogScanner` carries the
//! change types Fluss emits for them; a partitioned table's partitions are
//! created by the writer and found by the lookuper; keys short enough to
//! be kept inline and longer ones, looked up together, each find their row.

mod support;

use fjord_client::row::{Datum, FieldWriter, GenericRow, InternalRow, Timestamp};
use fjord_client::{
    ChangeType, LogScanner, LookupConfig, ScannerConfig, TablePath, UpsertOptions, WriterConfig,
};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use support::{create_pk_table, TestServer, HANG};

/// Every column type primary-key rows hold, keyed by `(id, k)` and
/// bucketed by `id` (so rows sharing an `id` share a bucket and a prefix).
fn all_types_schema() -> Schema {
    Schema::builder()
        .column("id", DataType::int().with_nullable(false))
        .column("k", DataType::string().with_nullable(false))
        .column("b", DataType::boolean())
        .column("t", DataType::tinyint())
        .column("s", DataType::smallint())
        .column("l", DataType::bigint())
        .column("f", DataType::float())
        .column("d", DataType::double())
        .column("c", DataType::char(3).unwrap())
        .column("bin", DataType::binary(2).unwrap())
        .column("by", DataType::bytes())
        .column("dec_small", DataType::decimal(10, 2).unwrap())
        .column("dec_big", DataType::decimal(30, 4).unwrap())
        .column("day", DataType::date())
        .column("tm", DataType::time(0).unwrap())
        .column("ts3", DataType::timestamp(3).unwrap())
        .column("ts6", DataType::timestamp(6).unwrap())
        .column("ltz3", DataType::timestamp_ltz(3).unwrap())
        .column("ltz6", DataType::timestamp_ltz(6).unwrap())
        .primary_key(["id", "k"])
        .build()
        .unwrap()
}

const COLUMNS: usize = 19;
const KEYS: [&str; 4] = ["a", "bb", "ccc", ""];
const CHARS: [&str; 3] = ["abc", "xyz", "q r"];
const BINS: [&[u8]; 2] = [&[0, 1], &[0xff, 0x7f]];
const BLOBS: [&[u8]; 3] = [b"", b"\x00\x01\x02", b"blob"];

/// The values of row `i`: ids 0..n/4, four keys each; every fifth row
/// holds NULL in every nullable column.
fn values(i: i32) -> [Datum<'static>; COLUMNS] {
    let id = i / 4;
    let k = KEYS[(i % 4) as usize];
    if i % 5 == 4 {
        let mut nulls = [Datum::Null; COLUMNS];
        nulls[0] = Datum::Int(id);
        nulls[1] = Datum::String(k);
        return nulls;
    }
    let n = i64::from(i);
    [
        Datum::Int(id),
        Datum::String(k),
        Datum::Boolean(i % 2 == 0),
        Datum::TinyInt((i % 256 - 128) as i8),
        Datum::SmallInt((i * 7 - 1000) as i16),
        Datum::BigInt(n * 1_000_000_007 - (1 << 40)),
        Datum::Float(i as f32 * 0.5 - 3.25),
        Datum::Double(-(i as f64) / 3.0),
        Datum::String(CHARS[(i % 3) as usize]),
        Datum::Binary(BINS[(i % 2) as usize]),
        Datum::Binary(BLOBS[(i % 3) as usize]),
        Datum::Decimal(i128::from(i) * 12_345 - 999_999),
        Datum::Decimal(i128::from(i) * 10i128.pow(25) - 7),
        Datum::Date(19_000 + i),
        Datum::Time((i * 1_000) % 86_400_000),
        Datum::Timestamp(Timestamp::from_millis(1_700_000_000_000 + n)),
        Datum::Timestamp(Timestamp::from_micros(1_700_000_000_000_000 + n * 1_001)),
        Datum::TimestampLtz(Timestamp::from_millis(-1_000 - n)),
        Datum::TimestampLtz(Timestamp::from_micros(-5_000_001 + n * 3)),
    ]
}

/// Row `i` as a row type of the caller's own whose `write_fields` writes
/// typed fields (the writer's fast path).
struct Typed(i32);

impl InternalRow for Typed {
    fn field_count(&self) -> usize {
        COLUMNS
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        values(self.0)[pos]
    }

    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        let v = values(self.0);
        match v {
            [Datum::Int(id), Datum::String(k), Datum::Boolean(b), Datum::TinyInt(t), Datum::SmallInt(s), Datum::BigInt(l), Datum::Float(f), Datum::Double(d), ..] =>
            {
                fields.int(id);
                fields.string(k);
                fields.boolean(b);
                fields.tinyint(t);
                fields.smallint(s);
                fields.bigint(l);
                fields.float(f);
                fields.double(d);
                for datum in &v[8..] {
                    fields.datum_ref(datum);
                }
            }
            _ => {
                for datum in &v {
                    fields.datum_ref(datum);
                }
            }
        }
    }
}

const ROWS: i32 = 400;

async fn every_type_round_trips(kv_format: &str) {
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("kv", format!("all_types_{kv_format}"));
    let table = create_pk_table(
        &client,
        &path,
        all_types_schema(),
        3,
        &["id"],
        &[],
        &[("table.kv.format", kv_format)],
    )
    .await;
    let mut writer = client
        .upsert_writer(&path, WriterConfig::default())
        .await
        .expect("upsert writer");
    for i in 0..ROWS {
        match i % 3 {
            0 => writer.upsert(&values(i)).await,
            1 => {
                writer
                    .upsert(&GenericRow::from_values(values(i).to_vec()))
                    .await
            }
            _ => writer.upsert(&Typed(i)).await,
        }
        .unwrap_or_else(|e| panic!("row {i}: {e}"));
    }
    tokio::time::timeout(HANG, writer.flush())
        .await
        .expect("flush in time")
        .expect("flush");

    let lookuper = client
        .lookuper(&path, LookupConfig::default())
        .await
        .expect("lookuper");
    assert_eq!(lookuper.key_columns(), ["id", "k"]);
    // Many lookups at once, so the batcher coalesces them.
    let lookups = (0..ROWS).map(|i| {
        let lookuper = lookuper.clone();
        async move {
            let key = [values(i)[0], values(i)[1]];
            (i, lookuper.lookup(&key).await)
        }
    });
    for (i, found) in futures_join_all(lookups).await {
        let row = found
            .unwrap_or_else(|e| panic!("lookup {i}: {e}"))
            .unwrap_or_else(|| panic!("row {i} not found"));
        assert_eq!(row.values(), values(i), "row {i} ({kv_format})");
    }
    let missing = lookuper
        .lookup(&[Datum::Int(ROWS), Datum::String("a")])
        .await
        .expect("lookup of a missing key");
    assert!(missing.is_none(), "a missing key is None");

    let prefix = lookuper.prefix(&["id"]).expect("prefix lookuper");
    for id in [0, 7, ROWS / 4 - 1] {
        let rows = prefix
            .prefix_lookup(&[Datum::Int(id)])
            .await
            .expect("prefix lookup");
        let mut found: Vec<Vec<Datum<'_>>> = rows.iter().map(|r| r.values().to_vec()).collect();
        let mut expected: Vec<Vec<Datum<'_>>> =
            (id * 4..id * 4 + 4).map(|i| values(i).to_vec()).collect();
        let by_key = |r: &Vec<Datum<'_>>| format!("{}", r[1]);
        found.sort_by_key(by_key);
        expected.sort_by_key(by_key);
        assert_eq!(found, expected, "prefix {id}");
        let batch = rows.to_record_batch().expect("Arrow");
        assert_eq!(batch.num_rows(), 4);
        assert_eq!(batch.schema().fields().len(), COLUMNS);
    }
    assert!(prefix
        .prefix_lookup(&[Datum::Int(-1)])
        .await
        .expect("prefix lookup of nothing")
        .is_empty());
    drop(writer);
    drop(table);
    server.stop().await;
}

/// `join_all` without a futures dependency: polls the futures on spawned
/// tasks of the current runtime.
async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.expect("task"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_round_trips_through_upserts_and_lookups_in_compacted_rows() {
    every_type_round_trips("COMPACTED").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_round_trips_through_upserts_and_lookups_in_indexed_rows() {
    every_type_round_trips("INDEXED").await;
}

/// `id INT NOT NULL, name STRING, n BIGINT`, primary key `id`.
fn small_schema() -> Schema {
    Schema::builder()
        .column("id", DataType::int().with_nullable(false))
        .column("name", DataType::string())
        .column("n", DataType::bigint())
        .primary_key(["id"])
        .build()
        .unwrap()
}

fn small(id: i32, name: &str, n: i64) -> [Datum<'_>; 3] {
    [Datum::Int(id), Datum::String(name), Datum::BigInt(n)]
}

/// Every changelog record of bucket 0 of `table` below `end` (no write of
/// the test leaves a header-only batch): (offset, change type, id, n).
async fn changelog(
    client: &fjord_client::FlussClient,
    table: &fjord_client::TableInfo,
    end: i64,
) -> Vec<(i64, ChangeType, i32, Option<i64>)> {
    let route = client.table_route(table).await.expect("route");
    let mut scanner = LogScanner::new(table.clone(), route, ScannerConfig::default()).unwrap();
    scanner.subscribe(0, 0).unwrap();
    let mut out = Vec::new();
    let mut next = 0;
    while next < end {
        for batch in tokio::time::timeout(HANG, scanner.poll())
            .await
            .unwrap()
            .unwrap()
        {
            let rows = batch.rows().unwrap();
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(row.change_type(), batch.change_type(i));
                let n = match row.get(2) {
                    Datum::BigInt(n) => Some(n),
                    _ => None,
                };
                let Datum::Int(id) = row.get(0) else {
                    panic!("id {:?}", row.get(0))
                };
                out.push((batch.base_offset + i as i64, row.change_type(), id, n));
            }
            next = batch.next_offset();
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_and_partial_updates_change_what_fluss_says_and_the_changelog_tells_it() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("kv", "changes");
    let table = create_pk_table(&client, &path, small_schema(), 1, &[], &[], &[]).await;
    let mut writer = client
        .upsert_writer(&path, WriterConfig::default())
        .await
        .unwrap();
    writer.upsert(&small(1, "one", 10)).await.unwrap();
    writer.upsert(&small(2, "two", 20)).await.unwrap();
    writer.upsert(&small(3, "three", 30)).await.unwrap();
    writer.flush().await.unwrap();
    writer.upsert(&small(2, "two again", 21)).await.unwrap();
    // Only the key is read from a deleted row.
    writer.delete(&small(3, "", 0)).await.unwrap();
    writer.delete(&small(99, "absent", 0)).await.unwrap();
    writer.flush().await.unwrap();

    let mut partial = client
        .upsert_writer_with(
            &path,
            WriterConfig::default(),
            UpsertOptions::default().partial_update_by_names(["id", "n"]),
        )
        .await
        .unwrap();
    assert_eq!(partial.target_columns(), Some(&[0, 2][..]));
    partial.upsert(&small(1, "not written", 100)).await.unwrap();
    partial.upsert(&small(7, "not written", 70)).await.unwrap();
    partial.flush().await.unwrap();

    let lookuper = client
        .lookuper(&path, LookupConfig::default())
        .await
        .unwrap();
    let get = |id: i32| {
        let lookuper = lookuper.clone();
        async move {
            lookuper
                .lookup(&[Datum::Int(id)])
                .await
                .unwrap()
                .map(|r| r.values().iter().map(|d| d.to_string()).collect::<Vec<_>>())
        }
    };
    assert_eq!(get(1).await.unwrap(), ["1", "\"one\"", "100"]);
    assert_eq!(get(2).await.unwrap(), ["2", "\"two again\"", "21"]);
    assert_eq!(get(3).await, None, "deleted");
    assert_eq!(get(7).await.unwrap(), ["7", "NULL", "70"]);
    assert_eq!(get(99).await, None);

    let end = partial.log_end_offsets();
    assert_eq!(end.len(), 1, "{end:?}");
    let (bucket, end) = (end[0].bucket, end[0].log_end_offset);
    assert_eq!(bucket, 0);
    let first_end = writer.log_end_offsets()[0].log_end_offset;
    assert!(first_end < end, "{first_end} then {end}");

    use ChangeType::*;
    let log: Vec<(ChangeType, i32, Option<i64>)> = changelog(&client, &table, end)
        .await
        .into_iter()
        .map(|(_, change, id, n)| (change, id, n))
        .collect();
    assert_eq!(
        log,
        [
            (Insert, 1, Some(10)),
            (Insert, 2, Some(20)),
            (Insert, 3, Some(30)),
            (UpdateBefore, 2, Some(20)),
            (UpdateAfter, 2, Some(21)),
            (Delete, 3, Some(30)),
            (UpdateBefore, 1, Some(10)),
            (UpdateAfter, 1, Some(100)),
            (Insert, 7, Some(70)),
        ]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_update_without_the_whole_key_or_over_a_not_null_column_is_refused() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("kv", "partial_refused");
    let schema = Schema::builder()
        .column("id", DataType::int().with_nullable(false))
        .column("must", DataType::string().with_nullable(false))
        .column("n", DataType::bigint())
        .primary_key(["id"])
        .build()
        .unwrap();
    create_pk_table(&client, &path, schema, 1, &[], &[], &[]).await;
    for (options, says) in [
        (
            UpsertOptions::default().partial_update([2]),
            "`id` is missing",
        ),
        (UpsertOptions::default().partial_update([0, 2]), "`must`"),
        (
            UpsertOptions::default().partial_update([0, 5]),
            "out of range",
        ),
        (
            UpsertOptions::default().partial_update_by_names(["id", "nope"]),
            "`nope`",
        ),
    ] {
        let e = client
            .upsert_writer_with(&path, WriterConfig::default(), options)
            .await
            .err()
            .expect("refused");
        assert!(e.to_string().contains(says), "{e}");
    }
    // A log table has no key to upsert by.
    let log = TablePath::new("kv", "a_log");
    support::create_log_table(&client, &log, support::id_text_schema(), 1, "NONE").await;
    let e = client
        .upsert_writer(&log, WriterConfig::default())
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains("no primary key"), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_the_table_cannot_take_are_refused_naming_the_column_and_nothing_is_written() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("kv", "refused_rows");
    create_pk_table(&client, &path, small_schema(), 2, &[], &[], &[]).await;
    let mut writer = client
        .upsert_writer(&path, WriterConfig::default())
        .await
        .unwrap();
    let cases: [(&[Datum<'_>], &str); 3] = [
        (&[Datum::Null, Datum::Null, Datum::Null], "`id`"),
        (&[Datum::Int(1), Datum::Int(2), Datum::Null], "`name`"),
        (&[Datum::Int(1)], "3 columns"),
    ];
    for (row, says) in cases {
        let e = writer.upsert(row).await.unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    }
    let e = writer
        .delete(&[Datum::Null, Datum::Null, Datum::Null])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("`id`"), "{e}");
    writer.upsert(&small(5, "ok", 5)).await.unwrap();
    writer.flush().await.unwrap();
    let lookuper = client
        .lookuper(&path, LookupConfig::default())
        .await
        .unwrap();
    assert!(lookuper.lookup(&[Datum::Int(1)]).await.unwrap().is_none());
    assert!(lookuper.lookup(&[Datum::Int(5)]).await.unwrap().is_some());
    let e = lookuper
        .lookup(&[Datum::Int(1), Datum::Int(2)])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("one per key column"), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_table_gets_its_partitions_from_the_writer_and_the_lookuper_finds_them() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("kv", "by_day");
    let schema = Schema::builder()
        .column("dt", DataType::string().with_nullable(false))
        .column("id", DataType::int().with_nullable(false))
        .column("sub", DataType::int().with_nullable(false))
        .column("v", DataType::string())
        .primary_key(["dt", "id", "sub"])
        .build()
        .unwrap();
    create_pk_table(&client, &path, schema, 2, &["id"], &["dt"], &[]).await;
    let mut writer = client
        .upsert_writer(&path, WriterConfig::default())
        .await
        .unwrap();
    let days = ["2026-01-01", "2026-01-02", "2026-01-03"];
    let texts: Vec<String> = (0..60).map(|i| format!("v{i}")).collect();
    for (i, text) in texts.iter().enumerate() {
        let i = i as i32;
        let row = [
            Datum::String(days[(i % 3) as usize]),
            Datum::Int(i / 6),
            Datum::Int(i % 6),
            Datum::String(text),
        ];
        writer.upsert(&row).await.unwrap();
    }
    writer.flush().await.unwrap();
    assert_eq!(
        client
            .admin()
            .list_partitions(&path, None)
            .await
            .unwrap()
            .len(),
        3,
        "the writer created the partitions"
    );
    let lookuper = client
        .lookuper(&path, LookupConfig::default())
        .await
        .unwrap();
    assert_eq!(lookuper.key_columns(), ["dt", "id", "sub"]);
    for i in [0, 17, 59] {
        let key = [
            Datum::String(days[(i % 3) as usize]),
            Datum::Int(i / 6),
            Datum::Int(i % 6),
        ];
        let row = lookuper.lookup(&key).await.unwrap().expect("found");
        assert_eq!(row.get(3), Datum::String(&texts[i as usize]));
    }
    let none = [Datum::String("1999-01-01"), Datum::Int(0), Datum::Int(0)];
    assert!(
        lookuper.lookup(&none).await.unwrap().is_none(),
        "no such partition"
    );
    let prefix = lookuper.prefix(&["dt", "id"]).unwrap();
    let rows = prefix
        .prefix_lookup(&[Datum::String(days[0]), Datum::Int(1)])
        .await
        .unwrap();
    // id 1 is rows 6..12; of those, day 0 holds 6 and 9.
    let subs: Vec<Datum<'_>> = rows.iter().map(|r| r.get(2)).collect();
    assert_eq!(subs, [Datum::Int(0), Datum::Int(3)]);
    assert!(
        lookuper.prefix(&["id"]).is_err(),
        "the partition key is needed"
    );
    server.stop().await;
}

/// Keys of every length from empty to well past what a lookup keeps
/// inline (30 bytes), looked up at once so that requests mix short and
/// long keys: each finds its own row, and a long key that is not there is
/// `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_short_and_long_each_find_their_own_row() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("kv", "key_lengths");
    let schema = Schema::builder()
        .column("name", DataType::string().with_nullable(false))
        .column("n", DataType::bigint())
        .primary_key(["name"])
        .build()
        .unwrap();
    create_pk_table(&client, &path, schema, 3, &[], &[], &[]).await;
    const LONGEST: usize = 80;
    // Key `len`: `len` characters, differing from its neighbours early and
    // late, so a key cut short or mixed with another finds the wrong row.
    let name = |len: usize| -> String {
        (0..len)
            .map(|i| char::from(b'a' + ((i * 7 + len) % 26) as u8))
            .collect()
    };
    let mut writer = client
        .upsert_writer(&path, WriterConfig::default())
        .await
        .unwrap();
    for len in 0..=LONGEST {
        let name = name(len);
        let row = [Datum::String(&name), Datum::BigInt(len as i64)];
        writer.upsert(&row).await.unwrap();
    }
    tokio::time::timeout(HANG, writer.flush())
        .await
        .expect("flush in time")
        .expect("flush");

    let lookuper = client
        .lookuper(&path, LookupConfig::default())
        .await
        .expect("lookuper");
    let lookups = (0..=LONGEST).map(|len| {
        let (lookuper, name) = (lookuper.clone(), name(len));
        async move {
            let found = lookuper.lookup(&[Datum::String(&name)]).await;
            let row = found
                .unwrap_or_else(|e| panic!("key of {len} bytes: {e}"))
                .unwrap_or_else(|| panic!("key of {len} bytes not found"));
            let Datum::BigInt(n) = row.get(1) else {
                panic!("key of {len} bytes: n is {:?}", row.get(1))
            };
            (len, n)
        }
    });
    let found = tokio::time::timeout(HANG, futures_join_all(lookups))
        .await
        .expect("lookups in time");
    for (len, n) in found {
        assert_eq!(n, len as i64, "the key of {len} bytes");
    }
    let absent = format!("{}!", name(LONGEST));
    assert!(lookuper
        .lookup(&[Datum::String(&absent)])
        .await
        .unwrap()
        .is_none());
}
