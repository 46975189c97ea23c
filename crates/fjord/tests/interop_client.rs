//! Fjord's native client side by side with the official Rust client,
//! `fluss-rs` 1.0.0, against the real `fjord server` binary.
//!
//! - Bucket keys: the native key encoder produces byte for byte what
//!   fluss-rs's bucket-key encoder produces, for every scalar type and for
//!   multi-column keys; rows fluss-rs writes to tables with bucket keys sit
//!   in exactly the bucket the native `BucketAssigner` computes for them.
//! - Rows: every supported type written by fluss-rs (from batches made by the
//!   native `RowBatchBuilder`) reads back unchanged through the native
//!   scanner, and every type written row by row through the native
//!   `AppendWriter` reads back unchanged through both the native scanner and
//!   fluss-rs's scanner. The native writer puts hashed rows where fluss-rs does.

mod support;

use arrow::array::{Array, RecordBatch};
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use fjord_client::bucket::key::KeyEncoder;
use fjord_client::bucket::{BatchBuckets, BucketAssigner, NoKeyAssigner};
use fjord_client::row::{Datum, RowBatchBuilder, Timestamp};
use fjord_client::{
    Admin, FlussClient, LogScanner, ScanBatch, ScannerConfig, ServerConnection, TableRoute,
    WriterConfig,
};
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::schema::Schema as FjordSchema;
use fjord_format::types::DataType as FjordType;
use fluss::client::{FlussConnection, FlussTable, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::metadata::{
    DataType as FlussType, DataTypes, Schema as FlussSchema, TableDescriptor, TablePath,
};
use fluss::row::encode::KeyEncoderFactory;
use fluss::row::{
    Date as FlussDate, Decimal as FlussDecimal, GenericRow as FlussRow, Time as FlussTime,
    TimestampLtz as FlussLtz, TimestampNtz as FlussNtz,
};
use support::{FjordServer, STEP_TIMEOUT};

/// How long one fluss-rs `poll` waits for data before the loop checks its deadline.
const POLL_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Buckets of the hashed test tables: prime and more than a few, so a wrong
/// hash or a wrong modulus moves most keys.
const BUCKETS: i32 = 7;
/// Rows compared per key column in the encoder test.
const KEY_ROWS: usize = 300;

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// One of a few edge values (a fifth of the time) or a random one.
    fn pick<T: Copy>(&mut self, edges: &[T], random: impl FnOnce(u64) -> T) -> T {
        let r = self.next();
        if r.is_multiple_of(5) {
            edges[(r / 5) as usize % edges.len()]
        } else {
            random(self.next())
        }
    }
}

/// An owned value of one column, convertible to both clients' datums.
#[derive(Clone, Debug)]
enum Value {
    Null,
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    Str(String),
    Bytes(Vec<u8>),
    Decimal {
        unscaled: i128,
        precision: u32,
        scale: u32,
    },
    Date(i32),
    Time(i32),
    Ts {
        millis: i64,
        nanos: i32,
    },
    Ltz {
        millis: i64,
        nanos: i32,
    },
}

impl Value {
    fn fjord(&self) -> Datum<'_> {
        let stamp = |millis: i64, nanos: i32| Timestamp::new(millis, nanos).expect("nanos < 1e6");
        match self {
            Value::Null => Datum::Null,
            Value::Bool(v) => Datum::Boolean(*v),
            Value::I8(v) => Datum::TinyInt(*v),
            Value::I16(v) => Datum::SmallInt(*v),
            Value::I32(v) => Datum::Int(*v),
            Value::I64(v) => Datum::BigInt(*v),
            Value::F32(v) => Datum::Float(*v),
            Value::F64(v) => Datum::Double(*v),
            Value::Str(v) => Datum::String(v),
            Value::Bytes(v) => Datum::Binary(v),
            Value::Decimal { unscaled, .. } => Datum::Decimal(*unscaled),
            Value::Date(v) => Datum::Date(*v),
            Value::Time(v) => Datum::Time(*v),
            Value::Ts { millis, nanos } => Datum::Timestamp(stamp(*millis, *nanos)),
            Value::Ltz { millis, nanos } => Datum::TimestampLtz(stamp(*millis, *nanos)),
        }
    }

    fn set_fluss<'a>(&'a self, row: &mut FlussRow<'a>, pos: usize) {
        match self {
            Value::Null => row.set_field(pos, None::<&()>),
            Value::Bool(v) => row.set_field(pos, *v),
            Value::I8(v) => row.set_field(pos, *v),
            Value::I16(v) => row.set_field(pos, *v),
            Value::I32(v) => row.set_field(pos, *v),
            Value::I64(v) => row.set_field(pos, *v),
            Value::F32(v) => row.set_field(pos, *v),
            Value::F64(v) => row.set_field(pos, *v),
            Value::Str(v) => row.set_field(pos, v.as_str()),
            Value::Bytes(v) => row.set_field(pos, v.as_slice()),
            Value::Decimal {
                unscaled,
                precision,
                scale,
            } => {
                let decimal = match i64::try_from(*unscaled) {
                    Ok(small) if *precision <= 18 => {
                        FlussDecimal::from_unscaled_long(small, *precision, *scale)
                    }
                    _ => FlussDecimal::from_unscaled_bytes(
                        &unscaled.to_be_bytes(),
                        *precision,
                        *scale,
                    ),
                };
                row.set_field(pos, decimal.expect("decimal within its precision"));
            }
            Value::Date(v) => row.set_field(pos, FlussDate::new(*v)),
            Value::Time(v) => row.set_field(pos, FlussTime::new(*v)),
            Value::Ts { millis, nanos } => row.set_field(
                pos,
                FlussNtz::from_millis_nanos(*millis, *nanos).expect("valid timestamp"),
            ),
            Value::Ltz { millis, nanos } => row.set_field(
                pos,
                FlussLtz::from_millis_nanos(*millis, *nanos).expect("valid timestamp"),
            ),
        }
    }
}

/// One test column: its name, its type in both clients, and how its values
/// are generated (always representable at the column's precision).
struct Column {
    name: &'static str,
    fjord: FjordType,
    fluss: FlussType,
    generate: fn(&mut Rng) -> Value,
}

fn text(rng: &mut Rng) -> String {
    const WORDS: [&str; 6] = ["", "pv", "cart", "Fjörð-ß✓", "user-12345", "x"];
    let r = rng.next();
    let word = WORDS[(r % WORDS.len() as u64) as usize];
    if r.is_multiple_of(3) {
        format!("{word}{}", r >> 40)
    } else {
        word.to_owned()
    }
}

fn timestamp_parts(rng: &mut Rng, precision: u32) -> (i64, i32) {
    let millis = rng.pick(&[0, -1, 1_700_000_000_123, -86_400_000], |r| {
        (r % 4_000_000_000_000) as i64 - 1_000_000_000_000
    });
    let nanos = (rng.next() % 1_000_000) as i32;
    match precision {
        0 => (millis - millis.rem_euclid(1_000), 0),
        1..=3 => (millis, 0),
        4..=6 => (millis, nanos - nanos % 1_000),
        _ => (millis, nanos),
    }
}

fn decimal(rng: &mut Rng, precision: u32, scale: u32) -> Value {
    let bound = 10i128.pow(precision);
    let unscaled = rng.pick(&[0, 1, -1, bound - 1, 1 - bound], |r| {
        let wide = (i128::from(r) << 64) | i128::from(r.rotate_left(17));
        wide % bound
    });
    Value::Decimal {
        unscaled,
        precision,
        scale,
    }
}

/// Every scalar type both clients support, with values of full range.
fn all_columns() -> Vec<Column> {
    vec![
        Column {
            name: "c_bool",
            fjord: FjordType::boolean(),
            fluss: DataTypes::boolean(),
            generate: |r| Value::Bool(r.next() % 2 == 0),
        },
        Column {
            name: "c_tiny",
            fjord: FjordType::tinyint(),
            fluss: DataTypes::tinyint(),
            generate: |r| Value::I8(r.pick(&[i8::MIN, -1, 0, i8::MAX], |x| x as i8)),
        },
        Column {
            name: "c_small",
            fjord: FjordType::smallint(),
            fluss: DataTypes::smallint(),
            generate: |r| Value::I16(r.pick(&[i16::MIN, -1, 0, i16::MAX], |x| x as i16)),
        },
        Column {
            name: "c_int",
            fjord: FjordType::int(),
            fluss: DataTypes::int(),
            generate: |r| Value::I32(r.pick(&[i32::MIN, -1, 0, 127, 128, i32::MAX], |x| x as i32)),
        },
        Column {
            name: "c_bigint",
            fjord: FjordType::bigint(),
            fluss: DataTypes::bigint(),
            generate: |r| Value::I64(r.pick(&[i64::MIN, -1, 0, i64::MAX], |x| x as i64)),
        },
        Column {
            name: "c_float",
            fjord: FjordType::float(),
            fluss: DataTypes::float(),
            generate: |r| {
                Value::F32(r.pick(&[0.0, -0.0, 1.5, f32::MAX], |x| x as i32 as f32 / 7.0))
            },
        },
        Column {
            name: "c_double",
            fjord: FjordType::double(),
            fluss: DataTypes::double(),
            generate: |r| Value::F64(r.pick(&[0.0, -2.5, f64::MIN], |x| x as i64 as f64 / 13.0)),
        },
        Column {
            name: "c_string",
            fjord: FjordType::string(),
            fluss: DataTypes::string(),
            generate: |r| Value::Str(text(r)),
        },
        Column {
            name: "c_char",
            fjord: FjordType::char(3).expect("valid"),
            fluss: DataTypes::char(3),
            generate: |r| Value::Str(["abc", "xyz", "pv "][(r.next() % 3) as usize].to_owned()),
        },
        Column {
            name: "c_bytes",
            fjord: FjordType::bytes(),
            fluss: DataTypes::bytes(),
            generate: |r| {
                let x = r.next();
                Value::Bytes(x.to_le_bytes()[..(x % 9) as usize].to_vec())
            },
        },
        Column {
            name: "c_binary",
            fjord: FjordType::binary(4).expect("valid"),
            fluss: DataTypes::binary(4),
            generate: |r| Value::Bytes(r.next().to_le_bytes()[..4].to_vec()),
        },
        Column {
            name: "c_dec_small",
            fjord: FjordType::decimal(10, 2).expect("valid"),
            fluss: DataTypes::decimal(10, 2),
            generate: |r| decimal(r, 10, 2),
        },
        Column {
            name: "c_dec_large",
            fjord: FjordType::decimal(28, 4).expect("valid"),
            fluss: DataTypes::decimal(28, 4),
            generate: |r| decimal(r, 28, 4),
        },
        Column {
            name: "c_date",
            fjord: FjordType::date(),
            fluss: DataTypes::date(),
            generate: |r| Value::Date(r.pick(&[0, -1, 19_000], |x| (x % 100_000) as i32 - 50_000)),
        },
        Column {
            name: "c_time",
            fjord: FjordType::time(3).expect("valid"),
            fluss: DataTypes::time_with_precision(3),
            generate: |r| Value::Time(r.pick(&[0, 86_399_999], |x| (x % 86_400_000) as i32)),
        },
        Column {
            name: "c_ts3",
            fjord: FjordType::timestamp(3).expect("valid"),
            fluss: DataTypes::timestamp_with_precision(3),
            generate: |r| {
                let (millis, nanos) = timestamp_parts(r, 3);
                Value::Ts { millis, nanos }
            },
        },
        Column {
            name: "c_ts6",
            fjord: FjordType::timestamp(6).expect("valid"),
            fluss: DataTypes::timestamp_with_precision(6),
            generate: |r| {
                let (millis, nanos) = timestamp_parts(r, 6);
                Value::Ts { millis, nanos }
            },
        },
        Column {
            name: "c_ltz3",
            fjord: FjordType::timestamp_ltz(3).expect("valid"),
            fluss: DataTypes::timestamp_ltz_with_precision(3),
            generate: |r| {
                let (millis, nanos) = timestamp_parts(r, 3);
                Value::Ltz { millis, nanos }
            },
        },
        Column {
            name: "c_ltz9",
            fjord: FjordType::timestamp_ltz(9).expect("valid"),
            fluss: DataTypes::timestamp_ltz_with_precision(9),
            generate: |r| {
                let (millis, nanos) = timestamp_parts(r, 9);
                Value::Ltz { millis, nanos }
            },
        },
    ]
}

fn fjord_schema(columns: &[Column]) -> FjordSchema {
    let mut schema = FjordSchema::builder();
    for column in columns {
        schema = schema.column(column.name, column.fjord.clone());
    }
    schema.build().expect("valid fjord schema")
}

fn fluss_schema(columns: &[Column]) -> FlussSchema {
    let mut schema = FlussSchema::builder();
    for column in columns {
        schema = schema.column(column.name, column.fluss.clone());
    }
    schema.build().expect("valid fluss schema")
}

/// `count` rows of generated values for `columns`, from `seed`.
fn generate_rows(columns: &[Column], count: usize, seed: u64) -> Vec<Vec<Value>> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..count)
        .map(|_| columns.iter().map(|c| (c.generate)(&mut rng)).collect())
        .collect()
}

#[test]
fn bucket_key_bytes_equal_fluss_rs_for_every_scalar_type_and_multi_column_keys() {
    let columns = all_columns();
    let fjord = fjord_schema(&columns);
    let fluss = fluss_schema(&columns);
    let rows = generate_rows(&columns, KEY_ROWS, 11);

    let mut keys: Vec<Vec<String>> = columns.iter().map(|c| vec![c.name.to_owned()]).collect();
    keys.push(vec!["c_string".into(), "c_int".into()]);
    keys.push(vec!["c_ts6".into(), "c_dec_large".into(), "c_date".into()]);
    keys.push(columns.iter().rev().map(|c| c.name.to_owned()).collect());

    for key in &keys {
        let mut ours = KeyEncoder::new(&fjord, key).expect("native key encoder");
        let mut theirs = KeyEncoderFactory::of_bucket_key_encoder(fluss.row_type(), key, &None)
            .expect("fluss-rs key encoder");
        for (i, values) in rows.iter().enumerate() {
            let datums: Vec<Datum<'_>> = values.iter().map(Value::fjord).collect();
            let mut fluss_row = FlussRow::new(values.len());
            for (pos, value) in values.iter().enumerate() {
                value.set_fluss(&mut fluss_row, pos);
            }
            let expected = theirs
                .encode_key(&fluss_row)
                .expect("fluss-rs encodes the key");
            let actual = ours
                .encode_row(&datums[..])
                .expect("native encodes the key");
            assert_eq!(
                actual,
                &expected[..],
                "key {key:?}, row {i}: {:?}",
                key.iter()
                    .map(|k| &values[fjord.column_index(k).expect("key column")])
                    .collect::<Vec<_>>()
            );
        }
    }
}

/// Opens a fluss-rs connection to `server` with bounded writer retries.
async fn fluss_connect(server: &FjordServer) -> FlussConnection {
    let config = Config {
        bootstrap_servers: server.bootstrap_servers(),
        writer_retries: 5,
        ..Config::default()
    };
    server
        .step("fluss-rs connect", FlussConnection::new(config))
        .await
}

/// The rows as an Arrow batch of `schema`, built by the native row builder.
fn to_batch(schema: &FjordSchema, rows: &[Vec<Value>]) -> RecordBatch {
    let mut builder = RowBatchBuilder::new(to_arrow_schema(schema)).expect("row builder");
    for values in rows {
        let datums: Vec<Datum<'_>> = values.iter().map(Value::fjord).collect();
        builder.append(&datums[..]).expect("row matches the schema");
    }
    builder.finish().expect("batch")
}

/// Writes `rows` with fluss-rs: most as one Arrow batch, the last
/// `row_appends` one by one through its row API; waits for every ack.
async fn fluss_write(
    server: &FjordServer,
    table: &FlussTable<'_>,
    schema: &FjordSchema,
    rows: &[Vec<Value>],
    row_appends: usize,
) {
    let writer = table
        .new_append()
        .expect("new_append")
        .create_writer()
        .expect("append writer");
    let split = rows.len() - row_appends;
    let mut acks = vec![writer
        .append_arrow_batch(to_batch(schema, &rows[..split]))
        .expect("fluss-rs accepts the native builder's batch")];
    for values in &rows[split..] {
        let mut row = FlussRow::new(values.len());
        for (pos, value) in values.iter().enumerate() {
            value.set_fluss(&mut row, pos);
        }
        acks.push(writer.append(&row).expect("fluss-rs row append"));
    }
    server.step("fluss-rs flush", writer.flush()).await;
    for ack in acks {
        server.step("fluss-rs acknowledgement", ack).await;
    }
}

/// Writes `rows` row by row through the native writer's row API, then
/// flushes (every row acknowledged, or the first error).
async fn native_write(server: &FjordServer, db: &str, table: &str, rows: &[Vec<Value>]) {
    let client = FlussClient::connect(&[server.addr().to_string()])
        .await
        .expect("native client connects");
    let mut writer = client
        .append_writer(
            &fjord_client::TablePath::new(db, table),
            WriterConfig::default(),
        )
        .await
        .expect("native append writer");
    let mut datums: Vec<Datum<'_>> = Vec::new();
    for values in rows {
        datums.clear();
        datums.extend(values.iter().map(Value::fjord));
        writer.append(&datums[..]).await.expect("native append");
    }
    writer
        .flush()
        .await
        .expect("native flush: every row acknowledged");
}

/// Native handles on one table: its info and leader route.
struct NativeTable {
    info: fjord_client::TableInfo,
    route: TableRoute,
}

async fn native_table(server: &FjordServer, db: &str, table: &str) -> NativeTable {
    let connection = ServerConnection::connect(&server.addr().to_string())
        .await
        .expect("native connect");
    let admin = Admin::new(connection.clone());
    let info = admin
        .table_info(&fjord_client::TablePath::new(db, table))
        .await
        .expect("native table info");
    let route = TableRoute::resolve(&connection, &info)
        .await
        .expect("native route");
    NativeTable { info, route }
}

/// Reads every bucket from offset 0 with the native scanner until `rows`
/// rows arrived (bounded by [`STEP_TIMEOUT`]).
async fn native_scan_all(server: &FjordServer, table: &NativeTable, rows: usize) -> Vec<ScanBatch> {
    let mut scanner = LogScanner::new(
        table.info.clone(),
        table.route.clone(),
        ScannerConfig::default(),
    )
    .expect("native scanner");
    for bucket in 0..table.info.bucket_count() {
        scanner.subscribe(bucket, 0).expect("subscribe");
    }
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let mut batches = Vec::new();
    let mut seen = 0;
    while seen < rows {
        assert!(
            tokio::time::Instant::now() < deadline,
            "native scan returned {seen} of {rows} rows\n--- server stderr ---\n{}",
            server.stderr_log()
        );
        for batch in scanner.poll().await.expect("native poll") {
            seen += batch.records.num_rows();
            batches.push(batch);
        }
    }
    assert_eq!(
        seen, rows,
        "native scan returned more rows than were written"
    );
    batches
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_fluss_rs_writes_sit_in_the_bucket_the_native_assigner_picks() {
    let dir = tempfile::tempdir().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let db = "interop_buckets";
    let conn = fluss_connect(&server).await;
    let admin = conn.get_admin().expect("admin");
    server
        .step("create database", admin.create_database(db, None, false))
        .await;

    let columns: Vec<Column> = all_columns()
        .into_iter()
        .filter(|c| {
            [
                "c_int",
                "c_bigint",
                "c_string",
                "c_dec_large",
                "c_ts6",
                "c_date",
            ]
            .contains(&c.name)
        })
        .collect();
    let fjord = fjord_schema(&columns);
    let key_sets: [&[&str]; 5] = [
        &["c_int"],
        &["c_bigint"],
        &["c_string"],
        &["c_string", "c_int"],
        &["c_dec_large", "c_ts6", "c_date"],
    ];
    let rows = generate_rows(&columns, 400, 5);
    for (t, keys) in key_sets.iter().enumerate() {
        let name = format!("hashed_{t}");
        let path = TablePath::new(db, &name);
        let descriptor = TableDescriptor::builder()
            .schema(fluss_schema(&columns))
            .distributed_by(Some(BUCKETS), keys.iter().map(|k| k.to_string()).collect())
            .build()
            .expect("descriptor");
        server
            .step(
                "create table",
                admin.create_table(&path, &descriptor, false),
            )
            .await;
        let table = server.step("get table", conn.get_table(&path)).await;
        fluss_write(&server, &table, &fjord, &rows, 40).await;
        // The same rows again through the native writer, which routes by
        // the native assigner: both copies of a key must share a bucket.
        native_write(&server, db, &name, &rows).await;

        let native = native_table(&server, db, &name).await;
        let mut assigner =
            BucketAssigner::new(&native.info, NoKeyAssigner::Sticky).expect("assigner");
        assert!(assigner.needs_row(), "{keys:?} hashes");
        let mut used = [0usize; BUCKETS as usize];
        for batch in native_scan_all(&server, &native, 2 * rows.len()).await {
            match assigner.assign_batch(&batch.records).expect("assign") {
                BatchBuckets::Single(bucket) => assert_eq!(
                    bucket, batch.bucket,
                    "key {keys:?}: a batch in bucket {} hashes to {bucket}",
                    batch.bucket
                ),
                BatchBuckets::PerRow(buckets) => panic!(
                    "key {keys:?}: bucket {} holds rows of buckets {buckets:?}",
                    batch.bucket
                ),
            }
            used[batch.bucket as usize] += batch.records.num_rows();
        }
        assert!(
            used.iter().filter(|&&n| n > 0).count() > 1,
            "key {keys:?}: all rows in one bucket ({used:?}); the test would not catch a wrong hash"
        );
    }
}

/// Sorts `batch` by its column named `id`.
fn sorted_by_id(batch: &RecordBatch) -> RecordBatch {
    let id = batch.column_by_name("id").expect("id column");
    let order = sort_to_indices(id, None, None).expect("sortable id");
    take_record_batch(batch, &order).expect("take in id order")
}

/// Asserts equal columns, naming the first differing column and row.
fn assert_same_rows(actual: &RecordBatch, expected: &RecordBatch) {
    assert_eq!(actual.schema(), expected.schema(), "schemas differ");
    assert_eq!(actual.num_rows(), expected.num_rows(), "row counts differ");
    for (i, field) in expected.schema().fields().iter().enumerate() {
        let (a, e) = (actual.column(i), expected.column(i));
        if a.as_ref() != e.as_ref() {
            let row = (0..e.len())
                .find(|&r| a.slice(r, 1).as_ref() != e.slice(r, 1).as_ref())
                .unwrap_or(0);
            panic!(
                "column {} differs first at row {row}: read {:?}, written {:?}",
                field.name(),
                a.slice(row, 1),
                e.slice(row, 1)
            );
        }
    }
}

/// The all-types table: `id` first (to sort by), then every scalar column,
/// each with nulls in some rows.
fn typed_rows(count: usize) -> (Vec<Column>, Vec<Vec<Value>>) {
    let mut columns = vec![Column {
        name: "id",
        fjord: FjordType::bigint().not_null(),
        fluss: DataTypes::bigint().as_non_nullable(),
        generate: |_| Value::Null,
    }];
    columns.extend(all_columns());
    let mut rows = generate_rows(&columns, count, 3);
    for (i, values) in rows.iter_mut().enumerate() {
        values[0] = Value::I64(i as i64);
        // A different column is NULL in each row (never `id`).
        let null_at = 1 + i % (values.len() - 1);
        if i % 3 == 0 {
            values[null_at] = Value::Null;
        }
    }
    (columns, rows)
}

/// Creates `<db>.all_types` (the [`typed_rows`] columns, 3 buckets) through
/// fluss-rs; returns its path and `count` rows for it (not yet written).
async fn create_all_types_table(
    server: &FjordServer,
    conn: &FlussConnection,
    db: &str,
    count: usize,
) -> (TablePath, FjordSchema, Vec<Vec<Value>>) {
    let admin = conn.get_admin().expect("admin");
    server
        .step("create database", admin.create_database(db, None, false))
        .await;
    let (columns, rows) = typed_rows(count);
    let path = TablePath::new(db, ALL_TYPES);
    let descriptor = TableDescriptor::builder()
        .schema(fluss_schema(&columns))
        .distributed_by(Some(3), Vec::new())
        .build()
        .expect("descriptor");
    server
        .step(
            "create table",
            admin.create_table(&path, &descriptor, false),
        )
        .await;
    (path, fjord_schema(&columns), rows)
}

/// Name of the all-types table in each database that has one.
const ALL_TYPES: &str = "all_types";

/// Every row of `<db>.all_types` read with the native scanner, as one batch
/// sorted by `id`.
async fn native_read_sorted(
    server: &FjordServer,
    db: &str,
    schema: &FjordSchema,
    rows: usize,
) -> RecordBatch {
    let native = native_table(server, db, ALL_TYPES).await;
    let read: Vec<RecordBatch> = native_scan_all(server, &native, rows)
        .await
        .into_iter()
        .map(|b| b.records)
        .collect();
    let all = concat_batches(&to_arrow_schema(schema), &read).expect("one schema");
    sorted_by_id(&all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_fluss_rs_writes_reads_back_through_the_native_scanner() {
    let dir = tempfile::tempdir().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let db = "interop_types";
    let conn = fluss_connect(&server).await;
    let (path, fjord, rows) = create_all_types_table(&server, &conn, db, 1_000).await;
    let table = server.step("get table", conn.get_table(&path)).await;
    fluss_write(&server, &table, &fjord, &rows, 25).await;

    let read = native_read_sorted(&server, db, &fjord, rows.len()).await;
    assert_same_rows(&read, &to_batch(&fjord, &rows));
}

/// Reads every bucket from the earliest offset with fluss-rs's scanner until
/// `rows` rows arrived (bounded by [`STEP_TIMEOUT`]).
async fn fluss_scan_all(
    server: &FjordServer,
    table: &FlussTable<'_>,
    buckets: i32,
    rows: usize,
) -> Vec<RecordBatch> {
    let scanner = table
        .new_scan()
        .create_record_batch_log_scanner()
        .expect("fluss-rs scanner");
    let starts = (0..buckets).map(|b| (b, EARLIEST_OFFSET)).collect();
    server
        .step("fluss-rs subscribe", scanner.subscribe_buckets(&starts))
        .await;
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let mut batches = Vec::new();
    let mut seen = 0;
    while seen < rows {
        assert!(
            tokio::time::Instant::now() < deadline,
            "fluss-rs scan returned {seen} of {rows} rows\n--- server stderr ---\n{}",
            server.stderr_log()
        );
        for batch in server.step("fluss-rs poll", scanner.poll(POLL_WAIT)).await {
            seen += batch.num_records();
            batches.push(batch.batch().clone());
        }
    }
    assert_eq!(
        seen, rows,
        "fluss-rs scan returned more rows than were written"
    );
    batches
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_the_native_writer_appends_as_rows_reads_back_through_both_scanners() {
    let dir = tempfile::tempdir().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let db = "interop_native_rows";
    let conn = fluss_connect(&server).await;
    let (path, fjord, rows) = create_all_types_table(&server, &conn, db, 2_000).await;
    native_write(&server, db, ALL_TYPES, &rows).await;
    let expected = to_batch(&fjord, &rows);

    let read = native_read_sorted(&server, db, &fjord, rows.len()).await;
    assert_same_rows(&read, &expected);

    let table = server.step("get table", conn.get_table(&path)).await;
    let read = fluss_scan_all(&server, &table, 3, rows.len()).await;
    let all = concat_batches(read[0].schema_ref(), &read).expect("one schema");
    assert_same_rows(&sorted_by_id(&all), &expected);
}
