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
//! leases and finalizes, through the dispatcher of `dispatch.rs`, which the
//! daemon drives too. Executions run on scoped worker threads and report
//! back over a channel, so a slow `accounts env` call or a slow child never
//! delays a heartbeat (SPEC §9 item 13).
//!
//! A tick that fails (a store error) cancels the runs it still has in
//! flight before returning, since nobody would heartbeat or finalize them;
//! an executor that panics fails its run instead of leaving the tick
//! waiting for a report that never comes; and a run whose row was deleted
//! while it executed is reported through `on_error` without aborting the
//! other loops' runs.

use loops_core::{Clock, Loop, LoopRun, Timestamp};
use loops_exec::CancelToken;
use loops_store::{Claim, ManualClaim, NotClaimed, Store, StoreError};

use crate::dispatch::{DispatchOptions, Dispatcher, FinalizeMode, HookSettings, TickResult};
use crate::executor::RunExecutor;

/// The default number of runs a tick or the daemon executes at once.
///
/// High enough that the slots due at one moment start together (cron and
/// systemd timers start every due job at once), low enough that a burst of
/// hundreds of due loops does not fork hundreds of processes at once.
pub const DEFAULT_MAX_PARALLEL: usize = 32;

/// What a scheduler operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchedulerError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `run-now` could not claim its slot: it is running or already done
    /// (SPEC §3.5).
    #[error("could not claim manual run")]
    CouldNotClaim,
    /// `run-now` refused a loop placed on labels this runner lacks (issue
    /// 30, P6): they are carried here, in order.
    #[error("the loop runs on {}, which this host lacks", .0.join(", "))]
    NotPlacedHere(Vec<String>),
    /// `run-now` found the loop's pool full (issue 30, Q6).
    #[error("pool {pool} is full ({max_running} running)")]
    PoolFull {
        /// The pool.
        pool: String,
        /// Its limit.
        max_running: u32,
    },
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
    #[expect(clippy::type_complexity)]
    pub on_error: Option<&'a dyn Fn(&Loop, &str)>,
    /// The runner's hook settings (issue 17).
    pub hooks: &'a HookSettings,
    /// Receives each hook failure's line, on the calling thread, before
    /// [`tick`] or [`run_now`] returns.
    pub on_hook_error: Option<&'a dyn Fn(&str)>,
}

/// Runs one scheduler tick (SPEC §3.1).
///
/// Every due slot is claimed, executed through [`TickOptions::executor`]
/// and finalized together with its loop's advance; the tick returns when
/// nothing it started is left running.
///
/// ```
/// use std::sync::Arc;
/// use loops_core::{
///     CommandTarget, ExecutorResult, ExecutorStatus, Loop, LoopRun, ManualClock, NewLoop,
///     RunStatus, Schedule, Target, Timestamp,
/// };
/// use loops_scheduler::{RunControl, RunError, RunExecutor, TickOptions, tick};
/// use loops_store::Store;
///
/// /// Succeeds at once, without a process: the scheduler never spawns
/// /// anything itself.
/// struct Succeed;
///
/// impl RunExecutor for Succeed {
///     fn execute(
///         &self,
///         _lp: &Loop,
///         run: &LoopRun,
///         _control: &RunControl<'_>,
///     ) -> Result<ExecutorResult, RunError> {
///         Ok(ExecutorResult {
///             status: ExecutorStatus::Succeeded,
///             exit_code: Some(0),
///             stdout: "done".to_owned(),
///             stderr: String::new(),
///             error: None,
///             pid: None,
///             started_at: run.scheduled_for,
///             finished_at: run.scheduled_for,
///             duration_ms: 0,
///             facts: Default::default(),
///         })
///     }
/// }
///
/// let store = Store::open_in_memory(Arc::new(|_| false))?;
/// let t0: Timestamp = "2026-01-01T00:00:00Z".parse()?;
/// let clock = ManualClock::new(t0);
/// let every_minute = Schedule::Interval { every_ms: 60_000, anchor: None };
/// let target = Target::Command(CommandTarget::new("true"));
/// let lp = store.create_loop(&NewLoop::new("minutely", every_minute, target), t0)?;
/// let opts = TickOptions {
///     hooks: loops_scheduler::HookSettings::none(),
///     on_hook_error: None,
///     runner_id: "example-runner",
///     clock: &clock,
///     executor: &Succeed,
///     max_parallel: 4,
///     stop: None,
///     on_run: None,
///     on_error: None,
/// };
///
/// assert!(tick(&store, &opts)?.is_empty()); // nothing is due yet
/// clock.advance(60_000);
/// let done = tick(&store, &opts)?;
/// assert_eq!(done.completed.len(), 1);
/// assert_eq!(done.completed[0].status, RunStatus::Succeeded);
/// let lp = store.get_loop(&lp.id)?.expect("the loop still exists");
/// assert_eq!(lp.next_run_at, Some(t0.add_ms(120_000))); // advanced with the run
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tick(store: &Store, opts: &TickOptions<'_>) -> Result<TickResult, SchedulerError> {
    std::thread::scope(|scope| {
        let mut dispatcher =
            Dispatcher::new(scope, store, dispatch_options(opts, FinalizeMode::Advance));
        dispatcher.plan(true)?;
        dispatcher.run_to_idle()?;
        dispatcher.wait_for_hooks();
        Ok(dispatcher.into_result())
    })
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
/// same fence; the loop advances only when the run used its due slot. A
/// slot that is already running (under a daemon, say) is not claimed, so
/// one slot never runs twice at once: that fails with
/// [`SchedulerError::CouldNotClaim`].
pub fn run_now(
    store: &Store,
    lp: &Loop,
    opts: &TickOptions<'_>,
) -> Result<LoopRun, SchedulerError> {
    run_now_with(store, lp, opts, ManualClaim::default())
}

/// [`run_now`], bending the placement or pool rules as `how` says (issue
/// 30: `--anywhere`, `--ignore-pool`). A loop placed elsewhere fails with
/// [`SchedulerError::NotPlacedHere`], a full pool with
/// [`SchedulerError::PoolFull`]; nothing was written then, and the caller
/// may wait and try again.
pub fn run_now_with(
    store: &Store,
    lp: &Loop,
    opts: &TickOptions<'_>,
    how: ManualClaim,
) -> Result<LoopRun, SchedulerError> {
    let now = opts.clock.now();
    let slot = manual_run_scheduled_for(lp, now);
    let mode = if should_advance_manual_run(lp, slot, now) {
        FinalizeMode::Advance
    } else {
        FinalizeMode::FinalizeOnly
    };
    let (run, claimed_loop) = match store.claim_manual_run(lp, slot, opts.runner_id, now, how)? {
        Claim::Claimed { run, loop_ } => (run, loop_),
        Claim::NotClaimed(NotClaimed::NotPlacedHere(missing)) => {
            return Err(SchedulerError::NotPlacedHere(missing));
        }
        Claim::NotClaimed(NotClaimed::PoolFull { pool, max_running }) => {
            return Err(SchedulerError::PoolFull { pool, max_running });
        }
        _ => return Err(SchedulerError::CouldNotClaim),
    };
    std::thread::scope(|scope| {
        let mut dispatcher = Dispatcher::new(scope, store, dispatch_options(opts, mode));
        dispatcher.start_claimed(claimed_loop, run);
        dispatcher.run_to_idle()?;
        dispatcher.wait_for_hooks();
        let vanished = dispatcher.vanished.take();
        let result = dispatcher.into_result();
        if let Some(run) = result.completed.into_iter().chain(result.claimed).next() {
            return Ok(run);
        }
        // The only way to finish without a row: it was deleted mid-run.
        Err(match vanished {
            Some(e) => SchedulerError::Store(e),
            None => SchedulerError::CouldNotClaim,
        })
    })
}

fn dispatch_options<'a>(opts: &TickOptions<'a>, mode: FinalizeMode) -> DispatchOptions<'a> {
    DispatchOptions {
        runner_id: opts.runner_id,
        clock: opts.clock,
        executor: opts.executor,
        max_parallel: opts.max_parallel,
        lanes: crate::Lanes::default(),
        mode,
        stop: opts.stop,
        on_run: opts.on_run,
        on_error: opts.on_error,
        hooks: opts.hooks,
        on_hook_error: opts.on_hook_error,
        overlap_in_flight: false,
        finalize_attempts: Some(crate::dispatch::MANUAL_FINALIZE_ATTEMPTS),
        report_misplaced: true,
    }
}
