//! A workflow run whose writes fail for a while (issue 12 §5): the runner
//! keeps what it could not record and tries again until it lands.

use std::sync::Mutex;

use loops_core::{StepRunStatus, WorkflowRunStatus};
use loops_workflow::execute_workflow;
use serde_json::json;

use crate::common::*;

#[test]
fn a_turn_that_cannot_be_written_is_applied_again_once_the_store_accepts_writes() {
    // A write lock held elsewhere past the busy timeout stands in for a full
    // disk or an I/O error: both are transient store errors to the runner.
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "stalled",
        json!([
            sh(
                "a",
                &[],
                "touch \"$WORK/started\"; while [ ! -e \"$WORK/go\" ]; do sleep 0.01; done"
            ),
            sh("b", &["a"], "touch \"$WORK/b\""),
        ]),
        json!({}),
    );
    let clock = clock();
    let retries = Mutex::new(Vec::new());
    let on_retry = |e: &loops_store::StoreError| retries.lock().unwrap().push(e.to_string());
    let outcome = std::thread::scope(|s| {
        let runner = s.spawn(|| {
            let opts = loops_workflow::WorkflowRunOptions {
                on_retry: Some(&on_retry),
                ..fx.opts(&clock)
            };
            execute_workflow(&fx.store(), &wf, &opts)
        });
        wait_for("step a to start", || {
            fx.marker("started").exists().then_some(())
        });
        let raw = rusqlite::Connection::open(fx.db()).unwrap();
        raw.execute_batch("BEGIN IMMEDIATE").unwrap();
        std::fs::write(fx.marker("go"), b"").unwrap();
        wait_for("a failed write to be reported", || {
            (!retries.lock().unwrap().is_empty()).then_some(())
        });
        raw.execute_batch("ROLLBACK").unwrap();
        runner.join().unwrap()
    });
    let outcome = outcome.unwrap();

    assert_eq!(outcome.run.status, WorkflowRunStatus::Succeeded);
    let statuses: Vec<StepRunStatus> = outcome.steps.iter().map(|s| s.status).collect();
    assert_eq!(
        statuses,
        [StepRunStatus::Succeeded, StepRunStatus::Succeeded]
    );
    assert!(fx.marker("b").exists());
    let retries = retries.into_inner().unwrap();
    assert!(retries[0].contains("locked"), "{retries:?}");
    // Every step's start and finish was recorded exactly once.
    let kinds: Vec<String> = events(&store, &outcome.run.id)
        .into_iter()
        .map(|(kind, step)| format!("{kind}:{}", step.unwrap_or_default()))
        .collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.as_str() == "step_succeeded:a")
            .count(),
        1,
        "{kinds:?}"
    );
}
