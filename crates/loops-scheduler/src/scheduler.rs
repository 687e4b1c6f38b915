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

use std::time::Duration;

use loops_core::{Loop, LoopRun, Timestamp};
use loops_exec::CancelToken;
use loops_store::{Claim, Store, StoreError};
use serde::Serialize;

use crate::dispatch::{DispatchOptions, Dispatcher, FinalizeMode};
use crate::executor::RunExecutor;
use loops_core::Clock;

/// The default number of runs a tick or the daemon executes at once.
///
/// High enough that the slots due at one moment start together (cron and
/// systemd timers start every due job at once), low enough that a burst of
/// hundreds of due loops does not fork hundreds of processes at once.
pub const DEFAULT_MAX_PARALLEL: usize = 32;

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
    std::thread::scope(|scope| {
        let mut dispatcher =
            Dispatcher::new(scope, store, dispatch_options(opts, FinalizeMode::Advance));
        dispatcher.plan(true)?;
        dispatcher.run_to_idle()?;
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
    let now = opts.clock.now();
    let slot = manual_run_scheduled_for(lp, now);
    let mode = if should_advance_manual_run(lp, slot, now) {
        FinalizeMode::Advance
    } else {
        FinalizeMode::FinalizeOnly
    };
    let (run, claimed_loop) = match store.claim_run(lp, slot, opts.runner_id, now)? {
        Claim::Claimed { run, loop_ } => (run, loop_),
        _ => return Err(SchedulerError::CouldNotClaim),
    };
    std::thread::scope(|scope| {
        let mut dispatcher = Dispatcher::new(scope, store, dispatch_options(opts, mode));
        dispatcher.start_claimed(claimed_loop, run);
        dispatcher.run_to_idle()?;
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
        mode,
        stop: opts.stop,
        on_run: opts.on_run,
        on_error: opts.on_error,
        overlap_in_flight: false,
    }
}
