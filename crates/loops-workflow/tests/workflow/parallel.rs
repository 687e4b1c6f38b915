//! `maxParallel`: independent steps side by side, the same outcomes as the
//! serial walk, and the failure rule (new in loops; SPEC §9 item 35).

use std::collections::BTreeMap;

use loops_core::{StepRunStatus, WorkflowRunStatus};
use loops_workflow::{WorkflowOutcome, execute_workflow};
use serde_json::{Value, json};

use crate::common::*;

/// A fan-out and join whose failing branch `b1` is declared after its
/// siblings, so the serial walk has run them by the time it fails.
fn fan_out(b1_continue_on_failure: bool) -> Value {
    let mut b1 = sh("b1", &["root"], "exit 1");
    b1["continueOnFailure"] = json!(b1_continue_on_failure);
    json!([
        sh("root", &[], "true"),
        sh("b2", &["root"], "true"),
        sh("b3", &["root"], "true"),
        b1,
        sh("join", &["b1", "b2", "b3"], "true"),
        sh("after", &["join"], "true"),
    ])
}

type Final = (
    WorkflowRunStatus,
    Option<String>,
    BTreeMap<String, (StepRunStatus, Option<String>)>,
);

fn final_states(out: &WorkflowOutcome) -> Final {
    let steps = out
        .steps
        .iter()
        .map(|s| (s.step_id.clone(), (s.status, s.error.clone())))
        .collect();
    (out.run.status, out.run.error.clone(), steps)
}

fn run_with(fx: &Fixture, name: &str, steps: Value, max_parallel: u32) -> WorkflowOutcome {
    let store = fx.store();
    let wf = create(&store, name, steps, json!({"maxParallel": max_parallel}));
    assert_eq!(wf.max_parallel, Some(max_parallel));
    let clock = clock();
    let out = execute_workflow(&store, &wf, &fx.opts(&clock)).unwrap();
    // Per step, `step_started` comes before the step's outcome.
    let events = events(&store, &out.run.id);
    for step in &out.steps {
        let at = |kind: &str| {
            events
                .iter()
                .position(|(t, s)| t.starts_with(kind) && s.as_deref() == Some(&step.step_id))
        };
        if let Some(started) = at("step_started") {
            let ended = events.iter().rposition(|(t, s)| {
                t.starts_with("step_") && t != "step_started" && s.as_deref() == Some(&step.step_id)
            });
            assert!(ended.is_some_and(|e| e > started), "{events:?}");
        }
    }
    out
}

#[test]
fn max_parallel_1_and_8_reach_the_same_final_states() {
    for tolerate in [false, true] {
        let fx = Fixture::new();
        let serial = run_with(&fx, "serial", fan_out(tolerate), 1);
        let parallel = run_with(&fx, "parallel", fan_out(tolerate), 8);
        assert_eq!(final_states(&serial), final_states(&parallel));
        let (status, error, steps) = final_states(&serial);
        if tolerate {
            assert_eq!((status, error), (WorkflowRunStatus::Succeeded, None));
            assert_eq!(steps["after"].0, StepRunStatus::Succeeded);
        } else {
            let reason = "step b1 failed: process exited with code 1";
            assert_eq!(
                (status, error.as_deref()),
                (WorkflowRunStatus::Failed, Some(reason))
            );
            assert_eq!(steps["join"], (StepRunStatus::Skipped, Some(reason.into())));
            assert_eq!(steps["b3"].0, StepRunStatus::Succeeded);
            // With one step at a time the event log is SPEC §6.3's.
            let store = fx.store();
            assert_eq!(
                events(&store, &serial.run.id),
                ev(&[
                    "created",
                    "step_started:root",
                    "step_succeeded:root",
                    "step_started:b2",
                    "step_succeeded:b2",
                    "step_started:b3",
                    "step_succeeded:b3",
                    "step_started:b1",
                    "step_failed:b1",
                    "step_skipped:join",
                    "step_skipped:after",
                    "failed",
                ])
            );
        }
    }
}

/// A step that appends `+`, waits (bounded) until `n` steps have appended
/// theirs, and appends `-`: it succeeds only if `n` steps overlap.
fn barrier(id: &str, n: usize) -> Value {
    sh(
        id,
        &[],
        &format!(
            "echo + >> \"$WORK/conc\"; i=0; \
             while [ \"$(grep -c + \"$WORK/conc\")\" -lt {n} ]; do \
               i=$((i+1)); [ $i -gt 250 ] && exit 1; sleep 0.02; \
             done; echo - >> \"$WORK/conc\""
        ),
    )
}

#[test]
fn independent_steps_overlap_up_to_max_parallel() {
    let fx = Fixture::new();
    let out = run_with(
        &fx,
        "overlap",
        json!([barrier("p1", 3), barrier("p2", 3), barrier("p3", 3)]),
        8,
    );
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded, "{out:#?}");

    // Never more than maxParallel at once: four steps, two at a time.
    let fx = Fixture::new();
    let steps = json!([
        barrier("q1", 2),
        barrier("q2", 2),
        barrier("q3", 2),
        barrier("q4", 2)
    ]);
    let out = run_with(&fx, "bounded", steps, 2);
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded, "{out:#?}");
    let (mut running, mut most) = (0i32, 0i32);
    for line in lines(&fx.marker("conc")) {
        running += if line == "+" { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(most, 2);
}

#[test]
fn a_failure_stops_new_steps_and_lets_running_ones_finish() {
    let fx = Fixture::new();
    let out = run_with(
        &fx,
        "halt",
        json!([
            sh("slow", &[], "sleep 0.3; touch \"$WORK/slow\""),
            sh("fail", &[], "exit 1"),
            sh("later", &[], "touch \"$WORK/later\""),
        ]),
        2,
    );
    let reason = "step fail failed: process exited with code 1";
    assert_eq!(out.run.status, WorkflowRunStatus::Failed);
    assert_eq!(out.run.error.as_deref(), Some(reason));
    let (_, _, steps) = final_states(&out);
    assert_eq!(steps["slow"].0, StepRunStatus::Succeeded);
    assert_eq!(
        steps["later"],
        (StepRunStatus::Skipped, Some(reason.into()))
    );
    assert!(fx.marker("slow").exists() && !fx.marker("later").exists());
    let store = fx.store();
    let events = events(&store, &out.run.id);
    let pos = |t: &str| events.iter().position(|e| e == &ev(&[t])[0]).unwrap();
    assert!(pos("step_succeeded:slow") < pos("step_skipped:later"));
    assert!(pos("step_failed:fail") < pos("step_succeeded:slow"));
}
