//! Server configuration: Fluss option names, read from a `server.yaml` (flat
//! `key: value` lines, as Fluss's own loader reads it) and overridden by
//! `--set key=value`, then parsed once into [`ServerConfig`].
//!
//! Every limit the network loop enforces is an option here with its default
//! and what it protects documented on the constant.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fjord_storage::{Durability, LogConfig};

use crate::kv::changelog_compaction::ChangelogCompactionOptions;

use crate::meta::catalog::CatalogOptions;

/// Default `fjord.server.frame-bytes-max`: largest request frame accepted.
/// Protects memory: a corrupt or hostile length prefix is refused before
/// anything is allocated. Fluss clients cap a produce request at 10 MiB
/// (`client.writer.request-max-size`) by default, so 64 MiB leaves room.
pub const FRAME_BYTES_MAX_DEFAULT: usize = 64 * 1024 * 1024;
/// Default `fjord.server.in-flight-requests-per-connection-max`: requests of
/// one connection being processed at once. Protects the server from one
/// client queueing unbounded work; the reader stops reading that socket
/// until an answer is written (back-pressure through TCP).
pub const IN_FLIGHT_PER_CONNECTION_MAX_DEFAULT: usize = 256;
/// Default `fjord.server.connections-max`: open client connections. Protects
/// file descriptors and per-connection memory; accept waits for a free slot.
pub const CONNECTIONS_MAX_DEFAULT: usize = 1024;
/// Default `fjord.server.fetch-wait-ms-max`: the longest a FetchLog long-poll
/// may park, whatever the client asks, so a bad `max_wait_ms` cannot pin a
/// request slot for hours.
pub const FETCH_WAIT_MS_MAX_DEFAULT: u64 = 30_000;
/// Default `fjord.server.fetch-bytes-max`: the most record bytes one FetchLog
/// answer carries, whatever the client asks. Protects memory per request.
pub const FETCH_BYTES_MAX_DEFAULT: usize = 64 * 1024 * 1024;
/// Default `default.bucket.number` (Fluss's name and default).
pub const DEFAULT_BUCKET_NUMBER: i32 = 1;
/// Default `max.bucket.num` (Fluss's name and default): buckets per table.
pub const MAX_BUCKET_NUM_DEFAULT: i32 = 128_000;
/// Default `max.partition.num` (Fluss's name and default): partitions per
/// partitioned table. Protects the metadata store and the tablet count
/// (every partition opens its own tablets) from a runaway writer creating
/// partitions dynamically.
pub const MAX_PARTITION_NUM_DEFAULT: usize = 1000;
/// Default `auto-partition.check.interval` (Fluss's name and default, 10
/// minutes): how often the coordinator pre-creates and expires
/// auto-partitions.
pub const AUTO_PARTITION_CHECK_INTERVAL_MS_DEFAULT: u64 = 10 * 60 * 1000;

/// A configuration problem, naming the option and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line of the config file is not `key: value`.
    #[error("{path}:{line}: expected `key: value`, got {text:?}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
    /// A `--set` argument without `=`.
    #[error("--set {0:?}: expected key=value")]
    SetSyntax(String),
    /// An option value that does not parse or is out of range.
    #[error("option {key} = {value:?}: {reason}")]
    Value {
        /// The option.
        key: String,
        /// Its value.
        value: String,
        /// What is wrong.
        reason: String,
    },
}

/// Raw options, key → value, in Fluss's names.
#[derive(Debug, Clone, Default)]
pub struct Options(BTreeMap<String, String>);

impl Options {
    /// Reads a Fluss-style `server.yaml`: one `key: value` per line, `#`
    /// comments, blank lines ignored, values optionally quoted.
    pub fn load_yaml(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut map = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = match raw.find(" #") {
                Some(at) => &raw[..at],
                None => raw,
            }
            .trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((k, v)) = line.split_once(':') else {
                return Err(ConfigError::Syntax {
                    path: path.to_owned(),
                    line: i + 1,
                    text: raw.to_owned(),
                });
            };
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            map.insert(k.trim().to_owned(), v.to_owned());
        }
        Ok(Self(map))
    }

    /// Applies one `key=value` override.
    pub fn set(&mut self, assignment: &str) -> Result<(), ConfigError> {
        let (k, v) = assignment
            .split_once('=')
            .ok_or_else(|| ConfigError::SetSyntax(assignment.to_owned()))?;
        self.0.insert(k.trim().to_owned(), v.trim().to_owned());
        Ok(())
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// All options, for components (storage) that read their own.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    fn parse<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(key) {
            None => Ok(default),
            Some(v) => parse_value(key, v),
        }
    }

    fn positive<T>(&self, key: &str, default: T) -> Result<T, ConfigError>
    where
        T: std::str::FromStr + PartialOrd + Default,
        T::Err: std::fmt::Display,
    {
        let v = self.parse(key, default)?;
        if v <= T::default() {
            return Err(ConfigError::Value {
                key: key.to_owned(),
                value: self.get(key).unwrap_or_default().to_owned(),
                reason: "must be positive".to_owned(),
            });
        }
        Ok(v)
    }

    fn bytes(&self, key: &str, default: usize) -> Result<usize, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => parse_memory_size(v).ok_or_else(|| ConfigError::Value {
                key: key.to_owned(),
                value: v.to_owned(),
                reason: "expected a size such as 1048576, 512kb, 64mb or 1gb".to_owned(),
            }),
        }
    }
}

fn parse_value<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    v.parse().map_err(|e: T::Err| ConfigError::Value {
        key: key.to_owned(),
        value: v.to_owned(),
        reason: e.to_string(),
    })
}

/// Parses a Fluss memory size (`1024`, `64kb`, `10 mb`, `1gb`, case-insensitive).
pub fn parse_memory_size(text: &str) -> Option<usize> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num.parse().ok()?;
    let mult: usize = match unit.trim() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kibibytes" => 1 << 10,
        "m" | "mb" | "mebibytes" => 1 << 20,
        "g" | "gb" | "gibibytes" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult).filter(|&b| b > 0)
}

/// Parses a Fluss duration (`500`, `500 ms`, `10s`, `5 min`, `2h`, `7d`) as
/// milliseconds; a bare number is milliseconds.
pub fn parse_duration_ms(text: &str) -> Option<i64> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: i64 = num.parse().ok()?;
    let mult: i64 = match unit.trim() {
        "" | "ms" | "milli" | "millis" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

impl Options {
    fn duration_ms(&self, key: &str) -> Result<Option<i64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => parse_duration_ms(v)
                .map(Some)
                .ok_or_else(|| ConfigError::Value {
                    key: key.to_owned(),
                    value: v.to_owned(),
                    reason: "expected a duration such as 500ms, 10s, 5min, 2h or 7d".to_owned(),
                }),
        }
    }
}

/// The storage engine's settings from Fluss option names. Durability is
/// fsync-before-acknowledge unless `log.flush.interval-messages` or
/// `log.flush.interval-ms` asks for Fluss's interval flushing.
fn log_config(o: &Options) -> Result<LogConfig, ConfigError> {
    let d = LogConfig::default();
    let messages = o
        .get("log.flush.interval-messages")
        .map(|v| parse_value::<u64>("log.flush.interval-messages", v))
        .transpose()?;
    let interval = o.duration_ms("log.flush.interval-ms")?;
    let durability = match (messages, interval) {
        (None, None) => Durability::Fsync,
        (m, i) => Durability::Interval {
            messages: m.unwrap_or(u64::MAX),
            interval_ms: i.unwrap_or(i64::MAX),
        },
    };
    let config = LogConfig {
        segment_bytes_max: o.bytes("log.segment.file-size", d.segment_bytes_max as usize)? as u64,
        index_interval_bytes: u32::try_from(
            o.bytes("log.index.interval-size", d.index_interval_bytes as usize)?,
        )
        .unwrap_or(u32::MAX),
        batch_bytes_max: o.bytes("log.batch.max-size", d.batch_bytes_max)?,
        durability,
        sync_file_system: o.parse("log.flush.sync-file-system", d.sync_file_system)?,
        retention_ms: match o.duration_ms("table.log.ttl")? {
            None => d.retention_ms,
            Some(ms) if ms <= 0 => None,
            Some(ms) => Some(ms),
        },
        writer_expiration_ms: o
            .duration_ms("server.writer-id.expiration-time")?
            .unwrap_or(d.writer_expiration_ms),
        ..d
    };
    config.validate().map_err(|e| ConfigError::Value {
        key: "log.*".to_owned(),
        value: String::new(),
        reason: e.to_string(),
    })?;
    Ok(config)
}

/// `kv.changelog-compaction.*`: see [`crate::kv::changelog_compaction`].
fn changelog_compaction_options(o: &Options) -> Result<ChangelogCompactionOptions, ConfigError> {
    let d = ChangelogCompactionOptions::default();
    const RATIO: &str = "kv.changelog-compaction.min-dirty-ratio";
    let min_dirty_ratio: f64 = o.parse(RATIO, d.min_dirty_ratio)?;
    if !(0.0..=1.0).contains(&min_dirty_ratio) {
        return Err(ConfigError::Value {
            key: RATIO.to_owned(),
            value: o.get(RATIO).unwrap_or_default().to_owned(),
            reason: "must be between 0 and 1".to_owned(),
        });
    }
    Ok(ChangelogCompactionOptions {
        index_bytes_max: o.bytes("kv.changelog-compaction.index-size", d.index_bytes_max)?,
        min_dirty_ratio,
        delete_retention_ms: o
            .duration_ms("kv.changelog-compaction.delete-retention")?
            .unwrap_or(d.delete_retention_ms)
            .max(0),
    })
}

/// Default `kv.scanner.ttl`: an idle KV scan session is closed after
/// 10 minutes, as Fluss (bounds what an abandoned scan pins: a snapshot of
/// the store).
pub const KV_SCANNER_TTL_MS_DEFAULT: u64 = 10 * 60 * 1000;
/// Default `kv.scanner.max-per-bucket` (Fluss's): concurrent scans of one
/// bucket.
pub const KV_SCANNERS_PER_BUCKET_DEFAULT: usize = 8;
/// Default `kv.scanner.max-per-server` (Fluss's): concurrent scans on the
/// server.
pub const KV_SCANNERS_PER_SERVER_DEFAULT: usize = 200;
/// Default `kv.scanner.max-batch-size` (Fluss's 10 MiB): the most record
/// bytes one ScanKv answer carries, whatever the client asks.
pub const KV_SCANNER_BATCH_BYTES_DEFAULT: usize = 10 << 20;

/// Limits of KV full-scan sessions (ScanKv).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvScannerOptions {
    /// See [`KV_SCANNER_TTL_MS_DEFAULT`].
    pub ttl_ms: u64,
    /// See [`KV_SCANNERS_PER_BUCKET_DEFAULT`].
    pub per_bucket_max: usize,
    /// See [`KV_SCANNERS_PER_SERVER_DEFAULT`].
    pub per_server_max: usize,
    /// See [`KV_SCANNER_BATCH_BYTES_DEFAULT`].
    pub batch_bytes_max: usize,
}

/// The parsed configuration of one server process.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Root of all persistent state (`data.dir`).
    pub data_dir: PathBuf,
    /// The id this node announces as coordinator and tablet server
    /// (`tablet-server.id`, default 0).
    pub node_id: i32,
    /// Host announced to clients in MetaData answers
    /// (`fjord.server.advertised-host`); default: the bound IP, or
    /// 127.0.0.1 when bound to a wildcard address.
    pub advertised_host: Option<String>,
    /// See [`FRAME_BYTES_MAX_DEFAULT`].
    pub frame_bytes_max: usize,
    /// See [`IN_FLIGHT_PER_CONNECTION_MAX_DEFAULT`].
    pub in_flight_per_connection_max: usize,
    /// See [`CONNECTIONS_MAX_DEFAULT`].
    pub connections_max: usize,
    /// See [`FETCH_WAIT_MS_MAX_DEFAULT`].
    pub fetch_wait_ms_max: u64,
    /// See [`FETCH_BYTES_MAX_DEFAULT`].
    pub fetch_bytes_max: usize,
    /// Table defaults and limits.
    pub catalog: CatalogOptions,
    /// See [`AUTO_PARTITION_CHECK_INTERVAL_MS_DEFAULT`].
    pub auto_partition_check_interval_ms: u64,
    /// Log tablet settings (segment size, flush policy, retention).
    pub log: LogConfig,
    /// The KV engine of primary-key tables (`kv.cache-size`,
    /// `kv.journal-size`).
    pub kv: fjord_storage::kv::KvEngineOptions,
    /// KV full-scan sessions (`kv.scanner.*`).
    pub kv_scanners: KvScannerOptions,
    /// Compaction of primary-key changelogs (`kv.changelog-compaction.*`).
    pub kv_changelog_compaction: ChangelogCompactionOptions,
    /// `kv.write-buffer-size`: see
    /// [`crate::kv::tablet::DEFAULT_WRITE_BUFFER_BYTES`].
    pub kv_write_buffer_bytes: usize,
    /// `kv.row-cache-size`: see [`crate::kv::tablet::DEFAULT_ROW_CACHE_BYTES`].
    pub kv_row_cache_bytes: usize,
    /// All options as given, for the storage engine's own options.
    pub options: Options,
}

impl ServerConfig {
    /// Parses `options` (Fluss names) with `data_dir` as the data directory.
    pub fn from_options(data_dir: PathBuf, options: Options) -> Result<Self, ConfigError> {
        Ok(Self {
            data_dir,
            node_id: options.parse("tablet-server.id", 0)?,
            advertised_host: options
                .get("fjord.server.advertised-host")
                .map(str::to_owned),
            frame_bytes_max: options
                .bytes("fjord.server.frame-bytes-max", FRAME_BYTES_MAX_DEFAULT)?,
            in_flight_per_connection_max: options.positive(
                "fjord.server.in-flight-requests-per-connection-max",
                IN_FLIGHT_PER_CONNECTION_MAX_DEFAULT,
            )?,
            connections_max: options
                .positive("fjord.server.connections-max", CONNECTIONS_MAX_DEFAULT)?,
            fetch_wait_ms_max: options
                .parse("fjord.server.fetch-wait-ms-max", FETCH_WAIT_MS_MAX_DEFAULT)?,
            fetch_bytes_max: options
                .bytes("fjord.server.fetch-bytes-max", FETCH_BYTES_MAX_DEFAULT)?,
            catalog: CatalogOptions {
                default_bucket_count: options
                    .positive("default.bucket.number", DEFAULT_BUCKET_NUMBER)?,
                bucket_count_max: options.positive("max.bucket.num", MAX_BUCKET_NUM_DEFAULT)?,
                default_replication_factor: options.positive("default.replication.factor", 1)?,
                partition_count_max: options
                    .positive("max.partition.num", MAX_PARTITION_NUM_DEFAULT)?,
            },
            auto_partition_check_interval_ms: match options
                .duration_ms("auto-partition.check.interval")?
            {
                None => AUTO_PARTITION_CHECK_INTERVAL_MS_DEFAULT,
                Some(ms) if ms > 0 => ms as u64,
                Some(ms) => {
                    return Err(ConfigError::Value {
                        key: "auto-partition.check.interval".to_owned(),
                        value: ms.to_string(),
                        reason: "must be a positive duration".to_owned(),
                    })
                }
            },
            log: log_config(&options)?,
            kv: fjord_storage::kv::KvEngineOptions {
                cache_bytes: options.bytes(
                    "kv.cache-size",
                    fjord_storage::kv::DEFAULT_CACHE_BYTES as usize,
                )? as u64,
                journal_bytes: options.bytes(
                    "kv.journal-size",
                    fjord_storage::kv::DEFAULT_JOURNAL_BYTES as usize,
                )? as u64,
            },
            kv_write_buffer_bytes: options.bytes(
                "kv.write-buffer-size",
                crate::kv::tablet::DEFAULT_WRITE_BUFFER_BYTES,
            )?,
            kv_row_cache_bytes: options.bytes(
                "kv.row-cache-size",
                crate::kv::tablet::DEFAULT_ROW_CACHE_BYTES,
            )?,
            kv_scanners: KvScannerOptions {
                ttl_ms: match options.duration_ms("kv.scanner.ttl")? {
                    None => KV_SCANNER_TTL_MS_DEFAULT,
                    Some(ms) if ms > 0 => ms as u64,
                    Some(ms) => {
                        return Err(ConfigError::Value {
                            key: "kv.scanner.ttl".to_owned(),
                            value: ms.to_string(),
                            reason: "must be a positive duration".to_owned(),
                        })
                    }
                },
                per_bucket_max: options
                    .positive("kv.scanner.max-per-bucket", KV_SCANNERS_PER_BUCKET_DEFAULT)?,
                per_server_max: options
                    .positive("kv.scanner.max-per-server", KV_SCANNERS_PER_SERVER_DEFAULT)?,
                batch_bytes_max: options
                    .bytes("kv.scanner.max-batch-size", KV_SCANNER_BATCH_BYTES_DEFAULT)?,
            },
            kv_changelog_compaction: changelog_compaction_options(&options)?,
            options,
        })
    }

    /// The configuration with every default, for tests and embedding.
    pub fn with_data_dir(data_dir: PathBuf) -> Self {
        // Only fails on bad option values, and there are none.
        Self::from_options(data_dir, Options::default()).unwrap_or_else(|e| unreachable!("{e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration from these `--set` settings.
    fn configured(settings: &[&str]) -> Result<ServerConfig, ConfigError> {
        let mut opts = Options::default();
        for setting in settings {
            opts.set(setting).unwrap();
        }
        ServerConfig::from_options("d".into(), opts)
    }

    /// The error these settings are refused with.
    fn refused(settings: &[&str]) -> String {
        configured(settings).unwrap_err().to_string()
    }

    #[test]
    fn yaml_and_set_override_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.yaml");
        std::fs::write(
            &file,
            "# comment\ndefault.bucket.number: 4\nfjord.server.frame-bytes-max: \"1mb\" # trailing\n\n",
        )
        .unwrap();
        let mut opts = Options::load_yaml(&file).unwrap();
        opts.set("fjord.server.connections-max=7").unwrap();
        let cfg = ServerConfig::from_options("d".into(), opts).unwrap();
        assert_eq!(cfg.catalog.default_bucket_count, 4);
        assert_eq!(cfg.frame_bytes_max, 1 << 20);
        assert_eq!(cfg.connections_max, 7);
        assert_eq!(
            cfg.in_flight_per_connection_max,
            IN_FLIGHT_PER_CONNECTION_MAX_DEFAULT
        );
    }

    #[test]
    fn bad_values_name_the_option() {
        let err = refused(&["fjord.server.connections-max=0"]);
        assert!(err.contains("fjord.server.connections-max"), "{err}");
        let err = refused(&["fjord.server.frame-bytes-max=lots"]);
        assert!(err.contains("fjord.server.frame-bytes-max"), "{err}");
        assert!(Options::default().set("novalue").is_err());
    }

    #[test]
    fn changelog_compaction_options_parse_and_are_checked() {
        let cfg = ServerConfig::with_data_dir("d".into());
        assert_eq!(
            cfg.kv_changelog_compaction,
            ChangelogCompactionOptions::default()
        );
        let cfg = configured(&[
            "kv.changelog-compaction.index-size=1mb",
            "kv.changelog-compaction.min-dirty-ratio=0",
            "kv.changelog-compaction.delete-retention=0",
        ])
        .unwrap();
        assert_eq!(
            cfg.kv_changelog_compaction,
            ChangelogCompactionOptions {
                index_bytes_max: 1 << 20,
                min_dirty_ratio: 0.0,
                delete_retention_ms: 0,
            }
        );
        let err = refused(&["kv.changelog-compaction.min-dirty-ratio=1.5"]);
        assert!(err.contains("min-dirty-ratio"), "{err}");
    }

    #[test]
    fn the_file_system_sync_is_on_by_default_and_can_be_turned_off() {
        let cfg = ServerConfig::with_data_dir("d".into());
        assert_eq!(cfg.log.durability, Durability::Fsync);
        assert!(cfg.log.sync_file_system);
        let cfg = configured(&["log.flush.sync-file-system=false"]).unwrap();
        assert!(!cfg.log.sync_file_system);
        assert_eq!(cfg.log.durability, Durability::Fsync);
        let err = refused(&["log.flush.sync-file-system=sometimes"]);
        assert!(err.contains("log.flush.sync-file-system"), "{err}");
    }

    #[test]
    fn memory_sizes_parse_like_fluss() {
        for (text, want) in [
            ("1024", Some(1024)),
            ("64kb", Some(65536)),
            ("10 MB", Some(10 << 20)),
            ("0", None),
            ("x", None),
        ] {
            assert_eq!(parse_memory_size(text), want, "{text}");
        }
    }

    #[test]
    fn yaml_line_without_colon_is_a_syntax_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.yaml");
        std::fs::write(&file, "ok: 1\nbroken line\n").unwrap();
        let err = Options::load_yaml(&file).unwrap_err().to_string();
        assert!(err.contains(":2:"), "{err}");
    }
}
