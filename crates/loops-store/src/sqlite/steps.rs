//! The SQLite side of [`crate::steps`].

use loops_core::{ProcessRef, StepRun, StepRunStatus, Timestamp, WorkflowRunId};
use rusqlite::{Connection, params};
use serde_json::{Map, Value, json};

use crate::backend::StepOps;
use crate::error::{Result, StoreError};
use crate::sqlite::Sqlite;
use crate::sqlite::rows::{self, step_run_columns, ts, ts_opt};
use crate::sqlite::workflows::{append_event, query_all, query_one};
use crate::steps::StepOutcome;

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
            step_run_columns!(),
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
            step_run_columns!(),
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
    let changed = crate::sqlite::rows::exec(
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

impl StepOps for Sqlite {
    fn list_step_runs(&self, run_id: &WorkflowRunId) -> Result<Vec<StepRun>> {
        steps_of_run(&self.conn, run_id)
    }

    fn get_step_run(&self, run_id: &WorkflowRunId, step_id: &str) -> Result<Option<StepRun>> {
        step_by_id(&self.conn, run_id, step_id)
    }

    fn start_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        now: Timestamp,
    ) -> Result<StepRun> {
        self.write_tx(|conn| {
            let changed = crate::sqlite::rows::exec(conn,
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

    fn mark_step_pid(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        process: ProcessRef,
        now: Timestamp,
    ) -> Result<bool> {
        let changed = crate::sqlite::rows::exec(
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

    fn finalize_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        outcome: &StepOutcome,
        now: Timestamp,
    ) -> Result<StepRun> {
        let status = StepRunStatus::from(outcome.status);
        let finished = outcome.finished_at.unwrap_or(now);
        self.write_tx(|conn| {
            let changed = crate::sqlite::rows::exec(
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

    fn skip_step_run(
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

    fn skip_open_steps(
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
