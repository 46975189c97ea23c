//! Debezium field schemas → Fjord column types and per-column decoders
//! (prepared once per table schema), and the value decoders themselves:
//! base64, Kafka Connect decimals, decimal text, ISO-8601 zoned timestamps.

use serde_json::Value;

use crate::config::DecimalHandling;
use crate::row::RowWriter;
use crate::types::{DataType, DECIMAL_COMPACT_PRECISION_MAX, DECIMAL_PRECISION_MAX};

use super::scan::{parse_i64, Kind, ScanError, Scanner};

/// Most bytes of a Kafka Connect decimal's unscaled value: 65 decimal digits
/// need 28 bytes; the cap keeps the (quadratic) digit conversion bounded on
/// hostile input.
pub const DECIMAL_BYTES_MAX: usize = 32;

/// How one column's JSON value becomes a row value. Chosen once per column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoder {
    /// `true`/`false`.
    Bool,
    /// An integer (also `Date` days and `Year`).
    Int,
    /// A JSON number as `FLOAT`.
    Float,
    /// A JSON number as `DOUBLE`.
    Double,
    /// `org.apache.kafka.connect.data.Decimal`: base64 big-endian two's-complement unscaled bytes.
    DecimalBytes,
    /// Decimal text (`decimal.handling.mode: string`) or a JSON number (`double`), kept exact as written.
    DecimalText,
    /// A JSON string as text.
    Text,
    /// Base64 bytes.
    Bytes,
    /// Milliseconds (`Time`, `Timestamp`).
    Millis,
    /// Microseconds (`MicroTime`, `MicroTimestamp`).
    Micros,
    /// Nanoseconds (`NanoTime`, `NanoTimestamp`).
    Nanos,
    /// `ZonedTimestamp`: ISO-8601 text with an offset.
    Zoned,
    /// Schemaless text column: any JSON value, strings unescaped, others as their JSON text.
    AnyAsText,
    /// Schemaless JSON column: any value's JSON text.
    RawJson,
}

/// A column definition derived from a Debezium field schema.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldDef {
    /// Column name.
    pub name: String,
    /// Logical type.
    pub data_type: DataType,
    /// Whether NULL is allowed (`optional`).
    pub nullable: bool,
    /// How values are read.
    pub decoder: Decoder,
}

fn param<'v>(field: &'v Value, key: &str) -> Option<&'v str> {
    field.get("parameters")?.get(key)?.as_str()
}

fn param_u8(field: &Value, key: &str) -> Option<u8> {
    param(field, key)?.parse().ok()
}

/// Maps one Debezium/Kafka Connect field schema to a column. Errors name the field.
pub fn field_def(field: &Value, decimals: DecimalHandling) -> Result<FieldDef, String> {
    let name = field
        .get("field")
        .and_then(Value::as_str)
        .ok_or("field without a `field` name")?
        .to_string();
    let kind = field.get("type").and_then(Value::as_str).unwrap_or("");
    let logical = field.get("name").and_then(Value::as_str).unwrap_or("");
    let nullable = field
        .get("optional")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let source_type = param(field, "__debezium.source.column.type").unwrap_or("");
    let (data_type, decoder) = match logical {
        "org.apache.kafka.connect.data.Decimal" => {
            let scale = param_u8(field, "scale").unwrap_or(0);
            let precision = param_u8(field, "connect.decimal.precision")
                .unwrap_or(DECIMAL_PRECISION_MAX)
                .max(scale)
                .max(1);
            (DataType::Decimal { precision, scale }, Decoder::DecimalBytes)
        }
        "io.debezium.data.VariableScaleDecimal" => {
            return Err(format!(
                "field {name:?}: io.debezium.data.VariableScaleDecimal is not supported yet; set decimal.handling.mode=string in Debezium"
            ))
        }
        "io.debezium.time.Date" | "org.apache.kafka.connect.data.Date" => {
            (DataType::Date, Decoder::Int)
        }
        "io.debezium.time.Time" | "org.apache.kafka.connect.data.Time" => {
            (DataType::Time { precision: 3 }, Decoder::Millis)
        }
        "io.debezium.time.MicroTime" => (DataType::Time { precision: 6 }, Decoder::Micros),
        "io.debezium.time.NanoTime" => (DataType::Time { precision: 9 }, Decoder::Nanos),
        "io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp" => {
            (DataType::Timestamp { precision: 3 }, Decoder::Millis)
        }
        "io.debezium.time.MicroTimestamp" => {
            (DataType::Timestamp { precision: 6 }, Decoder::Micros)
        }
        "io.debezium.time.NanoTimestamp" => (DataType::Timestamp { precision: 9 }, Decoder::Nanos),
        "io.debezium.time.ZonedTimestamp" => {
            let precision = param_u8(field, "__debezium.source.column.length")
                .filter(|p| *p <= 9)
                .unwrap_or(6);
            (DataType::TimestampLtz { precision }, Decoder::Zoned)
        }
        "io.debezium.time.Year" => (DataType::Int, Decoder::Int),
        "io.debezium.data.Json" => (DataType::Json, Decoder::Text),
        l if l.starts_with("io.debezium.data.geometry.") => {
            return Err(format!("field {name:?}: spatial type {l} is not supported"))
        }
        _ => {
            let is_decimal_source = matches!(
                source_type.to_ascii_uppercase().as_str(),
                "DECIMAL" | "NUMERIC" | "DECIMAL UNSIGNED" | "NUMERIC UNSIGNED"
            );
            match kind {
                "string" | "float64" | "double"
                    if is_decimal_source && decimals != DecimalHandling::Precise =>
                {
                    let precision = param_u8(field, "__debezium.source.column.length")
                        .unwrap_or(DECIMAL_PRECISION_MAX)
                        .clamp(1, DECIMAL_PRECISION_MAX);
                    let scale = param_u8(field, "__debezium.source.column.scale")
                        .unwrap_or(0)
                        .min(precision);
                    (DataType::Decimal { precision, scale }, Decoder::DecimalText)
                }
                "boolean" => (DataType::Boolean, Decoder::Bool),
                "int8" => (DataType::TinyInt, Decoder::Int),
                "int16" => (DataType::SmallInt, Decoder::Int),
                "int32" => (DataType::Int, Decoder::Int),
                "int64" => (DataType::BigInt, Decoder::Int),
                "float32" | "float" => (DataType::Float, Decoder::Float),
                "float64" | "double" => (DataType::Double, Decoder::Double),
                "string" => (DataType::String, Decoder::Text),
                "bytes" => (DataType::Bytes, Decoder::Bytes),
                other => {
                    return Err(format!(
                        "field {name:?}: Kafka Connect type {other:?} is not supported in a row"
                    ))
                }
            }
        }
    };
    Ok(FieldDef {
        name,
        data_type,
        nullable,
        decoder,
    })
}

/// A column inferred from the first value seen in a schemaless envelope.
pub fn inferred_def(name: &str, kind: Kind, number: &[u8]) -> FieldDef {
    let (data_type, decoder) = match kind {
        Kind::Bool => (DataType::Boolean, Decoder::Bool),
        Kind::Number if parse_i64(number).is_some() => (DataType::BigInt, Decoder::Int),
        Kind::Number => (DataType::Double, Decoder::Double),
        Kind::Object | Kind::Array => (DataType::Json, Decoder::RawJson),
        Kind::String | Kind::Null => (DataType::String, Decoder::AnyAsText),
    };
    FieldDef {
        name: name.to_string(),
        data_type,
        nullable: true,
        decoder,
    }
}

/// Reusable buffers for decoding.
#[derive(Default)]
pub struct Scratch {
    key: Vec<u8>,
    text: Vec<u8>,
    bytes: Vec<u8>,
    digits: Vec<u8>,
}

impl Scratch {
    /// The buffer for unescaped object keys.
    pub fn key(&mut self) -> &mut Vec<u8> {
        &mut self.key
    }
}

/// A value that does not fit its column.
#[derive(Debug)]
pub enum ValueError {
    /// JSON syntax.
    Scan(ScanError),
    /// Well-formed JSON of the wrong shape for the column.
    Invalid(&'static str),
}

impl From<ScanError> for ValueError {
    fn from(e: ScanError) -> Self {
        ValueError::Scan(e)
    }
}

fn parse_f64(text: &[u8]) -> Result<f64, ValueError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or(ValueError::Invalid("expected a number"))
}

/// Decodes the next JSON value of `scanner` into column `i` of `row`.
pub fn decode_value(
    scanner: &mut Scanner<'_>,
    decoder: Decoder,
    data_type: DataType,
    row: &mut RowWriter<'_>,
    i: usize,
    scratch: &mut Scratch,
) -> Result<(), ValueError> {
    if scanner.null()? {
        return Ok(());
    }
    match decoder {
        Decoder::Bool => row.set_bool(i, scanner.boolean()?),
        Decoder::Int => row.set_i64(i, scanner.integer()?),
        Decoder::Float => row.set_f32(i, parse_f64(scanner.number()?)? as f32),
        Decoder::Double => row.set_f64(i, parse_f64(scanner.number()?)?),
        Decoder::Millis => row.set_micros(i, scanner.integer()?.saturating_mul(1000)),
        Decoder::Micros => row.set_micros(i, scanner.integer()?),
        Decoder::Nanos => row.set_nanos(i, scanner.integer()?),
        Decoder::Text => {
            let text = scanner.string(&mut scratch.text)?;
            let text = std::str::from_utf8(text)
                .map_err(|_| ValueError::Invalid("string is not UTF-8"))?;
            row.set_str(i, text);
        }
        Decoder::Bytes => {
            let text = scanner.string(&mut scratch.text)?;
            base64_decode(text, &mut scratch.bytes).ok_or(ValueError::Invalid("invalid base64"))?;
            row.set_bytes(i, &scratch.bytes);
        }
        Decoder::DecimalBytes => {
            let DataType::Decimal { precision, .. } = data_type else {
                return Err(ValueError::Invalid(
                    "decimal decoder on a non-decimal column",
                ));
            };
            let text = scanner.string(&mut scratch.text)?;
            base64_decode(text, &mut scratch.bytes).ok_or(ValueError::Invalid("invalid base64"))?;
            if scratch.bytes.len() > DECIMAL_BYTES_MAX {
                return Err(ValueError::Invalid(
                    "decimal has more digits than the column's precision",
                ));
            }
            let negative = twos_complement_to_digits(&scratch.bytes, &mut scratch.digits);
            store_decimal_digits(row, i, negative, &scratch.digits, precision)?;
        }
        Decoder::DecimalText => {
            let DataType::Decimal { precision, scale } = data_type else {
                return Err(ValueError::Invalid(
                    "decimal decoder on a non-decimal column",
                ));
            };
            let text = match scanner.peek_kind()? {
                Kind::Number => scanner.number()?,
                _ => scanner.string(&mut scratch.text)?,
            };
            let negative = decimal_text_to_unscaled(text, scale, &mut scratch.digits).ok_or(
                ValueError::Invalid("expected a decimal number within the column's scale"),
            )?;
            store_decimal_digits(row, i, negative, &scratch.digits, precision)?;
        }
        Decoder::Zoned => {
            let text = scanner.string(&mut scratch.text)?;
            let nanos = parse_zoned_timestamp(text).ok_or(ValueError::Invalid(
                "expected an ISO-8601 timestamp with offset",
            ))?;
            row.set_nanos(i, nanos);
        }
        Decoder::AnyAsText => match scanner.peek_kind()? {
            Kind::String => {
                let text = scanner.string(&mut scratch.text)?;
                let text = std::str::from_utf8(text)
                    .map_err(|_| ValueError::Invalid("string is not UTF-8"))?;
                row.set_str(i, text);
            }
            _ => {
                let raw = scanner.skip_value()?;
                row.set_str(
                    i,
                    std::str::from_utf8(raw).map_err(|_| ValueError::Invalid("not UTF-8"))?,
                );
            }
        },
        Decoder::RawJson => {
            let raw = scanner.skip_value()?;
            row.set_str(
                i,
                std::str::from_utf8(raw).map_err(|_| ValueError::Invalid("not UTF-8"))?,
            );
        }
    }
    Ok(())
}

fn store_decimal_digits(
    row: &mut RowWriter<'_>,
    i: usize,
    negative: bool,
    digits: &[u8],
    precision: u8,
) -> Result<(), ValueError> {
    let significant = digits
        .iter()
        .position(|&d| d != b'0')
        .map_or(0, |p| digits.len() - p);
    if significant > usize::from(precision) {
        return Err(ValueError::Invalid(
            "decimal has more digits than the column's precision",
        ));
    }
    if precision <= DECIMAL_COMPACT_PRECISION_MAX {
        row.set_decimal_digits(i, negative, &digits[digits.len() - significant..]);
    } else {
        row.set_decimal_digits(i, negative, digits);
    }
    Ok(())
}

/// Decodes standard base64 (padding optional) into `out`; `None` if invalid.
pub fn base64_decode(text: &[u8], out: &mut Vec<u8>) -> Option<()> {
    out.clear();
    let text = match text {
        [rest @ .., b'=', b'='] => rest,
        [rest @ .., b'='] => rest,
        _ => text,
    };
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut chunks = text.chunks_exact(4);
    for c in &mut chunks {
        let n = (value(c[0])? << 18) | (value(c[1])? << 12) | (value(c[2])? << 6) | value(c[3])?;
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
    }
    match *chunks.remainder() {
        [] => {}
        [a, b] => {
            let n = (value(a)? << 18) | (value(b)? << 12);
            out.push((n >> 16) as u8);
        }
        [a, b, c] => {
            let n = (value(a)? << 18) | (value(b)? << 12) | (value(c)? << 6);
            out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8]);
        }
        _ => return None,
    }
    Some(())
}

/// Converts big-endian two's-complement bytes to the decimal digits of their
/// magnitude in `digits` (no leading zeros; `0` for zero); returns the sign.
pub fn twos_complement_to_digits(bytes: &[u8], digits: &mut Vec<u8>) -> bool {
    digits.clear();
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    if bytes.len() <= 16 {
        // Fast path (precision ≤ 38): sign-extend into an i128, no allocation.
        let mut value: i128 = if negative { -1 } else { 0 };
        for &b in bytes {
            value = (value << 8) | i128::from(b);
        }
        digits.extend_from_slice(itoa::Buffer::new().format(value.unsigned_abs()).as_bytes());
        return negative;
    }
    // Magnitude as big-endian base-2^32 limbs.
    let mut magnitude: Vec<u32> = Vec::with_capacity(bytes.len() / 4 + 1);
    let mut padded = vec![if negative { 0xff } else { 0 }; (4 - bytes.len() % 4) % 4];
    padded.extend_from_slice(bytes);
    for chunk in padded.chunks_exact(4) {
        magnitude.push(u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
    }
    if negative {
        // Two's complement negate: invert and add one.
        let mut carry = 1u64;
        for limb in magnitude.iter_mut().rev() {
            let v = u64::from(!*limb) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
    }
    // Repeated division by 10^9.
    let mut chunks: Vec<u32> = Vec::new();
    while magnitude.iter().any(|&l| l != 0) {
        let mut rem = 0u64;
        for limb in magnitude.iter_mut() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        chunks.push(rem as u32);
    }
    match chunks.split_last() {
        None => digits.push(b'0'),
        Some((most, rest)) => {
            digits.extend_from_slice(itoa::Buffer::new().format(*most).as_bytes());
            for chunk in rest.iter().rev() {
                let mut buf = itoa::Buffer::new();
                let text = buf.format(*chunk);
                digits.extend(std::iter::repeat_n(b'0', 9 - text.len()));
                digits.extend_from_slice(text.as_bytes());
            }
        }
    }
    negative
}

/// Converts decimal text (`-12.5`, `1.25E+3`) into the unscaled digits at
/// `scale` (padding fraction zeros); `None` if it is not a number or needs
/// non-zero digits beyond `scale`. Returns the sign.
pub fn decimal_text_to_unscaled(text: &[u8], scale: u8, digits: &mut Vec<u8>) -> Option<bool> {
    digits.clear();
    let (negative, text) = match text.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, text),
    };
    let (mantissa, exponent) = match text.iter().position(|&c| c == b'e' || c == b'E') {
        Some(p) => (
            &text[..p],
            std::str::from_utf8(&text[p + 1..])
                .ok()?
                .parse::<i32>()
                .ok()?,
        ),
        None => (text, 0),
    };
    let (int, frac) = match mantissa.iter().position(|&c| c == b'.') {
        Some(p) => (&mantissa[..p], &mantissa[p + 1..]),
        None => (mantissa, &mantissa[..0]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    digits.extend_from_slice(int);
    digits.extend_from_slice(frac);
    // Value = digits × 10^(exponent − frac_len); we need digits × 10^scale.
    let shift = i64::from(exponent) - frac.len() as i64 + i64::from(scale);
    if shift >= 0 {
        if shift > i64::from(DECIMAL_PRECISION_MAX) + 2 {
            return None;
        }
        digits.extend(std::iter::repeat_n(b'0', shift as usize));
    } else {
        let drop = (-shift) as usize;
        let keep = digits.len().saturating_sub(drop);
        if digits[keep..].iter().any(|&d| d != b'0') {
            return None;
        }
        digits.truncate(keep);
        if digits.is_empty() {
            digits.push(b'0');
        }
    }
    Some(negative)
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn digits_n(text: &[u8], at: usize, n: usize) -> Option<u32> {
    let slice = text.get(at..at + n)?;
    let mut v = 0u32;
    for &d in slice {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(d - b'0');
    }
    Some(v)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` into nanoseconds since
/// 1970-01-01T00:00Z.
pub fn parse_zoned_timestamp(text: &[u8]) -> Option<i64> {
    let year = digits_n(text, 0, 4)?;
    let month = digits_n(text, 5, 2)?;
    let day = digits_n(text, 8, 2)?;
    let hour = digits_n(text, 11, 2)?;
    let minute = digits_n(text, 14, 2)?;
    let second = digits_n(text, 17, 2)?;
    if text.get(4) != Some(&b'-')
        || text.get(7) != Some(&b'-')
        || !matches!(text.get(10), Some(b'T' | b' '))
        || text.get(13) != Some(&b':')
        || text.get(16) != Some(&b':')
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut at = 19;
    let mut nanos = 0i64;
    if text.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while let Some(d @ b'0'..=b'9') = text.get(at) {
            if at - start < 9 {
                nanos = nanos * 10 + i64::from(d - b'0');
            }
            at += 1;
        }
        let n = at - start;
        if n == 0 {
            return None;
        }
        for _ in n..9 {
            nanos *= 10;
        }
    }
    let offset_seconds: i64 = match text.get(at..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), ..] => {
            let rest = &text[at + 1..];
            let hours = digits_n(rest, 0, 2)?;
            let minutes = match rest.len() {
                2 => 0,
                5 if rest[2] == b':' => digits_n(rest, 3, 2)?,
                4 => digits_n(rest, 2, 2)?,
                _ => return None,
            };
            let s = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'-' {
                -s
            } else {
                s
            }
        }
        _ => return None,
    };
    let days = days_from_civil(i64::from(year), month, day);
    let seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_seconds;
    seconds.checked_mul(1_000_000_000)?.checked_add(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::json::civil_from_days;

    #[test]
    fn civil_day_conversions_agree() {
        for days in [-719_468, -1, 0, 1, 19_723, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn base64_round_trips_and_rejects_garbage() {
        let mut out = Vec::new();
        base64_decode(b"AP8=", &mut out).unwrap();
        assert_eq!(out, [0, 255]);
        base64_decode(b"aGVsbG8", &mut out).unwrap();
        assert_eq!(out, b"hello");
        assert!(base64_decode(b"a$==", &mut out).is_none());
        assert!(base64_decode(b"a", &mut out).is_none());
    }

    #[test]
    fn connect_decimal_bytes_decode_exactly() {
        let mut digits = Vec::new();
        let check = |bytes: &[u8], negative: bool, expected: &str, digits: &mut Vec<u8>| {
            assert_eq!(twos_complement_to_digits(bytes, digits), negative);
            assert_eq!(std::str::from_utf8(digits).unwrap(), expected);
        };
        check(&[0x30, 0x39], false, "12345", &mut digits);
        check(&[0xcf, 0xc7], true, "12345", &mut digits);
        check(&[0x00], false, "0", &mut digits);
        check(&[0xff], true, "1", &mut digits);
        // 2^64 - 1 = 18446744073709551615 (BIGINT UNSIGNED max), with a sign byte.
        check(
            &[0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            false,
            "18446744073709551615",
            &mut digits,
        );
        check(
            &[0x80, 0, 0, 0, 0, 0, 0, 0],
            true,
            "9223372036854775808",
            &mut digits,
        );
    }

    #[test]
    fn decimal_text_scales_exactly() {
        let mut digits = Vec::new();
        let mut check = |text: &str, scale: u8, expected: Option<(bool, &str)>| {
            let got = decimal_text_to_unscaled(text.as_bytes(), scale, &mut digits)
                .map(|neg| (neg, String::from_utf8(digits.clone()).unwrap()));
            assert_eq!(got, expected.map(|(n, d)| (n, d.to_string())), "{text}");
        };
        check("12.5", 2, Some((false, "1250")));
        check("-0.05", 2, Some((true, "005")));
        check("1.25E+3", 0, Some((false, "1250")));
        check("1.2300", 2, Some((false, "123")));
        check("1.234", 2, None);
        check("abc", 2, None);
        check("", 2, None);
    }

    #[test]
    fn zoned_timestamps_apply_their_offset() {
        assert_eq!(parse_zoned_timestamp(b"1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_zoned_timestamp(b"2018-06-20T06:37:03.123-07:00"),
            Some(1_529_501_823_123_000_000)
        );
        assert_eq!(
            parse_zoned_timestamp(b"2024-01-01T00:00:00.123456789+01:00"),
            Some(1_704_063_600_123_456_789)
        );
        assert_eq!(parse_zoned_timestamp(b"2024-13-01T00:00:00Z"), None);
        assert_eq!(parse_zoned_timestamp(b"2024-01-01T00:00:00"), None);
    }
}
