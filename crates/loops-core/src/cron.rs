//! Cron expressions (SPEC §2.2): the 5-field grammar, its error messages, and
//! fire times in a time zone.
//!
//! [`CronExpr::parse`] tokenizes and validates the expression itself, so every
//! error carries the SPEC wording (`invalid cron step: */0`, ...); the
//! grammar lives in `cron/grammar.rs`. It then hands a normalized expression
//! (plain numbers and ranges) to the `croner` crate, which searches fire times
//! field by field instead of minute by minute, so rare expressions cost about
//! the same as common ones (SPEC §9 items 3 and 4).
//!
//! Invariants:
//! - a [`CronExpr`] is parsed once and can fire: expressions whose
//!   day-of-month values exist in none of their months are rejected at parse
//!   time (SPEC §10 item 9), and every other expression fires at least once
//!   every eight years (`0 0 29 2 *` across 2100);
//! - fire times are whole wall-clock minutes, and [`CronExpr::next_after`] is
//!   strictly after its argument.
//!
//! # Grammar decisions (SPEC §9 item 36)
//!
//! The original's quirks are decided as follows:
//! - `5/15` (a step on a single value) is rejected; the original silently
//!   reads it as `5`. The message suggests `5-59/15`.
//! - An empty list element (`1,,2`) is rejected; the original reads it as the
//!   full range.
//! - `-5` is rejected as `invalid cron range: -5`; the original reads `0-5`.
//! - A range whose start is after its end (`5-1`) is rejected; the original
//!   silently produces no values from it.
//! - `*/1` still counts as *restricted* for the day-of-month/day-of-week rule
//!   (kept): a day field is unrestricted only when its text is exactly `*`.
//! - Month names (`JAN`–`DEC`), weekday names (`SUN`–`SAT`), both
//!   case-insensitive and usable in ranges (`MON-FRI`, `FRI-SUN`), and the
//!   macros `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
//!   `@midnight` and `@hourly` are accepted; the original rejects them.
//! - The `?`, `L`, `W`, `#` and `+` modifiers are rejected with a message
//!   saying they are not supported, as in the original.
//! - A second `/` (`*/5/2`) is rejected; the original ignores what follows it
//!   (SPEC §2.2).
//!
//! # Time zones and DST (SPEC §9 item 5)
//!
//! An expression is evaluated in an optional IANA zone, or else in the host's
//! local time as the original does. Around DST changes, croner's rules apply,
//! and `cron/tests.rs` checks them against a brute-force reference:
//! - A *fixed-time* expression has exactly one minute value and one hour value
//!   (`30 2 * * *`). If that time falls in a spring-forward gap it fires once,
//!   at the first instant after the gap; if it falls in a fall-back overlap it
//!   fires once, at the earlier instant.
//! - Every other expression (`*/30 * * * *`, `0 1,2 * * *`) fires at each real
//!   instant whose wall-clock time matches: wall times inside a gap do not
//!   exist and are skipped, and a repeated wall time fires at both instants.
//!   This keeps the spacing of interval-like schedules.
//!
//! Either way, fire times never go backwards, so catch-up never steps back
//! across a fall-back change (the original can, SPEC §9 item 5).

use std::fmt;

use chrono::{Local, TimeZone};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::time::Timestamp;
use crate::tz::Tz;

use self::grammar::{Fields, parse_fields};

mod grammar;

/// Where a cron expression is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// The host's local time zone, as the original (SPEC §2.2).
    Local,
    /// An IANA zone.
    Named(Tz),
}

impl Zone {
    /// Resolves an optional IANA zone name: `None` is host local time.
    ///
    /// ```
    /// use loops_core::Zone;
    /// assert_eq!(Zone::parse(None).unwrap(), Zone::Local);
    /// assert_eq!(Zone::parse(Some("Europe/Berlin")).unwrap().to_string(), "Europe/Berlin");
    /// assert_eq!(
    ///     Zone::parse(Some("Mars/Base")).unwrap_err().to_string(),
    ///     "unknown time zone: Mars/Base (use an IANA name such as Europe/Berlin)"
    /// );
    /// ```
    pub fn parse(name: Option<&str>) -> Result<Zone, CronError> {
        match name {
            None => Ok(Zone::Local),
            Some(name) => {
                name.trim()
                    .parse::<Tz>()
                    .map(Zone::Named)
                    .map_err(|_| CronError::UnknownZone {
                        zone: name.to_owned(),
                    })
            }
        }
    }

    /// Every IANA zone name [`Zone::parse`] accepts (shell completion
    /// offers them).
    ///
    /// ```
    /// use loops_core::Zone;
    /// assert!(Zone::names().any(|name| name == "Asia/Kolkata"));
    /// assert!(Zone::names().all(|name| Zone::parse(Some(name)).is_ok()));
    /// ```
    pub fn names() -> impl Iterator<Item = &'static str> {
        Tz::names()
    }
}

/// The IANA zone name a `TZ` value or an `/etc/localtime` link target
/// gives: `Asia/Kolkata`, `:Asia/Kolkata` and
/// `/usr/share/zoneinfo/Asia/Kolkata` all give `Asia/Kolkata`. A POSIX
/// rule (`IST-5:30`) or an unknown name gives `None`.
///
/// ```
/// use loops_core::zone_name;
/// assert_eq!(zone_name(":Asia/Kolkata"), Some("Asia/Kolkata"));
/// assert_eq!(zone_name("/usr/share/zoneinfo/Europe/Berlin"), Some("Europe/Berlin"));
/// assert_eq!(zone_name("IST-5:30"), None);
/// ```
pub fn zone_name(value: &str) -> Option<&str> {
    let name = value.trim().trim_start_matches(':');
    let name = name.rsplit_once("zoneinfo/").map_or(name, |(_, name)| name);
    Tz::get(name).is_some().then_some(name)
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Zone::Local => f.write_str("local"),
            Zone::Named(tz) => f.write_str(tz.name()),
        }
    }
}

/// A cron expression that is invalid, can never fire, or has no fire time
/// left in the supported range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CronError {
    /// Not exactly five fields (SPEC §10 item 3).
    #[error("cron must have 5 fields, got {got}: \"{expr}\"")]
    FieldCount {
        /// The expression, as given.
        expr: String,
        /// How many fields it has.
        got: usize,
    },
    /// An `@` macro that does not exist.
    #[error(
        "unknown cron macro: {expr} (use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)"
    )]
    UnknownMacro {
        /// The expression, as given.
        expr: String,
    },
    /// A step that is not a positive integer or has nothing to step over
    /// (SPEC §10 item 4).
    #[error("invalid cron step: {part}{}", hint_suffix(.hint))]
    Step {
        /// The list element.
        part: String,
        /// How to fix it, when there is something to say.
        hint: Option<String>,
    },
    /// A malformed or backwards range.
    #[error("invalid cron range: {part}{}", hint_suffix(.hint))]
    Range {
        /// The list element.
        part: String,
        /// How to fix it, when there is something to say.
        hint: Option<String>,
    },
    /// A list element that is not a number, a name or `*`.
    #[error("invalid cron field: {part}{}", hint_suffix(.hint))]
    Field {
        /// The list element.
        part: String,
        /// How to fix it, when there is something to say.
        hint: Option<String>,
    },
    /// An empty element in a list, such as `1,,2` (SPEC §9 item 36).
    #[error("invalid cron field: (empty element in {field}; remove the extra comma)")]
    EmptyElement {
        /// The whole field text.
        field: String,
    },
    /// A Quartz-style modifier (SPEC §2.2: not supported).
    #[error(
        "invalid cron field: {part} (the {modifier} modifier is not supported; use numbers, names, *, ranges, steps and lists)"
    )]
    Unsupported {
        /// The list element.
        part: String,
        /// The modifier found: `?`, `L`, `W`, `#` or `+`.
        modifier: char,
    },
    /// A generated value outside the field's range (SPEC §10 item 5); the
    /// message keeps the SPEC's words and names the field (issue 16 §6).
    #[error(
        "cron value out of range: {value} in {field} ({value} is out of range for {name} ({min}–{max}))"
    )]
    OutOfRange {
        /// The first offending value.
        value: String,
        /// The whole field text.
        field: String,
        /// The field's name: `minute`, `hour`, `day of month`, `month` or
        /// `day of week`.
        name: &'static str,
        /// The field's smallest value.
        min: u64,
        /// The field's largest value.
        max: u64,
    },
    /// A valid expression that matches no date (SPEC §10 item 9).
    #[error("cron expression can never fire: \"{expr}\" ({reason})")]
    NeverFires {
        /// The expression, as given.
        expr: String,
        /// Why, for example `day 30 does not exist in February`.
        reason: String,
    },
    /// A time zone name that is not in the IANA database.
    #[error("unknown time zone: {zone} (use an IANA name such as Europe/Berlin)")]
    UnknownZone {
        /// The name, as given.
        zone: String,
    },
    /// No fire time remains before the end of the supported range.
    #[error("cron expression has no fire time after {from}: \"{expr}\"")]
    Exhausted {
        /// The expression, as given.
        expr: String,
        /// Where the search started.
        from: Timestamp,
    },
}

/// Renders an optional hint as ` (<hint>)`.
fn hint_suffix(hint: &Option<String>) -> String {
    hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default()
}

/// A parsed, validated cron expression with its zone.
///
/// Parsing happens once; [`CronExpr::next_after`] and
/// [`CronExpr::latest_at_or_before`] reuse the result (SPEC §9 item 3).
///
/// ```
/// use loops_core::{CronExpr, Timestamp};
/// let every_15 = CronExpr::parse("*/15 * * * *", Some("UTC")).unwrap();
/// let at = |s: &str| s.parse::<Timestamp>().unwrap();
/// assert_eq!(every_15.next_after(at("2026-01-01T00:07:00Z")).unwrap(), at("2026-01-01T00:15:00Z"));
/// assert_eq!(every_15.next_after(at("2026-01-01T00:15:00Z")).unwrap(), at("2026-01-01T00:30:00Z"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    source: String,
    zone: Zone,
    fields: Fields,
    cron: Cron,
}

impl CronExpr {
    /// Parses and validates an expression, to be evaluated in `timezone` (an
    /// IANA name) or in host local time when `None`.
    ///
    /// ```
    /// use loops_core::CronExpr;
    /// let err = |e: &str| CronExpr::parse(e, Some("UTC")).unwrap_err().to_string();
    /// assert_eq!(err("* * * *"), "cron must have 5 fields, got 4: \"* * * *\"");
    /// assert_eq!(err("*/0 * * * *"), "invalid cron step: */0");
    /// assert_eq!(
    ///     err("60 * * * *"),
    ///     "cron value out of range: 60 in 60 (60 is out of range for minute (0–59))"
    /// );
    /// assert_eq!(
    ///     err("0 0 30 2 *"),
    ///     "cron expression can never fire: \"0 0 30 2 *\" (day 30 does not exist in February)"
    /// );
    /// assert!(CronExpr::parse("0 9 * * mon-fri", None).is_ok());
    /// ```
    pub fn parse(expression: &str, timezone: Option<&str>) -> Result<CronExpr, CronError> {
        let fields = parse_fields(expression)?;
        fields.check_can_fire(expression)?;
        let zone = Zone::parse(timezone)?;
        // The normalized text uses only digits, commas and `*`, which croner
        // accepts; an error here would be a bug, reported rather than panicked.
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .dom_and_dow(false)
            .build()
            .parse(&fields.normalized())
            .map_err(|e| CronError::Field {
                part: expression.to_owned(),
                hint: Some(format!("internal error: {e}")),
            })?;
        Ok(CronExpr {
            source: expression.to_owned(),
            zone,
            fields,
            cron,
        })
    }

    /// The expression, as given.
    pub fn expression(&self) -> &str {
        &self.source
    }

    /// The zone it is evaluated in.
    pub fn zone(&self) -> Zone {
        self.zone
    }

    /// The first fire time strictly after `from`.
    ///
    /// As in SPEC §2.2, the search starts at `from` truncated to the minute,
    /// plus one minute; fire times are whole minutes. Rare expressions such
    /// as `0 0 29 2 *` find their next date however far away it is (the
    /// original gives up after 366 days, SPEC §9 item 4). The only error is
    /// [`CronError::Exhausted`], past croner's search range (year 5000) or
    /// ours (year 9999).
    pub fn next_after(&self, from: Timestamp) -> Result<Timestamp, CronError> {
        match self.zone {
            Zone::Local => self.next_in(&Local, from),
            Zone::Named(tz) => self.next_in(&tz, from),
        }
    }

    /// The latest fire time at or before `t`, or `None` if there is none in
    /// the supported range.
    ///
    /// This is a direct backward search, so its cost does not depend on how
    /// long ago the previous fire time was missed (SPEC §2.5 `latest`).
    ///
    /// ```
    /// use loops_core::{CronExpr, Timestamp};
    /// let hourly = CronExpr::parse("@hourly", Some("UTC")).unwrap();
    /// let at = |s: &str| s.parse::<Timestamp>().unwrap();
    /// assert_eq!(hourly.latest_at_or_before(at("2026-01-01T05:59:59.999Z")), Some(at("2026-01-01T05:00:00Z")));
    /// assert_eq!(hourly.latest_at_or_before(at("2026-01-01T06:00:00Z")), Some(at("2026-01-01T06:00:00Z")));
    /// ```
    pub fn latest_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        match self.zone {
            Zone::Local => self.latest_in(&Local, t),
            Zone::Named(tz) => self.latest_in(&tz, t),
        }
    }

    /// Whether `t` is a fire time, with the DST rules of the module doc.
    pub fn matches(&self, t: Timestamp) -> bool {
        t.checked_add_ms(-1)
            .and_then(|before| self.next_after(before).ok())
            .is_some_and(|next| next == t)
    }

    fn next_in<Z: TimeZone>(&self, zone: &Z, from: Timestamp) -> Result<Timestamp, CronError> {
        let exhausted = || CronError::Exhausted {
            expr: self.source.clone(),
            from,
        };
        // croner's exclusive search steps one second along the wall clock and
        // only accepts second 0, so starting from the truncated minute yields
        // the SPEC's "truncate, then add one minute" while still seeing a
        // fixed-time job whose minute lies in a DST gap. Starting at the
        // instant one minute later would miss it when that instant is the
        // very end of the gap.
        let mut origin = Timestamp::from_millis(from.as_millis().div_euclid(60_000) * 60_000)
            .ok_or_else(exhausted)?;
        // In zones whose offset is not whole minutes (historic local mean
        // time) a fire time can land inside `from`'s minute; search on.
        for _ in 0..4 {
            let start = origin.to_datetime().with_timezone(zone);
            let found = self
                .cron
                .find_next_occurrence(&start, false)
                .map_err(|_| exhausted())?;
            let found = Timestamp::from_datetime(&found).ok_or_else(exhausted)?;
            if found > from {
                return Ok(found);
            }
            if found <= origin {
                break;
            }
            origin = found;
        }
        Err(exhausted())
    }

    fn latest_in<Z: TimeZone>(&self, zone: &Z, t: Timestamp) -> Option<Timestamp> {
        // Fire times are whole seconds, so dropping the milliseconds loses
        // nothing and keeps croner away from sub-second comparisons.
        let floor = Timestamp::from_millis(t.as_millis().div_euclid(1_000) * 1_000)?;
        let found = self
            .cron
            .find_previous_occurrence(&floor.to_datetime().with_timezone(zone), true)
            .ok()?;
        Timestamp::from_datetime(&found).filter(|&found| found <= t)
    }
}

/// `nextCronRun(expr, from)` (SPEC §2.2) in host local time: parses
/// `expression` and returns its first fire time strictly after `from`.
///
/// Use [`CronExpr`] to evaluate an expression more than once or in an IANA
/// zone.
pub fn next_cron_run(expression: &str, from: Timestamp) -> Result<Timestamp, CronError> {
    CronExpr::parse(expression, None)?.next_after(from)
}

#[cfg(test)]
mod tests;
