//! The aggregation engine (`server/kv/rowmerger/AggregateRowMerger` and
//! `aggregate/AggregateFieldsProcessor`): each column of the stored row is
//! aggregated with the same column of the new row by its own function; key
//! columns use `last_value`.
//!
//! - First write of a key: the new row is stored as received (no function
//!   runs, even for a partial write: its non-target columns are kept).
//! - Full write on an existing key: every column aggregated.
//! - Partial write: target columns aggregated, the others copied from the
//!   stored row.
//! - Every merge on an existing key is an update, even when nothing changed.

pub(crate) mod bitmap;
pub(crate) mod bitmap64;
pub(crate) mod functions;

use fjord_format::datum::Datum;
use fjord_format::Schema;

use self::functions::{AggScratch, FieldAgg};
use super::options::MergeOptions;
use super::partial::PartialColumns;
use super::{field, MergeError, RowSink};

/// Per column, its aggregator.
#[derive(Debug)]
pub(crate) struct Aggregation {
    functions: Vec<FieldAgg>,
    scratch: AggScratch,
}

impl Aggregation {
    /// The aggregators of `schema` as `options` declare them.
    pub(crate) fn new(schema: &Schema, options: &MergeOptions) -> Self {
        let functions = schema
            .columns()
            .iter()
            .zip(options.aggregation())
            .map(|(column, agg)| {
                FieldAgg::new(agg.function, &agg.delimiter, column.data_type.kind())
            })
            .collect();
        Self {
            functions,
            scratch: AggScratch::default(),
        }
    }

    /// The first column whose aggregator Fluss cannot build. Fluss builds
    /// them all when a partial aggregation is configured (and fails then),
    /// and before the first full merge on an existing key (which fails).
    pub(crate) fn refusal(&self) -> Option<&str> {
        self.functions.iter().find_map(FieldAgg::refusal)
    }

    /// Aggregates `new` into `old` (all columns when `targets` is `None`,
    /// else only the targets) and writes the result.
    pub(crate) fn merge(
        &mut self,
        old: &[Datum<'_>],
        new: &[Datum<'_>],
        targets: Option<&PartialColumns>,
        sink: &mut dyn RowSink,
    ) -> Result<(), MergeError> {
        for (index, function) in self.functions.iter().enumerate() {
            let acc = field(old, index);
            if targets.is_some_and(|t| !t.is_target(index)) {
                sink.write(&acc)?;
                continue;
            }
            let value = function.agg(index, acc, field(new, index), &mut self.scratch)?;
            sink.write(&value)?;
        }
        Ok(())
    }
}
