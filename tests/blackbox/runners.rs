//! The runners: `run-now` and `tick` with real processes, their exit codes,
//! runner ids, redaction, fake agents, and cancellation by signal (SPEC
//! §3.5, §7.4; §9 items 19 and 26).

use std::process::Command;
use std::time::{Duration, Instant};

use loops_tests::{TestEnv, wait_for};

#[test]
fn run_now_records_a_successful_run() {
    let env = TestEnv::new();
    let id = env.create_command("hello", "printf hello", &["--every", "1h"]);
    let next = env.loops(["show", &id]).run().json()["nextRunAt"].clone();
    let ran = env.loops(["run-now", &id]).run();
    let mut lines = ran.stdout.lines();
    let first = lines.next().unwrap();
    assert!(first.ends_with(" succeeded"), "{first}");
    assert_eq!(
        lines.next(),
        Some("  stdout: [redacted 5 chars] (--show-output prints it)")
    );

    let run = &env.loops(["--json", "runs"]).run().json()[0];
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["exitCode"], 0);
    let claimed_by = run["claimedBy"].as_str().unwrap();
    assert!(claimed_by.starts_with("manual:"), "{claimed_by}");
    // SPEC §3.5: a run of a loop that is not due leaves its next run alone.
    assert_eq!(env.loops(["show", &id]).run().json()["nextRunAt"], next);

    let ran = env.loops(["run-now", &id, "--show-output"]).run();
    assert!(
        ran.stdout.ends_with(" succeeded\n  stdout:\n    hello\n"),
        "{}",
        ran.stdout
    );
}

#[test]
fn run_now_exits_1_when_the_run_fails() {
    let env = TestEnv::new();
    let id = env.create_command("boom", "exit 3", &["--every", "1h"]);
    let ran = env.loops(["run-now", &id]).code(1).run();
    assert!(ran.stdout.lines().next().unwrap().ends_with(" failed"));
    assert!(ran.stdout.contains("  error: process exited with code 3"));
    assert!(ran.stderr.is_empty(), "{}", ran.stderr);
    let run = env.loops(["--json", "run-now", &id]).code(1).run().json();
    assert_eq!(run["status"], "failed");
    assert_eq!(run["exitCode"], 3);
}

#[test]
fn run_now_json_redacts_output() {
    let env = TestEnv::new();
    let id = env.create_command("hello", "printf hello", &["--every", "1h"]);
    let run = env.loops(["--json", "run-now", &id]).run().json();
    assert_eq!(run["stdout"], "[redacted 5 chars]");
    assert!(run.get("stderr").is_none());
    let run = env
        .loops(["--json", "run-now", &id, "--show-output"])
        .run()
        .json();
    assert_eq!(run["stdout"], "hello");
}

#[test]
fn run_now_works_on_a_stopped_loop() {
    let env = TestEnv::new();
    let id = env.create_command("s", "true", &["--every", "1h"]);
    env.loops(["stop", &id]).run();
    env.loops(["run-now", &id]).stdout_has(" succeeded").run();
}

#[test]
fn tick_runs_due_slots_and_advances_loops() {
    let env = TestEnv::new();
    let once = env.create_command("once", "printf tick", &["--at", "2020-01-01T00:00:00Z"]);
    env.create_command("later", "true", &["--every", "1h"]);
    env.loops(["tick"])
        .stdout("completed=1 skipped=0 recovered=0 expired=0\n")
        .run();
    let lp = env.loops(["show", &once]).run().json();
    assert_eq!(lp["status"], "stopped");
    assert!(lp.get("nextRunAt").is_none());
    let run = &env.loops(["--json", "runs", &once]).run().json()[0];
    assert_eq!(run["scheduledFor"], "2020-01-01T00:00:00.000Z");
    assert_eq!(run["status"], "succeeded");
    assert!(
        run["claimedBy"]
            .as_str()
            .unwrap()
            .starts_with("manual-tick:")
    );
    // Nothing is due any more.
    env.loops(["tick"])
        .stdout("completed=0 skipped=0 recovered=0 expired=0\n")
        .run();
}

#[test]
fn tick_json_has_the_five_keys_and_redacts_output() {
    let env = TestEnv::new();
    env.create_command("once", "printf secret-output", &["--at", "2020-01-01"]);
    env.create_command(
        "expiring",
        "true",
        &["--every", "1h", "--expires-at", "2020-01-01T00:00:00Z"],
    );
    let ran = env.loops(["--json", "tick"]).run();
    assert!(!ran.stdout.contains("secret-output"), "{}", ran.stdout);
    let result = ran.json();
    let keys: Vec<&str> = result
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["claimed", "completed", "skipped", "recovered", "expired"]
    );
    assert_eq!(result["completed"][0]["stdout"], "[redacted 13 chars]");
    assert_eq!(result["expired"][0]["name"], "expiring");
    assert_eq!(result["expired"][0]["status"], "expired");
}

#[test]
fn tick_show_output_prints_the_runs() {
    let env = TestEnv::new();
    env.create_command("once", "printf visible", &["--at", "2020-01-01"]);
    let ran = env.loops(["tick", "--show-output"]).run();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines[0], "completed=1 skipped=0 recovered=0 expired=0");
    assert!(lines[1].ends_with(" succeeded once"), "{}", lines[1]);
    assert_eq!(&lines[2..], ["  stdout:", "    visible"]);
    env.loops(["tick", "--max-parallel", "0"])
        .code(1)
        .stderr_has("error: --max-parallel must be a positive integer")
        .run();
}

#[test]
fn agent_loops_run_the_provider_cli_with_the_prompt_on_stdin() {
    let env = TestEnv::new();
    // A fake `claude` on PATH that echoes its arguments, then its stdin:
    // the prompt (agents note §2.3; 0.3.1 put it last on argv).
    env.write_script(
        "claude",
        r#"for a in "$@"; do printf '%s|' "$a"; done; printf 'stdin:'; cat"#,
    );
    let prompt = format!("summarize {}", "the repository ".repeat(8));
    env.loops([
        "create",
        "agent",
        "summary",
        "--provider",
        "claude",
        "--prompt",
        &prompt,
        "--every",
        "1h",
    ])
    .run();
    let shown = env.loops(["show", "summary"]).run().json();
    let stored = shown["target"]["prompt"].as_str().unwrap();
    assert!(
        stored.ends_with(&format!("... [redacted {} chars]", prompt.len() - 80)),
        "{stored}"
    );

    let ran = env.loops(["run-now", "summary"]).run();
    assert!(!ran.stdout.contains("repository"), "{}", ran.stdout);
    let run = &env.loops(["--json", "runs", "--show-output"]).run().json()[0];
    let argv = run["stdout"].as_str().unwrap();
    assert_eq!(
        argv,
        format!(
            "--safe-mode|--setting-sources|local|--no-session-persistence|-p|--output-format|\
             json|stdin:{prompt}"
        )
    );
}

/// Waits until the newest run is running with its child's pid recorded.
fn running_child(env: &TestEnv) -> u64 {
    wait_for("the run to start", Duration::from_secs(10), || {
        let runs = env.loops(["--json", "runs"]).run().json();
        let run = runs.get(0)?;
        (run["status"] == "running")
            .then(|| run["pid"].as_u64())
            .flatten()
    })
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

fn is_alive(pid: u64) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn sigint_cancels_run_now_and_kills_the_child() {
    let env = TestEnv::new();
    let id = env.create_command("slow", "sleep 30", &["--every", "1h"]);
    let child = env.spawn(&["run-now", &id]);
    let sleeper = running_child(&env);
    let started = Instant::now();
    signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(" failed\n  error: cancelled by SIGINT"),
        "{stdout}"
    );
    let run = &env.loops(["--json", "runs"]).run().json()[0];
    assert_eq!(run["status"], "failed");
    assert_eq!(run["error"], "cancelled by SIGINT");
    wait_for("the child to die", Duration::from_secs(5), || {
        (!is_alive(sleeper)).then_some(())
    });
}

#[test]
fn sigterm_stops_a_tick() {
    let env = TestEnv::new();
    env.create_command("slow", "sleep 30", &["--at", "2020-01-01"]);
    let child = env.spawn(&["tick"]);
    running_child(&env);
    signal(child.id(), "-TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error: tick interrupted (cancelled by SIGTERM)"),
        "{stderr}"
    );
    let run = &env.loops(["--json", "runs"]).run().json()[0];
    assert_eq!(run["error"], "cancelled by SIGTERM");
}

// Issue 25, item 12: a `run-now` killed outright leaves its run running
// under `manual:<pid>`, a runner id that names no host. On PostgreSQL its
// run was judged another host's and waited 30 s of grace past its lease;
// the host recorded with the claim lets `tick` see its process is dead and
// recover it at once, as on SQLite.
#[test]
fn tick_recovers_the_run_of_a_killed_run_now_as_soon_as_its_lease_expired() {
    const HOST: &str = "blackbox-host";
    let env = TestEnv::new();
    let marker = env.home().join("ran");
    // Only the first run blocks, so a retry cannot hold up the tick.
    let job = format!(
        "[ -e {m} ] && exit 0; touch {m}; exec sleep 300",
        m = marker.display()
    );
    env.create_command("slow", &job, &["--every", "1h"]);
    let mut runner = env
        .cmd()
        .env("LOOPS_HOSTNAME", HOST)
        .args(["run-now", "slow"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sleeper = running_child(&env);
    let run = &env.loops(["--json", "runs"]).run().json()[0];
    let claimed_by = run["claimedBy"].as_str().unwrap();
    assert_eq!(claimed_by, format!("manual:{}", runner.id()));
    assert_eq!(run["claimedHost"], HOST);
    let run_id = run["id"].as_str().unwrap().to_owned();

    // Nothing gets to record anything: the runner, then its job's group.
    signal(runner.id(), "-KILL");
    runner.wait().unwrap();
    signal(sleeper as u32, "-KILL");
    // The job is reaped by init, which may take a moment.
    wait_for("the job to be gone", Duration::from_secs(10), || {
        (!is_alive(sleeper)).then_some(())
    });
    // Its lease expired a second ago: well within another host's grace.
    env.raw().exec(&format!(
        "UPDATE loop_runs SET lease_expires_at = {} WHERE id = '{run_id}'",
        loops_tests::instant_ago(1000)
    ));
    let ticked = env
        .loops(["--json", "tick"])
        .env("LOOPS_HOSTNAME", Some(HOST))
        .run()
        .json();
    assert_eq!(ticked["recovered"][0]["id"], run_id.as_str(), "{ticked}");
    let run = &env
        .loops(["--json", "runs", "--status", "abandoned"])
        .run()
        .json()[0];
    assert_eq!(run["id"], run_id.as_str());
    assert_eq!(run["claimedBy"], claimed_by);
}
