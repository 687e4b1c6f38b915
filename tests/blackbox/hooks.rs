//! Issue 17, failure and success hooks: what a hook reads on stdin and in
//! its environment, where it runs, that its own failure changes nothing
//! about the run, and the daemon's default `--on-failure`.

use std::path::Path;
use std::time::Duration;

use loops_tests::{Daemon, TestEnv, wait_for};
use serde_json::Value;

/// A hook that saves its stdin and its `LOOPS_*` variables (and whether it
/// got a credential) in its working directory.
const SAVE: &str = "cat > stdin.json; \
    env | grep -E '^(LOOPS_(LOOP|RUN|SCHEDULED)|ANTHROPIC_API_KEY)' | sort > env.txt";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn workdir(env: &TestEnv) -> std::path::PathBuf {
    let dir = env.home().join("work");
    std::fs::create_dir_all(&dir).expect("a work directory");
    dir
}

#[test]
fn a_failure_hook_reads_the_run_as_runs_prints_it() {
    let env = TestEnv::new();
    let dir = workdir(&env);
    env.loops(["create", "command", "failing", "--every", "1h"])
        .args(["--cmd", "echo out; echo err >&2; exit 3"])
        .args(["--cwd", dir.to_str().unwrap(), "--on-failure", SAVE])
        .run();
    // The account-stripped credential does not reach the hook.
    env.loops(["run-now", "failing"])
        .env("ANTHROPIC_API_KEY", Some("sk-secret"))
        .code(1)
        .run();

    let run = env.loops(["--json", "runs", "failing"]).run().json()[0].clone();
    assert_eq!(run["status"], "failed");
    // Exactly what `runs --json` prints, output redacted.
    let stdin: Value = serde_json::from_str(&read(&dir.join("stdin.json"))).unwrap();
    assert_eq!(stdin, run);
    assert_eq!(stdin["stdout"], "[redacted 4 chars]");

    let shown = env.loops(["--json", "show", "failing"]).run().json();
    let expected = format!(
        "LOOPS_LOOP_ID={}\nLOOPS_LOOP_NAME=failing\nLOOPS_RUN_ID={}\nLOOPS_RUN_STATUS=failed\n\
         LOOPS_SCHEDULED_FOR={}\n",
        shown["id"].as_str().unwrap(),
        run["id"].as_str().unwrap(),
        run["scheduledFor"].as_str().unwrap(),
    );
    assert_eq!(read(&dir.join("env.txt")), expected);
}

#[test]
fn a_success_hook_may_see_the_output() {
    let env = TestEnv::new();
    let dir = workdir(&env);
    env.loops(["create", "command", "fine", "--every", "1h"])
        .args(["--cmd", "echo hello", "--cwd", dir.to_str().unwrap()])
        .args(["--on-success", SAVE, "--hook-show-output"])
        .run();
    let shown = env.loops(["--json", "show", "fine"]).run().json();
    assert_eq!(shown["onSuccess"], SAVE);
    assert_eq!(shown["hookShowOutput"], true);
    assert!(shown.get("onFailure").is_none(), "{shown}");

    env.loops(["run-now", "fine"]).run();
    let run = env
        .loops(["--json", "runs", "fine", "--show-output"])
        .run()
        .json()[0]
        .clone();
    let stdin: Value = serde_json::from_str(&read(&dir.join("stdin.json"))).unwrap();
    assert_eq!(stdin, run);
    assert_eq!(stdin["stdout"], "hello\n");
    assert!(read(&dir.join("env.txt")).contains("LOOPS_RUN_STATUS=succeeded\n"));

    // No failure hook: a failing run starts nothing.
    env.loops(["edit", "fine", "--cmd", "exit 1", "--on-success", ""])
        .run();
    std::fs::remove_file(dir.join("stdin.json")).unwrap();
    env.loops(["run-now", "fine"]).code(1).run();
    assert!(!dir.join("stdin.json").exists());
    let shown = env.loops(["--json", "show", "fine"]).run().json();
    assert!(shown.get("onSuccess").is_none(), "{shown}");
}

#[test]
fn a_failing_or_hanging_hook_changes_nothing() {
    let env = TestEnv::new();
    env.create_command("bad-hook", "true", &["--every", "1h"]);
    env.loops([
        "edit",
        "bad-hook",
        "--on-success",
        "echo no route >&2; exit 7",
    ])
    .run();
    env.loops(["run-now", "bad-hook"])
        .stderr_has("on-success hook of loop bad-hook")
        .stderr_has("failed: exited with code 7: no route")
        .run();

    env.create_command("slow-hook", "exit 2", &["--at", "2020-01-01"]);
    env.loops(["edit", "slow-hook", "--on-failure", "sleep 30"])
        .run();
    env.loops(["tick"])
        .env("LOOPS_HOOK_TIMEOUT_MS", Some("300"))
        .stderr_has("on-failure hook of loop slow-hook")
        .stderr_has("failed: timed out after 300ms")
        .run();

    for (name, status) in [("bad-hook", "succeeded"), ("slow-hook", "failed")] {
        let runs = env.loops(["--json", "runs", name]).run().json();
        assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
        assert_eq!(runs[0]["status"], status);
    }
    let empty = env.loops(["create", "command", "x", "--cmd", "true", "--every", "1h"]);
    empty
        .args(["--on-failure", " "])
        .code(1)
        .stderr_has("--on-failure must be a shell command")
        .run();
}

#[test]
fn the_daemon_default_runs_for_loops_without_their_own() {
    let env = TestEnv::new();
    let home = env.home();
    let default_log = home.join("default.txt");
    let own = home.join("own.txt");
    env.create_command("plain", "exit 1", &["--at", "2020-01-01"]);
    env.create_command("own", "exit 1", &["--at", "2020-01-01"]);
    env.create_command("ok", "true", &["--at", "2020-01-01"]);
    env.loops(["edit", "own", "--on-failure"])
        .args([format!("echo \"$LOOPS_LOOP_NAME\" > '{}'", own.display())])
        .run();
    let default = format!("echo \"$LOOPS_LOOP_NAME\" >> '{}'", default_log.display());
    let _daemon = Daemon::start(&env, &["--on-failure", &default]);
    wait_for("both hooks", Duration::from_secs(20), || {
        (own.exists() && default_log.exists()).then_some(())
    });
    wait_for("the successful run", Duration::from_secs(20), || {
        let runs = env.loops(["--json", "runs", "ok"]).run().json();
        (runs[0]["status"] == "succeeded").then_some(())
    });
    assert_eq!(read(&own), "own\n");
    // Only the loop without a hook of its own, and not the success.
    assert_eq!(read(&default_log), "plain\n");
}
