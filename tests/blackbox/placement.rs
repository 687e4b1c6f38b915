//! Placement (issue 30, `docs/triggers.md` P1, P2, P4, P6, P7): daemon
//! labels in `daemon status`; `run-now` and `tick` on a host that does not
//! match, and `--anywhere`; the flag on loops no live daemon can run in
//! `list`, `status` and `doctor`; a daemon runs the loops placed on its
//! labels and never one placed on another host.

use std::time::Duration;

use loops_tests::{Daemon, TestEnv, wait_for};
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(20);

fn runs(env: &TestEnv, name: &str) -> Vec<Value> {
    let runs = env.loops(["--json", "runs", name]).run().json();
    runs.as_array().cloned().unwrap_or_default()
}

/// This host's name as loops sees it (`daemon status --json`'s `host`).
fn host(env: &TestEnv) -> String {
    let status = env.loops(["--json", "daemon", "status"]).run().json();
    status["host"]
        .as_str()
        .expect("daemon status names the host")
        .to_owned()
}

/// Starts a daemon and waits until it has registered its lease.
fn start_daemon<'a>(env: &'a TestEnv, args: &[&str]) -> Daemon<'a> {
    let daemon = Daemon::start(env, args);
    wait_for("the daemon's lease", DEADLINE, || {
        let status = env.loops(["--json", "daemon", "status"]).run().json();
        (status["running"] == true && status.get("labels").is_some()).then_some(())
    });
    daemon
}

#[test]
fn daemon_labels_are_shown_by_daemon_status() {
    let env = TestEnv::new();
    env.loops(["daemon", "start", "--label", "bad label"])
        .code(1)
        .stderr_has("invalid label \"bad label\"")
        .run();
    let host = host(&env);
    let _daemon = start_daemon(&env, &["--label", "gpu,zone=eu", "--label", "gpu"]);
    let expected = [format!("host:{host}"), "gpu".into(), "zone=eu".into()];
    let status = env.loops(["--json", "daemon", "status"]).run().json();
    assert_eq!(status["labels"], serde_json::json!(expected), "{status}");
    if env.on_postgres() {
        assert_eq!(status["daemons"][0]["labels"], serde_json::json!(expected));
    }
    env.loops(["daemon", "status"])
        .stdout_has(&format!("labels: host:{host}, gpu, zone=eu"))
        .run();
}

#[test]
fn run_now_refuses_a_loop_placed_elsewhere_unless_anywhere() {
    let env = TestEnv::new();
    env.create_command(
        "far",
        "printf far",
        &["--every", "1h", "--runs-on", "host:box-a,gpu"],
    );
    let refused = env
        .loops(["run-now", "far"])
        .env("LOOPS_HOSTNAME", Some("box-b"))
        .code(1)
        .stderr_has(
            "loop far runs on host:box-a, gpu; this host has host:box-b; \
             run it there, or pass --anywhere",
        )
        .run();
    assert!(refused.stdout.is_empty(), "{}", refused.stdout);
    assert!(runs(&env, "far").is_empty(), "nothing was written");
    let ran = env
        .loops(["run-now", "far", "--anywhere"])
        .env("LOOPS_HOSTNAME", Some("box-b"))
        .run();
    let first = ran.stdout.lines().next().unwrap_or_default();
    assert!(first.ends_with(" succeeded"), "{}", ran.stdout);
    // On the host it is placed on it lacks `gpu` still.
    env.loops(["run-now", "far"])
        .env("LOOPS_HOSTNAME", Some("box-a"))
        .code(1)
        .stderr_has("this host has host:box-a;")
        .run();
    assert_eq!(runs(&env, "far").len(), 1);
}

#[test]
fn tick_skips_a_loop_placed_elsewhere_with_a_warning_and_anywhere_runs_it() {
    let env = TestEnv::new();
    let id = env.create_command(
        "far",
        "printf far",
        &["--at", "2020-01-01T00:00:00Z", "--runs-on", "gpu"],
    );
    let here = env.create_command("here", "printf here", &["--at", "2020-01-01T00:00:00Z"]);
    env.loops(["tick"])
        .stdout_has("completed=1 ")
        .stderr_has(&format!(
            "warning: loop far ({id}): not run: it runs on gpu, which this host lacks; \
             run it there, or pass --anywhere"
        ))
        .run();
    assert!(runs(&env, "far").is_empty());
    assert_eq!(runs(&env, &here).len(), 1);
    let ticked = env
        .loops(["tick", "--anywhere"])
        .stdout_has("completed=1 ")
        .run();
    assert!(!ticked.stderr.contains("not run"), "{}", ticked.stderr);
    let far = runs(&env, "far");
    assert_eq!(far.len(), 1);
    assert_eq!(far[0]["status"], "succeeded");
}

#[test]
fn a_loop_no_live_daemon_can_run_is_flagged_in_list_status_and_doctor() {
    let env = TestEnv::new();
    let gpu = env.create_command("gpu-job", "true", &["--every", "1h", "--runs-on", "gpu"]);
    env.create_command("plain", "true", &["--every", "1h"]);
    // No daemon at all: nothing is flagged.
    let listed = env.loops(["list"]).run();
    assert!(
        !listed.stdout.contains("no daemon can run it"),
        "{}",
        listed.stdout
    );

    let _daemon = start_daemon(&env, &[]);
    env.loops(["list"])
        .stdout_has("active (no daemon can run it)")
        .run();
    let list = env.loops(["--json", "list"]).run().json();
    for lp in list.as_array().unwrap() {
        if lp["name"] == "gpu-job" {
            assert_eq!(lp["unplaceable"], true, "{lp}");
        } else {
            assert!(lp.get("unplaceable").is_none(), "{lp}");
        }
    }
    env.loops(["status", "gpu-job"])
        .stdout_has("Runs on: gpu (no daemon can run it)")
        .run();
    let doctor = env.run(&["--json", "doctor"]);
    let doctor: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let checks = doctor["checks"].as_array().unwrap();
    let warning = checks
        .iter()
        .find(|c| c["id"] == format!("loop:{gpu}:placement"))
        .unwrap_or_else(|| panic!("no placement warning: {doctor}"));
    assert_eq!(warning["status"], "warn");
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.contains("gpu-job") && message.contains("runs on gpu"),
        "{message}"
    );
    assert!(
        checks.iter().any(|c| c["id"] == "daemon-labels"),
        "{doctor}"
    );
}

#[test]
fn a_daemon_runs_the_loops_placed_on_its_labels_and_never_another_hosts() {
    let env = TestEnv::new();
    let host = host(&env);
    env.create_command("mine", "true", &["--every", "1s", "--runs-on", "gpu"]);
    env.create_command("local", "true", &["--every", "1s", "--host", &host]);
    env.create_command(
        "other",
        "true",
        &["--every", "1s", "--host", "not-this-host.invalid"],
    );
    let _daemon = start_daemon(&env, &["--label", "gpu"]);
    wait_for("runs of the loops placed here", DEADLINE, || {
        (runs(&env, "mine").len() >= 2 && !runs(&env, "local").is_empty()).then_some(())
    });
    assert!(runs(&env, "other").is_empty(), "ran on the wrong host");
    // A manual run here carries the labels of this host's live daemon.
    env.loops(["run-now", "mine"])
        .stdout_has(" succeeded")
        .run();
    env.loops(["list"]).run();
    let list = env.loops(["--json", "list"]).run().json();
    let other = list
        .as_array()
        .unwrap()
        .iter()
        .find(|lp| lp["name"] == "other")
        .unwrap();
    assert_eq!(other["unplaceable"], true);
}

#[test]
fn run_now_waits_for_a_full_pool_until_stopped_and_ignore_pool_runs_it_now() {
    let env = TestEnv::new();
    env.loops(["pools", "set", "p", "--max", "1"]).run();
    env.create_command("hold", "sleep 30", &["--every", "1h", "--pool", "p"]);
    env.create_command("next", "true", &["--every", "1h", "--pool", "p"]);
    let mut hold = env.spawn(&["run-now", "hold"]);
    wait_for("hold's run", DEADLINE, || {
        runs(&env, "hold")
            .iter()
            .any(|r| r["status"] == "running")
            .then_some(())
    });
    let mut next = env.spawn(&["run-now", "next"]);
    let mut stderr = next.stderr.take().unwrap();
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let said = std::sync::Arc::clone(&said);
        std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            while let Ok(n) = std::io::Read::read(&mut stderr, &mut buf) {
                if n == 0 {
                    break;
                }
                said.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    wait_for("the waiting message", DEADLINE, || {
        said.lock()
            .unwrap()
            .contains("waiting for pool p (1 running); Ctrl-C stops, --ignore-pool runs it now")
            .then_some(())
    });
    assert!(loops_tests::kill("-INT", next.id()));
    let status = next.wait().unwrap();
    reader.join().unwrap();
    assert_eq!(status.code(), Some(1));
    let said = said.lock().unwrap().clone();
    assert!(said.contains("stopped waiting for pool p"), "{said}");
    assert_eq!(said.matches("Ctrl-C stops").count(), 1, "{said}");
    assert!(runs(&env, "next").is_empty(), "nothing ran");

    env.loops(["run-now", "next", "--ignore-pool"])
        .stdout_has(" succeeded")
        .run();
    assert!(loops_tests::kill("-INT", hold.id()));
    let _ = hold.wait();
}

#[test]
fn install_carries_the_daemons_labels_into_the_service() {
    let env = TestEnv::new();
    env.loops(["daemon", "install", "--platform", "linux"])
        .args(["--label", "gpu", "--label", "zone=eu,gpu"])
        .run();
    let unit = std::fs::read_to_string(env.systemd_unit_path()).unwrap();
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .unwrap_or_default();
    assert!(exec.contains(" daemon run "), "{exec}");
    assert!(exec.contains("--label gpu,zone=eu"), "{exec}");
    env.loops(["daemon", "install", "--platform", "linux", "--label", "a b"])
        .code(1)
        .stderr_has("invalid label \"a b\"")
        .run();
}

#[test]
fn the_daemons_page_lists_the_daemons_labels() {
    let env = TestEnv::new();
    let _daemon = start_daemon(&env, &["--label", "gpu-tier"]);
    let server = crate::serve::Server::start(&env);
    let page = server.authed("GET", "/daemons");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("<th>Labels</th>"), "{}", page.body);
    assert!(page.body.contains(", gpu-tier</td>"), "{}", page.body);
}
