//! A daemon identity no wall-clock step moves (issue 32): `loops daemon
//! status` and `stop` run with their wall clock an hour ahead, through
//! libfaketime, still find the daemon and stop it. The pid file names the
//! daemon by its boot id and start tick, not by times the clock dates.
//!
//! Without libfaketime the test says it skipped and passes, unless
//! `LOOPS_REQUIRE_FAKETIME=1` (CI sets it in `.ci/run`, and `cargo xtask
//! ci` installs the `faketime` package).

use std::path::PathBuf;
use std::time::Duration;

use loops_tests::{Daemon, TestEnv, is_running, wait_for};

const DEADLINE: Duration = Duration::from_secs(10);

/// Set to `1` (or `true`), a missing libfaketime fails the test instead of
/// skipping it.
const REQUIRE_ENV: &str = "LOOPS_REQUIRE_FAKETIME";

/// libfaketime where Debian's `faketime` package puts it; `None` after
/// printing why `test` skips.
fn libfaketime(test: &str) -> Option<PathBuf> {
    let arch = std::env::consts::ARCH;
    let found = [
        format!("/usr/lib/{arch}-linux-gnu/faketime/libfaketime.so.1"),
        "/usr/lib/faketime/libfaketime.so.1".to_owned(),
        "/usr/local/lib/faketime/libfaketime.so.1".to_owned(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file());
    if found.is_none() {
        let required = std::env::var(REQUIRE_ENV).is_ok_and(|v| matches!(v.trim(), "1" | "true"));
        assert!(
            !required,
            "{REQUIRE_ENV} is set and libfaketime is missing; apt-get install faketime"
        );
        eprintln!(
            "skipped identity::{test}: libfaketime is not installed (apt-get install faketime)"
        );
    }
    found
}

#[test]
fn status_and_stop_with_the_clock_an_hour_ahead_find_and_stop_the_daemon() {
    let Some(lib) = libfaketime("clock_an_hour_ahead") else {
        return;
    };
    let env = TestEnv::new();
    let daemon = Daemon::start(&env, &[]);
    let pid = daemon.pid;
    wait_for("the daemon's lease", DEADLINE, || {
        let status = env.loops(["--json", "daemon", "status"]).run().json();
        (status["running"] == true).then_some(())
    });
    let ahead = |args: &[&str]| {
        env.loops(args)
            .env("LD_PRELOAD", Some(&lib.display().to_string()))
            .env("FAKETIME", Some("+1h"))
    };
    // The library works: `date` under it reads an hour ahead.
    let date = |preload: bool| -> i64 {
        let mut cmd = std::process::Command::new("date");
        cmd.arg("+%s");
        if preload {
            cmd.env("LD_PRELOAD", &lib).env("FAKETIME", "+1h");
        }
        let out = cmd.output().expect("date runs");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let (real, faked) = (date(false), date(true));
    assert!(
        faked - real >= 3_000,
        "libfaketime moved no clock: {real} vs {faked}"
    );

    let status = ahead(&["--json", "daemon", "status"]).run().json();
    assert_eq!(status["running"], true, "{status}");
    assert_eq!(status["stale"], false, "{status}");
    assert_eq!(status["pid"], pid, "{status}");
    ahead(&["daemon", "stop"])
        .stdout(&format!("stopped pid={pid}\n"))
        .run();
    wait_for("the daemon to exit", DEADLINE, || {
        (!is_running(pid)).then_some(())
    });
    assert!(!env.data_dir().join("daemon.pid").exists());
    drop(daemon);
}
