//! Serial runs (the default `maxParallel` of 1): order, events, failure and
//! `continueOnFailure`, metadata, agents, validation (SPEC §6.1–§6.3, §6.6,
//! §6.7; §10 items 72–75, 86).

use std::sync::Mutex;

use loops_core::{ExecutorStatus, StepRun, StepRunStatus, WorkflowRunStatus, workflow_from_json};
use loops_workflow::execute_workflow;
use serde_json::json;

use crate::common::*;

// SPEC §10 item 73
#[test]
fn dependent_steps_run_in_spec_order_with_every_event() {
    let fx = Fixture::new();
    let store = fx.store();
    // SPEC §6.2's example: [c→b, a, b→a] runs a, b, c.
    let log = "echo $LOOPS_WORKFLOW_STEP_ID >> \"$WORK/log\"";
    let wf = create(
        &store,
        "order",
        json!([
            sh("c", &["b"], log),
            sh("a", &[], log),
            sh("b", &["a"], log)
        ]),
        json!({}),
    );
    let clock = clock();
    let seen = Mutex::new(Vec::new());
    let on_step = |s: &StepRun| seen.lock().unwrap().push((s.step_id.clone(), s.status));
    let mut opts = fx.opts(&clock);
    opts.on_step = Some(&on_step);
    let out = execute_workflow(&store, &wf, &opts).unwrap();

    assert_eq!(lines(&fx.marker("log")), ["a", "b", "c"]);
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded);
    assert_eq!(out.run.error, None);
    assert_eq!(
        events(&store, &out.run.id),
        ev(&[
            "created",
            "step_started:a",
            "step_succeeded:a",
            "step_started:b",
            "step_succeeded:b",
            "step_started:c",
            "step_succeeded:c",
            "succeeded",
        ])
    );
    let created = &store.list_events(&out.run.id, None).unwrap()[0];
    assert_eq!(
        created.payload,
        Some(json!({"workflowId": wf.id, "workflowName": "order", "stepCount": 3}))
    );
    // Step rows keep declaration order in `sequence`.
    let seq: Vec<(&str, u32)> = out
        .steps
        .iter()
        .map(|s| (s.step_id.as_str(), s.sequence))
        .collect();
    assert_eq!(seq, [("c", 0), ("a", 1), ("b", 2)]);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ("a".to_owned(), StepRunStatus::Running),
            ("a".to_owned(), StepRunStatus::Succeeded),
            ("b".to_owned(), StepRunStatus::Running),
            ("b".to_owned(), StepRunStatus::Succeeded),
            ("c".to_owned(), StepRunStatus::Running),
            ("c".to_owned(), StepRunStatus::Succeeded),
        ]
    );
    // SPEC §6.7 / §10 item 86.
    assert_eq!(out.result.status, ExecutorStatus::Succeeded);
    assert_eq!(out.result.exit_code, Some(0));
    assert_eq!(out.result.stderr, "");
    assert_eq!(out.result.pid, None);
    let summary: serde_json::Value = serde_json::from_str(&out.result.stdout).unwrap();
    assert_eq!(summary["workflowRun"]["id"], json!(out.run.id));
    assert_eq!(summary["steps"].as_array().unwrap().len(), 3);
    assert!(out.result.stdout.starts_with("{\n  \"workflowRun\""));
}

// SPEC §10 item 74
#[test]
fn a_failure_fails_the_run_and_skips_the_rest_with_its_reason() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "fails",
        json!([
            sh("a", &[], "echo out; exit 3"),
            sh("b", &["a"], "touch \"$WORK/b\""),
            sh("c", &[], "touch \"$WORK/c\""),
        ]),
        json!({}),
    );
    let clock = clock();
    let out = execute_workflow(&store, &wf, &fx.opts(&clock)).unwrap();

    let reason = "step a failed: process exited with code 3";
    assert_eq!(out.run.status, WorkflowRunStatus::Failed);
    assert_eq!(out.run.error.as_deref(), Some(reason));
    let status = |id: &str| out.steps.iter().find(|s| s.step_id == id).unwrap().clone();
    assert_eq!(status("a").status, StepRunStatus::Failed);
    assert_eq!(status("a").exit_code, Some(3));
    assert_eq!(status("a").stdout.as_deref(), Some("out\n"));
    for id in ["b", "c"] {
        assert_eq!(status(id).status, StepRunStatus::Skipped);
        assert_eq!(status(id).error.as_deref(), Some(reason));
    }
    assert!(!fx.marker("b").exists() && !fx.marker("c").exists());
    assert_eq!(
        events(&store, &out.run.id),
        ev(&[
            "created",
            "step_started:a",
            "step_failed:a",
            "step_skipped:b",
            "step_skipped:c",
            "failed",
        ])
    );
    let all = store.list_events(&out.run.id, None).unwrap();
    assert_eq!(
        all[2].payload,
        Some(json!({"exitCode": 3, "error": "process exited with code 3"}))
    );
    assert_eq!(all[3].payload, Some(json!({"reason": reason})));
    assert_eq!(all[5].payload, Some(json!({"error": reason})));
    assert_eq!(out.result.status, ExecutorStatus::Failed);
    assert_eq!(out.result.exit_code, Some(1));
    assert_eq!(out.result.error.as_deref(), Some(reason));
}

// SPEC §10 item 75
#[test]
fn continue_on_failure_lets_dependents_run_and_the_run_succeed() {
    // SPEC §9 item 35 is kept on purpose: a failed step with
    // continueOnFailure does not fail the run.
    let fx = Fixture::new();
    let store = fx.store();
    let mut a = sh("a", &[], "exit 1");
    a["continueOnFailure"] = json!(true);
    let wf = create(
        &store,
        "cof",
        json!([a, sh("b", &["a"], "touch \"$WORK/b\"")]),
        json!({}),
    );
    let clock = clock();
    let out = execute_workflow(&store, &wf, &fx.opts(&clock)).unwrap();
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded);
    assert_eq!(out.steps[0].status, StepRunStatus::Failed);
    assert_eq!(out.steps[1].status, StepRunStatus::Succeeded);
    assert!(fx.marker("b").exists());
    assert_eq!(out.result.status, ExecutorStatus::Succeeded);
}

#[test]
fn steps_see_the_workflow_metadata() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "meta",
        json!([sh(
            "s1",
            &[],
            "echo $LOOPS_WORKFLOW_ID $LOOPS_WORKFLOW_NAME $LOOPS_WORKFLOW_RUN_ID \
             $LOOPS_WORKFLOW_STEP_ID ${LOOPS_LOOP_ID:-none}"
        )]),
        json!({}),
    );
    let clock = clock();
    let out = execute_workflow(&store, &wf, &fx.opts(&clock)).unwrap();
    assert_eq!(
        out.steps[0].stdout.as_deref(),
        Some(format!("{} meta {} s1 none\n", wf.id, out.run.id).as_str())
    );
}

#[test]
fn steps_carry_the_loop_runs_spawn_id() {
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "spawn-id",
        json!([sh("s1", &[], "printf %s \"$LOOPS_SPAWN_ID\"")]),
        json!({}),
    );
    let clock = clock();
    let opts = loops_workflow::WorkflowRunOptions {
        spawn_id: Some("7-run-0"),
        ..fx.opts(&clock)
    };
    let out = execute_workflow(&store, &wf, &opts).unwrap();
    // The run's id, then the step spawn's own cookie.
    let ids: Vec<String> = out.steps[0]
        .stdout
        .as_deref()
        .unwrap_or_default()
        .split(' ')
        .map(str::to_owned)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], "7-run-0");
}

#[test]
fn an_agent_step_runs_the_provider_found_on_the_path() {
    let fx = Fixture::new();
    fx.script(
        "claude",
        "echo \"args: $*\"; echo \"step: $LOOPS_WORKFLOW_STEP_ID\"; echo \"prompt: $(cat)\"",
    );
    let store = fx.store();
    let wf = create(
        &store,
        "agent",
        json!([{"id": "think", "target": {"type": "agent", "provider": "claude",
                                           "prompt": "summarize the log"}}]),
        json!({}),
    );
    let clock = clock();
    let out = execute_workflow(&store, &wf, &fx.opts(&clock)).unwrap();
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded, "{out:#?}");
    let stdout = out.steps[0].stdout.clone().unwrap();
    // The prompt goes on stdin, never on argv (agents note §2.3).
    let args = stdout.lines().next().unwrap_or_default();
    assert!(args.ends_with("-p --output-format json"), "{stdout}");
    assert!(!args.contains("summarize"), "{stdout}");
    assert!(stdout.contains("prompt: summarize the log"), "{stdout}");
    assert!(stdout.contains("step: think"), "{stdout}");
}

#[test]
fn a_step_whose_account_does_not_resolve_fails_without_spawning() {
    // SPEC §6.3 step 2.6: an executor error becomes a failed step.
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create(
        &store,
        "account",
        json!([{"id": "a", "account": {"profile": "work"},
                "target": {"type": "command", "command": "touch", "args": ["x"]}}]),
        json!({}),
    );
    let clock = clock();
    let out = execute_workflow(&store, &wf, &fx.opts(&clock)).unwrap();
    assert_eq!(out.run.status, WorkflowRunStatus::Failed);
    assert_eq!(
        out.steps[0].error.as_deref(),
        Some("account.tool is required when no provider tool can be inferred")
    );
    assert_eq!(out.steps[0].pid, None);
}

#[test]
fn cycles_and_unknown_dependencies_are_rejected_before_anything_is_stored() {
    let fx = Fixture::new();
    let store = fx.store();
    let read = |steps| workflow_from_json(&json!({"name": "bad", "steps": steps}), None);
    let cycle = read(json!([sh("a", &["b"], "true"), sh("b", &["a"], "true")])).unwrap_err();
    assert_eq!(
        cycle.to_string(),
        "workflow dependency cycle includes step a: a -> b -> a"
    );
    let missing = read(json!([sh("a", &[], "true"), sh("b", &["zz"], "true")])).unwrap_err();
    assert_eq!(missing.to_string(), "step b depends on missing step zz");
    assert!(
        store
            .list_workflows(&loops_store::WorkflowFilter::default())
            .unwrap()
            .is_empty()
    );
}

// SPEC §10 item 87
#[test]
fn preflight_checks_every_step_in_execution_order() {
    let fx = Fixture::new();
    fx.script("claude", "true");
    let store = fx.store();
    let wf = create(
        &store,
        "pre",
        json!([
            {"id": "b", "dependsOn": ["a"],
             "target": {"type": "agent", "provider": "claude", "prompt": "x"}},
            {"id": "a", "target": {"type": "command", "command": "true"}},
        ]),
        json!({}),
    );
    let checks = loops_workflow::preflight_workflow(&wf, &fx.exec()).unwrap();
    let shown = serde_json::to_value(&checks).unwrap();
    assert_eq!(
        shown,
        json!([{"command": "true"}, {"command": "claude", "accountTool": "claude"}])
    );

    let new = workflow_from_json(
        &json!({"name": "missing", "steps": [
            {"id": "ok", "target": {"type": "command", "command": "true"}},
            {"id": "gone", "target": {"type": "command", "command": "no-such-program-here"}},
        ]}),
        None,
    )
    .unwrap();
    let err = loops_workflow::preflight_new_workflow(&new, &fx.exec()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("workflow step gone: Executable not found in PATH: no-such-program-here."),
        "{text}"
    );
}
