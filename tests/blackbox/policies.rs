//! Issue 17: labels, expiry after N runs, the circuit breaker, exponential
//! backoff with jitter and skip exit codes, through the CLI.

use std::sync::atomic::{AtomicU32, Ordering};

use loops_core::Timestamp;
use loops_tests::TestEnv;
use loops_tests::store_testing::lit;

fn show(env: &TestEnv, target: &str) -> serde_json::Value {
    env.loops(["show", target]).run().json()
}

/// Makes the loop due (its next run in the past), then runs one tick.
/// Each call moves the grid by a second, so every tick runs a new slot
/// (a slot that already ran is settled, not run again).
fn tick_due(env: &TestEnv, id: &str) {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed) % 3600;
    env.raw().exec(&format!(
        "UPDATE loops SET next_run_at = {} WHERE id = {}",
        lit(&format!("2020-01-01T00:{:02}:{:02}.000Z", n / 60, n % 60)),
        lit(id)
    ));
    env.loops(["tick"]).run();
}

fn newest_run(env: &TestEnv, id: &str) -> serde_json::Value {
    env.loops(["--json", "runs", id]).run().json()[0].clone()
}

fn instant(v: &serde_json::Value) -> Timestamp {
    v.as_str()
        .expect("an instant")
        .parse()
        .expect("a valid instant")
}

#[test]
fn labels_are_stored_filtered_and_changed() {
    let env = TestEnv::new();
    let a = env.create_command(
        "a",
        "true",
        &["--every", "1h", "--label", "team=infra,nightly"],
    );
    let b = env.create_command("b", "true", &["--every", "1h", "--label", "nightly"]);
    let plain = env.create_command("plain", "true", &["--every", "1h"]);
    assert_eq!(
        show(&env, &a)["labels"],
        serde_json::json!(["team=infra", "nightly"])
    );
    // A loop without labels prints as before: no key at all.
    assert!(show(&env, &plain).get("labels").is_none());
    let names = |args: &[&str]| -> Vec<String> {
        let out = env.loops(["--json", "list"]).args(args).run().json();
        let mut names: Vec<String> = out
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&["--label", "nightly"]), ["a", "b"]);
    assert_eq!(
        names(&["--label", "nightly", "--label", "team=infra"]),
        ["a"]
    );
    assert!(names(&["--label", "absent"]).is_empty());
    env.loops(["list", "--label", "nightly"])
        .stdout_has("a [team=infra,nightly]")
        .run();

    env.loops(["labels", "add", &b, "x", "nightly"])
        .stdout_has("nightly, x")
        .run();
    env.loops(["labels", "remove", &b, "nightly"]).run();
    assert_eq!(show(&env, &b)["labels"], serde_json::json!(["x"]));
    env.loops(["labels", "set", &b, "y,z"]).run();
    assert_eq!(show(&env, &b)["labels"], serde_json::json!(["y", "z"]));
    env.loops(["labels", "clear", &b])
        .stdout_has("no labels")
        .run();
    assert!(show(&env, &b).get("labels").is_none());

    // runs --label keeps the runs of the labeled loops only.
    tick_due(&env, &a);
    tick_due(&env, &plain);
    let runs = env
        .loops(["--json", "runs", "--label", "team=infra"])
        .run()
        .json();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["loopId"], a.as_str());

    env.loops([
        "create", "command", "bad", "--cmd", "true", "--every", "1h", "--label", "no space",
    ])
    .code(1)
    .stderr_has("invalid label \"no space\"")
    .run();
    env.loops(["labels", "add", &a, &"x".repeat(65)])
        .code(1)
        .stderr_has("1 to 64")
        .run();
}

#[test]
fn successes_in_a_row_expire_a_loop() {
    let env = TestEnv::new();
    let id = env.create_command(
        "thrice",
        "true",
        &["--every", "1h", "--expires-after-runs", "2"],
    );
    assert_eq!(show(&env, &id)["consecutiveSuccesses"], 0);
    tick_due(&env, &id);
    let lp = show(&env, &id);
    assert_eq!(
        (lp["status"].as_str(), lp["consecutiveSuccesses"].as_i64()),
        (Some("active"), Some(1))
    );
    // A final failure starts the count again.
    env.loops(["edit", &id, "--cmd", "exit 1"]).run();
    tick_due(&env, &id);
    assert_eq!(show(&env, &id)["consecutiveSuccesses"], 0);
    env.loops(["edit", &id, "--cmd", "true"]).run();
    tick_due(&env, &id);
    assert_eq!(show(&env, &id)["status"], "active");
    tick_due(&env, &id);
    let lp = show(&env, &id);
    assert_eq!(lp["status"], "expired", "{lp}");
    assert!(lp.get("nextRunAt").is_none(), "{lp}");
}

#[test]
fn failures_in_a_row_trip_the_breaker_and_resume_rearms_it() {
    let env = TestEnv::new();
    let id = env.create_command(
        "flaky",
        "echo boom >&2; exit 3",
        &["--every", "1h", "--pause-after-failures", "2"],
    );
    tick_due(&env, &id);
    assert_eq!(show(&env, &id)["status"], "active");
    assert_eq!(show(&env, &id)["consecutiveFailures"], 1);
    tick_due(&env, &id);
    let lp = show(&env, &id);
    assert_eq!(lp["status"], "paused", "{lp}");
    let reason = lp["pausedReason"].as_str().unwrap();
    assert!(reason.contains("after 2 consecutive failures"), "{reason}");
    assert!(reason.contains("last error: "), "{reason}");
    env.loops(["resume", &id]).run();
    let lp = show(&env, &id);
    assert_eq!(
        (lp["status"].as_str(), lp["consecutiveFailures"].as_i64()),
        (Some("active"), Some(0))
    );
    assert!(lp.get("pausedReason").is_none());
    // Re-armed: one more failure does not pause it again.
    tick_due(&env, &id);
    assert_eq!(show(&env, &id)["status"], "active");
}

#[test]
fn exponential_backoff_waits_within_the_jitter_bounds() {
    let env = TestEnv::new();
    let id = env.create_command(
        "backoff",
        "exit 1",
        &[
            "--every",
            "1d",
            "--attempts",
            "3",
            "--retry-delay",
            "10m",
            "--backoff",
            "exponential",
        ],
    );
    assert_eq!(show(&env, &id)["backoff"], "exponential");
    for (attempt, base_ms) in [(1, 600_000i64), (2, 1_200_000)] {
        tick_due(&env, &id);
        let run = newest_run(&env, &id);
        assert_eq!(
            (run["attempt"].as_i64(), run["status"].as_str()),
            (Some(attempt), Some("failed"))
        );
        let lp = show(&env, &id);
        let waited = instant(&lp["nextRunAt"]).millis_since(instant(&run["finishedAt"]));
        assert!(
            (base_ms / 2..=base_ms * 3 / 2).contains(&waited),
            "attempt {attempt}: waited {waited} ms"
        );
        assert_eq!(lp["retryScheduledFor"], run["scheduledFor"]);
    }
    // The cap.
    env.loops(["edit", &id, "--max-retry-delay", "1s", "--attempts", "5"])
        .run();
    tick_due(&env, &id);
    let run = newest_run(&env, &id);
    let waited = instant(&show(&env, &id)["nextRunAt"]).millis_since(instant(&run["finishedAt"]));
    assert_eq!(waited, 1_000);
}

#[test]
fn a_skip_exit_code_records_a_skipped_run() {
    let env = TestEnv::new();
    let id = env.create_command(
        "tempfail",
        "exit 75",
        &[
            "--every",
            "1h",
            "--attempts",
            "3",
            "--skip-exit-code",
            "75",
            "--pause-after-failures",
            "1",
        ],
    );
    tick_due(&env, &id);
    let run = newest_run(&env, &id);
    assert_eq!(
        (run["status"].as_str(), run["exitCode"].as_i64()),
        (Some("skipped"), Some(75))
    );
    let lp = show(&env, &id);
    // No retry, no failure counted, so the breaker of 1 did not trip.
    assert_eq!(lp["status"], "active", "{lp}");
    assert!(lp.get("retryScheduledFor").is_none(), "{lp}");
    assert_eq!(lp["consecutiveFailures"], 0);
    env.loops([
        "create",
        "command",
        "x",
        "--cmd",
        "true",
        "--every",
        "1h",
        "--skip-exit-code",
        "0",
    ])
    .code(1)
    .stderr_has("--skip-exit-code must be an exit code from 1 to 255")
    .run();
}

#[test]
fn a_count_starts_when_its_policy_is_set() {
    // Runs before `--expires-after-runs` (or `--pause-after-failures`) was
    // set do not count toward it.
    let env = TestEnv::new();
    let id = env.create_command("later", "true", &["--every", "1h"]);
    tick_due(&env, &id);
    tick_due(&env, &id);
    env.loops(["edit", &id, "--expires-after-runs", "2"]).run();
    assert_eq!(show(&env, &id)["consecutiveSuccesses"], 0);
    tick_due(&env, &id);
    let lp = show(&env, &id);
    assert_eq!(
        (lp["status"].as_str(), lp["consecutiveSuccesses"].as_i64()),
        (Some("active"), Some(1)),
        "{lp}"
    );
    env.loops(["edit", &id, "--cmd", "exit 1"]).run();
    tick_due(&env, &id);
    tick_due(&env, &id);
    env.loops(["edit", &id, "--pause-after-failures", "3"])
        .run();
    assert_eq!(show(&env, &id)["consecutiveFailures"], 0);
    tick_due(&env, &id);
    let lp = show(&env, &id);
    assert_eq!(
        (lp["status"].as_str(), lp["consecutiveFailures"].as_i64()),
        (Some("active"), Some(1)),
        "{lp}"
    );
}
