//! The compact binary row every source writes and every sink reads.
//!
//! ```text
//! row := null bitmap | fixed part | variable part
//!   null bitmap  ceil(n / 8) bytes, bit i (LSB first) set = column i is NULL
//!   fixed part   n slots of 8 bytes, little-endian, one per column:
//!                  Bool                 0 / 1
//!                  Int, DecimalCompact  i64 (sign-extended integer, days, unscaled decimal)
//!                  Float / Double       f32 bits (low 4 bytes) / f64 bits
//!                  Micros / Nanos       i64 time of day, or since 1970-01-01T00:00 (UTC for LTZ)
//!                  Text, Bytes,
//!                  DecimalDigits        u32 offset (from the row start) | u32 length << 32
//!   variable part the bytes the var slots point at
//! ```
//!
//! A [`RowLayout`] is prepared once per table schema version; a [`RowWriter`]
//! appends one row straight into a caller-owned buffer (the batch's arena), so
//! building a row allocates nothing once the arena has grown to its working
//! size, and no value is formatted or boxed.

use crate::types::{DataType, SlotKind};

/// Largest encoded row, in bytes. Rows address their variable part with 32-bit
/// offsets; this bound (MySQL's own `max_allowed_packet` ceiling) keeps every
/// offset representable and bounds one row's memory.
pub const ROW_BYTES_MAX: usize = 1 << 30;

/// Per-column storage plan of one table schema version: computed once, read by
/// every row of that version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowLayout {
    kinds: Box<[SlotKind]>,
    types: Box<[DataType]>,
    null_bytes: usize,
}

impl RowLayout {
    /// The layout of a row with these column types, in order.
    pub fn new(types: impl IntoIterator<Item = DataType>) -> RowLayout {
        let types: Box<[DataType]> = types.into_iter().collect();
        let kinds = types.iter().map(|t| t.slot_kind()).collect();
        let null_bytes = types.len().div_ceil(8);
        RowLayout {
            kinds,
            types,
            null_bytes,
        }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether the layout has no column.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// Storage kind of column `i`.
    pub fn kind(&self, i: usize) -> SlotKind {
        self.kinds[i]
    }

    /// Logical type of column `i`.
    pub fn data_type(&self, i: usize) -> DataType {
        self.types[i]
    }

    /// Bytes of the null bitmap plus the fixed part: the size of a row with an
    /// empty variable part.
    pub fn fixed_bytes(&self) -> usize {
        self.null_bytes + 8 * self.kinds.len()
    }

    fn slot_offset(&self, i: usize) -> usize {
        self.null_bytes + 8 * i
    }
}

/// Where a finished row lives in its batch's arena. Only meaningful for the
/// [`crate::event::EventBatch`] whose writer produced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowHandle {
    pub(crate) start: u32,
    pub(crate) len: u32,
}

/// A finished row was larger than [`ROW_BYTES_MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("row of {bytes} bytes exceeds the {max}-byte row limit")]
pub struct RowTooLarge {
    /// Encoded size of the refused row.
    pub bytes: usize,
    /// The limit, [`ROW_BYTES_MAX`].
    pub max: usize,
}

/// Appends one row to a buffer. Every column starts NULL; each setter stores a
/// value and clears the column's null bit. Setters take the value in the unit
/// of the column's type (checked with `debug_assert!` only: the converter that
/// calls them was prepared for this layout).
pub struct RowWriter<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
    layout: &'a RowLayout,
}

impl<'a> RowWriter<'a> {
    /// Starts a row at the end of `buf`. The row ends where [`RowWriter::finish`]
    /// finds the buffer; dropping the writer without finishing leaves bytes that
    /// no handle points at (the batch's arena is cleared per batch).
    pub fn new(buf: &'a mut Vec<u8>, layout: &'a RowLayout) -> RowWriter<'a> {
        let start = buf.len();
        buf.resize(start + layout.fixed_bytes(), 0);
        // All columns NULL until set.
        let bitmap = &mut buf[start..start + layout.null_bytes];
        bitmap.fill(0xff);
        RowWriter { buf, start, layout }
    }

    /// The layout this row follows.
    pub fn layout(&self) -> &RowLayout {
        self.layout
    }

    #[inline]
    fn put_slot(&mut self, i: usize, value: u64) {
        let byte = self.start + i / 8;
        self.buf[byte] &= !(1u8 << (i % 8));
        let at = self.start + self.layout.slot_offset(i);
        self.buf[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }

    #[inline]
    fn put_var(&mut self, i: usize, bytes: &[u8]) {
        let offset = self.buf.len() - self.start;
        self.buf.extend_from_slice(bytes);
        // Offsets/lengths that overflow u32 only happen in rows above ROW_BYTES_MAX,
        // which `finish` refuses.
        self.put_slot(
            i,
            (offset as u32 as u64) | ((bytes.len() as u32 as u64) << 32),
        );
    }

    /// Marks column `i` NULL (columns start NULL; this undoes a setter).
    pub fn set_null(&mut self, i: usize) {
        self.buf[self.start + i / 8] |= 1u8 << (i % 8);
    }

    /// Stores a `BOOLEAN`.
    pub fn set_bool(&mut self, i: usize, value: bool) {
        debug_assert_eq!(self.layout.kind(i), SlotKind::Bool);
        self.put_slot(i, u64::from(value));
    }

    /// Stores an integer (`TINYINT`..`BIGINT`) or a `DATE` as days since 1970-01-01.
    pub fn set_i64(&mut self, i: usize, value: i64) {
        debug_assert_eq!(self.layout.kind(i), SlotKind::Int);
        self.put_slot(i, value as u64);
    }

    /// Stores a `FLOAT`.
    pub fn set_f32(&mut self, i: usize, value: f32) {
        debug_assert_eq!(self.layout.kind(i), SlotKind::Float);
        self.put_slot(i, u64::from(value.to_bits()));
    }

    /// Stores a `DOUBLE`.
    pub fn set_f64(&mut self, i: usize, value: f64) {
        debug_assert_eq!(self.layout.kind(i), SlotKind::Double);
        self.put_slot(i, value.to_bits());
    }

    /// Stores a `DECIMAL` given as its unscaled value (`12.34` at scale 2 is `1234`).
    /// Works for every precision; wide columns store the digits.
    pub fn set_decimal_unscaled(&mut self, i: usize, unscaled: i64) {
        match self.layout.kind(i) {
            SlotKind::DecimalDigits => {
                let mut digits = itoa::Buffer::new();
                let text = digits.format(unscaled);
                self.put_var(i, text.as_bytes());
            }
            kind => {
                debug_assert_eq!(kind, SlotKind::DecimalCompact);
                self.put_slot(i, unscaled as u64);
            }
        }
    }

    /// Stores a `DECIMAL` given as its unscaled digits (ASCII `0-9`, no sign, no
    /// point; leading zeros allowed) and sign. The caller guarantees the digits
    /// fit the column's precision; for compact columns (precision ≤ 18) that
    /// makes the value fit an `i64`.
    pub fn set_decimal_digits(&mut self, i: usize, negative: bool, digits: &[u8]) {
        debug_assert!(digits.iter().all(u8::is_ascii_digit));
        match self.layout.kind(i) {
            SlotKind::DecimalCompact => {
                let mut value: i64 = 0;
                for &d in digits {
                    value = value.wrapping_mul(10).wrapping_add(i64::from(d - b'0'));
                }
                self.put_slot(i, (if negative { -value } else { value }) as u64);
            }
            kind => {
                debug_assert_eq!(kind, SlotKind::DecimalDigits);
                // Canonical form: no leading zeros, no "-0".
                let first = digits.iter().position(|&d| d != b'0');
                let offset = self.buf.len() - self.start;
                match first {
                    None => self.buf.push(b'0'),
                    Some(first) => {
                        if negative {
                            self.buf.push(b'-');
                        }
                        self.buf.extend_from_slice(&digits[first..]);
                    }
                }
                let len = self.buf.len() - self.start - offset;
                self.put_slot(i, (offset as u32 as u64) | ((len as u32 as u64) << 32));
            }
        }
    }

    /// Stores text (`CHAR`, `VARCHAR`, `STRING`, `JSON`).
    pub fn set_str(&mut self, i: usize, value: &str) {
        debug_assert_eq!(self.layout.kind(i), SlotKind::Text);
        self.put_var(i, value.as_bytes());
    }

    /// Stores binary data (`BINARY`, `VARBINARY`, `BYTES`).
    pub fn set_bytes(&mut self, i: usize, value: &[u8]) {
        debug_assert_eq!(self.layout.kind(i), SlotKind::Bytes);
        self.put_var(i, value);
    }

    /// Stores a `TIME` (microseconds of the day, signed) or a `TIMESTAMP`/`TIMESTAMP_LTZ`
    /// (microseconds since 1970-01-01T00:00); converted to nanoseconds for columns
    /// of precision 7..=9.
    pub fn set_micros(&mut self, i: usize, micros: i64) {
        match self.layout.kind(i) {
            SlotKind::Nanos => self.put_slot(i, micros.saturating_mul(1000) as u64),
            kind => {
                debug_assert_eq!(kind, SlotKind::Micros);
                self.put_slot(i, micros as u64)
            }
        }
    }

    /// Like [`RowWriter::set_micros`] with nanoseconds; truncated (toward
    /// negative infinity) to microseconds for columns of precision ≤ 6.
    pub fn set_nanos(&mut self, i: usize, nanos: i64) {
        match self.layout.kind(i) {
            SlotKind::Micros => self.put_slot(i, nanos.div_euclid(1000) as u64),
            kind => {
                debug_assert_eq!(kind, SlotKind::Nanos);
                self.put_slot(i, nanos as u64)
            }
        }
    }

    /// Ends the row and returns where it lives.
    pub fn finish(self) -> Result<RowHandle, RowTooLarge> {
        let len = self.buf.len() - self.start;
        if len > ROW_BYTES_MAX || self.start > u32::MAX as usize {
            self.buf.truncate(self.start);
            return Err(RowTooLarge {
                bytes: len,
                max: ROW_BYTES_MAX,
            });
        }
        Ok(RowHandle {
            start: self.start as u32,
            len: len as u32,
        })
    }
}

/// A decimal value read from a row; the scale comes from the column type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecimalRef<'a> {
    /// Unscaled value of a column with precision ≤ 18.
    Unscaled(i64),
    /// Unscaled digits (optional leading `-`) of a wider column.
    Digits(&'a str),
}

/// A read-only view of one encoded row. Getters never panic: a slot outside
/// the row reads as zero/empty (only possible if a row was built for another
/// layout, which the batch API rules out).
#[derive(Clone, Copy, Debug)]
pub struct RowRef<'a> {
    layout: &'a RowLayout,
    bytes: &'a [u8],
}

impl<'a> RowRef<'a> {
    /// A view of `bytes` as a row of `layout`.
    pub fn new(layout: &'a RowLayout, bytes: &'a [u8]) -> RowRef<'a> {
        RowRef { layout, bytes }
    }

    /// The row's layout.
    pub fn layout(&self) -> &'a RowLayout {
        self.layout
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Whether column `i` is NULL.
    #[inline]
    pub fn is_null(&self, i: usize) -> bool {
        self.bytes
            .get(i / 8)
            .is_none_or(|b| b & (1 << (i % 8)) != 0)
    }

    #[inline]
    fn slot(&self, i: usize) -> u64 {
        let at = self.layout.slot_offset(i);
        match self.bytes.get(at..at + 8) {
            Some(s) => u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]),
            None => 0,
        }
    }

    #[inline]
    fn var(&self, i: usize) -> &'a [u8] {
        let slot = self.slot(i);
        let offset = (slot & 0xffff_ffff) as usize;
        let len = (slot >> 32) as usize;
        self.bytes.get(offset..offset + len).unwrap_or(&[])
    }

    /// A `BOOLEAN`.
    pub fn get_bool(&self, i: usize) -> bool {
        self.slot(i) != 0
    }

    /// An integer or a `DATE` (days since 1970-01-01).
    pub fn get_i64(&self, i: usize) -> i64 {
        self.slot(i) as i64
    }

    /// A `FLOAT`.
    pub fn get_f32(&self, i: usize) -> f32 {
        f32::from_bits(self.slot(i) as u32)
    }

    /// A `DOUBLE`.
    pub fn get_f64(&self, i: usize) -> f64 {
        f64::from_bits(self.slot(i))
    }

    /// A `DECIMAL`, in the representation its precision selects.
    pub fn get_decimal(&self, i: usize) -> DecimalRef<'a> {
        match self.layout.kind(i) {
            SlotKind::DecimalDigits => {
                DecimalRef::Digits(std::str::from_utf8(self.var(i)).unwrap_or("0"))
            }
            _ => DecimalRef::Unscaled(self.slot(i) as i64),
        }
    }

    /// Text as stored (valid UTF-8 when written through [`RowWriter::set_str`]).
    pub fn get_text_bytes(&self, i: usize) -> &'a [u8] {
        self.var(i)
    }

    /// Text, validated (an invalid encoding reads as the empty string).
    pub fn get_str(&self, i: usize) -> &'a str {
        std::str::from_utf8(self.var(i)).unwrap_or("")
    }

    /// Binary data.
    pub fn get_bytes(&self, i: usize) -> &'a [u8] {
        self.var(i)
    }

    /// A `TIME`/`TIMESTAMP`/`TIMESTAMP_LTZ` in its stored unit (micros for
    /// precision ≤ 6, nanos above; see [`SlotKind`]).
    pub fn get_temporal_raw(&self, i: usize) -> i64 {
        self.slot(i) as i64
    }

    /// A `TIME`/`TIMESTAMP`/`TIMESTAMP_LTZ` in nanoseconds, whatever the stored unit.
    pub fn get_nanos(&self, i: usize) -> i64 {
        match self.layout.kind(i) {
            SlotKind::Micros => (self.slot(i) as i64).saturating_mul(1000),
            _ => self.slot(i) as i64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> RowLayout {
        RowLayout::new([
            DataType::BigInt,
            DataType::String,
            DataType::Decimal {
                precision: 10,
                scale: 2,
            },
            DataType::Decimal {
                precision: 30,
                scale: 5,
            },
            DataType::Timestamp { precision: 9 },
            DataType::Bytes,
            DataType::Boolean,
            DataType::Double,
            DataType::Float,
        ])
    }

    #[test]
    fn values_read_back_as_written() {
        let layout = layout();
        let mut buf = vec![7u8; 3]; // rows start anywhere in the arena
        let mut w = RowWriter::new(&mut buf, &layout);
        w.set_i64(0, -42);
        w.set_str(1, "héllo");
        w.set_decimal_unscaled(2, -12345);
        w.set_decimal_digits(3, true, b"000123456789012345678901234567");
        w.set_micros(4, 1_700_000_000_123_456);
        w.set_bytes(5, &[0, 255]);
        w.set_bool(6, true);
        w.set_f64(7, 0.1);
        w.set_f32(8, 1.5);
        let h = w.finish().unwrap();
        let row = RowRef::new(&layout, &buf[h.start as usize..(h.start + h.len) as usize]);
        assert_eq!(row.get_i64(0), -42);
        assert_eq!(row.get_str(1), "héllo");
        assert_eq!(row.get_decimal(2), DecimalRef::Unscaled(-12345));
        assert_eq!(
            row.get_decimal(3),
            DecimalRef::Digits("-123456789012345678901234567")
        );
        assert_eq!(row.get_temporal_raw(4), 1_700_000_000_123_456_000);
        assert_eq!(row.get_bytes(5), &[0, 255]);
        assert!(row.get_bool(6));
        assert_eq!(row.get_f64(7), 0.1);
        assert_eq!(row.get_f32(8), 1.5);
        assert!((0..9).all(|i| !row.is_null(i)));
    }

    #[test]
    fn columns_not_set_read_as_null() {
        let layout = layout();
        let mut buf = Vec::new();
        let mut w = RowWriter::new(&mut buf, &layout);
        w.set_i64(0, 1);
        w.set_str(1, "x");
        w.set_null(1);
        let h = w.finish().unwrap();
        let row = RowRef::new(&layout, &buf[..h.len as usize]);
        assert!(!row.is_null(0));
        assert!((1..9).all(|i| row.is_null(i)));
    }

    #[test]
    fn wide_decimal_zero_and_negative_zero_are_canonical() {
        let layout = layout();
        let mut buf = Vec::new();
        let mut w = RowWriter::new(&mut buf, &layout);
        w.set_decimal_digits(3, true, b"0000");
        let h = w.finish().unwrap();
        let row = RowRef::new(&layout, &buf[..h.len as usize]);
        assert_eq!(row.get_decimal(3), DecimalRef::Digits("0"));
    }

    #[test]
    fn nanos_truncate_toward_negative_infinity_in_micro_columns() {
        let layout = RowLayout::new([DataType::Timestamp { precision: 6 }]);
        let mut buf = Vec::new();
        let mut w = RowWriter::new(&mut buf, &layout);
        w.set_nanos(0, -1);
        let h = w.finish().unwrap();
        assert_eq!(
            RowRef::new(&layout, &buf[..h.len as usize]).get_temporal_raw(0),
            -1
        );
    }

    #[test]
    fn truncated_row_bytes_read_as_null_without_panicking() {
        let layout = layout();
        let row = RowRef::new(&layout, &[0]);
        assert!(row.is_null(8));
        assert_eq!(row.get_i64(0), 0);
        assert_eq!(row.get_str(1), "");
    }
}
