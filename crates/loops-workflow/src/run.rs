//! [`execute_workflow`]: one workflow run, from creation (or resumption) to
//! its final state (SPEC §6.3, §6.4, §6.5).
//!
//! The store thread (the caller's) makes every decision and every write, in
//! this order per step: the SPEC §6.3 checks 2.1 (has the run become
//! terminal?) and 2.2 (has the workflow timeout fired?) before each step is
//! decided, then the skip of a blocked step or the start of a ready one.
//! Started steps run on scoped worker threads ([`crate::worker`]) of a
//! [`Pool`], at most the workflow's `maxParallel` at once. Between reports
//! the store thread reads the run's status every `cancel_poll`, fires the
//! workflow timeout, and reacts to the stop token, whose waker interrupts
//! its wait at once.
//!
//! Invariants:
//! - Every step event is written by the store thread, so a step's
//!   `step_started` always precedes its `step_<status>`, and with
//!   `maxParallel` 1 the whole event log is SPEC §6.3's.
//! - A run that became terminal outside this runner (a cancel, a stop, a
//!   lease cascade) is never finalized again: its running steps are killed
//!   and stay as the cancel left them (SPEC §6.3 step 2.8).
//! - A turn is one [`Store::transaction`]: all of its writes are stored, or
//!   none. When the runner itself fails (a store error, the double-run
//!   guard), nothing of the failed turn is stored, the steps it still runs
//!   are killed and recorded failed before the error is returned, and the
//!   run stays running, so it can be recovered and resumed. A step whose
//!   finish was in the failed turn stays running in the store, with its
//!   pid, which recover finds dead.

mod ending;
mod finish;
mod pool_wait;
mod retry;
mod stop;
mod turn;

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use loops_core::{ExecutorResult, StepRun, Timestamp, WorkflowRun, WorkflowSpec};
use loops_exec::{CancelToken, Pool, RunContext};
use loops_store::{NewWorkflowRun, Store};

use self::ending::{Deadline, Ending};
use self::pool_wait::PoolWait;
use self::retry::{RETRY_FIRST, RETRY_MAX};
use crate::plan::Plan;
use crate::summary::workflow_result;
use crate::worker::{Report, StepJob, submit_step};
use crate::{WorkflowError, WorkflowRunOptions};

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

/// Runs `workflow` (SPEC §6.3) and returns the run it created, resumed or
/// found by its idempotency key, with its steps and its result.
///
/// **Which run.** With [`WorkflowRunOptions::resume`], that run, which must
/// still be running; otherwise a new run, or the one that already has the
/// idempotency key (SPEC §4.3). A terminal run found by its key is returned
/// as stored and nothing is spawned (SPEC §10 item 80). Succeeded, skipped
/// and cancelled steps of a resumed run are kept; the others run again.
///
/// **Order.** Steps run in execution order (SPEC §6.2), up to the
/// workflow's `maxParallel` at once (1 when unset: SPEC §6.3's serial walk,
/// event for event). A step starts once all its dependencies finished. A
/// step whose dependency did not succeed and lacks `continueOnFailure` is
/// skipped with `dependency did not succeed: <dep>` and fails the run. A
/// step that fails without `continueOnFailure` fails the run with
/// `step <id> <status>[: <error>]`: no new step starts, steps already
/// running finish and keep their results, and the rest are skipped with
/// that reason. A failed step with `continueOnFailure` does not fail the
/// run (SPEC §9 item 35, kept).
///
/// **Stopping.** A cancel written by another process is noticed within
/// [`WorkflowRunOptions::cancel_poll`]; the [`WorkflowRunOptions::stop`]
/// token records the run cancelled with its reason. Either way the running
/// steps' process groups are killed, the killed steps stay cancelled, and
/// the result is the cancelled run (status failed, SPEC §6.7). The workflow
/// timeout makes the running step and the run timed_out (SPEC §6.4).
///
/// `Err` is for failures of loops itself: the store, a step that another
/// runner holds ([`WorkflowError::StepNotClaimable`], the double-run guard),
/// or a resume that cannot apply. A step's own failure, including an
/// account that does not resolve, is a failed step.
///
/// ```
/// use std::sync::Arc;
/// use loops_core::{
///     Clock, ExecutorStatus, ManualClock, StepRunStatus, WorkflowRunStatus, workflow_from_json,
/// };
/// use loops_store::Store;
/// use loops_workflow::{WorkflowRunOptions, execute_workflow};
///
/// let store = Store::open_in_memory(Arc::new(|_| false))?;
/// let clock = ManualClock::new("2026-01-01T00:00:00Z".parse()?);
/// let file = serde_json::json!({"name": "release", "steps": [
///     {"id": "build", "target": {"type": "command", "command": "echo built; exit 1", "shell": true}},
///     {"id": "ship", "dependsOn": ["build"],
///      "target": {"type": "command", "command": "echo shipped", "shell": true}},
/// ]});
/// let workflow = store.create_workflow(&workflow_from_json(&file, None)?, clock.now())?;
///
/// let outcome = execute_workflow(&store, &workflow, &WorkflowRunOptions::new(&clock))?;
/// // A failing step is a failed run, not an `Err`; what depends on it never starts.
/// assert_eq!(outcome.run.status, WorkflowRunStatus::Failed);
/// let steps: Vec<_> = outcome.steps.iter().map(|s| (s.step_id.as_str(), s.status)).collect();
/// assert_eq!(steps, [("build", StepRunStatus::Failed), ("ship", StepRunStatus::Skipped)]);
/// assert_eq!(outcome.result.status, ExecutorStatus::Failed); // as a loop run records it
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn execute_workflow(
    store: &Store,
    workflow: &WorkflowSpec,
    opts: &WorkflowRunOptions<'_>,
) -> Result<WorkflowOutcome, WorkflowError> {
    let began = Instant::now();
    let run = open_run(store, workflow, opts)?;
    if run.status.is_terminal() {
        let steps = store.list_step_runs(&run.id)?;
        let result = workflow_result(&run, &steps, None, opts.exec.max_output_bytes);
        return Ok(WorkflowOutcome { run, steps, result });
    }
    // A run just created without a key has only pending steps; any other
    // (resumed, or found by its key) may have settled some.
    let fresh = opts.resume.is_none() && opts.idempotency_key.is_none();
    let rows = if fresh {
        Vec::new()
    } else {
        store.list_step_runs(&run.id)?
    };
    let deadline = opts
        .timeout_ms
        .filter(|ms| *ms > 0)
        .and_then(|ms| {
            let at = began.checked_add(Duration::from_millis(ms))?;
            Some(Deadline::Pending { at, ms })
        })
        .unwrap_or(Deadline::Never);
    let mut runner = Runner {
        store,
        workflow,
        opts,
        plan: Plan::new(&workflow.steps, &rows),
        max_parallel: usize::try_from(workflow.parallelism()).unwrap_or(1),
        run,
        inflight: HashMap::new(),
        ending: Ending::Succeeding,
        deadline,
        turn: Turn::Outside,
        backlog: VecDeque::new(),
        pool_wait: PoolWait::new(),
    };
    runner.drive()?;
    runner.finish()
}

/// The run to execute: the one to resume, the one with the key, or a new
/// one (SPEC §6.3 step 1).
fn open_run(
    store: &Store,
    workflow: &WorkflowSpec,
    opts: &WorkflowRunOptions<'_>,
) -> Result<WorkflowRun, WorkflowError> {
    if let Some(id) = &opts.resume {
        let run = store.require_workflow_run(id)?;
        if run.workflow_id != workflow.id {
            return Err(WorkflowError::WrongWorkflow {
                run_id: run.id,
                actual: run.workflow_id.to_string(),
                expected: workflow.id.to_string(),
            });
        }
        if run.status.is_terminal() {
            return Err(WorkflowError::NotRunning {
                run_id: run.id,
                status: run.status.to_string(),
            });
        }
        return Ok(run);
    }
    let mut new = NewWorkflowRun::new(workflow);
    if let Some((_, loop_run)) = opts.loop_context {
        new = new.for_loop_run(loop_run);
    }
    if let Some(key) = &opts.idempotency_key {
        new = new.with_key(key.clone());
    }
    Ok(store.create_workflow_run(&new, opts.clock.now())?)
}

/// `workflow timed out after <ms>ms` (SPEC §6.4).
fn timeout_message(ms: u64) -> String {
    format!("workflow timed out after {ms}ms")
}
/// A step executing on a worker.
#[derive(Clone)]
struct InFlight {
    cancel: CancelToken,
    /// Whether the workflow timeout is what cancelled it.
    by_timeout: bool,
}

/// The store thread's state for one run.
struct Runner<'r> {
    store: &'r Store,
    workflow: &'r WorkflowSpec,
    opts: &'r WorkflowRunOptions<'r>,
    plan: Plan<'r>,
    max_parallel: usize,
    run: WorkflowRun,
    inflight: HashMap<usize, InFlight>,
    /// How the run ends unless something else ends it first.
    ending: Ending,
    /// The workflow timeout.
    deadline: Deadline,
    /// Where the store thread is with respect to a turn's transaction.
    turn: Turn,
    /// Reports not applied yet: arrived, or taken back from a turn that did
    /// not commit.
    backlog: VecDeque<Report>,
    /// The steps waiting for room in their pools.
    pool_wait: PoolWait,
}

/// Whether the store thread is inside a turn's write transaction, and what
/// it already knows there.
///
/// A turn holds the database's write lock from its first statement to its
/// commit, so no other process can end the run in between: once the run
/// was seen running in a turn, it stays running until the commit, unless
/// this runner ends it, which it tracks itself. The SPEC §6.3 step 2.1
/// check before each step then costs one read per turn instead of one per
/// step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// No transaction: every check reads the run.
    Outside,
    /// In a transaction, the run not yet read.
    Unchecked,
    /// In a transaction, the run read and found running.
    SeenRunning,
}

impl<'r> Runner<'r> {
    fn now(&self) -> Timestamp {
        self.opts.clock.now()
    }

    /// Starts, supervises and finishes steps until none is left to start
    /// and none is running.
    fn drive(&mut self) -> Result<(), WorkflowError> {
        let (tx, rx) = mpsc::channel::<Report>();
        // A stop interrupts the wait below at once, however long the poll.
        let _stop_wake = self.opts.stop.map(|stop| {
            let tx = tx.clone();
            stop.subscribe(move || {
                let _ = tx.send(Report::Stop);
            })
        });
        let exec = &self.opts.exec;
        let ctx = RunContext {
            clock: self.opts.clock,
            cancel: None,
            spawn_id: self.opts.spawn_id,
            log: None,
            // A step's silence is not recorded (its run has no heartbeat).
            output_seen: None,
        };
        std::thread::scope(|scope| {
            let mut pool = Pool::new(scope, tx.clone());
            let mut spawn = |job: StepJob<'r>| submit_step(&mut pool, job, exec, ctx, tx.clone());
            let outcome = self.supervise(&rx, &mut spawn);
            if let Err(e) = &outcome {
                self.abandon(&rx, e);
            }
            // Idle workers end with the pool; the scope then joins them.
            drop(pool);
            outcome
        })
    }

    fn supervise(
        &mut self,
        rx: &Receiver<Report>,
        spawn: &mut dyn FnMut(StepJob<'r>),
    ) -> Result<(), WorkflowError> {
        let poll = self.opts.cancel_poll.max(Duration::from_millis(1));
        let mut next_poll = Instant::now() + poll;
        let store = self.store;
        // After a turn failed on a transient store error: when to try again,
        // and the wait that led there.
        let mut retry: Option<(Instant, Duration)> = None;
        loop {
            // One commit per turn: the reports that arrived (and those
            // waiting behind them), then the steps that can start. The
            // started steps are spawned only after that commit: a step
            // never runs without its start on disk, so a crash of the
            // runner cannot lead a resume to run it twice.
            self.retry_parked();
            if retry.is_some_and(|(at, _)| Instant::now() < at) {
                // Backing off: nothing is written until the retry is due.
            } else if self.backlog.is_empty() && !self.can_start() {
                // A poll turn with nothing arrived and nothing to start:
                // no batch, so no write lock taken while steps run.
                self.check_stop()?;
                self.check_deadline();
                self.time_out_waits();
            } else {
                let mut ready = Vec::new();
                let mut applied = Vec::new();
                let before = self.snapshot();
                self.turn = Turn::Unchecked;
                let turn = store.transaction(|| {
                    while let Some(report) = self.backlog.pop_front().or_else(|| rx.try_recv().ok())
                    {
                        // Kept until the commit, to be applied again if it
                        // fails; a step's output is not copied for that.
                        let outcome = match &report {
                            Report::Spawned(pos, process) => self.spawned(*pos, *process),
                            Report::Done(pos, result) => self.complete(*pos, result),
                            Report::Stop => Ok(()),
                        };
                        applied.push(report);
                        outcome?;
                    }
                    self.check_stop()?;
                    self.check_deadline();
                    self.time_out_waits();
                    self.forget_full_pools();
                    self.dispatch(&mut |job| ready.push(job))
                });
                self.turn = Turn::Outside;
                match turn {
                    Err(WorkflowError::Store(e)) if e.is_transient() && !self.stop_fired() => {
                        // Nothing of the turn committed: go back to before
                        // it, and apply its reports again after a backoff.
                        // Its started steps were never spawned.
                        self.restore(before);
                        for report in applied.into_iter().rev() {
                            self.backlog.push_front(report);
                        }
                        let delay = match retry {
                            Some((_, last)) => (last * 2).min(RETRY_MAX),
                            None => {
                                if let Some(on_retry) = self.opts.on_retry {
                                    on_retry(&e);
                                }
                                RETRY_FIRST
                            }
                        };
                        retry = Some((Instant::now() + delay, delay));
                        continue;
                    }
                    Err(e) => {
                        for job in &ready {
                            self.inflight.remove(&job.pos);
                        }
                        return Err(e);
                    }
                    Ok(()) => retry = None,
                }
                for job in ready {
                    spawn(job);
                }
            }
            self.schedule_pool_retry();
            if self.inflight.is_empty()
                && self.backlog.is_empty()
                && retry.is_none()
                && !self.waits_for_pools()
            {
                return Ok(());
            }
            let now = Instant::now();
            let mut wait = next_poll.saturating_duration_since(now);
            if let Deadline::Pending { at, .. } = self.deadline {
                wait = wait.min(at.saturating_duration_since(now));
            }
            if let Some((at, _)) = retry {
                wait = wait.min(at.saturating_duration_since(now));
            }
            if let Some(at) = self.pool_wait.retry_at() {
                wait = wait.min(at.saturating_duration_since(now));
            }
            let report = match rx.try_recv() {
                Ok(report) => Ok(report),
                Err(_) => {
                    // Nothing to do until a step reports or a poll is due.
                    if let Some(on_idle) = self.opts.on_idle {
                        on_idle();
                    }
                    rx.recv_timeout(wait)
                }
            };
            match report {
                Ok(report) => self.backlog.push_back(report),
                Err(RecvTimeoutError::Timeout) => {}
                // This thread holds a sender, so the channel cannot close.
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
            if Instant::now() >= next_poll {
                next_poll = Instant::now() + poll;
                // SPEC §6.5: a cancel written by another process.
                if !self.inflight.is_empty() || self.waits_for_pools() {
                    self.check_terminal()?;
                }
            }
        }
    }
    fn report_step(&self, row: &StepRun) {
        if let Some(on_step) = self.opts.on_step {
            on_step(row);
        }
    }
}
