//! The `loops-daemon` helper binary (SPEC §7.6, §10 item 100): built beside
//! `loops`, it runs, starts, stops, reports on and installs the daemon
//! under its own name, and always prints JSON.

use std::path::Path;
use std::time::Duration;

use loops_tests::{TestEnv, is_running, kill, loops_daemon_bin, wait_for};

const DEADLINE: Duration = Duration::from_secs(10);

/// Stops the test's daemon when dropped, by force if it must.
struct Stopper<'a>(&'a TestEnv);

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        if let Some(pid) = self.0.daemon_pid() {
            let _ = self.0.daemon_cmd().args(["stop", "--grace", "0"]).output();
            if is_running(pid) {
                kill("-9", pid);
            }
        }
    }
}

/// The command line of process `pid`, one argument per element.
fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn it_is_built_beside_loops_and_prints_the_bare_version() {
    assert!(loops_daemon_bin().is_file(), "{:?}", loops_daemon_bin());
    let env = TestEnv::new();
    env.loops_daemon(["--version"]).stdout("0.3.1\n").run();
}

#[test]
fn status_and_stop_print_json_without_being_asked() {
    let env = TestEnv::new();
    let status = env.loops_daemon(["status"]).run().json();
    assert_eq!(status["running"], false);
    assert_eq!(status["stale"], false);
    assert_eq!(status["loops"]["total"], 0);
    assert_eq!(status["runs"]["total"], 0);
    assert!(status["logPath"].as_str().unwrap().ends_with("/daemon.log"));
    let stopped = env.loops_daemon(["stop"]).run().json();
    assert_eq!(
        stopped,
        serde_json::json!({"wasRunning": false, "stopped": false, "forced": false})
    );
}

#[test]
fn start_spawns_its_own_run_and_stop_ends_it() {
    let env = TestEnv::new();
    let stopper = Stopper(&env);
    let started = env.loops_daemon(["start"]).run().json();
    assert_eq!(started["started"], true, "{started}");
    assert_eq!(started["alreadyRunning"], false);
    let pid = started["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .expect("a pid");

    // `start` spawns `<self> run`, as the original's does.
    let argv = cmdline(pid);
    assert_eq!(
        Path::new(&argv[0]).file_name().unwrap(),
        "loops-daemon",
        "{argv:?}"
    );
    assert_eq!(argv[1], "run", "{argv:?}");

    let again = env.loops_daemon(["start"]).run().json();
    assert_eq!(again["alreadyRunning"], true);
    assert_eq!(again["pid"], pid);
    // Both binaries see the same daemon.
    let status = env.loops(["--json", "daemon", "status"]).run().json();
    assert_eq!(status["running"], true);
    assert_eq!(status["pid"], pid);

    let stopped = env.loops_daemon(["stop"]).run().json();
    assert_eq!(stopped["wasRunning"], true, "{stopped}");
    assert_eq!(stopped["stopped"], true);
    assert_eq!(stopped["pid"], pid);
    wait_for("the daemon to exit", DEADLINE, || {
        (!is_running(pid)).then_some(())
    });
    assert!(!env.data_dir().join("daemon.pid").exists());
    drop(stopper);
}

// SPEC §10 item 100
#[test]
fn install_writes_a_unit_that_runs_loops_daemon_run() {
    let env = TestEnv::new();
    let installed = env
        .loops_daemon(["install", "--platform", "linux"])
        .env("PATH", Some("/usr/bin:/bin"))
        .run()
        .json();
    let unit_path = env.systemd_unit_path();
    assert_eq!(installed["platform"], "linux");
    assert_eq!(installed["path"], unit_path.display().to_string());
    assert_eq!(
        installed["instructions"][1],
        "systemctl --user enable --now loops-daemon.service"
    );
    let exe = loops_daemon_bin().canonicalize().unwrap();
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    assert!(
        unit.contains(&format!("\nExecStart={} run\n", exe.display())),
        "{unit}"
    );
    assert!(unit.contains("\nRestart=always\nRestartSec=5\n"), "{unit}");
    assert!(
        unit.contains(&format!(
            "Environment=\"PATH=/usr/bin:/bin:{}/.local/bin:",
            env.home().display()
        )),
        "{unit}"
    );
    assert!(!unit.contains("After=default.target"), "{unit}");
    assert!(unit.contains("\nWantedBy=default.target\n"), "{unit}");

    env.loops_daemon(["install", "--platform", "macos"]).run();
    let plist = std::fs::read_to_string(env.launchd_plist_path()).unwrap();
    assert!(
        plist.contains(&format!(
            "<array>\n    <string>{}</string>\n    <string>run</string>\n  </array>",
            exe.display()
        )),
        "{plist}"
    );
}
