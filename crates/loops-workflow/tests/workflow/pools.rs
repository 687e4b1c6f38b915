//! Steps in pools (issue 30, `docs/triggers.md` Q2): a ready step whose
//! pool is full waits, pending, while the other steps go on; it starts
//! once a place frees; the workflow timeout and a cancel still end a run
//! whose step waits.

use std::sync::Mutex;

use loops_core::{StepRunStatus, WorkflowRunStatus};
use loops_store::{NewWorkflowRun, StepOutcome, StepStart, Store};
use loops_workflow::{WorkflowRunOptions, execute_workflow};
use serde_json::json;

use crate::common::*;

/// Fills pool `p` (of one place) with a running step of another workflow
/// run, and returns that run's id, to free the place with
/// [`free_the_pool`].
fn fill_the_pool(store: &Store) -> loops_core::WorkflowRunId {
    store.set_pool("p", 1, t0()).unwrap();
    let mut holder = sh("hold", &[], "true");
    holder["pool"] = json!("p");
    let spec = create(store, "holder", json!([holder]), json!({}));
    let run = store
        .create_workflow_run(&NewWorkflowRun::new(&spec), t0())
        .unwrap();
    let started = store
        .start_pooled_step_run(&run.id, "hold", Some("p"), t0())
        .unwrap();
    assert!(matches!(started, StepStart::Started(_)), "{started:?}");
    run.id
}

fn free_the_pool(store: &Store, holder: &loops_core::WorkflowRunId) {
    store
        .finalize_step_run(
            holder,
            "hold",
            &StepOutcome::new(loops_core::ExecutorStatus::Succeeded),
            t0(),
        )
        .unwrap();
}

/// The ids of the runs of workflow `wf`.
fn runs_of(store: &Store, wf: &loops_core::WorkflowSpec) -> Vec<loops_core::WorkflowRunId> {
    let filter = loops_store::WorkflowRunFilter {
        workflow_id: Some(wf.id),
        ..Default::default()
    };
    store
        .list_workflow_runs(&filter)
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect()
}

/// A workflow of a pooled step `a` and a step `b` in no pool, side by side.
fn pooled(store: &Store, name: &str, extra: serde_json::Value) -> loops_core::WorkflowSpec {
    let mut a = sh("a", &[], "touch \"$WORK/a\"");
    a["pool"] = json!("p");
    let b = sh("b", &[], "touch \"$WORK/b\"");
    let mut extra = extra;
    extra["maxParallel"] = json!(2);
    create(store, name, json!([a, b]), extra)
}

#[test]
fn a_step_waits_for_its_full_pool_while_others_run_and_starts_when_it_frees() {
    let fx = Fixture::new();
    let store = fx.store();
    let holder = fill_the_pool(&store);
    let wf = pooled(&store, "waits", json!({}));
    let said = Mutex::new(Vec::new());
    let on_wait = |step: &str, pool: &str, max: u32| {
        said.lock().unwrap().push(format!("{step} {pool} {max}"));
    };
    let clock = clock();
    let opts = WorkflowRunOptions {
        on_pool_wait: Some(&on_wait),
        ..fx.opts(&clock)
    };
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            // `b` ran while `a` waited, pending: then the place frees.
            wait_for("step b", || fx.marker("b").exists().then_some(()));
            let other = fx.store();
            let runs = runs_of(&other, &wf);
            let a = runs
                .iter()
                .find_map(|id| other.get_step_run(id, "a").unwrap())
                .unwrap();
            assert_eq!(a.status, StepRunStatus::Pending);
            assert!(!fx.marker("a").exists());
            free_the_pool(&other, &holder);
        });
        execute_workflow(&store, &wf, &opts).unwrap()
    });
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded);
    assert!(fx.marker("a").exists());
    assert_eq!(*said.lock().unwrap(), ["a p 1"]);
}

#[test]
fn the_workflow_timeout_ends_a_run_whose_step_waits_for_its_pool() {
    let fx = Fixture::new();
    let store = fx.store();
    fill_the_pool(&store);
    let wf = pooled(&store, "timeout", json!({}));
    let clock = clock();
    let opts = WorkflowRunOptions {
        timeout_ms: Some(300),
        ..fx.opts(&clock)
    };
    let out = execute_workflow(&store, &wf, &opts).unwrap();
    assert_eq!(out.run.status, WorkflowRunStatus::TimedOut);
    assert_eq!(
        out.run.error.as_deref(),
        Some("workflow timed out after 300ms")
    );
    let a = out.steps.iter().find(|s| s.step_id == "a").unwrap();
    assert_eq!(a.status, StepRunStatus::Skipped);
    assert!(!fx.marker("a").exists());
}

#[test]
fn a_cancel_ends_a_run_whose_step_waits_for_its_pool() {
    let fx = Fixture::new();
    let store = fx.store();
    fill_the_pool(&store);
    let wf = pooled(&store, "cancel", json!({}));
    let clock = clock();
    let opts = fx.opts(&clock);
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            wait_for("step b", || fx.marker("b").exists().then_some(()));
            let other = fx.store();
            let run = runs_of(&other, &wf)[0];
            other.cancel_workflow_run(&run, "stop it", t0()).unwrap();
        });
        execute_workflow(&store, &wf, &opts).unwrap()
    });
    assert_eq!(out.run.status, WorkflowRunStatus::Cancelled);
    let a = out.steps.iter().find(|s| s.step_id == "a").unwrap();
    assert_eq!(a.status, StepRunStatus::Cancelled);
    assert!(!fx.marker("a").exists());
}
