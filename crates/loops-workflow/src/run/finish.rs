//! The run's end: skipping the steps that did not run, finalizing the run
//! (tried again on a transient store error) and mapping it to a result.

use loops_core::{WorkflowRun, WorkflowRunStatus};
use loops_store::WorkflowRunPatch;

use super::Runner;
use super::WorkflowOutcome;
use super::ending::Ending;
use super::retry::{RETRY_FIRST, RETRY_MAX};
use crate::WorkflowError;
use crate::summary::workflow_result;

/// The skip reason when the run stopped without a reason (SPEC §6.3 step 3).
const STOPPED: &str = "workflow stopped before step could run";

impl Runner<'_> {
    /// SPEC §6.3 steps 3 and 4: skip what did not run, finalize the run
    /// unless it ended elsewhere, and map it to a result.
    pub(super) fn finish(self) -> Result<WorkflowOutcome, WorkflowError> {
        let mut delay = RETRY_FIRST;
        let run = loop {
            match self.record_end() {
                Ok(run) => break run,
                Err(WorkflowError::Store(e)) if e.is_transient() && !self.stop_fired() => {
                    if delay == RETRY_FIRST
                        && let Some(on_retry) = self.opts.on_retry
                    {
                        on_retry(&e);
                    }
                    let stopped = match self.opts.stop {
                        Some(stop) => stop.wait_timeout(delay),
                        None => {
                            std::thread::sleep(delay);
                            false
                        }
                    };
                    if stopped {
                        return Err(WorkflowError::Store(e));
                    }
                    delay = (delay * 2).min(RETRY_MAX);
                }
                Err(e) => return Err(e),
            }
        };
        let steps = self.store.list_step_runs(&run.id)?;
        let result = workflow_result(
            &run,
            &steps,
            self.ending.reason(),
            self.opts.exec.max_output_bytes,
        );
        Ok(WorkflowOutcome { run, steps, result })
    }

    /// Skips the steps that did not run and finalizes the run, in one
    /// transaction, so a failure leaves nothing half written to try again.
    fn record_end(&self) -> Result<WorkflowRun, WorkflowError> {
        let store = self.store;
        store.transaction(|| self.record_end_in_tx())
    }

    fn record_end_in_tx(&self) -> Result<WorkflowRun, WorkflowError> {
        let now = self.now();
        let mut status = self.ending.status();
        if self.ending == Ending::Succeeding && self.plan.has_undecided() {
            // Only a dependency cycle in a stored spec leaves a step that
            // can never start; fail rather than report success.
            status = WorkflowRunStatus::Failed;
        }
        let reason = self.ending.reason();
        if status != WorkflowRunStatus::Succeeded {
            let skipped = reason.unwrap_or(STOPPED);
            for row in self.store.skip_open_steps(&self.run.id, skipped, now)? {
                self.report_step(&row);
            }
        }
        let run = if self.ending.is_ended() {
            self.store.require_workflow_run(&self.run.id)?
        } else {
            let started = self.run.started_at.unwrap_or(self.run.created_at);
            let patch = WorkflowRunPatch {
                finished_at: Some(now),
                duration_ms: Some(now.millis_since(started).max(0)),
                error: reason.map(str::to_owned),
            };
            // A run that ended elsewhere meanwhile is returned as stored.
            self.store
                .finalize_workflow_run(&self.run.id, status, &patch, now)?
        };
        Ok(run)
    }
}
