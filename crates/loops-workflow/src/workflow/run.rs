//! [`execute_workflow`]: one workflow run, from creation (or resumption) to
//! its final state (SPEC §6.3, §6.4, §6.5).
//!
//! The store thread (the caller's) makes every decision and every write, in
//! this order per step: the SPEC §6.3 checks 2.1 (has the run become
//! terminal?) and 2.2 (has the workflow timeout fired?) before each step is
//! decided, then the skip of a blocked step or the start of a ready one.
//! Started steps run on scoped worker threads ([`super::worker`]) of a
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

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use loops_core::{
    ExecutorResult, ExecutorStatus, ProcessRef, Step, StepRun, StepRunStatus, Timestamp,
    WorkflowRun, WorkflowRunStatus, WorkflowSpec,
};
use loops_exec::{CancelToken, RunMetadata};
use loops_store::{NewWorkflowRun, StepOutcome, Store, StoreError, WorkflowRunPatch};

use super::plan::{Next, Plan, PlanSnapshot};
use super::summary::workflow_result;
use super::worker::{Report, StepJob, run_step};
use super::{WorkflowError, WorkflowOutcome, WorkflowRunOptions};
use crate::executor::loop_metadata;
use crate::pool::Pool;

/// The reason a run's remaining steps are skipped with when it stopped
/// because another process made it terminal (SPEC §6.3 step 2.1).
const ENDED_ELSEWHERE: &str = "workflow run was cancelled";
/// The skip reason when the run stopped without a reason (SPEC §6.3 step 3).
const STOPPED: &str = "workflow stopped before step could run";

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
    let timeout = opts
        .timeout_ms
        .filter(|ms| *ms > 0)
        .and_then(|ms| Some((began.checked_add(Duration::from_millis(ms))?, ms)));
    let mut runner = Runner {
        store,
        workflow,
        opts,
        plan: Plan::new(&workflow.steps, &rows),
        max_parallel: usize::try_from(workflow.parallelism()).unwrap_or(1),
        run,
        inflight: HashMap::new(),
        outcome: WorkflowRunStatus::Succeeded,
        reason: None,
        halted: false,
        ended: false,
        stopped: false,
        timeout,
        timed_out: false,
        turn: Turn::Outside,
        flushed: false,
        backlog: VecDeque::new(),
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

/// The first wait before a turn or the run's end whose write failed on a
/// transient store error is tried again; it doubles up to
/// [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between two attempts.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// The runner's state before a turn, restored when the turn's transaction
/// did not commit, so the turn can be applied again.
struct Snapshot {
    plan: PlanSnapshot,
    inflight: HashMap<usize, InFlight>,
    run: WorkflowRun,
    outcome: WorkflowRunStatus,
    reason: Option<String>,
    halted: bool,
    ended: bool,
    stopped: bool,
    timed_out: bool,
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
    outcome: WorkflowRunStatus,
    /// The run's error, and the reason its remaining steps are skipped.
    reason: Option<String>,
    /// No further step starts.
    halted: bool,
    /// The run became terminal outside this runner's finalize.
    ended: bool,
    /// The stop token has been handled.
    stopped: bool,
    /// The workflow timeout's deadline and length.
    timeout: Option<(Instant, u64)>,
    timed_out: bool,
    /// Where the store thread is with respect to a turn's transaction.
    turn: Turn,
    /// [`Store::flush_wal_early`] was called.
    flushed: bool,
    /// Reports not applied yet: arrived, or taken back from a turn that did
    /// not commit.
    backlog: VecDeque<Report>,
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
        let clock = self.opts.clock;
        std::thread::scope(|scope| {
            let mut pool = Pool::new(scope, tx.clone());
            let mut spawn = |job: StepJob<'r>| {
                let tx = tx.clone();
                pool.submit(move || run_step(job, exec, clock, &tx));
            };
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
            if retry.is_some_and(|(at, _)| Instant::now() < at) {
                // Backing off: nothing is written until the retry is due.
            } else if self.backlog.is_empty() && !self.can_start() {
                // A poll turn with nothing arrived and nothing to start:
                // no batch, so no write lock taken while steps run.
                self.check_stop()?;
                self.check_deadline();
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
                if !self.flushed && matches!(self.plan.next(), Next::Finished) {
                    // Every step has started or is decided: what is left
                    // is their finishes, a few small commits. Let the WAL
                    // reach the disk meanwhile, so the store's close waits
                    // less for it.
                    self.flushed = true;
                    store.flush_wal_early();
                }
            }
            if self.inflight.is_empty() && self.backlog.is_empty() && retry.is_none() {
                return Ok(());
            }
            let now = Instant::now();
            let mut wait = next_poll.saturating_duration_since(now);
            if let Some((deadline, _)) = self.timeout.filter(|_| !self.timed_out) {
                wait = wait.min(deadline.saturating_duration_since(now));
            }
            if let Some((at, _)) = retry {
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
                if !self.inflight.is_empty() {
                    self.check_terminal()?;
                }
            }
        }
    }

    /// The state a turn starts from (see [`Snapshot`]).
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            plan: self.plan.snapshot(),
            inflight: self.inflight.clone(),
            run: self.run.clone(),
            outcome: self.outcome,
            reason: self.reason.clone(),
            halted: self.halted,
            ended: self.ended,
            stopped: self.stopped,
            timed_out: self.timed_out,
        }
    }

    /// Goes back to `snapshot` after a turn that did not commit. A kill the
    /// turn already sent stays sent; its step reports as killed.
    fn restore(&mut self, snapshot: Snapshot) {
        self.plan.restore(snapshot.plan);
        self.inflight = snapshot.inflight;
        self.run = snapshot.run;
        self.outcome = snapshot.outcome;
        self.reason = snapshot.reason;
        self.halted = snapshot.halted;
        self.ended = snapshot.ended;
        self.stopped = snapshot.stopped;
        self.timed_out = snapshot.timed_out;
    }

    /// The stop token fired: a write that keeps failing is given up then,
    /// and the run ends with the error.
    fn stop_fired(&self) -> bool {
        self.opts.stop.is_some_and(CancelToken::is_cancelled)
    }

    /// Whether [`Runner::dispatch`] would start or skip a step now.
    fn can_start(&self) -> bool {
        !self.halted
            && self.inflight.len() < self.max_parallel
            && !matches!(self.plan.next(), Next::Wait | Next::Finished)
    }

    /// Starts or skips steps while there is room (SPEC §6.3 step 2).
    fn dispatch(&mut self, spawn: &mut dyn FnMut(StepJob<'r>)) -> Result<(), WorkflowError> {
        while !self.halted && self.inflight.len() < self.max_parallel {
            let next = self.plan.next();
            if matches!(next, Next::Wait | Next::Finished) {
                break;
            }
            // SPEC §6.3 steps 2.1 and 2.2, before every step.
            if self.check_terminal()? {
                break;
            }
            if self.timed_out {
                let ms = self.timeout.map_or(0, |(_, ms)| ms);
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
        self.reason
            .get_or_insert_with(|| format!("step {} blocked by dependency {dep}", step.id));
        self.outcome = WorkflowRunStatus::Failed;
        Ok(())
    }

    /// SPEC §6.3 steps 2.5 and 2.6: start the step and hand it to a worker.
    fn start(
        &mut self,
        pos: usize,
        spawn: &mut dyn FnMut(StepJob<'r>),
    ) -> Result<(), WorkflowError> {
        let step = self.plan.step(pos);
        let now = self.now();
        let row = match self.store.start_step_run(&self.run.id, &step.id, now) {
            Ok(row) => row,
            // A cancel that landed between the check and the start is a
            // cancel, not a double run.
            Err(StoreError::StepNotClaimable { .. }) if self.check_terminal()? => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        self.report_step(&row);
        self.plan.start(pos);
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
            Some((lp, loop_run)) => loop_metadata(lp, loop_run),
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
    fn spawned(&mut self, pos: usize, process: ProcessRef) -> Result<(), WorkflowError> {
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
    fn complete(&mut self, pos: usize, result: &ExecutorResult) -> Result<(), WorkflowError> {
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
                error: Some(timeout_message(self.timeout.map_or(0, |(_, ms)| ms))),
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
        if result.status != ExecutorStatus::Succeeded && !step.continue_on_failure && !self.halted {
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
    fn halt(&mut self, status: WorkflowRunStatus, reason: String) {
        self.halted = true;
        self.outcome = status;
        self.reason = Some(reason);
    }

    /// The stop token: cancel the run in the store (fail it, when the loop
    /// run's lease was lost), then kill its steps.
    fn check_stop(&mut self) -> Result<(), WorkflowError> {
        if self.stopped {
            return Ok(());
        }
        let Some(reason) = self.opts.stop.and_then(CancelToken::reason) else {
            return Ok(());
        };
        self.stopped = true;
        // The cancel is recorded before the kill, so the step's killed
        // result can never be finalized over it.
        let now = self.now();
        // A lost lease is not a cancel anyone asked for: the run failed
        // (SPEC §10 item 98).
        let run = if reason == crate::dispatch::RUN_LEASE_LOST {
            self.store.fail_workflow_run(&self.run.id, &reason, now)?
        } else {
            self.store.cancel_workflow_run(&self.run.id, &reason, now)?
        };
        self.ended_elsewhere(run);
        Ok(())
    }

    /// Fires the workflow timeout once its deadline has passed (SPEC §6.4).
    fn check_deadline(&mut self) {
        let Some((deadline, ms)) = self.timeout else {
            return;
        };
        if self.timed_out || Instant::now() < deadline {
            return;
        }
        self.timed_out = true;
        let message = timeout_message(ms);
        for flight in self.inflight.values_mut() {
            flight.by_timeout = !flight.cancel.is_cancelled();
            flight.cancel.cancel(message.clone());
        }
    }

    /// Whether the run is terminal, reading its status from the store; a
    /// terminal run stops this runner (SPEC §6.3 step 2.1).
    fn check_terminal(&mut self) -> Result<bool, WorkflowError> {
        if self.ended {
            return Ok(true);
        }
        if self.turn == Turn::SeenRunning {
            return Ok(false);
        }
        match self.store.workflow_run_status(&self.run.id)? {
            Some(status) if status.is_terminal() => {
                let run = self.store.require_workflow_run(&self.run.id)?;
                self.ended_elsewhere(run);
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

    /// The run became terminal outside this runner: kill every running step
    /// with the run's error and start nothing more.
    fn ended_elsewhere(&mut self, run: WorkflowRun) {
        if !self.ended && run.status.is_terminal() {
            self.ended = true;
            self.halted = true;
            self.outcome = run.status;
            self.reason = Some(ENDED_ELSEWHERE.to_owned());
            let why = run
                .error
                .clone()
                .unwrap_or_else(|| format!("workflow run {}", run.status));
            for flight in self.inflight.values() {
                flight.cancel.cancel(why.clone());
            }
        }
        self.run = run;
    }

    /// The runner failed: kill the steps still running and record them as
    /// failed, best effort, so a resume runs them again.
    fn abandon(&mut self, rx: &Receiver<Report>, error: &WorkflowError) {
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
                            &StepOutcome::from(&result),
                            now,
                        );
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }

    fn report_step(&self, row: &StepRun) {
        if let Some(on_step) = self.opts.on_step {
            on_step(row);
        }
    }

    /// SPEC §6.3 steps 3 and 4: skip what did not run, finalize the run
    /// unless it ended elsewhere, and map it to a result.
    fn finish(mut self) -> Result<WorkflowOutcome, WorkflowError> {
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
            self.reason.as_deref(),
            self.opts.exec.max_output_bytes,
        );
        Ok(WorkflowOutcome { run, steps, result })
    }

    /// Skips the steps that did not run and finalizes the run, in one
    /// transaction, so a failure leaves nothing half written to try again.
    fn record_end(&mut self) -> Result<WorkflowRun, WorkflowError> {
        let store = self.store;
        store.transaction(|| self.record_end_in_tx())
    }

    fn record_end_in_tx(&mut self) -> Result<WorkflowRun, WorkflowError> {
        let now = self.now();
        if !self.ended && self.outcome == WorkflowRunStatus::Succeeded && self.plan.has_undecided()
        {
            // Only a dependency cycle in a stored spec leaves a step that
            // can never start; fail rather than report success.
            self.outcome = WorkflowRunStatus::Failed;
        }
        if self.outcome != WorkflowRunStatus::Succeeded {
            let reason = self.reason.as_deref().unwrap_or(STOPPED);
            for row in self.store.skip_open_steps(&self.run.id, reason, now)? {
                self.report_step(&row);
            }
        }
        let run = if self.ended {
            self.store.require_workflow_run(&self.run.id)?
        } else {
            let started = self.run.started_at.unwrap_or(self.run.created_at);
            let patch = WorkflowRunPatch {
                finished_at: Some(now),
                duration_ms: Some(now.millis_since(started).max(0)),
                error: self.reason.clone(),
            };
            // A run that ended elsewhere meanwhile is returned as stored.
            self.store
                .finalize_workflow_run(&self.run.id, self.outcome, &patch, now)?
        };
        Ok(run)
    }
}
