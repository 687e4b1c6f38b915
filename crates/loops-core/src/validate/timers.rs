//! An agent target's timers (issue 27, `agents-0.5.11.md` §6, §12.2):
//! `timeoutMs` is a positive number or `null` for no wall clock, and
//! `idleTimeoutMs` a positive number; both are capped at 100 years, as
//! every duration is. The messages are 0.5.11's.

use super::{Result, ValidationError, validate_timeout_cap};
use crate::duration::MAX_DURATION_MS;
use crate::model::{AgentTarget, WallClock};

/// The message of a `timeoutMs` that is neither a positive integer nor
/// `null`; `field` is its path.
pub(in crate::validate) fn wall_clock_message(field: &str) -> String {
    format!("{field} must be a positive integer or null for unlimited")
}

/// The message of an `idleTimeoutMs` that is not a positive integer.
pub(in crate::validate) fn idle_message(field: &str) -> String {
    format!("{field} must be a positive integer")
}

/// Checks an agent's `timeoutMs` and `idleTimeoutMs`.
pub(super) fn validate_agent_timers(target: &AgentTarget, label: &str) -> Result<()> {
    if target.timeout_ms == WallClock::Ms(0) {
        let field = format!("{label}.timeoutMs");
        return Err(ValidationError::new(&field, wall_clock_message(&field)));
    }
    validate_timeout_cap(target.timeout_ms.ms(), label)?;
    let field = format!("{label}.idleTimeoutMs");
    match target.idle_timeout_ms {
        Some(0) => Err(ValidationError::new(&field, idle_message(&field))),
        Some(ms) if ms > MAX_DURATION_MS => Err(ValidationError::new(
            &field,
            format!(
                "{field} must be at most {MAX_DURATION_MS} (100 years), got {ms}; use a shorter \
                 idle timeout"
            ),
        )),
        _ => Ok(()),
    }
}
