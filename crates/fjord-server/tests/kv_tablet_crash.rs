//! A primary-key bucket's KV tablet under restarts and power cuts, driven by
//! random sequences of upserts, deletes and partial updates for each merge
//! engine and changelog image:
//! - after every acknowledged batch, the KV store equals the state the
//!   changelog materialises to (`+I`/`+U` put, `-D` delete), and, for the
//!   default engine, an independent model of the table;
//! - at every step the process is "killed" — the changelog's simulated disk
//!   ([`SimFs`]) keeps only what was synced, torn per sector, and the KV
//!   store is kept as it was, wiped, or rolled back to an earlier state (its
//!   journal is never synced) — and the reopened tablet holds exactly the
//!   acknowledged writes, plus at most the one batch in flight at the cut;
//! - a reference tablet that never crashes ends in the same state.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use fjord_format::arrow_log::{decode_log_batch, ChangeType};
use fjord_format::datum::Datum;
use fjord_format::kv::batch::KvBatchBuilder;
use fjord_format::log_batch::LogBatches;
use fjord_format::row::key::KeyEncoder;
use fjord_format::row::{RowCodec, RowFormat};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use fjord_server::kv::columns::read_row;
use fjord_server::kv::merge::AggMode;
use fjord_server::kv::tablet::RowCacheBudget;
use fjord_server::kv::{KvTable, KvTablet};
use fjord_server::replica::TableBucket;
use fjord_storage::fs::sim::SimFs;
use fjord_storage::kv::{KvEngine, KvEngineOptions, KV_DIR};
use fjord_storage::{LogConfig, LogTablet};
use proptest::prelude::*;

const BUCKET: TableBucket = TableBucket {
    table_id: 1,
    partition_id: None,
    bucket_id: 0,
};

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

/// The table options of each configuration tested.
fn configs() -> Vec<(&'static str, BTreeMap<String, String>)> {
    let props = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>()
    };
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

/// One write of a batch.
#[derive(Clone, Debug)]
enum Op {
    Upsert {
        k: i32,
        v: i64,
        s: u8,
    },
    Delete {
        k: i32,
    },
    /// Partial update of (k, v): `s` untouched.
    Partial {
        k: i32,
        v: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..6i32, -5..50i64, 0..4u8).prop_map(|(k, v, s)| Op::Upsert { k, v, s }),
        2 => (0..6i32).prop_map(|k| Op::Delete { k }),
        1 => (0..6i32, -5..50i64).prop_map(|(k, v)| Op::Partial { k, v }),
    ]
}

/// A batch: its ops all full-row or all partial (one request's target
/// columns apply to all its records).
fn batches() -> impl Strategy<Value = Vec<Vec<Op>>> {
    prop::collection::vec(prop::collection::vec(op(), 1..5), 1..10)
}

struct Encoder {
    rows: RowCodec,
    keys: KeyEncoder,
}

const NAMES: [&str; 4] = ["a", "bb", "", "dddd"];

impl Encoder {
    fn new() -> Self {
        Self {
            rows: RowCodec::new(RowFormat::Compacted, &row_type()).unwrap(),
            keys: KeyEncoder::new(&row_type(), &[0]).unwrap(),
        }
    }

    /// The KV batch of `ops` and its target columns (empty: full rows).
    fn batch(&self, ops: &[Op], partial: bool) -> Vec<u8> {
        let mut b = KvBatchBuilder::start(Vec::new(), 1, -1, -1);
        for op in ops {
            let (k, row) = match *op {
                Op::Upsert { k, v, s } => (
                    k,
                    Some([
                        Datum::Int(k),
                        Datum::BigInt(v),
                        Datum::String(NAMES[s as usize]),
                    ]),
                ),
                Op::Partial { k, v } => (k, Some([Datum::Int(k), Datum::BigInt(v), Datum::Null])),
                Op::Delete { k } => (k, None),
            };
            let mut key = Vec::new();
            self.keys
                .encode_datums(&[Datum::Int(k), Datum::Null, Datum::Null], &mut key)
                .unwrap();
            match row {
                Some(row) => {
                    let mut bytes = Vec::new();
                    self.rows.encode(&row, &mut bytes).unwrap();
                    b.append_upsert(&key, &bytes).unwrap();
                }
                None => b.append_delete(&key).unwrap(),
            }
        }
        let _ = partial;
        b.finish().to_vec()
    }
}

/// A table row as the tests compare it.
type Row = (i64, Option<i64>, Option<String>);

/// Every (key → row) the store holds, decoded.
fn store_state(tablet: &KvTablet) -> BTreeMap<i32, Row> {
    let rows = RowCodec::new(RowFormat::Compacted, &row_type()).unwrap();
    let mut state = BTreeMap::new();
    tablet
        .scan_prefix(&[], |value| {
            let mut d = Vec::new();
            rows.decode(&value[2..], &mut d).unwrap();
            let row = decode_row(&d);
            state.insert(row.0 as i32, row);
            true
        })
        .unwrap();
    state
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

/// The state the changelog materialises to.
fn changelog_state(tablet: &KvTablet) -> BTreeMap<i32, Row> {
    let log = tablet.log();
    let arrow = tablet.table().arrow_schema.clone();
    let mut state = BTreeMap::new();
    let read = log.read(log.log_start_offset(), usize::MAX / 2).unwrap();
    for batch in LogBatches::new(&read.records) {
        let batch = batch.unwrap();
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
            let row = decode_row(&d);
            match ChangeType::from_byte(types[i]).unwrap() {
                ChangeType::Insert | ChangeType::UpdateAfter => {
                    state.insert(row.0 as i32, row);
                }
                ChangeType::Delete => {
                    state.remove(&(row.0 as i32));
                }
                _ => {}
            }
        }
    }
    state
}

/// Every row of the changelog, in order: (change type byte, row).
fn changelog_rows(tablet: &KvTablet) -> Vec<(u8, Row)> {
    let log = tablet.log();
    let arrow = tablet.table().arrow_schema.clone();
    let mut rows = Vec::new();
    let read = log.read(log.log_start_offset(), usize::MAX / 2).unwrap();
    for batch in LogBatches::new(&read.records) {
        let batch = batch.unwrap();
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
            rows.push((types[i], decode_row(&d)));
        }
    }
    rows
}

/// The changelog the default engine with the FULL image emits for `ops`
/// over `model` (updated as it goes), written independently of the server:
/// `+I` for a new key, `-U old, +U new` for an existing one, `-D old` for a
/// delete of a present key, nothing for a delete of an absent one.
fn default_full_changelog(model: &mut BTreeMap<i32, Row>, ops: &[Op], out: &mut Vec<(u8, Row)>) {
    for op in ops {
        let k = match *op {
            Op::Upsert { k, .. } | Op::Delete { k } | Op::Partial { k, .. } => k,
        };
        let old = model.get(&k).cloned();
        default_model(model, std::slice::from_ref(op));
        let new = model.get(&k).cloned();
        match (old, new) {
            (None, Some(new)) => out.push((ChangeType::Insert as u8, new)),
            (Some(old), Some(new)) => {
                out.push((ChangeType::UpdateBefore as u8, old));
                out.push((ChangeType::UpdateAfter as u8, new));
            }
            (Some(old), None) => out.push((ChangeType::Delete as u8, old)),
            (None, None) => {}
        }
    }
}

/// Every key's row through the lookup path (`KvTablet::get`).
fn lookups(tablet: &KvTablet) -> BTreeMap<i32, Row> {
    let rows = RowCodec::new(RowFormat::Compacted, &row_type()).unwrap();
    let encoder = Encoder::new();
    let mut state = BTreeMap::new();
    for k in 0..6 {
        let mut key = Vec::new();
        encoder
            .keys
            .encode_datums(&[Datum::Int(k), Datum::Null, Datum::Null], &mut key)
            .unwrap();
        if let Some(value) = tablet.get(&key).unwrap() {
            let mut d = Vec::new();
            rows.decode(&value[2..], &mut d).unwrap();
            state.insert(k, decode_row(&d));
        }
    }
    state
}

/// The default engine's table after `ops`, written independently of the
/// server's merger: full upserts replace, deletes remove, partial updates
/// set `v` and keep `s` (NULL for a new key).
fn default_model(model: &mut BTreeMap<i32, Row>, ops: &[Op]) {
    for op in ops {
        match *op {
            Op::Upsert { k, v, s } => {
                model.insert(
                    k,
                    (i64::from(k), Some(v), Some(NAMES[s as usize].to_owned())),
                );
            }
            Op::Delete { k } => {
                model.remove(&k);
            }
            Op::Partial { k, v } => {
                let s = model.get(&k).and_then(|r| r.2.clone());
                model.insert(k, (i64::from(k), Some(v), s));
            }
        }
    }
}

/// Everything one tablet of the test owns.
struct Bucket {
    sim: SimFs,
    kv_dir: tempfile::TempDir,
    table: Arc<KvTable>,
    write_buffer_bytes: usize,
    row_cache_bytes: usize,
}

impl Bucket {
    fn new(
        properties: &BTreeMap<String, String>,
        (write_buffer_bytes, row_cache_bytes): (usize, usize),
    ) -> Self {
        Self {
            write_buffer_bytes,
            row_cache_bytes,
            sim: SimFs::new(),
            kv_dir: tempfile::tempdir().unwrap(),
            table: Arc::new(KvTable::new(schema(), 1, &[], &["k".to_owned()], properties).unwrap()),
        }
    }

    fn open(&self) -> (KvEngine, KvTablet) {
        self.open_with_budget(Arc::new(RowCacheBudget::new(self.row_cache_bytes)))
    }

    /// [`Bucket::open`] with the row cache taken from `budget`.
    fn open_with_budget(&self, budget: Arc<RowCacheBudget>) -> (KvEngine, KvTablet) {
        let log = Arc::new(
            LogTablet::open(
                Arc::new(self.sim.clone()),
                Path::new("/log/1/log-0"),
                LogConfig::default(),
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
            self.write_buffer_bytes,
            budget,
        )
        .unwrap();
        (engine, tablet)
    }
}

/// Puts one batch and makes it durable and applied, as an acks=all PutKv
/// does; `Err` when the server refuses it (nothing written).
fn put_acked(tablet: &KvTablet, encoder: &Encoder, ops: &[Op]) -> Result<(), String> {
    let partial = matches!(ops[0], Op::Partial { .. });
    let ops: Vec<Op> = ops
        .iter()
        .filter(|op| matches!(op, Op::Partial { .. }) == partial)
        .cloned()
        .collect();
    let targets: &[i32] = if partial { &[0, 1] } else { &[] };
    let outcome = tablet
        .put(&encoder.batch(&ops, partial), targets, AggMode::Default, 0)
        .map_err(|e| e.to_string())?;
    tablet.log().wait_durable(outcome.end_offset - 1).unwrap();
    tablet.flush(tablet.log().high_watermark()).unwrap();
    Ok(())
}

/// Puts one batch of full rows and waits until its changelog is durable,
/// without committing it (it stays in the pre-write buffer until a flush);
/// returns the changelog offset after it.
fn put_durable(tablet: &KvTablet, encoder: &Encoder, ops: &[Op]) -> i64 {
    let outcome = tablet
        .put(&encoder.batch(ops, false), &[], AggMode::Default, 0)
        .unwrap();
    tablet.log().wait_durable(outcome.end_offset - 1).unwrap();
    outcome.end_offset
}

/// How the KV store comes through a crash.
#[derive(Clone, Copy, Debug)]
enum KvFate {
    /// As the process left it.
    Kept,
    /// Gone entirely.
    Wiped,
    /// Back at the state of an earlier step (its unsynced journal lost).
    RolledBack,
    /// As the process left it, but its journal back at the bytes of an
    /// earlier sync (what a power cut does: the written tables are synced,
    /// the journal never is).
    JournalLost,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Puts back every journal file of the KV engine under the data dir `dir`
/// (fjall keeps them at the top of its directory, `kv/<n>.jnl`) as
/// `synced`, a copy of the data dir at a sync, holds it; journals begun
/// later go.
fn restore_journals(synced: &Path, dir: &Path) {
    let engine_dir = dir.join(KV_DIR);
    let mut journals = 0;
    for entry in std::fs::read_dir(&engine_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "jnl") {
            continue;
        }
        journals += 1;
        let old = synced.join(KV_DIR).join(path.file_name().unwrap());
        if old.exists() {
            std::fs::copy(&old, &path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    assert!(journals > 0, "the engine under {dir:?} has no journal");
}

/// The tablet's live row count, where its table keeps one, must be the
/// number of rows it holds.
fn assert_row_count(tablet: &KvTablet, state: &BTreeMap<i32, Row>, what: &str) {
    if let Some(count) = tablet.row_count() {
        assert_eq!(count, state.len() as i64, "{what}: row count");
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    config: &BTreeMap<String, String>,
    write_buffer_bytes: (usize, usize),
    name: &str,
    batches: &[Vec<Op>],
    crash_at: usize,
    fate: KvFate,
    in_flight: bool,
    seed: u64,
) {
    let encoder = Encoder::new();
    let default_engine = name.starts_with("default");
    // The reference: never crashes.
    let reference = Bucket::new(config, write_buffer_bytes);
    let (_ref_engine, ref_tablet) = reference.open();
    // The one that crashes after `crash_at` acknowledged batches.
    let bucket = Bucket::new(config, write_buffer_bytes);
    let mut model = BTreeMap::new();
    let mut changelog_model = BTreeMap::new();
    let mut expected_changelog: Vec<(u8, Row)> = Vec::new();
    let rollback = tempfile::tempdir().unwrap();
    let mut after_in_flight = None;
    {
        let (mut engine, mut tablet) = bucket.open();
        for (step, ops) in batches.iter().enumerate() {
            if step == crash_at.min(batches.len()) / 2 {
                // Copied with the engine shut, so no background compaction
                // adds or deletes a table mid-copy (the copy stands for the
                // disk at one instant); the reopen replays the changelog
                // into the committed layer, as any restart does.
                engine.persist().unwrap();
                drop(tablet);
                drop(engine);
                copy_dir(bucket.kv_dir.path(), rollback.path());
                (engine, tablet) = bucket.open();
            }
            if step == crash_at {
                if in_flight {
                    // Appended, never acknowledged: may or may not survive.
                    let partial = matches!(ops[0], Op::Partial { .. });
                    let kept: Vec<Op> = ops
                        .iter()
                        .filter(|op| matches!(op, Op::Partial { .. }) == partial)
                        .cloned()
                        .collect();
                    let targets: &[i32] = if partial { &[0, 1] } else { &[] };
                    let _ =
                        tablet.put(&encoder.batch(&kept, partial), targets, AggMode::Default, 0);
                    let _ = put_acked(&ref_tablet, &encoder, ops);
                    after_in_flight = Some(store_state(&ref_tablet));
                }
                break;
            }
            let ours = put_acked(&tablet, &encoder, ops);
            let theirs = put_acked(&ref_tablet, &encoder, ops);
            assert_eq!(
                ours.is_ok(),
                theirs.is_ok(),
                "{name}: the same batch, the same verdict"
            );
            if ours.is_ok() && default_engine {
                let kept: Vec<Op> = {
                    let partial = matches!(ops[0], Op::Partial { .. });
                    ops.iter()
                        .filter(|op| matches!(op, Op::Partial { .. }) == partial)
                        .cloned()
                        .collect()
                };
                default_model(&mut model, &kept);
                default_full_changelog(&mut changelog_model, &kept, &mut expected_changelog);
            }
            let state = store_state(&tablet);
            assert_eq!(
                state,
                changelog_state(&tablet),
                "{name} step {step}: store = changelog"
            );
            assert_eq!(
                state,
                lookups(&tablet),
                "{name} step {step}: lookups = store"
            );
            if name == "default-full" {
                assert_eq!(
                    changelog_rows(&tablet),
                    expected_changelog,
                    "{name} step {step}: the changelog Fluss emits"
                );
            }
            if default_engine {
                assert_eq!(state, model, "{name} step {step}: store = model");
            }
            assert_row_count(&tablet, &state, &format!("{name} step {step}"));
        }
        drop(tablet);
        drop(engine);
    }
    let before_crash_reference = if crash_at < batches.len() && in_flight {
        after_in_flight.clone()
    } else {
        None
    };
    bucket.sim.crash(seed);
    match fate {
        KvFate::Kept => {}
        KvFate::Wiped => {
            std::fs::remove_dir_all(bucket.kv_dir.path()).unwrap();
            std::fs::create_dir_all(bucket.kv_dir.path()).unwrap();
        }
        KvFate::RolledBack => {
            std::fs::remove_dir_all(bucket.kv_dir.path()).unwrap();
            copy_dir(rollback.path(), bucket.kv_dir.path());
        }
        KvFate::JournalLost => restore_journals(rollback.path(), bucket.kv_dir.path()),
    }
    let (_engine, tablet) = bucket.open();
    let state = store_state(&tablet);
    assert_eq!(
        state,
        changelog_state(&tablet),
        "{name}: after the crash, store = changelog"
    );
    assert_eq!(
        state,
        lookups(&tablet),
        "{name}: after the crash, lookups = store"
    );
    assert_row_count(
        &tablet,
        &state,
        &format!("{name}: after the crash ({fate:?})"),
    );
    // Only WAL-image tables keep no count (as in Fluss), so the check above
    // ran for every other configuration.
    assert_eq!(
        tablet.row_count().is_some(),
        name != "default-wal",
        "{name}: which tables count rows"
    );
    // The reference holds the acknowledged batches (and, if one was in
    // flight, also a state with it): the crashed tablet holds one of them.
    let acked_reference = Bucket::new(config, write_buffer_bytes);
    let (_e, acked) = acked_reference.open();
    for ops in batches.iter().take(crash_at) {
        let _ = put_acked(&acked, &encoder, ops);
    }
    let acked_state = store_state(&acked);
    let allowed_in_flight = before_crash_reference;
    assert!(
        state == acked_state || allowed_in_flight.as_ref() == Some(&state),
        "{name} crash at {crash_at} ({fate:?}, in flight {in_flight}): {state:?} is neither the acknowledged state {acked_state:?} nor that plus the batch in flight {allowed_in_flight:?}"
    );
    // And the reference, never crashed, ends where the model does.
    if crash_at >= batches.len() {
        assert_eq!(
            state,
            store_state(&ref_tablet),
            "{name}: crashed = reference"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn acknowledged_writes_survive_any_crash(
        batches in batches(),
        crash in 0..12usize,
        fate in prop_oneof![
            Just(KvFate::Kept),
            Just(KvFate::Wiped),
            Just(KvFate::RolledBack),
            Just(KvFate::JournalLost),
        ],
        in_flight in any::<bool>(),
        seed in any::<u64>(),
        // (write buffer, row cache): every flush written to the store with
        // and without the row cache, or none until shutdown; the last, a
        // cache that holds the first few rows and is outgrown by the next
        // ones mid-run, and is off for a store reopened with more.
        write_buffer_bytes in prop_oneof![
            Just((1usize, 0usize)),
            Just((1usize, 1usize << 20)),
            Just((1usize << 20, 1usize << 20)),
            Just((1usize, 24usize)),
        ],
    ) {
        for (name, config) in configs() {
            run(&config, write_buffer_bytes, name, &batches, crash.min(batches.len()), fate, in_flight, seed);
        }
    }
}

/// The row cache follows deletes and updates once they reach the store:
/// with every flush written out and the cache on, a deleted key reads as
/// absent and an updated one as its new row, through lookups and merges.
#[test]
fn the_row_cache_follows_deletes_and_updates() {
    let config = BTreeMap::new();
    let bucket = Bucket::new(&config, (1, 1 << 20));
    let (_engine, tablet) = bucket.open();
    let encoder = Encoder::new();
    let up = |k, v| Op::Upsert { k, v, s: 0 };
    put_acked(&tablet, &encoder, &[up(1, 10), up(2, 20)]).unwrap();
    put_acked(&tablet, &encoder, &[Op::Delete { k: 1 }, up(2, 21)]).unwrap();
    let expected: BTreeMap<i32, Row> = [(2, (2, Some(21), Some("a".to_owned())))].into();
    assert_eq!(lookups(&tablet), expected);
    assert_eq!(store_state(&tablet), expected);
    // A merge reads the cache too: re-inserting the deleted key is an
    // insert, not an update of a stale row.
    put_acked(&tablet, &encoder, &[up(1, 11)]).unwrap();
    let rows = changelog_rows(&tablet);
    assert_eq!(rows.last().map(|r| r.0), Some(ChangeType::Insert as u8));
}

/// A flush that commits an earlier batch leaves a key's newer pending value
/// in the pre-write buffer: the next merge of the key reads that value, not
/// the committed older one, so the changelog's before-images follow the
/// writes in order even while later batches wait to be committed; a key
/// only the committed batch wrote is read from the committed layer.
#[test]
fn flushing_an_earlier_batch_keeps_a_later_pending_value() {
    let config = BTreeMap::new();
    let bucket = Bucket::new(&config, (1 << 20, 1 << 20));
    let (_engine, tablet) = bucket.open();
    let encoder = Encoder::new();
    let up = |k, v| Op::Upsert { k, v, s: 0 };
    let put = |ops: &[Op]| put_durable(&tablet, &encoder, ops);
    let first_end = put(&[up(1, 10), up(2, 5)]);
    put(&[up(1, 20)]);
    // Only the first batch is committed; the second still pends.
    tablet.flush(first_end).unwrap();
    put(&[up(2, 6), up(1, 30)]);
    tablet.flush(tablet.log().high_watermark()).unwrap();
    let row = |k, v| (k, Some(v), Some("a".to_owned()));
    let expected = vec![
        (ChangeType::Insert as u8, row(1, 10)),
        (ChangeType::Insert as u8, row(2, 5)),
        (ChangeType::UpdateBefore as u8, row(1, 10)),
        (ChangeType::UpdateAfter as u8, row(1, 20)),
        (ChangeType::UpdateBefore as u8, row(2, 5)),
        (ChangeType::UpdateAfter as u8, row(2, 6)),
        (ChangeType::UpdateBefore as u8, row(1, 20)),
        (ChangeType::UpdateAfter as u8, row(1, 30)),
    ];
    assert_eq!(changelog_rows(&tablet), expected);
    assert_eq!(lookups(&tablet), [(1, row(1, 30)), (2, row(2, 6))].into());
}

/// A batch refused part-way (its fifth record's row does not decode)
/// leaves the pre-write buffer exactly as before it: a key it staged first
/// is absent again, and keys it restaged (once, or twice) hold the earlier
/// pending batch's values again, so the next batch's changelog is `+I` for
/// the one and `-U`/`+U` from the earlier values for the others.
#[test]
fn a_refused_batch_leaves_the_buffer_as_it_was() {
    let config = BTreeMap::new();
    let bucket = Bucket::new(&config, (1 << 20, 1 << 20));
    let (_engine, tablet) = bucket.open();
    let encoder = Encoder::new();
    let up = |k, v| Op::Upsert { k, v, s: 0 };
    let put = |ops: &[Op]| put_durable(&tablet, &encoder, ops);
    // Pending, not committed: only the buffer knows keys 1 and 4.
    put(&[up(1, 10), up(4, 40)]);
    let mut refused = KvBatchBuilder::start(Vec::new(), 1, -1, -1);
    for op in [up(1, 99), up(2, 99), up(1, 98), up(4, 97)] {
        let one = encoder.batch(&[op], false);
        let batch = fjord_format::kv::batch::KvBatch::validate(&one).unwrap();
        let record = batch.records().next().unwrap();
        refused
            .append_upsert(record.key, record.row.unwrap())
            .unwrap();
    }
    let mut key = Vec::new();
    encoder
        .keys
        .encode_datums(&[Datum::Int(3), Datum::Null, Datum::Null], &mut key)
        .unwrap();
    refused.append_upsert(&key, &[0xff]).unwrap();
    let e = tablet
        .put(refused.finish(), &[], AggMode::Default, 0)
        .unwrap_err();
    assert!(e.to_string().contains("record 4"), "{e}");
    put(&[up(1, 20), up(2, 30), up(4, 41)]);
    tablet.flush(tablet.log().high_watermark()).unwrap();
    let row = |k, v| (k, Some(v), Some("a".to_owned()));
    let expected = vec![
        (ChangeType::Insert as u8, row(1, 10)),
        (ChangeType::Insert as u8, row(4, 40)),
        (ChangeType::UpdateBefore as u8, row(1, 10)),
        (ChangeType::UpdateAfter as u8, row(1, 20)),
        (ChangeType::Insert as u8, row(2, 30)),
        (ChangeType::UpdateBefore as u8, row(4, 40)),
        (ChangeType::UpdateAfter as u8, row(4, 41)),
    ];
    assert_eq!(changelog_rows(&tablet), expected);
    let state = [(1, row(1, 20)), (2, row(2, 30)), (4, row(4, 41))].into();
    assert_eq!(lookups(&tablet), state);
    assert_eq!(tablet.row_count(), Some(3));
}

/// The row cache's share of the server's budget follows the bucket's rows
/// through inserts, a same-size update and deletes, back to nothing, and
/// comes back whole when the tablet closes. (An update once counted its
/// key as freed without taking it again, so the delete after it took more
/// than the cache held: an overflow.)
#[test]
fn the_row_cache_budget_follows_inserts_updates_and_deletes() {
    let bucket = Bucket::new(&BTreeMap::new(), (1, 1 << 20));
    let budget = Arc::new(RowCacheBudget::new(1 << 20));
    let (_engine, tablet) = bucket.open_with_budget(Arc::clone(&budget));
    let encoder = Encoder::new();
    let up = |k, v| Op::Upsert { k, v, s: 0 };
    put_acked(&tablet, &encoder, &[up(4, 0)]).unwrap();
    let one_row = budget.used();
    assert!(one_row > 0, "a cached row takes from the budget");
    put_acked(&tablet, &encoder, &[up(4, 1)]).unwrap();
    assert_eq!(budget.used(), one_row, "an update of the same size");
    put_acked(&tablet, &encoder, &[up(5, 2)]).unwrap();
    assert_eq!(budget.used(), 2 * one_row);
    put_acked(&tablet, &encoder, &[Op::Delete { k: 4 }]).unwrap();
    assert_eq!(budget.used(), one_row);
    put_acked(&tablet, &encoder, &[Op::Delete { k: 5 }]).unwrap();
    assert_eq!(budget.used(), 0);
    put_acked(&tablet, &encoder, &[up(6, 3)]).unwrap();
    drop(tablet);
    assert_eq!(budget.used(), 0, "a closed tablet gives its share back");
}
