//! Workflow specs and the workflow event log (SPEC §4.3 "Workflow specs" and
//! "Events", §6.6), plus the query helpers the workflow-run and step modules
//! share.
//!
//! Invariants:
//! - Event sequence numbers are assigned inside the transaction that writes
//!   the event, and every event is written in the same transaction as the
//!   state change it records. Concurrent writers therefore never collide on
//!   `UNIQUE(workflow_run_id, sequence)`, sequences start at 1 and have no
//!   gaps, and no event describes a change that did not happen (SPEC §9
//!   item 9).
//! - At most one workflow per name is active: the check runs inside the
//!   insert's `BEGIN IMMEDIATE` transaction, and the partial unique index
//!   `idx_workflows_name_active` backs it up. Both surface as
//!   [`StoreError::DuplicateWorkflowName`].

use loops_core::{
    EventId, NewWorkflow, RunId, Timestamp, WorkflowEvent, WorkflowId, WorkflowRunId, WorkflowSpec,
    WorkflowStatus,
};
use rusqlite::{Connection, Params, Row, params};

use crate::error::{Result, StoreError};
use crate::rows::{self, ts};
use crate::{Store, random_id_bytes};

/// Default `limit` of [`Store::list_workflows`].
pub const DEFAULT_WORKFLOW_LIST_LIMIT: u32 = 200;
/// Default `limit` of [`Store::list_events`].
pub const DEFAULT_EVENT_LIST_LIMIT: u32 = 200;

/// Which workflow specs [`Store::list_workflows`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowFilter {
    /// Only specs with this status. Unfiltered lists sort by status first.
    pub status: Option<WorkflowStatus>,
    /// At most this many; [`DEFAULT_WORKFLOW_LIST_LIMIT`] when unset.
    pub limit: Option<u32>,
}

/// The terminal workflow-run statuses as a SQL list (SPEC §0).
pub(crate) const TERMINAL_RUN_SQL: &str = "('succeeded', 'failed', 'timed_out', 'cancelled')";

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
        .map_err(|e| StoreError::Encode(format!("event payload: {e}")))?;
    crate::rows::exec(conn,
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

/// A row mapper of [`rows`].
pub(crate) type RowMapper<T> = fn(&Row<'_>) -> rusqlite::Result<T>;

/// Runs a query expected to return at most one row of `table`.
pub(crate) fn query_one<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    table: &'static str,
    map: RowMapper<T>,
) -> Result<Option<T>> {
    rows::query_opt(conn, sql, params, (table, "reading a workflow record"), map)
}

/// Runs a query returning rows of `table`.
pub(crate) fn query_all<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    table: &'static str,
    map: RowMapper<T>,
) -> Result<Vec<T>> {
    rows::query_vec(conn, sql, params, (table, "listing workflow records"), map)
}

/// The spec with id `id`, any status.
fn spec_by_id(conn: &Connection, id: &str) -> Result<Option<WorkflowSpec>> {
    query_one(
        conn,
        "SELECT * FROM workflow_specs WHERE id = ?1",
        [id],
        "workflow_specs",
        rows::workflow_row,
    )
}

/// The newest active spec named `name`.
fn active_spec_by_name(conn: &Connection, name: &str) -> Result<Option<WorkflowSpec>> {
    query_one(
        conn,
        "SELECT * FROM workflow_specs WHERE name = ?1 AND status = 'active'
         ORDER BY updated_at DESC LIMIT 1",
        [name],
        "workflow_specs",
        rows::workflow_row,
    )
}

/// True when `e` is the partial unique index on active workflow names.
fn is_duplicate_active_name(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(f, msg) => {
            f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                && msg
                    .as_deref()
                    .is_some_and(|m| m.contains("workflow_specs.name"))
        }
        _ => false,
    }
}

impl Store {
    /// True when some linked workflow step process of `loop_run_id` is alive.
    pub(crate) fn has_live_step_processes(&self, loop_run_id: &RunId) -> Result<bool> {
        Ok(linked_step_processes(&self.conn, loop_run_id)?
            .into_iter()
            .any(|p| self.liveness.is_alive(p)))
    }

    /// Stores a validated workflow as active (SPEC §4.3 `createWorkflow`).
    ///
    /// `input` is expected to come from
    /// [`workflow_from_json`](loops_core::workflow_from_json), which validates
    /// and normalizes it. Fails with [`StoreError::DuplicateWorkflowName`]
    /// when an active workflow already has the name; nothing is written then.
    pub fn create_workflow(&self, input: &NewWorkflow, now: Timestamp) -> Result<WorkflowSpec> {
        let steps_json = serde_json::to_string(&input.steps)
            .map_err(|e| StoreError::Encode(format!("workflow steps: {e}")))?;
        let id = WorkflowId::from_bytes(random_id_bytes());
        let duplicate = || StoreError::DuplicateWorkflowName {
            name: input.name.clone(),
        };
        self.write_tx(|conn| {
            if active_spec_by_name(conn, &input.name)?.is_some() {
                return Err(duplicate());
            }
            crate::rows::exec(
                conn,
                "INSERT INTO workflow_specs (id, name, description, version, status, steps_json,
                        max_parallel, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'active', ?5, ?7, ?6, ?6)",
                params![
                    id.as_str(),
                    input.name,
                    input.description,
                    input.version,
                    steps_json,
                    ts(now),
                    input.max_parallel,
                ],
            )
            .map_err(|e| {
                if is_duplicate_active_name(&e) {
                    duplicate()
                } else {
                    StoreError::db("inserting a workflow")(e)
                }
            })?;
            spec_by_id(conn, id.as_str())?.ok_or_else(|| StoreError::NotFound {
                kind: "workflow",
                key: id.to_string(),
            })
        })
    }

    /// The workflow with this id, any status.
    pub fn get_workflow(&self, id: &WorkflowId) -> Result<Option<WorkflowSpec>> {
        spec_by_id(&self.conn, id.as_str())
    }

    /// Resolves `id_or_name` (SPEC §4.3 `requireWorkflow`): first as an id,
    /// whatever the status, then as the name of the newest **active**
    /// workflow. Archived workflows are found only by id.
    ///
    /// Fails with `workflow not found: <x>`.
    pub fn require_workflow(&self, id_or_name: &str) -> Result<WorkflowSpec> {
        if let Some(spec) = spec_by_id(&self.conn, id_or_name)? {
            return Ok(spec);
        }
        active_spec_by_name(&self.conn, id_or_name)?.ok_or_else(|| StoreError::NotFound {
            kind: "workflow",
            key: id_or_name.to_owned(),
        })
    }

    /// Lists workflows, newest change first (SPEC §4.3 `listWorkflows`).
    /// Without a status filter they are grouped by status first.
    pub fn list_workflows(&self, filter: &WorkflowFilter) -> Result<Vec<WorkflowSpec>> {
        let limit = filter.limit.unwrap_or(DEFAULT_WORKFLOW_LIST_LIMIT);
        match filter.status {
            Some(status) => query_all(
                &self.conn,
                "SELECT * FROM workflow_specs WHERE status = ?1 ORDER BY updated_at DESC LIMIT ?2",
                params![status.as_str(), limit],
                "workflow_specs",
                rows::workflow_row,
            ),
            None => query_all(
                &self.conn,
                "SELECT * FROM workflow_specs ORDER BY status, updated_at DESC LIMIT ?1",
                [limit],
                "workflow_specs",
                rows::workflow_row,
            ),
        }
    }

    /// Archives a workflow (SPEC §4.3 `archiveWorkflow`). Unguarded: an
    /// archived workflow stays archived, and loops that reference its id
    /// still run it. Fails with `workflow not found: <id>`.
    pub fn archive_workflow(&self, id: &WorkflowId, now: Timestamp) -> Result<WorkflowSpec> {
        crate::rows::exec(
            &self.conn,
            "UPDATE workflow_specs SET status = 'archived', updated_at = ?2 WHERE id = ?1",
            params![id.as_str(), ts(now)],
        )
        .map_err(StoreError::db("archiving a workflow"))?;
        self.get_workflow(id)?.ok_or_else(|| StoreError::NotFound {
            kind: "workflow",
            key: id.to_string(),
        })
    }

    /// The event log of a workflow run in ascending sequence, at most
    /// `limit` entries ([`DEFAULT_EVENT_LIST_LIMIT`] when unset).
    pub fn list_events(
        &self,
        run_id: &WorkflowRunId,
        limit: Option<u32>,
    ) -> Result<Vec<WorkflowEvent>> {
        query_all(
            &self.conn,
            "SELECT * FROM workflow_events WHERE workflow_run_id = ?1 ORDER BY sequence ASC LIMIT ?2",
            params![run_id.as_str(), limit.unwrap_or(DEFAULT_EVENT_LIST_LIMIT)],
            "workflow_events",
            rows::event_row,
        )
    }
}
