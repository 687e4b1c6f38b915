//! The SQLite side of [`crate::runs::advance`].

use loops_core::{Loop, LoopRun, Timestamp, loop_workflow_key, plan_advance_with};
use rusqlite::{Connection, params};

use crate::error::{Result, StoreError};
use crate::runs::Advance;
use crate::runs::{jitter_for, streak_param};
use crate::sqlite::loops::query_loop;
use crate::sqlite::rows::{self, loop_columns, ts, ts_opt};

/// Advances the loop of `run`, which has just finished, inside the
/// caller's transaction, as of the run's `finished_at` (`now` when unset).
///
/// A run that succeeded or was skipped moves the loop past its slot. One
/// that did not is retried while attempts remain, unless the workflow run
/// of its attempt was cancelled (SPEC §9 item 21, see the module docs).
/// Returns what happened and the loop as stored afterwards.
pub(crate) fn advance_after(
    conn: &Connection,
    run: &LoopRun,
    now: Timestamp,
) -> Result<(Advance, Option<Loop>)> {
    debug_assert!(!conn.is_autocommit(), "advance_after needs a transaction");
    let loop_id = &run.loop_id;
    let finished_at = run.finished_at.unwrap_or(now);
    let succeeded = run.status.is_terminal();
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
    match plan_advance_with(&lp, run, finished_at, !may_retry, jitter_for(&lp)) {
        Ok(Some(plan)) => {
            let stored = update_active(
                conn,
                concat!(
                    "UPDATE loops SET status = ?2, next_run_at = ?3, retry_scheduled_for = ?4,
                       updated_at = ?5,
                       consecutive_successes = CASE WHEN expires_after_runs IS NULL THEN 0
                         ELSE CASE ?6 WHEN 'success' THEN consecutive_successes + 1
                         WHEN 'failure' THEN 0 ELSE consecutive_successes END END,
                       consecutive_failures = CASE WHEN pause_after_failures IS NULL THEN 0
                         ELSE CASE ?6 WHEN 'failure' THEN consecutive_failures + 1
                         WHEN 'success' THEN 0 ELSE consecutive_failures END END,
                       paused_reason = COALESCE(?7, paused_reason)
                     WHERE id = ?1 AND status = 'active' RETURNING ",
                    loop_columns!()
                ),
                params![
                    loop_id.as_str(),
                    plan.status.as_str(),
                    ts_opt(plan.next_run_at),
                    ts_opt(plan.retry_scheduled_for),
                    ts(now),
                    streak_param(plan.streak),
                    plan.paused_reason,
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
                concat!(
                    "UPDATE loops SET status = 'paused', updated_at = ?2
                     WHERE id = ?1 AND status = 'active' RETURNING ",
                    loop_columns!()
                ),
                params![loop_id.as_str(), ts(now)],
            )?;
            Ok((Advance::Paused(err), stored.or(Some(lp))))
        }
    }
}

/// Reads the workflow runs of one loop run (`idx_workflow_runs_loop_run`).
/// The unary `+` keeps the planner off `idx_workflow_runs_status`, which
/// would read every cancelled workflow run ever recorded.
pub(in crate::sqlite) const ATTEMPT_CANCELLED: &str = "SELECT EXISTS (SELECT 1 FROM workflow_runs
       WHERE loop_run_id = ?1 AND idempotency_key = ?2 AND +status = 'cancelled')";

/// Whether the workflow run this attempt of `run` executed was cancelled.
/// Runs that are not workflow runs have no such row.
fn attempt_workflow_cancelled(conn: &Connection, run: &LoopRun) -> Result<bool> {
    let key = loop_workflow_key(&run.loop_id, run.scheduled_for, run.attempt);
    conn.prepare_cached(ATTEMPT_CANCELLED)
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
