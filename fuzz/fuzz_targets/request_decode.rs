#![no_main]
//! Fuzz target placeholder, filled in by its owner.
libfuzzer_sys::fuzz_target!(|_data: &[u8]| {});
