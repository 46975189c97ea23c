//! What one upsert costs the server's KV path alone, without network or
//! client: `KvTablet::put` (validate the KV batch, per record the key check,
//! the old value from the pre-write buffer or the KV store, the merge, the
//! changelog rows into Arrow columns, then one ZSTD changelog batch appended
//! to the log) and `KvTablet::flush` (the batch's changes into the store),
//! over `user_behavior` rows keyed by (user_id, item_id), about a fifth of
//! the writes updates of earlier keys, and point lookups of existing keys
//! as the Lookup handler reads them (128 keys at a time from memory, else
//! one by one from the store).
//!
//! The log flushes by interval (no fsync per batch), so the figure is CPU,
//! not the disk. Prints one JSON line per phase with ns of process CPU per
//! record (user + system from `/proc/self/stat`) and records/s.
//! `FJORD_BENCH_DIR` picks the data directory's parent (default: the temp
//! dir); `FJORD_BENCH_ROWS` the upserts (default 2,000,000).
//!
//! Run: `cargo bench -p fjord-server --bench kv_put`

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMillisecondType};
use fjord_format::datum::{Datum, Timestamp};
use fjord_format::fixtures::{user_behavior_batch, user_behavior_schema};
use fjord_format::kv::batch::KvBatchBuilder;
use fjord_format::row::key::KeyEncoder;
use fjord_format::row::{RowCodec, RowFormat};
use fjord_format::schema::Schema;
use fjord_server::kv::merge::AggMode;
use fjord_server::kv::{KvTable, KvTablet};
use fjord_server::replica::TableBucket;
use fjord_storage::kv::{KvEngine, KvEngineOptions};
use fjord_storage::{Durability, LogConfig, LogTablet, OsFs};

/// Records per KV batch (about 1 MiB of KV batch, as a client's default).
const BATCH_ROWS: usize = 20_000;
/// Share of upserts that update an earlier key, in percent.
const UPDATE_PERCENT: u64 = 20;
/// Point lookups measured.
const LOOKUPS: usize = 1_000_000;
/// Keys of one bucket in one lookup request (the Fluss client's default
/// `client.lookup.max-batch-size` is 128).
const LOOKUP_BATCH_KEYS: usize = 128;

fn cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 (1-based), 11 and 12 here.
    (ticks(11) + ticks(12)) * 10_000_000
}

fn keyed_schema() -> Arc<Schema> {
    let base = user_behavior_schema();
    let mut b = Schema::builder();
    for c in base.columns() {
        let t = if c.name == "user_id" || c.name == "item_id" {
            c.data_type.clone().with_nullable(false)
        } else {
            c.data_type.clone()
        };
        b = b.column(c.name.clone(), t);
    }
    Arc::new(b.primary_key(["user_id", "item_id"]).build().unwrap())
}

fn main() {
    let rows: usize = std::env::var("FJORD_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let parent = std::env::var_os("FJORD_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(parent).unwrap();
    let schema = keyed_schema();
    let row_type: Vec<_> = schema
        .columns()
        .iter()
        .map(|c| c.data_type.clone())
        .collect();
    let table = Arc::new(
        KvTable::new(
            Arc::clone(&schema),
            1,
            &[],
            &["user_id".to_owned(), "item_id".to_owned()],
            &BTreeMap::new(),
        )
        .unwrap(),
    );
    let config = LogConfig {
        durability: Durability::Interval {
            messages: u64::MAX,
            interval_ms: i64::MAX,
        },
        ..LogConfig::default()
    };
    let log = Arc::new(LogTablet::open(Arc::new(OsFs), dir.path().join("log"), config, 0).unwrap());
    let engine = KvEngine::open(dir.path(), &KvEngineOptions::default()).unwrap();
    let store = engine
        .open_store(fjord_storage::TableBucket {
            table_id: 1,
            partition_id: None,
            bucket: 0,
        })
        .unwrap();
    let bucket = TableBucket {
        table_id: 1,
        partition_id: None,
        bucket_id: 0,
    };
    let tablet = KvTablet::open(
        table,
        bucket,
        Arc::clone(&log),
        store,
        fjord_server::kv::tablet::DEFAULT_WRITE_BUFFER_BYTES,
        Arc::new(fjord_server::kv::tablet::RowCacheBudget::new(
            std::env::var("FJORD_BENCH_ROW_CACHE")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(fjord_server::kv::tablet::DEFAULT_ROW_CACHE_BYTES),
        )),
    )
    .unwrap();

    // The batches, encoded up front as a client would send them.
    let codec = RowCodec::new(RowFormat::Compacted, &row_type).unwrap();
    let keys = KeyEncoder::new(&row_type, &[0, 1]).unwrap();
    let source = user_behavior_batch(rows, 7);
    let users = source.column(0).as_primitive::<Int64Type>();
    let items = source.column(1).as_primitive::<Int64Type>();
    let categories = source.column(2).as_primitive::<Int64Type>();
    let behaviors = source.column(3).as_string::<i32>();
    let ts = source.column(4).as_primitive::<TimestampMillisecondType>();
    let mut batches = Vec::new();
    let mut builder = KvBatchBuilder::start(Vec::new(), 1, -1, -1);
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut written: Vec<usize> = Vec::with_capacity(rows);
    for i in 0..rows {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // A fifth of the writes go to a key written before.
        let src = if i > 0 && rng % 100 < UPDATE_PERCENT {
            written[(rng >> 8) as usize % written.len()]
        } else {
            written.push(i);
            i
        };
        let datums = [
            Datum::BigInt(users.value(src)),
            Datum::BigInt(items.value(src) + src as i64 * 1_000_003),
            Datum::BigInt(categories.value(i)),
            Datum::String(behaviors.value(i)),
            Datum::Timestamp(Timestamp::from_millis(ts.value(i))),
        ];
        key.clear();
        value.clear();
        keys.encode_datums(&datums, &mut key).unwrap();
        codec.encode(&datums, &mut value).unwrap();
        builder.append_upsert(&key, &value).unwrap();
        if builder.record_count() == BATCH_ROWS {
            batches.push(builder.finish().to_vec());
            builder.restart(1, -1, -1);
        }
    }
    if builder.record_count() > 0 {
        batches.push(builder.finish().to_vec());
    }

    let cpu = cpu_ns();
    let start = Instant::now();
    for batch in &batches {
        tablet.put(batch, &[], AggMode::Default, 0).unwrap();
        tablet.flush(log.high_watermark()).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_ns() - cpu;
    println!(
        "{{\"bench\":\"kv_put\",\"records\":{rows},\"secs\":{secs:.3},\"records_per_s\":{:.0},\"cpu_ns_per_record\":{:.0},\"changelog_offsets\":{}}}",
        rows as f64 / secs,
        cpu as f64 / rows as f64,
        log.log_end_offset()
    );

    if std::env::var_os("FJORD_BENCH_COMPACT").is_some() {
        tablet.spill().unwrap();
        tablet.store().compact().unwrap();
    }
    // Point lookups of written keys, through the store.
    let mut lookup_keys = Vec::with_capacity(LOOKUPS);
    for _ in 0..LOOKUPS {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let src = written[(rng >> 8) as usize % written.len()];
        let datums = [
            Datum::BigInt(users.value(src)),
            Datum::BigInt(items.value(src) + src as i64 * 1_000_003),
            Datum::Null,
            Datum::Null,
            Datum::Null,
        ];
        let mut k = Vec::new();
        keys.encode_datums(&datums, &mut k).unwrap();
        lookup_keys.push(bytes::Bytes::from(k));
    }
    let cpu = cpu_ns();
    let start = Instant::now();
    // As the Lookup handler reads them: a request's keys of the bucket at
    // once from memory, else one by one (the store's path).
    let mut found = 0usize;
    for batch in lookup_keys.chunks(LOOKUP_BATCH_KEYS) {
        match tablet.get_all_in_memory(batch) {
            Some(values) => found += values.iter().filter(|v| v.is_some()).count(),
            None => {
                for k in batch {
                    found += usize::from(tablet.get(k).unwrap().is_some());
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_ns() - cpu;
    assert_eq!(found, LOOKUPS, "every looked-up key exists");
    println!(
        "{{\"bench\":\"kv_get\",\"lookups\":{LOOKUPS},\"secs\":{secs:.3},\"lookups_per_s\":{:.0},\"cpu_ns_per_lookup\":{:.0}}}",
        LOOKUPS as f64 / secs,
        cpu as f64 / LOOKUPS as f64
    );
}
