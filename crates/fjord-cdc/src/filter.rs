//! Table selection: the `tables` / `tables.exclude` options and route
//! `source-table` patterns, compiled once and evaluated once per table (never
//! per row).
//!
//! Pattern syntax (Flink CDC's): a comma-separated list of `database.table`
//! regular expressions, each matched against the whole name. The first dot not
//! preceded by a backslash separates the database pattern from the table
//! pattern. Flink CDC requires `\.` where a regex "any character" is meant (as
//! in `db.user_\.*`); Fjord reads `\.` that way too and also accepts a bare `.`
//! after the separator (`db.user_.*`), which Flink would reject as a third name
//! part. A pattern without a dot matches table names in any database.

use regex::Regex;

use crate::schema::TableId;

/// One compiled `database.table` pattern.
#[derive(Clone, Debug)]
pub struct TablePattern {
    text: String,
    database: Option<Regex>,
    table: Regex,
}

/// A pattern is not a valid regular expression.
#[derive(Debug, thiserror::Error)]
#[error("invalid table pattern {pattern:?}: {reason}")]
pub struct PatternError {
    /// The offending pattern (one element of the comma-separated list).
    pub pattern: String,
    /// What is wrong.
    pub reason: String,
}

fn compile_part(part: &str, whole: &str) -> Result<Regex, PatternError> {
    // `\.` means regex "any char" in Flink CDC's syntax.
    let regex = part.replace("\\.", ".");
    Regex::new(&format!("^(?:{regex})$")).map_err(|e| PatternError {
        pattern: whole.to_string(),
        reason: e.to_string(),
    })
}

fn split_first_unescaped_dot(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'.' => return Some((&text[..i], &text[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

impl TablePattern {
    /// Compiles one `database.table` pattern.
    pub fn parse(text: &str) -> Result<TablePattern, PatternError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(PatternError {
                pattern: text.to_string(),
                reason: "empty pattern".to_string(),
            });
        }
        let (database, table) = match split_first_unescaped_dot(text) {
            Some((db, table)) => (Some(compile_part(db, text)?), compile_part(table, text)?),
            None => (None, compile_part(text, text)?),
        };
        Ok(TablePattern {
            text: text.to_string(),
            database,
            table,
        })
    }

    /// Whether `database.table` matches the whole pattern.
    pub fn matches(&self, database: &str, table: &str) -> bool {
        self.database.as_ref().is_none_or(|d| d.is_match(database)) && self.table.is_match(table)
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Split a comma-separated pattern list; commas inside `{m,n}` quantifiers are
/// kept (Flink CDC splits on commas outside braces too).
fn split_list(list: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = list.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b',' if depth <= 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&list[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The pattern selecting every table of every database (`\.` is "any character").
pub const ALL_TABLES: &str = "\\.*.\\.*";

/// The compiled `tables` / `tables.exclude` selection a source applies.
#[derive(Clone, Debug, Default)]
pub struct TableFilter {
    include: Vec<TablePattern>,
    exclude: Vec<TablePattern>,
}

impl TableFilter {
    /// Compiles the include list and optional exclude list (comma-separated patterns).
    pub fn new(include: &str, exclude: Option<&str>) -> Result<TableFilter, PatternError> {
        let include = split_list(include)
            .into_iter()
            .map(TablePattern::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if include.is_empty() {
            return Err(PatternError {
                pattern: String::new(),
                reason: "no table pattern given".to_string(),
            });
        }
        let exclude = match exclude {
            Some(list) => split_list(list)
                .into_iter()
                .map(TablePattern::parse)
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        Ok(TableFilter { include, exclude })
    }

    /// A filter that selects every table.
    pub fn all() -> TableFilter {
        TableFilter {
            include: vec![TablePattern::parse(ALL_TABLES).expect("constant pattern compiles")],
            exclude: Vec::new(),
        }
    }

    /// Whether the table is selected: matches an include pattern and no exclude pattern.
    pub fn matches(&self, database: &str, table: &str) -> bool {
        self.include.iter().any(|p| p.matches(database, table))
            && !self.exclude.iter().any(|p| p.matches(database, table))
    }

    /// [`TableFilter::matches`] for a table id.
    pub fn matches_id(&self, id: &TableId) -> bool {
        self.matches(id.database(), id.table())
    }

    /// The include patterns (a snapshot lists tables from these).
    pub fn include(&self) -> &[TablePattern] {
        &self.include
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(include: &str, exclude: Option<&str>, db: &str, table: &str, expected: bool) {
        let filter = TableFilter::new(include, exclude).unwrap();
        assert_eq!(
            filter.matches(db, table),
            expected,
            "{include:?} / {exclude:?} on {db}.{table}"
        );
    }

    #[test]
    fn patterns_select_whole_names() {
        check("db.user_.*", None, "db", "user_1", true);
        check("db.user_.*", None, "db", "users", false);
        check("db.user_\\.*", None, "db", "user_x", true);
        check("db.orders", None, "db", "orders_2", false);
        check("db.orders", None, "db2", "orders", false);
        check(
            "db[1-2].[app|web]order_\\.*",
            None,
            "db2",
            "weborder_1",
            false,
        );
        check(
            "db[1-2].(app|web)order_\\.*",
            None,
            "db2",
            "weborder_1",
            true,
        );
        check("db1.t{1,2},db2.x", None, "db2", "x", true);
        check("db1.t{1,2},db2.x", None, "db1", "tt", true);
        check("orders", None, "any", "orders", true);
    }

    #[test]
    fn all_selects_every_table() {
        assert!(TableFilter::all().matches("a", "b.c"));
        assert!(TableFilter::all().matches_id(&TableId::new("x", "y")));
    }

    #[test]
    fn exclude_wins_over_include() {
        check("db.\\.*", Some("db.secret_.*"), "db", "secret_1", false);
        check("db.\\.*", Some("db.secret_.*"), "db", "public", true);
    }

    #[test]
    fn bad_regex_names_the_pattern() {
        let err = TableFilter::new("db.ok,db.(broken", None).unwrap_err();
        assert_eq!(err.pattern, "db.(broken");
    }
}
