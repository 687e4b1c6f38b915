//! A turn's work: starting or skipping the steps that can start, and
//! applying the reports of the steps' workers (SPEC §6.3 step 2).

use loops_core::{
    ExecutorResult, ExecutorStatus, ProcessRef, Step, StepRunStatus, WorkflowRunStatus,
};
use loops_exec::{CancelToken, RunMetadata};
use loops_store::{StepOutcome, StepStart, StoreError};

use super::ending::{Deadline, Ending};
use super::{InFlight, Runner, timeout_message};
use crate::WorkflowError;
use crate::plan::Next;
use crate::worker::StepJob;

impl<'r> Runner<'r> {
    /// Whether [`Runner::dispatch`] would start or skip a step now.
    pub(super) fn can_start(&self) -> bool {
        !self.ending.is_halted()
            && self.inflight.len() < self.max_parallel
            && !matches!(self.plan.next(), Next::Wait | Next::Finished)
    }

    /// Starts or skips steps while there is room (SPEC §6.3 step 2).
    pub(super) fn dispatch(
        &mut self,
        spawn: &mut dyn FnMut(StepJob<'r>),
    ) -> Result<(), WorkflowError> {
        while !self.ending.is_halted() && self.inflight.len() < self.max_parallel {
            let next = self.plan.next();
            if matches!(next, Next::Wait | Next::Finished) {
                break;
            }
            // SPEC §6.3 steps 2.1 and 2.2, before every step.
            if self.check_terminal()? {
                break;
            }
            if let Deadline::Fired { ms } = self.deadline {
                self.halt(WorkflowRunStatus::TimedOut, timeout_message(ms));
                break;
            }
            match next {
                Next::Blocked { pos, dep } => self.skip_blocked(pos, &dep)?,
                Next::Ready(pos) => self.start(pos, spawn)?,
                Next::Wait | Next::Finished => break,
            }
        }
        Ok(())
    }

    /// SPEC §6.3 step 2.4: a dependency did not succeed.
    fn skip_blocked(&mut self, pos: usize, dep: &str) -> Result<(), WorkflowError> {
        let step = self.plan.step(pos);
        let now = self.now();
        let row = self.store.skip_step_run(
            &self.run.id,
            &step.id,
            &format!("dependency did not succeed: {dep}"),
            now,
        )?;
        self.report_step(&row);
        self.plan.finish(pos, row.status);
        // The first blocked step names the failure; a run already failing
        // keeps its reason.
        if self.ending == Ending::Succeeding {
            let reason = format!("step {} blocked by dependency {dep}", step.id);
            self.ending = Ending::Failing(reason);
        }
        Ok(())
    }

    /// SPEC §6.3 steps 2.5 and 2.6: start the step and hand it to a worker.
    fn start(
        &mut self,
        pos: usize,
        spawn: &mut dyn FnMut(StepJob<'r>),
    ) -> Result<(), WorkflowError> {
        let step = self.plan.step(pos);
        let pool = step.pool.as_deref();
        if let Some(pool) = pool
            && let Some(max_running) = self.pool_wait.full_now(pool)
        {
            // Counted full already in this turn, under its lock.
            self.park(pos, pool, max_running);
            return Ok(());
        }
        let now = self.now();
        let row = match self
            .store
            .start_pooled_step_run(&self.run.id, &step.id, pool, now)
        {
            Ok(StepStart::Started(row)) => *row,
            Ok(StepStart::PoolFull { pool, max_running }) => {
                self.park(pos, &pool, max_running);
                return Ok(());
            }
            // A cancel that landed between the check and the start is a
            // cancel, not a double run.
            Err(StoreError::StepNotClaimable { .. }) if self.check_terminal()? => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        self.report_step(&row);
        self.plan.start(pos);
        self.unparked(pos);
        let cancel = CancelToken::new();
        self.inflight.insert(
            pos,
            InFlight {
                cancel: cancel.clone(),
                by_timeout: false,
            },
        );
        spawn(StepJob {
            pos,
            step,
            meta: self.metadata(step),
            cancel,
            started_at: row.started_at.unwrap_or(now),
        });
        Ok(())
    }

    /// The `LOOPS_*` variables of `step` (SPEC §5.3 step 5).
    fn metadata(&self, step: &Step) -> RunMetadata {
        let mut meta = match self.opts.loop_context {
            Some((lp, loop_run)) => loops_exec::RunMetadata::for_loop_run(lp, loop_run),
            None => RunMetadata::default(),
        };
        meta.scheduled_for = meta.scheduled_for.or(self.run.scheduled_for);
        meta.workflow_id = Some(self.workflow.id.to_string());
        meta.workflow_name = Some(self.workflow.name.clone());
        meta.workflow_run_id = Some(self.run.id.to_string());
        meta.workflow_step_id = Some(step.id.clone());
        meta
    }

    /// A step's child spawned: record it on the step, then tell the caller.
    pub(super) fn spawned(&mut self, pos: usize, process: ProcessRef) -> Result<(), WorkflowError> {
        let step = self.plan.step(pos);
        let now = self.now();
        self.store
            .mark_step_pid(&self.run.id, &step.id, process, now)?;
        if let Some(on_spawn) = self.opts.on_spawn {
            on_spawn(process);
        }
        Ok(())
    }

    /// SPEC §6.3 steps 2.7 to 2.10: a step's worker reported its result.
    pub(super) fn complete(
        &mut self,
        pos: usize,
        result: &ExecutorResult,
    ) -> Result<(), WorkflowError> {
        let Some(flight) = self.inflight.remove(&pos) else {
            return Ok(());
        };
        // Step 2.8: the run ended elsewhere; the step stays as that left it.
        if self.check_terminal()? {
            self.plan.finish(pos, StepRunStatus::Cancelled);
            return Ok(());
        }
        // Step 2.7: the workflow timeout's kill is a timeout, not a failure.
        let timed_out;
        let result = if flight.by_timeout && result.status == ExecutorStatus::Failed {
            timed_out = ExecutorResult {
                status: ExecutorStatus::TimedOut,
                error: Some(timeout_message(self.deadline.ms())),
                ..result.clone()
            };
            &timed_out
        } else {
            result
        };
        let step = self.plan.step(pos);
        let now = self.now();
        let row = self.store.finalize_step_run(
            &self.run.id,
            &step.id,
            &StepOutcome::from(result),
            now,
        )?;
        self.report_step(&row);
        self.plan.finish(pos, row.status);
        // Step 2.10. With steps in parallel, the first failure decides; the
        // others still running finish and keep their own results.
        if result.status != ExecutorStatus::Succeeded
            && !step.continue_on_failure
            && !self.ending.is_halted()
        {
            let status = match result.status {
                ExecutorStatus::TimedOut => WorkflowRunStatus::TimedOut,
                _ => WorkflowRunStatus::Failed,
            };
            let error = result
                .error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            self.halt(status, format!("step {} {}{error}", step.id, result.status));
        }
        Ok(())
    }

    /// Stops new steps with `status` and `reason` (SPEC §6.3 "Stop").
    pub(super) fn halt(&mut self, status: WorkflowRunStatus, reason: String) {
        self.ending = Ending::Halted(status, reason);
    }
}
