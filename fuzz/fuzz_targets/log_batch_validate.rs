#![no_main]
//! Fuzzes the log batch header validator and splitter with arbitrary bytes:
//! no panic, no out-of-bounds read, and every accepted batch is
//! self-consistent (stamping keeps it valid).
use fjord_format::log_batch::{stamp_in_place, LogBatch, LogBatchMut, LogBatches};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(b) = LogBatch::validate(data) {
        assert_eq!(b.size_in_bytes(), data.len());
        let _ = (b.records(), b.statistics(), b.last_offset(), b.leader_epoch(), b.crc());
        assert!(b.records_range().end == data.len());
        let mut copy = data.to_vec();
        LogBatchMut::validate(&mut copy)
            .expect("same bytes validate")
            .stamp(7, 8, 9);
        assert!(LogBatch::validate(&copy).is_ok(), "stamping keeps the CRC valid");
    }
    let mut it = LogBatches::new(data);
    let mut total = 0;
    for b in it.by_ref().flatten() {
        total += b.size_in_bytes();
        let _ = (b.records(), b.statistics(), b.writer_id(), b.batch_sequence());
    }
    assert!(total <= data.len());
    assert!(it.position() <= data.len());
    let mut copy = data.to_vec();
    let _ = stamp_in_place(&mut copy, 1, 2, 3);
});
