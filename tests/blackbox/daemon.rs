//! The daemon with real processes: start, status, stop and logs; a second
//! daemon; a stale pid file; `kill -9` mid-run and the restart that
//! recovers it; a stop within and beyond the grace period; the service
//! files; doctor's exit codes (SPEC §7.5, §7.6, §10 items 95–102; §9 items
//! 6, 16–18, 31, 37).
//!
//! Every daemon runs in the test's own data directory and is stopped when
//! the test ends, even when it fails.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loops_tests::{
    TestEnv, is_running, kill, pid_file_pid, snapshot_settings, sqlite_only, wait_for,
};

const DEADLINE: Duration = Duration::from_secs(10);

/// Stops the test's daemon when dropped: gracefully, then by force.
struct Daemon<'a> {
    env: &'a TestEnv,
}

impl<'a> Daemon<'a> {
    /// `loops daemon start <args>`; returns the daemon and its pid.
    /// Starts a daemon and returns once it listens on its wake-up socket:
    /// `daemon start` returns at the pid file, which the daemon writes
    /// before it binds the socket.
    fn start(env: &'a TestEnv, args: &[&str]) -> (Daemon<'a>, u32) {
        let pid = env.start_daemon(args);
        let sock = env.data_dir().join("daemon.sock");
        wait_for("the daemon's wake-up socket", DEADLINE, || {
            sock.exists().then_some(())
        });
        (Daemon { env }, pid)
    }
}

impl Drop for Daemon<'_> {
    fn drop(&mut self) {
        if let Some(pid) = self.env.daemon_pid() {
            self.env.stop_daemon(pid);
        }
    }
}

/// Kills daemon `pid` with SIGKILL and waits until it is gone.
fn kill_9(pid: u32) {
    assert!(kill("-9", pid), "kill -9 {pid}");
    wait_for("the daemon to die", DEADLINE, || {
        (!is_running(pid)).then_some(())
    });
}

/// Waits for daemon `pid` to stop on its own; its log, whose last line
/// says it stopped.
fn stopped_log(env: &TestEnv, pid: u32) -> String {
    wait_for("the daemon to stop", DEADLINE, || {
        (!is_running(pid)).then_some(())
    });
    let log = log(env);
    assert!(log.trim_end().ends_with("[loops-daemon] stopped"), "{log}");
    log
}

fn runs(env: &TestEnv, loop_name: &str) -> Vec<serde_json::Value> {
    let runs = env.loops(["--json", "runs", loop_name]).run().json();
    runs.as_array().cloned().unwrap_or_default()
}

fn status(env: &TestEnv) -> serde_json::Value {
    env.loops(["--json", "daemon", "status"]).run().json()
}

fn log(env: &TestEnv) -> String {
    std::fs::read_to_string(env.data_dir().join("daemon.log")).unwrap_or_default()
}

// SPEC §10 item 97: `daemon stop` sends SIGTERM; the pid file and the lease are gone
#[test]
fn start_status_logs_and_stop() {
    let env = TestEnv::new();
    env.loops(["daemon", "stop"]).stdout("not running\n").run();
    let (daemon, pid) = Daemon::start(&env, &[]);
    env.loops(["daemon", "start"])
        .stdout(&format!("already running pid={pid}\n"))
        .run();
    let started = env.loops(["--json", "daemon", "start"]).run().json();
    assert_eq!(started["started"], false);
    assert_eq!(started["alreadyRunning"], true);
    assert_eq!(started["pid"], pid);

    let s = status(&env);
    assert_eq!(s["running"], true);
    assert_eq!(s["stale"], false);
    assert_eq!(s["pid"], pid);
    assert_eq!(s["lease"]["pid"], pid);
    assert_eq!(s["loops"]["total"], 0);
    assert_eq!(s["runs"]["abandoned"], 0);
    assert!(s["logPath"].as_str().unwrap().ends_with("/daemon.log"));
    let human = env.loops(["daemon", "status"]).run().stdout;
    assert!(
        human.starts_with(&format!("daemon: running pid={pid} on ")),
        "{human}"
    );
    assert!(human.contains("\nloops: 0 total, 0 active"), "{human}");

    // SPEC §10 item 102, with timestamps (SPEC §9 item 37): the log's
    // UTC instants as written under `--json`, local ones for people
    // (issue 28).
    let logs = env
        .loops(["--json", "daemon", "logs", "-n", "1"])
        .run()
        .stdout;
    let (stamp, rest) = logs.split_once(' ').unwrap();
    assert_eq!(stamp.len(), "2026-11-30T09:00:00.000Z".len(), "{logs}");
    assert!(
        rest.starts_with(&format!("[loops-daemon] started pid={pid} ")),
        "{logs}"
    );
    let logs = env.loops(["daemon", "logs", "-n", "1"]).run().stdout;
    let rest = &logs["2026-11-30 09:00:00 ".len()..];
    assert!(!logs[..19].contains(['T', 'Z']), "{logs}");
    assert!(
        rest.starts_with(&format!("[loops-daemon] started pid={pid} ")),
        "{logs}"
    );

    env.loops(["daemon", "stop"])
        .stdout(&format!("stopped pid={pid}\n"))
        .run();
    assert!(!is_running(pid));
    assert!(!env.data_dir().join("daemon.pid").exists());
    assert!(!env.data_dir().join("daemon.sock").exists());
    let s = status(&env);
    assert_eq!(s["running"], false);
    assert!(s.get("pid").is_none() && s.get("lease").is_none(), "{s}");
    let stopped = env.loops(["--json", "daemon", "stop"]).run().json();
    assert_eq!(
        stopped,
        serde_json::json!({"wasRunning": false, "stopped": false, "forced": false})
    );
    assert!(log(&env).trim_end().ends_with("[loops-daemon] stopped"));
    drop(daemon);
}

// SPEC §10 item 96 (a live lease)
#[test]
fn a_second_daemon_is_refused_naming_the_holder() {
    let env = TestEnv::new();
    let (_daemon, pid) = Daemon::start(&env, &[]);
    env.loops(["daemon", "run"])
        .code(1)
        .stderr_has(&format!(
            "error: another loops daemon holds the database lease: pid {pid} on "
        ))
        .run();
    assert!(is_running(pid), "the first daemon is untouched");
}

#[test]
fn a_stale_pid_file_is_removed_and_its_process_never_signalled() {
    // SPEC §10 item 99.
    let env = TestEnv::new();
    env.make_data_dir();
    let pid_file = env.data_dir().join("daemon.pid");
    let mut bystander = Command::new("sleep").arg("30").spawn().unwrap();
    std::fs::write(&pid_file, bystander.id().to_string()).unwrap();
    let s = status(&env);
    assert_eq!(
        (s["running"].clone(), s["stale"].clone()),
        (false.into(), true.into())
    );
    env.loops(["daemon", "stop"]).stdout("not running\n").run();
    assert!(!pid_file.exists());
    assert!(bystander.try_wait().unwrap().is_none(), "not signalled");
    bystander.kill().unwrap();
    bystander.wait().unwrap();

    // A dead pid is stale too, and `start` replaces it.
    std::fs::write(&pid_file, bystander.id().to_string()).unwrap();
    let (_daemon, pid) = Daemon::start(&env, &[]);
    assert_ne!(pid, bystander.id());
    assert_eq!(status(&env)["running"], true);
}

#[test]
fn runs_land_on_schedule_and_a_create_wakes_the_daemon() {
    // SPEC §9 item 6: the idle daemon sleeps for up to a minute, yet a loop
    // created after it started runs within a second of its slot.
    let env = TestEnv::new();
    let (_daemon, _) = Daemon::start(&env, &[]);
    env.create_command("tick", "echo tick", &["--every", "1s"]);
    let done = wait_for("two runs of a 1s loop", DEADLINE, || {
        let runs = runs(&env, "tick");
        (runs.len() >= 2).then_some(runs)
    });
    for run in &done {
        if run["status"] == "running" {
            continue;
        }
        assert_eq!(run["status"], "succeeded", "{run}");
        let late = millis(&run["startedAt"]) - millis(&run["scheduledFor"]);
        assert!(
            (0..1000).contains(&late),
            "started {late} ms after its slot"
        );
        assert!(run["claimedBy"].as_str().unwrap().split(':').count() == 3);
    }
}

fn millis(instant: &serde_json::Value) -> i64 {
    // YYYY-MM-DDTHH:MM:SS.mmmZ; the runs of one test share a day.
    let s = instant.as_str().expect("an instant");
    let hms: Vec<i64> = s[11..19]
        .split(':')
        .map(|p| p.parse().expect("a number"))
        .collect();
    let ms: i64 = s[20..23].parse().expect("milliseconds");
    ((hms[0] * 60 + hms[1]) * 60 + hms[2]) * 1000 + ms
}

/// A job that sleeps on its first run and succeeds on the next, logging
/// every start and whether the first run's process was still alive then.
fn write_slow_job(env: &TestEnv) -> std::path::PathBuf {
    let dir = env.home().join("job");
    std::fs::create_dir_all(&dir).expect("a job directory");
    env.write_script(
        "slowjob",
        r#"dir="$1"
echo "start $$" >> "$dir/log"
if [ -f "$dir/first" ]; then
  first=$(cat "$dir/first")
  state=$(sed -e 's/.*) //' "/proc/$first/stat" 2>/dev/null | cut -c1)
  if [ -n "$state" ] && [ "$state" != Z ]; then echo overlap >> "$dir/log"; fi
  exit 0
fi
echo $$ > "$dir/first"
exec sleep 30"#,
    );
    dir
}

#[test]
fn kill_9_mid_run_is_recovered_at_once_on_restart() {
    // SPEC §9 items 16 and 18: no waiting out the dead daemon's leases, and
    // its orphaned process group is gone before the slot runs again.
    let env = TestEnv::new();
    let job = write_slow_job(&env);
    let cmd = format!("slowjob {}", job.display());
    env.create_command(
        "slow",
        &cmd,
        &[
            "--at",
            "2020-01-01T00:00:00Z",
            "--attempts",
            "2",
            "--retry-delay",
            "1s",
        ],
    );
    let (daemon, pid) = Daemon::start(&env, &[]);
    let orphan: u32 = wait_for("the first run's job", DEADLINE, || {
        std::fs::read_to_string(job.join("first"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
    });
    kill_9(pid);
    assert!(is_running(orphan), "the job outlived its daemon");
    assert_eq!(runs(&env, "slow")[0]["status"], "running");

    let (_restarted, _) = Daemon::start(&env, &[]);
    let run = wait_for("the retry to succeed", DEADLINE, || {
        let run = runs(&env, "slow").remove(0);
        (run["status"] == "succeeded").then_some(run)
    });
    assert_eq!(run["attempt"], 2);
    assert!(
        !is_running(orphan),
        "the orphaned group was torn down:\n{}",
        log(&env)
    );
    let job_log = std::fs::read_to_string(job.join("log")).unwrap();
    assert_eq!(job_log.matches("start ").count(), 2, "{job_log}");
    assert!(!job_log.contains("overlap"), "{job_log}");
    let log = log(&env);
    // "killed orphaned process group …", or, when the dead daemon had not
    // yet recorded the spawn, "killed orphaned processes of run …" found
    // by the run's claim token.
    assert!(log.contains("killed orphaned process"), "{log}");
    assert!(log.contains("exited before the run completed"), "{log}");
    drop(daemon);
}

#[test]
fn a_stop_lets_runs_finish_within_the_grace_period() {
    let env = TestEnv::new();
    env.create_command(
        "short",
        "sleep 0.3; echo done",
        &["--at", "2020-01-01T00:00:00Z"],
    );
    let (_daemon, pid) = Daemon::start(&env, &[]);
    wait_for("the run to start", DEADLINE, || {
        runs(&env, "short").first().map(|_| ())
    });
    env.loops(["daemon", "stop", "--grace", "10s"])
        .stdout(&format!("stopped pid={pid}\n"))
        .run();
    let run = runs(&env, "short").remove(0);
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(
        env.loops(["show", "short"]).run().json()["status"],
        "stopped"
    );
}

#[test]
fn a_stop_past_the_grace_period_releases_runs_and_spawns_nothing_more() {
    // SPEC §9 item 17: the interrupted run keeps its attempt, and the slot
    // that was due behind it is not spawned only to be killed.
    let env = TestEnv::new();
    let job = write_slow_job(&env);
    let cmd = format!("slowjob {}", job.display());
    env.create_command("long", &cmd, &["--at", "2020-01-01T00:00:00Z"]);
    env.create_command("behind", "true", &["--at", "2020-01-01T00:00:00Z"]);
    let (_daemon, pid) = Daemon::start(&env, &["--max-parallel", "1"]);
    wait_for("the long run's job", DEADLINE, || {
        job.join("first").exists().then_some(())
    });
    let stopped = env
        .loops(["--json", "daemon", "stop", "--grace", "200ms"])
        .run()
        .json();
    assert_eq!(
        stopped,
        serde_json::json!({"wasRunning": true, "stopped": true, "forced": false, "pid": pid})
    );
    let run = runs(&env, "long").remove(0);
    assert_eq!(run["status"], "abandoned");
    assert_eq!(run["attempt"], 1);
    assert_eq!(
        run["error"],
        "interrupted by daemon shutdown; not counted as an attempt"
    );
    let behind = runs(&env, "behind");
    assert!(behind.is_empty(), "{behind:?}");
    let lp = env.loops(["show", "long"]).run().json();
    assert_eq!(lp["status"], "active");
    assert_eq!(lp["nextRunAt"], "2020-01-01T00:00:00.000Z");
    assert!(log(&env).contains("grace period over: interrupting 1 run(s)"));

    // The next daemon runs the slot again as attempt 1 (the job now
    // succeeds), then the one behind it.
    let (_again, _) = Daemon::start(&env, &["--max-parallel", "1"]);
    wait_for("both slots to run", DEADLINE, || {
        let long = runs(&env, "long").remove(0);
        let behind = runs(&env, "behind");
        (long["status"] == "succeeded"
            && behind.first().is_some_and(|r| r["status"] == "succeeded"))
        .then_some(())
    });
    assert_eq!(runs(&env, "long")[0]["attempt"], 1);
}

#[test]
fn logs_print_the_tail_and_follow_across_rotation() {
    let env = TestEnv::new();
    // SPEC §10 item 102: a missing log prints an empty line.
    env.loops(["daemon", "logs"]).stdout("\n").run();
    env.make_data_dir();
    let path = env.data_dir().join("daemon.log");
    let lines: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&path, &lines).unwrap();
    env.loops(["daemon", "logs", "-n", "3"])
        .stdout("line 8\nline 9\nline 10\n")
        .run();
    env.loops(["daemon", "logs", "-n", "0"])
        .stdout(&lines)
        .run();

    let following = Follow::start(&env);
    let saw = |text: &str| following.saw(text);
    wait_for("the tail", DEADLINE, || saw("line 10\n").then_some(()));
    append(&path, "line 11\n");
    wait_for("an appended line", DEADLINE, || {
        saw("line 11\n").then_some(())
    });
    append(&path, "line 12\n");
    std::fs::rename(&path, env.data_dir().join("daemon.log.1")).unwrap();
    std::fs::write(&path, "after rotation\n").unwrap();
    wait_for("the rotated log", DEADLINE, || {
        saw("after rotation\n").then_some(())
    });
    let seen = following.stop();
    assert_eq!(seen, "line 10\nline 11\nline 12\nafter rotation\n");
}

/// Issue 25 review: `-f` printed what it read raw, so a line the daemon
/// did not write itself (launchd sends the daemon's stdout and stderr, a
/// panic included, to this file; an older version wrote it unescaped) put
/// its ESC and bidi characters on the terminal; and a character cut
/// between two reads came out as two U+FFFD.
#[test]
fn logs_follow_escapes_what_it_prints_and_keeps_a_split_character_whole() {
    let env = TestEnv::new();
    env.make_data_dir();
    let path = env.data_dir().join("daemon.log");
    std::fs::write(&path, "start\n").unwrap();
    let following = Follow::start(&env);
    let saw = |text: &str| following.saw(text);
    wait_for("the tail", DEADLINE, || saw("start\n").then_some(()));
    append(
        &path,
        "thread 'main' panicked at \u{1b}[2Jsafe\u{202e}txt.exe\u{200b}\tend\r\n",
    );
    wait_for("the panic line", DEADLINE, || saw("end").then_some(()));
    // "é" is C3 A9: the first write ends inside it.
    append(&path, b"caf\xc3");
    wait_for("the text before the cut", DEADLINE, || {
        saw("caf").then_some(())
    });
    append(&path, b"\xa9 ok\n");
    wait_for("the rest of the line", DEADLINE, || {
        saw("ok\n").then_some(())
    });
    let seen = following.stop();
    assert_eq!(
        seen,
        "start\nthread 'main' panicked at \\u{1b}[2Jsafe\\u{202e}txt.exe\\u{200b}\tend\\r\n\
         café ok\n"
    );
}

/// A `daemon logs -f -n 1` whose stdout a thread gathers.
struct Follow {
    child: std::process::Child,
    seen: Arc<Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Follow {
    fn start(env: &TestEnv) -> Follow {
        let mut child = env
            .cmd()
            .args(["daemon", "logs", "-f", "-n", "1"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("daemon logs -f starts");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let reader = {
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || {
                let mut buf = [0u8; 256];
                while let Ok(n) = stdout.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen.lock().expect("the lock").extend_from_slice(&buf[..n]);
                }
            })
        };
        Follow {
            child,
            seen,
            reader,
        }
    }

    /// Whether what it printed so far holds `text`.
    fn saw(&self, text: &str) -> bool {
        String::from_utf8_lossy(&self.seen.lock().expect("the lock")).contains(text)
    }

    /// Stops it; all it printed, which must be UTF-8.
    fn stop(mut self) -> String {
        self.child.kill().expect("a kill");
        self.child.wait().expect("a wait");
        self.reader.join().expect("the reader ends");
        let seen = self.seen.lock().expect("the lock").clone();
        String::from_utf8(seen).expect("UTF-8 output")
    }
}

fn append(path: &Path, text: impl AsRef<[u8]>) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("the log");
    f.write_all(text.as_ref()).expect("an append");
}

/// Snapshot filters for the machine-specific parts of a service file.
fn service_settings(env: &TestEnv) -> insta::Settings {
    let mut settings = snapshot_settings();
    let exe = loops_tests::loops_bin();
    let exe = exe.canonicalize().unwrap_or(exe);
    for (path, name) in [
        (exe.display().to_string(), "[EXE]"),
        (env.data_dir().display().to_string(), "[DATA]"),
        (env.home().display().to_string(), "[HOME]"),
    ] {
        settings.add_filter(&regex_escape(&path), name);
    }
    settings.add_filter(r"PATH=[^\x22<]*", "PATH=[PATH]");
    settings.add_filter(r"gui/\d+", "gui/[UID]");
    settings.add_filter(
        r"<string>/usr/bin:/bin:[^<]*</string>",
        "<string>[PATH]</string>",
    );
    settings
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '_' || c == '-' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// `text` without `part`, which it must hold once.
fn without(text: &str, part: &str) -> String {
    assert_eq!(text.matches(part).count(), 1, "{part:?} once in:\n{text}");
    text.replacen(part, "", 1)
}

#[test]
fn install_writes_a_systemd_unit_and_a_launchd_plist() {
    // SPEC §10 item 100 and §9 item 37.
    let env = TestEnv::new();
    let ran = env
        .loops(["daemon", "install", "--platform", "linux"])
        .env("PATH", Some("/usr/bin:/bin"))
        .run();
    let unit_path = env.systemd_unit_path();
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    assert!(unit.contains(&format!(
        "Environment=\"PATH=/usr/bin:/bin:{}/.local/bin:",
        env.home().display()
    )));
    assert!(unit.contains(&format!(
        "Environment=\"LOOPS_DATA_DIR={}\"",
        env.data_dir().display()
    )));
    let plist_ran = env
        .loops(["daemon", "install", "--platform", "macos"])
        .env("PATH", Some("/usr/bin:/bin"))
        .run();
    let plist_path = env.launchd_plist_path();
    let plist = std::fs::read_to_string(&plist_path).unwrap();
    let mode = std::fs::metadata(&plist_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // On PostgreSQL the service also carries the database, one line the
    // snapshots (the SQLite service) do not have.
    let (unit, plist) = match env.database_url() {
        None => (unit, plist),
        Some(url) => (
            without(
                &unit,
                &format!("Environment=\"LOOPS_DATABASE_URL={url}\"\n"),
            ),
            without(
                &plist,
                &format!(
                    "    <key>LOOPS_DATABASE_URL</key>\n    <string>{}</string>\n",
                    url.replace('&', "&amp;")
                ),
            ),
        ),
    };
    let settings = service_settings(&env);
    settings.bind(|| {
        insta::assert_snapshot!("install_linux_stdout", ran.stdout);
        insta::assert_snapshot!("systemd_unit", unit);
        insta::assert_snapshot!("install_macos_stdout", plist_ran.stdout);
        insta::assert_snapshot!("launchd_plist", plist);
    });

    env.loops(["daemon", "uninstall", "--platform", "linux"])
        .stdout_has("removed ")
        .run();
    assert!(!unit_path.exists());
}

#[test]
fn service_files_quote_and_escape_what_they_carry() {
    // SPEC §9 item 37: systemd quoting and specifiers, XML escaping.
    let env = TestEnv::new();
    let data = env.home().join("my data 100% & <co>");
    env.loops(["daemon", "install", "--platform", "linux"])
        .env("LOOPS_DATA_DIR", Some(data.to_str().unwrap()))
        .run();
    let unit = std::fs::read_to_string(env.systemd_unit_path()).unwrap();
    assert!(
        unit.contains(&format!(
            "Environment=\"LOOPS_DATA_DIR={}/my data 100%% & <co>\"\n",
            env.home().display()
        )),
        "{unit}"
    );
    env.loops(["daemon", "install", "--platform", "macos"])
        .env("LOOPS_DATA_DIR", Some(data.to_str().unwrap()))
        .run();
    let plist = std::fs::read_to_string(env.launchd_plist_path()).unwrap();
    assert!(
        plist.contains(&format!(
            "<string>{}/my data 100% &amp; &lt;co&gt;/daemon.log</string>",
            env.home().display()
        )),
        "{plist}"
    );
}

#[test]
fn install_enable_runs_the_instructions_except_loginctl() {
    let env = TestEnv::new();
    let calls = env.home().join("systemctl.calls");
    env.write_script(
        "systemctl",
        &format!("echo \"$@\" >> '{}'", calls.display()),
    );
    let ran = env
        .loops([
            "--json",
            "daemon",
            "install",
            "--enable",
            "--platform",
            "linux",
        ])
        .run()
        .json();
    let results = ran["enableResults"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r["status"] == 0), "{ran}");
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap(),
        "--user daemon-reload\n--user enable --now loops-daemon.service\n"
    );
    let human = env
        .loops(["daemon", "install", "--enable", "--platform", "linux"])
        .run()
        .stdout;
    assert!(human.ends_with(
        "systemctl --user daemon-reload -> ok\nsystemctl --user enable --now loops-daemon.service -> ok\n"
    ), "{human}");
}

#[test]
fn doctor_exits_1_only_when_a_check_fails_in_both_modes() {
    // SPEC §9 item 31, §10 item 95.
    let env = TestEnv::new();
    let ran = env.loops(["doctor"]).run();
    // The messages line up after the longest id (issue 16).
    let column = |line: &str, message: &str| line.find(message);
    let first = ran.stdout.lines().next().unwrap();
    assert!(first.starts_with("ok    data-dir  "), "{}", ran.stdout);
    let daemon = ran
        .stdout
        .lines()
        .find(|l| l.starts_with("ok    daemon  "))
        .unwrap_or_else(|| panic!("{}", ran.stdout));
    assert!(daemon.ends_with("  daemon is not running"), "{daemon}");
    assert_eq!(
        column(first, "data directory is writable ("),
        column(daemon, "daemon is not running"),
        "{}",
        ran.stdout
    );
    let report = env.loops(["--json", "doctor"]).run().json();
    assert_eq!(report["ok"], true);
    let ids: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(&ids[..4], ["data-dir", "database", "path", "accounts"]);
    // Every provider is reported in JSON, as the original does, though no
    // loop uses one (issue 25 item 11).
    assert_eq!(
        ids.iter().filter(|id| id.starts_with("provider:")).count(),
        6,
        "{ids:?}"
    );
    assert!(!ids.contains(&"bun"), "SPEC §7.5: no bun check");

    // A database from a newer loops fails the report in both modes.
    // `doctor` created the database above. On PostgreSQL a newer loops
    // that this one must not use also raises the oldest version allowed
    // to (`schema_compat`); one that did not is compatible, and passes.
    let raw = env.raw();
    raw.exec(
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
         VALUES (999, 'future', '', '')",
    );
    if raw.is_postgres() {
        raw.exec("UPDATE schema_compat SET min_compatible_version = 999");
    }
    let ran = env.loops(["doctor"]).code(1).run();
    let failed = if env.on_postgres() {
        let newer = format!(
            "has schema version 999, newer than the {} this loops knows",
            loops_store::SCHEMA_VERSION
        );
        ran.stdout
            .lines()
            .any(|l| l.starts_with("fail  database ") && l.contains(&newer))
    } else {
        ran.stdout.lines().any(|l| {
            l.starts_with("fail  database ") && l.contains("  database schema version 999 is newer")
        })
    };
    assert!(failed, "{}", ran.stdout);
    let report = env.loops(["--json", "doctor"]).code(1).run().json();
    assert_eq!(report["ok"], false);
}

/// Sends one datagram to the daemon's wake-up socket, as the CLI does.
fn send_datagram(env: &TestEnv, message: &[u8]) {
    let sock = std::os::unix::net::UnixDatagram::unbound().expect("a socket");
    sock.send_to(message, env.data_dir().join("daemon.sock"))
        .expect("the daemon's socket takes the datagram");
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn links_planted_at_the_daemon_files_are_never_followed() {
    // Issue 12 §3: a `daemon.log` link made the daemon append to its
    // target, a `daemon.pid` one made it overwrite it.
    let env = TestEnv::new();
    env.make_data_dir();
    let target = env.home().join("precious");
    std::fs::write(&target, "keep\n").unwrap();
    let log_path = env.data_dir().join("daemon.log");
    std::os::unix::fs::symlink(&target, &log_path).unwrap();
    env.loops(["daemon", "start"])
        .code(1)
        .stdout("failed to start\n")
        .stderr_has("daemon.log is a symbolic link; loops never follows links")
        .run();
    env.loops(["daemon", "run"])
        .code(1)
        .stderr_has("daemon.log is a symbolic link")
        .run();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");

    // A link at the pid file is replaced by the daemon's own file.
    std::fs::remove_file(&log_path).unwrap();
    let pid_path = env.data_dir().join("daemon.pid");
    std::os::unix::fs::symlink(&target, &pid_path).unwrap();
    let (_daemon, pid) = Daemon::start(&env, &[]);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
    assert!(std::fs::symlink_metadata(&pid_path).unwrap().is_file());
    let text = std::fs::read_to_string(&pid_path).unwrap();
    assert_eq!(pid_file_pid(&text), Some(pid), "{text:?}");
    // The daemon binds its socket in a private `.s<hex>` directory, renames
    // it into place and removes the directory, so the listing is only
    // settled once the socket is there and that directory gone.
    let names = || -> Vec<String> {
        std::fs::read_dir(env.data_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let settled = |names: &[String]| {
        names.iter().any(|n| n == "daemon.sock") && !names.iter().any(|n| n.starts_with(".s"))
    };
    // A listing that never settles fails here, at the deadline.
    let names = loops_tests::wait_for("the socket in place and no .s directory", DEADLINE, || {
        let names = names();
        settled(&names).then_some(names)
    });
    assert!(
        names
            .iter()
            .all(|n| !n.ends_with(".tmp") && !n.starts_with('.')),
        "no temporary file is left: {names:?}"
    );
}

#[test]
fn the_daemon_files_and_socket_are_0600_whatever_the_umask() {
    // Issue 12 §3: under `umask 000` the socket was 0777.
    let env = TestEnv::new();
    let base = env.cmd();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "umask 000; exec \"$0\" daemon run"])
        .arg(loops_tests::loops_bin())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (key, value) in base.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let mut child = cmd.spawn().unwrap();
    let _daemon = Daemon { env: &env };
    let socket = env.data_dir().join("daemon.sock");
    wait_for("the socket", DEADLINE, || {
        env.data_dir().join("daemon.pid").exists().then_some(())
    });
    wait_for("the socket", DEADLINE, || socket.exists().then_some(()));
    assert_eq!(mode(&socket), 0o600);
    assert_eq!(mode(&env.data_dir().join("daemon.pid")), 0o600);
    assert_eq!(mode(&env.data_dir().join("daemon.log")), 0o600);
    env.loops(["daemon", "stop"])
        .stdout(&format!("stopped pid={}\n", child.id()))
        .run();
    child.wait().unwrap();
}

#[test]
fn a_reused_pid_is_neither_reported_nor_signalled() {
    sqlite_only!("rewrites daemon_lease with SQLite SQL and replaces the database file");
    // SPEC §10 item 99, and issue 12 §3: a process that got a dead
    // daemon's pid started after the daemon took its lease and wrote its
    // pid file, so it is not the daemon, even though the lease names it.
    let env = TestEnv::new();
    let (_daemon, pid) = Daemon::start(&env, &[]);
    kill_9(pid);
    let mut reused = Command::new("sleep").arg("30").spawn().unwrap();
    // The lease and the pid file now name the new process, as if the
    // kernel had handed it the daemon's pid.
    let db = rusqlite::Connection::open(env.db_path()).unwrap();
    // The start times are read to the second, so the lease is an hour old.
    db.execute(
        "UPDATE daemon_lease SET pid = ?1,
         created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 hour')",
        [reused.id()],
    )
    .unwrap();
    drop(db);
    let pid_path = env.data_dir().join("daemon.pid");
    std::fs::write(&pid_path, reused.id().to_string()).unwrap();
    let s = status(&env);
    assert_eq!(
        (s["running"].clone(), s["stale"].clone()),
        (false.into(), true.into())
    );
    env.loops(["daemon", "stop"]).stdout("not running\n").run();
    assert!(reused.try_wait().unwrap().is_none(), "not signalled");

    // Without a readable database, the pid file's own age tells: it was
    // written before the process started.
    std::fs::write(&pid_path, reused.id().to_string()).unwrap();
    #[expect(
        clippy::disallowed_methods,
        reason = "the built binary reads the real clock, so the test compares with it"
    )]
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&pid_path)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(env.data_dir().join(format!("loops.db{suffix}")));
    }
    std::fs::write(env.db_path(), "not a database").unwrap();
    env.loops(["daemon", "stop"])
        .stdout("not running\n")
        .stderr_has("stopping the daemon through its pid file")
        .run();
    assert!(reused.try_wait().unwrap().is_none(), "not signalled");
    reused.kill().unwrap();
    reused.wait().unwrap();
}

#[test]
fn stop_works_when_the_database_is_unreadable() {
    sqlite_only!("deletes the SQLite WAL under the daemon");
    // Issue 12 §3: with its WAL deleted under a running daemon, the
    // database cannot be read, yet `daemon stop` stops the daemon.
    let env = TestEnv::new();
    env.create_command("a", "true", &["--every", "1h"]);
    let (_daemon, pid) = Daemon::start(&env, &[]);
    std::fs::remove_file(env.data_dir().join("loops.db-wal")).unwrap();
    // Without its WAL the file may still read as an older, valid database
    // (what was checkpointed), so its header goes too, in place: nothing
    // can read it now, whatever was checkpointed when.
    {
        use std::io::Write;
        let mut db = std::fs::OpenOptions::new()
            .write(true)
            .open(env.data_dir().join("loops.db"))
            .unwrap();
        db.write_all(&[0u8; 16]).unwrap();
    }
    env.loops(["list"]).code(1).run();
    env.loops(["daemon", "stop"])
        .stdout(&format!("stopped pid={pid}\n"))
        .run();
    assert!(!is_running(pid));
    assert!(!env.data_dir().join("daemon.pid").exists());
}

#[test]
fn the_daemon_stops_when_its_database_file_is_replaced() {
    sqlite_only!("deletes the SQLite WAL under the daemon");
    // Issue 12 §3: it notices at its next wake-up, instead of writing into
    // a deleted file for months.
    let env = TestEnv::new();
    let (_daemon, pid) = Daemon::start(&env, &[]);
    std::fs::remove_file(env.data_dir().join("loops.db-wal")).unwrap();
    send_datagram(&env, b"wake");
    let log = stopped_log(&env, pid);
    assert!(
        log.contains("loops.db-wal was deleted or replaced while the daemon ran; stopping"),
        "{log}"
    );
    assert!(!env.data_dir().join("daemon.pid").exists());
}

#[test]
fn a_huge_grace_from_the_socket_is_capped() {
    // Issue 12 §3: `grace_ms` beyond any Instant made the daemon panic at
    // stop, leaving its run behind.
    let env = TestEnv::new();
    env.create_command(
        "short",
        "sleep 0.5; echo done",
        &["--at", "2020-01-01T00:00:00Z"],
    );
    let (_daemon, pid) = Daemon::start(&env, &[]);
    wait_for("the run to start", DEADLINE, || {
        runs(&env, "short").first().map(|_| ())
    });
    send_datagram(&env, format!("stop grace_ms={}", u64::MAX).as_bytes());
    let log = stopped_log(&env, pid);
    assert!(
        log.contains("waiting up to 3153600000000ms for 1 run(s) to finish"),
        "{log}"
    );
    assert_eq!(runs(&env, "short")[0]["status"], "succeeded");
}

#[test]
fn install_carries_the_daemons_tuning_into_the_service() {
    let env = TestEnv::new();
    env.loops(["daemon", "install", "--platform", "linux"])
        .args([
            "--max-parallel",
            "4",
            "--grace",
            "2m",
            "--agent-concurrency",
            "1",
        ])
        .args(["--poll-only", "--on-failure", "notify-send 'loop failed'"])
        .run();
    let unit = std::fs::read_to_string(env.systemd_unit_path()).unwrap();
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .unwrap_or_default();
    for part in [
        " daemon run ",
        "--max-parallel 4",
        "--grace 2m",
        "--agent-concurrency 1",
        "--poll-only",
        "--on-failure=",
        "notify-send",
    ] {
        assert!(exec.contains(part), "{part} in {exec}");
    }
    // The stop timeout follows --grace.
    assert!(unit.contains("TimeoutStopSec="), "{unit}");
    // A bad value fails the install, and writes nothing new.
    std::fs::remove_file(env.systemd_unit_path()).unwrap();
    env.loops(["daemon", "install", "--platform", "linux"])
        .args(["--agent-concurrency", "0"])
        .code(1)
        .stderr_has("--agent-concurrency must be a positive integer")
        .run();
    assert!(!env.systemd_unit_path().exists());
}

#[test]
fn the_tunings_refuse_a_bare_number_under_a_second() {
    let env = TestEnv::new();
    let ran = env
        .loops(["daemon", "install", "--platform", "linux"])
        .args(["--grace", "5000", "--gc-max-age", "900"])
        .code(1)
        .run();
    assert_eq!(
        ran.stderr,
        "error: --gc-max-age 900 is 900 ms; write 900s, or 900ms if you mean it\n"
    );
    assert!(!env.systemd_unit_path().exists());
    // A bare number of a second or more is milliseconds, and says nothing.
    let ran = env.loops(["daemon", "stop", "--grace", "1500"]).run();
    assert_eq!(ran.stdout, "not running\n");
    assert!(ran.stderr.is_empty(), "{}", ran.stderr);
}
