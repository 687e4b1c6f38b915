//! Issue 27, "Failure classes" and "What each run did and cost", end to
//! end: a fake claude prints its JSON envelope, and what it said, cost and
//! failed as reaches `runs`, the loop's policy and its pause.

use loops_tests::TestEnv;

/// A fake claude that reads its prompt and prints `body` on stdout.
fn fake_claude(env: &TestEnv, body: &str) {
    env.write_script(
        "claude",
        &format!("cat > /dev/null\nprintf '%s\\n' '{body}'"),
    );
}

/// A claude envelope reporting `cost` dollars.
fn envelope(cost: f64) -> String {
    format!(
        r#"{{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"sess-42","total_cost_usd":{cost},"usage":{{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":2,"cache_creation_input_tokens":1}}}}"#
    )
}

#[test]
fn a_run_shows_what_the_agent_said_and_cost() {
    let env = TestEnv::new();
    fake_claude(&env, &envelope(0.25));
    env.loops(["create", "agent", "summer", "--provider", "claude"])
        .args(["--prompt", "sum up", "--every", "1h"])
        .run();
    env.loops(["run-now", "summer"]).run();
    let runs = env.loops(["--json", "runs", "summer"]).run().json();
    let run = &runs[0];
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["sessionId"], "sess-42");
    assert_eq!(run["costUsd"], 0.25);
    assert_eq!(run["usage"]["inputTokens"], 10);
    assert_eq!(run["usage"]["cacheWriteTokens"], 1);
    assert_eq!(run["isError"], false);
    // The final message is output: redacted unless shown.
    assert_eq!(run["result"], "[redacted 4 chars]");
    assert!(run.get("failureClass").is_none(), "{run}");
    // The human views say it too.
    let id = run["id"].as_str().unwrap();
    let one = env.loops(["runs", id]).run().stdout;
    assert!(one.contains("\nsession:   sess-42\n"), "{one}");
    assert!(
        one.contains("\ncost:      $0.25 (10 in, 5 out, 2 cache read, 1 cache write tokens)\n"),
        "{one}"
    );
    let table = env.loops(["runs", "summer"]).run().stdout;
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    assert!(header.contains(" DURATION  COST  "), "{table}");
    assert!(!header.contains("CLASS"), "{table}");
    let row = lines.find(|l| l.contains("summer")).unwrap();
    assert!(row.contains(" $0.25 "), "{table}");
}

#[test]
fn a_claude_run_reporting_an_error_failed_and_is_classified() {
    let env = TestEnv::new();
    fake_claude(
        &env,
        r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 429 rate_limit_error","session_id":"s"}"#,
    );
    env.loops(["create", "agent", "busy", "--provider", "claude"])
        .args(["--prompt", "work", "--every", "1h"])
        .run();
    env.loops(["run-now", "busy"]).code(1).run();
    let runs = env.loops(["--json", "runs", "busy"]).run().json();
    assert_eq!(runs[0]["status"], "failed", "{}", runs[0]);
    assert_eq!(runs[0]["isError"], true);
    assert_eq!(runs[0]["failureClass"], "rate_limit", "{}", runs[0]);
    let print = runs[0]["failureFingerprint"].as_str().unwrap();
    assert_eq!(print.len(), 16, "{print}");
    let table = env.loops(["runs", "busy"]).run().stdout;
    assert!(
        table.lines().next().unwrap().contains(" STATUS  CLASS "),
        "{table}"
    );
    assert!(table.contains(" failed  rate_limit "), "{table}");
    let one = env
        .loops(["runs", runs[0]["id"].as_str().unwrap()])
        .run()
        .stdout;
    assert!(
        one.contains(&format!("\nclass:     rate_limit (fingerprint {print})\n")),
        "{one}"
    );
    assert!(
        one.contains("\nreported:  the agent's output says the run failed\n"),
        "{one}"
    );
}

#[test]
fn a_loop_over_its_daily_cost_cap_is_paused_before_its_next_run() {
    let env = TestEnv::new();
    fake_claude(&env, &envelope(0.6));
    env.loops(["create", "agent", "spender", "--provider", "claude"])
        .args(["--prompt", "spend", "--every", "1h"])
        .args(["--max-cost-per-day", "1"])
        .run();
    let shown = env.loops(["--json", "show", "spender"]).run().json();
    assert_eq!(shown["maxCostPerDayUsd"], 1.0);
    // Two manual runs spend $1.20 today; run-now is not held back.
    env.loops(["run-now", "spender"]).run();
    env.loops(["run-now", "spender"]).run();
    // A slot comes due; it is not run: the loop pauses first.
    env.loops(["edit", "spender", "--at", "2020-01-01T00:00:00Z"])
        .run();
    env.loops(["tick"]).run();
    let shown = env.loops(["--json", "show", "spender"]).run().json();
    assert_eq!(shown["status"], "paused", "{shown}");
    let reason = shown["pausedReason"].as_str().unwrap();
    assert!(
        reason.starts_with("daily cost cap reached: $1.20 spent today of maxCostPerDayUsd $1.00"),
        "{reason}"
    );
    let runs = env.loops(["--json", "runs", "spender"]).run().json();
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
    // `off` removes the cap.
    env.loops(["edit", "spender", "--max-cost-per-day", "off"])
        .run();
    let shown = env.loops(["--json", "show", "spender"]).run().json();
    assert!(shown.get("maxCostPerDayUsd").is_none(), "{shown}");
}

#[test]
fn a_running_run_says_how_long_it_has_been_silent() {
    // Issue 27: each heartbeat records when the run last printed; a 3 s
    // lease beats every second.
    let env = TestEnv::new();
    let id = env.create_command(
        "quiet",
        "echo started; sleep 30",
        &["--every", "1h", "--lease", "3s"],
    );
    let mut child = env.spawn(&["run-now", &id]);
    let run = loops_tests::wait_for("a heartbeat to record the output", DEADLINE, || {
        let runs = env.loops(["--json", "runs", "quiet"]).run().json();
        let run = runs.get(0)?.clone();
        run.get("lastOutputAt").is_some().then_some(run)
    });
    assert_eq!(run["status"], "running");
    let shown = env
        .loops(["runs", run["id"].as_str().unwrap()])
        .run()
        .stdout;
    let line = shown
        .lines()
        .find(|l| l.starts_with("silent:    "))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(line.contains("(last output "), "{line}");
    let status = env.loops(["daemon", "status"]).run().stdout;
    let running = format!("running: {} quiet started ", run["id"].as_str().unwrap());
    let line = status
        .lines()
        .find(|l| l.starts_with(&running))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(line.contains(", silent "), "{line}");
    // SIGINT cancels the run and kills its child.
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    assert_eq!(child.wait().unwrap().code(), Some(1));
}

const DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

#[test]
fn doctor_and_runs_never_show_the_prompt() {
    // Issue 27: the prompt is the owner's text; it goes on stdin only.
    let env = TestEnv::new();
    fake_claude(&env, &envelope(0.01));
    let prompt = "sekrit-prompt-4242";
    env.loops(["create", "agent", "private", "--provider", "claude"])
        .args(["--prompt", prompt, "--every", "1h"])
        .run();
    env.loops(["run-now", "private"]).run();
    for args in [
        &["doctor"][..],
        &["--json", "doctor"],
        &["runs"],
        &["--json", "runs"],
        &["runs", "private"],
    ] {
        let ran = env.run(args);
        let (out, err) = (
            String::from_utf8_lossy(&ran.stdout),
            String::from_utf8_lossy(&ran.stderr),
        );
        assert!(!out.is_empty(), "{args:?} printed nothing: {err}");
        assert!(
            !out.contains(prompt) && !err.contains(prompt),
            "{args:?}: {out}{err}"
        );
    }
}

#[test]
fn doctor_names_the_class_of_a_loop_that_keeps_failing() {
    let env = TestEnv::new();
    env.create_command(
        "limited",
        "echo 'Error: 429 Too Many Requests' >&2; exit 1",
        &["--every", "1h"],
    );
    for _ in 0..5 {
        env.loops(["run-now", "limited"]).code(1).run();
    }
    let ran = env.run(&["doctor"]);
    let out = String::from_utf8_lossy(&ran.stdout);
    let line = out
        .lines()
        .find(|l| l.contains("failed 5 or more times in a row: limited"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains(" (last: rate_limit, fingerprint "), "{line}");
}
