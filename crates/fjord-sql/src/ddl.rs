//! Fjord's own statements, in Flink SQL syntax for Fluss: the DDL that
//! creates and drops databases and tables, and the SHOW / USE statements.
//! They are recognised by their first keywords and parsed here, over
//! sqlparser's tokenizer, because Flink's DDL (`PRIMARY KEY (..) NOT
//! ENFORCED`, `PARTITIONED BY (col)` without types, `WITH ('k' = 'v')`,
//! `ARRAY<INT>`) is no dialect's. Everything else goes to DataFusion.
//!
//! ```text
//! CREATE DATABASE [IF NOT EXISTS] db [COMMENT 'c']
//! DROP DATABASE [IF EXISTS] db [RESTRICT | CASCADE]
//! CREATE TABLE [IF NOT EXISTS] [db.]t (
//!     col TYPE [NOT NULL] [PRIMARY KEY NOT ENFORCED] [COMMENT 'c'], ...
//!     [, PRIMARY KEY (col, ...) NOT ENFORCED]
//! ) [COMMENT 'c'] [PARTITIONED BY (col, ...)] [WITH ('key' = 'value', ...)]
//! DROP TABLE [IF EXISTS] [db.]t
//! SHOW DATABASES | SHOW TABLES [FROM db] | SHOW CREATE TABLE [db.]t
//! SHOW PARTITIONS [db.]t | USE db
//! ```
//!
//! In `WITH`, `bucket.num` and `bucket.key` (comma-separated) make the
//! distribution, `table.*` keys are table properties, the others custom
//! properties — as Fluss's Flink catalog splits them.

use std::collections::BTreeMap;

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use fjord_format::schema::{Schema, TableDescriptor, TableDistribution};
use fjord_format::types::{DataField, DataType, TypeKind};

use crate::error::{Result, SqlError};

/// A table named in a statement, its database defaulted later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectName {
    /// The database, when the statement names one.
    pub database: Option<String>,
    /// The table.
    pub name: String,
}

/// A statement Fjord runs itself.
#[derive(Clone, Debug, PartialEq)]
pub enum FjordStatement {
    /// `CREATE DATABASE`.
    CreateDatabase {
        name: String,
        if_not_exists: bool,
        comment: Option<String>,
    },
    /// `DROP DATABASE`.
    DropDatabase {
        name: String,
        if_exists: bool,
        cascade: bool,
    },
    /// `CREATE TABLE`.
    CreateTable {
        name: ObjectName,
        if_not_exists: bool,
        descriptor: Box<TableDescriptor>,
    },
    /// `DROP TABLE`.
    DropTable { name: ObjectName, if_exists: bool },
    /// `SHOW DATABASES`.
    ShowDatabases,
    /// `SHOW TABLES [FROM db]`.
    ShowTables { database: Option<String> },
    /// `SHOW CREATE TABLE`.
    ShowCreateTable { name: ObjectName },
    /// `SHOW PARTITIONS`.
    ShowPartitions { name: ObjectName },
    /// `USE db`.
    Use { database: String },
}

/// What to do with a statement's text.
#[derive(Debug)]
pub enum Parsed {
    /// Fjord runs it.
    Fjord(FjordStatement),
    /// DataFusion runs it.
    Query,
}

/// Statement kinds refused with a name, recognised by their first words.
const UNSUPPORTED: &[(&[&str], &str)] = &[
    (&["ALTER", "TABLE"], "ALTER TABLE (the server does not serve AlterTable yet: schema changes such as ADD COLUMN are not possible)"),
    (&["ALTER"], "ALTER"),
    (&["CREATE", "VIEW"], "CREATE VIEW"),
    (&["CREATE", "OR"], "CREATE OR REPLACE"),
    (&["CREATE", "TEMPORARY"], "CREATE TEMPORARY"),
    (&["CREATE", "EXTERNAL"], "CREATE EXTERNAL TABLE"),
    (&["CREATE", "FUNCTION"], "CREATE FUNCTION"),
    (&["CREATE", "INDEX"], "CREATE INDEX"),
    (&["CREATE", "UNBOUNDED"], "CREATE UNBOUNDED EXTERNAL TABLE"),
    (&["CREATE", "CATALOG"], "CREATE CATALOG"),
    (&["DROP", "VIEW"], "DROP VIEW"),
    (&["DROP", "FUNCTION"], "DROP FUNCTION"),
    (&["DROP", "CATALOG"], "DROP CATALOG"),
    (&["DELETE"], "DELETE (primary-key rows are deleted by the upsert writer; SQL DELETE is not implemented yet)"),
    (&["UPDATE"], "UPDATE (write the new row with INSERT INTO a primary-key table: it is an upsert)"),
    (&["TRUNCATE"], "TRUNCATE"),
    (&["MERGE"], "MERGE"),
    (&["COPY"], "COPY"),
    (&["INSERT", "OVERWRITE"], "INSERT OVERWRITE"),
];

/// Sorts a statement: Fjord's own, refused, or DataFusion's.
pub fn parse(sql: &str) -> Result<Parsed> {
    let tokens = tokenize(sql)?;
    let words: Vec<String> = tokens
        .iter()
        .take(3)
        .map(|t| match t {
            Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
            _ => String::new(),
        })
        .collect();
    let starts = |prefix: &[&str]| {
        prefix.len() <= words.len() && prefix.iter().zip(&words).all(|(p, w)| p == w)
    };
    for (prefix, name) in UNSUPPORTED {
        if starts(prefix) {
            return Err(SqlError::Unsupported(format!(
                "{name} is not supported by Fjord SQL"
            )));
        }
    }
    let fjord = starts(&["CREATE", "DATABASE"])
        || starts(&["CREATE", "SCHEMA"])
        || starts(&["CREATE", "TABLE"])
        || starts(&["DROP", "DATABASE"])
        || starts(&["DROP", "SCHEMA"])
        || starts(&["DROP", "TABLE"])
        || starts(&["SHOW", "DATABASES"])
        || starts(&["SHOW", "SCHEMAS"])
        || starts(&["SHOW", "TABLES"])
        || starts(&["SHOW", "CREATE"])
        || starts(&["SHOW", "PARTITIONS"])
        || starts(&["USE"]);
    if !fjord {
        return Ok(Parsed::Query);
    }
    let mut p = Parser { tokens, at: 0 };
    let statement = p.statement()?;
    p.eat_token(&Token::SemiColon);
    if !p.done() {
        return Err(p.error("the end of the statement"));
    }
    Ok(Parsed::Fjord(statement))
}

fn tokenize(sql: &str) -> Result<Vec<Token>> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| SqlError::Invalid(format!("SQL does not parse: {e}")))?;
    Ok(tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect())
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn done(&self) -> bool {
        matches!(self.peek(), None | Some(Token::EOF))
    }

    fn error(&self, expected: &str) -> SqlError {
        let found = match self.peek() {
            None | Some(Token::EOF) => "the end of the statement".to_owned(),
            Some(t) => format!("`{t}`"),
        };
        SqlError::Invalid(format!(
            "SQL does not parse: expected {expected}, found {found}"
        ))
    }

    fn peek_keyword(&self, keyword: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w))
            if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(keyword))
    }

    fn eat_keyword(&mut self, keyword: &str) -> bool {
        if self.peek_keyword(keyword) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect_keyword(&mut self, keyword: &str) -> Result<()> {
        if self.eat_keyword(keyword) {
            Ok(())
        } else {
            Err(self.error(keyword))
        }
    }

    fn eat_keywords(&mut self, keywords: &[&str]) -> bool {
        let save = self.at;
        for k in keywords {
            if !self.eat_keyword(k) {
                self.at = save;
                return false;
            }
        }
        true
    }

    fn eat_token(&mut self, token: &Token) -> bool {
        if self.peek() == Some(token) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect_token(&mut self, token: &Token, what: &str) -> Result<()> {
        if self.eat_token(token) {
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    /// An identifier: a word (as written, unquoted ones too — Fluss names
    /// are case-sensitive) or a double- or back-quoted name.
    fn ident(&mut self, what: &str) -> Result<String> {
        match self.peek() {
            Some(Token::Word(w))
                if w.quote_style.is_some()
                    || w.keyword == Keyword::NoKeyword
                    || !is_reserved(&w.value) =>
            {
                let value = w.value.clone();
                self.at += 1;
                Ok(value)
            }
            _ => Err(self.error(what)),
        }
    }

    fn object_name(&mut self) -> Result<ObjectName> {
        let first = self.ident("a table name")?;
        if self.eat_token(&Token::Period) {
            let name = self.ident("a table name after the database")?;
            Ok(ObjectName {
                database: Some(first),
                name,
            })
        } else {
            Ok(ObjectName {
                database: None,
                name: first,
            })
        }
    }

    fn string(&mut self, what: &str) -> Result<String> {
        match self.peek() {
            Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.error(what)),
        }
    }

    fn number(&mut self, what: &str) -> Result<u32> {
        match self.peek() {
            Some(Token::Number(n, _)) => {
                let value = n.parse().map_err(|_| {
                    SqlError::Invalid(format!("{what}: {n} is not a small whole number"))
                })?;
                self.at += 1;
                Ok(value)
            }
            _ => Err(self.error(what)),
        }
    }

    fn statement(&mut self) -> Result<FjordStatement> {
        if self.eat_keyword("USE") {
            return Ok(FjordStatement::Use {
                database: self.ident("a database name")?,
            });
        }
        if self.eat_keyword("SHOW") {
            if self.eat_keyword("DATABASES") || self.eat_keyword("SCHEMAS") {
                return Ok(FjordStatement::ShowDatabases);
            }
            if self.eat_keyword("TABLES") {
                let database = if self.eat_keyword("FROM") || self.eat_keyword("IN") {
                    Some(self.ident("a database name")?)
                } else {
                    None
                };
                return Ok(FjordStatement::ShowTables { database });
            }
            if self.eat_keywords(&["CREATE", "TABLE"]) {
                return Ok(FjordStatement::ShowCreateTable {
                    name: self.object_name()?,
                });
            }
            self.expect_keyword("PARTITIONS")?;
            return Ok(FjordStatement::ShowPartitions {
                name: self.object_name()?,
            });
        }
        if self.eat_keyword("DROP") {
            if self.eat_keyword("DATABASE") || self.eat_keyword("SCHEMA") {
                let if_exists = self.eat_keywords(&["IF", "EXISTS"]);
                let name = self.ident("a database name")?;
                let cascade = if self.eat_keyword("CASCADE") {
                    true
                } else {
                    self.eat_keyword("RESTRICT");
                    false
                };
                return Ok(FjordStatement::DropDatabase {
                    name,
                    if_exists,
                    cascade,
                });
            }
            self.expect_keyword("TABLE")?;
            let if_exists = self.eat_keywords(&["IF", "EXISTS"]);
            return Ok(FjordStatement::DropTable {
                name: self.object_name()?,
                if_exists,
            });
        }
        self.expect_keyword("CREATE")?;
        if self.eat_keyword("DATABASE") || self.eat_keyword("SCHEMA") {
            let if_not_exists = self.eat_keywords(&["IF", "NOT", "EXISTS"]);
            let name = self.ident("a database name")?;
            let comment = if self.eat_keyword("COMMENT") {
                Some(self.string("a comment string")?)
            } else {
                None
            };
            return Ok(FjordStatement::CreateDatabase {
                name,
                if_not_exists,
                comment,
            });
        }
        self.expect_keyword("TABLE")?;
        self.create_table()
    }

    fn create_table(&mut self) -> Result<FjordStatement> {
        let if_not_exists = self.eat_keywords(&["IF", "NOT", "EXISTS"]);
        let name = self.object_name()?;
        if self.peek_keyword("AS") || self.peek_keyword("LIKE") {
            return Err(SqlError::Unsupported(
                "CREATE TABLE ... AS / LIKE is not supported by Fjord SQL: create the table, then INSERT INTO it"
                    .to_owned(),
            ));
        }
        self.expect_token(&Token::LParen, "`(` and the columns")?;
        let mut builder = Schema::builder();
        let mut columns = 0usize;
        let mut primary_key: Option<Vec<String>> = None;
        loop {
            if self.eat_keyword("PRIMARY") {
                self.expect_keyword("KEY")?;
                let key = self.ident_list()?;
                self.not_enforced()?;
                if primary_key.replace(key).is_some() {
                    return Err(SqlError::Invalid(
                        "the primary key is declared twice".to_owned(),
                    ));
                }
            } else if self.peek_keyword("CONSTRAINT") {
                self.at += 1;
                self.ident("a constraint name")?;
                continue;
            } else if self.peek_keyword("WATERMARK") {
                return Err(SqlError::Unsupported(
                    "WATERMARK is not supported by Fjord SQL (no streaming queries yet)".to_owned(),
                ));
            } else {
                let column = self.ident("a column name or PRIMARY KEY")?;
                let mut data_type = self.data_type()?;
                let mut comment = None;
                loop {
                    if self.eat_keywords(&["NOT", "NULL"]) {
                        data_type = data_type.not_null();
                    } else if self.eat_keyword("NULL") {
                    } else if self.eat_keyword("COMMENT") {
                        comment = Some(self.string("a comment string")?);
                    } else if self.eat_keywords(&["PRIMARY", "KEY"]) {
                        self.not_enforced()?;
                        if primary_key.replace(vec![column.clone()]).is_some() {
                            return Err(SqlError::Invalid(
                                "the primary key is declared twice".to_owned(),
                            ));
                        }
                    } else {
                        break;
                    }
                }
                builder = builder.column(column, data_type);
                if let Some(c) = comment {
                    builder = builder.comment(c);
                }
                columns += 1;
            }
            if self.eat_token(&Token::Comma) {
                continue;
            }
            self.expect_token(&Token::RParen, "`,` or `)`")?;
            break;
        }
        if columns == 0 {
            return Err(SqlError::Invalid(format!(
                "CREATE TABLE {}: no columns",
                name.name
            )));
        }
        let mut comment = None;
        let mut partition_keys = Vec::new();
        let mut options = BTreeMap::new();
        loop {
            if self.eat_keyword("COMMENT") {
                comment = Some(self.string("a comment string")?);
            } else if self.eat_keywords(&["PARTITIONED", "BY"]) {
                partition_keys = self.ident_list()?;
            } else if self.eat_keyword("WITH") {
                options = self.options()?;
            } else {
                break;
            }
        }
        if let Some(pk) = &primary_key {
            builder = builder.primary_key(pk.clone());
        }
        let schema = builder
            .build()
            .map_err(|e| SqlError::Invalid(format!("CREATE TABLE {}: {e}", name.name)))?;
        let descriptor = descriptor(schema, comment, partition_keys, options)
            .map_err(|e| SqlError::Invalid(format!("CREATE TABLE {}: {e}", name.name)))?;
        Ok(FjordStatement::CreateTable {
            name,
            if_not_exists,
            descriptor: Box::new(descriptor),
        })
    }

    fn not_enforced(&mut self) -> Result<()> {
        if self.eat_keywords(&["NOT", "ENFORCED"]) {
            Ok(())
        } else {
            Err(SqlError::Invalid(
                "a primary key must be declared NOT ENFORCED (Flink SQL: PRIMARY KEY (..) NOT ENFORCED)".to_owned(),
            ))
        }
    }

    fn ident_list(&mut self) -> Result<Vec<String>> {
        self.expect_token(&Token::LParen, "`(`")?;
        let mut names = vec![self.ident("a column name")?];
        while self.eat_token(&Token::Comma) {
            names.push(self.ident("a column name")?);
        }
        self.expect_token(&Token::RParen, "`,` or `)`")?;
        Ok(names)
    }

    fn options(&mut self) -> Result<BTreeMap<String, String>> {
        self.expect_token(&Token::LParen, "`(` and options")?;
        let mut options = BTreeMap::new();
        if self.eat_token(&Token::RParen) {
            return Ok(options);
        }
        loop {
            let key = self.string("an option key in quotes ('bucket.num')")?;
            self.expect_token(&Token::Eq, "`=`")?;
            let value = match self.peek() {
                Some(Token::Number(n, _)) => {
                    let n = n.clone();
                    self.at += 1;
                    n
                }
                _ => self.string("an option value in quotes")?,
            };
            options.insert(key, value);
            if self.eat_token(&Token::Comma) {
                continue;
            }
            self.expect_token(&Token::RParen, "`,` or `)`")?;
            return Ok(options);
        }
    }

    fn precision(&mut self, default: u32) -> Result<u32> {
        if self.eat_token(&Token::LParen) {
            let p = self.number("a precision")?;
            self.expect_token(&Token::RParen, "`)`")?;
            Ok(p)
        } else {
            Ok(default)
        }
    }

    fn data_type(&mut self) -> Result<DataType> {
        let Some(Token::Word(w)) = self.peek() else {
            return Err(self.error("a type"));
        };
        let name = w.value.to_ascii_uppercase();
        self.at += 1;
        let invalid = |e: fjord_format::error::SchemaError| SqlError::Invalid(e.to_string());
        Ok(match name.as_str() {
            "BOOLEAN" | "BOOL" => DataType::boolean(),
            "TINYINT" => DataType::tinyint(),
            "SMALLINT" => DataType::smallint(),
            "INT" | "INTEGER" => DataType::int(),
            "BIGINT" => DataType::bigint(),
            "FLOAT" | "REAL" => DataType::float(),
            "DOUBLE" => {
                self.eat_keyword("PRECISION");
                DataType::double()
            }
            "STRING" | "TEXT" => DataType::string(),
            "VARCHAR" => {
                // Fluss has no bounded VARCHAR: Flink's STRING is VARCHAR(MAX).
                self.precision(0)?;
                DataType::string()
            }
            "CHAR" => {
                if self.eat_keyword("VARYING") {
                    self.precision(0)?;
                    DataType::string()
                } else {
                    DataType::char(self.precision(1)?).map_err(invalid)?
                }
            }
            "BYTES" | "VARBINARY" | "BYTEA" => {
                self.precision(0)?;
                DataType::bytes()
            }
            "BINARY" => DataType::binary(self.precision(1)?).map_err(invalid)?,
            "DECIMAL" | "NUMERIC" | "DEC" => {
                let (p, s) = if self.eat_token(&Token::LParen) {
                    let p = self.number("a precision")?;
                    let s = if self.eat_token(&Token::Comma) {
                        self.number("a scale")?
                    } else {
                        0
                    };
                    self.expect_token(&Token::RParen, "`)`")?;
                    (p, s)
                } else {
                    (10, 0)
                };
                DataType::decimal(p, s).map_err(invalid)?
            }
            "DATE" => DataType::date(),
            "TIME" => {
                let p = self.precision(0)?;
                self.eat_keywords(&["WITHOUT", "TIME", "ZONE"]);
                DataType::time(p).map_err(invalid)?
            }
            "TIMESTAMP" => {
                let p = self.precision(6)?;
                if self.eat_keywords(&["WITH", "LOCAL", "TIME", "ZONE"]) {
                    DataType::timestamp_ltz(p).map_err(invalid)?
                } else {
                    self.eat_keywords(&["WITHOUT", "TIME", "ZONE"]);
                    DataType::timestamp(p).map_err(invalid)?
                }
            }
            "TIMESTAMP_LTZ" => DataType::timestamp_ltz(self.precision(6)?).map_err(invalid)?,
            "ARRAY" => {
                self.expect_token(&Token::Lt, "`<`")?;
                let element = self.nested_type()?;
                self.close_angle()?;
                DataType::array(element)
            }
            "MAP" => {
                self.expect_token(&Token::Lt, "`<`")?;
                let key = self.nested_type()?;
                self.expect_token(&Token::Comma, "`,`")?;
                let value = self.nested_type()?;
                self.close_angle()?;
                DataType::map(key, value)
            }
            "ROW" => {
                let close = if self.eat_token(&Token::Lt) {
                    Token::Gt
                } else {
                    self.expect_token(&Token::LParen, "`<` or `(`")?;
                    Token::RParen
                };
                let mut fields = Vec::new();
                loop {
                    let name = self.ident("a field name")?;
                    let data_type = self.nested_type()?;
                    fields.push(DataField::new(name, data_type));
                    if self.eat_token(&Token::Comma) {
                        continue;
                    }
                    if close == Token::Gt {
                        self.close_angle()?;
                    } else {
                        self.expect_token(&Token::RParen, "`)`")?;
                    }
                    break;
                }
                DataType::row(fields)
            }
            other => {
                return Err(SqlError::Unsupported(format!(
                    "type {other} (Fluss types: BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, \
                     CHAR(n), STRING, DECIMAL(p, s), DATE, TIME(p), TIMESTAMP(p), TIMESTAMP_LTZ(p), \
                     BINARY(n), BYTES, ARRAY<T>, MAP<K, V>, ROW<..>)"
                )))
            }
        })
    }

    /// A type inside `<>`, with its own NOT NULL.
    fn nested_type(&mut self) -> Result<DataType> {
        let t = self.data_type()?;
        Ok(if self.eat_keywords(&["NOT", "NULL"]) {
            t.not_null()
        } else {
            self.eat_keyword("NULL");
            t
        })
    }

    /// A closing `>`; `>>` (the tokenizer's shift operator) closes two.
    fn close_angle(&mut self) -> Result<()> {
        match self.peek() {
            Some(Token::Gt) => {
                self.at += 1;
                Ok(())
            }
            Some(Token::ShiftRight) => {
                self.tokens[self.at] = Token::Gt;
                Ok(())
            }
            _ => Err(self.error("`>`")),
        }
    }
}

/// Words that cannot be an unquoted name.
fn is_reserved(word: &str) -> bool {
    const RESERVED: &[&str] = &[
        "PRIMARY",
        "CONSTRAINT",
        "WITH",
        "PARTITIONED",
        "COMMENT",
        "FROM",
        "IN",
        "AS",
        "LIKE",
        "NOT",
    ];
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(word))
}

/// `bucket.num` / `bucket.key` into the distribution, `table.*` into the
/// properties, the rest into custom properties.
fn descriptor(
    schema: Schema,
    comment: Option<String>,
    partition_keys: Vec<String>,
    options: BTreeMap<String, String>,
) -> std::result::Result<TableDescriptor, String> {
    let mut properties = BTreeMap::new();
    let mut custom = BTreeMap::new();
    let mut bucket_count = None;
    let mut bucket_keys = Vec::new();
    for (key, value) in options {
        match key.as_str() {
            "bucket.num" => {
                bucket_count = Some(
                    value
                        .trim()
                        .parse::<i32>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| {
                            format!("'bucket.num' = '{value}' is not a positive number")
                        })?,
                )
            }
            "bucket.key" => {
                bucket_keys = value
                    .split(',')
                    .map(|k| k.trim().to_owned())
                    .filter(|k| !k.is_empty())
                    .collect()
            }
            k if k.starts_with("table.") => {
                properties.insert(key, value);
            }
            _ => {
                custom.insert(key, value);
            }
        }
    }
    for key in &partition_keys {
        let index = schema
            .column_index(key)
            .ok_or_else(|| format!("partition key `{key}` is not a column"))?;
        if matches!(
            schema.columns()[index].data_type.kind(),
            TypeKind::Array(_) | TypeKind::Map { .. } | TypeKind::Row(_)
        ) {
            return Err(format!("partition key `{key}` has a nested type"));
        }
    }
    let distribution =
        (bucket_count.is_some() || !bucket_keys.is_empty()).then_some(TableDistribution {
            bucket_count,
            bucket_keys,
        });
    TableDescriptor::new(
        schema,
        comment,
        partition_keys,
        distribution,
        properties,
        custom,
    )
    .map_err(|e| e.to_string())
}

/// The Flink SQL that creates a table like `descriptor`.
pub fn show_create_table(database: &str, table: &str, descriptor: &TableDescriptor) -> String {
    use std::fmt::Write;
    let quote = |name: &str| format!("`{}`", name.replace('`', "``"));
    let literal = |text: &str| format!("'{}'", text.replace('\'', "''"));
    let schema = descriptor.schema();
    let mut sql = format!("CREATE TABLE {}.{} (\n", quote(database), quote(table));
    let mut lines: Vec<String> = schema
        .columns()
        .iter()
        .map(|c| {
            let mut line = format!("  {} {}", quote(&c.name), c.data_type);
            if let Some(comment) = &c.comment {
                let _ = write!(line, " COMMENT {}", literal(comment));
            }
            line
        })
        .collect();
    if let Some(pk) = schema.primary_key() {
        let names: Vec<String> = pk.iter().map(|k| quote(k)).collect();
        lines.push(format!("  PRIMARY KEY ({}) NOT ENFORCED", names.join(", ")));
    }
    sql.push_str(&lines.join(",\n"));
    sql.push_str("\n)");
    if let Some(comment) = descriptor.comment() {
        let _ = write!(sql, "\nCOMMENT {}", literal(comment));
    }
    if descriptor.is_partitioned() {
        let names: Vec<String> = descriptor
            .partition_keys()
            .iter()
            .map(|k| quote(k))
            .collect();
        let _ = write!(sql, "\nPARTITIONED BY ({})", names.join(", "));
    }
    let mut options: Vec<(String, String)> = Vec::new();
    if let Some(n) = descriptor.bucket_count() {
        options.push(("bucket.num".to_owned(), n.to_string()));
    }
    if !descriptor.bucket_keys().is_empty() {
        options.push(("bucket.key".to_owned(), descriptor.bucket_keys().join(",")));
    }
    for (k, v) in descriptor
        .properties()
        .iter()
        .chain(descriptor.custom_properties())
    {
        options.push((k.clone(), v.clone()));
    }
    if !options.is_empty() {
        let items: Vec<String> = options
            .iter()
            .map(|(k, v)| format!("  {} = {}", literal(k), literal(v)))
            .collect();
        let _ = write!(sql, "\nWITH (\n{}\n)", items.join(",\n"));
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fjord(sql: &str) -> FjordStatement {
        match parse(sql).unwrap_or_else(|e| panic!("{sql}: {e}")) {
            Parsed::Fjord(s) => s,
            Parsed::Query => panic!("{sql}: not a Fjord statement"),
        }
    }

    #[test]
    fn flink_create_table_with_key_partitions_and_options() {
        let s = fjord(
            "CREATE TABLE IF NOT EXISTS shop.orders (
                order_id BIGINT, dt STRING NOT NULL COMMENT 'day',
                amount DECIMAL(10, 2), tags ARRAY<STRING>, attrs MAP<STRING, ARRAY<INT>>,
                ts TIMESTAMP(3), seen TIMESTAMP_LTZ(3), t2 TIMESTAMP(6) WITH LOCAL TIME ZONE,
                PRIMARY KEY (order_id, dt) NOT ENFORCED
            ) COMMENT 'orders' PARTITIONED BY (dt)
            WITH ('bucket.num' = '4', 'table.log.ttl' = '7d', 'my.tag' = 'x');",
        );
        let FjordStatement::CreateTable {
            name,
            if_not_exists,
            descriptor,
        } = s
        else {
            panic!("{s:?}")
        };
        assert!(if_not_exists);
        assert_eq!(
            name,
            ObjectName {
                database: Some("shop".into()),
                name: "orders".into()
            }
        );
        assert_eq!(descriptor.bucket_count(), Some(4));
        assert_eq!(descriptor.partition_keys(), ["dt"]);
        assert_eq!(descriptor.comment(), Some("orders"));
        assert_eq!(descriptor.properties()["table.log.ttl"], "7d");
        assert_eq!(descriptor.custom_properties()["my.tag"], "x");
        let schema = descriptor.schema();
        assert_eq!(schema.primary_key().unwrap(), ["order_id", "dt"]);
        let types: Vec<String> = schema
            .columns()
            .iter()
            .map(|c| c.data_type.to_string())
            .collect();
        assert_eq!(types[2], "DECIMAL(10, 2)");
        assert_eq!(types[4], "MAP<STRING NOT NULL, ARRAY<INT>>");
        assert_eq!(types[7], "TIMESTAMP_LTZ(6)");
        assert_eq!(schema.columns()[1].comment.as_deref(), Some("day"));
        // What SHOW CREATE TABLE prints parses back to the same table.
        let again = fjord(&show_create_table("shop", "orders", &descriptor));
        let FjordStatement::CreateTable {
            descriptor: back, ..
        } = again
        else {
            panic!()
        };
        assert_eq!(back.schema().columns(), descriptor.schema().columns());
        assert_eq!(back.partition_keys(), descriptor.partition_keys());
        assert_eq!(back.properties(), descriptor.properties());
    }

    #[test]
    fn show_use_drop_and_databases() {
        assert_eq!(fjord("show databases"), FjordStatement::ShowDatabases);
        assert_eq!(
            fjord("SHOW TABLES FROM shop"),
            FjordStatement::ShowTables {
                database: Some("shop".into())
            }
        );
        assert_eq!(
            fjord("use shop"),
            FjordStatement::Use {
                database: "shop".into()
            }
        );
        assert_eq!(
            fjord("DROP TABLE IF EXISTS t"),
            FjordStatement::DropTable {
                name: ObjectName {
                    database: None,
                    name: "t".into()
                },
                if_exists: true
            }
        );
        assert_eq!(
            fjord("DROP DATABASE shop CASCADE"),
            FjordStatement::DropDatabase {
                name: "shop".into(),
                if_exists: false,
                cascade: true
            }
        );
        assert!(matches!(
            fjord("CREATE DATABASE IF NOT EXISTS d COMMENT 'x'"),
            FjordStatement::CreateDatabase {
                if_not_exists: true,
                ..
            }
        ));
        assert!(matches!(parse("SELECT 1").unwrap(), Parsed::Query));
        assert!(matches!(
            parse("INSERT INTO t VALUES (1)").unwrap(),
            Parsed::Query
        ));
    }

    #[test]
    fn unsupported_statements_name_what_is_unsupported() {
        let check = |sql: &str, expected: &str| {
            let e = parse(sql).unwrap_err();
            assert!(e.is_unsupported(), "{sql}: {e}");
            assert!(e.to_string().contains(expected), "{sql}: {e}");
        };
        check("ALTER TABLE t ADD COLUMN c INT", "ALTER TABLE");
        check("DELETE FROM t WHERE a = 1", "DELETE");
        check("CREATE VIEW v AS SELECT 1", "CREATE VIEW");
        check("CREATE TABLE t AS SELECT 1", "AS");
        check("CREATE TABLE t (a GEOMETRY)", "type GEOMETRY");
        let e = parse("CREATE TABLE t (a INT, PRIMARY KEY (a))").unwrap_err();
        assert!(e.to_string().contains("NOT ENFORCED"), "{e}");
        let e = parse("CREATE TABLE t (a INT").unwrap_err();
        assert!(e.to_string().contains("expected"), "{e}");
    }
}
