//! Source positions: where a source resumes. Opaque to the runtime, which only
//! stores and returns them; each source defines what it puts in.
//!
//! Text form (what the offset store writes), one `key=value` per line, values
//! without line breaks:
//!
//! ```text
//! kind=binlog            file=mysql-bin.000003   pos=4711
//! gtid-flavor=mysql|mariadb   gtid-set=<GTID set / GTID list>   (optional)
//! skip-events=0          skip-rows=0
//! kind=input-offset      bytes=123456
//! kind=opaque            source=<name>   data=<text>
//! ```

use std::fmt::Write as _;

/// Which server's GTID syntax a GTID set uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GtidFlavor {
    /// MySQL `uuid:1-100,uuid2:1-5`.
    MySql,
    /// MariaDB `domain-server-seq,...` list.
    MariaDb,
}

/// A MySQL/MariaDB binlog position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinlogPosition {
    /// Binlog file name (`mysql-bin.000003`).
    pub file: String,
    /// Byte position in that file of the next event to read.
    pub pos: u64,
    /// GTID set executed up to here (MySQL) or GTID list (MariaDB), if known.
    pub gtids: Option<(GtidFlavor, String)>,
    /// Events at `pos` already delivered (within a transaction).
    pub skip_events: u64,
    /// Rows of the next rows event already delivered.
    pub skip_rows: u64,
}

/// Where a source resumes reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourcePosition {
    /// A binlog position.
    Binlog(BinlogPosition),
    /// A byte offset into a sequential input (a Debezium JSON file).
    InputOffset {
        /// Bytes consumed.
        bytes: u64,
    },
    /// Anything else a source needs (e.g. snapshot progress), as text without line breaks.
    Opaque {
        /// Name of the source kind that wrote it (checked when reading back).
        source: String,
        /// The source's own encoding.
        data: String,
    },
}

/// A position's text form could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid source position: {0}")]
pub struct PositionError(pub String);

fn check_value(key: &str, value: &str) -> Result<(), PositionError> {
    if value.contains(['\n', '\r']) {
        return Err(PositionError(format!(
            "value of {key} contains a line break"
        )));
    }
    Ok(())
}

impl SourcePosition {
    /// The text form (see the module docs). Fails only if a value holds a line break.
    pub fn encode(&self) -> Result<String, PositionError> {
        let mut out = String::new();
        match self {
            SourcePosition::Binlog(b) => {
                check_value("file", &b.file)?;
                let _ = writeln!(out, "kind=binlog\nfile={}\npos={}", b.file, b.pos);
                if let Some((flavor, set)) = &b.gtids {
                    check_value("gtid-set", set)?;
                    let flavor = match flavor {
                        GtidFlavor::MySql => "mysql",
                        GtidFlavor::MariaDb => "mariadb",
                    };
                    let _ = writeln!(out, "gtid-flavor={flavor}\ngtid-set={set}");
                }
                let _ = writeln!(
                    out,
                    "skip-events={}\nskip-rows={}",
                    b.skip_events, b.skip_rows
                );
            }
            SourcePosition::InputOffset { bytes } => {
                let _ = writeln!(out, "kind=input-offset\nbytes={bytes}");
            }
            SourcePosition::Opaque { source, data } => {
                check_value("source", source)?;
                check_value("data", data)?;
                let _ = writeln!(out, "kind=opaque\nsource={source}\ndata={data}");
            }
        }
        Ok(out)
    }

    /// Reads the text form back.
    pub fn decode(text: &str) -> Result<SourcePosition, PositionError> {
        let mut pairs = Vec::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| PositionError(format!("line {line:?} is not key=value")))?;
            pairs.push((key, value));
        }
        let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let need = |key: &str| get(key).ok_or_else(|| PositionError(format!("missing {key}")));
        let number = |key: &str| -> Result<u64, PositionError> {
            need(key)?
                .parse()
                .map_err(|_| PositionError(format!("{key} is not a non-negative integer")))
        };
        match need("kind")? {
            "binlog" => {
                let gtids = match (get("gtid-flavor"), get("gtid-set")) {
                    (None, None) => None,
                    (Some("mysql"), Some(set)) => Some((GtidFlavor::MySql, set.to_string())),
                    (Some("mariadb"), Some(set)) => Some((GtidFlavor::MariaDb, set.to_string())),
                    _ => return Err(PositionError("bad gtid-flavor/gtid-set pair".into())),
                };
                Ok(SourcePosition::Binlog(BinlogPosition {
                    file: need("file")?.to_string(),
                    pos: number("pos")?,
                    gtids,
                    skip_events: number("skip-events")?,
                    skip_rows: number("skip-rows")?,
                }))
            }
            "input-offset" => Ok(SourcePosition::InputOffset {
                bytes: number("bytes")?,
            }),
            "opaque" => Ok(SourcePosition::Opaque {
                source: need("source")?.to_string(),
                data: need("data")?.to_string(),
            }),
            other => Err(PositionError(format!("unknown kind {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(p: SourcePosition) {
        let text = p.encode().unwrap();
        assert_eq!(SourcePosition::decode(&text).unwrap(), p, "{text}");
    }

    #[test]
    fn every_kind_round_trips_through_text() {
        round_trip(SourcePosition::Binlog(BinlogPosition {
            file: "mysql-bin.000003".into(),
            pos: 4711,
            gtids: None,
            skip_events: 1,
            skip_rows: 2,
        }));
        round_trip(SourcePosition::Binlog(BinlogPosition {
            file: "mysql-bin.000003".into(),
            pos: 4,
            gtids: Some((
                GtidFlavor::MySql,
                "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,4e11fa47-71ca-11e1-9e33-c80aa9429562:1-2"
                    .into(),
            )),
            skip_events: 0,
            skip_rows: 0,
        }));
        round_trip(SourcePosition::Binlog(BinlogPosition {
            file: "mariadb-bin.000001".into(),
            pos: 4,
            gtids: Some((GtidFlavor::MariaDb, "0-1-100,1-2-3".into())),
            skip_events: 0,
            skip_rows: 0,
        }));
        round_trip(SourcePosition::InputOffset { bytes: 99 });
        round_trip(SourcePosition::Opaque {
            source: "mysql-snapshot".into(),
            data: "{\"chunk\":3}".into(),
        });
    }

    #[test]
    fn line_breaks_in_values_are_refused() {
        let p = SourcePosition::Opaque {
            source: "x".into(),
            data: "a\nkind=binlog".into(),
        };
        assert!(p.encode().is_err());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for text in [
            "",
            "kind=binlog",
            "kind=binlog\nfile=f\npos=-1",
            "nonsense",
            "kind=zzz",
        ] {
            assert!(SourcePosition::decode(text).is_err(), "{text:?}");
        }
    }
}
