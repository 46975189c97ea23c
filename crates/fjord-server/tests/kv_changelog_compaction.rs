//! Compaction of a primary-key bucket's changelog
//! (`kv::changelog_compaction`), driven on a `KvTablet` whose log runs over
//! the simulated disk with small segments, for each merge engine and
//! changelog image. After upserts, updates and deletes over many segments
//! and a compaction (`table.log.ttl` of 1 ms):
//! - (a) the changelog read from the earliest offset materialises (`+I`/`+U`
//!   put, `-D` delete) to exactly the table (its KV store, and for the
//!   default engine an independent model); the compacted range holds only
//!   `+I` and `-D` rows, at most one per key, each at its original offset
//!   with its original values;
//! - (b) a reader that had read the old changelog up to any offset `p` and
//!   continues from `p` on the compacted one ends with the same table (while
//!   deletes are kept, `kv.changelog-compaction.delete-retention`); with a
//!   retention of 0 a reader in the middle can miss a delete, a reader from
//!   the start cannot;
//! - (c) the tablet reopens (store kept, store wiped and rebuilt from the
//!   compacted changelog, power cut on the log) to the same table;
//! - more writes and a second compaction (over the compacted prefix) keep
//!   all of that; nothing new to compact is not due;
//! - a power cut after any sync of a compaction (several groups of
//!   segments) leaves a changelog that still materialises to the table;
//! - a small `kv.changelog-compaction.index-size` compacts fewer segments,
//!   one too small for a segment skips;
//! - ARRAY, MAP and ROW value columns are compacted and replayed to the
//!   rows the writes stored.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use fjord_format::arrow_log::{decode_log_batch, ChangeType};
use fjord_format::datum::Datum;
use fjord_format::kv::batch::KvBatchBuilder;
use fjord_format::log_batch::LogBatches;
use fjord_format::row::key::KeyEncoder;
use fjord_format::row::nested::{write_array, write_map, NestedField};
use fjord_format::row::{RowCodec, RowFormat};
use fjord_format::schema::Schema;
use fjord_format::types::{DataField, DataType};
use fjord_server::kv::changelog_compaction::{
    compact, ChangelogCompactionOptions, Compaction, CompactionReport,
};
use fjord_server::kv::columns::{read_row, read_row_into, NestedColumns};
use fjord_server::kv::merge::AggMode;
use fjord_server::kv::tablet::RowCacheBudget;
use fjord_server::kv::{KvTable, KvTablet};
use fjord_server::replica::TableBucket;
use fjord_storage::fs::sim::{Rng, SimFs};
use fjord_storage::kv::{KvEngine, KvEngineOptions};
use fjord_storage::{LogConfig, LogTablet};

const BUCKET: TableBucket = TableBucket {
    table_id: 1,
    partition_id: None,
    bucket_id: 0,
};

/// `table.log.ttl` of these tests.
const TTL_MS: i64 = 1;

/// `k INT NOT NULL, v BIGINT, s STRING`, keyed by `k`.
fn schema() -> Arc<Schema> {
    Arc::new(
        Schema::builder()
            .column("k", DataType::int().with_nullable(false))
            .column("v", DataType::bigint())
            .column("s", DataType::string())
            .primary_key(["k"])
            .build()
            .unwrap(),
    )
}

fn row_type() -> Vec<DataType> {
    schema()
        .columns()
        .iter()
        .map(|c| c.data_type.clone())
        .collect()
}

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Every merge engine and changelog image.
fn configs() -> Vec<(&'static str, BTreeMap<String, String>)> {
    vec![
        ("default-full", props(&[])),
        ("default-wal", props(&[("table.changelog.image", "WAL")])),
        ("first-row", props(&[("table.merge-engine", "first_row")])),
        (
            "versioned",
            props(&[
                ("table.merge-engine", "versioned"),
                ("table.merge-engine.versioned.ver-column", "v"),
            ]),
        ),
        (
            "aggregation",
            props(&[("table.merge-engine", "aggregation")]),
        ),
    ]
}

/// Small segments, so a few hundred writes make many of them.
fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes_max: 16 << 10,
        batch_bytes_max: 8 << 10,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

fn options(delete_retention_ms: i64) -> ChangelogCompactionOptions {
    ChangelogCompactionOptions {
        min_dirty_ratio: 0.0,
        delete_retention_ms,
        ..ChangelogCompactionOptions::default()
    }
}

/// A write of one key: an upsert of `(k, v, s)` or a delete.
#[derive(Clone, Copy, Debug)]
enum Op {
    Upsert { k: i32, v: i64, s: u8 },
    Delete { k: i32 },
}

const NAMES: [&str; 4] = ["a", "bb", "", "dddd"];

/// A table row as the tests compare it.
type Row = (i64, Option<i64>, Option<String>);

struct Encoder {
    rows: RowCodec,
    keys: KeyEncoder,
}

impl Encoder {
    fn new() -> Self {
        Self {
            rows: RowCodec::new(RowFormat::Compacted, &row_type()).unwrap(),
            keys: KeyEncoder::new(&row_type(), &[0]).unwrap(),
        }
    }

    fn batch(&self, ops: &[Op]) -> Vec<u8> {
        let mut b = KvBatchBuilder::start(Vec::new(), 1, -1, -1);
        for op in ops {
            let k = match *op {
                Op::Upsert { k, .. } | Op::Delete { k } => k,
            };
            let mut key = Vec::new();
            self.keys
                .encode_datums(&[Datum::Int(k), Datum::Null, Datum::Null], &mut key)
                .unwrap();
            match *op {
                Op::Upsert { k, v, s } => {
                    let mut bytes = Vec::new();
                    self.rows
                        .encode(
                            &[
                                Datum::Int(k),
                                Datum::BigInt(v),
                                Datum::String(NAMES[s as usize]),
                            ],
                            &mut bytes,
                        )
                        .unwrap();
                    b.append_upsert(&key, &bytes).unwrap();
                }
                Op::Delete { .. } => b.append_delete(&key).unwrap(),
            }
        }
        b.finish().to_vec()
    }
}

fn decode_row(d: &[Datum<'_>]) -> Row {
    let k = match d[0] {
        Datum::Int(k) => i64::from(k),
        _ => panic!("{d:?}"),
    };
    let v = match d[1] {
        Datum::BigInt(v) => Some(v),
        Datum::Null => None,
        _ => panic!("{d:?}"),
    };
    let s = match d[2] {
        Datum::String(s) => Some(s.to_owned()),
        Datum::Null => None,
        _ => panic!("{d:?}"),
    };
    (k, v, s)
}

/// Every (key → row) the KV store holds.
fn store_state(tablet: &KvTablet) -> BTreeMap<i64, Row> {
    let rows = RowCodec::new(RowFormat::Compacted, &row_type()).unwrap();
    let mut state = BTreeMap::new();
    tablet
        .scan_prefix(&[], |value| {
            let mut d = Vec::new();
            rows.decode(&value[2..], &mut d).unwrap();
            let row = decode_row(&d);
            state.insert(row.0, row);
            true
        })
        .unwrap();
    state
}

/// One changelog row: offset, change type, row.
type LogRow = (i64, ChangeType, Row);

/// Every changelog row from `from` to the high watermark, read as a
/// consumer does (each read from the offset after the last batch).
fn read_changelog(log: &LogTablet, from: i64, arrow: &arrow_schema::SchemaRef) -> Vec<LogRow> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.high_watermark() {
        let read = log.read(next, 64 << 10).unwrap();
        assert!(!read.records.is_empty(), "empty read at {next}");
        for batch in LogBatches::new(&read.records) {
            let batch = batch.unwrap();
            next = batch.next_offset();
            if batch.record_count() == 0 {
                continue;
            }
            let decoded = decode_log_batch(
                &read.records.slice_ref(batch.as_bytes()).into(),
                arrow.clone(),
            )
            .unwrap();
            let types = decoded.change_types.unwrap();
            let mut d = Vec::new();
            for i in 0..decoded.records.num_rows() {
                read_row(&decoded.records, i, &mut d).unwrap();
                let offset = batch.base_offset() + i as i64;
                if offset >= from {
                    out.push((
                        offset,
                        ChangeType::from_byte(types[i]).unwrap(),
                        decode_row(&d),
                    ));
                }
            }
        }
    }
    out
}

/// Applies changelog rows to a table: `+I`/`+U` put, `-D` delete.
fn apply(state: &mut BTreeMap<i64, Row>, rows: &[LogRow]) {
    for (_, change, row) in rows {
        match change {
            ChangeType::Insert | ChangeType::UpdateAfter => {
                state.insert(row.0, row.clone());
            }
            ChangeType::Delete => {
                state.remove(&row.0);
            }
            _ => {}
        }
    }
}

fn materialise(rows: &[LogRow]) -> BTreeMap<i64, Row> {
    let mut state = BTreeMap::new();
    apply(&mut state, rows);
    state
}

/// The default engine's table after `ops`.
fn model_apply(model: &mut BTreeMap<i64, Row>, ops: &[Op]) {
    for op in ops {
        match *op {
            Op::Upsert { k, v, s } => {
                model.insert(
                    i64::from(k),
                    (i64::from(k), Some(v), Some(NAMES[s as usize].to_owned())),
                );
            }
            Op::Delete { k } => {
                model.remove(&i64::from(k));
            }
        }
    }
}

/// Everything one bucket of the test owns.
struct Bucket {
    sim: SimFs,
    kv_dir: tempfile::TempDir,
    table: Arc<KvTable>,
}

impl Bucket {
    fn new(properties: &BTreeMap<String, String>) -> Self {
        Self {
            sim: SimFs::new(),
            kv_dir: tempfile::tempdir().unwrap(),
            table: Arc::new(KvTable::new(schema(), 1, &[], &["k".to_owned()], properties).unwrap()),
        }
    }

    fn open(&self) -> (KvEngine, KvTablet) {
        let log = Arc::new(
            LogTablet::open(
                Arc::new(self.sim.clone()),
                Path::new("/log/1/log-0"),
                log_config(),
                0,
            )
            .unwrap(),
        );
        let engine = KvEngine::open(self.kv_dir.path(), &KvEngineOptions::default()).unwrap();
        let store = engine
            .open_store(fjord_storage::TableBucket {
                table_id: 1,
                partition_id: None,
                bucket: 0,
            })
            .unwrap();
        let tablet = KvTablet::open(
            Arc::clone(&self.table),
            BUCKET,
            log,
            store,
            1 << 20,
            Arc::new(RowCacheBudget::new(0)),
        )
        .unwrap();
        (engine, tablet)
    }

    fn wipe_store(&self) {
        std::fs::remove_dir_all(self.kv_dir.path()).unwrap();
        std::fs::create_dir_all(self.kv_dir.path()).unwrap();
    }
}

/// Puts one batch as an acks=all PutKv does (durable and applied) at
/// `now_ms`.
fn put_acked(tablet: &KvTablet, encoder: &Encoder, ops: &[Op], now_ms: i64) {
    let outcome = tablet
        .put(&encoder.batch(ops), &[], AggMode::Default, now_ms)
        .unwrap();
    tablet.log().wait_durable(outcome.end_offset - 1).unwrap();
    tablet.flush(tablet.log().high_watermark()).unwrap();
}

/// `batches` random batches over keys `0..keys`, deletes one op in four.
fn random_batches(seed: u64, batches: usize, keys: i32) -> Vec<Vec<Op>> {
    let mut rng = Rng::new(seed);
    (0..batches)
        .map(|_| {
            (0..1 + rng.below(6))
                .map(|_| {
                    let k = rng.below(keys as u64) as i32;
                    if rng.below(4) == 0 {
                        Op::Delete { k }
                    } else {
                        Op::Upsert {
                            k,
                            v: rng.below(100) as i64 - 5,
                            s: rng.below(4) as u8,
                        }
                    }
                })
                .collect()
        })
        .collect()
}

/// Writes `batches` one millisecond apart from `*clock`, applying them to
/// `model`.
fn write(
    tablet: &KvTablet,
    encoder: &Encoder,
    batches: &[Vec<Op>],
    clock: &mut i64,
    model: &mut BTreeMap<i64, Row>,
) {
    for ops in batches {
        *clock += 1;
        put_acked(tablet, encoder, ops, *clock);
        model_apply(model, ops);
    }
}

fn compact_done(
    tablet: &KvTablet,
    options: &ChangelogCompactionOptions,
    now: i64,
) -> CompactionReport {
    match compact(tablet, TTL_MS, options, now, &AtomicBool::new(false)).unwrap() {
        Compaction::Done(report) => report,
        other => panic!("not compacted: {other:?}"),
    }
}

/// (a): the compacted changelog materialises to the table, and its
/// compacted range holds only latest images at their original offsets.
fn check_compacted(
    name: &str,
    tablet: &KvTablet,
    before: &[LogRow],
    report: &CompactionReport,
    model: Option<&BTreeMap<i64, Row>>,
) -> Vec<LogRow> {
    let arrow = tablet.table().arrow_schema.clone();
    let log = tablet.log();
    let after = read_changelog(log, log.log_start_offset(), &arrow);
    let state = store_state(tablet);
    assert_eq!(
        materialise(&after),
        state,
        "{name}: changelog from the start = store"
    );
    assert_eq!(
        materialise(before),
        state,
        "{name}: the old changelog = store"
    );
    if let Some(model) = model {
        assert_eq!(&state, model, "{name}: store = model");
    }
    let by_offset: BTreeMap<i64, &LogRow> = before.iter().map(|r| (r.0, r)).collect();
    let mut seen = std::collections::HashSet::new();
    for row in after.iter().filter(|r| r.0 < report.end_offset) {
        assert!(
            matches!(row.1, ChangeType::Insert | ChangeType::Delete),
            "{name}: {row:?} in the compacted range"
        );
        assert!(
            seen.insert(row.2 .0),
            "{name}: key {} twice in the compacted range",
            row.2 .0
        );
        let original = by_offset
            .get(&row.0)
            .unwrap_or_else(|| panic!("{name}: no original row at {}", row.0));
        assert_eq!(
            original.2, row.2,
            "{name}: values at offset {} changed",
            row.0
        );
        assert_ne!(original.1, ChangeType::UpdateBefore);
    }
    assert!(after.len() <= before.len(), "{name}: rows were added");
    after
}

/// (b): a reader that read `before` up to `p` and continues from `p` in
/// `after` ends with `want`, for every `p`; returns the offsets where it
/// does not.
fn readers_in_the_middle(
    before: &[LogRow],
    after: &[LogRow],
    start: i64,
    end: i64,
    want: &BTreeMap<i64, Row>,
) -> Vec<i64> {
    let mut wrong = Vec::new();
    let mut prefix = BTreeMap::new();
    let mut read = 0;
    for p in start..=end {
        while read < before.len() && before[read].0 < p {
            apply(&mut prefix, &before[read..=read]);
            read += 1;
        }
        let mut state = prefix.clone();
        let from = after.partition_point(|r| r.0 < p);
        apply(&mut state, &after[from..]);
        if &state != want {
            wrong.push(p);
        }
    }
    wrong
}

#[test]
fn compacted_changelogs_rebuild_the_table_from_the_start_from_the_middle_and_after_restarts() {
    let encoder = Encoder::new();
    for (name, config) in configs() {
        for seed in 0..2 {
            let default_engine = name.starts_with("default");
            let bucket = Bucket::new(&config);
            let mut model = BTreeMap::new();
            let mut clock = 1_000;
            let (engine, tablet) = bucket.open();
            let arrow = tablet.table().arrow_schema.clone();
            // First-row and versioned tables log fewer changes: more keys.
            let keys = if default_engine || name == "aggregation" {
                40
            } else {
                1_000
            };
            let mut round = 0;
            while tablet.log().sealed_segments().len() < 4 {
                let batches = random_batches(seed * 1_000 + round, 50, keys);
                write(&tablet, &encoder, &batches, &mut clock, &mut model);
                round += 1;
            }
            let log = Arc::clone(tablet.log());
            let before = read_changelog(&log, 0, &arrow);
            let report = compact_done(&tablet, &options(i64::MAX / 4), clock + 10);
            assert_eq!(report.base_offset, 0);
            assert_eq!(
                report.end_offset,
                log.sealed_segments().last().unwrap().end_offset
            );
            if default_engine {
                assert!(
                    report.bytes_after < report.bytes_before,
                    "{name}: {report:?}"
                );
            }
            let model_ref = default_engine.then_some(&model);
            let after = check_compacted(name, &tablet, &before, &report, model_ref);
            let state = store_state(&tablet);
            let wrong = readers_in_the_middle(&before, &after, 0, log.high_watermark(), &state);
            assert!(wrong.is_empty(), "{name}: readers from {wrong:?} end wrong");
            assert_eq!(log.log_start_offset(), 0);

            // More writes, then a second compaction over the compacted prefix.
            write(
                &tablet,
                &encoder,
                &random_batches(seed + 100, 150, keys),
                &mut clock,
                &mut model,
            );
            let before2 = read_changelog(&log, 0, &arrow);
            let report2 = compact_done(&tablet, &options(i64::MAX / 4), clock + 10);
            assert_eq!(
                report2.dirty_offset, report.end_offset,
                "{name}: the prefix is clean"
            );
            let after2 = check_compacted(
                name,
                &tablet,
                &before2,
                &report2,
                default_engine.then_some(&model),
            );
            let state = store_state(&tablet);
            let wrong = readers_in_the_middle(&before2, &after2, 0, log.high_watermark(), &state);
            assert!(wrong.is_empty(), "{name}: readers from {wrong:?} end wrong");
            // Nothing new: not due.
            assert_eq!(
                compact(
                    &tablet,
                    TTL_MS,
                    &options(0),
                    clock + 20,
                    &AtomicBool::new(false)
                )
                .unwrap(),
                Compaction::NotDue
            );

            // (c) Restarts: clean, store wiped (rebuilt from the compacted
            // changelog), and a power cut on the log.
            tablet.spill().unwrap();
            drop(tablet);
            drop(log);
            drop(engine);
            let (engine, tablet) = bucket.open();
            assert_eq!(store_state(&tablet), state, "{name}: reopened");
            drop(tablet);
            drop(engine);
            bucket.wipe_store();
            let (engine, tablet) = bucket.open();
            assert_eq!(
                store_state(&tablet),
                state,
                "{name}: rebuilt from the changelog"
            );
            drop(tablet);
            drop(engine);
            bucket.sim.crash(seed);
            bucket.wipe_store();
            let (_engine, tablet) = bucket.open();
            assert_eq!(store_state(&tablet), state, "{name}: after a power cut");
            let log = tablet.log();
            assert_eq!(materialise(&read_changelog(log, 0, &arrow)), state);
        }
    }
}

#[test]
fn without_delete_retention_a_reader_in_the_middle_can_miss_a_delete_but_not_a_reader_from_the_start(
) {
    let encoder = Encoder::new();
    for retention in [0, i64::MAX / 4] {
        let bucket = Bucket::new(&props(&[]));
        let (_engine, tablet) = bucket.open();
        let arrow = tablet.table().arrow_schema.clone();
        let mut model = BTreeMap::new();
        let mut clock = 1_000;
        // Key 1 is inserted, then (segments later) deleted.
        write(
            &tablet,
            &encoder,
            &[vec![Op::Upsert { k: 1, v: 1, s: 1 }]],
            &mut clock,
            &mut model,
        );
        let filler = |from: i32| -> Vec<Vec<Op>> {
            (0..60)
                .map(|i| {
                    vec![Op::Upsert {
                        k: from + i % 10,
                        v: i64::from(i),
                        s: 3,
                    }]
                })
                .collect()
        };
        write(&tablet, &encoder, &filler(100), &mut clock, &mut model);
        let delete_at = tablet.log().log_end_offset();
        write(
            &tablet,
            &encoder,
            &[vec![Op::Delete { k: 1 }]],
            &mut clock,
            &mut model,
        );
        write(&tablet, &encoder, &filler(200), &mut clock, &mut model);
        let before = read_changelog(tablet.log(), 0, &arrow);
        let report = compact_done(&tablet, &options(retention), clock + 10);
        assert!(report.end_offset > delete_at);
        let after = check_compacted("delete", &tablet, &before, &report, Some(&model));
        let wrong =
            readers_in_the_middle(&before, &after, 0, tablet.log().high_watermark(), &model);
        if retention == 0 {
            assert!(!after.iter().any(|r| r.2 .0 == 1), "key 1 is gone entirely");
            assert!(
                wrong.contains(&delete_at),
                "a reader between the insert and the delete misses it"
            );
            assert!(!wrong.contains(&0), "a reader from the start is right");
        } else {
            assert!(
                after
                    .iter()
                    .any(|r| r.0 == delete_at && r.1 == ChangeType::Delete),
                "the delete is kept"
            );
            assert!(wrong.is_empty(), "readers from {wrong:?} end wrong");
        }
    }
}

#[test]
fn a_small_index_compacts_fewer_segments_and_one_too_small_skips() {
    let encoder = Encoder::new();
    let bucket = Bucket::new(&props(&[]));
    let (_engine, tablet) = bucket.open();
    let arrow = tablet.table().arrow_schema.clone();
    let mut model = BTreeMap::new();
    let mut clock = 1_000;
    // Every segment brings new keys.
    let batches: Vec<Vec<Op>> = (0..300)
        .map(|i| {
            vec![
                Op::Upsert { k: i, v: 1, s: 0 },
                Op::Upsert {
                    k: i / 2,
                    v: 2,
                    s: 1,
                },
            ]
        })
        .collect();
    write(&tablet, &encoder, &batches, &mut clock, &mut model);
    let sealed = tablet.log().sealed_segments();
    let before = read_changelog(tablet.log(), 0, &arrow);
    let tiny = ChangelogCompactionOptions {
        index_bytes_max: 10,
        ..options(0)
    };
    assert!(matches!(
        compact(&tablet, TTL_MS, &tiny, clock + 10, &AtomicBool::new(false)).unwrap(),
        Compaction::Skipped(_)
    ));
    let small = ChangelogCompactionOptions {
        index_bytes_max: 3
            * 60
            * (4 + fjord_server::kv::changelog_compaction::INDEX_ENTRY_OVERHEAD_BYTES),
        ..options(0)
    };
    let report = compact_done(&tablet, &small, clock + 10);
    assert!(
        report.end_offset < sealed.last().unwrap().end_offset,
        "only part was compacted: {report:?}"
    );
    check_compacted("small index", &tablet, &before, &report, Some(&model));
    // The rest, a part at a time.
    let mut rounds = 0;
    while let Compaction::Done(_) =
        compact(&tablet, TTL_MS, &small, clock + 10, &AtomicBool::new(false)).unwrap()
    {
        rounds += 1;
        assert!(rounds < 50);
    }
    assert!(rounds > 0);
    assert_eq!(
        tablet.log().rewritten_end(),
        sealed.last().unwrap().end_offset
    );
    let after = read_changelog(tablet.log(), 0, &arrow);
    assert_eq!(materialise(&after), model);
}

#[test]
fn a_power_cut_at_any_sync_of_a_compaction_leaves_a_changelog_that_rebuilds_the_table() {
    let encoder = Encoder::new();
    // Many live keys: the compacted image spans several segments, so the
    // compaction commits several groups.
    let batches = random_batches(7, 300, 400);
    let mut saw_groups = false;
    for n in 0.. {
        let bucket = Bucket::new(&props(&[]));
        let mut model = BTreeMap::new();
        let mut clock = 1_000;
        let (engine, tablet) = bucket.open();
        let arrow = tablet.table().arrow_schema.clone();
        write(&tablet, &encoder, &batches, &mut clock, &mut model);
        bucket.sim.cut_power_after_syncs(n);
        let result = compact(
            &tablet,
            TTL_MS,
            &options(0),
            clock + 10,
            &AtomicBool::new(false),
        );
        let cut = bucket.sim.power_is_cut();
        if let Ok(Compaction::Done(report)) = &result {
            saw_groups |= report.segments_after > 1;
        }
        drop(tablet);
        drop(engine);
        bucket.sim.crash(n);
        let (_engine, tablet) = bucket.open();
        assert_eq!(
            store_state(&tablet),
            model,
            "cut after {n} syncs: the store"
        );
        let log = tablet.log();
        assert_eq!(
            materialise(&read_changelog(log, 0, &arrow)),
            model,
            "cut after {n} syncs: the changelog"
        );
        if !cut {
            assert!(matches!(result, Ok(Compaction::Done(_))), "{result:?}");
            assert!(saw_groups, "the compaction wrote one group only");
            assert!(n > 10);
            return;
        }
    }
}

/// The size of a compacted image (the module doc's figures:
/// `cargo test -p fjord-server --test kv_changelog_compaction
/// compacted_image_size -- --nocapture` prints them): a history of inserts
/// shrinks (small batches become long runs), a history where each key was
/// updated once grows (each survivor is a one-row batch between dropped
/// `-U` rows), to a size bounded per live key.
#[test]
fn compacted_image_size_is_bounded_per_live_key_whatever_the_history() {
    let encoder = Encoder::new();
    let keys = 2_000;
    let mut per_row = Vec::new();
    for updates in [0, 1, 10] {
        let bucket = Bucket::new(&props(&[]));
        let (_engine, tablet) = bucket.open();
        let mut model = BTreeMap::new();
        let mut clock = 1_000;
        for round in 0..=updates {
            let batches: Vec<Vec<Op>> = (0..keys / 50)
                .map(|b| {
                    (0..50)
                        .map(|i| Op::Upsert {
                            k: b * 50 + i,
                            v: i64::from(round),
                            s: (round % 4) as u8,
                        })
                        .collect()
                })
                .collect();
            write(&tablet, &encoder, &batches, &mut clock, &mut model);
        }
        // Writes to other keys seal the history.
        let tail: Vec<Vec<Op>> = (0..400)
            .map(|i| {
                vec![Op::Upsert {
                    k: 100_000 + i,
                    v: 0,
                    s: 0,
                }]
            })
            .collect();
        write(&tablet, &encoder, &tail, &mut clock, &mut model);
        let r = compact_done(&tablet, &options(0), clock + 10);
        eprintln!(
            "{keys} keys, {updates} updates each: {} rows, {} bytes -> {} rows, {} bytes ({} bytes a kept row)",
            r.rows_read,
            r.bytes_before,
            r.rows_kept,
            r.bytes_after,
            r.bytes_after / r.rows_kept
        );
        if updates == 0 {
            assert!(r.bytes_after < r.bytes_before, "{r:?}");
        }
        per_row.push(r.bytes_after / r.rows_kept);
    }
    // Once every survivor stands alone, the image no longer depends on the
    // history's length.
    assert!(per_row[1] > 4 * per_row[0], "{per_row:?}");
    assert!(
        per_row[1].abs_diff(per_row[2]) * 10 < per_row[1],
        "{per_row:?}"
    );
}

/// The test schema with a nullable INT `x` added last (an ALTER TABLE).
fn evolved_table() -> Arc<KvTable> {
    let evolved = Arc::new(schema().with_column("x", DataType::int(), None).unwrap());
    Arc::new(
        KvTable::with_schemas(
            &[schema(), evolved],
            1,
            &[],
            &["k".to_owned()],
            &BTreeMap::new(),
        )
        .unwrap(),
    )
}

/// Every changelog row, each batch decoded with the schema of its id and
/// read as the first three columns (`x` must be NULL), with the schema ids
/// met in order.
fn read_changelog_of_every_schema(log: &LogTablet, table: &KvTable) -> (Vec<LogRow>, Vec<i16>) {
    let mut out = Vec::new();
    let mut ids = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.high_watermark() {
        let read = log.read(next, 64 << 10).unwrap();
        for batch in LogBatches::new(&read.records) {
            let batch = batch.unwrap();
            next = batch.next_offset();
            if batch.record_count() == 0 {
                continue;
            }
            ids.push(batch.schema_id());
            let arrow = table
                .schema_by_id(batch.schema_id())
                .unwrap()
                .arrow_schema
                .clone();
            let decoded =
                decode_log_batch(&read.records.slice_ref(batch.as_bytes()).into(), arrow).unwrap();
            let types = decoded.change_types.unwrap();
            let mut d = Vec::new();
            for i in 0..decoded.records.num_rows() {
                read_row(&decoded.records, i, &mut d).unwrap();
                assert!(d.get(3).is_none_or(|x| *x == Datum::Null), "{d:?}");
                out.push((
                    batch.base_offset() + i as i64,
                    ChangeType::from_byte(types[i]).unwrap(),
                    decode_row(&d),
                ));
            }
        }
    }
    (out, ids)
}

#[test]
fn a_changelog_of_two_schema_ids_is_compacted_at_the_latest_and_rebuilds_the_table() {
    let encoder = Encoder::new();
    let mut bucket = Bucket::new(&BTreeMap::new());
    let mut model = BTreeMap::new();
    let mut clock = 1_000;
    let (engine, tablet) = bucket.open();
    let mut round = 0;
    while tablet.log().sealed_segments().len() < 2 {
        write(
            &tablet,
            &encoder,
            &random_batches(round, 50, 40),
            &mut clock,
            &mut model,
        );
        round += 1;
    }
    // ALTER TABLE: the tablet takes the new schema in flight; a writer of
    // the old schema id goes on, its changelog now at schema 2.
    let evolved = evolved_table();
    tablet.set_table(Arc::clone(&evolved));
    while tablet.log().sealed_segments().len() < 4 {
        write(
            &tablet,
            &encoder,
            &random_batches(round, 50, 40),
            &mut clock,
            &mut model,
        );
        round += 1;
    }
    let log = Arc::clone(tablet.log());
    let (before, ids) = read_changelog_of_every_schema(&log, &evolved);
    assert!(ids.contains(&1) && ids.contains(&2), "{ids:?}");
    assert_eq!(materialise(&before), model);

    let report = compact_done(&tablet, &options(i64::MAX / 4), clock + 10);
    let (after, ids) = read_changelog_of_every_schema(&log, &evolved);
    assert_eq!(materialise(&after), model, "{report:?}");
    // The compacted range was rewritten at the current schema id.
    let rewritten: Vec<i16> = {
        let mut ids = Vec::new();
        let mut next = 0;
        while next < report.end_offset {
            let read = log.read(next, 64 << 10).unwrap();
            for batch in LogBatches::new(&read.records) {
                let batch = batch.unwrap();
                next = batch.next_offset();
                if batch.base_offset() < report.end_offset && batch.record_count() > 0 {
                    ids.push(batch.schema_id());
                }
            }
        }
        ids
    };
    assert!(rewritten.iter().all(|&id| id == 2), "{rewritten:?}");
    assert!(ids.contains(&2));

    // Reopened with the store wiped: the replay reads both schema ids.
    drop(tablet);
    drop(engine);
    bucket.wipe_store();
    bucket.table = evolved;
    let (_engine, tablet) = bucket.open();
    let mut state = BTreeMap::new();
    let table = tablet.table();
    tablet
        .scan_prefix(&[], |value| {
            let id = i16::from_le_bytes([value[0], value[1]]);
            let rows = &table.schema_by_id(id).unwrap().rows;
            let mut d = Vec::new();
            rows.decode(&value[2..], &mut d).unwrap();
            let row = decode_row(&d);
            state.insert(row.0, row);
            true
        })
        .unwrap();
    assert_eq!(state, model);
}

/// `k INT NOT NULL, tags ARRAY<INT>, attrs MAP<STRING NOT NULL, BIGINT>,
/// inner ROW<a INT, b STRING>`, keyed by `k`: nested value columns.
fn nested_schema() -> Arc<Schema> {
    Arc::new(
        Schema::builder()
            .column("k", DataType::int().with_nullable(false))
            .column("tags", DataType::array(DataType::int()))
            .column(
                "attrs",
                DataType::map(DataType::string().with_nullable(false), DataType::bigint()),
            )
            .column(
                "inner",
                DataType::row(vec![
                    DataField::new("a", DataType::int()),
                    DataField::new("b", DataType::string()),
                ]),
            )
            .primary_key(["k"])
            .build()
            .unwrap(),
    )
}

fn nested_row_type() -> Vec<DataType> {
    nested_schema()
        .columns()
        .iter()
        .map(|c| c.data_type.clone())
        .collect()
}

/// The COMPACTED row an upsert of `(k, v, s)` writes to the nested table:
/// nested values derived from `v` and `s`, NULL ones (whole and inside)
/// among them.
fn nested_row(k: i32, v: i64, s: u8) -> Vec<u8> {
    let int = NestedField::of(&DataType::int()).unwrap();
    let key = NestedField::of(&DataType::string().with_nullable(false)).unwrap();
    let big = NestedField::of(&DataType::bigint()).unwrap();
    let n = v as i32;
    let mut tags = Vec::new();
    write_array(
        &int,
        &[Datum::Int(n), Datum::Null, Datum::Int(k)][..usize::from(s % 3) + 1],
        &mut tags,
    )
    .unwrap();
    let mut attrs = Vec::new();
    write_map(
        &key,
        &big,
        &[
            Datum::String(NAMES[s as usize]),
            Datum::String("second key"),
        ],
        &[Datum::BigInt(v), Datum::Null],
        &mut attrs,
    )
    .unwrap();
    let mut inner = Vec::new();
    RowCodec::new(RowFormat::Compacted, &[DataType::int(), DataType::string()])
        .unwrap()
        .encode(
            &[Datum::Int(n), Datum::String(NAMES[(s as usize + 1) % 4])],
            &mut inner,
        )
        .unwrap();
    let datums = [
        Datum::Int(k),
        if v % 5 == 0 {
            Datum::Null
        } else {
            Datum::Array(&tags)
        },
        if v % 7 == 0 {
            Datum::Null
        } else {
            Datum::Map(&attrs)
        },
        if s == 2 {
            Datum::Null
        } else {
            Datum::Row(&inner)
        },
    ];
    let mut out = Vec::new();
    RowCodec::new(RowFormat::Compacted, &nested_row_type())
        .unwrap()
        .encode(&datums, &mut out)
        .unwrap();
    out
}

fn put_nested(tablet: &KvTablet, ops: &[Op], now_ms: i64, model: &mut BTreeMap<i32, Vec<u8>>) {
    let keys = KeyEncoder::new(&nested_row_type(), &[0]).unwrap();
    let mut b = KvBatchBuilder::start(Vec::new(), 1, -1, -1);
    for op in ops {
        let k = match *op {
            Op::Upsert { k, .. } | Op::Delete { k } => k,
        };
        let mut key = Vec::new();
        keys.encode_datums(
            &[Datum::Int(k), Datum::Null, Datum::Null, Datum::Null],
            &mut key,
        )
        .unwrap();
        match *op {
            Op::Upsert { k, v, s } => {
                let row = nested_row(k, v, s);
                b.append_upsert(&key, &row).unwrap();
                model.insert(k, row);
            }
            Op::Delete { k } => {
                b.append_delete(&key).unwrap();
                model.remove(&k);
            }
        }
    }
    let outcome = tablet
        .put(b.finish(), &[], AggMode::Default, now_ms)
        .unwrap();
    tablet.log().wait_durable(outcome.end_offset - 1).unwrap();
    tablet.flush(tablet.log().high_watermark()).unwrap();
}

/// The nested table's changelog materialised from `from`: key → the row's
/// COMPACTED bytes, each changelog row read back with `read_row_into` and
/// encoded again (the encoding is canonical, so equal rows are equal bytes).
fn nested_changelog(log: &LogTablet, arrow: &arrow_schema::SchemaRef) -> BTreeMap<i32, Vec<u8>> {
    let rows = RowCodec::new(RowFormat::Compacted, &nested_row_type()).unwrap();
    let mut state = BTreeMap::new();
    let mut next = log.log_start_offset();
    let mut scratch = Vec::new();
    while next < log.high_watermark() {
        let read = log.read(next, 64 << 10).unwrap();
        for batch in LogBatches::new(&read.records) {
            let batch = batch.unwrap();
            next = batch.next_offset();
            if batch.record_count() == 0 {
                continue;
            }
            let decoded = decode_log_batch(
                &read.records.slice_ref(batch.as_bytes()).into(),
                arrow.clone(),
            )
            .unwrap();
            let types = decoded.change_types.unwrap();
            let mut nested = NestedColumns::of(&decoded.records).unwrap();
            for i in 0..decoded.records.num_rows() {
                let mut d = Vec::new();
                read_row_into(&decoded.records, i, &mut nested, &mut scratch, &mut d).unwrap();
                let Datum::Int(k) = d[0] else { panic!("{d:?}") };
                match ChangeType::from_byte(types[i]).unwrap() {
                    ChangeType::Insert | ChangeType::UpdateAfter => {
                        let mut bytes = Vec::new();
                        rows.encode(&d, &mut bytes).unwrap();
                        state.insert(k, bytes);
                    }
                    ChangeType::Delete => {
                        state.remove(&k);
                    }
                    _ => {}
                }
            }
        }
    }
    state
}

/// Every (key → stored row bytes) of the nested table's KV store.
fn nested_store(tablet: &KvTablet) -> BTreeMap<i32, Vec<u8>> {
    let rows = RowCodec::new(RowFormat::Compacted, &nested_row_type()).unwrap();
    let mut state = BTreeMap::new();
    tablet
        .scan_prefix(&[], |value| {
            let mut d = Vec::new();
            rows.decode(&value[2..], &mut d).unwrap();
            let Datum::Int(k) = d[0] else { panic!("{d:?}") };
            state.insert(k, value[2..].to_vec());
            true
        })
        .unwrap();
    state
}

#[test]
fn nested_value_columns_are_compacted_and_replayed_to_the_same_rows() {
    for (name, config) in [
        ("default-full", props(&[])),
        ("first-row", props(&[("table.merge-engine", "first_row")])),
        (
            "aggregation",
            props(&[("table.merge-engine", "aggregation")]),
        ),
    ] {
        let table = KvTable::new(nested_schema(), 1, &[], &["k".to_owned()], &config).unwrap();
        let bucket = Bucket {
            sim: SimFs::new(),
            kv_dir: tempfile::tempdir().unwrap(),
            table: Arc::new(table),
        };
        let (engine, tablet) = bucket.open();
        let arrow = tablet.table().arrow_schema.clone();
        let mut model = BTreeMap::new();
        let mut clock = 1_000;
        let mut round = 0;
        while tablet.log().sealed_segments().len() < 3 {
            for ops in random_batches(round, 50, 30) {
                clock += 1;
                put_nested(&tablet, &ops, clock, &mut model);
            }
            round += 1;
        }
        let state = nested_store(&tablet);
        if name == "default-full" {
            assert_eq!(state, model, "{name}: the store holds the rows as written");
        }
        assert_eq!(nested_changelog(tablet.log(), &arrow), state, "{name}");
        let report = compact_done(&tablet, &options(i64::MAX / 4), clock + 10);
        assert!(report.end_offset > 0, "{name}: {report:?}");
        assert_eq!(
            nested_changelog(tablet.log(), &arrow),
            state,
            "{name}: the compacted changelog"
        );
        // The store wiped: rebuilt by replaying the compacted changelog.
        drop(tablet);
        drop(engine);
        bucket.wipe_store();
        let (_engine, tablet) = bucket.open();
        assert_eq!(nested_store(&tablet), state, "{name}: replayed");
    }
}
