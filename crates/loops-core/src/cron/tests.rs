//! Tests of the cron grammar and fire times (SPEC §2.2, §10 items 2–9),
//! including a brute-force reference for fire times around DST changes.

use chrono::{Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, Timelike, Utc};

use super::grammar::Fields;
use super::*;

impl Fields {
    /// Whether a wall-clock time matches (SPEC §2.2 "Matching"), the
    /// reference the croner-backed search is checked against.
    fn wall_matches(&self, wall: NaiveDateTime) -> bool {
        let has = |bits: u64, v: u32| bits & (1 << v) != 0;
        if wall.second() != 0 || wall.nanosecond() != 0 {
            return false;
        }
        if !has(self.minutes, wall.minute()) || !has(self.hours, wall.hour()) {
            return false;
        }
        if !has(self.months, wall.month()) {
            return false;
        }
        let day = has(self.days, wall.day());
        let weekday = has(self.weekdays, wall.weekday().num_days_from_sunday());
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (true, false) => weekday,
            (false, true) => day,
            (false, false) => day || weekday,
        }
    }
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// Checks the next fire time after `from`, evaluated in UTC.
fn check_next(expr: &str, from: &str, expected: &str) {
    let cron = CronExpr::parse(expr, Some("UTC")).unwrap();
    assert_eq!(
        cron.next_after(at(from)).unwrap(),
        at(expected),
        "{expr} after {from}"
    );
}

/// Checks the error message of an expression.
fn check_err(expr: &str, expected: &str) {
    let err = CronExpr::parse(expr, Some("UTC")).unwrap_err();
    assert_eq!(err.to_string(), expected, "{expr}");
}

#[test]
fn spec_checklist_item_2_next_is_strictly_after() {
    check_next(
        "*/15 * * * *",
        "2026-01-01T00:07:00Z",
        "2026-01-01T00:15:00Z",
    );
    check_next(
        "*/15 * * * *",
        "2026-01-01T00:15:00Z",
        "2026-01-01T00:30:00Z",
    );
    check_next(
        "*/15 * * * *",
        "2026-01-01T00:15:00.500Z",
        "2026-01-01T00:30:00Z",
    );
    check_next(
        "*/15 * * * *",
        "2026-01-01T00:14:59.999Z",
        "2026-01-01T00:15:00Z",
    );
    check_next("* * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z");
    check_next(
        "0 0 1 1 *",
        "2026-12-31T23:59:59.999Z",
        "2027-01-01T00:00:00Z",
    );
}

// SPEC §10 items 3, 4 and 5
#[test]
fn spec_checklist_items_3_4_5_errors() {
    check_err("* * * *", "cron must have 5 fields, got 4: \"* * * *\"");
    check_err(
        "0 * * * * *",
        "cron must have 5 fields, got 6: \"0 * * * * *\"",
    );
    check_err("", "cron must have 5 fields, got 0: \"\"");
    check_err("*/0 * * * *", "invalid cron step: */0");
    check_err(
        "60 * * * *",
        "cron value out of range: 60 in 60 (60 is out of range for minute (0–59))",
    );
    check_err(
        "1,60 * * * *",
        "cron value out of range: 60 in 1,60 (60 is out of range for minute (0–59))",
    );
    check_err(
        "50-70 * * * *",
        "cron value out of range: 60 in 50-70 (60 is out of range for minute (0–59))",
    );
    check_err(
        "0-70/20 * * * *",
        "cron value out of range: 60 in 0-70/20 (60 is out of range for minute (0–59))",
    );
    check_err(
        "* 24 * * *",
        "cron value out of range: 24 in 24 (24 is out of range for hour (0–23))",
    );
    check_err(
        "* * 0 * *",
        "cron value out of range: 0 in 0 (0 is out of range for day of month (1–31))",
    );
    check_err(
        "* * 32 * *",
        "cron value out of range: 32 in 32 (32 is out of range for day of month (1–31))",
    );
    check_err(
        "* * * 13 *",
        "cron value out of range: 13 in 13 (13 is out of range for month (1–12))",
    );
    check_err(
        "* * * * 8",
        "cron value out of range: 8 in 8 (8 is out of range for day of week (0–7))",
    );
    check_err(
        "99999999999999999999 * * * *",
        "cron value out of range: 99999999999999999999 in 99999999999999999999 \
         (99999999999999999999 is out of range for minute (0–59))",
    );
    check_err("1-2-3 * * * *", "invalid cron range: 1-2-3");
    check_err("a * * * *", "invalid cron field: a");
    check_err("1,x * * * *", "invalid cron field: x");
    check_err("*/x * * * *", "invalid cron step: */x");
    check_err("*/ * * * *", "invalid cron step: */");
    check_err("*/-1 * * * *", "invalid cron step: */-1");
    check_err("*/5/2 * * * *", "invalid cron step: */5/2");
    check_err("0 9 * * MONDAY", "invalid cron field: MONDAY");
    check_err("0 9 * MON *", "invalid cron field: MON");
    check_err("0 9 * * JAN", "invalid cron field: JAN");
    check_err("*-5 * * * *", "invalid cron field: *-5");
}

#[test]
fn spec_item_36_quirks_are_rejected_with_hints() {
    check_err(
        "5/15 * * * *",
        "invalid cron step: 5/15 (a step needs * or a range: write 5-59/15 for every 15 from 5, or 5 alone)",
    );
    check_err(
        "* * * * 1/2",
        "invalid cron step: 1/2 (a step needs * or a range: write 1-6/2 for every 2 from 1, or 1 alone)",
    );
    check_err(
        "/5 * * * *",
        "invalid cron step: /5 (a step needs * or a range: write */5)",
    );
    check_err(
        "1,,2 * * * *",
        "invalid cron field: (empty element in 1,,2; remove the extra comma)",
    );
    check_err(
        "1, * * * *",
        "invalid cron field: (empty element in 1,; remove the extra comma)",
    );
    check_err("-5 * * * *", "invalid cron range: -5");
    check_err("5- * * * *", "invalid cron range: 5-");
    check_err(
        "5-1 * * * *",
        "invalid cron range: 5-1 (start is after end)",
    );
    check_err(
        "* * * * FRI-MON",
        "invalid cron range: FRI-MON (start is after end)",
    );
    for (expr, part, modifier) in [
        ("0 0 ? * *", "?", '?'),
        ("0 0 L * *", "L", 'L'),
        ("0 0 15W * *", "15W", 'W'),
        ("0 0 LW * *", "LW", 'L'),
        ("0 0 * * 5L", "5L", 'L'),
        ("0 0 * * 5#3", "5#3", '#'),
        ("0 0 * * +1", "+1", '+'),
    ] {
        check_err(
            expr,
            &format!(
                "invalid cron field: {part} (the {modifier} modifier is not supported; use numbers, names, *, ranges, steps and lists)"
            ),
        );
    }
}

#[test]
fn names_and_macros() {
    let same = |a: &str, b: &str| {
        let a = CronExpr::parse(a, Some("UTC")).unwrap();
        let b = CronExpr::parse(b, Some("UTC")).unwrap();
        assert_eq!(a.fields, b.fields, "{} vs {}", a.source, b.source);
    };
    same("0 9 * * mon-fri", "0 9 * * 1-5");
    same("0 9 * * MON,wed,Fri", "0 9 * * 1,3,5");
    same("0 9 * * FRI-SUN", "0 9 * * 5-7");
    same("0 9 * * SUN", "0 9 * * 0");
    same("0 9 * * SUN-TUE", "0 9 * * 0-2");
    same("0 9 * * SUN-SUN", "0 9 * * 0");
    same("0 9 * * SAT-SUN", "0 9 * * 6,0");
    same("0 9 1 jan-mar,DEC *", "0 9 1 1-3,12 *");
    same("0 9 1 JAN-DEC/3 *", "0 9 1 1,4,7,10 *");
    same("@yearly", "0 0 1 1 *");
    same("@ANNUALLY", "0 0 1 1 *");
    same("@monthly", "0 0 1 * *");
    same(" @weekly ", "0 0 * * 0");
    same("@daily", "0 0 * * *");
    same("@midnight", "0 0 * * *");
    same("@hourly", "0 * * * *");
    check_err(
        "@reboot",
        "unknown cron macro: @reboot (use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)",
    );
    check_err(
        "@daily *",
        "unknown cron macro: @daily * (use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)",
    );
}

#[test]
fn normalized_text_uses_runs() {
    let normalized = |e: &str| CronExpr::parse(e, Some("UTC")).unwrap().fields.normalized();
    assert_eq!(normalized("* * * * *"), "0-59 0-23 * 1-12 *");
    assert_eq!(
        normalized("*/15 9-17 */1 jan,feb,dec 7"),
        "0,15,30,45 9-17 1-31 1-2,12 0"
    );
    assert_eq!(normalized("0 0 * * 5-7"), "0 0 * 1-12 0,5-6");
}

// SPEC §10 item 6
#[test]
fn spec_checklist_item_6_seven_is_sunday() {
    // 2026-01-04 is a Sunday.
    check_next("0 0 * * 7", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z");
    check_next("0 0 * * 0", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z");
    check_next(
        "0 0 * * 6-7",
        "2026-01-01T00:00:00Z",
        "2026-01-03T00:00:00Z",
    );
}

// SPEC §10 item 7
#[test]
fn spec_checklist_item_7_day_fields() {
    // Both restricted: the 15th (a Thursday) or any Monday, whichever is first.
    check_next("0 0 15 * 1", "2026-01-06T00:00:00Z", "2026-01-12T00:00:00Z");
    check_next("0 0 13 * 1", "2026-01-06T00:00:00Z", "2026-01-12T00:00:00Z");
    check_next("0 0 8 * 1", "2026-01-06T00:00:00Z", "2026-01-08T00:00:00Z");
    // Only day of week restricted: day of month is ignored.
    check_next("0 0 * * 1", "2026-01-06T00:00:00Z", "2026-01-12T00:00:00Z");
    // `*/1` counts as restricted (SPEC §9 item 36, kept): with a
    // restricted weekday, every day matches through the day of month.
    check_next(
        "0 0 */1 * 1",
        "2026-01-06T00:00:00Z",
        "2026-01-07T00:00:00Z",
    );
    check_next(
        "0 0 * * */1",
        "2026-01-06T00:00:00Z",
        "2026-01-07T00:00:00Z",
    );
}

#[test]
fn rare_expressions_find_far_dates() {
    check_next("0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z");
    check_next("0 0 29 2 *", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z");
    // Friday the 13th.
    check_next("0 0 13 * 5", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z");
    check_next("0 0 13 * *", "2026-01-13T00:00:00Z", "2026-02-13T00:00:00Z");
    check_next("0 0 31 * *", "2026-04-01T00:00:00Z", "2026-05-31T00:00:00Z");
}

// SPEC §10 item 9 (the rejection; tests/blackbox/create.rs checks no row is written)
#[test]
fn spec_checklist_item_9_never_firing_is_rejected() {
    check_err(
        "0 0 30 2 *",
        "cron expression can never fire: \"0 0 30 2 *\" (day 30 does not exist in February)",
    );
    check_err(
        "0 0 31 4,6,9,11 *",
        "cron expression can never fire: \"0 0 31 4,6,9,11 *\" (day 31 does not exist in April, June, September or November)",
    );
    check_err(
        "0 0 30,31 feb *",
        "cron expression can never fire: \"0 0 30,31 feb *\" (days 30 and 31 do not exist in February)",
    );
    // A restricted weekday makes any day list possible (either may match).
    assert!(CronExpr::parse("0 0 30 2 1", Some("UTC")).is_ok());
    assert!(CronExpr::parse("0 0 31 2,3 *", Some("UTC")).is_ok());
}

#[test]
fn unknown_zone() {
    check_err_zone(
        "Mars/Base",
        "unknown time zone: Mars/Base (use an IANA name such as Europe/Berlin)",
    );
    check_err_zone(
        "",
        "unknown time zone:  (use an IANA name such as Europe/Berlin)",
    );
    assert_eq!(Zone::parse(Some("Etc/UTC")).unwrap().to_string(), "Etc/UTC");
}

#[test]
fn zone_names_from_tz_values_and_links() {
    assert_eq!(zone_name("Asia/Kolkata"), Some("Asia/Kolkata"));
    assert_eq!(zone_name(" :Asia/Kolkata "), Some("Asia/Kolkata"));
    assert_eq!(
        zone_name("../usr/share/zoneinfo/America/Argentina/Buenos_Aires"),
        Some("America/Argentina/Buenos_Aires")
    );
    assert_eq!(zone_name("/var/db/timezone/zoneinfo/UTC"), Some("UTC"));
    for nonsense in ["", ":", "IST-5:30", "Mars/Base", "/etc/localtime"] {
        assert_eq!(zone_name(nonsense), None, "{nonsense:?}");
    }
}

fn check_err_zone(zone: &str, expected: &str) {
    let err = CronExpr::parse("* * * * *", Some(zone)).unwrap_err();
    assert_eq!(err.to_string(), expected);
}

// SPEC §10 item 8
#[test]
fn spec_checklist_item_8_local_time_is_chrono_local() {
    let cron = CronExpr::parse("0 9 * * *", None).unwrap();
    assert_eq!(cron.zone(), Zone::Local);
    let from = at("2026-06-15T12:00:00Z");
    let next = cron.next_after(from).unwrap();
    let wall = next.to_datetime().with_timezone(&Local).naive_local();
    assert_eq!((wall.hour(), wall.minute(), wall.second()), (9, 0, 0));
    assert!(next > from && next.millis_since(from) <= 25 * 3_600_000);
    assert_eq!(next_cron_run("0 9 * * *", from).unwrap(), next);
}

#[test]
fn latest_at_or_before() {
    let cron = CronExpr::parse("*/15 * * * *", Some("UTC")).unwrap();
    assert_eq!(
        cron.latest_at_or_before(at("2026-01-01T00:29:59.999Z")),
        Some(at("2026-01-01T00:15:00Z"))
    );
    assert_eq!(
        cron.latest_at_or_before(at("2026-01-01T00:30:00Z")),
        Some(at("2026-01-01T00:30:00Z"))
    );
    let leap = CronExpr::parse("0 0 29 2 *", Some("UTC")).unwrap();
    assert_eq!(
        leap.latest_at_or_before(at("2027-06-01T00:00:00Z")),
        Some(at("2024-02-29T00:00:00Z"))
    );
    assert!(cron.matches(at("2026-01-01T00:45:00Z")));
    assert!(!cron.matches(at("2026-01-01T00:45:00.001Z")));
    assert!(!cron.matches(at("2026-01-01T00:46:00Z")));
}

#[test]
fn search_range_ends_without_panicking() {
    let cron = CronExpr::parse("0 0 29 2 *", Some("UTC")).unwrap();
    let max = Timestamp::from_millis(253_402_300_799_999).unwrap();
    assert!(matches!(
        cron.next_after(max),
        Err(CronError::Exhausted { .. })
    ));
    let year_4999 = at("4999-03-01T00:00:00Z");
    assert!(cron.next_after(year_4999).is_err());
    let min = Timestamp::from_millis(-62_167_219_200_000).unwrap();
    assert!(cron.latest_at_or_before(min).is_none());
    let every = CronExpr::parse("* * * * *", Some("America/New_York")).unwrap();
    let _ = every.next_after(min);
    let _ = every.latest_at_or_before(max);
    assert_eq!(
        next_cron_run("0 0 * * *", max).unwrap_err().to_string(),
        "cron expression has no fire time after 9999-12-31T23:59:59.999Z: \"0 0 * * *\""
    );
}

/// Fire times by brute force over `[start, end)`, minute by minute, with
/// the DST rules of the module doc.
fn brute_force(
    cron: &CronExpr,
    tz: chrono_tz::Tz,
    start: Timestamp,
    end: Timestamp,
) -> Vec<Timestamp> {
    let fixed = cron.fields.minutes.count_ones() == 1 && cron.fields.hours.count_ones() == 1;
    let mut fires = Vec::new();
    let mut t = start;
    while t < end {
        let local = t.to_datetime().with_timezone(&tz);
        let wall = local.naive_local();
        if cron.fields.wall_matches(wall) {
            let earliest = match tz.from_local_datetime(&wall) {
                LocalResult::Ambiguous(earlier, _) => earlier.with_timezone(&Utc),
                _ => t.to_datetime(),
            };
            if !fixed || earliest == t.to_datetime() {
                fires.push(t);
            }
        }
        // A fixed-time job whose wall time was skipped by a gap fires at
        // the first instant after the gap, if that date still matches.
        if fixed {
            let prev = t
                .add_ms(-60_000)
                .to_datetime()
                .with_timezone(&tz)
                .naive_local();
            let mut skipped = prev + Duration::minutes(1);
            while skipped < wall {
                let (sh, sm) = (skipped.hour(), skipped.minute());
                let shifted = wall.date().and_hms_opt(sh, sm, 0).unwrap();
                if cron.fields.wall_matches(shifted) {
                    fires.push(t);
                    break;
                }
                skipped += Duration::minutes(1);
            }
        }
        t = t.add_ms(60_000);
    }
    fires.dedup();
    fires
}

/// Compares `next_after` and `latest_at_or_before` with the brute-force
/// reference across a DST change.
fn check_dst(zone: &str, day: (i32, u32, u32), expr: &str) {
    let tz: chrono_tz::Tz = zone.parse().unwrap();
    let cron = CronExpr::parse(expr, Some(zone)).unwrap();
    let date = NaiveDate::from_ymd_opt(day.0, day.1, day.2).unwrap();
    let midnight = Timestamp::from_datetime(&date.and_hms_opt(0, 0, 0).unwrap().and_utc()).unwrap();
    let (start, end) = (
        midnight.add_ms(-36 * 3_600_000),
        midnight.add_ms(60 * 3_600_000),
    );
    let fires = brute_force(&cron, tz, start, end);
    // Probe every minute within 75 minutes of the change and every seven
    // minutes out to three hours, with and without seconds.
    let offset = |t: Timestamp| {
        t.to_datetime().with_timezone(&tz).naive_local() - t.to_datetime().naive_utc()
    };
    let mut change = midnight.add_ms(-12 * 3_600_000);
    while offset(change) == offset(change.add_ms(60_000)) {
        change = change.add_ms(60_000);
        assert!(change < end, "no DST change in {zone} on {day:?}");
    }
    let mut t = change.add_ms(-3 * 3_600_000);
    while t < change.add_ms(3 * 3_600_000) {
        for probe in [t, t.add_ms(59_999)] {
            let want_next = fires.iter().find(|&&f| f > probe).copied();
            let want_prev = fires.iter().rev().find(|&&f| f <= probe).copied();
            // The reference only knows fire times inside its window.
            let got_next = cron.next_after(probe).ok().filter(|&t| t < end);
            let got_prev = cron.latest_at_or_before(probe).filter(|&t| t >= start);
            assert_eq!(got_next, want_next, "{expr} in {zone}: next after {probe}");
            assert_eq!(got_prev, want_prev, "{expr} in {zone}: latest at {probe}");
        }
        let near = t.millis_since(change).abs() < 75 * 60_000;
        t = t.add_ms(if near { 60_000 } else { 7 * 60_000 });
    }
}

const DST_EXPRESSIONS: [&str; 9] = [
    "30 2 * * *",
    "0 2 * * *",
    "30 1 * * *",
    "0 1,2 * * *",
    "0,30 2 * * *",
    "*/30 * * * *",
    "0 * * * *",
    "* 2 * * *",
    "15 3 * * *",
];

#[test]
fn dst_matches_reference_in_new_york() {
    for expr in DST_EXPRESSIONS {
        check_dst("America/New_York", (2026, 3, 8), expr);
        check_dst("America/New_York", (2026, 11, 1), expr);
    }
}

#[test]
fn dst_matches_reference_in_berlin_and_lord_howe() {
    for expr in DST_EXPRESSIONS {
        check_dst("Europe/Berlin", (2026, 3, 29), expr);
        check_dst("Europe/Berlin", (2026, 10, 25), expr);
    }
    // Lord Howe shifts by 30 minutes at 02:00.
    for expr in ["45 1 * * *", "15 2 * * *", "*/15 * * * *"] {
        check_dst("Australia/Lord_Howe", (2026, 4, 5), expr);
        check_dst("Australia/Lord_Howe", (2026, 10, 4), expr);
    }
}

#[test]
fn dst_examples_in_new_york() {
    let next = |expr: &str, from: &str| {
        CronExpr::parse(expr, Some("America/New_York"))
            .unwrap()
            .next_after(at(from))
            .unwrap()
            .to_string()
    };
    // Spring forward 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00Z).
    // A fixed 02:30 fires once, at 03:00 EDT.
    assert_eq!(
        next("30 2 * * *", "2026-03-08T06:59:00Z"),
        "2026-03-08T07:00:00.000Z"
    );
    assert_eq!(
        next("30 2 * * *", "2026-03-08T07:00:00Z"),
        "2026-03-09T06:30:00.000Z"
    );
    // Every 30 minutes skips the missing hour and keeps its spacing.
    assert_eq!(
        next("*/30 * * * *", "2026-03-08T06:30:00Z"),
        "2026-03-08T07:00:00.000Z"
    );
    // Fall back 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00Z).
    // A fixed 01:30 fires once, at the earlier 01:30 (EDT, 05:30Z).
    assert_eq!(
        next("30 1 * * *", "2026-11-01T05:00:00Z"),
        "2026-11-01T05:30:00.000Z"
    );
    assert_eq!(
        next("30 1 * * *", "2026-11-01T05:30:00Z"),
        "2026-11-02T06:30:00.000Z"
    );
    // Every 30 minutes fires at each real instant, including the repeat.
    assert_eq!(
        next("*/30 * * * *", "2026-11-01T05:30:00Z"),
        "2026-11-01T06:00:00.000Z"
    );
    assert_eq!(
        next("*/30 * * * *", "2026-11-01T06:00:00Z"),
        "2026-11-01T06:30:00.000Z"
    );
}
