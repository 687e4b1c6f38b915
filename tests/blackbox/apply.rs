//! Issue 31, loops as code: `loops apply` plans and carries out creates,
//! updates in place, replacements and `--prune` removals; a bad file
//! names `file:line:col` and changes nothing; a loop made elsewhere is a
//! conflict unless `--adopt`.

use std::path::{Path, PathBuf};

use loops_tests::TestEnv;
use serde_json::Value;

const FILE: &str = r#"
[[loop]]
name = "backup"
kind = "command"
every = "6h"
cmd = "./backup.sh"
env = { TARGET = "s3://bucket-secret" }
label = ["ops"]

[[loop]]
name = "report"
kind = "command"
cron = "0 9 * * 1-5"
tz = "UTC"
cmd = "make report"
"#;

fn write(env: &TestEnv, name: &str, text: &str) -> PathBuf {
    let dir = env.home().join("setup");
    std::fs::create_dir_all(&dir).expect("the setup dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("the loops file");
    path
}

fn apply(env: &TestEnv, path: &Path, extra: &[&str]) -> Value {
    let p = path.to_str().expect("a UTF-8 path");
    let mut args = vec!["--json", "apply", p];
    args.extend_from_slice(extra);
    let code = if extra.contains(&"--dry-run") { 2 } else { 0 };
    env.loops(args).code(code).run().json()
}

fn actions(plan: &Value) -> Vec<(String, String)> {
    plan["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["action"].as_str().unwrap_or_default().to_owned(),
                s["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pair(action: &str, name: &str) -> (String, String) {
    (action.to_owned(), name.to_owned())
}

#[test]
fn apply_creates_then_changes_nothing_then_updates_in_place() {
    let env = TestEnv::new();
    let path = write(&env, "loops.toml", FILE);
    let p = path.to_str().expect("a UTF-8 path");
    // A dry run: the plan, exit 2, nothing written.
    let plan = apply(&env, &path, &["--dry-run"]);
    assert_eq!(plan["dryRun"], true);
    assert_eq!(
        actions(&plan),
        [pair("create", "backup"), pair("create", "report")]
    );
    assert_eq!(
        env.loops(["--json", "list"]).run().json(),
        serde_json::json!([])
    );

    env.loops(["apply", p])
        .stdout_has("+ create backup (command)")
        .stdout_has("applied: 2 created, 0 updated, 0 replaced, 0 removed, 0 unchanged")
        .run();
    let backup = env.loops(["--json", "show", "backup"]).run().json();
    let scope = std::fs::canonicalize(&path).expect("canonical");
    assert_eq!(backup["scope"], scope.to_str().expect("utf-8"));
    // A relative cwd-less command runs in the file's directory.
    assert_eq!(
        backup["target"]["cwd"],
        path.parent().and_then(|d| d.to_str()).expect("the dir")
    );

    // Twice: no changes, exit 0, also as a dry run.
    env.loops(["apply", p])
        .stdout_has("no changes (2 unchanged)")
        .run();
    env.loops(["apply", p, "--dry-run"]).run();

    // An edit of the file updates in place: same id, each field said.
    std::fs::write(&path, FILE.replace("every = \"6h\"", "every = \"12h\"")).expect("edit");
    let ran = env.loops(["apply", p, "--dry-run"]).code(2).run();
    assert!(
        ran.stdout.contains(&format!(
            "~ update backup ({})",
            backup["id"].as_str().expect("id")
        )),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("    schedule.everyMs: 21600000 → 43200000")
    );
    let plan = apply(&env, &path, &[]);
    assert_eq!(plan["steps"][0]["changes"][0]["field"], "schedule.everyMs");
    let after = env.loops(["--json", "show", "backup"]).run().json();
    assert_eq!(after["id"], backup["id"]);
    assert_eq!(after["schedule"]["everyMs"], 43_200_000);
    // A changed secret is said, never shown.
    std::fs::write(&path, FILE.replace("bucket-secret", "other-secret")).expect("edit");
    let ran = env.loops(["apply", p, "--dry-run"]).code(2).run();
    assert!(
        ran.stdout
            .contains("target.env: [redacted] → [redacted, changed]")
    );
    assert!(!ran.stdout.contains("secret"), "{}", ran.stdout);
}

#[test]
fn prune_removes_only_the_scopes_loops_and_a_new_kind_needs_yes() {
    let env = TestEnv::new();
    let path = write(&env, "loops.toml", FILE);
    apply(&env, &path, &[]);
    env.loops([
        "create", "command", "by-hand", "--every", "1h", "--cmd", "true",
    ])
    .run();
    // report leaves the file; without --prune it stays.
    let only_backup = FILE
        .split("[[loop]]\nname = \"report\"")
        .next()
        .expect("part");
    std::fs::write(&path, only_backup).expect("edit");
    let plan = apply(&env, &path, &[]);
    assert_eq!(actions(&plan), [pair("unchanged", "backup")]);
    let plan = apply(&env, &path, &["--prune"]);
    assert_eq!(
        actions(&plan),
        [pair("unchanged", "backup"), pair("remove", "report")]
    );
    env.loops(["show", "report"]).code(1).run();
    env.loops(["show", "by-hand"]).run();

    // backup becomes a workflow-less agent: a replacement, with --yes.
    let agent = "[[loop]]\nname = \"backup\"\nkind = \"agent\"\nevery = \"6h\"\n\
                 provider = \"claude\"\nprompt = \"back it up\"\n";
    std::fs::write(&path, agent).expect("edit");
    let p = path.to_str().expect("utf-8");
    env.loops(["apply", p])
        .code(1)
        .stderr_has("the kind of backup changed, so it is replaced")
        .run();
    let plan = apply(&env, &path, &["--yes"]);
    assert_eq!(actions(&plan), [pair("replace", "backup")]);
    let shown = env.loops(["--json", "show", "backup"]).run().json();
    assert_eq!(shown["target"]["type"], "agent");
}

#[test]
fn a_bad_file_names_file_line_and_column_and_changes_nothing() {
    let env = TestEnv::new();
    let bad_key = write(
        &env,
        "bad.toml",
        "[[loop]]\nname = \"x\"\nkind = \"command\"\nevry = \"5m\"\ncmd = \"true\"\n",
    );
    let shown = bad_key.display();
    env.loops(["apply", bad_key.to_str().expect("utf-8")])
        .code(1)
        .stderr_has(&format!(
            "{shown}:4:1: unknown key \"evry\" for a command loop"
        ))
        .run();
    let bad_value = write(
        &env,
        "bad.toml",
        "[[loop]]\nname = \"x\"\nkind = \"command\"\ncmd = \"true\"\nevery = \"5 parsecs\"\n",
    );
    env.loops(["apply", bad_value.to_str().expect("utf-8")])
        .code(1)
        .stderr_has(&format!("{shown}:5:1: every: invalid duration: 5 parsecs"))
        .run();
    let syntax = write(&env, "bad.toml", "[[loop]]\nname = \n");
    env.loops(["apply", syntax.to_str().expect("utf-8")])
        .code(1)
        .stderr_has(&format!("{shown}:2:"))
        .run();
    // The first loop is fine, the second is not: nothing at all is made.
    let half = format!("{FILE}\n[[loop]]\nname = \"z\"\nkind = \"command\"\nevery = \"1h\"\n");
    let half = write(&env, "half.toml", &half);
    env.loops(["apply", half.to_str().expect("utf-8")])
        .code(1)
        .stderr_has("the following required arguments were not provided: --cmd")
        .run();
    assert_eq!(
        env.loops(["--json", "list"]).run().json(),
        serde_json::json!([])
    );
}

#[test]
fn a_loop_made_elsewhere_is_a_conflict_until_adopted_and_json_files_work() {
    let env = TestEnv::new();
    env.loops([
        "create", "command", "backup", "--every", "1h", "--cmd", "true",
    ])
    .run();
    let path = write(&env, "loops.toml", FILE);
    let p = path.to_str().expect("utf-8");
    env.loops(["apply", p])
        .code(1)
        .stderr_has("loop backup (")
        .stderr_has("exists, made by hand; pass --adopt")
        .run();
    env.loops(["show", "report"]).code(1).run();
    let plan = apply(&env, &path, &["--adopt", "--scope", "team"]);
    assert_eq!(
        actions(&plan),
        [pair("update", "backup"), pair("create", "report")]
    );
    let shown = env.loops(["--json", "show", "backup"]).run().json();
    assert_eq!(shown["scope"], "team");

    // The same structure as JSON, included from a TOML file.
    let json = r#"{"loop": [{"name": "nightly", "kind": "command", "every": "1d",
                   "cmd": "true", "attempts": 2}]}"#;
    write(&env, "more.json", json);
    let top = write(
        &env,
        "top.toml",
        "include = [\"more.json\", \"loops.toml\"]\n",
    );
    let plan = apply(&env, &top, &["--scope", "team", "--dry-run"]);
    assert_eq!(
        actions(&plan),
        [
            pair("create", "nightly"),
            pair("unchanged", "backup"),
            pair("unchanged", "report")
        ]
    );
}

#[test]
fn two_applies_at_once_make_each_loop_once() {
    let env = TestEnv::new();
    // A store first, so both start from the same database.
    env.loops([
        "create", "command", "seed", "--every", "1h", "--cmd", "true",
    ])
    .run();
    let path = write(&env, "loops.toml", FILE);
    let p = path.to_str().expect("utf-8");
    let children: Vec<_> = (0..4).map(|_| env.spawn(&["apply", p])).collect();
    for child in children {
        let out = child.wait_with_output().expect("apply ends");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let listed = env.loops(["--json", "list"]).run().json();
    let mut names: Vec<&str> = listed
        .as_array()
        .expect("loops")
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["backup", "report", "seed"]);
}

#[test]
fn the_loops_file_schema_is_the_committed_file_and_names_creates_flags() {
    let env = TestEnv::new();
    let ran = env.loops(["schema", "loops-file"]).run();
    let committed_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../schemas/loops-file.schema.json"
    );
    let committed = std::fs::read_to_string(committed_path).unwrap_or_default();
    assert!(
        ran.stdout == committed,
        "schemas/loops-file.schema.json is not the schema `loops schema loops-file` prints; \
         regenerate it with `cargo run -q -p loops-cli -- schema loops-file > schemas/loops-file.schema.json`"
    );
    let schema: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    let kinds = schema["properties"]["loop"]["items"]["oneOf"]
        .as_array()
        .expect("one schema per kind");
    assert_eq!(kinds.len(), 3);
    let command = &kinds[0]["properties"];
    assert_eq!(command["kind"]["const"], "command");
    assert_eq!(command["dynamic"]["type"], "boolean");
    assert!(command["every"].is_object() && command["cmd"].is_object());
    assert!(command.get("dry-run").is_none(), "not a key of a loop");
    assert_eq!(kinds[1]["properties"]["kind"]["const"], "agent");
    assert!(kinds[1]["properties"]["prompt-file"].is_object());
    // The workflow file's schema too, as `workflows schema` prints it.
    let workflow = env.loops(["schema", "workflow"]).run();
    let same = env.loops(["workflows", "schema"]).run();
    assert_eq!(workflow.stdout, same.stdout);
}

#[test]
fn workflow_tables_come_first_and_a_changed_one_is_a_new_version() {
    let env = TestEnv::new();
    let step = |command: &str| {
        format!(
            "{{\"steps\": [{{\"id\": \"only\", \"target\": {{\"type\": \"command\", \
             \"command\": \"{command}\", \"shell\": true}}}}]}}"
        )
    };
    write(&env, "deploy.json", &step("echo deploy"));
    let text = "[[workflow]]\nname = \"deploy\"\nfile = \"deploy.json\"\n\n\
                [[workflow]]\nname = \"inline\"\n\
                steps = [{ id = \"hi\", target = { type = \"command\", command = \"echo hi\", \
                shell = true } }]\n\n\
                [[loop]]\nname = \"ship\"\nkind = \"workflow\"\nworkflow = \"deploy\"\n\
                every = \"1h\"\n";
    let path = write(&env, "loops.toml", text);
    let plan = apply(&env, &path, &["--dry-run"]);
    assert_eq!(plan["workflows"][0]["action"], "create");
    assert_eq!(plan["workflows"][1]["name"], "inline");
    assert_eq!(actions(&plan), [pair("create", "ship")]);
    let applied = apply(&env, &path, &[]);
    assert_eq!(applied["changed"], true);
    let ship = env.loops(["--json", "show", "ship"]).run().json();
    let deploy = env
        .loops(["--json", "workflows", "show", "deploy"])
        .run()
        .json();
    assert_eq!(ship["target"]["workflowId"], deploy["id"]);
    // Unchanged: nothing to do.
    let p = path.to_str().expect("utf-8");
    env.loops(["apply", p]).stdout_has("no changes").run();
    // The file's workflow changed: a new version, and its loop runs it.
    write(&env, "deploy.json", &step("echo deploy v2"));
    let plan = apply(&env, &path, &[]);
    assert_eq!(plan["workflows"][0]["action"], "replace", "{plan}");
    assert_eq!(plan["workflows"][0]["id"], deploy["id"]);
    let ship = env.loops(["--json", "show", "ship"]).run().json();
    assert_ne!(ship["target"]["workflowId"], deploy["id"]);
    let now = env
        .loops(["--json", "workflows", "show", "deploy"])
        .run()
        .json();
    assert_eq!(ship["target"]["workflowId"], now["id"]);
}

#[test]
fn an_apply_beside_a_running_daemon_edits_in_place_and_doubles_no_run() {
    let env = TestEnv::new();
    let file = |every: &str, label: &str| {
        format!(
            "[[loop]]\nname = \"tick\"\nkind = \"command\"\nevery = \"{every}\"\n\
             cmd = \"true\"\nlabel = [\"{label}\"]\n"
        )
    };
    let path = write(&env, "loops.toml", &file("1s", "a"));
    apply(&env, &path, &[]);
    let id = env.loops(["--json", "show", "tick"]).run().json()["id"].clone();
    let _daemon = loops_tests::Daemon::start(&env, &[]);
    let runs = |env: &TestEnv| -> Vec<Value> {
        let runs = env
            .loops(["--json", "runs", "tick", "--limit", "500"])
            .run()
            .json();
        runs.as_array().cloned().unwrap_or_default()
    };
    let deadline = std::time::Duration::from_secs(30);
    let mut seen = 0;
    for (every, label) in [("2s", "b"), ("1s", "c"), ("2s", "d"), ("1s", "e")] {
        // A run between two applies.
        seen = loops_tests::wait_for("a run of tick", deadline, || {
            let n = runs(&env).len();
            (n > seen).then_some(n)
        });
        std::fs::write(&path, file(every, label)).expect("edit");
        let plan = apply(&env, &path, &[]);
        assert_eq!(actions(&plan), [pair("update", "tick")], "{plan}");
    }
    loops_tests::wait_for("a run after the last apply", deadline, || {
        (runs(&env).len() > seen).then_some(())
    });
    let shown = env.loops(["--json", "show", "tick"]).run().json();
    assert_eq!(shown["id"], id, "edited in place");
    assert_eq!(shown["labels"], serde_json::json!(["e"]));
    let all = runs(&env);
    let mut slots: Vec<&str> = all
        .iter()
        .filter_map(|r| r["scheduledFor"].as_str())
        .collect();
    let n = slots.len();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(slots.len(), n, "a slot ran twice: {all:?}");
    assert!(
        all.iter().all(|r| r["loopId"] == id),
        "one loop throughout: {all:?}"
    );
}

#[test]
fn the_dashboard_api_applies_a_file_as_a_write() {
    use crate::serve::Server;
    let env = TestEnv::new();
    let path = write(&env, "loops.toml", FILE);
    let p = path.to_str().expect("utf-8");
    let server = Server::start(&env);
    let bearer = format!("Bearer {}", server.token);
    let own = format!("http://{}", server.addr);
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Origin", own.as_str()),
    ];
    let body = serde_json::json!({"path": p, "dryRun": true}).to_string();
    let plan = server.send_body("POST", "/api/v1/apply", &headers, &body);
    assert_eq!(plan.status, 200, "{}", plan.body);
    assert_eq!(
        actions(&plan.json()),
        [pair("create", "backup"), pair("create", "report")]
    );
    let body = serde_json::json!({"path": p}).to_string();
    let applied = server.send_body("POST", "/api/v1/apply", &headers, &body);
    assert_eq!(applied.status, 200, "{}", applied.body);
    env.loops(["show", "report"]).run();
    // An unknown field, and a caller without the token, are refused.
    let bad = serde_json::json!({"path": p, "force": true}).to_string();
    let refused = server.send_body("POST", "/api/v1/apply", &headers, &bad);
    assert_eq!(refused.status, 400, "{}", refused.body);
    let anonymous = [
        ("Content-Type", "application/json"),
        ("Origin", own.as_str()),
    ];
    let refused = server.send_body("POST", "/api/v1/apply", &anonymous, &body);
    assert_eq!(refused.status, 401, "{}", refused.body);
}
