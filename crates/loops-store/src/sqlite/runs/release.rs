//! The SQLite side of [`crate::runs::release`].

use loops_core::{
    ExecutorResult, Loop, LoopRun, LoopStatus, RunId, Timestamp, WorkflowRunId, loop_workflow_key,
};
use rusqlite::{Connection, params};
use serde_json::json;

use super::advance::advance_after;
use super::{query_slot, run_and_process, run_returning};
use crate::backend::ReleaseOps;
use crate::error::{Result, StoreError};
use crate::runs::{Advance, INTERRUPTED_BY_SHUTDOWN, Recovered, Released, may_run_again};
use crate::sqlite::Sqlite;
use crate::sqlite::rows::{self, run_columns, ts};
use crate::sqlite::workflow_runs::{
    LinkedClose, close_linked_workflow_runs, fail_linked_workflow_runs,
};

/// Cancels the open workflow runs of a released loop run and clears the
/// idempotency key of its attempt ([`loop_workflow_key`]), so the re-run of
/// the same attempt starts a fresh workflow run.
fn release_linked_workflow_runs(
    conn: &Connection,
    run: &LoopRun,
    now: Timestamp,
) -> Result<Vec<WorkflowRunId>> {
    let close = LinkedClose {
        run_status: "cancelled",
        step_status: "cancelled",
        reason: INTERRUPTED_BY_SHUTDOWN,
        payload: json!({"reason": INTERRUPTED_BY_SHUTDOWN}),
        context: "cancelling linked workflow runs",
    };
    let cancelled = close_linked_workflow_runs(conn, &run.id, &close, now)?;
    // The same attempt runs again, so its key will be asked for again.
    let key = loop_workflow_key(
        &run.loop_id,
        run.scheduled_for,
        run.attempt.saturating_add(1),
    );
    conn.execute(
        "UPDATE workflow_runs SET idempotency_key = NULL, updated_at = ?3
         WHERE loop_run_id = ?1 AND idempotency_key = ?2",
        params![run.id.as_str(), key, ts(now)],
    )
    .map_err(StoreError::db(
        "clearing the idempotency key of an interrupted workflow run",
    ))?;
    Ok(cancelled)
}

impl ReleaseOps for Sqlite {
    fn release_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        claimed_by: &str,
        now: Timestamp,
    ) -> Result<Option<Released>> {
        self.write_tx(|conn| {
            let Some(run) = run_returning(
                conn,
                concat!(
                    "UPDATE loop_runs SET status = 'abandoned',
                       finished_at = ?3, lease_expires_at = NULL,
                       pid_start_ms = CASE WHEN pid IS ?4 THEN pid_start_ms ELSE NULL END,
                       pid = ?4, exit_code = ?5, duration_ms = ?6, stdout = ?7, stderr = ?8,
                       error = ?9, updated_at = ?3
                     WHERE id = ?1 AND status = 'running' AND claimed_by = ?2
                     RETURNING ",
                    run_columns!()
                ),
                params![
                    run_id.as_str(),
                    claimed_by,
                    ts(result.finished_at.max(now)),
                    result.pid,
                    result.exit_code,
                    result.duration_ms,
                    result.stdout,
                    result.stderr,
                    INTERRUPTED_BY_SHUTDOWN,
                ],
                "releasing an interrupted run",
            )?
            else {
                return Ok(None);
            };
            let workflow_runs_cancelled = release_linked_workflow_runs(conn, &run, now)?;
            Ok(Some(Released {
                run,
                workflow_runs_cancelled,
            }))
        })
    }

    fn abandon_orphaned_run(
        &self,
        run_id: &RunId,
        claimed_by: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Recovered>> {
        self.write_tx(|conn| {
            let Some((_, process)) = rows::query_opt(
                conn,
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM loop_runs WHERE id = ?1 AND status = 'running' AND claimed_by = ?2"
                ),
                params![run_id.as_str(), claimed_by],
                ("loop_runs", "re-reading an orphaned run"),
                run_and_process,
            )?
            else {
                return Ok(None);
            };
            if process.is_some_and(|p| self.liveness.is_alive(p))
                || self.has_live_step_processes(run_id)?
            {
                return Ok(None);
            }
            let Some(run) = run_returning(
                conn,
                concat!(
                    "UPDATE loop_runs SET status = 'abandoned', finished_at = ?3,
                       lease_expires_at = NULL, error = ?4, updated_at = ?3
                     WHERE id = ?1 AND status = 'running' AND claimed_by = ?2
                     RETURNING ",
                    run_columns!()
                ),
                params![run_id.as_str(), claimed_by, ts(now), reason],
                "abandoning an orphaned run",
            )?
            else {
                return Ok(None);
            };
            let workflow_runs_failed = fail_linked_workflow_runs(conn, &run.id, reason, now)?;
            let (advance, loop_) = advance_after(conn, &run, now)?;
            Ok(Some(Recovered {
                run,
                workflow_runs_failed,
                loop_,
                advance,
            }))
        })
    }

    fn settle_finished_slot(
        &self,
        lp: &Loop,
        slot: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        self.write_tx(|conn| {
            let Some(fresh) = crate::sqlite::loops::query_loop(conn, &lp.id)? else {
                return Ok(None);
            };
            let due_slot = fresh.retry_scheduled_for.or(fresh.next_run_at);
            if fresh.status != LoopStatus::Active || due_slot.is_none_or(|d| d > slot) {
                return Ok(None);
            }
            let Some(run) = query_slot(conn, &lp.id, slot)? else {
                return Ok(None);
            };
            // Over for good: succeeded or skipped, or failed with no attempt
            // left. Anything else is claimed again rather than settled.
            let over = run.status.is_terminal()
                || (run.status.is_retryable()
                    && !may_run_again(
                        run.status,
                        run.attempt,
                        run.error.as_deref(),
                        fresh.max_attempts,
                    ));
            if !over {
                return Ok(None);
            }
            match advance_after(conn, &run, now)? {
                (Advance::Advanced(_), stored) => Ok(stored),
                _ => Ok(None),
            }
        })
    }
}
