//! `loops workflows run` with real processes and what it records: step
//! order, events, failures, redaction of step output, `inspect`, and a
//! workflow loop run by `tick` (SPEC §6.3, §6.6, §6.8, §7.4; §10 items
//! 73–78 and 86; §9 items 26 and 38).

use loops_tests::{TestEnv, snapshot_settings, sqlite_only, wait_for};
use serde_json::{Value, json};

use crate::workflows::{create_workflow, exec_step, shell_step};

fn event_types(env: &TestEnv, run_id: &str) -> Vec<(String, Option<String>)> {
    let events = env
        .loops(["--json", "workflows", "events", run_id])
        .run()
        .json();
    events
        .as_array()
        .expect("events --json prints an array")
        .iter()
        .map(|e| {
            (
                e["eventType"]
                    .as_str()
                    .expect("every event has a type")
                    .to_owned(),
                e["stepId"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn run_executes_steps_in_dependency_order_and_records_events() {
    let env = TestEnv::new();
    let log = env.home().join("order.log");
    let log = log.display();
    let workflow = json!({
        "name": "ordered",
        "steps": [
            shell_step("c", &format!("echo c >> {log}"), &["b"]),
            shell_step("a", &format!("echo a >> {log}"), &[]),
            shell_step("b", &format!("echo b >> {log}"), &["a"]),
        ],
    });
    create_workflow(&env, &workflow);
    let ran = env.loops(["workflows", "run", "ordered"]).run();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    let (run_id, status) = lines[0].split_once(' ').unwrap();
    assert_eq!(status, "succeeded");
    // Step lines are in declaration order, with their sequence numbers.
    assert_eq!(
        &lines[1..],
        [
            "  00  succeeded   c",
            "  01  succeeded   a",
            "  02  succeeded   b"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(env.home().join("order.log")).unwrap(),
        "a\nb\nc\n"
    );
    // Progress went to stderr as each step started and finished.
    assert!(
        ran.stderr.contains("  01  running     a\n"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("  00  succeeded   c\n"),
        "{}",
        ran.stderr
    );

    let step = |t: &str, s: &str| (t.to_owned(), Some(s.to_owned()));
    assert_eq!(
        event_types(&env, run_id),
        [
            ("created".to_owned(), None),
            step("step_started", "a"),
            step("step_succeeded", "a"),
            step("step_started", "b"),
            step("step_succeeded", "b"),
            step("step_started", "c"),
            step("step_succeeded", "c"),
            ("succeeded".to_owned(), None),
        ]
    );
    let events = env.loops(["workflows", "events", run_id]).run();
    // A header comes first (issue 16), without a rule when piped (issue
    // 28).
    let first = events.stdout.lines().nth(1).unwrap();
    assert_eq!(
        first.split_whitespace().take(3).collect::<Vec<_>>(),
        ["001", "created", "-"],
        "{first}"
    );
    // In local time (issue 28).
    assert!(!first.ends_with('Z'), "{first}");
    assert_eq!(
        env.loops(["workflows", "events", run_id, "--limit", "2"])
            .run()
            .stdout
            .lines()
            .count(),
        3
    );

    let runs = env.loops(["workflows", "runs", "ordered"]).run();
    assert!(
        runs.stdout
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with(&format!("{run_id}  succeeded  ordered   now ("))),
        "{}",
        runs.stdout
    );
    let runs = env.loops(["--json", "workflows", "runs"]).run().json();
    assert_eq!(runs[0]["id"], run_id);
    assert_eq!(runs[0]["status"], "succeeded");
}

#[test]
fn a_failing_step_fails_the_run_skips_its_dependents_and_exits_1() {
    let env = TestEnv::new();
    let workflow = json!({
        "name": "fragile",
        "steps": [
            shell_step("build", "exit 3", &[]),
            exec_step("test", "true", &["build"]),
            exec_step("lint", "true", &[]),
        ],
    });
    create_workflow(&env, &workflow);
    let ran = env.loops(["workflows", "run", "fragile"]).code(1).run();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(lines[0].ends_with(" failed"), "{}", ran.stdout);
    // SPEC §6.3: the failure stops the walk and skips every open step with
    // the run's reason.
    assert_eq!(
        &lines[1..],
        [
            "  error: step build failed: process exited with code 3",
            "  00  failed      build  process exited with code 3",
            "  01  skipped     test   step build failed: process exited with code 3",
            "  02  skipped     lint   step build failed: process exited with code 3",
        ],
        "{}",
        ran.stdout
    );

    let out = env
        .loops(["--json", "workflows", "run", "fragile"])
        .code(1)
        .run()
        .json();
    assert_eq!(out["result"]["status"], "failed");
    assert_eq!(out["result"]["exitCode"], 1);
    assert_eq!(out["workflowRun"]["status"], "failed");
    assert_eq!(out["steps"][0]["status"], "failed");
    assert_eq!(out["steps"][0]["exitCode"], 3);
    assert_eq!(out["steps"][1]["status"], "skipped");
}

#[test]
fn output_is_redacted_unless_shown() {
    let env = TestEnv::new();
    let workflow = json!({
        "name": "chatty",
        "steps": [
            shell_step("say", "printf secret-output; printf oops >&2", &[]),
            {
                "id": "env",
                "target": {
                    "type": "command", "command": "true",
                    "env": {"TOKEN": "hunter2"},
                },
            },
        ],
    });
    create_workflow(&env, &workflow);
    for args in [
        vec!["--json", "workflows", "show", "chatty"],
        vec!["--json", "workflows", "list"],
    ] {
        let ran = env.loops(&args).run();
        assert!(!ran.stdout.contains("hunter2"), "{args:?}: {}", ran.stdout);
        assert!(ran.stdout.contains("[redacted]"), "{args:?}");
    }

    let ran = env.loops(["--json", "workflows", "run", "chatty"]).run();
    assert!(!ran.stdout.contains("secret-output"), "{}", ran.stdout);
    let out = ran.json();
    assert_eq!(out["steps"][0]["stdout"], "[redacted 13 chars]");
    assert_eq!(out["steps"][0]["stderr"], "[redacted 4 chars]");
    assert!(out["steps"][1].get("stdout").is_none());
    let summary = out["result"]["stdout"].as_str().unwrap();
    assert!(summary.starts_with("[redacted "), "{summary}");
    let run_id = out["workflowRun"]["id"].as_str().unwrap();

    let inspected = env.loops(["--json", "workflows", "inspect", run_id]).run();
    assert!(!inspected.stdout.contains("secret-output"));
    assert_eq!(
        inspected.json()["steps"][0]["stdout"],
        "[redacted 13 chars]"
    );
    let human = env.loops(["workflows", "inspect", run_id]).run();
    assert!(!human.stdout.contains("secret-output"), "{}", human.stdout);

    let shown = env
        .loops(["--json", "workflows", "inspect", run_id, "--show-output"])
        .run()
        .json();
    assert_eq!(shown["steps"][0]["stdout"], "secret-output");
    let shown = env
        .loops(["--json", "workflows", "run", "chatty", "--show-output"])
        .run()
        .json();
    assert_eq!(shown["steps"][0]["stdout"], "secret-output");
    let summary: Value = serde_json::from_str(shown["result"]["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(summary["steps"][0]["stdout"], "secret-output");

    let ran = env
        .loops(["workflows", "run", "chatty", "--show-output"])
        .run();
    assert!(
        ran.stdout.contains(
            "  00  succeeded   say\n  stdout:\n    secret-output\n  stderr:\n    oops\n  01  succeeded   env\n"
        ),
        "{}",
        ran.stdout
    );
}

#[test]
fn inspect_prints_the_run_its_steps_and_its_event_count() {
    let env = TestEnv::new();
    let workflow = json!({
        "name": "deploy",
        "steps": [
            shell_step("build", "exit 3", &[]),
            exec_step("test", "true", &["build"]),
        ],
    });
    create_workflow(&env, &workflow);
    let out = env
        .loops(["--json", "workflows", "run", "deploy"])
        .code(1)
        .run()
        .json();
    let run_id = out["workflowRun"]["id"].as_str().unwrap();
    let ran = env.loops(["workflows", "inspect", run_id]).run();
    let json = env
        .loops(["--json", "workflows", "inspect", run_id])
        .run()
        .json();
    assert_eq!(json["workflowRun"]["id"], run_id);
    assert_eq!(json["steps"].as_array().map(Vec::len), Some(2));
    let events = json["events"].as_array().unwrap().len();
    assert!(ran.stdout.ends_with(&format!("  events={events}\n")));
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("inspect_human", ran.stdout);
}

#[test]
fn a_workflow_loop_runs_on_tick() {
    let env = TestEnv::new();
    let marker = env.home().join("ran");
    let workflow = json!({
        "name": "nightly-build",
        "steps": [shell_step("touch", &format!("touch {}", marker.display()), &[])],
    });
    let workflow_id = create_workflow(&env, &workflow);
    let ran = env
        .loops([
            "create",
            "workflow",
            "nightly",
            "--workflow",
            "nightly-build",
            "--at",
            "2020-01-01T00:00:00Z",
        ])
        .env("TZ", Some("Europe/Berlin"))
        .run();
    let (head, tail) = ran.stdout.split_once(" (nightly) ").unwrap();
    let loop_id = head.strip_prefix("created workflow loop ").unwrap();
    assert_eq!(
        tail,
        "workflow=nightly-build next=2020-01-01T01:00:00+01:00\n"
    );
    let lp = env.loops(["show", loop_id]).run().json();
    assert_eq!(
        lp["target"],
        json!({"type": "workflow", "workflowId": workflow_id})
    );

    env.loops(["tick"])
        .stdout("completed=1 skipped=0 recovered=0 expired=0\n")
        .run();
    assert!(marker.exists());
    let run = &env.loops(["--json", "runs", loop_id]).run().json()[0];
    assert_eq!(run["status"], "succeeded");
    let wf_runs = env.loops(["--json", "workflows", "runs"]).run().json();
    assert_eq!(wf_runs[0]["status"], "succeeded");
    assert_eq!(wf_runs[0]["loopId"], loop_id);
    assert_eq!(wf_runs[0]["loopRunId"], run["id"]);
}

#[test]
fn agent_steps_run_the_provider_cli_with_the_prompt_on_stdin() {
    let env = TestEnv::new();
    // A fake `claude` on PATH that prints its step id and its stdin, the
    // prompt (agents note §2.3; 0.3.1 put it last on argv).
    env.write_script("claude", r#"printf '%s|' "$LOOPS_WORKFLOW_STEP_ID"; cat"#);
    let prompt = format!("review {}", "the change ".repeat(10));
    create_workflow(
        &env,
        &json!({
            "name": "review",
            "steps": [{"id": "ask", "target": {"type": "agent", "provider": "claude", "prompt": prompt}}],
        }),
    );
    let shown = env.loops(["workflows", "show", "review"]).run().json();
    let stored = shown["steps"][0]["target"]["prompt"].as_str().unwrap();
    assert!(
        stored.ends_with(&format!("... [redacted {} chars]", prompt.len() - 80)),
        "{stored}"
    );
    let out = env
        .loops(["--json", "workflows", "run", "review", "--show-output"])
        .run()
        .json();
    assert_eq!(out["steps"][0]["status"], "succeeded");
    assert_eq!(out["steps"][0]["stdout"], format!("ask|{prompt}"));
}

#[test]
fn a_step_runs_only_after_its_start_is_committed() {
    // A step whose start were still uncommitted when its process ran could
    // run twice after a crash of the runner: a resume would not know it
    // had started. Each step here asks another `loops` process (another
    // connection) what the database says of it while it runs.
    let env = TestEnv::new();
    let bin = loops_tests::loops_bin();
    let seen = env.home().join("seen");
    let check = |id: &str| {
        let mut step = shell_step(
            id,
            &format!(
                "\"{}\" --json workflows inspect \"$LOOPS_WORKFLOW_RUN_ID\" > \"{}/$LOOPS_WORKFLOW_STEP_ID.json\"",
                bin.display(),
                seen.display()
            ),
            &[],
        );
        // A step never inherits loops' database URL (issue 25 item 2), so
        // on PostgreSQL the step is given it on purpose.
        if let Some(url) = env.database_url() {
            step["target"]["env"] = json!({"LOOPS_DATABASE_URL": url});
        }
        step
    };
    std::fs::create_dir_all(&seen).unwrap();
    // Many steps start in one batch, so a spawn before the batch's commit
    // would leave the first steps running long before their starts land.
    let mut workflow = json!({
        "name": "committed",
        "steps": (0..64).map(|i| check(&format!("s{i}"))).collect::<Vec<_>>(),
    });
    workflow["maxParallel"] = json!(64);
    create_workflow(&env, &workflow);
    env.loops(["workflows", "run", "committed"]).run();
    for i in 0..64 {
        let step = format!("s{i}");
        let text = std::fs::read_to_string(seen.join(format!("{step}.json"))).unwrap();
        let inspected: serde_json::Value = serde_json::from_str(&text).unwrap();
        let steps = inspected["steps"]
            .as_array()
            .expect("inspect lists the steps");
        let own = steps
            .iter()
            .find(|s| s["stepId"] == step.as_str())
            .expect("the step's own row");
        assert_eq!(own["status"], "running", "{step} saw itself as {own}");
    }
}

/// Creates its file when dropped: lets a step that waits for it end even
/// when an assertion fails first.
struct Release(std::path::PathBuf);

impl Drop for Release {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, "");
    }
}

/// `child`'s stderr, line by line, as it comes, read on a thread.
fn stderr_lines(
    child: &mut std::process::Child,
) -> (
    std::sync::mpsc::Receiver<String>,
    std::thread::JoinHandle<()>,
) {
    let stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (rx, reader)
}

#[test]
fn progress_lines_show_while_a_later_step_still_runs() {
    // Progress is gathered and written out whenever the runner waits: the
    // first step's lines must reach stderr while the second step still
    // waits for a file that only this test creates.
    let env = TestEnv::new();
    let go = env.home().join("go");
    let workflow = json!({
        "name": "live",
        "steps": [
            exec_step("first", "true", &[]),
            shell_step(
                "second",
                &format!("while [ ! -e \"{}\" ]; do sleep 0.01; done", go.display()),
                &["first"],
            ),
        ],
    });
    create_workflow(&env, &workflow);
    let mut child = env.spawn(&["workflows", "run", "live"]);
    // Lets the second step end even when an assertion below fails.
    let _release = Release(go.clone());
    let (rx, reader) = stderr_lines(&mut child);
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !seen
        .iter()
        .any(|l: &String| l.contains("running") && l.contains("second"))
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("no progress while the second step ran; saw {seen:?}"),
        }
    }
    assert!(
        seen.iter()
            .any(|l| l.contains("succeeded") && l.contains("first")),
        "{seen:?}"
    );
    assert!(!go.exists());
    std::fs::write(&go, "").unwrap();
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
}

#[test]
fn a_write_that_must_be_retried_is_said_on_stderr_and_the_run_goes_on() {
    // Issue 26: the runner's `on_retry` reaches `workflows run`. A write
    // lock held by the test past the busy timeout fails the runner's
    // writes as a full disk would: a transient store error, retried until
    // it lands, said on stderr.
    sqlite_only!("holds SQLite's write lock to make the runner's writes fail for a while");
    let env = TestEnv::new();
    let started = env.home().join("started");
    let go = env.home().join("go");
    let workflow = json!({
        "name": "stalled",
        "steps": [
            shell_step(
                "a",
                &format!(
                    "touch \"{}\"; while [ ! -e \"{}\" ]; do sleep 0.01; done",
                    started.display(),
                    go.display()
                ),
                &[],
            ),
            exec_step("b", "true", &["a"]),
        ],
    });
    create_workflow(&env, &workflow);
    let mut child = env.spawn(&["workflows", "run", "stalled"]);
    // Lets step a end even when an assertion below fails.
    let _release = Release(go.clone());
    let (rx, reader) = stderr_lines(&mut child);
    let deadline = std::time::Duration::from_secs(30);
    wait_for("step a to start", deadline, || {
        started.exists().then_some(())
    });
    let lock = rusqlite::Connection::open(env.db_path()).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    std::fs::write(&go, "").unwrap();
    let mut seen: Vec<String> = Vec::new();
    let until = std::time::Instant::now() + deadline;
    let retry = loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with("warning: recording the workflow run failed") => {
                break line;
            }
            Ok(line) => seen.push(line),
            Err(_) => panic!("no retry said while the database was locked; saw {seen:?}"),
        }
    };
    lock.execute_batch("ROLLBACK").unwrap();
    assert!(
        retry.starts_with(
            "warning: recording the workflow run failed, retrying until it succeeds: "
        ) && retry.contains("locked"),
        "{retry}"
    );
    let out = child.wait_with_output().unwrap();
    reader.join().unwrap();
    // The run went on once the lock was gone, and nothing was lost.
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].ends_with(" succeeded"), "{stdout}");
    assert_eq!(&lines[1..], ["  00  succeeded   a", "  01  succeeded   b"]);
}
