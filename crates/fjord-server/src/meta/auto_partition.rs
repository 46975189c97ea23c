//! Auto-partitioning rules of one table (Fluss's `AutoPartitionStrategy`):
//! the `table.auto-partition.*` properties parsed and validated once when a
//! table is created or loaded, and the pure schedule computed from them —
//! which partitions to pre-create and which to drop at a given instant.
//!
//! The clock is a parameter ([`Clock`]), so tests drive the schedule
//! through any instant, time unit and time zone; the coordinator's periodic
//! task (`crate::partitions`) applies what [`AutoPartitionStrategy::plan`]
//! returns.
//!
//! Facts taken from Fluss (`PartitionUtils`, `AutoPartitionManager`):
//! - partition time names: HOUR `yyyyMMddHH`, DAY `yyyyMMdd`, MONTH
//!   `yyyyMM`, QUARTER `yyyyQ`, YEAR `yyyy`, in the table's time zone;
//! - the partitions pre-created at `now` are offsets `0..num-precreate` from
//!   the current one; HOUR steps are on the instant timeline (so a
//!   fall-back hour names the same partition twice and a spring-forward
//!   hour is skipped), DAY/MONTH/QUARTER/YEAR steps are calendar steps;
//! - retention keeps partitions whose time value is not older, as a string,
//!   than the value `num-retention` units before now; older ones are
//!   dropped; a negative `num-retention` never drops;
//! - with several partition keys only expiry runs (pre-create must be 0),
//!   keyed on `table.auto-partition.key`;
//! - a DAY table's scheduled checks (start-up and periodic, not the one at
//!   table creation) run as if it were up to 23 hours earlier, a delay fixed
//!   per table, so the next day's partitions of many tables are not all
//!   created at midnight. Fluss draws the delay at random when it registers
//!   the table; Fjord derives it from the table id
//!   ([`day_check_delay_minutes`]): the same spread, and the same schedule
//!   after a restart.

use std::collections::BTreeSet;

use jiff::tz::TimeZone;
use jiff::{Span, Timestamp, Zoned};
use serde_json::{Map, Value};

use crate::error::{ApiError, ErrorCode};

/// `table.auto-partition.enabled` (default false).
pub const ENABLED_KEY: &str = "table.auto-partition.enabled";
/// `table.auto-partition.key`: the time key when there are several
/// partition keys.
pub const KEY_KEY: &str = "table.auto-partition.key";
/// `table.auto-partition.time-unit` (default DAY).
pub const TIME_UNIT_KEY: &str = "table.auto-partition.time-unit";
/// `table.auto-partition.num-precreate` (default 2).
pub const NUM_PRECREATE_KEY: &str = "table.auto-partition.num-precreate";
/// `table.auto-partition.num-retention` (default 7).
pub const NUM_RETENTION_KEY: &str = "table.auto-partition.num-retention";
/// `table.auto-partition.time-zone` (default: the server's time zone).
pub const TIME_ZONE_KEY: &str = "table.auto-partition.time-zone";

/// Fluss's default number of partitions to pre-create.
pub const NUM_PRECREATE_DEFAULT: i64 = 2;
/// Fluss's default number of past partitions to keep.
pub const NUM_RETENTION_DEFAULT: i64 = 7;
/// Most partitions one check may pre-create: a bound on the work (and the
/// metadata writes) a single property can ask of the coordinator; the
/// server's `max.partition.num` still applies on top.
pub const NUM_PRECREATE_MAX: i64 = 10_000;

/// A source of the current instant, injected so the schedule is testable.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// Bound (exclusive) of a DAY table's check delay in minutes: Fluss's
/// `60 * 23`, so the delayed check still falls on the same day as the real
/// one for most of the day and pre-creation (2 partitions by default) keeps
/// tomorrow's partition ready.
pub const DAY_CHECK_DELAY_MINUTES_MAX: i64 = 23 * 60;

/// The delay, in minutes in `0..DAY_CHECK_DELAY_MINUTES_MAX`, of the
/// scheduled checks of the DAY table `table_id`: a fixed mix of the id
/// (SplitMix64's finalizer), so tables created one after another get
/// unrelated delays.
pub fn day_check_delay_minutes(table_id: i64) -> i64 {
    let mut x = (table_id as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    // Lossless: the remainder is below DAY_CHECK_DELAY_MINUTES_MAX.
    (x % DAY_CHECK_DELAY_MINUTES_MAX as u64) as i64
}

/// Fluss's `AutoPartitionTimeUnit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// `yyyyMMddHH`.
    Hour,
    /// `yyyyMMdd`.
    Day,
    /// `yyyyMM`.
    Month,
    /// `yyyyQ` (quarter 1..=4).
    Quarter,
    /// `yyyy`.
    Year,
}

impl TimeUnit {
    fn parse(text: &str) -> Option<Self> {
        Some(match text.trim().to_ascii_uppercase().as_str() {
            "HOUR" => Self::Hour,
            "DAY" => Self::Day,
            "MONTH" => Self::Month,
            "QUARTER" => Self::Quarter,
            "YEAR" => Self::Year,
            _ => return None,
        })
    }

    /// Fluss's name pattern of this unit (for error messages).
    fn pattern(self) -> &'static str {
        match self {
            Self::Hour => "yyyyMMddHH",
            Self::Day => "yyyyMMdd",
            Self::Month => "yyyyMM",
            Self::Quarter => "yyyyQ",
            Self::Year => "yyyy",
        }
    }

    /// The number of characters of this unit's partition names.
    fn name_len(self) -> usize {
        match self {
            Self::Hour => 10,
            Self::Day => 8,
            Self::Month => 6,
            Self::Quarter => 5,
            Self::Year => 4,
        }
    }

    /// `offset` units from `at` (instant steps for hours, calendar steps
    /// otherwise — `Span` arithmetic on a `Zoned` does exactly that).
    fn step(self, at: &Zoned, offset: i64) -> Option<Zoned> {
        let span = match self {
            Self::Hour => Span::new().try_hours(offset),
            Self::Day => Span::new().try_days(offset),
            Self::Month => Span::new().try_months(offset),
            Self::Quarter => Span::new().try_months(offset.checked_mul(3)?),
            Self::Year => Span::new().try_years(offset),
        }
        .ok()?;
        at.checked_add(span).ok()
    }

    /// The partition time name of the unit containing `at`.
    fn format(self, at: &Zoned) -> String {
        let (y, m, d, h) = (at.year(), at.month(), at.day(), at.hour());
        match self {
            Self::Hour => format!("{y:04}{m:02}{d:02}{h:02}"),
            Self::Day => format!("{y:04}{m:02}{d:02}"),
            Self::Month => format!("{y:04}{m:02}"),
            Self::Quarter => format!("{y:04}{}", (m - 1) / 3 + 1),
            Self::Year => format!("{y:04}"),
        }
    }
}

/// The auto-partitioning rules of one table with auto-partitioning enabled;
/// immutable once parsed.
#[derive(Debug, Clone)]
pub struct AutoPartitionStrategy {
    /// The partition granularity.
    pub time_unit: TimeUnit,
    /// Index, among the table's partition keys, of the time key.
    pub key_index: usize,
    /// Number of partition keys of the table (names have this many values).
    pub key_count: usize,
    /// Partitions to pre-create, starting with the current one.
    pub num_precreate: u32,
    /// Past partitions to keep; `None` keeps everything.
    pub num_retention: Option<u32>,
    /// The zone partition times are computed in.
    pub time_zone: TimeZone,
}

/// What one auto-partition check should do.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AutoPartitionPlan {
    /// Partition values (one per key, in key order) to create, oldest first.
    pub create: Vec<Vec<String>>,
    /// Names of existing partitions to drop, oldest first.
    pub drop: Vec<String>,
}

fn config_error(why: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidConfigException, why)
}

fn table_error(why: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidTableException, why)
}

fn int_property(props: &Map<String, Value>, key: &str, default: i64) -> Result<i64, ApiError> {
    match props.get(key).and_then(Value::as_str) {
        None => Ok(default),
        Some(text) => text
            .trim()
            .parse()
            .map_err(|_| config_error(format!("{key} must be an integer, got '{text}'"))),
    }
}

/// Reads a time zone id the way Fluss's `table.auto-partition.time-zone`
/// (a Java `ZoneId`) takes it: an IANA name (`Europe/Berlin`, `UTC`), or a
/// fixed offset (`Z`, `+08:00`, `-5`, `UTC+8`, `GMT-03:30`).
pub fn time_zone(id: &str) -> Result<TimeZone, ApiError> {
    let id = id.trim();
    TimeZone::get(id)
        .or_else(|e| fixed_offset(id).ok_or(e))
        .map_err(|e| {
            config_error(format!(
                "{TIME_ZONE_KEY} '{id}' is not a known time zone: {e}"
            ))
        })
}

/// Longest fixed offset a Java `ZoneOffset` allows, in hours.
const OFFSET_HOURS_MAX: i32 = 18;

/// `Z`, `±H`, `±HH`, `±HH:MM`, `±HHMM`, optionally after `UTC`, `GMT` or `UT`.
fn fixed_offset(id: &str) -> Option<TimeZone> {
    let rest = ["UTC", "GMT", "UT"]
        .iter()
        .find_map(|p| id.strip_prefix(p))
        .unwrap_or(id);
    if rest.is_empty() || rest == "Z" {
        return Some(TimeZone::UTC);
    }
    let (sign, digits) = match rest.as_bytes()[0] {
        b'+' => (1, &rest[1..]),
        b'-' => (-1, &rest[1..]),
        _ => return None,
    };
    let (h, m) = match digits.split_once(':') {
        Some((h, m)) if m.len() == 2 => (h, m),
        Some(_) => return None,
        None if digits.len() == 4 => digits.split_at(2),
        None => (digits, "0"),
    };
    if h.is_empty() || h.len() > 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
    if h > OFFSET_HOURS_MAX || m > 59 || (h == OFFSET_HOURS_MAX && m > 0) {
        return None;
    }
    let offset = jiff::tz::Offset::from_seconds(sign * (h * 3600 + m * 60)).ok()?;
    Some(TimeZone::fixed(offset))
}

impl AutoPartitionStrategy {
    /// Parses and validates the `table.auto-partition.*` properties of a
    /// table with `partition_keys`, as Fluss's table validation does.
    /// `None` when auto-partitioning is disabled.
    pub fn from_properties(
        props: &Map<String, Value>,
        partition_keys: &[String],
    ) -> Result<Option<Self>, ApiError> {
        let enabled = match props.get(ENABLED_KEY).and_then(Value::as_str) {
            None => false,
            Some(t) if t.trim().eq_ignore_ascii_case("true") => true,
            Some(t) if t.trim().eq_ignore_ascii_case("false") => false,
            Some(t) => {
                return Err(config_error(format!(
                    "{ENABLED_KEY} must be true or false, got '{t}'"
                )))
            }
        };
        if !enabled {
            return Ok(None);
        }
        if partition_keys.is_empty() {
            return Err(config_error(format!(
                "Currently, auto partition is only supported for partitioned table, please set table property '{ENABLED_KEY}' to false."
            )));
        }
        let key = props
            .get(KEY_KEY)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|k| !k.is_empty());
        let key_index = match (partition_keys.len(), key) {
            (1, None) => 0,
            (_, None) => {
                return Err(table_error(format!(
                    "Currently, auto partitioned table must set one auto partition key when it has multiple partition keys. Please set table property '{KEY_KEY}'."
                )))
            }
            (_, Some(k)) => partition_keys.iter().position(|p| p == k).ok_or_else(|| {
                table_error(format!(
                    "The specified key for auto partitioned table is not a partition key. Your key '{k}' is not in key list {partition_keys:?}"
                ))
            })?,
        };
        let time_unit = match props.get(TIME_UNIT_KEY).and_then(Value::as_str) {
            None => TimeUnit::Day,
            Some(t) => TimeUnit::parse(t).ok_or_else(|| {
                config_error(format!(
                    "{TIME_UNIT_KEY} must be one of HOUR, DAY, MONTH, QUARTER, YEAR, got '{t}'"
                ))
            })?,
        };
        let multiple_keys = partition_keys.len() > 1;
        // Several keys: pre-creating is unsupported and defaults to 0.
        let precreate_default = if multiple_keys {
            0
        } else {
            NUM_PRECREATE_DEFAULT
        };
        let num_precreate = int_property(props, NUM_PRECREATE_KEY, precreate_default)?;
        if multiple_keys && num_precreate > 0 {
            return Err(table_error(format!(
                "For a partitioned table with multiple partition keys, auto pre-create is unsupported and this value must be set to 0, but is {num_precreate}"
            )));
        }
        if !(0..=NUM_PRECREATE_MAX).contains(&num_precreate) {
            return Err(config_error(format!(
                "{NUM_PRECREATE_KEY} must be between 0 and {NUM_PRECREATE_MAX}, got {num_precreate}"
            )));
        }
        let num_retention = int_property(props, NUM_RETENTION_KEY, NUM_RETENTION_DEFAULT)?;
        let num_retention = if num_retention < 0 {
            None
        } else {
            Some(u32::try_from(num_retention).map_err(|_| {
                config_error(format!("{NUM_RETENTION_KEY} is too large: {num_retention}"))
            })?)
        };
        let time_zone = match props.get(TIME_ZONE_KEY).and_then(Value::as_str) {
            Some(id) => time_zone(id)?,
            None => TimeZone::system(),
        };
        Ok(Some(Self {
            time_unit,
            key_index,
            key_count: partition_keys.len(),
            num_precreate: num_precreate as u32,
            num_retention,
            time_zone,
        }))
    }

    /// The instant a scheduled check of table `table_id` plans at when the
    /// clock says `now`: `now` itself, except for DAY tables, whose
    /// scheduled checks lag by [`day_check_delay_minutes`]. The check at
    /// table creation uses `now` for every unit.
    pub fn scheduled_instant(&self, table_id: i64, now: Timestamp) -> Timestamp {
        if self.time_unit != TimeUnit::Day {
            return now;
        }
        let delay = jiff::SignedDuration::from_mins(day_check_delay_minutes(table_id));
        now.checked_sub(delay).unwrap_or(now)
    }

    /// The partition time name `offset` units from the one containing `now`
    /// (`None` only if the arithmetic leaves jiff's supported range).
    pub fn partition_time(&self, now: Timestamp, offset: i64) -> Option<String> {
        let zoned = now.to_zoned(self.time_zone.clone());
        self.time_unit
            .step(&zoned, offset)
            .map(|z| self.time_unit.format(&z))
    }

    /// Does `value` look like a partition time of this table's unit
    /// (digits of the unit's length, month 01-12, quarter 1-4, ...)?
    pub fn is_partition_time(&self, value: &str) -> bool {
        let b = value.as_bytes();
        if b.len() != self.time_unit.name_len() || !b.iter().all(u8::is_ascii_digit) {
            return false;
        }
        let num = |r: std::ops::Range<usize>| -> u32 {
            b[r].iter().fold(0, |n, d| n * 10 + u32::from(d - b'0'))
        };
        let month_ok =
            b.len() < 6 || self.time_unit == TimeUnit::Quarter || (1..=12).contains(&num(4..6));
        let quarter_ok = self.time_unit != TimeUnit::Quarter || (1..=4).contains(&num(4..5));
        let day_ok = b.len() < 8 || (1..=31).contains(&num(6..8));
        let hour_ok = b.len() < 10 || num(8..10) <= 23;
        month_ok && quarter_ok && day_ok && hour_ok
    }

    /// The time value of a partition name (its time key's value).
    pub fn time_value_of<'n>(&self, partition_name: &'n str) -> Option<&'n str> {
        if self.key_count == 1 {
            return Some(partition_name);
        }
        partition_name
            .split(fjord_format::schema::PARTITION_NAME_SEPARATOR)
            .nth(self.key_index)
    }

    /// Checks a partition to be created (values in key order) as Fluss's
    /// `validateAutoPartitionTime` does: its time value must have the
    /// unit's format and must not be older than the oldest retained
    /// partition at `now` (it would be dropped at the next check).
    pub fn check_value(&self, values: &[String], now: Timestamp) -> Result<(), ApiError> {
        let time = values.get(self.key_index).map_or("", String::as_str);
        if !self.is_partition_time(time) {
            return Err(ApiError::new(
                ErrorCode::PartitionSpecInvalidException,
                format!(
                    "Partition value '{time}' does not match the expected format '{}' for auto-partition time unit '{:?}'.",
                    self.time_unit.pattern(),
                    self.time_unit
                ),
            ));
        }
        if let Some(keep) = self.num_retention {
            if let Some(oldest) = self.partition_time(now, -i64::from(keep)) {
                if time < oldest.as_str() {
                    return Err(ApiError::new(
                        ErrorCode::PartitionSpecInvalidException,
                        format!(
                            "Partition value '{time}' is out-of-date. The earliest retained partition is '{oldest}'."
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// What a check at `now` should do given the table's `existing`
    /// partition names: the pre-create offsets `0..num_precreate` not yet
    /// present (each name once), and every partition whose time value sorts
    /// before the oldest one to retain.
    pub fn plan<'a>(
        &self,
        now: Timestamp,
        existing: impl IntoIterator<Item = &'a str>,
    ) -> AutoPartitionPlan {
        let existing: BTreeSet<&str> = existing.into_iter().collect();
        let mut plan = AutoPartitionPlan::default();
        if let Some(keep) = self.num_retention {
            if let Some(oldest_kept) = self.partition_time(now, -i64::from(keep)) {
                plan.drop = existing
                    .iter()
                    .filter(|name| {
                        self.time_value_of(name)
                            .is_some_and(|t| t < oldest_kept.as_str())
                    })
                    .map(|name| (*name).to_owned())
                    .collect();
            }
        }
        // Pre-creating only happens with a single partition key (enforced
        // at validation), so a partition's values are just its time.
        let mut planned = BTreeSet::new();
        for offset in 0..i64::from(self.num_precreate) {
            let Some(name) = self.partition_time(now, offset) else {
                break;
            };
            if !existing.contains(name.as_str()) && planned.insert(name.clone()) {
                plan.create.push(vec![name]);
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strategy(props: Value, keys: &[&str]) -> AutoPartitionStrategy {
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        AutoPartitionStrategy::from_properties(props.as_object().unwrap(), &keys)
            .unwrap()
            .unwrap()
    }

    fn single(unit: &str, precreate: i64, retention: i64, zone: &str) -> AutoPartitionStrategy {
        strategy(
            json!({
                ENABLED_KEY: "true",
                TIME_UNIT_KEY: unit,
                NUM_PRECREATE_KEY: precreate.to_string(),
                NUM_RETENTION_KEY: retention.to_string(),
                TIME_ZONE_KEY: zone,
            }),
            &["dt"],
        )
    }

    fn at(rfc3339: &str) -> Timestamp {
        rfc3339.parse().unwrap()
    }

    fn names(plan: &AutoPartitionPlan) -> Vec<&str> {
        plan.create.iter().map(|v| v[0].as_str()).collect()
    }

    /// One row per time unit: the instant, the partitions a check creates
    /// on an empty table, the existing partitions, and those it drops.
    fn check(
        unit: &str,
        now: &str,
        expect_created: &[&str],
        existing: &[&str],
        expect_dropped: &[&str],
    ) {
        let s = single(unit, expect_created.len() as i64, 2, "UTC");
        let plan = s.plan(at(now), std::iter::empty());
        assert_eq!(names(&plan), expect_created, "{unit} at {now}");
        assert!(plan.drop.is_empty());
        let plan = s.plan(at(now), existing.iter().copied());
        assert_eq!(plan.drop, expect_dropped, "{unit} at {now}");
        // Existing partitions are never created again.
        assert!(names(&plan).iter().all(|n| !existing.contains(n)));
    }

    #[test]
    fn day_check_delays_are_fixed_per_table_below_23_hours_and_spread() {
        let delays: Vec<i64> = (0..200).map(day_check_delay_minutes).collect();
        assert!(delays
            .iter()
            .all(|d| (0..DAY_CHECK_DELAY_MINUTES_MAX).contains(d)));
        // Pinned: the schedule must survive restarts and upgrades, so the
        // mix may not change silently.
        assert_eq!(&delays[..3], [775, 785, 190]);
        assert_eq!(day_check_delay_minutes(1000), 1156);
        let distinct: BTreeSet<i64> = delays.iter().copied().collect();
        assert!(distinct.len() > 150, "{} distinct delays", distinct.len());
    }

    #[test]
    fn only_day_tables_plan_their_scheduled_checks_at_a_delayed_instant() {
        let now = at("2024-11-12T00:30:00Z");
        let day = single("DAY", 2, 7, "UTC");
        let table = (0..).find(|&id| day_check_delay_minutes(id) > 30).unwrap();
        let delayed = day.scheduled_instant(table, now);
        assert_eq!(
            now.duration_since(delayed),
            jiff::SignedDuration::from_mins(day_check_delay_minutes(table))
        );
        // Still 11 November for the schedule: no 20241113 yet.
        let plan = day.plan(delayed, std::iter::empty());
        assert_eq!(names(&plan), ["20241111", "20241112"]);
        for unit in ["HOUR", "MONTH", "QUARTER", "YEAR"] {
            let s = single(unit, 2, 7, "UTC");
            assert_eq!(s.scheduled_instant(table, now), now, "{unit}");
        }
    }

    #[test]
    fn each_time_unit_precreates_exactly_num_precreate_and_drops_beyond_retention() {
        check(
            "HOUR",
            "2024-11-11T23:30:00Z",
            &["2024111123", "2024111200", "2024111201"],
            &["2024111120", "2024111121", "2024111122", "2024111123"],
            &["2024111120"],
        );
        check(
            "DAY",
            "2024-12-31T10:00:00Z",
            &["20241231", "20250101"],
            &["20241227", "20241228", "20241229", "20241230", "20241231"],
            &["20241227", "20241228"],
        );
        check(
            "MONTH",
            "2024-11-30T10:00:00Z",
            &["202411", "202412", "202501"],
            &["202408", "202409", "202410", "202411"],
            &["202408"],
        );
        check(
            "QUARTER",
            "2024-11-11T10:00:00Z",
            &["20244", "20251"],
            &["20241", "20242", "20243", "20244"],
            &["20241"],
        );
        check(
            "YEAR",
            "2024-06-01T00:00:00Z",
            &["2024", "2025", "2026", "2027"],
            &["2020", "2021", "2022", "2023", "2024"],
            &["2020", "2021"],
        );
    }

    #[test]
    fn day_boundaries_follow_the_table_time_zone() {
        // 2024-11-11 20:00 UTC is already 2024-11-12 in Shanghai.
        let s = single("DAY", 2, 7, "Asia/Shanghai");
        let plan = s.plan(at("2024-11-11T20:00:00Z"), std::iter::empty());
        assert_eq!(names(&plan), ["20241112", "20241113"]);
        let utc = single("DAY", 2, 7, "UTC");
        let plan = utc.plan(at("2024-11-11T20:00:00Z"), std::iter::empty());
        assert_eq!(names(&plan), ["20241111", "20241112"]);
    }

    #[test]
    fn hour_unit_skips_the_spring_forward_hour() {
        // America/New_York: 2024-03-10 02:00 EST jumps to 03:00 EDT.
        // 01:30 EST = 06:30 UTC.
        let s = single("HOUR", 3, 2, "America/New_York");
        let plan = s.plan(at("2024-03-10T06:30:00Z"), std::iter::empty());
        assert_eq!(names(&plan), ["2024031001", "2024031003", "2024031004"]);
        // Retention two instants back from 03:30 EDT is 00:30 EST (hour 00):
        // hour 23 of the previous day goes, hours 00 and 01 stay.
        let plan = s.plan(
            at("2024-03-10T07:30:00Z"),
            ["2024030923", "2024031000", "2024031001"],
        );
        assert_eq!(plan.drop, ["2024030923"]);
        assert_eq!(names(&plan), ["2024031003", "2024031004", "2024031005"]);
    }

    #[test]
    fn hour_unit_names_the_repeated_fall_back_hour_once() {
        // America/New_York: 2024-11-03 02:00 EDT falls back to 01:00 EST.
        // 00:30 EDT = 04:30 UTC; +1h = 01:30 EDT; +2h = 01:30 EST; +3h = 02:30 EST.
        let s = single("HOUR", 4, 1, "America/New_York");
        let plan = s.plan(at("2024-11-03T04:30:00Z"), std::iter::empty());
        assert_eq!(names(&plan), ["2024110300", "2024110301", "2024110302"]);
        // During the second 01:xx (EST), one hour back is the first 01:xx
        // (EDT): partition 01 is retained, 00 is dropped.
        let plan = s.plan(at("2024-11-03T06:30:00Z"), ["2024110300", "2024110301"]);
        assert_eq!(plan.drop, ["2024110300"]);
    }

    #[test]
    fn day_unit_across_a_dst_change_keeps_calendar_days() {
        // Europe/Berlin springs forward on 2024-03-31 (a 23-hour day).
        let s = single("DAY", 3, 1, "Europe/Berlin");
        let plan = s.plan(at("2024-03-30T23:30:00Z"), std::iter::empty());
        assert_eq!(names(&plan), ["20240331", "20240401", "20240402"]);
        let plan = s.plan(at("2024-03-31T22:30:00Z"), ["20240330", "20240331"]);
        assert_eq!(plan.drop, ["20240330"]);
    }

    #[test]
    fn negative_retention_never_drops() {
        let s = single("DAY", 1, -1, "UTC");
        let plan = s.plan(at("2024-11-11T00:00:00Z"), ["19700101"]);
        assert!(plan.drop.is_empty());
    }

    #[test]
    fn multiple_keys_only_expire_on_the_time_key() {
        let s = strategy(
            json!({ENABLED_KEY: "true", KEY_KEY: "dt", TIME_UNIT_KEY: "DAY",
                   NUM_RETENTION_KEY: "1", TIME_ZONE_KEY: "UTC"}),
            &["region", "dt"],
        );
        assert_eq!(s.num_precreate, 0);
        let plan = s.plan(
            at("2024-11-11T10:00:00Z"),
            ["eu$20241109", "us$20241109", "eu$20241110", "us$20241111"],
        );
        assert!(plan.create.is_empty());
        assert_eq!(plan.drop, ["eu$20241109", "us$20241109"]);
    }

    fn refused(props: Value, keys: &[&str], code: ErrorCode, needle: &str) {
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        let err =
            AutoPartitionStrategy::from_properties(props.as_object().unwrap(), &keys).unwrap_err();
        assert_eq!(err.code(), code, "{err}");
        assert!(err.message().contains(needle), "{err}");
    }

    #[test]
    fn invalid_auto_partition_properties_are_refused_naming_the_option() {
        refused(
            json!({ENABLED_KEY: "true"}),
            &[],
            ErrorCode::InvalidConfigException,
            "only supported for partitioned table",
        );
        refused(
            json!({ENABLED_KEY: "yes"}),
            &["dt"],
            ErrorCode::InvalidConfigException,
            ENABLED_KEY,
        );
        refused(
            json!({ENABLED_KEY: "true", TIME_UNIT_KEY: "WEEK"}),
            &["dt"],
            ErrorCode::InvalidConfigException,
            "WEEK",
        );
        refused(
            json!({ENABLED_KEY: "true", TIME_ZONE_KEY: "Mars/Olympus"}),
            &["dt"],
            ErrorCode::InvalidConfigException,
            "Mars/Olympus",
        );
        refused(
            json!({ENABLED_KEY: "true"}),
            &["a", "dt"],
            ErrorCode::InvalidTableException,
            KEY_KEY,
        );
        refused(
            json!({ENABLED_KEY: "true", KEY_KEY: "zz"}),
            &["a", "dt"],
            ErrorCode::InvalidTableException,
            "zz",
        );
        refused(
            json!({ENABLED_KEY: "true", KEY_KEY: "dt", NUM_PRECREATE_KEY: "2"}),
            &["a", "dt"],
            ErrorCode::InvalidTableException,
            "pre-create",
        );
        refused(
            json!({ENABLED_KEY: "true", NUM_PRECREATE_KEY: "x"}),
            &["dt"],
            ErrorCode::InvalidConfigException,
            NUM_PRECREATE_KEY,
        );
    }

    #[test]
    fn disabled_or_absent_means_no_strategy() {
        let keys = vec!["dt".to_owned()];
        for props in [json!({}), json!({ENABLED_KEY: "false"})] {
            assert!(
                AutoPartitionStrategy::from_properties(props.as_object().unwrap(), &keys)
                    .unwrap()
                    .is_none()
            );
        }
    }

    #[test]
    fn fixed_offset_time_zones_are_read_like_java_zone_ids() {
        let at = at("2024-11-11T20:30:00Z");
        for (id, expected_day) in [
            ("+08:00", "20241112"),
            ("UTC+8", "20241112"),
            ("GMT-03:30", "20241111"),
            ("+0530", "20241112"),
            ("-5", "20241111"),
            ("Z", "20241111"),
        ] {
            let s = single("DAY", 1, 1, id);
            assert_eq!(
                names(&s.plan(at, std::iter::empty())),
                [expected_day],
                "{id}"
            );
        }
        for bad in ["+19", "+08:0", "UTC+x", "8"] {
            assert!(time_zone(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn partition_time_shapes_are_recognized() {
        assert!(single("DAY", 1, 1, "UTC").is_partition_time("20241111"));
        assert!(!single("DAY", 1, 1, "UTC").is_partition_time("20241311"));
        assert!(!single("DAY", 1, 1, "UTC").is_partition_time("2024-11-11"));
        assert!(single("QUARTER", 1, 1, "UTC").is_partition_time("20244"));
        assert!(!single("QUARTER", 1, 1, "UTC").is_partition_time("20245"));
        assert!(single("HOUR", 1, 1, "UTC").is_partition_time("2024111123"));
        assert!(!single("HOUR", 1, 1, "UTC").is_partition_time("2024111124"));
    }
}
