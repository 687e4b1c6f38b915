//! Issue 31, `loops export --format toml`: the stored loops as a loops
//! file. Applied to an empty store it makes the same loops (as `export
//! --format json` shows them), and exporting that store gives the same
//! file; `--label` and `--scope` pick loops; a setting no flag can say is
//! named in a warning.

use std::collections::BTreeMap;
use std::path::Path;

use loops_tests::TestEnv;
use serde_json::Value;

/// Loops of every kind, with most of `create`'s flags.
fn make_loops(env: &TestEnv) {
    let prompt = env.home().join("prompt.md");
    std::fs::write(&prompt, "Triage the new issues.\n").expect("the prompt file");
    let wf = env.home().join("wf.json");
    std::fs::write(
        &wf,
        r#"{"name": "nightly", "description": "two steps", "maxParallel": 2, "steps": [
            {"id": "build", "target": {"type": "command", "command": "make", "args": ["all"]}},
            {"id": "test", "dependsOn": ["build"], "target": {"type": "command", "command": "make test", "shell": true, "env": {"CI": "1"}}}
        ]}"#,
    )
    .expect("the workflow file");
    let watched = env.home().join("src");
    std::fs::create_dir_all(&watched).expect("the watched dir");
    let (prompt, wf, watched) = (path(&prompt), path(&wf), path(&watched));
    let cwd = path(&env.home());
    env.loops(["pools", "set", "gpu", "--max", "2"]).run();
    env.loops(["workflows", "create", &wf]).run();
    #[rustfmt::skip]
    let runs: [&[&str]; 7] = [
        &["command", "build", "--cmd", "make \"all\"", "--every", "90s", "--env", "A=1",
          "--env", "B=x y", "--label", "nightly", "--attempts", "3", "--retry-delay", "2m",
          "--backoff", "exponential", "--max-retry-delay", "1h", "--timeout", "1h30m",
          "--cwd", &cwd, "-d", "builds \u{202e}it"],
        &["command", "notify", "--cmd", "echo", "--no-shell", "--arg", "x", "--arg", "y z",
          "--cron", "*/5 * * * *", "--tz", "Europe/Berlin", "--after", "build:failed",
          "--catch-up", "all", "--catch-up-limit", "7", "--overlap", "allow",
          "--on-failure", "echo fail", "--on-success", "echo ok", "--hook-show-output",
          "--skip-exit-code", "3", "--cwd", &cwd],
        &["agent", "triage", "--provider", "codex", "--prompt-file", &prompt, "--dynamic",
          "--sandbox", "read-only", "--effort", "high", "--idle-timeout", "20m",
          "--timeout", "none", "--allow-tool", "Read", "--allow-command", "git status",
          "--safety-reason", "read only", "--max-cost-per-day", "0.5", "--runs-on", "gpu",
          "--pool", "gpu", "--label", "nightly", "--model", "o3", "--add-dir", "/tmp",
          "--cwd", &cwd],
        &["agent", "review", "--provider", "claude", "--prompt", "Review\tthe diff\n",
          "--every", "1d", "--permission-mode", "plan", "--worktree", "auto",
          "--keep-worktree", "--env", "K=v", "--lease", "10m", "--cwd", &cwd],
        &["workflow", "nightly-run", "--workflow", "nightly", "--cron", "0 3 * * *",
          "--tz", "UTC", "--timeout", "2h", "--after", "notify"],
        &["command", "on-change", "--cmd", "true", "--trigger-only", "--watch", &watched,
          "--debounce", "500ms", "--expires-after-runs", "5", "--pause-after-failures", "2",
          "--expires-at", "2030-01-01T00:00:00Z", "--cwd", &cwd],
        &["command", "once", "--cmd", "true", "--at", "2030-01-01T10:00:00Z", "--cwd", &cwd],
    ];
    for args in runs {
        let mut argv = vec!["create"];
        argv.extend_from_slice(args);
        env.loops(argv).run();
    }
}

fn path(p: &Path) -> String {
    p.to_str().expect("a UTF-8 path").to_owned()
}

/// Exports `env`'s loops as TOML to `file`; its stderr, which must hold
/// no warning.
fn export_toml(env: &TestEnv, file: &Path) -> String {
    let ran = env
        .loops(["export", "--format", "toml", "--file", &path(file)])
        .run();
    assert!(!ran.stderr.contains("warning"), "{}", ran.stderr);
    std::fs::read_to_string(file).expect("the exported file")
}

/// The loops of `export --format json` by name, without what the store
/// assigns (ids, times, the next run, the scope); upstream loops and
/// workflows by name.
fn json_loops(env: &TestEnv) -> BTreeMap<String, Value> {
    let doc = env
        .loops(["export", "--file", "-", "--no-runs"])
        .run()
        .json();
    let workflows: BTreeMap<String, String> = doc["workflows"]
        .as_array()
        .expect("workflows")
        .iter()
        .map(|w| {
            (
                w["id"].as_str().unwrap_or_default().to_owned(),
                w["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let loops = doc["loops"].as_array().expect("loops");
    let names: BTreeMap<String, String> = loops
        .iter()
        .map(|l| {
            (
                l["id"].as_str().unwrap_or_default().to_owned(),
                l["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    loops
        .iter()
        .map(|l| {
            let mut l = l.clone();
            let o = l.as_object_mut().expect("a loop");
            for key in ["id", "createdAt", "updatedAt", "nextRunAt", "scope"] {
                o.remove(key);
            }
            if let Some(Value::Array(edges)) = o.get_mut("after") {
                for e in edges {
                    e["loop"] = names[e["loop"].as_str().expect("an id")].clone().into();
                }
            }
            if let Some(id) = o["target"].get("workflowId").and_then(Value::as_str) {
                o["target"]["workflowId"] = workflows[id].clone().into();
            }
            if o.get("triggerOnly") == Some(&Value::Bool(true)) {
                // A placeholder schedule nothing reads.
                o.remove("schedule");
            }
            (o["name"].as_str().expect("name").to_owned(), l)
        })
        .collect()
}

#[test]
fn a_toml_export_applied_to_an_empty_store_makes_the_same_loops_and_file() {
    let a = TestEnv::new();
    make_loops(&a);
    let file = a.home().join("exported.toml");
    let text = export_toml(&a, &file);
    // Defaults are left out; hidden characters are escapes.
    assert!(!text.contains("catch-up = \"latest\""), "{text}");
    assert!(
        text.contains("description = \"builds \\u202Eit\""),
        "{text}"
    );
    assert!(!text.contains('\u{202e}'));
    // A loop comes after the loop it runs after.
    let at = |name: &str| text.find(&format!("name = \"{name}\"")).expect(name);
    assert!(at("build") < at("notify") && at("notify") < at("nightly-run"));

    let b = TestEnv::new();
    b.loops(["pools", "set", "gpu", "--max", "2"]).run();
    b.loops(["apply", &path(&file)])
        .stdout_has("7 created")
        .run();
    b.loops(["apply", &path(&file)])
        .stdout_has("no changes (7 unchanged)")
        .run();
    let again = export_toml(&b, &b.home().join("again.toml"));
    assert_eq!(again, text);
    let (from_a, from_b) = (json_loops(&a), json_loops(&b));
    assert_eq!(from_a.len(), 7);
    for (name, lp) in &from_a {
        assert_eq!(Some(lp), from_b.get(name), "loop {name}");
    }
}

#[test]
fn label_and_scope_pick_the_loops_and_a_lost_setting_is_a_warning() {
    let env = TestEnv::new();
    let dir = env.home().join("setup");
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("team.toml");
    std::fs::write(
        &file,
        "[[loop]]\nname = \"managed\"\nkind = \"command\"\nevery = \"1h\"\ncmd = \"true\"\n",
    )
    .expect("file");
    env.loops(["apply", &path(&file), "--scope", "team"]).run();
    env.loops([
        "create",
        "command",
        "labelled",
        "--every",
        "1h",
        "--cmd",
        "true",
        "--label",
        "nightly,ops",
    ])
    .run();
    env.loops([
        "create", "command", "plain", "--every", "1h", "--cmd", "true",
    ])
    .run();
    let names = |args: &[&str]| -> Vec<String> {
        let mut argv = vec!["export", "--format", "toml", "--file", "-"];
        argv.extend_from_slice(args);
        let text = env.loops(argv).run().stdout;
        let doc: toml::Table = toml::from_str(&text).expect("TOML");
        doc.get("loop")
            .and_then(|l| l.as_array())
            .map(|l| {
                l.iter()
                    .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(names(&["--scope", "team"]), ["managed"]);
    assert_eq!(
        names(&["--label", "nightly", "--label", "ops"]),
        ["labelled"]
    );
    assert_eq!(names(&["--label", "nightly,missing"]), Vec::<String>::new());
    assert_eq!(names(&[]).len(), 3);
    env.loops(["export", "--file", "-", "--label", "nightly"])
        .code(1)
        .stderr_has("--label and --scope pick the loops of a --format toml export")
        .run();
    // An interval the original wrote has no anchor; no flag says that.
    env.raw().exec(
        "UPDATE loops SET schedule_json = '{\"type\":\"interval\",\"everyMs\":3600000}' \
         WHERE name = 'plain'",
    );
    let ran = env
        .loops(["export", "--format", "toml", "--file", "-", "--label", "x"])
        .run();
    assert!(!ran.stderr.contains("warning"), "{}", ran.stderr);
    env.loops(["export", "--format", "toml", "--file", "-"])
        .stderr_has("warning: loop plain: schedule.anchor cannot be written in a loops file")
        .run();
}
