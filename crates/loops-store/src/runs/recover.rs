//! Recovering runs whose lease expired (SPEC §4.3
//! `recoverExpiredRunLeases`, §10 items 27–28, §3.1 step 2).
//!
//! The original recovers with no transaction and advances the loop in a
//! separate write (SPEC §9 item 7). Here each expired run is recovered in
//! its own `BEGIN IMMEDIATE` transaction that re-checks the row is still
//! running and expired, re-checks that neither its process nor a linked
//! step process is alive, marks it abandoned, fails its linked workflow
//! runs, and advances its loop, all or nothing. A runner that re-claims or
//! heartbeats the row first wins; recovery then leaves it alone.

use loops_core::{Loop, LoopRun, RunId, Timestamp, WorkflowRunId};
use rusqlite::{Connection, params};
use serde_json::json;

use super::advance::{Advance, advance_loop};
use super::{run_and_process, run_returning};
use crate::Store;
use crate::error::{Result, StoreError};
use crate::rows::{self, ts};
use crate::workflows::append_event;

/// The error recorded on an abandoned run.
pub(crate) const LEASE_EXPIRED: &str = "run lease expired before completion";
/// The error recorded on the workflow runs and steps of an abandoned run.
pub(crate) const PARENT_LEASE_EXPIRED: &str = "parent loop run lease expired before completion";

/// One run recovered by [`Store::recover_expired_run_leases`].
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    /// The run, now abandoned.
    pub run: LoopRun,
    /// The linked workflow runs that were failed with it.
    pub workflow_runs_failed: Vec<WorkflowRunId>,
    /// The run's loop as stored after the advance, if it exists.
    pub loop_: Option<Loop>,
    /// What happened to the loop: advanced as after a failure at `now`, so
    /// a retry is scheduled while attempts remain (SPEC §10 item 40).
    pub advance: Advance,
}

impl Store {
    /// Abandons every running run whose lease expired at or before `now`
    /// and whose process is dead, cascading to its workflow runs and
    /// advancing its loop (see the module docs). Rows whose process, or a
    /// linked step process, is alive are left running. A NULL lease never
    /// matches.
    pub fn recover_expired_run_leases(&self, now: Timestamp) -> Result<Vec<Recovered>> {
        let candidates: Vec<RunId> = rows::query_vec(
            &self.conn,
            "SELECT id FROM loop_runs
             WHERE status = 'running' AND lease_expires_at <= ?1
             ORDER BY lease_expires_at, rowid",
            [ts(now)],
            ("loop_runs", "finding expired run leases"),
            |r| rows::parsed(r, "id"),
        )?;
        let mut recovered = Vec::new();
        for id in candidates {
            if let Some(r) = self.write_tx(|conn| self.recover_one(conn, &id, now))? {
                recovered.push(r);
            }
        }
        Ok(recovered)
    }

    fn recover_one(
        &self,
        conn: &Connection,
        id: &RunId,
        now: Timestamp,
    ) -> Result<Option<Recovered>> {
        let Some((_, process)) = rows::query_opt(
            conn,
            "SELECT * FROM loop_runs
             WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?2",
            params![id.as_str(), ts(now)],
            ("loop_runs", "re-reading an expired run"),
            run_and_process,
        )?
        else {
            return Ok(None);
        };
        // SPEC §9 item 14: the probe compares the process start time when
        // the row has one, so a reused pid no longer blocks recovery.
        // `has_live_step_processes` reads on the same connection, inside
        // this transaction.
        if process.is_some_and(|p| self.liveness.is_alive(p)) || self.has_live_step_processes(id)? {
            return Ok(None);
        }
        // The pid and claimant are kept for the record.
        let Some(run) = run_returning(
            conn,
            "UPDATE loop_runs SET status = 'abandoned', finished_at = ?2, lease_expires_at = NULL,
               error = ?3, updated_at = ?2
             WHERE id = ?1 AND status = 'running' AND lease_expires_at <= ?2
             RETURNING *",
            params![id.as_str(), ts(now), LEASE_EXPIRED],
            "abandoning an expired run",
        )?
        else {
            return Ok(None);
        };
        let workflow_runs_failed =
            fail_linked_workflow_runs(conn, &run.id, PARENT_LEASE_EXPIRED, now)?;
        let (advance, loop_) = advance_loop(conn, &run.loop_id, &run, now, false, now)?;
        Ok(Some(Recovered {
            run,
            workflow_runs_failed,
            loop_,
            advance,
        }))
    }
}

/// How [`close_linked_workflow_runs`] ends the open workflow runs of a loop
/// run: the statuses it writes, the reason, and the event it appends.
pub(super) struct LinkedClose<'a> {
    /// The terminal status the workflow runs get.
    pub(super) run_status: &'static str,
    /// The status their pending and running steps get.
    pub(super) step_status: &'static str,
    /// Recorded as the error of the runs and steps.
    pub(super) reason: &'a str,
    /// The event appended to each closed run (its type is `run_status`).
    pub(super) payload: serde_json::Value,
    /// What the store was doing, for error messages.
    pub(super) context: &'static str,
}

/// Ends the non-terminal workflow runs linked to `loop_run_id`, closes
/// their open steps (no step events, as in the original), and appends one
/// event to each run. Lease recovery fails them (SPEC §4.3); a daemon
/// shutdown cancels them. Returns the ids of the runs it closed.
pub(super) fn close_linked_workflow_runs(
    conn: &Connection,
    loop_run_id: &RunId,
    close: &LinkedClose<'_>,
    now: Timestamp,
) -> Result<Vec<WorkflowRunId>> {
    let closed: Vec<WorkflowRunId> = rows::query_vec(
        conn,
        "UPDATE workflow_runs SET status = ?4, finished_at = ?2, error = ?3, updated_at = ?2
         WHERE loop_run_id = ?1
           AND status NOT IN ('succeeded', 'failed', 'timed_out', 'cancelled')
         RETURNING id",
        params![
            loop_run_id.as_str(),
            ts(now),
            close.reason,
            close.run_status
        ],
        ("workflow_runs", close.context),
        |r| rows::parsed(r, "id"),
    )?;
    for wr in &closed {
        crate::rows::exec(
            conn,
            "UPDATE workflow_step_runs SET status = ?4, finished_at = ?2, pid = NULL,
               pid_start_ms = NULL, error = ?3, updated_at = ?2
             WHERE workflow_run_id = ?1 AND status IN ('pending', 'running')",
            params![wr.as_str(), ts(now), close.reason, close.step_status],
        )
        .map_err(StoreError::db(close.context))?;
        append_event(conn, wr, close.run_status, None, Some(&close.payload), now)?;
    }
    Ok(closed)
}

/// Fails the non-terminal workflow runs linked to `loop_run_id` with
/// `reason`, skips their open steps, and appends a `failed` event to each
/// (SPEC §4.3).
pub(super) fn fail_linked_workflow_runs(
    conn: &Connection,
    loop_run_id: &RunId,
    reason: &str,
    now: Timestamp,
) -> Result<Vec<WorkflowRunId>> {
    let close = LinkedClose {
        run_status: "failed",
        step_status: "skipped",
        reason,
        payload: json!({"error": reason, "loopRunId": loop_run_id.as_str()}),
        context: "failing linked workflow runs",
    };
    close_linked_workflow_runs(conn, loop_run_id, &close, now)
}
