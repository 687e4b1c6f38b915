//! `loops cancel`, and `stop` and `remove` of a loop with a running run
//! (issue 28): the run's process is gone, the run is recorded `cancelled`
//! with who cancelled it, and it is neither retried nor counted toward the
//! failure streak.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use loops_tests::{Daemon, TestEnv, instant_ago, is_running, wait_for};
use serde_json::Value;

/// How long a run may take to start, or to be recorded.
const WAIT: Duration = Duration::from_secs(30);

/// Creates `name`, an hourly loop whose run writes its pid to a file and
/// then sleeps for five minutes as that same process; returns the file.
fn sleeper(env: &TestEnv, name: &str, extra: &[&str]) -> PathBuf {
    let pidfile = env.home().join(format!("{name}.pid"));
    let _ = std::fs::remove_file(&pidfile);
    let cmd = format!("echo $$ > '{}'; exec sleep 300", pidfile.display());
    let mut schedule = vec!["--every", "1h"];
    schedule.extend_from_slice(extra);
    env.create_command(name, &cmd, &schedule);
    pidfile
}

/// The pid of the running sleeper, once it wrote its file.
fn started(pidfile: &PathBuf) -> u32 {
    wait_for("the run to start", WAIT, || {
        let pid: u32 = std::fs::read_to_string(pidfile).ok()?.trim().parse().ok()?;
        is_running(pid).then_some(pid)
    })
}

/// `loops run-now <name>` in the background.
fn run_now(env: &TestEnv, name: &str) -> Child {
    env.cmd()
        .args(["run-now", name])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run-now starts")
}

/// The runs of `name`, newest first.
fn runs(env: &TestEnv, name: &str) -> Vec<Value> {
    let runs = env.loops(["--json", "runs", name]).run().json();
    runs.as_array().expect("an array").clone()
}

/// The id of the one running run of `name`.
fn running_run(env: &TestEnv, name: &str) -> String {
    wait_for("the run to be recorded running", WAIT, || {
        let runs = runs(env, name);
        let run = runs.iter().find(|r| r["status"] == "running")?;
        Some(run["id"].as_str()?.to_owned())
    })
}

/// Makes `name` due now, for a daemon to run it.
fn make_due(env: &TestEnv, name: &str) {
    env.raw().exec(&format!(
        "UPDATE loops SET next_run_at = {} WHERE name = '{name}'",
        instant_ago(1000)
    ));
}

#[test]
fn cancel_stops_a_foreground_run_now_and_records_who_cancelled_it() {
    let env = TestEnv::new();
    let pidfile = sleeper(&env, "slow", &[]);
    let mut child = run_now(&env, "slow");
    let pid = started(&pidfile);
    let run_id = running_run(&env, "slow");

    let ran = env
        .loops(["cancel", &run_id, "--grace", "1s"])
        .env("USER", Some("ann"))
        .stdout_has(&format!("{run_id} cancelled (slow, by ann@"))
        .run();
    assert!(!is_running(pid), "{}", ran.stdout);
    // run-now returns once its run is recorded.
    child.wait().expect("run-now ends");
    let runs = runs(&env, "slow");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["status"], "cancelled");
    assert_eq!(runs[0]["attempt"], 1);
    let by = runs[0]["cancelledBy"].as_str().expect("cancelledBy");
    assert!(by.starts_with("ann@"), "{by}");

    // A finished run is not running: said, exit 0.
    env.loops(["cancel", &run_id])
        .stdout_has("not running (it is cancelled)")
        .run();
    // Neither is a loop without a running run.
    env.loops(["cancel", "slow"])
        .stdout_has("has no running run")
        .run();
    // An unknown id is an error.
    env.loops(["cancel", "0123456789ab"])
        .code(1)
        .stderr_has("cancel takes a run id or a loop's id or name")
        .run();
}

#[test]
fn a_cancelled_daemon_run_is_not_retried_nor_counted_toward_the_breaker() {
    let env = TestEnv::new();
    // A failure would be retried (3 attempts) and trip the breaker (1).
    let pidfile = sleeper(
        &env,
        "flaky",
        &["--attempts", "3", "--pause-after-failures", "1"],
    );
    make_due(&env, "flaky");
    let _daemon = Daemon::start(&env, &[]);
    let pid = started(&pidfile);

    let cancelled = env.loops(["--json", "cancel", "flaky"]).run().json();
    assert_eq!(
        cancelled["cancelled"][0]["status"], "cancelled",
        "{cancelled}"
    );
    assert!(!is_running(pid));
    let shown = env.loops(["--json", "show", "flaky"]).run().json();
    assert_eq!(shown["status"], "active", "{shown}");
    assert!(shown.get("retryScheduledFor").is_none(), "{shown}");
    assert!(shown.get("pausedReason").is_none(), "{shown}");
    assert!(
        shown["consecutiveFailures"].as_u64().unwrap_or(0) == 0,
        "{shown}"
    );
    assert!(shown["nextRunAt"].is_string(), "{shown}");
    let runs = runs(&env, "flaky");
    assert_eq!(runs.len(), 1, "no retry was claimed: {runs:?}");
    assert_eq!(runs[0]["status"], "cancelled");
}

#[test]
fn stop_and_remove_of_a_running_loop_warn_refuse_or_cancel() {
    let env = TestEnv::new();
    let pidfile = sleeper(&env, "held", &[]);
    let mut child = run_now(&env, "held");
    let pid = started(&pidfile);
    let run_id = running_run(&env, "held");

    // stop says so, and leaves it running.
    env.loops(["stop", "held"])
        .stdout_has("stopped")
        .stderr_has(&format!("held has a running run ({run_id})"))
        .stderr_has("--cancel")
        .run();
    assert!(is_running(pid));
    // remove --purge refuses: the process would be left untracked.
    env.loops(["remove", "held", "--purge"])
        .code(1)
        .stderr_has("use --cancel to cancel it first, or wait for it to end")
        .run();
    env.loops(["show", "held"]).run();
    assert!(is_running(pid));
    // stop --cancel cancels it.
    env.loops(["stop", "held", "--cancel", "--grace", "1s"])
        .stderr_has(&format!("{run_id} cancelled"))
        .run();
    assert!(!is_running(pid));
    child.wait().expect("run-now ends");
    assert_eq!(runs(&env, "held")[0]["status"], "cancelled");

    // remove --purge --cancel: the process is dead and the run recorded
    // before the loop goes.
    let child = run_now(&env, "held");
    let pid = started(&pidfile);
    running_run(&env, "held");
    env.loops(["remove", "held", "--purge", "--cancel"])
        .stdout_has("removed")
        .run();
    assert!(!is_running(pid));
    env.loops(["show", "held"]).code(1).run();
    let out = child.wait_with_output().expect("run-now ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("not found after finalize"), "{stderr}");
}

/// A daemon started with its own host name, stopped when dropped.
struct HostDaemon<'a> {
    env: &'a TestEnv,
    pid: u32,
}

impl Drop for HostDaemon<'_> {
    fn drop(&mut self) {
        self.env.stop_daemon(self.pid);
    }
}

// On PostgreSQL the request reaches the daemon holding the run on another
// host: the cancel comes from another data directory (no wake socket
// shared) under another host name.
#[test]
fn cancel_from_another_host_reaches_the_daemon_through_postgres() {
    let env = TestEnv::new();
    if !env.on_postgres() {
        eprintln!("skipped: needs LOOPS_TEST_BACKEND=postgres");
        return;
    }
    let pidfile = sleeper(&env, "remote", &[]);
    make_due(&env, "remote");
    let ran = env
        .loops(["daemon", "start"])
        .env("LOOPS_HOSTNAME", Some("host-a"))
        .run();
    let pid = ran
        .stdout
        .trim()
        .strip_prefix("started pid=")
        .and_then(|p| p.parse().ok())
        .expect("started pid=<pid>");
    let _daemon = HostDaemon { env: &env, pid };
    let sleeper_pid = started(&pidfile);
    let run_id = running_run(&env, "remote");

    let elsewhere = env.home().join("host-b-data");
    let cancelled = env
        .loops(["--json", "cancel", &run_id])
        .env("LOOPS_HOSTNAME", Some("host-b"))
        .env("USER", Some("bob"))
        .env("LOOPS_DATA_DIR", Some(elsewhere.to_str().expect("a path")))
        .run()
        .json();
    let run = &cancelled["cancelled"][0];
    assert_eq!(run["status"], "cancelled", "{cancelled}");
    assert_eq!(run["cancelledBy"], "bob@host-b");
    assert_eq!(run["claimedHost"], "host-a");
    assert!(!is_running(sleeper_pid));
}

#[test]
fn the_mcp_tool_loops_cancel_cancels_as_mcp() {
    let env = TestEnv::new();
    let pidfile = sleeper(&env, "agentic", &[]);
    let mut child = run_now(&env, "agentic");
    let pid = started(&pidfile);
    running_run(&env, "agentic");
    let cancelled = crate::mcp::block_on(async {
        let mcp = crate::mcp::mutable(&env).await;
        mcp.ok(
            "loops_cancel",
            serde_json::json!({"target": "agentic", "grace": "1s"}),
        )
        .await
    });
    assert_eq!(
        cancelled["cancelled"][0]["status"], "cancelled",
        "{cancelled}"
    );
    assert_eq!(cancelled["cancelled"][0]["cancelledBy"], "mcp");
    assert!(!is_running(pid));
    child.wait().expect("run-now ends");
}
