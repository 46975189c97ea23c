//! Recovery never panics and never serves garbage, whatever the segment
//! bytes: valid batches with random damage, random tails, random recovery
//! points. (The `segment_recovery` fuzz target explores the same space
//! with coverage guidance; this runs on every `cargo test`.)

mod support;

use std::path::Path;
use std::sync::Arc;

use fjord_format::log_batch::LogBatches;
use fjord_storage::fs::sim::SimFs;
use fjord_storage::meta::{encode_checkpoint, CHECKPOINT_FILE};
use fjord_storage::{LogConfig, LogTablet, StorageError};
use proptest::prelude::*;
use support::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn open_survives_any_segment_bytes_and_serves_only_valid_batches(
        batches in proptest::collection::vec((1i32..4, 0usize..300), 0..8),
        damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        tail in proptest::collection::vec(any::<u8>(), 0..200),
        rp in 0i64..12,
    ) {
        // A well-formed log first, so damage lands inside real batches.
        let fs = SimFs::new();
        let t = open_sim(&fs, LogConfig::default(), 0);
        for (records, len) in &batches {
            append_durable(&t, &batch(*records, &vec![7; *len]), 0);
        }
        drop(t);
        let seg = Path::new("/t/00000000000000000000.log");
        let mut bytes = fs.read(seg).expect("segment");
        for (at, value) in &damage {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = *value;
            }
        }
        bytes.extend_from_slice(&tail);
        fs.put_durable(seg, &bytes);
        fs.put_durable(&Path::new("/t").join(CHECKPOINT_FILE), &encode_checkpoint(rp));

        let t = match LogTablet::open(Arc::new(fs.clone()), "/t", LogConfig::default(), 0) {
            Ok(t) => t,
            Err(StorageError::BadFile { .. }) => return Ok(()),
            Err(e) => return Err(TestCaseError::fail(format!("open failed: {e}"))),
        };
        let mut next = t.log_start_offset();
        while next < t.high_watermark() {
            let r = match t.read(next, 1 << 20) {
                Ok(r) => r,
                Err(StorageError::Damaged { from_offset, .. }) => {
                    prop_assert!(from_offset < rp, "only data below the recovery point is refused");
                    break;
                }
                Err(e) => return Err(TestCaseError::fail(format!("read failed: {e}"))),
            };
            prop_assert!(!r.records.is_empty());
            let mut it = LogBatches::new(&r.records);
            for b in it.by_ref() {
                let b = b.expect("only valid batches are served");
                prop_assert_eq!(b.records().iter().filter(|&&x| x != 7).count(), 0);
                next = b.next_offset();
            }
            prop_assert!(it.remaining().is_empty());
        }
        let end = t.log_end_offset();
        let (first, _) = append_durable(&t, &batch(1, b"after"), 0);
        prop_assert_eq!(first, end, "appends continue at the log end");
    }
}
