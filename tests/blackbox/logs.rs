//! A run's output, live (issue 16 §4): each run's log file under
//! `$LOOPS_DATA_DIR/logs/`, `loops logs [-f]`, gc and `remove --purge`
//! deleting it, planted links never followed, the daemon's finish line,
//! and `logs -f <loop>` following a loop across its runs (issue 28).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use loops_store::testing::lit;
use loops_tests::{Daemon, TestEnv, instant_ago, wait_for};

const DEADLINE: Duration = Duration::from_secs(30);

fn log_file(env: &TestEnv, run_id: &str) -> PathBuf {
    env.data_dir().join("logs").join(format!("{run_id}.log"))
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path)
        .expect("a file")
        .permissions()
        .mode()
        & 0o777
}

/// Creates loop `greet`, whose command prints a line on each stream and
/// exits 3, runs it once and returns the run's id.
fn greet(env: &TestEnv) -> String {
    env.write_script("greet", "echo hello\necho warn >&2\nexit 3");
    env.create_command("greet", "greet", &["--every", "1h"]);
    let run = env
        .loops(["--json", "run-now", "greet"])
        .code(1)
        .run()
        .json();
    run["id"].as_str().expect("a run id").to_owned()
}

#[test]
fn logs_follows_a_running_run_and_sees_its_first_line_before_it_ends() {
    let env = TestEnv::new();
    let gate = env.home().join("gate");
    env.write_script(
        "slow",
        &format!(
            "echo first\nwhile [ ! -e '{}' ]; do sleep 0.02; done\necho second\necho oops >&2",
            gate.display()
        ),
    );
    env.create_command("slow", "slow", &["--every", "1h"]);
    let mut runner = env.spawn(&["run-now", "slow"]);
    let run_id = wait_for("the run to start", DEADLINE, || {
        let runs = env.loops(["--json", "runs", "slow"]).run().json();
        let run = runs.as_array()?.first()?.clone();
        (run["status"] == "running").then(|| run["id"].as_str().unwrap().to_owned())
    });

    // `-f` on a run follows that run and returns when it ends.
    let mut follower = env
        .cmd()
        .args(["logs", "-f", &run_id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, seen) = mpsc::channel();
    let stdout = follower.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = lines.send(line.unwrap());
        }
    });
    // The run waits for the gate: its first line shows while it runs.
    let first = seen.recv_timeout(DEADLINE).expect("a first line");
    assert_eq!(first, "first");
    assert!(!gate.exists());
    let still = env.loops(["--json", "logs", &run_id]).run().json();
    assert_eq!(still["status"], "running");
    assert_eq!(still["log"], "first\n");

    std::fs::write(&gate, "").unwrap();
    let out = follower.wait_with_output().unwrap();
    reader.join().unwrap();
    let rest: Vec<String> = seen.try_iter().collect();
    assert_eq!(rest, ["second", "oops"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("-- run {run_id} succeeded, exit code 0 --")),
        "{stderr}"
    );
    assert!(runner.wait().unwrap().success());
    // `-f` on a finished run prints it and exits.
    env.loops(["logs", "-f", &run_id])
        .stdout("first\nsecond\noops\n")
        .run();
}

#[test]
fn logs_prints_a_finished_run_by_loop_and_by_id_and_falls_back_to_stored_output() {
    let env = TestEnv::new();
    let run_id = greet(&env);
    let file = log_file(&env, &run_id);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\nwarn\n");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&env.data_dir().join("logs")), 0o700);
    for target in ["greet", run_id.as_str()] {
        env.loops(["logs", target])
            .stdout("hello\nwarn\n")
            .stderr_has(&format!(
                "-- run {run_id} failed, exit code 3: process exited with code 3 --"
            ))
            .run();
    }
    let json = env.loops(["--json", "logs", "greet"]).run().json();
    assert_eq!(json["runId"], run_id.as_str());
    assert_eq!(json["log"], "hello\nwarn\n");
    assert_eq!(json["stdout"], "hello\n");
    assert_eq!(json["exitCode"], 3);

    // Without the file (gone, or on another host): the stored output.
    std::fs::remove_file(&file).unwrap();
    env.loops(["logs", &run_id]).stdout("hello\nwarn\n").run();
    let json = env.loops(["--json", "logs", &run_id]).run().json();
    assert_eq!(json["log"], serde_json::Value::Null);
    assert_eq!(json["stderr"], "warn\n");

    env.loops(["logs", "nope"])
        .code(1)
        .stderr_has("loop not found")
        .run();
}

#[test]
fn output_is_escaped_on_the_terminal() {
    let env = TestEnv::new();
    env.write_script("ansi", "printf 'red \\033[31mtext\\tok\\r\\n'");
    env.create_command("ansi", "ansi", &["--every", "1h"]);
    env.loops(["run-now", "ansi"]).run();
    env.loops(["logs", "ansi"])
        .stdout("red \\u{1b}[31mtext\tok\n")
        .run();
}

#[test]
fn gc_and_remove_purge_delete_a_runs_log() {
    let env = TestEnv::new();
    let old = greet(&env);
    let new = env
        .loops(["--json", "run-now", "greet"])
        .code(1)
        .run()
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(log_file(&env, &old).exists() && log_file(&env, &new).exists());
    env.raw().exec(&format!(
        "UPDATE loop_runs SET created_at = {} WHERE id = {}",
        instant_ago(40 * 86_400_000),
        lit(&old)
    ));
    let out = env
        .loops(["--json", "gc", "--apply", "--keep-per-loop", "1"])
        .run();
    assert_eq!(out.json()["loopRuns"], 1, "{}", out.stderr);
    assert!(!log_file(&env, &old).exists());
    assert!(log_file(&env, &new).exists());

    env.loops(["remove", "greet"]).run();
    assert!(log_file(&env, &new).exists(), "history kept, log kept");
    env.write_script("again", "echo again");
    env.create_command("again", "again", &["--every", "1h"]);
    let id = env.loops(["--json", "run-now", "again"]).run().json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    env.loops(["remove", "again", "--purge"]).run();
    assert!(!log_file(&env, &id).exists());
}

#[test]
fn a_planted_link_is_never_followed() {
    let env = TestEnv::new();
    env.make_data_dir();
    let elsewhere = env.home().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    // A link at `logs/`: the run goes on, without a log, and says why.
    std::os::unix::fs::symlink(&elsewhere, env.data_dir().join("logs")).unwrap();
    env.write_script("hi", "echo hi");
    env.create_command("hi", "hi", &["--every", "1h"]);
    let ran = env.loops(["--json", "run-now", "hi"]).run();
    assert_eq!(ran.json()["status"], "succeeded");
    assert!(ran.stderr.contains("never follows links"), "{}", ran.stderr);
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    env.loops(["logs", "hi"]).stdout("hi\n").run();

    // A link at a run's log file: never read through.
    std::fs::remove_file(env.data_dir().join("logs")).unwrap();
    let id = env.loops(["--json", "run-now", "hi"]).run().json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let secret = elsewhere.join("secret");
    std::fs::write(&secret, "not yours\n").unwrap();
    std::fs::remove_file(log_file(&env, &id)).unwrap();
    std::os::unix::fs::symlink(&secret, log_file(&env, &id)).unwrap();
    env.loops(["logs", &id]).stdout("hi\n").run();
}

#[test]
fn the_daemon_log_finish_line_has_the_exit_code_and_the_error() {
    let env = TestEnv::new();
    env.write_script("boom", "echo boom >&2\nexit 3");
    env.create_command("boom", "boom", &["--at", "2020-01-01T00:00:00Z"]);
    let _daemon = Daemon::start(&env, &[]);
    let line = wait_for("the finish line", DEADLINE, || {
        let log = std::fs::read_to_string(env.data_dir().join("daemon.log")).ok()?;
        log.lines()
            .find(|l| l.contains(" failed: boom "))
            .map(str::to_owned)
    });
    assert!(
        line.contains(" exit=3 (process exited with code 3)"),
        "{line}"
    );
    let log = std::fs::read_to_string(env.data_dir().join("daemon.log")).unwrap();
    assert!(log.contains(" started: boom "), "{log}");
    // And the run's output is in its log.
    let json = env.loops(["--json", "logs", "boom"]).run().json();
    assert_eq!(json["log"], "boom\n");
}

#[test]
fn run_now_show_output_streams_on_a_terminal_only() {
    let env = TestEnv::new();
    let gate = env.home().join("gate");
    env.write_script(
        "slow",
        &format!(
            "echo first\nwhile [ ! -e '{}' ]; do sleep 0.02; done\necho second",
            gate.display()
        ),
    );
    env.create_command("slow", "slow", &["--every", "1h"]);
    // On a pseudo-terminal (script(1)), the first line shows while the run
    // still waits for the gate.
    let mut child = on_terminal(&env, "run-now slow --show-output")
        .stdout(Stdio::piped())
        .spawn()
        .expect("script runs");
    let (tx, seen) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line.trim_end_matches('\r').to_owned()).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    wait_for("the first line on the terminal", DEADLINE, || {
        lines.extend(seen.try_iter());
        lines.iter().any(|l| l.contains("first")).then_some(())
    });
    assert!(!lines.iter().any(|l| l.contains("second")), "{lines:?}");
    std::fs::write(&gate, "").unwrap();
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    lines.extend(seen.try_iter());
    let text = lines.join("\n");
    // The output once, then the run's line.
    assert_eq!(text.matches("first").count(), 1, "{text}");
    assert_eq!(text.matches("second").count(), 1, "{text}");
    assert!(text.contains(" succeeded"), "{text}");

    // Piped, the output comes as blocks after the run, as before.
    std::fs::remove_file(&gate).unwrap();
    std::fs::write(&gate, "").unwrap();
    let ran = env.loops(["run-now", "slow", "--show-output"]).run();
    assert!(
        ran.stdout.contains("  stdout:\n    first\n    second"),
        "{}",
        ran.stdout
    );

    // Under --quiet, nothing, on a terminal too.
    let quiet = on_terminal(&env, "--quiet run-now slow --show-output")
        .output()
        .expect("script runs");
    assert!(quiet.status.success(), "{quiet:?}");
    assert_eq!(String::from_utf8_lossy(&quiet.stdout), "");
}

/// `loops <args>` on a pseudo-terminal through script(1), in `env`'s
/// environment; script's status is the command's.
fn on_terminal(env: &TestEnv, args: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new("script");
    for (key, value) in env.cmd().get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let line = format!("{} {args}", loops_tests::loops_bin().display());
    cmd.args(["-qfec", &line, "/dev/null"]).stdin(Stdio::null());
    cmd
}

/// A follower that is killed when the test ends, passed or not, so that a
/// failed test leaves no process holding the harness's pipes.
struct Follower(std::process::Child);

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Lines of a child's pipe, as they come.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits until `seen` has brought a line containing `text` into `lines`.
fn wait_line(what: &str, seen: &mpsc::Receiver<String>, lines: &mut Vec<String>, text: &str) {
    wait_for(what, DEADLINE, || {
        lines.extend(seen.try_iter());
        lines.iter().any(|l| l.contains(text)).then_some(())
    });
}

#[test]
fn logs_follow_on_a_loop_goes_on_across_runs_until_interrupted() {
    let env = TestEnv::new();
    let count = env.home().join("count");
    env.write_script(
        "count",
        &format!(
            "echo x >> '{0}'\necho \"run $(wc -l < '{0}')\"",
            count.display()
        ),
    );
    env.create_command("counter", "count", &["--every", "1h"]);
    let first = env.loops(["--json", "run-now", "counter"]).run().json();
    let first = first["id"].as_str().unwrap().to_owned();

    let mut follower = Follower(
        env.cmd()
            .args(["logs", "-f", "counter"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = lines_of(follower.0.stdout.take().unwrap());
    let err = lines_of(follower.0.stderr.take().unwrap());
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    // The latest run first, with its header and end line, then the wait.
    wait_line("the first run", &out, &mut stdout, "run 1");
    wait_line(
        "the wait",
        &err,
        &mut stderr,
        "-- waiting for the next run of counter",
    );
    assert!(
        stderr
            .iter()
            .any(|l| l.starts_with(&format!("-- run {first} of counter, attempt 1, started "))),
        "{stderr:?}"
    );
    assert!(
        stderr.contains(&format!("-- run {first} succeeded, exit code 0 --")),
        "{stderr:?}"
    );
    // Two more runs: each gets its header, output and end line.
    for n in [2, 3] {
        let run = env.loops(["--json", "run-now", "counter"]).run().json();
        let id = run["id"].as_str().unwrap().to_owned();
        wait_line(
            "the next run's output",
            &out,
            &mut stdout,
            &format!("run {n}"),
        );
        wait_line(
            "the next run's end",
            &err,
            &mut stderr,
            &format!("-- run {id} succeeded"),
        );
        assert!(
            stderr
                .iter()
                .any(|l| l.starts_with(&format!("-- run {id} of counter, attempt 1"))),
            "{stderr:?}"
        );
    }
    assert_eq!(stdout, ["run 1", "run 2", "run 3"]);
    // Still following: Ctrl-C ends it quietly.
    assert!(follower.0.try_wait().unwrap().is_none());
    let kill = std::process::Command::new("kill")
        .args(["-INT", &follower.0.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(follower.0.wait().unwrap().success());
}

#[test]
fn logs_follow_on_a_loop_waits_for_its_first_run_and_ends_when_it_is_removed() {
    let env = TestEnv::new();
    env.create_command("later", "echo hi", &["--every", "1h"]);
    let mut follower = Follower(
        env.cmd()
            .args(["--json", "logs", "-f", "later"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = lines_of(follower.0.stdout.take().unwrap());
    let mut stdout = Vec::new();
    env.loops(["run-now", "later"]).run();
    // `--json` prints each ended run as one line.
    wait_line("the run's object", &out, &mut stdout, "\"runId\"");
    let run: serde_json::Value = serde_json::from_str(&stdout[0]).unwrap();
    assert_eq!(run["loopName"], "later");
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["log"], "hi\n");
    env.loops(["remove", "later"]).run();
    let status = wait_for("the follower to end", DEADLINE, || {
        follower.0.try_wait().unwrap()
    });
    assert!(status.success());
}

#[test]
fn daemon_logs_loop_keeps_only_that_loops_lines() {
    let env = TestEnv::new();
    let ours = env.create_command("ours", "true", &["--every", "1s"]);
    env.create_command("theirs", "true", &["--every", "1s"]);
    let daemon = Daemon::start(&env, &[]);
    let read_log =
        || std::fs::read_to_string(env.data_dir().join("daemon.log")).unwrap_or_default();
    wait_for("both loops' runs", DEADLINE, || {
        let log = read_log();
        (log.contains(" succeeded: ours ") && log.contains(" succeeded: theirs ")).then_some(())
    });
    // Paused and idle, the log stops growing.
    env.loops(["pause", "ours"]).run();
    env.loops(["pause", "theirs"]).run();
    wait_for("no run in flight", DEADLINE, || {
        let running = env
            .loops(["--json", "runs", "--status", "running"])
            .run()
            .json();
        running.as_array().unwrap().is_empty().then_some(())
    });
    // Renamed since: its lines are found by id.
    env.loops(["rename", "ours", "renamed"]).run();
    let ran = env.loops(["daemon", "logs", "--loop", "renamed"]).run();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines.iter().any(|l| l.contains(" started: ours ")),
        "{}",
        ran.stdout
    );
    assert!(
        lines.iter().any(|l| l.contains(" succeeded: ours ")),
        "{}",
        ran.stdout
    );
    assert!(
        lines.iter().all(|l| l.contains(&format!(" loop={ours}"))),
        "{}",
        ran.stdout
    );
    assert!(read_log().contains(" succeeded: theirs "));
    // -n counts the loop's lines.
    let last = env
        .loops(["daemon", "logs", "--loop", &ours, "-n", "1"])
        .run();
    assert_eq!(last.stdout.trim_end(), *lines.last().unwrap());
    // Following keeps to the loop too.
    let mut follower = Follower(
        env.cmd()
            .args(["daemon", "logs", "-f", "-n", "0", "--loop", "renamed"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let seen = lines_of(follower.0.stdout.take().unwrap());
    env.loops(["resume", "theirs"]).run();
    env.loops(["resume", "renamed"]).run();
    let mut followed = Vec::new();
    wait_line(
        "the renamed loop's new run",
        &seen,
        &mut followed,
        " succeeded: renamed ",
    );
    assert!(
        followed
            .iter()
            .all(|l| l.contains(&format!(" loop={ours}"))),
        "{followed:?}"
    );
    drop(follower);
    drop(daemon);
    // An unknown loop is an error.
    env.loops(["daemon", "logs", "--loop", "nope"])
        .code(1)
        .stderr_has("loop not found: nope")
        .run();
}
