//! [`WorkflowOps`] written once for both backends, and the helpers the
//! workflow-run and step operations share: the run lock, the event log's
//! append, and the live step processes of a loop run.
//!
//! Event sequence numbers are taken inside the writing transaction. On
//! SQLite that transaction holds the write lock (`BEGIN IMMEDIATE`); on
//! PostgreSQL the workflow run's row is locked first ([`lock_run`]): every
//! writer of one run's events waits for the previous one to commit, then
//! reads the newest `MAX(sequence)` (READ COMMITTED takes a fresh snapshot
//! per statement), so two writers never collide on `UNIQUE(workflow_run_id,
//! sequence)` and the sequence has no gaps. Every write that touches a
//! workflow run and its steps locks the run's row first and its steps
//! after, in that order, so two writers of one run never wait on each
//! other in a cycle.

use loops_core::{
    EventId, NewWorkflow, ProcessRef, RunId, Timestamp, WorkflowEvent, WorkflowId, WorkflowRunId,
    WorkflowSpec,
};

use crate::backend::WorkflowOps;
use crate::columns::{self, event_columns, workflow_columns};
use crate::error::{Result, StoreError};
use crate::random_id_bytes;
use crate::sql::{self, Db, Dialect, Sql};
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

/// Reads whether workflow run `run_id` exists; on PostgreSQL its row stays
/// locked until the transaction ends (SQLite's write transaction already
/// holds the lock on the whole database).
pub(crate) fn find_locked_run(c: &mut dyn Sql, run_id: &WorkflowRunId) -> Result<bool> {
    let found = c.query_opt(
        c.dialect().pick(
            "SELECT id FROM workflow_runs WHERE id = ?1",
            "SELECT id FROM workflow_runs WHERE id = ?1 FOR UPDATE",
        ),
        &[run_id.as_str().into()],
        ("workflow_runs", "locking a workflow run"),
        |row| columns::text(row, &["id"], 0),
    )?;
    Ok(found.is_some())
}

/// Locks the row of workflow run `run_id` until the transaction ends
/// (PostgreSQL), so the writes that follow (a transition and its event)
/// are the only ones on this run. SQLite's write transaction holds the
/// write lock already, so there it reads nothing.
pub(crate) fn lock_run(c: &mut dyn Sql, run_id: &WorkflowRunId) -> Result<()> {
    if c.dialect() == Dialect::Postgres {
        find_locked_run(c, run_id)?;
    }
    Ok(())
}

/// Appends one event to a workflow run's log. Runs inside the caller's
/// write transaction, the run locked first ([`lock_run`], a no-op when the
/// caller holds it already), which makes `MAX(sequence) + 1` race-free.
pub(crate) fn append_event(
    c: &mut dyn Sql,
    run_id: &WorkflowRunId,
    event_type: &str,
    step_id: Option<&str>,
    payload: Option<&serde_json::Value>,
    now: Timestamp,
) -> Result<()> {
    let payload = payload
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::Encode(format!("event payload: {e}")))?;
    lock_run(c, run_id)?;
    c.execute(
        "INSERT INTO workflow_events (id, workflow_run_id, sequence, event_type, step_id,
                payload_json, created_at)
         VALUES (?1, ?2,
                 (SELECT COALESCE(MAX(sequence), 0) + 1 FROM workflow_events
                  WHERE workflow_run_id = ?2),
                 ?3, ?4, ?5, ?6)",
        &[
            EventId::from_bytes(random_id_bytes()).as_str().into(),
            run_id.as_str().into(),
            event_type.into(),
            step_id.into(),
            sql::json(payload.as_deref()),
            now.into(),
        ],
        "appending a workflow event",
    )?;
    Ok(())
}

/// The running steps with a recorded pid of the non-terminal workflow runs
/// linked to loop run `loop_run_id`, in step order (SPEC §4.2 "live step
/// processes"). The processes run on the host that claimed the loop run.
pub(crate) fn linked_step_processes(
    c: &mut dyn Sql,
    loop_run_id: &RunId,
) -> Result<Vec<ProcessRef>> {
    let found = c.query_vec(
        concat!(
            "SELECT wsr.pid, wsr.pid_start_ms FROM workflow_runs wr
             JOIN workflow_step_runs wsr ON wsr.workflow_run_id = wr.id
             WHERE wr.loop_run_id = ?1
               AND wr.status NOT IN ",
            terminal_run_statuses!(),
            " AND wsr.status = 'running' AND wsr.pid IS NOT NULL
             ORDER BY wsr.sequence"
        ),
        &[loop_run_id.as_str().into()],
        ("workflow_step_runs", "reading linked step processes"),
        |row| columns::process_at(row, 0),
    )?;
    Ok(found.into_iter().flatten().collect())
}

/// The spec with id `id`, any status.
fn spec_by_id(c: &mut dyn Sql, id: &str) -> Result<Option<WorkflowSpec>> {
    c.query_opt(
        concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflow_specs WHERE id = ?1"
        ),
        &[id.into()],
        ("workflow_specs", "reading a workflow"),
        columns::workflow_row,
    )
}

/// The newest active spec named `name`.
fn active_spec_by_name(c: &mut dyn Sql, name: &str) -> Result<Option<WorkflowSpec>> {
    c.query_opt(
        concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflow_specs WHERE name = ?1 AND status = 'active'
             ORDER BY updated_at DESC LIMIT 1"
        ),
        &[name.into()],
        ("workflow_specs", "reading a workflow"),
        columns::workflow_row,
    )
}

fn workflow_not_found(key: &str) -> StoreError {
    StoreError::NotFound {
        kind: "workflow",
        key: key.to_owned(),
    }
}

/// The specs of one status, newest first; PostgreSQL breaks ties by id.
const LIST_BY_STATUS: (&str, &str) = (
    concat!(
        "SELECT ",
        workflow_columns!(),
        " FROM workflow_specs WHERE status = ?1 ORDER BY updated_at DESC LIMIT ?2"
    ),
    concat!(
        "SELECT ",
        workflow_columns!(),
        " FROM workflow_specs WHERE status = ?1 ORDER BY updated_at DESC, id DESC LIMIT ?2"
    ),
);

/// Every spec by status, newest first; PostgreSQL breaks ties by id.
const LIST_ALL: (&str, &str) = (
    concat!(
        "SELECT ",
        workflow_columns!(),
        " FROM workflow_specs ORDER BY status, updated_at DESC LIMIT ?1"
    ),
    concat!(
        "SELECT ",
        workflow_columns!(),
        " FROM workflow_specs ORDER BY status, updated_at DESC, id DESC LIMIT ?1"
    ),
);

impl<D: Db> WorkflowOps for D {
    fn create_workflow(&self, input: &NewWorkflow, now: Timestamp) -> Result<WorkflowSpec> {
        let steps_json = serde_json::to_string(&input.steps)
            .map_err(|e| StoreError::Encode(format!("workflow steps: {e}")))?;
        let id = WorkflowId::from_bytes(random_id_bytes());
        let duplicate = || StoreError::DuplicateWorkflowName {
            name: input.name.clone(),
        };
        self.write(|c| {
            if active_spec_by_name(c, &input.name)?.is_some() {
                return Err(duplicate());
            }
            // A creator of the same name committing since the check (only
            // on PostgreSQL: SQLite's transaction holds the write lock)
            // loses to the partial unique index on active names; ON
            // CONFLICT reports it as no row rather than aborting the
            // transaction.
            let created = c.query_opt(
                concat!(
                    "INSERT INTO workflow_specs (id, name, description, version, status, steps_json,
                            max_parallel, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, 'active', ?5, ?6, ?7, ?7)
                     ON CONFLICT DO NOTHING
                     RETURNING ",
                    workflow_columns!()
                ),
                &[
                    id.as_str().into(),
                    input.name.as_str().into(),
                    input.description.as_deref().into(),
                    input.version.into(),
                    sql::json(steps_json.as_str()),
                    input.max_parallel.into(),
                    now.into(),
                ],
                ("workflow_specs", "inserting a workflow"),
                columns::workflow_row,
            )?;
            created.ok_or_else(duplicate)
        })
    }

    fn get_workflow(&self, id: &WorkflowId) -> Result<Option<WorkflowSpec>> {
        self.read(|c| spec_by_id(c, id.as_str()))
    }

    fn require_workflow(&self, id_or_name: &str) -> Result<WorkflowSpec> {
        self.read(|c| {
            if let Some(spec) = spec_by_id(c, id_or_name)? {
                return Ok(spec);
            }
            active_spec_by_name(c, id_or_name)?.ok_or_else(|| workflow_not_found(id_or_name))
        })
    }

    fn list_workflows(&self, filter: &WorkflowFilter) -> Result<Vec<WorkflowSpec>> {
        let limit = filter.limit.unwrap_or(DEFAULT_WORKFLOW_LIST_LIMIT);
        let what = ("workflow_specs", "listing workflows");
        self.read(|c| {
            let d = c.dialect();
            match filter.status {
                Some(status) => c.query_vec(
                    d.pick(LIST_BY_STATUS.0, LIST_BY_STATUS.1),
                    &[status.as_str().into(), limit.into()],
                    what,
                    columns::workflow_row,
                ),
                None => c.query_vec(
                    d.pick(LIST_ALL.0, LIST_ALL.1),
                    &[limit.into()],
                    what,
                    columns::workflow_row,
                ),
            }
        })
    }

    fn archive_workflow(&self, id: &WorkflowId, now: Timestamp) -> Result<WorkflowSpec> {
        let archived = self.read(|c| {
            c.query_opt(
                concat!(
                    "UPDATE workflow_specs SET status = 'archived', updated_at = ?2 WHERE id = ?1
                     RETURNING ",
                    workflow_columns!()
                ),
                &[id.as_str().into(), now.into()],
                ("workflow_specs", "archiving a workflow"),
                columns::workflow_row,
            )
        })?;
        archived.ok_or_else(|| workflow_not_found(id.as_str()))
    }

    fn lock_active_workflow(&self, name: &str) -> Result<Option<WorkflowSpec>> {
        // SQLite: the caller's transaction took the write lock at BEGIN
        // IMMEDIATE. PostgreSQL: the row stays locked until it ends.
        self.read(|c| {
            c.query_opt(
                c.dialect().pick(
                    concat!(
                        "SELECT ",
                        workflow_columns!(),
                        " FROM workflow_specs WHERE name = ?1 AND status = 'active'
                         ORDER BY updated_at DESC LIMIT 1"
                    ),
                    concat!(
                        "SELECT ",
                        workflow_columns!(),
                        " FROM workflow_specs WHERE name = ?1 AND status = 'active'
                         ORDER BY updated_at DESC LIMIT 1 FOR UPDATE"
                    ),
                ),
                &[name.into()],
                ("workflow_specs", "locking a workflow"),
                columns::workflow_row,
            )
        })
    }

    fn list_events(
        &self,
        run_id: &WorkflowRunId,
        limit: Option<u32>,
    ) -> Result<Vec<WorkflowEvent>> {
        self.read(|c| {
            c.query_vec(
                concat!(
                    "SELECT ",
                    event_columns!(),
                    " FROM workflow_events WHERE workflow_run_id = ?1
                     ORDER BY sequence ASC LIMIT ?2"
                ),
                &[
                    run_id.as_str().into(),
                    limit.unwrap_or(DEFAULT_EVENT_LIST_LIMIT).into(),
                ],
                ("workflow_events", "listing workflow events"),
                columns::event_row,
            )
        })
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
