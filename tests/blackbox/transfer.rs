//! `loops export` and `loops import` (issue 15): a round trip through an
//! empty data directory gives back the same document; a dry run writes
//! nothing; `--replace` overwrites what differs; `--no-runs` leaves the
//! history out; documents from elsewhere or from a newer loops are
//! refused; the export never clobbers a file or writes through a link;
//! no human output shows an `env` value; an older export never moves a
//! run back nor runs a slot again, and import refuses what `create`
//! refuses (issue 25).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use loops_tests::{Daemon, TestEnv, wait_for};
use serde_json::{Value, json};

use crate::workflows::create_workflow;

const DEADLINE: Duration = Duration::from_secs(30);

const SECRET: &str = "hunter2-very-secret";

/// A data directory with two loops (one with a secret in its `env`), a
/// workflow, and the runs of a `run-now` and a `workflows run`.
fn populated() -> TestEnv {
    let env = TestEnv::new();
    env.loops(["create", "command", "with-env", "--cmd", "printf hi"])
        .args(["--every", "1h", "--env", &format!("TOKEN={SECRET}")])
        .run();
    env.create_command("plain", "true", &["--cron", "0 9 * * *"]);
    create_workflow(
        &env,
        &json!({"name": "build", "steps": [
            {"id": "a", "target": {"type": "command", "command": "echo a", "shell": true}},
            {"id": "b", "dependsOn": ["a"], "target": {"type": "command", "command": "echo b", "shell": true}}
        ]}),
    );
    env.loops(["run-now", "with-env"]).run();
    env.loops(["workflows", "run", "build"]).run();
    env
}

fn file(env: &TestEnv, name: &str) -> PathBuf {
    env.home().join(name)
}

/// `loops export --file <path> <args>`, returning the document.
fn export(env: &TestEnv, path: &Path, args: &[&str]) -> Value {
    let p = path.display().to_string();
    env.loops(["export", "--file", &p]).args(args).run();
    serde_json::from_str(&std::fs::read_to_string(path).expect("the export")).expect("JSON")
}

/// A document without its `exportedAt`.
fn content(mut doc: Value) -> Value {
    doc.as_object_mut().expect("an object").remove("exportedAt");
    doc
}

/// `loops --json import <path> <args>`.
fn import(env: &TestEnv, path: &Path, args: &[&str]) -> Value {
    let p = path.display().to_string();
    env.loops(["--json", "import", &p]).args(args).run().json()
}

fn loops_json(env: &TestEnv) -> Value {
    env.loops(["--json", "list"]).run().json()
}

#[test]
fn a_round_trip_through_an_empty_data_dir_gives_the_same_document() {
    let source = populated();
    let first_path = file(&source, "first.json");
    let first = export(&source, &first_path, &[]);
    assert_eq!(first["format"], "loops-export");
    assert_eq!(first["history"], true);
    assert_eq!(first["loops"].as_array().map(Vec::len), Some(2));
    assert_eq!(first["stepRuns"].as_array().map(Vec::len), Some(2));
    assert!(!first["events"].as_array().expect("events").is_empty());

    let target = TestEnv::new();
    let report = import(&target, &first_path, &["--apply"]);
    assert_eq!(report["applied"], true);
    assert_eq!(report["tables"]["loops"]["new"], 2);
    assert_eq!(report["tables"]["runs"]["new"], 1);
    assert_eq!(report["conflictCount"], 0);

    let second = export(&target, &file(&target, "second.json"), &[]);
    assert_eq!(content(first), content(second));
    assert_eq!(loops_json(&source), loops_json(&target));
    // The imported loop runs as it did at home, secret included.
    let ran = target
        .loops(["--json", "run-now", "with-env", "--show-output"])
        .run()
        .json();
    assert_eq!(ran["status"], "succeeded");
    assert_eq!(ran["stdout"], "hi");
}

#[test]
fn a_dry_run_says_what_would_change_and_writes_nothing() {
    let source = populated();
    let path = file(&source, "export.json");
    export(&source, &path, &[]);
    let target = TestEnv::new();
    let report = import(&target, &path, &[]);
    assert_eq!(report["applied"], false);
    assert_eq!(report["tables"]["workflows"]["new"], 1);
    assert_eq!(report["tables"]["loops"]["new"], 2);
    assert_eq!(loops_json(&target), json!([]));
    let p = path.display().to_string();
    let ran = target
        .loops(["import", &p])
        .stdout_has("nothing was written")
        .stderr_has("run `loops import")
        .run();
    let line = ran.stdout.lines().find(|l| l.starts_with("loops "));
    assert!(
        // TABLE, IN FILE, NEW: a header names the columns (issue 16).
        line.is_some_and(|l| l.split_whitespace().take(3).eq(["loops", "2", "2"])),
        "{}",
        ran.stdout
    );
    assert_eq!(loops_json(&target), json!([]));
}

#[test]
fn replace_overwrites_only_rows_that_differ() {
    let source = populated();
    let path = file(&source, "export.json");
    export(&source, &path, &[]);
    let target = TestEnv::new();
    import(&target, &path, &["--apply"]);

    // The source pauses a loop and exports again.
    source.loops(["pause", "plain"]).run();
    let changed = file(&source, "changed.json");
    export(&source, &changed, &[]);

    let kept = import(&target, &changed, &["--apply"]);
    assert_eq!(kept["tables"]["loops"]["existing"], 2);
    assert_eq!(kept["tables"]["loops"]["differ"], 1);
    assert_eq!(kept["tables"]["loops"]["skipped"], 2);
    let show = |env: &TestEnv| env.loops(["--json", "show", "plain"]).run().json();
    assert_eq!(show(&target)["status"], "active");

    let replaced = import(&target, &changed, &["--apply", "--replace"]);
    assert_eq!(replaced["tables"]["loops"]["replaced"], 1);
    assert_eq!(replaced["tables"]["loops"]["skipped"], 1);
    assert_eq!(replaced["tables"]["runs"]["replaced"], 0);
    assert_eq!(show(&target)["status"], "paused");
    assert_eq!(show(&target), show(&source));
}

#[test]
fn no_runs_exports_only_workflows_and_loops() {
    let source = populated();
    let path = file(&source, "defs.json");
    let p = path.display().to_string();
    source
        .loops(["export", "--file", &p, "--no-runs"])
        .stdout_has("run history left out (--no-runs)")
        .run();
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("JSON");
    assert_eq!(doc["history"], false);
    for key in ["runs", "workflowRuns", "stepRuns", "events"] {
        assert_eq!(doc[key], json!([]), "{key}");
    }
    let target = TestEnv::new();
    let report = import(&target, &path, &["--apply"]);
    assert_eq!(report["history"], false);
    assert_eq!(report["tables"]["loops"]["new"], 2);
    assert_eq!(target.loops(["--json", "runs"]).run().json(), json!([]));
}

#[test]
fn the_export_is_private_and_never_clobbers_or_follows_a_link() {
    let env = populated();
    let path = file(&env, "export.json");
    let p = path.display().to_string();
    let summary = env.loops(["--json", "export", "--file", &p]).run().json();
    assert_eq!(summary["path"], p.as_str());
    assert_eq!(summary["counts"]["loops"], 2);
    assert_eq!(
        std::fs::metadata(&path)
            .expect("exported")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    std::fs::write(&path, "keep me").expect("write");
    env.loops(["export", "--file", &p])
        .code(1)
        .stderr_has("already exists; pass --force to replace it")
        .run();
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "keep me");
    env.loops(["export", "--file", &p, "--force"]).run();
    assert!(
        std::fs::read_to_string(&path)
            .expect("read")
            .contains("loops-export")
    );

    let victim = file(&env, "victim");
    std::fs::write(&victim, "untouched").expect("write");
    let link = file(&env, "link.json");
    std::os::unix::fs::symlink(&victim, &link).expect("a link");
    let l = link.display().to_string();
    for force in [&[][..], &["--force"][..]] {
        env.loops(["export", "--file", &l])
            .args(force)
            .code(1)
            .stderr_has("is a symbolic link, and loops never writes an export through one")
            .run();
    }
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "untouched");
}

#[test]
fn documents_from_elsewhere_or_from_a_newer_loops_are_refused() {
    let source = populated();
    let path = file(&source, "export.json");
    let good = export(&source, &path, &[]);
    let target = TestEnv::new();
    let edited = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut doc = good.clone();
        f(&mut doc);
        let path = file(&target, name);
        std::fs::write(&path, doc.to_string()).expect("write");
        path.display().to_string()
    };
    for (path, message) in [
        (
            edited("format.json", &|d| d["format"] = json!("openloops-dump")),
            "its \"format\" is \"openloops-dump\", not \"loops-export\"",
        ),
        (
            edited("version.json", &|d| d["formatVersion"] = json!(99)),
            "format version 99, newer than the 1 this loops reads",
        ),
        (
            edited("schema.json", &|d| d["schemaVersion"] = json!(999)),
            "schema version 999, newer than",
        ),
    ] {
        for apply in [&[][..], &["--apply"][..]] {
            target
                .loops(["import", &path])
                .args(apply)
                .code(1)
                .stderr_has(message)
                .run();
        }
    }
    let garbage = file(&target, "garbage.json");
    std::fs::write(&garbage, "not json").expect("write");
    target
        .loops(["import", &garbage.display().to_string()])
        .code(1)
        .stderr_has("the document is not a valid loops export")
        .run();
    assert_eq!(loops_json(&target), json!([]));
}

#[test]
fn env_values_reach_only_the_document() {
    let source = populated();
    let path = file(&source, "export.json");
    let p = path.display().to_string();
    for args in [
        &["export", "--file", &p][..],
        &["--json", "export", "--file", &p, "--force"],
    ] {
        let ran = source.loops(args).run();
        assert!(!ran.stdout.contains(SECRET) && !ran.stderr.contains(SECRET));
    }
    assert!(
        std::fs::read_to_string(&path)
            .expect("read")
            .contains(SECRET)
    );
    let target = TestEnv::new();
    for args in [&["import", &p][..], &["--json", "import", &p, "--apply"]] {
        let ran = target.loops(args).run();
        assert!(!ran.stdout.contains(SECRET) && !ran.stderr.contains(SECRET));
    }
    // `--file -` writes the document itself to stdout, and what it wrote
    // to stderr.
    let ran = source
        .loops(["export", "--file", "-"])
        .stderr_has("note: exported 0 pools, 1 workflows, 2 loops, 1 runs, 0 triggers")
        .run();
    let doc: Value = serde_json::from_str(&ran.stdout).expect("the document");
    assert_eq!(doc["loops"].as_array().map(Vec::len), Some(2));
}

/// The runs of `loop_name`, output included.
fn runs_of(env: &TestEnv, loop_name: &str) -> Value {
    env.loops(["--json", "runs", loop_name, "--show-output"])
        .run()
        .json()
}

/// Issue 25 item 3, the whole story: an export taken while a run was in
/// flight, imported with `--replace` once the run succeeded, leaves the
/// run as it finished (kept, and reported so), and neither a tick nor the
/// daemon runs the slot a second time.
#[test]
fn an_export_taken_mid_run_never_runs_its_slot_again() {
    let env = TestEnv::new();
    let gate = env.home().join("gate");
    let count = env.home().join("count");
    env.write_script(
        "gated",
        &format!(
            "echo started >> '{}'\nwhile [ ! -e '{}' ]; do sleep 0.02; done\necho finished",
            count.display(),
            gate.display()
        ),
    );
    let invocations = || {
        std::fs::read_to_string(&count)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    // Attempts left, a short lease and retry delay: whatever took the run
    // for abandoned would run it again soon.
    env.loops([
        "create", "command", "gated", "--cmd", "gated", "--at", "now",
    ])
    .args(["--attempts", "3", "--lease", "2s", "--retry-delay", "1s"])
    .run();
    let mut tick = env.spawn(&["tick"]);
    wait_for("the run to start", DEADLINE, || {
        (invocations() == 1).then_some(())
    });
    let path = file(&env, "mid-run.json");
    let doc = export(&env, &path, &[]);
    assert_eq!(doc["runs"][0]["status"], "running");

    std::fs::write(&gate, "").expect("open the gate");
    assert!(tick.wait().expect("tick ends").success());
    let finished = runs_of(&env, "gated");
    assert_eq!(finished[0]["status"], "succeeded");
    assert_eq!(finished[0]["stdout"], "finished\n");
    assert!(finished[0]["finishedAt"].is_string());

    let report = import(&env, &path, &["--apply", "--replace"]);

    // The loop row came back as exported, due on the slot that ran: a
    // tick and the daemon settle it instead of running it again.
    env.loops(["tick"]).run();
    let daemon = Daemon::start(&env, &[]);
    wait_for("the loop to be settled", DEADLINE, || {
        let lp = env.loops(["--json", "show", "gated"]).run().json();
        (lp["status"] != "active").then_some(())
    });
    drop(daemon);
    assert_eq!(invocations(), 1, "the command ran once");
    assert_eq!(
        runs_of(&env, "gated"),
        finished,
        "the run keeps its output and finish"
    );
    // The report says why the run was left as it is.
    assert_eq!(report["tables"]["runs"]["kept"], 1);
    assert_eq!(report["tables"]["runs"]["replaced"], 0);
    assert_eq!(report["keptCount"], 1);
    assert_eq!(report["kept"][0]["id"], finished[0]["id"]);
    let p = path.display().to_string();
    env.loops(["import", &p, "--replace"])
        .stdout_has(&format!(
            "kept: runs {}: newer in the store (succeeded, attempt 1) than in the file (running, \
             attempt 1); kept as stored",
            finished[0]["id"].as_str().expect("a run id")
        ))
        .run();

    // Into another data directory, the run that was in flight arrives
    // abandoned, held by nobody.
    let other = TestEnv::new();
    import(&other, &path, &["--apply"]);
    let runs = runs_of(&other, "gated");
    assert_eq!(runs[0]["status"], "abandoned");
    assert_eq!(
        runs[0]["error"],
        "running when exported from another database; no runner here holds it"
    );
    assert_eq!(runs[0]["finishedAt"], doc["exportedAt"]);
}

/// Issue 25 items 6 and 8: import refuses, with `create`'s message, the
/// loops `create` refuses: `env` names `""`, `"A=B"` and of 5 MB, a name of 5 MB,
/// an agent model that reads as an option. The rest goes in.
#[test]
fn import_refuses_what_create_refuses() {
    let source = populated();
    let path = file(&source, "export.json");
    let mut doc = export(&source, &path, &["--no-runs"]);
    let base = doc["loops"][0].clone();
    let variant = |id: &str, edit: &dyn Fn(&mut Value)| {
        let mut lp = base.clone();
        lp["id"] = json!(id);
        edit(&mut lp);
        lp
    };
    let huge = "n".repeat(5 << 20);
    let loops = doc["loops"].as_array_mut().expect("loops");
    loops.push(variant("a0000000000a", &|l| {
        l["target"]["env"] = json!({"": "x"});
    }));
    loops.push(variant("a0000000000b", &|l| {
        l["target"]["env"] = json!({"A=B": "x"});
    }));
    loops.push(variant("a0000000000c", &|l| l["name"] = json!(huge)));
    loops.push(variant("a0000000000d", &|l| {
        l["target"] = json!({"type": "agent", "provider": "codex", "prompt": "fix it",
            "model": "--dangerously-bypass-approvals-and-sandbox"});
    }));
    // An env name of 5 MB: of valid characters, then with one that is not.
    let huge_env = "N".repeat(5 << 20);
    loops.push(variant("a0000000000e", &|l| {
        l["target"]["env"] = json!({ huge_env.as_str(): "x" });
    }));
    loops.push(variant("a0000000000f", &|l| {
        l["target"]["env"] = json!({ format!("{huge_env}-"): "x" });
    }));
    let bad = file(&source, "bad.json");
    std::fs::write(&bad, doc.to_string()).expect("write");

    let target = TestEnv::new();
    let b = bad.display().to_string();
    let env_name = "target.env has an invalid variable name";
    let cut = format!("\"{}…\"", "N".repeat(64));
    let ran = target.loops(["import", &b, "--apply"]).run();
    for line in [
        format!(
            "invalid: loops a0000000000a: refused as `loops create` refuses it: {env_name} \"\"; \
             names must match [A-Za-z_][A-Za-z0-9_]*"
        ),
        format!(
            "invalid: loops a0000000000b: refused as `loops create` refuses it: {env_name} \
             \"A=B\"; names must match [A-Za-z_][A-Za-z0-9_]*"
        ),
        "invalid: loops a0000000000c: refused as `loops create` refuses it: name must be at \
         most 200 characters, got 5242880; use a shorter name and put details in the \
         description"
            .to_owned(),
        "invalid: loops a0000000000d: refused as `loops create` refuses it: target.model must \
         not begin with \"-\": the agent would read it as an option, not as the value of \
         --model; give the model's name, for example \"sonnet\""
            .to_owned(),
        format!(
            "invalid: loops a0000000000e: refused as `loops create` refuses it: target.env has \
             a variable name of 5242880 bytes, {cut}; names must be at most 256 bytes"
        ),
        format!(
            "invalid: loops a0000000000f: refused as `loops create` refuses it: {env_name} \
             {cut}; names must match [A-Za-z_][A-Za-z0-9_]*"
        ),
    ] {
        assert!(
            ran.stdout.lines().any(|l| l == line),
            "{line}\n{}",
            ran.stdout
        );
    }
    assert!(ran.stdout.len() < 10_000, "no huge value is echoed");
    let report = import(&target, &bad, &["--apply"]);
    assert_eq!(report["tables"]["loops"]["invalid"], 6);
    assert_eq!(report["invalidCount"], 6);
    assert_eq!(report["invalid"].as_array().map(Vec::len), Some(6));
    assert_eq!(
        report["tables"]["loops"]["existing"], 2,
        "the valid ones went in"
    );
    let stored = loops_json(&target);
    assert_eq!(stored.as_array().map(Vec::len), Some(2));
}

/// Issue 30: a store moved keeps its pools and its pending triggers;
/// `--no-runs` keeps the pools and leaves the triggers, which are history.
#[test]
fn pools_and_pending_triggers_come_over() {
    let source = TestEnv::new();
    source.loops(["pools", "set", "gpu", "--max", "2"]).run();
    source.create_command("train", "true", &["--every", "1h", "--pool", "gpu"]);
    source
        .loops(["trigger", "train", "--payload", "{\"model\":\"a\"}"])
        .run();
    let path = file(&source, "export.json");
    let p = path.display().to_string();
    let ran = source.loops(["export", "--file", &p]).run();
    let rows: Vec<Vec<&str>> = ran
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    for row in [["pools", "1"], ["loops", "1"], ["triggers", "1"]] {
        assert!(rows.contains(&row.to_vec()), "{row:?}\n{}", ran.stdout);
    }
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("JSON");
    assert_eq!(doc["pools"][0]["name"], "gpu");
    assert_eq!(doc["pools"][0]["maxRunning"], 2);
    assert_eq!(doc["triggers"][0]["payload"], "{\"model\":\"a\"}");

    let target = TestEnv::new();
    let dry = target.loops(["import", &p]).run();
    for table in ["pools", "triggers"] {
        let line = dry.stdout.lines().find(|l| l.starts_with(table));
        assert!(
            // TABLE, IN FILE, NEW.
            line.is_some_and(|l| l.split_whitespace().take(3).eq([table, "1", "1"])),
            "{}",
            dry.stdout
        );
    }
    let report = import(&target, &path, &["--apply"]);
    assert_eq!(report["tables"]["pools"]["new"], 1);
    assert_eq!(report["tables"]["triggers"]["new"], 1);
    let pools = target.loops(["--json", "pools", "list"]).run().json();
    assert_eq!(pools[0]["name"], "gpu");
    assert_eq!(pools[0]["maxRunning"], 2);
    assert_eq!(pools[0]["members"], 1);
    target
        .loops(["status", "train"])
        .stdout_has("Triggers: 1 pending")
        .run();

    let defs = file(&source, "defs.json");
    let doc = export(&source, &defs, &["--no-runs"]);
    assert_eq!(doc["pools"].as_array().map(Vec::len), Some(1));
    assert_eq!(doc["triggers"], json!([]));
    let bare = TestEnv::new();
    import(&bare, &defs, &["--apply"]);
    let pools = bare.loops(["--json", "pools", "list"]).run().json();
    assert_eq!(pools[0]["members"], 1);
    let status = bare.loops(["status", "train"]).run().stdout;
    assert!(!status.contains("pending"), "{status}");
}
