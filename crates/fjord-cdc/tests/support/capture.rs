//! Runs the MySQL source against a test server and renders its events as
//! one line of text each, so tests compare whole streams with `assert_eq!`.

use std::fmt::Write as _;
use std::time::Duration;

use fjord_cdc::event::{Event, EventBatch};
use fjord_cdc::filter::TableFilter;
use fjord_cdc::position::SourcePosition;
use fjord_cdc::row::{DecimalRef, RowRef};
use fjord_cdc::source::{MySqlSourceConfig, Poll, Source, SourceError, StartOptions, StartupMode};
use fjord_cdc::types::DataType;

use super::{MariaDb, REPL_PASSWORD, REPL_USER};

/// Most batches a test drains before giving up: bounds a source that never
/// reaches its stop point (an idle batch takes up to 0.5 s, so this is a
/// few minutes at worst; a busy batch holds up to 4096 events).
pub const DRAIN_BATCHES_MAX: usize = 600;

/// A source configuration for the test server.
pub fn config(db: &MariaDb, tables: &str, startup: StartupMode) -> MySqlSourceConfig {
    MySqlSourceConfig {
        source_type: "mariadb".into(),
        hostname: "127.0.0.1".into(),
        port: db.port(),
        username: REPL_USER.into(),
        password: REPL_PASSWORD.into(),
        tables: TableFilter::new(tables, None).expect("valid table pattern"),
        server_id: None,
        server_time_zone: None,
        startup,
        snapshot_fetch_size: 1024,
        snapshot_chunk_size: fjord_cdc::source::SNAPSHOT_CHUNK_SIZE_DEFAULT,
        connect_timeout: Duration::from_secs(10),
        connect_max_retries: 3,
        heartbeat_interval: Duration::from_secs(30),
    }
}

/// Options that stop at the binlog position current at open.
pub fn until_current() -> StartOptions {
    StartOptions {
        until_current: true,
        ..StartOptions::default()
    }
}

/// What a drained source produced.
pub struct Captured {
    /// One line per event.
    pub lines: Vec<String>,
    /// The position of the last batch.
    pub position: Option<SourcePosition>,
}

/// Opens the source and reads batches until it ends (or `max_events` lines).
pub fn capture(config: MySqlSourceConfig, start: StartOptions) -> Result<Captured, SourceError> {
    let mut source = fjord_cdc::source::mysql::open(config, start)?;
    drain(source.as_mut(), usize::MAX)
}

/// Reads batches until the source ends or at least `max_events` lines are captured.
pub fn drain(source: &mut dyn Source, max_events: usize) -> Result<Captured, SourceError> {
    let mut batch = EventBatch::default();
    let mut out = Captured {
        lines: Vec::new(),
        position: None,
    };
    for _ in 0..DRAIN_BATCHES_MAX {
        batch.clear();
        let poll = source.next_batch(&mut batch)?;
        render(&batch, &mut out.lines);
        if let Some(p) = batch.position() {
            out.position = Some(p.clone());
        }
        if poll == Poll::End || out.lines.len() >= max_events {
            return Ok(out);
        }
    }
    panic!("source did not end within {DRAIN_BATCHES_MAX} batches");
}

/// Appends one line per event of `batch`.
pub fn render(batch: &EventBatch, lines: &mut Vec<String>) {
    for event in batch.events() {
        match event {
            Event::Change(c) => {
                let mut line = format!("{} {}", c.op.as_str(), c.table.id());
                if let Some(before) = c.before {
                    line.push_str(" before=");
                    row_text(&before, &mut line);
                }
                if let Some(after) = c.after {
                    line.push_str(" after=");
                    row_text(&after, &mut line);
                }
                lines.push(line);
            }
            Event::Schema(s) => {
                let columns = s.schema.as_ref().map(|schema| {
                    schema
                        .columns()
                        .iter()
                        .map(|c| format!("{} {}", c.name, c.data_type))
                        .collect::<Vec<_>>()
                        .join(", ")
                });
                lines.push(format!(
                    "{} {} [{}]",
                    s.change.kind_str(),
                    s.table,
                    columns.unwrap_or_default()
                ));
            }
        }
    }
}

/// `[v1, v2, ...]` with exact values: decimals as scaled digits, temporal
/// values as raw micros, text quoted, bytes in hex.
pub fn row_text(row: &RowRef<'_>, out: &mut String) {
    out.push('[');
    for i in 0..row.layout().len() {
        if i > 0 {
            out.push_str(", ");
        }
        if row.is_null(i) {
            out.push_str("NULL");
            continue;
        }
        match row.layout().data_type(i) {
            DataType::Boolean => {
                let _ = write!(out, "{}", row.get_bool(i));
            }
            DataType::TinyInt | DataType::SmallInt | DataType::Int | DataType::BigInt => {
                let _ = write!(out, "{}", row.get_i64(i));
            }
            DataType::Date => {
                let _ = write!(out, "d{}", row.get_i64(i));
            }
            DataType::Float => {
                let _ = write!(out, "{:?}f", row.get_f32(i));
            }
            DataType::Double => {
                let _ = write!(out, "{:?}", row.get_f64(i));
            }
            DataType::Decimal { scale, .. } => {
                let digits = match row.get_decimal(i) {
                    DecimalRef::Unscaled(v) => v.to_string(),
                    DecimalRef::Digits(d) => d.to_string(),
                };
                let _ = write!(out, "{}e-{scale}", digits);
            }
            DataType::Char { .. }
            | DataType::Varchar { .. }
            | DataType::String
            | DataType::Json => {
                let _ = write!(out, "{:?}", row.get_str(i));
            }
            DataType::Binary { .. } | DataType::Varbinary { .. } | DataType::Bytes => {
                out.push_str("0x");
                for b in row.get_bytes(i) {
                    let _ = write!(out, "{b:02x}");
                }
            }
            DataType::Time { .. } | DataType::Timestamp { .. } | DataType::TimestampLtz { .. } => {
                // Stored unit: micros for precision <= 6, nanos above.
                let _ = write!(out, "t{}", row.get_temporal_raw(i));
            }
        }
    }
    out.push(']');
}
