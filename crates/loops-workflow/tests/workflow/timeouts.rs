//! Step timeouts and the workflow timeout (SPEC §6.4; §10 items 76, 77).
//! A marker that the step would write after its sleep proves that the kill
//! reached the whole process group before the side effect.

use std::time::{Duration, Instant};

use loops_core::{ExecutorStatus, StepRunStatus, WorkflowRunStatus};
use loops_workflow::execute_workflow;
use serde_json::json;

use crate::common::*;

/// Asserts that `late` never appears, polling until past the moment the
/// killed step would have written it. A negative check has to wait; the
/// group is already gone, so this only guards against a survivor.
fn assert_no_late_write(fx: &Fixture, step_sleep: Duration) {
    assert_never_appear(
        &[fx.marker("late")],
        Instant::now() + step_sleep + Duration::from_millis(200),
    );
}

// SPEC §10 item 76
#[test]
fn a_step_timeout_times_out_the_step_the_run_and_the_result() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut a = sh("a", &[], "sleep 0.4; touch \"$WORK/late\"");
    a["timeoutMs"] = json!(50);
    let wf = create(
        &store,
        "step-timeout",
        json!([a, sh("b", &["a"], "true")]),
        json!({}),
    );
    let clock = clock();
    let out = execute_workflow(&store, &wf, &fx.opts(&clock)).unwrap();

    assert_eq!(out.steps[0].status, StepRunStatus::TimedOut);
    assert_eq!(out.steps[0].error.as_deref(), Some("timed out after 50ms"));
    assert_eq!(out.run.status, WorkflowRunStatus::TimedOut);
    assert_eq!(
        out.run.error.as_deref(),
        Some("step a timed_out: timed out after 50ms")
    );
    assert_eq!(out.steps[1].status, StepRunStatus::Skipped);
    assert_eq!(out.result.status, ExecutorStatus::TimedOut);
    assert_eq!(out.result.exit_code, Some(1));
    assert_eq!(
        events(&store, &out.run.id),
        ev(&[
            "created",
            "step_started:a",
            "step_timed_out:a",
            "step_skipped:b",
            "timed_out",
        ])
    );
    assert_no_late_write(&fx, Duration::from_millis(400));
}

#[test]
fn the_workflow_timeout_times_out_the_running_step_and_the_run() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "wf-timeout",
        json!([
            sh("a", &[], "sleep 3; touch \"$WORK/late\""),
            sh("b", &["a"], "true"),
        ]),
        json!({}),
    );
    let clock = clock();
    let mut opts = fx.opts(&clock);
    opts.timeout_ms = Some(300);
    let began = Instant::now();
    let out = execute_workflow(&store, &wf, &opts).unwrap();
    // Honest slack, not a benchmark: the run returns once the 300 ms
    // timeout killed the step, well before the step's 3 s would end; the
    // 2.7 s between them absorb a loaded machine.
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "the step was not killed at the timeout: {:?}",
        began.elapsed()
    );

    let msg = "workflow timed out after 300ms";
    assert_eq!(out.steps[0].status, StepRunStatus::TimedOut);
    assert_eq!(out.steps[0].error.as_deref(), Some(msg));
    assert_eq!(out.run.status, WorkflowRunStatus::TimedOut);
    assert_eq!(
        out.run.error.as_deref(),
        Some(format!("step a timed_out: {msg}").as_str())
    );
    assert_eq!(out.steps[1].status, StepRunStatus::Skipped);
    assert_eq!(out.result.status, ExecutorStatus::TimedOut);
    assert_no_late_write(&fx, Duration::from_secs(3).saturating_sub(began.elapsed()));
}

#[test]
fn a_workflow_timeout_past_a_tolerated_step_stops_before_the_next_one() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut a = sh("a", &[], "sleep 5");
    a["continueOnFailure"] = json!(true);
    let wf = create(
        &store,
        "wf-timeout-cof",
        json!([a, sh("b", &[], "touch \"$WORK/b\"")]),
        json!({}),
    );
    let clock = clock();
    let mut opts = fx.opts(&clock);
    opts.timeout_ms = Some(200);
    let out = execute_workflow(&store, &wf, &opts).unwrap();
    let msg = "workflow timed out after 200ms";
    assert_eq!(out.steps[0].status, StepRunStatus::TimedOut);
    assert_eq!(out.steps[1].status, StepRunStatus::Skipped);
    assert_eq!(out.steps[1].error.as_deref(), Some(msg));
    assert_eq!(out.run.status, WorkflowRunStatus::TimedOut);
    assert_eq!(out.run.error.as_deref(), Some(msg));
    assert!(!fx.marker("b").exists());
}
