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
    Backoff, Loop, LoopAdvance, LoopId, LoopRun, LoopStatus, RunId, ScheduleError, Streak,
    Timestamp, loop_workflow_key, plan_advance_with,
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
    /// The run was started by a trigger (issue 30): the loop's schedule
    /// did not move, and the run is not retried.
    Triggered,
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
    let lp = lock_loop(c, &run.loop_id)?;
    // A triggered run never moves its loop's schedule and is not retried
    // (issue 30, T5), however it ended: finalized, or abandoned by a
    // recovery. Advancing would give a trigger-only loop a next run.
    if triggered(c, &run.id)? {
        return Ok((Advance::Triggered, lp));
    }
    let Some(lp) = lp else {
        return Ok((Advance::LoopMissing, None));
    };
    if lp.status != LoopStatus::Active {
        return Ok((Advance::NotActive, Some(lp)));
    }
    let retry_allowed = allows_retry(run, || attempt_workflow_cancelled(c, run))?;
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

/// Whether run `id` was started by a trigger (issue 30).
fn triggered(c: &mut dyn Sql, id: &RunId) -> Result<bool> {
    let n = c.query_int(
        "SELECT COUNT(*) FROM loop_runs WHERE id = ?1 AND trigger_id IS NOT NULL",
        &[id.as_str().into()],
        "reading a run's trigger",
    )?;
    Ok(n > 0)
}

/// Whether `run`, which finished, may be retried (SPEC §9 item 21): not
/// when its attempt's workflow run was `cancelled`. Only a run that did
/// not succeed or skip is ever retried, so only for such a run is
/// `cancelled`, which reads the database, asked.
pub(crate) fn allows_retry(
    run: &LoopRun,
    cancelled: impl FnOnce() -> Result<bool>,
) -> Result<bool> {
    Ok(run.status.is_terminal() || !cancelled()?)
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
pub(crate) mod tests;
