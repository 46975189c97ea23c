#![no_main]
//! Fuzzes KV batch validation (PutKv `records`) over arbitrary bytes: never
//! panics; an accepted batch iterates every record, rebuilds to its own
//! bytes and stays valid when its writer is re-stamped. The first byte
//! picks whether the CRC is recomputed first, so the records get fuzzed too.
//!
//! The logic is `fjord_format::fuzzing::kv_batch_validate`, which the
//! crash-regression test replays over `fuzz/regressions/kv_batch_validate/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fjord_format::fuzzing::kv_batch_validate(data);
});
