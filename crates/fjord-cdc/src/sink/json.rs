//! Hand-rolled JSON value formatting for the print sink: integers with `itoa`,
//! floats with `ryu` (shortest round-trip digits), exact decimals, dates and
//! date-times, base64 — all appended to a caller-owned byte buffer, with no
//! intermediate `String` or `serde_json::Value` per value.

use crate::row::{DecimalRef, RowRef};
use crate::types::{DataType, SlotKind};

/// Appends `text` as a JSON string literal (quotes included), escaping what JSON requires.
pub fn write_str(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in text.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&text[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&text[start..]);
    out.push(b'"');
}

/// Appends an integer.
pub fn write_i64(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

fn write_float_special(out: &mut Vec<u8>, is_nan: bool, positive: bool) {
    // JSON has no NaN/Infinity numbers; they are written as strings.
    out.extend_from_slice(match (is_nan, positive) {
        (true, _) => b"\"NaN\"",
        (false, true) => b"\"Infinity\"",
        (false, false) => b"\"-Infinity\"",
    });
}

/// Appends a `DOUBLE` (shortest digits that read back to the same value).
pub fn write_f64(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
    } else {
        write_float_special(out, value.is_nan(), value > 0.0);
    }
}

/// Appends a `FLOAT` (shortest digits of the single-precision value).
pub fn write_f32(out: &mut Vec<u8>, value: f32) {
    if value.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
    } else {
        write_float_special(out, value.is_nan(), value > 0.0);
    }
}

/// Appends a decimal string with exactly `scale` fraction digits from an
/// unscaled value given as sign + digits (no leading zeros needed).
fn write_decimal_digits(out: &mut Vec<u8>, negative: bool, digits: &[u8], scale: usize) {
    out.push(b'"');
    if negative && digits.iter().any(|&d| d != b'0') {
        out.push(b'-');
    }
    if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        out.extend_from_slice(int);
        if scale > 0 {
            out.push(b'.');
            out.extend_from_slice(frac);
        }
    } else {
        out.push(b'0');
        out.push(b'.');
        out.extend(std::iter::repeat_n(b'0', scale - digits.len()));
        out.extend_from_slice(digits);
    }
    out.push(b'"');
}

/// Appends a `DECIMAL` as a JSON string with exactly `scale` fraction digits.
pub fn write_decimal(out: &mut Vec<u8>, value: DecimalRef<'_>, scale: u8) {
    match value {
        DecimalRef::Unscaled(unscaled) => {
            let mut buf = itoa::Buffer::new();
            let text = buf.format(unscaled.unsigned_abs());
            write_decimal_digits(out, unscaled < 0, text.as_bytes(), usize::from(scale));
        }
        DecimalRef::Digits(text) => {
            let (negative, digits) = match text.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, text),
            };
            write_decimal_digits(out, negative, digits.as_bytes(), usize::from(scale));
        }
    }
}

/// Appends standard base64 (with padding) of `bytes`, quoted.
pub fn write_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.push(b'"');
    let mut chunks = bytes.chunks_exact(3);
    for c in &mut chunks {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend_from_slice(&[
            ALPHABET[(n >> 18) as usize & 63],
            ALPHABET[(n >> 12) as usize & 63],
            ALPHABET[(n >> 6) as usize & 63],
            ALPHABET[n as usize & 63],
        ]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend_from_slice(&[
                ALPHABET[(n >> 18) as usize & 63],
                ALPHABET[(n >> 12) as usize & 63],
                b'=',
                b'=',
            ]);
        }
        [a, b] => {
            let n = (u32::from(a) << 16) | (u32::from(b) << 8);
            out.extend_from_slice(&[
                ALPHABET[(n >> 18) as usize & 63],
                ALPHABET[(n >> 12) as usize & 63],
                ALPHABET[(n >> 6) as usize & 63],
                b'=',
            ]);
        }
        _ => {}
    }
    out.push(b'"');
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn push_2(out: &mut Vec<u8>, v: u32) {
    out.push(b'0' + (v / 10 % 10) as u8);
    out.push(b'0' + (v % 10) as u8);
}

fn push_date(out: &mut Vec<u8>, days: i64) {
    let (year, month, day) = civil_from_days(days);
    if (0..=9999).contains(&year) {
        let y = year as u32;
        push_2(out, y / 100);
        push_2(out, y % 100);
    } else {
        // ISO 8601 expanded years for the rare out-of-range value.
        if year > 0 {
            out.push(b'+');
        }
        out.extend_from_slice(itoa::Buffer::new().format(year).as_bytes());
    }
    out.push(b'-');
    push_2(out, month);
    out.push(b'-');
    push_2(out, day);
}

/// `.fff` with `precision` digits of `frac` (a fraction of a second with
/// `frac_digits` digits, 6 or 9); nothing for precision 0.
fn push_fraction(out: &mut Vec<u8>, frac: u64, frac_digits: u32, precision: u8) {
    if precision == 0 {
        return;
    }
    out.push(b'.');
    let mut divisor = 10u64.pow(frac_digits - 1);
    for _ in 0..precision.min(frac_digits as u8) {
        out.push(b'0' + (frac / divisor % 10) as u8);
        divisor /= 10;
    }
    // Precision above the stored unit (cannot happen: units follow precision) pads zeros.
    for _ in frac_digits as u8..precision {
        out.push(b'0');
    }
}

/// Appends a `DATE` (`"YYYY-MM-DD"`).
pub fn write_date(out: &mut Vec<u8>, days: i64) {
    out.push(b'"');
    push_date(out, days);
    out.push(b'"');
}

/// Units of a temporal slot: (units per second, fraction digits).
fn units(kind: SlotKind) -> (i64, u32) {
    match kind {
        SlotKind::Nanos => (1_000_000_000, 9),
        _ => (1_000_000, 6),
    }
}

/// Appends a `TIME(p)` (`"HH:MM:SS[.f]"`, signed, hours may exceed 23 as MySQL allows).
pub fn write_time(out: &mut Vec<u8>, value: i64, kind: SlotKind, precision: u8) {
    let (per_second, digits) = units(kind);
    out.push(b'"');
    if value < 0 {
        out.push(b'-');
    }
    let abs = value.unsigned_abs();
    let seconds = abs / per_second as u64;
    let frac = abs % per_second as u64;
    let hours = seconds / 3600;
    if hours < 100 {
        push_2(out, hours as u32);
    } else {
        out.extend_from_slice(itoa::Buffer::new().format(hours).as_bytes());
    }
    out.push(b':');
    push_2(out, (seconds / 60 % 60) as u32);
    out.push(b':');
    push_2(out, (seconds % 60) as u32);
    push_fraction(out, frac, digits, precision);
    out.push(b'"');
}

/// Appends a `TIMESTAMP(p)` (`"YYYY-MM-DDTHH:MM:SS[.f]"`) or, with `utc`, a
/// `TIMESTAMP_LTZ(p)` with a trailing `Z`.
pub fn write_timestamp(out: &mut Vec<u8>, value: i64, kind: SlotKind, precision: u8, utc: bool) {
    let (per_second, digits) = units(kind);
    let seconds = value.div_euclid(per_second);
    let frac = value.rem_euclid(per_second) as u64;
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400) as u32;
    out.push(b'"');
    push_date(out, days);
    out.push(b'T');
    push_2(out, second_of_day / 3600);
    out.push(b':');
    push_2(out, second_of_day / 60 % 60);
    out.push(b':');
    push_2(out, second_of_day % 60);
    push_fraction(out, frac, digits, precision);
    if utc {
        out.push(b'Z');
    }
    out.push(b'"');
}

/// Appends column `i` of `row` as a JSON value according to its type.
pub fn write_value(out: &mut Vec<u8>, row: &RowRef<'_>, i: usize) {
    if row.is_null(i) {
        out.extend_from_slice(b"null");
        return;
    }
    let layout = row.layout();
    match layout.data_type(i) {
        DataType::Boolean => {
            out.extend_from_slice(if row.get_bool(i) { b"true" } else { b"false" })
        }
        DataType::TinyInt | DataType::SmallInt | DataType::Int | DataType::BigInt => {
            write_i64(out, row.get_i64(i))
        }
        DataType::Float => write_f32(out, row.get_f32(i)),
        DataType::Double => write_f64(out, row.get_f64(i)),
        DataType::Decimal { scale, .. } => write_decimal(out, row.get_decimal(i), scale),
        DataType::Char { .. } | DataType::Varchar { .. } | DataType::String => {
            write_str(out, row.get_text_bytes(i))
        }
        DataType::Json => {
            let text = row.get_text_bytes(i).trim_ascii();
            if text.is_empty() {
                out.extend_from_slice(b"null");
            } else {
                out.extend_from_slice(text);
            }
        }
        DataType::Binary { .. } | DataType::Varbinary { .. } | DataType::Bytes => {
            write_base64(out, row.get_bytes(i))
        }
        DataType::Date => write_date(out, row.get_i64(i)),
        DataType::Time { precision } => {
            write_time(out, row.get_temporal_raw(i), layout.kind(i), precision)
        }
        DataType::Timestamp { precision } => write_timestamp(
            out,
            row.get_temporal_raw(i),
            layout.kind(i),
            precision,
            false,
        ),
        DataType::TimestampLtz { precision } => write_timestamp(
            out,
            row.get_temporal_raw(i),
            layout.kind(i),
            precision,
            true,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(
            text(|o| write_str(o, b"a\"b\\c\nd\x01")),
            r#""a\"b\\c\nd\u0001""#
        );
        assert_eq!(text(|o| write_str(o, "héllo".as_bytes())), "\"héllo\"");
    }

    #[test]
    fn decimals_keep_exact_scale() {
        let check = |v: DecimalRef<'_>, scale: u8, expected: &str| {
            assert_eq!(text(|o| write_decimal(o, v, scale)), expected);
        };
        check(DecimalRef::Unscaled(12345), 2, "\"123.45\"");
        check(DecimalRef::Unscaled(-5), 3, "\"-0.005\"");
        check(DecimalRef::Unscaled(0), 2, "\"0.00\"");
        check(DecimalRef::Unscaled(42), 0, "\"42\"");
        check(
            DecimalRef::Unscaled(i64::MIN),
            0,
            "\"-9223372036854775808\"",
        );
        check(
            DecimalRef::Digits("18446744073709551615"),
            0,
            "\"18446744073709551615\"",
        );
        check(
            DecimalRef::Digits("-1234567890123456789012345"),
            10,
            "\"-123456789012345.6789012345\"",
        );
    }

    #[test]
    fn base64_pads_every_remainder() {
        assert_eq!(text(|o| write_base64(o, b"")), "\"\"");
        assert_eq!(text(|o| write_base64(o, b"f")), "\"Zg==\"");
        assert_eq!(text(|o| write_base64(o, b"fo")), "\"Zm8=\"");
        assert_eq!(text(|o| write_base64(o, b"foo")), "\"Zm9v\"");
        assert_eq!(
            text(|o| write_base64(o, &[0xff, 0xfe, 0xfd, 0x00])),
            "\"//79AA==\""
        );
    }

    #[test]
    fn dates_and_times_use_the_column_precision() {
        assert_eq!(text(|o| write_date(o, 0)), "\"1970-01-01\"");
        assert_eq!(text(|o| write_date(o, -1)), "\"1969-12-31\"");
        assert_eq!(text(|o| write_date(o, 2_932_896)), "\"9999-12-31\"");
        assert_eq!(text(|o| write_date(o, -354_285)), "\"1000-01-01\"");
        assert_eq!(
            text(|o| write_time(o, 45_296_789_000, SlotKind::Micros, 3)),
            "\"12:34:56.789\""
        );
        assert_eq!(
            text(|o| write_time(o, -3_020_399_000_000, SlotKind::Micros, 0)),
            "\"-838:59:59\""
        );
        assert_eq!(
            text(|o| write_timestamp(o, 1_700_000_000_123_456, SlotKind::Micros, 6, false)),
            "\"2023-11-14T22:13:20.123456\""
        );
        assert_eq!(
            text(|o| write_timestamp(o, -1, SlotKind::Micros, 6, true)),
            "\"1969-12-31T23:59:59.999999Z\""
        );
        assert_eq!(
            text(|o| write_timestamp(o, 1_000_000_001, SlotKind::Nanos, 9, false)),
            "\"1970-01-01T00:00:01.000000001\""
        );
    }

    #[test]
    fn floats_are_shortest_round_trip_and_non_finite_are_strings() {
        assert_eq!(text(|o| write_f64(o, 0.1)), "0.1");
        assert_eq!(text(|o| write_f32(o, 0.1)), "0.1");
        assert_eq!(text(|o| write_f64(o, f64::NAN)), "\"NaN\"");
        assert_eq!(text(|o| write_f64(o, f64::NEG_INFINITY)), "\"-Infinity\"");
    }
}
