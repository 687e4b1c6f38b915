//! Issue 30, file watches (`docs/triggers.md` T8–T10): `--watch` pins a
//! loop to the creating host, a change under the path runs it once after
//! the debounce, and the writes of its own run do not run it again.

use std::path::Path;
use std::time::Duration;

use loops_tests::{Daemon, TestEnv, wait_for};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(30);

fn runs(env: &TestEnv, name: &str) -> Vec<Value> {
    let runs = env
        .loops(["--json", "runs", name, "--show-output"])
        .run()
        .json();
    runs.as_array().cloned().unwrap_or_default()
}

fn daemon_log(env: &TestEnv) -> String {
    std::fs::read_to_string(env.data_dir().join("daemon.log")).unwrap_or_default()
}

/// Waits until the daemon log says `line` `n` times.
fn wait_for_log(env: &TestEnv, line: &str, n: usize) {
    wait_for(
        &format!("{n} × {line:?} in the daemon log"),
        DEADLINE,
        || (daemon_log(env).matches(line).count() >= n).then_some(()),
    );
}

fn host(env: &TestEnv) -> String {
    let status = env.loops(["--json", "daemon", "status"]).run().json();
    status["host"].as_str().expect("the host").to_owned()
}

#[test]
fn a_change_runs_a_watch_loop_once_and_its_own_writes_do_not() {
    let env = TestEnv::new();
    let repo = env.home().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let repo_s = repo.to_str().unwrap();
    // The run writes into the watched directory itself (T9).
    let cmd = format!("echo \"kind=$LOOPS_TRIGGER_KIND\"; echo more >> {repo_s}/own.log");
    env.loops(["create", "command", "on-change", "--trigger-only"])
        .args(["--watch", repo_s, "--debounce", "1s", "--cmd", &cmd])
        .run();
    let shown = env.loops(["--json", "show", "on-change"]).run().json();
    // Without --host or --runs-on, the loop is pinned to this host (T8).
    assert_eq!(shown["runsOn"], json!([format!("host:{}", host(&env))]));
    assert_eq!(
        shown["watch"],
        json!({"paths": [repo_s], "debounceMs": 1000})
    );
    env.loops(["status", "on-change"])
        .stdout_has("Watches:")
        .stdout_has(&format!("{repo_s} (after 1.0s quiet)"))
        .run();

    let _daemon = Daemon::start(&env, &[]);
    wait_for_log(&env, &format!("watching {repo_s}"), 1);
    write(&repo.join("a.txt"));
    let ran = wait_for("the watch run", DEADLINE, || {
        let ran = runs(&env, "on-change");
        (ran.len() == 1 && ran[0]["status"] == "succeeded").then_some(ran)
    });
    assert_eq!(ran[0]["stdout"], "kind=watch\n");
    assert_eq!(ran[0]["trigger"]["kind"], "watch");
    env.loops(["runs", "on-change"])
        .stdout_has("succeeded (watch)")
        .run();
    // Its own write to own.log was seen and dropped.
    let own = "changed while its run ran or just after; not triggered again";
    wait_for_log(&env, own, 1);

    // A change from elsewhere runs it again, once.
    write(&repo.join("b.txt"));
    wait_for("the second watch run", DEADLINE, || {
        let ran = runs(&env, "on-change");
        (ran.len() == 2 && ran.iter().all(|r| r["status"] == "succeeded")).then_some(())
    });
    wait_for_log(&env, own, 2);
    assert_eq!(runs(&env, "on-change").len(), 2);
    let pending = env.loops(["status", "on-change"]).run();
    assert!(!pending.stdout.contains("pending"), "{}", pending.stdout);
}

fn write(path: &Path) {
    std::fs::write(path, "changed\n").expect("a write under the watched path");
}

#[test]
fn watch_flags_are_checked_placed_and_cleared() {
    let env = TestEnv::new();
    env.loops(["create", "command", "w", "--every", "1h", "--cmd", "true"])
        .args(["--debounce", "1s"])
        .code(1)
        .stderr_has("--debounce applies to --watch")
        .run();
    env.loops(["create", "command", "w", "--every", "1h", "--cmd", "true"])
        .args(["--watch", "/srv/x", "--debounce", "0s"])
        .code(1)
        .stderr_has("--debounce")
        .run();
    // Placed elsewhere: not pinned here; two paths, deduplicated.
    env.loops(["create", "command", "w", "--every", "1h", "--cmd", "true"])
        .args([
            "--watch",
            "/srv/x/",
            "--watch",
            "/srv/x",
            "--watch",
            "/etc/app.conf",
        ])
        .args(["--host", "build-1"])
        .run();
    let shown = env.loops(["--json", "show", "w"]).run().json();
    assert_eq!(shown["runsOn"], json!(["host:build-1"]));
    assert_eq!(
        shown["watch"],
        json!({"paths": ["/srv/x", "/etc/app.conf"], "debounceMs": 2000})
    );
    env.loops(["edit", "w", "--debounce", "500ms"]).run();
    let shown = env.loops(["--json", "show", "w"]).run().json();
    assert_eq!(shown["watch"]["debounceMs"], 500);
    env.loops(["edit", "w", "--watch", ""]).run();
    let shown = env.loops(["--json", "show", "w"]).run().json();
    assert!(shown.get("watch").is_none(), "{shown}");
    env.loops(["edit", "w", "--debounce", "1s"])
        .code(1)
        .stderr_has("--debounce applies to --watch")
        .run();
    // The export carries the watch, and an import brings it back.
    env.loops(["edit", "w", "--watch", "/srv/y"]).run();
    // Placed on this host, a path that is not there is said once.
    let missing = env.home().join("nope");
    let missing = missing.to_str().expect("a UTF-8 path");
    env.loops([
        "create",
        "command",
        "here",
        "--trigger-only",
        "--cmd",
        "true",
    ])
    .args(["--watch", missing])
    .stderr_has(&format!(
        "warning: --watch path {missing:?} does not exist; the daemon watches it once it does"
    ))
    .run();
    let exported = env.home().join("export.json");
    env.loops(["export", "--file", exported.to_str().unwrap()])
        .run();
    let other = TestEnv::new();
    other
        .loops(["import", exported.to_str().unwrap(), "--apply"])
        .run();
    let shown = other.loops(["--json", "show", "w"]).run().json();
    assert_eq!(shown["watch"]["paths"], json!(["/srv/y"]));
}
