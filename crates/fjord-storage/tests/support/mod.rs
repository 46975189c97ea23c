//! Shared helpers for the storage integration tests: building batches,
//! opening tablets over the simulated disk, reading a whole log back.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use fjord_format::log_batch::{write_batch, BatchHeader, LogBatches, NO_WRITER_ID};
use fjord_storage::fs::sim::SimFs;
use fjord_storage::{LogConfig, LogTablet};

/// One append-only V0 batch of `records` records with `payload` as body.
pub fn batch(records: i32, payload: &[u8]) -> Vec<u8> {
    idempotent_batch(records, NO_WRITER_ID, -1, payload)
}

/// A batch from an idempotent writer.
pub fn idempotent_batch(records: i32, writer_id: i64, seq: i32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let header = BatchHeader {
        writer_id,
        batch_sequence: seq,
        ..BatchHeader::append_only(1, records)
    };
    write_batch(&mut out, &header, &[], payload).expect("valid header");
    out
}

/// Small segments so tests roll often.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes_max: 4096,
        index_interval_bytes: 256,
        batch_bytes_max: 2048,
        ..LogConfig::default()
    }
}

/// Opens a tablet at `/t` on `fs`.
pub fn open_sim(fs: &SimFs, config: LogConfig, now_ms: i64) -> LogTablet {
    LogTablet::open(Arc::new(fs.clone()), Path::new("/t"), config, now_ms).expect("open")
}

/// Appends and waits until durable; returns (first, last) offsets.
pub fn append_durable(t: &LogTablet, bytes: &[u8], now_ms: i64) -> (i64, i64) {
    let info = t.append(bytes, now_ms).expect("append");
    t.wait_durable(info.last_offset).expect("durable");
    (info.first_offset, info.last_offset)
}

/// Every visible batch from `from`: (base offset, last offset, body).
pub fn read_all(t: &LogTablet, from: i64) -> Vec<(i64, i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let r = t.read(next, 1000).expect("read");
        if r.records.is_empty() {
            assert!(
                next >= r.high_watermark,
                "empty read below the high watermark at {next}"
            );
            return out;
        }
        let mut it = LogBatches::new(&r.records);
        for b in it.by_ref() {
            let b = b.expect("reads return valid batches");
            if b.last_offset() >= next {
                out.push((b.base_offset(), b.last_offset(), b.records().to_vec()));
            }
            next = b.next_offset();
        }
        assert!(it.remaining().is_empty(), "reads return whole batches");
    }
}
