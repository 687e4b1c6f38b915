//! The workflow runs linked to a loop run, as the run operations written
//! once see them: a release cancels them and clears the idempotency key of
//! their attempt, an orphan abandon fails them, and an orphan is abandoned
//! only while none of their step processes is alive. The same statements
//! as the backends' `workflow_runs.rs`, written once.
//!
//! On PostgreSQL an event is appended under the lock of its workflow run's
//! row, which makes `MAX(sequence) + 1` race-free; SQLite's write
//! transaction holds the database's write lock already.

use loops_core::{
    EventId, LoopRun, ProcessRef, RunId, Timestamp, WorkflowRunId, loop_workflow_key,
};
use serde_json::json;

use super::advance::serialized_by_transaction;
use crate::columns::{self, process_at};
use crate::error::{Result, StoreError};
use crate::random_id_bytes;
use crate::runs::INTERRUPTED_BY_SHUTDOWN;
use crate::sql::{self, Sql};

/// The terminal statuses of a workflow run, as an SQL list.
macro_rules! terminal_workflow_statuses {
    () => {
        "('succeeded', 'failed', 'timed_out', 'cancelled')"
    };
}

/// How [`close_linked_workflow_runs`] ends the open workflow runs of a
/// loop run: the statuses it writes, the reason, and the event it appends.
pub(crate) struct LinkedClose<'a> {
    /// The terminal status the workflow runs get.
    pub(crate) run_status: &'static str,
    /// The status their pending and running steps get.
    pub(crate) step_status: &'static str,
    /// Recorded as the error of the runs and steps.
    pub(crate) reason: &'a str,
    /// The event appended to each closed run (its type is `run_status`).
    pub(crate) payload: serde_json::Value,
    /// What the store was doing, for error messages.
    pub(crate) context: &'static str,
}

/// Ends the non-terminal workflow runs linked to `loop_run_id`, closes
/// their open steps (no step events, as in the original), and appends one
/// event to each run, inside the caller's write transaction. Returns the
/// ids of the runs it closed.
pub(crate) fn close_linked_workflow_runs(
    c: &mut dyn Sql,
    loop_run_id: &RunId,
    close: &LinkedClose<'_>,
    now: Timestamp,
) -> Result<Vec<WorkflowRunId>> {
    let closed: Vec<WorkflowRunId> = c.query_vec(
        concat!(
            "UPDATE workflow_runs SET status = ?4, finished_at = ?2, error = ?3, updated_at = ?2
             WHERE loop_run_id = ?1 AND status NOT IN ",
            terminal_workflow_statuses!(),
            " RETURNING id"
        ),
        &[
            loop_run_id.as_str().into(),
            now.into(),
            close.reason.into(),
            close.run_status.into(),
        ],
        ("workflow_runs", close.context),
        |r| columns::parsed(r, &["id"], 0),
    )?;
    let payload = serde_json::to_string(&close.payload)
        .map_err(|e| StoreError::Encode(format!("event payload: {e}")))?;
    for wr in &closed {
        c.execute(
            "UPDATE workflow_step_runs SET status = ?4, finished_at = ?2, pid = NULL,
               pid_start_ms = NULL, error = ?3, updated_at = ?2
             WHERE workflow_run_id = ?1 AND status IN ('pending', 'running')",
            &[
                wr.as_str().into(),
                now.into(),
                close.reason.into(),
                close.step_status.into(),
            ],
            close.context,
        )?;
        append_event(c, wr, close.run_status, &payload, now)?;
    }
    Ok(closed)
}

/// Appends one event without a step to a workflow run's log, inside the
/// caller's write transaction (see the module docs).
fn append_event(
    c: &mut dyn Sql,
    run_id: &WorkflowRunId,
    event_type: &str,
    payload: &str,
    now: Timestamp,
) -> Result<()> {
    if !serialized_by_transaction(c) {
        c.query_rows(
            "SELECT id FROM workflow_runs WHERE id = ?1 FOR UPDATE",
            &[run_id.as_str().into()],
            "locking a workflow run",
            &mut |_| Ok(std::ops::ControlFlow::Break(())),
        )?;
    }
    c.execute(
        "INSERT INTO workflow_events (id, workflow_run_id, sequence, event_type, step_id,
                payload_json, created_at)
         VALUES (?1, ?2,
                 (SELECT COALESCE(MAX(sequence), 0) + 1 FROM workflow_events
                  WHERE workflow_run_id = ?2),
                 ?3, NULL, ?4, ?5)",
        &[
            EventId::from_bytes(random_id_bytes()).as_str().into(),
            run_id.as_str().into(),
            event_type.into(),
            sql::json(payload),
            now.into(),
        ],
        "appending a workflow event",
    )?;
    Ok(())
}

/// Fails the non-terminal workflow runs linked to `loop_run_id` with
/// `reason`, skips their open steps, and appends a `failed` event to each
/// (SPEC §4.3).
pub(crate) fn fail_linked_workflow_runs(
    c: &mut dyn Sql,
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
pub(crate) fn release_linked_workflow_runs(
    c: &mut dyn Sql,
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
        "UPDATE workflow_runs SET idempotency_key = NULL, updated_at = ?3
         WHERE loop_run_id = ?1 AND idempotency_key = ?2",
        &[run.id.as_str().into(), key.as_str().into(), now.into()],
        "clearing the idempotency key of an interrupted workflow run",
    )?;
    Ok(cancelled)
}

/// The running steps with a recorded pid of the non-terminal workflow runs
/// linked to loop run `loop_run_id` (SPEC §4.2 "live step processes").
pub(crate) fn linked_step_processes(
    c: &mut dyn Sql,
    loop_run_id: &RunId,
) -> Result<Vec<ProcessRef>> {
    let found: Vec<Option<ProcessRef>> = c.query_vec(
        concat!(
            "SELECT wsr.pid, wsr.pid_start_ms FROM workflow_runs wr
             JOIN workflow_step_runs wsr ON wsr.workflow_run_id = wr.id
             WHERE wr.loop_run_id = ?1
               AND wr.status NOT IN ",
            terminal_workflow_statuses!(),
            " AND wsr.status = 'running' AND wsr.pid IS NOT NULL"
        ),
        &[loop_run_id.as_str().into()],
        ("workflow_step_runs", "reading linked step processes"),
        |r| process_at(r, 0),
    )?;
    Ok(found.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use loops_core::WorkflowRunStatus;

    #[test]
    fn the_terminal_list_is_the_statuses_core_calls_terminal() {
        let listed: Vec<&str> = terminal_workflow_statuses!()
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
