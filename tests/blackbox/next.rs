//! `loops next` and `create --dry-run` (issue 28): a loop's or a
//! schedule's next fire times, in local time with the cron zone's wall time
//! when it differs, and a create that stores nothing. Every test sets `TZ`,
//! so none depends on the machine's zone.

use loops_tests::{Test, TestEnv};
use serde_json::Value;

/// `loops <args>` in Berlin's local time.
fn berlin<const N: usize>(env: &TestEnv, args: [&str; N]) -> Test {
    env.loops(args).env("TZ", Some("Europe/Berlin"))
}

/// The `times` of a `--json next` document, parsed as UTC instants in ms.
fn millis(times: &Value) -> Vec<i64> {
    times
        .as_array()
        .expect("times is an array")
        .iter()
        .map(|t| {
            let text = t.as_str().expect("a time is a string");
            assert!(text.ends_with('Z'), "{text} is UTC ISO");
            chrono::DateTime::parse_from_rfc3339(text)
                .expect("an ISO time")
                .timestamp_millis()
        })
        .collect()
}

#[test]
fn next_lists_an_interval_loops_times_from_its_next_run() {
    let env = TestEnv::new();
    let created = env
        .loops(["--json", "create", "command", "hourly", "--every", "1h"])
        .args(["--cmd", "true"])
        .run()
        .json();
    let doc = berlin(&env, ["--json", "next", "hourly", "-n", "3"])
        .run()
        .json();
    assert_eq!(doc["loop"]["name"], "hourly");
    assert_eq!(doc["loop"]["id"], created["id"]);
    assert_eq!(doc["loop"]["status"], "active");
    assert_eq!(doc["schedule"]["type"], "interval");
    assert_eq!(doc["times"][0], created["nextRunAt"]);
    let times = millis(&doc["times"]);
    assert_eq!(times.len(), 3);
    assert!(
        times.windows(2).all(|w| w[1] - w[0] == 3_600_000),
        "{times:?}"
    );

    // Five by default, one a line, in the future.
    let ran = berlin(&env, ["next", "hourly"])
        .stdout_has("loop:     hourly (")
        .stdout_has("), active\n")
        .stdout_has("schedule: every 1h\n")
        .run();
    let lines: Vec<&str> = ran.stdout.lines().filter(|l| l.contains(" in ")).collect();
    assert_eq!(lines.len(), 5, "{}", ran.stdout);
}

#[test]
fn next_shows_a_cron_loops_zone_and_its_expression_in_words() {
    let env = TestEnv::new();
    env.create_command(
        "standup",
        "true",
        &["--cron", "0 9 * * 1-5", "--tz", "Asia/Kolkata"],
    );
    let ran = berlin(&env, ["next", "standup", "-n", "4"])
        .stdout_has("schedule: cron 0 9 * * 1-5 (Asia/Kolkata): at 09:00 on Mon–Fri\n")
        .run();
    // 09:00 in Kolkata is 04:30 in Berlin in winter and 05:30 in summer.
    let times: Vec<&str> = ran.stdout.lines().skip(2).collect();
    assert_eq!(times.len(), 4, "{}", ran.stdout);
    for line in times {
        assert!(
            line.contains("(09:00:00 IST Asia/Kolkata)")
                && (line.contains(" 04:30:00 ") || line.contains(" 05:30:00 ")),
            "{line}"
        );
        assert!(!line.contains("Sat ") && !line.contains("Sun "), "{line}");
    }
    let doc = berlin(&env, ["--json", "next", "standup"]).run().json();
    for t in doc["times"].as_array().unwrap() {
        assert!(t.as_str().unwrap().ends_with("T03:30:00.000Z"), "{t}");
    }
    // In the zone's own local time, the zone is not repeated.
    let ran = env
        .loops(["next", "standup", "-n", "1"])
        .env("TZ", Some("Asia/Kolkata"))
        .run();
    assert!(ran.stdout.contains(" 09:00:00  in "), "{}", ran.stdout);
    assert!(!ran.stdout.contains("IST"), "{}", ran.stdout);
}

#[test]
fn a_paused_loop_lists_its_times_and_a_stopped_one_will_not_fire() {
    let env = TestEnv::new();
    env.create_command("nightly", "true", &["--every", "1d"]);
    env.loops(["pause", "nightly"]).run();
    let doc = berlin(&env, ["--json", "next", "nightly"]).run().json();
    assert_eq!(doc["loop"]["status"], "paused");
    assert_eq!(millis(&doc["times"]).len(), 5);
    berlin(&env, ["next", "nightly"])
        .stdout_has("paused: it fires at these times once resumed")
        .stdout_has("schedule: every 1d\nnext:     ")
        .run();

    env.loops(["stop", "nightly"]).run();
    let doc = berlin(&env, ["--json", "next", "nightly"]).run().json();
    assert_eq!(doc["times"], serde_json::json!([]));
    berlin(&env, ["next", "nightly"])
        .stdout_has("stopped: it will not fire")
        .stdout_has("next:     none\n")
        .run();
}

#[test]
fn next_lists_a_cron_or_an_interval_without_a_loop() {
    let env = TestEnv::new();
    // Now is frozen at Monday 2026-01-05 12:00 UTC, 13:00 in Berlin.
    berlin(
        &env,
        [
            "next",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Asia/Kolkata",
            "-n",
            "2",
        ],
    )
    .env("LOOPS_DISPLAY_NOW", Some(loops_tests::DISPLAY_NOW))
    .stdout(
        "schedule: cron 0 9 * * 1-5 (Asia/Kolkata): at 09:00 on Mon–Fri\n\
         next:     Tue 2026-01-06 04:30:00  (09:00:00 IST Asia/Kolkata)  in 15h\n\
         \x20         Wed 2026-01-07 04:30:00  (09:00:00 IST Asia/Kolkata)  in 1d\n",
    )
    .run();
    let doc = berlin(&env, ["--json", "next", "--every", "90m", "-n", "3"])
        .env("LOOPS_DISPLAY_NOW", Some(loops_tests::DISPLAY_NOW))
        .run()
        .json();
    assert_eq!(
        doc,
        serde_json::json!({
            "schedule": {"type": "interval", "everyMs": 5_400_000, "anchor": "fixed_rate"},
            "times": [
                "2026-01-05T13:30:00.000Z",
                "2026-01-05T15:00:00.000Z",
                "2026-01-05T16:30:00.000Z"
            ]
        })
    );
    // A schedule alone opens no database.
    assert!(env.database_is_untouched());
    berlin(&env, ["next", "--cron", "*/0 * * * *"])
        .code(1)
        .stderr_has("invalid cron step: */0")
        .run();
}

#[test]
fn n_counts_the_times_up_to_a_thousand() {
    let env = TestEnv::new();
    let doc = berlin(&env, ["--json", "next", "--every", "1m", "-n", "1000"])
        .run()
        .json();
    assert_eq!(millis(&doc["times"]).len(), 1000);
    for bad in ["0", "1001", "many"] {
        berlin(&env, ["next", "--every", "1m", "-n", bad])
            .code(1)
            .stderr_has("-n must be an integer from 1 to 1000")
            .run();
    }
    // A loop, or a schedule: exactly one.
    berlin(&env, ["next"]).code(2).run();
    berlin(&env, ["next", "x", "--every", "1m"]).code(2).run();
}

#[test]
fn create_dry_run_stores_nothing_and_prints_the_next_times() {
    let env = TestEnv::new();
    berlin(
        &env,
        [
            "create",
            "command",
            "backup",
            "--every",
            "1h",
            "--cmd",
            "true",
            "--dry-run",
        ],
    )
    .stdout_has("would create loop \"backup\" (dry run: nothing was stored)\n")
    .stdout_has("target:   command true\n")
    .stdout_has("schedule: every 1h\nnext:     ")
    .run();
    assert!(!env.data_dir().exists(), "a dry run creates no data dir");
    // On PostgreSQL a dry run connects to read, which migrates an empty
    // database as any command does.
    let untouched = || env.on_postgres() || env.database_is_untouched();
    assert!(untouched());

    let doc = berlin(
        &env,
        [
            "--json",
            "create",
            "agent",
            "triage",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Asia/Kolkata",
            "--provider",
            "claude",
            "--prompt",
            "hi",
            "--dry-run",
        ],
    )
    .run()
    .json();
    assert_eq!(doc["dryRun"], true);
    assert_eq!(doc["name"], "triage");
    assert_eq!(doc["nextTimes"].as_array().unwrap().len(), 3);
    assert_eq!(doc["nextTimes"][0], doc["nextRunAt"]);
    assert!(untouched());

    // A workflow loop needs a stored workflow, and a dry run makes no
    // database to find one in.
    berlin(
        &env,
        [
            "create",
            "workflow",
            "w",
            "--workflow",
            "release",
            "--every",
            "1h",
            "--dry-run",
        ],
    )
    .code(1)
    .stderr_has("workflow not found: release")
    .run();
    assert!(untouched());
    assert!(!env.data_dir().exists());
    env.loops(["--json", "list"]).stdout("[]\n").run();

    // With a database, it is read, not written.
    env.create_command("backup", "true", &["--every", "1h"]);
    berlin(
        &env,
        [
            "create",
            "command",
            "backup",
            "--every",
            "1h",
            "--cmd",
            "true",
            "--dry-run",
        ],
    )
    .stderr_has("2 loops would be named \"backup\"")
    .run();
    let list = env.loops(["--json", "list"]).run().json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
}
