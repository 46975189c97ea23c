//! The `versioned` engine's order (`server/kv/rowmerger/VersionedRowMerger`):
//! the new row wins when its version is at least the stored one. A NULL
//! version counts as the smallest value of the column's type, so it ties
//! with that value (`Integer.MIN_VALUE` for INT, `Long.MIN_VALUE` for
//! BIGINT, the timestamp at `Long.MIN_VALUE` milliseconds for TIMESTAMP and
//! TIMESTAMP_LTZ).

use fjord_format::datum::Datum;
use fjord_format::TypeKind;

use super::{field, MergeError};

/// The version column and the value NULL stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VersionColumn {
    column: usize,
    null_key: Key,
}

/// A version widened to one ordered key: (integer or millis, nanos of milli).
type Key = (i64, i32);

impl VersionColumn {
    /// The version column at position `column`, of type `kind` (validated
    /// by the options to be INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ).
    pub(crate) fn new(column: usize, kind: &TypeKind) -> Self {
        let null_key = match kind {
            TypeKind::Int => (i64::from(i32::MIN), 0),
            _ => (i64::MIN, 0),
        };
        Self { column, null_key }
    }

    fn key(&self, row: &[Datum<'_>]) -> Result<Key, MergeError> {
        Ok(match field(row, self.column) {
            Datum::Null => self.null_key,
            Datum::Int(v) => (i64::from(v), 0),
            Datum::BigInt(v) => (v, 0),
            Datum::Timestamp(t) | Datum::TimestampLtz(t) => (t.millis(), t.nanos_of_milli()),
            other => {
                return Err(MergeError::TypeMismatch {
                    column: self.column,
                    left: "INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ",
                    right: other.type_name(),
                })
            }
        })
    }

    /// Whether `new` replaces `old`: `version(new) >= version(old)`.
    pub(crate) fn new_wins(
        &self,
        old: &[Datum<'_>],
        new: &[Datum<'_>],
    ) -> Result<bool, MergeError> {
        Ok(self.key(new)? >= self.key(old)?)
    }
}
