//! Relative paths in a workflow file (issue 28): a step's `cwd` and a
//! command's `./script` resolve against the file's own directory when the
//! workflow is created, are stored absolute, and `validate --preflight`
//! checks what will really run, wherever the command is started from.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use loops_tests::TestEnv;
use serde_json::{Value, json};

/// `loops <args>` started in directory `dir`.
fn loops_in(env: &TestEnv, dir: &Path, args: &[&str]) -> Output {
    env.cmd()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("loops runs")
}

fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("a script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("an executable");
}

#[test]
fn relative_paths_resolve_against_the_workflow_files_directory() {
    let env = TestEnv::new();
    let flows = env.home().join("flows");
    std::fs::create_dir_all(flows.join("sub")).unwrap();
    script(&flows.join("hello.sh"), "echo hello from $(pwd)");
    script(&flows.join("sub/there.sh"), "echo there");
    let workflow = json!({
        "name": "paths",
        "steps": [
            {"id": "exec", "target": {"type": "command", "command": "./hello.sh"}},
            {"id": "shell", "target": {"type": "command", "command": "./hello.sh && echo ok", "shell": true}},
            {"id": "cwd", "target": {"type": "command", "command": "./there.sh", "cwd": "sub"}},
        ],
    });
    std::fs::write(flows.join("w.json"), workflow.to_string()).unwrap();
    // Started elsewhere: the paths are the file's, not the shell's.
    let elsewhere = env.home();
    let preflight = loops_in(
        &env,
        &elsewhere,
        &[
            "--json",
            "workflows",
            "validate",
            "flows/w.json",
            "--preflight",
        ],
    );
    assert!(preflight.status.success(), "{preflight:?}");
    let created = loops_in(
        &env,
        &elsewhere,
        &["--json", "workflows", "create", "flows/w.json"],
    );
    assert!(created.status.success(), "{created:?}");
    let shown: Value =
        serde_json::from_slice(&env.run(&["--json", "workflows", "show", "paths"]).stdout).unwrap();
    let flows_text = flows.display().to_string();
    assert_eq!(
        shown["steps"][0]["target"]["command"],
        format!("{flows_text}/hello.sh")
    );
    assert_eq!(
        shown["steps"][1]["target"]["command"],
        format!("{flows_text}/hello.sh && echo ok")
    );
    assert_eq!(
        shown["steps"][2]["target"]["cwd"],
        format!("{flows_text}/sub")
    );
    assert_eq!(shown["steps"][2]["target"]["command"], "./there.sh");
    // And they run from anywhere: here from the root directory.
    let ran = loops_in(
        &env,
        Path::new("/"),
        &["--json", "workflows", "run", "paths"],
    );
    assert!(ran.status.success(), "{ran:?}");
    let run: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(run["workflowRun"]["status"], "succeeded", "{run}");
}

#[test]
fn validate_preflight_finds_a_missing_script_in_a_shell_step() {
    let env = TestEnv::new();
    let flows = env.home().join("flows");
    std::fs::create_dir_all(&flows).unwrap();
    let workflow = json!({
        "name": "broken",
        "steps": [
            {"id": "gone", "target": {"type": "command", "command": "./missing.sh --fast", "shell": true}},
        ],
    });
    let file = flows.join("w.json");
    std::fs::write(&file, workflow.to_string()).unwrap();
    let file = file.display().to_string();
    // Valid as a file; its preflight names the script it would run.
    assert!(env.run(&["workflows", "validate", &file]).status.success());
    let ran = env.run(&["workflows", "validate", &file, "--preflight"]);
    assert_eq!(ran.status.code(), Some(1), "{ran:?}");
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        stderr.contains(&format!("{}/missing.sh", flows.display())),
        "{stderr}"
    );
    assert!(stderr.contains("gone"), "{stderr}");
}
