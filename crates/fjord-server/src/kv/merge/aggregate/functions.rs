//! The aggregation functions of the aggregation merge engine: their names,
//! the column types each accepts (checked at table creation), and
//! `agg(accumulator, input)` over two field values.
//!
//! Semantics are those of Fluss's server (`server/kv/rowmerger/aggregate/
//! functions/*`, identical at 0.9.1 and main), including Java's arithmetic:
//! integer sums and products wrap, a DECIMAL sum or product that no longer
//! fits its precision becomes NULL (except a compact DECIMAL(p <= 18) sum,
//! which Fluss keeps unchecked as long as it fits 64 bits), FLOAT/DOUBLE
//! order is `Float.compare`'s (-0.0 < 0.0, NaN above everything).
//!
//! Every function but the `last_value*` / `first_value*` family returns the
//! other side when one side is NULL.

use std::cmp::Ordering;
use std::fmt::Write as _;

use fjord_format::datum::Datum;
use fjord_format::TypeKind;

use super::bitmap::{union32, BitmapScratch};
use super::bitmap64::{union64, Bitmap64Scratch};
use crate::kv::merge::MergeError;

/// The aggregation functions Fluss knows (`AggFunctionType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AggFunctionType {
    Sum,
    Product,
    Max,
    Min,
    LastValue,
    LastValueIgnoreNulls,
    FirstValue,
    FirstValueIgnoreNulls,
    Listagg,
    StringAgg,
    BoolAnd,
    BoolOr,
    Rbm32,
    Rbm64,
}

const ALL: [AggFunctionType; 14] = [
    AggFunctionType::Sum,
    AggFunctionType::Product,
    AggFunctionType::Max,
    AggFunctionType::Min,
    AggFunctionType::LastValue,
    AggFunctionType::LastValueIgnoreNulls,
    AggFunctionType::FirstValue,
    AggFunctionType::FirstValueIgnoreNulls,
    AggFunctionType::Listagg,
    AggFunctionType::StringAgg,
    AggFunctionType::BoolAnd,
    AggFunctionType::BoolOr,
    AggFunctionType::Rbm32,
    AggFunctionType::Rbm64,
];

impl AggFunctionType {
    /// The function a schema names, matched as Fluss does: case-insensitive,
    /// `-` read as `_`, surrounding blanks ignored. `None` for a name Fluss
    /// does not know (Fluss then drops the function from the column).
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        let name = name.trim();
        ALL.into_iter().find(|f| {
            let known = f.name();
            known.len() == name.len()
                && known.bytes().zip(name.bytes()).all(|(k, n)| {
                    let n = if n == b'-' { b'_' } else { n };
                    k == n.to_ascii_lowercase()
                })
        })
    }

    /// The name Fluss writes (`AggFunctionType.toString()`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            AggFunctionType::Sum => "sum",
            AggFunctionType::Product => "product",
            AggFunctionType::Max => "max",
            AggFunctionType::Min => "min",
            AggFunctionType::LastValue => "last_value",
            AggFunctionType::LastValueIgnoreNulls => "last_value_ignore_nulls",
            AggFunctionType::FirstValue => "first_value",
            AggFunctionType::FirstValueIgnoreNulls => "first_value_ignore_nulls",
            AggFunctionType::Listagg => "listagg",
            AggFunctionType::StringAgg => "string_agg",
            AggFunctionType::BoolAnd => "bool_and",
            AggFunctionType::BoolOr => "bool_or",
            AggFunctionType::Rbm32 => "rbm32",
            AggFunctionType::Rbm64 => "rbm64",
        }
    }

    /// Whether the function takes the `delimiter` parameter.
    pub(crate) fn accepts_delimiter(self) -> bool {
        matches!(self, AggFunctionType::Listagg | AggFunctionType::StringAgg)
    }

    /// Whether a column of `kind` may use the function
    /// (`AggFunctionType.getSupportedDataTypeRoots`).
    pub(crate) fn accepts_type(self, kind: &TypeKind) -> bool {
        use TypeKind as T;
        let numeric = matches!(
            kind,
            T::TinyInt
                | T::SmallInt
                | T::Int
                | T::BigInt
                | T::Float
                | T::Double
                | T::Decimal { .. }
        );
        match self {
            AggFunctionType::Sum | AggFunctionType::Product => numeric,
            AggFunctionType::Max | AggFunctionType::Min => {
                numeric
                    || matches!(
                        kind,
                        T::Char { .. }
                            | T::String
                            | T::Date
                            | T::Time { .. }
                            | T::Timestamp { .. }
                            | T::TimestampLtz { .. }
                    )
            }
            AggFunctionType::LastValue
            | AggFunctionType::LastValueIgnoreNulls
            | AggFunctionType::FirstValue
            | AggFunctionType::FirstValueIgnoreNulls => true,
            AggFunctionType::Listagg | AggFunctionType::StringAgg => {
                matches!(kind, T::String | T::Char { .. })
            }
            AggFunctionType::BoolAnd | AggFunctionType::BoolOr => matches!(kind, T::Boolean),
            AggFunctionType::Rbm32 | AggFunctionType::Rbm64 => matches!(kind, T::Bytes),
        }
    }

    /// The accepted types, for a refusal's message.
    pub(crate) fn accepted_types(self) -> &'static str {
        match self {
            AggFunctionType::Sum | AggFunctionType::Product => {
                "TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE or DECIMAL"
            }
            AggFunctionType::Max | AggFunctionType::Min => {
                "CHAR, STRING, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL, DATE, \
                 TIME, TIMESTAMP or TIMESTAMP_LTZ"
            }
            AggFunctionType::LastValue
            | AggFunctionType::LastValueIgnoreNulls
            | AggFunctionType::FirstValue
            | AggFunctionType::FirstValueIgnoreNulls => "any type",
            AggFunctionType::Listagg | AggFunctionType::StringAgg => "STRING or CHAR",
            AggFunctionType::BoolAnd | AggFunctionType::BoolOr => "BOOLEAN",
            AggFunctionType::Rbm32 | AggFunctionType::Rbm64 => "BYTES",
        }
    }
}

/// The numeric kinds `sum` and `product` work on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Numeric {
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    Decimal { precision: u8, scale: u8 },
}

impl Numeric {
    fn of(kind: &TypeKind) -> Option<Self> {
        Some(match kind {
            TypeKind::TinyInt => Numeric::TinyInt,
            TypeKind::SmallInt => Numeric::SmallInt,
            TypeKind::Int => Numeric::Int,
            TypeKind::BigInt => Numeric::BigInt,
            TypeKind::Float => Numeric::Float,
            TypeKind::Double => Numeric::Double,
            TypeKind::Decimal { precision, scale } => Numeric::Decimal {
                precision: *precision,
                scale: *scale,
            },
            _ => return None,
        })
    }
}

/// One column's aggregator, ready for the per-record path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FieldAgg {
    Sum(Numeric),
    Product(Numeric),
    Max,
    Min,
    /// `last_value`: the input, even NULL (also every key column).
    LastValue,
    /// `last_value_ignore_nulls`: the input unless NULL.
    LastValueIgnoreNulls,
    /// `first_value` and `first_value_ignore_nulls`: Fluss's server runs
    /// the same code for both — the accumulator unless it is NULL — so a
    /// NULL first value is replaced by the next one in both.
    FirstValue,
    /// `listagg` / `string_agg`: `acc + delimiter + input`.
    Listagg {
        delimiter: Box<str>,
    },
    BoolAnd,
    BoolOr,
    /// `rbm32`: union of two serialized 32-bit roaring bitmaps.
    Rbm32,
    /// `rbm64`: union of two serialized `Roaring64Bitmap`s.
    Rbm64,
    /// A function Fluss accepts at table creation but whose server-side
    /// aggregator refuses the column (`listagg` / `string_agg` on CHAR: the
    /// factory wants a STRING). Fluss fails the first merge that needs it.
    Refused {
        message: Box<str>,
    },
}

impl FieldAgg {
    /// The aggregator for a column of `kind` using `function`.
    pub(crate) fn new(function: AggFunctionType, delimiter: &str, kind: &TypeKind) -> Self {
        match function {
            AggFunctionType::Sum => {
                Numeric::of(kind).map_or_else(|| refused(function), FieldAgg::Sum)
            }
            AggFunctionType::Product => {
                Numeric::of(kind).map_or_else(|| refused(function), FieldAgg::Product)
            }
            AggFunctionType::Max => FieldAgg::Max,
            AggFunctionType::Min => FieldAgg::Min,
            AggFunctionType::LastValue => FieldAgg::LastValue,
            AggFunctionType::LastValueIgnoreNulls => FieldAgg::LastValueIgnoreNulls,
            AggFunctionType::FirstValue | AggFunctionType::FirstValueIgnoreNulls => {
                FieldAgg::FirstValue
            }
            AggFunctionType::Listagg | AggFunctionType::StringAgg => match kind {
                TypeKind::String => FieldAgg::Listagg {
                    delimiter: delimiter.into(),
                },
                _ => refused(function),
            },
            AggFunctionType::BoolAnd => FieldAgg::BoolAnd,
            AggFunctionType::BoolOr => FieldAgg::BoolOr,
            AggFunctionType::Rbm32 => FieldAgg::Rbm32,
            AggFunctionType::Rbm64 => FieldAgg::Rbm64,
        }
    }

    /// The message of a column whose aggregator cannot be built, if any.
    pub(crate) fn refusal(&self) -> Option<&str> {
        match self {
            FieldAgg::Refused { message } => Some(message),
            _ => None,
        }
    }

    /// Aggregates `input` into `acc` for column `column`. The result may
    /// borrow from either value or from `scratch`.
    pub(crate) fn agg<'a>(
        &self,
        column: usize,
        acc: Datum<'a>,
        input: Datum<'a>,
        scratch: &'a mut AggScratch,
    ) -> Result<Datum<'a>, MergeError> {
        match self {
            FieldAgg::LastValue => return Ok(input),
            FieldAgg::LastValueIgnoreNulls => {
                return Ok(if input.is_null() { acc } else { input });
            }
            FieldAgg::FirstValue => return Ok(if acc.is_null() { input } else { acc }),
            FieldAgg::Refused { message } => {
                return Err(MergeError::AggregatorRefused {
                    column,
                    message: message.to_string(),
                });
            }
            _ => {}
        }
        if acc.is_null() {
            return Ok(input);
        }
        if input.is_null() {
            return Ok(acc);
        }
        let mismatch = || MergeError::TypeMismatch {
            column,
            left: acc.type_name(),
            right: input.type_name(),
        };
        Ok(match self {
            FieldAgg::Sum(numeric) => sum(*numeric, acc, input).ok_or_else(mismatch)?,
            FieldAgg::Product(numeric) => product(*numeric, acc, input).ok_or_else(mismatch)?,
            FieldAgg::Max => match java_compare(&acc, &input).ok_or_else(mismatch)? {
                Ordering::Less => input,
                _ => acc,
            },
            FieldAgg::Min => match java_compare(&acc, &input).ok_or_else(mismatch)? {
                Ordering::Less => acc,
                _ => input,
            },
            FieldAgg::Listagg { delimiter } => {
                let (Datum::String(a), Datum::String(b)) = (acc, input) else {
                    return Err(mismatch());
                };
                let text = &mut scratch.text;
                text.clear();
                text.push_str(a);
                text.push_str(delimiter);
                text.push_str(b);
                Datum::String(text.as_str())
            }
            FieldAgg::BoolAnd | FieldAgg::BoolOr => {
                let (Datum::Boolean(a), Datum::Boolean(b)) = (acc, input) else {
                    return Err(mismatch());
                };
                Datum::Boolean(if matches!(self, FieldAgg::BoolAnd) {
                    a && b
                } else {
                    a || b
                })
            }
            FieldAgg::Rbm32 => {
                let (Datum::Binary(a), Datum::Binary(b)) = (acc, input) else {
                    return Err(mismatch());
                };
                let AggScratch { bytes, bitmap, .. } = scratch;
                union32(a, b, bitmap, bytes)
                    .map_err(|reason| MergeError::Bitmap { column, reason })?;
                Datum::Binary(bytes.as_slice())
            }
            FieldAgg::Rbm64 => {
                let (Datum::Binary(a), Datum::Binary(b)) = (acc, input) else {
                    return Err(mismatch());
                };
                let AggScratch {
                    bytes, bitmap64, ..
                } = scratch;
                union64(a, b, bitmap64, bytes)
                    .map_err(|reason| MergeError::Bitmap { column, reason })?;
                Datum::Binary(bytes.as_slice())
            }
            FieldAgg::LastValue
            | FieldAgg::LastValueIgnoreNulls
            | FieldAgg::FirstValue
            | FieldAgg::Refused { .. } => unreachable!("handled above"),
        })
    }
}

fn refused(function: AggFunctionType) -> FieldAgg {
    let mut message = String::new();
    let _ = write!(
        message,
        "Fluss's server has no {} aggregator for this column's type ({} needs {})",
        function.name(),
        function.name(),
        match function {
            AggFunctionType::Listagg | AggFunctionType::StringAgg => "STRING, not CHAR",
            _ => function.accepted_types(),
        }
    );
    FieldAgg::Refused {
        message: message.into(),
    }
}

/// Buffers one merger owns and reuses for every record: a result that is
/// neither input lives here until the sink has written it.
#[derive(Debug, Default)]
pub(crate) struct AggScratch {
    text: String,
    bytes: Vec<u8>,
    bitmap: BitmapScratch,
    bitmap64: Bitmap64Scratch,
}

fn sum<'a>(numeric: Numeric, a: Datum<'a>, b: Datum<'a>) -> Option<Datum<'a>> {
    Some(match (numeric, a, b) {
        (Numeric::TinyInt, Datum::TinyInt(a), Datum::TinyInt(b)) => {
            Datum::TinyInt(a.wrapping_add(b))
        }
        (Numeric::SmallInt, Datum::SmallInt(a), Datum::SmallInt(b)) => {
            Datum::SmallInt(a.wrapping_add(b))
        }
        (Numeric::Int, Datum::Int(a), Datum::Int(b)) => Datum::Int(a.wrapping_add(b)),
        (Numeric::BigInt, Datum::BigInt(a), Datum::BigInt(b)) => Datum::BigInt(a.wrapping_add(b)),
        (Numeric::Float, Datum::Float(a), Datum::Float(b)) => Datum::Float(a + b),
        (Numeric::Double, Datum::Double(a), Datum::Double(b)) => Datum::Double(a + b),
        (Numeric::Decimal { precision, .. }, Datum::Decimal(a), Datum::Decimal(b)) => {
            decimal_sum(a, b, precision)
        }
        _ => return None,
    })
}

fn product<'a>(numeric: Numeric, a: Datum<'a>, b: Datum<'a>) -> Option<Datum<'a>> {
    Some(match (numeric, a, b) {
        (Numeric::TinyInt, Datum::TinyInt(a), Datum::TinyInt(b)) => {
            Datum::TinyInt(a.wrapping_mul(b))
        }
        (Numeric::SmallInt, Datum::SmallInt(a), Datum::SmallInt(b)) => {
            Datum::SmallInt(a.wrapping_mul(b))
        }
        (Numeric::Int, Datum::Int(a), Datum::Int(b)) => Datum::Int(a.wrapping_mul(b)),
        (Numeric::BigInt, Datum::BigInt(a), Datum::BigInt(b)) => Datum::BigInt(a.wrapping_mul(b)),
        (Numeric::Float, Datum::Float(a), Datum::Float(b)) => Datum::Float(a * b),
        (Numeric::Double, Datum::Double(a), Datum::Double(b)) => Datum::Double(a * b),
        (Numeric::Decimal { precision, scale }, Datum::Decimal(a), Datum::Decimal(b)) => {
            decimal_product(a, b, precision, scale)
        }
        _ => return None,
    })
}

/// Largest precision Fluss keeps in a 64-bit unscaled value (`Decimal.isCompact`).
const MAX_COMPACT_PRECISION: u8 = 18;

/// `10^n` for `n <= 38`.
fn pow10(n: u8) -> u128 {
    10u128.pow(u32::from(n))
}

/// Whether `magnitude` has more digits than `precision`.
fn exceeds(magnitude: u128, precision: u8) -> bool {
    magnitude >= pow10(precision)
}

/// Fluss's `DecimalUtils.add` at the column's precision: compact values
/// (precision <= 18) add as 64-bit integers without a precision check, and
/// fall back to the exact sum when that overflows; the exact sum is NULL
/// when it has more digits than the precision.
fn decimal_sum<'a>(a: i128, b: i128, precision: u8) -> Datum<'a> {
    if precision <= MAX_COMPACT_PRECISION {
        if let (Ok(a), Ok(b)) = (i64::try_from(a), i64::try_from(b)) {
            if let Some(sum) = a.checked_add(b) {
                return Datum::Decimal(i128::from(sum));
            }
        }
    }
    match a.checked_add(b) {
        Some(sum) if !exceeds(sum.unsigned_abs(), precision) => Datum::Decimal(sum),
        _ => Datum::Null,
    }
}

/// Fluss's DECIMAL product: the exact product rounded half-up (away from
/// zero) back to the column's scale; NULL when it has more digits than the
/// precision.
fn decimal_product<'a>(a: i128, b: i128, precision: u8, scale: u8) -> Datum<'a> {
    let negative = (a < 0) != (b < 0);
    let mut wide = U256::mul(a.unsigned_abs(), b.unsigned_abs());
    if scale > 0 {
        // Drop all but the last of the `scale` digits, then the last one,
        // whose value decides the rounding.
        let mut left = scale - 1;
        while left > 0 {
            let step = left.min(19);
            wide.div_small(10u64.pow(u32::from(step)));
            left -= step;
        }
        let digit = wide.div_small(10);
        if digit >= 5 {
            wide.add_one();
        }
    }
    match wide.to_u128() {
        Some(magnitude) if !exceeds(magnitude, precision) => {
            // The precision is at most 38, so the magnitude fits i128.
            let value = magnitude as i128;
            Datum::Decimal(if negative { -value } else { value })
        }
        _ => Datum::Null,
    }
}

/// A 256-bit unsigned integer as four little-endian 64-bit limbs: enough for
/// the product of two 38-digit decimals.
struct U256([u64; 4]);

impl U256 {
    fn mul(a: u128, b: u128) -> Self {
        let a = [a as u64, (a >> 64) as u64];
        let b = [b as u64, (b >> 64) as u64];
        let mut limbs = [0u64; 4];
        for (i, &x) in a.iter().enumerate() {
            let mut carry = 0u128;
            for (j, &y) in b.iter().enumerate() {
                let t = u128::from(x) * u128::from(y) + u128::from(limbs[i + j]) + carry;
                limbs[i + j] = t as u64;
                carry = t >> 64;
            }
            let mut k = i + 2;
            while carry != 0 && k < 4 {
                let t = u128::from(limbs[k]) + carry;
                limbs[k] = t as u64;
                carry = t >> 64;
                k += 1;
            }
        }
        U256(limbs)
    }

    /// Divides in place by `d > 0`, returning the remainder.
    fn div_small(&mut self, d: u64) -> u64 {
        let mut rem = 0u128;
        for limb in self.0.iter_mut().rev() {
            let cur = (rem << 64) | u128::from(*limb);
            *limb = (cur / u128::from(d)) as u64;
            rem = cur % u128::from(d);
        }
        rem as u64
    }

    fn add_one(&mut self) {
        for limb in &mut self.0 {
            let (v, overflow) = limb.overflowing_add(1);
            *limb = v;
            if !overflow {
                return;
            }
        }
    }

    fn to_u128(&self) -> Option<u128> {
        (self.0[2] == 0 && self.0[3] == 0)
            .then(|| u128::from(self.0[0]) | (u128::from(self.0[1]) << 64))
    }
}

/// Java's `Double.compare` (and `Float.compare` through the widening, which
/// keeps order, signed zeros and NaN): -0.0 sorts below 0.0 and every NaN
/// equals every other and sorts above +infinity.
fn java_double_compare(a: f64, b: f64) -> Ordering {
    if a < b {
        return Ordering::Less;
    }
    if a > b {
        return Ordering::Greater;
    }
    let bits = |v: f64| {
        if v.is_nan() {
            f64::NAN.to_bits() as i64
        } else {
            v.to_bits() as i64
        }
    };
    bits(a).cmp(&bits(b))
}

/// Fluss's `InternalRowUtils.compare` for the `max` / `min` types; `None`
/// when the two values are not of one comparable kind.
pub(crate) fn java_compare(a: &Datum<'_>, b: &Datum<'_>) -> Option<Ordering> {
    Some(match (a, b) {
        (Datum::TinyInt(a), Datum::TinyInt(b)) => a.cmp(b),
        (Datum::SmallInt(a), Datum::SmallInt(b)) => a.cmp(b),
        (Datum::Int(a), Datum::Int(b)) => a.cmp(b),
        (Datum::BigInt(a), Datum::BigInt(b)) => a.cmp(b),
        (Datum::Float(a), Datum::Float(b)) => java_double_compare(f64::from(*a), f64::from(*b)),
        (Datum::Double(a), Datum::Double(b)) => java_double_compare(*a, *b),
        // One column, one scale: the unscaled values order the numbers.
        (Datum::Decimal(a), Datum::Decimal(b)) => a.cmp(b),
        (Datum::Date(a), Datum::Date(b)) | (Datum::Time(a), Datum::Time(b)) => a.cmp(b),
        (Datum::Timestamp(a), Datum::Timestamp(b))
        | (Datum::TimestampLtz(a), Datum::TimestampLtz(b)) => a.cmp(b),
        // BinaryString.compareTo: unsigned bytes of the UTF-8 form.
        (Datum::String(a), Datum::String(b)) => a.as_bytes().cmp(b.as_bytes()),
        (Datum::Binary(a), Datum::Binary(b)) => a.cmp(b),
        _ => return None,
    })
}
