//! What the daemon adds to the store: releasing an interrupted run without
//! counting its attempt, abandoning a dead daemon's runs at once, settling
//! a slot that finished while its loop was paused, the next wake-up, and
//! the lease takeover test a daemon supplies (SPEC §9 items 6, 14, 16, 17,
//! 20).

use loops_core::{
    DaemonLease, ExecutorStatus, LeaseId, LoopStatus, ProcessRef, RunStatus, WorkflowRunStatus,
};
use loops_store::{
    Claim, DatabaseState, INTERRUPTED_BY_SHUTDOWN, LeaseAcquire, LeaseRequest, Store,
    inspect_database, schema_version,
};

use crate::common::*;

fn claim_as(
    store: &Store,
    lp: &loops_core::Loop,
    slot: loops_core::Timestamp,
    runner: &str,
) -> loops_core::LoopRun {
    match store.claim_run(lp, slot, runner, slot).unwrap() {
        Claim::Claimed { run, .. } => run,
        Claim::NotClaimed(why) => panic!("not claimed: {why:?}"),
        other => panic!("not claimed: {other:?}"),
    }
}

#[test]
fn a_released_run_is_claimed_again_under_the_same_attempt() {
    // SPEC §9 item 17.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "released", 2);
    let slot = t0().add_ms(60_000);
    // A retry: attempt 2 of 2 is interrupted.
    let first = claim_as(&store, &lp, slot, RUNNER_A);
    store
        .finalize_and_advance(
            &first.id,
            &result(ExecutorStatus::Failed, slot),
            &loops_store::Fence::new(RUNNER_A),
            slot,
        )
        .unwrap();
    let retry = store
        .claim_run(&lp, slot, RUNNER_A, slot.add_ms(2000))
        .unwrap()
        .run()
        .unwrap()
        .clone();
    assert_eq!((retry.id, retry.attempt), (first.id, 2));

    let now = slot.add_ms(3000);
    let released = store
        .release_run(
            &first.id,
            &result(ExecutorStatus::Failed, now),
            RUNNER_A,
            now,
        )
        .unwrap()
        .unwrap();
    assert_eq!(released.run.status, RunStatus::Abandoned);
    assert_eq!(
        released.run.attempt, 2,
        "the released run keeps its attempt"
    );
    assert_eq!(released.run.error.as_deref(), Some(INTERRUPTED_BY_SHUTDOWN));
    assert_eq!(released.run.stdout.as_deref(), Some("out"), "output kept");
    assert_eq!(released.run.lease_expires_at, None);
    let after = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(after.retry_scheduled_for, Some(slot), "not advanced");

    // Only the claimant may release, and only a running row.
    assert!(
        store
            .release_run(
                &first.id,
                &result(ExecutorStatus::Failed, now),
                RUNNER_A,
                now
            )
            .unwrap()
            .is_none()
    );
    let again = store
        .claim_run(&lp, slot, RUNNER_B, now)
        .unwrap()
        .run()
        .unwrap()
        .clone();
    assert_eq!(again.id, first.id);
    assert_eq!(again.attempt, 2, "the same attempt number runs again");
    assert!(
        store
            .release_run(
                &again.id,
                &result(ExecutorStatus::Failed, now),
                RUNNER_A,
                now
            )
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_released_first_attempt_keeps_attempt_1_and_runs_again_as_attempt_1() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "once", 1);
    let run = claim_as(&store, &lp, t0(), RUNNER_A);
    let wr = insert_linked_workflow(&fx, lp.id.as_str(), run.id.as_str(), None);
    let released = store
        .release_run(
            &run.id,
            &result(ExecutorStatus::Failed, t0()),
            RUNNER_A,
            t0(),
        )
        .unwrap()
        .unwrap();
    // SPEC §9 item 17: shown as the attempt it was, not as attempt 0.
    assert_eq!(released.run.attempt, 1);
    assert_eq!(released.workflow_runs_cancelled.len(), 1);
    let wr = store
        .get_workflow_run(&wr.parse().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(wr.status, WorkflowRunStatus::Cancelled);
    // attempt 1 of maxAttempts 1 was not counted: claimable again, as 1.
    let again = claim_as(&store, &lp, t0(), RUNNER_B);
    assert_eq!(again.attempt, 1);
}

#[test]
fn a_dead_daemons_run_is_abandoned_at_once_and_its_loop_retries() {
    // SPEC §9 item 16: the lease has not expired, yet the run is recovered.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "orphan", 2);
    let run = claim_as(&store, &lp, t0(), RUNNER_A);
    let now = t0().add_ms(5_000);
    assert!(run.lease_expires_at.unwrap() > now);
    let process = ProcessRef {
        pid: 77,
        start: Some(123),
    };
    store
        .mark_run_pid(&run.id, process, Some(RUNNER_A), t0())
        .unwrap();

    // A live process blocks it; the wrong claimant changes nothing.
    fx.set_alive(process);
    let reason = "daemon host-a:100 exited before the run completed";
    assert!(
        store
            .abandon_orphaned_run(&run.id, RUNNER_A, reason, now)
            .unwrap()
            .is_none()
    );
    fx.alive.lock().unwrap().clear();
    assert!(
        store
            .abandon_orphaned_run(&run.id, RUNNER_B, reason, now)
            .unwrap()
            .is_none()
    );
    let recovered = store
        .abandon_orphaned_run(&run.id, RUNNER_A, reason, now)
        .unwrap()
        .unwrap();
    assert_eq!(recovered.run.status, RunStatus::Abandoned);
    assert_eq!(recovered.run.error.as_deref(), Some(reason));
    assert_eq!(recovered.run.attempt, 1, "the crash counts as an attempt");
    let lp = recovered.loop_.unwrap();
    assert_eq!(lp.retry_scheduled_for, Some(t0()));
    assert_eq!(lp.next_run_at, Some(now.add_ms(60_000)));
}

#[test]
fn a_slot_that_finished_while_paused_is_settled_on_resume() {
    // SPEC §9 item 20: the run finished while paused, so its finalize did
    // not advance the loop; once resumed, the loop must not stay due on it.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "paused", 1);
    let slot = t0().add_ms(60_000);
    let run = claim_as(&store, &lp, slot, RUNNER_A);
    store.pause_loop(&lp.id, slot).unwrap();
    let done = slot.add_ms(500);
    store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Succeeded, done),
            &loops_store::Fence::new(RUNNER_A),
            done,
        )
        .unwrap();
    assert!(
        store
            .settle_finished_slot(&lp, slot, done)
            .unwrap()
            .is_none(),
        "paused"
    );
    store.resume_loop(&lp.id, done).unwrap();
    let lp = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(lp.next_run_at, Some(slot), "still due on the slot that ran");
    let settled = store
        .settle_finished_slot(&lp, slot, done)
        .unwrap()
        .unwrap();
    assert_eq!(settled.status, LoopStatus::Active);
    assert_eq!(settled.next_run_at, Some(slot.add_ms(60_000)));
    // A slot that can still run is not settled.
    let next = claim_as(&store, &settled, slot.add_ms(60_000), RUNNER_A);
    assert!(
        store
            .settle_finished_slot(&settled, next.scheduled_for, done)
            .unwrap()
            .is_none()
    );
}

#[test]
fn the_next_wake_skips_excluded_loops_and_expired_or_own_leases() {
    // SPEC §9 item 6.
    let fx = Fixture::new();
    let store = fx.store();
    let a = create(&store, "a", 1);
    let b = create(&store, "b", 1);
    set_next_run(&fx, &a, Some(t0().add_ms(10_000)));
    set_next_run(&fx, &b, Some(t0().add_ms(20_000)));
    let wake = store.next_wake(t0(), RUNNER_A, &[]).unwrap();
    assert_eq!(wake.due, Some(t0().add_ms(10_000)));
    assert_eq!(wake.expiry, None);
    assert_eq!(wake.lease_expiry, None);
    let wake = store.next_wake(t0(), RUNNER_A, &[a.id]).unwrap();
    assert_eq!(wake.due, Some(t0().add_ms(20_000)));
    assert_eq!(wake.earliest(), Some(t0().add_ms(20_000)));

    // Another daemon of this host: on PostgreSQL another host's lease wakes
    // only once its grace has passed too (pg_workflows/members.rs).
    let theirs = claim_as(&store, &b, t0(), "host-a:200:bbbbbbbbbbbb");
    let _ours = claim_as(&store, &a, t0(), RUNNER_A);
    let wake = store.next_wake(t0(), RUNNER_A, &[a.id, b.id]).unwrap();
    assert_eq!(wake.due, None);
    assert_eq!(wake.lease_expiry, theirs.lease_expires_at);
    // Once expired, the lease no longer wakes anyone (recovery may be
    // refused while its process lives).
    let later = theirs.lease_expires_at.unwrap();
    assert_eq!(
        store.next_wake(later, RUNNER_A, &[]).unwrap().lease_expiry,
        None
    );
}

#[test]
fn runs_of_this_hosts_daemons_are_listed_except_the_callers() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create_overlapping(&store, "a", 1);
    let dead = "host-a:100:aaaaaaaaaaaa";
    let me = "host-a:300:cccccccccccc";
    let other_host = "host-ab:200:bbbbbbbbbbbb";
    claim_as(&store, &lp, t0(), dead);
    claim_as(&store, &lp, t0().add_ms(60_000), me);
    claim_as(&store, &lp, t0().add_ms(120_000), other_host);
    let found = store.running_runs_of_host("host-a", me).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].run.claimed_by.as_deref(), Some(dead));
    assert_eq!(found[0].spawn_id, None);
}

#[test]
fn a_runs_spawn_id_is_recorded_with_its_pid_and_cleared_by_the_next_claim() {
    // Issue 12 §5: recovery finds the run's escaped processes by it.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "spawned", 2);
    let dead = "host-a:100:aaaaaaaaaaaa";
    let run = claim_as(&store, &lp, t0(), dead);
    let process = ProcessRef {
        pid: 4242,
        start: Some(1),
    };
    store
        .mark_run_spawn(&run.id, process, Some("100-ab-0"), Some(dead), t0())
        .unwrap()
        .unwrap();
    // A later pid report without one keeps it.
    store
        .mark_run_pid(&run.id, process, Some(dead), t0())
        .unwrap()
        .unwrap();
    let found = store
        .running_runs_of_host("host-a", "host-a:1:cccccccccccc")
        .unwrap();
    assert_eq!(found[0].process, Some(process));
    assert_eq!(found[0].spawn_id.as_deref(), Some("100-ab-0"));

    // A retry's claim starts without the previous attempt's spawn id.
    let now = t0().add_ms(1_000);
    store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Failed, now),
            &loops_store::Fence::new(dead),
            now,
        )
        .unwrap();
    let retry = claim_as(&store, &lp, t0(), dead);
    assert_eq!(retry.attempt, 2);
    let found = store
        .running_runs_of_host("host-a", "host-a:1:cccccccccccc")
        .unwrap();
    assert_eq!(found[0].spawn_id, None);
}

#[test]
fn a_lease_holder_the_caller_knows_is_gone_is_taken_over() {
    sqlite_only!(
        "one daemon lease for the whole database; on PostgreSQL each daemon registers in `daemons` and acquiring never refuses (tests/pg_workflows/members.rs)"
    );
    // SPEC §9 items 14 and 16: a live pid that is not the holder (its
    // start time says it was reused) does not block.
    let fx = Fixture::new();
    let store = fx.store();
    let req = |id: u8, pid: u32| LeaseRequest {
        id: LeaseId::from_bytes([id; 6]),
        pid,
        hostname: "host-a".to_owned(),
        ttl_ms: 60_000,
    };
    store.acquire_daemon_lease(&req(1, 10), t0()).unwrap();
    fx.set_alive(ProcessRef::pid(10));
    let alive = |_: &DaemonLease| false;
    assert!(matches!(
        store.acquire_daemon_lease_with(&req(2, 20), t0(), &alive).unwrap(),
        LeaseAcquire::Held(h) if h.pid == 10
    ));
    let reused = |h: &DaemonLease| h.pid == 10;
    assert!(matches!(
        store.acquire_daemon_lease_with(&req(2, 20), t0(), &reused).unwrap(),
        LeaseAcquire::Acquired(l) if l.pid == 20
    ));
}

#[test]
fn inspecting_a_database_reads_its_schema_version_without_writing() {
    sqlite_only!("inspects a SQLite file's schema version (doctor's file check)");
    let fx = Fixture::new();
    assert_eq!(
        inspect_database(&fx.path()).unwrap(),
        DatabaseState::Missing
    );
    assert!(!fx.path().exists());
    drop(fx.store());
    assert_eq!(
        inspect_database(&fx.path()).unwrap(),
        DatabaseState::Loops {
            version: schema_version()
        }
    );
    std::fs::write(fx.dir.path().join("junk.db"), "not a database at all").unwrap();
    assert!(inspect_database(&fx.dir.path().join("junk.db")).is_err());
}

#[test]
fn many_slots_are_claimed_in_one_transaction_each_decided_as_alone() {
    let fx = Fixture::new();
    let store = fx.store();
    let a = create(&store, "a", 1);
    let b = create_overlapping(&store, "b", 1);
    let held = claim_as(&store, &b, t0(), RUNNER_B);
    let now = t0().add_ms(10);
    let claims = store
        .claim_runs(
            &[(&a, t0()), (&b, t0()), (&b, t0().add_ms(60_000))],
            RUNNER_A,
            now,
        )
        .unwrap();
    assert_eq!(claims.len(), 3);
    let first = claims[0].run().unwrap();
    assert_eq!((first.loop_id, first.started_at), (a.id, Some(now)));
    assert!(matches!(
        &claims[1],
        Claim::NotClaimed(loops_store::NotClaimed::LeaseHeld(r)) if r.id == held.id
    ));
    assert_eq!(claims[2].run().unwrap().scheduled_for, t0().add_ms(60_000));
}

#[test]
fn a_once_loop_whose_only_run_a_shutdown_released_can_be_resumed() {
    // SPEC §9 item 17: the released attempt was not counted, so the slot
    // is not spent even with one attempt allowed.
    let fx = Fixture::new();
    let store = fx.store();
    let at = t0().add_ms(60_000);
    let mut new = interval_loop("once");
    new.schedule = loops_core::Schedule::Once { at };
    new.max_attempts = 1;
    let lp = store.create_loop(&new, t0()).unwrap();
    let run = claim_as(&store, &lp, at, RUNNER_A);
    store
        .release_run(&run.id, &result(ExecutorStatus::Failed, at), RUNNER_A, at)
        .unwrap()
        .unwrap();
    store.pause_loop(&lp.id, at).unwrap();
    match store.resume_loop(&lp.id, at.add_ms(1)).unwrap() {
        loops_store::LoopChange::Changed(lp) => assert_eq!(lp.next_run_at, Some(at)),
        other => panic!("resume refused a slot whose attempt was not counted: {other:?}"),
    }
}

#[test]
fn a_users_pause_clears_a_reason_left_from_an_automatic_pause() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "paused", 1);
    store
        .pause_loop_with_reason(&lp.id, "schedule cannot be planned", t0())
        .unwrap()
        .unwrap();
    // Another implementation's resume leaves the column as it is.
    fx.raw().exec(&format!(
        "UPDATE loops SET status = 'active' WHERE id = {}",
        lit(lp.id.as_str())
    ));
    store.pause_loop(&lp.id, t0()).unwrap();
    let paused = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(paused.status, LoopStatus::Paused);
    assert_eq!(paused.paused_reason, None);
}
