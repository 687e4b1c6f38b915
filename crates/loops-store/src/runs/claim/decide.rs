//! The claim decision (SPEC §4.3 `claimRun`, §1.5), written once for both
//! backends: from the loop and the slot's run as the claim's transaction
//! read them, what the claim writes, or why it claims nothing.

use loops_core::{Loop, LoopRun, RunStatus, Timestamp};

use super::NotClaimed;
use crate::error::Result;
use crate::runs::may_run_again;
use crate::runs::takeover::{Alive, Takeover, Vantage, takeover};

/// What a claim writes, or why it writes nothing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// The slot has no row: insert attempt 1, running.
    Insert,
    /// The slot's run is running with an expired lease and may be taken
    /// over: the same attempt, while the row is still running under the
    /// claimant it was judged by, with a lease that expired at or before
    /// `cutoff`.
    Reclaim {
        /// The run as read.
        run: LoopRun,
        /// The latest lease expiry the write accepts.
        cutoff: Timestamp,
    },
    /// The slot's run failed, timed out or was abandoned with attempts
    /// left (or a shutdown released it): attempt + 1 (the same attempt
    /// after a shutdown).
    Retry {
        /// The run as read.
        run: LoopRun,
    },
    /// Nothing is written.
    Refuse(NotClaimed),
}

/// What the claim asks beyond the slot's row, each asked only when the
/// decision needs the answer: the processes of a run it may take over
/// ([`Alive`]), and the overlap.
pub(crate) trait ClaimFacts: Alive {
    /// A running run of the loop at another slot, which a claim that would
    /// start a run must not start beside, when the loop's overlap policy
    /// is `skip` and the claim is not manual (issue 15); `None` otherwise.
    fn overlapping(&mut self) -> Result<Option<LoopRun>>;
}

/// Decides the claim of the slot of `lp` (the loop as re-read by the
/// claim) whose row is `existing`, at `now`, seen from `vantage`.
///
/// | `existing` | Decision |
/// |---|---|
/// | none | [`Decision::Insert`] |
/// | running, not to be taken ([`takeover`]) | `LeaseHeld` (also in another host's grace), `ProcessAlive`, `StepProcessAlive` |
/// | running, to be taken | [`Decision::Reclaim`] |
/// | succeeded, skipped, cancelled | `Finished` |
/// | failed, timed out, abandoned | [`Decision::Retry`] while it may run again, else `AttemptsExhausted` |
///
/// A decision that would start a run (insert, reclaim, retry) is refused
/// with `OverlapRunning` when [`ClaimFacts::overlapping`] finds a run: a
/// finished or held slot is still reported as such.
pub(crate) fn decide(
    lp: &Loop,
    existing: Option<LoopRun>,
    now: Timestamp,
    vantage: Vantage<'_>,
    facts: &mut impl ClaimFacts,
) -> Result<Decision> {
    let decision = match existing {
        None => Decision::Insert,
        Some(run) => match run.status {
            RunStatus::Running => match takeover(&run, now, vantage, facts)? {
                Takeover::Now { cutoff } => Decision::Reclaim { run, cutoff },
                // Another host's run: its lease is held until the grace
                // has passed too.
                Takeover::Held | Takeover::InGrace => Decision::Refuse(NotClaimed::LeaseHeld(run)),
                Takeover::ProcessAlive => Decision::Refuse(NotClaimed::ProcessAlive(run)),
                Takeover::StepProcessAlive => Decision::Refuse(NotClaimed::StepProcessAlive(run)),
            },
            RunStatus::Succeeded | RunStatus::Skipped | RunStatus::Cancelled => {
                Decision::Refuse(NotClaimed::Finished(run))
            }
            RunStatus::Failed | RunStatus::TimedOut | RunStatus::Abandoned => {
                // A run a shutdown interrupted did not count its attempt
                // (SPEC §9 item 17): it runs again as the same attempt.
                if may_run_again(
                    run.status,
                    run.attempt,
                    run.error.as_deref(),
                    lp.max_attempts,
                ) {
                    Decision::Retry { run }
                } else {
                    Decision::Refuse(NotClaimed::AttemptsExhausted(run))
                }
            }
        },
    };
    if matches!(decision, Decision::Refuse(_)) {
        return Ok(decision);
    }
    Ok(match facts.overlapping()? {
        Some(other) => Decision::Refuse(NotClaimed::OverlapRunning(other)),
        None => decision,
    })
}

#[cfg(test)]
mod tests {
    use loops_core::{CommandTarget, LoopStatus, NewLoop, Schedule, Target};

    use super::*;
    use crate::runs::INTERRUPTED_BY_SHUTDOWN;
    use crate::runs::takeover::tests::{Answers, run, t0};

    /// Fixed answers, with the overlap.
    #[derive(Default)]
    struct Facts {
        alive: Answers,
        overlapping: Option<LoopRun>,
        overlap_asked: bool,
    }

    impl Alive for Facts {
        fn process(&mut self) -> bool {
            self.alive.process()
        }

        fn step_process(&mut self) -> Result<bool> {
            self.alive.step_process()
        }
    }

    impl ClaimFacts for Facts {
        fn overlapping(&mut self) -> Result<Option<LoopRun>> {
            self.overlap_asked = true;
            Ok(self.overlapping.clone())
        }
    }

    fn a_loop(max_attempts: u32) -> Loop {
        let new = NewLoop::new(
            "n",
            Schedule::Once { at: t0() },
            Target::Command(CommandTarget::new("true")),
        );
        Loop {
            id: "bbbbbbbbbbbb".parse().unwrap(),
            name: new.name,
            description: None,
            status: LoopStatus::Active,
            schedule: new.schedule,
            target: new.target,
            next_run_at: Some(t0()),
            retry_scheduled_for: None,
            catch_up: new.catch_up,
            catch_up_limit: new.catch_up_limit,
            overlap: new.overlap,
            max_attempts,
            retry_delay_ms: new.retry_delay_ms,
            lease_ms: new.lease_ms,
            expires_at: None,
            created_at: t0(),
            updated_at: t0(),
            paused_reason: None,
            policy: new.policy,
            consecutive_successes: None,
            consecutive_failures: None,
            hooks: new.hooks,
        }
    }

    const HOST_A: Vantage<'static> = Vantage::Host {
        name: "host-a",
        grace_ms: 30_000,
    };

    fn decide_with(existing: Option<LoopRun>, now: Timestamp, facts: &mut Facts) -> Decision {
        decide(&a_loop(3), existing, now, HOST_A, facts).unwrap()
    }

    fn other_slot() -> LoopRun {
        let mut other = run(RunStatus::Running, "host-b:2:y", None, None);
        other.scheduled_for = t0().add_ms(-60_000);
        other
    }

    #[test]
    fn a_fresh_slot_is_inserted_unless_another_slot_overlaps() {
        let mut facts = Facts::default();
        assert_eq!(decide_with(None, t0(), &mut facts), Decision::Insert);
        assert!(facts.overlap_asked);
        let mut facts = Facts {
            overlapping: Some(other_slot()),
            ..Facts::default()
        };
        assert_eq!(
            decide_with(None, t0(), &mut facts),
            Decision::Refuse(NotClaimed::OverlapRunning(other_slot()))
        );
    }

    #[test]
    fn a_held_lease_is_reported_without_asking_anything() {
        let held = run(RunStatus::Running, "host-a:1:x", None, Some(t0().add_ms(1)));
        let mut facts = Facts {
            overlapping: Some(other_slot()),
            ..Facts::default()
        };
        assert_eq!(
            decide_with(Some(held.clone()), t0(), &mut facts),
            Decision::Refuse(NotClaimed::LeaseHeld(held))
        );
        assert!(!facts.overlap_asked);
        assert_eq!(facts.alive.asked, 0);
    }

    #[test]
    fn an_expired_run_of_this_host_is_judged_by_its_processes() {
        let now = t0().add_ms(1);
        let expired = run(RunStatus::Running, "host-a:1:x", None, Some(t0()));
        let mut facts = Facts::default();
        facts.alive.process = true;
        assert_eq!(
            decide_with(Some(expired.clone()), now, &mut facts),
            Decision::Refuse(NotClaimed::ProcessAlive(expired.clone()))
        );
        let mut facts = Facts::default();
        facts.alive.step = true;
        assert_eq!(
            decide_with(Some(expired.clone()), now, &mut facts),
            Decision::Refuse(NotClaimed::StepProcessAlive(expired.clone()))
        );
        let mut facts = Facts::default();
        assert_eq!(
            decide_with(Some(expired.clone()), now, &mut facts),
            Decision::Reclaim {
                run: expired.clone(),
                cutoff: now
            }
        );
        // A takeover starts a run: the overlap refuses it.
        let mut facts = Facts {
            overlapping: Some(other_slot()),
            ..Facts::default()
        };
        assert_eq!(
            decide_with(Some(expired), now, &mut facts),
            Decision::Refuse(NotClaimed::OverlapRunning(other_slot()))
        );
    }

    #[test]
    fn another_hosts_expired_run_is_held_until_the_grace_passed() {
        let expired = run(RunStatus::Running, "host-b:1:x", None, Some(t0()));
        let mut facts = Facts::default();
        assert_eq!(
            decide_with(Some(expired.clone()), t0().add_ms(29_999), &mut facts),
            Decision::Refuse(NotClaimed::LeaseHeld(expired.clone()))
        );
        let now = t0().add_ms(30_000);
        assert_eq!(
            decide_with(Some(expired.clone()), now, &mut facts),
            Decision::Reclaim {
                run: expired,
                cutoff: t0()
            }
        );
        assert_eq!(facts.alive.asked, 0);
    }

    #[test]
    fn on_sqlite_every_expired_run_is_judged_by_its_processes() {
        let expired = run(RunStatus::Running, "host-b:1:x", None, Some(t0()));
        let mut facts = Facts::default();
        let decided = decide(
            &a_loop(3),
            Some(expired.clone()),
            t0(),
            Vantage::Everywhere,
            &mut facts,
        );
        assert_eq!(
            decided.unwrap(),
            Decision::Reclaim {
                run: expired,
                cutoff: t0()
            }
        );
        assert_eq!(facts.alive.asked, 2);
    }

    #[test]
    fn a_finished_slot_is_never_claimed_again() {
        for status in [RunStatus::Succeeded, RunStatus::Skipped] {
            let done = run(status, "host-a:1:x", None, None);
            let mut facts = Facts::default();
            assert_eq!(
                decide_with(Some(done.clone()), t0(), &mut facts),
                Decision::Refuse(NotClaimed::Finished(done))
            );
            assert!(!facts.overlap_asked);
        }
    }

    #[test]
    fn a_failed_slot_is_retried_while_attempts_remain() {
        for status in [RunStatus::Failed, RunStatus::TimedOut, RunStatus::Abandoned] {
            let mut failed = run(status, "host-a:1:x", None, None);
            failed.attempt = 2;
            let mut facts = Facts::default();
            assert_eq!(
                decide_with(Some(failed.clone()), t0(), &mut facts),
                Decision::Retry {
                    run: failed.clone()
                }
            );
            let mut facts = Facts {
                overlapping: Some(other_slot()),
                ..Facts::default()
            };
            assert_eq!(
                decide_with(Some(failed.clone()), t0(), &mut facts),
                Decision::Refuse(NotClaimed::OverlapRunning(other_slot()))
            );
            failed.attempt = 3;
            let mut facts = Facts::default();
            assert_eq!(
                decide_with(Some(failed.clone()), t0(), &mut facts),
                Decision::Refuse(NotClaimed::AttemptsExhausted(failed))
            );
            assert!(!facts.overlap_asked);
        }
    }

    #[test]
    fn a_run_a_shutdown_released_runs_again_on_its_last_attempt() {
        let mut released = run(RunStatus::Abandoned, "host-a:1:x", None, None);
        released.attempt = 3;
        released.error = Some(INTERRUPTED_BY_SHUTDOWN.into());
        let mut facts = Facts::default();
        assert_eq!(
            decide_with(Some(released.clone()), t0(), &mut facts),
            Decision::Retry { run: released }
        );
    }
}
