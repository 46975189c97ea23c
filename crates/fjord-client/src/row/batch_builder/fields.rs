//! [`FieldWriter`]: one row's fields written, in column order, straight into
//! the columns of a [`RowBatchBuilder`](super::RowBatchBuilder).
//!
//! It is what [`InternalRow::write_fields`](crate::row::InternalRow::write_fields)
//! writes to. The default implementation hands it every field as a
//! [`Datum`]; a row type that knows its fields' types at compile time calls
//! the typed methods (`bigint`, `string`, `timestamp`, ...) instead. Each
//! typed method is the datum path with the datum's variant fixed: inlined
//! into the row type's `write_fields`, only the column's kind check and
//! the push are left per value, where a datum read at run time is matched
//! first (docs/bench-notes/client.md, "Eighth pass").
//!
//! A refused value does not stop the row: the writer remembers the first
//! refusal, and the builder rolls the whole row back after `write_fields`
//! returns, so a row type never handles errors field by field. A
//! `write_fields` that panics part way leaves its values behind here; the
//! append writer's lock guard drops them as the panic unwinds
//! (`RowBatchBuilder::drop_partial_row`); a row that does not panic pays
//! one load of the global panic count, on unlock.

use fjord_format::row::compacted::CompactedRowWriter;
use fjord_format::row::indexed::IndexedRowWriter;
use fjord_format::row::{FieldType, RowError};

use super::{Column, Refusal, Unfit};
use crate::row::{Datum, Timestamp};

/// Writes one row's fields, in column order, into what the writer fills:
/// the Arrow columns of a batch (the append writer's
/// [`RowBatchBuilder`](super::RowBatchBuilder)) or one primary-key row in
/// the table's `table.kv.format` (the upsert writer's values). Made for
/// each row and handed to
/// [`InternalRow::write_fields`](crate::row::InternalRow::write_fields).
///
/// Guarantees: every call writes the next field (a value the column cannot
/// take, or a field past the table's last column, is refused rather than
/// written to another column); after `write_fields` the row is kept only
/// when exactly one value per column was written and none was refused, and
/// otherwise every column (or the row's bytes) is rolled back.
pub struct FieldWriter<'a> {
    /// The batch's Arrow columns; empty when a primary-key row is written.
    columns: &'a mut [Column],
    /// The row's index in the batch (the rows before it are in the columns).
    row: usize,
    /// Fields written so far, including refused ones and ones past the last
    /// column: the position of the next field.
    next: usize,
    /// Bytes added to STRING/BYTES data buffers by this row.
    var_bytes: usize,
    /// The first refused field and why.
    refused: Option<(usize, Refusal)>,
    /// The primary-key row written instead of columns, if any. Reached
    /// only where a field finds no column (`beyond_columns`), so the Arrow
    /// path pays no branch for it: the bounds check it had decides.
    kv: Option<RowTarget<'a>>,
}

/// One primary-key row being written, in either `table.kv.format`.
pub(in crate::row) enum RowTarget<'a> {
    /// COMPACTED, with the row type's columns.
    Compacted {
        writer: CompactedRowWriter<'a>,
        fields: &'a [FieldType],
    },
    /// INDEXED (the writer knows the row type).
    Indexed(IndexedRowWriter<'a, 'a>),
}

impl RowTarget<'_> {
    /// Writes `datum` as field `pos`; a field past the row's arity is only
    /// counted (the caller refuses the row for its field count).
    #[inline]
    fn write(&mut self, pos: usize, datum: &Datum<'_>) -> Result<(), Refusal> {
        let written = match self {
            RowTarget::Compacted { writer, fields } => match fields.get(pos) {
                Some(field) => writer.write_datum(*field, datum),
                None => return Ok(()),
            },
            RowTarget::Indexed(writer) => {
                if pos != writer.fields_written() {
                    return Ok(());
                }
                writer.write_datum(datum)
            }
        };
        written.map_err(refusal_of_row_error)
    }
}

/// The refusal a row codec's error stands for.
#[cold]
fn refusal_of_row_error(error: RowError) -> Refusal {
    match error {
        RowError::NullNotAllowed { .. } => Refusal::Null,
        RowError::ValueOutOfRange { reason, .. } => Refusal::OutOfRange(Unfit::Row(reason)),
        _ => Refusal::Mismatch,
    }
}

/// What a row's [`FieldWriter`] left for the builder to check.
pub(in crate::row) struct WrittenFields {
    /// Fields written (the table's column count for a whole row).
    pub count: usize,
    /// Bytes the row added to STRING/BYTES data.
    pub var_bytes: usize,
    /// The first refused field and why.
    pub refused: Option<(usize, Refusal)>,
}

impl<'a> FieldWriter<'a> {
    /// A writer for row `row` of `columns` (which hold `row` rows).
    #[inline(always)]
    pub(super) fn new(columns: &'a mut [Column], row: usize) -> Self {
        Self {
            columns,
            row,
            next: 0,
            var_bytes: 0,
            refused: None,
            kv: None,
        }
    }

    /// A writer of one primary-key row into `row`.
    #[inline(always)]
    pub(in crate::row) fn for_row(row: RowTarget<'a>) -> Self {
        Self {
            columns: &mut [],
            row: 0,
            next: 0,
            var_bytes: 0,
            refused: None,
            kv: Some(row),
        }
    }

    /// What was written, for the builder to keep or roll back the row.
    #[inline(always)]
    pub(in crate::row) fn finish(self) -> WrittenFields {
        WrittenFields {
            count: self.next,
            var_bytes: self.var_bytes,
            refused: self.refused,
        }
    }

    /// Writes the next field as `datum`, converted to the column's type as
    /// [`RowBatchBuilder::append`](super::RowBatchBuilder::append) documents.
    #[inline(always)]
    pub fn datum(&mut self, datum: Datum<'_>) {
        self.datum_ref(&datum)
    }

    /// [`FieldWriter::datum`] for a datum the row holds: read where the
    /// column's kind needs it, not copied out whole first.
    #[inline(always)]
    pub fn datum_ref(&mut self, datum: &Datum<'_>) {
        let pos = self.next;
        self.next += 1;
        let Some(column) = self.columns.get_mut(pos) else {
            return self.beyond_columns(pos, datum);
        };
        if let Err(refusal) = column.append(datum, self.row, &mut self.var_bytes) {
            self.refused = first_refusal(self.refused.take(), pos, refusal);
        }
    }

    /// A field that finds no column: the field of a primary-key row (the
    /// writer has no columns then), or one past the table's last column,
    /// which is counted, not written (the builder refuses the row for its
    /// field count). Out of line, so the Arrow path's code stays as small
    /// as it was.
    #[inline(never)]
    fn beyond_columns(&mut self, pos: usize, datum: &Datum<'_>) {
        let Some(row) = self.kv.as_mut() else {
            return;
        };
        // A row's fields follow one another in its bytes: after a refusal
        // nothing more is written (the row is dropped).
        if self.refused.is_some() {
            return;
        }
        if let Err(refusal) = row.write(pos, datum) {
            self.refused = first_refusal(None, pos, refusal);
        }
    }

    /// Writes the next field as NULL (refused by a NOT NULL column).
    #[inline(always)]
    pub fn null(&mut self) {
        self.datum(Datum::Null)
    }

    /// Writes the next field as a BOOLEAN.
    #[inline(always)]
    pub fn boolean(&mut self, value: bool) {
        self.datum(Datum::Boolean(value))
    }

    /// Writes the next field as a TINYINT.
    #[inline(always)]
    pub fn tinyint(&mut self, value: i8) {
        self.datum(Datum::TinyInt(value))
    }

    /// Writes the next field as a SMALLINT.
    #[inline(always)]
    pub fn smallint(&mut self, value: i16) {
        self.datum(Datum::SmallInt(value))
    }

    /// Writes the next field as an INT.
    #[inline(always)]
    pub fn int(&mut self, value: i32) {
        self.datum(Datum::Int(value))
    }

    /// Writes the next field as a BIGINT.
    #[inline(always)]
    pub fn bigint(&mut self, value: i64) {
        self.datum(Datum::BigInt(value))
    }

    /// Writes the next field as a FLOAT.
    #[inline(always)]
    pub fn float(&mut self, value: f32) {
        self.datum(Datum::Float(value))
    }

    /// Writes the next field as a DOUBLE.
    #[inline(always)]
    pub fn double(&mut self, value: f64) {
        self.datum(Datum::Double(value))
    }

    /// Writes the next field as a STRING (or CHAR).
    #[inline(always)]
    pub fn string(&mut self, value: &str) {
        self.datum(Datum::String(value))
    }

    /// Writes the next field as BYTES (or BINARY(n) of exactly n bytes).
    #[inline(always)]
    pub fn binary(&mut self, value: &[u8]) {
        self.datum(Datum::Binary(value))
    }

    /// Writes the next field as a DECIMAL's unscaled value.
    #[inline(always)]
    pub fn decimal(&mut self, unscaled: i128) {
        self.datum(Datum::Decimal(unscaled))
    }

    /// Writes the next field as a DATE (days since 1970-01-01).
    #[inline(always)]
    pub fn date(&mut self, days: i32) {
        self.datum(Datum::Date(days))
    }

    /// Writes the next field as a TIME (milliseconds of the day).
    #[inline(always)]
    pub fn time(&mut self, millis_of_day: i32) {
        self.datum(Datum::Time(millis_of_day))
    }

    /// Writes the next field as a TIMESTAMP (no time zone).
    #[inline(always)]
    pub fn timestamp(&mut self, value: Timestamp) {
        self.datum(Datum::Timestamp(value))
    }

    /// Writes the next field as a TIMESTAMP_LTZ (an instant).
    #[inline(always)]
    pub fn timestamp_ltz(&mut self, value: Timestamp) {
        self.datum(Datum::TimestampLtz(value))
    }
}

/// The first refusal of a row: `earlier`, or else this one. By value, not
/// through `&mut`: a pointer into the writer passed out of line kept the
/// writer's fields in memory instead of registers for every value.
#[cold]
#[inline(never)]
fn first_refusal(
    earlier: Option<(usize, Refusal)>,
    pos: usize,
    refusal: Refusal,
) -> Option<(usize, Refusal)> {
    earlier.or(Some((pos, refusal)))
}
