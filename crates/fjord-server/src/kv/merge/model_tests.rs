//! Model-based test: random sequences of upserts, deletes and partial
//! writes over a few keys, per engine, delete behaviour and changelog
//! image, run through [`RowMerger`] against a small in-memory store, and
//! compared with a plain model of the table and of the changelog Fluss
//! emits (`+I`, `-U`, `+U`, `-D`, as `KvTablet.putAsLeader` writes them).
//!
//! The model is written from the semantics (see the module doc of
//! `kv::merge`), not from the merger's code: one match per engine over
//! owned values.

use std::collections::BTreeMap;

use fjord_format::DataType;
use proptest::prelude::*;

use super::tests::{agg_col, col, datums, props, schema, Collect, Val};
use super::*;

/// One changelog row, or a refused record.
#[derive(Clone, Debug, PartialEq)]
enum Change {
    Insert(Vec<Val>),
    UpdateBefore(Vec<Val>),
    UpdateAfter(Vec<Val>),
    Delete(Vec<Val>),
    Refused,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Default,
    FirstRow,
    Versioned,
    Aggregation,
}

#[derive(Clone, Debug)]
struct Config {
    engine: Engine,
    delete: &'static str,
    wal: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Upsert {
        row: [Val; 3],
        targets: Option<Vec<usize>>,
    },
    Delete {
        key: i32,
        targets: Option<Vec<usize>>,
    },
}

/// Table: id INT key, a BIGINT, b STRING. For `versioned`, `a` is the
/// version; for `aggregation`, `a` is summed and `b` is a `;` listagg.
fn table(config: &Config) -> (Schema, MergeOptions) {
    let schema = match config.engine {
        Engine::Aggregation => schema(
            vec![
                col("id", DataType::int()),
                agg_col("a", DataType::bigint(), "sum", &[]),
                agg_col("b", DataType::string(), "listagg", &[("delimiter", ";")]),
            ],
            &["id"],
        ),
        _ => schema(
            vec![
                col("id", DataType::int()),
                col("a", DataType::bigint()),
                col("b", DataType::string()),
            ],
            &["id"],
        ),
    };
    let mut pairs = vec![(TABLE_DELETE_BEHAVIOR, config.delete)];
    match config.engine {
        Engine::Default => {}
        Engine::FirstRow => pairs.push((TABLE_MERGE_ENGINE, "first_row")),
        Engine::Versioned => {
            pairs.push((TABLE_MERGE_ENGINE, "versioned"));
            pairs.push((TABLE_MERGE_ENGINE_VERSION_COLUMN, "a"));
        }
        Engine::Aggregation => pairs.push((TABLE_MERGE_ENGINE, "aggregation")),
    }
    if config.wal {
        pairs.push((TABLE_CHANGELOG_IMAGE, "WAL"));
    }
    let options = MergeOptions::from_table(&schema, &props(&pairs)).unwrap();
    (schema, options)
}

// ---- the system under test: RowMerger over a map, changelog built from outcomes

fn run(config: &Config, ops: &[Op]) -> (Vec<Change>, BTreeMap<i32, Vec<Val>>) {
    let (schema, options) = table(config);
    let mut store: BTreeMap<i32, Vec<Val>> = BTreeMap::new();
    let mut log = Vec::new();
    for op in ops {
        let (key, targets) = match op {
            Op::Upsert { row, targets } => (key_of(row), targets),
            Op::Delete { key, targets } => (*key, targets),
        };
        let Ok(mut merger) =
            RowMerger::new(&schema, &options, targets.as_deref(), AggMode::Default)
        else {
            log.push(Change::Refused);
            continue;
        };
        let mut sink = Collect::default();
        let stored = store.get(&key).cloned();
        let old_datums = stored.as_deref().map(datums);
        let result = match op {
            Op::Upsert { row, .. } => {
                let old = if merger.needs_old_value_for_upsert() {
                    old_datums.as_deref()
                } else {
                    None
                };
                let new = datums(row);
                let result = merger.upsert(old, &new, &mut sink);
                if result.is_ok() && merger.passes_new_row_through() {
                    sink.0 = row.to_vec();
                }
                result
            }
            Op::Delete { .. } => merger.delete(old_datums.as_deref(), &mut sink),
        };
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(_) => {
                log.push(Change::Refused);
                continue;
            }
        };
        match outcome {
            MergeOutcome::NoChange => {}
            MergeOutcome::Insert => {
                log.push(Change::Insert(sink.0.clone()));
                store.insert(key, sink.0);
            }
            MergeOutcome::Update => {
                if !config.wal {
                    log.push(Change::UpdateBefore(
                        stored.expect("update of a stored row"),
                    ));
                }
                log.push(Change::UpdateAfter(sink.0.clone()));
                store.insert(key, sink.0);
            }
            MergeOutcome::Delete => {
                log.push(Change::Delete(stored.expect("delete of a stored row")));
                store.remove(&key);
            }
        }
    }
    (log, store)
}

fn key_of(row: &[Val]) -> i32 {
    match row[0] {
        Val::I32(k) => k,
        _ => unreachable!(),
    }
}

// ---- the model

fn is_target(targets: &Option<Vec<usize>>, column: usize) -> bool {
    targets.as_ref().is_none_or(|t| t.contains(&column))
}

fn model(config: &Config, ops: &[Op]) -> (Vec<Change>, BTreeMap<i32, Vec<Val>>) {
    let mut table: BTreeMap<i32, Vec<Val>> = BTreeMap::new();
    let mut log = Vec::new();
    let full_image = !config.wal;
    for op in ops {
        let targets = match op {
            Op::Upsert { targets, .. } | Op::Delete { targets, .. } => targets,
        };
        // Partial writes: only the default and aggregation engines, and the
        // key must be a target.
        if let Some(t) = targets {
            let engine_takes_them = matches!(config.engine, Engine::Default | Engine::Aggregation);
            if !engine_takes_them || !t.contains(&0) {
                log.push(Change::Refused);
                continue;
            }
        }
        match op {
            Op::Upsert { row, .. } => {
                let key = key_of(row);
                let new = row.to_vec();
                let old = table.get(&key).cloned();
                // WAL + default engine + full row: old value not read, always +U.
                if config.wal && config.engine == Engine::Default && targets.is_none() {
                    log.push(Change::UpdateAfter(new.clone()));
                    table.insert(key, new);
                    continue;
                }
                let Some(old) = old else {
                    let inserted = if config.engine == Engine::Default {
                        (0..3)
                            .map(|c| {
                                if is_target(targets, c) {
                                    new[c].clone()
                                } else {
                                    Val::Null
                                }
                            })
                            .collect()
                    } else {
                        new
                    };
                    log.push(Change::Insert(inserted.clone()));
                    table.insert(key, inserted);
                    continue;
                };
                let merged: Option<Vec<Val>> = match config.engine {
                    Engine::Default => {
                        if targets.as_deref() == Some(&[0][..]) {
                            None
                        } else {
                            Some(
                                (0..3)
                                    .map(|c| {
                                        if is_target(targets, c) {
                                            new[c].clone()
                                        } else {
                                            old[c].clone()
                                        }
                                    })
                                    .collect(),
                            )
                        }
                    }
                    Engine::FirstRow => None,
                    Engine::Versioned => {
                        let version = |v: &Val| match v {
                            Val::I64(v) => *v,
                            _ => i64::MIN,
                        };
                        (version(&new[1]) >= version(&old[1])).then(|| new.clone())
                    }
                    Engine::Aggregation => Some(vec![
                        new[0].clone(),
                        if is_target(targets, 1) {
                            model_sum(&old[1], &new[1])
                        } else {
                            old[1].clone()
                        },
                        if is_target(targets, 2) {
                            model_listagg(&old[2], &new[2])
                        } else {
                            old[2].clone()
                        },
                    ]),
                };
                if let Some(merged) = merged {
                    if full_image {
                        log.push(Change::UpdateBefore(old));
                    }
                    log.push(Change::UpdateAfter(merged.clone()));
                    table.insert(key, merged);
                }
            }
            Op::Delete { key, .. } => {
                match config.delete {
                    "ignore" => continue,
                    "disable" => {
                        log.push(Change::Refused);
                        continue;
                    }
                    _ => {}
                }
                let Some(old) = table.get(key).cloned() else {
                    continue;
                };
                let others_all_null = (0..3).all(|c| is_target(targets, c) || old[c] == Val::Null);
                if targets.is_none() || others_all_null {
                    log.push(Change::Delete(old));
                    table.remove(key);
                } else {
                    let kept: Vec<Val> = (0..3)
                        .map(|c| {
                            if c != 0 && is_target(targets, c) {
                                Val::Null
                            } else {
                                old[c].clone()
                            }
                        })
                        .collect();
                    if full_image {
                        log.push(Change::UpdateBefore(old));
                    }
                    log.push(Change::UpdateAfter(kept.clone()));
                    table.insert(*key, kept);
                }
            }
        }
    }
    (log, table)
}

fn model_sum(old: &Val, new: &Val) -> Val {
    match (old, new) {
        (Val::I64(a), Val::I64(b)) => Val::I64(a.wrapping_add(*b)),
        (Val::Null, other) | (other, Val::Null) => other.clone(),
        _ => unreachable!(),
    }
}

fn model_listagg(old: &Val, new: &Val) -> Val {
    match (old, new) {
        (Val::Str(a), Val::Str(b)) => Val::Str(format!("{a};{b}")),
        (Val::Null, other) | (other, Val::Null) => other.clone(),
        _ => unreachable!(),
    }
}

// ---- generators

fn value_a() -> impl Strategy<Value = Val> {
    prop_oneof![1 => Just(Val::Null), 4 => (-3i64..4).prop_map(Val::I64)]
}

fn value_b() -> impl Strategy<Value = Val> {
    prop_oneof![
        1 => Just(Val::Null),
        4 => prop::sample::select(vec!["x", "y", "z"]).prop_map(|s| Val::Str(s.to_string())),
    ]
}

fn targets() -> impl Strategy<Value = Option<Vec<usize>>> {
    prop_oneof![
        4 => Just(None),
        1 => Just(Some(vec![0])),
        1 => Just(Some(vec![0, 1])),
        1 => Just(Some(vec![0, 2])),
        1 => Just(Some(vec![2, 1, 0])),
        1 => Just(Some(vec![1, 2])),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0i32..3;
    prop_oneof![
        3 => (key.clone(), value_a(), value_b(), targets()).prop_map(|(k, a, b, targets)| Op::Upsert {
            row: [Val::I32(k), a, b],
            targets,
        }),
        1 => (key, targets()).prop_map(|(key, targets)| Op::Delete { key, targets }),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    let engine = prop::sample::select(vec![
        Engine::Default,
        Engine::FirstRow,
        Engine::Versioned,
        Engine::Aggregation,
    ]);
    (engine, 0usize..3, any::<bool>()).prop_map(|(engine, delete, wal)| {
        Config {
            engine,
            // `allow` is refused for first_row and versioned tables.
            delete: match (delete, engine) {
                (0, Engine::FirstRow | Engine::Versioned) => "ignore",
                (0, _) => "allow",
                (1, _) => "ignore",
                _ => "disable",
            },
            // The aggregation engine refuses the WAL image.
            wal: wal && engine != Engine::Aggregation,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn merger_matches_the_model(config in config(), ops in prop::collection::vec(op(), 1..40)) {
        let (log, store) = run(&config, &ops);
        let (expected_log, expected_store) = model(&config, &ops);
        prop_assert_eq!(log, expected_log);
        prop_assert_eq!(store, expected_store);
    }
}
