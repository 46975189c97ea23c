//! Property test against a model: random sequences of appends, reads from
//! random offsets, segment rolls (small segments), clean and unclean
//! restarts, retention and truncation always return exactly the appended
//! batches, in order, with contiguous offsets.

mod support;

use fjord_format::log_batch::LogBatches;
use fjord_storage::fs::sim::SimFs;
use fjord_storage::{LogConfig, LogTablet};
use proptest::prelude::*;
use support::*;

#[derive(Debug, Clone)]
enum Op {
    Append { records: i32, len: usize, fill: u8 },
    Read { at: u16, max_bytes: u16 },
    Restart { clean: bool, seed: u64 },
    Retention { advance_ms: u16 },
    Truncate { at: u16 },
    Checkpoint,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1i32..5, 0usize..700, any::<u8>())
            .prop_map(|(records, len, fill)| Op::Append { records, len, fill }),
        4 => (any::<u16>(), 1u16..3000).prop_map(|(at, max_bytes)| Op::Read { at, max_bytes }),
        1 => (any::<bool>(), any::<u64>()).prop_map(|(clean, seed)| Op::Restart { clean, seed }),
        1 => (0u16..2000).prop_map(|advance_ms| Op::Retention { advance_ms }),
        1 => any::<u16>().prop_map(|at| Op::Truncate { at }),
        1 => Just(Op::Checkpoint),
    ]
}

fn config() -> LogConfig {
    LogConfig {
        retention_ms: Some(3000),
        ..small_config()
    }
}

/// The model: batches (base, last, body) in offset order, from the log start.
struct Model {
    batches: Vec<(i64, i64, Vec<u8>)>,
    end: i64,
}

impl Model {
    fn check_read(&self, t: &LogTablet, from: i64, max_bytes: usize) -> Result<(), TestCaseError> {
        let r = t.read(from, max_bytes).expect("read inside the log");
        let mut it = LogBatches::new(&r.records);
        let mut got = Vec::new();
        for b in it.by_ref() {
            let b = b.expect("valid batches");
            got.push((b.base_offset(), b.last_offset(), b.records().to_vec()));
        }
        prop_assert!(it.remaining().is_empty());
        let i = self
            .batches
            .iter()
            .position(|(_, last, _)| *last >= from)
            .expect("from is below the end");
        prop_assert!(
            !got.is_empty(),
            "a read below the end returns at least one batch"
        );
        prop_assert!(got.len() == 1 || r.records.len() <= max_bytes);
        prop_assert_eq!(&got[..], &self.batches[i..i + got.len()]);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_log_always_returns_exactly_what_was_appended(ops in proptest::collection::vec(op(), 1..60)) {
        let fs = SimFs::new();
        let mut clock = 0i64;
        let mut t = open_sim(&fs, config(), clock);
        let mut m = Model { batches: Vec::new(), end: 0 };
        for op in ops {
            match op {
                Op::Append { records, len, fill } => {
                    let body = vec![fill; len];
                    let (first, last) = append_durable(&t, &batch(records, &body), clock);
                    prop_assert_eq!(first, m.end);
                    prop_assert_eq!(last, m.end + i64::from(records) - 1);
                    m.batches.push((first, last, body));
                    m.end = last + 1;
                }
                Op::Read { at, max_bytes } => {
                    let start = t.log_start_offset();
                    if m.end > start {
                        let from = start + i64::from(at) % (m.end - start);
                        m.check_read(&t, from, usize::from(max_bytes))?;
                    }
                    prop_assert!(t.read(m.end, 100).expect("read at end").records.is_empty());
                }
                Op::Restart { clean, seed } => {
                    if clean {
                        t.close(clock).expect("close");
                    } else {
                        drop(t);
                        // Everything was acknowledged durable: a power cut loses nothing.
                        fs.crash(seed);
                    }
                    t = open_sim(&fs, config(), clock);
                }
                Op::Retention { advance_ms } => {
                    clock += i64::from(advance_ms);
                    let out = t.enforce_retention(clock).expect("retention");
                    m.batches.retain(|(base, _, _)| *base >= out.log_start_offset);
                }
                Op::Truncate { at } => {
                    let start = t.log_start_offset();
                    if m.end > start {
                        let to = start + i64::from(at) % (m.end - start);
                        let new_end = t.truncate_to(to).expect("truncate");
                        m.batches.retain(|(_, last, _)| *last < to);
                        m.end = m.batches.last().map_or(start, |b| b.1 + 1);
                        prop_assert_eq!(new_end, m.end);
                    }
                }
                Op::Checkpoint => t.checkpoint(clock).expect("checkpoint"),
            }
            prop_assert_eq!(t.log_end_offset(), m.end);
            prop_assert_eq!(t.high_watermark(), m.end);
            let start = t.log_start_offset();
            prop_assert_eq!(start, m.batches.first().map_or(m.end, |b| b.0));
            prop_assert_eq!(read_all(&t, start), m.batches.clone());
        }
    }
}
