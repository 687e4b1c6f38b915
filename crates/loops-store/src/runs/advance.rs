//! Advancing a loop after one of its runs finished (SPEC §3.4), inside the
//! caller's write transaction.
//!
//! SPEC §9 item 7: the original finalizes a run and advances its loop in
//! two separate writes, so a crash between them strands the slot. Here the
//! advance always runs in the same `BEGIN IMMEDIATE` transaction as the
//! write that finished the run (finalize, skip, recovery).
//!
//! SPEC §9 item 8: the advance is not a blind read-merge-write. It re-reads
//! the loop inside the transaction, plans with
//! [`plan_advance`](loops_core::plan_advance), and writes with
//! `WHERE id = ? AND status = 'active'`, so a pause is never overwritten.
//!
//! SPEC §9 item 21: in the original, cancelling a scheduled workflow run
//! fails its loop run, which can trigger a retry that runs the workflow the
//! user just cancelled. Here a failed run whose attempt's workflow run (the
//! one keyed [`loop_workflow_key`](loops_core::loop_workflow_key)) was cancelled advances as if its attempts
//! were spent: no retry, the loop moves on to its next slot. The check reads
//! the database inside the same transaction, so every caller (a tick, the
//! daemon, lease recovery) gets it without passing anything.

use loops_core::{Loop, LoopAdvance, ScheduleError, Streak};

/// The jitter draw `plan_advance_with` takes for `lp`: a random number in
/// `[0, 1)` (issue 17; the store draws it, core only computes with it),
/// taken only for an exponential backoff, the one policy that reads it.
pub(crate) fn jitter_for(lp: &Loop) -> f64 {
    if lp.policy.backoff.is_fixed() {
        return 0.5;
    }
    let b = crate::random_id_bytes();
    let n = b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
    n as f64 / (1u64 << 48) as f64
}

/// How the advance's `UPDATE` changes the run streaks: `success`,
/// `failure`, or NULL for no change.
pub(crate) fn streak_param(streak: Streak) -> Option<&'static str> {
    match streak {
        Streak::Unchanged => None,
        Streak::Success => Some("success"),
        Streak::Failure => Some("failure"),
    }
}

/// What happened to a run's loop when the run finished.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Advance {
    /// The loop moved on: a retry was scheduled, its next slot set, or it
    /// stopped (a `once` loop). The plan that was written.
    Advanced(LoopAdvance),
    /// The loop is not active (paused, stopped or expired), so it was left
    /// alone (SPEC §3.4 step 2, §10 item 43).
    NotActive,
    /// The loop no longer exists.
    LoopMissing,
    /// The finalize did not apply because the runner no longer owned the
    /// run, so the loop was left alone (SPEC §9 item 12: a fenced-out
    /// runner never advances).
    FencedOut,
    /// The schedule could not produce the next run (for example a stored
    /// cron that no longer parses). The run's result was still committed,
    /// and the loop was paused so that it does not come due again and again
    /// (SPEC §9 item 4). Resuming it retries the same computation.
    Paused(ScheduleError),
    /// The finalize was committed together with its advance, but the
    /// connection to the database was lost before the commit was
    /// acknowledged, and the re-read found the result stored (PostgreSQL,
    /// issue 15). What the advance decided was lost with the connection;
    /// the loop returned beside it is the loop as stored afterwards.
    Unconfirmed,
}
