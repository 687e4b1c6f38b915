//! `list`, `show`, `pause`, `resume`, `stop`, `remove` (SPEC §7.4, §10
//! items 93 and 94; §9 items 33 and 34).

use loops_tests::{TestEnv, snapshot_settings};

fn show(env: &TestEnv, x: &str) -> serde_json::Value {
    env.loops(["show", x]).run().json()
}

#[test]
fn list_prints_aligned_rows() {
    let env = TestEnv::new();
    env.create_command("nightly-backup", "true", &["--at", "2030-01-01T00:00:00Z"]);
    env.create_command("a", "true", &["--at", "2030-06-01T12:00:00Z"]);
    let stopped = env.create_command("stopped one", "true", &["--every", "1h"]);
    env.loops(["stop", &stopped]).run();
    let ran = env.loops(["list"]).frozen().run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("list_human", ran.stdout);
}

#[test]
fn list_filters_by_status_and_caps_with_a_footer() {
    let env = TestEnv::new();
    for i in 0..3 {
        env.create_command(&format!("l{i}"), "true", &["--every", "1h"]);
    }
    let paused = env.create_command("p", "true", &["--every", "1h"]);
    env.loops(["pause", &paused]).run();

    let ran = env
        .loops(["--json", "list", "--status", "paused"])
        .run()
        .json();
    assert_eq!(ran.as_array().map(Vec::len), Some(1));
    assert_eq!(ran[0]["name"], "p");

    // The footer goes to stderr (issue 16): stdout is the header and the
    // rows (piped: no rule, issue 28).
    let ran = env.loops(["ls", "--limit", "2"]).run();
    assert_eq!(ran.stdout.lines().count(), 3, "{}", ran.stdout);
    assert!(
        ran.stderr
            .contains("showing 2 of 4 loops; raise --limit to see more\n"),
        "{}",
        ran.stderr
    );
    // No footer when nothing was left out, and none in JSON.
    let ran = env.loops(["ls", "--limit", "4"]).run();
    assert_eq!(ran.stdout.lines().count(), 5);
    assert!(!ran.stderr.contains("showing"), "{}", ran.stderr);
    let json = env.loops(["--json", "ls", "--limit", "2"]).run().json();
    assert_eq!(json.as_array().map(Vec::len), Some(2));

    env.loops(["ls", "--status", "sleeping"])
        .code(1)
        .stderr_has("error: --status must be active, paused, stopped, or expired")
        .run();
    env.loops(["ls", "--limit", "0"])
        .code(1)
        .stderr_has("error: --limit must be a positive integer")
        .run();
}

// SPEC §10 item 88 (`show` always prints JSON).
// SPEC §10 item 92 (long prompts and `env` are redacted).
#[test]
fn show_is_always_json_and_redacted() {
    let env = TestEnv::new();
    let prompt = "p".repeat(100);
    env.loops([
        "create",
        "agent",
        "helper",
        "--provider",
        "claude",
        "--prompt",
        &prompt,
        "--at",
        "2030-01-01T00:00:00Z",
        "-d",
        "reviews things",
        "--cwd",
        "/srv/app",
    ])
    .run();
    env.loops([
        "create",
        "command",
        "with-env",
        "--cmd",
        "deploy.sh",
        "--env",
        "TOKEN=hunter2",
        "--cron",
        "*/15 * * * *",
        "--tz",
        "UTC",
        "--cwd",
        "/srv/app",
    ])
    .run();
    let agent = env.loops(["show", "helper"]).run();
    let command = env.loops(["show", "with-env"]).run();
    assert!(!command.stdout.contains("hunter2"));
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("show_agent_json", agent.stdout);
    insta::assert_snapshot!("show_command_json", command.stdout);
}

// SPEC §10 item 34 (a name resolves to its loop). Issue 16 departs from
// the newest-wins rule: a name two loops share is refused with both ids.
#[test]
fn a_name_resolves_to_its_loop_and_a_shared_name_is_refused() {
    let env = TestEnv::new();
    let older = env.create_command("twin", "true", &["--every", "1h"]);
    assert_eq!(show(&env, "twin")["id"], older.as_str());
    let newer = env.create_command("twin", "true", &["--every", "2h"]);
    for verb in [
        &["show"][..],
        &["pause"],
        &["resume"],
        &["stop"],
        &["run-now"],
        &["remove"],
        &["runs"],
        &["edit", "--every", "3h"],
        &["rename", "single"],
    ] {
        let ran = env.loops([verb[0], "twin"]).args(&verb[1..]).code(1).run();
        let first = ran.stderr.lines().next().unwrap_or_default().to_owned();
        assert!(
            first.starts_with("error: 2 loops are named \"twin\": ")
                && first.contains(&format!("{newer} (created "))
                && first.contains(&format!("{older} (created "))
                && first.ends_with("; use an id"),
            "{verb:?}: {first}"
        );
    }
    assert_eq!(
        show(&env, &older)["status"],
        "active",
        "nothing was changed"
    );
    assert_eq!(show(&env, &newer)["status"], "active");
}

// SPEC §10 item 93
#[test]
fn stop_clears_next_run_and_pause_keeps_it() {
    let env = TestEnv::new();
    let id = env.create_command("a", "true", &["--every", "1h"]);
    let next = show(&env, &id)["nextRunAt"].clone();

    env.loops(["pause", &id])
        .stdout(&format!("{id} paused\n"))
        .run();
    let lp = show(&env, &id);
    assert_eq!(
        (lp["status"].as_str(), &lp["nextRunAt"]),
        (Some("paused"), &next)
    );

    // The next run in local time, with its offset (issue 28).
    let ran = env.loops(["resume", &id]).env("TZ", Some("UTC")).run();
    let utc = next.as_str().unwrap();
    assert_eq!(
        ran.stdout,
        format!("{id} active next={}+00:00\n", &utc[..19])
    );
    let lp = show(&env, &id);
    assert_eq!(
        (lp["status"].as_str(), &lp["nextRunAt"]),
        (Some("active"), &next)
    );

    env.loops(["stop", &id])
        .stdout(&format!("{id} stopped\n"))
        .run();
    let lp = show(&env, &id);
    assert_eq!(lp["status"], "stopped");
    assert!(lp.get("nextRunAt").is_none(), "{lp}");

    // JSON mode prints the loop.
    let lp = env.loops(["--json", "stop", &id]).run().json();
    assert_eq!(lp["status"], "stopped");
}

#[test]
fn resume_puts_a_stopped_loop_back_on_schedule() {
    let env = TestEnv::new();
    let id = env.create_command("a", "true", &["--every", "1h"]);
    env.loops(["stop", &id]).run();
    let lp = env.loops(["--json", "resume", &id]).run().json();
    assert_eq!(lp["status"], "active");
    let next = lp["nextRunAt"]
        .as_str()
        .expect("a stopped loop gets a fresh next run");
    let created = lp["createdAt"].as_str().unwrap();
    assert!(next > created, "{next} after {created}");
}

#[test]
fn pause_refuses_a_stopped_loop() {
    let env = TestEnv::new();
    let id = env.create_command("a", "true", &["--every", "1h"]);
    env.loops(["stop", &id]).run();
    env.loops(["pause", &id])
        .code(1)
        .stderr_has("error: cannot pause a")
        .stderr_has("only an active loop can be paused")
        .run();
    assert_eq!(show(&env, &id)["status"], "stopped");
}

// SPEC §10 item 94. loops adds a line on the kept history after `removed`
// (SPEC §9 item 34).
#[test]
fn remove_keeps_history_by_default_and_says_so() {
    let env = TestEnv::new();
    let id = env.create_command("a", "printf out", &["--every", "1h"]);
    env.loops(["run-now", &id]).run();
    env.loops(["run-now", &id]).run();
    let ran = env.loops(["remove", &id]).run();
    let mut lines = ran.stdout.lines();
    assert_eq!(lines.next(), Some("removed"));
    let hint = lines.next().unwrap();
    assert!(hint.starts_with("kept 2 runs of a;"), "{hint}");
    assert!(hint.contains(&format!("loops runs {id}")), "{hint}");

    env.loops(["show", &id])
        .code(1)
        .stderr_has(&format!("error: loop not found: {id}"))
        .run();
    // The kept runs are still listed, by the removed loop's id too.
    let runs = env.loops(["--json", "runs", &id]).run().json();
    assert_eq!(runs.as_array().map(Vec::len), Some(2));
}

#[test]
fn remove_purge_deletes_the_history() {
    let env = TestEnv::new();
    let id = env.create_command("a", "true", &["--every", "1h"]);
    let other = env.create_command("b", "true", &["--every", "1h"]);
    env.loops(["run-now", &id]).run();
    env.loops(["run-now", &other]).run();
    let ran = env.loops(["--json", "rm", &id, "--purge"]).run().json();
    assert_eq!(ran["removed"], true);
    assert_eq!(ran["runsDeleted"], 1);
    assert_eq!(ran["history"], "purged");
    let runs = env.loops(["--json", "runs"]).run().json();
    assert_eq!(
        runs.as_array().map(Vec::len),
        Some(1),
        "the other loop's run stays"
    );
    env.loops(["runs", &id])
        .code(1)
        .stderr_has("loop not found")
        .run();

    let ran = env.loops(["rm", "b", "--purge"]).run();
    assert_eq!(ran.stdout, "removed\ndeleted 1 run of b\n");
}

#[test]
fn remove_json_reports_the_kept_history() {
    let env = TestEnv::new();
    let id = env.create_command("a", "true", &["--every", "1h"]);
    let ran = env.loops(["--json", "remove", &id]).run().json();
    assert_eq!(ran["removed"], true);
    assert_eq!(ran["runsKept"], 0);
    assert_eq!(ran["history"], "kept");
}
