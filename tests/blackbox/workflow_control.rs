//! Stopping and resuming workflow runs with real processes: `workflows
//! cancel` from another `loops` process, Ctrl-C on `workflows run`, and
//! `workflows recover` plus `run --resume` after the runner was killed
//! (SPEC §6.5; §10 items 81–83; §9 item 19).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use loops_tests::{TestEnv, wait_for};
use serde_json::{Value, json};

use crate::workflows::{create_workflow, exec_step, shell_step};

/// Waits until the newest workflow run has step `step_id` running with its
/// pid recorded; returns the run id and that pid.
fn running_step(env: &TestEnv, step_id: &str) -> (String, u32) {
    wait_for(
        &format!("step {step_id} to run"),
        Duration::from_secs(15),
        || {
            let runs = env.loops(["--json", "workflows", "runs"]).run().json();
            let run_id = runs.get(0)?["id"].as_str()?.to_owned();
            let inspected = env
                .loops(["--json", "workflows", "inspect", &run_id])
                .run()
                .json();
            let step = inspected["steps"]
                .as_array()?
                .iter()
                .find(|s| s["stepId"] == step_id)?;
            if step["status"] != "running" {
                return None;
            }
            let pid = u32::try_from(step["pid"].as_u64()?).ok()?;
            Some((run_id, pid))
        },
    )
}

fn kill(args: &[&str]) -> bool {
    Command::new("kill")
        .args(args)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_alive(pid: u32) -> bool {
    kill(&["-0", &pid.to_string()])
}

fn wait_dead(pid: u32) {
    wait_for("the step process to die", Duration::from_secs(15), || {
        (!is_alive(pid)).then_some(())
    });
}

/// Waits for `child` with a deadline, killing it if it overstays.
fn finish(mut child: Child, within: Duration) -> std::process::Output {
    let deadline = Instant::now() + within;
    while child.try_wait().expect("waiting for loops").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("`loops workflows run` did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("loops exited")
}

fn inspect(env: &TestEnv, run_id: &str) -> Value {
    env.loops(["--json", "workflows", "inspect", run_id])
        .run()
        .json()
}

/// A step that sleeps, then writes `marker`: if the marker appears, the
/// step outlived its cancel.
fn slow_marker_step(marker: &Path) -> Value {
    shell_step(
        "slow",
        &format!("sleep 3; touch {}", marker.display()),
        &["first"],
    )
}

#[test]
fn cancel_from_another_process_stops_the_running_step() {
    let env = TestEnv::new();
    let marker = env.home().join("late-side-effect");
    create_workflow(
        &env,
        &json!({
            "name": "slow",
            "steps": [exec_step("first", "true", &[]), slow_marker_step(&marker), exec_step("after", "true", &["slow"])],
        }),
    );
    let child = env.spawn(&["workflows", "run", "slow"]);
    let (run_id, pid) = running_step(&env, "slow");
    env.loops(["workflows", "cancel", &run_id])
        .stdout(&format!("{run_id} cancelled\n"))
        .run();
    let out = finish(child, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&format!("{run_id} failed\n")),
        "{stdout}"
    );
    // The step's process group is gone, so the marker can never appear.
    wait_dead(pid);
    assert!(!marker.exists(), "the cancelled step ran to its end");

    let run = inspect(&env, &run_id);
    assert_eq!(run["workflowRun"]["status"], "cancelled");
    assert_eq!(run["workflowRun"]["error"], "cancelled by user");
    let statuses: Vec<&str> = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["succeeded", "cancelled", "cancelled"]);
    // Cancelling a finished run changes nothing.
    env.loops(["workflows", "cancel", &run_id, "--reason", "again"])
        .stdout(&format!("{run_id} cancelled\n"))
        .run();
    assert_eq!(
        inspect(&env, &run_id)["workflowRun"]["error"],
        "cancelled by user"
    );
}

#[test]
fn sigint_cancels_the_run_and_kills_the_step() {
    let env = TestEnv::new();
    let marker = env.home().join("late-side-effect");
    create_workflow(
        &env,
        &json!({
            "name": "slow",
            "steps": [exec_step("first", "true", &[]), slow_marker_step(&marker)],
        }),
    );
    let child = env.spawn(&["workflows", "run", "slow"]);
    let (run_id, pid) = running_step(&env, "slow");
    assert!(kill(&["-INT", &child.id().to_string()]));
    let out = finish(child, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error: workflow run interrupted (cancelled by SIGINT)"),
        "{stderr}"
    );
    wait_dead(pid);
    assert!(!marker.exists(), "the interrupted step ran to its end");
    let run = inspect(&env, &run_id);
    assert_eq!(run["workflowRun"]["status"], "cancelled");
    assert_eq!(run["steps"][1]["status"], "cancelled");
}

#[test]
fn recover_after_the_runner_died_then_resume_from_the_first_unfinished_step() {
    let env = TestEnv::new();
    let release = env.home().join("release");
    let count = env.home().join("first-ran");
    create_workflow(
        &env,
        &json!({
            "name": "resumable",
            "steps": [
                shell_step("first", &format!("echo x >> {}", count.display()), &[]),
                // Blocks until `release` exists, so the first run hangs here.
                shell_step(
                    "wait",
                    &format!("while [ ! -e {} ]; do sleep 0.05; done", release.display()),
                    &["first"],
                ),
                exec_step("last", "true", &["wait"]),
            ],
        }),
    );
    let mut child = env.spawn(&["workflows", "run", "resumable"]);
    let (run_id, pid) = running_step(&env, "wait");
    // Kill the runner for real: nothing gets to record anything.
    assert!(kill(&["-9", &child.id().to_string()]));
    child.wait().unwrap();
    assert_eq!(inspect(&env, &run_id)["workflowRun"]["status"], "running");

    // The step's process outlived its runner, so recovery must refuse.
    env.loops(["workflows", "recover", &run_id])
        .code(1)
        .stderr_has("still alive: wait pid=")
        .run();

    assert!(kill(&["-9", "--", &format!("-{pid}")]));
    // The orphan is reaped by init, which may take a moment.
    let recovered = wait_for("recover to succeed", Duration::from_secs(30), || {
        let ran = env.run(&["--json", "workflows", "recover", &run_id]);
        ran.status
            .success()
            .then(|| serde_json::from_slice::<Value>(&ran.stdout).unwrap())
    });
    assert_eq!(recovered["workflowRun"]["status"], "running");
    let run = inspect(&env, &run_id);
    // The reset steps are step-run objects, as `inspect` prints them (and
    // as the original returns them), not ids.
    assert_eq!(recovered["recoveredSteps"], json!([run["steps"][1]]));
    assert_eq!(recovered["recoveredSteps"][0]["stepId"], "wait");
    assert_eq!(run["steps"][1]["status"], "pending");
    assert_eq!(run["steps"][1]["error"], "manual recovery");
    assert_eq!(
        run["events"].as_array().unwrap().last().unwrap()["eventType"],
        "recovered"
    );
    // A second recover finds nothing to reset.
    env.loops(["workflows", "recover", &run_id])
        .stdout(&format!("{run_id} recovered=0\n"))
        .run();

    std::fs::write(&release, "").unwrap();
    let ran = env
        .loops(["workflows", "run", "resumable", "--resume", &run_id])
        .run();
    assert!(
        ran.stdout.starts_with(&format!("{run_id} succeeded\n")),
        "{}",
        ran.stdout
    );
    // The first step ran once: the resume started at the first unfinished step.
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "x\n");
    let run = inspect(&env, &run_id);
    assert_eq!(run["workflowRun"]["status"], "succeeded");
    let starts = run["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["eventType"] == "step_started" && e["stepId"] == "first")
        .count();
    assert_eq!(starts, 1);

    // A run of another workflow cannot be resumed under this one.
    create_workflow(
        &env,
        &json!({"name": "other", "steps": [exec_step("a", "true", &[])]}),
    );
    env.loops(["workflows", "run", "other", "--resume", &run_id])
        .code(1)
        .stderr_has(&format!(
            "error: workflow run {run_id} is a run of resumable"
        ))
        .run();
}
