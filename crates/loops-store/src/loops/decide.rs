//! The decisions of the `loops` operations, as pure functions of the rows
//! a backend read and `now`: what creating a loop stores, what a pause or a
//! stop that changed nothing reports, what resuming writes or why it is
//! refused, and which loops expire. The operations of `ops.rs` read, ask
//! these, and write what they return; the guards in each write's `WHERE`
//! make the decision hold against a writer in between.

use loops_core::{
    Loop, LoopId, LoopStatus, NewLoop, RunStatus, Schedule, Timestamp, initial_next_run, is_expired,
};

use crate::error::Result;
use crate::loops::{LoopChange, Refusal, new_streaks};

/// The loop `create` stores: `new`'s settings, active, with id `id` and its
/// first run at `next_run_at` (computed from the schedule at `now`), no
/// pending retry, and a streak of 0 for each policy that counts one.
pub(crate) fn new_loop(
    new: &NewLoop,
    id: LoopId,
    next_run_at: Option<Timestamp>,
    now: Timestamp,
) -> Loop {
    let (consecutive_successes, consecutive_failures) = new_streaks(&new.policy);
    Loop {
        id,
        name: new.name.clone(),
        description: new.description.clone(),
        status: LoopStatus::Active,
        schedule: new.schedule.clone(),
        target: new.target.clone(),
        next_run_at,
        retry_scheduled_for: None,
        catch_up: new.catch_up,
        catch_up_limit: new.catch_up_limit,
        overlap: new.overlap,
        max_attempts: new.max_attempts,
        retry_delay_ms: new.retry_delay_ms,
        lease_ms: new.lease_ms,
        expires_at: new.expires_at,
        created_at: now,
        updated_at: now,
        paused_reason: None,
        policy: new.policy.clone(),
        consecutive_successes,
        consecutive_failures,
        hooks: new.hooks.clone(),
    }
}

/// What a pause reports when its guarded write (`WHERE status = 'active'`)
/// changed nothing, from the loop as stored: a paused loop is already
/// paused; any other (stopped, expired, or active again since) is refused.
pub(crate) fn pause_unchanged(lp: Loop) -> LoopChange {
    match lp.status {
        LoopStatus::Paused => LoopChange::Already(lp),
        _ => LoopChange::Refused {
            loop_: lp,
            reason: Refusal::NotActive,
        },
    }
}

/// What a stop reports when its guarded write (`WHERE status <>
/// 'stopped'`) changed nothing: the loop was stopped already.
pub(crate) fn stop_unchanged(lp: Loop) -> LoopChange {
    LoopChange::Already(lp)
}

/// What resuming a loop does, decided from the loop as read under the
/// write lock (SQLite) or its row lock (PostgreSQL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    /// The loop is active: nothing is written.
    Already,
    /// Nothing is written, for this reason.
    Refused(Refusal),
    /// The loop becomes active with this next run and pending retry, its
    /// reason and failure streak cleared (and its success streak when it
    /// had expired). When `once_slot` is set, the write is refused with
    /// [`Refusal::NothingToRun`] if that slot's run is spent
    /// ([`slot_is_spent`]): the store reads it before writing.
    Write {
        next: Option<Timestamp>,
        retry: Option<Timestamp>,
        once_slot: Option<Timestamp>,
    },
}

/// The resume decision (SPEC §9 item 33): a paused loop keeps its
/// `nextRunAt` and pending retry; a loop without a `nextRunAt`, or a
/// stopped or expired one, gets a fresh one from its schedule as if created
/// at `now`, with no pending retry. Refused past the loop's expiry, and
/// when the schedule has no run left.
pub(crate) fn resume(lp: &Loop, now: Timestamp) -> Result<Resume> {
    if lp.status == LoopStatus::Active {
        return Ok(Resume::Already);
    }
    if is_expired(lp, now) {
        return Ok(Resume::Refused(Refusal::PastExpiry));
    }
    // A loop that runs on triggers only is never due (issue 30, T1).
    if lp.policy.trigger_only {
        return Ok(Resume::Write {
            next: None,
            retry: None,
            once_slot: None,
        });
    }
    let (next, retry) = match (lp.status, lp.next_run_at) {
        (LoopStatus::Paused, Some(next)) => (Some(next), lp.retry_scheduled_for),
        _ => (initial_next_run(&lp.schedule, now)?, None),
    };
    let Some(next) = next else {
        return Ok(Resume::Refused(Refusal::NothingToRun));
    };
    let once_slot = match lp.schedule {
        Schedule::Once { at } if at == next => Some(at),
        _ => None,
    };
    Ok(Resume::Write {
        next: Some(next),
        retry,
        once_slot,
    })
}

/// Whether the run found in a `once` loop's only slot (its `status`,
/// `attempt` and `error`) can never be claimed again: succeeded, skipped,
/// or out of attempts. A status this binary does not know is not spent.
pub(crate) fn slot_is_spent(
    status: &str,
    attempt: u32,
    error: Option<&str>,
    max_attempts: u32,
) -> bool {
    match status.parse::<RunStatus>() {
        Ok(s) if s.is_terminal() => true,
        Ok(s) if s.is_retryable() => !crate::runs::may_run_again(s, attempt, error, max_attempts),
        _ => false,
    }
}

/// The expiry decision (SPEC §2.6): an active loop whose `expiresAt` is at
/// or before `now` expires (status expired, `nextRunAt` cleared, a pending
/// retry kept). The expire statements of `statements.rs` apply it to every
/// loop at once, through `idx_loops_status_expires`; a test holds both
/// backends' statements to this function.
#[cfg(test)]
pub(crate) fn expires(lp: &Loop, now: Timestamp) -> bool {
    lp.status == LoopStatus::Active && is_expired(lp, now)
}

#[cfg(test)]
mod tests;
