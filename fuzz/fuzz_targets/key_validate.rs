#![no_main]
//! Fuzzes compacted key validation (the shape check the server applies to
//! lookup keys): key types read from the first bytes, the rest checked as
//! one key. Never panics; an accepted key re-encodes to exactly its bytes.
//!
//! The logic is `fjord_format::fuzzing::key_validate`, which the
//! crash-regression test replays over `fuzz/regressions/key_validate/`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fjord_format::fuzzing::key_validate(data);
});
