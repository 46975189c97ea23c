//! The writer's hot path without the network: `user_behavior` rows → Arrow
//! column builders → a compressed ARROW log batch (header + CRC), per
//! compression. Throughput is in records, so criterion's "elem/s" inverts to
//! ns per record.
//!
//! Time is the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`),
//! not wall time: the machine is 2 shared cores under other load, and CPU
//! per record is the figure the project compares.
//!
//! Run: `cargo bench -p fjord-format --bench arrow_encode`

use std::hint::black_box;
use std::time::Duration;

use arrow_array::builder::{Int64Builder, StringBuilder, TimestampMillisecondBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fjord_format::arrow_log::{ArrowCompression, ArrowLogEncoder};
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::fixtures::{user_behavior_batch, user_behavior_schema};
use fjord_format::log_batch::BatchHeader;
use fjord_format::projection::ProjectionPlan;

/// Records per batch: about what a 2 MiB uncompressed batch holds for this
/// schema (the seed writer's batches held ~53k records).
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

/// One `user_behavior` row as a writer receives it.
struct Row {
    user_id: i64,
    item_id: i64,
    category_id: i64,
    behavior: &'static str,
    ts_ms: i64,
}

fn rows() -> Vec<Row> {
    let batch = user_behavior_batch(ROWS, 7);
    let col = |i: usize| {
        batch
            .column(i)
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .expect("int64")
            .values()
            .to_vec()
    };
    let (u, it, c) = (col(0), col(1), col(2));
    let behavior = batch
        .column(3)
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .expect("utf8");
    let ts = batch
        .column(4)
        .as_any()
        .downcast_ref::<arrow_array::TimestampMillisecondArray>()
        .expect("ts");
    (0..ROWS)
        .map(|i| Row {
            user_id: u[i],
            item_id: it[i],
            category_id: c[i],
            behavior: match behavior.value(i) {
                "pv" => "pv",
                "cart" => "cart",
                "fav" => "fav",
                _ => "buy",
            },
            ts_ms: ts.value(i),
        })
        .collect()
}

/// Appends rows straight into column builders and finishes a batch.
fn rows_to_batch(rows: &[Row], schema: &arrow_schema::SchemaRef) -> RecordBatch {
    let mut user = Int64Builder::with_capacity(rows.len());
    let mut item = Int64Builder::with_capacity(rows.len());
    let mut category = Int64Builder::with_capacity(rows.len());
    let mut behavior = StringBuilder::with_capacity(rows.len(), rows.len() * 3);
    let mut ts = TimestampMillisecondBuilder::with_capacity(rows.len());
    for r in rows {
        user.append_value(r.user_id);
        item.append_value(r.item_id);
        category.append_value(r.category_id);
        behavior.append_value(r.behavior);
        ts.append_value(r.ts_ms);
    }
    let columns: Vec<ArrayRef> = vec![
        std::sync::Arc::new(user.finish()),
        std::sync::Arc::new(item.finish()),
        std::sync::Arc::new(category.finish()),
        std::sync::Arc::new(behavior.finish()),
        std::sync::Arc::new(ts.finish()),
    ];
    RecordBatch::try_new(schema.clone(), columns).expect("schema matches")
}

const COMPRESSIONS: [(&str, ArrowCompression); 3] = [
    ("none", ArrowCompression::None),
    ("lz4", ArrowCompression::Lz4Frame),
    ("zstd3", ArrowCompression::Zstd { level: 3 }),
];

fn bench(c: &mut Criterion) {
    let schema = to_arrow_schema(&user_behavior_schema());
    let rows = rows();
    let header = BatchHeader::append_only(0, 0);

    let mut group = c.benchmark_group("user_behavior");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(20);

    group.bench_function("rows_to_arrow", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                black_box(rows_to_batch(black_box(&rows), &schema));
            })
        })
    });

    let batch = rows_to_batch(&rows, &schema);
    for (name, compression) in COMPRESSIONS {
        let mut encoder = ArrowLogEncoder::new(schema.clone(), compression).expect("encoder");
        let mut out = Vec::with_capacity(4 << 20);
        group.bench_with_input(
            BenchmarkId::new("arrow_to_log_batch", name),
            &batch,
            |b, batch| {
                b.iter_custom(|iters| {
                    cpu_time(iters, || {
                        out.clear();
                        encoder
                            .encode(batch, &header, None, &mut out)
                            .expect("encode");
                        black_box(out.len());
                    })
                })
            },
        );
        out.clear();
        encoder
            .encode(&batch, &header, None, &mut out)
            .expect("encode");
        eprintln!(
            "{name}: {} bytes per batch of {ROWS} records ({:.1} bytes/record)",
            out.len(),
            out.len() as f64 / ROWS as f64
        );
        group.bench_function(BenchmarkId::new("rows_to_log_batch", name), |b| {
            b.iter_custom(|iters| {
                cpu_time(iters, || {
                    let batch = rows_to_batch(black_box(&rows), &schema);
                    out.clear();
                    encoder
                        .encode(&batch, &header, None, &mut out)
                        .expect("encode");
                    black_box(out.len());
                })
            })
        });
    }
    group.finish();

    // The server's fetch path with projection pushdown: no decoding, so the
    // cost is per batch (metadata rewrite, copy of the kept bytes, CRC).
    let mut group = c.benchmark_group("projection");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(20);
    let table = user_behavior_schema();
    for (name, compression) in COMPRESSIONS {
        let mut encoder = ArrowLogEncoder::new(schema.clone(), compression).expect("encoder");
        let mut stored = Vec::new();
        encoder
            .encode(&batch, &header, None, &mut stored)
            .expect("encode");
        for columns in [&[0usize][..], &[0, 3][..]] {
            let plan = ProjectionPlan::new(&table, 0, columns).expect("plan");
            let mut out = Vec::with_capacity(stored.len());
            group.bench_function(
                BenchmarkId::new(format!("{name}/cols{columns:?}"), ROWS),
                |b| {
                    b.iter_custom(|iters| {
                        cpu_time(iters, || {
                            out.clear();
                            black_box(
                                plan.project(&stored, &mut out, usize::MAX)
                                    .expect("project"),
                            );
                        })
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
