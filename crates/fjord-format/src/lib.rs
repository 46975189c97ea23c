//! Fjord's data formats: pure functions over bytes, no I/O.
//!
//! - [`log_batch`]: the Fluss log record batch header (magic V0/V1/V2),
//!   its validation (length, magic, CRC-32C) and the in-place stamping of
//!   server-assigned fields.

pub mod log_batch;
