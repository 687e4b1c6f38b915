//! Issue 30, triggers other than the clock (`docs/triggers.md` T1–T6):
//! `--after` chains, `loops trigger` with a payload and an idempotency
//! key, what a triggered run is told, and the refusal of a cycle.

use std::time::Duration;

use loops_tests::{Daemon, TestEnv, wait_for};
use serde_json::Value;

/// A command that prints what its trigger told it.
const SHOW: &str = "echo \"kind=$LOOPS_TRIGGER_KIND loop=$LOOPS_TRIGGER_LOOP \
    run=$LOOPS_TRIGGER_RUN_ID payload=$LOOPS_TRIGGER_PAYLOAD\"";

fn runs(env: &TestEnv, name: &str) -> Vec<Value> {
    let runs = env
        .loops(["--json", "runs", name, "--show-output"])
        .run()
        .json();
    runs.as_array().cloned().unwrap_or_default()
}

#[test]
fn a_loop_after_another_runs_once_per_upstream_run_and_is_told_which() {
    let env = TestEnv::new();
    env.loops([
        "create", "command", "build", "--every", "1h", "--cmd", "true",
    ])
    .run();
    env.loops(["create", "command", "deploy", "--every", "1h"])
        .args(["--after", "build", "--cmd", SHOW])
        .run();
    let shown = env.loops(["--json", "show", "deploy"]).run().json();
    let build = env.loops(["--json", "show", "build"]).run().json();
    assert_eq!(shown["after"][0]["loop"], build["id"]);
    assert_eq!(shown["after"][0]["on"], "succeeded");

    env.loops(["run-now", "build"]).run();
    let upstream = runs(&env, "build")[0]["id"].as_str().unwrap().to_owned();
    // Two ticks: the second finds nothing more to start.
    env.loops(["tick"]).run();
    env.loops(["tick"]).run();
    let ran = runs(&env, "deploy");
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert_eq!(
        ran[0]["stdout"],
        format!(
            "kind=after loop={} run={upstream} payload=\n",
            build["id"].as_str().unwrap()
        )
    );
    // What started it (T10).
    assert_eq!(ran[0]["trigger"]["kind"], "after");
    assert_eq!(ran[0]["trigger"]["sourceRunId"], upstream.as_str());
    assert!(ran[0]["trigger"].get("payload").is_none(), "{ran:?}");
    env.loops(["runs", "deploy"])
        .stdout_has("succeeded (after build)")
        .run();
    env.loops(["runs", ran[0]["id"].as_str().unwrap()])
        .stdout_has(&format!("trigger:   after build, run {upstream}"))
        .run();
    // A triggered run leaves the schedule where it was.
    let after = env.loops(["--json", "show", "deploy"]).run().json();
    assert_eq!(after["nextRunAt"], shown["nextRunAt"]);
}

#[test]
fn a_cycle_of_after_edges_is_refused_naming_its_loops() {
    let env = TestEnv::new();
    env.loops(["create", "command", "a", "--every", "1h", "--cmd", "true"])
        .run();
    env.loops(["create", "command", "b", "--every", "1h", "--after", "a"])
        .args(["--cmd", "true"])
        .run();
    env.loops(["edit", "a", "--after", "b:finished"])
        .code(1)
        .stderr_has("--after would make a cycle: a → b → a")
        .run();
    env.loops(["edit", "a", "--after", "nope"])
        .code(1)
        .stderr_has("loop not found: nope")
        .run();
    env.loops(["edit", "b", "--after", "a:done"])
        .code(1)
        .stderr_has("use succeeded, failed or finished")
        .run();
    // `''` removes the edges.
    env.loops(["edit", "b", "--after", ""]).run();
    let b = env.loops(["--json", "show", "b"]).run().json();
    assert!(b.get("after").is_none(), "{b}");
}

#[test]
fn a_trigger_hands_its_payload_once_per_key_through_the_daemon() {
    let env = TestEnv::new();
    env.loops(["create", "command", "hook", "--every", "1h", "--cmd", SHOW])
        .run();
    env.loops(["trigger", "hook", "--payload", "[1,2]", "--payload", "{"])
        .code(2)
        .run();
    env.loops(["trigger", "hook", "--payload", "{"])
        .code(1)
        .stderr_has("--payload must be JSON")
        .run();
    let first = env
        .loops([
            "--json",
            "trigger",
            "hook",
            "--payload",
            "{\"ref\":\"main\"}",
        ])
        .args(["--idempotency-key", "build-1"])
        .run()
        .json();
    assert_eq!(first["added"], true);
    assert_eq!(first["kind"], "manual");
    env.loops(["trigger", "hook", "--idempotency-key", "build-1"])
        .stdout_has("already triggered hook")
        .run();
    let _daemon = Daemon::start(&env, &[]);
    let ran = wait_for("the triggered run", Duration::from_secs(30), || {
        let ran = runs(&env, "hook");
        (ran.len() == 1 && ran[0]["status"] == "succeeded").then_some(ran)
    });
    // The payload reached the run; as every value a run is handed in its
    // environment, it is masked in the stored output.
    assert_eq!(
        ran[0]["stdout"],
        "kind=manual loop= run= payload=[redacted]\n"
    );
    // The key was used: nothing more runs.
    env.loops(["trigger", "hook", "--idempotency-key", "build-1"])
        .stdout_has("already triggered hook")
        .run();
}

#[test]
fn a_loop_on_triggers_only_is_never_due_and_runs_after_its_upstream() {
    let env = TestEnv::new();
    env.loops([
        "create", "command", "up", "--every", "1h", "--cmd", "exit 3",
    ])
    .run();
    env.loops([
        "create",
        "command",
        "notify",
        "--every",
        "1h",
        "--trigger-only",
    ])
    .args(["--cmd", "true"])
    .code(1)
    .stderr_has("--trigger-only runs the loop on triggers only")
    .run();
    env.loops(["create", "command", "notify", "--trigger-only"])
        .args(["--after", "up:failed", "--cmd", SHOW])
        .run();
    let shown = env.loops(["--json", "show", "notify"]).run().json();
    assert_eq!(shown["triggerOnly"], true);
    assert!(shown["nextRunAt"].is_null(), "{shown}");
    env.loops(["list"]).stdout_has("triggers only").run();
    env.loops(["status", "notify"])
        .stdout_has("After: up (failed)")
        .run();
    // A paused loop keeps its triggers for later, and says so.
    env.loops(["pause", "notify"]).run();
    env.loops(["trigger", "notify"])
        .stderr_has("loop notify is paused: the trigger waits until `loops resume")
        .run();
    env.loops(["tick"]).run();
    assert!(runs(&env, "notify").is_empty());
    env.loops(["resume", "notify"]).run();
    // Nothing is due: a tick runs nothing but the trigger.
    env.loops(["tick"]).run();
    assert_eq!(runs(&env, "notify").len(), 1);
    env.loops(["run-now", "up"]).code(1).run();
    env.loops(["status", "notify"])
        .stdout_has("Triggers: 1 pending")
        .run();
    env.loops(["tick"]).run();
    let ran = runs(&env, "notify");
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert!(
        ran[0]["stdout"].as_str().unwrap().starts_with("kind=after"),
        "{ran:?}"
    );
    // A pause and a resume keep it off the clock.
    env.loops(["pause", "notify"]).run();
    env.loops(["resume", "notify"]).run();
    let shown = env.loops(["--json", "show", "notify"]).run().json();
    assert!(shown["nextRunAt"].is_null(), "{shown}");
    // A schedule puts it back on the clock.
    env.loops(["edit", "notify", "--every", "1h"]).run();
    let shown = env.loops(["--json", "show", "notify"]).run().json();
    assert!(shown.get("triggerOnly").is_none(), "{shown}");
    assert!(shown["nextRunAt"].is_string(), "{shown}");
}

#[test]
fn the_webhook_is_loops_trigger_with_the_body_as_payload() {
    use crate::serve::Server;
    let env = TestEnv::new();
    let id = env.create_command("hook", "true", &["--every", "1h"]);
    let server = Server::start(&env);
    let bearer = format!("Bearer {}", server.token);
    let own = format!("http://{}", server.addr);
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Origin", own.as_str()),
        ("Idempotency-Key", "push-42"),
    ];
    let path = format!("/api/v1/loops/{id}/trigger");
    let first = server.send_body("POST", &path, &headers, r#"{"ref":"main"}"#);
    assert_eq!(first.status, 200, "{}", first.body);
    let first = first.json();
    assert_eq!(
        (first["added"].clone(), first["kind"].clone()),
        (true.into(), "manual".into())
    );
    // The same delivery again adds nothing, and names the first.
    let again = server.send_body("POST", &path, &headers, r#"{"ref":"main"}"#);
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["added"], false);
    assert_eq!(again.json()["id"], first["id"]);
    // A body that is not JSON, or one sent as a form could, is refused.
    let bad = server.send_body("POST", &path, &headers, "{");
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.error().1.contains("--payload must be JSON"),
        "{}",
        bad.body
    );
    let form = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "text/plain"),
        ("Origin", own.as_str()),
    ];
    let refused = server.send_body("POST", &path, &form, "{}");
    assert_eq!(refused.status, 415, "{}", refused.body);
    // Without the token, nothing.
    let anonymous = [
        ("Content-Type", "application/json"),
        ("Origin", own.as_str()),
    ];
    let refused = server.send_body("POST", &path, &anonymous, "{}");
    assert_eq!(refused.status, 401, "{}", refused.body);
    let missing = server.send_body("POST", "/api/v1/loops/nope/trigger", &headers, "{}");
    assert_eq!(missing.status, 404, "{}", missing.body);
    // One pending trigger in all.
    env.loops(["status", "hook"])
        .stdout_has("Triggers: 1 pending")
        .run();
}

#[test]
fn a_command_reads_its_trigger_payload_on_stdin() {
    let env = TestEnv::new();
    env.loops(["create", "command", "count", "--every", "1h"])
        .args(["--cmd", "wc -c | tr -d ' '"])
        .run();
    env.loops(["trigger", "count", "--payload", "{\"ref\":\"main\"}"])
        .run();
    env.loops(["tick"]).run();
    let ran = runs(&env, "count");
    assert_eq!(ran.len(), 1, "{ran:?}");
    // 14 bytes: the payload, whole, and nothing else.
    assert_eq!(ran[0]["stdout"], "14\n");
    // A run without a trigger reads nothing.
    env.loops(["run-now", "count"]).run();
    let ran = runs(&env, "count");
    assert_eq!(ran[0]["stdout"], "0\n", "{ran:?}");
}
