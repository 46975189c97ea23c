//! Calendar arithmetic and MySQL's temporal encodings: the binlog's packed
//! `DATE` / `TIME2` / `DATETIME2` / `TIMESTAMP2` forms and the text forms a
//! snapshot query returns. Pure functions on bytes, no allocation.

/// Microseconds per second.
pub(crate) const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`). Callers validate month 1..=12 and day 1..=31.
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn valid_date(month: u32, day: u32) -> bool {
    (1..=12).contains(&month) && (1..=31).contains(&day)
}

/// Fractional-second bytes that follow a packed temporal value of `fsp` digits.
pub(crate) fn frac_bytes(fsp: u8) -> usize {
    usize::from(fsp).div_ceil(2)
}

#[inline]
fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// Microseconds of a fraction stored in `frac_bytes(fsp)` big-endian bytes.
#[inline]
fn frac_micros(bytes: &[u8], fsp: u8) -> i64 {
    match fsp {
        1 | 2 => be(bytes) as i64 * 10_000,
        3 | 4 => be(bytes) as i64 * 100,
        5 | 6 => be(bytes) as i64,
        _ => 0,
    }
}

/// Binlog `DATE` (3 bytes little-endian, `year << 9 | month << 5 | day`) as
/// days since 1970-01-01; `None` for zero or partial dates (`0000-00-00`).
#[inline]
pub(crate) fn date_days(bytes: [u8; 3]) -> Option<i64> {
    let v = u32::from(bytes[0]) | u32::from(bytes[1]) << 8 | u32::from(bytes[2]) << 16;
    let day = v & 31;
    let month = (v >> 5) & 15;
    let year = v >> 9;
    valid_date(month, day).then(|| days_from_civil(i64::from(year), month, day))
}

/// Binlog `DATETIME2`: 5 bytes big-endian packed date-time plus the fraction,
/// as microseconds since 1970-01-01T00:00 of the wall-clock value; `None` for
/// zero dates. `bytes` holds exactly `5 + frac_bytes(fsp)` bytes.
#[inline]
pub(crate) fn datetime2_micros(bytes: &[u8], fsp: u8) -> Option<i64> {
    let packed = be(&bytes[..5]) as i64 - 0x80_0000_0000;
    let ymd = packed >> 17;
    let ym = ymd >> 5;
    let day = (ymd & 31) as u32;
    let month = (ym % 13) as u32;
    let year = ym / 13;
    let hms = packed & 0x1_ffff;
    let second = hms & 63;
    let minute = (hms >> 6) & 63;
    let hour = hms >> 12;
    if !valid_date(month, day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(
        days * MICROS_PER_DAY
            + (hour * 3600 + minute * 60 + second) * MICROS_PER_SECOND
            + frac_micros(&bytes[5..], fsp),
    )
}

/// Binlog `TIMESTAMP2`: 4 bytes big-endian seconds since the epoch (UTC) plus
/// the fraction, as microseconds since the epoch.
#[inline]
pub(crate) fn timestamp2_micros(bytes: &[u8], fsp: u8) -> i64 {
    be(&bytes[..4]) as i64 * MICROS_PER_SECOND + frac_micros(&bytes[4..], fsp)
}

/// Binlog `TIME2`: 3 bytes big-endian offset-encoded `hours:10 minutes:6
/// seconds:6` plus the fraction, as signed microseconds.
pub(crate) fn time2_micros(bytes: &[u8], fsp: u8) -> i64 {
    const INT_OFFSET: i64 = 0x80_0000;
    // Build MySQL's "packed time" (integer part << 24 | microseconds) first:
    // negative values borrow from the integer part when a fraction is present.
    let packed: i64 = match fsp {
        1 | 2 => {
            let mut int = be(&bytes[..3]) as i64 - INT_OFFSET;
            let mut frac = i64::from(bytes[3]);
            if int < 0 && frac != 0 {
                int += 1;
                frac -= 0x100;
            }
            (int << 24) + frac * 10_000
        }
        3 | 4 => {
            let mut int = be(&bytes[..3]) as i64 - INT_OFFSET;
            let mut frac = be(&bytes[3..5]) as i64;
            if int < 0 && frac != 0 {
                int += 1;
                frac -= 0x1_0000;
            }
            (int << 24) + frac * 100
        }
        5 | 6 => be(&bytes[..6]) as i64 - 0x8000_0000_0000,
        _ => (be(&bytes[..3]) as i64 - INT_OFFSET) << 24,
    };
    let negative = packed < 0;
    let magnitude = packed.unsigned_abs() as i64;
    let hms = magnitude >> 24;
    let micros = magnitude & 0xff_ffff;
    let hour = (hms >> 12) & 0x3ff;
    let minute = (hms >> 6) & 63;
    let second = hms & 63;
    let total = (hour * 3600 + minute * 60 + second) * MICROS_PER_SECOND + micros;
    if negative {
        -total
    } else {
        total
    }
}

/// Reads `digits` ASCII digits as a number; `None` if any is not a digit.
fn digits(text: &[u8]) -> Option<i64> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

/// Microseconds of a text fraction `.ffffff` (the part after the dot, 1..=6 digits).
fn text_frac(text: &[u8]) -> Option<i64> {
    if text.is_empty() || text.len() > 6 {
        return None;
    }
    let value = digits(text)?;
    Some(value * 10i64.pow(6 - text.len() as u32))
}

/// Text `YYYY-MM-DD` as days since 1970-01-01; `None` for zero dates or bad text.
pub(crate) fn parse_date(text: &[u8]) -> Option<i64> {
    if text.len() != 10 || text[4] != b'-' || text[7] != b'-' {
        return None;
    }
    let year = digits(&text[..4])?;
    let month = digits(&text[5..7])? as u32;
    let day = digits(&text[8..10])? as u32;
    valid_date(month, day).then(|| days_from_civil(year, month, day))
}

/// Text `YYYY-MM-DD hh:mm:ss[.ffffff]` as microseconds since 1970-01-01T00:00;
/// `None` for zero dates or bad text.
pub(crate) fn parse_datetime(text: &[u8]) -> Option<i64> {
    if text.len() < 19 || text[10] != b' ' {
        return None;
    }
    let days = parse_date(&text[..10])?;
    let (h, m, s) = (&text[11..13], &text[14..16], &text[17..19]);
    if text[13] != b':' || text[16] != b':' {
        return None;
    }
    let frac = match text.get(19) {
        None => 0,
        Some(b'.') => text_frac(&text[20..])?,
        Some(_) => return None,
    };
    Some(
        days * MICROS_PER_DAY
            + (digits(h)? * 3600 + digits(m)? * 60 + digits(s)?) * MICROS_PER_SECOND
            + frac,
    )
}

/// Text `[-]h..h:mm:ss[.ffffff]` (MySQL `TIME`, up to ±838 hours) as signed microseconds.
pub(crate) fn parse_time(text: &[u8]) -> Option<i64> {
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (int, frac) = match text.iter().position(|&c| c == b'.') {
        Some(dot) => (&text[..dot], text_frac(&text[dot + 1..])?),
        None => (text, 0),
    };
    let mut parts = int.split(|&c| c == b':');
    let hours = digits(parts.next()?)?;
    let minutes = digits(parts.next()?)?;
    let seconds = digits(parts.next()?)?;
    if parts.next().is_some() || minutes > 59 || seconds > 59 {
        return None;
    }
    let total = (hours * 3600 + minutes * 60 + seconds) * MICROS_PER_SECOND + frac;
    Some(if negative { -total } else { total })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(1000, 1, 1), -354_285);
        assert_eq!(days_from_civil(9999, 12, 31), 2_932_896);
    }

    #[test]
    fn text_forms_parse_exactly() {
        assert_eq!(parse_date(b"1970-01-02"), Some(1));
        assert_eq!(parse_date(b"0000-00-00"), None);
        assert_eq!(parse_datetime(b"1970-01-01 00:00:01.5"), Some(1_500_000));
        assert_eq!(
            parse_datetime(b"1970-01-01 00:00:01.000001"),
            Some(1_000_001)
        );
        assert_eq!(parse_time(b"-838:59:59.000001"), Some(-3_020_399_000_001));
        assert_eq!(parse_time(b"01:02:03"), Some(3_723_000_000));
        assert_eq!(parse_time(b"1:2"), None);
        assert_eq!(parse_datetime(b"garbage"), None);
    }

    #[test]
    fn packed_binlog_forms_decode() {
        // DATE 2024-02-29: 2024 << 9 | 2 << 5 | 29
        let v: u32 = (2024 << 9) | (2 << 5) | 29;
        let b = v.to_le_bytes();
        assert_eq!(
            date_days([b[0], b[1], b[2]]),
            Some(days_from_civil(2024, 2, 29))
        );
        // DATETIME2 1970-01-01 00:00:01 with fsp 0.
        let ym: i64 = 1970 * 13 + 1;
        let packed = ((((ym << 5) | 1) << 17) | 1) + 0x80_0000_0000;
        let bytes = &packed.to_be_bytes()[3..];
        assert_eq!(datetime2_micros(bytes, 0), Some(1_000_000));
        // TIME2 -00:00:01.5 with fsp 1: MySQL stores int part -2 and fraction
        // byte -50 (the packed value's floor and C remainder).
        let int = (0x80_0000i64 - 2) as u32;
        let mut t = int.to_be_bytes()[1..].to_vec();
        t.push((0x100 - 50) as u8); // -50 as a byte
        assert_eq!(time2_micros(&t, 1), -1_500_000);
        // TIME2 12:34:56 fsp 0.
        let hms: i64 = (12 << 12) | (34 << 6) | 56;
        let t = ((hms + 0x80_0000) as u32).to_be_bytes();
        assert_eq!(
            time2_micros(&t[1..], 0),
            (12 * 3600 + 34 * 60 + 56) * 1_000_000
        );
        assert_eq!(
            timestamp2_micros(&[0, 0, 0, 2, 0x27, 0x0f], 4),
            2_000_000 + 9999 * 100
        );
    }
}
