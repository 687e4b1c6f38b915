//! `loops workflows …` without running steps, and `loops create workflow`:
//! workflow files and their validation, stored workflows, lookups, help
//! and the schema (SPEC §6.1, §7.3, §7.4; §10 items 72 and 87). Runs are in
//! `workflow_runs`; cancelling, signals and recovery in `workflow_control`.

use std::path::PathBuf;

use loops_tests::{TestEnv, snapshot_settings};
use serde_json::{Value, json};

/// Writes `workflow` as a JSON file in the test's home and returns its path.
pub(crate) fn workflow_file(env: &TestEnv, file: &str, workflow: &Value) -> String {
    let path: PathBuf = env.home().join(file);
    let text = serde_json::to_string_pretty(workflow).expect("JSON values serialize");
    std::fs::write(&path, text).expect("a workflow file");
    path.display().to_string()
}

/// Stores `workflow` and returns its id.
pub(crate) fn create_workflow(env: &TestEnv, workflow: &Value) -> String {
    let file = workflow_file(env, "workflow.json", workflow);
    let created = env.loops(["--json", "workflows", "create", &file]).run();
    created.json()["id"]
        .as_str()
        .expect("create --json prints the workflow id")
        .to_owned()
}

/// A command step run directly (no shell).
pub(crate) fn exec_step(id: &str, command: &str, depends_on: &[&str]) -> Value {
    json!({
        "id": id,
        "target": {"type": "command", "command": command},
        "dependsOn": depends_on,
    })
}

/// A command step run through `/bin/sh -c`.
pub(crate) fn shell_step(id: &str, script: &str, depends_on: &[&str]) -> Value {
    json!({
        "id": id,
        "target": {"type": "command", "command": script, "shell": true},
        "dependsOn": depends_on,
    })
}

fn two_steps() -> Value {
    json!({
        "name": "deploy",
        "description": "build then test",
        "steps": [exec_step("build", "true", &[]), exec_step("test", "true", &["build"])],
    })
}

#[test]
fn validate_checks_a_file_without_opening_the_store() {
    let env = TestEnv::new();
    let file = workflow_file(&env, "w.json", &two_steps());
    env.loops(["workflows", "validate", &file])
        .stdout("valid workflow deploy steps=2\n")
        .run();
    env.loops(["workflow", "validate", &file, "--name", "other"])
        .stdout("valid workflow other steps=2\n")
        .run();
    let report = env
        .loops(["--json", "workflows", "validate", &file])
        .run()
        .json();
    assert_eq!(report["valid"], true);
    assert_eq!(report["workflow"]["id"], "validation");
    assert_eq!(report["workflow"]["name"], "deploy");
    assert_eq!(report["workflow"]["status"], "active");
    assert_eq!(report["workflow"]["version"], 1);
    assert_eq!(
        report["workflow"]["steps"][1]["dependsOn"],
        json!(["build"])
    );
    assert_eq!(report["workflow"]["steps"][1]["continueOnFailure"], false);
    assert!(report.get("preflight").is_none());
    assert!(!env.data_dir().exists(), "validate created the data dir");
}

#[test]
fn validate_preflight_checks_each_step_in_order() {
    let env = TestEnv::new();
    // A fake agent CLI on PATH.
    env.write_script("claude", "exit 0");
    let workflow = json!({
        "name": "review",
        "steps": [
            exec_step("check", "true", &[]),
            {"id": "ask", "target": {"type": "agent", "provider": "claude", "prompt": "review"}},
        ],
    });
    let file = workflow_file(&env, "w.json", &workflow);
    let report = env
        .loops(["--json", "workflows", "validate", &file, "--preflight"])
        .run()
        .json();
    assert_eq!(
        report["preflight"],
        json!([{"command": "true"}, {"command": "claude", "accountTool": "claude"}])
    );
    let ran = env
        .loops(["workflows", "validate", &file, "--preflight"])
        .run();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "valid workflow review steps=2",
            "  check  true",
            "  ask    claude"
        ]
    );

    let missing = json!({
        "name": "broken",
        "steps": [exec_step("ok", "true", &[]), exec_step("gone", "no-such-binary-for-loops", &[])],
    });
    let file = workflow_file(&env, "broken.json", &missing);
    // Without --preflight the file is valid; with it, the missing binary fails.
    env.loops(["workflows", "validate", &file]).run();
    let ran = env
        .loops(["workflows", "validate", &file, "--preflight"])
        .code(1)
        .stderr_has("Executable not found in PATH: no-such-binary-for-loops")
        .run();
    assert!(ran.stdout.is_empty(), "{}", ran.stdout);
}

#[test]
fn invalid_workflows_are_rejected_with_the_core_message() {
    let env = TestEnv::new();
    let cases = [
        (json!([]), "workflow file must be an object"),
        (
            json!({"name": " ", "steps": []}),
            "workflow.name must be a non-empty string",
        ),
        (
            json!({"name": "w", "steps": []}),
            "workflow.steps must contain at least one step",
        ),
        (
            json!({"name": "w", "steps": [exec_step("a", "true", &[]), exec_step("a", "true", &[])]}),
            "duplicate workflow step id: a",
        ),
        (
            json!({"name": "w", "steps": [exec_step("a", "git status --short", &[])]}),
            "workflow.steps[0].target.command must be an executable without spaces when shell is false",
        ),
        (
            json!({"name": "w", "steps": [exec_step("a", "true", &[]), exec_step("b", "true", &["zz"])]}),
            "step b depends on missing step zz",
        ),
        (
            json!({"name": "w", "steps": [exec_step("a", "true", &["a"])]}),
            "step a cannot depend on itself",
        ),
        (
            json!({"name": "w", "steps": [
                exec_step("a", "true", &["c"]),
                exec_step("b", "true", &["a"]),
                exec_step("c", "true", &["b"]),
            ]}),
            "workflow dependency cycle includes step a",
        ),
    ];
    for (workflow, message) in cases {
        let file = workflow_file(&env, "bad.json", &workflow);
        for verb in ["validate", "create"] {
            let ran = env.loops(["workflows", verb, &file]).code(1).run();
            assert!(
                ran.stderr.starts_with(&format!("error: {message}")),
                "{verb} {workflow}: {}",
                ran.stderr
            );
        }
    }
    let file = env.home().join("not-json.json");
    std::fs::write(&file, "{ nope").unwrap();
    env.loops(["workflows", "validate", file.to_str().unwrap()])
        .code(1)
        .stderr_has("is not valid JSON")
        .run();
    env.loops(["workflows", "validate", "/no/such/workflow.json"])
        .code(1)
        .stderr_has("error: cannot read workflow file /no/such/workflow.json")
        .run();
    // Nothing was stored.
    assert_eq!(
        env.loops(["--json", "workflows", "list"]).run().json(),
        json!([])
    );
}

#[test]
fn create_list_show_and_archive() {
    let env = TestEnv::new();
    let file = workflow_file(&env, "w.json", &two_steps());
    let ran = env.loops(["workflows", "create", &file]).run();
    let id = ran
        .stdout
        .strip_prefix("created workflow ")
        .and_then(|rest| rest.strip_suffix(" (deploy) steps=2\n"))
        .unwrap_or_else(|| panic!("{}", ran.stdout))
        .to_owned();
    assert_eq!(id.len(), 12);

    // One active workflow per name.
    env.loops(["workflows", "create", &file])
        .code(1)
        .stderr_has("error: an active workflow named \"deploy\" already exists")
        .run();

    // Piped: no rule (issue 28).
    env.loops(["workflows", "list"])
        .stdout(&format!(
            "ID            STATUS  STEPS  NAME\n{id}  active  2      deploy\n"
        ))
        .run();
    let shown = env.loops(["workflows", "show", "deploy"]).run().json();
    assert_eq!(shown["id"], id.as_str());
    assert_eq!(shown["description"], "build then test");
    assert_eq!(shown, env.loops(["workflow", "show", &id]).run().json());

    env.loops(["workflows", "archive", "deploy"])
        .stdout(&format!("{id} archived\n"))
        .run();
    env.loops(["workflows", "ls"]).stdout("").run();
    let archived = env
        .loops(["--json", "workflows", "ls", "--status", "archived"])
        .run()
        .json();
    assert_eq!(archived[0]["id"], id.as_str());
    // An archived workflow is found by id only.
    env.loops(["workflows", "show", "deploy"])
        .code(1)
        .stderr_has("error: workflow not found: deploy")
        .run();
    assert_eq!(
        env.loops(["workflows", "show", &id]).run().json()["status"],
        "archived"
    );
    // Its name is free again.
    let second = create_workflow(&env, &two_steps());
    assert_ne!(second, id);

    env.loops(["workflows", "ls", "--status", "gone"])
        .code(1)
        .stderr_has("error: --status must be active or archived")
        .run();
    env.loops(["workflows", "ls", "--limit", "0"])
        .code(1)
        .stderr_has("error: --limit must be a positive integer")
        .run();
}

#[test]
fn list_caps_with_a_footer() {
    let env = TestEnv::new();
    for name in ["a", "b", "c"] {
        let mut w = two_steps();
        w["name"] = json!(name);
        create_workflow(&env, &w);
    }
    let ran = env.loops(["workflows", "list", "--limit", "2"]).run();
    // A header and two rows (piped: no rule); the note on stderr.
    assert_eq!(ran.stdout.lines().count(), 3, "{}", ran.stdout);
    assert_eq!(
        ran.stderr,
        "showing the first 2 active workflows; raise --limit to see more\n"
    );
    let ran = env.loops(["workflows", "list", "--limit", "3"]).run();
    assert_eq!(ran.stdout.lines().count(), 4);
    assert_eq!(ran.stderr, "");
}

#[test]
fn unknown_workflows_and_runs_exit_1() {
    let env = TestEnv::new();
    for args in [
        vec!["show", "nope"],
        vec!["run", "nope"],
        vec!["archive", "nope"],
        vec!["runs", "nope"],
    ] {
        env.loops(["workflows"])
            .args(&args)
            .code(1)
            .stderr_has("error: workflow not found: nope\n")
            .stderr_has("hint: run `loops workflows list`")
            .run();
    }
    for verb in ["inspect", "events", "cancel", "recover"] {
        for id in ["nope", "0123456789ab"] {
            env.loops(["workflows", verb, id])
                .code(1)
                .stderr_has(&format!("error: workflow run not found: {id}\n"))
                .run();
        }
    }
    env.loops(["workflows"]).code(2).run();
    env.loops(["workflows", "frobnicate"]).code(2).run();
}

#[test]
fn workflows_help_lists_every_command() {
    let env = TestEnv::new();
    let ran = env.loops(["workflows", "--help"]).run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("workflows_help", ran.stdout);
}

#[test]
fn create_workflow_help_documents_every_flag() {
    let env = TestEnv::new();
    let ran = env.loops(["create", "workflow", "--help"]).run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("create_workflow_help", ran.stdout);
}

#[test]
fn create_workflow_takes_the_loop_options_and_a_timeout() {
    let env = TestEnv::new();
    let workflow_id = create_workflow(&env, &two_steps());
    let lp = env
        .loops([
            "--json",
            "create",
            "workflow",
            "hourly",
            "--workflow",
            &workflow_id,
            "--every",
            "1h",
            "--timeout",
            "5m",
            "--attempts",
            "3",
            "-d",
            "deploys hourly",
        ])
        .run()
        .json();
    assert_eq!(
        lp["target"],
        json!({"type": "workflow", "workflowId": workflow_id, "timeoutMs": 300000})
    );
    assert_eq!(
        lp["schedule"],
        json!({"type": "interval", "everyMs": 3600000, "anchor": "fixed_rate"})
    );
    assert_eq!(lp["maxAttempts"], 3);
    assert_eq!(lp["description"], "deploys hourly");

    // `--timeout 0` means no workflow timeout (SPEC §1.3).
    let lp = env
        .loops([
            "--json",
            "create",
            "workflow",
            "w0",
            "--workflow",
            "deploy",
            "--every",
            "1h",
            "--timeout",
            "0",
        ])
        .run()
        .json();
    assert!(lp["target"].get("timeoutMs").is_none(), "{lp}");

    let rejects = |args: &[&str], message: &str| {
        let ran = env
            .loops(["create", "workflow", "x"])
            .args(args)
            .code(1)
            .run();
        assert_eq!(
            ran.stderr.lines().next(),
            Some(format!("error: {message}").as_str())
        );
    };
    rejects(
        &["--workflow", "missing", "--every", "1m"],
        "workflow not found: missing",
    );
    rejects(
        &["--workflow", "deploy"],
        "choose exactly one schedule: --at, --every, --cron, or --dynamic",
    );
    rejects(
        &["--workflow", "deploy", "--every", "1m", "--timeout", "soon"],
        "invalid duration: soon (use a number and a unit: 500ms, 30s, 5m, 1h, 1d, or a sum \
         such as 1h30m; a bare number of 1000 or more is milliseconds)",
    );
    env.loops(["create", "workflow", "x", "--every", "1m"])
        .code(2)
        .stderr_has("--workflow <WORKFLOW>")
        .run();
    assert_eq!(
        env.loops(["--json", "list"])
            .run()
            .json()
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}

#[test]
fn schema_is_the_committed_file() {
    let env = TestEnv::new();
    let ran = env.loops(["workflows", "schema"]).run();
    let committed_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../schemas/workflow.schema.json"
    );
    let committed = std::fs::read_to_string(committed_path).unwrap_or_default();
    assert!(
        ran.stdout == committed,
        "schemas/workflow.schema.json is not the schema `loops workflows schema` prints; \
         regenerate it with `cargo run -q -p loops-cli -- workflows schema > schemas/workflow.schema.json`"
    );
    let schema: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert!(schema["properties"]["steps"].is_object(), "{schema}");
}

/// Writes `text` as a workflow file in the test's home; returns its path.
fn raw_workflow_file(env: &TestEnv, file: &str, text: &str) -> String {
    let path: PathBuf = env.home().join(file);
    std::fs::write(&path, text).expect("a workflow file");
    path.display().to_string()
}

#[test]
fn a_duplicate_key_is_an_error_and_a_byte_order_mark_is_skipped() {
    let env = TestEnv::new();
    // serde_json alone would keep the last "steps", the empty one.
    let twice = raw_workflow_file(
        &env,
        "twice.json",
        r#"{"name": "w", "steps": [{"id": "a", "target": {"type": "command", "command": "true"}}],
"steps": []}"#,
    );
    for verb in ["validate", "create"] {
        env.loops(["workflows", verb, &twice])
            .code(1)
            .stderr_has(&format!(
                "error: workflow file {twice}: duplicate key \"steps\": each key may appear once \
                 in an object; remove or rename one at line 2 column 7"
            ))
            .run();
    }
    // Inside a step too.
    let inner = raw_workflow_file(
        &env,
        "inner.json",
        r#"{"name": "w", "steps": [{"id": "a", "id": "b",
"target": {"type": "command", "command": "true"}}]}"#,
    );
    env.loops(["workflows", "validate", &inner])
        .code(1)
        .stderr_has("duplicate key \"id\"")
        .run();
    // A UTF-8 byte-order mark, as some editors write, is not an error.
    let bom = raw_workflow_file(
        &env,
        "bom.json",
        "\u{feff}{\"name\": \"w\", \"steps\": [{\"id\": \"a\", \"target\": {\"type\": \
         \"command\", \"command\": \"true\"}}]}",
    );
    env.loops(["workflows", "validate", &bom])
        .stdout("valid workflow w steps=1\n")
        .run();
    assert_eq!(
        env.loops(["--json", "workflows", "list"]).run().json(),
        json!([])
    );
}

#[test]
fn unknown_keys_are_warned_about_with_the_nearest_known_key() {
    let env = TestEnv::new();
    let file = workflow_file(
        &env,
        "w.json",
        &json!({
            "name": "w",
            "maxparallel": 2,
            "steps": [
                exec_step("a", "true", &[]),
                {"id": "b", "depends_on": ["a"], "target": {"type": "command", "command": "true"}},
                {"id": "c", "target": {"type": "agent", "provider": "codex", "prompt": "p",
                    "modle": "m"}},
            ],
        }),
    );
    let ran = env
        .loops(["workflows", "validate", &file])
        .stdout("valid workflow w steps=3\n")
        .run();
    assert_eq!(
        ran.stderr,
        "warning: workflow has an unknown key \"maxparallel\"; did you mean \"maxParallel\"?\n\
         warning: workflow.steps[1] has an unknown key \"depends_on\"; did you mean \
         \"dependsOn\"?\n\
         warning: workflow.steps[2].target has an unknown key \"modle\"; did you mean \
         \"model\"?\n"
    );
    // The warnings follow an error they may explain.
    let file = workflow_file(&env, "bad.json", &json!({"name": "w", "step": []}));
    let ran = env.loops(["workflows", "create", &file]).code(1).run();
    assert_eq!(
        ran.stderr,
        "error: workflow.steps must be an array\n\
         warning: workflow has an unknown key \"step\"; did you mean \"steps\"?\n"
    );
    // A valid file's warnings come after the command's outcome: an error
    // found later (the name is taken) stays the first line of stderr.
    let file = workflow_file(
        &env,
        "taken.json",
        &json!({"name": "taken", "extra": 1, "steps": [exec_step("a", "true", &[])]}),
    );
    let created = env.loops(["workflows", "create", &file]).run();
    assert_eq!(
        created.stderr,
        "warning: workflow has an unknown key \"extra\"; known keys are name, description, \
         version, maxParallel, steps\n"
    );
    let ran = env.loops(["workflows", "create", &file]).code(1).run();
    assert!(
        ran.stderr
            .starts_with("error: an active workflow named \"taken\" already exists"),
        "{}",
        ran.stderr
    );
}

#[test]
fn workflow_file_timeouts_and_prompts_are_checked_as_the_cli_checks_them() {
    let env = TestEnv::new();
    let agent = |prompt: &str| {
        json!({"name": "w", "steps": [{"id": "a", "target":
            {"type": "agent", "provider": "claude", "prompt": prompt}}]})
    };
    let cases = [
        (
            json!({"name": "w", "steps": [{"id": "a", "timeoutMs": 3_153_600_000_001u64,
                "target": {"type": "command", "command": "true"}}]}),
            "workflow.steps[0].timeoutMs must be at most 3153600000000 (100 years), got \
             3153600000001; use a shorter timeout",
        ),
        (
            json!({"name": "w", "steps": [{"id": "a", "target": {"type": "command",
                "command": "true", "timeoutMs": 1e15}}]}),
            "workflow.steps[0].target.timeoutMs must be at most 3153600000000 (100 years), got \
             1000000000000000; use a shorter timeout",
        ),
        (
            agent("--dangerously-skip-permissions"),
            "workflow.steps[0].target.prompt must not begin with \"-\": the agent would read it \
             as an option, not as its prompt; start it with another character, for example \
             \"Task: --fix\" or \" --fix\" with a leading space",
        ),
    ];
    for (workflow, message) in cases {
        let file = workflow_file(&env, "w.json", &workflow);
        env.loops(["workflows", "validate", &file])
            .code(1)
            .stderr_has(&format!("error: {message}\n"))
            .run();
    }
    let file = workflow_file(&env, "ok.json", &agent(" --dangerously-skip-permissions"));
    env.loops(["workflows", "validate", &file]).run();
}
