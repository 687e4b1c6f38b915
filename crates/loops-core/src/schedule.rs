//! Schedule math (SPEC §2.3–§2.6 and the pure core of §3.4): the first
//! `nextRunAt`, the next run after a finish, the due slots of a tick, expiry,
//! and the loop update `advanceLoop` writes.
//!
//! Every function is a pure function of its arguments; "now" is passed in.
//!
//! Invariants:
//! - the cost of a call is proportional to the slots it returns, never to the
//!   time elapsed since `nextRunAt` (SPEC §9 item 3): interval catch-up and
//!   fixed-rate advancement are arithmetic, cron `latest` is one backward
//!   search, and cron advancement is one forward search;
//! - `due_slots` returns sorted, strictly increasing slots, all `<= now`;
//!   apart from a pending retry's slot, none is before `nextRunAt`, so
//!   `latest` never steps backwards, also across a DST fall-back (SPEC §9
//!   item 5);
//! - an instant past the representable range (year 9999) is an error, never
//!   a wrapped or clamped value.

use crate::cron::{CronError, CronExpr};
use crate::model::{DEFAULT_DYNAMIC_INTERVAL_MS, Loop, LoopRun, Schedule};
use crate::status::{Anchor, Backoff, CatchUp, LoopStatus, RunStatus};
use crate::time::Timestamp;

/// A schedule that cannot produce run times.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// A bad cron expression or time zone.
    #[error(transparent)]
    Cron(#[from] CronError),
    /// An interval of zero (SPEC §10 item 11).
    #[error("interval everyMs must be > 0")]
    IntervalNotPositive,
    /// A dynamic schedule with `minIntervalMs: 0`.
    #[error("dynamic minIntervalMs must be > 0")]
    DynamicNotPositive,
    /// A `once` instant that does not parse (SPEC §10 item 11).
    #[error("invalid schedule.at: {input}")]
    InvalidAt {
        /// The rejected input, as given.
        input: String,
    },
    /// The next run would fall after `9999-12-31T23:59:59.999Z`.
    #[error("next run is past the latest representable instant (year 9999)")]
    OutOfRange,
}

/// What a finished run does to its loop's run streaks (issue 17), which
/// the store applies in the advance's own `UPDATE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streak {
    /// A retry is pending or the run was skipped: both counts stay.
    Unchanged,
    /// A success: one more success in a row, failures back to 0.
    Success,
    /// A final failure: one more failure in a row, successes back to 0.
    Failure,
}

/// What `advanceLoop` writes to a loop (SPEC §3.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopAdvance {
    /// The new status: active, or stopped when there is no next run;
    /// expired when `expiresAfterRuns` is reached, paused when the
    /// circuit breaker trips (issue 17).
    pub status: LoopStatus,
    /// The new `nextRunAt`.
    pub next_run_at: Option<Timestamp>,
    /// The new `retryScheduledFor`: the slot a retry re-runs, or `None`.
    pub retry_scheduled_for: Option<Timestamp>,
    /// How the run streaks change.
    pub streak: Streak,
    /// Why the loop was paused, when the circuit breaker tripped.
    pub paused_reason: Option<String>,
}

/// Checks that a schedule can produce run times: a positive interval, a
/// positive dynamic gap, and a cron expression and zone that parse and can
/// fire.
///
/// ```
/// use loops_core::{validate_schedule, Schedule};
/// let zero = Schedule::Interval { every_ms: 0, anchor: None };
/// assert_eq!(validate_schedule(&zero).unwrap_err().to_string(), "interval everyMs must be > 0");
/// let cron = Schedule::Cron { expression: "0 0 30 2 *".into(), timezone: None };
/// assert!(validate_schedule(&cron).is_err());
/// ```
pub fn validate_schedule(schedule: &Schedule) -> Result<(), ScheduleError> {
    match schedule {
        Schedule::Once { .. } => Ok(()),
        Schedule::Interval { every_ms, .. } => interval_ms(*every_ms).map(drop),
        Schedule::Cron {
            expression,
            timezone,
        } => CronExpr::parse(expression, timezone.as_deref())
            .map(drop)
            .map_err(ScheduleError::from),
        Schedule::Dynamic { min_interval_ms } => dynamic_ms(*min_interval_ms).map(drop),
    }
}

/// Parses the `at` of a `once` schedule, failing with
/// `invalid schedule.at: <input>` (SPEC §2.3).
///
/// ```
/// use loops_core::parse_schedule_at;
/// assert_eq!(parse_schedule_at("2026-01-01T09:00:00+01:00").unwrap().to_string(), "2026-01-01T08:00:00.000Z");
/// assert_eq!(parse_schedule_at("soon").unwrap_err().to_string(), "invalid schedule.at: soon");
/// ```
pub fn parse_schedule_at(input: &str) -> Result<Timestamp, ScheduleError> {
    Timestamp::parse(input).map_err(|_| ScheduleError::InvalidAt {
        input: input.to_owned(),
    })
}

/// The `nextRunAt` of a new loop (SPEC §2.3), with `now` as `from`.
///
/// - once: `at`, even if it is in the past;
/// - interval: `now + everyMs`;
/// - cron: the first fire time after `now`;
/// - dynamic: `now + (minIntervalMs ?? 60000)`.
///
/// It is always `Some` today; the `Option` leaves room for schedules that
/// start without a run.
///
/// ```
/// use loops_core::{initial_next_run, Schedule, Timestamp};
/// let now: Timestamp = "2026-01-01T00:07:00Z".parse().unwrap();
/// let cron = Schedule::Cron { expression: "*/15 * * * *".into(), timezone: Some("UTC".into()) };
/// assert_eq!(initial_next_run(&cron, now).unwrap().unwrap().to_string(), "2026-01-01T00:15:00.000Z");
/// let dynamic = Schedule::Dynamic { min_interval_ms: None };
/// assert_eq!(initial_next_run(&dynamic, now).unwrap().unwrap().to_string(), "2026-01-01T00:08:00.000Z");
/// ```
pub fn initial_next_run(
    schedule: &Schedule,
    now: Timestamp,
) -> Result<Option<Timestamp>, ScheduleError> {
    let next = match schedule {
        Schedule::Once { at } => *at,
        Schedule::Interval { every_ms, .. } => add(now, interval_ms(*every_ms)?)?,
        Schedule::Cron {
            expression,
            timezone,
        } => CronExpr::parse(expression, timezone.as_deref())?.next_after(now)?,
        Schedule::Dynamic { min_interval_ms } => add(now, dynamic_ms(*min_interval_ms)?)?,
    };
    Ok(Some(next))
}

/// `computeNextAfter(schedule, slot, finishedAt)` (SPEC §2.4): the next run
/// after the run of `slot` finished at `finished_at`, or `None` when the
/// schedule is done.
///
/// - once: `None`;
/// - interval, fixed_rate: the first `slot + k·everyMs` (k ≥ 1) strictly
///   after `finished_at`, so the loop stays on its grid;
/// - interval, fixed_delay: `finished_at + everyMs`;
/// - cron: the first fire time strictly after `max(slot, finished_at)`,
///   which is where repeating `nextCronRun` from `slot` ends;
/// - dynamic: `finished_at + (minIntervalMs ?? 60000)`.
///
/// ```
/// use loops_core::{compute_next_after, Schedule, Timestamp};
/// let at = |s: &str| s.parse::<Timestamp>().unwrap();
/// let rate = Schedule::Interval { every_ms: 60_000, anchor: None };
/// // A run of the 00:00 slot that took 2.5 minutes lands on the next grid point.
/// assert_eq!(
///     compute_next_after(&rate, at("2026-01-01T00:00:00Z"), at("2026-01-01T00:02:30Z")).unwrap(),
///     Some(at("2026-01-01T00:03:00Z"))
/// );
/// ```
pub fn compute_next_after(
    schedule: &Schedule,
    slot: Timestamp,
    finished_at: Timestamp,
) -> Result<Option<Timestamp>, ScheduleError> {
    let next = match schedule {
        Schedule::Once { .. } => return Ok(None),
        Schedule::Interval { every_ms, anchor } => {
            let every = interval_ms(*every_ms)?;
            match anchor.unwrap_or(Anchor::FixedRate) {
                Anchor::FixedRate => {
                    // The smallest k >= 1 with slot + k·every > finished_at,
                    // computed directly instead of by repeated addition.
                    let behind = finished_at.millis_since(slot);
                    let k = if behind < 0 { 1 } else { behind / every + 1 };
                    add(slot, k.checked_mul(every).ok_or(out_of_range())?)?
                }
                Anchor::FixedDelay => add(finished_at, every)?,
            }
        }
        Schedule::Cron {
            expression,
            timezone,
        } => {
            let cron = CronExpr::parse(expression, timezone.as_deref())?;
            cron.next_after(slot.max(finished_at))?
        }
        Schedule::Dynamic { min_interval_ms } => add(finished_at, dynamic_ms(*min_interval_ms)?)?,
    };
    Ok(Some(next))
}

/// The next `count` fire times of a schedule whose next run is `first`,
/// as the runners would take them (`loops next`, issue 28): each run is
/// taken to finish at its slot, so the one after is
/// [`compute_next_after`]`(slot, slot)`. A `first` already due (`<= now`)
/// is listed once, as the run a runner starts at once, and the list goes
/// on from `now`, as after that run. Slots at or after `until` (a loop's
/// `expiresAt`) are left out, and the list ends early when the schedule
/// does (a once) or runs out of representable instants.
///
/// ```
/// use loops_core::{fire_times, Schedule, Timestamp};
/// let at = |s: &str| s.parse::<Timestamp>().unwrap();
/// let hourly = Schedule::Interval { every_ms: 3_600_000, anchor: None };
/// let now = at("2026-01-01T00:30:00Z");
/// let times = fire_times(&hourly, at("2026-01-01T01:00:00Z"), now, None, 3).unwrap();
/// assert_eq!(times, [at("2026-01-01T01:00:00Z"), at("2026-01-01T02:00:00Z"), at("2026-01-01T03:00:00Z")]);
/// // An overdue slot runs at once; the grid goes on after now.
/// let times = fire_times(&hourly, at("2025-12-31T20:00:00Z"), now, None, 2).unwrap();
/// assert_eq!(times, [at("2025-12-31T20:00:00Z"), at("2026-01-01T01:00:00Z")]);
/// // Nothing at or after the expiry.
/// let times = fire_times(&hourly, at("2026-01-01T01:00:00Z"), now, Some(at("2026-01-01T02:00:00Z")), 5).unwrap();
/// assert_eq!(times, [at("2026-01-01T01:00:00Z")]);
/// ```
pub fn fire_times(
    schedule: &Schedule,
    first: Timestamp,
    now: Timestamp,
    until: Option<Timestamp>,
    count: usize,
) -> Result<Vec<Timestamp>, ScheduleError> {
    let mut times = Vec::with_capacity(count.min(1024));
    let mut next = Some(first);
    while let Some(slot) = next {
        if times.len() >= count || until.is_some_and(|u| slot >= u) {
            break;
        }
        times.push(slot);
        next = match compute_next_after(schedule, slot, slot.max(now)) {
            Ok(next) => next,
            // The end of the representable range ends the list.
            Err(ScheduleError::OutOfRange | ScheduleError::Cron(CronError::Exhausted { .. })) => {
                None
            }
            Err(e) => return Err(e),
        };
    }
    Ok(times)
}

/// `dueSlots(loop, now)` (SPEC §2.5): the slots a tick runs for this loop,
/// oldest first. The checks run in the SPEC's order:
///
/// 1. none if `nextRunAt` is absent or the loop is not active;
/// 2. none if `expiresAt <= now`;
/// 3. none if `nextRunAt > now`;
/// 4. a pending retry's slot alone;
/// 5. `[nextRunAt]` for once and dynamic;
/// 6. interval and cron by `catchUp`: `all` walks from `nextRunAt` while
///    `<= now`, at most `catchUpLimit` slots; `latest` is the last slot of
///    that walk; `none` is `[nextRunAt]`.
///
/// A `catchUpLimit` of 0 counts as 1: the loop is due, and returning no slot
/// would leave it due forever without running.
///
/// ```
/// use loops_core::{due_slots, CatchUp, Loop, Schedule, Timestamp};
/// # fn a_loop() -> Loop {
/// #     serde_json::from_value(serde_json::json!({
/// #         "id": "0123456789ab", "name": "n", "status": "active",
/// #         "schedule": {"type": "interval", "everyMs": 60000},
/// #         "target": {"type": "command", "command": "true"},
/// #         "catchUp": "latest", "catchUpLimit": 50, "overlap": "skip", "maxAttempts": 1,
/// #         "retryDelayMs": 60000, "leaseMs": 1800000,
/// #         "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"
/// #     })).unwrap()
/// # }
/// let at = |s: &str| s.parse::<Timestamp>().unwrap();
/// let mut lp = a_loop(); // every minute, catchUp latest
/// lp.next_run_at = Some(at("2026-01-01T00:00:00Z"));
/// // SPEC §10 item 13: the one slot is the latest grid point.
/// assert_eq!(due_slots(&lp, at("2026-01-01T00:04:30Z")).unwrap(), vec![at("2026-01-01T00:04:00Z")]);
/// lp.catch_up = CatchUp::All;
/// assert_eq!(due_slots(&lp, at("2026-01-01T00:02:00Z")).unwrap().len(), 3);
/// ```
pub fn due_slots(lp: &Loop, now: Timestamp) -> Result<Vec<Timestamp>, ScheduleError> {
    let Some(next) = lp.next_run_at else {
        return Ok(Vec::new());
    };
    if lp.status != LoopStatus::Active || is_expired(lp, now) || next > now {
        return Ok(Vec::new());
    }
    if let Some(retry) = lp.retry_scheduled_for {
        return Ok(vec![retry]);
    }
    // A stored limit above the maximum (the original accepts any) is
    // clamped, so one tick never plans an enormous list of slots.
    let limit = usize::try_from(lp.catch_up_limit.clamp(1, crate::MAX_CATCH_UP_LIMIT))
        .unwrap_or(usize::MAX);
    match &lp.schedule {
        Schedule::Once { .. } | Schedule::Dynamic { .. } => Ok(vec![next]),
        Schedule::Interval { every_ms, .. } => {
            let every = interval_ms(*every_ms)?;
            // How many grid points after `next` are also <= now.
            let behind = now.millis_since(next) / every;
            Ok(match lp.catch_up {
                CatchUp::None => vec![next],
                CatchUp::Latest => vec![add(next, behind * every)?],
                CatchUp::All => {
                    let count =
                        usize::try_from(behind).map_or(limit, |b| b.saturating_add(1).min(limit));
                    // Every slot is <= now, so none of these additions overflows.
                    (0..count as i64).map(|i| next.add_ms(i * every)).collect()
                }
            })
        }
        Schedule::Cron {
            expression,
            timezone,
        } => {
            let cron = CronExpr::parse(expression, timezone.as_deref())?;
            Ok(match lp.catch_up {
                CatchUp::None => vec![next],
                CatchUp::Latest => {
                    let latest = cron.latest_at_or_before(now).unwrap_or(next);
                    vec![latest.max(next)]
                }
                CatchUp::All => {
                    let mut slots = vec![next];
                    while slots.len() < limit {
                        let Some(&last) = slots.last() else { break };
                        // No fire time left in range ends the walk.
                        match cron.next_after(last) {
                            Ok(slot) if slot <= now => slots.push(slot),
                            _ => break,
                        }
                    }
                    slots
                }
            })
        }
    }
}

/// Whether a loop has expired at `now` (SPEC §2.6): `expiresAt <= now`.
///
/// Only active loops expire; checking the status is the caller's job.
pub fn is_expired(lp: &Loop, now: Timestamp) -> bool {
    lp.expires_at.is_some_and(|e| e <= now)
}

/// `advanceLoop(loop, run, finishedAt, succeeded)` as a pure plan (SPEC §3.4):
/// what to write to the loop, or `None` to leave it alone.
///
/// [`plan_advance_with`] with the middle of the jitter range, so an
/// exponential delay is exactly `retryDelayMs × 2^(attempt−1)`.
pub fn plan_advance(
    lp: &Loop,
    run: &LoopRun,
    finished_at: Timestamp,
    succeeded: bool,
) -> Result<Option<LoopAdvance>, ScheduleError> {
    plan_advance_with(lp, run, finished_at, succeeded, 0.5)
}

/// `advanceLoop` as a pure plan, with the loop's policies (issue 17):
///
/// - `None` if the run is still running or the loop is not active;
/// - a retry if the run failed and `attempt < maxAttempts`: stay active,
///   `nextRunAt = finishedAt + retry_delay_ms(..)`, `retryScheduledFor =
///   slot`; the streaks stay;
/// - otherwise `nextRunAt = computeNextAfter(..)`, stopped when that is
///   `None`, and the pending retry cleared; a success counts toward
///   `expiresAfterRuns` (expired when reached) and a final failure toward
///   `pauseAfterFailures` (paused, with the reason, when reached); a
///   skipped or cancelled run counts toward neither, and a cancelled run
///   is never retried (issue 28).
///
/// `random` is the caller's draw in `[0, 1)` for the backoff's jitter:
/// core reads no randomness itself. The caller re-reads the loop and writes
/// the plan in the same transaction as the run's finalize, which closes the
/// gap of SPEC §9 item 7.
pub fn plan_advance_with(
    lp: &Loop,
    run: &LoopRun,
    finished_at: Timestamp,
    succeeded: bool,
    random: f64,
) -> Result<Option<LoopAdvance>, ScheduleError> {
    if run.status == RunStatus::Running || lp.status != LoopStatus::Active {
        return Ok(None);
    }
    // Issue 27: an agent that failed to log in is not retried.
    let auth_pause = if succeeded {
        None
    } else {
        by_class::auth_pause_reason(lp, run)
    };
    // Issue 28: a cancelled run is never retried.
    let retry = !succeeded && run.status != RunStatus::Cancelled;
    if retry && auth_pause.is_none() && run.attempt < lp.max_attempts {
        return Ok(Some(LoopAdvance {
            status: LoopStatus::Active,
            next_run_at: Some(by_class::retry_due(lp, run, finished_at, random)?),
            retry_scheduled_for: Some(run.scheduled_for),
            streak: Streak::Unchanged,
            paused_reason: None,
        }));
    }
    let next = compute_next_after(&lp.schedule, run.scheduled_for, finished_at)?;
    let mut plan = LoopAdvance {
        status: if next.is_some() {
            LoopStatus::Active
        } else {
            LoopStatus::Stopped
        },
        next_run_at: next,
        retry_scheduled_for: None,
        streak: Streak::Unchanged,
        paused_reason: None,
    };
    if matches!(run.status, RunStatus::Skipped | RunStatus::Cancelled) {
        return Ok(Some(plan));
    }
    // A run that may not be retried (a cancelled workflow) advances as a
    // success does, but only a real success counts toward expiry.
    if run.status == RunStatus::Succeeded {
        plan.streak = Streak::Success;
        let count = lp.consecutive_successes.unwrap_or(0).saturating_add(1);
        if let Some(n) = lp.policy.expires_after_runs
            && count >= n
            && plan.status == LoopStatus::Active
        {
            plan.status = LoopStatus::Expired;
            plan.next_run_at = None;
        }
    } else {
        plan.streak = Streak::Failure;
        let count = lp.consecutive_failures.unwrap_or(0).saturating_add(1);
        if let Some(n) = lp.policy.pause_after_failures
            && count >= n
            && plan.status == LoopStatus::Active
        {
            plan.status = LoopStatus::Paused;
            plan.paused_reason = Some(breaker_reason(count, run.error.as_deref()));
        }
        if let Some(reason) = auth_pause
            && plan.status == LoopStatus::Active
        {
            plan.status = LoopStatus::Paused;
            plan.paused_reason = Some(reason);
        }
    }
    Ok(Some(plan))
}

/// The `pausedReason` of a tripped circuit breaker: the count and the first
/// line of the last error (already scrubbed when it was recorded).
fn breaker_reason(count: u32, error: Option<&str>) -> String {
    let last = error
        .and_then(|e| e.lines().next())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .unwrap_or("no error recorded");
    format!(
        "paused after {count} consecutive failures (pauseAfterFailures); last error: {last}; \
         `loops resume` re-arms it"
    )
}

/// The delay before retry `attempt + 1` of a run whose attempt `attempt`
/// failed: `retryDelayMs` under fixed backoff (0.3.1), and under
/// exponential `retryDelayMs × 2^(attempt−1) × multiplier × (0.5 +
/// random)`, capped by `maxRetryDelayMs`. `random` is clamped to `[0, 1]`.
///
/// `multiplier` is the failure class's (agents note §7.3,
/// [`FailureClass::retry_multiplier`](crate::FailureClass::retry_multiplier)):
/// 4 for a throttled class, else 1; 0 counts as 1. It applies before the
/// cap, so the cap binds whatever the class. Under fixed backoff the
/// multiplied delay is capped the same way, but never shorter than
/// `retryDelayMs`, which 0.3.1 never capped.
///
/// ```
/// use loops_core::{retry_delay_ms, Backoff, Loop};
/// # let mut lp: Loop = serde_json::from_value(serde_json::json!({
/// #     "id": "0123456789ab", "name": "n", "status": "active",
/// #     "schedule": {"type": "interval", "everyMs": 60000},
/// #     "target": {"type": "command", "command": "true"},
/// #     "catchUp": "latest", "catchUpLimit": 50, "overlap": "skip", "maxAttempts": 5,
/// #     "retryDelayMs": 1000, "leaseMs": 1800000,
/// #     "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"
/// # })).unwrap();
/// assert_eq!(retry_delay_ms(&lp, 3, 0.5, 1).unwrap(), 1000);
/// assert_eq!(retry_delay_ms(&lp, 3, 0.5, 4).unwrap(), 4000);
/// lp.policy.backoff = Backoff::Exponential;
/// assert_eq!(retry_delay_ms(&lp, 3, 0.5, 1).unwrap(), 4000);
/// assert_eq!(retry_delay_ms(&lp, 3, 0.0, 1).unwrap(), 2000);
/// assert_eq!(retry_delay_ms(&lp, 3, 0.5, 4).unwrap(), 16000);
/// lp.policy.max_retry_delay_ms = Some(10_000);
/// assert_eq!(retry_delay_ms(&lp, 3, 0.5, 4).unwrap(), 10_000);
/// ```
pub fn retry_delay_ms(
    lp: &Loop,
    attempt: u32,
    random: f64,
    multiplier: u32,
) -> Result<i64, ScheduleError> {
    let base = i64::try_from(lp.retry_delay_ms).map_err(|_| out_of_range())?;
    let cap = i64::try_from(lp.policy.max_retry_delay()).unwrap_or(i64::MAX);
    let multiplier = multiplier.max(1);
    if lp.policy.backoff == Backoff::Fixed {
        return Ok(base
            .saturating_mul(i64::from(multiplier))
            .min(cap)
            .max(base));
    }
    let factor = 0.5
        + if random.is_nan() {
            0.5
        } else {
            random.clamp(0.0, 1.0)
        };
    let exponent = attempt.saturating_sub(1).min(62);
    // In floating point, so a large attempt saturates at the cap instead
    // of overflowing; the cap is at most a few years of milliseconds.
    let delay = (base as f64) * 2f64.powi(exponent as i32) * f64::from(multiplier) * factor;
    if !delay.is_finite() || delay >= cap as f64 {
        return Ok(cap);
    }
    Ok((delay.round() as i64).max(1))
}

/// `everyMs` as a positive `i64`.
fn interval_ms(every_ms: u64) -> Result<i64, ScheduleError> {
    match every_ms {
        0 => Err(ScheduleError::IntervalNotPositive),
        ms => i64::try_from(ms).map_err(|_| out_of_range()),
    }
}

/// `minIntervalMs ?? 60000` as a positive `i64`.
fn dynamic_ms(min_interval_ms: Option<u64>) -> Result<i64, ScheduleError> {
    match min_interval_ms.unwrap_or(DEFAULT_DYNAMIC_INTERVAL_MS) {
        0 => Err(ScheduleError::DynamicNotPositive),
        ms => i64::try_from(ms).map_err(|_| out_of_range()),
    }
}

fn add(t: Timestamp, ms: i64) -> Result<Timestamp, ScheduleError> {
    t.checked_add_ms(ms).ok_or(out_of_range())
}

fn out_of_range() -> ScheduleError {
    ScheduleError::OutOfRange
}

mod by_class;
#[cfg(test)]
mod tests;
