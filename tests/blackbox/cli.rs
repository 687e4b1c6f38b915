//! The command line surface: version, help, `--json` placement, exit codes
//! and the data directory (SPEC §7.1, §10 items 88 and 101).

use loops_tests::{TestEnv, snapshot_settings, sqlite_only};

// SPEC §10 item 88
#[test]
fn version_prints_the_bare_contract_version() {
    // The original prints `0.3.1` alone; scripts compare it as is.
    let env = TestEnv::new();
    for flag in ["--version", "-V"] {
        env.loops([flag]).stdout("0.3.1\n").run();
        env.loops(["--json", flag]).stdout("0.3.1\n").run();
    }
}

#[test]
fn help_lists_every_command() {
    let env = TestEnv::new();
    let ran = env.loops(["--help"]).run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("help", ran.stdout);
}

/// Every command's own `--help` opens with the summary its parent lists.
/// Subcommands are built lazily, and a lazily built command whose argument
/// struct had a doc comment showed that comment instead of its summary.
#[test]
fn every_command_help_opens_with_its_listed_summary() {
    let env = TestEnv::new();
    let mut pending = vec![Vec::<String>::new()];
    let mut checked = 0;
    while let Some(path) = pending.pop() {
        let mut args = path.clone();
        args.push("--help".to_owned());
        let page = env.loops(&args).run().stdout;
        for (name, summary) in listed_commands(&page) {
            let mut sub = path.clone();
            sub.push(name);
            let mut sub_args = sub.clone();
            sub_args.push("--help".to_owned());
            let sub_page = env.loops(&sub_args).run().stdout;
            let first = sub_page.lines().next().unwrap_or_default();
            assert!(
                first.starts_with(&summary),
                "`loops {}` is listed as {summary:?} but its help opens with {first:?}",
                sub.join(" ")
            );
            checked += 1;
            pending.push(sub);
        }
    }
    // The top level, create, workflows and daemon list about thirty.
    assert!(checked > 25, "only {checked} commands found");
}

/// The `Commands:` section of a help page: each name with the first line
/// of its summary (the summary wraps onto indented lines), without the
/// aliases that follow a summary.
fn listed_commands(page: &str) -> Vec<(String, String)> {
    page.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            let rest = l.strip_prefix("  ")?;
            let (name, summary) = rest.split_once(' ')?;
            // A one-line summary ends with the command's aliases.
            let summary = summary.split(" [alias").next().unwrap_or_default().trim();
            (!name.is_empty() && name != "help").then(|| (name.to_owned(), summary.to_owned()))
        })
        .collect()
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

// SPEC §10 item 88 (`--json` anywhere)
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
    sqlite_only!("about where the SQLite file is created");
    let env = TestEnv::new();
    env.create_command("a", "true", &["--every", "1m"]);
    assert!(env.db_path().is_file());
    assert!(!env.home().join(".hasna").exists());
}

#[test]
fn the_data_dir_defaults_to_home() {
    sqlite_only!("about where the SQLite file is created");
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
