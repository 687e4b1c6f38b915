//! The workflow runs linked to a loop run, as recovery, orphan abandon and
//! release see them: their live step processes, and closing them with
//! their run. The same statements as `sqlite/workflow_runs.rs`.
//!
//! Closing a workflow run updates its row before appending its event, so
//! the row stays locked until the transaction ends: an event's sequence
//! number (`MAX + 1`, assigned inside the writing transaction) cannot be
//! taken by another writer of the same workflow run that locks the row
//! first too.

use loops_core::{
    EventId, LoopRun, ProcessRef, RunId, Timestamp, WorkflowRunId, loop_workflow_key,
};
use serde_json::json;

use crate::error::{Result, StoreError};
use crate::postgres::rows::{Json, ts};
use crate::postgres::{Conn, Postgres};
use crate::random_id_bytes;
use crate::runs::INTERRUPTED_BY_SHUTDOWN;

/// The terminal workflow-run statuses as a SQL list (SPEC §0); a test
/// checks it against `WorkflowRunStatus::is_terminal`.
macro_rules! terminal_run_statuses {
    () => {
        "('succeeded', 'failed', 'timed_out', 'cancelled')"
    };
}

/// The running steps with a recorded pid of the open workflow runs linked
/// to loop run `loop_run_id`.
fn linked_step_processes(c: &mut Conn<'_>, loop_run_id: &RunId) -> Result<Vec<ProcessRef>> {
    let context = "reading linked step processes";
    let found = c.query(
        concat!(
            "SELECT wsr.pid, wsr.pid_start_ms FROM workflow_runs wr
             JOIN workflow_step_runs wsr ON wsr.workflow_run_id = wr.id
             WHERE wr.loop_run_id = $1 AND wr.status NOT IN ",
            terminal_run_statuses!(),
            " AND wsr.status = 'running' AND wsr.pid IS NOT NULL"
        ),
        &[&loop_run_id.as_str()],
        context,
    )?;
    let mut processes = Vec::with_capacity(found.len());
    for row in &found {
        let pid: i64 = row.try_get(0).map_err(StoreError::db(context))?;
        let start: Option<i64> = row.try_get(1).map_err(StoreError::db(context))?;
        // A pid that does not fit is no process of this host's.
        if let Ok(pid) = u32::try_from(pid) {
            processes.push(ProcessRef { pid, start });
        }
    }
    Ok(processes)
}

impl Postgres {
    /// True when some linked workflow step process of `loop_run_id` is
    /// alive on this host.
    pub(super) fn has_live_step_processes(
        &self,
        c: &mut Conn<'_>,
        loop_run_id: &RunId,
    ) -> Result<bool> {
        Ok(linked_step_processes(c, loop_run_id)?
            .into_iter()
            .any(|p| self.liveness.is_alive(p)))
    }
}

/// Appends one event to a workflow run's log, inside the caller's
/// transaction, which holds the workflow run's row.
fn append_event(
    c: &mut Conn<'_>,
    run_id: &WorkflowRunId,
    event_type: &str,
    payload: &serde_json::Value,
    now: Timestamp,
) -> Result<()> {
    let payload = serde_json::to_string(payload)
        .map_err(|e| StoreError::Encode(format!("event payload: {e}")))?;
    c.execute(
        "INSERT INTO workflow_events (id, workflow_run_id, sequence, event_type, step_id,
           payload_json, created_at)
         VALUES ($1, $2,
                 (SELECT COALESCE(MAX(sequence), 0) + 1 FROM workflow_events
                  WHERE workflow_run_id = $2),
                 $3, NULL, $4, $5)",
        &[
            &EventId::from_bytes(random_id_bytes()).as_str(),
            &run_id.as_str(),
            &event_type,
            &Json(&payload),
            &ts(now),
        ],
        "appending a workflow event",
    )?;
    Ok(())
}

/// How [`close_linked_workflow_runs`] ends the open workflow runs of a
/// loop run: the statuses it writes, the reason, and the event it appends.
struct LinkedClose<'a> {
    /// The terminal status the workflow runs get.
    run_status: &'static str,
    /// The status their pending and running steps get.
    step_status: &'static str,
    /// Recorded as the error of the runs and steps.
    reason: &'a str,
    /// The event appended to each closed run (its type is `run_status`).
    payload: serde_json::Value,
    /// What the store was doing, for error messages.
    context: &'static str,
}

/// Ends the open workflow runs linked to `loop_run_id`, closes their open
/// steps (no step events, as in the original), and appends one event to
/// each run. Returns the ids of the runs it closed.
fn close_linked_workflow_runs(
    c: &mut Conn<'_>,
    loop_run_id: &RunId,
    close: &LinkedClose<'_>,
    now: Timestamp,
) -> Result<Vec<WorkflowRunId>> {
    let found = c.query(
        concat!(
            "UPDATE workflow_runs SET status = $4, finished_at = $2, error = $3, updated_at = $2
             WHERE loop_run_id = $1 AND status NOT IN ",
            terminal_run_statuses!(),
            " RETURNING id"
        ),
        &[
            &loop_run_id.as_str(),
            &ts(now),
            &close.reason,
            &close.run_status,
        ],
        close.context,
    )?;
    let mut closed = Vec::with_capacity(found.len());
    for row in &found {
        let id: &str = row.try_get(0).map_err(StoreError::db(close.context))?;
        let id = id
            .parse::<WorkflowRunId>()
            .map_err(|e| StoreError::Corrupt {
                table: "workflow_runs",
                id: id.to_owned(),
                reason: format!("column id: {e}"),
            })?;
        closed.push(id);
    }
    for wr in &closed {
        c.execute(
            "UPDATE workflow_step_runs SET status = $4, finished_at = $2, pid = NULL,
               pid_start_ms = NULL, error = $3, updated_at = $2
             WHERE workflow_run_id = $1 AND status IN ('pending', 'running')",
            &[&wr.as_str(), &ts(now), &close.reason, &close.step_status],
            close.context,
        )?;
        append_event(c, wr, close.run_status, &close.payload, now)?;
    }
    Ok(closed)
}

/// Fails the open workflow runs linked to `loop_run_id` with `reason`,
/// skips their open steps, and appends a `failed` event to each (SPEC
/// §4.3).
pub(super) fn fail_linked_workflow_runs(
    c: &mut Conn<'_>,
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
    close_linked_workflow_runs(c, loop_run_id, &close, now)
}

/// Cancels the open workflow runs of a released loop run and clears the
/// idempotency key of its attempt ([`loop_workflow_key`]), so the re-run
/// of the same attempt starts a fresh workflow run.
pub(super) fn release_linked_workflow_runs(
    c: &mut Conn<'_>,
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
    let cancelled = close_linked_workflow_runs(c, &run.id, &close, now)?;
    // The same attempt runs again, so its key will be asked for again.
    let key = loop_workflow_key(
        &run.loop_id,
        run.scheduled_for,
        run.attempt.saturating_add(1),
    );
    c.execute(
        "UPDATE workflow_runs SET idempotency_key = NULL, updated_at = $3
         WHERE loop_run_id = $1 AND idempotency_key = $2",
        &[&run.id.as_str(), &key, &ts(now)],
        "clearing the idempotency key of an interrupted workflow run",
    )?;
    Ok(cancelled)
}

#[cfg(test)]
mod tests {
    use loops_core::WorkflowRunStatus;

    #[test]
    fn the_terminal_list_is_the_statuses_core_calls_terminal() {
        let listed: Vec<&str> = terminal_run_statuses!()
            .trim_matches(|c| c == '(' || c == ')')
            .split(", ")
            .map(|s| s.trim_matches('\''))
            .collect();
        let terminal: Vec<&str> = WorkflowRunStatus::ALL
            .iter()
            .filter(|s| s.is_terminal())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(listed, terminal);
    }
}
