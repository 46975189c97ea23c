//! Row merging of primary-key tables: given the stored row of a key (if
//! any) and one incoming record, what the key holds afterwards and what the
//! changelog must record. Pure, synchronous and free of I/O; the caller
//! reads and writes the KV store and builds the changelog batch.
//!
//! The semantics are Fluss 0.9.1's server (`server/kv/KvTablet.putAsLeader`,
//! `server/kv/rowmerger/*`, `server/kv/partialupdate/PartialUpdater`);
//! where main differs, 0.9.1 is followed (see `PartialColumns`).
//!
//! | engine | upsert, key absent | upsert, key present | delete (`allow`), key present |
//! |---|---|---|---|
//! | default, full row | Insert new | Update new | Delete |
//! | default, partial | Insert targets + NULLs | Update targets over old; NoChange if targets = key | Delete if non-targets of old all NULL, else Update old with non-key targets NULL |
//! | first_row | Insert new | NoChange | (refused by the options) |
//! | versioned | Insert new | Update new if version(new) >= version(old), else NoChange | (refused by the options) |
//! | aggregation | Insert new as received | Update aggregated (always, even if equal) | Delete |
//! | aggregation, partial | Insert new as received | Update: targets aggregated, others old | as default partial |
//!
//! A delete with `ignore` is NoChange and with `disable` an error, whether
//! or not the key exists; a delete of an absent key is NoChange.
//! [`AggMode::Overwrite`] runs the default engine (deletes allowed) whatever
//! the table's engine.
//!
//! The caller turns an outcome into changelog rows: Insert → `+I merged`;
//! Update → `-U old`, `+U merged` (FULL image) or `+U merged` (WAL image);
//! Delete → `-D old`; NoChange → nothing. With the WAL image, the default
//! engine and full-row writes ([`RowMerger::needs_old_value_for_upsert`]
//! false) the old value is not read and every upsert is an Update.
//!
//! The hot path allocates nothing: everything derivable from the schema and
//! options is computed in [`RowMerger::new`]; merged values are written to
//! the [`RowSink`] as they are computed; a value that is neither input (a
//! `listagg` concatenation, a bitmap union) lives in a buffer the merger
//! owns and reuses.

mod aggregate;
mod options;
mod partial;
mod versioned;

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

use fjord_format::datum::Datum;
use fjord_format::Schema;

use self::aggregate::Aggregation;
pub use self::options::{
    ChangelogImage, DeleteBehavior, MergeEngine, MergeOptions, DEFAULT_LISTAGG_DELIMITER,
    PARAM_DELIMITER, TABLE_CHANGELOG_IMAGE, TABLE_DELETE_BEHAVIOR, TABLE_MERGE_ENGINE,
    TABLE_MERGE_ENGINE_VERSION_COLUMN,
};
use self::partial::{PartialColumns, PartialKind};
use self::versioned::VersionColumn;
use crate::error::{ApiError, ErrorCode};

/// Where a merged row goes, field by field in column order (the server
/// implements it with its row encoder).
pub trait RowSink {
    /// Appends the next field of the merged row.
    fn write(&mut self, value: &Datum<'_>) -> Result<(), MergeError>;
}

/// What the changelog must record for one input record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeOutcome {
    /// Nothing changes; nothing is written to the sink.
    NoChange,
    /// The key was absent; the sink received the row to store (`+I`).
    Insert,
    /// The key's row changes to the row the sink received (`-U old`, `+U`).
    Update,
    /// The key's row is removed (`-D old`); nothing is written to the sink.
    Delete,
}

/// How a write is merged (Fluss's `MergeMode`, the `agg_mode` of a
/// PutKvRequest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AggMode {
    /// Through the table's merge engine.
    #[default]
    Default,
    /// Bypassing the merge engine: the default engine with deletes allowed
    /// (the Flink sink's undo recovery restores rows this way).
    Overwrite,
}

impl AggMode {
    /// The mode of a wire value: 1 is OVERWRITE, anything else DEFAULT (as
    /// Fluss reads it).
    pub fn from_wire(value: i32) -> Self {
        if value == 1 {
            AggMode::Overwrite
        } else {
            AggMode::Default
        }
    }
}

/// Why merging one record failed. [`ApiError::from`] gives the code a
/// client sees.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A delete on a table with `table.delete.behavior=disable`.
    #[error(
        "deletes are disabled on this table ('table.delete.behavior' is 'disable'); \
         delete nothing or change the option"
    )]
    DeletionDisabled,
    /// A stored or incoming value does not have the kind its column needs.
    #[error("column {column}: cannot merge a {left} value with a {right} value")]
    TypeMismatch {
        /// Column position.
        column: usize,
        /// Kind expected or of the stored value.
        left: &'static str,
        /// Kind of the other value.
        right: &'static str,
    },
    /// An `rbm32` or `rbm64` value is not a serialized roaring bitmap.
    #[error("column {column}: cannot merge roaring bitmaps: {reason}")]
    Bitmap {
        /// Column position.
        column: usize,
        /// What is wrong with the bytes.
        reason: &'static str,
    },
    /// The column's aggregator cannot run (Fluss accepts the table but its
    /// server fails the same merge).
    #[error("column {column}: {message}")]
    AggregatorRefused {
        /// Column position.
        column: usize,
        /// Why.
        message: String,
    },
    /// The sink refused a value.
    #[error(transparent)]
    Sink(#[from] ApiError),
}

impl From<MergeError> for ApiError {
    fn from(e: MergeError) -> Self {
        match e {
            MergeError::DeletionDisabled => {
                ApiError::new(ErrorCode::DeletionDisabledException, e.to_string())
            }
            MergeError::Sink(api) => api,
            // Fluss fails these with a plain Java exception: an unknown server error.
            MergeError::TypeMismatch { .. }
            | MergeError::Bitmap { .. }
            | MergeError::AggregatorRefused { .. } => {
                ApiError::new(ErrorCode::UnknownServerError, e.to_string())
            }
        }
    }
}

/// How one merger combines rows.
#[derive(Debug)]
enum Kind {
    /// Default engine, full rows: the new row as received.
    Latest,
    /// Default engine, partial rows.
    Partial(PartialColumns),
    FirstRow,
    Versioned(VersionColumn),
    Aggregate(Aggregation),
    PartialAggregate(Aggregation, PartialColumns),
}

/// Merges records into stored rows. Built once per (table schema, options,
/// target columns, agg mode) and reused for every record of every batch.
#[derive(Debug)]
pub struct RowMerger {
    kind: Kind,
    field_count: usize,
    delete_behavior: DeleteBehavior,
    /// WAL image with full-row writes of the default engine: the old value
    /// is not read and every upsert is an Update.
    skip_old_read: bool,
}

impl RowMerger {
    /// The merger for writes to a table with `schema` and `options`,
    /// targeting `target_columns` (positions; `None` = full rows), in
    /// `agg_mode`. Refuses what Fluss refuses before merging a batch:
    /// - an auto-increment table written without targets, or with the
    ///   auto-increment column among them (INVALID_TARGET_COLUMN);
    /// - targets that miss a key column, or a NOT NULL non-key column in the
    ///   table (INVALID_TARGET_COLUMN);
    /// - targets on a first_row or versioned table (UNKNOWN_SERVER_ERROR, as
    ///   Fluss's server throws a plain exception);
    /// - a partial aggregation whose aggregators Fluss cannot build
    ///   (UNKNOWN_SERVER_ERROR).
    pub fn new(
        schema: &Schema,
        options: &MergeOptions,
        target_columns: Option<&[usize]>,
        agg_mode: AggMode,
    ) -> Result<Self, ApiError> {
        let columns = schema.columns();
        let Some(primary_key) = schema.primary_key() else {
            return Err(ApiError::new(
                ErrorCode::NonPrimaryKeyTableException,
                "rows are merged only in primary-key tables",
            ));
        };
        let key: Vec<bool> = columns
            .iter()
            .map(|c| primary_key.contains(&c.name))
            .collect();
        if let Some(name) = schema.auto_increment_columns().first() {
            let index = schema.column_index(name);
            match target_columns {
                None => {
                    return Err(ApiError::new(
                        ErrorCode::InvalidTargetColumn,
                        format!(
                            "the table has the auto-increment column '{name}': writes must \
                             name their target columns and leave it out"
                        ),
                    ));
                }
                Some(targets) if index.is_some_and(|i| targets.contains(&i)) => {
                    return Err(ApiError::new(
                        ErrorCode::InvalidTargetColumn,
                        format!(
                            "the auto-increment column '{name}' cannot be a target column: the \
                             server assigns it"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        let engine = match agg_mode {
            AggMode::Overwrite => MergeEngine::Default,
            AggMode::Default => options.engine(),
        };
        let delete_behavior = match agg_mode {
            AggMode::Overwrite => DeleteBehavior::Allow,
            AggMode::Default => options.delete_behavior(),
        };
        let no_partial = |engine: &str| {
            ApiError::new(
                ErrorCode::UnknownServerError,
                format!("the {engine} merge engine does not support partial updates"),
            )
        };
        let kind = match (engine, target_columns) {
            (MergeEngine::Default, None) => Kind::Latest,
            (MergeEngine::Default, Some(targets)) => Kind::Partial(PartialColumns::new(
                schema,
                &key,
                targets,
                PartialKind::Update,
            )?),
            (MergeEngine::FirstRow, None) => Kind::FirstRow,
            (MergeEngine::FirstRow, Some(_)) => return Err(no_partial("first_row")),
            (MergeEngine::Versioned { column }, None) => {
                Kind::Versioned(VersionColumn::new(column, columns[column].data_type.kind()))
            }
            (MergeEngine::Versioned { .. }, Some(_)) => return Err(no_partial("versioned")),
            (MergeEngine::Aggregation, None) => Kind::Aggregate(Aggregation::new(schema, options)),
            (MergeEngine::Aggregation, Some(targets)) => {
                let aggregation = Aggregation::new(schema, options);
                if let Some(message) = aggregation.refusal() {
                    return Err(ApiError::new(
                        ErrorCode::UnknownServerError,
                        message.to_string(),
                    ));
                }
                let partial = PartialColumns::new(schema, &key, targets, PartialKind::Aggregate)?;
                Kind::PartialAggregate(aggregation, partial)
            }
        };
        let skip_old_read =
            options.changelog_image() == ChangelogImage::Wal && matches!(kind, Kind::Latest);
        Ok(Self {
            kind,
            field_count: columns.len(),
            delete_behavior,
            skip_old_read,
        })
    }

    /// True when the stored value is simply the new row as received
    /// (default engine, full row): [`RowMerger::upsert`] then neither reads
    /// `new` nor writes the sink, and the caller stores the bytes it
    /// received without decoding and re-encoding them.
    pub fn passes_new_row_through(&self) -> bool {
        matches!(self.kind, Kind::Latest)
    }

    /// Whether, after `outcome`, the key holds the incoming row exactly as
    /// received: Fluss's mergers then return the incoming value itself, so
    /// it is stored with the schema id it was written with (an older one
    /// included), not re-encoded at the latest. True for an Insert except
    /// a partial update's, and for an Update of the default engine's full
    /// rows or of a versioned table whose new row wins; a merged row
    /// (partial update, aggregation) is the sink's.
    pub fn stores_new_row(&self, outcome: MergeOutcome) -> bool {
        match outcome {
            MergeOutcome::Insert => !matches!(self.kind, Kind::Partial(_)),
            MergeOutcome::Update => matches!(self.kind, Kind::Latest | Kind::Versioned(_)),
            MergeOutcome::Delete | MergeOutcome::NoChange => false,
        }
    }

    /// False when an upsert need not read the old value (WAL image, default
    /// engine, full-row writes, as Fluss does): `upsert` then ignores `old`
    /// and answers Update.
    pub fn needs_old_value_for_upsert(&self) -> bool {
        !self.skip_old_read
    }

    /// False when a delete need not read the old value (deletes ignored or
    /// disabled: `delete` answers without it).
    pub fn needs_old_value_for_delete(&self) -> bool {
        self.delete_behavior == DeleteBehavior::Allow
    }

    /// The delete behaviour in force (always `allow` in OVERWRITE mode).
    pub fn delete_behavior(&self) -> DeleteBehavior {
        self.delete_behavior
    }

    /// Merges the upsert `new` into the stored row `old` (`None`: the key is
    /// absent). On Insert and Update the row to store has been written to
    /// `sink`, except when [`RowMerger::passes_new_row_through`].
    ///
    /// Rows shorter than the schema (written before columns were added)
    /// read as NULL in the missing columns; the sink always receives the
    /// schema's column count.
    pub fn upsert(
        &mut self,
        old: Option<&[Datum<'_>]>,
        new: &[Datum<'_>],
        sink: &mut dyn RowSink,
    ) -> Result<MergeOutcome, MergeError> {
        let n = self.field_count;
        let outcome = match (&mut self.kind, old) {
            (Kind::Latest, old) => {
                if old.is_some() || self.skip_old_read {
                    MergeOutcome::Update
                } else {
                    MergeOutcome::Insert
                }
            }
            (Kind::Partial(partial), old) => return partial.update(old, new, sink),
            (_, None) => {
                write_row(new, n, sink)?;
                MergeOutcome::Insert
            }
            (Kind::FirstRow, Some(_)) => MergeOutcome::NoChange,
            (Kind::Versioned(version), Some(old)) => {
                if version.new_wins(old, new)? {
                    write_row(new, n, sink)?;
                    MergeOutcome::Update
                } else {
                    MergeOutcome::NoChange
                }
            }
            (Kind::Aggregate(aggregation), Some(old)) => {
                aggregation.merge(old, new, None, sink)?;
                MergeOutcome::Update
            }
            (Kind::PartialAggregate(aggregation, partial), Some(old)) => {
                aggregation.merge(old, new, Some(partial), sink)?;
                MergeOutcome::Update
            }
        };
        Ok(outcome)
    }

    /// Applies a delete to the stored row `old` (`None`: the key is absent).
    /// On Update (a partial delete) the row to store has been written to
    /// `sink`.
    pub fn delete(
        &mut self,
        old: Option<&[Datum<'_>]>,
        sink: &mut dyn RowSink,
    ) -> Result<MergeOutcome, MergeError> {
        match self.delete_behavior {
            DeleteBehavior::Ignore => Ok(MergeOutcome::NoChange),
            DeleteBehavior::Disable => Err(MergeError::DeletionDisabled),
            DeleteBehavior::Allow => {
                let Some(old) = old else {
                    return Ok(MergeOutcome::NoChange);
                };
                match &self.kind {
                    Kind::Partial(partial) | Kind::PartialAggregate(_, partial) => {
                        partial.delete(old, sink)
                    }
                    _ => Ok(MergeOutcome::Delete),
                }
            }
        }
    }
}

/// Field `index` of `row`, NULL past its end.
fn field<'a>(row: &[Datum<'a>], index: usize) -> Datum<'a> {
    row.get(index).copied().unwrap_or(Datum::Null)
}

/// Writes `row` padded with NULLs to `field_count` fields.
fn write_row(
    row: &[Datum<'_>],
    field_count: usize,
    sink: &mut dyn RowSink,
) -> Result<(), MergeError> {
    for index in 0..field_count {
        sink.write(&field(row, index))?;
    }
    Ok(())
}
