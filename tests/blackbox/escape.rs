//! Control characters in stored data (a cwd, an error, a step's output)
//! never reach the terminal raw in human output: each is shown as its Rust
//! escape (`\u{1b}`, `\r`). JSON escapes them as JSON does (`\u001b`).

use loops_tests::TestEnv;
use serde_json::json;

use crate::workflows::workflow_file;

/// An ESC sequence that clears the screen, a CR, a BEL and a C1 CSI.
const NASTY: &str = "\u{1b}[2J\r\u{7}\u{9b}";
/// How it is shown.
const SHOWN: &str = "\\u{1b}[2J\\r\\u{7}\\u{9b}";
/// A line break in a workflow step's cwd, and how its error shows it.
const BREAK: &str = "\nerror: fake";
const BREAK_SHOWN: &str = "\\nerror: fake";

fn assert_no_controls(text: &str) {
    assert!(
        !text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "a control character reached the output: {text:?}"
    );
}

#[test]
fn a_cwd_with_control_characters_is_escaped_in_errors() {
    let env = TestEnv::new();
    let cwd = format!("/nonexistent/{NASTY}{BREAK}");
    env.loops(["create", "command", "x", "--cmd", "true", "--cwd", &cwd])
        .args(["--every", "1h"])
        .run();
    let ran = env.loops(["run-now", "x"]).code(1).run();
    assert_no_controls(&ran.stdout);
    // The error stays on its one line: a line break in it cannot forge
    // another line of output.
    assert!(
        ran.stdout.contains(&format!(
            "  error: working directory does not exist: /nonexistent/{SHOWN}{BREAK_SHOWN}\n"
        )),
        "{}",
        ran.stdout
    );
    // JSON carries the text itself, escaped as JSON escapes it.
    let ran = env.loops(["--json", "runs", "x"]).run();
    assert!(
        ran.stdout.contains("\\u001b[2J\\r\\u0007"),
        "{}",
        ran.stdout
    );
    assert_eq!(
        ran.json()[0]["error"],
        format!("working directory does not exist: {cwd}")
    );
}

#[test]
fn workflow_step_errors_and_shown_output_are_escaped() {
    let env = TestEnv::new();
    let file = workflow_file(
        &env,
        "w.json",
        &json!({"name": "w", "maxParallel": 1, "steps": [
            {"id": "out", "continueOnFailure": true, "target": {"type": "command",
                "command": "printf 'a\\033[31mred\\r\\nb\\tc\\r\\n'", "shell": true}},
            {"id": "cwd", "dependsOn": ["out"], "target": {"type": "command",
                "command": "true", "cwd": format!("/nonexistent/{NASTY}{BREAK}")}},
        ]}),
    );
    env.loops(["workflows", "create", &file]).run();
    let ran = env.loops(["workflows", "run", "w"]).code(1).run();
    assert_no_controls(&ran.stdout);
    assert!(
        ran.stdout.contains(&format!(
            "working directory does not exist: /nonexistent/{SHOWN}{BREAK_SHOWN}\n"
        )),
        "{}",
        ran.stdout
    );
    // Each error stays on its line.
    assert_eq!(ran.stdout.lines().count(), 4, "{}", ran.stdout);
    let run_id = ran.stdout.split_whitespace().next().unwrap().to_owned();
    let ran = env
        .loops(["workflows", "inspect", &run_id, "--show-output"])
        .run();
    assert_no_controls(&ran.stdout);
    // A CRLF ends a line; a tab is kept; an ESC is shown.
    assert!(
        ran.stdout.contains("    a\\u{1b}[31mred\n    b\tc\n"),
        "{}",
        ran.stdout
    );
}

/// Issue 25 item 7: bidi and zero-width characters would make a name read
/// backwards (`safe\u{202e}txt.exe` shows as "safeexe.txt") or hide, and
/// shift the columns after them; human output escapes them as it escapes
/// C0 and C1, and `--json` keeps them.
#[test]
fn bidi_and_zero_width_characters_are_escaped_in_list_and_logs() {
    let env = TestEnv::new();
    let name = "safe\u{202e}txt.exe\u{200b}\u{2066}";
    env.write_script("lie", "printf 'a\\342\\200\\256b\\342\\200\\213c\\n'");
    env.create_command(name, "lie", &["--every", "1h"]);
    env.loops(["run-now", name]).run();
    let hidden = |text: &str| {
        text.chars()
            .any(|c| c != '\n' && loops_core::hides_on_terminal(c))
    };

    let list = env.loops(["list"]).run();
    assert!(!hidden(&list.stdout), "{:?}", list.stdout);
    assert!(
        list.stdout
            .contains("safe\\u{202e}txt.exe\\u{200b}\\u{2066}"),
        "{}",
        list.stdout
    );
    let logs = env.loops(["logs", name]).run();
    assert!(!hidden(&logs.stdout), "{:?}", logs.stdout);
    assert_eq!(logs.stdout, "a\\u{202e}b\\u{200b}c\n");

    let json = env.loops(["--json", "list"]).run().json();
    assert_eq!(json[0]["name"], name);
}

/// Issue 25 review: `workflows run` wrote its live progress lines to stderr
/// without escaping the step ids. `workflows create` refuses a control
/// character in an id but takes a bidi or zero-width one, and a database
/// written by the original or edited by hand holds anything. The step
/// lines are padded to the ids' width as shown, escapes included, so the
/// errors still line up.
#[test]
fn workflow_run_progress_escapes_step_ids() {
    let env = TestEnv::new();
    let file = workflow_file(
        &env,
        "w.json",
        &json!({"name": "w", "maxParallel": 1, "steps": [
            {"id": "eMARK\u{202e}\u{200b}", "target": {"type": "command", "command": "true"}},
            {"id": "fails", "dependsOn": ["eMARK\u{202e}\u{200b}"],
                "target": {"type": "command", "command": "false"}},
        ]}),
    );
    env.loops(["workflows", "create", &file]).run();
    // An ESC sequence in the stored id, as JSON writes it.
    let steps = if loops_tests::store_testing::on_postgres() {
        "REPLACE(steps_json::text, 'MARK', '\\u001b[2J')::json"
    } else {
        "REPLACE(steps_json, 'MARK', '\\u001b[2J')"
    };
    env.raw()
        .exec(&format!("UPDATE workflow_specs SET steps_json = {steps}"));
    let shown = "e\\u{1b}[2J\\u{202e}\\u{200b}";
    let ran = env.loops(["workflows", "run", "w"]).code(1).run();
    let hidden = |text: &str| {
        text.chars()
            .any(|c| c != '\n' && loops_core::hides_on_terminal(c))
    };
    assert!(!hidden(&ran.stderr), "{:?}", ran.stderr);
    assert!(!hidden(&ran.stdout), "{:?}", ran.stdout);
    let width = shown.chars().count();
    let first = format!("  00  succeeded   {shown}");
    let failed = format!(
        "  01  failed      {:<width$}  process exited with code 1",
        "fails"
    );
    for (stream, text) in [("stderr", &ran.stderr), ("stdout", &ran.stdout)] {
        for line in [&first, &failed] {
            assert!(
                text.lines().any(|l| l == line),
                "{stream} lacks {line:?}:\n{text}"
            );
        }
    }
}
