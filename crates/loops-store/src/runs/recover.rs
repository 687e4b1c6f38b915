//! Recovering runs whose lease expired (SPEC §4.3
//! `recoverExpiredRunLeases`, §10 items 27–28, §3.1 step 2).
//!
//! The original recovers with no transaction and advances the loop in a
//! separate write (SPEC §9 item 7). Here each expired run is recovered in
//! its own `BEGIN IMMEDIATE` transaction that re-checks the row is still
//! running and expired, re-checks that neither its process nor a linked
//! step process is alive, marks it abandoned, fails its linked workflow
//! runs, and advances its loop, all or nothing. A runner that re-claims or
//! heartbeats the row first wins; recovery then leaves it alone. The
//! recovery is written once for both backends (`recover/ops.rs`), and
//! gives a run up by the same takeover rule as a claim
//! ([`takeover`](crate::runs::takeover)).

mod ops;

#[cfg(test)]
pub(crate) use self::ops::EXPIRED_LEASES;

use loops_core::{Loop, LoopRun, Timestamp, WorkflowRunId};

use super::advance::Advance;
use crate::Store;
use crate::error::Result;

/// The error recorded on an abandoned run.
pub(crate) const LEASE_EXPIRED: &str = "run lease expired before completion";

/// The error recorded on the workflow runs and steps of an abandoned run.
pub(crate) const PARENT_LEASE_EXPIRED: &str = "parent loop run lease expired before completion";

/// One run recovered by [`Store::recover_expired_run_leases`].
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    /// The run, now abandoned.
    pub run: LoopRun,
    /// The linked workflow runs that were failed with it.
    pub workflow_runs_failed: Vec<WorkflowRunId>,
    /// The run's loop as stored after the advance, if it exists.
    pub loop_: Option<Loop>,
    /// What happened to the loop: advanced as after a failure at `now`, so
    /// a retry is scheduled while attempts remain (SPEC §10 item 40).
    pub advance: Advance,
}

impl Store {
    /// Abandons every running run whose lease expired at or before `now`
    /// and whose process is dead, cascading to its workflow runs and
    /// advancing its loop (see the module docs). Rows whose process, or a
    /// linked step process, is alive are left running. A NULL lease never
    /// matches.
    ///
    /// On PostgreSQL, daemons sharing the database split the sweep: a run
    /// another transaction holds is left to it. A run claimed on another
    /// host (by its runner id, or by the host its claim recorded when the
    /// runner id names none) is recovered only once its lease expired a
    /// grace ago, whatever its recorded pid.
    pub fn recover_expired_run_leases(&self, now: Timestamp) -> Result<Vec<Recovered>> {
        self.backend().recover_expired_run_leases(now)
    }
}
