//! Scanner options: [`ScannerConfig`], with Fluss's `client.scanner.log.*`
//! option names and defaults, parsed once when a scanner is configured.

use crate::error::{ClientError, Result};

/// Default `max_bytes` of one FetchLog request (Fluss's
/// `client.scanner.log.fetch.max-bytes` default, 16 MiB).
pub const DEFAULT_FETCH_MAX_BYTES: i32 = 16 * 1024 * 1024;
/// Default per-bucket byte cap (`client.scanner.log.fetch.max-bytes-for-bucket`, 1 MiB).
pub const DEFAULT_FETCH_MAX_BYTES_FOR_BUCKET: i32 = 1024 * 1024;
/// Default long-poll wait when no data is there yet (`client.scanner.log.fetch.wait-max-time`, 500 ms).
pub const DEFAULT_FETCH_MAX_WAIT_MS: i32 = 500;

/// Default bytes a fetch waits for (`client.scanner.log.fetch.min-bytes`, 1 byte).
pub const DEFAULT_FETCH_MIN_BYTES: i32 = 1;

/// `client.scanner.log.fetch.max-bytes`.
pub const OPT_FETCH_MAX_BYTES: &str = "client.scanner.log.fetch.max-bytes";
/// `client.scanner.log.fetch.max-bytes-for-bucket`.
pub const OPT_FETCH_MAX_BYTES_FOR_BUCKET: &str = "client.scanner.log.fetch.max-bytes-for-bucket";
/// `client.scanner.log.fetch.wait-max-time`.
pub const OPT_FETCH_WAIT_MAX_TIME: &str = "client.scanner.log.fetch.wait-max-time";
/// `client.scanner.log.fetch.min-bytes`.
pub const OPT_FETCH_MIN_BYTES: &str = "client.scanner.log.fetch.min-bytes";
/// `client.scanner.log.check-crc`.
pub const OPT_CHECK_CRC: &str = "client.scanner.log.check-crc";

/// What a poll does when a bucket's fetch offset is out of the log's range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OffsetReset {
    /// Fail the poll with the offset, the log start and the high watermark
    /// (the Fluss Java client's behaviour).
    #[default]
    None,
    /// When the offset is below the log start (the records were removed by
    /// retention), continue from the log start. An offset beyond the high
    /// watermark still fails the poll.
    Earliest,
}

/// Scanner options.
#[derive(Clone, Debug)]
pub struct ScannerConfig {
    /// Column indexes to read, in the order the returned batches have them;
    /// `None` reads all columns. Duplicates and out-of-range indexes are
    /// refused by [`LogScanner::new`](super::LogScanner::new).
    pub projection: Option<Vec<usize>>,
    /// `max_bytes` of one fetch.
    pub fetch_max_bytes: i32,
    /// Per-bucket byte cap of one fetch.
    pub fetch_max_bytes_for_bucket: i32,
    /// How long the server may hold a fetch that found no data.
    pub fetch_max_wait_ms: i32,
    /// Bytes a fetch waits for (up to `fetch_max_wait_ms`) before answering.
    pub fetch_min_bytes: i32,
    /// `client.scanner.log.check-crc`: verify each batch's CRC-32C (where it
    /// is valid: see [`LogScanner::new`](super::LogScanner::new)).
    pub check_crc: bool,
    /// What to do when a fetch offset is out of range.
    pub offset_reset: OffsetReset,
    /// A filter the server applies with each batch's statistics (Fluss
    /// 1.0's FetchLog `filter_predicate`): batches it rules out are not
    /// sent. Rows of the batches sent are not filtered; the caller still
    /// applies its predicate. `None`: every batch (what 0.9.1 clients do).
    pub filter: Option<ScanFilter>,
}

/// A FetchLog filter: the predicate, over field ids of schema `schema_id`.
#[derive(Clone, Debug)]
pub struct ScanFilter {
    /// The predicate, as Fluss 1.0 sends it.
    pub predicate: fjord_proto::messages::PbPredicate,
    /// The schema id the predicate's field ids refer to.
    pub schema_id: i32,
}

impl Default for ScannerConfig {
    fn default() -> Self {
        Self {
            projection: None,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            fetch_max_bytes_for_bucket: DEFAULT_FETCH_MAX_BYTES_FOR_BUCKET,
            fetch_max_wait_ms: DEFAULT_FETCH_MAX_WAIT_MS,
            fetch_min_bytes: DEFAULT_FETCH_MIN_BYTES,
            check_crc: true,
            offset_reset: OffsetReset::None,
            filter: None,
        }
    }
}

impl ScannerConfig {
    /// Fluss's defaults overridden by `opts` (Fluss's option names and value
    /// syntax: `16mb`, `1 kb`, `500 ms`, `2s`, `true`). Options outside
    /// `client.scanner.log.*` are ignored (writer options may share the map);
    /// an unknown `client.scanner.log.*` option or a bad value is an error
    /// naming it. The projection is not an option: set the field.
    pub fn from_options<'a>(opts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut config = Self::default();
        for (key, value) in opts {
            let v = value.trim();
            match key {
                OPT_FETCH_MAX_BYTES => config.fetch_max_bytes = parse_bytes(key, v)?,
                OPT_FETCH_MAX_BYTES_FOR_BUCKET => {
                    config.fetch_max_bytes_for_bucket = parse_bytes(key, v)?
                }
                OPT_FETCH_MIN_BYTES => config.fetch_min_bytes = parse_bytes(key, v)?,
                OPT_FETCH_WAIT_MAX_TIME => config.fetch_max_wait_ms = parse_millis(key, v)?,
                OPT_CHECK_CRC => {
                    config.check_crc = match v.to_ascii_lowercase().as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(bad(key, value, "true or false")),
                    }
                }
                _ if key.starts_with("client.scanner.log.") => {
                    return Err(ClientError::Invalid(format!(
                        "unknown scanner option {key} (known: {OPT_FETCH_MAX_BYTES}, \
                         {OPT_FETCH_MAX_BYTES_FOR_BUCKET}, {OPT_FETCH_MIN_BYTES}, \
                         {OPT_FETCH_WAIT_MAX_TIME}, {OPT_CHECK_CRC})"
                    )))
                }
                _ => {}
            }
        }
        Ok(config)
    }
}

fn bad(key: &str, value: &str, expected: &str) -> ClientError {
    ClientError::Invalid(format!("{key}={value:?}: expected {expected}"))
}

/// A Fluss memory size ([`crate::options::parse_memory_size`]) that fits a
/// positive protocol `int32`.
fn parse_bytes(key: &str, v: &str) -> Result<i32> {
    let bytes = crate::options::parse_memory_size(v)
        .ok_or_else(|| bad(key, v, "a size such as 512kb or 16mb"))?;
    i32::try_from(bytes)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| bad(key, v, "a positive size below 2gb"))
}

/// A Fluss duration ([`crate::options::parse_duration`]) in whole
/// milliseconds; sub-millisecond parts are dropped, as Fluss does when it
/// reads the option as milliseconds.
fn parse_millis(key: &str, v: &str) -> Result<i32> {
    let duration = crate::options::parse_duration(v)
        .ok_or_else(|| bad(key, v, "a duration such as 500ms or 2s"))?;
    i32::try_from(duration.as_millis())
        .map_err(|_| bad(key, v, "a non-negative duration below 24 days"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fluss_option_names_and_values_set_the_config() {
        let config = ScannerConfig::from_options([
            (OPT_FETCH_MAX_BYTES, "32mb"),
            (OPT_FETCH_MAX_BYTES_FOR_BUCKET, "512 kb"),
            (OPT_FETCH_MIN_BYTES, "1b"),
            (OPT_FETCH_WAIT_MAX_TIME, "2s"),
            (OPT_CHECK_CRC, "false"),
            ("client.writer.acks", "all"),
        ])
        .unwrap();
        assert_eq!(config.fetch_max_bytes, 32 << 20);
        assert_eq!(config.fetch_max_bytes_for_bucket, 512 << 10);
        assert_eq!(config.fetch_min_bytes, 1);
        assert_eq!(config.fetch_max_wait_ms, 2_000);
        assert!(!config.check_crc);
        // Every unit of Fluss's duration syntax, as whole milliseconds.
        for (value, millis) in [
            ("1m", 60_000),
            ("2 mins", 120_000),
            ("1h", 3_600_000),
            ("1d", 86_400_000),
            ("1500us", 1),
            ("999999ns", 0),
            ("250 milliseconds", 250),
            ("300", 300),
        ] {
            let config = ScannerConfig::from_options([(OPT_FETCH_WAIT_MAX_TIME, value)])
                .unwrap_or_else(|e| panic!("{value}: {e}"));
            assert_eq!(config.fetch_max_wait_ms, millis, "{value}");
        }
        let defaults = ScannerConfig::from_options([]).unwrap();
        assert_eq!(defaults.fetch_max_bytes, DEFAULT_FETCH_MAX_BYTES);
        assert_eq!(defaults.fetch_max_wait_ms, 500);
    }

    #[test]
    fn bad_values_and_unknown_scanner_options_name_the_option() {
        let check = |key: &str, value: &str| {
            let error = ScannerConfig::from_options([(key, value)])
                .unwrap_err()
                .to_string();
            assert!(error.contains(key), "{key}={value}: {error}");
        };
        check(OPT_FETCH_MAX_BYTES, "lots");
        check(OPT_FETCH_MAX_BYTES, "4gb");
        check(OPT_FETCH_MAX_BYTES, "0");
        check(OPT_FETCH_WAIT_MAX_TIME, "soon");
        check(OPT_FETCH_WAIT_MAX_TIME, "30d");
        check(OPT_FETCH_WAIT_MAX_TIME, "-1s");
        check(OPT_CHECK_CRC, "yes");
        check("client.scanner.log.fetch.max-byte", "1mb");
    }
}
