//! [`RowBatchBuilder`]: rows appended straight into the Arrow buffers of one
//! table schema, finished into a `RecordBatch` batch after batch.
//!
//! The plan — which buffer each column writes and how a datum converts — is
//! chosen once from the Arrow schema ([`ColumnKind`]). Per row, each column
//! does one match on its kind and the datum and writes the value into its own
//! `MutableBuffer`s: no builder objects, no boxing, no allocation once the
//! buffers have reached their working size. Strings and bytes are copied
//! once, from the caller's slice into the column's data buffer.
//!
//! A row that fails (wrong type, NULL into NOT NULL, value out of range) is
//! rolled back from the columns it already reached, so the builder always
//! holds whole rows.

use std::sync::Arc;

use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{
    ArrayRef, ArrowPrimitiveType, BinaryArray, BooleanArray, FixedSizeBinaryArray, PrimitiveArray,
    RecordBatch, RecordBatchOptions, StringArray,
};
use arrow_buffer::{
    ArrowNativeType, BooleanBufferBuilder, Buffer, MutableBuffer, NullBuffer, NullBufferBuilder,
    OffsetBuffer, ScalarBuffer,
};
use arrow_schema::{DataType as ArrowType, Field, SchemaRef, TimeUnit};

use super::{Datum, InternalRow, Timestamp};
use crate::error::{ClientError, Result};

mod fields;

pub use fields::FieldWriter;
pub(in crate::row) use fields::{RowTarget, WrittenFields};

/// Columns being written a run of rows, rolled back to `rows` rows when
/// dropped: on a refusal, and when a row's `datum` panics part way through
/// the run (a torn run would shift every later value of the columns it
/// reached, and a dropped writer still delivers its batches).
struct RollBack<'a> {
    columns: &'a mut [Column],
    rows: usize,
}

impl RollBack<'_> {
    /// The run went in whole: nothing to roll back.
    fn keep(self) {
        // It holds a borrow and a count, nothing to free.
        std::mem::forget(self);
    }
}

impl Drop for RollBack<'_> {
    fn drop(&mut self) {
        truncate_columns(self.columns, self.rows);
    }
}

/// Cuts every column back to its first `rows` rows (a no-op for a column
/// that holds no more).
fn truncate_columns(columns: &mut [Column], rows: usize) {
    for column in columns {
        column.truncate(rows);
    }
}

/// Milliseconds in a day: TIME values are milliseconds of the day, so they
/// lie in `0..MILLIS_PER_DAY`.
const MILLIS_PER_DAY: i32 = 86_400_000;

/// Largest number of bytes one STRING/BYTES column can hold in one batch:
/// Arrow's `Utf8`/`Binary` address their data with `i32` offsets. The writer
/// seals batches long before this (its batch size is megabytes); the check
/// keeps one oversized batch from wrapping the offsets.
pub const COLUMN_VAR_BYTES_MAX: usize = i32::MAX as usize;

/// Why a STRING/BYTES value is refused when its batch's data would pass
/// [`COLUMN_VAR_BYTES_MAX`].
const VAR_BYTES_EXCEEDED: &str =
    "the batch's data in this column would exceed 2 GiB; finish the batch earlier";

/// Why a run's row is refused when one of its STRING/BYTES values read
/// differently the second time.
const VALUE_CHANGED: &str =
    "the row's value changed between two reads (an InternalRow must read the same each time)";

/// Longest STRING/BYTES value [`extend_short`] copies without calling
/// `memcpy`: one row's codes, names and flags mostly fit.
const SHORT_VALUE_MAX: usize = 16;

/// Appends `bytes` to `buffer`, a short value without a call to `memcpy`
/// ([`copy_short`]).
#[inline(always)]
fn extend_short(buffer: &mut MutableBuffer, bytes: &[u8]) {
    let at = buffer.len();
    // No overflow: both are below `isize::MAX` (see `push_native`).
    let end = at + bytes.len();
    if end > buffer.capacity() {
        return extend_growing(buffer, bytes);
    }
    // SAFETY: there is room for `bytes.len()` more bytes after `at` (just
    // checked, as in `push_native`); `buffer` is borrowed exclusively, so
    // `bytes` cannot lie in it; and `set_len` covers exactly the bytes
    // `copy_short` wrote.
    unsafe {
        copy_short(buffer.as_mut_ptr().add(at), bytes);
        buffer.set_len(end);
    }
}

/// [`extend_short`] when the buffer must grow, out of the row path.
#[cold]
#[inline(never)]
fn extend_growing(buffer: &mut MutableBuffer, bytes: &[u8]) {
    buffer.extend_from_slice(bytes);
}

/// Appends one fixed-width value to `buffer`: `MutableBuffer::push`
/// without its overflow check on the length, which cannot overflow (a
/// length is at most the capacity, an allocation's size, below
/// `isize::MAX`), and with the room checked where the compiler can see it,
/// so `set_len`'s own check folds away: 401 -> 395 instructions a
/// `[Datum; 5]` row for the first, 375 -> 362 for the second
/// (docs/bench-notes/client.md, "Tenth pass"). Every fixed-width value and
/// STRING/BYTES offset of the row path goes through it.
#[inline(always)]
fn push_native<T: ArrowNativeType>(buffer: &mut MutableBuffer, value: T) {
    let at = buffer.len();
    let end = at + std::mem::size_of::<T>();
    if end > buffer.capacity() {
        return push_growing(buffer, value);
    }
    // SAFETY: `buffer` has room for `end` bytes (just checked, which also
    // lets the compiler drop `set_len`'s own check), `write_unaligned`
    // needs no alignment, and `set_len` covers exactly the bytes written.
    unsafe {
        std::ptr::write_unaligned(buffer.as_mut_ptr().add(at).cast::<T>(), value);
        buffer.set_len(end);
    }
}

/// [`push_native`] when the buffer must grow: out of the row path (once
/// per doubling).
#[cold]
#[inline(never)]
fn push_growing<T: ArrowNativeType>(buffer: &mut MutableBuffer, value: T) {
    buffer.push(value);
}

/// `bytes` in bits, for [`RowBatchBuilder`]'s size estimate (lossless:
/// `usize` is at most 64 bits).
#[inline(always)]
fn bits_of(bytes: usize) -> u64 {
    bytes as u64 * 8
}

/// Bits rounded up to whole bytes: an add and a shift rather than
/// `div_ceil`, which compiles to a remainder test as well (3 instructions
/// a row more). The bits count bytes in memory plus a bit a row per
/// bitmap column, so neither the add nor the result overflows.
#[inline(always)]
fn bytes_of_bits(bits: u64) -> usize {
    ((bits + 7) >> 3) as usize
}

/// How one column stores its values: the Arrow physical layout and the datum
/// conversion, decided once from the column's Arrow type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ColumnKind {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    /// `Utf8`: i32 offsets plus UTF-8 data.
    Utf8,
    /// `Binary`: i32 offsets plus bytes.
    Binary,
    /// `FixedSizeBinary(width)`.
    FixedBinary {
        width: usize,
    },
    /// `Decimal128(p, s)`; `bound` is `10^p`, the exclusive limit of the
    /// unscaled value's magnitude.
    Decimal {
        bound: i128,
    },
    Date32,
    Time32Second,
    Time32Milli,
    Time64Micro,
    Time64Nano,
    /// `Timestamp(unit, zone)`; a zone makes it TIMESTAMP_LTZ.
    Timestamp {
        unit: TimeUnit,
        ltz: bool,
    },
}

impl ColumnKind {
    /// The kind for an Arrow type, or `None` when rows cannot carry it.
    fn of(data_type: &ArrowType) -> Option<Self> {
        Some(match data_type {
            ArrowType::Boolean => Self::Boolean,
            ArrowType::Int8 => Self::Int8,
            ArrowType::Int16 => Self::Int16,
            ArrowType::Int32 => Self::Int32,
            ArrowType::Int64 => Self::Int64,
            ArrowType::Float32 => Self::Float32,
            ArrowType::Float64 => Self::Float64,
            ArrowType::Utf8 => Self::Utf8,
            ArrowType::Binary => Self::Binary,
            ArrowType::FixedSizeBinary(width) => Self::FixedBinary {
                width: usize::try_from(*width).ok().filter(|w| *w > 0)?,
            },
            ArrowType::Decimal128(precision, _) if (1..=38).contains(precision) => Self::Decimal {
                bound: 10i128.pow(u32::from(*precision)),
            },
            ArrowType::Date32 => Self::Date32,
            ArrowType::Time32(TimeUnit::Second) => Self::Time32Second,
            ArrowType::Time32(TimeUnit::Millisecond) => Self::Time32Milli,
            ArrowType::Time64(TimeUnit::Microsecond) => Self::Time64Micro,
            ArrowType::Time64(TimeUnit::Nanosecond) => Self::Time64Nano,
            ArrowType::Timestamp(unit, zone) => Self::Timestamp {
                unit: *unit,
                ltz: zone.is_some(),
            },
            _ => return None,
        })
    }

    /// Bytes one value takes in the values buffer (var-width kinds: the
    /// offset; booleans are bits and count as 0 here).
    fn value_bytes(self) -> usize {
        match self {
            Self::Boolean => 0,
            Self::Int8 => 1,
            Self::Int16 => 2,
            Self::Int32 | Self::Date32 | Self::Time32Second | Self::Time32Milli => 4,
            Self::Float32 => 4,
            Self::Int64 | Self::Float64 | Self::Time64Micro | Self::Time64Nano => 8,
            Self::Timestamp { .. } => 8,
            Self::Utf8 | Self::Binary => 4,
            Self::FixedBinary { width } => width,
            Self::Decimal { .. } => 16,
        }
    }

    /// The datum variant this column takes, for error messages.
    fn expected(self) -> &'static str {
        match self {
            Self::Boolean => "Datum::Boolean",
            Self::Int8 => "Datum::TinyInt",
            Self::Int16 => "Datum::SmallInt",
            Self::Int32 => "Datum::Int",
            Self::Int64 => "Datum::BigInt",
            Self::Float32 => "Datum::Float",
            Self::Float64 => "Datum::Double",
            Self::Utf8 => "Datum::String",
            Self::Binary | Self::FixedBinary { .. } => "Datum::Binary",
            Self::Decimal { .. } => "Datum::Decimal",
            Self::Date32 => "Datum::Date",
            Self::Time32Second | Self::Time32Milli | Self::Time64Micro | Self::Time64Nano => {
                "Datum::Time"
            }
            Self::Timestamp { ltz: false, .. } => "Datum::Timestamp",
            Self::Timestamp { ltz: true, .. } => "Datum::TimestampLtz",
        }
    }
}

/// How a value does not fit its column. A code rather than the message:
/// the row loop carries a refusal from value to value, and as a string
/// each reason's address was computed before every row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::row) enum Unfit {
    /// BINARY(n) given a value of another length.
    BinaryWidth,
    /// DECIMAL given more digits than its precision.
    DecimalDigits,
    /// A timestamp beyond what the column's unit holds in 64 bits.
    TimestampOverflow,
    /// TIME outside one day.
    TimeOfDay,
    /// The batch's STRING/BYTES data would pass [`COLUMN_VAR_BYTES_MAX`].
    VarBytes,
    /// A row read differently the second time.
    ValueChanged,
    /// A primary-key row's codec refused the value, for this reason.
    Row(&'static str),
}

impl Unfit {
    /// The reason, as the error message says it.
    pub(in crate::row) fn reason(self) -> &'static str {
        match self {
            Unfit::Row(reason) => reason,
            Unfit::BinaryWidth => "byte length differs from BINARY(n)",
            Unfit::DecimalDigits => "unscaled value has more digits than the precision",
            Unfit::TimestampOverflow => "timestamp overflows the column's unit",
            Unfit::TimeOfDay => "TIME is milliseconds of the day, 0..86400000",
            Unfit::VarBytes => VAR_BYTES_EXCEEDED,
            Unfit::ValueChanged => VALUE_CHANGED,
        }
    }
}

/// Why one value could not be appended (the column is added by the caller).
#[derive(Clone, Copy)]
pub(in crate::row) enum Refusal {
    /// The datum's variant does not fit the column.
    Mismatch,
    /// NULL into a NOT NULL column.
    Null,
    /// The value does not fit the column (precision, width, range).
    OutOfRange(Unfit),
    /// Not a refusal of a row: the run's STRING/BYTES data would pass the
    /// budget it was given ([`RowBatchBuilder::try_append_rows_within`]).
    OverBudget,
}

/// One column's buffers. Which buffers are used depends on the kind:
/// fixed-width kinds write `values`; STRING/BYTES write `offsets` (i32, with
/// the leading 0) and `values` (the data); BOOLEAN writes `bits`.
struct Column {
    kind: ColumnKind,
    nullable: bool,
    values: MutableBuffer,
    offsets: MutableBuffer,
    bits: BooleanBufferBuilder,
    /// Validity, filled lazily: it holds slots only up to the last NULL
    /// (the non-NULL slots before it are added when a NULL arrives, and
    /// the rest in `finish`), so a non-NULL value costs nothing here. A
    /// NOT NULL column's stays empty.
    nulls: NullBufferBuilder,
    /// Buffers of a finished batch handed back by `recycle`, reused by the
    /// next `reserve` instead of a fresh allocation (whose pages fault in).
    spare_values: Option<MutableBuffer>,
    spare_offsets: Option<MutableBuffer>,
    /// Text/bytes of the last finished batch: how much the next one
    /// reserves.
    last_var_bytes: usize,
}

impl Column {
    fn new(kind: ColumnKind, nullable: bool, rows: usize, var_bytes: usize) -> Self {
        let mut column = Self {
            kind,
            nullable,
            values: MutableBuffer::new(0),
            offsets: MutableBuffer::new(0),
            bits: BooleanBufferBuilder::new(0),
            nulls: NullBufferBuilder::new(rows),
            spare_values: None,
            spare_offsets: None,
            last_var_bytes: var_bytes,
        };
        if column.is_var() {
            column.offsets.push(0i32);
        }
        column.presize(rows, var_bytes);
        column
    }

    /// Grows the buffers, if needed, so `rows` more values (and `var_bytes`
    /// more text/bytes) append without reallocating.
    fn presize(&mut self, rows: usize, var_bytes: usize) {
        match self.kind {
            ColumnKind::Boolean => self.bits.reserve(rows),
            ColumnKind::Utf8 | ColumnKind::Binary => {
                make_room(&mut self.offsets, rows * 4);
                make_room(&mut self.values, var_bytes);
            }
            kind => make_room(&mut self.values, rows * kind.value_bytes()),
        }
    }

    /// Writes into the spare buffers from now on, when they are larger than
    /// the current ones; only called while the column holds no value.
    fn adopt_spares(&mut self) {
        let var = self.is_var();
        if var && self.offsets.len() == std::mem::size_of::<i32>() {
            // Only the leading 0 offset: put it back below.
            self.offsets.clear();
        }
        adopt_spare(&mut self.values, &mut self.spare_values);
        adopt_spare(&mut self.offsets, &mut self.spare_offsets);
        if var && self.offsets.is_empty() {
            self.offsets.push(0i32);
        }
    }

    /// Keeps the value (and offset) buffers of a finished batch of this
    /// column as spares when nothing else holds them; returns how many.
    fn recycle(&mut self, buffers: Vec<Buffer>) -> usize {
        let (offsets, values) = match self.kind {
            // Bits are an eighth of a byte per row: not worth keeping.
            ColumnKind::Boolean => return 0,
            ColumnKind::Utf8 | ColumnKind::Binary => {
                let mut buffers = buffers.into_iter();
                (buffers.next(), buffers.next())
            }
            _ => (None, buffers.into_iter().next()),
        };
        let mut taken = 0;
        for (buffer, spare) in [
            (values, &mut self.spare_values),
            (offsets, &mut self.spare_offsets),
        ] {
            if let Some(Ok(buffer)) = buffer.map(Buffer::into_mutable) {
                if spare
                    .as_ref()
                    .is_none_or(|s| s.capacity() < buffer.capacity())
                {
                    *spare = Some(buffer);
                    taken += 1;
                }
            }
        }
        taken
    }

    /// Bytes the column's buffers have allocated (capacity, not length).
    fn allocated_bytes(&self) -> usize {
        self.spare_values
            .as_ref()
            .map_or(0, MutableBuffer::capacity)
            + self
                .spare_offsets
                .as_ref()
                .map_or(0, MutableBuffer::capacity)
            + self.values.capacity()
            + self.offsets.capacity()
            + self.bits.capacity() / 8
            + self.nulls.allocated_size()
    }

    /// Drops the buffers' capacity, keeping the (empty) column usable.
    fn release(&mut self) {
        self.spare_values = None;
        self.spare_offsets = None;
        self.values = MutableBuffer::new(0);
        self.offsets = MutableBuffer::new(0);
        self.bits = BooleanBufferBuilder::new(0);
        self.nulls = NullBufferBuilder::new(0);
        if self.is_var() {
            self.offsets.push(0i32);
        }
    }

    fn is_var(&self) -> bool {
        matches!(self.kind, ColumnKind::Utf8 | ColumnKind::Binary)
    }

    /// Appends one value as row `row` (the rows before it are in the
    /// column); adds to `var_bytes` the bytes it added to the data buffer
    /// of a STRING/BYTES column. On error nothing was written.
    ///
    /// The count is added through `var_bytes` rather than returned: a
    /// returned `Result<usize, _>` was packed and unpacked per value.
    ///
    /// The match is on the datum first and the column's kind in guards, not
    /// on a `(kind, datum)` tuple: building the tuple copied the datum to
    /// the stack with wide loads that stall on the caller's narrow stores.
    /// The guards read `self.kind` in place rather than a copy taken first:
    /// the copy loaded the kind's timestamp unit and zone flag for every
    /// value, 391 -> 375 instructions a `[Datum; 5]` row
    /// (`scripts/callgrind-caller.sh`).
    // Always inlined into the row loop: as a call, its prologue and
    // epilogue were a fifth of its cost, paid once per value.
    #[inline(always)]
    fn append(
        &mut self,
        datum: &Datum<'_>,
        row: usize,
        var_bytes: &mut usize,
    ) -> std::result::Result<(), Refusal> {
        use ColumnKind as K;
        match *datum {
            Datum::Null => {
                if !self.nullable {
                    return Err(Refusal::Null);
                }
                self.append_null_slot();
                mark_null(&mut self.nulls, row);
                return Ok(());
            }
            Datum::Boolean(v) if self.kind == K::Boolean => self.bits.append(v),
            Datum::TinyInt(v) if self.kind == K::Int8 => push_native(&mut self.values, v),
            Datum::SmallInt(v) if self.kind == K::Int16 => push_native(&mut self.values, v),
            Datum::Int(v) if self.kind == K::Int32 => push_native(&mut self.values, v),
            Datum::BigInt(v) if self.kind == K::Int64 => push_native(&mut self.values, v),
            Datum::Float(v) if self.kind == K::Float32 => push_native(&mut self.values, v),
            Datum::Double(v) if self.kind == K::Float64 => push_native(&mut self.values, v),
            Datum::String(v) if self.kind == K::Utf8 => {
                *var_bytes += self.push_var(v.as_bytes())?
            }
            Datum::Binary(v) => match self.kind {
                K::Binary => *var_bytes += self.push_var(v)?,
                K::FixedBinary { width } => {
                    if v.len() != width {
                        return Err(Refusal::OutOfRange(Unfit::BinaryWidth));
                    }
                    self.values.extend_from_slice(v);
                }
                _ => return Err(Refusal::Mismatch),
            },
            Datum::Decimal(v) => {
                let K::Decimal { bound } = self.kind else {
                    return Err(Refusal::Mismatch);
                };
                if v <= -bound || v >= bound {
                    return Err(Refusal::OutOfRange(Unfit::DecimalDigits));
                }
                push_native(&mut self.values, v);
            }
            Datum::Date(v) if self.kind == K::Date32 => push_native(&mut self.values, v),
            // Fluss's writers truncate a finer value to the column's unit.
            Datum::Time(ms) => match self.kind {
                K::Time32Second => push_native(&mut self.values, time_of_day(ms)? / 1_000),
                K::Time32Milli => push_native(&mut self.values, time_of_day(ms)?),
                K::Time64Micro => {
                    push_native(&mut self.values, i64::from(time_of_day(ms)?) * 1_000)
                }
                K::Time64Nano => {
                    push_native(&mut self.values, i64::from(time_of_day(ms)?) * 1_000_000)
                }
                _ => return Err(Refusal::Mismatch),
            },
            Datum::Timestamp(t) => match self.kind {
                K::Timestamp { unit, ltz: false } => self.push_timestamp(t, unit)?,
                _ => return Err(Refusal::Mismatch),
            },
            Datum::TimestampLtz(t) => match self.kind {
                K::Timestamp { unit, ltz: true } => self.push_timestamp(t, unit)?,
                _ => return Err(Refusal::Mismatch),
            },
            _ => return Err(Refusal::Mismatch),
        }
        Ok(())
    }

    #[inline]
    fn push_timestamp(&mut self, t: Timestamp, unit: TimeUnit) -> std::result::Result<(), Refusal> {
        let value =
            timestamp_in_unit(t, unit).ok_or(Refusal::OutOfRange(Unfit::TimestampOverflow))?;
        push_native(&mut self.values, value);
        Ok(())
    }

    /// The placeholder a NULL occupies in the value buffers.
    fn append_null_slot(&mut self) {
        match self.kind {
            ColumnKind::Boolean => self.bits.append(false),
            ColumnKind::Utf8 | ColumnKind::Binary => {
                // Lossless: the data length is kept below COLUMN_VAR_BYTES_MAX.
                self.offsets.push(self.values.len() as i32);
            }
            kind => self.values.extend_zeros(kind.value_bytes()),
        }
    }

    #[inline(always)]
    fn push_var(&mut self, bytes: &[u8]) -> std::result::Result<usize, Refusal> {
        let end = self.values.len() + bytes.len();
        if end > COLUMN_VAR_BYTES_MAX {
            return Err(Refusal::OutOfRange(Unfit::VarBytes));
        }
        extend_short(&mut self.values, bytes);
        // Lossless: `end` was just checked against i32::MAX.
        push_native(&mut self.offsets, end as i32);
        Ok(bytes.len())
    }

    /// Appends the value at `pos` of every row of `rows` as rows `base..`
    /// of this column: one column at a time, so the column's kind is
    /// matched once per run instead of once per value, and the common
    /// kinds write into room made once for the whole run. Returns the
    /// bytes added to a STRING/BYTES column's data (0 otherwise). On error,
    /// the index in `rows` of the refused value; the column may then hold
    /// part of the run, which the caller truncates away.
    fn append_run<R: InternalRow>(
        &mut self,
        rows: &[R],
        pos: usize,
        base: usize,
        budget: &mut usize,
    ) -> std::result::Result<usize, (usize, Refusal)> {
        use ColumnKind as K;
        match self.kind {
            K::Int8 => self.fixed_run(rows, pos, base, |d| match d {
                Datum::TinyInt(v) => Some(v),
                _ => None,
            }),
            K::Int16 => self.fixed_run(rows, pos, base, |d| match d {
                Datum::SmallInt(v) => Some(v),
                _ => None,
            }),
            K::Int32 => self.fixed_run(rows, pos, base, |d| match d {
                Datum::Int(v) => Some(v),
                _ => None,
            }),
            K::Int64 => self.fixed_run(rows, pos, base, |d| match d {
                Datum::BigInt(v) => Some(v),
                _ => None,
            }),
            K::Float32 => self.fixed_run(rows, pos, base, |d| match d {
                Datum::Float(v) => Some(v),
                _ => None,
            }),
            K::Float64 => self.fixed_run(rows, pos, base, |d| match d {
                Datum::Double(v) => Some(v),
                _ => None,
            }),
            K::Date32 => self.fixed_run(rows, pos, base, |d| match d {
                Datum::Date(v) => Some(v),
                _ => None,
            }),
            K::Timestamp {
                unit: TimeUnit::Millisecond,
                ltz: false,
            } => self.fixed_run(rows, pos, base, |d| match d {
                Datum::Timestamp(t) => Some(t.millis()),
                _ => None,
            }),
            K::Timestamp {
                unit: TimeUnit::Millisecond,
                ltz: true,
            } => self.fixed_run(rows, pos, base, |d| match d {
                Datum::TimestampLtz(t) => Some(t.millis()),
                _ => None,
            }),
            K::Utf8 => self.var_run(rows, pos, base, budget, |d| match d {
                Datum::String(v) => Some(v.as_bytes()),
                _ => None,
            }),
            K::Binary => self.var_run(rows, pos, base, budget, |d| match d {
                Datum::Binary(v) => Some(v),
                _ => None,
            }),
            // The rarer kinds (and those whose values are checked or
            // converted) value by value, as single rows are.
            _ => {
                let mut var_bytes = 0;
                for (i, row) in rows.iter().enumerate() {
                    self.append(&row.datum(pos), base + i, &mut var_bytes)
                        .map_err(|r| (i, r))?;
                }
                Ok(var_bytes)
            }
        }
    }

    /// [`Column::append_run`] for a fixed-width kind whose datum converts
    /// without a check: the values buffer grows once for the run and the
    /// values are written into it as a slice (a NULL's slot keeps the zero
    /// it starts with, as a single NULL's does).
    #[inline(always)]
    fn fixed_run<R: InternalRow, T: ArrowNativeType>(
        &mut self,
        rows: &[R],
        pos: usize,
        base: usize,
        value_of: impl Fn(Datum<'_>) -> Option<T>,
    ) -> std::result::Result<usize, (usize, Refusal)> {
        let start = self.values.len() / std::mem::size_of::<T>();
        self.values
            .extend_zeros(rows.len() * std::mem::size_of::<T>());
        let Column {
            values,
            nulls,
            nullable,
            ..
        } = self;
        let out = &mut values.typed_data_mut::<T>()[start..];
        let out = &mut out[..rows.len()];
        for i in 0..rows.len() {
            let datum = rows[i].datum(pos);
            if let Some(v) = value_of(datum) {
                out[i] = v;
            } else {
                refuse_unless_null(datum, *nullable, nulls, base + i).map_err(|r| (i, r))?;
            }
        }
        Ok(0)
    }

    /// [`Column::append_run`] for STRING/BYTES: a first pass reads the
    /// lengths (and refuses what does not fit), so offsets and data grow
    /// once for the run; the second copies the values, short ones without
    /// a call ([`copy_short`]).
    #[inline(always)]
    fn var_run<R: InternalRow>(
        &mut self,
        rows: &[R],
        pos: usize,
        base: usize,
        budget: &mut usize,
        bytes_of: impl Fn(Datum<'_>) -> Option<&[u8]>,
    ) -> std::result::Result<usize, (usize, Refusal)> {
        let data_start = self.values.len();
        let mut total = 0usize;
        for (i, row) in rows.iter().enumerate() {
            let datum = row.datum(pos);
            match bytes_of(datum) {
                Some(bytes) => {
                    total += bytes.len();
                    if total > *budget {
                        // Before any byte is copied: the caller sizes the
                        // run exactly instead.
                        return Err((i, Refusal::OverBudget));
                    }
                    if data_start + total > COLUMN_VAR_BYTES_MAX {
                        return Err((i, Refusal::OutOfRange(Unfit::VarBytes)));
                    }
                }
                None if datum.is_null() && self.nullable => {}
                None => return Err((i, refusal_of(datum))),
            }
        }
        let ends_start = self.offsets.len() / std::mem::size_of::<i32>();
        self.offsets
            .extend_zeros(rows.len() * std::mem::size_of::<i32>());
        self.values.extend_zeros(total);
        let Column {
            values,
            offsets,
            nulls,
            nullable,
            ..
        } = self;
        let data = &mut values.as_slice_mut()[data_start..];
        let ends = &mut offsets.typed_data_mut::<i32>()[ends_start..];
        let ends = &mut ends[..rows.len()];
        let mut at = 0;
        for i in 0..rows.len() {
            let datum = rows[i].datum(pos);
            match bytes_of(datum) {
                Some(bytes) if at + bytes.len() <= data.len() => {
                    let dst = &mut data[at..at + bytes.len()];
                    // SAFETY: `dst` is a slice of `bytes.len()` bytes of
                    // this column's own buffer, apart from `bytes`.
                    unsafe { copy_short(dst.as_mut_ptr(), bytes) };
                    at += bytes.len();
                }
                // The first pass let only NULLs of a nullable column by.
                None if datum.is_null() && *nullable => mark_null(nulls, base + i),
                // A row whose value changed since the first read (a caller's
                // `InternalRow` that does not read the same twice).
                _ => return Err((i, Refusal::OutOfRange(Unfit::ValueChanged))),
            }
            // Lossless: the data was checked against COLUMN_VAR_BYTES_MAX.
            ends[i] = (data_start + at) as i32;
        }
        if at != total {
            return Err((rows.len() - 1, Refusal::OutOfRange(Unfit::ValueChanged)));
        }
        *budget -= total;
        Ok(total)
    }

    /// Drops every value after the first `rows` (rolls back a failed row).
    fn truncate(&mut self, rows: usize) {
        // No effect when the validity ends at or before `rows` (it is lazy).
        self.nulls.truncate(rows);
        match self.kind {
            ColumnKind::Boolean => self.bits.truncate(rows),
            ColumnKind::Utf8 | ColumnKind::Binary => {
                self.offsets.truncate((rows + 1) * 4);
                let end = self.offsets.typed_data::<i32>()[rows];
                // Offsets are never negative: they are lengths of a buffer.
                self.values.truncate(end as usize);
            }
            kind => self.values.truncate(rows * kind.value_bytes()),
        }
    }

    /// The column's values as an Arrow array of `field`'s type; the buffers
    /// start over empty, without capacity (see [`Column::presize`]).
    fn finish(&mut self, field: &Field, rows: usize) -> Result<ArrayRef> {
        self.last_var_bytes = if self.is_var() { self.values.len() } else { 0 };
        // The non-NULL rows after the last NULL (a no-op without NULLs:
        // `finish` then gives no bitmap either way).
        self.nulls.append_n_non_nulls(rows - self.nulls.len());
        let nulls = self.nulls.finish();
        let values: Buffer = std::mem::take(&mut self.values).into();
        let offsets: Buffer = std::mem::take(&mut self.offsets).into();
        let data_type = field.data_type().clone();
        let array: ArrayRef = match self.kind {
            ColumnKind::Boolean => Arc::new(BooleanArray::new(self.bits.finish(), nulls)),
            ColumnKind::Int8 => primitive::<Int8Type>(values, rows, nulls, data_type),
            ColumnKind::Int16 => primitive::<Int16Type>(values, rows, nulls, data_type),
            ColumnKind::Int32 => primitive::<Int32Type>(values, rows, nulls, data_type),
            ColumnKind::Int64 => primitive::<Int64Type>(values, rows, nulls, data_type),
            ColumnKind::Float32 => primitive::<Float32Type>(values, rows, nulls, data_type),
            ColumnKind::Float64 => primitive::<Float64Type>(values, rows, nulls, data_type),
            ColumnKind::Decimal { .. } => {
                primitive::<Decimal128Type>(values, rows, nulls, data_type)
            }
            ColumnKind::Date32 => primitive::<Date32Type>(values, rows, nulls, data_type),
            ColumnKind::Time32Second => {
                primitive::<Time32SecondType>(values, rows, nulls, data_type)
            }
            ColumnKind::Time32Milli => {
                primitive::<Time32MillisecondType>(values, rows, nulls, data_type)
            }
            ColumnKind::Time64Micro => {
                primitive::<Time64MicrosecondType>(values, rows, nulls, data_type)
            }
            ColumnKind::Time64Nano => {
                primitive::<Time64NanosecondType>(values, rows, nulls, data_type)
            }
            ColumnKind::Timestamp { unit, .. } => match unit {
                TimeUnit::Second => {
                    primitive::<TimestampSecondType>(values, rows, nulls, data_type)
                }
                TimeUnit::Millisecond => {
                    primitive::<TimestampMillisecondType>(values, rows, nulls, data_type)
                }
                TimeUnit::Microsecond => {
                    primitive::<TimestampMicrosecondType>(values, rows, nulls, data_type)
                }
                TimeUnit::Nanosecond => {
                    primitive::<TimestampNanosecondType>(values, rows, nulls, data_type)
                }
            },
            ColumnKind::Utf8 => Arc::new(string_array(field, offsets, values, nulls, rows)?),
            ColumnKind::Binary => {
                let offsets = OffsetBuffer::new(ScalarBuffer::new(offsets, 0, rows + 1));
                let array = BinaryArray::try_new(offsets, values, nulls)
                    .map_err(|e| invalid_column(field, &e.to_string()))?;
                Arc::new(array)
            }
            ColumnKind::FixedBinary { width } => {
                // `ColumnKind::of` took the width from an i32.
                let array = FixedSizeBinaryArray::try_new(width as i32, values, nulls)
                    .map_err(|e| invalid_column(field, &e.to_string()))?;
                Arc::new(array)
            }
        };
        if self.is_var() {
            self.offsets.push(0i32);
        }
        Ok(array)
    }
}

/// A finished STRING column's array. Arrow's checked constructor reads
/// every offset and every byte of text again (UTF-8), about 10 instructions
/// a row on the user_behavior workload (docs/bench-notes/client.md, "Sixth
/// pass") for what this builder already guarantees; debug builds (every
/// test) still check it.
fn string_array(
    field: &Field,
    offsets: Buffer,
    values: Buffer,
    nulls: Option<NullBuffer>,
    rows: usize,
) -> Result<StringArray> {
    let offsets = ScalarBuffer::<i32>::new(offsets, 0, rows + 1);
    if cfg!(debug_assertions) {
        return StringArray::try_new(OffsetBuffer::new(offsets), values, nulls)
            .map_err(|e| invalid_column(field, &e.to_string()));
    }
    // SAFETY: `StringArray::try_new` would accept these buffers, because
    // the builder keeps three invariants of a STRING column: the offsets
    // start at 0 and never fall (each is the data length after a value;
    // NULLs repeat the last), none passes the data's end (`truncate` cuts
    // data and offsets together), and the data between two offsets
    // is a copy of one `&str` (only `Datum::String` reaches a STRING
    // column), so it is UTF-8 and every offset is on a char boundary.
    // `ScalarBuffer::new` above checked there are `rows + 1` offsets.
    Ok(unsafe { StringArray::new_unchecked(OffsetBuffer::new_unchecked(offsets), values, nulls) })
}

/// Marks row `row` NULL in a lazily filled validity (see `Column::nulls`):
/// the non-NULL rows since the last NULL, then this one.
fn mark_null(nulls: &mut NullBufferBuilder, row: usize) {
    nulls.append_n_non_nulls(row - nulls.len());
    nulls.append_null();
}

/// A datum a run's fast path did not take: a NULL of a nullable column is
/// marked at `row` (its value slot is already there); anything else is
/// refused.
#[inline]
fn refuse_unless_null(
    datum: Datum<'_>,
    nullable: bool,
    nulls: &mut NullBufferBuilder,
    row: usize,
) -> std::result::Result<(), Refusal> {
    if datum.is_null() && nullable {
        mark_null(nulls, row);
        Ok(())
    } else {
        Err(refusal_of(datum))
    }
}

/// Why a datum that is not the column's variant is refused.
fn refusal_of(datum: Datum<'_>) -> Refusal {
    if datum.is_null() {
        Refusal::Null
    } else {
        Refusal::Mismatch
    }
}

/// Copies `src` to `dst`. Values of at most [`SHORT_VALUE_MAX`] bytes —
/// most strings of a row table (codes, names, flags) — are copied with at
/// most two fixed-width, possibly overlapping, loads and stores each
/// instead of a call to `memcpy`, whose call and size dispatch cost more
/// than the copy (callgrind: docs/bench-notes/client.md, "Seventh pass").
///
/// # Safety
/// `dst` is valid for writes of `src.len()` bytes and does not overlap
/// `src`.
#[inline(always)]
unsafe fn copy_short(dst: *mut u8, src: &[u8]) {
    let len = src.len();
    let from = src.as_ptr();
    // SAFETY (of each access): every load is within `src` and every store
    // within `dst[..len]`: each chunk starts at 0 or ends at `len` and is
    // used only when `len` is at least its width.
    unsafe {
        match len {
            0 => {}
            1..=3 => {
                // First, middle and last cover them all.
                *dst = *from;
                *dst.add(len / 2) = *from.add(len / 2);
                *dst.add(len - 1) = *from.add(len - 1);
            }
            4..=7 => {
                let head = from.cast::<u32>().read_unaligned();
                let tail = from.add(len - 4).cast::<u32>().read_unaligned();
                dst.cast::<u32>().write_unaligned(head);
                dst.add(len - 4).cast::<u32>().write_unaligned(tail);
            }
            8..=SHORT_VALUE_MAX => {
                let head = from.cast::<u64>().read_unaligned();
                let tail = from.add(len - 8).cast::<u64>().read_unaligned();
                dst.cast::<u64>().write_unaligned(head);
                dst.add(len - 8).cast::<u64>().write_unaligned(tail);
            }
            _ => std::ptr::copy_nonoverlapping(from, dst, len),
        }
    }
}

/// A buffer [`make_room`] replaces because it is too small gets this
/// fraction (1/4) more than it needs now.
const ROOM_GROWTH_DIVISOR: usize = 4;

/// Makes room in `buffer` for `additional` more bytes. A buffer too small
/// is replaced by one of the size needed holding a copy of its contents,
/// not grown in place: `reserve` reallocates, and a reallocation copies the
/// whole old capacity (the allocator does not know how much of it is in
/// use), which for a recycled, empty buffer of a large batch was megabytes
/// copied for nothing once per batch (docs/bench-notes/client.md, "Sixth
/// pass").
fn make_room(buffer: &mut MutableBuffer, additional: usize) {
    let needed = buffer.len() + additional;
    if buffer.capacity() >= needed {
        return;
    }
    // A recycled buffer too small means batches are growing: the new one
    // gets a growth allowance, so that, recycled in turn, it still fits
    // the next few batches instead of being replaced again.
    let room = if buffer.capacity() > 0 {
        needed + needed / ROOM_GROWTH_DIVISOR
    } else {
        needed
    };
    let mut fresh = MutableBuffer::with_capacity(room);
    fresh.extend_from_slice(buffer.as_slice());
    *buffer = fresh;
}

/// Puts `spare` in place of `buffer` when `buffer` holds nothing and the
/// spare is at least as large (a spare's pages are already in memory; an
/// empty buffer's may not be).
fn adopt_spare(buffer: &mut MutableBuffer, spare: &mut Option<MutableBuffer>) {
    if buffer.is_empty()
        && spare
            .as_ref()
            .is_some_and(|s| s.capacity() >= buffer.capacity())
    {
        if let Some(mut spare) = spare.take() {
            spare.clear();
            *buffer = spare;
        }
    }
}

/// A primitive array over `values` (which hold exactly `rows` natives).
fn primitive<T: ArrowPrimitiveType>(
    values: Buffer,
    rows: usize,
    nulls: Option<arrow_buffer::NullBuffer>,
    data_type: ArrowType,
) -> ArrayRef {
    // `with_data_type` keeps the field's parameters (precision and scale,
    // time zone); the kind was derived from this very type, so it is compatible.
    Arc::new(
        PrimitiveArray::<T>::new(ScalarBuffer::new(values, 0, rows), nulls)
            .with_data_type(data_type),
    )
}

/// A TIME datum's milliseconds, checked to lie within one day.
#[inline]
fn time_of_day(ms: i32) -> std::result::Result<i32, Refusal> {
    if (0..MILLIS_PER_DAY).contains(&ms) {
        Ok(ms)
    } else {
        Err(Refusal::OutOfRange(Unfit::TimeOfDay))
    }
}

/// The timestamp as a count of `unit` since the epoch, as Fluss's writers
/// compute it (a coarser unit truncates towards zero); `None` on overflow.
fn timestamp_in_unit(t: Timestamp, unit: TimeUnit) -> Option<i64> {
    let millis = t.millis();
    let nanos = i64::from(t.nanos_of_milli());
    match unit {
        TimeUnit::Second => Some(millis / 1_000),
        TimeUnit::Millisecond => Some(millis),
        TimeUnit::Microsecond => millis.checked_mul(1_000)?.checked_add(nanos / 1_000),
        TimeUnit::Nanosecond => millis.checked_mul(1_000_000)?.checked_add(nanos),
    }
}

fn invalid_column(field: &Field, reason: &str) -> ClientError {
    ClientError::Invalid(format!(
        "column `{}` ({}): {reason}",
        field.name(),
        field.data_type()
    ))
}

/// What [`RowBatchBuilder::run_length`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunLength {
    /// Rows to take.
    pub rows: usize,
    /// The row after them fits only in a batch of its own: seal this one
    /// after them.
    pub seal: bool,
    /// The row after them can never be buffered, even alone: the estimated
    /// bytes it would bring an empty batch to.
    pub too_large: Option<usize>,
}

/// Rows → Arrow columns of one table schema, reused batch after batch.
///
/// Guarantees: every finished batch has exactly the schema given to
/// [`RowBatchBuilder::new`]; a row is either appended whole or not at all
/// (a row whose `write_fields` or `datum` panics part way leaves its values
/// behind until [`RowBatchBuilder::drop_partial_row`], which a caller that
/// catches the panic calls before going on, as the append writer does);
/// NULL only lands in nullable columns; after `finish` the buffers are
/// pre-sized from the batch just finished.
pub struct RowBatchBuilder {
    schema: SchemaRef,
    columns: Vec<Column>,
    rows: usize,
    /// [`RowBatchBuilder::estimated_bytes`] in bits: 8 per byte of values,
    /// offsets and var-width data so far, plus 1 per bitmap slot. Kept in
    /// bits so that a row adds a sum and the estimate is one rounding,
    /// with no per-row multiply for the bitmaps. A `u64` so that 8 x the
    /// bytes fits on any target (it counts bytes in memory, so the
    /// estimate itself fits a `usize`).
    bits: u64,
    /// Fixed bytes every row adds: value widths and offsets.
    row_fixed_bytes: usize,
    /// Bits every row adds to `bits` whatever its values: its fixed bytes'
    /// and one per bitmap column.
    row_fixed_bits: u64,
    /// Columns with a bitmap (BOOLEAN values, nullable validity): each adds
    /// one bit per row.
    bitmap_columns: usize,
    /// Positions of the STRING/BYTES columns (the rows' sizes vary only
    /// there), for [`RowBatchBuilder::run_length`].
    var_positions: Vec<usize>,
    /// Rows of the last finished batch: how many the next one reserves.
    last_rows: usize,
    /// Estimated bytes of the last finished batch (its bytes per row size
    /// the next batch in [`RowBatchBuilder::prepare`]).
    last_bytes: usize,
}

impl RowBatchBuilder {
    /// The builder for rows of `schema`. Fails, naming the column, when a
    /// column's Arrow type has no row representation (nested types: ARRAY,
    /// MAP, ROW — append those as a RecordBatch instead).
    pub fn new(schema: SchemaRef) -> Result<Self> {
        /// Rows the first batch has room for before growing.
        const INITIAL_ROWS: usize = 1024;
        let mut columns = Vec::with_capacity(schema.fields().len());
        let mut row_fixed_bytes = 0;
        let mut bitmap_columns = 0;
        for field in schema.fields() {
            let kind = ColumnKind::of(field.data_type()).ok_or_else(|| {
                invalid_column(
                    field,
                    "rows cannot carry this type; append a RecordBatch instead",
                )
            })?;
            row_fixed_bytes += kind.value_bytes();
            bitmap_columns +=
                usize::from(kind == ColumnKind::Boolean) + usize::from(field.is_nullable());
            columns.push(Column::new(kind, field.is_nullable(), INITIAL_ROWS, 0));
        }
        let var_positions = (0..columns.len())
            .filter(|&pos| columns[pos].is_var())
            .collect();
        Ok(Self {
            schema,
            columns,
            rows: 0,
            bits: 0,
            row_fixed_bytes,
            row_fixed_bits: bits_of(row_fixed_bytes) + bitmap_columns as u64,
            bitmap_columns,
            var_positions,
            last_rows: INITIAL_ROWS,
            last_bytes: 0,
        })
    }

    /// Estimated bytes ([`RowBatchBuilder::estimated_bytes`]) of the last
    /// finished batch; 0 before the first.
    pub fn last_batch_bytes(&self) -> usize {
        self.last_bytes
    }

    /// The schema every finished batch has.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Appends one row. Fails — and appends nothing — when the row's field
    /// count differs from the schema's, a datum's variant does not match its
    /// column, a NULL meets a NOT NULL column, or a value does not fit (the
    /// error names the column, its type and the datum's).
    // Always inlined into the writer's row path: whether the inliner took
    // it changed with unrelated edits, and as a call it cost ~30
    // instructions a row (docs/bench-notes/client.md, "Eighth pass").
    #[inline(always)]
    pub fn append<R: InternalRow + ?Sized>(&mut self, row: &R) -> Result<()> {
        if row.field_count() != self.columns.len() {
            return Err(ClientError::Invalid(format!(
                "row has {} fields but the table has {} columns",
                row.field_count(),
                self.columns.len()
            )));
        }
        let WrittenFields {
            count,
            var_bytes,
            refused,
        } = {
            let mut fields = FieldWriter::new(&mut self.columns, self.rows);
            row.write_fields(&mut fields);
            fields.finish()
        };
        if refused.is_some() || count != self.columns.len() {
            let written = WrittenFields {
                count,
                var_bytes,
                refused,
            };
            return Err(self.refused_row(row, written));
        }
        self.rows += 1;
        self.bits += self.row_fixed_bits + bits_of(var_bytes);
        Ok(())
    }

    /// Rolls back the row a [`FieldWriter`] refused or wrote the wrong
    /// number of fields for, and says why.
    #[cold]
    #[inline(never)]
    fn refused_row<R: InternalRow + ?Sized>(
        &mut self,
        row: &R,
        written: WrittenFields,
    ) -> ClientError {
        self.drop_partial_row();
        match written.refused {
            // The datum is read again for the message rather than kept
            // alive across the append, which would pin it to the stack.
            Some((pos, refusal)) => self.refusal_error(pos, row.datum(pos), refusal),
            None => ClientError::Invalid(format!(
                "row wrote {} fields but the table has {} columns",
                written.count,
                self.columns.len()
            )),
        }
    }

    /// Appends `rows` in order, all or none: fails — and appends none of
    /// them — when any row would be refused by [`RowBatchBuilder::append`];
    /// the error names a refused row's index and its column (the columns
    /// are checked one after another, so with several bad rows it is the
    /// one the first refusing column found, not necessarily the first). Faster per
    /// row than appending one at a time: the rows are read column by column,
    /// each column's kind matched once per call and its buffers grown once.
    pub fn append_rows<R: InternalRow>(&mut self, rows: &[R]) -> Result<()> {
        self.try_append_rows(rows)
            .map_err(|(index, e)| ClientError::Invalid(format!("row {index} of the run: {e}")))
    }

    /// [`RowBatchBuilder::append_rows`] with the refused row's index next to
    /// the error (the error itself names only the column). The index is
    /// that of a refused row; rows before it may be refused too, in a
    /// column after the one that refused this one.
    pub(crate) fn try_append_rows<R: InternalRow>(
        &mut self,
        rows: &[R],
    ) -> std::result::Result<(), (usize, ClientError)> {
        self.try_append_rows_within(rows, usize::MAX)
            .map_err(|stop| stop.expect("an unlimited budget is never passed"))
    }

    /// [`RowBatchBuilder::try_append_rows`] copying at most `budget` bytes
    /// of STRING/BYTES data: a run that would add more appends nothing and
    /// fails with `None` before copying any (so a guess at a run's length
    /// cannot make the batch hold far more than the guess allowed).
    pub(crate) fn try_append_rows_within<R: InternalRow>(
        &mut self,
        rows: &[R],
        mut budget: usize,
    ) -> std::result::Result<(), Option<(usize, ClientError)>> {
        let width = self.columns.len();
        if let Some(index) = rows.iter().position(|row| row.field_count() != width) {
            let error = ClientError::Invalid(format!(
                "row has {} fields but the table has {width} columns",
                rows[index].field_count()
            ));
            return Err(Some((index, error)));
        }
        let base = self.rows;
        let mut var_bytes = 0;
        let run = RollBack {
            columns: &mut self.columns,
            rows: base,
        };
        for pos in 0..width {
            match run.columns[pos].append_run(rows, pos, base, &mut budget) {
                Ok(n) => var_bytes += n,
                Err((index, refusal)) => {
                    drop(run);
                    if let Refusal::OverBudget = refusal {
                        return Err(None);
                    }
                    let error = self.refusal_error(pos, rows[index].datum(pos), refusal);
                    return Err(Some((index, error)));
                }
            }
        }
        run.keep();
        self.rows += rows.len();
        self.bits += self.row_fixed_bits * rows.len() as u64 + bits_of(var_bytes);
        Ok(())
    }

    /// How many leading rows of `rows` a row-by-row writer takes into this
    /// batch before it is full: rows go in while
    /// [`RowBatchBuilder::estimated_bytes`] is below `seal_at`, the row that
    /// reaches it included — computed from the rows' own sizes (their
    /// STRING/BYTES lengths), not an average. A row that would take the
    /// batch past `hard_limit` (what buffer memory can ever hold) ends the
    /// run before it: the batch is to be sealed first (`seal`), or, when
    /// the batch holds nothing before it, the row can never be buffered
    /// (`too_large`: the estimate it alone would bring the batch to).
    pub(crate) fn run_length<R: InternalRow>(
        &self,
        rows: &[R],
        seal_at: usize,
        hard_limit: usize,
    ) -> RunLength {
        let width = self.columns.len();
        let mut bits = self.bits;
        for (n, row) in rows.iter().enumerate() {
            let mut row_bits = self.row_fixed_bits;
            if row.field_count() == width {
                for &pos in &self.var_positions {
                    row_bits += match row.datum(pos) {
                        Datum::String(v) => bits_of(v.len()),
                        Datum::Binary(v) => bits_of(v.len()),
                        _ => 0,
                    };
                }
            }
            let after = bytes_of_bits(bits + row_bits);
            if after > hard_limit {
                let empty = self.rows + n == 0;
                return RunLength {
                    rows: n,
                    seal: !empty,
                    too_large: empty.then_some(after),
                };
            }
            bits += row_bits;
            if after >= seal_at {
                return RunLength {
                    rows: n + 1,
                    seal: false,
                    too_large: None,
                };
            }
        }
        RunLength {
            rows: rows.len(),
            seal: false,
            too_large: None,
        }
    }

    /// Drops what lies past the builder's rows: the values a row whose
    /// `write_fields` (or `datum`) panicked part way left in the columns it
    /// reached. Whole rows are untouched, and it does nothing after a row
    /// that went in or was refused. Call it after catching such a panic,
    /// before using the builder again: a torn row would shift every later
    /// value of its columns by one row. (`append_rows` needs no call: a
    /// run rolls itself back.) The append writer calls it while the panic
    /// unwinds through its lock.
    #[cold]
    pub fn drop_partial_row(&mut self) {
        truncate_columns(&mut self.columns, self.rows);
    }

    /// Drops every row after the first `rows` (the writer takes back a row
    /// that buffer memory could never hold, or a run it redoes with an
    /// exact length). No effect when `rows` is not below
    /// [`RowBatchBuilder::len`].
    pub(crate) fn truncate_rows(&mut self, rows: usize) {
        if rows >= self.rows {
            return;
        }
        truncate_columns(&mut self.columns, rows);
        self.rows = rows;
        // Recounted from the buffers: what `append` added row by row.
        let bytes: usize = self
            .columns
            .iter()
            .map(|c| match c.kind {
                ColumnKind::Boolean => 0,
                ColumnKind::Utf8 | ColumnKind::Binary => rows * 4 + c.values.len(),
                _ => c.values.len(),
            })
            .sum();
        self.bits = bits_of(bytes) + (rows * self.bitmap_columns) as u64;
    }

    /// Bytes one row is expected to add to [`RowBatchBuilder::estimated_bytes`]:
    /// the rows so far' average, else the last finished batch's, and at
    /// least the fixed widths (and 1). A guess for how many rows fit before
    /// a size limit; [`RowBatchBuilder::run_length`] is the exact count.
    pub(crate) fn row_bytes_hint(&self) -> usize {
        let (bytes, rows) = if self.rows > 0 {
            (self.estimated_bytes(), self.rows)
        } else {
            (self.last_bytes, self.last_rows.max(1))
        };
        (bytes / rows).max(self.row_fixed_bytes).max(1)
    }

    #[cold]
    fn refusal_error(&self, pos: usize, datum: Datum<'_>, refusal: Refusal) -> ClientError {
        let field = self.schema.field(pos);
        let reason = match refusal {
            Refusal::Mismatch => format!(
                "cannot take a {} value; expects {}",
                datum.type_name(),
                self.columns[pos].kind.expected()
            ),
            Refusal::Null => "is NOT NULL but the row has NULL".to_owned(),
            Refusal::OutOfRange(why) => format!("value {datum} does not fit: {}", why.reason()),
            // Mapped to `None` by `try_append_rows_within`, never an error.
            Refusal::OverBudget => "over the run's byte budget".to_owned(),
        };
        invalid_column(field, &reason)
    }

    /// Rows appended since the last `finish`.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether no row was appended since the last `finish`.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Uncompressed Arrow bytes of the rows so far (values, offsets, data
    /// and bitmaps; not the IPC framing), kept as rows are appended: O(1).
    pub fn estimated_bytes(&self) -> usize {
        bytes_of_bits(self.bits)
    }

    /// Bytes the builder's buffers hold allocated, whether filled or not
    /// (after `finish` they stay sized for the previous batch): what a
    /// writer counts against its buffer memory. O(columns).
    pub fn allocated_bytes(&self) -> usize {
        self.columns.iter().map(Column::allocated_bytes).sum()
    }

    /// Gives the buffers' memory back (e.g. when a bucket's writer goes
    /// idle); only allowed when empty, so no row is lost. Returns whether
    /// the memory was released.
    pub fn release_memory(&mut self) -> bool {
        if self.rows != 0 {
            return false;
        }
        self.columns.iter_mut().for_each(Column::release);
        true
    }

    /// Takes back the buffers of a batch this builder (or another builder
    /// of the same schema) finished, once nothing else holds them (e.g.
    /// after the encoder is done with it), so the next batches reuse memory
    /// that is already paged in instead of fresh allocations. An empty
    /// builder writes into them from its next row on; a filling one from
    /// its next batch. Buffers still shared elsewhere, and batches of
    /// another schema, are left alone. Returns how many buffers were kept.
    pub fn recycle(&mut self, batch: RecordBatch) -> usize {
        if batch.schema_ref().fields() != self.schema.fields() {
            return 0;
        }
        let (_, arrays, _) = batch.into_parts();
        let mut kept = 0;
        for (column, array) in self.columns.iter_mut().zip(arrays) {
            let data = array.to_data();
            // Drop the other holders so the buffers can be owned again.
            drop(array);
            let buffers = data.buffers().to_vec();
            drop(data);
            kept += column.recycle(buffers);
        }
        if self.rows == 0 {
            self.columns.iter_mut().for_each(Column::adopt_spares);
        }
        kept
    }

    /// Readies an empty builder for its next batch: writes into `recycled`'s
    /// buffers (see [`RowBatchBuilder::recycle`]) when given, and makes
    /// room for a batch of `expected_bytes` ([`RowBatchBuilder::estimated_bytes`])
    /// with rows shaped like the last finished batch's — or for as many rows
    /// and bytes as that batch had, when `expected_bytes` is 0 — so such a
    /// batch appends without reallocating. Per batch, not per row.
    pub fn prepare(&mut self, recycled: Option<RecordBatch>, expected_bytes: usize) {
        if self.rows != 0 {
            return;
        }
        if let Some(batch) = recycled {
            self.recycle(batch);
        }
        let last_rows = self.last_rows.max(1);
        let row_bytes = (self.last_bytes / last_rows)
            .max(self.row_fixed_bytes)
            .max(1);
        // One row more than the estimate: a batch is sealed by the row that
        // crosses its size. A smaller estimate than the last batch is kept:
        // the caller may size batches down (the writer caps what all its
        // open batches are presized for).
        let rows = if expected_bytes == 0 {
            last_rows
        } else {
            expected_bytes / row_bytes + 1
        };
        for column in &mut self.columns {
            column.adopt_spares();
            let var_bytes = column.last_var_bytes.div_ceil(last_rows) * rows;
            column.presize(rows, var_bytes);
        }
    }

    /// The rows appended so far as a RecordBatch of the builder's schema;
    /// the builder is empty afterwards, with room for a batch of this size.
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let batch = self.finish_and_release()?;
        self.prepare(None, 0);
        Ok(batch)
    }

    /// The rows appended so far as a RecordBatch of the builder's schema;
    /// the builder is empty afterwards and keeps no buffer memory (an idle
    /// builder holds nothing). Call [`RowBatchBuilder::prepare`] before the
    /// next batch, or its buffers grow from nothing.
    pub fn finish_and_release(&mut self) -> Result<RecordBatch> {
        let rows = self.rows;
        let mut arrays = Vec::with_capacity(self.columns.len());
        for (column, field) in self.columns.iter_mut().zip(self.schema.fields()) {
            arrays.push(column.finish(field, rows)?);
        }
        self.last_rows = rows;
        self.last_bytes = self.estimated_bytes();
        self.rows = 0;
        self.bits = 0;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)
            .map_err(|e| ClientError::Invalid(format!("finishing a batch of rows: {e}")))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod typed_tests;

#[cfg(test)]
mod run_tests;
