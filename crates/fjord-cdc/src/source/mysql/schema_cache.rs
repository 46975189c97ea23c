//! The source's knowledge of its tables' schemas: loaded from
//! `information_schema` at start (and lazily for tables first seen in the
//! binlog), changed by the DDL the binlog carries ([`super::ddl`]), and read
//! when a `TABLE_MAP` event prepares a row decoder.
//!
//! Every change produces a new immutable [`TableSchema`] (`version + 1`), so
//! rows decoded before a DDL keep the schema they were written with.

use std::collections::HashMap;
use std::sync::Arc;

use mysql_async::prelude::Queryable;

use crate::filter::TableFilter;
use crate::schema::{Column, TableId, TableSchema};
use crate::source::SourceError;

use super::coltype::{Base, MySqlType};

/// Schema version a table gets when first loaded.
pub(crate) const FIRST_SCHEMA_VERSION: u32 = 1;

/// One table as the source knows it.
#[derive(Clone, Debug)]
pub(crate) struct TableInfo {
    /// The mapped schema rows of this table follow.
    pub schema: Arc<TableSchema>,
    /// The MySQL type of each column (same order), for decoding.
    pub types: Vec<MySqlType>,
}

/// One column as a DDL statement or information_schema defines it.
#[derive(Clone, Debug)]
pub(crate) struct ColumnDef {
    pub name: String,
    pub ty: MySqlType,
    pub nullable: bool,
}

impl TableInfo {
    /// Builds a table from column definitions (version given by the caller).
    pub(crate) fn build(
        id: TableId,
        version: u32,
        columns: &[ColumnDef],
        primary_key: &[String],
    ) -> Result<TableInfo, SourceError> {
        let mut mapped = Vec::with_capacity(columns.len());
        for c in columns {
            let data_type = c.ty.data_type().map_err(|e| {
                SourceError::Unsupported(format!("table {id}, column {}: {}", c.name, e.0))
            })?;
            mapped.push(Column::new(&c.name, data_type, c.nullable));
        }
        let key: Vec<&str> = primary_key.iter().map(String::as_str).collect();
        let schema = TableSchema::new(id, version, mapped, &key)?;
        Ok(TableInfo {
            schema: Arc::new(schema),
            types: columns.iter().map(|c| c.ty.clone()).collect(),
        })
    }

    /// The column definitions of this table (for DDL to edit).
    pub(crate) fn column_defs(&self) -> Vec<ColumnDef> {
        self.schema
            .columns()
            .iter()
            .zip(&self.types)
            .map(|(c, ty)| ColumnDef {
                name: c.name.to_string(),
                ty: ty.clone(),
                nullable: c.nullable,
            })
            .collect()
    }

    /// Primary-key column names.
    pub(crate) fn key_names(&self) -> Vec<String> {
        self.schema
            .primary_key_names()
            .map(str::to_string)
            .collect()
    }
}

/// The schemas of the captured tables.
#[derive(Default)]
pub(crate) struct SchemaCache {
    pub tables: HashMap<TableId, TableInfo>,
}

fn db_error(context: &str, e: mysql_async::Error) -> SourceError {
    SourceError::Database(format!("{context}: {e}"))
}

/// Databases never captured.
const SYSTEM_DATABASES: &str = "'mysql','information_schema','performance_schema','sys'";

impl SchemaCache {
    /// Loads every base table the filter selects (one query per catalog table,
    /// not per captured table). `only` restricts the load to one table.
    pub(crate) async fn load(
        conn: &mut mysql_async::Conn,
        filter: &TableFilter,
        only: Option<&TableId>,
    ) -> Result<SchemaCache, SourceError> {
        let restrict = match only {
            Some(id) => format!(
                " AND c.TABLE_SCHEMA = {} AND c.TABLE_NAME = {}",
                quote(id.database()),
                quote(id.table())
            ),
            None => String::new(),
        };
        let columns: Vec<(String, String, String, String, String, Option<String>)> = conn
            .query(format!(
                "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_TYPE, c.IS_NULLABLE, \
                 c.CHARACTER_SET_NAME FROM information_schema.COLUMNS c \
                 JOIN information_schema.TABLES t \
                   ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME \
                 WHERE t.TABLE_TYPE = 'BASE TABLE' AND c.TABLE_SCHEMA NOT IN ({SYSTEM_DATABASES}){restrict} \
                 ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION"
            ))
            .await
            .map_err(|e| db_error("reading information_schema.COLUMNS", e))?;
        let keys: Vec<(String, String, String)> = conn
            .query(format!(
                "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME \
                 FROM information_schema.KEY_COLUMN_USAGE c \
                 WHERE c.CONSTRAINT_NAME = 'PRIMARY' AND c.TABLE_SCHEMA NOT IN ({SYSTEM_DATABASES}){restrict} \
                 ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION"
            ))
            .await
            .map_err(|e| db_error("reading information_schema.KEY_COLUMN_USAGE", e))?;
        // MariaDB's JSON is LONGTEXT with a `json_valid(col)` check named after
        // the column; MySQL reports `json` itself. The query fails harmlessly
        // on servers without CHECK_CONSTRAINTS.
        let json_checks: Vec<(String, String, String)> = conn
            .query(format!(
                "SELECT c.CONSTRAINT_SCHEMA, c.TABLE_NAME, c.CONSTRAINT_NAME \
                 FROM information_schema.CHECK_CONSTRAINTS c \
                 WHERE c.CHECK_CLAUSE LIKE 'json_valid(%' AND c.CONSTRAINT_SCHEMA NOT IN ({SYSTEM_DATABASES})"
            ))
            .await
            .unwrap_or_default();

        let mut grouped: Vec<(TableId, Vec<ColumnDef>)> = Vec::new();
        for (db, table, column, column_type, nullable, charset) in columns {
            if !filter.matches(&db, &table) {
                continue;
            }
            let mut ty = MySqlType::parse(&column_type, charset.as_deref()).map_err(|e| {
                SourceError::Unsupported(format!("table {db}.{table}, column {column}: {}", e.0))
            })?;
            if ty.base == super::coltype::Base::Text
                && json_checks
                    .iter()
                    .any(|(d, t, c)| *d == db && *t == table && *c == column)
            {
                ty.base = Base::Json;
            }
            let def = ColumnDef {
                name: column,
                ty,
                nullable: nullable == "YES",
            };
            match grouped.last_mut() {
                Some((id, defs)) if id.database() == db && id.table() == table => defs.push(def),
                _ => grouped.push((TableId::new(&db, &table), vec![def])),
            }
        }
        let mut cache = SchemaCache::default();
        for (id, defs) in grouped {
            let key: Vec<String> = keys
                .iter()
                .filter(|(d, t, _)| d == id.database() && t == id.table())
                .map(|(_, _, c)| c.clone())
                .collect();
            let info = TableInfo::build(id.clone(), FIRST_SCHEMA_VERSION, &defs, &key)?;
            cache.tables.insert(id, info);
        }
        Ok(cache)
    }
}

impl SchemaCache {
    /// Every table as one `CREATE TABLE` statement per line (sorted by table),
    /// which [`SchemaCache::from_ddl`] reads back. Stored with binlog
    /// positions, so a restarted source decodes with the schemas that were in
    /// force at its position, not the (possibly newer) current ones.
    pub(crate) fn to_ddl(&self) -> String {
        let mut ids: Vec<&TableId> = self.tables.keys().collect();
        ids.sort();
        let mut out = String::new();
        for id in ids {
            let info = &self.tables[id];
            out.push_str("CREATE TABLE ");
            out.push_str(&quote_ident(id.database()));
            out.push('.');
            out.push_str(&quote_ident(id.table()));
            out.push_str(" (");
            for (i, (column, ty)) in info.schema.columns().iter().zip(&info.types).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&quote_ident(&column.name));
                out.push(' ');
                out.push_str(&ty.to_sql());
                if !column.nullable {
                    out.push_str(" NOT NULL");
                }
            }
            let key: Vec<String> = info.schema.primary_key_names().map(quote_ident).collect();
            if !key.is_empty() {
                out.push_str(", PRIMARY KEY (");
                out.push_str(&key.join(", "));
                out.push(')');
            }
            out.push_str(")\n");
        }
        out
    }

    /// Reads back [`SchemaCache::to_ddl`]'s text.
    pub(crate) fn from_ddl(text: &str, filter: &TableFilter) -> Result<SchemaCache, SourceError> {
        let mut cache = SchemaCache::default();
        for line in text.lines().filter(|l| !l.is_empty()) {
            super::ddl::apply(&mut cache, filter, "", line)?;
        }
        Ok(cache)
    }
}

/// A SQL string literal (for identifiers compared as values in catalog queries).
pub(crate) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A quoted identifier (`` `name` ``).
pub(crate) fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}
