//! The PostgreSQL side of [`crate::runs::advance`].

use loops_core::{Loop, LoopRun, LoopStatus, Timestamp, loop_workflow_key, plan_advance_with};

use crate::error::{Result, StoreError};
use crate::postgres::loops::{lock_loop, loop_returning};
use crate::postgres::rows::{ts, ts_opt};
use crate::postgres::{Conn, Params};
use crate::runs::Advance;
use crate::runs::{jitter_for, streak_param};
use crate::sqlite::rows::loop_columns;

/// Advances the loop of `run`, which has just finished, inside the
/// caller's transaction, as of the run's `finished_at` (`now` when unset):
/// the same decision as on SQLite (see `sqlite/runs/advance.rs`).
///
/// The loop is re-read `FOR UPDATE`. Callers lock it before they write
/// the run, so that the writers of one loop always lock the loop first;
/// here the lock is then already held.
pub(super) fn advance_after(
    c: &mut Conn<'_>,
    run: &LoopRun,
    now: Timestamp,
) -> Result<(Advance, Option<Loop>)> {
    let loop_id = &run.loop_id;
    let finished_at = run.finished_at.unwrap_or(now);
    let succeeded = run.status.is_terminal();
    let Some(lp) = lock_loop(c, loop_id)? else {
        return Ok((Advance::LoopMissing, None));
    };
    if lp.status != LoopStatus::Active {
        return Ok((Advance::NotActive, Some(lp)));
    }
    let may_retry = !succeeded && !attempt_workflow_cancelled(c, run)?;
    // `succeeded` only decides whether plan_advance takes its retry branch
    // (SPEC §3.4 step 3); a run that may not be retried advances exactly as
    // a success does (step 4).
    match plan_advance_with(&lp, run, finished_at, !may_retry, jitter_for(&lp)) {
        Ok(Some(plan)) => {
            let stored = update_active(
                c,
                concat!(
                    "UPDATE loops SET status = $2, next_run_at = $3, retry_scheduled_for = $4,
                       updated_at = $5,
                       consecutive_successes = CASE WHEN expires_after_runs IS NULL THEN 0
                         ELSE CASE $6::text WHEN 'success' THEN consecutive_successes + 1
                         WHEN 'failure' THEN 0 ELSE consecutive_successes END END,
                       consecutive_failures = CASE WHEN pause_after_failures IS NULL THEN 0
                         ELSE CASE $6::text WHEN 'failure' THEN consecutive_failures + 1
                         WHEN 'success' THEN 0 ELSE consecutive_failures END END,
                       paused_reason = COALESCE($7, paused_reason)
                     WHERE id = $1 AND status = 'active' RETURNING ",
                    loop_columns!()
                ),
                &[
                    &loop_id.as_str(),
                    &plan.status.as_str(),
                    &ts_opt(plan.next_run_at),
                    &ts_opt(plan.retry_scheduled_for),
                    &ts(now),
                    &streak_param(plan.streak),
                    &plan.paused_reason,
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
                c,
                concat!(
                    "UPDATE loops SET status = 'paused', updated_at = $2
                     WHERE id = $1 AND status = 'active' RETURNING ",
                    loop_columns!()
                ),
                &[&loop_id.as_str(), &ts(now)],
            )?;
            Ok((Advance::Paused(err), stored.or(Some(lp))))
        }
    }
}

/// Whether the workflow run this attempt of `run` executed was cancelled
/// (`idx_workflow_runs_loop_run`). Runs that are not workflow runs have no
/// such row.
fn attempt_workflow_cancelled(c: &mut Conn<'_>, run: &LoopRun) -> Result<bool> {
    let key = loop_workflow_key(&run.loop_id, run.scheduled_for, run.attempt);
    let row = c.query_one(
        "SELECT EXISTS (SELECT 1 FROM workflow_runs
           WHERE loop_run_id = $1 AND idempotency_key = $2 AND status = 'cancelled')",
        &[&run.id.as_str(), &key],
        "checking for a cancelled workflow run",
    )?;
    row.try_get(0)
        .map_err(StoreError::db("checking for a cancelled workflow run"))
}

fn update_active(c: &mut Conn<'_>, sql: &str, params: Params<'_>) -> Result<Option<Loop>> {
    loop_returning(c, sql, params, "advancing a loop")
}
