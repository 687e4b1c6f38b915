//! The seam between the scheduler and processes: a [`RunExecutor`] turns one
//! claimed loop run into an [`ExecutorResult`] (SPEC §3.3 "execute", §6.8
//! `executeLoopTarget`, §8 "execute override").
//!
//! The scheduler never spawns anything itself. Production uses
//! [`ProcessExecutor`], which hands command and agent targets to
//! `loops_exec` and runs workflow targets through
//! [`execute_workflow`]; tests pass a fake that
//! returns canned results, so a tick runs without a single process.

use std::sync::Arc;

use loops_core::{
    Clock, ExecutorResult, Loop, LoopRun, ProcessRef, Target, WorkflowId, WorkflowTarget,
    loop_workflow_key,
};
use loops_exec::{
    CancelToken, ExecError, ExecOptions, RunContext, RunMetadata, SystemProbe, execute_target,
};
use loops_store::{Location, Store, StoreError};
use loops_workflow::{WorkflowError, WorkflowRunOptions, execute_workflow};

/// What an executor may do while a run executes.
pub struct RunControl<'a> {
    /// Cancelled when the run must stop: its lease was lost, or the runner
    /// is shutting down. The executor kills its process group then; a
    /// workflow run is recorded cancelled with the token's reason.
    pub cancel: CancelToken,
    /// Reports the spawned child, so its identity is recorded on the run.
    pub on_spawn: &'a (dyn Fn(ProcessRef) + Sync),
    /// The spawn id every process of the run is to carry in
    /// `LOOPS_SPAWN_ID` (the runner records it with the run), so that the
    /// recovery after a crash also finds the processes that left the run's
    /// process group.
    pub spawn_id: Option<&'a str>,
}

/// Executes one claimed loop run.
///
/// `Err` is for failures of loops itself before or around the run (an
/// account that cannot be resolved, a workflow that does not exist); the
/// scheduler records them as a failed run with the error's message and
/// empty output (SPEC §3.3 "thrown error"). A target that runs and fails is
/// an `Ok` result with status failed.
pub trait RunExecutor: Send + Sync {
    /// Runs `run` of loop `lp` to completion.
    fn execute(
        &self,
        lp: &Loop,
        run: &LoopRun,
        control: &RunControl<'_>,
    ) -> Result<ExecutorResult, RunError>;
}

/// Why a loop run could not be executed (SPEC §3.3 "thrown error"). Its
/// message is what the failed run records as its `error`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The target's account could not be resolved (SPEC §5.4), before
    /// anything was spawned.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The workflow runner failed: a store error, a step another runner
    /// holds, a step that would not start.
    #[error(transparent)]
    Workflow(#[from] WorkflowError),
    /// The database of a workflow target could not be opened or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A workflow target, on a runner started without a database.
    #[error("cannot run workflow {0}: this runner was started without a database")]
    NoDatabase(WorkflowId),
    /// The loop's workflow does not exist.
    #[error("workflow not found: {0}")]
    WorkflowNotFound(WorkflowId),
    /// The executor panicked; the message is the panic's.
    #[error("executor panicked: {0}")]
    Panicked(String),
}

/// The production executor: command and agent targets become processes
/// through `loops_exec::execute_target`; workflow targets run their stored
/// workflow (SPEC §6.8), which needs the database ([`with_database`]).
///
/// [`with_database`]: ProcessExecutor::with_database
pub struct ProcessExecutor<'a> {
    /// Where `startedAt`/`finishedAt` come from.
    pub clock: &'a dyn Clock,
    /// Environment, output cap and kill grace of every child.
    pub exec: ExecOptions,
    /// The database workflow targets read their workflow from and record
    /// their runs in; `None` fails workflow targets.
    pub database: Option<Location>,
}

impl<'a> ProcessExecutor<'a> {
    /// An executor with the SPEC defaults and no database.
    pub fn new(clock: &'a dyn Clock) -> ProcessExecutor<'a> {
        ProcessExecutor {
            clock,
            exec: ExecOptions::default(),
            database: None,
        }
    }

    /// An executor with the SPEC defaults whose workflow targets use the
    /// database `store` was opened on (none for an in-memory store).
    pub fn for_store(clock: &'a dyn Clock, store: &Store) -> ProcessExecutor<'a> {
        ProcessExecutor {
            database: store.location(),
            ..ProcessExecutor::new(clock)
        }
    }

    /// Runs workflow targets against the database at `location` (a SQLite
    /// file's path, or a PostgreSQL location). Each workflow run opens its
    /// own connection to it on the run's worker thread, since a store
    /// handle cannot be shared between threads.
    pub fn with_database(mut self, location: impl Into<Location>) -> ProcessExecutor<'a> {
        self.database = Some(location.into());
        self
    }

    /// SPEC §6.8: runs the loop's workflow under the key of this slot and
    /// attempt, with the target's timeout.
    fn execute_workflow_target(
        &self,
        target: &WorkflowTarget,
        lp: &Loop,
        run: &LoopRun,
        control: &RunControl<'_>,
    ) -> Result<ExecutorResult, RunError> {
        let Some(location) = &self.database else {
            return Err(RunError::NoDatabase(target.workflow_id));
        };
        let store = location.open("workflow", Arc::new(SystemProbe))?;
        // By id only: archived workflows still run (SPEC §4.3).
        let workflow = store
            .get_workflow(&target.workflow_id)?
            .ok_or(RunError::WorkflowNotFound(target.workflow_id))?;
        let opts = WorkflowRunOptions {
            exec: self.exec.clone(),
            spawn_id: control.spawn_id,
            stop: Some(&control.cancel),
            idempotency_key: Some(loop_workflow_key(&lp.id, run.scheduled_for, run.attempt)),
            loop_context: Some((lp, run)),
            timeout_ms: target.timeout_ms,
            on_spawn: Some(control.on_spawn),
            ..WorkflowRunOptions::new(self.clock)
        };
        Ok(execute_workflow(&store, &workflow, &opts)?.result)
    }
}

impl RunExecutor for ProcessExecutor<'_> {
    fn execute(
        &self,
        lp: &Loop,
        run: &LoopRun,
        control: &RunControl<'_>,
    ) -> Result<ExecutorResult, RunError> {
        let target = match &lp.target {
            Target::Workflow(w) => return self.execute_workflow_target(w, lp, run, control),
            Target::Command(c) => loops_core::ProcessTarget::Command(c.clone()),
            Target::Agent(a) => loops_core::ProcessTarget::Agent(a.clone()),
        };
        let ctx = RunContext {
            clock: self.clock,
            cancel: Some(&control.cancel),
            spawn_id: control.spawn_id,
        };
        Ok(execute_target(
            &target,
            &RunMetadata::for_loop_run(lp, run),
            &self.exec,
            &ctx,
            &mut |p| (control.on_spawn)(p),
        )?)
    }
}
