//! Workflow specs, runs, step runs and events (SPEC §4.3 "Workflow specs"
//! onwards, §6.6).
//!
//! Event sequence numbers are assigned inside the transaction that writes
//! the event, so concurrent writers never collide on
//! `UNIQUE(workflow_run_id, sequence)` and sequences have no gaps (SPEC §9
//! item 9).

use loops_core::{EventId, RunId, Timestamp, WorkflowRunId};
use rusqlite::{Connection, params};

use crate::error::{Result, StoreError};
use crate::rows::{self, ts};
use crate::{Store, random_id_bytes};

/// Appends one event to a workflow run's log. Must run inside the caller's
/// write transaction, which makes `MAX(sequence) + 1` race-free.
pub(crate) fn append_event(
    conn: &Connection,
    run_id: &WorkflowRunId,
    event_type: &str,
    step_id: Option<&str>,
    payload: Option<&serde_json::Value>,
    now: Timestamp,
) -> Result<()> {
    debug_assert!(!conn.is_autocommit(), "append_event needs a transaction");
    let payload = payload
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::Migration(format!("encoding event payload: {e}")))?;
    conn.execute(
        "INSERT INTO workflow_events (id, workflow_run_id, sequence, event_type, step_id, payload_json, created_at)
         VALUES (?1, ?2,
                 (SELECT COALESCE(MAX(sequence), 0) + 1 FROM workflow_events WHERE workflow_run_id = ?2),
                 ?3, ?4, ?5, ?6)",
        params![
            EventId::from_bytes(random_id_bytes()).as_str(),
            run_id.as_str(),
            event_type,
            step_id,
            payload,
            ts(now),
        ],
    )
    .map_err(StoreError::db("appending a workflow event"))?;
    Ok(())
}

/// The running steps with a recorded pid of the non-terminal workflow runs
/// linked to loop run `loop_run_id` (SPEC §4.2 "live step processes").
pub(crate) fn linked_step_processes(
    conn: &Connection,
    loop_run_id: &RunId,
) -> Result<Vec<loops_core::ProcessRef>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT wsr.* FROM workflow_runs wr
             JOIN workflow_step_runs wsr ON wsr.workflow_run_id = wr.id
             WHERE wr.loop_run_id = ?1
               AND wr.status NOT IN ('succeeded', 'failed', 'timed_out', 'cancelled')
               AND wsr.status = 'running'
               AND wsr.pid IS NOT NULL",
        )
        .map_err(StoreError::db("reading linked step processes"))?;
    let found = stmt
        .query_map([loop_run_id.as_str()], rows::process_ref)
        .map_err(StoreError::db("reading linked step processes"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::db("reading linked step processes"))?;
    Ok(found.into_iter().flatten().collect())
}

impl Store {
    /// True when some linked workflow step process of `loop_run_id` is alive.
    pub(crate) fn has_live_step_processes(&self, loop_run_id: &RunId) -> Result<bool> {
        Ok(linked_step_processes(&self.conn, loop_run_id)?
            .into_iter()
            .any(|p| self.liveness.is_alive(p)))
    }
}
