//! The PostgreSQL side of [`crate::workflows`]: workflow specs and the
//! event log, plus the helpers the workflow-run and step modules share.
//!
//! Event sequence numbers are taken inside the writing transaction, after
//! the workflow run's row is locked ([`lock_run`]): every writer of one
//! run's events waits for the previous one to commit, then reads the
//! newest `MAX(sequence)` (READ COMMITTED takes a fresh snapshot per
//! statement), so two writers never collide on `UNIQUE(workflow_run_id,
//! sequence)` and the sequence has no gaps.
//!
//! Every write that touches a workflow run and its steps locks the run's
//! row first and its steps after, in that order, so two writers of one
//! run never wait on each other in a cycle.

use loops_core::{
    EventId, NewWorkflow, ProcessRef, RunId, Timestamp, WorkflowEvent, WorkflowId, WorkflowRunId,
    WorkflowSpec,
};

use crate::backend::WorkflowOps;
use crate::error::{Result, StoreError};
use crate::postgres::rows::{self, Json, ts};
use crate::postgres::{Conn, Postgres};
use crate::random_id_bytes;
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

/// Locks the row of workflow run `run_id` until the transaction ends, so
/// the writes that follow (a transition and its event) are the only ones
/// on this run. False when the run does not exist.
pub(crate) fn lock_run(c: &mut Conn<'_>, run_id: &WorkflowRunId) -> Result<bool> {
    let found = c.query(
        "SELECT id FROM workflow_runs WHERE id = $1 FOR UPDATE",
        &[&run_id.as_str()],
        "locking a workflow run",
    )?;
    Ok(!found.is_empty())
}

/// Appends one event to a workflow run's log. Runs inside the caller's
/// write transaction: the run's row is locked first (a no-op when the
/// caller holds it already), which makes `MAX(sequence) + 1` race-free.
pub(crate) fn append_event(
    c: &mut Conn<'_>,
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
         VALUES ($1, $2,
                 (SELECT COALESCE(MAX(sequence), 0) + 1 FROM workflow_events
                  WHERE workflow_run_id = $2),
                 $3, $4, $5, $6)",
        &[
            &EventId::from_bytes(random_id_bytes()).as_str(),
            &run_id.as_str(),
            &event_type,
            &step_id,
            &payload.as_deref().map(Json),
            &ts(now),
        ],
        "appending a workflow event",
    )?;
    Ok(())
}

/// The running steps with a recorded pid of the non-terminal workflow runs
/// linked to loop run `loop_run_id` (SPEC §4.2 "live step processes").
/// The processes run on the host that claimed the loop run.
pub(crate) fn linked_step_processes(
    c: &mut Conn<'_>,
    loop_run_id: &RunId,
) -> Result<Vec<ProcessRef>> {
    let context = "reading linked step processes";
    let found = c.query(
        concat!(
            "SELECT wsr.pid, wsr.pid_start_ms FROM workflow_runs wr
             JOIN workflow_step_runs wsr ON wsr.workflow_run_id = wr.id
             WHERE wr.loop_run_id = $1
               AND wr.status NOT IN ",
            terminal_run_statuses!(),
            " AND wsr.status = 'running' AND wsr.pid IS NOT NULL
             ORDER BY wsr.sequence"
        ),
        &[&loop_run_id.as_str()],
        context,
    )?;
    let mut processes = Vec::with_capacity(found.len());
    for row in &found {
        if let Some(p) = process_at(row, 0, ("workflow_step_runs", context))? {
            processes.push(p);
        }
    }
    Ok(processes)
}

/// The process recorded in columns `first` (`pid`) and `first + 1`
/// (`pid_start_ms`) of `row`.
pub(crate) fn process_at(
    row: &postgres::Row,
    first: usize,
    (table, context): (&'static str, &'static str),
) -> Result<Option<ProcessRef>> {
    let pid: Option<i64> = row.try_get(first).map_err(StoreError::db(context))?;
    let start: Option<i64> = row.try_get(first + 1).map_err(StoreError::db(context))?;
    pid.map(|pid| {
        u32::try_from(pid)
            .map(|pid| ProcessRef { pid, start })
            .map_err(|_| StoreError::Corrupt {
                table,
                id: String::new(),
                reason: format!("column pid: {pid} is not a process id"),
            })
    })
    .transpose()
}

/// The spec with id `id`, any status.
fn spec_by_id(c: &mut Conn<'_>, id: &str) -> Result<Option<WorkflowSpec>> {
    c.query_opt(
        concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflow_specs WHERE id = $1"
        ),
        &[&id],
        ("workflow_specs", "reading a workflow"),
        rows::workflow_row,
    )
}

/// The newest active spec named `name`.
fn active_spec_by_name(c: &mut Conn<'_>, name: &str) -> Result<Option<WorkflowSpec>> {
    c.query_opt(
        concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflow_specs WHERE name = $1 AND status = 'active'
             ORDER BY updated_at DESC LIMIT 1"
        ),
        &[&name],
        ("workflow_specs", "reading a workflow"),
        rows::workflow_row,
    )
}

fn workflow_not_found(key: &str) -> StoreError {
    StoreError::NotFound {
        kind: "workflow",
        key: key.to_owned(),
    }
}

impl WorkflowOps for Postgres {
    fn create_workflow(&self, input: &NewWorkflow, now: Timestamp) -> Result<WorkflowSpec> {
        let steps_json = serde_json::to_string(&input.steps)
            .map_err(|e| StoreError::Encode(format!("workflow steps: {e}")))?;
        let id = WorkflowId::from_bytes(random_id_bytes());
        let duplicate = || StoreError::DuplicateWorkflowName {
            name: input.name.clone(),
        };
        self.write_tx(|c| {
            if active_spec_by_name(c, &input.name)?.is_some() {
                return Err(duplicate());
            }
            // A creator of the same name committing since the check loses
            // to the partial unique index on active names; ON CONFLICT
            // reports it as no row rather than aborting the transaction.
            let created = c.query_opt(
                concat!(
                    "INSERT INTO workflow_specs (id, name, description, version, status, steps_json,
                            max_parallel, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, $7)
                     ON CONFLICT DO NOTHING
                     RETURNING ",
                    workflow_columns!()
                ),
                &[
                    &id.as_str(),
                    &input.name,
                    &input.description,
                    &i64::from(input.version),
                    &Json(&steps_json),
                    &input.max_parallel.map(i64::from),
                    &ts(now),
                ],
                ("workflow_specs", "inserting a workflow"),
                rows::workflow_row,
            )?;
            created.ok_or_else(duplicate)
        })
    }

    fn get_workflow(&self, id: &WorkflowId) -> Result<Option<WorkflowSpec>> {
        self.with(|c| spec_by_id(c, id.as_str()))
    }

    fn require_workflow(&self, id_or_name: &str) -> Result<WorkflowSpec> {
        self.with(|c| {
            if let Some(spec) = spec_by_id(c, id_or_name)? {
                return Ok(spec);
            }
            active_spec_by_name(c, id_or_name)?.ok_or_else(|| workflow_not_found(id_or_name))
        })
    }

    fn list_workflows(&self, filter: &WorkflowFilter) -> Result<Vec<WorkflowSpec>> {
        let limit = i64::from(filter.limit.unwrap_or(DEFAULT_WORKFLOW_LIST_LIMIT));
        let context = ("workflow_specs", "listing workflows");
        self.with(|c| match filter.status {
            Some(status) => c.query_vec(
                concat!(
                    "SELECT ",
                    workflow_columns!(),
                    " FROM workflow_specs WHERE status = $1
                     ORDER BY updated_at DESC, id DESC LIMIT $2"
                ),
                &[&status.as_str(), &limit],
                context,
                rows::workflow_row,
            ),
            None => c.query_vec(
                concat!(
                    "SELECT ",
                    workflow_columns!(),
                    " FROM workflow_specs ORDER BY status, updated_at DESC, id DESC LIMIT $1"
                ),
                &[&limit],
                context,
                rows::workflow_row,
            ),
        })
    }

    fn archive_workflow(&self, id: &WorkflowId, now: Timestamp) -> Result<WorkflowSpec> {
        let archived = self.with(|c| {
            c.query_opt(
                concat!(
                    "UPDATE workflow_specs SET status = 'archived', updated_at = $2 WHERE id = $1
                     RETURNING ",
                    workflow_columns!()
                ),
                &[&id.as_str(), &ts(now)],
                ("workflow_specs", "archiving a workflow"),
                rows::workflow_row,
            )
        })?;
        archived.ok_or_else(|| workflow_not_found(id.as_str()))
    }

    fn lock_active_workflow(&self, name: &str) -> Result<Option<WorkflowSpec>> {
        self.with(|c| {
            c.query_opt(
                concat!(
                    "SELECT ",
                    workflow_columns!(),
                    " FROM workflow_specs WHERE name = $1 AND status = 'active'
                     ORDER BY updated_at DESC LIMIT 1 FOR UPDATE"
                ),
                &[&name],
                ("workflow_specs", "locking a workflow"),
                rows::workflow_row,
            )
        })
    }

    fn list_events(
        &self,
        run_id: &WorkflowRunId,
        limit: Option<u32>,
    ) -> Result<Vec<WorkflowEvent>> {
        let limit = i64::from(limit.unwrap_or(DEFAULT_EVENT_LIST_LIMIT));
        self.with(|c| {
            c.query_vec(
                concat!(
                    "SELECT ",
                    event_columns!(),
                    " FROM workflow_events WHERE workflow_run_id = $1
                     ORDER BY sequence ASC LIMIT $2"
                ),
                &[&run_id.as_str(), &limit],
                ("workflow_events", "listing workflow events"),
                rows::event_row,
            )
        })
    }
}

impl Postgres {
    /// True when some linked workflow step process of `loop_run_id` is
    /// alive. The probe answers for this host's processes only: ask it
    /// about a loop run claimed on this host.
    pub(crate) fn has_live_step_processes(
        &self,
        c: &mut Conn<'_>,
        loop_run_id: &RunId,
    ) -> Result<bool> {
        Ok(linked_step_processes(c, loop_run_id)?
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
