//! Table-driven tests of the schedule math against SPEC §10 items 9–17 and
//! the `advanceLoop` plan of SPEC §3.4.

use super::*;
use crate::id::{LoopId, RunId};
use crate::model::{CommandTarget, Target};
use crate::status::Overlap;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn every(ms: u64) -> Schedule {
    Schedule::Interval {
        every_ms: ms,
        anchor: None,
    }
}

fn cron(expr: &str) -> Schedule {
    Schedule::Cron {
        expression: expr.into(),
        timezone: Some("UTC".into()),
    }
}

fn a_loop(schedule: Schedule, next: &str) -> Loop {
    let created = at("2026-01-01T00:00:00Z");
    Loop {
        id: LoopId::from_bytes([1, 2, 3, 4, 5, 6]),
        name: "nightly".into(),
        description: None,
        status: LoopStatus::Active,
        schedule,
        target: Target::Command(CommandTarget::new("true")),
        next_run_at: Some(at(next)),
        retry_scheduled_for: None,
        catch_up: CatchUp::Latest,
        catch_up_limit: 50,
        overlap: Overlap::Skip,
        max_attempts: 1,
        retry_delay_ms: 60_000,
        lease_ms: 1_800_000,
        expires_at: None,
        created_at: created,
        updated_at: created,
        paused_reason: None,
        policy: Default::default(),
        consecutive_successes: None,
        consecutive_failures: None,
        hooks: Default::default(),
    }
}

fn a_run(slot: &str, attempt: u32, status: RunStatus) -> LoopRun {
    LoopRun {
        id: RunId::from_bytes([9, 9, 9, 9, 9, 9]),
        loop_id: LoopId::from_bytes([1, 2, 3, 4, 5, 6]),
        loop_name: "nightly".into(),
        scheduled_for: at(slot),
        attempt,
        status,
        started_at: None,
        finished_at: None,
        claimed_by: None,
        claimed_host: None,
        lease_expires_at: None,
        pid: None,
        exit_code: None,
        duration_ms: None,
        stdout: None,
        stderr: None,
        error: None,
        created_at: at(slot),
        updated_at: at(slot),
        claim_token: None,
        facts: Default::default(),
        last_output_at: Default::default(),
        cancel_requested_at: Default::default(),
        cancelled_by: Default::default(),
    }
}

/// Checks the due slots of `lp` at `now`.
fn check_slots(lp: &Loop, now: &str, expected: &[&str]) {
    let got = due_slots(lp, at(now)).unwrap();
    let expected: Vec<Timestamp> = expected.iter().map(|s| at(s)).collect();
    assert_eq!(got, expected, "{:?} at {now}", lp.schedule);
}

/// Checks `computeNextAfter`.
fn check_next(schedule: &Schedule, slot: &str, finished: &str, expected: Option<&str>) {
    let got = compute_next_after(schedule, at(slot), at(finished)).unwrap();
    assert_eq!(
        got,
        expected.map(at),
        "{schedule:?} slot {slot} finished {finished}"
    );
}

// SPEC §10 item 10
#[test]
fn spec_checklist_item_10_initial_next_run() {
    let now = at("2026-01-01T00:07:00Z");
    let first = |s: &Schedule| initial_next_run(s, now).unwrap().unwrap().to_string();
    assert_eq!(first(&every(90_000)), "2026-01-01T00:08:30.000Z");
    assert_eq!(
        first(&Schedule::Dynamic {
            min_interval_ms: None
        }),
        "2026-01-01T00:08:00.000Z"
    );
    assert_eq!(
        first(&Schedule::Dynamic {
            min_interval_ms: Some(5_000)
        }),
        "2026-01-01T00:07:05.000Z"
    );
    let past = Schedule::Once {
        at: at("2020-01-01T00:00:00Z"),
    };
    assert_eq!(first(&past), "2020-01-01T00:00:00.000Z");
    // SPEC §10 item 2 through the schedule API.
    assert_eq!(first(&cron("*/15 * * * *")), "2026-01-01T00:15:00.000Z");
    let on_the_slot = initial_next_run(&cron("*/15 * * * *"), at("2026-01-01T00:15:00Z"));
    assert_eq!(on_the_slot.unwrap(), Some(at("2026-01-01T00:30:00Z")));
}

// SPEC §10 items 9 and 11
#[test]
fn spec_checklist_items_9_and_11_invalid_schedules() {
    let now = at("2026-01-01T00:00:00Z");
    let err = |s: &Schedule| initial_next_run(s, now).unwrap_err().to_string();
    assert_eq!(err(&every(0)), "interval everyMs must be > 0");
    assert_eq!(
        validate_schedule(&every(0)).unwrap_err().to_string(),
        "interval everyMs must be > 0"
    );
    assert_eq!(
        err(&Schedule::Dynamic {
            min_interval_ms: Some(0)
        }),
        "dynamic minIntervalMs must be > 0"
    );
    assert_eq!(
        parse_schedule_at("tomorrow").unwrap_err().to_string(),
        "invalid schedule.at: tomorrow"
    );
    assert_eq!(
        err(&cron("0 0 31 4 *")),
        "cron expression can never fire: \"0 0 31 4 *\" (day 31 does not exist in April)"
    );
    let mars = Schedule::Cron {
        expression: "* * * * *".into(),
        timezone: Some("Mars/Base".into()),
    };
    assert_eq!(
        validate_schedule(&mars).unwrap_err().to_string(),
        "unknown time zone: Mars/Base (use an IANA name such as Europe/Berlin)"
    );
    assert_eq!(
        err(&every(u64::MAX)),
        "next run is past the latest representable instant (year 9999)"
    );
    assert!(validate_schedule(&cron("0 0 29 2 *")).is_ok());
    assert!(validate_schedule(&Schedule::Once { at: now }).is_ok());
}

// SPEC §10 item 12
#[test]
fn spec_checklist_item_12_compute_next_after() {
    let rate = every(60_000);
    // Finished within the period: the next grid point.
    check_next(
        &rate,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:10Z",
        Some("2026-01-01T00:01:00Z"),
    );
    // Finished exactly on a grid point: strictly after it.
    check_next(
        &rate,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:03:00Z",
        Some("2026-01-01T00:04:00Z"),
    );
    check_next(
        &rate,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:03:00.001Z",
        Some("2026-01-01T00:04:00Z"),
    );
    // A finish before the slot (clock skew) still moves forward one period.
    check_next(
        &rate,
        "2026-01-01T00:00:00Z",
        "2025-12-31T23:59:00Z",
        Some("2026-01-01T00:01:00Z"),
    );
    // A year late is still one division, not half a million additions.
    check_next(
        &rate,
        "2025-01-01T00:00:00Z",
        "2026-01-01T00:00:30Z",
        Some("2026-01-01T00:01:00Z"),
    );
    let delay = Schedule::Interval {
        every_ms: 60_000,
        anchor: Some(Anchor::FixedDelay),
    };
    check_next(
        &delay,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:02:30Z",
        Some("2026-01-01T00:03:30Z"),
    );
    check_next(
        &Schedule::Once {
            at: at("2026-01-01T00:00:00Z"),
        },
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:01Z",
        None,
    );
    let dynamic = Schedule::Dynamic {
        min_interval_ms: None,
    };
    check_next(
        &dynamic,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:02:30Z",
        Some("2026-01-01T00:03:30Z"),
    );
    let quarter = cron("*/15 * * * *");
    check_next(
        &quarter,
        "2026-01-01T00:15:00Z",
        "2026-01-01T00:16:00Z",
        Some("2026-01-01T00:30:00Z"),
    );
    check_next(
        &quarter,
        "2026-01-01T00:15:00Z",
        "2026-01-01T00:45:00Z",
        Some("2026-01-01T01:00:00Z"),
    );
    check_next(
        &quarter,
        "2026-01-01T00:15:00Z",
        "2026-01-01T00:00:00Z",
        Some("2026-01-01T00:30:00Z"),
    );
    check_next(
        &cron("0 0 29 2 *"),
        "2024-02-29T00:00:00Z",
        "2024-02-29T00:00:05Z",
        Some("2028-02-29T00:00:00Z"),
    );
}

// SPEC §10 item 13
#[test]
fn spec_checklist_item_13_latest() {
    let lp = a_loop(every(60_000), "2026-01-01T00:00:00Z");
    check_slots(&lp, "2026-01-01T00:04:30Z", &["2026-01-01T00:04:00Z"]);
    check_slots(&lp, "2026-01-01T00:00:00Z", &["2026-01-01T00:00:00Z"]);
    let lp = a_loop(cron("* * * * *"), "2026-01-01T00:00:00Z");
    check_slots(&lp, "2026-01-01T00:04:30Z", &["2026-01-01T00:04:00Z"]);
    // A year of downtime is one backward search.
    check_slots(&lp, "2027-01-01T00:00:30Z", &["2027-01-01T00:00:00Z"]);
    // A next run that is not a fire time is never stepped back from.
    let lp = a_loop(cron("0 * * * *"), "2026-01-01T00:30:00Z");
    check_slots(&lp, "2026-01-01T00:45:00Z", &["2026-01-01T00:30:00Z"]);
    check_slots(&lp, "2026-01-01T01:45:00Z", &["2026-01-01T01:00:00Z"]);
}

#[test]
fn latest_never_steps_back_across_fall_back() {
    // New York falls back at 06:00Z on 2026-11-01: 01:00-02:00 repeats.
    let mut lp = a_loop(
        Schedule::Cron {
            expression: "*/30 * * * *".into(),
            timezone: Some("America/New_York".into()),
        },
        "2026-11-01T06:00:00Z",
    );
    check_slots(&lp, "2026-11-01T06:10:00Z", &["2026-11-01T06:00:00Z"]);
    check_slots(&lp, "2026-11-01T06:40:00Z", &["2026-11-01T06:30:00Z"]);
    lp.catch_up = CatchUp::All;
    check_slots(
        &lp,
        "2026-11-01T07:00:00Z",
        &[
            "2026-11-01T06:00:00Z",
            "2026-11-01T06:30:00Z",
            "2026-11-01T07:00:00Z",
        ],
    );
}

// SPEC §10 item 14
#[test]
fn spec_checklist_item_14_all() {
    let mut lp = a_loop(every(1_000), "2026-01-01T00:00:01Z");
    lp.catch_up = CatchUp::All;
    lp.catch_up_limit = 10;
    check_slots(
        &lp,
        "2026-01-01T00:00:05Z",
        &[
            "2026-01-01T00:00:01Z",
            "2026-01-01T00:00:02Z",
            "2026-01-01T00:00:03Z",
            "2026-01-01T00:00:04Z",
            "2026-01-01T00:00:05Z",
        ],
    );
    lp.catch_up_limit = 3;
    assert_eq!(due_slots(&lp, at("2026-01-02T00:00:00Z")).unwrap().len(), 3);
    lp.catch_up_limit = 0;
    check_slots(&lp, "2026-01-02T00:00:00Z", &["2026-01-01T00:00:01Z"]);
    // A stored limit above the maximum is clamped: a year of 1 ms slots
    // plans 10,000 of them, not 31 billion.
    lp.schedule = every(1);
    lp.catch_up_limit = u32::MAX;
    assert_eq!(
        due_slots(&lp, at("2027-01-01T00:00:00Z")).unwrap().len(),
        crate::MAX_CATCH_UP_LIMIT as usize
    );
    let mut lp = a_loop(cron("*/15 * * * *"), "2026-01-01T00:15:00Z");
    lp.catch_up = CatchUp::All;
    check_slots(
        &lp,
        "2026-01-01T00:50:00Z",
        &[
            "2026-01-01T00:15:00Z",
            "2026-01-01T00:30:00Z",
            "2026-01-01T00:45:00Z",
        ],
    );
    lp.catch_up_limit = 2;
    check_slots(
        &lp,
        "2027-01-01T00:00:00Z",
        &["2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"],
    );
}

// SPEC §10 item 15
#[test]
fn spec_checklist_item_15_none_runs_the_stale_slot() {
    let mut lp = a_loop(every(60_000), "2026-01-01T00:00:00Z");
    lp.catch_up = CatchUp::None;
    check_slots(&lp, "2026-01-01T05:00:00Z", &["2026-01-01T00:00:00Z"]);
    lp.schedule = cron("0 * * * *");
    check_slots(&lp, "2026-01-01T05:00:00Z", &["2026-01-01T00:00:00Z"]);
}

// SPEC §10 item 16
#[test]
fn spec_checklist_item_16_pending_retry_is_the_only_slot() {
    let mut lp = a_loop(every(60_000), "2026-01-01T00:05:00Z");
    lp.retry_scheduled_for = Some(at("2026-01-01T00:00:00Z"));
    lp.catch_up = CatchUp::All;
    check_slots(&lp, "2026-01-01T00:10:00Z", &["2026-01-01T00:00:00Z"]);
    // The retry waits for its own nextRunAt.
    check_slots(&lp, "2026-01-01T00:04:00Z", &[]);
}

// SPEC §10 item 17
#[test]
fn spec_checklist_item_17_inactive_and_expired_have_no_slots() {
    let base = a_loop(every(60_000), "2026-01-01T00:00:00Z");
    for status in [LoopStatus::Paused, LoopStatus::Stopped, LoopStatus::Expired] {
        let lp = Loop {
            status,
            ..base.clone()
        };
        check_slots(&lp, "2026-01-01T00:10:00Z", &[]);
    }
    let expired = Loop {
        expires_at: Some(at("2026-01-01T00:10:00Z")),
        ..base.clone()
    };
    check_slots(&expired, "2026-01-01T00:10:00Z", &[]);
    assert!(is_expired(&expired, at("2026-01-01T00:10:00Z")));
    assert!(!is_expired(&expired, at("2026-01-01T00:09:59.999Z")));
    check_slots(&expired, "2026-01-01T00:09:00Z", &["2026-01-01T00:09:00Z"]);
    let no_next = Loop {
        next_run_at: None,
        ..base.clone()
    };
    check_slots(&no_next, "2026-01-01T00:10:00Z", &[]);
    check_slots(&base, "2025-12-31T23:59:59.999Z", &[]);
    let once = a_loop(
        Schedule::Once {
            at: at("2026-01-01T00:00:00Z"),
        },
        "2026-01-01T00:00:00Z",
    );
    check_slots(&once, "2026-06-01T00:00:00Z", &["2026-01-01T00:00:00Z"]);
}

#[test]
fn plan_advance_follows_advance_loop() {
    let lp = Loop {
        max_attempts: 2,
        ..a_loop(every(60_000), "2026-01-01T00:00:00Z")
    };
    let finished = at("2026-01-01T00:00:30Z");
    let plan = |lp: &Loop, run: &LoopRun, ok: bool| plan_advance(lp, run, finished, ok).unwrap();
    // Still running, or the loop is not active: nothing to write.
    assert_eq!(
        plan(
            &lp,
            &a_run("2026-01-01T00:00:00Z", 1, RunStatus::Running),
            true
        ),
        None
    );
    let paused = Loop {
        status: LoopStatus::Paused,
        ..lp.clone()
    };
    assert_eq!(
        plan(
            &paused,
            &a_run("2026-01-01T00:00:00Z", 1, RunStatus::Succeeded),
            true
        ),
        None
    );
    // SPEC §10 item 37: a failure with attempts left schedules a retry.
    assert_eq!(
        plan(
            &lp,
            &a_run("2026-01-01T00:00:00Z", 1, RunStatus::Failed),
            false
        ),
        Some(LoopAdvance {
            status: LoopStatus::Active,
            next_run_at: Some(at("2026-01-01T00:01:30Z")),
            retry_scheduled_for: Some(at("2026-01-01T00:00:00Z")),
            streak: Streak::Unchanged,
            paused_reason: None,
        })
    );
    // Out of attempts: advance normally and clear the retry.
    let advanced = |streak| {
        Some(LoopAdvance {
            status: LoopStatus::Active,
            next_run_at: Some(at("2026-01-01T00:01:00Z")),
            retry_scheduled_for: None,
            streak,
            paused_reason: None,
        })
    };
    assert_eq!(
        plan(
            &lp,
            &a_run("2026-01-01T00:00:00Z", 2, RunStatus::Failed),
            false
        ),
        advanced(Streak::Failure)
    );
    assert_eq!(
        plan(
            &lp,
            &a_run("2026-01-01T00:00:00Z", 1, RunStatus::Succeeded),
            true
        ),
        advanced(Streak::Success)
    );
    // SPEC §10 item 36: a once loop stops.
    let once = a_loop(
        Schedule::Once {
            at: at("2026-01-01T00:00:00Z"),
        },
        "2026-01-01T00:00:00Z",
    );
    assert_eq!(
        plan(
            &once,
            &a_run("2026-01-01T00:00:00Z", 1, RunStatus::Succeeded),
            true
        ),
        Some(LoopAdvance {
            status: LoopStatus::Stopped,
            next_run_at: None,
            retry_scheduled_for: None,
            streak: Streak::Success,
            paused_reason: None,
        })
    );
}

/// Issue 17: successes in a row expire a loop with `expiresAfterRuns`; a
/// skipped run counts toward nothing; a final failure trips the breaker.
#[test]
fn plan_advance_counts_streaks() {
    let finished = at("2026-01-01T00:00:30Z");
    let mut lp = a_loop(every(60_000), "2026-01-01T00:00:00Z");
    lp.policy.expires_after_runs = Some(3);
    lp.consecutive_successes = Some(1);
    let ok = a_run("2026-01-01T00:00:00Z", 1, RunStatus::Succeeded);
    let plan = plan_advance(&lp, &ok, finished, true).unwrap().unwrap();
    assert_eq!(
        (plan.status, plan.streak),
        (LoopStatus::Active, Streak::Success)
    );
    lp.consecutive_successes = Some(2);
    let plan = plan_advance(&lp, &ok, finished, true).unwrap().unwrap();
    assert_eq!((plan.status, plan.next_run_at), (LoopStatus::Expired, None));
    // A skipped run is neutral, even at the threshold.
    let skipped = a_run("2026-01-01T00:00:00Z", 1, RunStatus::Skipped);
    let plan = plan_advance(&lp, &skipped, finished, true)
        .unwrap()
        .unwrap();
    assert_eq!(
        (plan.status, plan.streak),
        (LoopStatus::Active, Streak::Unchanged)
    );

    // Issue 28: a cancelled run is neutral too, and never retried, even
    // when the caller says it did not succeed.
    let mut lp = a_loop(every(60_000), "2026-01-01T00:00:00Z");
    lp.max_attempts = 3;
    lp.policy.pause_after_failures = Some(1);
    let cancelled = a_run("2026-01-01T00:00:00Z", 1, RunStatus::Cancelled);
    let plan = plan_advance(&lp, &cancelled, finished, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (plan.status, plan.streak, plan.retry_scheduled_for),
        (LoopStatus::Active, Streak::Unchanged, None)
    );

    let mut lp = a_loop(every(60_000), "2026-01-01T00:00:00Z");
    lp.max_attempts = 2;
    lp.policy.pause_after_failures = Some(2);
    lp.consecutive_failures = Some(1);
    let mut failed = a_run("2026-01-01T00:00:00Z", 1, RunStatus::Failed);
    failed.error = Some("exit code 3\nmore detail".into());
    // A failure with a retry left does not count yet.
    let plan = plan_advance(&lp, &failed, finished, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (plan.status, plan.streak),
        (LoopStatus::Active, Streak::Unchanged)
    );
    failed.attempt = 2;
    let plan = plan_advance(&lp, &failed, finished, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (plan.status, plan.streak),
        (LoopStatus::Paused, Streak::Failure)
    );
    assert_eq!(plan.next_run_at, Some(at("2026-01-01T00:01:00Z")));
    let reason = plan.paused_reason.unwrap();
    assert!(reason.contains("2 consecutive failures"), "{reason}");
    assert!(reason.contains("last error: exit code 3;"), "{reason}");
    assert!(!reason.contains("more detail"), "{reason}");
    // Without a breaker the loop keeps going.
    lp.policy.pause_after_failures = None;
    let plan = plan_advance(&lp, &failed, finished, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (plan.status, plan.paused_reason),
        (LoopStatus::Active, None)
    );
}

/// Issue 17: exponential backoff doubles per attempt within the jitter
/// bounds, and is capped; fixed backoff is 0.3.1's constant delay.
#[test]
fn retry_delay_backs_off() {
    let mut lp = a_loop(every(60_000), "2026-01-01T00:00:00Z");
    lp.retry_delay_ms = 1_000;
    assert_eq!(retry_delay_ms(&lp, 4, 0.9, 1).unwrap(), 1_000);
    lp.policy.backoff = Backoff::Exponential;
    for attempt in 1..=5u32 {
        let base = 1_000i64 << (attempt - 1);
        assert_eq!(retry_delay_ms(&lp, attempt, 0.0, 1).unwrap(), base / 2);
        assert_eq!(retry_delay_ms(&lp, attempt, 0.5, 1).unwrap(), base);
        assert_eq!(retry_delay_ms(&lp, attempt, 1.0, 1).unwrap(), base * 3 / 2);
    }
    lp.policy.max_retry_delay_ms = Some(5_000);
    assert_eq!(retry_delay_ms(&lp, 4, 0.5, 1).unwrap(), 5_000);
    assert_eq!(retry_delay_ms(&lp, u32::MAX, 0.99, 1).unwrap(), 5_000);
    lp.policy.max_retry_delay_ms = None;
    assert_eq!(
        retry_delay_ms(&lp, 60, 0.5, 1).unwrap(),
        crate::DEFAULT_MAX_RETRY_DELAY_MS as i64
    );
    // The retry lands that far after the finish.
    lp.max_attempts = 3;
    let run = a_run("2026-01-01T00:00:00Z", 2, RunStatus::Failed);
    let plan = plan_advance_with(&lp, &run, at("2026-01-01T00:00:30Z"), false, 0.25)
        .unwrap()
        .unwrap();
    assert_eq!(plan.next_run_at, Some(at("2026-01-01T00:00:31.500Z")));
}

/// Agents note §7.3: a throttled class's delay is four times longer, and
/// the one cap binds after the multiplier, whatever the backoff; under
/// fixed backoff the multiplier never shortens the loop's own delay.
#[test]
fn throttled_delays_are_four_times_longer_up_to_the_cap() {
    use crate::failure::{FailureClass, THROTTLED_RETRY_MULTIPLIER};
    assert_eq!(THROTTLED_RETRY_MULTIPLIER, 4);
    assert_eq!(crate::DEFAULT_MAX_RETRY_DELAY_MS, 21_600_000);
    let mut lp = a_loop(every(60_000), "2026-01-01T00:00:00Z");
    let fixed = [
        (60_000, FailureClass::RateLimit, 240_000),
        (60_000, FailureClass::ProviderUnavailable, 240_000),
        (60_000, FailureClass::Timeout, 60_000),
        (60_000, FailureClass::ContextLength, 60_000),
        (5_400_000, FailureClass::Auth, 21_600_000),
        (5_400_001, FailureClass::Auth, 21_600_000),
        (5_399_999, FailureClass::ProviderCapacity, 21_599_996),
        // Never shorter than the loop's own delay.
        (30_000_000, FailureClass::RateLimit, 30_000_000),
        (30_000_000, FailureClass::Unknown, 30_000_000),
        (i64::MAX as u64, FailureClass::RateLimit, i64::MAX),
        (0, FailureClass::RateLimit, 0),
        (1, FailureClass::RateLimit, 4),
    ];
    for (delay, class, expected) in fixed {
        lp.retry_delay_ms = delay;
        let got = retry_delay_ms(&lp, 1, 0.5, class.retry_multiplier()).unwrap();
        assert_eq!(got, expected, "{delay} {class}");
    }
    // A cap of the loop's own binds a throttled fixed delay too.
    lp.retry_delay_ms = 60_000;
    lp.policy.max_retry_delay_ms = Some(180_000);
    assert_eq!(retry_delay_ms(&lp, 1, 0.5, 4).unwrap(), 180_000);
    assert_eq!(retry_delay_ms(&lp, 1, 0.5, 1).unwrap(), 60_000);

    // Exponential: multiplied before the cap, so a 10 min cap stays 10 min.
    lp.policy.backoff = Backoff::Exponential;
    lp.policy.max_retry_delay_ms = Some(600_000);
    assert_eq!(retry_delay_ms(&lp, 1, 0.5, 4).unwrap(), 240_000);
    assert_eq!(retry_delay_ms(&lp, 2, 0.5, 4).unwrap(), 480_000);
    assert_eq!(retry_delay_ms(&lp, 2, 0.0, 4).unwrap(), 240_000);
    assert_eq!(retry_delay_ms(&lp, 3, 0.5, 4).unwrap(), 600_000);
    assert_eq!(retry_delay_ms(&lp, 3, 0.5, 1).unwrap(), 240_000);
    assert_eq!(retry_delay_ms(&lp, u32::MAX, 0.99, 4).unwrap(), 600_000);
    // 0 counts as 1.
    assert_eq!(retry_delay_ms(&lp, 1, 0.5, 0).unwrap(), 60_000);
    lp.policy.backoff = Backoff::Fixed;
    assert_eq!(retry_delay_ms(&lp, 1, 0.5, 0).unwrap(), 60_000);
}

/// Issue 17: labels and policy fields are left out of the JSON at their
/// defaults, so a loop that uses none prints as before.
#[test]
fn policy_json_is_additive() {
    let mut lp = a_loop(every(60_000), "2026-01-01T00:00:00Z");
    let plain = serde_json::to_value(&lp).unwrap();
    for key in ["labels", "backoff", "skipExitCodes", "consecutiveSuccesses"] {
        assert!(plain.get(key).is_none(), "{key} in {plain}");
    }
    lp.policy.labels = vec!["team=infra".into()];
    lp.policy.backoff = Backoff::Exponential;
    lp.policy.expires_after_runs = Some(3);
    lp.consecutive_successes = Some(1);
    let json = serde_json::to_value(&lp).unwrap();
    assert_eq!(json["labels"], serde_json::json!(["team=infra"]));
    assert_eq!(json["backoff"], "exponential");
    assert_eq!(json["expiresAfterRuns"], 3);
    assert_eq!(json["consecutiveSuccesses"], 1);
    let back: Loop = serde_json::from_value(json).unwrap();
    assert_eq!(back, lp);
}

/// An agent loop with `max_attempts` and a run of it that failed with
/// `stderr`, classified `class`.
fn a_failed_agent_run(
    max_attempts: u32,
    stderr: &str,
    class: crate::FailureClass,
) -> (Loop, LoopRun) {
    let mut lp = a_loop(every(3_600_000), "2026-01-01T01:00:00Z");
    let mut agent = crate::model::AgentTarget::new(crate::AgentProvider::Claude, "hi");
    agent.account = Some(crate::model::Account {
        profile: "work".into(),
        tool: None,
    });
    lp.target = Target::Agent(agent);
    lp.max_attempts = max_attempts;
    let mut run = a_run("2026-01-01T00:00:00Z", 1, RunStatus::Failed);
    run.error = Some("process exited with code 1".into());
    run.stderr = Some(stderr.into());
    run.facts.failure_class = Some(class);
    (lp, run)
}

#[test]
fn a_throttled_retry_waits_four_times_as_long() {
    use crate::FailureClass::{ProviderCapacity, RateLimit, Timeout};
    let finished = at("2026-01-01T00:00:10Z");
    for (class, wait_ms) in [
        (RateLimit, 240_000),
        (ProviderCapacity, 240_000),
        (Timeout, 60_000),
    ] {
        let (lp, run) = a_failed_agent_run(3, "slow down", class);
        let plan = plan_advance_with(&lp, &run, finished, false, 0.5)
            .unwrap()
            .unwrap();
        assert_eq!(plan.status, LoopStatus::Active, "{class}");
        assert_eq!(plan.next_run_at, Some(finished.add_ms(wait_ms)), "{class}");
    }
}

#[test]
fn a_named_reset_is_waited_for_exactly_plus_jitter() {
    let finished = at("2026-01-01T00:00:10Z");
    let (lp, run) = a_failed_agent_run(
        3,
        "Error: 429, retry after 120s",
        crate::FailureClass::RateLimit,
    );
    let reset = finished.add_ms(120_000);
    // The jitter is at most a tenth of the wait (12 s here), by the draw.
    for (random, jitter) in [(0.0, 0), (0.5, 6_000), (1.0, 12_000)] {
        let plan = plan_advance_with(&lp, &run, finished, false, random)
            .unwrap()
            .unwrap();
        assert_eq!(plan.next_run_at, Some(reset.add_ms(jitter)), "{random}");
    }
    // A long wait's jitter stops at a minute; a short one's is a second.
    let (lp, long) = a_failed_agent_run(3, "retry after 7200s", crate::FailureClass::RateLimit);
    let plan = plan_advance_with(&lp, &long, finished, false, 1.0)
        .unwrap()
        .unwrap();
    assert_eq!(plan.next_run_at, Some(finished.add_ms(7_200_000 + 60_000)));
    let (lp, short) = a_failed_agent_run(3, "retry after 2s", crate::FailureClass::RateLimit);
    let plan = plan_advance_with(&lp, &short, finished, false, 1.0)
        .unwrap()
        .unwrap();
    assert_eq!(plan.next_run_at, Some(finished.add_ms(2_000 + 1_000)));
    // Only a limit's class reads it: a timeout retries as always.
    let (lp, timeout) = a_failed_agent_run(3, "retry after 120s", crate::FailureClass::Timeout);
    let plan = plan_advance_with(&lp, &timeout, finished, false, 0.5)
        .unwrap()
        .unwrap();
    assert_eq!(plan.next_run_at, Some(finished.add_ms(60_000)));
}

#[test]
fn an_agent_that_failed_to_authenticate_is_paused_at_once() {
    let finished = at("2026-01-01T00:00:10Z");
    let (lp, run) = a_failed_agent_run(
        3,
        "\nInvalid API key · Please run /login\n",
        crate::FailureClass::Auth,
    );
    let plan = plan_advance_with(&lp, &run, finished, false, 0.5)
        .unwrap()
        .unwrap();
    assert_eq!(plan.status, LoopStatus::Paused);
    assert_eq!(plan.streak, Streak::Failure);
    assert_eq!(plan.retry_scheduled_for, None);
    assert_eq!(
        plan.paused_reason.as_deref(),
        Some(
            "claude (account work) failed to authenticate: Invalid API key · Please run \
             /login; log in, then `loops resume nightly`"
        )
    );
    // A command loop's auth failure retries as any failure does.
    let (mut lp, run) = a_failed_agent_run(3, "401 Unauthorized", crate::FailureClass::Auth);
    lp.target = Target::Command(CommandTarget::new("curl"));
    let plan = plan_advance_with(&lp, &run, finished, false, 0.5)
        .unwrap()
        .unwrap();
    assert_eq!(plan.status, LoopStatus::Active);
    assert_eq!(plan.retry_scheduled_for, Some(run.scheduled_for));
    // A long line is cut in the reason.
    let (lp, run) = a_failed_agent_run(1, &"x".repeat(500), crate::FailureClass::Auth);
    let reason = plan_advance_with(&lp, &run, finished, false, 0.5)
        .unwrap()
        .unwrap()
        .paused_reason
        .unwrap();
    assert!(
        reason.contains(&format!("{}…;", "x".repeat(200))),
        "{reason}"
    );
}
