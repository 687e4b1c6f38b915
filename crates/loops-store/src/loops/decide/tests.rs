//! The pure decisions of the `loops` operations, without a database.

use loops_core::{CommandTarget, LoopId, LoopStatus, NewLoop, Schedule, Target, Timestamp};

use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn now() -> Timestamp {
    t("2026-01-01T12:00:00.000Z")
}

fn with(schedule: Schedule) -> Loop {
    let new = NewLoop::new("job", schedule, Target::Command(CommandTarget::new("true")));
    let next = initial_next_run(&new.schedule, t("2026-01-01T00:00:00.000Z")).unwrap();
    new_loop(
        &new,
        LoopId::from_bytes([7; 6]),
        next,
        t("2026-01-01T00:00:00.000Z"),
    )
}

fn every_hour() -> Loop {
    with(Schedule::Interval {
        every_ms: 3_600_000,
        anchor: None,
    })
}

fn in_status(status: LoopStatus, next: Option<Timestamp>) -> Loop {
    let mut lp = every_hour();
    lp.status = status;
    lp.next_run_at = next;
    lp.retry_scheduled_for = next.map(|n| n.add_ms(5_000));
    lp
}

#[test]
fn a_new_loop_is_active_with_its_first_run_and_zero_streaks_only_for_set_policies() {
    let mut new = NewLoop::new(
        "job",
        Schedule::Interval {
            every_ms: 60_000,
            anchor: None,
        },
        Target::Command(CommandTarget::new("true")),
    );
    new.policy.pause_after_failures = Some(3);
    let lp = new_loop(&new, LoopId::from_bytes([1; 6]), Some(now()), now());
    assert_eq!(lp.status, LoopStatus::Active);
    assert_eq!(lp.next_run_at, Some(now()));
    assert_eq!(lp.retry_scheduled_for, None);
    assert_eq!((lp.created_at, lp.updated_at), (now(), now()));
    assert_eq!(lp.consecutive_failures, Some(0));
    assert_eq!(lp.consecutive_successes, None);
    assert_eq!(lp.paused_reason, None);
}

#[test]
fn a_pause_that_changed_nothing_is_already_paused_or_refused() {
    let paused = in_status(LoopStatus::Paused, None);
    assert_eq!(pause_unchanged(paused.clone()), LoopChange::Already(paused));
    for status in [LoopStatus::Stopped, LoopStatus::Expired, LoopStatus::Active] {
        let lp = in_status(status, None);
        let change = pause_unchanged(lp.clone());
        assert_eq!(
            change,
            LoopChange::Refused {
                loop_: lp,
                reason: Refusal::NotActive
            }
        );
        let LoopChange::Refused { reason, .. } = change else {
            unreachable!()
        };
        assert_eq!(reason.to_string(), "only an active loop can be paused");
    }
}

#[test]
fn stopping_a_stopped_loop_changes_nothing() {
    let lp = in_status(LoopStatus::Stopped, None);
    assert_eq!(stop_unchanged(lp.clone()), LoopChange::Already(lp));
}

#[test]
fn resuming_an_active_loop_is_already_done() {
    assert_eq!(
        resume(&in_status(LoopStatus::Active, Some(now())), now()).unwrap(),
        Resume::Already
    );
}

#[test]
fn a_paused_loop_resumes_with_its_next_run_and_pending_retry() {
    let next = t("2026-01-01T09:00:00.000Z");
    let lp = in_status(LoopStatus::Paused, Some(next));
    assert_eq!(
        resume(&lp, now()).unwrap(),
        Resume::Write {
            next: Some(next),
            retry: Some(next.add_ms(5_000)),
            once_slot: None
        }
    );
}

#[test]
fn a_stopped_expired_or_unscheduled_loop_resumes_from_its_schedule_without_a_retry() {
    let fresh = initial_next_run(&every_hour().schedule, now())
        .unwrap()
        .unwrap();
    for lp in [
        in_status(LoopStatus::Stopped, None),
        in_status(LoopStatus::Expired, None),
        in_status(LoopStatus::Stopped, Some(t("2026-01-01T01:00:00.000Z"))),
        in_status(LoopStatus::Paused, None),
    ] {
        assert_eq!(
            resume(&lp, now()).unwrap(),
            Resume::Write {
                next: Some(fresh),
                retry: None,
                once_slot: None
            },
            "{:?}",
            lp.status
        );
    }
}

#[test]
fn a_loop_past_its_expiry_is_not_resumed() {
    let mut lp = in_status(LoopStatus::Paused, Some(now()));
    lp.expires_at = Some(now());
    assert_eq!(
        resume(&lp, now()).unwrap(),
        Resume::Refused(Refusal::PastExpiry)
    );
    assert_eq!(
        Refusal::PastExpiry.to_string(),
        "the loop is past its expiry and cannot be resumed"
    );
    lp.expires_at = Some(now().add_ms(1));
    assert!(matches!(resume(&lp, now()).unwrap(), Resume::Write { .. }));
}

#[test]
fn a_once_loop_resumes_only_while_its_slot_may_still_run() {
    let at = t("2026-01-01T06:00:00.000Z");
    let mut lp = with(Schedule::Once { at });
    lp.status = LoopStatus::Stopped;
    lp.next_run_at = None;
    assert_eq!(
        resume(&lp, now()).unwrap(),
        Resume::Write {
            next: Some(at),
            retry: None,
            once_slot: Some(at)
        },
        "the slot's run decides"
    );
    // Paused with its next run elsewhere (a pending retry's slot): no
    // once slot to check.
    let later = t("2026-01-01T07:00:00.000Z");
    lp.status = LoopStatus::Paused;
    lp.next_run_at = Some(later);
    assert_eq!(
        resume(&lp, now()).unwrap(),
        Resume::Write {
            next: Some(later),
            retry: None,
            once_slot: None
        },
        "only the once slot itself is checked"
    );
    assert!(slot_is_spent("succeeded", 1, None, 3));
    assert!(slot_is_spent("skipped", 1, None, 3));
    assert!(!slot_is_spent("failed", 1, None, 3));
    assert!(slot_is_spent("failed", 3, None, 3));
    assert!(!slot_is_spent(
        "abandoned",
        3,
        Some(crate::runs::INTERRUPTED_BY_SHUTDOWN),
        3
    ));
    assert!(!slot_is_spent("running", 1, None, 1));
    assert!(!slot_is_spent("from-the-future", 1, None, 1));
}

#[test]
fn only_an_active_loop_at_or_past_its_expiry_expires() {
    let mut lp = in_status(LoopStatus::Active, Some(now()));
    assert!(!expires(&lp, now()), "no expiry");
    lp.expires_at = Some(now());
    assert!(expires(&lp, now()));
    assert!(!expires(&lp, now().add_ms(-1)));
    for status in [LoopStatus::Paused, LoopStatus::Stopped, LoopStatus::Expired] {
        lp.status = status;
        assert!(!expires(&lp, now()), "{status:?}");
    }
}

#[test]
fn a_loop_on_triggers_only_resumes_with_no_next_run() {
    let mut lp = in_status(LoopStatus::Paused, None);
    lp.policy.trigger_only = true;
    assert_eq!(
        resume(&lp, now()).unwrap(),
        Resume::Write {
            next: None,
            retry: None,
            once_slot: None
        }
    );
}
