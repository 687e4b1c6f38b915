//! The dispatcher: the store-owning half of every runner (SPEC §3.1–§3.3).
//!
//! A [`Dispatcher`] lives on the thread that owns the [`Store`]. It plans
//! due slots, applies the overlap skip, claims, hands each claimed run to a
//! worker thread (of a [`Pool`], so a daemon reuses its threads from run to
//! run), and applies the workers' reports (spawned pid, result) to
//! the store: finalize-and-advance, or, for a run a daemon shutdown
//! interrupted, a release that does not count the attempt. Between reports
//! it renews the leases of the runs in flight.
//!
//! `tick` drives one dispatcher until it is idle; the daemon keeps one for
//! its whole life and drives it continuously, so a slow run never holds up
//! another loop's slot (SPEC §9 item 1). Everything that reaches the store
//! thread arrives on one channel ([`Report`]): worker reports, the wake-up
//! of a cancelled stop token, and the daemon's wake-ups and stop requests,
//! so the thread blocks in one place with one deadline.
//!
//! The dispatcher builds the [`TickResult`] and fails only with a
//! [`StoreError`]; `scheduler.rs` turns that into a `SchedulerError`.
//!
//! Invariants:
//! - the slots of one loop start one at a time, in order; a loop with work
//!   queued or in flight is never planned a second time;
//! - a loop's overlap policy is honoured for the runs of this dispatcher
//!   too (SPEC §9 item 2, daemon only): a slot that comes due while the loop
//!   runs is recorded as skipped (`skip`) or started beside it (`allow`);
//! - no run is left without a heartbeat: whoever drops the dispatcher with
//!   runs in flight cancels them.

mod cancel;
mod cost_cap;
mod hooks;
mod lanes;
mod overlap;
mod placement;
mod plan;
mod record;
mod state;
mod tick_result;
mod trigger;

pub(crate) use record::claim_spawn_id;

pub use self::hooks::HookSettings;
pub use self::lanes::Lanes;
pub use self::record::heartbeat_period;
use self::record::lease_deadline;
use self::state::{Mode, Phase};
pub use self::tick_result::TickResult;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::Scope;
use std::time::{Duration, Instant};

use loops_core::{
    Clock, ExecutorResult, Loop, LoopId, LoopRun, Overlap, ProcessRef, RunId, Timestamp,
};
use loops_exec::{CancelToken, OutputSeen, Pool, Subscription};
use loops_store::{Claim, NotClaimed, Store, StoreError};

use crate::executor::{RunControl, RunError, RunExecutor};

/// How a finished run is recorded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinalizeMode {
    /// Finalize and advance the loop in one transaction.
    Advance,
    /// Finalize only: an ad-hoc manual run never moves `nextRunAt`.
    FinalizeOnly,
}

/// A message to the store-owning thread.
pub(crate) enum Report {
    /// Something may have changed (the database, a stop token): look again.
    Wake,
    /// `loops daemon stop` asks the daemon to stop, letting runs in flight
    /// finish within `grace` (the daemon's own grace when `None`). Only the
    /// daemon gets these, and handles them itself.
    Stop {
        /// The grace period the request asks for.
        grace: Option<Duration>,
    },
    /// A worker's child was spawned.
    Spawned(RunId, ProcessRef),
    /// A worker's run goes on but could not record its progress; the
    /// message goes to `on_error` with the run's loop.
    Retrying(RunId, String),
    /// A worker finished its run (boxed: a result is large, and reports
    /// queue up).
    Done(RunId, Box<Result<ExecutorResult, RunError>>),
}

/// What a dispatcher is configured with.
pub(crate) struct DispatchOptions<'env> {
    pub(crate) runner_id: &'env str,
    pub(crate) clock: &'env dyn Clock,
    pub(crate) executor: &'env dyn RunExecutor,
    pub(crate) max_parallel: usize,
    /// Per-kind limits beside `max_parallel` (the daemon's lanes).
    pub(crate) lanes: Lanes,
    pub(crate) mode: FinalizeMode,
    /// Cancelled: no slot starts any more, and runs in flight are cancelled
    /// with its reason and recorded as they end (tick and run-now).
    pub(crate) stop: Option<&'env CancelToken>,
    pub(crate) on_run: Option<&'env dyn Fn(&LoopRun)>,
    // The callback's signature is the documentation.
    #[expect(clippy::type_complexity)]
    pub(crate) on_error: Option<&'env dyn Fn(&Loop, &str)>,
    /// The runner's hook settings, and where a hook's failure is reported.
    pub(crate) hooks: &'env HookSettings,
    pub(crate) on_hook_error: Option<&'env dyn Fn(&str)>,
    /// Apply each loop's overlap policy to slots that come due while this
    /// dispatcher runs the loop (the daemon).
    pub(crate) overlap_in_flight: bool,
    /// How many times a finalize that fails on a transient store error (a
    /// full disk, a held lock) is tried before the run is left to lease
    /// recovery and the error returned: `None` tries until it lands (the
    /// daemon); tick and run-now give up after
    /// [`MANUAL_FINALIZE_ATTEMPTS`], so a command never waits forever.
    pub(crate) finalize_attempts: Option<u32>,
    /// Report each due loop placed on labels this runner lacks through
    /// `on_error` (a tick); a daemon leaves them to the daemons that match.
    pub(crate) report_misplaced: bool,
}

/// The attempts a tick or run-now gives a finalize that keeps failing on a
/// transient store error: about 3 s of backoff, plus each attempt's busy
/// wait.
pub(crate) const MANUAL_FINALIZE_ATTEMPTS: u32 = 5;

/// The remaining slots of one due loop.
struct LoopWork {
    lp: Loop,
    slots: VecDeque<Timestamp>,
    /// `maxAttempts` as planned (SPEC §3.1 step 6 uses the planned state).
    attempts_at_plan: u32,
    /// Whether any slot of this work was claimed or skipped.
    progressed: bool,
    /// The trigger this work runs (issue 30), whose one slot is its
    /// arrival.
    trigger: Option<loops_store::LoopTrigger>,
}

impl LoopWork {
    fn new(lp: Loop, slots: VecDeque<Timestamp>) -> LoopWork {
        LoopWork {
            attempts_at_plan: lp.max_attempts,
            lp,
            slots,
            progressed: false,
            trigger: None,
        }
    }
}

struct InFlight {
    work: LoopWork,
    run: LoopRun,
    cancel: CancelToken,
    period: Duration,
    next_heartbeat: Instant,
    /// When the lease may have run out by this host's monotonic clock:
    /// the last successful claim or renewal plus the lease, less a margin.
    /// A run whose lease could not be renewed by then (the database is
    /// unreachable) is cancelled, since another host may take its slot
    /// over (issue 15).
    lease_deadline: Instant,
    /// Running, interrupted by a shutdown, or ended and waiting for its
    /// record to land.
    phase: Phase,
    /// The spawn id every process of the run carries, recorded with its pid
    /// so a later runner finds them after a crash.
    spawn_id: String,
    /// When the run last printed, recorded by each heartbeat (issue 27).
    output_seen: Arc<OutputSeen>,
}

/// A stop request held back from a batch of reports ([`Report::Stop`]).
struct HeldStop {
    grace: Option<Duration>,
}

/// A loop with runs of this dispatcher in flight.
struct Busy {
    runs: usize,
    /// The latest slot claimed, queued or skipped for the loop.
    last_slot: Timestamp,
    /// The next slot that would overlap the runs in flight.
    next_overlap: Option<Timestamp>,
}

/// See the module docs.
pub(crate) struct Dispatcher<'scope, 'env> {
    /// The worker threads, reused from one run to the next.
    pool: Pool<'scope, 'env, Report>,
    store: &'env Store,
    opts: DispatchOptions<'env>,
    tx: Sender<Report>,
    rx: Receiver<Report>,
    /// The grace of a stop request that ended a batch of reports, for the
    /// next [`Dispatcher::poll`] or [`Dispatcher::wait`].
    held_stop: Option<HeldStop>,
    _stop_wake: Option<Subscription>,
    queue: VecDeque<LoopWork>,
    inflight: HashMap<RunId, InFlight>,
    busy: HashMap<LoopId, Busy>,
    /// Loops whose due slots could not progress at the last plan (held by
    /// another runner, or a schedule error): left out of the next wake-up.
    parked: HashSet<LoopId>,
    mode: Mode,
    result: TickResult,
    /// The first run whose row vanished before its finalize.
    pub(crate) vanished: Option<StoreError>,
    /// Runs recorded inside the store batch under way, with their results:
    /// settled once the batch commits, tried again if it does not.
    landed: Vec<(InFlight, ExecutorResult, Option<LoopRun>)>,
    hooks: hooks::HookRunner<'scope, 'env>,
}

impl<'scope, 'env> Dispatcher<'scope, 'env> {
    pub(crate) fn new(
        scope: &'scope Scope<'scope, 'env>,
        store: &'env Store,
        opts: DispatchOptions<'env>,
    ) -> Self {
        let (tx, rx) = mpsc::channel();
        // A stop wakes the dispatcher at once, however far away its next
        // deadline is.
        let stop_wake = opts.stop.map(|stop| {
            let tx = tx.clone();
            stop.subscribe(move || {
                let _ = tx.send(Report::Wake);
            })
        });
        Dispatcher {
            pool: Pool::new(scope, tx.clone()),
            store,
            opts,
            tx,
            rx,
            held_stop: None,
            _stop_wake: stop_wake,
            queue: VecDeque::new(),
            inflight: HashMap::new(),
            busy: HashMap::new(),
            parked: HashSet::new(),
            mode: Mode::Serving,
            result: TickResult::default(),
            vanished: None,
            landed: Vec::new(),
            hooks: hooks::HookRunner::new(scope),
        }
    }

    /// A sender for wake-ups from other threads.
    pub(crate) fn sender(&self) -> Sender<Report> {
        self.tx.clone()
    }

    /// What happened since the last call.
    pub(crate) fn take_result(&mut self) -> TickResult {
        std::mem::take(&mut self.result)
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    pub(crate) fn has_queue(&self) -> bool {
        !self.queue.is_empty()
    }

    fn stopping(&self) -> bool {
        self.mode.is_draining() || self.opts.stop.is_some_and(CancelToken::is_cancelled)
    }

    fn report_run(&self, run: &LoopRun) {
        if let Some(on_run) = self.opts.on_run {
            on_run(run);
        }
    }

    fn report_error(&self, lp: &Loop, message: &str) {
        if let Some(on_error) = self.opts.on_error {
            on_error(lp, message);
        }
    }

    /// Claims and starts queued slots while there is room (SPEC §3.2).
    ///
    /// Slots are taken one per loop, in queue order, after the overlap skip;
    /// the claims of one round share one store transaction, so many slots
    /// due at the same instant all start on time, and only then are their
    /// workers started.
    pub(crate) fn start_ready(&mut self) -> Result<(), StoreError> {
        let max_parallel = self.opts.max_parallel.max(1);
        while !self.stopping() {
            let room = max_parallel.saturating_sub(self.inflight.len());
            if room == 0 || self.queue.is_empty() {
                break;
            }
            let mut batch: Vec<(LoopWork, Timestamp)> = Vec::new();
            // Loops whose lane is full wait, in order, for a later round;
            // the loops behind them still start (issue 17).
            let mut waiting: Vec<LoopWork> = Vec::new();
            while batch.len() < room {
                let Some(mut work) = self.queue.pop_front() else {
                    break;
                };
                if self.lane_is_full(&work.lp, &batch) {
                    waiting.push(work);
                    continue;
                }
                let Some(slot) = work.slots.pop_front() else {
                    if !work.progressed {
                        self.parked.insert(work.lp.id);
                    }
                    continue;
                };
                if work.trigger.is_some() {
                    // Claimed on its own; the room is counted again.
                    self.start_triggered(work)?;
                    break;
                }
                let now = self.opts.clock.now();
                if self.paused_over_cost_cap(&work.lp, now)? {
                    continue;
                }
                if work.lp.overlap == Overlap::Skip && self.store.has_running_run(&work.lp.id)? {
                    if self.skip(&work.lp, slot, now)? {
                        work.progressed = true;
                    }
                    // The loop's next slot, if any, comes next.
                    self.queue.push_front(work);
                    continue;
                }
                batch.push((work, slot));
            }
            let lanes_full = !waiting.is_empty();
            for work in waiting.into_iter().rev() {
                self.queue.push_front(work);
            }
            if batch.is_empty() {
                if lanes_full {
                    break; // The rest waits for a run to finish.
                }
                continue;
            }
            let now = self.opts.clock.now();
            let requests: Vec<(&Loop, Timestamp)> =
                batch.iter().map(|(w, slot)| (&w.lp, *slot)).collect();
            let claims = self.store.claim_runs(&requests, self.opts.runner_id, now)?;
            let mut retry = Vec::new();
            for ((mut work, slot), claim) in batch.into_iter().zip(claims) {
                match claim {
                    Claim::Claimed { run, loop_ } => {
                        work.lp = loop_;
                        work.progressed = true;
                        self.report_run(&run);
                        self.start(work, run);
                    }
                    // The slot ran to its end while the loop was paused, so
                    // its finalize could not advance the loop: do it now,
                    // or the loop would stay due on a slot nobody can claim.
                    Claim::NotClaimed(
                        NotClaimed::Finished(_) | NotClaimed::AttemptsExhausted(_),
                    ) if self.opts.mode == FinalizeMode::Advance => {
                        if self
                            .store
                            .settle_finished_slot(&work.lp, slot, now)?
                            .is_some()
                        {
                            work.progressed = true;
                        }
                        retry.push(work);
                    }
                    // Not claimed, for whatever reason: the slot is left for
                    // a later pass, as a lease held elsewhere is.
                    _ => retry.push(work),
                }
            }
            // Loops that claimed nothing try their next slot first, in order.
            for work in retry.into_iter().rev() {
                self.queue.push_front(work);
            }
        }
        Ok(())
    }

    /// Hands an already-claimed run to a worker thread.
    pub(crate) fn start_claimed(&mut self, lp: Loop, run: LoopRun) {
        let mut work = LoopWork::new(lp, VecDeque::new());
        work.progressed = true;
        self.report_run(&run);
        self.start(work, run);
    }

    fn start(&mut self, work: LoopWork, run: LoopRun) {
        let cancel = CancelToken::new();
        let period = heartbeat_period(work.lp.lease_ms);
        let lease_ms = work.lp.lease_ms;
        let spawn_tx = self.tx.clone();
        let retry_tx = self.tx.clone();
        let executor = self.opts.executor;
        // Runs claimed without a token (the original's) get a fresh one.
        let spawn_id = claim_spawn_id(&run).map_or_else(loops_exec::new_spawn_id, str::to_owned);
        let run_id = run.id;
        let output_seen = Arc::new(OutputSeen::new(self.opts.clock.now()));
        let executed = match &work.trigger {
            Some(trigger) => trigger::with_trigger_env(work.lp.clone(), trigger),
            None => work.lp.clone(),
        };
        let (lp, worker_run, worker_cancel, worker_spawn_id, worker_seen) = (
            executed,
            run.clone(),
            cancel.clone(),
            spawn_id.clone(),
            Arc::clone(&output_seen),
        );
        let job = move || {
            let on_spawn = move |p: ProcessRef| {
                // The receiver lives until every worker is done.
                let _ = spawn_tx.send(Report::Spawned(run_id, p));
            };
            let on_retry = move |message: &str| {
                let _ = retry_tx.send(Report::Retrying(run_id, message.to_owned()));
            };
            let control = RunControl {
                cancel: worker_cancel,
                on_spawn: &on_spawn,
                spawn_id: Some(&worker_spawn_id),
                on_retry: &on_retry,
                output_seen: Some(&worker_seen),
            };
            Report::Done(
                run_id,
                Box::new(executor.execute(&lp, &worker_run, &control)),
            )
        };
        // A panicking executor must still report back: without a `Done` the
        // dispatcher would wait, and heartbeat the lease, forever. The pool
        // catches the panic, and it becomes a failed run.
        let panicked =
            move |message| Report::Done(run_id, Box::new(Err(RunError::Panicked(message))));
        self.pool.submit(job, panicked);
        let last_slot = work
            .slots
            .back()
            .copied()
            .unwrap_or(run.scheduled_for)
            .max(run.scheduled_for);
        let overlap = self.opts.overlap_in_flight;
        let schedule = work.lp.schedule.clone();
        let busy = self.busy.entry(work.lp.id).or_insert(Busy {
            runs: 0,
            last_slot,
            next_overlap: None,
        });
        busy.runs += 1;
        busy.last_slot = busy.last_slot.max(last_slot);
        if overlap {
            // Only slots that come due while the run executes overlap it; a
            // retry starts long after its slot.
            let started = run.started_at.unwrap_or(run.created_at);
            busy.next_overlap = overlap::overlap_slot_after(&schedule, busy.last_slot, started);
        }
        self.inflight.insert(
            run.id,
            InFlight {
                work,
                run,
                cancel,
                period,
                next_heartbeat: Instant::now() + period,
                lease_deadline: lease_deadline(Instant::now(), lease_ms),
                phase: Phase::Running,
                spawn_id,
                output_seen,
            },
        );
    }

    /// Waits up to `timeout` for the next report.
    pub(crate) fn wait(&mut self, timeout: Duration) -> Option<Report> {
        self.take_held_stop()
            .or_else(|| self.rx.recv_timeout(timeout).ok())
    }

    /// A report that is already waiting, without blocking.
    pub(crate) fn poll(&mut self) -> Option<Report> {
        self.take_held_stop().or_else(|| self.rx.try_recv().ok())
    }

    fn take_held_stop(&mut self) -> Option<Report> {
        self.held_stop
            .take()
            .map(|HeldStop { grace }| Report::Stop { grace })
    }

    /// When the next run lease is due for renewal, or the next finalize
    /// that failed is due to be tried again.
    pub(crate) fn next_heartbeat(&self) -> Option<Instant> {
        self.inflight
            .values()
            .map(|f| match f.phase.retry_at() {
                Some(retry_at) => f.next_heartbeat.min(retry_at),
                None => f.next_heartbeat,
            })
            .min()
    }

    /// Applies a worker's report. Wake-ups and stops are the caller's.
    pub(crate) fn handle(&mut self, report: Report) -> Result<(), StoreError> {
        match report {
            Report::Spawned(id, process) => {
                let now = self.opts.clock.now();
                let spawn_id = self.inflight.get(&id).map(|f| f.spawn_id.as_str());
                self.store.mark_run_spawn(
                    &id,
                    process,
                    spawn_id,
                    Some(self.opts.runner_id),
                    now,
                )?;
            }
            Report::Done(id, outcome) => {
                let Some(done) = self.inflight.remove(&id) else {
                    return Ok(());
                };
                let result = self.result_of(&done, *outcome);
                return self.record(done, result);
            }
            Report::Retrying(id, message) => {
                if let Some(f) = self.inflight.get(&id) {
                    self.report_error(&f.work.lp, &message);
                }
            }
            Report::Wake | Report::Stop { .. } => {}
        }
        Ok(())
    }

    /// The run is recorded: its loop may go on (see
    /// [`Dispatcher::record`]).
    fn settle(&mut self, done: InFlight, stored: Option<LoopRun>) {
        if let Some(b) = self.busy.get_mut(&done.work.lp.id) {
            b.runs = b.runs.saturating_sub(1);
            if b.runs == 0 {
                self.busy.remove(&done.work.lp.id);
            }
        }
        let Some(final_run) = stored else {
            return;
        };
        self.report_run(&final_run);
        let retry_pending =
            final_run.status.is_retryable() && final_run.attempt < done.work.attempts_at_plan;
        self.result.sort(final_run);
        let mut work = done.work;
        if retry_pending {
            // SPEC §3.1 step 6: a scheduled retry drops the loop's
            // remaining slots.
            work.slots.clear();
        }
        if !work.slots.is_empty() && !self.mode.is_draining() {
            self.queue.push_front(work);
        }
    }

    /// Consumes the dispatcher, returning what it did.
    pub(crate) fn into_result(mut self) -> TickResult {
        std::mem::take(&mut self.result)
    }
}

impl Drop for Dispatcher<'_, '_> {
    fn drop(&mut self) {
        // Normally nothing is in flight here. If something is (an error
        // path), its worker is joined when the scope ends, so it must stop.
        self.cancel_all("runner stopped");
    }
}
