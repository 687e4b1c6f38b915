//! Words for people: instants in local time with a relative form (`in 4m`,
//! `2h ago`, `overdue 5m`), schedules in words (`every 1h`, `cron 0 9 * *
//! MON-FRI (Europe/Berlin)`), durations and a run's result (issue 16).
//!
//! Only human output uses these. `--json` and `show` keep the SPEC's UTC
//! instants, and nothing here decides what is scheduled or stored.
//!
//! "Now" for human output comes from [`display_now`], which honours
//! `LOOPS_DISPLAY_NOW=<RFC 3339 instant>`: it freezes the relative times
//! printed, for reproducible output in tests and docs. It changes only
//! what human output prints, never what runs or what is stored. Local time
//! is the host's (`TZ` decides, as everywhere in chrono).

use chrono::{DateTime, Local};
use loops_core::{Clock, CronExpr, LoopRun, RunStatus, Schedule, Timestamp, Zone};

mod cron;
pub(crate) mod steps;

/// The variable that freezes "now" for human output.
pub(crate) const DISPLAY_NOW_ENV: &str = "LOOPS_DISPLAY_NOW";

/// The gap after each run of a dynamic loop when none is stored (SPEC
/// §1.3).
const DYNAMIC_DEFAULT_MS: u64 = 60_000;

/// A next run of an active loop this far in the past is overdue: a running
/// daemon starts a due slot within milliseconds.
const OVERDUE_AFTER_MS: i64 = 1_000;

/// The instant human output measures relative times from: the value of
/// `LOOPS_DISPLAY_NOW` when it is a valid instant, else the system clock.
pub(crate) fn display_now() -> Timestamp {
    std::env::var(DISPLAY_NOW_ENV)
        .ok()
        .and_then(|v| Timestamp::parse(v.trim()).ok())
        .unwrap_or_else(|| loops_exec::SystemClock.now())
}

/// The instant in host local time, to the minute: `2026-01-05 09:00`.
pub(crate) fn local(t: Timestamp) -> String {
    local_time(t).format("%Y-%m-%d %H:%M").to_string()
}

/// The instant in host local time, to the second: `2026-01-05 09:00:07`.
pub(crate) fn local_seconds(t: Timestamp) -> String {
    local_time(t).format("%Y-%m-%d %H:%M:%S").to_string()
}

/// The instant in host local time as RFC 3339, to the second, with its
/// offset: `2026-01-05T09:00:07+01:00`. For `key=value` words a script may
/// still read (`create`'s `next=`); `--json` keeps the SPEC's UTC.
pub(crate) fn local_iso(t: Timestamp) -> String {
    local_time(t).format("%Y-%m-%dT%H:%M:%S%:z").to_string()
}

/// `text` with each SPEC instant in it (`2026-01-05T08:00:07.000Z`)
/// written as [`local_seconds`]: for messages built once for `--json` and
/// humans alike (`doctor`'s details, the daemon's log lines).
pub(crate) fn localize_instants(text: &str) -> std::borrow::Cow<'_, str> {
    const LEN: usize = "2026-01-05T08:00:07.000Z".len();
    let bytes = text.as_bytes();
    let looks = |at: usize| {
        bytes.get(at..at + LEN).is_some_and(|b| {
            b[4] == b'-' && b[10] == b'T' && b[19] == b'.' && b[23] == b'Z' && b[0].is_ascii_digit()
        })
    };
    if !(0..bytes.len()).any(looks) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut copied = 0;
    while at < bytes.len() {
        if looks(at)
            && let Ok(t) = Timestamp::parse(&text[at..at + LEN])
        {
            out.push_str(&text[copied..at]);
            out.push_str(&local_seconds(t));
            at += LEN;
            copied = at;
        } else {
            at += 1;
        }
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

/// The instant in host local time, as short as is clear next to `now`:
/// `09:00` today, `Jan 05 09:00` this year, else the full date.
pub(crate) fn local_short(t: Timestamp, now: Timestamp) -> String {
    let (at, today) = (local_time(t), local_time(now));
    let format = if at.date_naive() == today.date_naive() {
        "%H:%M"
    } else if at.format("%Y").to_string() == today.format("%Y").to_string() {
        "%b %d %H:%M"
    } else {
        "%Y-%m-%d %H:%M"
    };
    at.format(format).to_string()
}

fn local_time(t: Timestamp) -> DateTime<Local> {
    t.to_datetime().with_timezone(&Local)
}

/// `in 4m` for a future instant, `2h ago` for a past one, `now` within a
/// second.
pub(crate) fn relative(t: Timestamp, now: Timestamp) -> String {
    let ms = t.millis_since(now);
    if ms.abs() < 1_000 {
        return "now".to_owned();
    }
    let span = span(ms.unsigned_abs());
    if ms > 0 {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// The relative form and the local time: `in 4m (09:04)`.
pub(crate) fn when(t: Timestamp, now: Timestamp) -> String {
    format!("{} ({})", relative(t, now), local_short(t, now))
}

/// A loop's next run as `list` shows it, and whether it is overdue: an
/// active loop whose next run is past (`overdue 5m (08:55)`).
pub(crate) fn next_run(next: Option<Timestamp>, active: bool, now: Timestamp) -> (String, bool) {
    let Some(next) = next else {
        return ("-".to_owned(), false);
    };
    let late = now.millis_since(next);
    if active && late > OVERDUE_AFTER_MS {
        let span = span(late.unsigned_abs());
        return (format!("overdue {span} ({})", local_short(next, now)), true);
    }
    (when(next, now), false)
}

/// The largest whole unit of a span: `45s`, `4m`, `2h`, `3d`.
fn span(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3_600 => format!("{}m", secs / 60),
        3_600..86_400 => format!("{}h", secs / 3_600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// A period in words, exact: `1h`, `1h30m`, `2d12h`, `250ms`, `1s500ms`.
pub(crate) fn period(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    let mut rest = ms;
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    if rest > 0 {
        out.push_str(&format!("{rest}ms"));
    }
    out
}

/// How long a run took, rounded for reading: `350ms`, `4.2s`, `2m05s`,
/// `1h03m`.
pub(crate) fn duration(ms: i64) -> String {
    let ms = ms.max(0).unsigned_abs();
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{}.{}s", ms / 1_000, ms % 1_000 / 100),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, ms % 60_000 / 1_000),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// A schedule in words: `every 1h`, `cron 0 9 * * MON-FRI (Europe/Berlin)`,
/// `once at 2026-01-05 09:00`, `dynamic (≥1m after each run)`.
pub(crate) fn schedule(s: &Schedule) -> String {
    match s {
        Schedule::Once { at } => format!("once at {}", local(*at)),
        Schedule::Interval { every_ms, .. } => format!("every {}", period(*every_ms)),
        Schedule::Cron {
            expression,
            timezone: Some(zone),
        } => format!("cron {expression} ({zone})"),
        Schedule::Cron {
            expression,
            timezone: None,
        } => format!("cron {expression}"),
        Schedule::Dynamic { min_interval_ms } => format!(
            "dynamic (≥{} after each run)",
            period(min_interval_ms.unwrap_or(DYNAMIC_DEFAULT_MS))
        ),
    }
}

/// A loop's schedule as [`schedule`] says it, or `triggers only` for a
/// loop with none of its own (issue 30, `--trigger-only`).
pub(crate) fn loop_schedule(lp: &loops_core::Loop) -> String {
    if lp.policy.trigger_only {
        return "triggers only".to_owned();
    }
    schedule(&lp.schedule)
}

/// [`schedule`], with a cron expression also in words when it is a common
/// form: `cron 0 9 * * 1-5 (Asia/Kolkata): at 09:00 on Mon–Fri`.
pub(crate) fn schedule_in_words(s: &Schedule) -> String {
    let said = schedule(s);
    match s {
        Schedule::Cron { expression, .. } => match cron::words(expression) {
            Some(words) => format!("{said}: {words}"),
            None => said,
        },
        _ => said,
    }
}

/// The zone a schedule fires in when it is a named one (a cron `--tz`),
/// else `None`: host local time.
pub(crate) fn schedule_zone(s: &Schedule) -> Option<Zone> {
    let Schedule::Cron {
        expression,
        timezone: Some(zone),
    } = s
    else {
        return None;
    };
    CronExpr::parse(expression, Some(zone))
        .ok()
        .map(|c| c.zone())
        .filter(|z| *z != Zone::Local)
}

/// One fire time as `next` lists it: the local date and time with its
/// weekday, then the wall time in `zone` when that differs from the local
/// one (`09:00 IST Asia/Kolkata`), then the relative form.
pub(crate) fn fire_time(t: Timestamp, zone: Option<Zone>, now: Timestamp) -> String {
    let at = local_time(t);
    let mut line = at.format("%a %Y-%m-%d %H:%M:%S").to_string();
    if let Some(Zone::Named(tz)) = zone {
        let there = t.to_datetime().with_timezone(&tz);
        if there.naive_local() != at.naive_local() {
            let day = if there.date_naive() == at.date_naive() {
                String::new()
            } else {
                there.format("%a ").to_string()
            };
            let abbreviation = there.format("%Z").to_string();
            let name = match abbreviation == tz.name() {
                true => String::new(),
                false => format!(" {}", tz.name()),
            };
            line.push_str(&format!(
                "  ({day}{} {abbreviation}{name})",
                there.format("%H:%M:%S")
            ));
        }
    }
    let relative = if t <= now {
        format!("due, {}", relative(t, now))
    } else {
        relative(t, now)
    };
    format!("{line}  {relative}")
}

/// The instant a run is dated by: its finish, else its start, else when
/// its row was written.
pub(crate) fn run_instant(run: &LoopRun) -> Timestamp {
    run.finished_at.or(run.started_at).unwrap_or(run.created_at)
}

/// A run's result: its status, with the exit code of a failure that has
/// one (`failed exit 1`).
pub(crate) fn run_result(run: &LoopRun) -> String {
    match run.exit_code {
        Some(code) if run.status == RunStatus::Failed && code != 0 => {
            format!("{} exit {code}", run.status)
        }
        _ => run.status.to_string(),
    }
}

/// A loop's last run as `list` shows it: `succeeded 2h ago`, `failed exit
/// 1 · 3m ago`.
pub(crate) fn last_run(run: &LoopRun, now: Timestamp) -> String {
    let result = run_result(run);
    let ago = relative(run_instant(run), now);
    if result.contains(' ') {
        format!("{result} · {ago}")
    } else {
        format!("{result} {ago}")
    }
}

/// The first line of an error, cut to `max` characters with `…`.
pub(crate) fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    match line.char_indices().nth(max.saturating_sub(1)) {
        Some((end, _)) if line.chars().count() > max => format!("{}…", &line[..end]),
        _ => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    #[test]
    fn relative_times_read_both_ways() {
        let now = at("2026-01-05T12:00:00.000Z");
        assert_eq!(relative(at("2026-01-05T12:04:10.000Z"), now), "in 4m");
        assert_eq!(relative(at("2026-01-05T10:00:00.000Z"), now), "2h ago");
        assert_eq!(relative(at("2026-01-05T12:00:00.500Z"), now), "now");
        assert_eq!(relative(at("2026-01-01T12:00:00.000Z"), now), "4d ago");
        assert_eq!(relative(at("2026-01-05T11:59:15.000Z"), now), "45s ago");
    }

    #[test]
    fn only_a_past_next_run_of_an_active_loop_is_overdue() {
        let now = at("2026-01-05T12:00:00.000Z");
        let past = Some(at("2026-01-05T11:55:00.000Z"));
        let (text, overdue) = next_run(past, true, now);
        assert!(overdue);
        assert!(text.starts_with("overdue 5m ("), "{text}");
        let (text, overdue) = next_run(past, false, now);
        assert!(!overdue);
        assert!(text.starts_with("5m ago ("), "{text}");
        assert_eq!(next_run(None, true, now), ("-".to_owned(), false));
        assert!(!next_run(Some(now), true, now).1);
    }

    #[test]
    fn periods_and_durations_are_words() {
        assert_eq!(period(3_600_000), "1h");
        assert_eq!(period(5_400_000), "1h30m");
        assert_eq!(period(216_000_000), "2d12h");
        assert_eq!(period(30_000), "30s");
        assert_eq!(period(10), "10ms");
        assert_eq!(period(1_500), "1s500ms");
        assert_eq!(duration(350), "350ms");
        assert_eq!(duration(4_250), "4.2s");
        assert_eq!(duration(125_000), "2m05s");
        assert_eq!(duration(3_780_000), "1h03m");
        assert_eq!(duration(-5), "0ms");
    }

    #[test]
    fn schedules_are_words() {
        let every = Schedule::Interval {
            every_ms: 3_600_000,
            anchor: None,
        };
        assert_eq!(schedule(&every), "every 1h");
        let cron = Schedule::Cron {
            expression: "0 9 * * MON-FRI".into(),
            timezone: Some("Europe/Berlin".into()),
        };
        assert_eq!(schedule(&cron), "cron 0 9 * * MON-FRI (Europe/Berlin)");
        let dynamic = Schedule::Dynamic {
            min_interval_ms: None,
        };
        assert_eq!(schedule(&dynamic), "dynamic (≥1m after each run)");
    }

    #[test]
    fn instants_in_text_are_localized() {
        // Local time is the host's; compare with what chrono says it is.
        let t = at("2026-01-05T08:00:07.000Z");
        let text = "lease abc since 2026-01-05T08:00:07.000Z, expires 2026-01-05T08:00:07.000Z";
        let shown = localize_instants(text);
        assert_eq!(
            shown,
            format!(
                "lease abc since {}, expires {}",
                local_seconds(t),
                local_seconds(t)
            )
        );
        assert!(matches!(
            localize_instants("no instant 2026-01-05 here"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            localize_instants("é 2026-13-45T99:00:00.000Z"),
            "é 2026-13-45T99:00:00.000Z"
        );
    }

    #[test]
    fn first_lines_are_cut() {
        assert_eq!(first_line("\nboom\nmore", 10), "boom");
        assert_eq!(first_line("abcdefghij", 5), "abcd…");
        assert_eq!(first_line("abcde", 5), "abcde");
        assert_eq!(first_line("", 5), "");
    }
}
