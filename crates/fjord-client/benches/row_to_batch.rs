//! The native writer's row path without the network: `user_behavior` rows as
//! [`Datum`]s (or as a row type writing typed fields) → [`RowBatchBuilder`] → `RecordBatch` → a complete ARROW log
//! batch (header, CRC, IPC body, compression), per compression; and the
//! row → builder step alone, and the bucket of each row for a table hashed
//! on `user_id` (BIGINT) or on `(behavior, user_id)`. Throughput is in records, so criterion's
//! "elem/s" inverts to ns per record.
//!
//! Time is the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not
//! wall time: the machine is 2 shared cores under other load, and CPU per
//! record is the figure the project compares.
//!
//! Run: `cargo bench -p fjord-client --bench row_to_batch`

use std::hint::black_box;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMillisecondType};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::collections::BTreeMap;

use fjord_client::bucket::{BucketAssigner, NoKeyAssigner};
use fjord_client::row::{Datum, FieldWriter, InternalRow, RowBatchBuilder, Timestamp};
use fjord_client::{TableInfo, TablePath};
use fjord_format::arrow_log::{ArrowCompression, ArrowLogEncoder};
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::fixtures::{user_behavior_batch, user_behavior_schema};
use fjord_format::log_batch::BatchHeader;
use fjord_format::schema::{TableDescriptor, TableDistribution};

/// Records per batch: about what a 2 MiB uncompressed batch holds for this
/// schema (the seed writer's batches held ~53k records); the same figure as
/// fjord-format's `arrow_encode` bench, so the two compare.
const ROWS: usize = 50_000;

/// CPU time consumed so far by the calling thread.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // Linux supports for the calling thread.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f` `iters` times and returns the thread CPU time it used.
fn cpu_time(iters: u64, mut f: impl FnMut()) -> Duration {
    let start = thread_cpu_time();
    for _ in 0..iters {
        f();
    }
    thread_cpu_time() - start
}

/// One `user_behavior` record as an application holds it.
struct Event {
    user_id: i64,
    item_id: i64,
    category_id: i64,
    behavior: String,
    ts_ms: i64,
}

fn events() -> Vec<Event> {
    let batch = user_behavior_batch(ROWS, 7);
    let long = |i: usize| {
        batch
            .column(i)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec()
    };
    let (user, item, category) = (long(0), long(1), long(2));
    let behavior = batch.column(3).as_string::<i32>();
    let ts = batch.column(4).as_primitive::<TimestampMillisecondType>();
    (0..ROWS)
        .map(|i| Event {
            user_id: user[i],
            item_id: item[i],
            category_id: category[i],
            behavior: behavior.value(i).to_owned(),
            ts_ms: ts.value(i),
        })
        .collect()
}

/// The `user_behavior` row of an event, built on the stack as a caller would.
fn row_of(e: &Event) -> [Datum<'_>; 5] {
    [
        Datum::BigInt(e.user_id),
        Datum::BigInt(e.item_id),
        Datum::BigInt(e.category_id),
        Datum::String(&e.behavior),
        Datum::Timestamp(Timestamp::from_millis(e.ts_ms)),
    ]
}

/// An event as a row type of its own: `write_fields` writes its fields with
/// `FieldWriter`'s typed methods, so no value is matched at run time.
impl InternalRow for Event {
    fn field_count(&self) -> usize {
        5
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        row_of(self)[pos]
    }

    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        fields.bigint(self.user_id);
        fields.bigint(self.item_id);
        fields.bigint(self.category_id);
        fields.string(&self.behavior);
        fields.timestamp(Timestamp::from_millis(self.ts_ms));
    }
}

/// `user_behavior` with 4 buckets hashed on `bucket_keys`.
fn hashed_table(bucket_keys: &[&str]) -> TableInfo {
    let descriptor = TableDescriptor::new(
        user_behavior_schema(),
        None,
        Vec::new(),
        Some(TableDistribution {
            bucket_count: Some(4),
            bucket_keys: bucket_keys.iter().map(|k| k.to_string()).collect(),
        }),
        BTreeMap::new(),
        BTreeMap::new(),
    )
    .expect("valid descriptor");
    TableInfo {
        path: TablePath::new("bench", "user_behavior"),
        table_id: 1,
        schema_id: 0,
        descriptor,
        earlier_schemas: Vec::new(),
    }
}

/// Appends every event as a row of datums (built on the stack per record,
/// as a caller would) and finishes the batch.
fn append_all(builder: &mut RowBatchBuilder, events: &[Event]) -> arrow_array::RecordBatch {
    for e in events {
        builder.append(&row_of(e)).expect("row matches the schema");
    }
    builder.finish().expect("batch")
}

/// Rows per `append_rows` call in the run benchmark.
const RUN_ROWS: usize = 256;

const COMPRESSIONS: [(&str, ArrowCompression); 3] = [
    ("none", ArrowCompression::None),
    ("lz4", ArrowCompression::Lz4Frame),
    ("zstd3", ArrowCompression::Zstd { level: 3 }),
];

fn bench(c: &mut Criterion) {
    let schema = to_arrow_schema(&user_behavior_schema());
    let events = events();
    let header = BatchHeader::append_only(0, 0);
    let mut builder = RowBatchBuilder::new(schema.clone()).expect("builder");

    let mut group = c.benchmark_group("user_behavior_rows");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(20);

    group.bench_function("row_to_builder", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                black_box(append_all(&mut builder, black_box(&events)));
            })
        })
    });

    // The same with each finished batch handed back (as a writer can once
    // its encoder is done), so its buffers are reused, not page-faulted in.
    group.bench_function("row_to_builder_recycled", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                let batch = append_all(&mut builder, black_box(&events));
                black_box(batch.num_rows());
                builder.recycle(batch);
            })
        })
    });

    // The events themselves as rows (a row type of their own, typed
    // fields); recycled.
    group.bench_function("typed_row_to_builder_recycled", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                for e in black_box(&events) {
                    builder.append(e).expect("row matches the schema");
                }
                let batch = builder.finish().expect("batch");
                black_box(batch.num_rows());
                builder.recycle(batch);
            })
        })
    });

    // Rows handed over in runs (`append_rows`), each run's rows built into a
    // reused vector as a caller batching its records would; recycled.
    group.bench_function("rows_in_runs_to_builder_recycled", |b| {
        let mut run: Vec<[Datum<'_>; 5]> = Vec::with_capacity(RUN_ROWS);
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                for chunk in black_box(&events).chunks(RUN_ROWS) {
                    run.clear();
                    run.extend(chunk.iter().map(row_of));
                    builder.append_rows(&run).expect("rows match the schema");
                }
                let batch = builder.finish().expect("batch");
                black_box(batch.num_rows());
                builder.recycle(batch);
            })
        })
    });

    for (name, compression) in COMPRESSIONS {
        let mut encoder = ArrowLogEncoder::new(schema.clone(), compression).expect("encoder");
        let mut out = Vec::with_capacity(4 << 20);
        group.bench_function(BenchmarkId::new("row_to_log_batch", name), |b| {
            b.iter_custom(|iters| {
                cpu_time(iters, || {
                    let batch = append_all(&mut builder, black_box(&events));
                    out.clear();
                    encoder
                        .encode(&batch, &header, None, &mut out)
                        .expect("encode");
                    black_box(out.len());
                })
            })
        });
    }
    for (name, keys) in [
        ("hash_bucket/user_id", &["user_id"][..]),
        ("hash_bucket/behavior_user_id", &["behavior", "user_id"][..]),
    ] {
        let mut assigner =
            BucketAssigner::new(&hashed_table(keys), NoKeyAssigner::Sticky).expect("assigner");
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                cpu_time(iters, || {
                    let mut sum = 0i64;
                    for e in black_box(&events) {
                        sum += i64::from(assigner.assign(&row_of(e)).expect("key"));
                    }
                    black_box(sum);
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
