#![no_main]
//! Fuzzes the COMPACTED row decoder: a small row type read from the first
//! bytes, the rest decoded as one row. Never panics; decode and validate
//! agree; an accepted row re-encodes to exactly its bytes.
//!
//! The logic is `fjord_format::fuzzing::compacted_row_decode`, which the
//! crash-regression test replays over `fuzz/regressions/compacted_row_decode/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fjord_format::fuzzing::compacted_row_decode(data);
});
