//! A workflow loop's output reads as its steps (issue 28, "No traps"):
//! `run-now --show-output`, `logs` and `runs <run-id> --show-output` print
//! each step's id, status, duration, exit code and output, not the JSON
//! summary the loop run stores; `--json` keeps that summary as `stdout`.

use loops_tests::TestEnv;
use serde_json::{Value, json};

use crate::workflows::{create_workflow, shell_step};

/// A workflow loop `pair` whose step `a` prints to stdout (a colour escape
/// included) and stderr, and whose step `b` then prints and fails with
/// exit 3.
fn pair_loop(env: &TestEnv) {
    create_workflow(
        env,
        &json!({
            "name": "pair",
            "steps": [
                shell_step("a", r"echo hello-out; printf '\033[31mred\n'; echo warn-err >&2", &[]),
                shell_step("b", "echo bye-out; exit 3", &["a"]),
            ],
        }),
    );
    env.loops([
        "create",
        "workflow",
        "pair",
        "--workflow",
        "pair",
        "--every",
        "1h",
    ])
    .run();
}

/// Asserts `text` shows both steps, in order, with their output blocks,
/// and no JSON.
fn assert_steps(text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
    };
    let a = at("step a succeeded in ");
    assert!(lines[a].ends_with(", exit 0"), "{text}");
    assert_eq!(
        &lines[a + 1..a + 6],
        [
            "  stdout:",
            "    hello-out",
            "    \\u{1b}[31mred",
            "  stderr:",
            "    warn-err"
        ],
        "{text}"
    );
    let b = at("step b failed in ");
    assert!(b > a, "{text}");
    assert!(
        lines[b].ends_with(", exit 3: process exited with code 3"),
        "{text}"
    );
    assert_eq!(&lines[b + 1..b + 3], ["  stdout:", "    bye-out"], "{text}");
    assert!(!text.contains("{\""), "raw JSON in:\n{text}");
    assert!(!text.contains('\u{1b}'), "an unescaped escape in:\n{text}");
}

#[test]
fn a_workflow_loops_output_reads_as_steps() {
    let env = TestEnv::new();
    pair_loop(&env);

    let ran = env
        .loops(["run-now", "pair", "--show-output"])
        .code(1)
        .run();
    let run_id = ran.stdout.split_once(' ').unwrap().0.to_owned();
    assert!(
        ran.stdout.starts_with(&format!("{run_id} failed\n")),
        "{}",
        ran.stdout
    );
    assert_steps(&ran.stdout);

    let logs = env.loops(["logs", "pair"]).run();
    assert_steps(&logs.stdout);
    assert!(
        logs.stderr
            .contains(&format!("-- run {run_id} failed, exit code 1")),
        "{}",
        logs.stderr
    );
    assert_steps(&env.loops(["logs", &run_id]).run().stdout);
    // A finished run followed prints the same and returns.
    assert_steps(&env.loops(["logs", "-f", &run_id]).run().stdout);

    let shown = env.loops(["runs", &run_id, "--show-output"]).run();
    assert!(shown.stdout.starts_with(&format!("run:       {run_id}\n")));
    assert_steps(&shown.stdout);

    // `status` ends with the last lines of the steps.
    let status = env.loops(["status", "pair"]).run();
    assert!(status.stdout.contains("    bye-out"), "{}", status.stdout);
    assert!(!status.stdout.contains("{\""), "{}", status.stdout);
}

#[test]
fn json_output_of_a_workflow_loop_keeps_the_stored_summary() {
    let env = TestEnv::new();
    pair_loop(&env);
    env.loops(["run-now", "pair"]).code(1).run();

    let logs = env.loops(["--json", "logs", "pair"]).run().json();
    let stdout = logs["stdout"].as_str().expect("stdout is the stored text");
    let summary: Value = serde_json::from_str(stdout).expect("the stored summary is JSON");
    assert_eq!(summary["workflowRun"]["status"], "failed");
    assert_eq!(summary["workflowRun"]["loopRunId"], logs["runId"]);
    let steps: Vec<(&str, &str)> = summary["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["stepId"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(steps, [("a", "succeeded"), ("b", "failed")]);
    assert_eq!(logs["stderr"], "");
    assert_eq!(logs["log"], Value::Null);

    let run_id = logs["runId"].as_str().unwrap();
    let runs = env
        .loops(["--json", "runs", run_id, "--show-output"])
        .run()
        .json();
    assert_eq!(runs[0]["stdout"].as_str(), Some(stdout));
}

#[test]
fn a_command_printing_json_is_printed_as_it_is() {
    let env = TestEnv::new();
    let printed = r#"{"workflowRun": {"id": "0123456789ab"}, "steps": []}"#;
    env.create_command("echoer", &format!("echo '{printed}'"), &["--every", "1h"]);
    env.loops(["run-now", "echoer", "--show-output"])
        .stdout_has(&format!("    {printed}\n"))
        .run();
    env.loops(["logs", "echoer"])
        .stdout(&format!("{printed}\n"))
        .run();
}
