//! Lookuper options under Fluss's names and defaults
//! (`fluss-common/.../config/ConfigOptions.java`, `client.lookup.*`),
//! parsed once when a lookuper is created.

use std::time::Duration;

use crate::error::{ClientError, Result};

/// `client.lookup.queue-size`.
pub const OPT_QUEUE_SIZE: &str = "client.lookup.queue-size";
/// `client.lookup.max-batch-size`.
pub const OPT_MAX_BATCH_SIZE: &str = "client.lookup.max-batch-size";
/// `client.lookup.max-inflight-requests`.
pub const OPT_MAX_INFLIGHT_REQUESTS: &str = "client.lookup.max-inflight-requests";
/// `client.lookup.max-retries`.
pub const OPT_MAX_RETRIES: &str = "client.lookup.max-retries";
/// `client.lookup.batch-timeout`: accepted and not needed (see
/// [`LookupConfig`]).
pub const OPT_BATCH_TIMEOUT: &str = "client.lookup.batch-timeout";
/// `client.request-timeout`.
pub const OPT_REQUEST_TIMEOUT: &str = "client.request-timeout";

/// Requests one lookuper keeps in flight to one server at once, at most:
/// the pipeline depth under load. Keys that arrive while requests are out
/// wait and leave together, in requests sized to spread the keys
/// outstanding at the server over these slots (up to
/// `client.lookup.max-batch-size`), so the client answers one request
/// while the server works on the next; a server with nothing out gets
/// whatever waits at once.
pub const REQUESTS_PER_SERVER_MAX: usize = 2;

/// Lookuper options. Build with [`LookupConfig::default`] (Fluss's
/// defaults) or [`LookupConfig::from_options`].
///
/// Batching: a lookuper sends a server a request as soon as half of
/// the keys outstanding at it (queued or in flight; at most
/// `max_batch_size`) wait and it has fewer than [`REQUESTS_PER_SERVER_MAX`]
/// requests out (and the lookuper fewer than `max_inflight_requests`),
/// and whatever waits as soon as it has none out. It never holds keys
/// back on a timer, so Fluss's `client.lookup.batch-timeout` has nothing
/// to time and is accepted unused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupConfig {
    /// `client.lookup.queue-size` (25600): lookups waiting to be sent; a
    /// lookup beyond it waits for room (back-pressure).
    pub queue_size: usize,
    /// `client.lookup.max-batch-size` (128): keys per request at most.
    pub max_batch_size: usize,
    /// `client.lookup.max-inflight-requests` (128): requests in flight at
    /// once, all servers together.
    pub max_inflight_requests: usize,
    /// `client.lookup.max-retries` (`i32::MAX`): resends of a key after a
    /// retriable error (not leader, unknown bucket, KV storage busy, lost
    /// connection) before its lookup fails.
    pub max_retries: u32,
    /// `client.request-timeout` (30 s): how long a request may go
    /// unanswered before it counts as a retriable failure.
    pub request_timeout: Duration,
}

impl Default for LookupConfig {
    fn default() -> Self {
        Self {
            queue_size: 25_600,
            max_batch_size: 128,
            max_inflight_requests: 128,
            max_retries: i32::MAX as u32,
            request_timeout: Duration::from_secs(30),
        }
    }
}

impl LookupConfig {
    /// Fluss's defaults overridden by `opts` (Fluss option names and value
    /// syntax). Options outside `client.lookup.*` are ignored, except
    /// `client.request-timeout`; an unknown `client.lookup.*` option or a
    /// bad value is an error naming it.
    pub fn from_options<'a>(opts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut config = Self::default();
        for (key, value) in opts {
            let v = value.trim();
            let positive = |key: &'static str| {
                v.parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad(key, value, "a positive integer"))
            };
            match key {
                OPT_QUEUE_SIZE => config.queue_size = positive(OPT_QUEUE_SIZE)?,
                OPT_MAX_BATCH_SIZE => config.max_batch_size = positive(OPT_MAX_BATCH_SIZE)?,
                OPT_MAX_INFLIGHT_REQUESTS => {
                    config.max_inflight_requests = positive(OPT_MAX_INFLIGHT_REQUESTS)?
                }
                OPT_MAX_RETRIES => {
                    config.max_retries = v
                        .parse::<u32>()
                        .map_err(|_| bad(OPT_MAX_RETRIES, value, "a non-negative integer"))?
                }
                OPT_REQUEST_TIMEOUT => {
                    config.request_timeout = crate::options::parse_duration(v).ok_or_else(|| {
                        bad(OPT_REQUEST_TIMEOUT, value, "a duration such as 30s")
                    })?
                }
                OPT_BATCH_TIMEOUT => {}
                k if k.starts_with("client.lookup.") => {
                    return Err(ClientError::Invalid(format!(
                        "unknown lookup option {k:?} (known: {OPT_QUEUE_SIZE}, {OPT_MAX_BATCH_SIZE}, {OPT_MAX_INFLIGHT_REQUESTS}, {OPT_MAX_RETRIES}, {OPT_BATCH_TIMEOUT})"
                    )))
                }
                _ => {}
            }
        }
        Ok(config)
    }
}

fn bad(key: &'static str, value: &str, expected: &'static str) -> ClientError {
    ClientError::Config {
        key,
        value: value.to_owned(),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_flusss_and_options_override_them() {
        let c = LookupConfig::from_options([]).unwrap();
        assert_eq!(c, LookupConfig::default());
        assert_eq!(
            (c.queue_size, c.max_batch_size, c.max_inflight_requests),
            (25_600, 128, 128)
        );
        let c = LookupConfig::from_options([
            (OPT_MAX_BATCH_SIZE, "16"),
            (OPT_MAX_INFLIGHT_REQUESTS, "4"),
            (OPT_MAX_RETRIES, "3"),
            (OPT_BATCH_TIMEOUT, "100 ms"),
            (OPT_REQUEST_TIMEOUT, "5 s"),
            ("client.writer.acks", "all"),
        ])
        .unwrap();
        assert_eq!(
            (c.max_batch_size, c.max_inflight_requests, c.max_retries),
            (16, 4, 3)
        );
        assert_eq!(c.request_timeout, Duration::from_secs(5));
    }

    #[test]
    fn bad_and_unknown_options_are_named() {
        for (key, value) in [
            (OPT_MAX_BATCH_SIZE, "0"),
            (OPT_QUEUE_SIZE, "many"),
            ("client.lookup.max-batch", "1"),
        ] {
            let e = LookupConfig::from_options([(key, value)])
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{key}: {e}");
        }
    }
}
