//! `loops mcp` driven by an MCP client loops did not write: the official
//! Python SDK (issue 18). `tests/mcp/python_client.py` starts the server,
//! initializes, lists the tools, makes the calls the test asks for and
//! prints what it saw as one JSON document; the assertions are here.
//!
//! The SDK lives in a venv under the target directory (see
//! `tests/mcp/venv.rs`), made on first use. When Python, its `venv` module
//! or the install is missing, the tests print `skipped mcp_python::<test>:
//! <why>` and pass, unless `LOOPS_REQUIRE_MCP_PYTHON=1` (CI sets it in
//! `.ci/run`), which makes that a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use loops_tests::TestEnv;
use serde_json::{Value, json};

use crate::mcp::{ALLOW, TOOLS};

#[path = "../mcp/venv.rs"]
mod venv;

/// Set to `1` (or `true`), a missing Python or SDK fails the tests instead
/// of skipping them.
const REQUIRE_ENV: &str = "LOOPS_REQUIRE_MCP_PYTHON";

/// What the loop under test prints.
const LINE: &str = "hello from the python client";

/// The venv's interpreter, prepared once per test process; `None` after
/// printing why `test` skips.
fn python(test: &str) -> Option<PathBuf> {
    static PREPARED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let prepared = PREPARED.get_or_init(|| venv::prepare(&target_dir()));
    match prepared {
        Ok(python) => Some(python.clone()),
        Err(why) if required() => panic!("{REQUIRE_ENV} is set, and no MCP Python SDK: {why}"),
        Err(why) => {
            eprintln!("skipped mcp_python::{test}: {why}");
            None
        }
    }
}

fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| matches!(v.trim(), "1" | "true"))
}

/// The cargo target directory: this test runs as
/// `target/<profile>/deps/blackbox-<hash>`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    exe.ancestors()
        .nth(3)
        .expect("test executables live in target/<profile>/deps")
        .to_path_buf()
}

/// Runs the Python client against `loops mcp` in `env` (its data dir,
/// home, PATH and database), with mutations allowed or not, making
/// `calls` (`[[tool, {arguments}], ...]`); what the client saw.
fn session(env: &TestEnv, python: &Path, allow_mutations: bool, calls: Value) -> Value {
    let mut cmd = Command::new(python);
    for (key, value) in env.cmd().get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    // The venv's own interpreter finds its packages only without these.
    cmd.env_remove("PYTHONHOME").env_remove("PYTHONPATH");
    if allow_mutations {
        cmd.env(ALLOW, "true");
    } else {
        cmd.env_remove(ALLOW);
    }
    let request = json!({
        "command": loops_tests::loops_bin(),
        "args": ["mcp"],
        "calls": calls,
        "timeout": 60,
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/python_client.py");
    let out = cmd
        .arg(script)
        .arg(request.to_string())
        .output()
        .expect("the venv's python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the python client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// Call `index`'s result: its text blocks and whether it is an error.
fn call(seen: &Value, index: usize, tool: &str) -> (Vec<String>, bool) {
    let entry = &seen["calls"][index];
    assert_eq!(entry["tool"], tool, "{seen:#}");
    let result = &entry["result"];
    let texts = result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content: {result:#}"))
        .iter()
        .map(|block| {
            assert_eq!(block["type"], "text", "{result:#}");
            block["text"].as_str().expect("a text block").to_owned()
        })
        .collect();
    (texts, result["isError"] == true)
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_python_sdk_session_lists_and_runs_a_loop() {
    let Some(python) = python("a_python_sdk_session_lists_and_runs_a_loop") else {
        return;
    };
    let env = TestEnv::new();
    env.create_command("py", &format!("echo '{LINE}'"), &["--every", "1h"]);
    let listed = env.loops(["list", "--json"]).run().json();

    let seen = session(
        &env,
        &python,
        true,
        json!([
            ["loops_list", {}],
            ["loops_run_now", {"loop": "py", "showOutput": true}],
            ["loops_show", {"loop": "nope"}],
            ["loops_runs", {"loop": "py"}],
        ]),
    );

    let init = &seen["initialize"];
    assert_eq!(init["serverInfo"]["name"], "loops", "{init:#}");
    assert!(init["capabilities"]["tools"].is_object(), "{init:#}");
    let tools: Vec<&str> = seen["tools"]
        .as_array()
        .expect("tool names")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for tool in TOOLS {
        assert!(tools.contains(&tool), "{tool} missing from {tools:?}");
    }

    let (texts, is_error) = call(&seen, 0, "loops_list");
    assert!(!is_error, "{texts:?}");
    assert_eq!(parse(&texts[0]), listed);

    let (texts, is_error) = call(&seen, 1, "loops_run_now");
    assert!(!is_error, "{texts:?}");
    let run = parse(&texts[0]);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(run["loopName"], "py", "{run:#}");
    assert_eq!(run["stdout"], format!("{LINE}\n"), "{run:#}");

    // An error is a tool result, and the server goes on serving.
    let (texts, is_error) = call(&seen, 2, "loops_show");
    assert!(is_error, "{texts:?}");
    assert!(texts[0].starts_with("loop not found: nope"), "{texts:?}");
    let (texts, is_error) = call(&seen, 3, "loops_runs");
    assert!(!is_error, "{texts:?}");
    assert_eq!(parse(&texts[0])[0]["id"], run["id"], "{texts:?}");

    // The run reached the database the CLI reads.
    let runs = env.loops(["runs", "py", "--json"]).run().json();
    let runs = runs.as_array().expect("runs --json is an array");
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0]["id"], run["id"]);
    assert_eq!(runs[0]["status"], "succeeded");
}

#[test]
fn a_python_sdk_session_without_mutations_is_refused_run_now() {
    let Some(python) = python("a_python_sdk_session_without_mutations_is_refused_run_now") else {
        return;
    };
    let env = TestEnv::new();
    env.create_command("py", &format!("echo '{LINE}'"), &["--every", "1h"]);

    let seen = session(
        &env,
        &python,
        false,
        json!([
            ["loops_run_now", {"loop": "py"}],
            ["loops_list", {}],
        ]),
    );

    assert_eq!(seen["initialize"]["serverInfo"]["name"], "loops");
    let (texts, is_error) = call(&seen, 0, "loops_run_now");
    assert!(is_error, "{texts:?}");
    assert!(
        texts[0].contains("LOOPS_MCP_ALLOW_MUTATIONS=true"),
        "{texts:?}"
    );
    // Reads still work after the refusal.
    let (texts, is_error) = call(&seen, 1, "loops_list");
    assert!(!is_error, "{texts:?}");
    assert_eq!(parse(&texts[0])[0]["name"], "py");

    let runs = env.loops(["runs", "py", "--json"]).run().json();
    assert_eq!(runs, json!([]), "a refused run_now recorded a run");
}

#[test]
fn a_missing_python_is_a_reason_to_skip() {
    let target = tempfile::tempdir().expect("a temp dir");
    let why = venv::prepare_with(Path::new("/nonexistent/python3"), target.path())
        .expect_err("no interpreter there");
    assert!(why.contains("/nonexistent/python3"), "{why}");
    assert!(why.contains(venv::PYTHON_ENV), "{why}");
}
