//! The advance decisions, tested without a database.

use loops_core::{
    CatchUp, CommandTarget, LoopId, LoopRun, LoopStatus, Overlap, RunId, RunStatus, Schedule,
    Target,
};

use super::*;
use crate::sql::Value;
use crate::sql::tests::Canned;

pub(crate) fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// An active loop due every minute, with one attempt.
pub(crate) fn a_loop() -> Loop {
    let created = at("2026-01-01T00:00:00Z");
    Loop {
        id: LoopId::from_bytes([1, 2, 3, 4, 5, 6]),
        name: "minutely".into(),
        description: None,
        status: LoopStatus::Active,
        schedule: Schedule::Interval {
            every_ms: 60_000,
            anchor: None,
        },
        target: Target::Command(CommandTarget::new("true")),
        next_run_at: Some(at("2026-01-01T00:01:00Z")),
        retry_scheduled_for: None,
        catch_up: CatchUp::Latest,
        catch_up_limit: 50,
        overlap: Overlap::Skip,
        max_attempts: 1,
        retry_delay_ms: 1_000,
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

/// A run of the slot at 00:01 that finished at 00:01:30.
pub(crate) fn a_run(attempt: u32, status: RunStatus) -> LoopRun {
    let slot = at("2026-01-01T00:01:00Z");
    LoopRun {
        id: RunId::from_bytes([9, 9, 9, 9, 9, 9]),
        loop_id: LoopId::from_bytes([1, 2, 3, 4, 5, 6]),
        loop_name: "minutely".into(),
        scheduled_for: slot,
        attempt,
        status,
        started_at: Some(slot),
        finished_at: (status != RunStatus::Running).then(|| at("2026-01-01T00:01:30Z")),
        claimed_by: Some("host:1:a".into()),
        claimed_host: None,
        lease_expires_at: None,
        pid: None,
        exit_code: None,
        duration_ms: None,
        stdout: None,
        stderr: None,
        error: Some("boom\nmore".into()),
        created_at: slot,
        updated_at: slot,
        claim_token: None,
        facts: Default::default(),
        last_output_at: Default::default(),
        cancel_requested_at: Default::default(),
        cancelled_by: Default::default(),
    }
}

fn now() -> Timestamp {
    at("2026-01-01T00:02:00Z")
}

fn written(plan: Plan) -> (LoopAdvance, Streaks) {
    match plan {
        Plan::Write(plan, streaks) => (plan, streaks),
        other => panic!("expected a write, got {other:?}"),
    }
}

#[test]
fn a_success_moves_to_the_next_slot() {
    let (plan, streaks) = written(plan_after_run(
        &a_loop(),
        &a_run(1, RunStatus::Succeeded),
        now(),
        true,
        0.5,
    ));
    assert_eq!(plan.status, LoopStatus::Active);
    assert_eq!(plan.next_run_at, Some(at("2026-01-01T00:02:00Z")));
    assert_eq!(plan.retry_scheduled_for, None);
    assert_eq!(plan.streak, Streak::Success);
    // No policy reads the streaks, so both stay 0.
    assert_eq!(
        streaks,
        Streaks {
            successes: 0,
            failures: 0
        }
    );
}

#[test]
fn a_failure_with_attempts_left_schedules_a_retry_from_its_finish() {
    let mut lp = a_loop();
    lp.max_attempts = 3;
    let (plan, _) = written(plan_after_run(
        &lp,
        &a_run(1, RunStatus::Failed),
        now(),
        true,
        0.5,
    ));
    assert_eq!(plan.status, LoopStatus::Active);
    assert_eq!(plan.retry_scheduled_for, Some(at("2026-01-01T00:01:00Z")));
    // Fixed backoff: finished_at + retry_delay_ms.
    assert_eq!(plan.next_run_at, Some(at("2026-01-01T00:01:31Z")));
    assert_eq!(plan.streak, Streak::Unchanged);
}

#[test]
fn an_unfinished_row_advances_from_now() {
    let mut lp = a_loop();
    lp.max_attempts = 2;
    let mut run = a_run(1, RunStatus::Abandoned);
    run.finished_at = None;
    let (plan, _) = written(plan_after_run(&lp, &run, now(), true, 0.5));
    assert_eq!(plan.next_run_at, Some(now().add_ms(1_000)));
}

#[test]
fn exponential_backoff_doubles_with_jitter_up_to_the_cap() {
    let mut lp = a_loop();
    lp.max_attempts = 10;
    lp.policy.backoff = Backoff::Exponential;
    let finished = at("2026-01-01T00:01:30Z");
    let delay = |lp: &Loop, attempt, jitter| {
        let (plan, _) = written(plan_after_run(
            lp,
            &a_run(attempt, RunStatus::TimedOut),
            now(),
            true,
            jitter,
        ));
        plan.next_run_at.unwrap().as_millis() - finished.as_millis()
    };
    assert_eq!(delay(&lp, 1, 0.5), 1_000);
    assert_eq!(delay(&lp, 3, 0.5), 4_000);
    assert_eq!(delay(&lp, 3, 0.0), 2_000);
    assert_eq!(delay(&lp, 3, 1.0), 6_000);
    lp.policy.max_retry_delay_ms = Some(5_000);
    assert_eq!(delay(&lp, 3, 1.0), 5_000);
    assert_eq!(delay(&lp, 9, 0.5), 5_000);
}

#[test]
fn a_cancelled_workflow_is_not_retried() {
    let mut lp = a_loop();
    lp.max_attempts = 3;
    lp.policy.pause_after_failures = Some(5);
    lp.consecutive_failures = Some(1);
    let (plan, streaks) = written(plan_after_run(
        &lp,
        &a_run(1, RunStatus::Failed),
        now(),
        false,
        0.5,
    ));
    assert_eq!(plan.retry_scheduled_for, None);
    assert_eq!(plan.next_run_at, Some(at("2026-01-01T00:02:00Z")));
    assert_eq!(plan.streak, Streak::Failure);
    assert_eq!(streaks.failures, 2);
}

#[test]
fn successes_count_toward_expiry() {
    let mut lp = a_loop();
    lp.policy.expires_after_runs = Some(3);
    lp.consecutive_successes = Some(1);
    lp.policy.pause_after_failures = Some(3);
    lp.consecutive_failures = Some(2);
    let run = a_run(1, RunStatus::Succeeded);
    let (plan, streaks) = written(plan_after_run(&lp, &run, now(), true, 0.5));
    assert_eq!(plan.status, LoopStatus::Active);
    assert_eq!(
        streaks,
        Streaks {
            successes: 2,
            failures: 0
        }
    );
    lp.consecutive_successes = Some(2);
    let (plan, streaks) = written(plan_after_run(&lp, &run, now(), true, 0.5));
    assert_eq!(plan.status, LoopStatus::Expired);
    assert_eq!(plan.next_run_at, None);
    assert_eq!(streaks.successes, 3);
}

#[test]
fn final_failures_trip_the_breaker() {
    let mut lp = a_loop();
    lp.policy.pause_after_failures = Some(2);
    lp.consecutive_failures = Some(1);
    lp.policy.expires_after_runs = Some(9);
    lp.consecutive_successes = Some(4);
    let (plan, streaks) = written(plan_after_run(
        &lp,
        &a_run(1, RunStatus::Failed),
        now(),
        true,
        0.5,
    ));
    assert_eq!(plan.status, LoopStatus::Paused);
    let reason = plan.paused_reason.unwrap();
    assert!(
        reason.contains("paused after 2 consecutive failures"),
        "{reason}"
    );
    assert!(reason.contains("last error: boom;"), "{reason}");
    assert_eq!(
        streaks,
        Streaks {
            successes: 0,
            failures: 2
        }
    );
}

#[test]
fn a_skip_or_a_retry_leaves_the_streaks() {
    let mut lp = a_loop();
    lp.policy.expires_after_runs = Some(9);
    lp.consecutive_successes = Some(4);
    lp.policy.pause_after_failures = Some(9);
    lp.consecutive_failures = Some(0);
    let (plan, streaks) = written(plan_after_run(
        &lp,
        &a_run(1, RunStatus::Skipped),
        now(),
        true,
        0.5,
    ));
    assert_eq!(plan.streak, Streak::Unchanged);
    assert_eq!(
        streaks,
        Streaks {
            successes: 4,
            failures: 0
        }
    );
    lp.max_attempts = 2;
    let (plan, streaks) = written(plan_after_run(
        &lp,
        &a_run(1, RunStatus::Failed),
        now(),
        true,
        0.5,
    ));
    assert_eq!(plan.streak, Streak::Unchanged);
    assert_eq!(streaks.successes, 4);
}

#[test]
fn streaks_without_their_policy_are_zero() {
    let mut lp = a_loop();
    lp.consecutive_successes = Some(7);
    lp.consecutive_failures = Some(7);
    for streak in [Streak::Unchanged, Streak::Success, Streak::Failure] {
        assert_eq!(
            streaks_after(&lp, streak),
            Streaks {
                successes: 0,
                failures: 0
            }
        );
    }
}

#[test]
fn a_running_run_or_an_inactive_loop_is_left_alone() {
    let lp = a_loop();
    assert_eq!(
        plan_after_run(&lp, &a_run(1, RunStatus::Running), now(), true, 0.5),
        Plan::Leave
    );
    let mut paused = a_loop();
    paused.status = LoopStatus::Paused;
    assert_eq!(
        plan_after_run(&paused, &a_run(1, RunStatus::Succeeded), now(), true, 0.5),
        Plan::Leave
    );
}

#[test]
fn a_schedule_that_fails_pauses_the_loop() {
    let mut lp = a_loop();
    lp.schedule = Schedule::Interval {
        every_ms: 0,
        anchor: None,
    };
    assert!(matches!(
        plan_after_run(&lp, &a_run(1, RunStatus::Succeeded), now(), true, 0.5),
        Plan::Pause(ScheduleError::IntervalNotPositive)
    ));
}

#[test]
fn jitter_is_drawn_only_for_exponential_backoff() {
    assert_eq!(jitter(Backoff::Fixed, [0xff; 6]), 0.5);
    assert_eq!(jitter(Backoff::Exponential, [0; 6]), 0.0);
    assert_eq!(jitter(Backoff::Exponential, [0x80, 0, 0, 0, 0, 0]), 0.5);
    let top = jitter(Backoff::Exponential, [0xff; 6]);
    assert!((0.0..1.0).contains(&top), "{top}");
    assert_eq!(jitter_for(&a_loop()), 0.5);
}

#[test]
fn only_a_run_that_failed_asks_whether_its_workflow_was_cancelled() {
    let unasked = || -> Result<bool> { panic!("read the workflow runs") };
    for status in [RunStatus::Succeeded, RunStatus::Skipped] {
        assert!(allows_retry(&a_run(1, status), unasked).unwrap());
    }
    for status in [RunStatus::Failed, RunStatus::TimedOut, RunStatus::Abandoned] {
        assert!(allows_retry(&a_run(1, status), || Ok(false)).unwrap());
        assert!(!allows_retry(&a_run(1, status), || Ok(true)).unwrap());
    }
}

#[test]
fn the_attempts_workflow_run_is_found_by_run_and_attempt_key() {
    let run = a_run(2, RunStatus::Failed);
    let key = loop_workflow_key(&run.loop_id, run.scheduled_for, run.attempt);
    for (dialect, statement) in [
        (Dialect::Sqlite, ATTEMPT_CANCELLED),
        (Dialect::Postgres, ATTEMPT_CANCELLED_PG),
    ] {
        for (found, cancelled) in [(0, false), (1, true), (2, true)] {
            let mut c = Canned::new(dialect, |sql, params| {
                assert_eq!(sql, statement);
                assert_eq!(params, [Value::Text(run.id.as_str()), Value::Text(&key)]);
                vec![vec![Value::Int(found)]]
            });
            assert_eq!(attempt_workflow_cancelled(&mut c, &run).unwrap(), cancelled);
        }
    }
}

#[test]
fn only_sqlites_write_transaction_serializes_a_loops_writers() {
    let unread = |sql: &str, _: &[Value<'_>]| -> Vec<Vec<Value<'static>>> { panic!("read {sql}") };
    assert!(serialized_by_transaction(&Canned::new(
        Dialect::Sqlite,
        unread
    )));
    assert!(!serialized_by_transaction(&Canned::new(
        Dialect::Postgres,
        unread
    )));
}
