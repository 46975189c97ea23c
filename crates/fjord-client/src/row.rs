//! The typed row API: [`Datum`] (one borrowed field value), [`InternalRow`]
//! (a row read field by field) and [`GenericRow`] (a reusable row of datums).
//!
//! Rows are how a caller hands single records to the writer without boxing
//! or allocating per value: a `Datum` borrows strings and bytes from the
//! caller, and every variant is `Copy`. The writer reads a row once, field by
//! field, straight into Arrow column buffers ([`RowBatchBuilder`]).
//!
//! A row type of the caller's own (a struct per record) implements
//! [`InternalRow`] and, to skip matching each value's type at run time,
//! overrides [`InternalRow::write_fields`] to write its fields with
//! [`FieldWriter`]'s typed methods:
//!
//! ```
//! use fjord_client::row::{Datum, FieldWriter, InternalRow};
//!
//! struct Click<'a> {
//!     user: i64,
//!     page: &'a str,
//! }
//!
//! impl InternalRow for Click<'_> {
//!     fn field_count(&self) -> usize {
//!         2
//!     }
//!
//!     fn datum(&self, pos: usize) -> Datum<'_> {
//!         match pos {
//!             0 => Datum::BigInt(self.user),
//!             _ => Datum::String(self.page),
//!         }
//!     }
//!
//!     fn write_fields(&self, fields: &mut FieldWriter<'_>) {
//!         fields.bigint(self.user);
//!         fields.string(self.page);
//!     }
//! }
//! ```
//!
//! Value conventions follow Fluss's `InternalRow` (so a value means the same
//! thing here as in the Java and Rust clients):
//! - DECIMAL is the unscaled integer; the column's scale gives the point.
//! - DATE is days since 1970-01-01, TIME is milliseconds of the day.
//! - TIMESTAMP and TIMESTAMP_LTZ are milliseconds since the epoch plus the
//!   nanoseconds within that millisecond ([`Timestamp`]); TIMESTAMP has no
//!   zone (a wall-clock reading), TIMESTAMP_LTZ is an instant.
//! - CHAR and STRING are UTF-8 text; BYTES and BINARY(n) are raw bytes.

pub(crate) mod arrow_column;
mod batch_builder;
pub(crate) mod value;

pub use batch_builder::{FieldWriter, RowBatchBuilder, COLUMN_VAR_BYTES_MAX};
pub use fjord_format::datum::{Datum, Timestamp, NANOS_PER_MILLI};

/// A row read field by field, like Fluss's `InternalRow`.
///
/// Implemented for `[Datum]` slices, arrays and vectors, [`GenericRow`], and (in the scanner) a
/// row view over a received RecordBatch. Readers (the writer's column
/// builders, the bucket assigner, the partition router) check
/// `field_count()` against the table once per row and then read positions
/// below it only.
pub trait InternalRow {
    /// Number of fields in the row.
    fn field_count(&self) -> usize;

    /// The value at `pos`. Callers keep `pos < field_count()`; an
    /// implementation may panic otherwise.
    fn datum(&self, pos: usize) -> Datum<'_>;

    /// Whether the value at `pos` is NULL.
    fn is_null_at(&self, pos: usize) -> bool {
        self.datum(pos).is_null()
    }

    /// Writes the row's fields, in order, into the writer's columns: what
    /// [`RowBatchBuilder::append`] (and so `AppendWriter::append`) calls.
    /// The default writes `datum(pos)` for every position below
    /// `field_count()`; the rows that hold datums (slices, arrays, `Vec`,
    /// [`GenericRow`]) write each where it lies instead
    /// ([`FieldWriter::datum_ref`]), and a reference writes as its row.
    ///
    /// A row type whose fields' types are known at compile time can write
    /// them with [`FieldWriter`]'s typed methods instead (`bigint`, `string`,
    /// ...), which skips matching each datum at run time: for the
    /// five-column `user_behavior` row, 19 → 11 ns a row into the builder,
    /// a quarter of the row's instructions on the writer's caller thread
    /// (docs/bench-notes/client.md, "Eighth pass"). It must write
    /// the same values `datum` reads (the bucket and partition of a row
    /// are read through `datum`), one per field, in order.
    #[inline]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        for pos in 0..self.field_count() {
            fields.datum(self.datum(pos));
        }
    }
}

impl InternalRow for [Datum<'_>] {
    fn field_count(&self) -> usize {
        self.len()
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        self[pos]
    }

    #[inline]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        write_datums(self, fields);
    }
}

impl<const N: usize> InternalRow for [Datum<'_>; N] {
    fn field_count(&self) -> usize {
        N
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        self[pos]
    }

    #[inline]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        write_datums(self, fields);
    }
}

impl InternalRow for Vec<Datum<'_>> {
    fn field_count(&self) -> usize {
        self.len()
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        self[pos]
    }

    #[inline]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        write_datums(self, fields);
    }
}

/// The `write_fields` of rows that hold their datums: each written where
/// it lies ([`FieldWriter::datum_ref`]) rather than copied out whole by
/// `datum(pos)`, whose copy loaded every part of every datum before the
/// column's kind was known: 357 -> 342 instructions a `[Datum; 5]` row
/// (`scripts/callgrind-caller.sh`).
#[inline(always)]
fn write_datums(datums: &[Datum<'_>], fields: &mut FieldWriter<'_>) {
    for datum in datums {
        fields.datum_ref(datum);
    }
}

/// A row of datums owned as a `Vec`, meant to be refilled record after
/// record so its allocation is made once.
///
/// The datums borrow for `'a`; to refill the row from data with a shorter
/// life, [`GenericRow::recycle`] hands the same allocation back with a new
/// lifetime.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenericRow<'a> {
    values: Vec<Datum<'a>>,
}

impl<'a> GenericRow<'a> {
    /// An empty row with room for `field_count` fields.
    pub fn with_capacity(field_count: usize) -> Self {
        Self {
            values: Vec::with_capacity(field_count),
        }
    }

    /// A row of `field_count` NULLs, to fill with [`GenericRow::set`].
    pub fn nulls(field_count: usize) -> Self {
        Self {
            values: vec![Datum::Null; field_count],
        }
    }

    /// A row holding these values.
    pub fn from_values(values: Vec<Datum<'a>>) -> Self {
        Self { values }
    }

    /// Sets the field at `pos`; panics if `pos >= field_count()` (a caller bug:
    /// the row's width is fixed by the caller).
    pub fn set(&mut self, pos: usize, value: impl Into<Datum<'a>>) {
        self.values[pos] = value.into();
    }

    /// Appends a field at the end.
    pub fn push(&mut self, value: impl Into<Datum<'a>>) {
        self.values.push(value.into());
    }

    /// Removes every field, keeping the allocation.
    pub fn clear(&mut self) {
        self.values.clear();
    }

    /// The fields, in order.
    pub fn values(&self) -> &[Datum<'a>] {
        &self.values
    }

    /// This row emptied, with its allocation kept, ready to borrow from data
    /// with another lifetime (e.g. the next line of an input file).
    pub fn recycle<'b>(mut self) -> GenericRow<'b> {
        self.values.clear();
        // The vector is empty, so nothing is mapped; collecting an empty
        // `IntoIter` of a same-layout type reuses the allocation.
        GenericRow {
            values: self.values.into_iter().map(|_| Datum::Null).collect(),
        }
    }
}

impl InternalRow for GenericRow<'_> {
    fn field_count(&self) -> usize {
        self.values.len()
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        self.values[pos]
    }

    #[inline]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        write_datums(&self.values, fields);
    }
}

impl<R: InternalRow + ?Sized> InternalRow for &R {
    fn field_count(&self) -> usize {
        (**self).field_count()
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        (**self).datum(pos)
    }

    fn is_null_at(&self, pos: usize) -> bool {
        (**self).is_null_at(pos)
    }

    // Forwarded too: a reference to a row type with typed fields (or to
    // datums) writes as the row itself does, not through `datum`.
    #[inline]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        (**self).write_fields(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_arrays_and_generic_rows_read_the_same_fields() {
        let text = String::from("pv");
        let fields = [Datum::BigInt(7), Datum::String(&text), Datum::Null];
        let row = GenericRow::from_values(fields.to_vec());
        let slice: &[Datum<'_>] = &fields;
        let vec = fields.to_vec();
        for r in [&slice as &dyn InternalRow, &fields, &row, &vec] {
            assert_eq!(r.field_count(), 3);
            assert_eq!(r.datum(0).as_i64(), Some(7));
            assert_eq!(r.datum(1).as_str(), Some("pv"));
            assert!(r.is_null_at(2));
            assert!(!r.is_null_at(0));
        }
    }

    #[test]
    fn generic_row_is_refilled_without_reallocating() {
        let mut row = GenericRow::with_capacity(4);
        let first = String::from("a");
        row.push(first.as_str());
        row.push(Some(3i32));
        row.push(None::<i64>);
        assert_eq!(
            row.values(),
            &[Datum::String("a"), Datum::Int(3), Datum::Null]
        );
        let capacity = row.values.capacity();
        let pointer = row.values.as_ptr() as usize;
        let mut row = row.recycle();
        drop(first);
        assert_eq!(row.field_count(), 0);
        let second = String::from("b");
        row.push(second.as_str());
        assert_eq!(row.values.capacity(), capacity);
        assert_eq!(row.values.as_ptr() as usize, pointer);
    }

    #[test]
    fn set_replaces_one_field() {
        let mut row = GenericRow::nulls(2);
        row.set(1, 2.5f64);
        assert_eq!(row.values(), &[Datum::Null, Datum::Double(2.5)]);
    }
}
