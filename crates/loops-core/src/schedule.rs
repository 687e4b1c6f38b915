//! Schedule math (SPEC §2.3–§2.6, §3.4). STUB: to be implemented.

use crate::cron::CronError;
use crate::model::{Loop, LoopRun, Schedule};
use crate::status::LoopStatus;
use crate::time::Timestamp;

/// A schedule that cannot produce run times.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// A bad cron expression.
    #[error(transparent)]
    Cron(#[from] CronError),
}

/// What `advanceLoop` writes to a loop (SPEC §3.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopAdvance {
    /// The new status.
    pub status: LoopStatus,
    /// The new `nextRunAt`.
    pub next_run_at: Option<Timestamp>,
    /// The new `retryScheduledFor`.
    pub retry_scheduled_for: Option<Timestamp>,
}

/// Checks that a schedule can produce run times.
pub fn validate_schedule(schedule: &Schedule) -> Result<(), ScheduleError> {
    let _ = schedule;
    Ok(())
}

/// The `nextRunAt` of a new loop (SPEC §2.3).
pub fn initial_next_run(schedule: &Schedule, now: Timestamp) -> Result<Option<Timestamp>, ScheduleError> {
    let _ = (schedule, now);
    Ok(None)
}

/// `computeNextAfter` (SPEC §2.4).
pub fn compute_next_after(schedule: &Schedule, slot: Timestamp, finished_at: Timestamp) -> Result<Option<Timestamp>, ScheduleError> {
    let _ = (schedule, slot, finished_at);
    Ok(None)
}

/// `dueSlots` (SPEC §2.5).
pub fn due_slots(lp: &Loop, now: Timestamp) -> Result<Vec<Timestamp>, ScheduleError> {
    let _ = (lp, now);
    Ok(Vec::new())
}

/// Whether a loop has expired at `now` (SPEC §2.6).
pub fn is_expired(lp: &Loop, now: Timestamp) -> bool {
    lp.expires_at.is_some_and(|e| e <= now)
}

/// `advanceLoop` as a pure plan (SPEC §3.4).
pub fn plan_advance(lp: &Loop, run: &LoopRun, finished_at: Timestamp, succeeded: bool) -> Result<Option<LoopAdvance>, ScheduleError> {
    let _ = (lp, run, finished_at, succeeded);
    Ok(None)
}
