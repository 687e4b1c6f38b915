//! Pools (issue 30, `docs/triggers.md` Q1–Q3, Q6, X1): the rows, and the
//! limit the claim enforces inside its transaction, on either backend.

use loops_core::{ExecutorStatus, Loop, RunStatus};
use loops_store::{
    Claim, DeleteHistory, Fence, ManualClaim, NotClaimed, PoolRemoval, Store, StoreError,
};

use crate::common::*;

/// Creates an interval loop in `pool` (which the store does not check:
/// the command line does).
fn member(store: &Store, name: &str, pool: &str) -> Loop {
    let mut new = interval_loop(name);
    new.policy.pool = Some(pool.to_owned());
    store.create_loop(&new, t0()).unwrap()
}

fn claimed(c: Claim) -> loops_core::LoopRun {
    match c {
        Claim::Claimed { run, .. } => run,
        other => panic!("expected a claim, got {other:?}"),
    }
}

fn pool_full(c: Claim) -> (String, u32) {
    match c {
        Claim::NotClaimed(NotClaimed::PoolFull { pool, max_running }) => (pool, max_running),
        other => panic!("expected a full pool, got {other:?}"),
    }
}

/// The running runs `list_pools` counts for `pool`.
fn running(store: &Store, pool: &str) -> u64 {
    store.pool(pool).unwrap().expect("the pool exists").running
}

/// The slot of minute `n` after `t0`.
fn slot(n: i64) -> loops_core::Timestamp {
    t0().add_ms(60_000 * n)
}

#[test]
fn a_full_pools_claim_writes_nothing_and_a_finalize_makes_room() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("agents", 1, t0()).unwrap();
    let a = member(&store, "a", "agents");
    let b = member(&store, "b", "agents");
    let run = claimed(store.claim_run(&a, slot(1), RUNNER_A, slot(1)).unwrap());
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(running(&store, "agents"), 1);

    // Another member, from another handle: refused, and no row written.
    let other = fx.store();
    let refused = other.claim_run(&b, slot(1), RUNNER_B, slot(1)).unwrap();
    assert_eq!(pool_full(refused), ("agents".to_owned(), 1));
    assert_eq!(store.count_runs(None).unwrap(), 1);
    assert_eq!(store.get_run_by_slot(&b.id, slot(1)).unwrap(), None);

    // The member's run ends: the next claim succeeds.
    let done = slot(1).add_ms(5_000);
    store
        .finalize_run(
            &run.id,
            &result(ExecutorStatus::Succeeded, done),
            Some(&Fence::new(RUNNER_A)),
            done,
        )
        .unwrap();
    assert_eq!(running(&store, "agents"), 0);
    let run_b = claimed(other.claim_run(&b, slot(1), RUNNER_B, done).unwrap());
    assert_eq!(run_b.loop_id, b.id);
    assert_eq!(running(&store, "agents"), 1);
}

#[test]
fn a_batch_of_three_members_claims_as_many_as_the_pool_allows() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("agents", 2, t0()).unwrap();
    let members: Vec<Loop> = ["a", "b", "c"]
        .into_iter()
        .map(|n| member(&store, n, "agents"))
        .collect();
    let requests: Vec<(&Loop, _)> = members.iter().map(|lp| (lp, slot(1))).collect();
    let claims = store.claim_runs(&requests, RUNNER_A, slot(1)).unwrap();
    let won = claims.iter().filter(|c| c.run().is_some()).count();
    assert_eq!(won, 2, "{claims:?}");
    // The one refused is the last: the claims are decided in order.
    assert_eq!(pool_full(claims[2].clone()), ("agents".to_owned(), 2));
    assert_eq!(store.count_runs(Some(RunStatus::Running)).unwrap(), 2);
    assert_eq!(running(&store, "agents"), 2);
}

#[test]
fn a_pool_that_does_not_exist_limits_nothing() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("gone", 1, t0()).unwrap();
    assert_eq!(store.remove_pool("gone").unwrap(), PoolRemoval::Removed);
    // Members of a pool removed (or never made) run as if in none.
    let a = member(&store, "a", "gone");
    let b = member(&store, "b", "gone");
    claimed(store.claim_run(&a, slot(1), RUNNER_A, slot(1)).unwrap());
    claimed(store.claim_run(&b, slot(1), RUNNER_A, slot(1)).unwrap());
    assert_eq!(store.count_runs(Some(RunStatus::Running)).unwrap(), 2);
    assert_eq!(store.pool("gone").unwrap(), None);
}

#[test]
fn ignore_pool_claims_a_full_pools_member_and_its_run_counts() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("agents", 1, t0()).unwrap();
    let a = member(&store, "a", "agents");
    let b = member(&store, "b", "agents");
    let c = member(&store, "c", "agents");
    claimed(store.claim_run(&a, slot(1), RUNNER_A, slot(1)).unwrap());

    // A manual claim obeys the pool unless told otherwise (Q6).
    let obeys = store
        .claim_manual_run(&b, slot(1), RUNNER_A, slot(1), ManualClaim::default())
        .unwrap();
    assert_eq!(pool_full(obeys), ("agents".to_owned(), 1));
    let bend = ManualClaim {
        ignore_pool: true,
        ..ManualClaim::default()
    };
    let run = claimed(
        store
            .claim_manual_run(&b, slot(1), RUNNER_A, slot(1), bend)
            .unwrap(),
    );
    assert_eq!(run.loop_id, b.id);
    // It counts: two running in a pool of one, and the next waits.
    assert_eq!(running(&store, "agents"), 2);
    let refused = store.claim_run(&c, slot(1), RUNNER_A, slot(1)).unwrap();
    assert_eq!(pool_full(refused), ("agents".to_owned(), 1));
}

#[test]
fn a_run_counts_against_the_pool_it_was_claimed_in() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("agents", 1, t0()).unwrap();
    let a = member(&store, "a", "agents");
    let b = member(&store, "b", "agents");
    claimed(store.claim_run(&a, slot(1), RUNNER_A, slot(1)).unwrap());
    // Taking the loop out of the pool does not take its running run out
    // (Q2: the run recorded its pool at claim time).
    store
        .edit_loop(&a.id, slot(1), |stored| {
            let mut settings = loops_store::loop_settings(stored);
            settings.policy.pool = None;
            Ok::<_, StoreError>(settings)
        })
        .unwrap();
    assert_eq!(store.pool("agents").unwrap().unwrap().members, 1);
    assert_eq!(running(&store, "agents"), 1);
    let refused = store.claim_run(&b, slot(1), RUNNER_A, slot(1)).unwrap();
    assert_eq!(pool_full(refused), ("agents".to_owned(), 1));
}

#[test]
fn set_pool_creates_then_changes_the_limit() {
    let fx = Fixture::new();
    let store = fx.store();
    let made = store.set_pool("agents", 1, t0()).unwrap();
    assert_eq!((made.max_running, made.members, made.running), (1, 0, 0));
    assert_eq!((made.created_at, made.updated_at), (t0(), t0()));
    let a = member(&store, "a", "agents");
    let b = member(&store, "b", "agents");
    claimed(store.claim_run(&a, slot(1), RUNNER_A, slot(1)).unwrap());
    let refused = store.claim_run(&b, slot(1), RUNNER_A, slot(1)).unwrap();
    assert_eq!(pool_full(refused), ("agents".to_owned(), 1));

    // The same name again is an update: the new limit, the first creation.
    let later = slot(2);
    let raised = store.set_pool("agents", 2, later).unwrap();
    assert_eq!(
        (raised.max_running, raised.members, raised.running),
        (2, 2, 1)
    );
    assert_eq!((raised.created_at, raised.updated_at), (t0(), later));
    claimed(store.claim_run(&b, slot(1), RUNNER_A, later).unwrap());
    assert_eq!(
        store.list_pools().unwrap(),
        vec![store.pool("agents").unwrap().unwrap()]
    );
    assert_eq!(running(&store, "agents"), 2);
}

#[test]
fn remove_pool_refuses_while_loops_name_it() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("agents", 2, t0()).unwrap();
    store.set_pool("builds", 1, t0()).unwrap();
    let b = member(&store, "b", "agents");
    member(&store, "a", "agents");
    assert_eq!(
        store.remove_pool("agents").unwrap(),
        PoolRemoval::InUse(vec!["a".to_owned(), "b".to_owned()])
    );
    assert!(store.pool("agents").unwrap().is_some());
    assert_eq!(store.remove_pool("missing").unwrap(), PoolRemoval::Missing);
    assert_eq!(store.remove_pool("builds").unwrap(), PoolRemoval::Removed);
    let names: Vec<String> = store
        .list_pools()
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["agents"]);
    // With its members gone, it goes.
    store.delete_loop(&b.id, DeleteHistory::Keep).unwrap();
    let a = store.require_loop("a").unwrap();
    store.delete_loop(&a.id, DeleteHistory::Keep).unwrap();
    assert_eq!(store.remove_pool("agents").unwrap(), PoolRemoval::Removed);
    assert!(store.list_pools().unwrap().is_empty());
}
