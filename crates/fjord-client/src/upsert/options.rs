//! What an upsert writer writes beyond whole rows: a partial update's
//! target columns, and PutKv's aggregation mode. Checked once, when the
//! writer is made, with the rules of Fluss's clients
//! (`UpsertWriterImpl.sanityCheck` in Java, `UpsertWriterFactory` in
//! fluss-rs): the targets hold every primary-key column, every other
//! column of the table is nullable, and no auto-increment column is written.

use crate::admin::TableInfo;
use crate::error::{ClientError, Result};

/// PutKv's `agg_mode`: how the server applies the records of a table
/// whose merge engine aggregates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AggMode {
    /// The table's merge engine applies them (Fluss's default; nothing is
    /// sent, as fluss-rs sends nothing).
    #[default]
    MergeEngine,
    /// The records replace the rows as they are, bypassing aggregation
    /// (Fluss's `OVERWRITE`, for undoing writes on recovery).
    Overwrite,
}

impl AggMode {
    /// The `agg_mode` field to send.
    pub(crate) fn wire(self) -> Option<i32> {
        match self {
            AggMode::MergeEngine => None,
            AggMode::Overwrite => Some(1),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Targets {
    Positions(Vec<usize>),
    Names(Vec<String>),
}

/// Options of an upsert writer ([`crate::FlussClient::upsert_writer_with`]).
/// The default writes whole rows through the merge engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpsertOptions {
    targets: Option<Targets>,
    /// How the server applies the records.
    pub agg_mode: AggMode,
}

impl UpsertOptions {
    /// A partial update of the columns at `positions` (table order
    /// positions, which must include every primary-key column): rows are
    /// still whole rows, and only these columns are written.
    pub fn partial_update(mut self, positions: impl IntoIterator<Item = usize>) -> Self {
        self.targets = Some(Targets::Positions(positions.into_iter().collect()));
        self
    }

    /// [`UpsertOptions::partial_update`] by column names.
    pub fn partial_update_by_names<S: AsRef<str>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Self {
        self.targets = Some(Targets::Names(
            names.into_iter().map(|n| n.as_ref().to_owned()).collect(),
        ));
        self
    }

    /// `mode` instead of the merge engine's.
    pub fn agg_mode(mut self, mode: AggMode) -> Self {
        self.agg_mode = mode;
        self
    }

    /// The target column positions for `table` (`None`: whole rows), or
    /// why they cannot be written.
    pub(crate) fn resolve_target_columns(&self, table: &TableInfo) -> Result<Option<Box<[usize]>>> {
        let schema = table.descriptor.schema();
        let columns = schema.columns();
        let Some(pk) = schema.primary_key() else {
            return Err(ClientError::Invalid(format!(
                "{} has no primary key: upsert writers write primary-key tables (use an append writer)",
                table.path
            )));
        };
        let auto_increment = schema.auto_increment_columns();
        let positions: Vec<usize> = match &self.targets {
            None => {
                if let Some(column) = auto_increment.first() {
                    return Err(ClientError::Invalid(format!(
                        "{} has the auto-increment column `{column}`, which a writer may not set: write the other columns with a partial update",
                        table.path
                    )));
                }
                return Ok(None);
            }
            Some(Targets::Positions(positions)) => {
                if let Some(bad) = positions.iter().find(|&&p| p >= columns.len()) {
                    return Err(ClientError::Invalid(format!(
                        "target column {bad} is out of range: {} has {} columns",
                        table.path,
                        columns.len()
                    )));
                }
                positions.clone()
            }
            Some(Targets::Names(names)) => names
                .iter()
                .map(|name| {
                    schema.column_index(name).ok_or_else(|| {
                        ClientError::Invalid(format!(
                            "target column `{name}` is not a column of {}",
                            table.path
                        ))
                    })
                })
                .collect::<Result<_>>()?,
        };
        let named = |i: usize| columns[i].name.as_str();
        for key in pk {
            let pos = schema.column_index(key).unwrap_or(usize::MAX);
            if !positions.contains(&pos) {
                return Err(ClientError::Invalid(format!(
                    "the target columns of a partial update must include every primary-key column ({}); `{key}` is missing",
                    pk.join(", ")
                )));
            }
        }
        for column in auto_increment {
            if let Some(&pos) = positions.iter().find(|&&p| named(p) == column) {
                return Err(ClientError::Invalid(format!(
                    "the auto-increment column `{}` cannot be written",
                    named(pos)
                )));
            }
        }
        for (i, column) in columns.iter().enumerate() {
            let is_key = pk.iter().any(|k| k == &column.name);
            let is_auto = auto_increment.iter().any(|a| a == &column.name);
            if !is_key && !is_auto && !column.data_type.is_nullable() {
                return Err(ClientError::Invalid(format!(
                    "a partial update needs every column outside the primary key to be nullable; `{}` (column {i}) is NOT NULL",
                    column.name
                )));
            }
        }
        Ok(Some(positions.into_boxed_slice()))
    }
}
