//! Ending a run on the daemon's behalf rather than the job's: releasing a
//! run that a shutdown interrupted, and abandoning the runs of a daemon
//! that died (SPEC §9 items 16–18).
//!
//! **Release.** SPEC §9 item 17: the original kills in-flight runs on stop
//! and records them as failed, which consumes an attempt. Here a run that
//! was still executing when the daemon's grace period ran out is recorded
//! as `abandoned` with the error [`INTERRUPTED_BY_SHUTDOWN`], keeping its
//! attempt number, and its loop is not advanced. The next claim of the slot
//! recognizes the released row by that error and runs it again under the
//! same attempt number, even when it was the last one. Linked
//! workflow runs are cancelled and their idempotency key for this attempt
//! is cleared, so the re-run starts a fresh workflow run instead of
//! returning the interrupted one.
//!
//! **Orphans.** A daemon killed with SIGKILL leaves its runs `running`
//! under leases that may last 30 minutes. The next daemon on the same host
//! knows the claimant is gone and abandons those runs at once with
//! [`Store::abandon_orphaned_run`], after it has torn down their process
//! groups. The usual recovery rules apply otherwise: the row must still be
//! running under that claimant, its recorded process and linked step
//! processes must be dead, linked workflow runs are failed, and the loop is
//! advanced as after a failure, so retries follow the loop's policy.
//!
//! **Settling.** A run that finishes while its loop is paused is recorded,
//! but the loop is not advanced (an advance never overwrites a pause, SPEC
//! §9 item 8). Resumed, the loop is due on the slot that already ran, which
//! no runner can claim again. [`Store::settle_finished_slot`] advances such
//! a loop past that slot, as the run's finalize would have.

use loops_core::{
    ExecutorResult, Loop, LoopRun, LoopStatus, RunId, RunStatus, Timestamp, WorkflowRunId,
    loop_workflow_key,
};
use rusqlite::{Connection, params};
use serde_json::json;

use super::advance::{Advance, advance_loop};
use super::recover::{
    LinkedClose, Recovered, close_linked_workflow_runs, fail_linked_workflow_runs,
};
use super::{query_slot, run_and_process, run_returning};
use crate::Store;
use crate::error::{Result, StoreError};
use crate::rows::{self, ts};

/// The error recorded on a run released by a daemon shutdown.
pub const INTERRUPTED_BY_SHUTDOWN: &str =
    "interrupted by daemon shutdown; not counted as an attempt";

/// The result of [`Store::release_run`].
#[derive(Debug, Clone, PartialEq)]
pub struct Released {
    /// The run as stored: abandoned, with its attempt number.
    pub run: LoopRun,
    /// The linked workflow runs that were cancelled with it.
    pub workflow_runs_cancelled: Vec<WorkflowRunId>,
}

impl Store {
    /// Records that a shutdown interrupted `run_id` without counting the
    /// attempt (see the module docs), in one `BEGIN IMMEDIATE` transaction.
    ///
    /// `result` is what the cancelled executor returned; its output, exit
    /// code, pid and duration are kept for the record, and its error is
    /// replaced by [`INTERRUPTED_BY_SHUTDOWN`]. Applies only while the run
    /// is running and claimed by `claimed_by`; otherwise nothing is written
    /// and `None` is returned. The loop is never advanced.
    pub fn release_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        claimed_by: &str,
        now: Timestamp,
    ) -> Result<Option<Released>> {
        self.write_tx(|conn| {
            let Some(run) = run_returning(
                conn,
                "UPDATE loop_runs SET status = 'abandoned',
                   finished_at = ?3, lease_expires_at = NULL,
                   pid_start_ms = CASE WHEN pid IS ?4 THEN pid_start_ms ELSE NULL END,
                   pid = ?4, exit_code = ?5, duration_ms = ?6, stdout = ?7, stderr = ?8,
                   error = ?9, updated_at = ?3
                 WHERE id = ?1 AND status = 'running' AND claimed_by = ?2
                 RETURNING *",
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

    /// Abandons a running run whose claimant, a daemon, is known to be
    /// gone, without waiting for its lease to expire (SPEC §9 item 16), in
    /// one `BEGIN IMMEDIATE` transaction.
    ///
    /// Applies only while the row is running and claimed by `claimed_by`,
    /// and only when neither its recorded process nor a linked step process
    /// is alive; the caller tears those down first. The run becomes
    /// abandoned with error `reason`, its linked workflow runs are failed
    /// with the same reason, and its loop is advanced as after a failure.
    /// Returns `None` when nothing was written.
    pub fn abandon_orphaned_run(
        &self,
        run_id: &RunId,
        claimed_by: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Recovered>> {
        self.write_tx(|conn| {
            let Some((_, process)) = rows::query_opt(
                conn,
                "SELECT * FROM loop_runs WHERE id = ?1 AND status = 'running' AND claimed_by = ?2",
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
                "UPDATE loop_runs SET status = 'abandoned', finished_at = ?3,
                   lease_expires_at = NULL, error = ?4, updated_at = ?3
                 WHERE id = ?1 AND status = 'running' AND claimed_by = ?2
                 RETURNING *",
                params![run_id.as_str(), claimed_by, ts(now), reason],
                "abandoning an orphaned run",
            )?
            else {
                return Ok(None);
            };
            let workflow_runs_failed = fail_linked_workflow_runs(conn, &run.id, reason, now)?;
            let (advance, loop_) = advance_loop(conn, &run.loop_id, &run, now, false, now)?;
            Ok(Some(Recovered {
                run,
                workflow_runs_failed,
                loop_,
                advance,
            }))
        })
    }
}

impl Store {
    /// Advances `lp` past `slot` when the slot's run is already over for
    /// good (succeeded, skipped, or failed on its last attempt), as the
    /// run's own finalize would have, in one `BEGIN IMMEDIATE` transaction.
    ///
    /// Applies only while the loop is active and still due on that slot
    /// (its pending retry or its `nextRunAt`). Returns the advanced loop,
    /// or `None` when nothing was written.
    pub fn settle_finished_slot(
        &self,
        lp: &Loop,
        slot: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        self.write_tx(|conn| {
            let Some(fresh) = crate::loops::query_loop(conn, &lp.id)? else {
                return Ok(None);
            };
            let due_slot = fresh.retry_scheduled_for.or(fresh.next_run_at);
            if fresh.status != LoopStatus::Active || due_slot.is_none_or(|d| d > slot) {
                return Ok(None);
            }
            let Some(run) = query_slot(conn, &lp.id, slot)? else {
                return Ok(None);
            };
            let succeeded = match run.status {
                RunStatus::Succeeded | RunStatus::Skipped => true,
                s if s.is_retryable()
                    && !super::may_run_again(
                        s,
                        run.attempt,
                        run.error.as_deref(),
                        fresh.max_attempts,
                    ) =>
                {
                    false
                }
                _ => return Ok(None),
            };
            let finished_at = run.finished_at.unwrap_or(now);
            match advance_loop(conn, &lp.id, &run, finished_at, succeeded, now)? {
                (Advance::Advanced(_), stored) => Ok(stored),
                _ => Ok(None),
            }
        })
    }
}

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
