//! When a provider says its limit resets, read from a failed run's output
//! (issue 27), so that a throttled run's retry can wait exactly until then
//! instead of guessing. Upstream (0.5.11) has nothing like it; every
//! wording [`retry_at`] reads is listed, with where it was found, in this
//! module's tests.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Local, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, TimeZone};
use regex::{Captures, Regex};

use super::{JS_SPACE, pattern};
use crate::cron::Zone;
use crate::time::Timestamp;
use crate::tz::Tz;

/// The furthest ahead a reset may be: 7 days.
const MAX_AHEAD_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// How far in the past a named reset is still read as now: 5 minutes.
const PAST_GRACE_MS: i64 = 5 * 60 * 1000;

/// The smallest integer a labelled reset reads as epoch seconds
/// (2001-09-09); below it, as seconds from now.
const EPOCH_SECONDS_FLOOR: i64 = 1_000_000_000;

/// The smallest integer read as epoch milliseconds (2001-09-09 again).
const EPOCH_MILLIS_FLOOR: i64 = 1_000_000_000_000;

/// What follows a phrase, and so how to read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A number of milliseconds.
    Millis,
    /// A number of seconds, or an HTTP date.
    Seconds,
    /// A duration with units.
    Duration,
    /// Whatever a rate-limit header or field holds.
    Stamp,
    /// Epoch seconds.
    Epoch,
    /// An RFC 3339 instant or a wall time.
    Instant,
}

/// The capture group of each kind in [`PHRASE`].
const KINDS: [(&str, Kind); 6] = [
    ("millis", Kind::Millis),
    ("seconds", Kind::Seconds),
    ("duration", Kind::Duration),
    ("stamp", Kind::Stamp),
    ("epoch", Kind::Epoch),
    ("instant", Kind::Instant),
];

/// Every phrase, each in the group of its kind. Where two could start at
/// one place the first listed wins: `retry-after-ms` before `retry-after`,
/// `resets in` before `resets`.
static PHRASE: LazyLock<Regex> = LazyLock::new(|| {
    let s = JS_SPACE;
    let label = format!(r#""?{s}*[:=]{s}*"?"#);
    let b = "(?-u:\\b)";
    pattern(&format!(
        "(?i-u)\
         (?P<millis>{b}retry-after-ms{label})|\
         (?P<seconds>{b}(?:retry-after|resets_in_seconds){label})|\
         (?P<duration>{b}(?:(?:retry|quotareset)delay{label}|\
         (?:(?:try{s}+again|retry|retrying|resets?|available(?:{s}+again)?){s}+in|\
         (?:retry|resets?){s}+after){s}+))|\
         (?P<stamp>{b}(?:(?:x-|anthropic-)?ratelimit-(?:[a-z]+-)*reset(?:-[a-z_]+)?|\
         resets?_?at){label})|\
         (?P<epoch>usage{s}+limit{s}+reached\\|)|\
         (?P<instant>{b}(?:resets?|try{s}+again|retry)(?:{s}+(?:at|on))?{s}+)"
    ))
});

/// The instant a provider's limit resets, read from `text` (a run's error
/// and output); `None` when the text names none that is plausible. Jitter
/// is the caller's to add.
///
/// It finds every phrase of the table below, reads the instant each names,
/// drops those that are absurd, and returns the last one left: the final
/// error is usually the last thing a run prints. Phrases match in any case.
///
/// | Phrase | Instant |
/// |---|---|
/// | `try again in`, `retry in`, `retrying in`, `resets in`, `available in`, `retry after`, `reset after`, each with a duration | now plus the duration |
/// | `Retry-After: 120`, `resets_in_seconds: 602705` | now plus the seconds (`Retry-After` may also be an HTTP date) |
/// | `retry-after-ms: 1500` | now plus the milliseconds |
/// | `retryDelay: "26s"`, `quotaResetDelay: "373.8ms"` | now plus the duration |
/// | `x-ratelimit-reset…`, `anthropic-ratelimit-…-reset`, `resets_at`, `resetsAt`, each followed by `:` or `=` | an RFC 3339 instant, epoch seconds or milliseconds, a duration (`6m0s`), a smaller integer as seconds from now, or a wall time |
/// | `usage limit reached\|1760000400` | epoch seconds |
/// | `resets`, `reset at`, `try again at`, `retry at`, each with an RFC 3339 instant or a wall time | that instant |
///
/// A duration is one or more numbers, each with a unit (`ms`, `s`, `m`,
/// `h`, `d`, or their words: `5 days 22 hours 11 minutes`, `12h34m16s`,
/// `1.574s`). A wall time is `3pm`, `1 PM`, `12:50am` or `15:00[:00]`,
/// optionally after a date (`Sep 15 at`, `Jun 7,`, `Jul 5th, 2026`), and
/// optionally followed by a zone, `(Europe/Warsaw)` or `UTC`, which wins
/// over `zone`. Without a date it is the next such time; without a year,
/// the next such date.
///
/// Absurd means more than 7 days ahead, or more than 5 minutes past. An
/// instant within those 5 minutes is read as now: a limit said to reset at
/// 3 pm, seen by a run that ended a minute later, has reset, and must not
/// be read as tomorrow's 3 pm.
///
/// ```
/// use loops_core::{retry_at, Timestamp, Zone};
/// let now: Timestamp = "2026-03-10T14:20:00Z".parse().unwrap();
/// let utc = Zone::parse(Some("UTC")).unwrap();
/// let at = |text| retry_at(text, now, utc).map(|t| t.to_string());
/// assert_eq!(at("Error: retry after 120s").as_deref(), Some("2026-03-10T14:22:00.000Z"));
/// assert_eq!(at("5-hour limit reached ∙ resets 3pm").as_deref(), Some("2026-03-10T15:00:00.000Z"));
/// assert_eq!(at("try again later"), None);
/// ```
pub fn retry_at(text: &str, now: Timestamp, zone: Zone) -> Option<Timestamp> {
    PHRASE
        .captures_iter(text)
        .filter_map(|found| {
            let end = found.get(0)?.end();
            let kind = kind_of(&found)?;
            let at = read(kind, text.get(end..)?, now, zone)?;
            accept(now, at)
        })
        .last()
}

/// Which kind of phrase matched.
fn kind_of(found: &Captures<'_>) -> Option<Kind> {
    KINDS
        .iter()
        .find(|(group, _)| found.name(group).is_some())
        .map(|&(_, kind)| kind)
}

/// The instant `rest`, the text after a phrase of `kind`, names.
fn read(kind: Kind, rest: &str, now: Timestamp, zone: Zone) -> Option<Timestamp> {
    match kind {
        Kind::Millis => number(rest).map(|(ms, _)| after(now, ms)),
        Kind::Seconds => match number(rest) {
            Some((seconds, _)) => Some(after(now, seconds * 1000.0)),
            None => http_date(rest),
        },
        Kind::Duration => duration_ms(rest).map(|ms| after(now, ms)),
        Kind::Epoch => integer(rest).and_then(|(n, _)| epoch(n)),
        Kind::Stamp => stamp(rest, now, zone),
        Kind::Instant => iso(rest, zone).or_else(|| wall(rest, now, zone)),
    }
}

/// The instant if it is plausible: read as now within the past grace,
/// dropped further back or more than 7 days ahead.
fn accept(now: Timestamp, at: Timestamp) -> Option<Timestamp> {
    let ahead = at.millis_since(now);
    (-PAST_GRACE_MS..=MAX_AHEAD_MS)
        .contains(&ahead)
        .then(|| at.max(now))
}

/// `now` plus `ms`, saturating: an absurd sum is dropped by [`accept`].
fn after(now: Timestamp, ms: f64) -> Timestamp {
    // A float-to-integer cast saturates, so a huge duration stays huge.
    now.add_ms(ms.round() as i64)
}

/// Epoch milliseconds if `n` is that large, else epoch seconds.
fn epoch(n: i64) -> Option<Timestamp> {
    let ms = if n >= EPOCH_MILLIS_FLOOR {
        n
    } else {
        n.checked_mul(1000)?
    };
    Timestamp::from_millis(ms)
}

/// A rate-limit header's or field's value.
fn stamp(rest: &str, now: Timestamp, zone: Zone) -> Option<Timestamp> {
    if let Some(at) = iso(rest, zone) {
        return Some(at);
    }
    if let Some((n, tail)) = integer(rest)
        && !tail.starts_with(|c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | ':'))
    {
        return if n >= EPOCH_SECONDS_FLOOR {
            epoch(n)
        } else {
            Some(now.add_ms(n.saturating_mul(1000)))
        };
    }
    match duration_ms(rest) {
        Some(ms) => Some(after(now, ms)),
        None => wall(rest, now, zone),
    }
}

/// The leading digits of `text`, with a fraction if one follows, and the
/// text after them.
fn number(text: &str) -> Option<(f64, &str)> {
    let whole = leading_digits(text);
    if whole == 0 {
        return None;
    }
    let fraction = text[whole..]
        .strip_prefix('.')
        .map_or(0, |tail| match leading_digits(tail) {
            0 => 0,
            n => n + 1,
        });
    let end = whole + fraction;
    let value = text[..end].parse().ok()?;
    Some((value, &text[end..]))
}

/// The leading digits of `text` as an integer, and the text after them.
fn integer(text: &str) -> Option<(i64, &str)> {
    let end = leading_digits(text);
    let value = text[..end].parse().ok()?;
    Some((value, &text[end..]))
}

fn leading_digits(text: &str) -> usize {
    text.bytes().take_while(u8::is_ascii_digit).count()
}

/// The milliseconds of the duration at the start of `text`: numbers, each
/// followed by a unit, separated by spaces, commas or `and`.
fn duration_ms(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut parts = 0;
    let mut rest = text;
    while let Some((value, tail)) = number(rest) {
        let tail = tail.trim_start();
        let letters = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let Some(scale) = unit_ms(&tail[..letters]) else {
            break;
        };
        total += value * scale;
        parts += 1;
        let tail = tail[letters..].trim_start();
        let tail = tail.strip_prefix(',').unwrap_or(tail).trim_start();
        rest = tail.strip_prefix("and").unwrap_or(tail).trim_start();
    }
    (parts > 0).then_some(total)
}

/// The milliseconds in one of a unit's spellings.
fn unit_ms(unit: &str) -> Option<f64> {
    let ms = match unit.to_ascii_lowercase().as_str() {
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1e3,
        "m" | "min" | "mins" | "minute" | "minutes" => 6e4,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3.6e6,
        "d" | "day" | "days" => 8.64e7,
        _ => return None,
    };
    Some(ms)
}

/// An RFC 3339 instant at the start of a text, its seconds and the colon
/// of its offset optional; one without an offset is a wall time in the
/// zone.
static ISO: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\\.[0-9]+)?)?\
         (?P<offset>Z|[+-][0-9]{2}:?[0-9]{2})?",
    )
});

fn iso(text: &str, zone: Zone) -> Option<Timestamp> {
    let found = ISO.captures(text)?;
    let stamp = found.get(0)?.as_str();
    if let Some(offset) = found.name("offset") {
        // `+0530` as `+05:30`, the form the parser takes.
        let mut stamp = stamp.to_owned();
        if offset.len() == 5 {
            stamp.insert(stamp.len() - 2, ':');
        }
        return Timestamp::parse(&stamp).ok();
    }
    resolve(zone, Timestamp::parse_naive(stamp)?)
}

/// An HTTP date (RFC 9110 §5.6.7), as `Retry-After` may hold.
static HTTP_DATE: LazyLock<Regex> = LazyLock::new(|| {
    pattern("^[A-Za-z]{3}, [0-9]{2} [A-Za-z]{3} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT")
});

fn http_date(text: &str) -> Option<Timestamp> {
    let stamp = HTTP_DATE.find(text)?.as_str();
    let at = DateTime::parse_from_rfc2822(stamp).ok()?;
    Timestamp::from_datetime(&at)
}

/// A wall time at the start of a text, with the date, year and zone it
/// may have.
static WALL: LazyLock<Regex> = LazyLock::new(|| {
    let s = JS_SPACE;
    pattern(&format!(
        "(?i-u)^(?:(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\\.?{s}+\
         (?P<day>[0-9]{{1,2}})(?:st|nd|rd|th)?,?(?:{s}+(?P<year>[0-9]{{4}}),?)?{s}+(?:at{s}+)?)?\
         (?P<hour>[0-9]{{1,2}})(?::(?P<minute>[0-9]{{2}})(?::(?P<second>[0-9]{{2}}))?)?\
         (?:{s}*(?P<half>[ap]m(?-u:\\b)|[ap]\\.m\\.))?\
         (?:{s}*\\((?P<zone>[a-z_]+(?:/[a-z0-9_+-]+)*)\\)|{s}+(?P<utc>utc|gmt)(?-u:\\b))?",
    ))
});

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// The next instant at or after the past grace that the wall time at the
/// start of `text` names.
fn wall(text: &str, now: Timestamp, zone: Zone) -> Option<Timestamp> {
    let found = WALL.captures(text)?;
    let time = clock_time(&found)?;
    let zone = match (found.name("zone"), found.name("utc")) {
        (Some(name), _) => name.as_str().parse().map_or(zone, Zone::Named),
        (None, Some(_)) => Zone::Named(Tz::utc()),
        (None, None) => zone,
    };
    let today = local(zone, now).date();
    let dates = match found.name("month") {
        None => [Some(today), today.succ_opt()],
        Some(month) => {
            let month = MONTHS.iter().position(|m| {
                month
                    .as_str()
                    .get(..3)
                    .is_some_and(|p| p.eq_ignore_ascii_case(m))
            })?;
            let month = u32::try_from(month).ok()? + 1;
            let day = found.name("day")?.as_str().parse().ok()?;
            match found.name("year") {
                Some(year) => [
                    NaiveDate::from_ymd_opt(year.as_str().parse().ok()?, month, day),
                    None,
                ],
                None => [
                    NaiveDate::from_ymd_opt(today.year(), month, day),
                    NaiveDate::from_ymd_opt(today.year() + 1, month, day),
                ],
            }
        }
    };
    let earliest = now.add_ms(-PAST_GRACE_MS);
    dates
        .into_iter()
        .flatten()
        .filter_map(|date| resolve(zone, date.and_time(time)))
        .find(|&at| at >= earliest)
}

/// The time of day a wall time names: a 12-hour clock needs `am` or `pm`,
/// a 24-hour one its minutes.
fn clock_time(found: &Captures<'_>) -> Option<NaiveTime> {
    let field = |name| -> Option<u32> {
        found
            .name(name)
            .map_or(Some(0), |m| m.as_str().parse().ok())
    };
    let hour = field("hour")?;
    let hour = match found.name("half") {
        Some(half) if (1..=12).contains(&hour) => {
            let pm = half.as_str().starts_with(['p', 'P']);
            hour % 12 + if pm { 12 } else { 0 }
        }
        Some(_) => return None,
        None if found.name("minute").is_some() => hour,
        None => return None,
    };
    NaiveTime::from_hms_opt(hour, field("minute")?, field("second")?)
}

/// The wall clock in `zone` at `now`.
fn local(zone: Zone, now: Timestamp) -> NaiveDateTime {
    let utc = now.to_datetime();
    match zone {
        Zone::Local => utc.with_timezone(&Local).naive_local(),
        Zone::Named(tz) => utc.with_timezone(&tz).naive_local(),
    }
}

/// The instant a wall time in `zone` names.
fn resolve(zone: Zone, wall: NaiveDateTime) -> Option<Timestamp> {
    match zone {
        Zone::Local => resolve_in(&Local, wall),
        Zone::Named(tz) => resolve_in(&tz, wall),
    }
}

/// The earlier of a repeated wall time; for one skipped by a daylight
/// saving change, the instant an hour later on the wall, when the clocks
/// had jumped past it.
fn resolve_in<Z: TimeZone>(zone: &Z, wall: NaiveDateTime) -> Option<Timestamp> {
    let at = match zone.from_local_datetime(&wall).earliest() {
        Some(at) => at,
        None => {
            let later = wall.checked_add_signed(TimeDelta::hours(1))?;
            zone.from_local_datetime(&later).earliest()?
        }
    };
    Timestamp::from_datetime(&at)
}

#[cfg(test)]
mod tests;
