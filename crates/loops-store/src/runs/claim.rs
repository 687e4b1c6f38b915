//! Claiming a slot (SPEC §4.3 `claimRun`, §1.5 LoopRun, §10 items 18–24).
//!
//! The decision is a pure function ([`decide`]), and the
//! operations that read for it and write what it says are written once
//! for both backends (`claim/ops.rs`). On SQLite the whole decision runs
//! in one `BEGIN IMMEDIATE` transaction, so two runners (threads or
//! processes) racing for one slot serialize on the write lock and exactly
//! one of them gets the run; on PostgreSQL every claimer of one loop holds
//! the loop's row lock while it decides. Each write is also guarded in its
//! `WHERE` clause, so the guard holds even without the lock.

mod decide;
mod ops;
mod trigger;

use loops_core::{Loop, LoopRun, Timestamp};

use crate::Store;
use crate::error::Result;

/// The result of [`Store::claim_run`].
#[derive(Debug, Clone, PartialEq)]
// One outcome per call, matched at once and never stored in bulk, so the
// records are kept inline for easy matching.
#[expect(clippy::large_enum_variant)]
#[non_exhaustive]
pub enum Claim {
    /// The caller now owns the run: running, claimed by the caller, with a
    /// lease of `now + leaseMs`.
    Claimed {
        /// The claimed run.
        run: LoopRun,
        /// The loop, as re-read inside the claim's transaction.
        loop_: Loop,
    },
    /// Nothing was claimed, and nothing was written.
    NotClaimed(NotClaimed),
}

/// Why a slot was not claimed. Variants that found a row carry it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NotClaimed {
    /// The loop no longer exists.
    LoopMissing,
    /// The slot's run is running and its lease has not expired (or it has
    /// no lease at all).
    LeaseHeld(LoopRun),
    /// The run's lease expired, but its recorded process is still alive.
    ProcessAlive(LoopRun),
    /// The run's lease expired, but a step process of a linked workflow run
    /// is still alive.
    StepProcessAlive(LoopRun),
    /// The slot succeeded or was skipped: never claimable again.
    Finished(LoopRun),
    /// The slot failed, timed out or was abandoned on its last attempt.
    AttemptsExhausted(LoopRun),
    /// The loop's overlap policy is `skip` and another slot of it is
    /// running (the run carried here), so this slot must not start beside
    /// it: on a database shared by several hosts, two daemons may plan
    /// different slots of one loop at once (issue 15). Nothing was
    /// written; the caller skips the slot or tries again later.
    OverlapRunning(LoopRun),
    /// The loop is placed (`runsOn`, issue 30 P4) on labels this runner
    /// does not carry, carried here in order. Nothing was written; a
    /// runner that matches claims it.
    NotPlacedHere(Vec<String>),
    /// The loop's pool has `max_running` runs running already (issue 30
    /// Q3). Nothing was written and the slot is kept: it is tried again
    /// when a run of the pool ends.
    PoolFull {
        /// The pool's name.
        pool: String,
        /// Its limit.
        max_running: u32,
    },
    /// Another runner changed the row between the read and the guarded
    /// write. On SQLite this cannot happen between store handles, which
    /// serialize on the write lock, but the guard still reports it. On
    /// PostgreSQL a write that is not a claim (a finalize, a heartbeat) may
    /// land in between; and a claim whose COMMIT was cut off by a lost
    /// connection reports it for each slot it finds not claimed under its
    /// own claim token. A scheduled claim on PostgreSQL also reports it,
    /// without waiting, for a loop another runner is claiming at that
    /// moment (its row is locked): that runner decides the slot.
    Raced,
}

/// How a manual claim ([`Store::claim_manual_run`]) bends the rules of
/// issue 30 (`docs/triggers.md` P6, Q6); by default it bends none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManualClaim {
    /// Claim a loop placed on labels this runner lacks (`--anywhere`).
    pub anywhere: bool,
    /// Claim a pool member although its pool is full (`--ignore-pool`);
    /// the run still counts against the pool while it runs.
    pub ignore_pool: bool,
}

impl Claim {
    /// The claimed run, if the claim succeeded.
    pub fn run(&self) -> Option<&LoopRun> {
        match self {
            Claim::Claimed { run, .. } => Some(run),
            Claim::NotClaimed(_) => None,
        }
    }
}

impl Store {
    /// Claims `slot` of `lp` for `runner_id` (SPEC §4.3 `claimRun`).
    ///
    /// | Existing row | Outcome |
    /// |---|---|
    /// | none | a new row: attempt 1, running |
    /// | running, lease valid or unset | [`NotClaimed::LeaseHeld`] |
    /// | running, lease expired, process or linked step alive | [`NotClaimed::ProcessAlive`] / [`NotClaimed::StepProcessAlive`] |
    /// | running, lease expired, process dead | re-claimed with the **same** attempt |
    /// | succeeded, skipped | [`NotClaimed::Finished`] |
    /// | failed, timed_out, abandoned | attempt + 1 while `attempt < maxAttempts`, else [`NotClaimed::AttemptsExhausted`] |
    ///
    /// A claim that would start a run (a new row, a re-claim, a retry) of a
    /// loop whose overlap is `skip` while another of its slots is running
    /// is refused with [`NotClaimed::OverlapRunning`].
    ///
    /// Every claim records the store's host ([`Store::with_host`]) as the
    /// run's `claimed_host`. On PostgreSQL, every claim also carries a new
    /// claim token, and a running run claimed on another host (the first
    /// part of its runner id `host:pid:suffix`, or the host its claim
    /// recorded when the runner id names none, as `manual-tick:<pid>`
    /// does), whose processes this host cannot see, is re-claimed only
    /// once its lease expired a grace ago; until then it is
    /// [`NotClaimed::LeaseHeld`].
    ///
    /// The loop is re-read inside the transaction (its `leaseMs` and
    /// `maxAttempts` are the current ones) and returned with the run. The
    /// loop's status is not checked: manual runs claim paused and stopped
    /// loops too (SPEC §3.5).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use loops_core::{CommandTarget, NewLoop, RunStatus, Schedule, Target, Timestamp};
    /// use loops_store::{Claim, NotClaimed, Store};
    ///
    /// let store = Store::open_in_memory(Arc::new(|_| false))?;
    /// let now: Timestamp = "2026-01-01T00:00:00Z".parse()?;
    /// let target = Target::Command(CommandTarget::new("true"));
    /// let lp = store.create_loop(&NewLoop::new("nightly", Schedule::Once { at: now }, target), now)?;
    ///
    /// let Claim::Claimed { run, .. } = store.claim_run(&lp, now, "runner-a", now)? else {
    ///     panic!("a fresh slot is claimable");
    /// };
    /// assert_eq!((run.status, run.attempt), (RunStatus::Running, 1));
    /// // The lease runs `leaseMs` (30 minutes by default) from the claim.
    /// assert_eq!(run.lease_expires_at, Some(now.add_ms(30 * 60 * 1000)));
    ///
    /// // Another runner finds the lease held, and nothing is written.
    /// let later = now.add_ms(1000);
    /// let again = store.claim_run(&lp, now, "runner-b", later)?;
    /// assert!(matches!(again, Claim::NotClaimed(NotClaimed::LeaseHeld(held)) if held.id == run.id));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn claim_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        self.backend().claim_run(lp, slot, runner_id, now, None)
    }

    /// [`Store::claim_run`] for a manual run (`loops run-now`), which runs
    /// whatever the loop's overlap policy says (SPEC §3.5): a loop whose
    /// overlap is `skip` may have another slot running, and this claim is
    /// not counted as that loop's one running run (its row is not
    /// `exclusive` on PostgreSQL). Every other rule of a claim applies,
    /// placement and pools included unless `how` bends them.
    pub fn claim_manual_run(
        &self,
        lp: &Loop,
        slot: Timestamp,
        runner_id: &str,
        now: Timestamp,
        how: ManualClaim,
    ) -> Result<Claim> {
        self.backend()
            .claim_run(lp, slot, runner_id, now, Some(how))
    }

    /// Claims pending trigger `trigger_id` of `lp` for `runner_id` (issue
    /// 30, `docs/triggers.md` T5): a new run at the trigger's arrival (or
    /// the first free instant after it), named on the trigger, under the
    /// placement, overlap and pool rules of a scheduled claim. A trigger no
    /// longer pending is [`NotClaimed::Raced`]; a loop whose overlap is
    /// `skip` with a run going is [`NotClaimed::OverlapRunning`], and the
    /// trigger stays pending.
    pub fn claim_trigger(
        &self,
        lp: &Loop,
        trigger_id: &str,
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        self.backend().claim_trigger(lp, trigger_id, runner_id, now)
    }

    /// [`Store::claim_run`] for several slots of different loops, in one
    /// `BEGIN IMMEDIATE` transaction: each request is decided exactly as a
    /// single claim, and the results come back in request order. A runner
    /// that finds many slots due at once claims them all with one commit,
    /// so the last one is not late by the sum of the commits before it.
    pub fn claim_runs(
        &self,
        requests: &[(&Loop, Timestamp)],
        runner_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Claim>> {
        self.backend().claim_runs(requests, runner_id, now)
    }
}
