//! The scheduler: `tick` and `run_now` (SPEC §3).
//!
//! A tick runs, in order: recover expired leases (which advances their
//! loops), expire loops, plan the due slots of every due loop, apply the
//! overlap skip, claim, execute, and finalize-and-advance each run in one
//! store transaction.
//!
//! Unlike the original (SPEC §9 item 1), independent loops execute
//! concurrently, up to [`TickOptions::max_parallel`] runs at once, so one
//! slow agent run does not hold up every other loop. The slots of one loop
//! still run one after another, in order, and a failure that schedules a
//! retry drops that loop's remaining slots (SPEC §3.1 step 6).
//!
//! The calling thread owns the [`Store`]: it claims, records pids, renews
//! leases and finalizes. Executions run on scoped worker threads and report
//! back over a channel, so a slow `accounts env` call or a slow child never
//! delays a heartbeat (SPEC §9 item 13).
//!
//! A tick that fails (a store error) cancels the runs it still has in
//! flight before returning, since nobody would heartbeat or finalize them;
//! an executor that panics fails its run instead of leaving the tick
//! waiting for a report that never comes; and a run whose row was deleted
//! while it executed is reported through `on_error` without aborting the
//! other loops' runs.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use loops_core::{
    ExecutorResult, ExecutorStatus, Loop, LoopRun, Overlap, ProcessRef, RunId, RunStatus,
    Timestamp, due_slots,
};
use loops_exec::CancelToken;
use loops_store::{Claim, Fence, OVERLAP_SKIP_REASON, SkipOutcome, Store, StoreError};
use serde::Serialize;

use crate::clock::Clock;
use crate::executor::{RunControl, RunExecutor};

/// The default number of runs a tick executes at once.
pub const DEFAULT_MAX_PARALLEL: usize = 8;

/// What a scheduler operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `run-now` could not claim its slot: it is running or already done
    /// (SPEC §3.5).
    #[error("could not claim manual run")]
    CouldNotClaim,
}

/// Everything a tick needs (SPEC §3.1 `tick` deps).
pub struct TickOptions<'a> {
    /// Recorded as `claimed_by`.
    pub runner_id: &'a str,
    /// Where "now" comes from.
    pub clock: &'a dyn Clock,
    /// Runs the claimed runs.
    pub executor: &'a dyn RunExecutor,
    /// Most runs executing at once; at least 1.
    pub max_parallel: usize,
    /// When cancelled, no further slot is started; runs in flight are
    /// cancelled with the token's reason.
    pub stop: Option<&'a CancelToken>,
    /// Called with every run as it is claimed, skipped or finished.
    pub on_run: Option<&'a dyn Fn(&LoopRun)>,
    /// Called when a loop fails: a schedule error or an executor error.
    // The callback's signature is the documentation; an alias would only
    // hide it.
    #[allow(clippy::type_complexity)]
    pub on_error: Option<&'a dyn Fn(&Loop, &str)>,
}

/// What a tick did (SPEC §3.1 step 7). The JSON has exactly these keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TickResult {
    /// Runs left running (only in fence and skip edge cases).
    pub claimed: Vec<LoopRun>,
    /// Runs that finished.
    pub completed: Vec<LoopRun>,
    /// Overlap skips.
    pub skipped: Vec<LoopRun>,
    /// Runs abandoned by lease recovery.
    pub recovered: Vec<LoopRun>,
    /// Loops that expired.
    pub expired: Vec<Loop>,
}

impl TickResult {
    fn sort(&mut self, run: LoopRun) {
        match run.status {
            RunStatus::Running => self.claimed.push(run),
            RunStatus::Skipped => self.skipped.push(run),
            _ => self.completed.push(run),
        }
    }

    /// True when the tick changed nothing.
    pub fn is_empty(&self) -> bool {
        self.claimed.is_empty()
            && self.completed.is_empty()
            && self.skipped.is_empty()
            && self.recovered.is_empty()
            && self.expired.is_empty()
    }
}

/// The heartbeat period of a run lease: `max(10, min(60000, ⌊leaseMs/3⌋))`
/// milliseconds (SPEC §3.3).
pub fn heartbeat_period(lease_ms: u64) -> Duration {
    Duration::from_millis((lease_ms / 3).clamp(10, 60_000))
}

/// Runs one scheduler tick (SPEC §3.1).
pub fn tick(store: &Store, opts: &TickOptions<'_>) -> Result<TickResult, SchedulerError> {
    let now = opts.clock.now();
    let mut result = TickResult::default();

    for recovered in store.recover_expired_run_leases(now)? {
        result.recovered.push(recovered.run);
    }
    result.expired = store.expire_loops(now)?;

    let mut queue: VecDeque<LoopWork> = VecDeque::new();
    for lp in store.due_loops(now, u32::MAX)? {
        match due_slots(&lp, now) {
            Ok(slots) if !slots.is_empty() => queue.push_back(LoopWork {
                attempts_at_plan: lp.max_attempts,
                slots: slots.into(),
                lp,
            }),
            Ok(_) => {}
            Err(e) => report_error(opts, &lp, &e.to_string()),
        }
    }

    let mut dispatcher = Dispatcher::new(store, opts, FinalizeMode::Advance);
    dispatcher.run(queue, &mut result)?;
    Ok(result)
}

/// The slot a manual run uses (SPEC §3.5 step 1): the due slot
/// (`retryScheduledFor ?? nextRunAt`) when the loop is due, else `now`.
pub fn manual_run_scheduled_for(lp: &Loop, now: Timestamp) -> Timestamp {
    match lp.next_run_at {
        Some(next) if next <= now => lp.retry_scheduled_for.unwrap_or(next),
        _ => now,
    }
}

/// Whether a manual run on `slot` advances the loop (SPEC §3.5 step 4):
/// only when it ran the loop's due slot.
pub fn should_advance_manual_run(lp: &Loop, slot: Timestamp, now: Timestamp) -> bool {
    match lp.next_run_at {
        Some(next) if next <= now => slot == lp.retry_scheduled_for.unwrap_or(next),
        _ => false,
    }
}

/// Runs a loop now (SPEC §3.5), ignoring its status and overlap policy.
///
/// The run is claimed, executed with heartbeats and finalized under the
/// same fence; the loop advances only when the run used its due slot.
pub fn run_now(
    store: &Store,
    lp: &Loop,
    opts: &TickOptions<'_>,
) -> Result<LoopRun, SchedulerError> {
    let now = opts.clock.now();
    let slot = manual_run_scheduled_for(lp, now);
    let mode = if should_advance_manual_run(lp, slot, now) {
        FinalizeMode::Advance
    } else {
        FinalizeMode::FinalizeOnly
    };
    let (run, claimed_loop) = match store.claim_run(lp, slot, opts.runner_id, now)? {
        Claim::Claimed { run, loop_ } => (run, loop_),
        Claim::NotClaimed(_) => return Err(SchedulerError::CouldNotClaim),
    };
    let mut dispatcher = Dispatcher::new(store, opts, mode);
    let mut result = TickResult::default();
    dispatcher.run_claimed(claimed_loop, run, &mut result)?;
    if let Some(run) = result.completed.into_iter().chain(result.claimed).next() {
        return Ok(run);
    }
    // The only way to finish without a row: it was deleted mid-run.
    Err(match dispatcher.vanished {
        Some(e) => SchedulerError::Store(e),
        None => SchedulerError::CouldNotClaim,
    })
}

fn report_error(opts: &TickOptions<'_>, lp: &Loop, message: &str) {
    if let Some(on_error) = opts.on_error {
        on_error(lp, message);
    }
}

fn report_run(opts: &TickOptions<'_>, run: &LoopRun) {
    if let Some(on_run) = opts.on_run {
        on_run(run);
    }
}

/// The remaining slots of one due loop.
struct LoopWork {
    lp: Loop,
    slots: VecDeque<Timestamp>,
    /// `maxAttempts` as the tick planned with it (SPEC §3.1 step 6 uses the
    /// loop's state from the plan).
    attempts_at_plan: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FinalizeMode {
    /// Finalize and advance the loop in one transaction.
    Advance,
    /// Finalize only: an ad-hoc manual run never moves `nextRunAt`.
    FinalizeOnly,
}

/// A message from a worker thread to the store-owning thread.
enum Report {
    /// The stop token was cancelled.
    Stop,
    Spawned(RunId, ProcessRef),
    Done(RunId, Result<ExecutorResult, String>),
}

struct InFlight {
    work: LoopWork,
    run: LoopRun,
    cancel: CancelToken,
    period: Duration,
    next_heartbeat: Instant,
}

/// Dispatches claimed runs to worker threads and applies their reports to
/// the store from the calling thread.
struct Dispatcher<'s, 'o> {
    store: &'s Store,
    opts: &'o TickOptions<'o>,
    mode: FinalizeMode,
    /// The first run whose row vanished before its finalize (its loop was
    /// deleted with its history while it ran).
    vanished: Option<StoreError>,
}

impl<'s, 'o> Dispatcher<'s, 'o> {
    fn new(store: &'s Store, opts: &'o TickOptions<'o>, mode: FinalizeMode) -> Self {
        Dispatcher {
            store,
            opts,
            mode,
            vanished: None,
        }
    }

    fn stopping(&self) -> bool {
        self.opts.stop.is_some_and(CancelToken::is_cancelled)
    }

    /// Executes one already-claimed run.
    fn run_claimed(
        &mut self,
        lp: Loop,
        run: LoopRun,
        result: &mut TickResult,
    ) -> Result<(), SchedulerError> {
        let work = LoopWork {
            attempts_at_plan: lp.max_attempts,
            lp,
            slots: VecDeque::new(),
        };
        self.drive(VecDeque::new(), Some((work, run)), result)
    }

    /// Plans, claims and executes every queued slot.
    fn run(
        &mut self,
        queue: VecDeque<LoopWork>,
        result: &mut TickResult,
    ) -> Result<(), SchedulerError> {
        self.drive(queue, None, result)
    }

    fn drive(
        &mut self,
        mut queue: VecDeque<LoopWork>,
        first: Option<(LoopWork, LoopRun)>,
        result: &mut TickResult,
    ) -> Result<(), SchedulerError> {
        let max_parallel = self.opts.max_parallel.max(1);
        let executor = self.opts.executor;
        let (tx, rx) = mpsc::channel::<Report>();
        // A stop wakes the dispatcher at once, however far away the next
        // heartbeat is.
        let _stop_wake = self.opts.stop.map(|stop| {
            let tx = tx.clone();
            stop.subscribe(move || {
                let _ = tx.send(Report::Stop);
            })
        });
        std::thread::scope(|scope| -> Result<(), SchedulerError> {
            let mut inflight: HashMap<RunId, InFlight> = HashMap::new();
            let start = |work: LoopWork, run: LoopRun, inflight: &mut HashMap<RunId, InFlight>| {
                let cancel = CancelToken::new();
                let period = heartbeat_period(work.lp.lease_ms);
                let tx = tx.clone();
                let (lp, worker_run, worker_cancel) =
                    (work.lp.clone(), run.clone(), cancel.clone());
                scope.spawn(move || {
                    let spawn_tx = tx.clone();
                    let run_id = worker_run.id;
                    let on_spawn = move |p: ProcessRef| {
                        // The receiver lives until every worker is done.
                        let _ = spawn_tx.send(Report::Spawned(run_id, p));
                    };
                    let control = RunControl {
                        cancel: worker_cancel,
                        on_spawn: &on_spawn,
                    };
                    // A panicking executor must still report back: without a
                    // `Done` the dispatcher would wait, and heartbeat the
                    // lease, forever. The panic becomes a failed run.
                    let outcome = catch_unwind(AssertUnwindSafe(|| {
                        executor.execute(&lp, &worker_run, &control)
                    }))
                    .unwrap_or_else(|panic| {
                        Err(format!("executor panicked: {}", panic_message(&*panic)))
                    });
                    let _ = tx.send(Report::Done(run_id, outcome));
                });
                inflight.insert(
                    run.id,
                    InFlight {
                        work,
                        run,
                        cancel,
                        period,
                        next_heartbeat: Instant::now() + period,
                    },
                );
            };

            let mut stop_sent = false;
            if let Some((work, run)) = first {
                report_run(self.opts, &run);
                start(work, run, &mut inflight);
            }

            let outcome = (|| -> Result<(), SchedulerError> {
                loop {
                    // Start slots while there is room.
                    while inflight.len() < max_parallel && !self.stopping() {
                        let Some(mut work) = queue.pop_front() else {
                            break;
                        };
                        let Some(slot) = work.slots.pop_front() else {
                            continue;
                        };
                        match self.begin_slot(&work.lp, slot, result)? {
                            Begin::Claimed(lp, run) => {
                                work.lp = lp;
                                report_run(self.opts, &run);
                                start(work, run, &mut inflight);
                            }
                            Begin::Handled => {
                                if !work.slots.is_empty() {
                                    queue.push_front(work);
                                }
                            }
                        }
                    }
                    if inflight.is_empty() {
                        break;
                    }
                    if self.stopping() && !stop_sent {
                        stop_sent = true;
                        let reason = self
                            .opts
                            .stop
                            .and_then(CancelToken::reason)
                            .unwrap_or_else(|| "runner stopping".to_owned());
                        for f in inflight.values() {
                            f.cancel.cancel(reason.clone());
                        }
                    }

                    let wait = inflight
                        .values()
                        .map(|f| f.next_heartbeat.saturating_duration_since(Instant::now()))
                        .min()
                        .unwrap_or(Duration::from_millis(10));
                    let report = rx.recv_timeout(wait);
                    // Renew due leases whatever woke us: a steady stream of
                    // reports must not starve the heartbeats.
                    self.heartbeat(&mut inflight)?;
                    match report {
                        Ok(Report::Spawned(id, process)) => {
                            let now = self.opts.clock.now();
                            self.store.mark_run_pid(
                                &id,
                                process,
                                Some(self.opts.runner_id),
                                now,
                            )?;
                        }
                        Ok(Report::Done(id, outcome)) => {
                            let Some(done) = inflight.remove(&id) else {
                                continue;
                            };
                            let Some(final_run) = self.finish(&done, outcome)? else {
                                continue;
                            };
                            report_run(self.opts, &final_run);
                            let retry_pending = final_run.status.is_retryable()
                                && final_run.attempt < done.work.attempts_at_plan;
                            result.sort(final_run);
                            let mut work = done.work;
                            if retry_pending {
                                // SPEC §3.1 step 6: a scheduled retry drops the
                                // loop's remaining slots for this tick.
                                work.slots.clear();
                            }
                            if !work.slots.is_empty() {
                                queue.push_front(work);
                            }
                        }
                        Ok(Report::Stop) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                Ok(())
            })();
            if let Err(e) = &outcome {
                // Nobody is left to heartbeat or finalize these runs: stop
                // them now rather than let them run unobserved until their
                // leases expire. The scope joins their threads before
                // returning.
                for f in inflight.values() {
                    f.cancel.cancel(format!("runner failed: {e}"));
                }
            }
            outcome
        })
    }

    /// Applies the overlap skip, then claims (SPEC §3.2).
    fn begin_slot(
        &mut self,
        lp: &Loop,
        slot: Timestamp,
        result: &mut TickResult,
    ) -> Result<Begin, SchedulerError> {
        let now = self.opts.clock.now();
        if lp.overlap == Overlap::Skip && self.store.has_running_run(&lp.id)? {
            let run = match self.store.create_skipped_run_and_advance(
                lp,
                slot,
                OVERLAP_SKIP_REASON,
                now,
            )? {
                SkipOutcome::Skipped { run, .. } => run,
                // SPEC §9 item 10: an occupied slot keeps its row and any
                // pending retry; it is reported as it stands.
                SkipOutcome::Occupied(run) => run,
            };
            report_run(self.opts, &run);
            result.sort(run);
            return Ok(Begin::Handled);
        }
        match self.store.claim_run(lp, slot, self.opts.runner_id, now)? {
            Claim::Claimed { run, loop_ } => Ok(Begin::Claimed(loop_, run)),
            Claim::NotClaimed(_) => Ok(Begin::Handled),
        }
    }

    /// Finalizes a finished run under its fence (SPEC §3.3), advancing the
    /// loop in the same transaction unless this is an ad-hoc manual run.
    ///
    /// `None` when the run's row no longer exists (its loop was deleted
    /// with its history while it ran): that is reported through `on_error`
    /// and the tick goes on with the other loops.
    fn finish(
        &mut self,
        done: &InFlight,
        outcome: Result<ExecutorResult, String>,
    ) -> Result<Option<LoopRun>, SchedulerError> {
        let now = self.opts.clock.now();
        let result = match outcome {
            Ok(r) => r,
            Err(message) => {
                report_error(self.opts, &done.work.lp, &message);
                let started = done.run.started_at.unwrap_or(done.run.created_at);
                ExecutorResult {
                    status: ExecutorStatus::Failed,
                    exit_code: None,
                    stdout: String::new(),
                    stderr: String::new(),
                    error: Some(message),
                    pid: None,
                    started_at: started,
                    finished_at: now,
                    duration_ms: now.millis_since(started).max(0),
                }
            }
        };
        let fence = Fence::new(self.opts.runner_id);
        let stored = match self.mode {
            FinalizeMode::Advance => self
                .store
                .finalize_and_advance(&done.run.id, &result, &fence, now)
                .map(|f| f.run),
            FinalizeMode::FinalizeOnly => {
                self.store
                    .finalize_run(&done.run.id, &result, Some(&fence), now)
            }
        };
        match stored {
            Ok(run) => Ok(Some(run)),
            Err(e @ StoreError::Vanished { .. }) => {
                report_error(self.opts, &done.work.lp, &e.to_string());
                self.vanished.get_or_insert(e);
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Renews the leases whose heartbeat is due. A run whose lease was lost
    /// (recovered or taken over by another runner) is cancelled: its result
    /// could no longer be recorded, and its slot may already run elsewhere.
    fn heartbeat(&mut self, inflight: &mut HashMap<RunId, InFlight>) -> Result<(), StoreError> {
        let now_instant = Instant::now();
        for f in inflight.values_mut() {
            if f.next_heartbeat > now_instant {
                continue;
            }
            f.next_heartbeat = now_instant + f.period;
            let now = self.opts.clock.now();
            let renewed = self.store.heartbeat_run_lease(
                &f.run.id,
                self.opts.runner_id,
                f.work.lp.lease_ms,
                now,
            )?;
            if renewed.is_none() {
                f.cancel.cancel("run lease lost");
            }
        }
        Ok(())
    }
}

// One outcome per slot, matched at once and never stored, so the records
// stay inline.
#[allow(clippy::large_enum_variant)]
enum Begin {
    Claimed(Loop, LoopRun),
    Handled,
}

/// The message of a caught panic, when it is a string.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}
