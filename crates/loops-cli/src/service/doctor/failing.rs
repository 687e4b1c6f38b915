//! Doctor's warning about active loops that keep failing without a circuit
//! breaker (issue 17): the newest runs of each, all final failures.

use loops_core::{Loop, RunStatus};
use loops_store::{RunFilter, Store};

use super::{Check, CheckStatus};

/// How many final failures in a row earn the warning.
pub(super) const FAILING_RUNS: u32 = 5;

/// A warning for `lp` when it has no `--pause-after-failures` and its
/// newest [`FAILING_RUNS`] runs all failed for good; `None` otherwise, or
/// when its runs cannot be read (the run checks report that).
pub(super) fn failing_loop(store: &Store, lp: &Loop) -> Option<Check> {
    if lp.policy.pause_after_failures.is_some() {
        return None;
    }
    let runs = store
        .list_runs(&RunFilter {
            loop_id: Some(lp.id),
            status: None,
            limit: Some(FAILING_RUNS),
            offset: None,
        })
        .ok()?;
    // A failed run with a retry pending is not final yet; one whose slot
    // is the pending retry's is skipped by requiring full attempts.
    let failed = |r: &loops_core::LoopRun| {
        matches!(
            r.status,
            RunStatus::Failed | RunStatus::TimedOut | RunStatus::Abandoned
        ) && r.attempt >= lp.max_attempts
    };
    if runs.len() < FAILING_RUNS as usize || !runs.iter().all(failed) {
        return None;
    }
    // Issue 27: what the newest failure was, by class and fingerprint.
    let last = runs
        .first()
        .and_then(|r| {
            let class = r.facts.failure_class?;
            let print = r.facts.failure_fingerprint.as_deref().unwrap_or("-");
            Some(format!(" (last: {class}, fingerprint {print})"))
        })
        .unwrap_or_default();
    Some(
        Check::new(
            format!("loop:{}:failing", lp.id),
            CheckStatus::Warn,
            format!(
                "active loop has failed {FAILING_RUNS} or more times in a row: {}{last}",
                lp.name
            ),
        )
        .detail(format!(
            "add a circuit breaker with `loops edit {} --pause-after-failures 5`, \
             or look at `loops runs {}`",
            lp.id, lp.id
        )),
    )
}
