//! The workflow runs linked to a loop run, as a release sees them: it
//! cancels them and clears the idempotency key of their attempt. Failing
//! them (an orphan abandon, lease recovery) and their step processes are
//! [`crate::workflow_runs::ops`]'s and [`crate::workflows::ops`]'s.

use loops_core::{LoopRun, Timestamp, WorkflowRunId, loop_workflow_key};
use serde_json::json;

use crate::error::Result;
use crate::runs::INTERRUPTED_BY_SHUTDOWN;
use crate::sql::Sql;
use crate::workflow_runs::ops::{LinkedClose, close_linked_workflow_runs};

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
