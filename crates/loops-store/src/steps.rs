//! Workflow step runs: lookups and the step transitions start, mark pid,
//! finalize and skip (SPEC §4.3 "Step transitions", §1.5 StepRun).
//!
//! Invariants:
//! - Every transition is a conditional `UPDATE` whose `WHERE` clause is the
//!   state machine of SPEC §1.5, run in a `BEGIN IMMEDIATE` transaction
//!   together with the event it records. A transition that does not apply
//!   changes nothing and writes no event.
//! - A step starts only while its run is running, and only from pending,
//!   failed or timed_out. Starting it twice fails the second time with
//!   [`StoreError::StepNotClaimable`]: this is the double-run guard of SPEC
//!   §6.3 step 5.
//! - A step's pid (and its start time, `pid_start_ms`) is set only while
//!   the step is running, and cleared by every transition out of running.

use loops_core::{
    ExecutorResult, ExecutorStatus, ProcessRef, StepRun, StepRunStatus, Timestamp, WorkflowRunId,
};
use rusqlite::{Connection, params};
use serde_json::{Map, Value, json};

use crate::Store;
use crate::error::{Result, StoreError};
use crate::rows::{self, ts, ts_opt};
use crate::workflows::{append_event, query_all, query_one};

/// The result fields [`Store::finalize_step_run`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOutcome {
    /// How the step ended; the event is `step_<status>`.
    pub status: ExecutorStatus,
    /// The finish; `now` when unset.
    pub finished_at: Option<Timestamp>,
    /// The exit code, when the process exited.
    pub exit_code: Option<i32>,
    /// The duration.
    pub duration_ms: Option<i64>,
    /// Captured stdout.
    pub stdout: Option<String>,
    /// Captured stderr.
    pub stderr: Option<String>,
    /// Why the step did not succeed.
    pub error: Option<String>,
}

impl StepOutcome {
    /// An outcome with only a status.
    pub fn new(status: ExecutorStatus) -> StepOutcome {
        StepOutcome {
            status,
            finished_at: None,
            exit_code: None,
            duration_ms: None,
            stdout: None,
            stderr: None,
            error: None,
        }
    }
}

impl From<&ExecutorResult> for StepOutcome {
    fn from(r: &ExecutorResult) -> StepOutcome {
        StepOutcome {
            status: r.status,
            finished_at: Some(r.finished_at),
            exit_code: r.exit_code,
            duration_ms: Some(r.duration_ms),
            stdout: Some(r.stdout.clone()),
            stderr: Some(r.stderr.clone()),
            error: r.error.clone(),
        }
    }
}

/// The columns [`rows::step_run_row`] reads, in its order. Listed rather
/// than `*`: databases from before 0.3 got `pid` appended at the end, so
/// the table's own order varies, and reading by position is several times
/// cheaper than by name.
macro_rules! step_columns {
    () => {
        "id, workflow_run_id, step_id, sequence, status, started_at, finished_at, exit_code, \
         pid, duration_ms, stdout, stderr, error, account_profile, account_tool, created_at, \
         updated_at"
    };
}

/// The step `step_id` of run `run_id`.
pub(crate) fn step_by_id(
    conn: &Connection,
    run_id: &WorkflowRunId,
    step_id: &str,
) -> Result<Option<StepRun>> {
    query_one(
        conn,
        concat!(
            "SELECT ",
            step_columns!(),
            " FROM workflow_step_runs WHERE workflow_run_id = ?1 AND step_id = ?2"
        ),
        [run_id.as_str(), step_id],
        "workflow_step_runs",
        rows::step_run_row,
    )
}

/// The steps of run `run_id` in sequence order.
pub(crate) fn steps_of_run(conn: &Connection, run_id: &WorkflowRunId) -> Result<Vec<StepRun>> {
    query_all(
        conn,
        concat!(
            "SELECT ",
            step_columns!(),
            " FROM workflow_step_runs WHERE workflow_run_id = ?1 ORDER BY sequence ASC"
        ),
        [run_id.as_str()],
        "workflow_step_runs",
        rows::step_run_row,
    )
}

/// The step, or `workflow step run not found: <r>/<s>`.
fn require_step(conn: &Connection, run_id: &WorkflowRunId, step_id: &str) -> Result<StepRun> {
    step_by_id(conn, run_id, step_id)?.ok_or_else(|| StoreError::StepNotFound {
        run_id: run_id.to_string(),
        step_id: step_id.to_owned(),
    })
}

/// Skips one pending or running step, appending `step_skipped` `{reason}`
/// when it changed. Runs inside the caller's write transaction.
fn skip_in_tx(
    conn: &Connection,
    run_id: &WorkflowRunId,
    step_id: &str,
    reason: &str,
    now: Timestamp,
) -> Result<usize> {
    let changed = crate::rows::exec(
        conn,
        "UPDATE workflow_step_runs
             SET status = 'skipped', finished_at = ?3, pid = NULL, pid_start_ms = NULL,
                 error = ?4, updated_at = ?3
             WHERE workflow_run_id = ?1 AND step_id = ?2 AND status IN ('pending', 'running')",
        params![run_id.as_str(), step_id, ts(now), reason],
    )
    .map_err(StoreError::db("skipping a workflow step"))?;
    if changed == 1 {
        append_event(
            conn,
            run_id,
            "step_skipped",
            Some(step_id),
            Some(&json!({ "reason": reason })),
            now,
        )?;
    }
    Ok(changed)
}

impl Store {
    /// The steps of a run in sequence (declaration) order.
    pub fn list_step_runs(&self, run_id: &WorkflowRunId) -> Result<Vec<StepRun>> {
        steps_of_run(&self.conn, run_id)
    }

    /// One step of a run.
    pub fn get_step_run(&self, run_id: &WorkflowRunId, step_id: &str) -> Result<Option<StepRun>> {
        step_by_id(&self.conn, run_id, step_id)
    }

    /// Starts a step (SPEC §4.3 "Start"): pending, failed or timed_out →
    /// running, only while the run is running. The start becomes `now`, the
    /// previous results and pid are cleared, and `step_started` is appended.
    ///
    /// Fails with [`StoreError::StepNotFound`] when the step does not exist
    /// and with [`StoreError::StepNotClaimable`]
    /// (`workflow step is not claimable: <r>/<s> status=<current>`) when it
    /// is in another state or its run is not running; nothing changes then.
    pub fn start_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        now: Timestamp,
    ) -> Result<StepRun> {
        self.write_tx(|conn| {
            let changed = crate::rows::exec(conn,
                    "UPDATE workflow_step_runs
                     SET status = 'running', started_at = ?3, finished_at = NULL, exit_code = NULL,
                         duration_ms = NULL, pid = NULL, pid_start_ms = NULL, stdout = NULL,
                         stderr = NULL, error = NULL, updated_at = ?3
                     WHERE workflow_run_id = ?1 AND step_id = ?2
                       AND status IN ('pending', 'failed', 'timed_out')
                       AND EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?1 AND status = 'running')",
                    params![run_id.as_str(), step_id, ts(now)],
                )
                .map_err(StoreError::db("starting a workflow step"))?;
            let step = require_step(conn, run_id, step_id)?;
            if changed != 1 {
                return Err(StoreError::StepNotClaimable {
                    run_id: run_id.to_string(),
                    step_id: step_id.to_owned(),
                    status: step.status.to_string(),
                });
            }
            append_event(conn, run_id, "step_started", Some(step_id), None, now)?;
            Ok(step)
        })
    }

    /// Records the child process of a running step (SPEC §4.3 "Mark pid"),
    /// with its start time so a reused pid is not mistaken for it (SPEC §9
    /// item 14). A step that is no longer running is left unchanged.
    ///
    /// Returns whether the pid was recorded, without reading the step back:
    /// a runner records one for every step it spawns and has no use for the
    /// row. Fails with [`StoreError::StepNotFound`].
    pub fn mark_step_pid(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        process: ProcessRef,
        now: Timestamp,
    ) -> Result<bool> {
        let changed = crate::rows::exec(
            &self.conn,
            "UPDATE workflow_step_runs SET pid = ?3, pid_start_ms = ?4, updated_at = ?5
                 WHERE workflow_run_id = ?1 AND step_id = ?2 AND status = 'running'",
            params![
                run_id.as_str(),
                step_id,
                process.pid,
                process.start,
                ts(now)
            ],
        )
        .map_err(StoreError::db("recording a workflow step pid"))?;
        if changed == 1 {
            return Ok(true);
        }
        require_step(&self.conn, run_id, step_id).map(|_| false)
    }

    /// Finishes a running step with `outcome` (SPEC §4.3 "Finalize") and
    /// clears its pid. When the row changed, `step_<status>` is appended
    /// with `{exitCode?, error?}`; a step that is not running is left
    /// unchanged and no event is written.
    ///
    /// Returns the stored step; fails with [`StoreError::StepNotFound`].
    pub fn finalize_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        outcome: &StepOutcome,
        now: Timestamp,
    ) -> Result<StepRun> {
        let status = StepRunStatus::from(outcome.status);
        let finished = outcome.finished_at.unwrap_or(now);
        self.write_tx(|conn| {
            let changed = crate::rows::exec(
                conn,
                "UPDATE workflow_step_runs
                     SET status = ?3, finished_at = ?4, exit_code = ?5, duration_ms = ?6,
                         pid = NULL, pid_start_ms = NULL, stdout = ?7, stderr = ?8, error = ?9,
                         updated_at = ?4
                     WHERE workflow_run_id = ?1 AND step_id = ?2 AND status = 'running'",
                params![
                    run_id.as_str(),
                    step_id,
                    status.as_str(),
                    ts_opt(Some(finished)),
                    outcome.exit_code,
                    outcome.duration_ms,
                    outcome.stdout,
                    outcome.stderr,
                    outcome.error,
                ],
            )
            .map_err(StoreError::db("finalizing a workflow step"))?;
            if changed == 1 {
                let mut payload = Map::new();
                if let Some(code) = outcome.exit_code {
                    payload.insert("exitCode".into(), json!(code));
                }
                if let Some(error) = &outcome.error {
                    payload.insert("error".into(), json!(error));
                }
                append_event(
                    conn,
                    run_id,
                    &format!("step_{status}"),
                    Some(step_id),
                    Some(&Value::Object(payload)),
                    now,
                )?;
            }
            require_step(conn, run_id, step_id)
        })
    }

    /// Skips a pending or running step (SPEC §4.3 "Skip"): it becomes
    /// skipped with `error = reason` and no pid, and `step_skipped`
    /// `{reason}` is appended. A step in another state is left unchanged and
    /// no event is written.
    ///
    /// Returns the stored step; fails with [`StoreError::StepNotFound`].
    pub fn skip_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<StepRun> {
        self.write_tx(|conn| {
            skip_in_tx(conn, run_id, step_id, reason, now)?;
            require_step(conn, run_id, step_id)
        })
    }

    /// Skips every pending or running step of a run in sequence order, each
    /// with its own `step_skipped` event, in one transaction (SPEC §6.3
    /// step 3). Returns the steps it skipped.
    pub fn skip_open_steps(
        &self,
        run_id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Vec<StepRun>> {
        self.write_tx(|conn| {
            let mut skipped = Vec::new();
            for step in steps_of_run(conn, run_id)? {
                if step.status.is_open()
                    && skip_in_tx(conn, run_id, &step.step_id, reason, now)? == 1
                {
                    skipped.push(require_step(conn, run_id, &step.step_id)?);
                }
            }
            Ok(skipped)
        })
    }
}
