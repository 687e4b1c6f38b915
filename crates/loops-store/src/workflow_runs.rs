//! Workflow runs: creation with idempotency keys, lookups, and the run-level
//! transitions finalize, cancel and recover (SPEC §4.3
//! "`createWorkflowRun`", "Workflow-run lookups", "Workflow-run
//! transitions"; §6.5).
//!
//! Invariants:
//! - Terminal runs (succeeded, failed, timed_out, cancelled) never change
//!   status: every run transition is guarded by
//!   `status NOT IN (<terminal>)` (SPEC §1.5).
//! - Each transition is one `BEGIN IMMEDIATE` transaction that writes the
//!   state change and its event together, so an event exists exactly when
//!   its change happened, and sequences stay gap-free under concurrent
//!   writers (SPEC §9 item 9).
//! - One `(workflow, idempotency key)` pair maps to one run, even when two
//!   processes create it at the same moment: the key is re-checked under
//!   the write lock.
//! - Recovery checks step liveness and resets steps in the same
//!   transaction, so a step cannot start between the check and the reset.

use loops_core::{
    LoopId, LoopRun, RunId, StepRun, StepRunId, Timestamp, WorkflowId, WorkflowRun, WorkflowRunId,
    WorkflowRunStatus, WorkflowSpec,
};
use rusqlite::{Connection, params};
use serde_json::{Map, Value, json};

use crate::error::{Result, StoreError};
use crate::rows::{self, ts, ts_opt};
use crate::steps::step_by_id;
use crate::workflows::{TERMINAL_RUN_SQL, append_event, query_all, query_one};
use crate::{Store, random_id_bytes};

/// Default `limit` of [`Store::list_workflow_runs`].
pub const DEFAULT_WORKFLOW_RUN_LIST_LIMIT: u32 = 100;

/// The reason [`Store::cancel_workflow_run`] records when the user gives none.
pub const DEFAULT_CANCEL_REASON: &str = "cancelled by user";

/// The reason [`Store::recover_workflow_run`] records when the user gives none.
pub const DEFAULT_RECOVER_REASON: &str = "workflow run recovered for retry";

/// The input of [`Store::create_workflow_run`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkflowRun<'a> {
    /// The workflow to run; its steps become the run's step rows.
    pub workflow: &'a WorkflowSpec,
    /// The loop, for scheduled runs.
    pub loop_id: Option<LoopId>,
    /// The loop run, for scheduled runs.
    pub loop_run_id: Option<RunId>,
    /// The loop slot (SPEC: `scheduledFor ?? loopRun.scheduledFor`).
    pub scheduled_for: Option<Timestamp>,
    /// Deduplicates runs of this workflow: a second creation with the same
    /// key returns the first run, whatever its status.
    pub idempotency_key: Option<String>,
}

impl<'a> NewWorkflowRun<'a> {
    /// A manual run of `workflow`: no loop, no slot, no key.
    pub fn new(workflow: &'a WorkflowSpec) -> NewWorkflowRun<'a> {
        NewWorkflowRun {
            workflow,
            loop_id: None,
            loop_run_id: None,
            scheduled_for: None,
            idempotency_key: None,
        }
    }

    /// Links the run to a loop run: its loop, its id and, unless already
    /// set, its slot.
    pub fn for_loop_run(mut self, run: &LoopRun) -> NewWorkflowRun<'a> {
        self.loop_id = Some(run.loop_id);
        self.loop_run_id = Some(run.id);
        self.scheduled_for = self.scheduled_for.or(Some(run.scheduled_for));
        self
    }

    /// Sets the idempotency key.
    pub fn with_key(mut self, key: impl Into<String>) -> NewWorkflowRun<'a> {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// Which workflow runs [`Store::list_workflow_runs`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowRunFilter {
    /// Only runs of this workflow. When set, `loop_run_id` is ignored, as in
    /// the original.
    pub workflow_id: Option<WorkflowId>,
    /// Only runs linked to this loop run.
    pub loop_run_id: Option<RunId>,
    /// At most this many; [`DEFAULT_WORKFLOW_RUN_LIST_LIMIT`] when unset.
    pub limit: Option<u32>,
}

/// The result fields [`Store::finalize_workflow_run`] writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowRunPatch {
    /// The finish; `now` when unset.
    pub finished_at: Option<Timestamp>,
    /// The duration.
    pub duration_ms: Option<i64>,
    /// Why the run did not succeed.
    pub error: Option<String>,
}

/// What [`Store::recover_workflow_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredWorkflowRun {
    /// The run, whose own status recovery never touches.
    pub run: WorkflowRun,
    /// The steps that went from running back to pending, in sequence order.
    /// Empty when no step was running.
    pub recovered_steps: Vec<StepRun>,
}

/// The run with id `id`.
pub(crate) fn run_by_id(conn: &Connection, id: &WorkflowRunId) -> Result<Option<WorkflowRun>> {
    query_one(
        conn,
        "SELECT * FROM workflow_runs WHERE id = ?1",
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
        "SELECT * FROM workflow_runs WHERE workflow_id = ?1 AND idempotency_key = ?2",
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
    crate::rows::exec(conn,
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
        crate::rows::exec(conn,
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

impl Store {
    /// Creates a workflow run with one pending step row per step, or returns
    /// the existing run for the same `(workflow, idempotency key)` as it is,
    /// whatever its status (SPEC §4.3 `createWorkflowRun`).
    ///
    /// A new run is running, started at `now`, and its event log starts with
    /// `created` (sequence 1). Two concurrent creators with the same key get
    /// the same run.
    pub fn create_workflow_run(
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

    /// The workflow run with this id.
    pub fn get_workflow_run(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRun>> {
        run_by_id(&self.conn, id)
    }

    /// The workflow run with this id, or `workflow run not found: <id>`.
    pub fn require_workflow_run(&self, id: &WorkflowRunId) -> Result<WorkflowRun> {
        require_run(&self.conn, id)
    }

    /// Lists workflow runs, newest first (SPEC §4.3 `listWorkflowRuns`).
    pub fn list_workflow_runs(&self, filter: &WorkflowRunFilter) -> Result<Vec<WorkflowRun>> {
        let limit = filter.limit.unwrap_or(DEFAULT_WORKFLOW_RUN_LIST_LIMIT);
        let table = "workflow_runs";
        let map = rows::workflow_run_row;
        match (&filter.workflow_id, &filter.loop_run_id) {
            (Some(id), _) => query_all(
                &self.conn,
                "SELECT * FROM workflow_runs WHERE workflow_id = ?1 ORDER BY created_at DESC LIMIT ?2",
                params![id.as_str(), limit],
                table,
                map,
            ),
            (None, Some(id)) => query_all(
                &self.conn,
                "SELECT * FROM workflow_runs WHERE loop_run_id = ?1 ORDER BY created_at DESC LIMIT ?2",
                params![id.as_str(), limit],
                table,
                map,
            ),
            (None, None) => query_all(
                &self.conn,
                "SELECT * FROM workflow_runs ORDER BY created_at DESC LIMIT ?1",
                [limit],
                table,
                map,
            ),
        }
    }

    /// The run's status alone, or `None` when the run does not exist.
    ///
    /// One primary-key lookup that decodes a single column: cheap enough for
    /// a runner to poll every few tens of milliseconds to notice a cancel
    /// written by another process (SPEC §6.5, §9 item 21).
    pub fn workflow_run_status(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRunStatus>> {
        rows::query_opt(
            &self.conn,
            "SELECT id, status FROM workflow_runs WHERE id = ?1",
            [id.as_str()],
            ("workflow_runs", "reading a workflow run's status"),
            |row| rows::parsed(row, "status"),
        )
    }

    /// Whether the run is terminal (succeeded, failed, timed_out or
    /// cancelled). Fails with `workflow run not found: <id>`.
    pub fn is_workflow_run_terminal(&self, id: &WorkflowRunId) -> Result<bool> {
        Ok(self.require_workflow_run(id)?.status.is_terminal())
    }

    /// Finishes a run as `status` unless it is already terminal (SPEC §4.3
    /// "Finalize"), appending the event `<status>` with `{error?}` only when
    /// the row changed.
    ///
    /// Returns the stored run, so a finalize that lost to a cancel reports
    /// cancelled. `status` must be terminal: finalizing as running fails with
    /// [`StoreError::InvalidTransition`].
    pub fn finalize_workflow_run(
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
            let changed = crate::rows::exec(conn,
                    &format!(
                        "UPDATE workflow_runs
                         SET status = ?2, finished_at = ?3, duration_ms = ?4, error = ?5, updated_at = ?3
                         WHERE id = ?1 AND status NOT IN {TERMINAL_RUN_SQL}"
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

    /// Cancels a run (SPEC §4.3 "Cancel", §6.5): a non-terminal run becomes
    /// cancelled with `error = reason`, its pending and running steps become
    /// cancelled, and the event `cancelled` `{reason}` is appended. A
    /// terminal run is returned unchanged.
    ///
    /// This only writes rows and sends no signal; the process executing the
    /// run notices the cancel and stops its child. Fails with
    /// `workflow run not found: <id>`.
    pub fn cancel_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.stop_workflow_run(id, false, reason, now)
    }

    /// Fails a run whose runner must stop it, such as a workflow loop run
    /// whose lease was lost (SPEC §10 item 98): as
    /// [`Store::cancel_workflow_run`], but the run becomes failed, and the
    /// event `failed` `{error}` is appended. Its pending and running steps
    /// become cancelled, since they are killed. A terminal run is returned
    /// unchanged.
    pub fn fail_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.stop_workflow_run(id, true, reason, now)
    }

    fn stop_workflow_run(
        &self,
        id: &WorkflowRunId,
        failed: bool,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        let status = if failed { "failed" } else { "cancelled" };
        self.write_tx(|conn| {
            require_run(conn, id)?;
            let changed = crate::rows::exec(
                conn,
                &format!(
                    "UPDATE workflow_runs
                         SET status = ?4, finished_at = ?2, error = ?3, updated_at = ?2
                         WHERE id = ?1 AND status NOT IN {TERMINAL_RUN_SQL}"
                ),
                params![id.as_str(), ts(now), reason, status],
            )
            .map_err(StoreError::db("stopping a workflow run"))?;
            if changed == 1 {
                crate::rows::exec(
                    conn,
                    "UPDATE workflow_step_runs
                     SET status = 'cancelled', finished_at = ?2, pid = NULL, pid_start_ms = NULL,
                         error = ?3, updated_at = ?2
                     WHERE workflow_run_id = ?1 AND status IN ('pending', 'running')",
                    params![id.as_str(), ts(now), reason],
                )
                .map_err(StoreError::db("cancelling workflow steps"))?;
                let payload = if failed {
                    error_payload(Some(reason))
                } else {
                    json!({ "reason": reason })
                };
                append_event(conn, id, status, None, Some(&payload), now)?;
            }
            require_run(conn, id)
        })
    }

    /// Puts the running steps of a run whose processes are dead back to
    /// pending, so a later execution with the same key resumes them (SPEC
    /// §4.3 "Recover", §6.5). Results, pid and start are cleared and
    /// `error = reason`; the run's own status is not touched. The event
    /// `recovered` `{reason, recoveredSteps}` is appended when at least one
    /// step was reset.
    ///
    /// If any running step's process is alive, nothing changes and it fails
    /// with [`StoreError::StepsAlive`]. The liveness check and the reset are
    /// one transaction. Fails with `workflow run not found: <id>`.
    pub fn recover_workflow_run(
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
                        "SELECT * FROM workflow_step_runs
                         WHERE workflow_run_id = ?1 AND status = 'running' ORDER BY sequence",
                    )
                    .map_err(StoreError::db("reading running workflow steps"))?;
                stmt.query_map([id.as_str()], |row| {
                    Ok((row.get::<_, String>("step_id")?, rows::process_ref(row)?))
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
            crate::rows::exec(conn,
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
