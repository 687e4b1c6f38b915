//! Rows the original 0.3.1 wrote that loops refuses to create: they are
//! still safe to run and to print. An agent prompt that begins with `-`
//! goes on stdin (agents note §2.3), never on argv, and a name holding
//! control characters never reaches the terminal raw.

use loops_tests::{TestEnv, sqlite_only};

#[test]
fn a_stored_agent_runs_with_the_new_argv_and_its_prompt_on_stdin() {
    sqlite_only!("rows the original 0.3.1 wrote into its database file");
    let env = TestEnv::new();
    let argv = env.home().join("argv");
    let stdin = env.home().join("stdin");
    env.write_script(
        "claude",
        &format!(
            "printf '%s\\n' \"$@\" > {}; cat > {}; echo done",
            argv.display(),
            stdin.display()
        ),
    );
    // No migration: 0.3.1's row runs as 0.5.11 runs it.
    env.original_db(
        r#"INSERT INTO loops VALUES ('a1b2c3d4e5f6', 'legacy', NULL, 'active',
          '{"type":"interval","everyMs":60000,"anchor":"fixed_rate"}',
          '{"type":"agent","provider":"claude","prompt":"--dangerously-skip-permissions","configIsolation":"none","extraArgs":["--verbose"]}',
          '2025-12-01T10:05:00.000Z', NULL, 'latest', 50, 'skip', 1, 60000, 1800000,
          NULL, '2025-12-01T10:00:00.000Z', '2025-12-01T10:00:00.000Z');"#,
    );
    env.loops(["run-now", "legacy"]).run();
    assert_eq!(
        std::fs::read_to_string(&argv).unwrap(),
        "-p\n--output-format\njson\n--verbose\n"
    );
    assert_eq!(
        std::fs::read_to_string(&stdin).unwrap(),
        "--dangerously-skip-permissions"
    );
    let runs = env.loops(["--json", "runs", "legacy"]).run().json();
    assert_eq!(runs[0]["status"], "succeeded");
}

#[test]
fn a_stored_name_with_control_characters_is_escaped_in_tables() {
    sqlite_only!("rows the original 0.3.1 wrote into its database file");
    let env = TestEnv::new();
    env.original_db(
        "INSERT INTO loops VALUES ('a1b2c3d4e5f6', 'bad\u{1b}]0;pwned\u{7}\r\nname', NULL, \
         'paused', '{\"type\":\"interval\",\"everyMs\":60000}', \
         '{\"type\":\"command\",\"command\":\"true\"}', NULL, NULL, 'latest', 50, 'skip', 1, \
         60000, 1800000, NULL, '2025-12-01T10:00:00.000Z', '2025-12-01T10:00:00.000Z');",
    );
    let ran = env.loops(["list"]).run();
    let row = ran.stdout.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("a1b2c3d4e5f6  bad\\u{1b}]0;pwned\\u{7}\\r\\nname  paused  every 1m  "),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_stored_name_with_control_characters_is_escaped_in_errors() {
    sqlite_only!("rows the original 0.3.1 wrote into its database file");
    let env = TestEnv::new();
    env.original_db(
        "INSERT INTO loops VALUES ('a1b2c3d4e5f6', 'bad\u{1b}[2J\rname', NULL, \
         'stopped', '{\"type\":\"interval\",\"everyMs\":60000}', \
         '{\"type\":\"command\",\"command\":\"true\"}', NULL, NULL, 'latest', 50, 'skip', 1, \
         60000, 1800000, NULL, '2025-12-01T10:00:00.000Z', '2025-12-01T10:00:00.000Z');",
    );
    let refused = env.loops(["pause", "a1b2c3d4e5f6"]).code(1).run();
    // The first command on the original's database also notes its backup.
    let error = refused.stderr.lines().find(|l| l.starts_with("error: "));
    assert!(
        error.is_some_and(
            |e| e.starts_with("error: cannot pause bad\\u{1b}[2J\\rname (a1b2c3d4e5f6)")
        ),
        "{:?}",
        refused.stderr
    );
    assert!(
        !refused.stderr.chars().any(|c| c.is_control() && c != '\n'),
        "{:?}",
        refused.stderr
    );
}
