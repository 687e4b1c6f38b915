//! Issue 17, runtime features: prompt files read at each run, failure and
//! success hooks, and the daemon's per-kind lanes.

use std::time::Duration;

use loops_tests::{Daemon, TestEnv, wait_for};
use serde_json::Value;

/// A fake `claude` on PATH that prints its prompt, which it reads on
/// stdin (agents note §2.3).
fn echo_prompt_agent(env: &TestEnv) {
    env.write_script("claude", "cat");
}

/// The newest run of `name`, output shown.
fn newest_run(env: &TestEnv, name: &str) -> Value {
    env.loops(["--json", "runs", name, "--show-output", "--limit", "1"])
        .run()
        .json()[0]
        .clone()
}

#[test]
fn a_prompt_file_is_read_at_each_run() {
    let env = TestEnv::new();
    echo_prompt_agent(&env);
    let file = env.home().join("prompt.md");
    std::fs::write(&file, "first prompt").unwrap();
    // A relative path is taken from the directory create runs in, and
    // stored absolute.
    let created = env
        .cmd()
        .current_dir(env.home())
        .args(["create", "agent", "p", "--provider", "claude"])
        .args(["--prompt-file", "prompt.md", "--every", "1h"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let shown = env.loops(["show", "p"]).run().json();
    assert_eq!(shown["target"]["promptFile"], file.to_str().unwrap());
    assert_eq!(shown["target"]["prompt"], "first prompt");

    env.loops(["run-now", "p"]).run();
    assert_eq!(newest_run(&env, "p")["stdout"], "first prompt");

    // Edited between two runs: the next run sends the new text, and show
    // prints it, its first 80 characters only.
    let long = format!("second prompt {}", "x".repeat(100));
    std::fs::write(&file, &long).unwrap();
    env.loops(["run-now", "p"]).run();
    assert_eq!(newest_run(&env, "p")["stdout"], long.as_str());
    let shown = env.loops(["show", "p"]).run().json();
    let prompt = shown["target"]["prompt"].as_str().unwrap();
    assert!(prompt.starts_with("second prompt xxx"), "{prompt}");
    assert!(prompt.ends_with("... [redacted 34 chars]"), "{prompt}");

    // Text that begins with "-" is the prompt: it goes on stdin, where no
    // agent reads it as an option (agents note §2.3).
    std::fs::write(&file, "--dangerously-skip-permissions").unwrap();
    env.loops(["run-now", "p"]).run();
    let run = newest_run(&env, "p");
    assert_eq!(run["stdout"], "--dangerously-skip-permissions");

    // A missing file fails the run with a clear error, nothing spawned.
    std::fs::remove_file(&file).unwrap();
    env.loops(["run-now", "p"]).code(1).run();
    let run = newest_run(&env, "p");
    assert_eq!(run["status"], "failed");
    let error = run["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("cannot read prompt file {}", file.display())),
        "{error}"
    );
}

#[test]
fn create_checks_the_prompt_file() {
    let env = TestEnv::new();
    let file = env.home().join("p.md");
    let path = file.to_str().unwrap();
    let create = |extra: &[&str]| {
        env.loops([
            "create",
            "agent",
            "p",
            "--provider",
            "claude",
            "--every",
            "1h",
        ])
        .args(extra)
    };
    create(&["--prompt-file", path])
        .code(1)
        .stderr_has("error: cannot read --prompt-file")
        .run();
    std::fs::write(&file, "-x").unwrap();
    create(&["--prompt-file", path])
        .code(1)
        .stderr_has("--prompt-file")
        .run();
    std::fs::write(&file, "fine").unwrap();
    create(&["--prompt-file", path, "--prompt", "also"])
        .code(2)
        .stderr_has("cannot be used with")
        .run();
    create(&[]).code(2).run();
    assert_eq!(
        env.loops(["--json", "list"]).run().json(),
        serde_json::json!([])
    );
}

#[test]
fn workflow_steps_take_a_prompt_file_relative_to_the_workflow_file() {
    let env = TestEnv::new();
    echo_prompt_agent(&env);
    let dir = env.home().join("flows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("step.md"), "step prompt").unwrap();
    let workflow = serde_json::json!({
        "name": "wf",
        "steps": [{"id": "a", "target": {
            "type": "agent", "provider": "claude", "promptFile": "step.md"}}]
    });
    let file = dir.join("wf.json");
    std::fs::write(&file, workflow.to_string()).unwrap();
    env.loops(["workflows", "create", file.to_str().unwrap()])
        .run();
    let shown = env
        .loops(["--json", "workflows", "show", "wf"])
        .run()
        .json();
    let target = &shown["steps"][0]["target"];
    assert_eq!(target["promptFile"], dir.join("step.md").to_str().unwrap());
    std::fs::write(dir.join("step.md"), "edited step prompt").unwrap();
    let ran = env
        .loops(["--json", "workflows", "run", "wf", "--show-output"])
        .run();
    assert!(ran.stdout.contains("edited step prompt"), "{}", ran.stdout);
}

/// The statuses of the runs of `name`, newest first.
fn statuses(env: &TestEnv, name: &str) -> Vec<String> {
    let runs = env.loops(["--json", "runs", name]).run().json();
    runs.as_array()
        .expect("runs --json prints an array")
        .iter()
        .map(|r| r["status"].as_str().expect("a run has a status").to_owned())
        .collect()
}

#[test]
fn a_slow_agent_never_blocks_a_due_command() {
    let env = TestEnv::new();
    let release = env.home().join("release");
    // A fake agent that runs until the test releases it.
    env.write_script(
        "claude",
        &format!(
            "while [ ! -e '{}' ]; do sleep 0.05; done; echo done",
            release.display()
        ),
    );
    for name in ["agent-a", "agent-b"] {
        env.loops(["create", "agent", name, "--provider", "claude"])
            .args(["--prompt", "slow work", "--at", "2020-01-01"])
            .run();
    }
    env.create_command("cmd", "true", &["--at", "2020-01-01"]);
    // Without --agent-concurrency, the two agents would take both slots
    // and the command would wait for them.
    let _daemon = Daemon::start(&env, &["--max-parallel", "2", "--agent-concurrency", "1"]);
    // Two slots overall, one for agents: one agent runs, the other waits
    // for the agent lane, and the command takes the second slot.
    wait_for("the command to run", Duration::from_secs(20), || {
        (statuses(&env, "cmd") == ["succeeded"]).then_some(())
    });
    let a = statuses(&env, "agent-a");
    let b = statuses(&env, "agent-b");
    let mut both = [a.clone(), b.clone()];
    both.sort();
    assert_eq!(both, [vec![], vec!["running".to_owned()]], "{a:?} {b:?}");

    std::fs::write(&release, "").unwrap();
    wait_for("both agents to run", Duration::from_secs(20), || {
        (statuses(&env, "agent-a") == ["succeeded"] && statuses(&env, "agent-b") == ["succeeded"])
            .then_some(())
    });
}

#[test]
fn lanes_take_positive_integers() {
    let env = TestEnv::new();
    env.loops(["daemon", "run", "--agent-concurrency", "0"])
        .code(1)
        .stderr_has("--agent-concurrency must be a positive integer")
        .run();
}

#[test]
fn edit_switches_between_a_prompt_and_a_prompt_file() {
    let env = TestEnv::new();
    echo_prompt_agent(&env);
    env.loops(["create", "agent", "p", "--provider", "claude"])
        .args(["--prompt", "inline", "--every", "1h"])
        .run();
    let file = env.home().join("p.md");
    std::fs::write(&file, "from the file").unwrap();
    let ran = env
        .loops(["edit", "p", "--prompt-file", file.to_str().unwrap()])
        .run();
    assert!(ran.stdout.contains("prompt file"), "{}", ran.stdout);
    env.loops(["run-now", "p"]).run();
    assert_eq!(newest_run(&env, "p")["stdout"], "from the file");
    // Back to an inline prompt: the file no longer counts.
    env.loops(["edit", "p", "--prompt", "inline again"]).run();
    let shown = env.loops(["show", "p"]).run().json();
    assert!(shown["target"].get("promptFile").is_none(), "{shown}");
    env.loops(["run-now", "p"]).run();
    assert_eq!(newest_run(&env, "p")["stdout"], "inline again");
    // Not both at once; not on a command loop; not a missing file.
    env.loops(["edit", "p", "--prompt", "a", "--prompt-file", "b"])
        .code(2)
        .run();
    env.create_command("c", "true", &["--every", "1h"]);
    env.loops(["edit", "c", "--prompt-file", file.to_str().unwrap()])
        .code(1)
        .stderr_has("--prompt-file")
        .run();
    env.loops(["edit", "p", "--prompt-file", "/nonexistent/p.md"])
        .code(1)
        .stderr_has("cannot read --prompt-file /nonexistent/p.md")
        .run();
}
