//! [`StepOps`] written once for both backends.
//!
//! Every transition that writes an event runs in the backend's write
//! transaction and locks its workflow run's row first on PostgreSQL
//! ([`lock_run`]; SQLite's transaction holds the write lock already): that
//! orders the transition after any cancel or finalize of the run, makes
//! the step-start guard ("the run is running") read the newest status,
//! and serializes the event sequence.

use loops_core::{ProcessRef, StepRun, StepRunStatus, Timestamp, WorkflowRunId};
use serde_json::{Map, Value, json};

use crate::backend::StepOps;
use crate::columns::{self, step_run_columns};
use crate::error::{Result, StoreError};
use crate::pools::ops::{PoolLock, pool_full};
use crate::sql::{Db, Sql};
use crate::steps::{StepOutcome, StepStart};
use crate::workflows::ops::{append_event, lock_run};

const TABLE: (&str, &str) = ("workflow_step_runs", "reading workflow steps");

/// The step `step_id` of run `run_id`.
pub(crate) fn step_by_id(
    c: &mut dyn Sql,
    run_id: &WorkflowRunId,
    step_id: &str,
) -> Result<Option<StepRun>> {
    c.query_opt(
        concat!(
            "SELECT ",
            step_run_columns!(),
            " FROM workflow_step_runs WHERE workflow_run_id = ?1 AND step_id = ?2"
        ),
        &[run_id.as_str().into(), step_id.into()],
        TABLE,
        columns::step_run_row,
    )
}

/// The steps of run `run_id` in sequence order.
pub(crate) fn steps_of_run(c: &mut dyn Sql, run_id: &WorkflowRunId) -> Result<Vec<StepRun>> {
    c.query_vec(
        concat!(
            "SELECT ",
            step_run_columns!(),
            " FROM workflow_step_runs WHERE workflow_run_id = ?1 ORDER BY sequence ASC"
        ),
        &[run_id.as_str().into()],
        TABLE,
        columns::step_run_row,
    )
}

/// The step, or `workflow step run not found: <r>/<s>`.
fn require_step(c: &mut dyn Sql, run_id: &WorkflowRunId, step_id: &str) -> Result<StepRun> {
    step_by_id(c, run_id, step_id)?.ok_or_else(|| StoreError::StepNotFound {
        run_id: run_id.to_string(),
        step_id: step_id.to_owned(),
    })
}

/// Skips one pending or running step, appending `step_skipped` `{reason}`
/// when it changed. Runs inside the caller's write transaction, which
/// holds the run's lock.
fn skip_in_tx(
    c: &mut dyn Sql,
    run_id: &WorkflowRunId,
    step_id: &str,
    reason: &str,
    now: Timestamp,
) -> Result<u64> {
    let changed = c.execute(
        "UPDATE workflow_step_runs
         SET status = 'skipped', finished_at = ?3, pid = NULL, pid_start_ms = NULL,
             error = ?4, updated_at = ?3
         WHERE workflow_run_id = ?1 AND step_id = ?2 AND status IN ('pending', 'running')",
        &[
            run_id.as_str().into(),
            step_id.into(),
            now.into(),
            reason.into(),
        ],
        "skipping a workflow step",
    )?;
    if changed == 1 {
        append_event(
            c,
            run_id,
            "step_skipped",
            Some(step_id),
            Some(&json!({ "reason": reason })),
            now,
        )?;
    }
    Ok(changed)
}

/// Records a running step's process. SQLite writes it in one statement;
/// PostgreSQL's statement still takes the run's lock before the step's,
/// the order every other writer of the run keeps.
const MARK_STEP_PID: (&str, &str) = (
    "UPDATE workflow_step_runs SET pid = ?3, pid_start_ms = ?4, updated_at = ?5
     WHERE workflow_run_id = ?1 AND step_id = ?2 AND status = 'running'",
    "WITH run AS (SELECT id FROM workflow_runs WHERE id = ?1 FOR UPDATE)
     UPDATE workflow_step_runs SET pid = ?3, pid_start_ms = ?4, updated_at = ?5
     WHERE workflow_run_id = (SELECT id FROM run) AND step_id = ?2
       AND status = 'running'",
);

impl<D: Db> StepOps for D {
    fn list_step_runs(&self, run_id: &WorkflowRunId) -> Result<Vec<StepRun>> {
        self.read(|c| steps_of_run(c, run_id))
    }

    fn get_step_run(&self, run_id: &WorkflowRunId, step_id: &str) -> Result<Option<StepRun>> {
        self.read(|c| step_by_id(c, run_id, step_id))
    }

    fn start_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        pool: Option<&str>,
        now: Timestamp,
    ) -> Result<StepStart> {
        self.write(|c| {
            lock_run(c, run_id)?;
            // The run's lock first, then the pool's: the order every step
            // start keeps; a loop claim locks loops, then pools, and never
            // a workflow run.
            if let Some(pool) = pool
                && let Some(max_running) = pool_full(c, pool, PoolLock::Take)?
            {
                return Ok(StepStart::PoolFull {
                    pool: pool.to_owned(),
                    max_running,
                });
            }
            let changed = c.execute(
                "UPDATE workflow_step_runs
                 SET status = 'running', started_at = ?3, finished_at = NULL, exit_code = NULL,
                     duration_ms = NULL, pid = NULL, pid_start_ms = NULL, stdout = NULL,
                     stderr = NULL, error = NULL, updated_at = ?3, pool = ?4
                 WHERE workflow_run_id = ?1 AND step_id = ?2
                   AND status IN ('pending', 'failed', 'timed_out')
                   AND EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?1 AND status = 'running')",
                &[
                    run_id.as_str().into(),
                    step_id.into(),
                    now.into(),
                    pool.into(),
                ],
                "starting a workflow step",
            )?;
            let step = require_step(c, run_id, step_id)?;
            if changed != 1 {
                return Err(StoreError::StepNotClaimable {
                    run_id: run_id.to_string(),
                    step_id: step_id.to_owned(),
                    status: step.status.to_string(),
                });
            }
            append_event(c, run_id, "step_started", Some(step_id), None, now)?;
            Ok(StepStart::Started(Box::new(step)))
        })
    }

    fn mark_step_pid(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        process: ProcessRef,
        now: Timestamp,
    ) -> Result<bool> {
        // One statement, outside a transaction of its own.
        self.read(|c| {
            let sql = c.dialect().pick(MARK_STEP_PID.0, MARK_STEP_PID.1);
            let changed = c.execute(
                sql,
                &[
                    run_id.as_str().into(),
                    step_id.into(),
                    process.pid.into(),
                    process.start.into(),
                    now.into(),
                ],
                "recording a workflow step pid",
            )?;
            if changed == 1 {
                return Ok(true);
            }
            require_step(c, run_id, step_id).map(|_| false)
        })
    }

    fn finalize_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        outcome: &StepOutcome,
        now: Timestamp,
    ) -> Result<StepRun> {
        let status = StepRunStatus::from(outcome.status);
        let finished = outcome.finished_at.unwrap_or(now);
        self.write(|c| {
            lock_run(c, run_id)?;
            let changed = c.execute(
                "UPDATE workflow_step_runs
                 SET status = ?3, finished_at = ?4, exit_code = ?5, duration_ms = ?6,
                     pid = NULL, pid_start_ms = NULL, stdout = ?7, stderr = ?8, error = ?9,
                     updated_at = ?4
                 WHERE workflow_run_id = ?1 AND step_id = ?2 AND status = 'running'",
                &[
                    run_id.as_str().into(),
                    step_id.into(),
                    status.as_str().into(),
                    finished.into(),
                    outcome.exit_code.into(),
                    outcome.duration_ms.into(),
                    outcome.stdout.as_deref().into(),
                    outcome.stderr.as_deref().into(),
                    outcome.error.as_deref().into(),
                ],
                "finalizing a workflow step",
            )?;
            if changed == 1 {
                let mut payload = Map::new();
                if let Some(code) = outcome.exit_code {
                    payload.insert("exitCode".into(), json!(code));
                }
                if let Some(error) = &outcome.error {
                    payload.insert("error".into(), json!(error));
                }
                append_event(
                    c,
                    run_id,
                    &format!("step_{status}"),
                    Some(step_id),
                    Some(&Value::Object(payload)),
                    now,
                )?;
            }
            require_step(c, run_id, step_id)
        })
    }

    fn skip_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<StepRun> {
        self.write(|c| {
            lock_run(c, run_id)?;
            skip_in_tx(c, run_id, step_id, reason, now)?;
            require_step(c, run_id, step_id)
        })
    }

    fn skip_open_steps(
        &self,
        run_id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Vec<StepRun>> {
        self.write(|c| {
            lock_run(c, run_id)?;
            let mut skipped = Vec::new();
            for step in steps_of_run(c, run_id)? {
                if step.status.is_open() && skip_in_tx(c, run_id, &step.step_id, reason, now)? == 1
                {
                    skipped.push(require_step(c, run_id, &step.step_id)?);
                }
            }
            Ok(skipped)
        })
    }
}
