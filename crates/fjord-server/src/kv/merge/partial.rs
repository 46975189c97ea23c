//! Partial writes: which columns a write targets, the checks Fluss makes on
//! them, and the partial update and partial delete of the default engine
//! (`server/kv/partialupdate/PartialUpdater`), whose delete the partial
//! aggregation shares (`AggregateRowMerger.PartialAggregateRowMerger`).

use fjord_format::datum::Datum;
use fjord_format::Schema;

use super::{field, MergeError, MergeOutcome, RowSink};
use crate::error::{ApiError, ErrorCode};

/// The target columns of a partial write, checked against the schema.
///
/// Guarantees: every key column is a target; every non-key column is
/// nullable (Fluss checks all of them, targets or not, since an insert
/// writes NULL into the others); `target.len() == key.len()` = column count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PartialColumns {
    target: Vec<bool>,
    key: Vec<bool>,
    /// The targets are exactly the key columns.
    key_only: bool,
}

/// Which refusal message to use: Fluss words the default engine's and the
/// aggregation's checks differently.
#[derive(Clone, Copy)]
pub(crate) enum PartialKind {
    Update,
    Aggregate,
}

impl PartialColumns {
    /// Checks `targets` (column positions) for a partial write on `schema`.
    /// Refusals are INVALID_TARGET_COLUMN.
    pub(crate) fn new(
        schema: &Schema,
        key: &[bool],
        targets: &[usize],
        kind: PartialKind,
    ) -> Result<Self, ApiError> {
        let columns = schema.columns();
        let mut target = vec![false; columns.len()];
        for &index in targets {
            match target.get_mut(index) {
                Some(slot) => *slot = true,
                None => {
                    return Err(ApiError::new(
                        ErrorCode::InvalidTargetColumn,
                        format!(
                            "target column {index} does not exist: the table has {} columns",
                            columns.len()
                        ),
                    ));
                }
            }
        }
        if key.iter().zip(&target).any(|(&k, &t)| k && !t) {
            let names = |pick: &dyn Fn(usize) -> bool| {
                columns
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| pick(*i))
                    .map(|(_, c)| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let keys = names(&|i| key[i]);
            let message = match kind {
                PartialKind::Update => format!(
                    "a partial update must target every primary-key column [{keys}], but \
                     targets [{}]",
                    names(&|i| target[i])
                ),
                PartialKind::Aggregate => {
                    format!("a partial aggregation must target every primary-key column [{keys}]")
                }
            };
            return Err(ApiError::new(ErrorCode::InvalidTargetColumn, message));
        }
        if let Some(column) = columns
            .iter()
            .zip(key)
            .find(|(c, &k)| !k && !c.data_type.is_nullable())
            .map(|(c, _)| c)
        {
            let what = match kind {
                PartialKind::Update => "a partial update",
                PartialKind::Aggregate => "a partial aggregation",
            };
            return Err(ApiError::new(
                ErrorCode::InvalidTargetColumn,
                format!(
                    "{what} needs every non-key column to be nullable, but column '{}' is NOT \
                     NULL",
                    column.name
                ),
            ));
        }
        let key_only = target == key;
        Ok(Self {
            target,
            key: key.to_vec(),
            key_only,
        })
    }

    /// Whether column `index` is a target.
    pub(crate) fn is_target(&self, index: usize) -> bool {
        self.target[index]
    }

    /// Column count.
    pub(crate) fn len(&self) -> usize {
        self.target.len()
    }

    /// Default engine upsert: the target columns from `new`, the others
    /// from `old` (NULL when the key is new). Targets that are exactly the
    /// key leave an existing row unchanged.
    pub(crate) fn update(
        &self,
        old: Option<&[Datum<'_>]>,
        new: &[Datum<'_>],
        sink: &mut dyn RowSink,
    ) -> Result<MergeOutcome, MergeError> {
        if self.key_only && old.is_some() {
            return Ok(MergeOutcome::NoChange);
        }
        for index in 0..self.len() {
            let value = if self.target[index] {
                field(new, index)
            } else {
                old.map_or(Datum::Null, |old| field(old, index))
            };
            sink.write(&value)?;
        }
        Ok(if old.is_some() {
            MergeOutcome::Update
        } else {
            MergeOutcome::Insert
        })
    }

    /// Partial delete of the existing row `old`: when every non-target
    /// column of it is NULL the row goes; otherwise the non-key targets are
    /// set to NULL and the rest kept.
    pub(crate) fn delete(
        &self,
        old: &[Datum<'_>],
        sink: &mut dyn RowSink,
    ) -> Result<MergeOutcome, MergeError> {
        let others_null = old.iter().enumerate().all(|(index, value)| {
            self.target.get(index).copied().unwrap_or(false) || value.is_null()
        });
        if others_null {
            return Ok(MergeOutcome::Delete);
        }
        for index in 0..self.len() {
            let value = if self.target[index] && !self.key[index] {
                Datum::Null
            } else {
                field(old, index)
            };
            sink.write(&value)?;
        }
        Ok(MergeOutcome::Update)
    }
}
