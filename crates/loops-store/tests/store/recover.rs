//! Expired-lease recovery (SPEC §4.3 `recoverExpiredRunLeases`, §10 items
//! 27–28 and 40).

use loops_core::{LoopStatus, ProcessRef, RunStatus};
use loops_store::{Advance, Claim, Store};
use serde_json::json;

use crate::common::*;

fn claim(store: &Store, lp: &loops_core::Loop, slot: loops_core::Timestamp) -> loops_core::LoopRun {
    match store.claim_run(lp, slot, RUNNER_A, slot).unwrap() {
        Claim::Claimed { run, .. } => run,
        Claim::NotClaimed(why) => panic!("not claimed: {why:?}"),
        other => panic!("not claimed: {other:?}"),
    }
}

// SPEC §10 item 27
#[test]
fn recovery_abandons_dead_runs_and_leaves_live_ones_alone() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create_overlapping(&store, "recover", 1);
    let dead = claim(&store, &lp, t0());
    let live = claim(&store, &lp, t0().add_ms(60_000));
    let fresh = claim(&store, &lp, t0().add_ms(120_000));
    store
        .mark_run_pid(&dead.id, ProcessRef::pid(11), None, t0())
        .unwrap();
    store
        .mark_run_pid(&live.id, ProcessRef::pid(12), None, t0())
        .unwrap();
    fx.set_alive(ProcessRef::pid(12));
    // Exactly at the first two leases' expiry; the third is still valid.
    let now = live.lease_expires_at.unwrap();
    assert!(fresh.lease_expires_at.unwrap() > now);

    let recovered = store.recover_expired_run_leases(now).unwrap();
    assert_eq!(recovered.len(), 1);
    let r = &recovered[0].run;
    assert_eq!(r.id, dead.id);
    assert_eq!(r.status, RunStatus::Abandoned);
    assert_eq!(
        r.error.as_deref(),
        Some("run lease expired before completion")
    );
    assert_eq!(r.finished_at, Some(now));
    assert_eq!(r.lease_expires_at, None);
    assert_eq!(r.pid, Some(11), "the pid is kept");
    // Classified as every final failure is (issue 27).
    assert_eq!(
        r.facts.failure_class,
        Some(loops_core::FailureClass::Unknown)
    );
    assert!(r.facts.failure_fingerprint.is_some());
    assert_eq!(
        r.claimed_by.as_deref(),
        Some(RUNNER_A),
        "the claimant is kept"
    );
    assert_eq!(store.get_run(&dead.id).unwrap().as_ref(), Some(r));
    assert_eq!(
        store.get_run(&live.id).unwrap().unwrap().status,
        RunStatus::Running
    );
    assert_eq!(
        store.get_run(&fresh.id).unwrap().unwrap().status,
        RunStatus::Running
    );
}

#[test]
fn recovery_ignores_running_rows_without_a_lease() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "nolease", 1);
    let run = claim(&store, &lp, t0());
    fx.raw().exec(&format!(
        "UPDATE loop_runs SET lease_expires_at = NULL WHERE id = {}",
        lit(run.id.as_str())
    ));
    assert!(
        store
            .recover_expired_run_leases(t("2030-01-01T00:00:00Z"))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn recovery_skips_runs_with_live_linked_step_processes() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "live-step", 1);
    let run = claim(&store, &lp, t0());
    insert_linked_workflow(&fx, lp.id.as_str(), run.id.as_str(), Some(99));
    fx.set_alive(ProcessRef::pid(99));
    let now = run.lease_expires_at.unwrap();
    assert!(store.recover_expired_run_leases(now).unwrap().is_empty());
    assert_eq!(
        store.get_run(&run.id).unwrap().unwrap().status,
        RunStatus::Running
    );
}

// SPEC §10 item 28
#[test]
fn recovery_fails_linked_workflow_runs_skips_their_steps_and_emits_failed() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "cascade", 1);
    let run = claim(&store, &lp, t0());
    let wr = insert_linked_workflow(&fx, lp.id.as_str(), run.id.as_str(), Some(99));
    let now = run.lease_expires_at.unwrap();
    let recovered = store.recover_expired_run_leases(now).unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].workflow_runs_failed.len(), 1);
    assert_eq!(recovered[0].workflow_runs_failed[0].as_str(), wr);

    let raw = fx.raw();
    let row = raw.row(&format!(
        "SELECT status, error, finished_at FROM workflow_runs WHERE id = {}",
        lit(&wr)
    ));
    let (status, error, finished) = (row[0].text(), row[1].text(), row[2].text());
    assert_eq!(status, Some("failed"));
    assert_eq!(
        error,
        Some("parent loop run lease expired before completion")
    );
    assert_eq!(finished, Some(now.to_string().as_str()));
    let steps = raw.rows(&format!(
        "SELECT status, pid, error FROM workflow_step_runs WHERE workflow_run_id = {} ORDER BY sequence",
        lit(&wr)
    ));
    for step in steps {
        let (status, pid, error) = (step[0].text(), step[1].int(), step[2].text());
        assert_eq!((status, pid), (Some("skipped"), None));
        assert_eq!(
            error,
            Some("parent loop run lease expired before completion")
        );
    }
    let row = raw.row(&format!(
        "SELECT sequence, event_type, payload_json FROM workflow_events
         WHERE workflow_run_id = {} ORDER BY sequence DESC LIMIT 1",
        lit(&wr)
    ));
    let (seq, kind, payload) = (row[0].int(), row[1].text(), row[2].text());
    assert_eq!((seq, kind), (Some(2), Some("failed")));
    let payload: serde_json::Value = serde_json::from_str(payload.unwrap()).unwrap();
    assert_eq!(
        payload,
        json!({"error": "parent loop run lease expired before completion", "loopRunId": run.id.as_str()})
    );
    let steps_with_events =
        raw.int("SELECT COUNT(*) FROM workflow_events WHERE step_id IS NOT NULL");
    assert_eq!(steps_with_events, Some(0), "no step events are written");
}

#[test]
fn recovery_advances_the_loop_and_schedules_a_retry_while_attempts_remain() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "retry", 2);
    let slot = t("2026-01-01T00:01:00Z");
    let run = claim(&store, &lp, slot);
    let now = run.lease_expires_at.unwrap();
    let recovered = store.recover_expired_run_leases(now).unwrap();
    assert!(
        matches!(recovered[0].advance, Advance::Advanced(_)),
        "{:?}",
        recovered[0].advance
    );
    let lp = recovered[0].loop_.clone().unwrap();
    assert_eq!(lp.status, LoopStatus::Active);
    assert_eq!(lp.retry_scheduled_for, Some(slot));
    assert_eq!(lp.next_run_at, Some(now.add_ms(60_000)));
    assert_eq!(store.get_loop(&lp.id).unwrap(), Some(lp.clone()));
    // The retry claims the abandoned row as attempt 2.
    match store
        .claim_run(&lp, slot, RUNNER_B, now.add_ms(60_000))
        .unwrap()
    {
        Claim::Claimed { run: again, .. } => assert_eq!((again.id, again.attempt), (run.id, 2)),
        Claim::NotClaimed(why) => panic!("not claimed: {why:?}"),
        other => panic!("not claimed: {other:?}"),
    }
}

#[test]
fn recovery_leaves_a_paused_loop_alone() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "paused", 2);
    let run = claim(&store, &lp, t0());
    store.pause_loop(&lp.id, t0()).unwrap();
    let before = store.get_loop(&lp.id).unwrap().unwrap();
    let recovered = store
        .recover_expired_run_leases(run.lease_expires_at.unwrap())
        .unwrap();
    assert_eq!(recovered[0].advance, Advance::NotActive);
    assert_eq!(store.get_loop(&lp.id).unwrap().unwrap(), before);
}
