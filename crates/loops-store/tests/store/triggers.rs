//! Triggers (issue 30, `docs/triggers.md` T3–T7, X1): an upstream run's
//! finalize adds exactly one trigger per downstream loop, a key makes a
//! repeated delivery add nothing, and a trigger is claimed once, as a slot
//! of its own that never moves its loop's schedule.

use loops_core::{AfterEdge, AfterOn, ExecutorStatus, Loop, LoopRun, RunStatus, TriggerKind};
use loops_store::{Advance, Claim, Fence, NewTrigger, NotClaimed, Store, WatchFired};

use crate::common::*;

/// A loop that runs after `up` on `on`.
fn downstream(store: &Store, name: &str, up: &Loop, on: AfterOn) -> Loop {
    let mut new = interval_loop(name);
    new.policy.after = vec![AfterEdge {
        loop_id: up.id.to_string(),
        on,
    }];
    store.create_loop(&new, t0()).unwrap()
}

fn claimed(claim: Claim) -> LoopRun {
    match claim {
        Claim::Claimed { run, .. } => run,
        other => panic!("not claimed: {other:?}"),
    }
}

fn finish(store: &Store, run: &LoopRun, status: ExecutorStatus, at: loops_core::Timestamp) {
    let done = store
        .finalize_and_advance(&run.id, &result(status, at), &Fence::new(RUNNER_A), at)
        .unwrap();
    assert!(done.applied);
}

#[test]
fn an_upstream_run_triggers_each_downstream_loop_exactly_once() {
    let fx = Fixture::new();
    let store = fx.store();
    let up = create(&store, "up", 1);
    let on_success = downstream(&store, "on-success", &up, AfterOn::Succeeded);
    let on_failure = downstream(&store, "on-failure", &up, AfterOn::Failed);
    let run = claimed(store.claim_run(&up, t0(), RUNNER_A, t0()).unwrap());
    finish(&store, &run, ExecutorStatus::Succeeded, t0().add_ms(10));
    // A second finalize (fenced out, the row is finished) adds nothing.
    let again = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Succeeded, t0().add_ms(20)),
            &Fence::new(RUNNER_A),
            t0().add_ms(20),
        )
        .unwrap();
    assert!(!again.applied);
    let pending = store.pending_triggers().unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let t = &pending[0];
    assert_eq!(t.loop_id, on_success.id);
    assert_eq!(t.kind, TriggerKind::After);
    assert_eq!(t.source_run_id, Some(run.id));
    assert_eq!(t.source_loop_id, Some(up.id));
    assert!(store.loop_triggers(&on_failure.id, 10).unwrap().is_empty());
}

#[test]
fn a_failed_edge_waits_for_the_last_attempt() {
    let fx = Fixture::new();
    let store = fx.store();
    let up = create(&store, "flaky", 2);
    let down = downstream(&store, "cleanup", &up, AfterOn::Failed);
    let first = claimed(store.claim_run(&up, t0(), RUNNER_A, t0()).unwrap());
    finish(&store, &first, ExecutorStatus::Failed, t0().add_ms(10));
    assert!(
        store.pending_triggers().unwrap().is_empty(),
        "a retry is still to come"
    );
    let retry_at = t0().add_ms(120_000);
    let second = claimed(store.claim_run(&up, t0(), RUNNER_A, retry_at).unwrap());
    assert_eq!((second.id, second.attempt), (first.id, 2));
    finish(&store, &second, ExecutorStatus::Failed, retry_at.add_ms(10));
    let pending = store.pending_triggers().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].loop_id, down.id);
}

#[test]
fn a_trigger_is_claimed_once_and_never_moves_the_schedule() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "deploy", 1);
    let at = t0().add_ms(5_000);
    let added = store
        .add_trigger(&lp.id, &NewTrigger::default(), at)
        .unwrap()
        .unwrap();
    assert!(added.added);
    let run = claimed(
        store
            .claim_trigger(&lp, &added.trigger.id, RUNNER_A, at.add_ms(1))
            .unwrap(),
    );
    assert_eq!(run.scheduled_for, at);
    // The same trigger again: nothing.
    assert!(matches!(
        store
            .claim_trigger(&lp, &added.trigger.id, RUNNER_B, at.add_ms(2))
            .unwrap(),
        Claim::NotClaimed(NotClaimed::Raced)
    ));
    let done = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Failed, at.add_ms(10)),
            &Fence::new(RUNNER_A),
            at.add_ms(10),
        )
        .unwrap();
    assert_eq!(done.advance, Advance::Triggered);
    let after = done.loop_.unwrap();
    assert_eq!(after.next_run_at, lp.next_run_at);
    assert_eq!(after.retry_scheduled_for, None);
    let stored = store.loop_triggers(&lp.id, 10).unwrap();
    assert_eq!(stored[0].run_id, Some(run.id));
    assert_eq!(
        store.triggers_of_runs(&[run.id]).unwrap()[0].id,
        added.trigger.id
    );
}

/// A claimed trigger of a loop with attempts to spare, whose run is then
/// abandoned by `recover`: the loop must stay as it was, as after a
/// finalize. The abandon used to advance the loop as after a failure: a
/// retry was scheduled here, and a trigger-only loop got a `nextRunAt` it
/// must never have. CI's chaos run, which killed a daemon during a
/// triggered run, then found the loop's later triggers all pending.
fn abandoned_trigger_leaves_the_loop(recover: impl FnOnce(&Store, &LoopRun) -> Advance) {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "deploy", 3);
    let at = t0().add_ms(5_000);
    let added = store
        .add_trigger(&lp.id, &NewTrigger::default(), at)
        .unwrap()
        .unwrap();
    let run = claimed(
        store
            .claim_trigger(&lp, &added.trigger.id, RUNNER_A, at.add_ms(1))
            .unwrap(),
    );
    assert_eq!(recover(&store, &run), Advance::Triggered);
    let stored = store.get_run(&run.id).unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Abandoned);
    let after = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(after.status, lp.status);
    assert_eq!(after.next_run_at, lp.next_run_at);
    assert_eq!(after.retry_scheduled_for, None);
    // The loop's next trigger is claimed as the first was.
    let next = store
        .add_trigger(&lp.id, &NewTrigger::default(), at.add_ms(100))
        .unwrap()
        .unwrap();
    claimed(
        store
            .claim_trigger(&lp, &next.trigger.id, RUNNER_B, at.add_ms(101))
            .unwrap(),
    );
}

#[test]
fn a_triggered_run_abandoned_by_its_restarted_daemon_never_moves_the_schedule() {
    abandoned_trigger_leaves_the_loop(|store, run| {
        let gone = run.started_at.unwrap().add_ms(50);
        store
            .abandon_orphaned_run(&run.id, RUNNER_A, "daemon gone", gone)
            .unwrap()
            .expect("abandoned")
            .advance
    });
}

#[test]
fn a_triggered_run_abandoned_when_its_lease_expired_never_moves_the_schedule() {
    abandoned_trigger_leaves_the_loop(|store, run| {
        let expired = run.lease_expires_at.unwrap();
        let mut recovered = store.recover_expired_run_leases(expired).unwrap();
        assert_eq!(recovered.len(), 1, "{recovered:?}");
        recovered.remove(0).advance
    });
}

#[test]
fn a_repeated_delivery_with_the_same_key_adds_nothing() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "hook", 1);
    let new = NewTrigger {
        payload: Some(r#"{"ref":"main"}"#.into()),
        idempotency_key: Some("build-4711".into()),
    };
    let first = store.add_trigger(&lp.id, &new, t0()).unwrap().unwrap();
    let second = store
        .add_trigger(&lp.id, &new, t0().add_ms(5))
        .unwrap()
        .unwrap();
    assert!(first.added && !second.added);
    assert_eq!(second.trigger.id, first.trigger.id);
    assert_eq!(second.trigger.payload.as_deref(), Some(r#"{"ref":"main"}"#));
    assert_eq!(store.pending_triggers().unwrap().len(), 1);
    // Another key, or none, is another delivery.
    store
        .add_trigger(&lp.id, &NewTrigger::default(), t0())
        .unwrap();
    assert_eq!(store.pending_triggers().unwrap().len(), 2);
    // A loop that does not exist takes none.
    let missing = "0123456789ab".parse().unwrap();
    assert!(store.add_trigger(&missing, &new, t0()).unwrap().is_none());
}

/// A catch-up `latest` loop with three triggers, the newest claimed at
/// `t0 + 10`, which folds the two older ones; the loop and that run.
fn three_triggers_folded(store: &Store) -> (Loop, LoopRun) {
    let lp = create(store, "latest", 1);
    for i in 0..3 {
        store
            .add_trigger(&lp.id, &NewTrigger::default(), t0().add_ms(i))
            .unwrap();
    }
    let pending = store.pending_triggers().unwrap();
    assert_eq!(pending.len(), 3);
    let newest = pending.last().unwrap();
    let run = claimed(
        store
            .claim_trigger(&lp, &newest.id, RUNNER_A, t0().add_ms(10))
            .unwrap(),
    );
    (lp, run)
}

#[test]
fn catch_up_latest_folds_older_triggers_into_the_newest() {
    let fx = Fixture::new();
    let store = fx.store();
    let (lp, _) = three_triggers_folded(&store);
    assert!(store.pending_triggers().unwrap().is_empty());
    let coalesced = store
        .loop_triggers(&lp.id, 10)
        .unwrap()
        .iter()
        .filter(|t| t.coalesced_at.is_some())
        .count();
    assert_eq!(coalesced, 2);
}

#[test]
fn coalesced_triggers_go_by_their_own_age_and_nothing_else_does() {
    let fx = Fixture::new();
    let store = fx.store();
    // The two older ones are coalesced at t0 + 10.
    let (lp, run) = three_triggers_folded(&store);
    finish(&store, &run, ExecutorStatus::Succeeded, t0().add_ms(20));
    // One more arrives later, and stays pending.
    store
        .add_trigger(&lp.id, &NewTrigger::default(), t0().add_ms(30))
        .unwrap();

    let cutoff = t0().add_ms(11);
    assert_eq!(store.old_coalesced_triggers(t0().add_ms(10)).unwrap(), 0);
    assert_eq!(store.old_coalesced_triggers(cutoff).unwrap(), 2);
    let too_young = store
        .plan_old_coalesced_triggers(t0().add_ms(10), None, 10)
        .unwrap();
    assert!(too_young.is_empty(), "{too_young:?}");
    let all = store.plan_old_coalesced_triggers(cutoff, None, 10).unwrap();
    assert_eq!(all.len(), 2);
    assert!(all[0] < all[1], "in id order: {all:?}");
    // Batches go on from the last id.
    let first = store.plan_old_coalesced_triggers(cutoff, None, 1).unwrap();
    assert_eq!(first, all[..1]);
    let second = store
        .plan_old_coalesced_triggers(cutoff, Some(&first[0]), 1)
        .unwrap();
    assert_eq!(second, all[1..]);
    assert!(
        store
            .plan_old_coalesced_triggers(cutoff, Some(&second[0]), 1)
            .unwrap()
            .is_empty()
    );
    // The delete checks the age again, and names only those ids.
    assert_eq!(
        store
            .delete_old_coalesced_triggers(&all, t0().add_ms(10))
            .unwrap(),
        0
    );
    let claimed_one = store
        .loop_triggers(&lp.id, 10)
        .unwrap()
        .into_iter()
        .find(|t| t.run_id == Some(run.id))
        .expect("the run's trigger")
        .id;
    assert_eq!(
        store
            .delete_old_coalesced_triggers(&[all[0].clone(), claimed_one], cutoff)
            .unwrap(),
        1,
        "a claimed trigger is not a coalesced one"
    );
    assert_eq!(
        store.delete_old_coalesced_triggers(&all, cutoff).unwrap(),
        1
    );
    assert_eq!(
        store.delete_old_coalesced_triggers(&all, cutoff).unwrap(),
        0
    );
    assert_eq!(store.delete_old_coalesced_triggers(&[], cutoff).unwrap(), 0);

    // The claimed trigger (its run's) and the pending one stay.
    let left = store.loop_triggers(&lp.id, 10).unwrap();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.iter().all(|t| t.coalesced_at.is_none()));
    assert!(left.iter().any(|t| t.run_id == Some(run.id)));
    assert_eq!(store.pending_triggers().unwrap().len(), 1);
}

#[test]
fn a_trigger_waits_while_its_skip_loop_runs_and_for_room_in_its_pool() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "busy", 1);
    let running = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    let t = store
        .add_trigger(&lp.id, &NewTrigger::default(), t0().add_ms(1))
        .unwrap()
        .unwrap()
        .trigger;
    match store
        .claim_trigger(&lp, &t.id, RUNNER_A, t0().add_ms(2))
        .unwrap()
    {
        Claim::NotClaimed(NotClaimed::OverlapRunning(other)) => assert_eq!(other.id, running.id),
        other => panic!("not refused: {other:?}"),
    }
    assert_eq!(store.pending_triggers().unwrap().len(), 1, "still pending");
    // A member of a full pool waits too.
    store.set_pool("one", 1, t0()).unwrap();
    let mut new = interval_loop("member");
    new.policy.pool = Some("one".into());
    let a = store.create_loop(&new, t0()).unwrap();
    new.name = "member-2".into();
    let b = store.create_loop(&new, t0()).unwrap();
    claimed(store.claim_run(&a, t0(), RUNNER_A, t0()).unwrap());
    let tb = store
        .add_trigger(&b.id, &NewTrigger::default(), t0().add_ms(1))
        .unwrap()
        .unwrap()
        .trigger;
    assert!(matches!(
        store.claim_trigger(&b, &tb.id, RUNNER_A, t0().add_ms(2)).unwrap(),
        Claim::NotClaimed(NotClaimed::PoolFull { ref pool, max_running: 1 }) if pool == "one"
    ));
    finish(&store, &running, ExecutorStatus::Succeeded, t0().add_ms(3));
    let run = claimed(
        store
            .claim_trigger(&lp, &t.id, RUNNER_A, t0().add_ms(4))
            .unwrap(),
    );
    assert_eq!(run.status, RunStatus::Running);
}

#[test]
fn a_removed_loop_takes_its_pending_triggers_along() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "gone", 1);
    let kept = create(&store, "kept", 1);
    for target in [&lp, &kept] {
        store
            .add_trigger(&target.id, &NewTrigger::default(), t0())
            .unwrap();
    }
    store
        .delete_loop(&lp.id, loops_store::DeleteHistory::Keep)
        .unwrap();
    let pending = store.pending_triggers().unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].loop_id, kept.id);
}

/// A loop of `host:host-a` (the fixture's host) that watches `/srv/repo` with a 2 s debounce.
fn watcher(store: &Store, name: &str) -> Loop {
    let mut new = interval_loop(name);
    new.policy.runs_on = vec!["host:host-a".to_owned()];
    new.policy.watch = Some(loops_core::Watch {
        paths: vec!["/srv/repo".to_owned()],
        debounce_ms: 2_000,
    });
    store.create_loop(&new, t0()).unwrap()
}

#[test]
fn a_watch_adds_one_trigger_per_run_and_drops_its_own_runs_changes() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = watcher(&store, "on-change");
    let plain = create(&store, "plain", 1);
    let listed: Vec<_> = store.watch_loops().unwrap().iter().map(|l| l.id).collect();
    assert_eq!(listed, vec![lp.id], "only active loops that watch");
    assert_eq!(
        store.add_watch_trigger(&plain.id, t0(), t0()).unwrap(),
        WatchFired::NotWatching
    );

    let at = t0().add_ms(1_000);
    let WatchFired::Added(first) = store.add_watch_trigger(&lp.id, at, at).unwrap() else {
        panic!("a change of a loop that never ran adds a trigger");
    };
    assert_eq!(first.kind, TriggerKind::Watch);
    // Another change, or another daemon watching the same files, before
    // the run: the same trigger.
    assert_eq!(
        store
            .add_watch_trigger(&lp.id, at.add_ms(5), at.add_ms(5))
            .unwrap(),
        WatchFired::Joined
    );
    assert_eq!(store.pending_triggers().unwrap().len(), 1);
    let run = claimed(
        store
            .claim_trigger(&lp, &first.id, RUNNER_A, at.add_ms(10))
            .unwrap(),
    );
    // T9: a change while the run runs, and up to the debounce after it
    // ends, is its own.
    assert_eq!(
        store
            .add_watch_trigger(&lp.id, at.add_ms(20), at.add_ms(20))
            .unwrap(),
        WatchFired::OwnRun
    );
    let end = at.add_ms(100);
    finish(&store, &run, ExecutorStatus::Succeeded, end);
    assert_eq!(
        store
            .add_watch_trigger(&lp.id, end.add_ms(2_000), end.add_ms(2_000))
            .unwrap(),
        WatchFired::OwnRun
    );
    let later = end.add_ms(2_001);
    let WatchFired::Added(second) = store.add_watch_trigger(&lp.id, later, later).unwrap() else {
        panic!("a change after the debounce adds a trigger");
    };
    assert_ne!(second.idempotency_key, first.idempotency_key);
    // A paused loop watches nothing.
    store.pause_loop(&lp.id, later).unwrap();
    assert!(store.watch_loops().unwrap().is_empty());
    assert_eq!(
        store
            .add_watch_trigger(&lp.id, later.add_ms(1), later.add_ms(1))
            .unwrap(),
        WatchFired::NotWatching
    );
}
