//! Writer options under Fluss's names and defaults
//! (`fluss-common/.../config/ConfigOptions.java`), parsed once when a writer
//! is created and kept as plain fields the hot path reads.

use std::time::Duration;

use crate::bucket::NoKeyAssigner;
use crate::error::{ClientError, Result};

/// `client.writer.acks`.
pub const OPT_ACKS: &str = "client.writer.acks";
/// `client.writer.batch-size`.
pub const OPT_BATCH_SIZE: &str = "client.writer.batch-size";
/// `client.writer.batch-timeout`.
pub const OPT_BATCH_TIMEOUT: &str = "client.writer.batch-timeout";
/// `client.writer.retries`.
pub const OPT_RETRIES: &str = "client.writer.retries";
/// `client.writer.request-max-size`.
pub const OPT_REQUEST_MAX_SIZE: &str = "client.writer.request-max-size";
/// `client.writer.max-inflight-requests-per-bucket`.
pub const OPT_MAX_INFLIGHT_PER_BUCKET: &str = "client.writer.max-inflight-requests-per-bucket";
/// `client.writer.buffer.memory-size`.
pub const OPT_BUFFER_MEMORY_SIZE: &str = "client.writer.buffer.memory-size";
/// `client.writer.enable-idempotence`.
pub const OPT_ENABLE_IDEMPOTENCE: &str = "client.writer.enable-idempotence";
/// `client.writer.bucket.no-key-assigner`.
pub const OPT_NO_KEY_ASSIGNER: &str = "client.writer.bucket.no-key-assigner";
/// `client.writer.dynamic-create-partition.enabled`.
pub const OPT_DYNAMIC_CREATE_PARTITION: &str = "client.writer.dynamic-create-partition.enabled";
/// `client.request-timeout`.
pub const OPT_REQUEST_TIMEOUT: &str = "client.request-timeout";
/// `client.writer.kv-backpressure.max-throttle`.
pub const OPT_KV_BACKPRESSURE_MAX_THROTTLE: &str = "client.writer.kv-backpressure.max-throttle";

/// Fluss `client.writer.*` options Fjord's writer accepts and does not need
/// (its memory is not paged, its batch size is estimated, not pre-sized).
const ACCEPTED_UNUSED: &[&str] = &[
    "client.writer.buffer.page-size",
    "client.writer.buffer.per-request-memory-size",
    "client.writer.buffer.wait-timeout",
    "client.writer.dynamic-batch-size.enabled",
];

/// Most batches in flight per bucket with idempotence: the server remembers
/// this many batches per writer for duplicate detection (Fluss's
/// `MAX_IN_FLIGHT_REQUESTS_PER_BUCKET_FOR_IDEMPOTENCE`).
pub const MAX_INFLIGHT_PER_BUCKET_IDEMPOTENT: usize = 5;

/// Largest Fluss log batch the server accepts; bounds `batch-size` and
/// `request-max-size` so one sealed batch always fits one request.
pub const MAX_BATCH_BYTES: usize = fjord_format::log_batch::MAX_BATCH_SIZE_BYTES;

/// Writer options. Build with [`WriterConfig::default`] (Fluss's defaults)
/// or [`WriterConfig::from_options`].
#[derive(Clone, Debug)]
pub struct WriterConfig {
    /// `client.writer.acks`: 0 (no wait), 1 (leader appended) or -1 (`all`,
    /// durable; the default and required for idempotence).
    pub acks: i32,
    /// `client.writer.batch-size` (2 MiB): a bucket's batch is sealed when its
    /// estimated compressed size reaches this.
    pub batch_size_bytes: usize,
    /// `client.writer.batch-timeout` (100 ms): a batch older than this is
    /// sealed even if the caller has gone idle.
    pub batch_timeout: Duration,
    /// `client.writer.retries` (`i32::MAX`): resends of a batch after a
    /// retriable error before it fails.
    pub retries: i32,
    /// `client.writer.request-max-size` (10 MiB): largest ProduceLog request.
    pub request_max_size_bytes: usize,
    /// `client.writer.max-inflight-requests-per-bucket` (5): unacknowledged
    /// batches per bucket.
    pub max_inflight_per_bucket: usize,
    /// `client.writer.buffer.memory-size` (64 MiB): bytes of buffered rows
    /// plus sealed-but-unacknowledged batches; `append` waits beyond it.
    pub buffer_memory_bytes: usize,
    /// `client.writer.enable-idempotence` (true): writer id + batch sequences
    /// so the server drops retried duplicates.
    pub enable_idempotence: bool,
    /// `client.writer.bucket.no-key-assigner` (STICKY).
    pub no_key_assigner: NoKeyAssigner,
    /// `client.writer.dynamic-create-partition.enabled` (true).
    pub dynamic_create_partition: bool,
    /// `client.request-timeout` (30 s): server-side timeout of a produce.
    pub request_timeout: Duration,
    /// `client.writer.kv-backpressure.max-throttle` (3 s): the longest a
    /// bucket of a primary-key table is held back after the server reports
    /// storage pressure. A PutKv answer's `pressure` p in (0, 1) holds the
    /// bucket for `max-throttle * p^2`; STORAGE_BACKPRESSURE holds it for
    /// the whole `max-throttle` before the batch is retried (Fluss's
    /// `RecordAccumulator.updateThrottle`).
    pub kv_backpressure_max_throttle: Duration,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            acks: -1,
            batch_size_bytes: 2 << 20,
            batch_timeout: Duration::from_millis(100),
            retries: i32::MAX,
            request_max_size_bytes: 10 << 20,
            max_inflight_per_bucket: 5,
            buffer_memory_bytes: 64 << 20,
            enable_idempotence: true,
            no_key_assigner: NoKeyAssigner::Sticky,
            dynamic_create_partition: true,
            request_timeout: Duration::from_secs(30),
            kv_backpressure_max_throttle: Duration::from_millis(3000),
        }
    }
}

impl WriterConfig {
    /// Fluss's defaults overridden by `opts` (Fluss option names and value
    /// syntax: `2mb`, `100 ms`, `all`, `true`, `ROUND_ROBIN`). Options
    /// outside `client.writer.*` are ignored (a scanner option may share the
    /// map); an unknown `client.writer.*` option or a bad value is an error
    /// naming it. The result is validated as [`WriterConfig::validate`] does.
    pub fn from_options<'a>(opts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut config = Self::default();
        for (key, value) in opts {
            let v = value.trim();
            match key {
                OPT_ACKS => config.acks = parse_acks(v)?,
                OPT_BATCH_SIZE => config.batch_size_bytes = parse_memory(OPT_BATCH_SIZE, v)?,
                OPT_BATCH_TIMEOUT => config.batch_timeout = parse_duration(OPT_BATCH_TIMEOUT, v)?,
                OPT_RETRIES => {
                    config.retries = v
                        .parse::<i32>()
                        .ok()
                        .filter(|r| *r >= 0)
                        .ok_or_else(|| bad(OPT_RETRIES, value, "a non-negative integer"))?
                }
                OPT_REQUEST_MAX_SIZE => {
                    config.request_max_size_bytes = parse_memory(OPT_REQUEST_MAX_SIZE, v)?
                }
                OPT_MAX_INFLIGHT_PER_BUCKET => {
                    config.max_inflight_per_bucket = v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| {
                            bad(OPT_MAX_INFLIGHT_PER_BUCKET, value, "a positive integer")
                        })?
                }
                OPT_BUFFER_MEMORY_SIZE => {
                    config.buffer_memory_bytes = parse_memory(OPT_BUFFER_MEMORY_SIZE, v)?
                }
                OPT_ENABLE_IDEMPOTENCE => {
                    config.enable_idempotence = parse_bool(OPT_ENABLE_IDEMPOTENCE, v)?
                }
                OPT_NO_KEY_ASSIGNER => {
                    config.no_key_assigner = if v.eq_ignore_ascii_case("STICKY") {
                        NoKeyAssigner::Sticky
                    } else if v.eq_ignore_ascii_case("ROUND_ROBIN") {
                        NoKeyAssigner::RoundRobin
                    } else {
                        return Err(bad(OPT_NO_KEY_ASSIGNER, value, "STICKY or ROUND_ROBIN"));
                    }
                }
                OPT_DYNAMIC_CREATE_PARTITION => {
                    config.dynamic_create_partition = parse_bool(OPT_DYNAMIC_CREATE_PARTITION, v)?
                }
                OPT_REQUEST_TIMEOUT => {
                    config.request_timeout = parse_duration(OPT_REQUEST_TIMEOUT, v)?
                }
                OPT_KV_BACKPRESSURE_MAX_THROTTLE => {
                    config.kv_backpressure_max_throttle =
                        parse_duration(OPT_KV_BACKPRESSURE_MAX_THROTTLE, v)?
                }
                k if ACCEPTED_UNUSED.contains(&k) => {}
                k if k.starts_with("client.writer.") => {
                    return Err(ClientError::Invalid(format!(
                        "unknown writer option {k:?} (known: {OPT_ACKS}, {OPT_BATCH_SIZE}, {OPT_BATCH_TIMEOUT}, {OPT_RETRIES}, {OPT_REQUEST_MAX_SIZE}, {OPT_MAX_INFLIGHT_PER_BUCKET}, {OPT_BUFFER_MEMORY_SIZE}, {OPT_ENABLE_IDEMPOTENCE}, {OPT_NO_KEY_ASSIGNER}, {OPT_DYNAMIC_CREATE_PARTITION}, {OPT_KV_BACKPRESSURE_MAX_THROTTLE})"
                    )))
                }
                _ => {}
            }
        }
        config.validate()?;
        Ok(config)
    }

    /// Checks the options make sense together, as Fluss's `WriterClient`
    /// does: idempotence needs acks=all, retries and at most
    /// [`MAX_INFLIGHT_PER_BUCKET_IDEMPOTENT`] batches in flight per bucket;
    /// sizes are positive and a batch fits one request and the buffer.
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.acks, -1..=1) {
            return Err(bad(OPT_ACKS, &self.acks.to_string(), "all, -1, 0 or 1"));
        }
        if self.enable_idempotence {
            if self.acks != -1 {
                return Err(ClientError::Invalid(format!(
                    "{OPT_ACKS}={} cannot be used with an idempotent writer: set {OPT_ACKS}=all or {OPT_ENABLE_IDEMPOTENCE}=false",
                    self.acks
                )));
            }
            if self.retries == 0 {
                return Err(ClientError::Invalid(format!(
                    "{OPT_RETRIES}=0 cannot be used with an idempotent writer: set {OPT_RETRIES} above 0 or {OPT_ENABLE_IDEMPOTENCE}=false"
                )));
            }
            if self.max_inflight_per_bucket > MAX_INFLIGHT_PER_BUCKET_IDEMPOTENT {
                return Err(ClientError::Invalid(format!(
                    "{OPT_MAX_INFLIGHT_PER_BUCKET}={} exceeds {MAX_INFLIGHT_PER_BUCKET_IDEMPOTENT}, the most an idempotent writer may keep in flight per bucket",
                    self.max_inflight_per_bucket
                )));
            }
        }
        let sizes = [
            (OPT_BATCH_SIZE, self.batch_size_bytes),
            (OPT_REQUEST_MAX_SIZE, self.request_max_size_bytes),
            (OPT_BUFFER_MEMORY_SIZE, self.buffer_memory_bytes),
        ];
        for (key, size) in sizes {
            if size == 0 {
                return Err(bad(key, "0", "a positive size"));
            }
        }
        if self.batch_size_bytes > MAX_BATCH_BYTES {
            return Err(bad(
                OPT_BATCH_SIZE,
                &self.batch_size_bytes.to_string(),
                "at most 2 GiB, the largest log batch",
            ));
        }
        if self.max_inflight_per_bucket == 0 {
            return Err(bad(OPT_MAX_INFLIGHT_PER_BUCKET, "0", "a positive integer"));
        }
        if self.batch_timeout.is_zero() {
            return Err(bad(OPT_BATCH_TIMEOUT, "0", "a positive duration"));
        }
        Ok(())
    }
}

fn bad(key: &'static str, value: &str, expected: &'static str) -> ClientError {
    ClientError::Config {
        key,
        value: value.to_owned(),
        expected,
    }
}

fn parse_acks(v: &str) -> Result<i32> {
    if v.eq_ignore_ascii_case("all") {
        return Ok(-1);
    }
    v.parse::<i32>()
        .ok()
        .filter(|a| matches!(a, -1..=1))
        .ok_or_else(|| bad(OPT_ACKS, v, "all, -1, 0 or 1"))
}

fn parse_bool(key: &'static str, v: &str) -> Result<bool> {
    if v.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if v.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(bad(key, v, "true or false"))
    }
}

/// Fluss `MemorySize` syntax ([`crate::options::parse_memory_size`]).
fn parse_memory(key: &'static str, v: &str) -> Result<usize> {
    crate::options::parse_memory_size(v)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| bad(key, v, "a size such as 2mb, 128kb or 1048576"))
}

/// Fluss `TimeUtils.parseDuration` syntax ([`crate::options::parse_duration`]).
fn parse_duration(key: &'static str, v: &str) -> Result<Duration> {
    crate::options::parse_duration(v)
        .ok_or_else(|| bad(key, v, "a duration such as 100ms, 30s or 1min"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(opts: &[(&str, &str)]) -> Result<WriterConfig> {
        WriterConfig::from_options(opts.iter().copied())
    }

    #[test]
    fn defaults_are_flusss() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.acks, -1);
        assert_eq!(c.batch_size_bytes, 2 * 1024 * 1024);
        assert_eq!(c.batch_timeout, Duration::from_millis(100));
        assert_eq!(c.request_max_size_bytes, 10 * 1024 * 1024);
        assert_eq!(c.buffer_memory_bytes, 64 * 1024 * 1024);
        assert_eq!(c.max_inflight_per_bucket, 5);
        assert!(c.enable_idempotence);
        assert!(c.dynamic_create_partition);
        assert_eq!(c.no_key_assigner, NoKeyAssigner::Sticky);
        assert_eq!(c.kv_backpressure_max_throttle, Duration::from_secs(3));
        let c = parse(&[(OPT_KV_BACKPRESSURE_MAX_THROTTLE, "250 ms")]).unwrap();
        assert_eq!(c.kv_backpressure_max_throttle, Duration::from_millis(250));
    }

    #[test]
    fn fluss_value_syntax_parses() {
        let c = parse(&[
            (OPT_BATCH_SIZE, "512kb"),
            (OPT_BATCH_TIMEOUT, "5 s"),
            (OPT_BUFFER_MEMORY_SIZE, "1 GB"),
            (OPT_REQUEST_MAX_SIZE, "1048576"),
            (OPT_NO_KEY_ASSIGNER, "round_robin"),
            (OPT_ACKS, "all"),
            ("client.scanner.log.fetch.max-bytes", "anything"),
        ])
        .unwrap();
        assert_eq!(c.batch_size_bytes, 512 * 1024);
        assert_eq!(c.batch_timeout, Duration::from_secs(5));
        assert_eq!(c.buffer_memory_bytes, 1 << 30);
        assert_eq!(c.request_max_size_bytes, 1 << 20);
        assert_eq!(c.no_key_assigner, NoKeyAssigner::RoundRobin);
        assert_eq!(
            parse(&[(OPT_BATCH_TIMEOUT, "250")]).unwrap().batch_timeout,
            Duration::from_millis(250)
        );
    }

    #[test]
    fn bad_values_name_the_option() {
        for (key, value) in [
            (OPT_BATCH_SIZE, "abc"),
            (OPT_BATCH_SIZE, "12 parsecs"),
            (OPT_BATCH_TIMEOUT, "soon"),
            (OPT_ACKS, "2"),
            (OPT_ENABLE_IDEMPOTENCE, "yes"),
            (OPT_NO_KEY_ASSIGNER, "hash"),
            (OPT_RETRIES, "-1"),
        ] {
            let e = parse(&[(key, value)]).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(value), "{key}={value}: {e}");
        }
    }

    #[test]
    fn unknown_writer_option_is_refused() {
        let e = parse(&[("client.writer.batch-sise", "1mb")]).unwrap_err();
        assert!(e.to_string().contains("client.writer.batch-sise"), "{e}");
    }

    #[test]
    fn idempotence_needs_acks_all_and_bounded_inflight() {
        assert!(parse(&[(OPT_ACKS, "1")]).is_err());
        assert!(parse(&[(OPT_MAX_INFLIGHT_PER_BUCKET, "6")]).is_err());
        assert!(parse(&[(OPT_RETRIES, "0")]).is_err());
        let c = parse(&[(OPT_ACKS, "0"), (OPT_ENABLE_IDEMPOTENCE, "false")]).unwrap();
        assert_eq!(c.acks, 0);
    }
}
