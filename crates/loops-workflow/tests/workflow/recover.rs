//! Recovering a run whose runner died, and resuming it (SPEC §6.5; §10 item
//! 83; §9 items 19, 38).
//!
//! The dead runner is played by the test: it starts steps through the store
//! as a runner would and records a real child process on the running step,
//! then "dies" by doing nothing more. The child is killed for real through
//! the pid recorded in the store.

use std::process::{Child, Command};

use loops_core::{ExecutorStatus, ProcessRef, StepRunStatus, WorkflowRunStatus};
use loops_store::{NewWorkflowRun, StepOutcome, StoreError};
use loops_workflow::{WorkflowError, execute_workflow};
use serde_json::json;

use crate::common::*;

fn log_step(id: &str, deps: &[&str]) -> serde_json::Value {
    sh(id, deps, &format!("echo {id} >> \"$WORK/log\""))
}

/// A long-lived child in the role of the dead runner's step process.
fn orphan() -> Child {
    Command::new("sleep").arg("30").spawn().unwrap()
}

#[test]
fn a_recovered_run_resumes_from_its_first_unfinished_step() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "resume",
        json!([
            log_step("s0", &[]),
            log_step("a", &["s0"]),
            log_step("b", &["a"])
        ]),
        json!({}),
    );
    // The runner that dies: s0 succeeded, a is running with a live child.
    let run = store
        .create_workflow_run(&NewWorkflowRun::new(&wf), t0())
        .unwrap();
    store.start_step_run(&run.id, "s0", t0()).unwrap();
    let done = StepOutcome::new(ExecutorStatus::Succeeded);
    store.finalize_step_run(&run.id, "s0", &done, t0()).unwrap();
    store.start_step_run(&run.id, "a", t0()).unwrap();
    let mut child = orphan();
    let process = ProcessRef {
        pid: child.id(),
        start: loops_exec::process_start_ms(child.id()),
    };
    store.mark_step_pid(&run.id, "a", process, t0()).unwrap();

    // Recover refuses while the recorded process lives (SPEC §10 item 83).
    let err = store
        .recover_workflow_run(&run.id, "manual recovery", t0())
        .unwrap_err();
    assert!(matches!(err, StoreError::StepsAlive { .. }), "{err}");
    assert!(err.to_string().contains("still alive: a pid="), "{err}");
    // Resuming without recovering hits the double-run guard.
    let clock = clock();
    let mut opts = fx.opts(&clock);
    opts.resume = Some(run.id);
    let err = execute_workflow(&store, &wf, &opts).unwrap_err();
    assert!(matches!(err, WorkflowError::StepNotClaimable { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "workflow step is not claimable: {}/a status=running",
            run.id
        )
    );

    // Kill the recorded pid for real, as an operator would.
    let recorded = store.get_step_run(&run.id, "a").unwrap().unwrap();
    let status = Command::new("kill")
        .args(["-KILL", &recorded.pid.unwrap().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait().unwrap();

    let recovered = store
        .recover_workflow_run(&run.id, "manual recovery", t0())
        .unwrap();
    assert_eq!(recovered.run.status, WorkflowRunStatus::Running);
    assert_eq!(recovered.recovered_steps.len(), 1);
    assert_eq!(recovered.recovered_steps[0].status, StepRunStatus::Pending);

    let out = execute_workflow(&store, &wf, &opts).unwrap();
    // SPEC §9 item 38: the run this call resumed, not "the newest".
    assert_eq!(out.run.id, run.id);
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded);
    // s0 is kept; a runs again, then b.
    assert_eq!(lines(&fx.marker("log")), ["a", "b"]);
    assert_eq!(
        events(&store, &run.id),
        ev(&[
            "created",
            "step_started:s0",
            "step_succeeded:s0",
            "step_started:a",
            "recovered",
            "step_started:a",
            "step_succeeded:a",
            "step_started:b",
            "step_succeeded:b",
            "succeeded",
        ])
    );
    let recovered_event = &store.list_events(&run.id, None).unwrap()[4];
    assert_eq!(
        recovered_event.payload,
        Some(json!({"reason": "manual recovery", "recoveredSteps": ["a"]}))
    );
}

#[test]
fn a_resume_runs_failed_steps_again_and_keeps_skipped_ones() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "again",
        json!([
            log_step("a", &[]),
            log_step("b", &["a"]),
            log_step("c", &[])
        ]),
        json!({}),
    );
    let run = store
        .create_workflow_run(&NewWorkflowRun::new(&wf), t0())
        .unwrap();
    // An earlier session: a failed and c was skipped, then the runner died
    // before finalizing the run.
    store.start_step_run(&run.id, "a", t0()).unwrap();
    let failed = StepOutcome::new(ExecutorStatus::Failed);
    store
        .finalize_step_run(&run.id, "a", &failed, t0())
        .unwrap();
    store.skip_step_run(&run.id, "c", "earlier", t0()).unwrap();

    let clock = clock();
    let mut opts = fx.opts(&clock);
    opts.resume = Some(run.id);
    let out = execute_workflow(&store, &wf, &opts).unwrap();
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded);
    assert_eq!(lines(&fx.marker("log")), ["a", "b"]);
    let c = out.steps.iter().find(|s| s.step_id == "c").unwrap();
    assert_eq!(
        (c.status, c.error.as_deref()),
        (StepRunStatus::Skipped, Some("earlier"))
    );
}

#[test]
fn a_resume_of_another_workflows_run_is_refused() {
    let fx = Fixture::new();
    let store = fx.store();
    let one = create(&store, "one", json!([log_step("a", &[])]), json!({}));
    let two = create(&store, "two", json!([log_step("a", &[])]), json!({}));
    let run = store
        .create_workflow_run(&NewWorkflowRun::new(&one), t0())
        .unwrap();
    let clock = clock();
    let mut opts = fx.opts(&clock);
    opts.resume = Some(run.id);
    let err = execute_workflow(&store, &two, &opts).unwrap_err();
    assert!(matches!(err, WorkflowError::WrongWorkflow { .. }), "{err}");
    assert!(lines(&fx.marker("log")).is_empty());
}
