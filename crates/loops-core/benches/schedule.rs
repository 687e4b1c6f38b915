//! Benchmarks of schedule math: next fire time for common and rare cron
//! expressions, with and without a time zone, and `due_slots` with catch-up
//! `latest` after a year of downtime (SPEC §9 items 3 and 4: the original
//! steps minute by minute, so these were its slow paths).
//!
//! Measurement times are short so that
//! `cargo bench -p loops-core --bench schedule -- --quick` finishes in well
//! under a minute.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use loops_core::{
    CatchUp, CommandTarget, CronExpr, Loop, LoopId, LoopStatus, Overlap, Schedule, Target,
    Timestamp, due_slots,
};

const EXPRESSIONS: [(&str, &str); 4] = [
    ("every_15_min", "*/15 * * * *"),
    ("weekdays_9am", "0 9 * * 1-5"),
    ("leap_day", "0 0 29 2 *"),
    ("friday_13th", "0 0 13 * 5"),
];

fn at(s: &str) -> Timestamp {
    s.parse().expect("benchmark instants are valid")
}

fn next_fire_time(c: &mut Criterion) {
    let mut group = c.benchmark_group("next_after");
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    let from = at("2026-03-01T12:34:56.789Z");
    for zone in [None, Some("America/New_York")] {
        for (name, expression) in EXPRESSIONS {
            let cron = CronExpr::parse(expression, zone).expect("benchmark expressions are valid");
            let label = format!("{name}/{}", zone.unwrap_or("local"));
            group.bench_function(label, |b| b.iter(|| cron.next_after(black_box(from))));
        }
    }
    group.finish();
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    // Most of this is croner building its 5000-entry year table.
    group.bench_function("weekdays_9am/Europe/Berlin", |b| {
        b.iter(|| CronExpr::parse(black_box("0 9 * * MON-FRI"), Some("Europe/Berlin")))
    });
    group.finish();
}

fn catch_up_latest(c: &mut Criterion) {
    let mut group = c.benchmark_group("due_slots");
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    let next = at("2025-01-01T00:00:00Z");
    let now = at("2026-01-01T00:00:30Z");
    let every_minute = Schedule::Cron {
        expression: "* * * * *".to_owned(),
        timezone: None,
    };
    let lp = a_loop(every_minute, next, CatchUp::Latest);
    // Includes parsing the stored expression, as a tick does.
    group.bench_function("latest_after_a_year/cron_every_minute", |b| {
        b.iter(|| due_slots(black_box(&lp), black_box(now)))
    });
    let cron = CronExpr::parse("* * * * *", None).expect("benchmark expressions are valid");
    group.bench_function("latest_after_a_year/cron_search_only", |b| {
        b.iter(|| {
            cron.latest_at_or_before(black_box(now))
                .map(|t| t.max(next))
        })
    });
    let interval = Schedule::Interval {
        every_ms: 60_000,
        anchor: None,
    };
    let lp = a_loop(interval, next, CatchUp::Latest);
    group.bench_function("latest_after_a_year/interval_every_minute", |b| {
        b.iter(|| due_slots(black_box(&lp), black_box(now)))
    });
    group.finish();
}

fn a_loop(schedule: Schedule, next: Timestamp, catch_up: CatchUp) -> Loop {
    Loop {
        id: LoopId::from_bytes([1; 6]),
        name: "bench".to_owned(),
        description: None,
        status: LoopStatus::Active,
        schedule,
        target: Target::Command(CommandTarget::new("true")),
        next_run_at: Some(next),
        retry_scheduled_for: None,
        catch_up,
        catch_up_limit: 50,
        overlap: Overlap::Skip,
        max_attempts: 1,
        retry_delay_ms: 60_000,
        lease_ms: 1_800_000,
        expires_at: None,
        created_at: next,
        updated_at: next,
        paused_reason: None,
        policy: Default::default(),
        consecutive_successes: None,
        consecutive_failures: None,
        hooks: Default::default(),
    }
}

criterion_group!(benches, next_fire_time, parse, catch_up_latest);
criterion_main!(benches);
