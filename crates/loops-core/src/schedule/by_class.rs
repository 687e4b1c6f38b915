//! What a failed run's class changes in its loop's advance (issue 27):
//! agents note §7.3 and beyond it.
//!
//! - A throttled class (`rate_limit`, `auth`, `provider_capacity`,
//!   `provider_unavailable`) waits 4× longer before its retry, capped as
//!   every retry is ([`retry_delay_ms`]'s multiplier), as 0.5.11.
//! - Beyond 0.5.11: when the run's output names when a limit resets
//!   (`retry after 120s`, `resets 3pm`, [`retry_at`]), a throttled retry
//!   waits exactly until then plus a little jitter, instead of guessing.
//! - Beyond 0.5.11: an agent loop whose run failed to authenticate is
//!   paused at once, with the reason; retrying a logged-out agent only
//!   burns attempts.

use super::{ScheduleError, add, retry_delay_ms};
use crate::cron::Zone;
use crate::failure::{FailureClass, retry_at};
use crate::model::{Loop, LoopRun, Target};
use crate::time::Timestamp;

/// The most jitter added to a named reset: a tenth of the wait, at most a
/// minute, at least a second (so many loops told one reset time do not
/// all come back in the same instant).
const MAX_RESET_JITTER_MS: i64 = 60_000;
const MIN_RESET_JITTER_MS: i64 = 1_000;

/// The most characters of the failing line a `pausedReason` quotes.
const MAX_REASON_CHARS: usize = 200;

/// When retry `run.attempt + 1` of `run`, which failed at `finished_at`,
/// is due: the loop's retry delay, times the class's multiplier; or, for a
/// class that waits on a provider's limit, the reset its output names plus
/// jitter. `random` is the caller's draw in `[0, 1)`.
pub(super) fn retry_due(
    lp: &Loop,
    run: &LoopRun,
    finished_at: Timestamp,
    random: f64,
) -> Result<Timestamp, ScheduleError> {
    let class = run.facts.failure_class;
    if class.is_some_and(waits_for_reset)
        && let Some(reset) = named_reset(run, finished_at)
    {
        let wait = reset.millis_since(finished_at).max(0);
        let span = (wait / 10).clamp(MIN_RESET_JITTER_MS, MAX_RESET_JITTER_MS);
        let random = if random.is_nan() {
            0.5
        } else {
            random.clamp(0.0, 1.0)
        };
        return add(reset, (span as f64 * random).round() as i64);
    }
    let multiplier = class.map_or(1, FailureClass::retry_multiplier);
    add(
        finished_at,
        retry_delay_ms(lp, run.attempt, random, multiplier)?,
    )
}

/// The classes whose retry waits for a reset the provider names: a limit,
/// not a login.
fn waits_for_reset(class: FailureClass) -> bool {
    class.is_throttled() && class != FailureClass::Auth
}

/// The reset `run`'s error, stderr or stdout names, read in the host's
/// local time zone, as the providers print it.
fn named_reset(run: &LoopRun, finished_at: Timestamp) -> Option<Timestamp> {
    let text = [&run.error, &run.stderr, &run.stdout]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n");
    retry_at(&text, finished_at, Zone::Local)
}

/// The `pausedReason` of an agent loop whose run failed to authenticate,
/// or `None` when the loop goes on: only an agent's `auth` failure pauses.
pub(super) fn auth_pause_reason(lp: &Loop, run: &LoopRun) -> Option<String> {
    let Target::Agent(agent) = &lp.target else {
        return None;
    };
    if run.facts.failure_class != Some(FailureClass::Auth) {
        return None;
    }
    let who = match &agent.account {
        Some(account) => format!("{} (account {})", agent.provider, account.profile),
        None => agent.provider.to_string(),
    };
    let last = run
        .stderr
        .iter()
        .chain(&run.error)
        .flat_map(|text| text.lines())
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("no error recorded");
    let last = match last.char_indices().nth(MAX_REASON_CHARS) {
        Some((cut, _)) => format!("{}…", &last[..cut]),
        None => last.to_owned(),
    };
    Some(format!(
        "{who} failed to authenticate: {last}; log in, then `loops resume {}`",
        lp.name
    ))
}
