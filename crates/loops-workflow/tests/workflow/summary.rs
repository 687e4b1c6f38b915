//! The result summary is bounded (SPEC §6.7, §9 item 25): step outputs are
//! cut to their tails, and the whole summary fits the output cap while
//! staying valid JSON. The step rows keep the full captured output.

use loops_core::WorkflowRunStatus;
use loops_workflow::{STEP_OUTPUT_SUMMARY_BYTES, execute_workflow};
use serde_json::{Value, json};

use crate::common::*;

#[test]
fn a_chatty_step_is_cut_to_its_tail_in_the_summary() {
    let fx = Fixture::new();
    let store = fx.store();
    // 300,000 bytes, more than the 256 KiB capture cap.
    let wf = create(
        &store,
        "chatty",
        json!([sh(
            "a",
            &[],
            "head -c 300000 /dev/zero | tr '\\0' x; echo END"
        )]),
        json!({}),
    );
    let clock = clock();
    let out = execute_workflow(&store, &wf, &fx.opts(&clock)).unwrap();
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded);
    let cap = fx.exec().max_output_bytes;
    assert!(out.result.stdout.len() <= cap);
    let summary: Value = serde_json::from_str(&out.result.stdout).unwrap();
    let shown = summary["steps"][0]["stdout"].as_str().unwrap();
    assert!(shown.starts_with("[truncated "), "{}", &shown[..40]);
    assert!(shown.ends_with("xxEND\n"));
    assert!(shown.len() <= STEP_OUTPUT_SUMMARY_BYTES, "{}", shown.len());
    // The row keeps everything the executor captured.
    let row = out.steps[0].stdout.as_deref().unwrap();
    assert!(row.len() > 200_000 && row.ends_with("END\n"));
}

#[test]
fn many_steps_fit_the_cap_as_valid_json() {
    let fx = Fixture::new();
    let store = fx.store();
    let steps: Vec<Value> = (0..40)
        .map(|i| {
            sh(
                &format!("s{i:02}"),
                &[],
                "head -c 5000 /dev/zero | tr '\\0' y",
            )
        })
        .collect();
    let wf = create(
        &store,
        "many",
        Value::Array(steps),
        json!({"maxParallel": 8}),
    );
    let clock = clock();
    let mut opts = fx.opts(&clock);
    opts.exec.max_output_bytes = 12_000;
    let out = execute_workflow(&store, &wf, &opts).unwrap();
    assert_eq!(out.run.status, WorkflowRunStatus::Succeeded);
    assert!(
        out.result.stdout.len() <= 12_000,
        "{}",
        out.result.stdout.len()
    );
    let summary: Value = serde_json::from_str(&out.result.stdout).unwrap();
    let listed = summary["steps"].as_array().unwrap().len();
    let omitted = summary["omittedSteps"].as_u64().unwrap_or(0) as usize;
    assert_eq!(listed + omitted, 40);
    assert!(omitted > 0, "the summary should have needed to drop steps");
    assert_eq!(summary["workflowRun"]["id"], json!(out.run.id));
    for step in summary["steps"].as_array().unwrap() {
        let shown = step["stdout"].as_str().unwrap();
        assert!(shown.starts_with("[truncated 5000 bytes]"), "{shown}");
    }
}
