//! Issue 25 §1: every file loops reads of a path the user gave (a prompt
//! file, a workflow file and its steps' prompt files, an import) is a
//! regular file read bounded. A prompt file that became a named pipe or a
//! link to `/dev/zero` after `create` fails the run at once with a clear
//! error; it never blocks a run, a command or the daemon, nor eats memory.
//!
//! Every command here that could block or read without end runs under
//! [`finish`], which kills it at a deadline or when it grows, so such a
//! regression fails the test instead of hanging it or the machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use loops_tests::{Daemon, Ran, TestEnv, wait_for};
use serde_json::{Value, json};

use crate::mcp::{block_on, mutable};

/// How long a command that must end at once may take before it counts as
/// blocked (far above what any of them needs).
const DEADLINE: Duration = Duration::from_secs(30);

/// The memory a command may grow to before it counts as reading without
/// end (a `loops` command needs a few tens of MiB).
const MAX_RSS_KIB: u64 = 512 * 1024;

/// A fake `claude` on PATH that prints its prompt, which it reads on
/// stdin (agents note §2.3).
fn echo_prompt_agent(env: &TestEnv) {
    env.write_script("claude", "cat");
}

/// Replaces whatever is at `path` with a named pipe nobody writes to.
fn make_fifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let made = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Replaces whatever is at `path` with a link to `/dev/zero`.
fn link_to_dev_zero(path: &Path) {
    let _ = std::fs::remove_file(path);
    std::os::unix::fs::symlink("/dev/zero", path).expect("a link");
}

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `loops <args>` to its end; kills it and fails the test when it
/// has not ended by [`DEADLINE`] (it blocked) or grew past
/// [`MAX_RSS_KIB`] (it reads without end).
fn finish(env: &TestEnv, args: &[&str]) -> Ran {
    let mut child = env.spawn(args);
    let deadline = Instant::now() + DEADLINE;
    loop {
        if child.try_wait().expect("a wait").is_some() {
            return child.wait_with_output().expect("its output").into();
        }
        let rss = rss_kib(child.id()).unwrap_or(0);
        let problem = if rss > MAX_RSS_KIB {
            Some(format!("grew to {rss} KiB"))
        } else if Instant::now() > deadline {
            Some(format!("did not end within {DEADLINE:?}"))
        } else {
            None
        };
        if let Some(problem) = problem {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loops {args:?} {problem}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The newest run of `name`, output shown.
fn newest_run(env: &TestEnv, name: &str) -> Value {
    env.loops(["--json", "runs", name, "--show-output", "--limit", "1"])
        .run()
        .json()[0]
        .clone()
}

/// An agent loop `p` on `claude` whose prompt is read from a file in the
/// home directory, which holds `good prompt` at create; its path.
fn prompt_file_loop(env: &TestEnv, schedule: &[&str]) -> PathBuf {
    echo_prompt_agent(env);
    let file = env.home().join("prompt.md");
    std::fs::write(&file, "good prompt").expect("a prompt file");
    env.loops(["create", "agent", "p", "--provider", "claude"])
        .args(["--prompt-file", file.to_str().expect("a UTF-8 path")])
        .args(schedule)
        .run();
    file
}

/// `run-now p` ends at once with a failed run whose error is `expected`.
fn run_now_fails(env: &TestEnv, expected: &str) {
    let ran = finish(env, &["run-now", "p"]);
    assert_eq!(ran.code, 1, "{ran:?}");
    let run = newest_run(env, "p");
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"], expected, "{run}");
    assert!(run["stdout"].as_str().unwrap_or("").is_empty(), "{run}");
}

#[test]
fn run_now_fails_at_once_on_a_prompt_file_that_became_a_pipe_or_a_device() {
    let env = TestEnv::new();
    let file = prompt_file_loop(&env, &["--every", "1h"]);
    let path = file.display();
    make_fifo(&file);
    run_now_fails(
        &env,
        &format!(
            "prompt file {path} is a named pipe (FIFO), not a regular file; restore the file, \
             or edit the loop to use --prompt"
        ),
    );
    link_to_dev_zero(&file);
    run_now_fails(
        &env,
        &format!(
            "prompt file {path} is a character device, not a regular file; restore the file, \
             or edit the loop to use --prompt"
        ),
    );
    let _ = std::fs::remove_file(&file);
    std::fs::write(&file, "x".repeat(1024 * 1024 + 1)).unwrap();
    run_now_fails(
        &env,
        &format!(
            "prompt file {path} is larger than 1 MiB, the most loops reads; shorten it, or \
             edit the loop to use --prompt"
        ),
    );
    // `show` reads the file as a run does, and shows the stored prompt
    // rather than wait on a pipe.
    make_fifo(&file);
    let shown = finish(&env, &["show", "p"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert_eq!(shown.json()["target"]["prompt"], "good prompt");
    // Restored, the next run sends it.
    let _ = std::fs::remove_file(&file);
    std::fs::write(&file, "good prompt").unwrap();
    env.loops(["run-now", "p"]).run();
    assert_eq!(newest_run(&env, "p")["stdout"], "good prompt");
}

#[test]
fn the_daemon_fails_the_run_of_a_piped_prompt_file_and_goes_on() {
    let env = TestEnv::new();
    let file = prompt_file_loop(&env, &["--every", "1s"]);
    make_fifo(&file);
    let _daemon = Daemon::start(&env, &[]);
    let failed = wait_for("a failed run", DEADLINE, || {
        let run = newest_run(&env, "p");
        (run["status"] == "failed").then_some(run)
    });
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!(
            "prompt file {} is a named pipe (FIFO), not a regular file",
            file.display()
        )),
        "{failed}"
    );
    // Later slots still run: the loop was not left stuck.
    let _ = std::fs::remove_file(&file);
    std::fs::write(&file, "good prompt").unwrap();
    let succeeded = wait_for("a later slot to run", DEADLINE, || {
        let run = newest_run(&env, "p");
        (run["status"] == "succeeded").then_some(run)
    });
    assert_eq!(succeeded["stdout"], "good prompt");
}

/// A workflow file in `dir` whose one agent step reads `prompt.md`.
fn workflow_with_prompt_file(dir: &Path) -> PathBuf {
    let workflow = json!({
        "name": "wf",
        "steps": [{"id": "a", "target": {
            "type": "agent", "provider": "claude", "promptFile": "prompt.md"}}]
    });
    let file = dir.join("wf.json");
    std::fs::write(&file, workflow.to_string()).expect("a workflow file");
    file
}

#[test]
fn workflows_refuse_a_prompt_file_that_is_a_pipe_or_a_device() {
    let env = TestEnv::new();
    echo_prompt_agent(&env);
    let dir = env.home().join("flows");
    std::fs::create_dir_all(&dir).unwrap();
    let wf = workflow_with_prompt_file(&dir);
    let wf = wf.to_str().unwrap();
    let prompt = dir.join("prompt.md");
    for (replace, kind) in [
        (make_fifo as fn(&Path), "a named pipe (FIFO)"),
        (link_to_dev_zero, "a character device"),
    ] {
        replace(&prompt);
        for command in ["validate", "create"] {
            let ran = finish(&env, &["workflows", command, wf]);
            assert_eq!(ran.code, 1, "{ran:?}");
            assert_eq!(
                ran.stderr.lines().next().unwrap_or(""),
                format!(
                    "error: steps[0].target.promptFile {} is {kind}, not a regular file; point \
                     it at a regular file that holds the prompt",
                    prompt.display()
                ),
                "{ran:?}"
            );
        }
    }

    // Stored, then the file became a pipe: the run fails, at once.
    let _ = std::fs::remove_file(&prompt);
    std::fs::write(&prompt, "step prompt").unwrap();
    env.loops(["workflows", "create", wf]).run();
    make_fifo(&prompt);
    let ran = finish(&env, &["workflows", "run", "wf"]);
    assert_ne!(ran.code, 0, "{ran:?}");
    let all = format!("{}{}", ran.stdout, ran.stderr);
    assert!(
        all.contains(&format!(
            "prompt file {} is a named pipe (FIFO), not a regular file; restore the file, or \
             create the workflow again with another prompt or promptFile for step a",
            prompt.display()
        )),
        "{ran:?}"
    );

    // The workflow file itself.
    make_fifo(&dir.join("wf.json"));
    let ran = finish(&env, &["workflows", "validate", wf]);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert_eq!(
        ran.stderr.trim_end(),
        format!(
            "error: workflow file {wf} is a named pipe (FIFO), not a regular file; write the \
             workflow to a regular file first"
        )
    );
}

#[test]
fn create_edit_and_import_refuse_a_pipe() {
    let env = TestEnv::new();
    let fifo = env.home().join("fifo");
    make_fifo(&fifo);
    let path = fifo.to_str().unwrap();
    let ran = finish(
        &env,
        &[
            "create",
            "agent",
            "p",
            "--provider",
            "claude",
            "--every",
            "1h",
            "--prompt-file",
            path,
        ],
    );
    assert_eq!(ran.code, 1, "{ran:?}");
    assert_eq!(
        ran.stderr.trim_end(),
        format!(
            "error: --prompt-file {path} is a named pipe (FIFO), not a regular file; point it \
             at a regular file that holds the prompt"
        )
    );
    env.loops(["create", "agent", "p", "--provider", "claude"])
        .args(["--prompt", "inline", "--every", "1h"])
        .run();
    let ran = finish(&env, &["edit", "p", "--prompt-file", path]);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr
            .contains(&format!("--prompt-file {path} is a named pipe (FIFO)")),
        "{ran:?}"
    );
    let ran = finish(&env, &["import", path]);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert_eq!(
        ran.stderr.trim_end(),
        format!(
            "error: import file {path} is a named pipe (FIFO), not a regular file; to import \
             from a pipe, run `loops import -` with the document on stdin"
        )
    );
}

#[test]
fn mcp_validate_refuses_a_piped_prompt_file() {
    let env = TestEnv::new();
    let fifo = env.home().join("prompt.md");
    make_fifo(&fifo);
    let workflow = json!({
        "name": "agentic",
        "steps": [{"id": "ask", "target": {
            "type": "agent", "provider": "claude", "promptFile": fifo.to_str().unwrap()}}],
    });
    block_on(async {
        let mcp = mutable(&env).await;
        let error = mcp
            .err("loops_workflow_validate", json!({ "workflow": workflow }))
            .await;
        assert!(
            error.contains(&format!(
                "promptFile {} is a named pipe (FIFO), not a regular file",
                fifo.display()
            )),
            "{error}"
        );
        mcp.close().await;
    });
}
