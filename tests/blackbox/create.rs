//! `loops create command|agent` (SPEC §7.3, §10 items 89–92; §9 items 27
//! and 28).

use loops_tests::TestEnv;

fn create(env: &TestEnv, args: &[&str]) -> serde_json::Value {
    env.loops(["--json", "create"]).args(args).run().json()
}

fn rejects(env: &TestEnv, args: &[&str], message: &str) {
    let ran = env.loops(["create"]).args(args).code(1).run();
    assert_eq!(
        ran.stderr.lines().next(),
        Some(format!("error: {message}").as_str()),
        "{args:?}"
    );
    assert!(ran.stdout.is_empty(), "{}", ran.stdout);
}

#[test]
fn human_create_prints_id_name_and_next_run() {
    let env = TestEnv::new();
    let ran = env
        .loops([
            "create",
            "command",
            "nightly",
            "--cmd",
            "true",
            "--at",
            "2030-01-02T03:04:05Z",
        ])
        .env("TZ", Some("Europe/Berlin"))
        .run();
    let line = ran.stdout.trim_end();
    // Local time with its offset (issue 28); `--json` keeps UTC.
    let (head, next) = line.split_once(" next=").unwrap();
    assert_eq!(next, "2030-01-02T04:04:05+01:00");
    let id = head
        .strip_prefix("created loop ")
        .unwrap()
        .strip_suffix(" (nightly)")
        .unwrap();
    assert_eq!(id.len(), 12);
    assert!(
        id.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
}

// SPEC §10 item 89
#[test]
fn zero_or_two_schedules_are_rejected() {
    let env = TestEnv::new();
    let msg = "choose exactly one schedule: --at, --every, --cron, or --dynamic";
    rejects(&env, &["command", "x", "--cmd", "true"], msg);
    rejects(
        &env,
        &[
            "command",
            "x",
            "--cmd",
            "true",
            "--every",
            "1m",
            "--dynamic",
        ],
        msg,
    );
    rejects(
        &env,
        &[
            "agent",
            "x",
            "--provider",
            "claude",
            "--prompt",
            "p",
            "--at",
            "2030-01-01",
            "--cron",
            "* * * * *",
        ],
        msg,
    );
}

// SPEC §10 item 90
#[test]
fn option_errors_use_the_spec_messages() {
    let env = TestEnv::new();
    let base = ["command", "x", "--cmd", "true", "--every", "1m"];
    for (extra, message) in [
        (
            &["--attempts", "0"][..],
            "--attempts must be a positive integer",
        ),
        (
            &["--attempts", "two"],
            "--attempts must be a positive integer",
        ),
        (&["--lease", "0"], "--lease must be greater than zero"),
        (
            &["--retry-delay", "0"],
            "--retry-delay must be greater than zero",
        ),
        (
            &["--catch-up", "some"],
            "--catch-up must be none, latest, or all",
        ),
        (
            &["--catch-up-limit", "0"],
            "--catch-up-limit must be a positive integer",
        ),
        (
            &["--catch-up-limit", "10001"],
            "--catch-up-limit must be at most 10000 (the most missed slots one tick runs)",
        ),
        (&["--overlap", "queue"], "--overlap must be skip or allow"),
        (
            &["--account-tool", "claude"],
            "--account-tool requires --account",
        ),
        (&["--timeout", "0"], "--timeout must be greater than zero"),
        (
            &["--timeout", "1 h"],
            "invalid duration: 1 h (use a number and a unit: 500ms, 30s, 5m, 1h, 1d, or a sum \
             such as 1h30m; a bare number of 1000 or more is milliseconds)",
        ),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        rejects(&env, &args, message);
    }
    rejects(
        &env,
        &["command", "x", "--cmd", "true", "--every", "0"],
        "--every must be greater than zero",
    );
    rejects(
        &env,
        &["command", "x", "--cmd", "true", "--at", "soon"],
        "invalid --at: soon (use ISO-8601 such as 2026-01-01T09:00:00Z, a local \
         2026-01-01T09:00, now, +10m, in 1h30m, today 17:00 or tomorrow 09:00)",
    );
    rejects(
        &env,
        &["command", "x", "--cmd", "true", "--cron", "* * * *"],
        "cron must have 5 fields, got 4: \"* * * *\"",
    );
}

/// Issue 25 review: an env name had no length cap, and an invalid one was
/// quoted whole in the error. The name is capped at 256 bytes, the error
/// quotes at most 64 of its characters, and it names `--env`.
#[test]
fn env_names_are_capped_and_quoted_short() {
    let env = TestEnv::new();
    let base = ["command", "x", "--cmd", "true", "--every", "1m"];
    let with = |pair: &str| -> Vec<String> {
        base.iter()
            .map(|s| (*s).to_owned())
            .chain(["--env".to_owned(), pair.to_owned()])
            .collect()
    };
    // One argument may hold at most 128 KiB on Linux.
    let long = "N".repeat(100_000);
    let cut = format!("\"{}…\"", "N".repeat(64));
    for (pair, message) in [
        (
            format!("{long}=v"),
            format!(
                "--env has a variable name of 100000 bytes, {cut}; names must be at most 256 \
                 bytes"
            ),
        ),
        (
            format!("{long}-=v"),
            format!(
                "--env has an invalid variable name {cut}; names must match [A-Za-z_][A-Za-z0-9_]*"
            ),
        ),
        (
            "A-B=v".to_owned(),
            "--env has an invalid variable name \"A-B\"; names must match [A-Za-z_][A-Za-z0-9_]*"
                .to_owned(),
        ),
    ] {
        let args = with(&pair);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        rejects(&env, &args, &message);
    }
    assert!(env.database_is_untouched());
    let name = "N".repeat(256);
    let args = with(&format!("{name}=v"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let created = create(&env, &args);
    assert_eq!(created["target"]["env"][&name], "[redacted]");
}

#[test]
fn agent_options_are_checked() {
    let env = TestEnv::new();
    let base = ["agent", "x", "--prompt", "hi", "--every", "1m"];
    let with =
        |extra: &[&'static str]| -> Vec<&str> { base.iter().chain(extra).copied().collect() };
    let ran = env
        .loops(["create"])
        .args(with(&["--provider", "gpt"]))
        .code(1)
        .run();
    assert!(
        ran.stderr.starts_with("error: unsupported provider"),
        "{}",
        ran.stderr
    );
    rejects(
        &env,
        &with(&["--provider", "claude", "--config-isolation", "strict"]),
        "--config-isolation must be safe or none",
    );
}

// SPEC §10 item 9 (no row is written)
#[test]
fn a_rejected_create_writes_no_row() {
    let env = TestEnv::new();
    // February 30th never comes.
    env.loops([
        "create",
        "command",
        "x",
        "--cmd",
        "true",
        "--cron",
        "0 0 30 2 *",
    ])
    .code(1)
    .stderr_has("error: ")
    .run();
    // Validation happens before the database is even opened.
    assert!(env.database_is_untouched());
    env.create_command("ok", "true", &["--every", "1m"]);
    env.loops([
        "create",
        "command",
        "bad",
        "--cmd",
        "true",
        "--every",
        "1m",
        "--attempts",
        "0",
    ])
    .code(1)
    .run();
    let all = env.loops(["--json", "list"]).run().json();
    assert_eq!(all.as_array().map(Vec::len), Some(1));
}

// SPEC §10 item 91
#[test]
fn command_loops_run_through_a_shell_unless_no_shell() {
    let env = TestEnv::new();
    let lp = create(
        &env,
        &["command", "a", "--cmd", "printf hi", "--every", "5m"],
    );
    assert_eq!(lp["target"]["shell"], true);
    assert_eq!(lp["target"]["command"], "printf hi");
    assert_eq!(
        lp["schedule"],
        serde_json::json!({"type": "interval", "everyMs": 300000, "anchor": "fixed_rate"})
    );
    assert_eq!(lp["catchUp"], "latest");
    assert_eq!(lp["catchUpLimit"], 50);
    assert_eq!(lp["overlap"], "skip");
    assert_eq!(lp["maxAttempts"], 1);
    assert_eq!(lp["retryDelayMs"], 60000);
    assert_eq!(lp["leaseMs"], 1800000);

    let lp = create(
        &env,
        &[
            "command",
            "b",
            "--cmd",
            "printf",
            "--arg",
            "%s",
            "--arg",
            "x y",
            "--no-shell",
            "--every",
            "5m",
        ],
    );
    assert_eq!(lp["target"]["shell"], false);
    assert_eq!(lp["target"]["args"], serde_json::json!(["%s", "x y"]));
    // SPEC §9 item 27: without a shell the command must be one executable.
    let ran = env
        .loops([
            "create",
            "command",
            "c",
            "--cmd",
            "printf hi",
            "--no-shell",
            "--every",
            "5m",
        ])
        .code(1)
        .run();
    assert!(
        ran.stderr.contains("--cmd must be a single executable"),
        "{}",
        ran.stderr
    );
}

#[test]
fn every_option_is_stored() {
    let env = TestEnv::new();
    let lp = create(
        &env,
        &[
            "command",
            "full",
            "--cmd",
            "true",
            "--dynamic",
            "--catch-up",
            "all",
            "--catch-up-limit",
            "7",
            "--overlap",
            "allow",
            "--attempts",
            "3",
            "--retry-delay",
            "30s",
            "--lease",
            "2m",
            "--expires-at",
            "2031-01-01",
            "-d",
            "a description",
            "--cwd",
            "/tmp",
            "--timeout",
            "90s",
            "--env",
            "TOKEN=s3cret",
            "--account",
            "work",
            "--account-tool",
            "claude",
        ],
    );
    // As the original stores it (SPEC §7.3).
    assert_eq!(
        lp["schedule"],
        serde_json::json!({"type": "dynamic", "minIntervalMs": 60000})
    );
    assert_eq!(lp["catchUp"], "all");
    assert_eq!(lp["catchUpLimit"], 7);
    assert_eq!(lp["overlap"], "allow");
    assert_eq!(lp["maxAttempts"], 3);
    assert_eq!(lp["retryDelayMs"], 30000);
    assert_eq!(lp["leaseMs"], 120000);
    assert_eq!(lp["expiresAt"], "2031-01-01T00:00:00.000Z");
    assert_eq!(lp["description"], "a description");
    assert_eq!(lp["target"]["cwd"], "/tmp");
    assert_eq!(lp["target"]["timeoutMs"], 90000);
    assert_eq!(
        lp["target"]["env"],
        serde_json::json!({"TOKEN": "[redacted]"})
    );
    assert_eq!(
        lp["target"]["account"],
        serde_json::json!({"profile": "work", "tool": "claude"})
    );
}

#[test]
fn at_parses_like_a_javascript_date() {
    let env = TestEnv::new();
    for (at, expected) in [
        ("2030-01-02", "2030-01-02T00:00:00.000Z"),
        ("2030-01-02T03:04:05+02:00", "2030-01-02T01:04:05.000Z"),
        ("2030-01-02T03:04Z", "2030-01-02T03:04:00.000Z"),
    ] {
        let lp = create(&env, &["command", "once", "--cmd", "true", "--at", at]);
        assert_eq!(lp["schedule"]["at"], expected, "{at}");
        assert_eq!(lp["nextRunAt"], expected, "{at}");
    }
    // Without an offset the time is host-local; with TZ=UTC that is UTC.
    let ran = env
        .loops([
            "--json",
            "create",
            "command",
            "local",
            "--cmd",
            "true",
            "--at",
            "2030-01-02T03:04:05",
        ])
        .env("TZ", Some("UTC"))
        .run();
    assert_eq!(ran.json()["nextRunAt"], "2030-01-02T03:04:05.000Z");
}

#[test]
fn tz_is_stored_for_cron_and_checked() {
    let env = TestEnv::new();
    let lp = create(
        &env,
        &[
            "command",
            "c",
            "--cmd",
            "true",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Europe/Berlin",
        ],
    );
    assert_eq!(
        lp["schedule"],
        serde_json::json!({"type": "cron", "expression": "0 9 * * 1-5", "timezone": "Europe/Berlin"})
    );
    // 09:00 in Berlin is 07:00 or 08:00 UTC, whatever the season.
    let next = lp["nextRunAt"].as_str().unwrap();
    assert!(
        next.ends_with("T07:00:00.000Z") || next.ends_with("T08:00:00.000Z"),
        "{next}"
    );

    let ran = env
        .loops([
            "create",
            "command",
            "c",
            "--cmd",
            "true",
            "--cron",
            "0 9 * * *",
            "--tz",
            "Mars/Olympus",
        ])
        .code(1)
        .run();
    assert!(
        ran.stderr
            .starts_with("error: unknown time zone: Mars/Olympus"),
        "{}",
        ran.stderr
    );
    let ran = env
        .loops([
            "create", "command", "c", "--cmd", "true", "--every", "1m", "--tz", "UTC",
        ])
        .code(1)
        .run();
    assert!(
        ran.stderr.starts_with("error: --tz requires --cron"),
        "{}",
        ran.stderr
    );
    let all = env.loops(["--json", "ls"]).run().json();
    assert_eq!(all.as_array().map(Vec::len), Some(1));
}

#[test]
fn agent_loops_store_their_target() {
    let env = TestEnv::new();
    let lp = create(
        &env,
        &[
            "agent",
            "review",
            "--provider",
            "codex",
            "--prompt",
            "review the diff",
            "--model",
            "o4",
            "--cwd",
            "/tmp",
            "--timeout",
            "10m",
            "--config-isolation",
            "none",
            "--account",
            "me",
            "--every",
            "1h",
        ],
    );
    assert_eq!(
        lp["target"],
        serde_json::json!({
            "type": "agent", "provider": "codex", "prompt": "review the diff", "cwd": "/tmp",
            "model": "o4", "timeoutMs": 600000, "configIsolation": "none",
            "account": {"profile": "me"}
        })
    );
}

/// `create` arguments for a Claude agent loop `x` with `prompt`, every
/// minute.
fn claude_every_minute(prompt: &str) -> [&str; 8] {
    [
        "agent",
        "x",
        "--provider",
        "claude",
        "--prompt",
        prompt,
        "--every",
        "1m",
    ]
}

#[test]
fn a_prompt_that_reads_as_an_option_is_refused_with_how_to_write_it() {
    let env = TestEnv::new();
    let message = "--prompt must not begin with \"-\": the agent would read it as an option, \
                   not as its prompt; start it with another character, for example \"Task: \
                   --fix\" or \" --fix\" with a leading space";
    for prompt in ["--dangerously-skip-permissions", "-p"] {
        rejects(&env, &claude_every_minute(prompt), message);
    }
    assert!(
        env.database_is_untouched(),
        "a refused create writes nothing"
    );
    // Written as the message says, it is the prompt, unchanged.
    for prompt in [" --dangerously-skip-permissions", "Task: -p"] {
        let lp = create(&env, &claude_every_minute(prompt));
        assert_eq!(lp["target"]["prompt"], prompt);
    }
}

#[test]
fn an_option_value_that_reads_as_an_option_is_refused() {
    // Issue 25 item 8: each value follows its flag in the agent's argv, so
    // one that begins with "-" would be read as an option of its own.
    let env = TestEnv::new();
    for (flag, what) in [
        ("--model", "give the model's name, for example \"sonnet\""),
        ("--agent", "give the agent's name"),
    ] {
        let value = format!("{flag}=--dangerously-bypass-approvals-and-sandbox");
        rejects(
            &env,
            &[
                "agent",
                "x",
                "--provider",
                "codex",
                "--prompt",
                "fix it",
                &value,
                "--every",
                "1m",
            ],
            &format!(
                "{flag} must not begin with \"-\": the agent would read it as an option, not as \
                 the value of {flag}; {what}"
            ),
        );
    }
    assert!(
        env.database_is_untouched(),
        "a refused create writes nothing"
    );
    let lp = create(
        &env,
        &[
            "agent",
            "x",
            "--provider",
            "codex",
            "--prompt",
            "fix it",
            "--model",
            "gpt-5-codex",
            "--every",
            "1m",
        ],
    );
    assert_eq!(lp["target"]["model"], "gpt-5-codex");
}

#[test]
fn codex_refuses_an_agent() {
    // Agents note §12.1 rule 7: 0.3.1 stored it with a warning and left it
    // out of codex's argv; 0.5.11 refuses it.
    let env = TestEnv::new();
    let ran = env
        .loops(["--json", "create", "agent", "review", "--provider", "codex"])
        .args(["--prompt", "review", "--agent", "reviewer", "--every", "1h"])
        .code(1)
        .run();
    assert_eq!(
        ran.stderr,
        "error: target.agent is not supported for provider codex\n"
    );
    // A bad option fails before a bad provider.
    env.loops(["create", "agent", "r3", "--provider", "nope"])
        .args(["--prompt", "review", "--every", "soon"])
        .code(1)
        .stderr_has("error: invalid duration: soon")
        .run();
    // Other providers take it silently (with the program on the PATH,
    // or its absence would be warned about).
    env.write_script("claude", "cat > /dev/null");
    let ran = env
        .loops(["create", "agent", "r2", "--provider", "claude"])
        .args(["--prompt", "review", "--agent", "reviewer", "--every", "1h"])
        .run();
    // Only the hint that no daemon runs (issue 16).
    assert!(
        ran.stderr.starts_with("hint: no daemon is running"),
        "{}",
        ran.stderr
    );
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
}
