//! The SQLite side of [`crate::workflows`].

use loops_core::{
    EventId, NewWorkflow, RunId, Timestamp, WorkflowEvent, WorkflowId, WorkflowRunId, WorkflowSpec,
};
use rusqlite::{Connection, Params, Row, params};

use crate::backend::WorkflowOps;
use crate::error::{Result, StoreError};
use crate::random_id_bytes;
use crate::sqlite::Sqlite;
use crate::sqlite::rows::{self, ts};
use crate::sqlite::rows::{event_columns, workflow_columns};
use crate::workflows::{DEFAULT_EVENT_LIST_LIMIT, DEFAULT_WORKFLOW_LIST_LIMIT, WorkflowFilter};

/// The terminal workflow-run statuses as a SQL list (SPEC §0), for the
/// `status NOT IN` guards that keep a terminal run as it is. A test checks
/// it against [`WorkflowRunStatus::is_terminal`](loops_core::WorkflowRunStatus::is_terminal).
macro_rules! terminal_run_statuses {
    () => {
        "('succeeded', 'failed', 'timed_out', 'cancelled')"
    };
}
pub(crate) use terminal_run_statuses;

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
    crate::sqlite::rows::exec(conn,
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
        .prepare_cached(concat!(
            "SELECT wsr.pid, wsr.pid_start_ms FROM workflow_runs wr
             JOIN workflow_step_runs wsr ON wsr.workflow_run_id = wr.id
             WHERE wr.loop_run_id = ?1
               AND wr.status NOT IN ",
            terminal_run_statuses!(),
            " AND wsr.status = 'running'
                   AND wsr.pid IS NOT NULL"
        ))
        .map_err(StoreError::db("reading linked step processes"))?;
    let found = stmt
        .query_map([loop_run_id.as_str()], |row| rows::process_at(row, 0))
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
        concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflow_specs WHERE id = ?1"
        ),
        [id],
        "workflow_specs",
        rows::workflow_row,
    )
}

/// The newest active spec named `name`.
fn active_spec_by_name(conn: &Connection, name: &str) -> Result<Option<WorkflowSpec>> {
    query_one(
        conn,
        concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflow_specs WHERE name = ?1 AND status = 'active'
             ORDER BY updated_at DESC LIMIT 1"
        ),
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

impl WorkflowOps for Sqlite {
    fn create_workflow(&self, input: &NewWorkflow, now: Timestamp) -> Result<WorkflowSpec> {
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
            crate::sqlite::rows::exec(
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

    fn get_workflow(&self, id: &WorkflowId) -> Result<Option<WorkflowSpec>> {
        spec_by_id(&self.conn, id.as_str())
    }

    fn require_workflow(&self, id_or_name: &str) -> Result<WorkflowSpec> {
        if let Some(spec) = spec_by_id(&self.conn, id_or_name)? {
            return Ok(spec);
        }
        active_spec_by_name(&self.conn, id_or_name)?.ok_or_else(|| StoreError::NotFound {
            kind: "workflow",
            key: id_or_name.to_owned(),
        })
    }

    fn list_workflows(&self, filter: &WorkflowFilter) -> Result<Vec<WorkflowSpec>> {
        let limit = filter.limit.unwrap_or(DEFAULT_WORKFLOW_LIST_LIMIT);
        match filter.status {
            Some(status) => query_all(
                &self.conn,
                concat!(
                    "SELECT ",
                    workflow_columns!(),
                    " FROM workflow_specs WHERE status = ?1 ORDER BY updated_at DESC LIMIT ?2"
                ),
                params![status.as_str(), limit],
                "workflow_specs",
                rows::workflow_row,
            ),
            None => query_all(
                &self.conn,
                concat!(
                    "SELECT ",
                    workflow_columns!(),
                    " FROM workflow_specs ORDER BY status, updated_at DESC LIMIT ?1"
                ),
                [limit],
                "workflow_specs",
                rows::workflow_row,
            ),
        }
    }

    fn archive_workflow(&self, id: &WorkflowId, now: Timestamp) -> Result<WorkflowSpec> {
        crate::sqlite::rows::exec(
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

    fn lock_active_workflow(&self, name: &str) -> Result<Option<WorkflowSpec>> {
        // The caller's transaction took the write lock at BEGIN IMMEDIATE.
        active_spec_by_name(&self.conn, name)
    }

    fn list_events(
        &self,
        run_id: &WorkflowRunId,
        limit: Option<u32>,
    ) -> Result<Vec<WorkflowEvent>> {
        query_all(
            &self.conn,
            concat!(
                "SELECT ",
                event_columns!(),
                " FROM workflow_events WHERE workflow_run_id = ?1 ORDER BY sequence ASC LIMIT ?2"
            ),
            params![run_id.as_str(), limit.unwrap_or(DEFAULT_EVENT_LIST_LIMIT)],
            "workflow_events",
            rows::event_row,
        )
    }
}

impl Sqlite {
    /// True when some linked workflow step process of `loop_run_id` is alive.
    pub(crate) fn has_live_step_processes(&self, loop_run_id: &RunId) -> Result<bool> {
        Ok(linked_step_processes(&self.conn, loop_run_id)?
            .into_iter()
            .any(|p| self.liveness.is_alive(p)))
    }
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
