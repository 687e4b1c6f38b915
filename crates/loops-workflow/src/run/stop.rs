//! How a run stops short: the stop token, the workflow timeout, a run made
//! terminal by another process, and the runner's own failure.

use std::sync::mpsc::Receiver;
use std::time::Instant;

use loops_core::WorkflowRun;
use loops_exec::CancelToken;
use loops_store::{StepOutcome, StoreError};

use super::ending::{Deadline, Ending};
use super::{Runner, Turn, timeout_message};
use crate::WorkflowError;
use crate::worker::Report;

impl Runner<'_> {
    /// The stop token: cancel the run in the store (fail it, when the loop
    /// run's lease was lost), then kill its steps.
    pub(super) fn check_stop(&mut self) -> Result<(), WorkflowError> {
        if let Ending::Stopped(_) = self.ending {
            return Ok(());
        }
        let Some(reason) = self.opts.stop.and_then(CancelToken::reason) else {
            return Ok(());
        };
        // The cancel is recorded before the kill, so the step's killed
        // result can never be finalized over it.
        let now = self.now();
        // A lost lease is not a cancel anyone asked for: the run failed
        // (SPEC §10 item 98).
        let run = if reason == crate::RUN_LEASE_LOST {
            self.store.fail_workflow_run(&self.run.id, &reason, now)?
        } else {
            self.store.cancel_workflow_run(&self.run.id, &reason, now)?
        };
        // The store returns the run terminal, so the stop is handled once.
        self.ended_elsewhere(run, true);
        Ok(())
    }

    /// Fires the workflow timeout once its deadline has passed (SPEC §6.4).
    pub(super) fn check_deadline(&mut self) {
        let Deadline::Pending { at, ms } = self.deadline else {
            return;
        };
        if Instant::now() < at {
            return;
        }
        self.deadline = Deadline::Fired { ms };
        let message = timeout_message(ms);
        for flight in self.inflight.values_mut() {
            flight.by_timeout = !flight.cancel.is_cancelled();
            flight.cancel.cancel(message.clone());
        }
    }

    /// Whether the run is terminal, reading its status from the store; a
    /// terminal run stops this runner (SPEC §6.3 step 2.1).
    pub(super) fn check_terminal(&mut self) -> Result<bool, WorkflowError> {
        if self.ending.is_ended() {
            return Ok(true);
        }
        if self.turn == Turn::SeenRunning {
            return Ok(false);
        }
        match self.store.workflow_run_status(&self.run.id)? {
            Some(status) if status.is_terminal() => {
                let run = self.store.require_workflow_run(&self.run.id)?;
                self.ended_elsewhere(run, false);
                Ok(true)
            }
            Some(_) => {
                if self.turn == Turn::Unchecked {
                    self.turn = Turn::SeenRunning;
                }
                Ok(false)
            }
            None => Err(WorkflowError::Store(StoreError::NotFound {
                kind: "workflow run",
                key: self.run.id.to_string(),
            })),
        }
    }

    /// The run became terminal outside this runner (`by_stop`: through the
    /// stop token): kill every running step with the run's error and start
    /// nothing more. A run that had already ended keeps its status; the
    /// stop is then only marked handled.
    fn ended_elsewhere(&mut self, run: WorkflowRun, by_stop: bool) {
        match self.ending {
            Ending::EndedElsewhere(status) if by_stop => self.ending = Ending::Stopped(status),
            Ending::EndedElsewhere(_) | Ending::Stopped(_) => {}
            _ if run.status.is_terminal() => {
                let why = run
                    .error
                    .clone()
                    .unwrap_or_else(|| format!("workflow run {}", run.status));
                for flight in self.inflight.values() {
                    flight.cancel.cancel(why.clone());
                }
                self.ending = if by_stop {
                    Ending::Stopped(run.status)
                } else {
                    Ending::EndedElsewhere(run.status)
                };
            }
            _ => {}
        }
        self.run = run;
    }

    /// The runner failed: kill the steps still running and record them as
    /// failed, best effort, so a resume runs them again.
    pub(super) fn abandon(&mut self, rx: &Receiver<Report>, error: &WorkflowError) {
        let why = format!("workflow runner failed: {error}");
        for flight in self.inflight.values() {
            flight.cancel.cancel(why.clone());
        }
        while !self.inflight.is_empty() {
            // The reports already taken off the channel come first.
            let report = match self.backlog.pop_front() {
                Some(report) => Ok(report),
                None => rx.recv(),
            };
            match report {
                Ok(Report::Done(pos, result)) => {
                    if self.inflight.remove(&pos).is_some() {
                        let step = self.plan.step(pos);
                        let now = self.now();
                        // Best effort: the store already failed once.
                        let _ = self.store.finalize_step_run(
                            &self.run.id,
                            &step.id,
                            &StepOutcome::from(&*result),
                            now,
                        );
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}
