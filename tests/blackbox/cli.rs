//! The command line surface: version, help, `--json` placement, exit codes
//! and the data directory (SPEC §7.1, §10 items 88 and 101).

use loops_tests::{TestEnv, snapshot_settings};

#[test]
fn version_prints_the_contract_version() {
    TestEnv::new()
        .loops(["--version"])
        .stdout("loops 0.3.1\n")
        .run();
}

#[test]
fn help_lists_every_command() {
    let env = TestEnv::new();
    let ran = env.loops(["--help"]).run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("help", ran.stdout);
}

#[test]
fn create_command_help_documents_every_flag_and_default() {
    let env = TestEnv::new();
    let ran = env.loops(["create", "command", "--help"]).run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("create_command_help", ran.stdout);
}

#[test]
fn create_agent_help_documents_every_flag_and_default() {
    let env = TestEnv::new();
    let ran = env.loops(["create", "agent", "--help"]).run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("create_agent_help", ran.stdout);
}

#[test]
fn json_works_anywhere_on_the_command_line() {
    let env = TestEnv::new();
    for args in [
        [
            "--json", "create", "command", "a", "--cmd", "true", "--every", "1m",
        ],
        [
            "create", "--json", "command", "b", "--cmd", "true", "--every", "1m",
        ],
        [
            "create", "command", "c", "--cmd", "true", "--every", "1m", "--json",
        ],
        [
            "create", "command", "d", "-j", "--cmd", "true", "--every", "1m",
        ],
    ] {
        let ran = env.loops(args).run();
        assert_eq!(ran.json()["status"], "active", "{args:?}");
    }
    let ran = env.loops(["ls", "--json"]).run();
    assert_eq!(ran.json().as_array().map(Vec::len), Some(4));
}

#[test]
fn usage_errors_exit_2() {
    let env = TestEnv::new();
    env.loops(["create", "command", "x", "--every", "1m"])
        .code(2)
        .stderr_has("--cmd <COMMAND>")
        .run();
    env.loops(["list", "--bogus"]).code(2).run();
    env.loops(["frobnicate"]).code(2).run();
    // A group without a subcommand prints its help on stderr.
    env.loops(["create"])
        .code(2)
        .stderr_has("Usage: loops create")
        .run();
    env.loops(Vec::<&str>::new()).code(2).run();
}

#[test]
fn an_unknown_loop_exits_1_with_the_spec_message() {
    let env = TestEnv::new();
    for verb in [
        "show", "pause", "resume", "stop", "remove", "run-now", "runs",
    ] {
        let ran = env.loops([verb, "x"]).code(1).run();
        assert!(
            ran.stderr.starts_with("error: loop not found: x\n"),
            "{verb}: {}",
            ran.stderr
        );
        assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
    }
}

#[test]
fn create_workflow_needs_a_stored_workflow() {
    TestEnv::new()
        .loops([
            "create",
            "workflow",
            "w",
            "--workflow",
            "deploy",
            "--every",
            "1m",
        ])
        .code(1)
        .stderr_has("error: workflow not found: deploy")
        .run();
}

#[test]
fn loops_data_dir_relocates_the_database() {
    let env = TestEnv::new();
    env.create_command("a", "true", &["--every", "1m"]);
    assert!(env.db_path().is_file());
    assert!(!env.home().join(".hasna").exists());
}

#[test]
fn the_data_dir_defaults_to_home() {
    let env = TestEnv::new();
    env.loops(["create", "command", "a", "--cmd", "true", "--every", "1m"])
        .env("LOOPS_DATA_DIR", None)
        .run();
    let dir = env.home().join(".hasna").join("loops");
    assert!(dir.join("loops.db").is_file());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(!env.data_dir().exists());
}

#[test]
fn a_closed_stdout_pipe_is_not_an_error() {
    use std::io::Read;
    let env = TestEnv::new();
    // More output than a pipe buffers, so the writer meets the closed pipe.
    let id = env.create_command(
        "big",
        "head -c 300000 /dev/zero | tr '\\0' x",
        &["--every", "1h"],
    );
    env.loops(["run-now", &id]).run();
    let mut child = env.spawn(&["--json", "runs", "--show-output"]);
    // Read one byte, then hang up, as `loops runs | head -c1` would.
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    stdout.read_exact(&mut byte).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
