//! `loops runs` and the redaction of run output on every surface (SPEC
//! §7.2, §10 item 92; §9 item 26).

use loops_tests::{TestEnv, snapshot_settings};

/// Two loops with one finished run each: `first` printed to stdout,
/// `second` to both streams and failed.
fn two_runs(env: &TestEnv) {
    env.create_command("first", "printf 'hello\\nworld\\n'", &["--every", "1h"]);
    env.create_command(
        "second",
        "printf out; printf 'oops' >&2; exit 3",
        &["--every", "1h"],
    );
    env.loops(["run-now", "first"]).run();
    env.loops(["run-now", "second"]).code(1).run();
    // Fixed instants, for human output as of DISPLAY_NOW (issue 16).
    env.set_run_times(
        "first",
        "2026-01-05T11:00:00.000Z",
        "2026-01-05T11:00:00.020Z",
        20,
    );
    env.set_run_times(
        "second",
        "2026-01-05T11:50:00.000Z",
        "2026-01-05T11:50:02.500Z",
        2500,
    );
}

#[test]
fn runs_prints_aligned_rows_newest_first() {
    let env = TestEnv::new();
    two_runs(&env);
    let ran = env.loops(["runs"]).frozen().run();
    assert!(
        !ran.stdout.contains("hello"),
        "output is not shown by default"
    );
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("runs_human", ran.stdout);
}

// SPEC §10 item 92 (`  stdout:` and lines indented 4 spaces)
#[test]
fn runs_show_output_prints_indented_blocks() {
    let env = TestEnv::new();
    two_runs(&env);
    let ran = env.loops(["runs", "--show-output"]).frozen().run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("runs_human_show_output", ran.stdout);
}

// SPEC §10 item 92 (`[redacted N chars]` unless `--show-output`)
#[test]
fn runs_json_redacts_output_unless_shown() {
    let env = TestEnv::new();
    two_runs(&env);
    let runs = env.loops(["--json", "runs"]).run().json();
    let second = &runs[0];
    assert_eq!(second["loopName"], "second");
    assert_eq!(second["stdout"], "[redacted 3 chars]");
    assert_eq!(second["stderr"], "[redacted 4 chars]");
    assert_eq!(second["error"], "process exited with code 3");
    let first = &runs[1];
    assert_eq!(first["stdout"], "[redacted 12 chars]");
    assert!(
        first.get("stderr").is_none(),
        "empty streams are omitted: {first}"
    );

    let runs = env.loops(["--json", "runs", "--show-output"]).run().json();
    assert_eq!(runs[0]["stdout"], "out");
    assert_eq!(runs[0]["stderr"], "oops");
    assert_eq!(runs[1]["stdout"], "hello\nworld\n");
    assert_eq!(runs[1]["stderr"], "");
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_json_snapshot!(
        "runs_json",
        env.loops(["--json", "runs", "first"]).run().json()
    );
}

#[test]
fn runs_filters_by_loop_status_and_limit() {
    let env = TestEnv::new();
    two_runs(&env);
    env.loops(["run-now", "first"]).run();
    let count = |args: &[&str]| {
        env.loops(["--json", "runs"])
            .args(args)
            .run()
            .json()
            .as_array()
            .map(Vec::len)
    };
    assert_eq!(count(&[]), Some(3));
    assert_eq!(count(&["first"]), Some(2));
    assert_eq!(count(&["--status", "failed"]), Some(1));
    assert_eq!(count(&["--limit", "1"]), Some(1));
    env.loops(["runs", "--status", "done"])
        .code(1)
        .stderr_has("error: --status must be running, succeeded")
        .run();
    env.loops(["runs", "--limit", "x"])
        .code(1)
        .stderr_has("error: --limit must be a positive integer")
        .run();
}

#[test]
fn long_output_blocks_are_cut() {
    let env = TestEnv::new();
    env.create_command(
        "big",
        "head -c 40000 /dev/zero | tr '\\0' x",
        &["--every", "1h"],
    );
    let ran = env.loops(["run-now", "big", "--show-output"]).run();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines[1], "  stdout:");
    assert_eq!(lines[2].len(), 4 + 32768);
    assert_eq!(lines[3], "    [truncated 7232 chars]");
}
