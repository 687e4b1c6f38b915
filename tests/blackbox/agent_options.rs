//! Issue 27, "Prompts and argv" and "A watchdog": the agent options 0.5.11
//! added, on `create agent` and `edit`. Fake agents record the argv they
//! were given, which must be the agents note's §2.1 table; bad values get
//! the note's §12 messages.

use loops_tests::TestEnv;
use serde_json::{Value, json};

/// Fakes of every provider's program on PATH: each records its argv, one
/// word a line, in `<home>/argv-<program>`, reads its prompt, and prints
/// `CI=$CI` (an agent that prints nothing fails its run).
fn fake_agents(env: &TestEnv) {
    let home = env.home();
    for program in [
        "claude",
        "agent",
        "codewith",
        "codex",
        "opencode",
        "aicopilot",
    ] {
        let out = home.join(format!("argv-{program}"));
        env.write_script(
            program,
            &format!(
                "out='{}'\n: > \"$out\"\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> \"$out\"; done\n\
                 cat > /dev/null\necho \"CI=${{CI:-}}\"",
                out.display()
            ),
        );
    }
}

/// `create agent <name> --provider <provider> --prompt p --every 1h --cwd
/// <home>` with `extra`, as JSON.
fn create(env: &TestEnv, name: &str, provider: &str, extra: &[&str]) -> Value {
    let home = env.home();
    env.loops(["--json", "create", "agent", name, "--provider", provider])
        .args([
            "--prompt",
            "p",
            "--every",
            "1h",
            "--cwd",
            home.to_str().expect("a UTF-8 home"),
        ])
        .args(extra)
        .run()
        .json()
}

/// Runs `name` now and returns the argv `program` was given.
fn argv(env: &TestEnv, name: &str, program: &str) -> Vec<String> {
    env.loops(["run-now", name]).run();
    let recorded = std::fs::read_to_string(env.home().join(format!("argv-{program}")))
        .expect("the fake agent ran");
    recorded.lines().map(str::to_owned).collect()
}

/// `words` with `{cwd}` as the loop's directory (the home directory) and
/// `{here}` as the directory `loops create` ran in.
fn words(env: &TestEnv, words: &[&str]) -> Vec<String> {
    let home = env.home();
    let cwd = home.to_str().expect("a UTF-8 home");
    let here = std::env::current_dir().expect("a current directory");
    let here = here.to_str().expect("a UTF-8 current directory");
    words
        .iter()
        .map(|w| w.replace("{cwd}", cwd).replace("{here}", here))
        .collect()
}

const CODEX_EXEC: [&str; 5] = [
    "--ask-for-approval",
    "never",
    "exec",
    "--json",
    "--ephemeral",
];

#[test]
fn each_option_reaches_the_argv_of_the_table() {
    let env = TestEnv::new();
    fake_agents(&env);
    let safe_claude = [
        "--safe-mode",
        "--setting-sources",
        "local",
        "--no-session-persistence",
    ];
    let bypass = [
        "--permission-mode",
        "bypass",
        "--manual-break-glass",
        "--safety-reason",
        "a throwaway VM",
    ];
    let cases: Vec<(&str, &str, Vec<&str>, Vec<&str>)> = vec![
        (
            "claude",
            "claude",
            vec![
                "--permission-mode",
                "plan",
                "--effort",
                "high",
                "--model",
                "m",
                "--agent",
                "a",
            ],
            [
                &safe_claude[..],
                &["--permission-mode", "plan", "-p", "--output-format", "json"],
                &["--model", "m", "--effort", "high", "--agent", "a"],
            ]
            .concat(),
        ),
        (
            "claude",
            "claude",
            vec!["--permission-mode", "auto", "--config-isolation", "none"],
            vec!["--permission-mode", "auto", "-p", "--output-format", "json"],
        ),
        (
            "claude",
            "claude",
            bypass.to_vec(),
            [
                &safe_claude[..],
                &[
                    "--permission-mode",
                    "bypassPermissions",
                    "-p",
                    "--output-format",
                    "json",
                ],
            ]
            .concat(),
        ),
        (
            "cursor",
            "agent",
            vec!["--permission-mode", "plan", "--model", "m"],
            vec![
                "-p",
                "--trust",
                "--mode",
                "plan",
                "--sandbox",
                "enabled",
                "--model",
                "m",
            ],
        ),
        (
            "cursor",
            "agent",
            [&bypass[..], &["--sandbox", "disabled"]].concat(),
            vec!["-p", "--trust", "--force", "--sandbox", "disabled"],
        ),
        (
            "codewith",
            "codewith",
            vec![
                "--effort",
                "high",
                "--add-dir",
                "lib,/srv/data",
                "--add-dir",
                "~/notes",
            ],
            [
                &["-c", "model_reasoning_effort=\"high\""][..],
                &["-c", "sandbox_workspace_write.network_access=true"],
                &CODEX_EXEC,
                &[
                    "--sandbox",
                    "workspace-write",
                    "--skip-git-repo-check",
                    "--cd",
                    "{cwd}",
                ],
                // Relative to where create ran, as --cwd is; ~ is HOME.
                &["--add-dir", "{here}/lib", "--add-dir", "/srv/data"],
                &["--add-dir", "{cwd}/notes"],
            ]
            .concat(),
        ),
        (
            "codex",
            "codex",
            [&bypass[..], &["--effort", "low"]].concat(),
            [
                &["-c", "model_reasoning_effort=\"low\""][..],
                &CODEX_EXEC,
                &["--sandbox", "danger-full-access", "--skip-git-repo-check"],
                &["--ignore-rules", "--cd", "{cwd}"],
            ]
            .concat(),
        ),
        (
            "codex",
            "codex",
            vec![
                "--permission-mode",
                "bypass",
                "--sandbox",
                "read-only",
                "--add-dir",
                "/w",
            ],
            [
                &CODEX_EXEC[..],
                &[
                    "--sandbox",
                    "read-only",
                    "--skip-git-repo-check",
                    "--ignore-rules",
                ],
                &["--cd", "{cwd}", "--add-dir", "/w"],
            ]
            .concat(),
        ),
        (
            "opencode",
            "opencode",
            [&bypass[..], &["--model", "p/m", "--effort", "max"]].concat(),
            vec![
                "run",
                "--format",
                "json",
                "--pure",
                "--dangerously-skip-permissions",
                "--dir",
                "{cwd}",
                "--model",
                "p/m",
                "--variant",
                "max",
            ],
        ),
        (
            "aicopilot",
            "aicopilot",
            vec![
                "--effort",
                "high",
                "--agent",
                "build",
                "--config-isolation",
                "none",
            ],
            vec![
                "run",
                "--format",
                "json",
                "--dir",
                "{cwd}",
                "--variant",
                "high",
                "--agent",
                "build",
            ],
        ),
    ];
    for (i, (provider, program, flags, want)) in cases.into_iter().enumerate() {
        let name = format!("{provider}-{i}");
        create(&env, &name, provider, &flags);
        assert_eq!(
            argv(&env, &name, program),
            words(&env, &want),
            "{provider} {flags:?}"
        );
    }
}

#[test]
fn the_options_are_stored_under_0_5_11_names_and_env_stays_redacted() {
    let env = TestEnv::new();
    fake_agents(&env);
    let lp = create(
        &env,
        "fixer",
        "codex",
        &[
            "--permission-mode",
            "bypass",
            "--sandbox",
            "workspace-write",
            "--add-dir",
            "/a,/b",
            "--effort",
            "high",
            "--idle-timeout",
            "20m",
            "--timeout",
            "2h",
            "--env",
            "CI=secret-value",
            "--env",
            "EMPTY=",
            "--allow-tool",
            "Read,Edit",
            "--allow-command",
            "git",
            "--allow-command",
            "cargo",
            "--safety-reason",
            "reviewed",
            "--manual-break-glass",
        ],
    );
    let target = &lp["target"];
    assert_eq!(target["permissionMode"], "bypass");
    assert_eq!(target["sandbox"], "workspace-write");
    assert_eq!(target["addDirs"], json!(["/a", "/b"]));
    assert_eq!(target["variant"], "high");
    assert_eq!(target["idleTimeoutMs"], 1_200_000);
    assert_eq!(target["timeoutMs"], 7_200_000);
    assert_eq!(target["manualBreakGlass"], true);
    assert_eq!(
        target["allowlist"],
        json!({"tools": ["Read", "Edit"], "commands": ["git", "cargo"],
               "enforcement": "metadata_only", "safetyReason": "reviewed"})
    );
    // Env values are never printed, as a command's are.
    assert_eq!(
        target["env"],
        json!({"CI": "[redacted]", "EMPTY": "[redacted]"})
    );
    let shown = env.loops(["show", "fixer"]).run().json();
    assert_eq!(shown["target"]["env"]["CI"], "[redacted]");
    // The run gets them.
    let run = env
        .loops(["--json", "run-now", "fixer", "--show-output"])
        .run()
        .json();
    assert_eq!(run["status"], "succeeded", "{run}");
    // The value reached the agent, and its stored output has it masked.
    assert_eq!(run["stdout"], "CI=[redacted]\n", "{run}");
}

#[test]
fn timeout_none_is_an_agents_null_wall_clock_and_a_commands_error() {
    let env = TestEnv::new();
    for word in ["none", "unlimited", "NEVER", "off"] {
        let name = format!("a-{word}");
        let lp = create(&env, &name, "claude", &["--timeout", word]);
        assert_eq!(lp["target"]["timeoutMs"], Value::Null, "{word}");
        let shown = env.loops(["show", &name, "--json"]).run();
        assert!(
            shown.stdout.contains("\"timeoutMs\": null"),
            "{}",
            shown.stdout
        );
    }
    // Without --timeout, no wall clock and no key: the default watchdog.
    let lp = create(&env, "plain", "claude", &[]);
    assert!(lp["target"].get("timeoutMs").is_none(), "{lp}");
    // --idle-timeout none: no watchdog, said as 0.5.11 says it (agents
    // note §6), `timeoutMs: null` unless a wall clock is given.
    let lp = create(&env, "quiet", "claude", &["--idle-timeout", "none"]);
    assert_eq!(lp["target"]["timeoutMs"], Value::Null);
    assert!(lp["target"].get("idleTimeoutMs").is_none());
    let lp = create(
        &env,
        "bounded",
        "claude",
        &["--idle-timeout", "off", "--timeout", "1h"],
    );
    assert_eq!(lp["target"]["timeoutMs"], 3_600_000);
    assert!(lp["target"].get("idleTimeoutMs").is_none());
    // A command keeps its wall clock.
    env.loops(["create", "command", "c", "--cmd", "true", "--every", "1h"])
        .args(["--timeout", "none"])
        .code(1)
        .stderr_has(
            "error: --timeout none is only for agent loops; a command loop always has a wall clock",
        )
        .run();
}

#[test]
fn a_silent_agent_is_killed_by_its_idle_timeout() {
    let env = TestEnv::new();
    env.write_script("claude", "cat > /dev/null\nexec sleep 30");
    create(&env, "silent", "claude", &["--idle-timeout", "1s"]);
    env.loops(["run-now", "silent"]).code(1).run();
    let run = &env.loops(["--json", "runs", "silent"]).run().json()[0];
    assert_eq!(run["status"], "timed_out", "{run}");
    assert_eq!(
        run["error"],
        "idle timed out after 1000ms without stdout/stderr"
    );
}

#[test]
fn bad_values_get_the_notes_messages_and_store_nothing() {
    let env = TestEnv::new();
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "claude",
            &["--sandbox", "enabled"],
            "--sandbox is currently supported only for --provider codewith, codex, or cursor",
        ),
        (
            "codex",
            &["--sandbox", "enabled"],
            "--sandbox must be read-only, workspace-write, or danger-full-access for codewith/codex",
        ),
        (
            "cursor",
            &["--sandbox", "read-only"],
            "--sandbox must be enabled or disabled for cursor",
        ),
        (
            "claude",
            &["--permission-mode", "yolo"],
            "--permission-mode must be default, plan, auto, or bypass",
        ),
        (
            "codex",
            &["--permission-mode", "plan"],
            "--permission-mode plan is currently supported only for claude or cursor",
        ),
        (
            "cursor",
            &["--permission-mode", "auto"],
            "--permission-mode auto is currently supported only for claude",
        ),
        (
            "claude",
            &["--env", "NOEQUALS"],
            "invalid --env value, expected key=value: NOEQUALS",
        ),
        (
            "claude",
            &["--env", "=value"],
            "--env has an invalid variable name \"\"; names must match [A-Za-z_][A-Za-z0-9_]*",
        ),
        (
            "claude",
            &["--timeout", "0"],
            "--timeout must be a duration greater than zero, or none/unlimited",
        ),
        (
            "claude",
            &["--timeout", "soon"],
            "--timeout must be a duration greater than zero, or none/unlimited",
        ),
        (
            "claude",
            &["--idle-timeout", "0"],
            "--idle-timeout must be a duration greater than zero, or none",
        ),
        (
            "cursor",
            &["--effort", "high"],
            "--effort is not supported for provider cursor",
        ),
        (
            "claude",
            &["--add-dir", "/srv"],
            "--add-dir is currently supported only for provider codewith or codex",
        ),
        (
            "codex",
            &["--add-dir", "/tmp/.."],
            "--add-dir must not resolve to a filesystem root",
        ),
        (
            "claude",
            &["--permission-mode", "bypass"],
            "--manual-break-glass is required when permissionMode=bypass",
        ),
        (
            "claude",
            &["--permission-mode", "bypass", "--manual-break-glass"],
            "--safety-reason is required when permissionMode=bypass",
        ),
        (
            "codex",
            &["--sandbox", "danger-full-access"],
            "--manual-break-glass is required when sandbox=danger-full-access",
        ),
        (
            "cursor",
            &["--sandbox", "disabled", "--manual-break-glass"],
            "--safety-reason is required when sandbox=disabled",
        ),
        (
            "claude",
            &["--allow-tool", "Read"],
            "--safety-reason is required when tool or command restrictions are declared",
        ),
        (
            "claude",
            &["--safety-reason", ""],
            "--safety-reason must be a non-empty string",
        ),
    ];
    for (provider, flags, message) in cases {
        let ran = env
            .loops(["create", "agent", "x", "--provider", provider])
            .args(["--prompt", "p", "--every", "1h"])
            .args(*flags)
            .code(1)
            .run();
        assert_eq!(
            ran.stderr.lines().next(),
            Some(format!("error: {message}").as_str()),
            "{provider} {flags:?}"
        );
    }
    assert_eq!(env.loops(["--json", "list"]).run().json(), json!([]));
}

#[test]
fn edit_sets_replaces_and_removes_each_option() {
    let env = TestEnv::new();
    fake_agents(&env);
    create(&env, "e", "codex", &["--effort", "high"]);
    let target = |env: &TestEnv| env.loops(["show", "e"]).run().json()["target"].clone();

    let ran = env
        .loops(["edit", "e", "--add-dir", "/a", "--add-dir", "/b,/c"])
        .args(["--allow-tool", "Read", "--safety-reason", "audited"])
        .args([
            "--idle-timeout",
            "5m",
            "--sandbox",
            "read-only",
            "--env",
            "CI=1",
        ])
        .run();
    assert!(
        ran.stdout
            .contains(": sandbox, add dirs, idle timeout, allowlist, env;"),
        "{}",
        ran.stdout
    );
    let t = target(&env);
    assert_eq!(t["addDirs"], json!(["/a", "/b", "/c"]));
    assert_eq!(t["idleTimeoutMs"], 300_000);
    assert_eq!(t["env"], json!({"CI": "[redacted]"}));
    assert_eq!(
        t["allowlist"],
        json!({"tools": ["Read"], "enforcement": "metadata_only", "safetyReason": "audited"})
    );
    // The next run has the new argv.
    assert_eq!(
        argv(&env, "e", "codex"),
        words(
            &env,
            &[
                &["-c", "model_reasoning_effort=\"high\""][..],
                &CODEX_EXEC,
                &[
                    "--sandbox",
                    "read-only",
                    "--skip-git-repo-check",
                    "--ignore-rules"
                ],
                &[
                    "--cd",
                    "{cwd}",
                    "--add-dir",
                    "/a",
                    "--add-dir",
                    "/b",
                    "--add-dir",
                    "/c"
                ],
            ]
            .concat()
        )
    );

    // A list given replaces the stored one.
    env.loops(["edit", "e", "--add-dir", "/d"]).run();
    assert_eq!(target(&env)["addDirs"], json!(["/d"]));

    // Bypass on codex with a restricted sandbox is not relaxed access;
    // removing the sandbox makes it danger-full-access, which needs
    // consent (agents note §12.1 rule 16).
    env.loops(["edit", "e", "--permission-mode", "bypass"])
        .run();
    env.loops(["edit", "e", "--sandbox", ""])
        .code(1)
        .stderr_has("error: --manual-break-glass is required when sandbox=danger-full-access")
        .run();
    env.loops(["edit", "e", "--sandbox", "", "--manual-break-glass"])
        .run();
    let t = target(&env);
    assert!(t.get("sandbox").is_none(), "{t}");
    assert_eq!(t["manualBreakGlass"], true);

    // '' removes a value or a list; --no-manual-break-glass the consent.
    env.loops([
        "edit",
        "e",
        "--effort",
        "",
        "--add-dir",
        "",
        "--allow-tool",
        "",
    ])
    .args([
        "--safety-reason",
        "",
        "--permission-mode",
        "",
        "--idle-timeout",
        "",
    ])
    .args(["--no-manual-break-glass", "--no-env"])
    .run();
    let t = target(&env);
    for key in [
        "variant",
        "addDirs",
        "allowlist",
        "permissionMode",
        "idleTimeoutMs",
        "manualBreakGlass",
        "env",
        "timeoutMs",
    ] {
        assert!(t.get(key).is_none(), "{key} in {t}");
    }

    // --timeout none and back: null, then absent again.
    env.loops(["edit", "e", "--timeout", "none"]).run();
    assert_eq!(target(&env)["timeoutMs"], Value::Null);
    env.loops(["edit", "e", "--timeout", ""]).run();
    assert!(target(&env).get("timeoutMs").is_none());
    env.loops(["edit", "e", "--timeout", "0"])
        .code(1)
        .stderr_has("error: --timeout must be a duration greater than zero, or none/unlimited")
        .run();

    // Edit checks the result with the stored provider.
    env.loops(["edit", "e", "--permission-mode", "plan"])
        .code(1)
        .stderr_has(
            "error: --permission-mode plan is currently supported only for claude or cursor",
        )
        .run();
    // And the agent options do not apply to a command loop.
    env.loops(["create", "command", "c", "--cmd", "true", "--every", "1h"])
        .run();
    env.loops(["edit", "c", "--effort", "high", "--idle-timeout", "1m"])
        .code(1)
        .stderr_has("error: --effort, --idle-timeout do not apply to c")
        .run();
    env.loops(["edit", "c", "--timeout", "none"])
        .code(1)
        .stderr_has("error: --timeout none is only for agent loops")
        .run();
}
