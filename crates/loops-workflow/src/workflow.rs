//! The workflow runner: [`execute_workflow`], [`preflight_workflow`] and
//! [`workflow_result`] (SPEC §6).
//!
//! A workflow run walks its steps in dependency order (SPEC §6.2, §6.3),
//! executes each as a process through `loops_exec`, and records every
//! transition through the store, which writes the SPEC §6.6 events with
//! gap-free sequence numbers in the same transaction as the change.
//!
//! What this runner does beyond the original, on purpose:
//! - **Parallel steps** (SPEC §9 item 35). A workflow's `maxParallel` (1 when
//!   unset) bounds how many independent steps run at once. With 1 the
//!   behaviour and the event order are exactly SPEC §6.3's serial walk. With
//!   more, a step starts as soon as all its dependencies are finished; a
//!   failing step without `continueOnFailure` stops *new* steps from
//!   starting, lets the steps already running finish and record their real
//!   results, and then skips the rest with the failure as the reason.
//! - **Cancel within 100 ms** (SPEC §9 item 21). `workflows cancel` only
//!   writes rows, from another process. While steps run, the runner reads
//!   its run's status every [`WorkflowRunOptions::cancel_poll`] (50 ms by
//!   default; the original polls every 500 ms) and cancels the steps'
//!   [`CancelToken`]s, which tear their process groups down at once.
//! - **Ctrl-C and daemon stop** (SPEC §9 item 19). A
//!   [`WorkflowRunOptions::stop`] token cancels the run itself: it is
//!   recorded `cancelled` with the token's reason and its running steps'
//!   groups are killed. A loop run whose workflow run was cancelled is never
//!   retried (the store's advance checks for it).
//! - **Resume** (SPEC §9 item 38). [`WorkflowRunOptions::resume`] continues a
//!   running run by id, for example after `workflows recover`.
//! - **Bounded summary** (SPEC §9 item 25). The result's stdout summary is
//!   capped; see [`workflow_result`].
//!
//! Threads: the calling thread owns the [`Store`](loops_store::Store)
//! (which is not `Sync`) and does every write; steps execute on scoped
//! worker threads and report back over a channel, as the scheduler's runs
//! do.

mod plan;
mod preflight;
mod run;
mod summary;
mod worker;

use std::time::Duration;

use loops_core::{
    Clock, ExecutorResult, Loop, LoopRun, ProcessRef, StepRun, WorkflowRun, WorkflowRunId,
};
use loops_exec::{CancelToken, ExecError, ExecOptions};
use loops_store::StoreError;

pub use self::preflight::{preflight_new_workflow, preflight_workflow};
pub use self::run::execute_workflow;
pub use self::summary::{STEP_OUTPUT_SUMMARY_BYTES, workflow_result};

/// The default interval at which a running workflow checks whether another
/// process cancelled it.
pub const DEFAULT_CANCEL_POLL: Duration = Duration::from_millis(50);

/// How [`execute_workflow`] runs a workflow. [`WorkflowRunOptions::new`]
/// gives a manual run: a new run, no key, no loop, no timeout.
pub struct WorkflowRunOptions<'a> {
    /// Where every recorded instant comes from.
    pub clock: &'a dyn Clock,
    /// Environment, output cap and kill grace of the step processes; the
    /// output cap also bounds the run's summary stdout (SPEC §9 item 25).
    pub exec: ExecOptions,
    /// The spawn id of the loop run this run executes for: every step
    /// process carries it in `LOOPS_SPAWN_ID`
    /// ([`RunContext::spawn_id`](loops_exec::RunContext::spawn_id)).
    pub spawn_id: Option<&'a str>,
    /// Ctrl-C or a daemon stop: when cancelled, the run is recorded
    /// `cancelled` with the token's reason (through
    /// `Store::cancel_workflow_run`), its running steps' process groups are
    /// killed, and no further step starts.
    pub stop: Option<&'a CancelToken>,
    /// Continue this existing run instead of creating one. It must belong
    /// to the workflow and still be running (for example after
    /// `workflows recover`); otherwise [`WorkflowError::NotRunning`].
    /// Succeeded, skipped and cancelled steps are kept; pending, failed and
    /// timed-out steps run again. `idempotency_key` is ignored then.
    pub resume: Option<WorkflowRunId>,
    /// Deduplicates runs of this workflow (SPEC §4.3): a running run with
    /// this key is resumed, a terminal one returns its stored result
    /// without spawning anything (SPEC §10 items 78–80).
    pub idempotency_key: Option<String>,
    /// The loop and loop run a scheduled run belongs to: the workflow run is
    /// linked to them and steps see the `LOOPS_LOOP_*` variables.
    pub loop_context: Option<(&'a Loop, &'a LoopRun)>,
    /// The workflow-level timeout, from a loop's workflow target (SPEC
    /// §6.4); `None` or 0 means none. When it fires, the running step and
    /// the run become timed_out with `workflow timed out after <ms>ms`.
    pub timeout_ms: Option<u64>,
    /// How often the run's status is read while steps execute, to notice a
    /// cancel written by another process.
    pub cancel_poll: Duration,
    /// Progress: called with the stored step row when a step starts, when
    /// it finishes, and when it is skipped.
    pub on_step: Option<&'a (dyn Fn(&StepRun) + Sync)>,
    /// Called with every step child right after its spawn, after its pid is
    /// recorded on the step; a loop run records it as its own pid.
    pub on_spawn: Option<&'a (dyn Fn(ProcessRef) + Sync)>,
    /// Called on the caller's thread when the runner is about to wait for
    /// its steps, with nothing else to do: a progress printer that buffers
    /// what `on_step` gives it writes it out here, so a burst of short
    /// steps costs one write, and nothing stays unprinted while a long step
    /// runs.
    pub on_idle: Option<&'a (dyn Fn() + Sync)>,
    /// Called when recording the run's progress failed on a transient store
    /// error (a full disk, an I/O error, a lock held too long), once per
    /// streak of failures: the runner keeps what it has not recorded and
    /// tries again after 100 ms, doubling up to 5 s, until it lands (or
    /// until `stop` fires, which ends the run with the error).
    pub on_retry: Option<&'a (dyn Fn(&StoreError) + Sync)>,
}

impl<'a> WorkflowRunOptions<'a> {
    /// Options for a manual run on `clock`: default process settings, a new
    /// run without a key, no loop, no timeout, a 50 ms cancel poll.
    pub fn new(clock: &'a dyn Clock) -> WorkflowRunOptions<'a> {
        WorkflowRunOptions {
            clock,
            exec: ExecOptions::default(),
            spawn_id: None,
            stop: None,
            resume: None,
            idempotency_key: None,
            loop_context: None,
            timeout_ms: None,
            cancel_poll: DEFAULT_CANCEL_POLL,
            on_step: None,
            on_spawn: None,
            on_idle: None,
            on_retry: None,
        }
    }
}

/// What [`execute_workflow`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowOutcome {
    /// The run this call created, resumed or found by its key, as stored at
    /// the end (never "the newest run of the workflow", SPEC §9 item 38).
    pub run: WorkflowRun,
    /// Its steps, in declaration order, as stored at the end.
    pub steps: Vec<StepRun>,
    /// The run mapped to an executor result (SPEC §6.7), as a loop run
    /// records it.
    pub result: ExecutorResult,
}

/// What running a workflow can fail with. A step that fails, including one
/// whose account cannot be resolved, is a failed step, not an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
    /// A step could not be started because it is running or finished
    /// elsewhere, or its run stopped running: the double-run guard of SPEC
    /// §6.3 step 5 (§10 items 79, 84). Another runner is executing the run,
    /// or its runner died; `workflows recover` resets the steps of a dead
    /// runner.
    #[error("workflow step is not claimable: {run_id}/{step_id} status={status}")]
    StepNotClaimable {
        /// The workflow run.
        run_id: String,
        /// The step.
        step_id: String,
        /// The step's current status.
        status: String,
    },
    /// [`WorkflowRunOptions::resume`] named a run that is not running.
    #[error(
        "workflow run {run_id} is {status}, not running; only a running run can be resumed \
         (`workflows recover` resets the steps of a running run whose runner died)"
    )]
    NotRunning {
        /// The run.
        run_id: WorkflowRunId,
        /// Its status.
        status: String,
    },
    /// [`WorkflowRunOptions::resume`] named a run of another workflow.
    #[error("workflow run {run_id} belongs to workflow {actual}, not {expected}")]
    WrongWorkflow {
        /// The run.
        run_id: WorkflowRunId,
        /// The workflow it belongs to.
        actual: String,
        /// The workflow that was to be run.
        expected: String,
    },
    /// A step would not start (SPEC §6.8 preflight): its executable is
    /// missing, its working directory is unusable, or its account does not
    /// resolve.
    /// The message includes the reason, so the reason is not also its
    /// `source`: an error chain (`{:#}`) would say it twice.
    #[error("workflow step {step_id}: {error}")]
    Preflight {
        /// The first step that failed, in execution order.
        step_id: String,
        /// Why.
        error: ExecError,
    },
}

impl From<StoreError> for WorkflowError {
    fn from(e: StoreError) -> WorkflowError {
        match e {
            StoreError::StepNotClaimable {
                run_id,
                step_id,
                status,
            } => WorkflowError::StepNotClaimable {
                run_id,
                step_id,
                status,
            },
            other => WorkflowError::Store(other),
        }
    }
}
