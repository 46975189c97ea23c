//! The `fluss` sink's options, with the names of Flink CDC's Fluss pipeline
//! connector (`FlussDataSinkOptions`): `bootstrap.servers`, `bucket.key`,
//! `bucket.num`, `properties.client.*`, `properties.table.*`, and the sink
//! options every Flink CDC sink takes, `include.schema.changes` and
//! `exclude.schema.changes`. Parsed once when the pipeline starts.

use std::collections::BTreeMap;

use crate::event::SchemaChange;
use crate::schema::TableId;

/// Options of the `fluss` sink.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlussSinkOptions {
    /// `bootstrap.servers`: `host:port` list.
    pub bootstrap_servers: Vec<String>,
    /// `bucket.key`: per sink table, the bucket key columns of tables the
    /// sink creates (default: the primary key minus partition keys; none
    /// for log tables).
    pub bucket_keys: BTreeMap<TableId, Vec<String>>,
    /// `bucket.num`: per sink table, the bucket count of tables the sink
    /// creates (default: the server's).
    pub bucket_nums: BTreeMap<TableId, i32>,
    /// `properties.client.*` with `properties.` stripped: client options.
    pub client_options: BTreeMap<String, String>,
    /// `properties.table.*` with `properties.` stripped: properties of every
    /// table the sink creates.
    pub table_properties: BTreeMap<String, String>,
    /// `include.schema.changes` (default: every kind).
    pub include_schema_changes: Option<Vec<SchemaChangeTag>>,
    /// `exclude.schema.changes` (default: none; under `lenient`,
    /// `drop.table` and `truncate.table` when not given, as Flink CDC does).
    pub exclude_schema_changes: Option<Vec<SchemaChangeTag>>,
}

/// `pipeline.schema.change.behavior`: what a sink that holds tables does
/// with a source's schema changes (Flink CDC's `SchemaChangeBehavior`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SchemaChangeBehavior {
    /// `exception`: any schema change but a table's creation fails the pipeline.
    Exception,
    /// `evolve`: every change is applied to the sink table; one the sink
    /// cannot apply fails the pipeline.
    Evolve,
    /// `try_evolve`: changes are applied where the sink can; where it
    /// cannot, later rows are converted to the table as it is.
    TryEvolve,
    /// `lenient` (default): added columns become nullable, a dropped column
    /// stays (NULL from then on), a renamed column is added under its new
    /// name (the old one stays, NULL from then on); drop and truncate table
    /// are not applied unless `exclude.schema.changes` is given.
    #[default]
    Lenient,
    /// `ignore`: no schema change reaches the sink table; rows are
    /// converted to the table as it is.
    Ignore,
}

impl SchemaChangeBehavior {
    /// Parses Flink CDC's value (any case).
    pub fn parse(text: &str) -> Option<SchemaChangeBehavior> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "exception" => SchemaChangeBehavior::Exception,
            "evolve" => SchemaChangeBehavior::Evolve,
            "try_evolve" => SchemaChangeBehavior::TryEvolve,
            "lenient" => SchemaChangeBehavior::Lenient,
            "ignore" => SchemaChangeBehavior::Ignore,
            _ => return None,
        })
    }

    /// Flink CDC's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaChangeBehavior::Exception => "exception",
            SchemaChangeBehavior::Evolve => "evolve",
            SchemaChangeBehavior::TryEvolve => "try_evolve",
            SchemaChangeBehavior::Lenient => "lenient",
            SchemaChangeBehavior::Ignore => "ignore",
        }
    }
}

/// One entry of `include.schema.changes` / `exclude.schema.changes`: a
/// schema change kind (`add.column`) or a family of them (`column`, `add`,
/// `drop`, `table`, ...), Flink CDC's `SchemaChangeEventTypeFamily` tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchemaChangeTag(&'static str);

/// Every kind's tag, in Flink CDC's spelling.
const KIND_TAGS: [&str; 7] = [
    "add.column",
    "alter.column.type",
    "create.table",
    "drop.column",
    "drop.table",
    "rename.column",
    "truncate.table",
];

/// The family tags (each names several kinds).
const FAMILY_TAGS: [&str; 8] = [
    "add", "alter", "create", "drop", "rename", "truncate", "table", "column",
];

impl SchemaChangeTag {
    /// The tag named `text`, or `None` if Flink CDC has no such tag.
    pub fn parse(text: &str) -> Option<SchemaChangeTag> {
        let text = text.trim();
        KIND_TAGS
            .iter()
            .chain(FAMILY_TAGS.iter())
            .find(|t| t.eq_ignore_ascii_case(text))
            .map(|t| SchemaChangeTag(t))
    }

    /// Every tag accepted, for error messages.
    pub fn known() -> String {
        KIND_TAGS
            .iter()
            .chain(FAMILY_TAGS.iter())
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The tag's text.
    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// Whether this tag names `kind` (a kind tag: itself; a family tag:
    /// every kind with that word, so `column` names `alter.column.type`).
    pub fn matches(self, kind: &str) -> bool {
        kind == self.0 || kind.split('.').any(|word| word == self.0)
    }
}

/// Flink CDC's tag of a schema change kind.
pub fn change_tag(change: &SchemaChange) -> &'static str {
    match change {
        SchemaChange::CreateTable => "create.table",
        SchemaChange::AddColumn { .. } => "add.column",
        SchemaChange::DropColumn { .. } => "drop.column",
        SchemaChange::RenameColumn { .. } => "rename.column",
        SchemaChange::AlterColumnType { .. } => "alter.column.type",
        SchemaChange::TruncateTable => "truncate.table",
        SchemaChange::DropTable => "drop.table",
    }
}

/// The Fluss client option (`properties.client.writer.retries` in the
/// sink's YAML) that bounds how often a write failing with a retriable
/// error (the server away) is tried again. The sink's writers retry only
/// for [`WRITER_RETRIES_PER_ATTEMPT`]; past that the pipeline resumes from
/// its last committed position (client and writers opened anew), and this
/// many resumptions in a row without a new commit fail the pipeline.
pub const OPT_WRITER_RETRIES: &str = "client.writer.retries";

/// Resumptions in a row when `client.writer.retries` is not given. Fluss's
/// own default (`i32::MAX`) would let a pipeline wait forever for a server
/// gone for good; with the runtime's back-off (0.5 s doubling to 10 s) this
/// many give a server about a minute to come back.
pub const SERVER_RETRIES_DEFAULT: u32 = 10;

/// In-writer retries of one batch before the write fails and the pipeline
/// resumes instead: a brief outage (a server restarting) is absorbed by the
/// writer (back-off 50 ms doubling to 1 s, some 5 s in all), a longer one
/// reaches the runtime, which opens everything anew and logs each attempt.
pub const WRITER_RETRIES_PER_ATTEMPT: i32 = 8;

impl FlussSinkOptions {
    /// Resumptions in a row, without a new commit, after the server became
    /// unavailable: [`OPT_WRITER_RETRIES`] if given, else
    /// [`SERVER_RETRIES_DEFAULT`].
    pub fn server_retries(&self) -> u32 {
        self.client_options
            .get(OPT_WRITER_RETRIES)
            .and_then(|v| v.trim().parse::<i32>().ok())
            .map_or(SERVER_RETRIES_DEFAULT, |r| r.max(0) as u32)
    }

    /// Whether the sink applies changes of `kind` (a [`change_tag`]) under
    /// `behavior`: included (every kind when no list is given) and not
    /// excluded; under `lenient` without an exclude list, `drop.table` and
    /// `truncate.table` are excluded (Flink CDC's `SchemaOperator`).
    pub fn applies(&self, behavior: SchemaChangeBehavior, kind: &str) -> bool {
        let included = match &self.include_schema_changes {
            None => true,
            Some(tags) => tags.iter().any(|t| t.matches(kind)),
        };
        let excluded = match &self.exclude_schema_changes {
            Some(tags) => tags.iter().any(|t| t.matches(kind)),
            None => {
                behavior == SchemaChangeBehavior::Lenient
                    && (kind == "drop.table" || kind == "truncate.table")
            }
        };
        included && !excluded
    }
}

/// Parses `bucket.key`: `db.t1:k1,k2;db.t2:k3`.
pub fn parse_bucket_keys(text: &str) -> Result<BTreeMap<TableId, Vec<String>>, String> {
    let mut out = BTreeMap::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (table, keys) = entry
            .split_once(':')
            .ok_or_else(|| format!("entry {entry:?} is not `database.table:key1,key2`"))?;
        let table = parse_table(table)?;
        let keys: Vec<String> = keys
            .split(',')
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .collect();
        if keys.is_empty() {
            return Err(format!("entry {entry:?} names no bucket key column"));
        }
        if out.insert(table.clone(), keys).is_some() {
            return Err(format!("table {table} is named twice"));
        }
    }
    Ok(out)
}

/// Parses `bucket.num`: `db.t1:4;db.t2:8`.
pub fn parse_bucket_nums(text: &str) -> Result<BTreeMap<TableId, i32>, String> {
    let mut out = BTreeMap::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (table, num) = entry
            .split_once(':')
            .ok_or_else(|| format!("entry {entry:?} is not `database.table:count`"))?;
        let table = parse_table(table)?;
        let num: i32 = num.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            format!("entry {entry:?}: the bucket count must be a positive integer")
        })?;
        if out.insert(table.clone(), num).is_some() {
            return Err(format!("table {table} is named twice"));
        }
    }
    Ok(out)
}

fn parse_table(text: &str) -> Result<TableId, String> {
    let text = text.trim();
    match text.split_once('.') {
        Some((db, t)) if !db.is_empty() && !t.is_empty() && !t.contains('.') => {
            Ok(TableId::new(db, t))
        }
        _ => Err(format!("{text:?} is not `database.table`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_options_parse_flink_cdc_syntax() {
        let keys = parse_bucket_keys("db.t1:k1, k2; db.t2:k3;").unwrap();
        assert_eq!(keys[&TableId::new("db", "t1")], vec!["k1", "k2"]);
        assert_eq!(keys[&TableId::new("db", "t2")], vec!["k3"]);
        let nums = parse_bucket_nums("db.t1:4;db.t2:8").unwrap();
        assert_eq!(nums[&TableId::new("db", "t2")], 8);
        assert!(parse_bucket_nums("db.t1:0").is_err());
        assert!(parse_bucket_nums("t1:4").is_err());
        assert!(parse_bucket_keys("db.t1").is_err());
        assert!(parse_bucket_keys("db.t1:a;db.t1:b").is_err());
    }

    #[test]
    fn tags_match_kinds_and_families() {
        let tag = |t| SchemaChangeTag::parse(t).unwrap();
        assert!(tag("add.column").matches("add.column"));
        assert!(tag("column").matches("add.column"));
        assert!(tag("column").matches("alter.column.type"));
        assert!(tag("alter").matches("alter.column.type"));
        assert!(tag("drop").matches("drop.table"));
        assert!(tag("table").matches("truncate.table"));
        assert!(!tag("table").matches("add.column"));
        assert!(SchemaChangeTag::parse("nonsense").is_none());
    }

    #[test]
    fn server_retries_follow_client_writer_retries_or_a_bounded_default() {
        let mut o = FlussSinkOptions::default();
        assert_eq!(o.server_retries(), SERVER_RETRIES_DEFAULT);
        o.client_options
            .insert(OPT_WRITER_RETRIES.to_string(), " 3 ".to_string());
        assert_eq!(o.server_retries(), 3);
        o.client_options
            .insert(OPT_WRITER_RETRIES.to_string(), "2147483647".to_string());
        assert_eq!(o.server_retries(), i32::MAX as u32);
    }

    #[test]
    fn lenient_excludes_drop_and_truncate_table_unless_told_otherwise() {
        let mut o = FlussSinkOptions::default();
        assert!(!o.applies(SchemaChangeBehavior::Lenient, "drop.table"));
        assert!(!o.applies(SchemaChangeBehavior::Lenient, "truncate.table"));
        assert!(o.applies(SchemaChangeBehavior::Lenient, "add.column"));
        assert!(o.applies(SchemaChangeBehavior::Evolve, "drop.table"));
        o.exclude_schema_changes = Some(vec![]);
        assert!(o.applies(SchemaChangeBehavior::Lenient, "drop.table"));
        o.include_schema_changes = Some(vec![SchemaChangeTag::parse("column").unwrap()]);
        assert!(!o.applies(SchemaChangeBehavior::Evolve, "drop.table"));
        assert!(o.applies(SchemaChangeBehavior::Evolve, "drop.column"));
    }
}
