//! Crash consistency over the simulated disk (TigerBeetle / redb style): the
//! tablet runs over `SimFs`, which keeps written bytes apart from durable
//! ones. Power is cut after a random number of syncs — so inside appends,
//! segment rolls, checkpoints and retention deletes — then unsynced data is
//! torn at 512-byte sectors. After reopening, every acknowledged batch must
//! be present and intact, every served batch must be one that was appended
//! at that offset, and the log must stay contiguous. Several rounds per seed.

mod support;

use std::collections::BTreeMap;

use fjord_storage::fs::sim::{Rng, SimFs};
use fjord_storage::{Durability, LogConfig, LogTablet};
use support::*;

/// Body of the `n`-th appended batch: unique and of varying size.
fn body(seed: u64, n: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ (n << 20));
    let len = 1 + rng.below(900) as usize;
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

struct Model {
    /// first offset -> (last offset, body) of acknowledged batches.
    acked: BTreeMap<i64, (i64, Vec<u8>)>,
    /// first offset -> (last offset, body) of every batch given an offset.
    attempted: BTreeMap<i64, (i64, Vec<u8>)>,
}

fn config(interval: bool) -> LogConfig {
    LogConfig {
        segment_bytes_max: 4096,
        index_interval_bytes: 512,
        batch_bytes_max: 2048,
        retention_ms: Some(5_000),
        retention_bytes: Some(40_000),
        durability: if interval {
            Durability::Interval {
                messages: 4,
                interval_ms: 1_000_000,
            }
        } else {
            Durability::Fsync
        },
        ..LogConfig::default()
    }
}

/// Runs operations until the power cut makes one fail (or `ops` are done).
/// The driver's state across rounds of one seed.
struct Run {
    rng: Rng,
    seed: u64,
    clock: i64,
    /// Number of the next batch body.
    n: u64,
    interval: bool,
}

fn run_ops(t: &LogTablet, fs: &SimFs, m: &mut Model, run: &mut Run) {
    let Run {
        rng,
        seed,
        clock,
        n,
        interval,
    } = run;
    let (seed, interval) = (*seed, *interval);
    for _ in 0..(20 + rng.below(60)) {
        *clock += rng.below(300) as i64;
        let result = match rng.below(10) {
            0 => t.checkpoint(*clock).map(|_| ()),
            1 => t.enforce_retention(*clock).map(|_| ()),
            _ => {
                let records = 1 + rng.below(4) as i32;
                let b = body(seed, *n);
                *n += 1;
                let bytes = batch(records, &b);
                let end_before = t.log_end_offset();
                match t.append(&bytes, *clock) {
                    Ok(info) => {
                        m.attempted
                            .insert(info.first_offset, (info.last_offset, b.clone()));
                        if interval {
                            // Acknowledged at write time, but only what an
                            // fsync covered is promised to survive power loss.
                            let durable = t.durable_offset();
                            let newly: Vec<i64> = m
                                .attempted
                                .range(..)
                                .filter(|(_, (last, _))| *last < durable)
                                .map(|(f, _)| *f)
                                .collect();
                            for f in newly {
                                let v = m.attempted[&f].clone();
                                m.acked.insert(f, v);
                            }
                            Ok(())
                        } else {
                            t.wait_durable(info.last_offset).map(|()| {
                                m.acked.insert(info.first_offset, (info.last_offset, b));
                            })
                        }
                    }
                    Err(e) => {
                        // Written but failed afterwards (the interval flush
                        // hit the power cut): it may still surface.
                        let end_after = t.log_end_offset();
                        if end_after > end_before {
                            m.attempted.insert(end_before, (end_after - 1, b));
                        }
                        Err(e)
                    }
                }
            }
        };
        if result.is_err() {
            assert!(
                fs.power_is_cut(),
                "only the power cut may fail an operation: {result:?}"
            );
            return;
        }
    }
}

fn verify(t: &LogTablet, m: &mut Model, seed: u64, round: u32) {
    let start = t.log_start_offset();
    let end = t.log_end_offset();
    let all = read_all(t, start);
    let mut expect_next = start;
    for (base, last, b) in &all {
        assert_eq!(
            *base, expect_next,
            "seed {seed} round {round}: gap in the log"
        );
        let attempted = m.attempted.get(base);
        assert_eq!(
            attempted.map(|(l, b)| (l, b)),
            Some((last, b)),
            "seed {seed} round {round}: batch at {base} was never appended there"
        );
        expect_next = last + 1;
    }
    assert_eq!(expect_next, end, "seed {seed} round {round}: log end");
    assert_eq!(t.high_watermark(), end);
    for (first, (last, b)) in m.acked.range(start..) {
        if !all.iter().any(|(base, _, _)| base == first) {
            eprintln!(
                "seed {seed} round {round}: start {start} end {end} acked {:?} served {:?}",
                m.acked
                    .iter()
                    .map(|(f, (l, _))| (*f, *l))
                    .collect::<Vec<_>>(),
                all.iter().map(|(f, l, _)| (*f, *l)).collect::<Vec<_>>()
            );
        }
        let found = all.iter().find(|(base, _, _)| base == first);
        assert_eq!(
            found.map(|(_, l, body)| (l, body)),
            Some((last, b)),
            "seed {seed} round {round}: acknowledged batch at {first} lost"
        );
    }
    // Forget what is gone (unacknowledged tail, retention): offsets get reused.
    m.attempted.retain(|f, _| *f >= start && *f < end);
    m.acked.retain(|f, _| *f >= start && *f < end);
}

fn power_loss_rounds(seed: u64, interval: bool) {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let fs = SimFs::new();
    let mut rng = Rng::new(seed);
    let mut m = Model {
        acked: BTreeMap::new(),
        attempted: BTreeMap::new(),
    };
    let mut clock = 0i64;
    let mut n = 0u64;
    for round in 0..3 {
        let t = LogTablet::open(
            std::sync::Arc::new(fs.clone()),
            "/t",
            config(interval),
            clock,
        )
        .unwrap_or_else(|e| panic!("seed {seed} round {round}: open failed: {e}"));
        verify(&t, &mut m, seed, round);
        fs.cut_power_after_syncs(rng.below(120));
        let mut run = Run {
            rng: rng.clone(),
            seed,
            clock,
            n,
            interval,
        };
        run_ops(&t, &fs, &mut m, &mut run);
        (rng, clock, n) = (run.rng, run.clock, run.n);
        drop(t);
        fs.crash(rng.next_u64());
    }
    let t = LogTablet::open(
        std::sync::Arc::new(fs.clone()),
        "/t",
        config(interval),
        clock,
    )
    .unwrap_or_else(|e| panic!("seed {seed}: final open failed: {e}"));
    verify(&t, &mut m, seed, 3);
}

#[test]
fn acknowledged_batches_survive_power_loss_at_any_sync_in_fsync_mode() {
    for seed in 0..150 {
        power_loss_rounds(seed, false);
    }
}

#[test]
fn flushed_batches_survive_power_loss_at_any_sync_in_interval_mode() {
    for seed in 1000..1100 {
        power_loss_rounds(seed, true);
    }
}
