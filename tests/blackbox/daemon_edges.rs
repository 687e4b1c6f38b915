//! Daemon behaviours no other test would notice being removed (issue 32):
//! SIGHUP is ignored, a wake socket that cannot be bound is survived, the
//! `--command-concurrency` lane holds while a workflow loop (in no lane)
//! still runs, and `LOOPS_HOSTNAME` names the host, cut at its first `:`.

use std::time::Duration;

use loops_tests::{Daemon, TestEnv, is_running, kill, wait_for};
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(20);

/// A moment long past: a loop `--at` it is due at once.
const PAST: &str = "2020-01-01T00:00:00Z";

/// The runs of loop `name`, newest first.
fn runs(env: &TestEnv, name: &str) -> Vec<Value> {
    let runs = env.loops(["--json", "runs", name]).run().json();
    runs.as_array().expect("runs --json is an array").clone()
}

/// Waits until loop `name` has a succeeded run.
fn wait_succeeded(env: &TestEnv, name: &str) {
    wait_for(&format!("a succeeded run of {name}"), DEADLINE, || {
        runs(env, name)
            .iter()
            .any(|r| r["status"] == "succeeded")
            .then_some(())
    });
}

#[test]
fn the_daemon_ignores_sighup_and_still_runs_loops() {
    let env = TestEnv::new();
    let daemon = Daemon::start(&env, &[]);
    assert!(kill("-HUP", daemon.pid), "SIGHUP was not delivered");
    env.create_command("after-hup", "true", &["--at", PAST]);
    wait_succeeded(&env, "after-hup");
    assert!(is_running(daemon.pid), "the daemon died of SIGHUP");
    // Twice more, as closing a terminal may send it again.
    kill("-HUP", daemon.pid);
    kill("-HUP", daemon.pid);
    env.create_command("after-more", "true", &["--at", PAST]);
    wait_succeeded(&env, "after-more");
    assert!(is_running(daemon.pid), "the daemon died of SIGHUP");
}

#[test]
fn a_daemon_that_cannot_bind_its_wake_socket_still_runs_loops() {
    for plant in ["dir", "file"] {
        let env = TestEnv::new();
        let socket = env.make_data_dir().join("daemon.sock");
        match plant {
            // A directory at the socket's path: nothing can be bound there
            // nor renamed over it.
            "dir" => std::fs::create_dir(&socket).unwrap(),
            _ => std::fs::write(&socket, "not a socket\n").unwrap(),
        }
        let daemon = Daemon::start(&env, &[]);
        env.create_command("unwoken", "true", &["--at", PAST]);
        wait_succeeded(&env, "unwoken");
        assert!(is_running(daemon.pid), "{plant}: the daemon stopped");
        // A loop created later is noticed by the daemon's own polling.
        env.create_command("later", "true", &["--at", PAST]);
        wait_succeeded(&env, "later");
        if plant == "dir" {
            let log = std::fs::read_to_string(env.data_dir().join("daemon.log")).unwrap();
            assert!(log.contains("cannot listen on"), "{log}");
            assert!(socket.is_dir(), "the planted directory is kept");
        }
    }
}

#[test]
fn the_command_lane_holds_one_run_and_a_workflow_loop_runs_beside_it() {
    let env = TestEnv::new();
    let go = env.home().join("go");
    let wait = format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display());
    for name in ["c1", "c2", "c3"] {
        env.create_command(name, &wait, &["--at", PAST]);
    }
    let file = env.home().join("wf.json");
    std::fs::write(
        &file,
        r#"{"name": "free", "steps": [{"id": "a", "target": {"type": "command", "command": "true"}}]}"#,
    )
    .unwrap();
    env.loops(["workflows", "create", file.to_str().unwrap()])
        .run();
    env.loops([
        "create",
        "workflow",
        "wf",
        "--workflow",
        "free",
        "--at",
        PAST,
    ])
    .run();
    let _daemon = Daemon::start(&env, &["--command-concurrency", "1", "--max-parallel", "4"]);
    let command_runs = || -> Vec<Value> {
        ["c1", "c2", "c3"]
            .iter()
            .flat_map(|name| runs(&env, name))
            .collect()
    };
    // The lane fills with one command run, which waits for `go`; the
    // workflow loop, in no lane, runs beside it.
    wait_for("a command run", DEADLINE, || {
        (!command_runs().is_empty()).then_some(())
    });
    wait_succeeded(&env, "wf");
    let started = command_runs();
    assert_eq!(started.len(), 1, "the command lane of 1 held: {started:#?}");
    assert_eq!(started[0]["status"], "running", "{started:#?}");

    std::fs::write(&go, "").unwrap();
    for name in ["c1", "c2", "c3"] {
        wait_succeeded(&env, name);
    }
    // One at a time: each command run started after the one before had
    // finished.
    let mut spans: Vec<(String, String)> = ["c1", "c2", "c3"]
        .iter()
        .map(|name| {
            let run = runs(&env, name).remove(0);
            (
                run["startedAt"].as_str().unwrap().to_owned(),
                run["finishedAt"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "command runs overlapped: {spans:?}");
    }
}

#[test]
fn loops_hostname_names_the_host_cut_at_its_first_colon() {
    let env = TestEnv::new();
    env.create_command("here", "true", &["--at", PAST]);
    env.loops(["tick"])
        .env("LOOPS_HOSTNAME", Some("box-z:7:extra"))
        .run();
    let run = runs(&env, "here").remove(0);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(run["claimedHost"], "box-z", "{run:#}");
    // The daemon records its lease under that name too.
    let _daemon = env
        .loops(["daemon", "start"])
        .env("LOOPS_HOSTNAME", Some("box-y:1"))
        .run();
    let pid = env.daemon_pid().expect("a pid file");
    let status = wait_for("the daemon's lease", DEADLINE, || {
        let ran = env.loops(["--json", "daemon", "status"]).run();
        ran.stdout.contains("box-y").then_some(ran.stdout)
    });
    assert!(!status.contains("box-y:1"), "{status}");
    env.stop_daemon(pid);
}
