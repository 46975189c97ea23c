//! The native client and the official Rust client (`fluss-rs` 1.0.0) on the
//! same primary-key tables of a real `fjord server`: what one writes, the
//! other reads.
//!
//! - A proptest over random keys of every key type (BOOLEAN, TINYINT,
//!   SMALLINT, INT, BIGINT, FLOAT, DOUBLE, STRING, CHAR(5), BYTES,
//!   BINARY(4), DECIMAL(10, 2) and (30, 5), DATE, TIME, TIMESTAMP(3), (6)
//!   and (9), TIMESTAMP_LTZ(3) and (9)): the native client's key bytes
//!   (`bucket::key::KeyEncoder::primary_key`) equal fluss-rs's
//!   `CompactedKeyEncoder`'s, for each type alone and all of them as one
//!   composite key.
//! - fluss-rs's bucketing function is private, so buckets are compared
//!   through the server, on keys drawn from the same strategy: rows the
//!   native upsert writer wrote are found by fluss-rs's lookuper (which
//!   asks the bucket fluss-rs computes for the key) and read back by
//!   fluss-rs's changelog scanner with their change types; rows fluss-rs's
//!   upsert writer wrote (and updated, and deleted) are found by the native
//!   lookuper, and a native ScanKv of each bucket holds exactly the keys
//!   whose native bucket (`bucket::fluss_bucket_of_key`) is that bucket.
//!   Both with the default bucket key (the whole primary key) and a bucket
//!   key of two of its columns.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use fjord_client::bucket::fluss_bucket_of_key;
use fjord_client::bucket::key::KeyEncoder as NativeKeyEncoder;
use fjord_client::row::{Datum as N, Timestamp};
use fjord_client::{ChangeType as NativeChange, FlussClient, KvBucket, LookupConfig, WriterConfig};
use fjord_format::schema::Schema as NativeSchema;
use fjord_format::types::DataType as NativeType;
use fluss::client::{FlussConnection, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::metadata::{
    DataField, DataType, DataTypes, RowType, Schema, TableDescriptor, TablePath,
};
use fluss::record::ChangeType;
use fluss::row::encode::KeyEncoderFactory;
use fluss::row::{DataGetters, Date, Datum, Decimal, GenericRow, Time, TimestampLtz, TimestampNtz};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as ProptestConfig, TestRng, TestRunner};
use support::FjordServer;
use tempfile::TempDir;

const DB: &str = "interop_kv_client";
/// Keys written by each client, per table.
const KEYS_PER_CLIENT: usize = 60;

/// One key value of one of the key types.
#[derive(Clone, Debug, PartialEq)]
enum K {
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    Str(String),
    Bytes(Vec<u8>),
    Dec(i128),
    Date(i32),
    Time(i32),
    Ts(i64, i32),
    Ltz(i64, i32),
}

/// A key column: its name, its type in both clients, and its values.
struct Column {
    name: &'static str,
    native: fn() -> NativeType,
    fluss: fn() -> DataType,
    values: fn() -> BoxedStrategy<K>,
}

/// A timestamp's parts, nanoseconds a multiple of `step` (1_000_000: none).
fn ts_parts(step: i32) -> impl Strategy<Value = (i64, i32)> {
    (
        -3_000_000_000_000i64..3_000_000_000_000,
        0..1_000_000 / step,
    )
        .prop_map(move |(m, n)| (m, n * step))
}

fn columns() -> Vec<Column> {
    vec![
        Column {
            name: "k_bool",
            native: NativeType::boolean,
            fluss: DataTypes::boolean,
            values: || any::<bool>().prop_map(K::Bool).boxed(),
        },
        Column {
            name: "k_i8",
            native: NativeType::tinyint,
            fluss: DataTypes::tinyint,
            values: || any::<i8>().prop_map(K::I8).boxed(),
        },
        Column {
            name: "k_i16",
            native: NativeType::smallint,
            fluss: DataTypes::smallint,
            values: || any::<i16>().prop_map(K::I16).boxed(),
        },
        Column {
            name: "k_i32",
            native: NativeType::int,
            fluss: DataTypes::int,
            values: || any::<i32>().prop_map(K::I32).boxed(),
        },
        Column {
            name: "k_i64",
            native: NativeType::bigint,
            fluss: DataTypes::bigint,
            values: || any::<i64>().prop_map(K::I64).boxed(),
        },
        Column {
            name: "k_f32",
            native: NativeType::float,
            fluss: DataTypes::float,
            values: || {
                any::<f32>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(K::F32)
                    .boxed()
            },
        },
        Column {
            name: "k_f64",
            native: NativeType::double,
            fluss: DataTypes::double,
            values: || {
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(K::F64)
                    .boxed()
            },
        },
        Column {
            name: "k_str",
            native: NativeType::string,
            fluss: DataTypes::string,
            values: || "\\PC{0,12}".prop_map(K::Str).boxed(),
        },
        Column {
            name: "k_char",
            native: || NativeType::char(5).unwrap(),
            fluss: || DataTypes::char(5),
            values: || "[a-z0-9]{1,5}".prop_map(K::Str).boxed(),
        },
        Column {
            name: "k_bytes",
            native: NativeType::bytes,
            fluss: DataTypes::bytes,
            values: || {
                prop::collection::vec(any::<u8>(), 0..24)
                    .prop_map(K::Bytes)
                    .boxed()
            },
        },
        Column {
            name: "k_bin",
            native: || NativeType::binary(4).unwrap(),
            fluss: || DataTypes::binary(4),
            values: || {
                prop::collection::vec(any::<u8>(), 4)
                    .prop_map(K::Bytes)
                    .boxed()
            },
        },
        Column {
            name: "k_dec10",
            native: || NativeType::decimal(10, 2).unwrap(),
            fluss: || DataTypes::decimal(10, 2),
            values: || {
                (-9_999_999_999i128..10_000_000_000)
                    .prop_map(K::Dec)
                    .boxed()
            },
        },
        Column {
            name: "k_dec30",
            native: || NativeType::decimal(30, 5).unwrap(),
            fluss: || DataTypes::decimal(30, 5),
            values: || {
                any::<i128>()
                    .prop_map(|v| K::Dec(v % 10i128.pow(30)))
                    .boxed()
            },
        },
        Column {
            name: "k_date",
            native: NativeType::date,
            fluss: DataTypes::date,
            values: || (-100_000..100_000).prop_map(K::Date).boxed(),
        },
        Column {
            name: "k_time",
            native: || NativeType::time(3).unwrap(),
            fluss: || DataTypes::time_with_precision(3),
            values: || (0..86_400_000).prop_map(K::Time).boxed(),
        },
        Column {
            name: "k_ts3",
            native: || NativeType::timestamp(3).unwrap(),
            fluss: || DataTypes::timestamp_with_precision(3),
            values: || ts_parts(1_000_000).prop_map(|(m, n)| K::Ts(m, n)).boxed(),
        },
        Column {
            name: "k_ts6",
            native: || NativeType::timestamp(6).unwrap(),
            fluss: || DataTypes::timestamp_with_precision(6),
            values: || ts_parts(1_000).prop_map(|(m, n)| K::Ts(m, n)).boxed(),
        },
        Column {
            name: "k_ts9",
            native: || NativeType::timestamp(9).unwrap(),
            fluss: || DataTypes::timestamp_with_precision(9),
            values: || ts_parts(1).prop_map(|(m, n)| K::Ts(m, n)).boxed(),
        },
        Column {
            name: "k_ltz3",
            native: || NativeType::timestamp_ltz(3).unwrap(),
            fluss: || DataTypes::timestamp_ltz_with_precision(3),
            values: || ts_parts(1_000_000).prop_map(|(m, n)| K::Ltz(m, n)).boxed(),
        },
        Column {
            name: "k_ltz9",
            native: || NativeType::timestamp_ltz(9).unwrap(),
            fluss: || DataTypes::timestamp_ltz_with_precision(9),
            values: || ts_parts(1).prop_map(|(m, n)| K::Ltz(m, n)).boxed(),
        },
    ]
}

/// One value per key column, in order.
fn key_strategy() -> Vec<BoxedStrategy<K>> {
    columns().iter().map(|c| (c.values)()).collect()
}

fn native(k: &K) -> N<'_> {
    match k {
        K::Bool(v) => N::Boolean(*v),
        K::I8(v) => N::TinyInt(*v),
        K::I16(v) => N::SmallInt(*v),
        K::I32(v) => N::Int(*v),
        K::I64(v) => N::BigInt(*v),
        K::F32(v) => N::Float(*v),
        K::F64(v) => N::Double(*v),
        K::Str(v) => N::String(v),
        K::Bytes(v) => N::Binary(v),
        K::Dec(v) => N::Decimal(*v),
        K::Date(v) => N::Date(*v),
        K::Time(v) => N::Time(*v),
        K::Ts(m, n) => N::Timestamp(Timestamp::new(*m, *n).unwrap()),
        K::Ltz(m, n) => N::TimestampLtz(Timestamp::new(*m, *n).unwrap()),
    }
}

fn fluss_datum(k: &K, ty: &DataType) -> Datum<'static> {
    match (k, ty) {
        (K::Bool(v), _) => Datum::Bool(*v),
        (K::I8(v), _) => Datum::Int8(*v),
        (K::I16(v), _) => Datum::Int16(*v),
        (K::I32(v), _) => Datum::Int32(*v),
        (K::I64(v), _) => Datum::Int64(*v),
        (K::F32(v), _) => Datum::from(*v),
        (K::F64(v), _) => Datum::from(*v),
        (K::Str(v), _) => Datum::from(v.clone()),
        (K::Bytes(v), _) => Datum::from(v.clone()),
        (K::Dec(v), DataType::Decimal(d)) => Datum::Decimal(
            Decimal::from_unscaled_bytes(&v.to_be_bytes(), d.precision(), d.scale()).unwrap(),
        ),
        (K::Date(v), _) => Datum::Date(Date::new(*v)),
        (K::Time(v), _) => Datum::Time(Time::new(*v)),
        (K::Ts(m, n), _) => Datum::TimestampNtz(TimestampNtz::from_millis_nanos(*m, *n).unwrap()),
        (K::Ltz(m, n), _) => Datum::TimestampLtz(TimestampLtz::from_millis_nanos(*m, *n).unwrap()),
        (k, ty) => panic!("no fluss-rs datum for {k:?} in {ty}"),
    }
}

/// The key columns `cols` of a table whose columns are `cols` plus `v STRING`.
fn native_schema(cols: &[Column]) -> NativeSchema {
    let mut builder = NativeSchema::builder();
    for c in cols {
        builder = builder.column(c.name, (c.native)().with_nullable(false));
    }
    builder
        .column("v", NativeType::string())
        .primary_key(cols.iter().map(|c| c.name))
        .build()
        .unwrap()
}

fn fluss_row_type(cols: &[Column]) -> RowType {
    RowType::new(
        cols.iter()
            .map(|c| DataField::new(c.name, (c.fluss)().as_non_nullable(), None))
            .collect(),
    )
}

fn native_key(cols: &[Column], keys: &[K]) -> Vec<u8> {
    let names: Vec<String> = cols.iter().map(|c| c.name.to_owned()).collect();
    let mut encoder = NativeKeyEncoder::primary_key(&native_schema(cols), &names).unwrap();
    let mut row: Vec<N<'_>> = keys.iter().map(native).collect();
    row.push(N::Null);
    encoder.encode_row(&row).unwrap().to_vec()
}

fn fluss_key(cols: &[Column], keys: &[K]) -> Vec<u8> {
    let row_type = fluss_row_type(cols);
    let names: Vec<String> = cols.iter().map(|c| c.name.to_owned()).collect();
    let mut encoder =
        KeyEncoderFactory::of_primary_key_encoder(&row_type, &names, &None, 2, false).unwrap();
    let row = GenericRow {
        values: keys
            .iter()
            .zip(cols)
            .map(|(k, c)| fluss_datum(k, &(c.fluss)()))
            .collect(),
    };
    encoder.encode_key(&row).unwrap().to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn key_bytes_equal_fluss_rss_for_every_key_type(keys in key_strategy()) {
        let cols = columns();
        for (i, k) in keys.iter().enumerate() {
            let one = &cols[i..=i];
            prop_assert_eq!(
                native_key(one, std::slice::from_ref(k)),
                fluss_key(one, std::slice::from_ref(k)),
                "{} = {:?}", cols[i].name, k
            );
        }
        prop_assert_eq!(native_key(&cols, &keys), fluss_key(&cols, &keys), "all {} key columns", cols.len());
    }
}

/// A fluss-rs descriptor of the key columns plus `v STRING`, bucketed by
/// `bucket_key` (none: the whole key).
fn fluss_descriptor(cols: &[Column], buckets: i32, bucket_key: &[&str]) -> TableDescriptor {
    let mut schema = Schema::builder();
    for c in cols {
        schema = schema.column(c.name, (c.fluss)().as_non_nullable());
    }
    let schema = schema
        .column("v", DataTypes::string())
        .primary_key(cols.iter().map(|c| c.name.to_owned()).collect::<Vec<_>>())
        .unwrap()
        .build()
        .unwrap();
    TableDescriptor::builder()
        .schema(schema)
        .distributed_by(
            Some(buckets),
            bucket_key.iter().map(|k| (*k).to_owned()).collect(),
        )
        .build()
        .unwrap()
}

/// `count` distinct key tuples drawn from the key strategy with `seed`.
fn draw_keys(count: usize, seed: u8) -> Vec<Vec<K>> {
    let mut runner = TestRunner::new_with_rng(
        ProptestConfig::default(),
        TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &[seed; 32]),
    );
    let strategy = key_strategy();
    let mut out: Vec<Vec<K>> = Vec::with_capacity(count);
    while out.len() < count {
        let keys = strategy.new_tree(&mut runner).unwrap().current();
        if !out.contains(&keys) {
            out.push(keys);
        }
    }
    out
}

/// The native row of `keys` with `v`.
fn native_row<'a>(keys: &'a [K], v: &'a str) -> Vec<N<'a>> {
    let mut row: Vec<N<'_>> = keys.iter().map(native).collect();
    row.push(N::String(v));
    row
}

fn fluss_row(cols: &[Column], keys: &[K], v: Option<&str>) -> GenericRow<'static> {
    let mut values: Vec<Datum<'static>> = keys
        .iter()
        .zip(cols)
        .map(|(k, c)| fluss_datum(k, &(c.fluss)()))
        .collect();
    if let Some(v) = v {
        values.push(Datum::from(v.to_owned()));
    }
    GenericRow { values }
}

/// The native key bytes of every key, for the bucket of each.
fn bucket_of(cols: &[Column], bucket_key: &[&str], keys: &[K], buckets: i32) -> i32 {
    let chosen: Vec<(&Column, &K)> = if bucket_key.is_empty() {
        cols.iter().zip(keys).collect()
    } else {
        bucket_key
            .iter()
            .map(|name| {
                let at = cols.iter().position(|c| c.name == *name).unwrap();
                (&cols[at], &keys[at])
            })
            .collect()
    };
    let names: Vec<String> = chosen.iter().map(|(c, _)| c.name.to_owned()).collect();
    let schema = native_schema(cols);
    let mut encoder = NativeKeyEncoder::new(&schema, &names).unwrap();
    let mut row: Vec<N<'_>> = keys.iter().map(native).collect();
    row.push(N::Null);
    fluss_bucket_of_key(encoder.encode_row(&row).unwrap(), buckets)
}

async fn step<T, E: std::fmt::Debug>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> T {
    match tokio::time::timeout(Duration::from_secs(120), fut).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("{what}: {e:?}"),
        Err(_) => panic!("{what}: no answer within 120 s"),
    }
}

/// One table, written by both clients and read by both; see the module doc.
async fn cross_check(server: &FjordServer, name: &str, bucket_key: &[&str], seed: u8) {
    const BUCKETS: i32 = 5;
    let cols = columns();
    let path = TablePath::new(DB, name);
    let connection = step(
        "fluss-rs connect",
        FlussConnection::new(Config {
            bootstrap_servers: server.bootstrap_servers(),
            lookup_batch_timeout_ms: 5,
            ..Config::default()
        }),
    )
    .await;
    let admin = connection.get_admin().unwrap();
    step("create database", admin.create_database(DB, None, true)).await;
    step(
        "create table",
        admin.create_table(&path, &fluss_descriptor(&cols, BUCKETS, bucket_key), false),
    )
    .await;
    let table = step("get table", connection.get_table(&path)).await;

    let keys = draw_keys(2 * KEYS_PER_CLIENT, seed);
    let (ours, theirs) = keys.split_at(KEYS_PER_CLIENT);
    let texts: Vec<String> = (0..keys.len()).map(|i| format!("v{i}")).collect();

    // Native upsert writer → fluss-rs lookuper and changelog scanner.
    let native_client = FlussClient::connect(&[server.bootstrap_servers()])
        .await
        .unwrap();
    let native_path = fjord_client::TablePath::new(DB, name);
    let mut writer = native_client
        .upsert_writer(&native_path, WriterConfig::default())
        .await
        .unwrap();
    for (i, k) in ours.iter().enumerate() {
        writer.upsert(&native_row(k, &texts[i])).await.unwrap();
    }
    step("native flush", writer.flush()).await;
    let mut lookuper = table.new_lookup().unwrap().create_lookuper().unwrap();
    for (i, k) in ours.iter().enumerate() {
        let result = step(
            "fluss-rs lookup",
            lookuper.lookup(&fluss_row(&cols, k, None)),
        )
        .await;
        let row = result.get_single_row().unwrap().unwrap_or_else(|| {
            panic!("{name}: fluss-rs finds no row for the native write of {k:?}")
        });
        assert_eq!(
            row.get_string(cols.len()).unwrap(),
            texts[i],
            "{name}: {k:?}"
        );
    }
    let scanner = table.new_scan().create_log_scanner().unwrap();
    let offsets: HashMap<i32, i64> = (0..BUCKETS).map(|b| (b, EARLIEST_OFFSET)).collect();
    step("subscribe", scanner.subscribe_buckets(&offsets)).await;
    let mut inserted = Vec::new();
    let mut polls = 0;
    while inserted.len() < ours.len() {
        polls += 1;
        assert!(
            polls < 400,
            "{name}: fluss-rs read {} of {} changelog records",
            inserted.len(),
            ours.len()
        );
        let records = step("poll", scanner.poll(Duration::from_millis(200))).await;
        for (bucket, records) in records.into_records_by_buckets() {
            for r in records {
                assert!(
                    matches!(r.change_type(), ChangeType::Insert),
                    "{name}: {:?}",
                    r.change_type()
                );
                let v = r.row().get_string(cols.len()).unwrap().to_owned();
                inserted.push((bucket.bucket_id(), v));
            }
        }
    }
    for (bucket, v) in &inserted {
        let i: usize = v[1..].parse().unwrap();
        assert_eq!(
            *bucket,
            bucket_of(&cols, bucket_key, &ours[i], BUCKETS),
            "{name}: {v}"
        );
    }

    // fluss-rs upsert writer → native lookuper, ScanKv and changelog.
    let fluss_writer = table.new_upsert().unwrap().create_writer().unwrap();
    let mut acks = Vec::new();
    for (i, k) in theirs.iter().enumerate() {
        let v = &texts[KEYS_PER_CLIENT + i];
        acks.push(fluss_writer.upsert(&fluss_row(&cols, k, Some(v))).unwrap());
    }
    // Updates and deletes of the native writes.
    for (i, k) in ours.iter().enumerate().take(10) {
        acks.push(
            fluss_writer
                .upsert(&fluss_row(&cols, k, Some(&format!("u{i}"))))
                .unwrap(),
        );
    }
    for k in &ours[10..20] {
        acks.push(fluss_writer.delete(&fluss_row(&cols, k, Some(""))).unwrap());
    }
    step("fluss-rs flush", fluss_writer.flush()).await;
    for ack in acks {
        step("fluss-rs write", ack).await;
    }
    let native_lookuper = native_client
        .lookuper(&native_path, LookupConfig::default())
        .await
        .unwrap();
    let expected: BTreeMap<usize, Option<String>> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let v = match i {
                0..10 => Some(format!("u{i}")),
                10..20 => None,
                _ => Some(text.clone()),
            };
            (i, v)
        })
        .collect();
    for (i, k) in keys.iter().enumerate() {
        let key: Vec<N<'_>> = k.iter().map(native).collect();
        let found = native_lookuper.lookup(&key).await.unwrap();
        let v = found.map(|row| match row.get(cols.len()) {
            N::String(v) => v.to_owned(),
            other => panic!("v {other:?}"),
        });
        assert_eq!(v, expected[&i], "{name}: native lookup of key {i} {k:?}");
    }
    let native_table = native_client.table_info(&native_path).await.unwrap();
    let mut scanned = 0;
    for bucket in 0..BUCKETS {
        let mut scanner = native_client
            .kv_scanner(&native_table, KvBucket::new(bucket), 1 << 20)
            .await
            .unwrap();
        while let Some(rows) = scanner.next_batch().await.unwrap() {
            for row in rows.iter() {
                let N::String(v) = row.get(cols.len()) else {
                    panic!("{name}: v {:?}", row.get(cols.len()))
                };
                let i: usize = v[1..].parse().unwrap();
                assert_eq!(
                    bucket,
                    bucket_of(&cols, bucket_key, &keys[i], BUCKETS),
                    "{name}: {v} of {:?}",
                    keys[i]
                );
                scanned += 1;
            }
        }
    }
    assert_eq!(
        scanned,
        keys.len() - 10,
        "{name}: every live row in some bucket"
    );

    // The changelog through the native scanner: its change types.
    let route = native_client.table_route(&native_table).await.unwrap();
    let mut log = fjord_client::LogScanner::new(
        native_table.clone(),
        route,
        fjord_client::ScannerConfig::default(),
    )
    .unwrap();
    for bucket in 0..BUCKETS {
        log.subscribe(bucket, 0).unwrap();
    }
    // Records per change type, by its byte.
    let mut changes = [0usize; 5];
    // +I for every key, -U/+U for the 10 updates, -D for the 10 deletes.
    let total = keys.len() + 30;
    let mut read = 0;
    let mut polls = 0;
    while read < total {
        polls += 1;
        assert!(
            polls < 400,
            "{name}: the native scanner read {read} of {total} records"
        );
        for batch in log.poll().await.unwrap() {
            for i in 0..batch.num_rows() {
                changes[batch.change_type(i) as usize] += 1;
                read += 1;
            }
        }
    }
    use NativeChange::*;
    let mut expected_changes = [0usize; 5];
    for (change, count) in [
        (Insert, keys.len()),
        (UpdateBefore, 10),
        (UpdateAfter, 10),
        (Delete, 10),
    ] {
        expected_changes[change as usize] = count;
    }
    assert_eq!(
        changes, expected_changes,
        "{name}: records of +A, +I, -U, +U, -D"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_reads_what_the_other_wrote_in_the_bucket_it_computes() {
    let dir = TempDir::new().unwrap();
    let server = FjordServer::start(dir.path());
    cross_check(&server, "whole_key_buckets", &[], 7).await;
    cross_check(&server, "two_column_buckets", &["k_i32", "k_str"], 11).await;
}
