//! Instants: [`Timestamp`], a UTC instant with millisecond precision (SPEC §0).
//!
//! Every instant loops stores or prints is a `Timestamp` rendered as
//! `YYYY-MM-DDTHH:MM:SS.mmmZ`. SQL and the code compare instants as strings,
//! so the rendering is fixed-width and the representable range is limited to
//! the years 0000 through 9999.
//!
//! Architecture invariant: this module never reads a clock. "Now" is always
//! passed in by the caller.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Milliseconds of the earliest representable instant, `0000-01-01T00:00:00.000Z`.
const MIN_MS: i64 = -62_167_219_200_000;
/// Milliseconds of the latest representable instant, `9999-12-31T23:59:59.999Z`.
const MAX_MS: i64 = 253_402_300_799_999;

/// A UTC instant with millisecond precision.
///
/// The field is private: every constructor normalizes to whole milliseconds
/// inside the representable range, so `to_string()` is always the canonical
/// SPEC §0 form.
///
/// ```
/// use loops_core::Timestamp;
/// let t: Timestamp = "2026-01-01T00:15:00Z".parse().unwrap();
/// assert_eq!(t.to_string(), "2026-01-01T00:15:00.000Z");
/// assert_eq!(t.add_ms(1500).to_string(), "2026-01-01T00:15:01.500Z");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// Why a string is not an instant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid timestamp: {input} (expected ISO-8601 such as 2026-01-01T00:15:00.000Z)")]
pub struct TimestampError {
    /// The rejected input.
    pub input: String,
}

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// Builds an instant from milliseconds since the Unix epoch, or `None`
    /// outside the years 0000–9999.
    pub fn from_millis(ms: i64) -> Option<Timestamp> {
        (MIN_MS..=MAX_MS).contains(&ms).then_some(Timestamp(ms))
    }

    /// Milliseconds since the Unix epoch.
    pub fn as_millis(self) -> i64 {
        self.0
    }

    /// Converts a chrono instant, truncating to the millisecond.
    pub fn from_datetime<Tz: TimeZone>(dt: &DateTime<Tz>) -> Option<Timestamp> {
        Timestamp::from_millis(dt.timestamp_millis())
    }

    /// The instant as a chrono UTC date-time.
    pub fn to_datetime(self) -> DateTime<Utc> {
        // The constructor keeps the value inside chrono's range.
        DateTime::from_timestamp_millis(self.0).unwrap_or(DateTime::<Utc>::MIN_UTC)
    }

    /// This instant plus `ms` milliseconds, saturating at the representable range.
    pub fn add_ms(self, ms: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms).clamp(MIN_MS, MAX_MS))
    }

    /// This instant plus `ms` milliseconds, or `None` past the representable range.
    pub fn checked_add_ms(self, ms: i64) -> Option<Timestamp> {
        self.0.checked_add(ms).and_then(Timestamp::from_millis)
    }

    /// Milliseconds from `earlier` to `self` (negative when `self` is earlier).
    pub fn millis_since(self, earlier: Timestamp) -> i64 {
        self.0 - earlier.0
    }

    /// Parses an instant.
    ///
    /// Accepted forms:
    /// - RFC 3339 / ISO-8601 with `Z` or a numeric offset, with or without
    ///   fractional seconds (`2026-01-01T00:15:00Z`, `2026-01-01T01:15:00+01:00`);
    /// - a bare date, read as UTC midnight (as JavaScript's `Date` does).
    ///
    /// Fractions finer than a millisecond are truncated. A date-time without
    /// an offset is rejected here; the CLI resolves those in a time zone.
    pub fn parse(input: &str) -> Result<Timestamp, TimestampError> {
        let err = || TimestampError {
            input: input.to_owned(),
        };
        let s = input.trim();
        // Every stored instant is in the canonical form, so reading rows is
        // dominated by this case; it skips chrono's general parser.
        if let Some(t) = parse_canonical(s) {
            return Ok(t);
        }
        if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
            return Timestamp::from_datetime(&dt).ok_or_else(err);
        }
        // RFC 3339 requires the `T` to be there and seconds to be present;
        // ISO-8601 as JavaScript reads it also allows `HH:MM`.
        if let Ok(dt) = DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M%#z") {
            return Timestamp::from_datetime(&dt).ok_or_else(err);
        }
        if let Ok(date) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            let dt = date.and_hms_opt(0, 0, 0).ok_or_else(err)?;
            return Timestamp::from_datetime(&Utc.from_utc_datetime(&dt)).ok_or_else(err);
        }
        Err(err())
    }

    /// Parses a date-time without an offset (`2026-01-01T09:00[:00[.000]]`),
    /// the form that needs a time zone to become an instant.
    pub fn parse_naive(input: &str) -> Option<NaiveDateTime> {
        let s = input.trim();
        [
            "%Y-%m-%dT%H:%M:%S%.f",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M:%S%.f",
            "%Y-%m-%d %H:%M",
        ]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
    }
}

impl Timestamp {
    /// The SPEC §0 text as bytes, written digit by digit: `write!` with
    /// width specifiers costs several times more, and listing runs prints
    /// thousands of instants.
    fn to_ascii(self) -> [u8; 24] {
        let days = self.0.div_euclid(MS_PER_DAY);
        let ms_of_day = self.0.rem_euclid(MS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let mut buf = *b"0000-00-00T00:00:00.000Z";
        let mut put = |at: usize, width: usize, mut value: i64| {
            for i in (at..at + width).rev() {
                // Every field is in range, so each digit is 0..=9.
                buf[i] = b'0' + u8::try_from(value % 10).unwrap_or(0);
                value /= 10;
            }
        };
        put(0, 4, year);
        put(5, 2, month);
        put(8, 2, day);
        put(11, 2, ms_of_day / 3_600_000);
        put(14, 2, ms_of_day / 60_000 % 60);
        put(17, 2, ms_of_day / 1000 % 60);
        put(20, 3, ms_of_day % 1000);
        buf
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let buf = self.to_ascii();
        // The buffer holds only ASCII digits and separators.
        f.write_str(std::str::from_utf8(&buf).unwrap_or("invalid timestamp"))
    }
}

const MS_PER_DAY: i64 = 86_400_000;

/// Parses exactly `YYYY-MM-DDTHH:MM:SS.mmmZ`, the SPEC §0 form, or `None`.
fn parse_canonical(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    if b.len() != 24
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, m, sec, ms) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || h > 23
        || m > 59
        || sec > 59
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Timestamp::from_millis(days * MS_PER_DAY + ((h * 60 + m) * 60 + sec) * 1000 + ms)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({self})")
    }
}

impl FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Timestamp::parse(s)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let buf = self.to_ascii();
        s.serialize_str(std::str::from_utf8(&buf).unwrap_or("invalid timestamp"))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &str) {
        assert_eq!(
            Timestamp::parse(input).unwrap().to_string(),
            expected,
            "{input}"
        );
    }

    #[test]
    fn parses_and_normalizes() {
        check("2026-01-01T00:15:00.000Z", "2026-01-01T00:15:00.000Z");
        check("2026-01-01T00:15:00Z", "2026-01-01T00:15:00.000Z");
        check("2026-01-01T01:15:00+01:00", "2026-01-01T00:15:00.000Z");
        check("2026-01-01T00:15:00.123456Z", "2026-01-01T00:15:00.123Z");
        check("2026-01-01", "2026-01-01T00:00:00.000Z");
        check(" 2026-01-01T00:15Z ", "2026-01-01T00:15:00.000Z");
    }

    #[test]
    fn rejects_garbage_and_naive() {
        for bad in ["", "soon", "2026-13-01", "2026-01-01T00:15:00", "12345"] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
        assert!(Timestamp::parse_naive("2026-01-01T09:00").is_some());
    }

    #[test]
    fn range_is_bounded_for_string_ordering() {
        assert!(Timestamp::from_millis(MAX_MS + 1).is_none());
        assert_eq!(
            Timestamp::from_millis(MAX_MS).unwrap().to_string(),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            Timestamp::from_millis(MIN_MS).unwrap().to_string(),
            "0000-01-01T00:00:00.000Z"
        );
        assert_eq!(Timestamp::EPOCH.add_ms(i64::MAX).as_millis(), MAX_MS);
    }

    #[test]
    fn canonical_fast_path_agrees_with_chrono() {
        // A spread of instants across the whole range, leap days included.
        let mut ms = MIN_MS;
        while ms <= MAX_MS {
            let t = Timestamp(ms);
            let text = t.to_string();
            let chrono_text = t
                .to_datetime()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            assert_eq!(text, chrono_text, "{ms}");
            assert_eq!(parse_canonical(&text), Some(t), "{text}");
            ms += 7_919_993_137_i64;
        }
        for leap in ["2024-02-29T23:59:59.999Z", "2000-02-29T00:00:00.000Z"] {
            assert_eq!(Timestamp::parse(leap).unwrap().to_string(), leap);
        }
        for bad in [
            "2023-02-29T00:00:00.000Z",
            "2026-01-01T24:00:00.000Z",
            "2026-13-01T00:00:00.000Z",
        ] {
            assert!(parse_canonical(bad).is_none(), "{bad}");
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
        // A leap second is left to chrono's general parser.
        assert!(parse_canonical("2026-01-01T00:00:60.000Z").is_none());
    }

    #[test]
    fn serde_is_a_string() {
        let t: Timestamp = serde_json::from_str("\"2026-01-01T00:00:00Z\"").unwrap();
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            "\"2026-01-01T00:00:00.000Z\""
        );
    }
}
