//! How [`execute_workflow`](crate::execute_workflow) runs a workflow:
//! [`WorkflowRunOptions`], with its clock, process settings, stop token,
//! resume and idempotency key, timeout, cancel poll and progress
//! callbacks.

use std::time::Duration;

use loops_core::{Clock, Loop, LoopRun, ProcessRef, StepRun, WorkflowRunId};
use loops_exec::{CancelToken, ExecOptions};
use loops_store::StoreError;

/// The default interval at which a running workflow checks whether another
/// process cancelled it.
pub const DEFAULT_CANCEL_POLL: Duration = Duration::from_millis(50);

/// [`WorkflowRunOptions::on_pool_wait`]: called with a step's id, its
/// pool's name and the pool's limit.
pub type OnPoolWait<'a> = dyn Fn(&str, &str, u32) + Sync + 'a;

/// How [`execute_workflow`](crate::execute_workflow) runs a workflow. [`WorkflowRunOptions::new`]
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
    /// `workflows recover`); otherwise
    /// [`WorkflowError::NotRunning`](crate::WorkflowError::NotRunning).
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
    /// Called with a step's id, its pool and the pool's limit when the
    /// step is ready but its pool is full (issue 30, Q2): the step stays
    /// pending and is started once a place frees. Said once per wait.
    pub on_pool_wait: Option<&'a OnPoolWait<'a>>,
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
            on_pool_wait: None,
        }
    }
}
