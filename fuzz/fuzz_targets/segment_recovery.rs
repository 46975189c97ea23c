#![no_main]
//! Fuzzes crash recovery with arbitrary segment bytes on the simulated disk:
//! opening must never panic or read out of bounds; whatever it serves must be
//! whole valid batches with contiguous offsets, and appends must still work.
//! The first input byte picks the recovery point (so both the torn-tail and
//! the corrupt-below-recovery-point paths run); the rest is the segment.
use std::path::Path;
use std::sync::Arc;

use fjord_format::log_batch::{write_batch, BatchHeader, LogBatches};
use fjord_storage::fs::sim::SimFs;
use fjord_storage::meta::{encode_checkpoint, CHECKPOINT_FILE};
use fjord_storage::{LogConfig, LogTablet};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&rp, segment)) = data.split_first() else {
        return;
    };
    let fs = SimFs::new();
    let dir = Path::new("/t");
    fs.put_durable(&dir.join("00000000000000000000.log"), segment);
    fs.put_durable(&dir.join(CHECKPOINT_FILE), &encode_checkpoint(i64::from(rp % 8)));
    let Ok(t) = LogTablet::open(Arc::new(fs), dir, LogConfig::default(), 0) else {
        return;
    };
    let mut next = t.log_start_offset();
    let mut guard = 0;
    while next < t.high_watermark() && guard < 10_000 {
        guard += 1;
        let Ok(r) = t.read(next, 1 << 16) else { break };
        if r.records.is_empty() {
            break;
        }
        let mut it = LogBatches::new(&r.records);
        for b in it.by_ref() {
            let b = b.expect("served batches are valid");
            assert!(b.last_offset() >= next || b.base_offset() <= next);
            next = b.next_offset();
        }
        assert!(it.remaining().is_empty(), "served whole batches");
    }
    let mut batch = Vec::new();
    write_batch(&mut batch, &BatchHeader::append_only(1, 1), &[], b"after").expect("valid");
    let end = t.log_end_offset();
    let info = t.append(&mut batch, 0).expect("append after recovery");
    assert_eq!(info.first_offset, end);
});
