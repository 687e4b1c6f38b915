//! Loop runs: lookups, lease heartbeats, pid recording, fenced finalizes,
//! overlap skips, and the finalize-and-advance transaction (SPEC §4.3
//! "Other run operations", `finalizeRun`, §3.3–§3.4).
//!
//! Claims live in `runs/claim.rs`, lease recovery in `runs/recover.rs`, the
//! in-transaction loop advance in `runs/advance.rs`, releases in
//! `runs/release.rs`. The operations of this module are written once for
//! both backends in `runs/ops.rs`, the listings in `runs/list.rs`, the
//! reports over failures and costs in `runs/facts.rs`.
//!
//! Invariants: a run in a terminal state (succeeded, skipped) never changes;
//! a finalize applies only to a running row, and under a [`Fence`] only for
//! the runner that still holds an unexpired lease; a loop is advanced only
//! in the same transaction as the write that finished its run.

pub(crate) mod advance;
mod cancel;
mod claim;
pub(crate) mod facts;
pub(crate) mod linked;
pub(crate) mod list;
pub(crate) mod ops;
mod recover;
mod release;
pub(crate) mod takeover;

use loops_core::{
    ExecutorResult, Loop, LoopId, LoopRun, ProcessRef, RunId, RunStatus, Timestamp, Usd,
};

pub use self::advance::Advance;
pub(crate) use self::advance::advance_after;
pub use self::cancel::{CancelOutcome, CancelRequest};
pub use self::claim::{Claim, ManualClaim, NotClaimed};
pub use self::facts::{FAILURE_SAMPLE_CHARS, FailureGroup, RunCost};
#[cfg(test)]
pub(crate) use self::recover::EXPIRED_LEASES;
pub use self::recover::Recovered;
pub(crate) use self::recover::{LEASE_EXPIRED, PARENT_LEASE_EXPIRED};
pub use self::release::{INTERRUPTED_BY_SHUTDOWN, Released};

use crate::Store;
use crate::error::Result;

/// The default `limit` of [`Store::list_runs`] (SPEC §4.3 `listRuns`).
pub const DEFAULT_RUN_LIMIT: u32 = 100;

/// What [`Store::list_runs`] returns. Filters combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs of this loop.
    pub loop_id: Option<LoopId>,
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// At most this many runs; [`DEFAULT_RUN_LIMIT`] when unset.
    pub limit: Option<u32>,
    /// Skip this many runs first (paging); none when unset.
    pub offset: Option<u32>,
}

/// The claim a finalize must still hold to apply (SPEC §4.3 `finalizeRun`
/// fence): the row must be running, claimed by `claimed_by`, with a lease
/// that has not expired at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The runner id that claimed the run.
    pub claimed_by: String,
    /// The token of the claim, when the caller holds it: the write then
    /// applies only while the run is still held by that very claim, not
    /// by a later claim of the same runner (issue 15).
    pub claim_token: Option<String>,
}

impl Fence {
    /// A fence for `runner_id`, on any claim it holds.
    pub fn new(runner_id: impl Into<String>) -> Fence {
        Fence {
            claimed_by: runner_id.into(),
            claim_token: None,
        }
    }

    /// A fence on the claim `run` was handed out with: its claimant and
    /// its claim token.
    pub fn of_claim(runner_id: impl Into<String>, run: &LoopRun) -> Fence {
        Fence {
            claimed_by: runner_id.into(),
            claim_token: run.claim_token.clone(),
        }
    }
}

/// A new claim token: twelve random bytes as hex.
pub(crate) fn new_claim_token() -> String {
    let mut out = String::with_capacity(24);
    for b in crate::random_id_bytes()
        .iter()
        .chain(crate::random_id_bytes().iter())
    {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The result of [`Store::finalize_and_advance`].
#[derive(Debug, Clone, PartialEq)]
pub struct Finalized {
    /// The run as stored: the finalized row, or, when the finalize was
    /// fenced out, the row as someone else left it.
    pub run: LoopRun,
    /// The run's loop as stored after the transaction, if it exists.
    pub loop_: Option<Loop>,
    /// Whether this finalize was written (false when fenced out).
    pub applied: bool,
    /// What happened to the loop.
    pub advance: Advance,
}

/// The result of [`Store::create_skipped_run_and_advance`].
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "one outcome per call, matched at once and never stored in bulk, so the records \
              are kept inline for easy matching"
)]
pub enum SkipOutcome {
    /// A skipped row was written and the loop advanced as after a success.
    Skipped {
        /// The new skipped row.
        run: LoopRun,
        /// The loop as stored afterwards, if it exists.
        loop_: Option<Loop>,
        /// What happened to the loop.
        advance: Advance,
    },
    /// The slot already had a row, which is returned unchanged; the loop
    /// was not advanced, so a pending retry of that row survives (SPEC §9
    /// item 10).
    Occupied(LoopRun),
}

/// The reason recorded on an overlap skip (SPEC §3.2).
pub const OVERLAP_SKIP_REASON: &str = "previous run still active";

/// Whether a finished row of `status` may run its slot again: it failed,
/// timed out or was abandoned with attempts left, or a shutdown released it
/// (`error` is [`INTERRUPTED_BY_SHUTDOWN`]), which does not count its
/// attempt (SPEC §9 item 17). The one rule claim, settle and a `once`
/// loop's resume share.
pub(crate) fn may_run_again(
    status: RunStatus,
    attempt: u32,
    error: Option<&str>,
    max_attempts: u32,
) -> bool {
    status.is_retryable()
        && (attempt < max_attempts
            || (status == RunStatus::Abandoned && error == Some(INTERRUPTED_BY_SHUTDOWN)))
}

/// Milliseconds as the signed offset [`Timestamp::add_ms`] takes.
pub(crate) fn offset_ms(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl Store {
    /// The run with this id, if any.
    pub fn get_run(&self, id: &RunId) -> Result<Option<LoopRun>> {
        self.backend().get_run(id)
    }

    /// The run of `loop_id` for `slot`, if any (one row per slot).
    pub fn get_run_by_slot(&self, loop_id: &LoopId, slot: Timestamp) -> Result<Option<LoopRun>> {
        self.backend().get_run_by_slot(loop_id, slot)
    }

    /// What the runs of `loop_id` that finished at or after `since` cost,
    /// as their agents reported it (issue 27): the total a daily cost cap
    /// is checked against. Runs that reported no cost count nothing.
    pub fn loop_cost_since(&self, loop_id: &LoopId, since: Timestamp) -> Result<Usd> {
        self.backend().loop_cost_since(loop_id, since)
    }

    /// Lists runs, newest first (SPEC §4.3 `listRuns`).
    pub fn list_runs(&self, filter: &RunFilter) -> Result<Vec<LoopRun>> {
        self.backend().list_runs(filter)
    }

    /// [`Store::list_runs`] restricted to the runs of loops that carry
    /// every label of `labels` (issue 17); no labels is no restriction.
    pub fn list_labeled_runs(&self, filter: &RunFilter, labels: &[String]) -> Result<Vec<LoopRun>> {
        match crate::loops::label_filter(labels) {
            Some(json) => self.backend().list_labeled_runs(filter, &json),
            None => self.backend().list_runs(filter),
        }
    }

    /// Extends a run's lease to `now + lease_ms`.
    ///
    /// Applies only while the run is running, held by `fence` (its
    /// claimant and, when the fence carries one, its claim token), and its
    /// lease has not yet expired: SPEC §9 item 11, the original renews an
    /// expired lease, which lets a stalled runner resurrect a run that
    /// another runner may already have recovered or re-claimed. Returns the
    /// renewed row, or `None` when the lease was not renewed (lost).
    pub fn heartbeat_run_lease(
        &self,
        run_id: &RunId,
        fence: &Fence,
        lease_ms: u64,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        self.backend()
            .heartbeat_run_lease(run_id, fence, lease_ms, now, None)
    }

    /// [`Store::heartbeat_run_lease`] that also records when the run last
    /// printed (issue 27), when it has: how long an agent has been silent,
    /// as of this heartbeat. `None` leaves the recorded instant.
    pub fn heartbeat_run_lease_with_output(
        &self,
        run_id: &RunId,
        fence: &Fence,
        lease_ms: u64,
        now: Timestamp,
        last_output_at: Option<Timestamp>,
    ) -> Result<Option<LoopRun>> {
        self.backend()
            .heartbeat_run_lease(run_id, fence, lease_ms, now, last_output_at)
    }

    /// Records the child process of a running run: its pid and, in the
    /// additive `pid_start_ms` column, its start time, so that a reused pid
    /// is not mistaken for it (SPEC §9 item 14).
    ///
    /// Applies only while the run is running and, when `claimed_by` is
    /// given, owned by that runner. Returns the updated row, or `None` when
    /// nothing was written.
    pub fn mark_run_pid(
        &self,
        run_id: &RunId,
        process: ProcessRef,
        claimed_by: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        self.mark_run_spawn(run_id, process, None, claimed_by, now)
    }

    /// [`Store::mark_run_pid`], also recording in the additive `spawn_id`
    /// column the spawn id every process of the run carries in
    /// `LOOPS_SPAWN_ID`, so that after a crash of its runner the processes
    /// that left the run's process group can be found. `None` keeps the
    /// recorded one.
    pub fn mark_run_spawn(
        &self,
        run_id: &RunId,
        process: ProcessRef,
        spawn_id: Option<&str>,
        claimed_by: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<LoopRun>> {
        self.backend()
            .mark_run_spawn(run_id, process, spawn_id, claimed_by, now)
    }

    /// Finalizes a run with an executor result (SPEC §4.3 `finalizeRun`)
    /// without touching its loop. Use this for ad-hoc manual runs, which
    /// never advance their loop (SPEC §3.5).
    ///
    /// Sets status, `finished_at` (the result's), results and pid, clears
    /// the lease. Applies only to a running row, and under `fence` only for
    /// the claimant of an unexpired lease. Always returns the stored row,
    /// so a fenced-out finalize is dropped without error (SPEC §10 items
    /// 25–26). A missing row fails with `run not found after finalize`.
    pub fn finalize_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: Option<&Fence>,
        now: Timestamp,
    ) -> Result<LoopRun> {
        self.backend().finalize_run(run_id, result, fence, now)
    }

    /// Finalizes a run and advances its loop in one `BEGIN IMMEDIATE`
    /// transaction (SPEC §9 items 7 and 12).
    ///
    /// The finalize is fenced as in [`Store::finalize_run`]. Only when it
    /// applied is the loop advanced (SPEC §3.4 with the run's `finished_at`
    /// and `succeeded = status == succeeded`), with a write guarded on the
    /// loop still being active, so a concurrent pause wins (SPEC §9 item
    /// 8). If the schedule cannot produce the next run, the finalize is
    /// still committed and the loop is paused ([`Advance::Paused`]).
    ///
    /// SPEC §9 item 21: a failed run whose attempt ran a workflow run that
    /// was cancelled (the one keyed
    /// [`loop_workflow_key`](loops_core::loop_workflow_key)) is not retried,
    /// whatever attempts remain: the loop advances to its next slot.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use loops_core::{
    ///     CommandTarget, ExecutorResult, ExecutorStatus, LoopStatus, NewLoop, RunStatus, Schedule,
    ///     Target, Timestamp,
    /// };
    /// use loops_store::{Advance, Fence, Store};
    ///
    /// let store = Store::open_in_memory(Arc::new(|_| false))?;
    /// let now: Timestamp = "2026-01-01T00:00:00Z".parse()?;
    /// let every_minute = Schedule::Interval { every_ms: 60_000, anchor: None };
    /// let target = Target::Command(CommandTarget::new("true"));
    /// let lp = store.create_loop(&NewLoop::new("minutely", every_minute, target), now)?;
    /// let slot = lp.next_run_at.expect("an interval loop has a next run");
    /// let run = store.claim_run(&lp, slot, "runner-a", slot)?.run().cloned().expect("claimed");
    ///
    /// let finished = slot.add_ms(250);
    /// let result = ExecutorResult {
    ///     status: ExecutorStatus::Succeeded,
    ///     exit_code: Some(0),
    ///     stdout: String::new(),
    ///     stderr: String::new(),
    ///     error: None,
    ///     pid: None,
    ///     started_at: slot,
    ///     finished_at: finished,
    ///     duration_ms: 250,
    ///     facts: Default::default(),
    /// };
    /// // Another runner's finalize is fenced out: nothing is written.
    /// let stale = store.finalize_and_advance(&run.id, &result, &Fence::new("runner-b"), finished)?;
    /// assert!(!stale.applied);
    /// assert_eq!((stale.run.status, stale.advance), (RunStatus::Running, Advance::FencedOut));
    ///
    /// // The claimant's finalize lands, and the loop moves to its next slot.
    /// let done = store.finalize_and_advance(&run.id, &result, &Fence::new("runner-a"), finished)?;
    /// assert!(done.applied);
    /// assert_eq!(done.run.status, RunStatus::Succeeded);
    /// let lp = done.loop_.expect("the loop still exists");
    /// assert_eq!(lp.status, LoopStatus::Active);
    /// assert_eq!(lp.next_run_at, Some(slot.add_ms(60_000)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finalize_and_advance(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        fence: &Fence,
        now: Timestamp,
    ) -> Result<Finalized> {
        self.backend()
            .finalize_and_advance(run_id, result, fence, now)
    }

    /// Records a skipped run for `slot` (SPEC §4.3 `createSkippedRun`):
    /// attempt 1, finished at `now`, error `reason`. If the slot already
    /// has a row, nothing is written. Returns the stored row either way.
    pub fn create_skipped_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<LoopRun> {
        self.backend().create_skipped_run(lp, slot, reason, now)
    }

    /// The overlap skip of SPEC §3.2 in one `BEGIN IMMEDIATE` transaction:
    /// records a skipped row and advances the loop as after a success at
    /// `now`.
    ///
    /// SPEC §9 item 10: when the slot already has a row (say a failed run
    /// with a pending retry), that row is returned as
    /// [`SkipOutcome::Occupied`] and the loop is not advanced, so the retry
    /// survives.
    pub fn create_skipped_run_and_advance(
        &self,
        lp: &Loop,
        slot: Timestamp,
        reason: &str,
        now: Timestamp,
    ) -> Result<SkipOutcome> {
        self.backend()
            .create_skipped_run_and_advance(lp, slot, reason, now)
    }
}
