//! The SQLite side of [`crate::workflow_runs`].

use loops_core::{
    LoopId, RunId, StepRunId, Timestamp, WorkflowId, WorkflowRun, WorkflowRunId, WorkflowRunStatus,
};
use rusqlite::{Connection, params};
use serde_json::{Map, Value, json};

use crate::backend::WorkflowRunOps;
use crate::error::{Result, StoreError};
use crate::random_id_bytes;
use crate::sqlite::Sqlite;
use crate::sqlite::rows::{self, ts, ts_opt, workflow_run_columns};
use crate::sqlite::steps::step_by_id;
use crate::sqlite::workflows::{append_event, query_all, query_one, terminal_run_statuses};
use crate::workflow_runs::{
    DEFAULT_WORKFLOW_RUN_LIST_LIMIT, NewWorkflowRun, RecoveredWorkflowRun, WorkflowRunFilter,
    WorkflowRunPatch,
};

/// The run with id `id`.
pub(crate) fn run_by_id(conn: &Connection, id: &WorkflowRunId) -> Result<Option<WorkflowRun>> {
    query_one(
        conn,
        concat!(
            "SELECT ",
            workflow_run_columns!(),
            " FROM workflow_runs WHERE id = ?1"
        ),
        [id.as_str()],
        "workflow_runs",
        rows::workflow_run_row,
    )
}

/// The run with id `id`, or `workflow run not found: <id>`.
pub(crate) fn require_run(conn: &Connection, id: &WorkflowRunId) -> Result<WorkflowRun> {
    run_by_id(conn, id)?.ok_or_else(|| run_not_found(id))
}

fn run_not_found(id: &WorkflowRunId) -> StoreError {
    StoreError::NotFound {
        kind: "workflow run",
        key: id.to_string(),
    }
}

/// The run of `workflow_id` with idempotency key `key`.
fn run_by_key(
    conn: &Connection,
    workflow_id: &WorkflowId,
    key: &str,
) -> Result<Option<WorkflowRun>> {
    query_one(
        conn,
        concat!(
            "SELECT ",
            workflow_run_columns!(),
            " FROM workflow_runs WHERE workflow_id = ?1 AND idempotency_key = ?2"
        ),
        [workflow_id.as_str(), key],
        "workflow_runs",
        rows::workflow_run_row,
    )
}

/// Inserts the run, its step rows and its `created` event. Runs inside the
/// caller's write transaction.
fn insert_run(
    conn: &Connection,
    input: &NewWorkflowRun<'_>,
    now: Timestamp,
) -> Result<WorkflowRunId> {
    let spec = input.workflow;
    let id = WorkflowRunId::from_bytes(random_id_bytes());
    crate::sqlite::rows::exec(conn,
        "INSERT INTO workflow_runs (id, workflow_id, workflow_name, loop_id, loop_run_id, scheduled_for,
                idempotency_key, status, started_at, finished_at, duration_ms, error, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, NULL, NULL, NULL, ?8, ?8)",
        params![
            id.as_str(),
            spec.id.as_str(),
            spec.name,
            input.loop_id.as_ref().map(LoopId::as_str),
            input.loop_run_id.as_ref().map(RunId::as_str),
            ts_opt(input.scheduled_for),
            input.idempotency_key,
            ts(now),
        ],
    )
    .map_err(StoreError::db("inserting a workflow run"))?;
    for (sequence, step) in spec.steps.iter().enumerate() {
        let account = step.effective_account();
        crate::sqlite::rows::exec(conn,
            "INSERT INTO workflow_step_runs (id, workflow_run_id, step_id, sequence, status, started_at,
                    finished_at, exit_code, pid, duration_ms, stdout, stderr, error, account_profile,
                    account_tool, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'pending', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ?5, ?6, ?7, ?7)",
            params![
                StepRunId::from_bytes(random_id_bytes()).as_str(),
                id.as_str(),
                step.id,
                i64::try_from(sequence).unwrap_or(i64::MAX),
                account.map(|a| a.profile.as_str()),
                account.and_then(|a| a.tool.as_deref()),
                ts(now),
            ],
        )
        .map_err(StoreError::db("inserting a workflow step run"))?;
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
    append_event(
        conn,
        &id,
        "created",
        None,
        Some(&Value::Object(payload)),
        now,
    )?;
    Ok(id)
}

/// `{error?}`: the payload of run-finalize events.
fn error_payload(error: Option<&str>) -> Value {
    let mut payload = Map::new();
    if let Some(error) = error {
        payload.insert("error".into(), json!(error));
    }
    Value::Object(payload)
}

impl WorkflowRunOps for Sqlite {
    fn create_workflow_run(
        &self,
        input: &NewWorkflowRun<'_>,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        let workflow_id = &input.workflow.id;
        if let Some(key) = &input.idempotency_key
            && let Some(existing) = run_by_key(&self.conn, workflow_id, key)?
        {
            return Ok(existing);
        }
        self.write_tx(|conn| {
            // The first check ran without the write lock; another creator may
            // have inserted the run since.
            if let Some(key) = &input.idempotency_key
                && let Some(existing) = run_by_key(conn, workflow_id, key)?
            {
                return Ok(existing);
            }
            let id = insert_run(conn, input, now)?;
            require_run(conn, &id)
        })
    }

    fn get_workflow_run(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRun>> {
        run_by_id(&self.conn, id)
    }

    fn require_workflow_run(&self, id: &WorkflowRunId) -> Result<WorkflowRun> {
        require_run(&self.conn, id)
    }

    fn list_workflow_runs(&self, filter: &WorkflowRunFilter) -> Result<Vec<WorkflowRun>> {
        let limit = filter.limit.unwrap_or(DEFAULT_WORKFLOW_RUN_LIST_LIMIT);
        let table = "workflow_runs";
        let map = rows::workflow_run_row;
        match (&filter.workflow_id, &filter.loop_run_id) {
            (Some(id), _) => query_all(
                &self.conn,
                concat!(
                    "SELECT ",
                    workflow_run_columns!(),
                    " FROM workflow_runs WHERE workflow_id = ?1 ORDER BY created_at DESC LIMIT ?2"
                ),
                params![id.as_str(), limit],
                table,
                map,
            ),
            (None, Some(id)) => query_all(
                &self.conn,
                concat!(
                    "SELECT ",
                    workflow_run_columns!(),
                    " FROM workflow_runs WHERE loop_run_id = ?1 ORDER BY created_at DESC LIMIT ?2"
                ),
                params![id.as_str(), limit],
                table,
                map,
            ),
            (None, None) => query_all(
                &self.conn,
                concat!(
                    "SELECT ",
                    workflow_run_columns!(),
                    " FROM workflow_runs ORDER BY created_at DESC LIMIT ?1"
                ),
                [limit],
                table,
                map,
            ),
        }
    }

    fn workflow_run_status(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRunStatus>> {
        rows::query_opt(
            &self.conn,
            "SELECT id, status FROM workflow_runs WHERE id = ?1",
            [id.as_str()],
            ("workflow_runs", "reading a workflow run's status"),
            |row| rows::parsed(row, "status"),
        )
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
        self.write_tx(|conn| {
            let changed = crate::sqlite::rows::exec(conn,
                    concat!(
                        "UPDATE workflow_runs
                         SET status = ?2, finished_at = ?3, duration_ms = ?4, error = ?5, updated_at = ?3
                         WHERE id = ?1 AND status NOT IN ",
                        terminal_run_statuses!()
                    ),
                    params![
                        id.as_str(),
                        status.as_str(),
                        ts(finished),
                        patch.duration_ms,
                        patch.error,
                    ],
                )
                .map_err(StoreError::db("finalizing a workflow run"))?;
            if changed == 1 {
                let payload = error_payload(patch.error.as_deref());
                append_event(conn, id, status.as_str(), None, Some(&payload), now)?;
            }
            require_run(conn, id)
        })
    }

    fn cancel_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.stop_workflow_run(id, StopAs::Cancelled, reason, now)
    }

    fn fail_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.stop_workflow_run(id, StopAs::Failed, reason, now)
    }

    fn recover_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<RecoveredWorkflowRun> {
        self.write_tx(|conn| {
            require_run(conn, id)?;
            let running: Vec<(String, Option<loops_core::ProcessRef>)> = {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT step_id, pid, pid_start_ms FROM workflow_step_runs
                         WHERE workflow_run_id = ?1 AND status = 'running' ORDER BY sequence",
                    )
                    .map_err(StoreError::db("reading running workflow steps"))?;
                stmt.query_map([id.as_str()], |row| {
                    Ok((row.get::<_, String>(0)?, rows::process_at(row, 1)?))
                })
                .map_err(StoreError::db("reading running workflow steps"))?
                .collect::<rusqlite::Result<_>>()
                .map_err(StoreError::db("reading running workflow steps"))?
            };
            let alive: Vec<String> = running
                .iter()
                .filter_map(|(step_id, process)| {
                    process
                        .filter(|p| self.liveness.is_alive(*p))
                        .map(|p| format!("{step_id} pid={}", p.pid))
                })
                .collect();
            if !alive.is_empty() {
                return Err(StoreError::StepsAlive {
                    steps: alive.join(", "),
                });
            }
            if running.is_empty() {
                return Ok(RecoveredWorkflowRun {
                    run: require_run(conn, id)?,
                    recovered_steps: Vec::new(),
                });
            }
            crate::sqlite::rows::exec(conn,
                "UPDATE workflow_step_runs
                 SET status = 'pending', started_at = NULL, finished_at = NULL, exit_code = NULL,
                     pid = NULL, pid_start_ms = NULL, duration_ms = NULL, stdout = NULL, stderr = NULL,
                     error = ?2, updated_at = ?3
                 WHERE workflow_run_id = ?1 AND status = 'running'",
                params![id.as_str(), reason, ts(now)],
            )
            .map_err(StoreError::db("recovering workflow steps"))?;
            let step_ids: Vec<&str> = running.iter().map(|(s, _)| s.as_str()).collect();
            append_event(
                conn,
                id,
                "recovered",
                None,
                Some(&json!({ "reason": reason, "recoveredSteps": step_ids })),
                now,
            )?;
            let recovered_steps = step_ids
                .iter()
                .map(|s| step_by_id(conn, id, s))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .flatten()
                .collect();
            Ok(RecoveredWorkflowRun {
                run: require_run(conn, id)?,
                recovered_steps,
            })
        })
    }
}

/// How [`Sqlite::stop_workflow_run`] ends a run: cancelled, when someone
/// asked for it, or failed (a lost lease).
#[derive(Debug, Clone, Copy)]
enum StopAs {
    Cancelled,
    Failed,
}

impl Sqlite {
    fn stop_workflow_run(
        &self,
        id: &WorkflowRunId,
        stop_as: StopAs,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        let status = match stop_as {
            StopAs::Cancelled => "cancelled",
            StopAs::Failed => "failed",
        };
        self.write_tx(|conn| {
            require_run(conn, id)?;
            let changed = crate::sqlite::rows::exec(
                conn,
                concat!(
                    "UPDATE workflow_runs
                     SET status = ?4, finished_at = ?2, error = ?3, updated_at = ?2
                     WHERE id = ?1 AND status NOT IN ",
                    terminal_run_statuses!()
                ),
                params![id.as_str(), ts(now), reason, status],
            )
            .map_err(StoreError::db("stopping a workflow run"))?;
            if changed == 1 {
                crate::sqlite::rows::exec(
                    conn,
                    "UPDATE workflow_step_runs
                     SET status = 'cancelled', finished_at = ?2, pid = NULL, pid_start_ms = NULL,
                         error = ?3, updated_at = ?2
                     WHERE workflow_run_id = ?1 AND status IN ('pending', 'running')",
                    params![id.as_str(), ts(now), reason],
                )
                .map_err(StoreError::db("cancelling workflow steps"))?;
                let payload = match stop_as {
                    StopAs::Failed => error_payload(Some(reason)),
                    StopAs::Cancelled => json!({ "reason": reason }),
                };
                append_event(conn, id, status, None, Some(&payload), now)?;
            }
            require_run(conn, id)
        })
    }
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
    pub(crate) payload: serde_json::Value,
    /// What the store was doing, for error messages.
    pub(crate) context: &'static str,
}

/// Ends the non-terminal workflow runs linked to `loop_run_id`, closes
/// their open steps (no step events, as in the original), and appends one
/// event to each run. Lease recovery fails them (SPEC §4.3); a daemon
/// shutdown cancels them. Returns the ids of the runs it closed.
pub(crate) fn close_linked_workflow_runs(
    conn: &Connection,
    loop_run_id: &RunId,
    close: &LinkedClose<'_>,
    now: Timestamp,
) -> Result<Vec<WorkflowRunId>> {
    let closed: Vec<WorkflowRunId> = rows::query_vec(
        conn,
        concat!(
            "UPDATE workflow_runs SET status = ?4, finished_at = ?2, error = ?3, updated_at = ?2
             WHERE loop_run_id = ?1 AND status NOT IN ",
            terminal_run_statuses!(),
            " RETURNING id"
        ),
        params![
            loop_run_id.as_str(),
            ts(now),
            close.reason,
            close.run_status
        ],
        ("workflow_runs", close.context),
        |r| rows::parsed(r, "id"),
    )?;
    for wr in &closed {
        rows::exec(
            conn,
            "UPDATE workflow_step_runs SET status = ?4, finished_at = ?2, pid = NULL,
               pid_start_ms = NULL, error = ?3, updated_at = ?2
             WHERE workflow_run_id = ?1 AND status IN ('pending', 'running')",
            params![wr.as_str(), ts(now), close.reason, close.step_status],
        )
        .map_err(StoreError::db(close.context))?;
        append_event(conn, wr, close.run_status, None, Some(&close.payload), now)?;
    }
    Ok(closed)
}

/// Fails the non-terminal workflow runs linked to `loop_run_id` with
/// `reason`, skips their open steps, and appends a `failed` event to each
/// (SPEC §4.3).
pub(crate) fn fail_linked_workflow_runs(
    conn: &Connection,
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
    close_linked_workflow_runs(conn, loop_run_id, &close, now)
}
