//! Ending a run on the daemon's behalf rather than the job's: releasing a
//! run that a shutdown interrupted, and abandoning the runs of a daemon
//! that died (SPEC §9 items 16–18).
//!
//! **Release.** SPEC §9 item 17: the original kills in-flight runs on stop
//! and records them as failed, which consumes an attempt. Here a run that
//! was still executing when the daemon's grace period ran out is recorded
//! as `abandoned` with the error [`INTERRUPTED_BY_SHUTDOWN`], keeping its
//! attempt number, and its loop is not advanced. The next claim of the slot
//! recognizes the released row by that error and runs it again under the
//! same attempt number, even when it was the last one. Linked
//! workflow runs are cancelled and their idempotency key for this attempt
//! is cleared, so the re-run starts a fresh workflow run instead of
//! returning the interrupted one.
//!
//! **Orphans.** A daemon killed with SIGKILL leaves its runs `running`
//! under leases that may last 30 minutes. The next daemon on the same host
//! knows the claimant is gone and abandons those runs at once with
//! [`Store::abandon_orphaned_run`], after it has torn down their process
//! groups. The usual recovery rules apply otherwise: the row must still be
//! running under that claimant, its recorded process and linked step
//! processes must be dead, linked workflow runs are failed, and the loop is
//! advanced as after a failure, so retries follow the loop's policy.
//!
//! **Settling.** A run that finishes while its loop is paused is recorded,
//! but the loop is not advanced (an advance never overwrites a pause, SPEC
//! §9 item 8). Resumed, the loop is due on the slot that already ran, which
//! no runner can claim again. [`Store::settle_finished_slot`] advances such
//! a loop past that slot, as the run's finalize would have.

use loops_core::{ExecutorResult, Loop, LoopRun, RunId, Timestamp, WorkflowRunId};

use super::recover::Recovered;
use crate::Store;
use crate::error::Result;

/// The error recorded on a run released by a daemon shutdown.
pub const INTERRUPTED_BY_SHUTDOWN: &str =
    "interrupted by daemon shutdown; not counted as an attempt";

/// The result of [`Store::release_run`].
#[derive(Debug, Clone, PartialEq)]
pub struct Released {
    /// The run as stored: abandoned, with its attempt number.
    pub run: LoopRun,
    /// The linked workflow runs that were cancelled with it.
    pub workflow_runs_cancelled: Vec<WorkflowRunId>,
}

impl Store {
    /// Records that a shutdown interrupted `run_id` without counting the
    /// attempt (see the module docs), in one `BEGIN IMMEDIATE` transaction.
    ///
    /// `result` is what the cancelled executor returned; its output, exit
    /// code, pid and duration are kept for the record, and its error is
    /// replaced by [`INTERRUPTED_BY_SHUTDOWN`]. Applies only while the run
    /// is running and claimed by `claimed_by`; otherwise nothing is written
    /// and `None` is returned. The loop is never advanced.
    pub fn release_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        claimed_by: &str,
        now: Timestamp,
    ) -> Result<Option<Released>> {
        self.backend().release_run(run_id, result, claimed_by, now)
    }

    /// Abandons a running run whose claimant, a daemon, is known to be
    /// gone, without waiting for its lease to expire (SPEC §9 item 16), in
    /// one `BEGIN IMMEDIATE` transaction.
    ///
    /// Applies only while the row is running and claimed by `claimed_by`,
    /// and only when neither its recorded process nor a linked step process
    /// is alive; the caller tears those down first. The run becomes
    /// abandoned with error `reason`, its linked workflow runs are failed
    /// with the same reason, and its loop is advanced as after a failure.
    /// Returns `None` when nothing was written. On PostgreSQL only a
    /// claimant of this host (the first part of its runner id, or the host
    /// its claim recorded when the runner id names none) can be known
    /// gone; another host's runs are left to lease recovery.
    pub fn abandon_orphaned_run(
        &self,
        run_id: &RunId,
        claimed_by: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Recovered>> {
        self.backend()
            .abandon_orphaned_run(run_id, claimed_by, reason, now)
    }

    /// Advances `lp` past `slot` when the slot's run is already over for
    /// good (succeeded, skipped, or failed on its last attempt), as the
    /// run's own finalize would have, in one `BEGIN IMMEDIATE` transaction.
    ///
    /// Applies only while the loop is active and still due on that slot
    /// (its pending retry or its `nextRunAt`). Returns the advanced loop,
    /// or `None` when nothing was written.
    pub fn settle_finished_slot(
        &self,
        lp: &Loop,
        slot: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        self.backend().settle_finished_slot(lp, slot, now)
    }
}
