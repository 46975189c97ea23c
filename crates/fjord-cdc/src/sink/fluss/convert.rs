//! CDC rows into the native writer's row encoding: a [`RowPlan`] is
//! prepared once per (source schema version, sink table schema) and a
//! [`CdcRow`] presents one CDC [`RowRef`] to the writer as an
//! [`InternalRow`], converting each field straight from its slot into the
//! [`Datum`] the sink column takes. Per row there is no allocation, no
//! boxing, no formatting (except a `DECIMAL` wider than Fluss's 38 digits,
//! written as text into a stack buffer) and no lookup by name: the plan
//! holds, per sink column, the source slot and one conversion.
//!
//! Columns are matched by name (Flink CDC's Fluss sink does the same); a
//! sink column the source lacks is written NULL, a source column the sink
//! lacks is not written. A conversion is chosen when the plan is built and
//! refused then if the sink type cannot hold the source type; narrowing
//! conversions (a sink table whose type change could not be applied) are
//! checked per row before the row is handed over ([`RowPlan::check`]).

use fjord_client::row::{Datum, FieldWriter, InternalRow, Timestamp};
use fjord_format::types::{DataType as FlussType, TypeKind};

use crate::row::{DecimalRef, RowRef};
use crate::schema::TableSchema;
use crate::types::{DataType, SlotKind};

/// Largest DECIMAL precision Fluss holds; wider source decimals are
/// written as text (Flink CDC's MySQL connector maps them to STRING too).
pub const FLUSS_DECIMAL_PRECISION_MAX: u8 = 38;

/// Bytes of the stack buffer a wide decimal is formatted into: sign, 65
/// digits, a point and a leading zero.
const DECIMAL_TEXT_BYTES_MAX: usize = 72;

/// Integer widths of the sink column an `Int` slot goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IntWidth {
    I8,
    I16,
    I32,
    I64,
}

/// One sink column's conversion. `u16` fields are source column indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// The source has no such column.
    Null,
    Bool(u16),
    /// An `Int` slot into an integer column; `checked` when the sink column
    /// is narrower than the source type.
    Int {
        src: u16,
        width: IntWidth,
        checked: bool,
    },
    /// An `Int` slot into a DECIMAL column: times `mul` (10^scale).
    IntToDecimal {
        src: u16,
        mul: i128,
    },
    F32(u16),
    F32ToF64(u16),
    F64(u16),
    /// A compact decimal: the unscaled value times `mul` (10^(sink scale -
    /// source scale)), below `bound` (10^sink precision) in magnitude.
    DecimalCompact {
        src: u16,
        mul: i128,
        bound: i128,
    },
    /// A digits decimal (precision 19..=38 sink): parsed, times `mul`,
    /// below `bound` (10^sink precision) in magnitude.
    DecimalDigits {
        src: u16,
        mul: i128,
        bound: i128,
    },
    /// A decimal into STRING (source precision above 38): formatted with
    /// the source scale; at most `digits_max` (the source precision) digits.
    DecimalText {
        src: u16,
        scale: u8,
        digits_max: u8,
    },
    Text(u16),
    Bytes(u16),
    Date(u16),
    /// TIME, micros (or nanos, `nanos`) of the day → millis; checked to fit.
    Time {
        src: u16,
        nanos: bool,
    },
    Timestamp {
        src: u16,
        nanos: bool,
    },
    TimestampLtz {
        src: u16,
        nanos: bool,
    },
}

/// Why a plan could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError(pub String);

/// How the rows of one source schema version become rows of one sink table
/// schema. Built once; read per row.
#[derive(Debug)]
pub struct RowPlan {
    ops: Box<[Op]>,
    /// Sink positions whose op can fail per row, ascending; empty when no
    /// op needs a check. [`RowPlan::check`] runs only these (found once per
    /// plan, not per row).
    checked: Box<[u16]>,
    /// Source indexes of the sink's primary-key columns (key changes of
    /// updates are found by comparing them).
    key_src: Box<[u16]>,
}

/// The source column a sink column takes its values from: by name, or
/// through `alias` (a source name → sink name map of renames the sink did
/// not apply).
fn source_index(
    source: &TableSchema,
    sink_name: &str,
    alias: &[(String, String)],
) -> Option<usize> {
    if let Some((from, _)) = alias.iter().rev().find(|(_, to)| to == sink_name) {
        if let Some(i) = source.column_index(from) {
            return Some(i);
        }
    }
    let i = source.column_index(sink_name)?;
    // A column renamed away under another sink name is not also read under its own.
    if alias
        .iter()
        .any(|(from, to)| from == sink_name && to != sink_name)
    {
        return None;
    }
    Some(i)
}

fn pow10(exp: u8) -> Option<i128> {
    10i128.checked_pow(u32::from(exp))
}

fn int_rank(t: DataType) -> Option<u8> {
    Some(match t {
        DataType::TinyInt => 1,
        DataType::SmallInt => 2,
        DataType::Int => 3,
        DataType::BigInt => 4,
        _ => return None,
    })
}

/// The decimal precision an integer type needs.
fn int_digits(t: DataType) -> u8 {
    match t {
        DataType::TinyInt => 3,
        DataType::SmallInt => 5,
        DataType::Int => 10,
        _ => 19,
    }
}

/// The conversion of source type `from` (column `src`) into sink type `to`,
/// or why there is none.
fn op_for(src: u16, from: DataType, to: &FlussType) -> Result<Op, String> {
    let kind = from.slot_kind();
    let refuse = || {
        Err(format!(
            "a {from} value cannot be written to a {} column",
            to.type_root()
        ))
    };
    Ok(match (to.kind(), kind) {
        (TypeKind::Boolean, SlotKind::Bool) => Op::Bool(src),
        (
            TypeKind::TinyInt | TypeKind::SmallInt | TypeKind::Int | TypeKind::BigInt,
            SlotKind::Int,
        ) => {
            let (width, rank) = match to.kind() {
                TypeKind::TinyInt => (IntWidth::I8, 1),
                TypeKind::SmallInt => (IntWidth::I16, 2),
                TypeKind::Int => (IntWidth::I32, 3),
                _ => (IntWidth::I64, 4),
            };
            // DATE is an Int slot too, but not an integer.
            let Some(from_rank) = int_rank(from) else {
                return refuse();
            };
            Op::Int {
                src,
                width,
                checked: from_rank > rank,
            }
        }
        (TypeKind::Decimal { precision, scale }, SlotKind::Int) => {
            if int_rank(from).is_none() || int_digits(from) + *scale > *precision {
                return refuse();
            }
            Op::IntToDecimal {
                src,
                mul: pow10(*scale).ok_or_else(|| "decimal scale too large".to_string())?,
            }
        }
        (TypeKind::Float, SlotKind::Float) => Op::F32(src),
        (TypeKind::Double, SlotKind::Float) => Op::F32ToF64(src),
        (TypeKind::Double, SlotKind::Double) => Op::F64(src),
        (
            TypeKind::Decimal { precision, scale },
            SlotKind::DecimalCompact | SlotKind::DecimalDigits,
        ) => {
            let DataType::Decimal {
                precision: fp,
                scale: fs,
            } = from
            else {
                return refuse();
            };
            // Widening only: as many integer digits and at least the scale.
            if *scale < fs || precision.saturating_sub(*scale) < fp - fs {
                return refuse();
            }
            let mul = pow10(scale - fs).ok_or_else(|| "decimal scale too large".to_string())?;
            let bound =
                pow10(*precision).ok_or_else(|| "decimal precision too large".to_string())?;
            if kind == SlotKind::DecimalCompact {
                Op::DecimalCompact { src, mul, bound }
            } else {
                Op::DecimalDigits { src, mul, bound }
            }
        }
        (TypeKind::String, SlotKind::DecimalCompact | SlotKind::DecimalDigits) => match from {
            DataType::Decimal { precision, scale } => Op::DecimalText {
                src,
                scale,
                // Never more than the text buffer holds.
                digits_max: precision.min((DECIMAL_TEXT_BYTES_MAX - 4) as u8),
            },
            _ => return refuse(),
        },
        (TypeKind::String | TypeKind::Char { .. }, SlotKind::Text) => Op::Text(src),
        (TypeKind::Bytes | TypeKind::Binary { .. }, SlotKind::Bytes) => Op::Bytes(src),
        (TypeKind::Date, SlotKind::Int) if from == DataType::Date => Op::Date(src),
        (TypeKind::Time { .. }, SlotKind::Micros | SlotKind::Nanos)
            if matches!(from, DataType::Time { .. }) =>
        {
            Op::Time {
                src,
                nanos: kind == SlotKind::Nanos,
            }
        }
        (TypeKind::Timestamp { .. }, SlotKind::Micros | SlotKind::Nanos)
            if matches!(from, DataType::Timestamp { .. }) =>
        {
            Op::Timestamp {
                src,
                nanos: kind == SlotKind::Nanos,
            }
        }
        (TypeKind::TimestampLtz { .. }, SlotKind::Micros | SlotKind::Nanos)
            if matches!(from, DataType::TimestampLtz { .. }) =>
        {
            Op::TimestampLtz {
                src,
                nanos: kind == SlotKind::Nanos,
            }
        }
        _ => return refuse(),
    })
}

impl RowPlan {
    /// The plan from `source` rows to rows of a sink table with `columns`
    /// (name, type) and primary key `primary_key` (names). `alias` lists
    /// renames the sink did not apply (source name → sink name).
    pub fn new(
        source: &TableSchema,
        columns: &[(String, FlussType)],
        primary_key: &[String],
        alias: &[(String, String)],
    ) -> Result<RowPlan, PlanError> {
        let mut ops = Vec::with_capacity(columns.len());
        for (name, to) in columns {
            let op = match source_index(source, name, alias) {
                None => {
                    if !to.is_nullable() {
                        return Err(PlanError(format!(
                            "the sink column `{name}` is NOT NULL but the source table {} has no column of that name",
                            source.id()
                        )));
                    }
                    Op::Null
                }
                Some(i) => {
                    let from = source.columns()[i].data_type;
                    op_for(i as u16, from, to).map_err(|e| {
                        PlanError(format!("column `{name}` of {}: {e}", source.id()))
                    })?
                }
            };
            ops.push(op);
        }
        let mut key_src = Vec::with_capacity(primary_key.len());
        for key in primary_key {
            let pos = columns.iter().position(|(n, _)| n == key).ok_or_else(|| {
                PlanError(format!(
                    "primary-key column `{key}` is not a column of the sink table"
                ))
            })?;
            match ops[pos] {
                Op::Null => {
                    return Err(PlanError(format!(
                        "the source table {} has no column `{key}`, a primary-key column of the sink table",
                        source.id()
                    )))
                }
                Op::DecimalText { .. } => {
                    return Err(PlanError(format!(
                        "primary-key column `{key}` of {} is a DECIMAL wider than {FLUSS_DECIMAL_PRECISION_MAX} digits, which a Fluss key cannot hold",
                        source.id()
                    )))
                }
                op => key_src.push(op_src(op)),
            }
        }
        // Every op `convert` can refuse; the others always convert, so
        // checking only these is checking the whole row. A decimal is
        // checked even at the same precision and scale: a source row whose
        // value exceeds its declared precision (a Debezium JSON message,
        // say) must be refused, not written as a value the column cannot
        // hold.
        let checked: Box<[u16]> = ops
            .iter()
            .enumerate()
            .filter(|(_, op)| {
                matches!(
                    op,
                    Op::Int { checked: true, .. }
                        | Op::Time { .. }
                        | Op::DecimalCompact { .. }
                        | Op::DecimalDigits { .. }
                        | Op::DecimalText { .. }
                        | Op::IntToDecimal { .. }
                )
            })
            .map(|(pos, _)| pos as u16)
            .collect();
        Ok(RowPlan {
            ops: ops.into_boxed_slice(),
            checked,
            key_src: key_src.into_boxed_slice(),
        })
    }

    /// Number of sink columns.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the plan has no column.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Checks the values that can fail conversion (narrowed integers, TIME
    /// beyond Fluss's range, decimals beyond their column's precision);
    /// `Ok` at once for a plan that has none. Builds its message only on
    /// failure.
    #[inline]
    pub fn check(&self, row: &RowRef<'_>) -> Result<(), String> {
        if self.checked.is_empty() {
            return Ok(());
        }
        self.check_slow(row)
    }

    #[cold]
    fn check_slow(&self, row: &RowRef<'_>) -> Result<(), String> {
        for &pos in self.checked.iter() {
            if let Err(e) = convert(self.ops[usize::from(pos)], row) {
                return Err(format!("sink column {pos}: {e}"));
            }
        }
        Ok(())
    }

    /// Whether an update from `before` to `after` changes the sink's
    /// primary key (compared as stored: bytes of text, bits of numbers).
    #[inline]
    pub fn key_changed(&self, before: &RowRef<'_>, after: &RowRef<'_>) -> bool {
        self.key_src
            .iter()
            .any(|&i| !same_value(before, after, usize::from(i)))
    }

    /// The row view the writer reads.
    #[inline(always)]
    pub fn row<'a>(&'a self, row: RowRef<'a>) -> CdcRow<'a> {
        CdcRow { plan: self, row }
    }
}

fn op_src(op: Op) -> u16 {
    match op {
        Op::Null => u16::MAX,
        Op::Bool(s)
        | Op::F32(s)
        | Op::F32ToF64(s)
        | Op::F64(s)
        | Op::Text(s)
        | Op::Bytes(s)
        | Op::Date(s) => s,
        Op::Int { src, .. }
        | Op::IntToDecimal { src, .. }
        | Op::DecimalCompact { src, .. }
        | Op::DecimalDigits { src, .. }
        | Op::DecimalText { src, .. }
        | Op::Time { src, .. }
        | Op::Timestamp { src, .. }
        | Op::TimestampLtz { src, .. } => src,
    }
}

/// Whether column `i` holds the same stored value in both rows.
#[inline]
fn same_value(a: &RowRef<'_>, b: &RowRef<'_>, i: usize) -> bool {
    match (a.is_null(i), b.is_null(i)) {
        (true, true) => return true,
        (false, false) => {}
        _ => return false,
    }
    match a.layout().kind(i) {
        SlotKind::Text | SlotKind::Bytes | SlotKind::DecimalDigits => {
            a.get_bytes(i) == b.get_bytes(i)
        }
        _ => a.get_temporal_raw(i) == b.get_temporal_raw(i),
    }
}

/// Parses unscaled decimal digits (optional leading `-`) into an `i128`.
fn parse_digits(text: &[u8]) -> Option<i128> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i128 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(i128::from(d - b'0'))?;
    }
    Some(if negative { -value } else { value })
}

/// Why an unscaled decimal (`digits`, as the source holds it) does not fit
/// a sink column whose magnitudes stay below `bound` (10^precision).
#[cold]
fn decimal_refused(digits: &str, bound: i128) -> String {
    format!(
        "decimal with unscaled value {digits} does not fit the sink column's precision {} (scaled to the sink column's scale)",
        bound.unsigned_abs().ilog10()
    )
}

/// The sink value of one op, or why it does not fit. `DecimalText` is
/// handled by the callers (it needs a buffer); here it reads as NULL.
#[inline(always)]
fn convert<'a>(op: Op, row: &RowRef<'a>) -> Result<Datum<'a>, String> {
    let src = match op {
        Op::Null => return Ok(Datum::Null),
        op => usize::from(op_src(op)),
    };
    if row.is_null(src) {
        return Ok(Datum::Null);
    }
    Ok(match op {
        Op::Null => Datum::Null,
        Op::Bool(_) => Datum::Boolean(row.get_bool(src)),
        Op::Int { width, checked, .. } => {
            let v = row.get_i64(src);
            let narrow = |ok: bool| {
                if checked && !ok {
                    Err(format!(
                        "value {v} does not fit the sink column's narrower integer type"
                    ))
                } else {
                    Ok(())
                }
            };
            match width {
                IntWidth::I8 => {
                    narrow(i8::try_from(v).is_ok())?;
                    Datum::TinyInt(v as i8)
                }
                IntWidth::I16 => {
                    narrow(i16::try_from(v).is_ok())?;
                    Datum::SmallInt(v as i16)
                }
                IntWidth::I32 => {
                    narrow(i32::try_from(v).is_ok())?;
                    Datum::Int(v as i32)
                }
                IntWidth::I64 => Datum::BigInt(v),
            }
        }
        Op::IntToDecimal { mul, .. } => Datum::Decimal(
            i128::from(row.get_i64(src))
                .checked_mul(mul)
                .ok_or("decimal overflow")?,
        ),
        Op::F32(_) => Datum::Float(row.get_f32(src)),
        Op::F32ToF64(_) => Datum::Double(f64::from(row.get_f32(src))),
        Op::F64(_) => Datum::Double(row.get_f64(src)),
        Op::DecimalCompact { mul, bound, .. } | Op::DecimalDigits { mul, bound, .. } => {
            let v = match row.get_decimal(src) {
                DecimalRef::Unscaled(v) => i128::from(v),
                DecimalRef::Digits(d) => {
                    parse_digits(d.as_bytes()).ok_or_else(|| decimal_refused(d, bound))?
                }
            };
            match v.checked_mul(mul) {
                Some(scaled) if scaled.unsigned_abs() < bound.unsigned_abs() => {
                    Datum::Decimal(scaled)
                }
                _ => return Err(decimal_refused(&v.to_string(), bound)),
            }
        }
        Op::DecimalText { digits_max, .. } => {
            if let DecimalRef::Digits(d) = row.get_decimal(src) {
                let digits = d.strip_prefix('-').unwrap_or(d);
                if digits.len() > usize::from(digits_max) {
                    return Err(format!(
                        "decimal of {} digits (unscaled {d}) is wider than its column's precision {digits_max}",
                        digits.len()
                    ));
                }
            }
            Datum::Null
        }
        Op::Text(_) => {
            // Written by the source through `set_str`: valid UTF-8.
            Datum::String(row.get_str(src))
        }
        Op::Bytes(_) => Datum::Binary(row.get_bytes(src)),
        Op::Date(_) => Datum::Date(row.get_i64(src) as i32),
        Op::Time { nanos, .. } => {
            let raw = row.get_temporal_raw(src);
            let millis = if nanos {
                raw.div_euclid(1_000_000)
            } else {
                raw.div_euclid(1_000)
            };
            let millis = i32::try_from(millis)
                .ok()
                .filter(|m| (0..86_400_000).contains(m))
                .ok_or_else(|| {
                    format!("TIME value of {millis} ms is outside a day, which Fluss's TIME cannot hold")
                })?;
            Datum::Time(millis)
        }
        Op::Timestamp { nanos, .. } => {
            Datum::Timestamp(timestamp(row.get_temporal_raw(src), nanos))
        }
        Op::TimestampLtz { nanos, .. } => {
            Datum::TimestampLtz(timestamp(row.get_temporal_raw(src), nanos))
        }
    })
}

#[inline(always)]
fn timestamp(raw: i64, nanos: bool) -> Timestamp {
    if nanos {
        Timestamp::from_nanos(raw)
    } else {
        Timestamp::from_micros(raw)
    }
}

/// Writes a decimal as text with `scale` fractional digits into `buf`.
fn decimal_text<'b>(
    value: DecimalRef<'_>,
    scale: u8,
    buf: &'b mut [u8; DECIMAL_TEXT_BYTES_MAX],
) -> &'b str {
    let mut digits_buf = itoa::Buffer::new();
    let text: &str = match value {
        DecimalRef::Unscaled(v) => digits_buf.format(v),
        DecimalRef::Digits(d) => d,
    };
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest.as_bytes()),
        None => (false, text.as_bytes()),
    };
    let scale = usize::from(scale);
    let digits = &digits[..digits.len().min(DECIMAL_TEXT_BYTES_MAX - 4)];
    let mut n = 0;
    let mut push = |b: u8, n: &mut usize| {
        buf[*n] = b;
        *n += 1;
    };
    if negative {
        push(b'-', &mut n);
    }
    if digits.len() <= scale {
        push(b'0', &mut n);
        if scale > 0 {
            push(b'.', &mut n);
            for _ in digits.len()..scale {
                push(b'0', &mut n);
            }
            for &d in digits {
                push(d, &mut n);
            }
        }
    } else {
        let int_len = digits.len() - scale;
        for &d in &digits[..int_len] {
            push(d, &mut n);
        }
        if scale > 0 {
            push(b'.', &mut n);
            for &d in &digits[int_len..] {
                push(d, &mut n);
            }
        }
    }
    std::str::from_utf8(&buf[..n]).unwrap_or("")
}

/// One CDC row as the writer reads it (see the module doc).
#[derive(Clone, Copy)]
pub struct CdcRow<'a> {
    plan: &'a RowPlan,
    row: RowRef<'a>,
}

impl InternalRow for CdcRow<'_> {
    #[inline(always)]
    fn field_count(&self) -> usize {
        self.plan.ops.len()
    }

    /// The value at `pos` (read by key encoders). A value that does not
    /// convert reads as NULL, which the writer refuses for key columns;
    /// [`RowPlan::check`] reports such values first.
    #[inline]
    fn datum(&self, pos: usize) -> Datum<'_> {
        convert(self.plan.ops[pos], &self.row).unwrap_or(Datum::Null)
    }

    #[inline]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        for &op in self.plan.ops.iter() {
            match op {
                Op::DecimalText { src, scale, .. } => {
                    let src = usize::from(src);
                    if self.row.is_null(src) {
                        fields.null();
                    } else {
                        let mut buf = [0u8; DECIMAL_TEXT_BYTES_MAX];
                        fields.string(decimal_text(self.row.get_decimal(src), scale, &mut buf));
                    }
                }
                op => fields.datum(convert(op, &self.row).unwrap_or(Datum::Null)),
            }
        }
    }
}

/// Feeds a row's values to a hasher, leaving out trailing NULLs: a row
/// stored before a column was added last and read back with either schema,
/// and the same row converted for the table with the column, hash alike.
pub struct RowHasher<'h, H: std::hash::Hasher> {
    hasher: &'h mut H,
    pending_nulls: u32,
}

impl<'h, H: std::hash::Hasher> RowHasher<'h, H> {
    /// A row hasher writing into `hasher`.
    pub fn new(hasher: &'h mut H) -> Self {
        RowHasher {
            hasher,
            pending_nulls: 0,
        }
    }

    /// The next field's value.
    pub fn push(&mut self, d: &Datum<'_>) {
        if d.is_null() {
            self.pending_nulls += 1;
            return;
        }
        for _ in 0..self.pending_nulls {
            hash_datum(&Datum::Null, self.hasher);
        }
        self.pending_nulls = 0;
        hash_datum(d, self.hasher);
    }
}

/// Feeds one row's values, as the sink stores them, to `hasher`: the
/// fingerprint the replay matcher compares (sink::fluss::recovery).
pub fn hash_cdc_row(row: &CdcRow<'_>, hasher: &mut impl std::hash::Hasher) {
    let mut h = RowHasher::new(hasher);
    for &op in row.plan.ops.iter() {
        match op {
            Op::DecimalText { src, scale, .. } => {
                let src = usize::from(src);
                if row.row.is_null(src) {
                    h.push(&Datum::Null);
                } else {
                    let mut buf = [0u8; DECIMAL_TEXT_BYTES_MAX];
                    let text = decimal_text(row.row.get_decimal(src), scale, &mut buf);
                    h.push(&Datum::String(text));
                }
            }
            op => h.push(&convert(op, &row.row).unwrap_or(Datum::Null)),
        }
    }
}

/// Feeds one datum to `hasher`, tagged by kind.
pub fn hash_datum(d: &Datum<'_>, h: &mut impl std::hash::Hasher) {
    match *d {
        Datum::Null => h.write_u8(0),
        Datum::Boolean(v) => {
            h.write_u8(1);
            h.write_u8(u8::from(v));
        }
        Datum::TinyInt(v) => {
            h.write_u8(2);
            h.write_i64(i64::from(v));
        }
        Datum::SmallInt(v) => {
            h.write_u8(2);
            h.write_i64(i64::from(v));
        }
        Datum::Int(v) => {
            h.write_u8(2);
            h.write_i64(i64::from(v));
        }
        Datum::BigInt(v) => {
            h.write_u8(2);
            h.write_i64(v);
        }
        Datum::Float(v) => {
            h.write_u8(3);
            h.write_u64(f64::from(v).to_bits());
        }
        Datum::Double(v) => {
            h.write_u8(3);
            h.write_u64(v.to_bits());
        }
        Datum::String(v) => {
            h.write_u8(4);
            h.write_usize(v.len());
            h.write(v.as_bytes());
        }
        Datum::Binary(v) => {
            h.write_u8(5);
            h.write_usize(v.len());
            h.write(v);
        }
        Datum::Decimal(v) => {
            h.write_u8(6);
            h.write_i128(v);
        }
        Datum::Date(v) => {
            h.write_u8(7);
            h.write_i32(v);
        }
        Datum::Time(v) => {
            h.write_u8(8);
            h.write_i32(v);
        }
        Datum::Timestamp(t) | Datum::TimestampLtz(t) => {
            h.write_u8(9);
            h.write_i64(t.millis());
            h.write_i32(t.nanos_of_milli());
        }
        // Nested values are their Fluss binary bytes: equal bytes, equal value.
        Datum::Array(v) | Datum::Map(v) | Datum::Row(v) => {
            h.write_u8(10);
            h.write_usize(v.len());
            h.write(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventBatch;
    use crate::schema::{Column, TableId};
    use std::sync::Arc;

    fn schema(columns: Vec<Column>, key: &[&str]) -> Arc<TableSchema> {
        Arc::new(TableSchema::new(TableId::new("d", "t"), 1, columns, key).unwrap())
    }

    fn datums(plan: &RowPlan, row: RowRef<'_>) -> Vec<String> {
        let r = plan.row(row);
        (0..r.field_count())
            .map(|i| format!("{:?}", r.datum(i)))
            .collect()
    }

    #[test]
    fn every_source_type_converts_to_its_sink_type() {
        let s = schema(
            vec![
                Column::new("id", DataType::BigInt, false),
                Column::new("b", DataType::Boolean, true),
                Column::new("i8", DataType::TinyInt, true),
                Column::new(
                    "d2",
                    DataType::Decimal {
                        precision: 10,
                        scale: 2,
                    },
                    true,
                ),
                Column::new(
                    "d30",
                    DataType::Decimal {
                        precision: 30,
                        scale: 3,
                    },
                    true,
                ),
                Column::new(
                    "d65",
                    DataType::Decimal {
                        precision: 65,
                        scale: 2,
                    },
                    true,
                ),
                Column::new("s", DataType::Varchar { length: 5 }, true),
                Column::new("t", DataType::Time { precision: 3 }, true),
                Column::new("ts", DataType::Timestamp { precision: 6 }, true),
                Column::new("ltz", DataType::TimestampLtz { precision: 9 }, true),
                Column::new("dt", DataType::Date, true),
            ],
            &["id"],
        );
        let sink: Vec<(String, FlussType)> = vec![
            ("id".into(), FlussType::bigint().not_null()),
            ("b".into(), FlussType::boolean()),
            ("i8".into(), FlussType::int()),
            ("d2".into(), FlussType::decimal(12, 2).unwrap()),
            ("d30".into(), FlussType::decimal(30, 3).unwrap()),
            ("d65".into(), FlussType::string()),
            ("s".into(), FlussType::string()),
            ("t".into(), FlussType::time(3).unwrap()),
            ("ts".into(), FlussType::timestamp(6).unwrap()),
            ("ltz".into(), FlussType::timestamp_ltz(9).unwrap()),
            ("dt".into(), FlussType::date()),
            ("extra".into(), FlussType::string()),
        ];
        let plan = RowPlan::new(&s, &sink, &["id".to_string()], &[]).unwrap();
        let mut batch = EventBatch::default();
        let slot = batch.table_slot(&s);
        let mut w = batch.row_writer(slot);
        w.set_i64(0, 7);
        w.set_bool(1, true);
        w.set_i64(2, -3);
        w.set_decimal_unscaled(3, -1234);
        w.set_decimal_digits(4, true, b"123456789012345678901234567");
        w.set_decimal_digits(5, false, b"5");
        w.set_str(6, "héllo");
        w.set_micros(7, 3_723_004_000);
        w.set_micros(8, 1_700_000_000_123_456);
        w.set_nanos(9, 1_700_000_000_123_456_789);
        w.set_i64(10, 19_000);
        let h = w.finish().unwrap();
        batch.push_insert(slot, h);
        let crate::event::Event::Change(c) = batch.events().next().unwrap() else {
            panic!()
        };
        let row = c.after.unwrap();
        assert!(plan.check(&row).is_ok());
        let got = datums(&plan, row);
        assert_eq!(got[0], "BigInt(7)");
        assert_eq!(got[2], "Int(-3)");
        assert_eq!(got[3], "Decimal(-1234)");
        assert_eq!(got[4], "Decimal(-123456789012345678901234567)");
        assert_eq!(got[6], "String(\"héllo\")");
        assert_eq!(got[7], "Time(3723004)");
        assert!(
            got[8].contains("millis: 1700000000123, nanos_of_milli: 456000"),
            "{}",
            got[8]
        );
        assert!(got[9].contains("nanos_of_milli: 456789"), "{}", got[9]);
        assert_eq!(got[10], "Date(19000)");
        assert_eq!(got[11], "Null");
        let mut buf = [0u8; DECIMAL_TEXT_BYTES_MAX];
        assert_eq!(decimal_text(row.get_decimal(5), 2, &mut buf), "0.05");
        assert_eq!(
            decimal_text(DecimalRef::Unscaled(-12345), 2, &mut buf),
            "-123.45"
        );
        assert_eq!(decimal_text(DecimalRef::Digits("7"), 0, &mut buf), "7");
    }

    #[test]
    fn narrowing_is_checked_per_row_and_impossible_conversions_are_refused() {
        let s = schema(
            vec![
                Column::new("id", DataType::Int, false),
                Column::new("v", DataType::BigInt, true),
            ],
            &["id"],
        );
        let narrow = vec![
            ("id".to_string(), FlussType::int().not_null()),
            ("v".to_string(), FlussType::int()),
        ];
        let plan = RowPlan::new(&s, &narrow, &["id".to_string()], &[]).unwrap();
        let mut batch = EventBatch::default();
        let slot = batch.table_slot(&s);
        let mut w = batch.row_writer(slot);
        w.set_i64(0, 1);
        w.set_i64(1, i64::from(i32::MAX) + 1);
        let h = w.finish().unwrap();
        batch.push_insert(slot, h);
        let crate::event::Event::Change(c) = batch.events().next().unwrap() else {
            panic!()
        };
        let err = plan.check(&c.after.unwrap()).unwrap_err();
        assert!(err.contains("2147483648"), "{err}");

        let text = vec![
            ("id".to_string(), FlussType::int().not_null()),
            ("v".to_string(), FlussType::date()),
        ];
        let err = RowPlan::new(&s, &text, &["id".to_string()], &[]).unwrap_err();
        assert!(err.0.contains("BIGINT"), "{}", err.0);
    }

    /// A decimal whose value exceeds its declared precision (a source row
    /// the source did not check) is refused by the plan's check with its
    /// value, at the same precision and scale too, never written as NULL
    /// or as a value its column cannot hold.
    #[test]
    fn decimals_beyond_the_sink_precision_are_refused_per_row() {
        let dec = |precision, scale| DataType::Decimal { precision, scale };
        let s = schema(
            vec![
                Column::new("id", DataType::Int, false),
                Column::new("c5", dec(5, 2), true),
                Column::new("w20", dec(20, 2), true),
                Column::new("t65", dec(65, 2), true),
                Column::new("c5w", dec(5, 2), true),
            ],
            &["id"],
        );
        let sink = vec![
            ("id".to_string(), FlussType::int().not_null()),
            // Same precision and scale: no scaling, yet checked.
            ("c5".to_string(), FlussType::decimal(5, 2).unwrap()),
            ("w20".to_string(), FlussType::decimal(20, 2).unwrap()),
            ("t65".to_string(), FlussType::string()),
            // Wider scale: scaled by 100, two more digits of room.
            ("c5w".to_string(), FlussType::decimal(7, 4).unwrap()),
        ];
        let plan = RowPlan::new(&s, &sink, &["id".to_string()], &[]).unwrap();
        let check = |c5: i64, w20: &[u8], t65: &[u8], c5w: i64| {
            let mut batch = EventBatch::default();
            let slot = batch.table_slot(&s);
            let mut w = batch.row_writer(slot);
            w.set_i64(0, 1);
            w.set_decimal_unscaled(1, c5);
            w.set_decimal_digits(2, false, w20);
            w.set_decimal_digits(3, true, t65);
            w.set_decimal_unscaled(4, c5w);
            let h = w.finish().unwrap();
            batch.push_insert(slot, h);
            let crate::event::Event::Change(c) = batch.events().next().unwrap() else {
                panic!()
            };
            let row = c.after.unwrap();
            plan.check(&row).map(|()| datums(&plan, row))
        };
        let twenty = [b'9'; 20];
        let sixty_five = [b'9'; 65];
        let fits = check(-99_999, &twenty, &sixty_five, 99_999).unwrap();
        assert_eq!(fits[1], "Decimal(-99999)");
        assert_eq!(fits[2], format!("Decimal({})", "9".repeat(20)));
        assert_eq!(fits[4], "Decimal(9999900)");

        let err = check(100_000, &twenty, &sixty_five, 1).unwrap_err();
        assert!(
            err.contains("100000") && err.contains("precision 5"),
            "{err}"
        );
        let err = check(1, &[b'1'; 21], &sixty_five, 1).unwrap_err();
        assert!(
            err.contains(&"1".repeat(21)) && err.contains("precision 20"),
            "{err}"
        );
        let err = check(1, &twenty, &[b'9'; 66], 1).unwrap_err();
        assert!(err.contains("66 digits"), "{err}");
        let err = check(1, &twenty, &sixty_five, -100_000).unwrap_err();
        assert!(
            err.contains("-100000") && err.contains("precision 7"),
            "{err}"
        );
        // Past i128: refused with its digits, not as unreadable.
        let err = check(1, &[b'9'; 40], &sixty_five, 1).unwrap_err();
        assert!(err.contains(&"9".repeat(40)), "{err}");
    }

    #[test]
    fn aliases_map_renamed_columns_and_key_changes_are_found() {
        let s = schema(
            vec![
                Column::new("id", DataType::Int, false),
                Column::new("b", DataType::String, true),
            ],
            &["id"],
        );
        let sink = vec![
            ("id".to_string(), FlussType::int().not_null()),
            ("a".to_string(), FlussType::string()),
        ];
        let alias = vec![("b".to_string(), "a".to_string())];
        let plan = RowPlan::new(&s, &sink, &["id".to_string()], &alias).unwrap();
        let mut batch = EventBatch::default();
        let slot = batch.table_slot(&s);
        let mut rows = Vec::new();
        for id in [1, 1, 2] {
            let mut w = batch.row_writer(slot);
            w.set_i64(0, id);
            w.set_str(1, "x");
            rows.push(w.finish().unwrap());
        }
        batch.push_update(slot, rows[0], rows[1]);
        batch.push_update(slot, rows[1], rows[2]);
        let changes: Vec<_> = batch
            .events()
            .map(|e| match e {
                crate::event::Event::Change(c) => c,
                _ => panic!(),
            })
            .collect();
        assert_eq!(datums(&plan, changes[0].after.unwrap())[1], "String(\"x\")");
        assert!(!plan.key_changed(&changes[0].before.unwrap(), &changes[0].after.unwrap()));
        assert!(plan.key_changed(&changes[1].before.unwrap(), &changes[1].after.unwrap()));
    }
}
