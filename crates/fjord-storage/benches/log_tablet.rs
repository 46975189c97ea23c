//! Criterion benchmarks of the log tablet over the real file system:
//! append of 1 MiB and 16 KiB batches with interval flushing and with fsync
//! (group commit, one appender), and sequential reads from the page cache.
//!
//! Run: `cargo bench -p fjord-storage --bench log_tablet`
//! Files go to `$FJORD_BENCH_DIR` (default: the system temp dir); compare with
//! `dd if=/dev/zero of=$FJORD_BENCH_DIR/dd bs=1M count=1024 conv=fdatasync`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fjord_format::log_batch::{write_batch, BatchHeader};
use fjord_storage::{Durability, LogConfig, LogTablet, OsFs};

/// Cap on bench data on disk: retention keeps the log below this.
const RETAINED_BYTES_MAX: u64 = 1 << 30;

fn bench_dir() -> PathBuf {
    std::env::var_os("FJORD_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from)
}

fn one_batch(size: usize) -> Vec<u8> {
    let body: Vec<u8> = (0..size - 48).map(|i| (i * 31) as u8).collect();
    let mut out = Vec::with_capacity(size);
    write_batch(&mut out, &BatchHeader::append_only(1, 1000), &[], &body).expect("valid");
    out
}

fn config(durability: Durability) -> LogConfig {
    LogConfig {
        segment_bytes_max: 256 << 20,
        durability,
        retention_ms: None,
        retention_bytes: Some(RETAINED_BYTES_MAX),
        ..LogConfig::default()
    }
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    let modes = [
        (
            "interval_1s",
            Durability::Interval {
                messages: u64::MAX,
                interval_ms: 1000,
            },
        ),
        ("fsync", Durability::Fsync),
    ];
    for size in [16 << 10, 1 << 20] {
        for (name, durability) in modes {
            let dir = tempfile::tempdir_in(bench_dir()).expect("tempdir");
            let t =
                LogTablet::open(Arc::new(OsFs), dir.path(), config(durability), 0).expect("open");
            let batch = one_batch(size);
            let mut n = 0u64;
            let start = std::time::Instant::now();
            group.throughput(Throughput::Bytes(size as u64));
            group.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| {
                    let now = start.elapsed().as_millis() as i64;
                    let info = t.append(&batch, now).expect("append");
                    if t.ack_needs_sync() {
                        t.wait_durable(info.last_offset).expect("durable");
                    } else {
                        t.flush_if_due(now).expect("flush");
                    }
                    n += 1;
                    if n & 255 == 0 {
                        t.enforce_retention(now).expect("retention");
                    }
                })
            });
        }
    }
    group.finish();
}

/// Group commit: four producers append 16 KiB batches with fsync durability
/// and share fsyncs. Throughput counts every producer's batches.
fn group_commit(c: &mut Criterion) {
    const PRODUCERS: u64 = 4;
    const SIZE: usize = 16 << 10;
    let mut group = c.benchmark_group("append_group_commit");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    let dir = tempfile::tempdir_in(bench_dir()).expect("tempdir");
    let t =
        LogTablet::open(Arc::new(OsFs), dir.path(), config(Durability::Fsync), 0).expect("open");
    group.throughput(Throughput::Bytes(SIZE as u64));
    group.bench_function(BenchmarkId::new("fsync_4_producers", SIZE), |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            std::thread::scope(|s| {
                for _ in 0..PRODUCERS {
                    s.spawn(|| {
                        let batch = one_batch(SIZE);
                        for _ in 0..iters.div_ceil(PRODUCERS) {
                            let info = t.append(&batch, 0).expect("append");
                            t.wait_durable(info.last_offset).expect("durable");
                        }
                    });
                }
            });
            let elapsed = start.elapsed();
            t.enforce_retention(0).expect("retention");
            elapsed
        })
    });
    group.finish();
}

fn sequential_read(c: &mut Criterion) {
    let mut group = c.benchmark_group("read");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    const LOG_BYTES: usize = 256 << 20;
    for size in [16 << 10, 1 << 20] {
        let dir = tempfile::tempdir_in(bench_dir()).expect("tempdir");
        let t = LogTablet::open(
            Arc::new(OsFs),
            dir.path(),
            config(Durability::Interval {
                messages: u64::MAX,
                interval_ms: i64::MAX,
            }),
            0,
        )
        .expect("open");
        let batch = one_batch(size);
        for _ in 0..LOG_BYTES / size {
            t.append(&batch, 0).expect("append");
        }
        let end = t.log_end_offset();
        // Fetch-sized reads of 1 MiB, as a consumer would issue them.
        let max_bytes = 1 << 20;
        group.throughput(Throughput::Bytes(max_bytes as u64));
        let mut next = 0i64;
        group.bench_function(BenchmarkId::new("page_cache_1MiB_fetch", size), |b| {
            b.iter(|| {
                if next >= end {
                    next = 0;
                }
                let r = t.read(next, max_bytes).expect("read");
                // Offsets advance by 1000 records per batch.
                next += (r.records.len() / size) as i64 * 1000;
                r.records.len()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, append, group_commit, sequential_read);
criterion_main!(benches);
