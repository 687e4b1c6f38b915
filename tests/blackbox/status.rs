//! `loops status` and `show` on a terminal (issue 28): a loop's card with
//! its state and why, its schedule in words with its zone, the next 3 fire
//! times, the last 5 runs with their exit codes, the tail of the latest
//! run's output, labels and policies, fitted to the terminal; `show` prints
//! it on a terminal and its unchanged JSON when piped. And a failed run's
//! error shows the end of its stderr.

use loops_tests::store_testing::lit;
use loops_tests::{Test, TestEnv};
use serde_json::{Value, json};

/// `loops <args>` on a terminal `columns` wide (`LOOPS_FORCE_TTY`), as of
/// the frozen "now" in Berlin.
fn on_terminal<const N: usize>(env: &TestEnv, columns: usize, args: [&str; N]) -> Test {
    env.loops(args)
        .frozen()
        .env("LOOPS_FORCE_TTY", Some("1"))
        .env("COLUMNS", Some(&columns.to_string()))
}

/// A loop whose runs exit 1, 2, 3, … in turn, each printing 15 lines.
fn counting(env: &TestEnv, name: &str) -> String {
    let counter = env.home().join(format!("{name}.n"));
    let command = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; \
         for i in $(seq 1 15); do echo \"run $n line $i\"; done; exit $n",
        c = counter.display()
    );
    env.create_command(name, &command, &["--every", "1h"])
}

/// Makes the loop `id` due (its next run in the past) and runs one tick:
/// a scheduled run, which counts toward the breaker as `run-now` does not.
fn tick_due(env: &TestEnv, id: &str, second: u32) {
    env.raw().exec(&format!(
        "UPDATE loops SET next_run_at = {} WHERE id = {}",
        lit(&format!("2020-01-01T00:00:{second:02}.000Z")),
        lit(id)
    ));
    env.loops(["tick"]).run();
}

/// The line of `text` that starts (after its indentation) with `key:`.
fn key_line<'a>(text: &'a str, key: &str) -> &'a str {
    let key = format!("{key}:");
    text.lines()
        .find(|l| l.trim_start().starts_with(&key))
        .unwrap_or_else(|| panic!("no {key} line in:\n{text}"))
}

#[test]
fn the_card_lists_the_last_5_runs_their_exit_codes_and_the_latest_output() {
    let env = TestEnv::new();
    let id = counting(&env, "counter");
    for _ in 0..6 {
        env.loops(["run-now", "counter"]).code(1).run();
    }
    // One run cancelled, as `loops cancel` records it.
    let runs = env.loops(["--json", "runs", "counter"]).run().json();
    let second = runs[4]["id"].as_str().expect("a run id").to_owned();
    env.raw().exec(&format!(
        "UPDATE loop_runs SET status = 'cancelled', exit_code = NULL WHERE id = {}",
        lit(&second)
    ));

    let ran = on_terminal(&env, 120, ["status", "counter"]).run();
    let card = &ran.stdout;
    assert!(card.starts_with(&format!("● counter ({id})\n")), "{card}");
    assert!(key_line(card, "State").ends_with("State: active"), "{card}");
    assert!(key_line(card, "Schedule").ends_with("every 1h"), "{card}");
    // The 5 newest runs, with their exit codes; the first run is not listed.
    let rows: Vec<Vec<&str>> = card
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() > 2 && w[0].len() == 12 && w[1] != "line")
        .collect();
    let shown: Vec<(&str, &str)> = rows
        .iter()
        .map(|w| (w[1], if w[2] == "exit" { w[3] } else { w[2] }))
        .collect();
    assert_eq!(
        shown,
        [
            ("failed", "6"),
            ("failed", "5"),
            ("failed", "4"),
            ("failed", "3"),
            ("cancelled", "-")
        ],
        "{card}"
    );
    assert_eq!(rows[4][0], second, "{card}");
    // The last 10 lines of the latest run's output, and no more.
    let latest = runs[0]["id"].as_str().expect("a run id");
    assert!(
        key_line(card, "Output").ends_with(&format!("the last 10 lines of run {latest}")),
        "{card}"
    );
    assert!(card.ends_with("run 6 line 6\nrun 6 line 7\nrun 6 line 8\nrun 6 line 9\nrun 6 line 10\nrun 6 line 11\nrun 6 line 12\nrun 6 line 13\nrun 6 line 14\nrun 6 line 15\n"), "{card}");
    assert!(!card.contains("run 6 line 5\n"), "{card}");

    let doc = env.loops(["--json", "status", "counter"]).run().json();
    let codes: Vec<Value> = doc["recentRuns"]
        .as_array()
        .expect("recentRuns is an array")
        .iter()
        .map(|r| r["exitCode"].clone())
        .collect();
    assert_eq!(codes, [json!(6), json!(5), json!(4), json!(3), Value::Null]);
    assert_eq!(doc["recentRuns"][4]["status"], "cancelled");
    // As `runs --json` prints them: output redacted.
    assert_eq!(doc["recentRuns"][0]["stdout"], runs[0]["stdout"]);
    assert_eq!(doc["outputRunId"], latest);
    let tail = doc["outputTail"]
        .as_array()
        .expect("outputTail is an array");
    assert_eq!(tail.len(), 10);
    assert_eq!(tail[9], "run 6 line 15");
    let next = doc["nextRuns"].as_array().expect("nextRuns is an array");
    assert_eq!(next.len(), 3);
    assert!(
        next.iter()
            .all(|t| t.as_str().is_some_and(|t| t.ends_with('Z')))
    );
    assert_eq!(next[0], doc["nextRunAt"]);
}

#[test]
fn the_card_says_why_a_loop_is_paused_its_labels_and_policies() {
    let env = TestEnv::new();
    let id = env.create_command(
        "flaky",
        "echo 'the database is locked' >&2; exit 4",
        &[
            "--every",
            "1h",
            "--pause-after-failures",
            "2",
            "--label",
            "team,nightly",
        ],
    );
    tick_due(&env, &id, 1);
    let card = on_terminal(&env, 120, ["status", "flaky"]).run().stdout;
    assert!(
        key_line(&card, "State").ends_with("State: active"),
        "{card}"
    );
    assert!(
        key_line(&card, "Breaker").contains("1 of 2 final failures in a row"),
        "{card}"
    );

    // The breaker trips: the loop pauses, and the card says why.
    tick_due(&env, &id, 2);
    let card = on_terminal(&env, 120, ["status", "flaky"]).run().stdout;
    assert!(
        key_line(&card, "State").contains(
            "State: paused: paused after 2 consecutive failures (pauseAfterFailures); last error: \
             process exited with code 4"
        ),
        "{card}"
    );
    assert!(
        key_line(&card, "Breaker").contains("tripped after 2 final failures in a row"),
        "{card}"
    );
    // A paused loop keeps its next run: the times it fires once resumed.
    let next = key_line(&card, "Next");
    assert!(next.contains("  in "), "{card}");
    assert!(
        key_line(&card, "Labels").ends_with("Labels: team, nightly"),
        "{card}"
    );
    let policies = key_line(&card, "Policies");
    for policy in [
        "no retries",
        "catch-up latest",
        "overlap skip",
        "pauses after 2 failures in a row",
    ] {
        assert!(policies.contains(policy), "{policy}: {card}");
    }
    assert!(card.ends_with("\nthe database is locked\n"), "{card}");

    // A loop a user paused says so.
    env.create_command("manual", "true", &["--every", "1d"]);
    env.loops(["pause", "manual"]).run();
    let card = env.loops(["status", "manual"]).run().stdout;
    assert!(
        key_line(&card, "State").ends_with("paused by a user; `loops resume` resumes it"),
        "{card}"
    );
    assert!(key_line(&card, "Labels").ends_with("none"), "{card}");
    assert!(key_line(&card, "Runs").ends_with("none yet"), "{card}");
}

#[test]
fn the_card_says_a_cron_schedule_in_words_with_its_zone_and_3_fire_times() {
    let env = TestEnv::new();
    env.create_command(
        "standup",
        "true",
        &["--cron", "0 9 * * 1-5", "--tz", "Asia/Kolkata"],
    );
    let card = on_terminal(&env, 120, ["status", "standup"]).run().stdout;
    assert!(
        key_line(&card, "Schedule")
            .ends_with("Schedule: cron 0 9 * * 1-5 (Asia/Kolkata): at 09:00 on Mon–Fri"),
        "{card}"
    );
    assert!(
        key_line(&card, "Zone").contains("Zone: Asia/Kolkata"),
        "{card}"
    );
    // In Berlin's time, with Kolkata's wall time beside.
    let next: Vec<&str> = card
        .lines()
        .filter(|l| l.contains("(09:00:00 IST Asia/Kolkata)"))
        .collect();
    assert_eq!(next.len(), 3, "{card}");
    assert!(next[0].trim_start().starts_with("Next: "), "{card}");
    for line in next {
        assert!(
            line.contains(" 04:30:00 ") || line.contains(" 05:30:00 "),
            "{line}"
        );
    }
}

#[test]
fn show_prints_the_card_on_a_terminal_and_its_json_when_piped() {
    let env = TestEnv::new();
    env.create_command(
        "backup",
        "echo saved",
        &["--every", "1h", "--label", "prod"],
    );
    env.loops(["run-now", "backup"]).run();
    let json = env.loops(["--json", "show", "backup"]).run().stdout;
    // Piped: the original's JSON, byte for byte as --json prints it.
    let piped = env.loops(["show", "backup"]).run().stdout;
    assert_eq!(piped, json);
    // On a terminal: the card, unless --json is given.
    let card = on_terminal(&env, 100, ["show", "backup"]).run().stdout;
    assert!(card.starts_with("● backup ("), "{card}");
    assert!(key_line(&card, "State").ends_with("active"), "{card}");
    assert!(card.ends_with("\nsaved\n"), "{card}");
    assert_eq!(
        card,
        on_terminal(&env, 100, ["status", "backup"]).run().stdout
    );
    let forced_json = on_terminal(&env, 100, ["--json", "show", "backup"])
        .run()
        .stdout;
    assert_eq!(forced_json, json);

    // status --json is show --json with fields added.
    let shown: Value = serde_json::from_str(&json).expect("show prints JSON");
    let status = env.loops(["--json", "status", "backup"]).run().json();
    for (key, value) in shown.as_object().expect("a loop is an object") {
        assert_eq!(&status[key], value, "{key}");
    }
}

#[test]
fn the_card_fits_60_80_and_120_columns_and_piped_output_is_whole() {
    let env = TestEnv::new();
    let long = "nightly-database-backup-of-the-production-cluster-in-frankfurt";
    let command = "echo 'a line of output long enough to be cut at sixty columns and more'; \
                   echo 'the disk is full and nothing more can be written to it' >&2; exit 3";
    env.create_command(
        long,
        command,
        &[
            "--every",
            "1h",
            "--label",
            "production,backups,frankfurt",
            "--attempts",
            "3",
            "--pause-after-failures",
            "5",
            "--expires-after-runs",
            "100",
        ],
    );
    for _ in 0..2 {
        env.loops(["run-now", long]).code(1).run();
    }
    for width in [60, 80, 120] {
        let card = on_terminal(&env, width, ["status", long]).run().stdout;
        for line in card.lines() {
            assert!(line.chars().count() <= width, "{width}: {line:?}\n{card}");
        }
        // Ids and statuses are never cut.
        assert!(card.contains("  failed  "), "{width}:\n{card}");
        if width < 120 {
            assert!(card.contains('…'), "{width}:\n{card}");
        }
    }
    // Piped: every value whole.
    let piped = env.loops(["status", long]).run().stdout;
    assert!(!piped.contains('…'), "{piped}");
    assert!(piped.contains(long), "{piped}");
    assert!(piped.contains(command), "{piped}");
}

#[test]
fn a_failed_runs_error_shows_the_end_of_its_stderr() {
    let env = TestEnv::new();
    env.create_command(
        "noisy",
        "for i in 1 2 3 4 5 6 7; do echo \"problem $i of seven, described at some length\" >&2; \
         done; echo fine; exit 3",
        &["--every", "1h"],
    );
    let ran = env.loops(["run-now", "noisy"]).code(1).run();
    let expected = "  error: process exited with code 3\n  stderr, last 5 lines:\n    \
                    problem 3 of seven, described at some length\n";
    assert!(ran.stdout.contains(expected), "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains("    problem 7 of seven, described at some length\n  stdout: "),
        "{}",
        ran.stdout
    );
    assert!(!ran.stdout.contains("problem 2 "), "{}", ran.stdout);

    let runs = env.loops(["--json", "runs", "noisy"]).run().json();
    let id = runs[0]["id"].as_str().expect("a run id");
    let ran = env.loops(["runs", id]).run();
    assert!(
        ran.stdout.contains(
            "error:     process exited with code 3\nstderr:    last 5 lines:\n           \
             problem 3 of seven"
        ),
        "{}",
        ran.stdout
    );
    // Each line fits the terminal.
    let ran = on_terminal(&env, 40, ["runs", id]).run();
    let tail: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.contains("problem"))
        .collect();
    assert_eq!(tail.len(), 5, "{}", ran.stdout);
    for line in tail {
        assert!(
            line.chars().count() <= 40 && line.ends_with('…'),
            "{line:?}"
        );
    }

    // --show-output prints the whole stderr, and no tail besides.
    for ran in [
        env.loops(["run-now", "noisy", "--show-output"])
            .code(1)
            .run(),
        env.loops(["runs", id, "--show-output"]).run(),
    ] {
        assert!(!ran.stdout.contains("last 5 lines"), "{}", ran.stdout);
        assert!(ran.stdout.contains("problem 1 of seven"), "{}", ran.stdout);
        assert_eq!(ran.stdout.matches("problem 7 of seven").count(), 1);
    }

    // A run that succeeded shows no tail, whatever its stderr.
    env.create_command("chatty", "echo 'just a warning' >&2", &["--every", "1h"]);
    let ran = env.loops(["run-now", "chatty"]).run();
    assert!(!ran.stdout.contains("last 1 line"), "{}", ran.stdout);
}

#[test]
fn the_stderr_tail_is_scrubbed_as_stored() {
    let env = TestEnv::new();
    env.loops(["create", "command", "leaky", "--every", "1h"])
        .args(["--env", "API_TOKEN=sk-abcdef1234567890secret"])
        .args(["--cmd", "echo \"token $API_TOKEN\" >&2; exit 1"])
        .run();
    let ran = env.loops(["run-now", "leaky"]).code(1).run();
    assert!(
        ran.stdout
            .contains("  stderr, last 1 line:\n    token [redacted]\n"),
        "{}",
        ran.stdout
    );
    assert!(!ran.stdout.contains("sk-abcdef"), "{}", ran.stdout);
}

#[test]
fn the_card_reads_as_a_status_card() {
    let env = TestEnv::new();
    let id = env.create_command(
        "backup",
        "echo saved; echo 'disk nearly full' >&2",
        &[
            "--every",
            "1h",
            "--cwd",
            "/",
            "--label",
            "prod",
            "--attempts",
            "3",
        ],
    );
    env.loops(["run-now", "backup"]).run();
    env.set_run_times(
        "backup",
        "2026-01-05T10:59:58.000Z",
        "2026-01-05T11:00:00.000Z",
        1500,
    );
    env.raw().exec(&format!(
        "UPDATE loops SET next_run_at = {} WHERE id = {}",
        lit("2026-01-05T13:00:00.000Z"),
        lit(&id)
    ));
    let ran = on_terminal(&env, 80, ["status", "backup"]).run();
    let _guard = loops_tests::snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("status_card_frozen", ran.stdout);
}
