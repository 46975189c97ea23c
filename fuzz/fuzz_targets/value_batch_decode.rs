#![no_main]
//! Fuzzes value batch decoding (LimitScan / ScanKv `records`) over
//! arbitrary bytes: never panics; an accepted batch rebuilds to its bytes.
//!
//! The logic is `fjord_format::fuzzing::value_batch_decode`, which the
//! crash-regression test replays over `fuzz/regressions/value_batch_decode/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fjord_format::fuzzing::value_batch_decode(data);
});
