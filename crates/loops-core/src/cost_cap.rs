//! A loop's daily cost cap (issue 27): the day it counts, and what a loop
//! that reached it says. The scheduler checks the cap before each run; the
//! store sums the day's costs.

use chrono::{NaiveTime, TimeZone};

use crate::cron::Zone;
use crate::time::Timestamp;
use crate::usd::Usd;

/// The first instant of the calendar day that holds `now` in `zone`: the
/// local midnight, or, where a time change skips midnight, the day's first
/// instant that exists.
pub fn day_start(now: Timestamp, zone: Zone) -> Timestamp {
    match zone {
        Zone::Local => day_start_in(&chrono::Local, now),
        Zone::Named(tz) => day_start_in(&tz, now),
    }
}

/// The minutes of a day.
const MINUTES_PER_DAY: i64 = 1_440;

fn day_start_in<Tz: TimeZone>(tz: &Tz, now: Timestamp) -> Timestamp {
    let local = now.to_datetime().with_timezone(tz).naive_local();
    let midnight = local.date().and_time(NaiveTime::MIN);
    // No midnight that day (a skipped hour): step forward a minute at a
    // time to the first wall time that exists, within the day.
    (0..MINUTES_PER_DAY)
        .map(|minute| midnight + chrono::TimeDelta::minutes(minute))
        .find_map(|wall| tz.from_local_datetime(&wall).earliest())
        .and_then(|start| Timestamp::from_datetime(&start))
        .filter(|start| *start <= now)
        .unwrap_or(now)
}

/// The `pausedReason` of loop `name` once `spent` today reached `cap`;
/// `None` while it is below.
pub fn cost_cap_reason(name: &str, spent: Usd, cap: Usd) -> Option<String> {
    (spent >= cap).then(|| {
        format!(
            "daily cost cap reached: {spent} spent today of maxCostPerDayUsd {cap}; \
             `loops resume {name}` after midnight, or raise it with `loops edit {name} \
             --max-cost-per-day`"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_day_starts_at_the_zones_midnight() {
        let berlin = Zone::parse(Some("Europe/Berlin")).unwrap();
        // 00:30 in Berlin (UTC+1 in winter) is still the 2nd there.
        assert_eq!(
            day_start(at("2026-01-01T23:30:00Z"), berlin),
            at("2026-01-01T23:00:00Z")
        );
        let utc = Zone::parse(Some("UTC")).unwrap();
        assert_eq!(
            day_start(at("2026-01-01T23:30:00Z"), utc),
            at("2026-01-01T00:00:00Z")
        );
        assert_eq!(
            day_start(at("2026-01-01T00:00:00Z"), utc),
            at("2026-01-01T00:00:00Z")
        );
    }

    #[test]
    fn a_day_without_a_midnight_starts_at_its_first_instant() {
        // Santiago skipped from 24:00 to 01:00 on 2022-09-11.
        let santiago = Zone::parse(Some("America/Santiago")).unwrap();
        assert_eq!(
            day_start(at("2022-09-11T12:00:00Z"), santiago),
            at("2022-09-11T04:00:00Z")
        );
    }

    #[test]
    fn the_cap_is_reached_at_its_amount() {
        let usd = |d| Usd::from_dollars(d).unwrap();
        assert_eq!(cost_cap_reason("nightly", usd(4.99), usd(5.0)), None);
        assert_eq!(
            cost_cap_reason("nightly", usd(5.0), usd(5.0)).as_deref(),
            Some(
                "daily cost cap reached: $5.00 spent today of maxCostPerDayUsd $5.00; \
                 `loops resume nightly` after midnight, or raise it with `loops edit nightly \
                 --max-cost-per-day`"
            )
        );
        assert!(cost_cap_reason("n", usd(0.0), usd(0.0)).is_some());
    }
}
