//! The SQLite side of [`crate::workflow_runs`]: the operations are written
//! once in [`crate::workflow_runs::ops`]; this lends them SQLite's
//! connection for the run operations that close linked workflow runs.

use loops_core::{RunId, Timestamp, WorkflowRunId};
use rusqlite::Connection;

use crate::error::Result;
use crate::sqlite::sql::Lent;
use crate::workflow_runs::ops;
pub(crate) use crate::workflow_runs::ops::LinkedClose;

/// [`ops::close_linked_workflow_runs`] on `conn`, inside the caller's
/// write transaction.
pub(crate) fn close_linked_workflow_runs(
    conn: &Connection,
    loop_run_id: &RunId,
    close: &LinkedClose<'_>,
    now: Timestamp,
) -> Result<Vec<WorkflowRunId>> {
    ops::close_linked_workflow_runs(&mut Lent(conn), loop_run_id, close, now)
}

/// [`ops::fail_linked_workflow_runs`] on `conn`, inside the caller's write
/// transaction.
pub(crate) fn fail_linked_workflow_runs(
    conn: &Connection,
    loop_run_id: &RunId,
    reason: &str,
    now: Timestamp,
) -> Result<Vec<WorkflowRunId>> {
    ops::fail_linked_workflow_runs(&mut Lent(conn), loop_run_id, reason, now)
}
