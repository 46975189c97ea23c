//! Table identifiers and versioned table schemas. A schema is built once per
//! table schema version (at snapshot start, on a table map change, on DDL) and
//! shared immutably (`Arc`) by every row of that version.

use std::fmt;
use std::sync::Arc;

use crate::row::RowLayout;
use crate::types::{DataType, InvalidType};

/// Most columns a table may have (MySQL's limit is 4096). Protects row layouts
/// (16-bit column indexes) and the null bitmap size.
pub const COLUMNS_MAX: usize = 4096;

/// A table's identity: `database.table` (MySQL has no schema level).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId {
    database: Arc<str>,
    table: Arc<str>,
}

impl TableId {
    /// A table id from its database and table names (kept exactly, case included).
    pub fn new(database: &str, table: &str) -> TableId {
        TableId {
            database: Arc::from(database),
            table: Arc::from(table),
        }
    }

    /// The database name.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }
}

/// `database.table`.
impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.database, self.table)
    }
}

/// One column of a table schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// Column name as the source database spells it.
    pub name: Arc<str>,
    /// Logical type.
    pub data_type: DataType,
    /// Whether the column accepts NULL.
    pub nullable: bool,
}

impl Column {
    /// A column.
    pub fn new(name: &str, data_type: DataType, nullable: bool) -> Column {
        Column {
            name: Arc::from(name),
            data_type,
            nullable,
        }
    }
}

/// A table's schema at one version: columns in order, primary key, and the row
/// layout prepared from them. Immutable once built; a DDL produces a new
/// `TableSchema` with `version + 1`.
#[derive(Debug, PartialEq)]
pub struct TableSchema {
    id: TableId,
    version: u32,
    columns: Vec<Column>,
    primary_key: Vec<u16>,
    layout: RowLayout,
}

impl TableSchema {
    /// Validates and builds a schema. `primary_key` names columns (in key order).
    pub fn new(
        id: TableId,
        version: u32,
        columns: Vec<Column>,
        primary_key: &[&str],
    ) -> Result<TableSchema, SchemaError> {
        if columns.is_empty() || columns.len() > COLUMNS_MAX {
            return Err(SchemaError::ColumnCount {
                table: id,
                count: columns.len(),
            });
        }
        for (i, column) in columns.iter().enumerate() {
            column
                .data_type
                .validate()
                .map_err(|source| SchemaError::InvalidType {
                    table: id.clone(),
                    column: column.name.to_string(),
                    source,
                })?;
            if columns[..i].iter().any(|c| c.name == column.name) {
                return Err(SchemaError::DuplicateColumn {
                    table: id,
                    column: column.name.to_string(),
                });
            }
        }
        let mut key = Vec::with_capacity(primary_key.len());
        for name in primary_key {
            match columns.iter().position(|c| &*c.name == *name) {
                // Bounded by COLUMNS_MAX (4096), so the index fits in u16.
                Some(index) => key.push(index as u16),
                None => {
                    return Err(SchemaError::UnknownKeyColumn {
                        table: id,
                        column: (*name).to_string(),
                    })
                }
            }
        }
        let layout = RowLayout::new(columns.iter().map(|c| c.data_type));
        Ok(TableSchema {
            id,
            version,
            columns,
            primary_key: key,
            layout,
        })
    }

    /// The table this schema describes.
    pub fn id(&self) -> &TableId {
        &self.id
    }

    /// Schema version: starts at whatever the source chose and grows by one per DDL.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Columns in table order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Primary-key column indexes, in key order (empty: no primary key).
    pub fn primary_key(&self) -> &[u16] {
        &self.primary_key
    }

    /// The row layout of this version (one slot per column).
    pub fn layout(&self) -> &RowLayout {
        &self.layout
    }

    /// Index of the column named `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| &*c.name == name)
    }

    /// The same schema under another table id (used by routes; per table version, not per row).
    pub fn with_id(&self, id: TableId) -> TableSchema {
        TableSchema {
            id,
            version: self.version,
            columns: self.columns.clone(),
            primary_key: self.primary_key.clone(),
            layout: self.layout.clone(),
        }
    }

    /// Names of the primary-key columns.
    pub fn primary_key_names(&self) -> impl Iterator<Item = &str> {
        self.primary_key
            .iter()
            .map(|&i| &*self.columns[usize::from(i)].name)
    }
}

/// Why a table schema could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// Zero columns or more than [`COLUMNS_MAX`].
    #[error("table {table} has {count} columns; a table needs 1..=4096 columns")]
    ColumnCount {
        /// The table.
        table: TableId,
        /// Its column count.
        count: usize,
    },
    /// Two columns share a name.
    #[error("table {table} has two columns named {column:?}")]
    DuplicateColumn {
        /// The table.
        table: TableId,
        /// The repeated name.
        column: String,
    },
    /// A primary-key column does not exist.
    #[error("table {table}: primary-key column {column:?} is not a column of the table")]
    UnknownKeyColumn {
        /// The table.
        table: TableId,
        /// The missing column.
        column: String,
    },
    /// A column's type parameters are out of range.
    #[error("table {table}, column {column:?}: {source}")]
    InvalidType {
        /// The table.
        table: TableId,
        /// The column.
        column: String,
        /// What is wrong with the type.
        source: InvalidType,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_id_displays_as_database_dot_table() {
        assert_eq!(TableId::new("shop", "orders").to_string(), "shop.orders");
    }

    #[test]
    fn unknown_primary_key_column_is_an_error() {
        let err = TableSchema::new(
            TableId::new("d", "t"),
            1,
            vec![Column::new("a", DataType::Int, false)],
            &["b"],
        )
        .unwrap_err();
        assert!(err.to_string().contains("\"b\""), "{err}");
    }

    #[test]
    fn duplicate_column_is_an_error() {
        let err = TableSchema::new(
            TableId::new("d", "t"),
            1,
            vec![
                Column::new("a", DataType::Int, false),
                Column::new("a", DataType::BigInt, false),
            ],
            &[],
        )
        .unwrap_err();
        assert!(matches!(err, SchemaError::DuplicateColumn { .. }));
    }
}
