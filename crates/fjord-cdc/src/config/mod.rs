//! The pipeline definition: Flink CDC 3 pipeline YAML (`source`, `sink`,
//! `route`, `transform`, `pipeline`) with Flink CDC's option names, parsed into
//! typed options. Every unknown or invalid option is an error naming the
//! option and its line.
//!
//! Fjord extensions (options Flink CDC does not have) are few and documented
//! where they are parsed: `pipeline.state-dir`, `pipeline.state.commit-interval-ms`,
//! `pipeline.progress.interval-ms`, and the `debezium-json` source and
//! `print` sink.

pub mod yaml;

use std::path::PathBuf;
use std::time::Duration;

use crate::filter::{TableFilter, TablePattern};
use crate::sink::fluss::options::{
    parse_bucket_keys, parse_bucket_nums, FlussSinkOptions, SchemaChangeBehavior, SchemaChangeTag,
};
use crate::source::{MySqlSourceConfig, ServerIdRange, SpecificOffset, StartupMode};
use yaml::Node;

/// Default time between two durable offset commits. Each commit is an fsync
/// of the state file and of its directory; one per second keeps that cost
/// invisible per event while bounding what a crash re-delivers.
pub const STATE_COMMIT_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);

/// A pipeline definition could not be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ConfigError {
    /// 1-based line of the offending key or value (0: no line applies).
    pub line: usize,
    /// What is wrong and what to do.
    pub message: String,
}

fn error(line: usize, message: String) -> ConfigError {
    ConfigError { line, message }
}

impl From<yaml::YamlError> for ConfigError {
    fn from(e: yaml::YamlError) -> Self {
        ConfigError {
            line: e.line,
            message: e.message,
        }
    }
}

/// A whole pipeline definition.
#[derive(Clone, Debug)]
pub struct PipelineDef {
    /// The `source` section.
    pub source: SourceDef,
    /// The `sink` section.
    pub sink: SinkDef,
    /// The `route` section, in order (the first matching route wins).
    pub routes: Vec<RouteDef>,
    /// The `pipeline` section.
    pub pipeline: PipelineOptions,
}

/// The `source` section.
#[derive(Clone, Debug)]
pub enum SourceDef {
    /// `type: mysql` or `type: mariadb`.
    MySql(MySqlSourceConfig),
    /// `type: debezium-json`.
    DebeziumJson(DebeziumJsonConfig),
}

/// Decimal encoding of a Debezium input (Debezium's `decimal.handling.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecimalHandling {
    /// `precise`: `org.apache.kafka.connect.data.Decimal`, base64 unscaled bytes.
    Precise,
    /// `string`: decimal text.
    String,
    /// `double`: JSON numbers.
    Double,
}

/// Options of the `debezium-json` source.
#[derive(Clone, Debug)]
pub struct DebeziumJsonConfig {
    /// `path`: the input file; absent or `-` reads stdin.
    pub path: Option<PathBuf>,
    /// `tables` / `tables.exclude` (default: every table).
    pub tables: TableFilter,
    /// `decimal.handling.mode` (default `precise`): how decimal columns were
    /// encoded when the envelope carries no schema to say so.
    pub decimal_handling: DecimalHandling,
}

/// The `sink` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SinkDef {
    /// `type: print`: one JSON object per event on stdout.
    Print,
    /// `type: values`: counts events; `print.enabled: true` also prints them.
    Values {
        /// `print.enabled`.
        print: bool,
    },
    /// `type: fluss`: writes Fjord (Fluss) tables through the native client.
    Fluss(FlussSinkOptions),
}

/// One `route` entry.
#[derive(Clone, Debug)]
pub struct RouteDef {
    /// `source-table`, compiled.
    pub source_table: TablePattern,
    /// `sink-table`: `database.table`, possibly containing the replace symbol.
    pub sink_table: String,
    /// `replace-symbol`: replaced in `sink-table` by the source table's name.
    pub replace_symbol: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// Line of the entry.
    pub line: usize,
}

/// The `pipeline` section.
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// `name`.
    pub name: Option<String>,
    /// `parallelism` (default 1): accepted as Flink CDC writes it, so
    /// existing definitions run unchanged, but a hint only. Fjord runs a
    /// pipeline on one source thread and one sink thread whatever it says,
    /// which keeps every table's changes in binlog order (Flink CDC keeps
    /// them in order per key); [`crate::runtime::run`] logs that once.
    pub parallelism: u32,
    /// `state-dir` (Fjord): where the source position is stored; absent = no offsets kept.
    pub state_dir: Option<PathBuf>,
    /// `state.commit-interval-ms` (Fjord): least time between two durable offset
    /// commits; 0 commits after every batch. The final position is always committed
    /// on a clean stop.
    pub state_commit_interval: Duration,
    /// `schema.change.behavior` (default `lenient`): what sinks that hold
    /// tables (`fluss`) do with schema changes; the print and values sinks
    /// show every change as the source emits it.
    pub schema_change_behavior: SchemaChangeBehavior,
    /// `progress.interval-ms` (Fjord; default 5000, 0 = off): how often a
    /// progress line (rows per table, lag behind the source's head) goes to
    /// the log (stderr).
    pub progress_interval: Duration,
}

/// Default time between two progress lines on stderr.
pub const PROGRESS_INTERVAL_DEFAULT: Duration = Duration::from_secs(5);

/// The items of a list option, each with its line.
type ListItems = Vec<(String, usize)>;

/// A mapping's options, consumed one by one; whatever is left is unknown.
struct Options<'a> {
    section: &'static str,
    line: usize,
    entries: Vec<(&'a str, usize, &'a Node, bool)>,
}

impl<'a> Options<'a> {
    /// `line` is where the section starts (its key's line), for "missing option" errors.
    fn new(section: &'static str, node: &'a Node, line: usize) -> Result<Options<'a>, ConfigError> {
        match node {
            Node::Map { entries, .. } => Ok(Options {
                section,
                line,
                entries: entries
                    .iter()
                    .map(|(k, l, v)| (k.as_str(), *l, v, false))
                    .collect(),
            }),
            other => Err(error(
                other.line(),
                format!(
                    "`{section}` must be a mapping of options, found {}",
                    other.kind()
                ),
            )),
        }
    }

    /// Takes a scalar option: `(text, line)`; `None` if absent or null.
    fn scalar(&mut self, key: &str) -> Result<Option<(&'a str, usize)>, ConfigError> {
        let section = self.section;
        let Some(entry) = self.entries.iter_mut().find(|e| e.0 == key) else {
            return Ok(None);
        };
        entry.3 = true;
        match entry.2 {
            Node::Scalar { null: true, .. } => Ok(None),
            Node::Scalar { value, line, .. } => Ok(Some((value.as_str(), *line))),
            other => Err(error(
                entry.1,
                format!(
                    "option `{key}` in `{section}` must be a single value, found {}",
                    other.kind()
                ),
            )),
        }
    }

    fn required(&mut self, key: &str) -> Result<(&'a str, usize), ConfigError> {
        let line = self.line;
        let section = self.section;
        self.scalar(key)?
            .ok_or_else(|| error(line, format!("`{section}` needs option `{key}`")))
    }

    fn parsed<T: std::str::FromStr>(
        &mut self,
        key: &str,
        what: &str,
    ) -> Result<Option<(T, usize)>, ConfigError> {
        let section = self.section;
        match self.scalar(key)? {
            None => Ok(None),
            Some((text, line)) => text.trim().parse().map(|v| Some((v, line))).map_err(|_| {
                error(
                    line,
                    format!("option `{key}` in `{section}` must be {what}, found {text:?}"),
                )
            }),
        }
    }

    fn boolean(&mut self, key: &str) -> Result<Option<bool>, ConfigError> {
        let section = self.section;
        match self.scalar(key)? {
            None => Ok(None),
            Some((text, line)) => match text.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(Some(true)),
                "false" => Ok(Some(false)),
                _ => Err(error(
                    line,
                    format!("option `{key}` in `{section}` must be true or false, found {text:?}"),
                )),
            },
        }
    }

    fn duration(&mut self, key: &str) -> Result<Option<Duration>, ConfigError> {
        let section = self.section;
        match self.scalar(key)? {
            None => Ok(None),
            Some((text, line)) => parse_duration(text).map(Some).ok_or_else(|| {
                error(
                    line,
                    format!(
                        "option `{key}` in `{section}` must be a duration like 30s, 500ms, 1min, found {text:?}"
                    ),
                )
            }),
        }
    }

    /// Takes a list option: a YAML list of scalars, or one scalar of
    /// comma-separated items; `None` if absent or null.
    fn list(&mut self, key: &str) -> Result<Option<(ListItems, usize)>, ConfigError> {
        let section = self.section;
        let Some(entry) = self.entries.iter_mut().find(|e| e.0 == key) else {
            return Ok(None);
        };
        entry.3 = true;
        match entry.2 {
            Node::Scalar { null: true, .. } => Ok(None),
            Node::Scalar { value, line, .. } => Ok(Some((
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(|v| (v.to_string(), *line))
                    .collect(),
                entry.1,
            ))),
            Node::Seq { items, .. } => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Node::Scalar { value, line, .. } => out.push((value.trim().to_string(), *line)),
                        other => {
                            return Err(error(
                                other.line(),
                                format!("option `{key}` in `{section}` must be a list of names, found {} in it", other.kind()),
                            ))
                        }
                    }
                }
                Ok(Some((out, entry.1)))
            }
            other => Err(error(
                entry.1,
                format!(
                    "option `{key}` in `{section}` must be a list, found {}",
                    other.kind()
                ),
            )),
        }
    }

    /// Marks every option starting with `prefix` as known; returns their keys and lines.
    fn prefixed(&mut self, prefix: &str) -> Vec<(&'a str, usize)> {
        let mut taken = Vec::new();
        for entry in &mut self.entries {
            if entry.0.starts_with(prefix) {
                entry.3 = true;
                taken.push((entry.0, entry.1));
            }
        }
        taken
    }

    /// Takes every scalar option starting with `prefix`: `(key, value, line)`.
    fn prefixed_values(
        &mut self,
        prefix: &str,
    ) -> Result<Vec<(&'a str, &'a str, usize)>, ConfigError> {
        let section = self.section;
        let mut taken = Vec::new();
        for entry in &mut self.entries {
            if entry.0.starts_with(prefix) {
                entry.3 = true;
                match entry.2 {
                    Node::Scalar { value, .. } => taken.push((entry.0, value.as_str(), entry.1)),
                    other => {
                        return Err(error(
                            entry.1,
                            format!(
                                "option `{}` in `{section}` must be a single value, found {}",
                                entry.0,
                                other.kind()
                            ),
                        ))
                    }
                }
            }
        }
        Ok(taken)
    }

    /// Errors on the first option nobody took.
    fn finish(self, known: &str) -> Result<(), ConfigError> {
        match self.entries.iter().find(|e| !e.3) {
            None => Ok(()),
            Some((key, line, ..)) => Err(error(
                *line,
                format!(
                    "unknown option `{key}` in `{}` (known options: {known})",
                    self.section
                ),
            )),
        }
    }
}

/// Parses a Flink duration: a number with an optional unit (`ms`, `s`, `min`,
/// `h`, `d`, long forms too); no unit means milliseconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let millis_per_unit: u64 = match unit.trim() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "m" | "min" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        _ => return None,
    };
    Some(Duration::from_millis(number.checked_mul(millis_per_unit)?))
}

const MYSQL_OPTIONS: &str =
    "type, name, hostname, port, username, password, tables, tables.exclude, \
server-id, server-time-zone, scan.startup.mode, scan.startup.specific-offset.file, \
scan.startup.specific-offset.pos, scan.startup.specific-offset.gtid-set, \
scan.startup.specific-offset.skip-events, scan.startup.specific-offset.skip-rows, \
scan.startup.timestamp-millis, scan.snapshot.fetch.size, scan.incremental.snapshot.chunk.size, connect.timeout, connect.max-retries, \
heartbeat.interval, debezium.* (ignored)";

const DEBEZIUM_OPTIONS: &str = "type, name, path, tables, tables.exclude, decimal.handling.mode";

fn table_filter(options: &mut Options<'_>, default_all: bool) -> Result<TableFilter, ConfigError> {
    let include = if default_all {
        options.scalar("tables")?
    } else {
        Some(options.required("tables")?)
    };
    let exclude = options.scalar("tables.exclude")?;
    let Some((include, line)) = include else {
        return match exclude {
            None => Ok(TableFilter::all()),
            Some((exclude, line)) => TableFilter::new(crate::filter::ALL_TABLES, Some(exclude))
                .map_err(|e| error(line, format!("option `tables.exclude`: {e}"))),
        };
    };
    if let Some((exclude_text, exclude_line)) = exclude {
        // Check the exclude list alone first so its errors carry its own line.
        TableFilter::new(exclude_text, None)
            .map_err(|e| error(exclude_line, format!("option `tables.exclude`: {e}")))?;
    }
    TableFilter::new(include, exclude.map(|e| e.0))
        .map_err(|e| error(line, format!("option `tables`: {e}")))
}

fn parse_mysql(source_type: &str, mut o: Options<'_>) -> Result<SourceDef, ConfigError> {
    let _name = o.scalar("name")?;
    let hostname = o.required("hostname")?.0.to_string();
    let port = o
        .parsed::<u16>("port", "a port number 1..=65535")?
        .map_or(3306, |p| p.0);
    let username = o.required("username")?.0.to_string();
    let password = o
        .scalar("password")?
        .map_or(String::new(), |p| p.0.to_string());
    let tables = table_filter(&mut o, false)?;
    let server_id = match o.scalar("server-id")? {
        None => None,
        Some((text, line)) => Some(parse_server_id(text).ok_or_else(|| {
            error(
                line,
                format!("option `server-id` must be an id like 5400 or a range like 5400-5404, found {text:?}"),
            )
        })?),
    };
    let server_time_zone = o.scalar("server-time-zone")?.map(|t| t.0.to_string());
    let file = o.scalar("scan.startup.specific-offset.file")?;
    let pos = o.parsed::<u64>("scan.startup.specific-offset.pos", "a byte position")?;
    let gtid_set = o.scalar("scan.startup.specific-offset.gtid-set")?;
    let skip_events = o
        .parsed::<u64>("scan.startup.specific-offset.skip-events", "a count")?
        .map_or(0, |v| v.0);
    let skip_rows = o
        .parsed::<u64>("scan.startup.specific-offset.skip-rows", "a count")?
        .map_or(0, |v| v.0);
    let timestamp = o.parsed::<i64>("scan.startup.timestamp-millis", "milliseconds since 1970")?;
    let startup = match o.scalar("scan.startup.mode")? {
        None => StartupMode::Initial,
        Some((mode, line)) => match mode.trim() {
            "initial" => StartupMode::Initial,
            "snapshot" => StartupMode::Snapshot,
            "earliest-offset" => StartupMode::EarliestOffset,
            "latest-offset" => StartupMode::LatestOffset,
            "specific-offset" => {
                let offset = match (gtid_set, file, pos) {
                    (Some((set, _)), _, _) => SpecificOffset::GtidSet(set.to_string()),
                    (None, Some((file, _)), Some((pos, _))) => SpecificOffset::File {
                        file: file.to_string(),
                        pos,
                    },
                    _ => {
                        return Err(error(
                            line,
                            "scan.startup.mode `specific-offset` needs `scan.startup.specific-offset.gtid-set`, or `scan.startup.specific-offset.file` and `.pos`".to_string(),
                        ))
                    }
                };
                StartupMode::SpecificOffset {
                    offset,
                    skip_events,
                    skip_rows,
                }
            }
            "timestamp" => match timestamp {
                Some((millis, _)) => StartupMode::Timestamp { millis },
                None => {
                    return Err(error(
                        line,
                        "scan.startup.mode `timestamp` needs `scan.startup.timestamp-millis`".to_string(),
                    ))
                }
            },
            other => {
                return Err(error(
                    line,
                    format!(
                        "option `scan.startup.mode` must be one of initial, snapshot, earliest-offset, latest-offset, specific-offset, timestamp; found {other:?}"
                    ),
                ))
            }
        },
    };
    let snapshot_fetch_size = match o.parsed::<u32>("scan.snapshot.fetch.size", "a row count")? {
        None => 1024,
        Some((0, line)) => {
            return Err(error(
                line,
                "option `scan.snapshot.fetch.size` must be at least 1".to_string(),
            ))
        }
        Some((n, _)) => n,
    };
    let snapshot_chunk_size =
        match o.parsed::<u32>("scan.incremental.snapshot.chunk.size", "a row count")? {
            None => crate::source::SNAPSHOT_CHUNK_SIZE_DEFAULT,
            Some((0, line)) => {
                return Err(error(
                    line,
                    "option `scan.incremental.snapshot.chunk.size` must be at least 1".to_string(),
                ))
            }
            Some((n, _)) => n,
        };
    let connect_timeout = o
        .duration("connect.timeout")?
        .unwrap_or(Duration::from_secs(30));
    let connect_max_retries = o
        .parsed::<u32>("connect.max-retries", "a count")?
        .map_or(3, |v| v.0);
    let heartbeat_interval = o
        .duration("heartbeat.interval")?
        .unwrap_or(Duration::from_secs(30));
    for (key, line) in o.prefixed("debezium.") {
        tracing::warn!(
            option = key,
            line,
            "Debezium engine option ignored: Fjord reads the binlog itself"
        );
    }
    o.finish(MYSQL_OPTIONS)?;
    Ok(SourceDef::MySql(MySqlSourceConfig {
        source_type: source_type.to_string(),
        hostname,
        port,
        username,
        password,
        tables,
        server_id,
        server_time_zone,
        startup,
        snapshot_fetch_size,
        snapshot_chunk_size,
        connect_timeout,
        connect_max_retries,
        heartbeat_interval,
    }))
}

fn parse_server_id(text: &str) -> Option<ServerIdRange> {
    let text = text.trim();
    let (start, end) = match text.split_once('-') {
        Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
        None => {
            let id = text.parse().ok()?;
            (id, id)
        }
    };
    (start <= end && start > 0).then_some(ServerIdRange { start, end })
}

fn parse_debezium(mut o: Options<'_>) -> Result<SourceDef, ConfigError> {
    let _name = o.scalar("name")?;
    let path = o
        .scalar("path")?
        .filter(|(p, _)| *p != "-")
        .map(|(p, _)| PathBuf::from(p));
    let tables = table_filter(&mut o, true)?;
    let decimal_handling = match o.scalar("decimal.handling.mode")? {
        None => DecimalHandling::Precise,
        Some((text, line)) => match text.trim() {
            "precise" => DecimalHandling::Precise,
            "string" => DecimalHandling::String,
            "double" => DecimalHandling::Double,
            other => {
                return Err(error(
                    line,
                    format!("option `decimal.handling.mode` must be precise, string or double, found {other:?}"),
                ))
            }
        },
    };
    o.finish(DEBEZIUM_OPTIONS)?;
    Ok(SourceDef::DebeziumJson(DebeziumJsonConfig {
        path,
        tables,
        decimal_handling,
    }))
}

fn parse_source(node: &Node, line: usize) -> Result<SourceDef, ConfigError> {
    let mut o = Options::new("source", node, line)?;
    let (source_type, line) = o.required("type")?;
    match source_type.trim() {
        t @ ("mysql" | "mariadb") => parse_mysql(t, o),
        "debezium-json" => parse_debezium(o),
        other => Err(error(
            line,
            format!("unknown source type {other:?} (supported: mysql, mariadb, debezium-json)"),
        )),
    }
}

fn parse_sink(node: &Node, line: usize) -> Result<SinkDef, ConfigError> {
    let mut o = Options::new("sink", node, line)?;
    let (sink_type, line) = o.required("type")?;
    let _name = o.scalar("name")?;
    let sink = match sink_type.trim() {
        "print" => {
            o.finish("type, name")?;
            SinkDef::Print
        }
        "values" => {
            let materialized_line = o
                .entries
                .iter()
                .find(|e| e.0 == "materialized.in.memory")
                .map(|e| e.1);
            if o.boolean("materialized.in.memory")? == Some(true) {
                return Err(error(
                    materialized_line.unwrap_or(line),
                    "`materialized.in.memory: true` is not supported yet: the values sink counts events and materialises nothing".to_string(),
                ));
            }
            let print = o.boolean("print.enabled")?.unwrap_or(false);
            o.finish("type, name, materialized.in.memory, print.enabled")?;
            SinkDef::Values { print }
        }
        "fluss" => SinkDef::Fluss(parse_fluss(o)?),
        other => {
            return Err(error(
                line,
                format!("unknown sink type {other:?} (supported: print, values, fluss)"),
            ))
        }
    };
    Ok(sink)
}

const FLUSS_OPTIONS: &str = "type, name, bootstrap.servers, bucket.key, bucket.num, \
properties.client.*, properties.table.*, include.schema.changes, exclude.schema.changes";

fn parse_fluss(mut o: Options<'_>) -> Result<FlussSinkOptions, ConfigError> {
    let (servers, servers_line) = o.required("bootstrap.servers")?;
    let bootstrap_servers: Vec<String> = servers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if bootstrap_servers.is_empty() {
        return Err(error(
            servers_line,
            "option `bootstrap.servers` names no server (expected host:port[,host:port...])"
                .to_string(),
        ));
    }
    let bucket_keys = match o.scalar("bucket.key")? {
        None => Default::default(),
        Some((text, line)) => parse_bucket_keys(text).map_err(|e| {
            error(
                line,
                format!("option `bucket.key`: {e} (format: db.t1:k1,k2;db.t2:k3)"),
            )
        })?,
    };
    let bucket_nums = match o.scalar("bucket.num")? {
        None => Default::default(),
        Some((text, line)) => parse_bucket_nums(text).map_err(|e| {
            error(
                line,
                format!("option `bucket.num`: {e} (format: db.t1:4;db.t2:8)"),
            )
        })?,
    };
    let mut client_options = std::collections::BTreeMap::new();
    for (key, value, _) in o.prefixed_values("properties.client.")? {
        client_options.insert(key["properties.".len()..].to_string(), value.to_string());
    }
    // Checked now, so a misspelt client option fails before anything starts.
    fjord_client::WriterConfig::from_options(
        client_options.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )
    .map_err(|e| error(o.line, format!("`properties.client.*`: {e}")))?;
    let mut table_properties = std::collections::BTreeMap::new();
    for (key, value, _) in o.prefixed_values("properties.table.")? {
        table_properties.insert(key["properties.".len()..].to_string(), value.to_string());
    }
    if let Some((key, line)) = o
        .prefixed("properties.")
        .into_iter()
        .find(|(k, _)| !k.starts_with("properties.client.") && !k.starts_with("properties.table."))
    {
        return Err(error(
            line,
            format!("option `{key}`: only `properties.client.*` and `properties.table.*` are passed on to Fluss"),
        ));
    }
    let tags =
        |o: &mut Options<'_>, key: &str| -> Result<Option<Vec<SchemaChangeTag>>, ConfigError> {
            match o.list(key)? {
                None => Ok(None),
                Some((items, _)) => items
                    .into_iter()
                    .map(|(item, line)| {
                        SchemaChangeTag::parse(&item).ok_or_else(|| {
                            error(
                                line,
                                format!(
                                "option `{key}`: unknown schema change type {item:?} (known: {})",
                                SchemaChangeTag::known()
                            ),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some),
            }
        };
    let include_schema_changes = tags(&mut o, "include.schema.changes")?;
    let exclude_schema_changes = tags(&mut o, "exclude.schema.changes")?;
    o.finish(FLUSS_OPTIONS)?;
    Ok(FlussSinkOptions {
        bootstrap_servers,
        bucket_keys,
        bucket_nums,
        client_options,
        table_properties,
        include_schema_changes,
        exclude_schema_changes,
    })
}

fn parse_routes(node: &Node) -> Result<Vec<RouteDef>, ConfigError> {
    let items = match node {
        Node::Seq { items, .. } => items,
        other => {
            return Err(error(
                other.line(),
                format!("`route` must be a list of rules, found {}", other.kind()),
            ))
        }
    };
    let mut routes = Vec::with_capacity(items.len());
    for item in items {
        let mut o = Options::new("route", item, item.line())?;
        let (source_table, source_line) = o.required("source-table")?;
        let (sink_table, sink_line) = o.required("sink-table")?;
        let replace_symbol = o.scalar("replace-symbol")?.map(|s| s.0.to_string());
        let description = o.scalar("description")?.map(|s| s.0.to_string());
        o.finish("source-table, sink-table, replace-symbol, description")?;
        let source_table = TablePattern::parse(source_table)
            .map_err(|e| error(source_line, format!("option `source-table`: {e}")))?;
        if !sink_table.contains('.') {
            return Err(error(
                sink_line,
                format!("option `sink-table` must be `database.table`, found {sink_table:?}"),
            ));
        }
        routes.push(RouteDef {
            source_table,
            sink_table: sink_table.to_string(),
            replace_symbol,
            description,
            line: item.line(),
        });
    }
    Ok(routes)
}

fn parse_pipeline(node: Option<(&Node, usize)>) -> Result<PipelineOptions, ConfigError> {
    let mut options = PipelineOptions {
        name: None,
        parallelism: 1,
        state_dir: None,
        state_commit_interval: STATE_COMMIT_INTERVAL_DEFAULT,
        schema_change_behavior: SchemaChangeBehavior::default(),
        progress_interval: PROGRESS_INTERVAL_DEFAULT,
    };
    let Some((node, line)) = node else {
        return Ok(options);
    };
    let mut o = Options::new("pipeline", node, line)?;
    options.name = o.scalar("name")?.map(|n| n.0.to_string());
    if let Some((parallelism, line)) = o.parsed::<u32>("parallelism", "a positive count")? {
        if parallelism == 0 {
            return Err(error(
                line,
                "option `parallelism` must be a positive count; found 0".to_string(),
            ));
        }
        options.parallelism = parallelism;
    }
    options.state_dir = o.scalar("state-dir")?.map(|d| PathBuf::from(d.0));
    if let Some((ms, _)) = o.parsed::<u64>("state.commit-interval-ms", "milliseconds")? {
        options.state_commit_interval = Duration::from_millis(ms);
    }
    if let Some((ms, _)) = o.parsed::<u64>("progress.interval-ms", "milliseconds")? {
        options.progress_interval = Duration::from_millis(ms);
    }
    if let Some((text, line)) = o.scalar("schema.change.behavior")? {
        options.schema_change_behavior = SchemaChangeBehavior::parse(text).ok_or_else(|| {
            error(
                line,
                format!("option `schema.change.behavior` must be one of exception, evolve, try_evolve, lenient, ignore; found {text:?}"),
            )
        })?;
    }
    o.finish("name, parallelism, state-dir, state.commit-interval-ms, progress.interval-ms, schema.change.behavior")?;
    Ok(options)
}

/// Parses a pipeline definition.
pub fn parse(text: &str) -> Result<PipelineDef, ConfigError> {
    let root = yaml::parse(text)?;
    let Node::Map { entries, .. } = &root else {
        return Err(error(
            root.line(),
            format!(
                "a pipeline definition is a mapping of sections, found {}",
                root.kind()
            ),
        ));
    };
    let mut source = None;
    let mut sink = None;
    let mut routes = Vec::new();
    let mut pipeline = None;
    for (key, line, node) in entries {
        match key.as_str() {
            "source" => source = Some((node, *line)),
            "sink" => sink = Some((node, *line)),
            "route" => routes = parse_routes(node)?,
            "pipeline" => pipeline = Some((node, *line)),
            "transform" => {
                return Err(error(
                    *line,
                    "section `transform` is not supported yet: remove it, or project and filter in the source database".to_string(),
                ))
            }
            other => {
                return Err(error(
                    *line,
                    format!("unknown section `{other}` (sections: source, sink, route, transform, pipeline)"),
                ))
            }
        }
    }
    let (source, source_line) =
        source.ok_or_else(|| error(0, "missing section `source`".to_string()))?;
    let source = parse_source(source, source_line)?;
    let (sink, sink_line) = sink.ok_or_else(|| error(0, "missing section `sink`".to_string()))?;
    let sink = parse_sink(sink, sink_line)?;
    let pipeline = parse_pipeline(pipeline)?;
    Ok(PipelineDef {
        source,
        sink,
        routes,
        pipeline,
    })
}
