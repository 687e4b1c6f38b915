//! [`WorkflowRunOps`] written once for both backends, and the closing of a
//! loop run's linked workflow runs that the run operations share.
//!
//! Every transition runs in the backend's write transaction, locks the
//! run's row before its steps on PostgreSQL (the `UPDATE` of
//! `workflow_runs`, or [`lock_run`]), and appends its event in the same
//! transaction. Two creators with one idempotency key meet at the partial
//! unique index `idx_workflow_runs_idempotency`: the second insert does
//! nothing (`ON CONFLICT`, which on PostgreSQL waits for the first to
//! commit; SQLite's write lock orders them) and reads the first one's run.

use loops_core::{
    LoopId, ProcessRef, RunId, StepRunId, Timestamp, WorkflowId, WorkflowRun, WorkflowRunId,
    WorkflowRunStatus,
};
use serde_json::{Map, Value, json};

use crate::backend::WorkflowRunOps;
use crate::columns::{self, workflow_run_columns};
use crate::error::{Result, StoreError};
use crate::random_id_bytes;
use crate::sql::{Db, Dialect, Fields, Sql};
use crate::steps::ops::step_by_id;
use crate::workflow_runs::{
    DEFAULT_WORKFLOW_RUN_LIST_LIMIT, NewWorkflowRun, RecoveredWorkflowRun, WorkflowRunFilter,
    WorkflowRunPatch,
};
use crate::workflows::ops::{append_event, find_locked_run, terminal_run_statuses};

const TABLE: &str = "workflow_runs";

/// The run with id `id`.
pub(crate) fn run_by_id(c: &mut dyn Sql, id: &WorkflowRunId) -> Result<Option<WorkflowRun>> {
    c.query_opt(
        concat!(
            "SELECT ",
            workflow_run_columns!(),
            " FROM workflow_runs WHERE id = ?1"
        ),
        &[id.as_str().into()],
        (TABLE, "reading a workflow run"),
        columns::workflow_run_row,
    )
}

/// The run with id `id`, or `workflow run not found: <id>`.
pub(crate) fn require_run(c: &mut dyn Sql, id: &WorkflowRunId) -> Result<WorkflowRun> {
    run_by_id(c, id)?.ok_or_else(|| run_not_found(id))
}

fn run_not_found(id: &WorkflowRunId) -> StoreError {
    StoreError::NotFound {
        kind: "workflow run",
        key: id.to_string(),
    }
}

/// The run of `workflow_id` with idempotency key `key`.
fn run_by_key(c: &mut dyn Sql, workflow_id: &WorkflowId, key: &str) -> Result<Option<WorkflowRun>> {
    c.query_opt(
        concat!(
            "SELECT ",
            workflow_run_columns!(),
            " FROM workflow_runs WHERE workflow_id = ?1 AND idempotency_key = ?2"
        ),
        &[workflow_id.as_str().into(), key.into()],
        (TABLE, "reading a workflow run by its key"),
        columns::workflow_run_row,
    )
}

/// An `id` column read as a workflow run id.
fn run_id_row(row: &dyn Fields) -> crate::sql::Col<WorkflowRunId> {
    columns::parsed(row, &["id"], 0)
}

/// Inserts the run, its step rows and its `created` event, inside the
/// caller's write transaction. `None` when another run already has the
/// idempotency key: nothing was written.
fn insert_run(
    c: &mut dyn Sql,
    input: &NewWorkflowRun<'_>,
    now: Timestamp,
) -> Result<Option<WorkflowRunId>> {
    let spec = input.workflow;
    let id = WorkflowRunId::from_bytes(random_id_bytes());
    let inserted = c.query_opt(
        "INSERT INTO workflow_runs (id, workflow_id, workflow_name, loop_id, loop_run_id,
                scheduled_for, idempotency_key, status, started_at, finished_at, duration_ms, error,
                created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, NULL, NULL, NULL, ?8, ?8)
         ON CONFLICT DO NOTHING
         RETURNING id",
        &[
            id.as_str().into(),
            spec.id.as_str().into(),
            spec.name.as_str().into(),
            input.loop_id.as_ref().map(LoopId::as_str).into(),
            input.loop_run_id.as_ref().map(RunId::as_str).into(),
            input.scheduled_for.into(),
            input.idempotency_key.as_deref().into(),
            now.into(),
        ],
        (TABLE, "inserting a workflow run"),
        run_id_row,
    )?;
    if inserted.is_none() {
        return Ok(None);
    }
    for (sequence, step) in spec.steps.iter().enumerate() {
        let account = step.effective_account();
        c.execute(
            "INSERT INTO workflow_step_runs (id, workflow_run_id, step_id, sequence, status,
                    started_at, finished_at, exit_code, pid, duration_ms, stdout, stderr, error,
                    account_profile, account_tool, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'pending', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                     ?5, ?6, ?7, ?7)",
            &[
                StepRunId::from_bytes(random_id_bytes()).as_str().into(),
                id.as_str().into(),
                step.id.as_str().into(),
                i64::try_from(sequence).unwrap_or(i64::MAX).into(),
                account.map(|a| a.profile.as_str()).into(),
                account.and_then(|a| a.tool.as_deref()).into(),
                now.into(),
            ],
            "inserting a workflow step run",
        )?;
    }
    let mut payload = Map::new();
    payload.insert("workflowId".into(), json!(spec.id));
    payload.insert("workflowName".into(), json!(spec.name));
    payload.insert("stepCount".into(), json!(spec.steps.len()));
    if let Some(loop_id) = &input.loop_id {
        payload.insert("loopId".into(), json!(loop_id));
    }
    if let Some(loop_run_id) = &input.loop_run_id {
        payload.insert("loopRunId".into(), json!(loop_run_id));
    }
    append_event(c, &id, "created", None, Some(&Value::Object(payload)), now)?;
    Ok(Some(id))
}

/// `{error?}`: the payload of run-finalize events.
fn error_payload(error: Option<&str>) -> Value {
    let mut payload = Map::new();
    if let Some(error) = error {
        payload.insert("error".into(), json!(error));
    }
    Value::Object(payload)
}

/// How [`stop_workflow_run`] ends a run: cancelled, when someone asked for
/// it, or failed (a lost lease).
#[derive(Debug, Clone, Copy)]
enum StopAs {
    Cancelled,
    Failed,
}

/// The runs of one workflow, of one loop run, or all, newest first;
/// PostgreSQL breaks ties by id.
macro_rules! list_runs_sql {
    ($where:literal, $limit:literal) => {
        (
            concat!(
                "SELECT ",
                workflow_run_columns!(),
                " FROM workflow_runs",
                $where,
                " ORDER BY created_at DESC LIMIT ",
                $limit
            ),
            concat!(
                "SELECT ",
                workflow_run_columns!(),
                " FROM workflow_runs",
                $where,
                " ORDER BY created_at DESC, id DESC LIMIT ",
                $limit
            ),
        )
    };
}

const LIST_OF_WORKFLOW: (&str, &str) = list_runs_sql!(" WHERE workflow_id = ?1", "?2");
const LIST_OF_LOOP_RUN: (&str, &str) = list_runs_sql!(" WHERE loop_run_id = ?1", "?2");
const LIST_ALL: (&str, &str) = list_runs_sql!("", "?1");

impl<D: Db> WorkflowRunOps for D {
    fn create_workflow_run(
        &self,
        input: &NewWorkflowRun<'_>,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        let workflow_id = &input.workflow.id;
        if let Some(key) = &input.idempotency_key
            && let Some(existing) = self.read(|c| run_by_key(c, workflow_id, key))?
        {
            return Ok(existing);
        }
        self.write(|c| match insert_run(c, input, now)? {
            Some(id) => require_run(c, &id),
            // Another creator inserted a run with the key since the check.
            None => {
                let key = input.idempotency_key.as_deref().unwrap_or_default();
                run_by_key(c, workflow_id, key)?.ok_or_else(|| StoreError::Vanished {
                    kind: "workflow run",
                    op: "create",
                    id: format!("{workflow_id} key {key}"),
                })
            }
        })
    }

    fn get_workflow_run(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRun>> {
        self.read(|c| run_by_id(c, id))
    }

    fn require_workflow_run(&self, id: &WorkflowRunId) -> Result<WorkflowRun> {
        self.read(|c| require_run(c, id))
    }

    fn list_workflow_runs(&self, filter: &WorkflowRunFilter) -> Result<Vec<WorkflowRun>> {
        let limit = filter.limit.unwrap_or(DEFAULT_WORKFLOW_RUN_LIST_LIMIT);
        let what = (TABLE, "listing workflow runs");
        let map = columns::workflow_run_row;
        self.read(|c| {
            let d = c.dialect();
            match (&filter.workflow_id, &filter.loop_run_id) {
                (Some(id), _) => c.query_vec(
                    d.pick(LIST_OF_WORKFLOW.0, LIST_OF_WORKFLOW.1),
                    &[id.as_str().into(), limit.into()],
                    what,
                    map,
                ),
                (None, Some(id)) => c.query_vec(
                    d.pick(LIST_OF_LOOP_RUN.0, LIST_OF_LOOP_RUN.1),
                    &[id.as_str().into(), limit.into()],
                    what,
                    map,
                ),
                (None, None) => {
                    c.query_vec(d.pick(LIST_ALL.0, LIST_ALL.1), &[limit.into()], what, map)
                }
            }
        })
    }

    fn workflow_run_status(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRunStatus>> {
        self.read(|c| {
            c.query_opt(
                "SELECT id, status FROM workflow_runs WHERE id = ?1",
                &[id.as_str().into()],
                (TABLE, "reading a workflow run's status"),
                |row| columns::parsed(row, &["id", "status"], 1),
            )
        })
    }

    fn finalize_workflow_run(
        &self,
        id: &WorkflowRunId,
        status: WorkflowRunStatus,
        patch: &WorkflowRunPatch,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        if !status.is_terminal() {
            return Err(StoreError::InvalidTransition {
                action: "finalize a workflow run",
                status: status.to_string(),
            });
        }
        let finished = patch.finished_at.unwrap_or(now);
        self.write(|c| {
            let changed = c.execute(
                concat!(
                    "UPDATE workflow_runs
                     SET status = ?2, finished_at = ?3, duration_ms = ?4, error = ?5,
                         updated_at = ?3
                     WHERE id = ?1 AND status NOT IN ",
                    terminal_run_statuses!()
                ),
                &[
                    id.as_str().into(),
                    status.as_str().into(),
                    finished.into(),
                    patch.duration_ms.into(),
                    patch.error.as_deref().into(),
                ],
                "finalizing a workflow run",
            )?;
            if changed == 1 {
                let payload = error_payload(patch.error.as_deref());
                append_event(c, id, status.as_str(), None, Some(&payload), now)?;
            }
            require_run(c, id)
        })
    }

    fn cancel_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.write(|c| stop_workflow_run(c, id, StopAs::Cancelled, reason, now))
    }

    fn fail_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.write(|c| stop_workflow_run(c, id, StopAs::Failed, reason, now))
    }

    fn recover_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<RecoveredWorkflowRun> {
        self.write(|c| recover_in_tx(self, c, id, reason, now))
    }
}

/// Ends run `id` as `stop_as` with `reason`, cancelling its open steps, in
/// the caller's write transaction; a terminal run stays as it is.
fn stop_workflow_run(
    c: &mut dyn Sql,
    id: &WorkflowRunId,
    stop_as: StopAs,
    reason: &str,
    now: Timestamp,
) -> Result<WorkflowRun> {
    let status = match stop_as {
        StopAs::Cancelled => "cancelled",
        StopAs::Failed => "failed",
    };
    require_run(c, id)?;
    let changed = c.execute(
        concat!(
            "UPDATE workflow_runs
             SET status = ?4, finished_at = ?2, error = ?3, updated_at = ?2
             WHERE id = ?1 AND status NOT IN ",
            terminal_run_statuses!()
        ),
        &[id.as_str().into(), now.into(), reason.into(), status.into()],
        "stopping a workflow run",
    )?;
    if changed == 1 {
        c.execute(
            "UPDATE workflow_step_runs
             SET status = 'cancelled', finished_at = ?2, pid = NULL, pid_start_ms = NULL,
                 error = ?3, updated_at = ?2
             WHERE workflow_run_id = ?1 AND status IN ('pending', 'running')",
            &[id.as_str().into(), now.into(), reason.into()],
            "cancelling workflow steps",
        )?;
        let payload = match stop_as {
            StopAs::Failed => error_payload(Some(reason)),
            StopAs::Cancelled => json!({ "reason": reason }),
        };
        append_event(c, id, status, None, Some(&payload), now)?;
    }
    require_run(c, id)
}

/// A running step's id and recorded process.
fn running_step_row(row: &dyn Fields) -> crate::sql::Col<(String, Option<ProcessRef>)> {
    Ok((
        columns::text(row, &["step_id"], 0)?,
        columns::process_at(row, 1)?,
    ))
}

/// [`WorkflowRunOps::recover_workflow_run`] inside its write transaction:
/// the liveness check and the reset see the same steps, since every step
/// transition locks the run first (PostgreSQL) or waits for the write lock
/// (SQLite).
fn recover_in_tx<D: Db>(
    db: &D,
    c: &mut dyn Sql,
    id: &WorkflowRunId,
    reason: &str,
    now: Timestamp,
) -> Result<RecoveredWorkflowRun> {
    if !find_locked_run(c, id)? {
        return Err(run_not_found(id));
    }
    let running = c.query_vec(
        "SELECT step_id, pid, pid_start_ms FROM workflow_step_runs
         WHERE workflow_run_id = ?1 AND status = 'running' ORDER BY sequence",
        &[id.as_str().into()],
        ("workflow_step_runs", "reading running workflow steps"),
        running_step_row,
    )?;
    let mut alive: Vec<String> = running
        .iter()
        .filter_map(|(step_id, process)| {
            process
                .filter(|p| db.liveness().is_alive(*p))
                .map(|p| format!("{step_id} pid={}", p.pid))
        })
        .collect();
    if alive.is_empty()
        && !running.is_empty()
        && let Some(holder) = other_host_holder(db, c, id, now)?
    {
        // A runner of another host holds the loop run, its lease live: the
        // probe cannot see that host's processes, and the runner fails the
        // workflow run itself if it loses the loop run.
        alive = running
            .iter()
            .map(|(step_id, process)| match process {
                Some(p) => format!("{step_id} pid={} on {holder}", p.pid),
                None => format!("{step_id} on {holder}"),
            })
            .collect();
    }
    if !alive.is_empty() {
        return Err(StoreError::StepsAlive {
            steps: alive.join(", "),
        });
    }
    if running.is_empty() {
        return Ok(RecoveredWorkflowRun {
            run: require_run(c, id)?,
            recovered_steps: Vec::new(),
        });
    }
    c.execute(
        "UPDATE workflow_step_runs
         SET status = 'pending', started_at = NULL, finished_at = NULL, exit_code = NULL,
             pid = NULL, pid_start_ms = NULL, duration_ms = NULL, stdout = NULL,
             stderr = NULL, error = ?2, updated_at = ?3
         WHERE workflow_run_id = ?1 AND status = 'running'",
        &[id.as_str().into(), reason.into(), now.into()],
        "recovering workflow steps",
    )?;
    let step_ids: Vec<&str> = running.iter().map(|(s, _)| s.as_str()).collect();
    append_event(
        c,
        id,
        "recovered",
        None,
        Some(&json!({ "reason": reason, "recoveredSteps": step_ids })),
        now,
    )?;
    let mut recovered_steps = Vec::with_capacity(step_ids.len());
    for step_id in &step_ids {
        recovered_steps.extend(step_by_id(c, id, step_id)?);
    }
    Ok(RecoveredWorkflowRun {
        run: require_run(c, id)?,
        recovered_steps,
    })
}

/// The runner id holding the running loop run that workflow run `id` is
/// linked to, when a runner that is not of this host claimed it and its
/// lease has not expired at `now` (PostgreSQL, where daemons of several
/// hosts share the database; a SQLite file has no other host's runners to
/// ask about). Where a run was claimed is `takeover::claim_host`: the host
/// its runner id names, else the one its claim recorded.
fn other_host_holder<D: Db>(
    db: &D,
    c: &mut dyn Sql,
    id: &WorkflowRunId,
    now: Timestamp,
) -> Result<Option<String>> {
    let (Dialect::Postgres, Some(host)) = (c.dialect(), db.host()) else {
        return Ok(None);
    };
    let prefix = format!("{host}:");
    c.query_opt(
        "SELECT r.claimed_by FROM workflow_runs w JOIN loop_runs r ON r.id = w.loop_run_id
         WHERE w.id = ?1 AND r.status = 'running' AND r.claimed_by IS NOT NULL
           AND r.lease_expires_at > ?3
           AND NOT COALESCE(CASE WHEN r.claimed_by LIKE '%:%:%'
                                 THEN left(r.claimed_by, length(?2)) = ?2
                                 ELSE r.claimed_host = ?4 END, false)",
        &[
            id.as_str().into(),
            prefix.as_str().into(),
            now.into(),
            host.into(),
        ],
        ("loop_runs", "reading the loop run of a workflow run"),
        |row| columns::text(row, &["claimed_by"], 0),
    )
}

/// How [`close_linked_workflow_runs`] ends the open workflow runs of a loop
/// run: the statuses it writes, the reason, and the event it appends.
pub(crate) struct LinkedClose<'a> {
    /// The terminal status the workflow runs get.
    pub(crate) run_status: &'static str,
    /// The status their pending and running steps get.
    pub(crate) step_status: &'static str,
    /// Recorded as the error of the runs and steps.
    pub(crate) reason: &'a str,
    /// The event appended to each closed run (its type is `run_status`).
    pub(crate) payload: Value,
    /// What the store was doing, for error messages.
    pub(crate) context: &'static str,
}

/// Ends the non-terminal workflow runs linked to `loop_run_id`, closes
/// their open steps (no step events, as in the original), and appends one
/// event to each run, inside the caller's write transaction. Lease
/// recovery fails them (SPEC §4.3); a daemon shutdown cancels them.
/// Returns the ids of the runs it closed.
pub(crate) fn close_linked_workflow_runs(
    c: &mut dyn Sql,
    loop_run_id: &RunId,
    close: &LinkedClose<'_>,
    now: Timestamp,
) -> Result<Vec<WorkflowRunId>> {
    let closed = c.query_vec(
        concat!(
            "UPDATE workflow_runs SET status = ?4, finished_at = ?2, error = ?3, updated_at = ?2
             WHERE loop_run_id = ?1 AND status NOT IN ",
            terminal_run_statuses!(),
            " RETURNING id"
        ),
        &[
            loop_run_id.as_str().into(),
            now.into(),
            close.reason.into(),
            close.run_status.into(),
        ],
        (TABLE, close.context),
        run_id_row,
    )?;
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
        append_event(c, wr, close.run_status, None, Some(&close.payload), now)?;
    }
    Ok(closed)
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
