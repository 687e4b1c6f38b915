//! Advancing a loop after one of its runs finished (SPEC §3.4), inside the
//! caller's write transaction, written once for both backends.
//!
//! SPEC §9 item 7: the original finalizes a run and advances its loop in
//! two separate writes, so a crash between them strands the slot. Here the
//! advance always runs in the same write transaction as the write that
//! finished the run (finalize, skip, recovery).
//!
//! SPEC §9 item 8: the advance is not a blind read-merge-write. It re-reads
//! the loop inside the transaction (on PostgreSQL locking its row, see
//! [`lock_loop`]), decides with [`plan_after_run`], and writes with
//! `WHERE id = ? AND status = 'active'`, so a pause is never overwritten.
//!
//! SPEC §9 item 21: in the original, cancelling a scheduled workflow run
//! fails its loop run, which can trigger a retry that runs the workflow the
//! user just cancelled. Here a failed run whose attempt's workflow run (the
//! one keyed [`loop_workflow_key`]) was cancelled advances as if its
//! attempts were spent: no retry, the loop moves on to its next slot. The
//! check reads the database inside the same transaction, so every caller
//! (a tick, the daemon, lease recovery) gets it without passing anything.
//!
//! The decision itself is pure: [`plan_after_run`] takes the loop and the
//! run as read plus `now` and returns what to write, including the run
//! streaks of issue 17 as the values to store ([`Streaks`]), so it is unit
//! tested without a database.

use loops_core::{
    Backoff, Loop, LoopAdvance, LoopId, LoopRun, LoopStatus, ScheduleError, Streak, Timestamp,
    loop_workflow_key, plan_advance_with,
};

use crate::columns::{self, loop_columns};
use crate::error::Result;
use crate::sql::{Dialect, Sql};

/// What happened to a run's loop when the run finished.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Advance {
    /// The loop moved on: a retry was scheduled, its next slot set, or it
    /// stopped (a `once` loop). The plan that was written.
    Advanced(LoopAdvance),
    /// The loop is not active (paused, stopped or expired), so it was left
    /// alone (SPEC §3.4 step 2, §10 item 43).
    NotActive,
    /// The loop no longer exists.
    LoopMissing,
    /// The finalize did not apply because the runner no longer owned the
    /// run, so the loop was left alone (SPEC §9 item 12: a fenced-out
    /// runner never advances).
    FencedOut,
    /// The schedule could not produce the next run (for example a stored
    /// cron that no longer parses). The run's result was still committed,
    /// and the loop was paused so that it does not come due again and again
    /// (SPEC §9 item 4). Resuming it retries the same computation.
    Paused(ScheduleError),
    /// The finalize was committed together with its advance, but the
    /// connection to the database was lost before the commit was
    /// acknowledged, and the re-read found the result stored (PostgreSQL,
    /// issue 15). What the advance decided was lost with the connection;
    /// the loop returned beside it is the loop as stored afterwards.
    Unconfirmed,
}

/// The jitter draw `plan_advance_with` takes for a loop with `backoff`,
/// from six random bytes: a number in `[0, 1)` (issue 17; the store draws
/// it, core only computes with it). Only an exponential backoff reads it;
/// a fixed one gets the middle of the range.
pub(crate) fn jitter(backoff: Backoff, random: [u8; 6]) -> f64 {
    if backoff.is_fixed() {
        return 0.5;
    }
    let n = random
        .iter()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
    n as f64 / (1u64 << 48) as f64
}

/// [`jitter`] for `lp`, drawing the bytes only when its backoff reads them.
pub(crate) fn jitter_for(lp: &Loop) -> f64 {
    if lp.policy.backoff.is_fixed() {
        return 0.5;
    }
    jitter(lp.policy.backoff, crate::random_id_bytes())
}

/// The run streaks (issue 17) an advance stores: each counts only while
/// the policy that reads it is set, and is 0 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Streaks {
    /// `consecutive_successes`, counted toward `expires_after_runs`.
    pub(crate) successes: u32,
    /// `consecutive_failures`, counted toward `pause_after_failures`.
    pub(crate) failures: u32,
}

/// The streaks of `lp` once `streak` is applied: a success counts one more
/// success and resets the failures, a final failure the reverse, and a
/// retry or a skip leaves both.
pub(crate) fn streaks_after(lp: &Loop, streak: Streak) -> Streaks {
    let successes = lp.consecutive_successes.unwrap_or(0);
    let failures = lp.consecutive_failures.unwrap_or(0);
    let (successes, failures) = match streak {
        Streak::Unchanged => (successes, failures),
        Streak::Success => (successes.saturating_add(1), 0),
        Streak::Failure => (0, failures.saturating_add(1)),
    };
    Streaks {
        successes: if lp.policy.expires_after_runs.is_some() {
            successes
        } else {
            0
        },
        failures: if lp.policy.pause_after_failures.is_some() {
            failures
        } else {
            0
        },
    }
}

/// What an advance writes to a loop that is active.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// Write the plan and the streaks, guarded on the loop still active.
    Write(LoopAdvance, Streaks),
    /// Nothing to write: the run is still running or the loop is not
    /// active.
    Leave,
    /// The schedule failed: pause the loop, guarded the same way.
    Pause(ScheduleError),
}

/// The advance of `lp` after `run` finished (SPEC §3.4 with the run's
/// `finished_at`, `now` when unset), as a pure decision.
///
/// A run that succeeded or was skipped moves the loop past its slot. One
/// that did not is retried while attempts remain, unless `retry_allowed`
/// is false (its attempt's workflow run was cancelled, SPEC §9 item 21).
/// `jitter` is the draw of [`jitter_for`].
pub(crate) fn plan_after_run(
    lp: &Loop,
    run: &LoopRun,
    now: Timestamp,
    retry_allowed: bool,
    jitter: f64,
) -> Plan {
    let finished_at = run.finished_at.unwrap_or(now);
    let succeeded = run.status.is_terminal();
    // `succeeded` only decides whether plan_advance takes its retry branch
    // (SPEC §3.4 step 3); a run that may not be retried advances exactly as
    // a success does (step 4).
    let no_retry = succeeded || !retry_allowed;
    match plan_advance_with(lp, run, finished_at, no_retry, jitter) {
        Ok(Some(plan)) => {
            let streaks = streaks_after(lp, plan.streak);
            Plan::Write(plan, streaks)
        }
        Ok(None) => Plan::Leave,
        Err(err) => Plan::Pause(err),
    }
}

/// A loop by id, without a lock.
const LOOP_BY_ID: &str = concat!("SELECT ", loop_columns!(), " FROM loops WHERE id = ?1");

/// A loop by id, its row locked until the transaction ends (PostgreSQL).
///
/// `FOR NO KEY UPDATE` rather than `FOR UPDATE`: it excludes every other
/// writer of the row just the same, but not the key-share lock a foreign
/// key check takes, so starting a workflow run that references the loop
/// does not wait for it.
const LOCK_LOOP_BY_ID: &str = concat!(
    "SELECT ",
    loop_columns!(),
    " FROM loops WHERE id = ?1 FOR NO KEY UPDATE"
);

/// Reads one loop by id.
pub(crate) fn read_loop(c: &mut dyn Sql, id: &LoopId) -> Result<Option<Loop>> {
    c.query_opt(
        LOOP_BY_ID,
        &[id.as_str().into()],
        ("loops", "reading a loop"),
        columns::loop_row,
    )
}

/// Reads one loop by id inside the caller's write transaction, so that
/// the writers of one loop (claims, advances, skips, settles, recoveries)
/// run one at a time: PostgreSQL locks its row until the transaction
/// ends; SQLite's write transaction already holds the database's write
/// lock. `None` when the loop does not exist.
pub(crate) fn lock_loop(c: &mut dyn Sql, id: &LoopId) -> Result<Option<Loop>> {
    let sql = c.dialect().pick(LOOP_BY_ID, LOCK_LOOP_BY_ID);
    c.query_opt(
        sql,
        &[id.as_str().into()],
        ("loops", "locking a loop"),
        columns::loop_row,
    )
}

/// Advances the loop of `run`, which has just finished, inside the
/// caller's write transaction (see the module docs). Returns what happened
/// and the loop as stored afterwards.
///
/// The loop is re-read with [`lock_loop`]. On PostgreSQL callers lock it
/// before they write the run, so that the writers of one loop always lock
/// the loop first; here the lock is then already held.
pub(crate) fn advance_after(
    c: &mut dyn Sql,
    run: &LoopRun,
    now: Timestamp,
) -> Result<(Advance, Option<Loop>)> {
    let Some(lp) = lock_loop(c, &run.loop_id)? else {
        return Ok((Advance::LoopMissing, None));
    };
    if lp.status != LoopStatus::Active {
        return Ok((Advance::NotActive, Some(lp)));
    }
    let retry_allowed = run.status.is_terminal() || !attempt_workflow_cancelled(c, run)?;
    match plan_after_run(&lp, run, now, retry_allowed, jitter_for(&lp)) {
        Plan::Write(plan, streaks) => {
            let stored = update_active(
                c,
                concat!(
                    "UPDATE loops SET status = ?2, next_run_at = ?3, retry_scheduled_for = ?4,
                       updated_at = ?5, consecutive_successes = ?6, consecutive_failures = ?7,
                       paused_reason = COALESCE(?8, paused_reason)
                     WHERE id = ?1 AND status = 'active' RETURNING ",
                    loop_columns!()
                ),
                &[
                    run.loop_id.as_str().into(),
                    plan.status.as_str().into(),
                    plan.next_run_at.into(),
                    plan.retry_scheduled_for.into(),
                    now.into(),
                    streaks.successes.into(),
                    streaks.failures.into(),
                    plan.paused_reason.as_deref().into(),
                ],
            )?;
            Ok(match stored {
                Some(l) => (Advance::Advanced(plan), Some(l)),
                None => (Advance::NotActive, Some(lp)),
            })
        }
        Plan::Leave => Ok((Advance::NotActive, Some(lp))),
        Plan::Pause(err) => {
            let stored = update_active(
                c,
                concat!(
                    "UPDATE loops SET status = 'paused', updated_at = ?2
                     WHERE id = ?1 AND status = 'active' RETURNING ",
                    loop_columns!()
                ),
                &[run.loop_id.as_str().into(), now.into()],
            )?;
            Ok((Advance::Paused(err), stored.or(Some(lp))))
        }
    }
}

/// Whether the workflow run of one loop run's attempt was cancelled, as a
/// count that is 0 when it was not: SQLite reads the workflow runs of the
/// loop run (`idx_workflow_runs_loop_run`), the unary `+` keeping the
/// planner off `idx_workflow_runs_status`, which would read every
/// cancelled workflow run ever recorded. PostgreSQL has no unary `+` on
/// text and counts the same rows.
pub(crate) const ATTEMPT_CANCELLED: &str = "SELECT EXISTS (SELECT 1 FROM workflow_runs
       WHERE loop_run_id = ?1 AND idempotency_key = ?2 AND +status = 'cancelled')";

/// [`ATTEMPT_CANCELLED`] for PostgreSQL.
pub(crate) const ATTEMPT_CANCELLED_PG: &str = "SELECT COUNT(*) FROM workflow_runs
       WHERE loop_run_id = ?1 AND idempotency_key = ?2 AND status = 'cancelled'";

/// Whether the workflow run this attempt of `run` executed was cancelled.
/// Runs that are not workflow runs have no such row.
fn attempt_workflow_cancelled(c: &mut dyn Sql, run: &LoopRun) -> Result<bool> {
    let key = loop_workflow_key(&run.loop_id, run.scheduled_for, run.attempt);
    let sql = c.dialect().pick(ATTEMPT_CANCELLED, ATTEMPT_CANCELLED_PG);
    let found = c.query_int(
        sql,
        &[run.id.as_str().into(), key.as_str().into()],
        "checking for a cancelled workflow run",
    )?;
    Ok(found != 0)
}

fn update_active(
    c: &mut dyn Sql,
    sql: &'static str,
    params: &[crate::sql::Value<'_>],
) -> Result<Option<Loop>> {
    c.query_opt(
        sql,
        params,
        ("loops", "advancing a loop"),
        columns::loop_row,
    )
}

/// Whether the dialect's write transaction already serializes the writers
/// of a loop (SQLite's `BEGIN IMMEDIATE` holds the database's write lock),
/// so that no row needs locking first.
pub(crate) fn serialized_by_transaction(c: &dyn Sql) -> bool {
    c.dialect() == Dialect::Sqlite
}

#[cfg(test)]
pub(crate) mod tests {
    use loops_core::{
        CatchUp, CommandTarget, LoopId, LoopRun, LoopStatus, Overlap, RunId, RunStatus, Schedule,
        Target,
    };

    use super::*;

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
}
