//! Claims, run-lease heartbeats and pid recording (SPEC §4.3 `claimRun`,
//! §10 items 18–24 and 29; SPEC §9 items 11 and 14).

use std::sync::{Arc, Barrier};

use loops_core::{ExecutorStatus, ProcessRef, RunStatus};
use loops_store::{Claim, DeleteHistory, Fence, ManualClaim, NotClaimed};

use crate::common::*;

fn claimed(c: Claim) -> loops_core::LoopRun {
    match c {
        Claim::Claimed { run, .. } => run,
        Claim::NotClaimed(why) => panic!("expected a claim, got {why:?}"),
        other => panic!("expected a claim, got {other:?}"),
    }
}

fn not_claimed(c: Claim) -> NotClaimed {
    match c {
        Claim::NotClaimed(why) => why,
        other => panic!("expected no claim, got {other:?}"),
    }
}

// SPEC §10 item 18 (across two connections)
#[test]
fn two_handles_race_for_one_slot_and_exactly_one_wins() {
    const ROUNDS: usize = 100;
    let fx = Fixture::new();
    let lp = create_overlapping(&fx.store(), "race", 1);
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = [RUNNER_A, RUNNER_B]
        .into_iter()
        .map(|runner| {
            let store = fx.store();
            let lp = lp.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                (0..ROUNDS)
                    .map(|i| {
                        let slot = t0().add_ms(60_000 * i as i64);
                        barrier.wait();
                        matches!(
                            store.claim_run(&lp, slot, runner, t0()).unwrap(),
                            Claim::Claimed { .. }
                        )
                    })
                    .collect::<Vec<bool>>()
            })
        })
        .collect();
    let wins: Vec<Vec<bool>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (i, (a, b)) in wins[0].iter().zip(&wins[1]).enumerate() {
        assert!(a ^ b, "round {i}: {a} / {b}");
    }
    assert_eq!(fx.store().count_runs(None).unwrap(), ROUNDS as u64);
}

// SPEC §10 item 19
#[test]
fn fresh_claim_is_attempt_one_running_with_claimant_and_lease() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "fresh", 1);
    let slot = t("2026-01-01T00:01:00Z");
    let now = t("2026-01-01T00:01:02Z");
    let Claim::Claimed { run, loop_ } = store.claim_run(&lp, slot, RUNNER_A, now).unwrap() else {
        panic!("not claimed");
    };
    assert_eq!(loop_, lp);
    assert_eq!(run.attempt, 1);
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.claimed_by.as_deref(), Some(RUNNER_A));
    assert_eq!(run.scheduled_for, slot);
    assert_eq!(run.started_at, Some(now));
    assert_eq!(run.lease_expires_at, Some(now.add_ms(1_800_000)));
    assert_eq!(run.loop_name, "fresh");
    assert_eq!(store.get_run(&run.id).unwrap(), Some(run.clone()));
    assert_eq!(store.get_run_by_slot(&lp.id, slot).unwrap(), Some(run));
    // The same slot again, from anyone, is not claimed (SPEC §10 item 18).
    assert!(matches!(
        not_claimed(store.claim_run(&lp, slot, RUNNER_B, now).unwrap()),
        NotClaimed::LeaseHeld(_)
    ));
    assert_eq!(store.count_runs(None).unwrap(), 1);
}

// SPEC §10 item 20
#[test]
fn succeeded_and_skipped_slots_are_never_claimable() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "done", 5);
    let slot = t("2026-01-01T00:01:00Z");
    let run = claimed(store.claim_run(&lp, slot, RUNNER_A, slot).unwrap());
    let fence = Fence::new(RUNNER_A);
    let done = store
        .finalize_run(
            &run.id,
            &result(ExecutorStatus::Succeeded, slot.add_ms(10)),
            Some(&fence),
            slot.add_ms(10),
        )
        .unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    let later = slot.add_ms(10_000_000);
    assert!(matches!(
        not_claimed(store.claim_run(&lp, slot, RUNNER_B, later).unwrap()),
        NotClaimed::Finished(r) if r.status == RunStatus::Succeeded
    ));

    let skip_slot = t("2026-01-01T00:02:00Z");
    store
        .create_skipped_run(&lp, skip_slot, "previous run still active", skip_slot)
        .unwrap();
    assert!(matches!(
        not_claimed(store.claim_run(&lp, skip_slot, RUNNER_B, later).unwrap()),
        NotClaimed::Finished(r) if r.status == RunStatus::Skipped
    ));
}

// SPEC §10 item 21
#[test]
fn failed_slot_is_reclaimed_as_next_attempt_until_max() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "retry", 3);
    let slot = t("2026-01-01T00:01:00Z");
    let mut now = slot;
    let mut run = claimed(store.claim_run(&lp, slot, RUNNER_A, now).unwrap());
    for attempt in 1..=3 {
        assert_eq!(run.attempt, attempt);
        assert_eq!(run.status, RunStatus::Running);
        let status = if attempt == 2 {
            ExecutorStatus::TimedOut
        } else {
            ExecutorStatus::Failed
        };
        now = now.add_ms(1000);
        let done = store
            .finalize_run(
                &run.id,
                &result(status, now),
                Some(&Fence::new(RUNNER_A)),
                now,
            )
            .unwrap();
        assert_eq!(done.status, RunStatus::from(status));
        assert_eq!(done.stdout.as_deref(), Some("out"));
        now = now.add_ms(1000);
        match store.claim_run(&lp, slot, RUNNER_A, now).unwrap() {
            Claim::Claimed { run: next, .. } => {
                assert!(attempt < 3, "attempt {attempt} should be the last");
                assert_eq!(next.id, run.id, "a retry rewrites the same row");
                // The previous attempt's results are cleared.
                assert_eq!(
                    (next.finished_at, next.stdout.clone(), next.exit_code),
                    (None, None, None)
                );
                run = next;
            }
            Claim::NotClaimed(why) => {
                assert_eq!(attempt, 3);
                assert!(matches!(why, NotClaimed::AttemptsExhausted(r) if r.attempt == 3));
            }
            other => panic!("unexpected claim outcome: {other:?}"),
        }
    }
    assert_eq!(store.count_runs(None).unwrap(), 1);
}

// SPEC §10 item 22
#[test]
fn running_row_with_valid_lease_is_not_claimable() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "busy", 1);
    let slot = t0();
    let run = claimed(store.claim_run(&lp, slot, RUNNER_A, slot).unwrap());
    let just_before = run.lease_expires_at.unwrap().add_ms(-1);
    assert!(matches!(
        not_claimed(store.claim_run(&lp, slot, RUNNER_B, just_before).unwrap()),
        NotClaimed::LeaseHeld(r) if r.id == run.id
    ));
}

// SPEC §10 item 23 (the run's pid)
#[test]
fn expired_lease_with_live_pid_is_not_claimable() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "alive", 1);
    let run = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    store
        .mark_run_pid(&run.id, ProcessRef::pid(777), Some(RUNNER_A), t0())
        .unwrap()
        .unwrap();
    fx.set_alive(ProcessRef::pid(777));
    let expired = run.lease_expires_at.unwrap();
    assert!(matches!(
        not_claimed(store.claim_run(&lp, t0(), RUNNER_B, expired).unwrap()),
        NotClaimed::ProcessAlive(_)
    ));
    assert_eq!(
        store
            .get_run(&run.id)
            .unwrap()
            .unwrap()
            .claimed_by
            .as_deref(),
        Some(RUNNER_A)
    );
}

// SPEC §10 item 23 (a linked step's pid)
#[test]
fn expired_lease_with_live_linked_step_is_not_claimable() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "steps", 1);
    let run = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    insert_linked_workflow(&fx, lp.id.as_str(), run.id.as_str(), Some(888));
    let expired = run.lease_expires_at.unwrap();
    // While the step's process is alive, the run is not re-claimable ...
    fx.set_alive(ProcessRef::pid(888));
    assert!(matches!(
        not_claimed(store.claim_run(&lp, t0(), RUNNER_B, expired).unwrap()),
        NotClaimed::StepProcessAlive(_)
    ));
    // ... and once it dies, it is.
    fx.alive.lock().unwrap().clear();
    let again = claimed(store.claim_run(&lp, t0(), RUNNER_B, expired).unwrap());
    assert_eq!(again.claimed_by.as_deref(), Some(RUNNER_B));
}

// SPEC §10 item 24
#[test]
fn expired_lease_with_dead_process_is_reclaimed_with_the_same_attempt() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "takeover", 3);
    let run = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    store
        .mark_run_pid(
            &run.id,
            ProcessRef {
                pid: 777,
                start: Some(5),
            },
            None,
            t0(),
        )
        .unwrap();
    let expired = run.lease_expires_at.unwrap();
    let again = claimed(store.claim_run(&lp, t0(), RUNNER_B, expired).unwrap());
    assert_eq!(again.id, run.id);
    assert_eq!(again.attempt, 1, "SPEC §1.5: the attempt stays the same");
    assert_eq!(again.claimed_by.as_deref(), Some(RUNNER_B));
    assert_eq!(again.pid, None);
    assert_eq!(again.started_at, Some(expired));
    assert_eq!(again.lease_expires_at, Some(expired.add_ms(1_800_000)));
}

#[test]
fn a_reused_pid_with_another_start_time_does_not_block_a_claim() {
    // SPEC §9 item 14: the recorded start time travels to the probe.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "reused", 1);
    let run = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    let spawned = ProcessRef {
        pid: 777,
        start: Some(1_000),
    };
    let marked = store
        .mark_run_pid(&run.id, spawned, Some(RUNNER_A), t0())
        .unwrap()
        .unwrap();
    assert_eq!(marked.pid, Some(777));
    let start = fx.raw().int(&format!(
        "SELECT pid_start_ms FROM loop_runs WHERE id = {}",
        lit(run.id.as_str())
    ));
    assert_eq!(start, Some(1_000));
    // Pid 777 is alive again, but it is another process.
    fx.set_alive(ProcessRef {
        pid: 777,
        start: Some(2_000),
    });
    let expired = run.lease_expires_at.unwrap();
    claimed(store.claim_run(&lp, t0(), RUNNER_B, expired).unwrap());
}

#[test]
fn a_deleted_loop_is_not_claimed() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "gone", 1);
    store.delete_loop(&lp.id, DeleteHistory::Keep).unwrap();
    assert_eq!(
        not_claimed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap()),
        NotClaimed::LoopMissing
    );
}

#[test]
fn heartbeat_extends_a_live_lease_only() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "beat", 1);
    let run = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    let later = t0().add_ms(600_000);
    let renewed = store
        .heartbeat_run_lease(&run.id, &Fence::new(RUNNER_A), 1_800_000, later)
        .unwrap()
        .unwrap();
    assert_eq!(renewed.lease_expires_at, Some(later.add_ms(1_800_000)));

    // SPEC §9 item 11: an expired lease is never renewed.
    let expiry = renewed.lease_expires_at.unwrap();
    assert_eq!(
        store
            .heartbeat_run_lease(&run.id, &Fence::new(RUNNER_A), 1_800_000, expiry)
            .unwrap(),
        None
    );
    let stored = store.get_run(&run.id).unwrap().unwrap();
    assert_eq!(stored.lease_expires_at, Some(expiry));
}

// SPEC §10 item 29
#[test]
fn heartbeat_from_the_wrong_claimant_returns_nothing() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "wrong", 1);
    let run = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    assert_eq!(
        store
            .heartbeat_run_lease(&run.id, &Fence::new(RUNNER_B), 1_800_000, t0())
            .unwrap(),
        None
    );
    assert_eq!(store.get_run(&run.id).unwrap().unwrap(), run);
}

#[test]
fn mark_run_pid_applies_only_while_running_and_owned() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "pid", 1);
    let run = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    assert_eq!(
        store
            .mark_run_pid(&run.id, ProcessRef::pid(1), Some(RUNNER_B), t0())
            .unwrap(),
        None
    );
    let marked = store
        .mark_run_pid(&run.id, ProcessRef::pid(2), Some(RUNNER_A), t0())
        .unwrap();
    assert_eq!(marked.unwrap().pid, Some(2));
    store
        .finalize_run(
            &run.id,
            &result(ExecutorStatus::Succeeded, t0()),
            None,
            t0(),
        )
        .unwrap();
    assert_eq!(
        store
            .mark_run_pid(&run.id, ProcessRef::pid(3), None, t0())
            .unwrap(),
        None
    );
    assert_eq!(store.get_run(&run.id).unwrap().unwrap().pid, Some(4242));
}

// Issue 25, item 12: every claim records the host it was made on, beside
// a runner id that may name none.
#[test]
fn every_claim_records_the_host_of_the_store_that_made_it() {
    const TICK: &str = "manual-tick:12";
    let fx = Fixture::new();
    let here = fx.store();
    let there = fx.store().with_host("host-b");
    let lp = create_overlapping(&here, "hosts", 3);
    let host = |run: &loops_core::LoopRun| run.claimed_host.clone();
    let fail = |store: &loops_store::Store, run: &loops_core::LoopRun, now| {
        let fence = Fence::new(run.claimed_by.as_deref().unwrap());
        let done = store
            .finalize_run(
                &run.id,
                &result(ExecutorStatus::Failed, now),
                Some(&fence),
                now,
            )
            .unwrap();
        // A finished run keeps its claim's host, as it keeps its claimant.
        assert_eq!(done.claimed_host, run.claimed_host);
    };

    // A fresh slot, then its retries, each by the host that claimed it.
    let first = claimed(here.claim_run(&lp, t0(), TICK, t0()).unwrap());
    assert_eq!(first.claimed_by.as_deref(), Some(TICK));
    assert_eq!(host(&first).as_deref(), Some(HOST));
    fail(&here, &first, t0().add_ms(1));
    let retry = claimed(
        there
            .claim_run(&lp, t0(), "manual:34", t0().add_ms(2))
            .unwrap(),
    );
    assert_eq!(
        (retry.attempt, host(&retry).as_deref()),
        (2, Some("host-b"))
    );
    fail(&there, &retry, t0().add_ms(3));
    let manual = claimed(
        here.claim_manual_run(&lp, t0(), TICK, t0().add_ms(4), ManualClaim::default())
            .unwrap(),
    );
    assert_eq!((manual.attempt, host(&manual).as_deref()), (3, Some(HOST)));
    assert_eq!(
        host(&here.get_run(&first.id).unwrap().unwrap()).as_deref(),
        Some(HOST)
    );

    // An expired run taken over (after another host's grace, on
    // PostgreSQL) gets its new claimant's host.
    let slot = t0().add_ms(60_000);
    let theirs = claimed(
        there
            .claim_runs(&[(&lp, slot)], RUNNER_B, slot)
            .unwrap()
            .remove(0),
    );
    assert_eq!(host(&theirs).as_deref(), Some("host-b"));
    let later = theirs.lease_expires_at.unwrap().add_ms(30_000);
    let mine = claimed(here.claim_run(&lp, slot, RUNNER_A, later).unwrap());
    assert_eq!((mine.id, host(&mine).as_deref()), (theirs.id, Some(HOST)));
}
