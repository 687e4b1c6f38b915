//! Issue 27, "Failure classes" and "What each run did and cost": `loops
//! health`, `loops cost` and the MCP tool `loops_health`, over runs of
//! fake agents that print their provider's machine output and of command
//! loops that fail.

use loops_tests::TestEnv;
use serde_json::{Value, json};

use crate::mcp::{block_on, cli_json, read_only};

/// A fake `claude` that prints a result envelope costing $0.25 with 10
/// input, 5 output, 2 cache-read and 1 cache-write tokens, and a fake
/// `codex` whose JSONL states 100 input tokens (40 of them cached) and 7
/// output tokens, and no cost.
fn fake_agents(env: &TestEnv) {
    env.write_script(
        "claude",
        "cat > /dev/null\n\
         echo '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\",\
         \"session_id\":\"s1\",\"total_cost_usd\":0.25,\"usage\":{\"input_tokens\":10,\
         \"output_tokens\":5,\"cache_read_input_tokens\":2,\"cache_creation_input_tokens\":1}}'",
    );
    env.write_script(
        "codex",
        "cat > /dev/null\n\
         echo '{\"type\":\"thread.started\",\"thread_id\":\"t1\"}'\n\
         echo '{\"type\":\"item.completed\",\"item\":{\"id\":\"i1\",\"type\":\"agent_message\",\"text\":\"done\"}}'\n\
         echo '{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":100,\"cached_input_tokens\":40,\"output_tokens\":7}}'",
    );
}

/// Creates an agent loop `name` of `provider` with `labels`, run every
/// hour in the home directory.
fn agent(env: &TestEnv, name: &str, provider: &str, labels: &[&str]) {
    let home = env.home();
    let mut args = vec![
        "create",
        "agent",
        name,
        "--provider",
        provider,
        "--prompt",
        "p",
        "--every",
        "1h",
        "--cwd",
        home.to_str().expect("a UTF-8 home"),
    ];
    for label in labels {
        args.extend(["--label", label]);
    }
    env.loops(args).run();
}

/// Runs `name` now, `times` times, and returns the last run's JSON (a
/// failed run exits 1 and prints its run all the same).
fn run_now(env: &TestEnv, name: &str, times: usize) -> Value {
    let mut last = Value::Null;
    for _ in 0..times {
        let ran = env.run(&["--json", "run-now", name]);
        last = serde_json::from_slice(&ran.stdout).unwrap_or_else(|e| {
            panic!("run-now {name} printed no run ({e}): {ran:?}");
        });
    }
    last
}

/// `cost --json <args>`'s groups by their name under `key`: runs, cost,
/// the four token counts and the unpriced runs.
fn groups(env: &TestEnv, key: &str, args: &[&str]) -> Vec<(String, Value)> {
    let report = cli_json(env, &[&["cost"][..], args].concat());
    report["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            let mut totals = g.clone();
            let name = totals
                .as_object_mut()
                .and_then(|o| o.remove(key))
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| panic!("no {key} in {g}"));
            if let Some(o) = totals.as_object_mut() {
                o.remove("loopId");
            }
            (name, totals)
        })
        .collect()
}

/// Totals as `cost --json` prints them.
fn totals(runs: u64, cost: f64, tokens: [u64; 4], unpriced: u64) -> Value {
    json!({
        "runs": runs,
        "costUsd": cost,
        "inputTokens": tokens[0],
        "outputTokens": tokens[1],
        "cacheReadTokens": tokens[2],
        "cacheWriteTokens": tokens[3],
        "unpricedRuns": unpriced,
    })
}

#[test]
fn cost_totals_agent_runs_per_loop_provider_day_and_label() {
    let env = TestEnv::new();
    fake_agents(&env);
    agent(&env, "nightly-fix", "claude", &["team", "nightly"]);
    agent(&env, "triage", "claude", &["team"]);
    agent(&env, "review", "codex", &[]);
    // A command loop reports nothing and counts nowhere.
    env.create_command("plain", "echo hi", &["--every", "1h"]);
    for (name, times) in [
        ("nightly-fix", 2),
        ("triage", 1),
        ("review", 1),
        ("plain", 1),
    ] {
        let run = run_now(&env, name, times);
        assert_eq!(run["status"], "succeeded", "{run}");
    }
    let claude = [10, 5, 2, 1];
    let codex = [60, 7, 40, 0];

    let by_loop = groups(&env, "loopName", &[]);
    assert_eq!(
        by_loop,
        [
            ("nightly-fix".to_owned(), totals(2, 0.5, [20, 10, 4, 2], 0)),
            ("triage".to_owned(), totals(1, 0.25, claude, 0)),
            ("review".to_owned(), totals(1, 0.0, codex, 1)),
        ]
    );
    let report = cli_json(&env, &["cost"]);
    assert_eq!(report["by"], "loop");
    assert_eq!(report["total"], totals(4, 0.75, [90, 22, 46, 3], 1));
    assert!(report["groups"][0]["loopId"].is_string(), "{report}");

    assert_eq!(
        groups(&env, "provider", &["--by", "provider"]),
        [
            ("claude".to_owned(), totals(3, 0.75, [30, 15, 6, 3], 0)),
            ("codex".to_owned(), totals(1, 0.0, codex, 1)),
        ]
    );
    // A loop with two labels counts under both; the total counts it once.
    assert_eq!(
        groups(&env, "label", &["--by", "label"]),
        [
            ("team".to_owned(), totals(3, 0.75, [30, 15, 6, 3], 0)),
            ("nightly".to_owned(), totals(2, 0.5, [20, 10, 4, 2], 0)),
            ("(none)".to_owned(), totals(1, 0.0, codex, 1)),
        ]
    );
    let by_label = cli_json(&env, &["cost", "--by", "label"]);
    assert_eq!(by_label["total"], report["total"]);

    // Days are local calendar days: in UTC, the date of each finish.
    let mut days: Vec<(String, u64)> = Vec::new();
    for run in cli_json(&env, &["runs"]).as_array().expect("runs") {
        if run.get("costUsd").is_none() && run.get("usage").is_none() {
            continue;
        }
        let day = run["finishedAt"].as_str().expect("finished")[..10].to_owned();
        match days.iter_mut().find(|(d, _)| *d == day) {
            Some((_, n)) => *n += 1,
            None => days.push((day, 1)),
        }
    }
    days.sort();
    let by_day = env
        .loops(["--json", "cost", "--by", "day"])
        .env("TZ", Some("UTC"))
        .run()
        .json();
    let seen: Vec<(String, u64)> = by_day["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["day"].as_str().unwrap().to_owned(),
                g["runs"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, days);

    // A removed loop keeps its history: its recorded name, provider unknown.
    env.loops(["remove", "triage"]).run();
    let by_provider = groups(&env, "provider", &["--by", "provider"]);
    assert!(
        by_provider.contains(&("unknown".to_owned(), totals(1, 0.25, claude, 0))),
        "{by_provider:?}"
    );
    assert!(
        groups(&env, "loopName", &[])
            .iter()
            .any(|(n, _)| n == "triage")
    );

    // --since counts the runs finished within it.
    env.raw().exec(&format!(
        "UPDATE loop_runs SET finished_at = {} WHERE loop_name = 'review'",
        loops_tests::instant_ago(40 * 86_400_000)
    ));
    let recent = cli_json(&env, &["cost"]);
    assert_eq!(recent["total"]["runs"], 3, "{recent}");
    assert_eq!(recent["total"]["unpricedRuns"], 0, "{recent}");
    let longer = cli_json(&env, &["cost", "--since", "60d"]);
    assert_eq!(longer["total"]["runs"], 4, "{longer}");

    // For a human: an aligned table with a total, money as dollars.
    let ran = env
        .loops(["cost", "--by", "provider", "--since", "60d"])
        .run();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines[0].starts_with("PROVIDER  RUNS  COST"),
        "{}",
        ran.stdout
    );
    let total = lines.last().expect("a total row");
    assert!(
        total.starts_with("TOTAL") && total.contains("$0.75"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stderr.contains("1 run reported tokens but no cost"),
        "{}",
        ran.stderr
    );
}

#[test]
fn cost_without_reports_is_empty_and_a_bad_group_is_refused() {
    let env = TestEnv::new();
    env.loops(["cost"])
        .stdout("")
        .stderr_has("no run reported a cost or tokens since")
        .run();
    let empty = cli_json(&env, &["cost", "--by", "day"]);
    assert_eq!(empty["groups"], json!([]));
    assert_eq!(empty["total"], totals(0, 0.0, [0; 4], 0));
    env.loops(["cost", "--by", "week"])
        .code(1)
        .stderr_has("error: invalid --by \"week\": use loop, provider, day or label")
        .run();
    env.loops(["health", "--since", "soon"])
        .code(1)
        .stderr_has("error: invalid duration: soon")
        .run();
}

/// A command loop that writes `stderr` to stderr and exits `code`.
fn failing(env: &TestEnv, name: &str, stderr: &str, code: u8) -> String {
    env.create_command(
        name,
        &format!("echo '{stderr}' >&2; exit {code}"),
        &["--every", "1h"],
    )
}

#[test]
fn health_groups_failing_loops_by_class_and_fingerprint() {
    let env = TestEnv::new();
    env.loops(["health"])
        .stdout("")
        .stderr_has("no failures since ")
        .run();
    env.loops(["--json", "health"]).stdout("[]\n").run();

    let limited = failing(&env, "limited", "HTTP 429 Too Many Requests", 1);
    failing(&env, "broken", "something else", 2);
    env.create_command("fine", "true", &["--every", "1h"]);
    for (name, times) in [("limited", 3), ("broken", 1), ("fine", 2)] {
        run_now(&env, name, times);
    }
    let health = cli_json(&env, &["health"]);
    let rows = health.as_array().expect("an array");
    assert_eq!(rows.len(), 2, "{health:#}");
    // Most recently seen first.
    assert_eq!(rows[0]["loopName"], "broken");
    assert_eq!(rows[0]["failureClass"], "unknown");
    assert_eq!(rows[0]["count"], 1);
    assert_eq!(rows[0]["sample"], "process exited with code 2");
    let limits = &rows[1];
    assert_eq!(limits["loopId"], limited.as_str());
    assert_eq!(limits["loopName"], "limited");
    assert_eq!(limits["failureClass"], "rate_limit");
    assert_eq!(limits["count"], 3);
    assert_eq!(limits["sample"], "process exited with code 1");
    // The fingerprint is the one every run of the group carries.
    let runs = cli_json(&env, &["runs", "limited"]);
    for run in runs.as_array().expect("runs") {
        assert_eq!(run["failureFingerprint"], limits["failureFingerprint"]);
    }
    let print = limits["failureFingerprint"]
        .as_str()
        .expect("a fingerprint");
    assert!(print.len() == 16 && print.bytes().all(|b| b.is_ascii_hexdigit()));
    let (first, last) = (limits["firstSeen"].as_str(), limits["lastSeen"].as_str());
    assert_eq!(first, runs[2]["finishedAt"].as_str());
    assert_eq!(last, runs[0]["finishedAt"].as_str());
    let keys: Vec<&str> = limits
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "loopId",
            "loopName",
            "failureClass",
            "failureFingerprint",
            "count",
            "firstSeen",
            "lastSeen",
            "sample"
        ]
    );

    // Runs older than --since are left out.
    env.raw().exec(&format!(
        "UPDATE loop_runs SET finished_at = {} WHERE loop_name = 'broken'",
        loops_tests::instant_ago(2 * 86_400_000)
    ));
    let day = cli_json(&env, &["health", "--since", "1d"]);
    assert_eq!(day.as_array().map(Vec::len), Some(1), "{day:#}");
    assert_eq!(
        cli_json(&env, &["health"]).as_array().map(Vec::len),
        Some(2)
    );

    let ran = env.loops(["health"]).run();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines[0].starts_with("LOOP     CLASS       FINGERPRINT       COUNT"),
        "{}",
        ran.stdout
    );
    assert!(
        lines[1].starts_with(&format!("limited  rate_limit  {print}  3")),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_health_sample_is_one_bounded_line_with_tokens_masked() {
    let env = TestEnv::new();
    // A missing program is a preflight failure whose error names it and
    // the whole effective PATH.
    let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    env.loops([
        "create",
        "command",
        "leaky",
        "--no-shell",
        "--cmd",
        token,
        "--every",
        "1h",
    ])
    .run();
    let run = run_now(&env, "leaky", 1);
    assert_eq!(run["failureClass"], "preflight", "{run}");
    assert!(
        run["error"].as_str().unwrap().chars().count() > 200,
        "{run}"
    );
    let health = cli_json(&env, &["health"]);
    let sample = health[0]["sample"].as_str().expect("a sample");
    assert!(!sample.contains(token), "{sample}");
    assert!(
        sample.starts_with("Executable not found in PATH: "),
        "{sample}"
    );
    assert_eq!(sample.chars().count(), 200, "{sample}");
    assert!(sample.ends_with('…'), "{sample}");
    // For a human, the PATH gives way to a pointer to doctor.
    let ran = env.loops(["health"]).run();
    assert!(!ran.stdout.contains(token), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("`loops doctor` shows it"),
        "{}",
        ran.stdout
    );
}

#[test]
fn the_mcp_health_tool_returns_what_health_json_prints() {
    let env = TestEnv::new();
    failing(&env, "limited", "429 Too Many Requests", 1);
    run_now(&env, "limited", 2);
    block_on(async {
        let mcp = read_only(&env).await;
        let all = mcp.ok("loops_health", json!({})).await;
        assert_eq!(all, cli_json(&env, &["health"]));
        assert_eq!(all[0]["failureClass"], "rate_limit");
        assert_eq!(all[0]["count"], 2);
        assert_eq!(
            mcp.ok("loops_health", json!({"since": "1d"})).await,
            cli_json(&env, &["health", "--since", "1d"])
        );
        assert_eq!(mcp.ok("loops_health", json!({"since": 1})).await, json!([]));
        let err = mcp.err("loops_health", json!({"since": "soon"})).await;
        assert!(err.starts_with("invalid duration: soon"), "{err}");
        // loops_runs carries the class and fingerprint of each run.
        let runs = mcp.ok("loops_runs", json!({"loop": "limited"})).await;
        assert_eq!(runs[0]["failureClass"], "rate_limit");
        assert_eq!(runs[0]["failureFingerprint"], all[0]["failureFingerprint"]);
        mcp.close().await;
    });
}
