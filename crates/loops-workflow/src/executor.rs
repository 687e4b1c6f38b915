//! The seam between the scheduler and processes: a [`RunExecutor`] turns one
//! claimed loop run into an [`ExecutorResult`] (SPEC §3.3 "execute", §8
//! "execute override").
//!
//! The scheduler never spawns anything itself. Production uses
//! [`ProcessExecutor`], which hands command and agent targets to
//! `loops_exec`; tests pass a fake that returns canned results, so a tick
//! runs without a single process.

use std::collections::BTreeMap;
use std::time::Duration;

use loops_core::{ExecutorResult, Loop, LoopRun, ProcessRef, Target, Timestamp};
use loops_exec::{CancelToken, ExecOptions, RunMetadata, execute_target};

use crate::clock::Clock;

/// What an executor may do while a run executes.
pub struct RunControl<'a> {
    /// Cancelled when the run must stop: its lease was lost, or the runner
    /// is shutting down. The executor kills its process group then.
    pub cancel: CancelToken,
    /// Reports the spawned child, so its identity is recorded on the run.
    pub on_spawn: &'a (dyn Fn(ProcessRef) + Sync),
}

/// Executes one claimed loop run.
///
/// `Err` is for failures of loops itself before or around the run (an
/// account that cannot be resolved, a workflow that does not exist); the
/// scheduler records them as a failed run with that message and empty
/// output (SPEC §3.3 "thrown error"). A target that runs and fails is an
/// `Ok` result with status failed.
pub trait RunExecutor: Send + Sync {
    /// Runs `run` of loop `lp` to completion.
    fn execute(
        &self,
        lp: &Loop,
        run: &LoopRun,
        control: &RunControl<'_>,
    ) -> Result<ExecutorResult, String>;
}

/// The production executor: command and agent targets become processes
/// through `loops_exec::execute_target`.
pub struct ProcessExecutor<'a> {
    /// Where `startedAt`/`finishedAt` come from.
    pub clock: &'a dyn Clock,
    /// The environment runs start from; `None` is the process environment.
    pub base_env: Option<BTreeMap<String, String>>,
    /// Per-stream output cap in bytes.
    pub max_output_bytes: usize,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
}

impl<'a> ProcessExecutor<'a> {
    /// An executor with the SPEC defaults.
    pub fn new(clock: &'a dyn Clock) -> ProcessExecutor<'a> {
        let defaults = ExecOptions::default();
        ProcessExecutor {
            clock,
            base_env: None,
            max_output_bytes: defaults.max_output_bytes,
            kill_grace: defaults.kill_grace,
        }
    }
}

/// The `LOOPS_*` metadata of a loop run (SPEC §5.3 step 5).
pub fn loop_metadata(lp: &Loop, run: &LoopRun) -> RunMetadata {
    RunMetadata {
        loop_id: Some(lp.id.to_string()),
        loop_name: Some(lp.name.clone()),
        run_id: Some(run.id.to_string()),
        scheduled_for: Some(run.scheduled_for),
        ..RunMetadata::default()
    }
}

impl RunExecutor for ProcessExecutor<'_> {
    fn execute(
        &self,
        lp: &Loop,
        run: &LoopRun,
        control: &RunControl<'_>,
    ) -> Result<ExecutorResult, String> {
        let Some(target) = lp.target.to_process() else {
            let Target::Workflow(w) = &lp.target else {
                return Err("loop target is not runnable".to_owned());
            };
            // The workflow runner lands with the workflow issue; until then a
            // workflow loop fails its run with a clear reason instead of
            // pretending to succeed.
            return Err(format!(
                "workflow targets are not supported by this build yet (workflow {})",
                w.workflow_id
            ));
        };
        let clock = |/* injected */| -> Timestamp { self.clock.now() };
        let opts = ExecOptions {
            base_env: self.base_env.clone(),
            max_output_bytes: self.max_output_bytes,
            kill_grace: self.kill_grace,
            cancel: Some(control.cancel.clone()),
            clock: &clock,
            ..ExecOptions::default()
        };
        execute_target(&target, &loop_metadata(lp, run), &opts, &mut |p| {
            (control.on_spawn)(p)
        })
        .map_err(|e| e.to_string())
    }
}
