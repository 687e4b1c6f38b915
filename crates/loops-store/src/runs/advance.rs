//! Advancing a loop after one of its runs finished (SPEC §3.4), inside the
//! caller's write transaction.
//!
//! SPEC §9 item 7: the original finalizes a run and advances its loop in
//! two separate writes, so a crash between them strands the slot. Here the
//! advance always runs in the same `BEGIN IMMEDIATE` transaction as the
//! write that finished the run (finalize, skip, recovery).
//!
//! SPEC §9 item 8: the advance is not a blind read-merge-write. It re-reads
//! the loop inside the transaction, plans with
//! [`plan_advance`], and writes with
//! `WHERE id = ? AND status = 'active'`, so a pause is never overwritten.
//!
//! SPEC §9 item 21: in the original, cancelling a scheduled workflow run
//! fails its loop run, which can trigger a retry that runs the workflow the
//! user just cancelled. Here a failed run whose attempt's workflow run (the
//! one keyed [`loop_workflow_key`]) was cancelled advances as if its attempts
//! were spent: no retry, the loop moves on to its next slot. The check reads
//! the database inside the same transaction, so every caller (a tick, the
//! daemon, lease recovery) gets it without passing anything.

use loops_core::{
    Loop, LoopAdvance, LoopId, LoopRun, ScheduleError, Timestamp, loop_workflow_key, plan_advance,
};
use rusqlite::{Connection, params};

use crate::error::{Result, StoreError};
use crate::loops::query_loop;
use crate::rows::{self, ts, ts_opt};

/// What happened to a run's loop when the run finished.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// Advances the loop of `run` inside the caller's transaction.
///
/// A run that did not succeed is retried while attempts remain, unless the
/// workflow run of its attempt was cancelled (SPEC §9 item 21, see the
/// module docs). Returns what happened and the loop as stored afterwards.
pub(crate) fn advance_loop(
    conn: &Connection,
    loop_id: &LoopId,
    run: &LoopRun,
    finished_at: Timestamp,
    succeeded: bool,
    now: Timestamp,
) -> Result<(Advance, Option<Loop>)> {
    debug_assert!(!conn.is_autocommit(), "advance_loop needs a transaction");
    let Some(lp) = query_loop(conn, loop_id)? else {
        return Ok((Advance::LoopMissing, None));
    };
    if lp.status != loops_core::LoopStatus::Active {
        return Ok((Advance::NotActive, Some(lp)));
    }
    let may_retry = !succeeded && !attempt_workflow_cancelled(conn, run)?;
    // `succeeded` only decides whether plan_advance takes its retry branch
    // (SPEC §3.4 step 3); a run that may not be retried advances exactly as
    // a success does (step 4).
    match plan_advance(&lp, run, finished_at, !may_retry) {
        Ok(Some(plan)) => {
            let stored = update_active(
                conn,
                "UPDATE loops SET status = ?2, next_run_at = ?3, retry_scheduled_for = ?4,
                   updated_at = ?5
                 WHERE id = ?1 AND status = 'active' RETURNING *",
                params![
                    loop_id.as_str(),
                    plan.status.as_str(),
                    ts_opt(plan.next_run_at),
                    ts_opt(plan.retry_scheduled_for),
                    ts(now),
                ],
            )?;
            Ok(match stored {
                Some(l) => (Advance::Advanced(plan), Some(l)),
                None => (Advance::NotActive, Some(lp)),
            })
        }
        Ok(None) => Ok((Advance::NotActive, Some(lp))),
        Err(err) => {
            let stored = update_active(
                conn,
                "UPDATE loops SET status = 'paused', updated_at = ?2
                 WHERE id = ?1 AND status = 'active' RETURNING *",
                params![loop_id.as_str(), ts(now)],
            )?;
            Ok((Advance::Paused(err), stored.or(Some(lp))))
        }
    }
}

/// Whether the workflow run this attempt of `run` executed was cancelled.
/// Runs that are not workflow runs have no such row.
fn attempt_workflow_cancelled(conn: &Connection, run: &LoopRun) -> Result<bool> {
    let key = loop_workflow_key(&run.loop_id, run.scheduled_for, run.attempt);
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM workflow_runs
           WHERE loop_run_id = ?1 AND idempotency_key = ?2 AND status = 'cancelled')",
    )
    .and_then(|mut stmt| stmt.query_row(params![run.id.as_str(), key], |r| r.get(0)))
    .map_err(StoreError::db("checking for a cancelled workflow run"))
}

fn update_active(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<Loop>> {
    rows::query_opt(
        conn,
        sql,
        params,
        ("loops", "advancing a loop"),
        rows::loop_row,
    )
}
