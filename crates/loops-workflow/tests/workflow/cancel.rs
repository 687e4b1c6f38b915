//! Cancelling a running workflow: from another process (another store
//! handle that only writes rows) and through the stop token (Ctrl-C)
//! (SPEC §6.5; §10 items 81, 82; §9 items 19, 21).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use loops_core::{ExecutorStatus, ProcessRef, StepRunStatus, WorkflowRunId, WorkflowRunStatus};
use loops_exec::CancelToken;
use loops_store::WorkflowRunFilter;
use loops_workflow::{WorkflowOutcome, execute_workflow};
use serde_json::json;

use crate::common::*;

/// The cancel poll of these tests, the runner's default.
const POLL: Duration = Duration::from_millis(50);

/// The run of workflow `wf` once it exists, read through `store`.
fn run_of(store: &loops_store::Store, wf: &loops_core::WorkflowSpec) -> WorkflowRunId {
    wait_for("the workflow run", || {
        let filter = WorkflowRunFilter {
            workflow_id: Some(wf.id),
            ..WorkflowRunFilter::default()
        };
        store
            .list_workflow_runs(&filter)
            .unwrap()
            .first()
            .map(|r| r.id)
    })
}

// SPEC §10 item 82
#[test]
fn a_cancel_from_another_process_kills_the_step_within_the_poll() {
    let fx = Fixture::new();
    let wf = create(
        &fx.store(),
        "cancel",
        json!([
            sh(
                "a",
                &[],
                "touch \"$WORK/started\"; sleep 0.6; touch \"$WORK/late\""
            ),
            sh("b", &["a"], "touch \"$WORK/b\""),
        ]),
        json!({}),
    );
    let clock = clock();
    let spawned = Mutex::new(None::<ProcessRef>);
    let (out, reaction) = std::thread::scope(|s| {
        let runner = s.spawn(|| {
            let store = fx.store();
            let on_spawn = |p: ProcessRef| *spawned.lock().unwrap() = Some(p);
            let mut opts = fx.opts(&clock);
            opts.on_spawn = Some(&on_spawn);
            let out = execute_workflow(&store, &wf, &opts).unwrap();
            (out, Instant::now())
        });
        // Another handle, as `loops workflows cancel` in another process.
        let other = fx.store();
        let run = run_of(&other, &wf);
        wait_for("the step to start", || {
            fx.marker("started").exists().then_some(())
        });
        let cancelled_at = Instant::now();
        other
            .cancel_workflow_run(&run, "cancelled by user", t0())
            .unwrap();
        let (out, returned_at) = runner.join().unwrap();
        (out, returned_at - cancelled_at)
    });
    let grace = fx.exec().kill_grace;
    eprintln!("cancel to runner return: {reaction:?}");
    assert!(
        reaction < POLL * 2 + grace,
        "the kill took {reaction:?}, more than two polls plus the kill grace"
    );
    let pid = spawned.lock().unwrap().expect("the step spawned");
    assert!(!loops_core::Liveness::is_alive(
        &loops_exec::SystemProbe,
        pid
    ));

    check_cancelled(&fx, &out, "cancelled by user");
    assert_never_appear(
        &[fx.marker("late"), fx.marker("b")],
        Instant::now() + Duration::from_millis(800),
    );
}

/// The run, its steps, its events and its result after a cancel with
/// `reason` that hit the first step mid-run.
fn check_cancelled(fx: &Fixture, out: &WorkflowOutcome, reason: &str) {
    assert_eq!(out.run.status, WorkflowRunStatus::Cancelled);
    assert_eq!(out.run.error.as_deref(), Some(reason));
    for step in &out.steps {
        assert_eq!(step.status, StepRunStatus::Cancelled, "{step:?}");
        assert_eq!(step.error.as_deref(), Some(reason));
        assert_eq!(step.pid, None);
    }
    let store = fx.store();
    let events = events(&store, &out.run.id);
    let started = events.iter().filter(|e| e.0 == "step_started").count();
    assert_eq!(events[0].0, "created");
    assert_eq!(events.last().unwrap().0, "cancelled");
    // Only the start events of the killed steps come in between: SPEC §6.6
    // never writes `step_cancelled`, and the killed steps' results are not
    // finalized over the cancel.
    assert_eq!(events.len(), started + 2, "{events:?}");
    let last = store.list_events(&out.run.id, None).unwrap().pop().unwrap();
    assert_eq!(last.payload, Some(json!({"reason": reason})));
    // SPEC §6.7: cancelled maps to failed with exit code 1.
    assert_eq!(out.result.status, ExecutorStatus::Failed);
    assert_eq!(out.result.exit_code, Some(1));
    assert_eq!(out.result.error.as_deref(), Some(reason));
}

#[test]
fn the_stop_token_cancels_the_run_with_its_reason_and_kills_every_step() {
    // Ctrl-C on `workflows run` (SPEC §9 item 19), with two steps running
    // side by side.
    let fx = Fixture::new();
    let step = |id: &str| {
        sh(
            id,
            &[],
            &format!("touch \"$WORK/{id}.started\"; sleep 0.6; touch \"$WORK/late\""),
        )
    };
    let wf = create(
        &fx.store(),
        "stop",
        json!([
            step("x"),
            step("y"),
            sh("z", &["x", "y"], "touch \"$WORK/z\"")
        ]),
        json!({"maxParallel": 2}),
    );
    let clock = clock();
    let stop = CancelToken::new();
    let out = std::thread::scope(|s| {
        let runner = s.spawn(|| {
            let store = fx.store();
            let mut opts = fx.opts(&clock);
            opts.stop = Some(&stop);
            execute_workflow(&store, &wf, &opts).unwrap()
        });
        wait_for("both steps to start", || {
            (fx.marker("x.started").exists() && fx.marker("y.started").exists()).then_some(())
        });
        stop.cancel("cancelled by SIGINT");
        runner.join().unwrap()
    });
    check_cancelled(&fx, &out, "cancelled by SIGINT");
    assert_never_appear(
        &[fx.marker("late"), fx.marker("z")],
        Instant::now() + Duration::from_millis(800),
    );
}

#[test]
fn a_cancelled_run_is_never_finalized_again_and_cannot_be_resumed() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(&store, "done", json!([sh("a", &[], "true")]), json!({}));
    let run = store
        .create_workflow_run(&loops_store::NewWorkflowRun::new(&wf), t0())
        .unwrap();
    store.cancel_workflow_run(&run.id, "nope", t0()).unwrap();
    let clock = clock();
    let mut opts = fx.opts(&clock);
    opts.resume = Some(run.id);
    let err = execute_workflow(&store, &wf, &opts).unwrap_err();
    assert!(matches!(
        err,
        loops_workflow::WorkflowError::NotRunning { .. }
    ));
    assert!(
        err.to_string().contains("is cancelled, not running"),
        "{err}"
    );
}
