//! Workflow steps in pools (issue 30, `docs/triggers.md` Q2, Q3, X1): a
//! pooled step holds one of its pool's places while it runs, the loop
//! claim and the step start count loop runs and steps together, and a
//! step whose workflow run ended or was recovered stops counting.

use loops_core::{
    ExecutorStatus, Loop, LoopRun, StepRunStatus, WorkflowRun, WorkflowSpec, workflow_from_json,
};
use loops_store::{
    Claim, Fence, NewWorkflowRun, NotClaimed, PoolRemoval, StepOutcome, StepStart, Store,
};

use crate::common::*;

/// A workflow of two independent steps, `a` in `pool` and `b` in none.
fn pooled_workflow(store: &Store, pool: &str) -> WorkflowSpec {
    let file = serde_json::json!({"name": "wf", "maxParallel": 2, "steps": [
        {"id": "a", "pool": pool, "target": {"type": "command", "command": "true"}},
        {"id": "b", "target": {"type": "command", "command": "true"}},
    ]});
    store
        .create_workflow(&workflow_from_json(&file, None).unwrap(), t0())
        .unwrap()
}

/// Starts the step `a` of a new run of `spec` (its pool `pool`).
fn start_a(store: &Store, spec: &WorkflowSpec, pool: &str) -> (WorkflowRun, StepStart) {
    let run = store
        .create_workflow_run(&NewWorkflowRun::new(spec), t0())
        .unwrap();
    let started = store
        .start_pooled_step_run(&run.id, "a", Some(pool), t0())
        .unwrap();
    (run, started)
}

fn member(store: &Store, name: &str, pool: &str) -> Loop {
    let mut new = interval_loop(name);
    new.policy.pool = Some(pool.to_owned());
    store.create_loop(&new, t0()).unwrap()
}

fn claimed(c: Claim) -> LoopRun {
    match c {
        Claim::Claimed { run, .. } => run,
        other => panic!("expected a claim, got {other:?}"),
    }
}

fn running(store: &Store, pool: &str) -> u64 {
    store.pool(pool).unwrap().expect("the pool exists").running
}

fn slot(n: i64) -> loops_core::Timestamp {
    t0().add_ms(60_000 * n)
}

#[test]
fn a_pooled_step_waits_while_loop_runs_fill_its_pool() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("gpu", 1, t0()).unwrap();
    let spec = pooled_workflow(&store, "gpu");
    let lp = member(&store, "train", "gpu");
    let loop_run = claimed(store.claim_run(&lp, slot(1), RUNNER_A, slot(1)).unwrap());

    // From another handle: refused, nothing written, the step still pending.
    let other = fx.store();
    let (run, refused) = start_a(&other, &spec, "gpu");
    assert_eq!(
        refused,
        StepStart::PoolFull {
            pool: "gpu".into(),
            max_running: 1
        }
    );
    let a = store.get_step_run(&run.id, "a").unwrap().unwrap();
    assert_eq!(a.status, StepRunStatus::Pending);
    let events = store.list_events(&run.id, None).unwrap();
    assert!(events.iter().all(|e| e.event_type != "step_started"));
    // A step in no pool starts beside it.
    store.start_step_run(&run.id, "b", t0()).unwrap();

    // The loop run ends: the step starts and takes the place.
    let done = slot(1).add_ms(5_000);
    store
        .finalize_run(
            &loop_run.id,
            &result(ExecutorStatus::Succeeded, done),
            Some(&Fence::new(RUNNER_A)),
            done,
        )
        .unwrap();
    let started = other
        .start_pooled_step_run(&run.id, "a", Some("gpu"), done)
        .unwrap();
    let StepStart::Started(row) = started else {
        panic!("expected a start, got {started:?}");
    };
    assert_eq!(row.status, StepRunStatus::Running);
    assert_eq!(running(&store, "gpu"), 1);
}

#[test]
fn a_loop_claim_waits_while_steps_fill_the_pool_and_a_finished_step_frees_it() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("gpu", 1, t0()).unwrap();
    let spec = pooled_workflow(&store, "gpu");
    let lp = member(&store, "train", "gpu");
    let (run, started) = start_a(&store, &spec, "gpu");
    assert!(matches!(started, StepStart::Started(_)), "{started:?}");
    assert_eq!(running(&store, "gpu"), 1);

    // A second pooled step of another run waits too.
    let (second, refused) = start_a(&store, &spec, "gpu");
    assert!(matches!(refused, StepStart::PoolFull { .. }), "{refused:?}");

    let refused = fx
        .store()
        .claim_run(&lp, slot(1), RUNNER_B, slot(1))
        .unwrap();
    match refused {
        Claim::NotClaimed(NotClaimed::PoolFull { pool, max_running }) => {
            assert_eq!((pool.as_str(), max_running), ("gpu", 1));
        }
        other => panic!("expected a full pool, got {other:?}"),
    }
    assert_eq!(store.get_run_by_slot(&lp.id, slot(1)).unwrap(), None);

    // The step finishes: its place is free for the loop.
    store
        .finalize_step_run(
            &run.id,
            "a",
            &StepOutcome::new(ExecutorStatus::Succeeded),
            slot(1),
        )
        .unwrap();
    assert_eq!(running(&store, "gpu"), 0);
    claimed(store.claim_run(&lp, slot(1), RUNNER_B, slot(1)).unwrap());
    // And the loop run now holds it against the waiting step.
    let again = store
        .start_pooled_step_run(&second.id, "a", Some("gpu"), slot(1))
        .unwrap();
    assert!(matches!(again, StepStart::PoolFull { .. }), "{again:?}");
}

#[test]
fn a_step_of_a_recovered_or_ended_workflow_run_stops_counting() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("gpu", 1, t0()).unwrap();
    let spec = pooled_workflow(&store, "gpu");

    // Recovered (`workflows recover` after its runner died): the step is
    // pending again and frees its place.
    let (run, _) = start_a(&store, &spec, "gpu");
    assert_eq!(running(&store, "gpu"), 1);
    let recovered = store.recover_workflow_run(&run.id, "test", t0()).unwrap();
    assert_eq!(recovered.recovered_steps.len(), 1);
    assert_eq!(running(&store, "gpu"), 0);

    // Cancelled.
    let (run, _) = start_a(&store, &spec, "gpu");
    assert_eq!(running(&store, "gpu"), 1);
    store.cancel_workflow_run(&run.id, "test", t0()).unwrap();
    assert_eq!(running(&store, "gpu"), 0);

    // A step row left running in a run that ended anyway (whatever wrote
    // that) never holds a place.
    let (run, _) = start_a(&store, &spec, "gpu");
    fx.raw().exec(&format!(
        "UPDATE workflow_runs SET status = 'failed' WHERE id = {}",
        lit(run.id.as_str())
    ));
    assert_eq!(
        store.get_step_run(&run.id, "a").unwrap().unwrap().status,
        StepRunStatus::Running
    );
    assert_eq!(running(&store, "gpu"), 0);
    let (_, started) = start_a(&store, &spec, "gpu");
    assert!(matches!(started, StepStart::Started(_)), "{started:?}");
}

#[test]
fn a_step_of_a_dead_runners_loop_run_stops_counting_at_lease_recovery() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("gpu", 1, t0()).unwrap();
    let spec = pooled_workflow(&store, "gpu");
    // The loop itself is in no pool: only its workflow's step is.
    let lp = create(&store, "nightly", 1);
    let loop_run = claimed(store.claim_run(&lp, slot(1), RUNNER_A, slot(1)).unwrap());
    let wr = store
        .create_workflow_run(&NewWorkflowRun::new(&spec).for_loop_run(&loop_run), slot(1))
        .unwrap();
    let started = store
        .start_pooled_step_run(&wr.id, "a", Some("gpu"), slot(1))
        .unwrap();
    assert!(matches!(started, StepStart::Started(_)), "{started:?}");
    assert_eq!(running(&store, "gpu"), 1);

    // Its runner died: the lease expires and recovery ends the loop run,
    // its workflow run and the step, which frees the place.
    let expired = loop_run.lease_expires_at.unwrap();
    let recovered = store.recover_expired_run_leases(expired).unwrap();
    assert_eq!(recovered.len(), 1);
    let step = store.get_step_run(&wr.id, "a").unwrap().unwrap();
    assert_ne!(step.status, StepRunStatus::Running);
    assert_eq!(running(&store, "gpu"), 0);
}

#[test]
fn remove_pool_refuses_while_a_workflow_step_names_it() {
    let fx = Fixture::new();
    let store = fx.store();
    store.set_pool("gpu", 1, t0()).unwrap();
    store.set_pool("other", 1, t0()).unwrap();
    pooled_workflow(&store, "gpu");
    assert_eq!(
        store.remove_pool("gpu").unwrap(),
        PoolRemoval::InUseBySteps(vec!["wf/a".to_owned()])
    );
    assert!(store.pool("gpu").unwrap().is_some());
    // A workflow naming another pool does not hold this one.
    assert_eq!(store.remove_pool("other").unwrap(), PoolRemoval::Removed);
}
