//! Workflow loops through `tick` and `ProcessExecutor` (SPEC §6.8; §10 items
//! 77, 78, 98 without the daemon; §9 item 21).

use loops_core::{
    Anchor, Loop, LoopRun, ManualClock, NewLoop, RunStatus, Schedule, StepRunStatus, Target,
    Timestamp, WorkflowId, WorkflowRunStatus, WorkflowTarget, loop_workflow_key,
};
use loops_store::{RunFilter, Store, WorkflowRunFilter};
use serde_json::json;

use crate::common::*;
use crate::{create_slow, process_tick};

const RUNNER: &str = "manual-tick:1";

/// `t0` plus `secs` seconds.
fn at(secs: i64) -> Timestamp {
    t0().add_ms(secs * 1000)
}

/// An every-minute loop running workflow `id`, created at `t0`, so its first
/// slot is `at(60)`.
fn workflow_loop(store: &Store, id: WorkflowId, timeout_ms: Option<u64>, attempts: u32) -> Loop {
    let target = Target::Workflow(WorkflowTarget {
        workflow_id: id,
        input: None,
        timeout_ms,
    });
    let schedule = Schedule::Interval {
        every_ms: 60_000,
        anchor: Some(Anchor::FixedRate),
    };
    let mut new = NewLoop::new("wf-loop", schedule, target);
    new.max_attempts = attempts;
    store.create_loop(&new, t0()).unwrap()
}

/// Runs one tick at the clock's time with the production executor, and
/// returns the run it completed.
fn tick_once(fx: &Fixture, store: &Store, clock: &ManualClock) -> LoopRun {
    let result = process_tick(fx, store, clock, RUNNER, 8, None);
    assert_eq!(result.completed.len(), 1, "{result:#?}");
    result.completed[0].clone()
}

fn runs_of(store: &Store, run: &LoopRun) -> Vec<loops_core::WorkflowRun> {
    let filter = WorkflowRunFilter {
        loop_run_id: Some(run.id),
        ..WorkflowRunFilter::default()
    };
    let mut runs = store.list_workflow_runs(&filter).unwrap();
    runs.reverse();
    runs
}

// SPEC §10 item 78 (one linked run and its key)
#[test]
fn a_due_workflow_loop_runs_its_workflow_linked_to_the_loop_run() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "nightly",
        json!([
            sh(
                "a",
                &[],
                "echo $LOOPS_LOOP_ID $LOOPS_RUN_ID $LOOPS_SCHEDULED_FOR"
            ),
            sh("b", &["a"], "true"),
        ]),
        json!({}),
    );
    let lp = workflow_loop(&store, wf.id, None, 1);
    let clock = ManualClock::new(at(60));
    let run = tick_once(&fx, &store, &clock);

    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    // SPEC §6.8: the loop run's pid is cleared by its finalize.
    assert_eq!(run.pid, None);
    let linked = runs_of(&store, &run);
    assert_eq!(linked.len(), 1);
    let wr = &linked[0];
    assert_eq!(wr.status, WorkflowRunStatus::Succeeded);
    assert_eq!(wr.loop_id, Some(lp.id));
    assert_eq!(wr.scheduled_for, Some(at(60)));
    assert_eq!(
        wr.idempotency_key.as_deref(),
        Some(loop_workflow_key(&lp.id, at(60), 1).as_str())
    );
    assert_eq!(
        wr.idempotency_key.as_deref(),
        Some(format!("{}:2026-01-01T00:01:00.000Z:attempt:1", lp.id).as_str())
    );
    let created = &store.list_events(&wr.id, None).unwrap()[0];
    assert_eq!(
        created.payload,
        Some(
            json!({"workflowId": wf.id, "workflowName": "nightly", "stepCount": 2,
                    "loopId": lp.id, "loopRunId": run.id})
        )
    );
    let steps = store.list_step_runs(&wr.id).unwrap();
    assert_eq!(
        steps[0].stdout.as_deref(),
        Some(format!("{} {} 2026-01-01T00:01:00.000Z\n", lp.id, run.id).as_str())
    );
    let summary: serde_json::Value = serde_json::from_str(run.stdout.as_deref().unwrap()).unwrap();
    assert_eq!(summary["workflowRun"]["id"], json!(wr.id));
    assert_eq!(
        store.get_loop(&lp.id).unwrap().unwrap().next_run_at,
        Some(at(120))
    );
}

// SPEC §10 item 78 (a retry creates a second run)
#[test]
fn each_retry_creates_a_new_workflow_run() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(&store, "flaky", json!([sh("a", &[], "exit 1")]), json!({}));
    let lp = workflow_loop(&store, wf.id, None, 2);
    let clock = ManualClock::new(at(60));
    let first = tick_once(&fx, &store, &clock);
    assert_eq!((first.status, first.attempt), (RunStatus::Failed, 1));
    assert_eq!(
        first.error.as_deref(),
        Some("step a failed: process exited with code 1")
    );
    let lp_after = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(lp_after.retry_scheduled_for, Some(at(60)));

    clock.set(at(120));
    let second = tick_once(&fx, &store, &clock);
    assert_eq!((second.id, second.attempt), (first.id, 2));
    let keys: Vec<String> = runs_of(&store, &second)
        .into_iter()
        .filter_map(|r| r.idempotency_key)
        .collect();
    assert_eq!(
        keys,
        [
            loop_workflow_key(&lp.id, at(60), 1),
            loop_workflow_key(&lp.id, at(60), 2)
        ]
    );
}

#[test]
fn a_cancelled_scheduled_workflow_never_schedules_a_retry() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create_slow(&store, "long");
    let lp = workflow_loop(&store, wf.id, None, 3);
    let clock = ManualClock::new(at(60));
    let run = std::thread::scope(|s| {
        let ticker = s.spawn(|| {
            let store = fx.store();
            tick_once(&fx, &store, &clock)
        });
        let other = fx.store();
        wait_for("the step to start", || {
            fx.marker("started").exists().then_some(())
        });
        // The loop run records the step child's pid while it runs.
        let (loop_run, step_pid) = wait_for("the pids", || {
            let loop_run = other.get_run_by_slot(&lp.id, at(60)).unwrap()?;
            let wr = runs_of(&other, &loop_run).pop()?;
            let step = other.get_step_run(&wr.id, "a").unwrap()?;
            Some((loop_run, step.pid?)).filter(|(r, _)| r.pid.is_some())
        });
        assert_eq!(loop_run.pid, Some(step_pid));
        let wr = runs_of(&other, &loop_run).pop().unwrap();
        other
            .cancel_workflow_run(&wr.id, "cancelled by user", at(61))
            .unwrap();
        ticker.join().unwrap()
    });
    assert_eq!((run.status, run.attempt), (RunStatus::Failed, 1));
    assert_eq!(run.error.as_deref(), Some("cancelled by user"));
    let wr = runs_of(&store, &run).pop().unwrap();
    assert_eq!(wr.status, WorkflowRunStatus::Cancelled);
    // SPEC §9 item 21: attempts remain, but no retry is scheduled; the loop
    // moves on to its next slot.
    let lp = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(lp.retry_scheduled_for, None);
    assert_eq!(lp.next_run_at, Some(at(120)));
    assert!(!fx.marker("late").exists());
}

#[test]
fn stopping_a_tick_cancels_its_workflow_run_without_a_retry() {
    // Ctrl-C on `loops tick`: the run's cancel token is the workflow's stop.
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create_slow(&store, "interrupted");
    let lp = workflow_loop(&store, wf.id, None, 3);
    let clock = ManualClock::new(at(60));
    let stop = loops_exec::CancelToken::new();
    let result = std::thread::scope(|s| {
        let ticker = s.spawn(|| process_tick(&fx, &fx.store(), &clock, RUNNER, 8, Some(&stop)));
        wait_for("the step to start", || {
            fx.marker("started").exists().then_some(())
        });
        stop.cancel("cancelled by SIGINT");
        ticker.join().unwrap()
    });
    let run = &result.completed[0];
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_deref(), Some("cancelled by SIGINT"));
    let wr = runs_of(&store, run).pop().unwrap();
    assert_eq!(wr.status, WorkflowRunStatus::Cancelled);
    assert_eq!(wr.error.as_deref(), Some("cancelled by SIGINT"));
    let lp = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(lp.retry_scheduled_for, None);
    assert!(!fx.marker("late").exists());
}

// SPEC §10 item 77, with a 300 ms workflow timeout instead of 50 ms
#[test]
fn a_workflow_target_timeout_times_out_the_loop_run() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "slow",
        json!([sh("a", &[], "sleep 0.8; touch \"$WORK/late\"")]),
        json!({}),
    );
    workflow_loop(&store, wf.id, Some(300), 1);
    let clock = ManualClock::new(at(60));
    let run = tick_once(&fx, &store, &clock);
    assert_eq!(run.status, RunStatus::TimedOut, "{run:#?}");
    let wr = runs_of(&store, &run).pop().unwrap();
    assert_eq!(wr.status, WorkflowRunStatus::TimedOut);
    let step = &store.list_step_runs(&wr.id).unwrap()[0];
    assert_eq!(step.status, StepRunStatus::TimedOut);
    assert_eq!(
        step.error.as_deref(),
        Some("workflow timed out after 300ms")
    );
    // Polled until past the moment the killed step would have written its
    // marker: fails at the first sight of it, not after a fixed sleep.
    let until = std::time::Instant::now() + std::time::Duration::from_millis(700);
    loop {
        assert!(
            !fx.marker("late").exists(),
            "a killed step wrote its marker"
        );
        if std::time::Instant::now() >= until {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_missing_workflow_fails_the_run_and_an_archived_one_still_runs() {
    let fx = Fixture::new();
    let store = fx.store();
    let ghost: WorkflowId = "0123456789ab".parse().unwrap();
    workflow_loop(&store, ghost, None, 1);
    let clock = ManualClock::new(at(60));
    let run = tick_once(&fx, &store, &clock);
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(
        run.error.as_deref(),
        Some("workflow not found: 0123456789ab")
    );

    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(&store, "old", json!([sh("a", &[], "true")]), json!({}));
    store.archive_workflow(&wf.id, t0()).unwrap();
    workflow_loop(&store, wf.id, None, 1);
    let run = tick_once(&fx, &store, &clock);
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
}

// Issue 26: a workflow run that cannot record its progress for a while says
// so through the runner's `on_error` (the daemon's log), once per streak,
// and still ends as it ran.
#[test]
fn a_workflow_run_retrying_a_failed_write_is_reported_to_the_runner() {
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
            sh("b", &["a"], "true"),
        ]),
        json!({}),
    );
    workflow_loop(&store, wf.id, None, 1);
    let clock = ManualClock::new(at(60));
    let errors = std::sync::Mutex::new(Vec::new());
    let on_error = |lp: &Loop, message: &str| {
        errors
            .lock()
            .unwrap()
            .push(format!("{}: {message}", lp.name));
    };
    let result = std::thread::scope(|s| {
        let ticker = s.spawn(|| {
            let store = fx.store();
            let mut executor = loops_scheduler::ProcessExecutor::for_store(&clock, &store);
            executor.exec = fx.exec();
            let opts = loops_scheduler::TickOptions {
                hooks: loops_scheduler::HookSettings::none(),
                on_hook_error: None,
                runner_id: RUNNER,
                clock: &clock,
                executor: &executor,
                max_parallel: 1,
                stop: None,
                on_run: None,
                on_error: Some(&on_error),
            };
            loops_scheduler::tick(&store, &opts)
        });
        // Once its pid is recorded on the loop run, the runner writes
        // nothing until the step ends.
        let watcher = fx.store();
        wait_for("step a to start", || {
            let runs = watcher.list_runs(&RunFilter::default()).unwrap();
            (fx.marker("started").exists() && runs.iter().any(|r| r.pid.is_some())).then_some(())
        });
        // A write lock held past the busy timeout stands in for a full disk.
        let raw = rusqlite::Connection::open(fx.db()).unwrap();
        raw.execute_batch("BEGIN IMMEDIATE").unwrap();
        std::fs::write(fx.marker("go"), b"").unwrap();
        wait_for("the failed write to be reported", || {
            (!errors.lock().unwrap().is_empty()).then_some(())
        });
        raw.execute_batch("ROLLBACK").unwrap();
        ticker.join().unwrap()
    });
    let result = result.unwrap();
    assert_eq!(result.completed.len(), 1, "{result:#?}");
    let run = &result.completed[0];
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    let errors = errors.into_inner().unwrap();
    assert_eq!(errors.len(), 1, "once per streak: {errors:?}");
    let expected = format!(
        "wf-loop: recording the workflow run of run {} failed, retrying until it succeeds: ",
        run.id
    );
    assert!(errors[0].starts_with(&expected), "{errors:?}");
    assert!(errors[0].contains("locked"), "{errors:?}");
}
