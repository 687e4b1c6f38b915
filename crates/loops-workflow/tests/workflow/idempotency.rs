//! Idempotency keys: one run per key, the double-run guard, and stored
//! results for finished keys (SPEC §4.3, §6.3 steps 1 and 5; §10 items
//! 79, 80, 84).

use loops_core::{ExecutorStatus, StepRunStatus, WorkflowRunStatus};
use loops_store::WorkflowRunFilter;
use loops_workflow::{WorkflowError, execute_workflow};
use serde_json::json;

use crate::common::*;

#[test]
fn a_finished_key_returns_its_stored_result_without_spawning() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "once",
        json!([sh("a", &[], "echo x >> \"$WORK/log\"")]),
        json!({}),
    );
    let clock = clock();
    let mut opts = fx.opts(&clock);
    opts.idempotency_key = Some("slot-1".into());
    let first = execute_workflow(&store, &wf, &opts).unwrap();
    let events_before = events(&store, &first.run.id);
    let again = execute_workflow(&store, &wf, &opts).unwrap();
    assert_eq!(again.run, first.run);
    assert_eq!(again.result.status, ExecutorStatus::Succeeded);
    assert_eq!(lines(&fx.marker("log")), ["x"]);
    assert_eq!(events(&store, &first.run.id), events_before);
    // Another key is another run.
    opts.idempotency_key = Some("slot-2".into());
    let other = execute_workflow(&store, &wf, &opts).unwrap();
    assert_ne!(other.run.id, first.run.id);
    assert_eq!(lines(&fx.marker("log")), ["x", "x"]);
}

#[test]
fn concurrent_runs_with_one_key_make_one_run_and_one_side_effect() {
    let fx = Fixture::new();
    let wf = create(
        &fx.store(),
        "twice",
        json!([sh("a", &[], "echo x >> \"$WORK/log\"; sleep 0.4")]),
        json!({}),
    );
    let clock = clock();
    let key = Some("loop:slot:attempt:1".to_owned());
    let (first, second) = std::thread::scope(|s| {
        let runner = s.spawn(|| {
            let store = fx.store();
            let mut opts = fx.opts(&clock);
            opts.idempotency_key = key.clone();
            execute_workflow(&store, &wf, &opts).unwrap()
        });
        let store = fx.store();
        wait_for("the first runner's step", || {
            let runs = store
                .list_workflow_runs(&WorkflowRunFilter::default())
                .unwrap();
            let run = runs.first()?;
            let step = store.get_step_run(&run.id, "a").unwrap()?;
            (step.status == StepRunStatus::Running).then_some(())
        });
        let mut opts = fx.opts(&clock);
        opts.idempotency_key = key.clone();
        let second = execute_workflow(&store, &wf, &opts);
        (runner.join().unwrap(), second)
    });
    let err = second.unwrap_err();
    assert!(
        matches!(err, WorkflowError::StepNotClaimable { .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "workflow step is not claimable: {}/a status=running",
            first.run.id
        )
    );
    assert_eq!(first.run.status, WorkflowRunStatus::Succeeded);
    assert_eq!(lines(&fx.marker("log")), ["x"]);
    let all = fx
        .store()
        .list_workflow_runs(&WorkflowRunFilter::default())
        .unwrap();
    assert_eq!(all.len(), 1);
}
