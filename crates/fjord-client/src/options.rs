//! Fluss option value syntax shared by every `client.*` option family:
//! memory sizes (Fluss's `MemorySize`) and durations (Fluss's
//! `TimeUtils.parseDuration`). One parser each, so the writer's and the
//! scanner's options accept the same spellings; each config turns `None`
//! into an error naming its own option and bounds.

use std::time::Duration;

/// A memory size: a whole number, then optionally a unit (`b`, `k`/`kb`,
/// `m`/`mb`, `g`/`gb`, `t`/`tb` and their long names, any case, spaces
/// allowed around; 1k = 1024). `None` when it is not one or overflows.
pub(crate) fn parse_memory_size(value: &str) -> Option<u64> {
    let (number, unit) = split_number(value)?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 0,
        "k" | "kb" | "kibibytes" => 10,
        "m" | "mb" | "mebibytes" => 20,
        "g" | "gb" | "gibibytes" => 30,
        "t" | "tb" | "tebibytes" => 40,
        _ => return None,
    };
    number.checked_mul(1u64 << shift)
}

/// A duration: a whole number, then optionally a unit (`ns`, `us`/`µs`,
/// `ms`, `s`, `min`/`m`, `h`, `d` and their long names, any case; none
/// means milliseconds). `None` when it is not one or overflows.
pub(crate) fn parse_duration(value: &str) -> Option<Duration> {
    let (number, unit) = split_number(value)?;
    let secs = |per: u64| number.checked_mul(per).map(Duration::from_secs);
    match unit.to_lowercase().as_str() {
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => {
            Some(Duration::from_nanos(number))
        }
        "us" | "µs" | "micro" | "micros" | "microsecond" | "microseconds" => {
            Some(Duration::from_micros(number))
        }
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => {
            Some(Duration::from_millis(number))
        }
        "s" | "sec" | "secs" | "second" | "seconds" => secs(1),
        "m" | "min" | "mins" | "minute" | "minutes" => secs(60),
        "h" | "hour" | "hours" => secs(3_600),
        "d" | "day" | "days" => secs(86_400),
        _ => None,
    }
}

/// Splits `" 64 mb "` into `(64, "mb")`.
fn split_number(value: &str) -> Option<(u64, &str)> {
    let value = value.trim();
    let end = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let number = value[..end].parse::<u64>().ok()?;
    Some((number, value[end..].trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_in_every_unit_spelling() {
        for (text, bytes) in [
            ("0", 0),
            ("123", 123),
            ("1b", 1),
            ("7 bytes", 7),
            ("64 kb", 64 << 10),
            ("2K", 2 << 10),
            ("16mb", 16 << 20),
            ("3 mebibytes", 3 << 20),
            ("1gb", 1 << 30),
            (" 2 TB ", 2 << 40),
        ] {
            assert_eq!(parse_memory_size(text), Some(bytes), "{text}");
        }
        for bad in [
            "",
            "mb",
            "1.5mb",
            "-1",
            "12 parsecs",
            "99999999999999999999",
        ] {
            assert_eq!(parse_memory_size(bad), None, "{bad}");
        }
        assert_eq!(parse_memory_size("20000000 tb"), None, "overflow");
    }

    #[test]
    fn durations_in_every_unit_spelling() {
        for (text, expected) in [
            ("500", Duration::from_millis(500)),
            ("500ms", Duration::from_millis(500)),
            ("250 milliseconds", Duration::from_millis(250)),
            ("250us", Duration::from_micros(250)),
            ("3µs", Duration::from_micros(3)),
            ("7ns", Duration::from_nanos(7)),
            ("2 s", Duration::from_secs(2)),
            ("1min", Duration::from_secs(60)),
            ("1m", Duration::from_secs(60)),
            ("10 MIN", Duration::from_secs(600)),
            ("1h", Duration::from_secs(3_600)),
            ("2 days", Duration::from_secs(172_800)),
        ] {
            assert_eq!(parse_duration(text), Some(expected), "{text}");
        }
        for bad in ["", "s", "1.5s", "-1s", "3 fortnights"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        assert_eq!(parse_duration("18446744073709551615d"), None, "overflow");
    }
}
