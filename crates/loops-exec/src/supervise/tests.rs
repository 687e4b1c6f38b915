//! Tests of spawning and supervising: timeouts, cancels, the leak timeout,
//! the exit-watch fallbacks and, on Linux, the following of processes that
//! left the group.

use std::time::Instant;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::*;

fn sh(script: &str, dir: &Path) -> Running {
    let env = BTreeMap::from([
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("DIR".to_owned(), dir.display().to_string()),
    ]);
    let args = ["-c".to_owned(), script.to_owned()];
    spawn(&Launch {
        program: Path::new("/bin/sh"),
        arg0: "sh",
        args: &args,
        cwd: None,
        env: &env,
        stdin: None,
    })
    .unwrap()
}

fn limits(timeout_ms: u64) -> Limits<'static> {
    Limits {
        timeout: Some(Duration::from_millis(timeout_ms)),
        idle: None,
        cancel: None,
        kill_grace: Duration::from_millis(200),
        leak_timeout: Duration::from_millis(200),
        max_output_bytes: 1024,
        log: None,
        seen: Default::default(),
    }
}

/// Waits past the moment a surviving grandchild would have written
/// `late`, and checks it never did.
fn assert_no_late_write(dir: &Path, start: Instant) {
    let until = start + Duration::from_millis(1_000);
    while Instant::now() < until {
        assert!(!dir.join("late").exists(), "a grandchild outlived its run");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_fallbacks_tear_down_the_group_too() {
    let cases = [
        (
            "( sleep 0.4; touch \"$DIR/late\" ) & echo up; sleep 30",
            100,
            Some(Cause::TimedOut),
        ),
        ("( sleep 0.4; touch \"$DIR/late\" ) & echo up", 10_000, None),
    ];
    for (mode, (script, timeout_ms, cause)) in [Watch::Thread, Watch::Poll]
        .into_iter()
        .flat_map(|mode| cases.clone().map(|case| (mode, case)))
    {
        let dir = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let finished = sh(script, dir.path()).supervise_with(&limits(timeout_ms), mode);
        assert_eq!(finished.cause, cause);
        assert_eq!(finished.stdout, "up\n");
        if cause.is_none() {
            assert!(finished.status.unwrap().success());
        }
        assert_no_late_write(dir.path(), start);
    }
}

#[test]
fn the_waiter_sees_the_exit_without_reaping() {
    let dir = tempfile::tempdir().unwrap();
    let finished = sh("exit 7", dir.path()).supervise(&limits(10_000));
    assert_eq!(finished.status.and_then(|s| s.code()), Some(7));
    assert_eq!(finished.cause, None);
}

/// Tests of the processes that leave the group, which need `setsid`
/// (util-linux) and `/proc`.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod escapees {
    use super::*;

    /// Whether `setsid` exists; the tests skip themselves without it.
    fn have_setsid() -> bool {
        let found = which::which("setsid").is_ok();
        if !found {
            eprintln!("setsid is not installed: skipped");
        }
        found
    }

    /// An escapee that writes its pid to `up`, then `late` after 1.5 s,
    /// unless killed first. With `stubborn`, it ignores SIGTERM.
    fn escapee(stubborn: bool) -> String {
        let trap = if stubborn { "trap '' TERM; " } else { "" };
        format!(
            "sh -c '{trap}echo $$ >\"$DIR/pid\"; mv \"$DIR/pid\" \"$DIR/up\"; \
             sleep 1.5; touch \"$DIR/late\"' >/dev/null 2>&1"
        )
    }

    /// Waits until the escapee is up.
    const WAIT_UP: &str = "while [ ! -e \"$DIR/up\" ]; do sleep 0.01; done";

    /// Checks that the escapee started and is dead (a zombie at most),
    /// and that nothing carries the cookie any more.
    fn assert_followed(dir: &Path, cookie: &str) {
        let pid = std::fs::read_to_string(dir.join("up")).expect("the escapee started");
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        if let Ok(stat) = stat {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            assert!(state.starts_with('Z'), "the escapee lives: {stat}");
        }
        assert_eq!(
            cookie::signal_carriers(cookie, None, None),
            0,
            "an escapee lives"
        );
        assert!(!dir.join("late").exists());
    }

    /// Kills what still carries `cookie`, so no test leaves a process.
    fn clean_up(cookie: &str) -> usize {
        let found = cookie::signal_carriers(cookie, Some(Signal::SIGKILL), None);
        let deadline = Instant::now() + Duration::from_secs(10);
        while cookie::signal_carriers(cookie, Some(Signal::SIGKILL), None) > 0 {
            assert!(Instant::now() < deadline, "{cookie} cannot be killed");
            std::thread::sleep(Duration::from_millis(10));
        }
        found
    }

    #[test]
    fn a_timeout_follows_processes_that_left_the_group() {
        if !have_setsid() {
            return;
        }
        let cases = [
            // setsid, and a double fork whose middle process exits.
            (
                format!("setsid {} & {WAIT_UP}; sleep 30", escapee(false)),
                Watch::Best,
            ),
            (
                format!("( setsid {} & ); {WAIT_UP}; sleep 30", escapee(true)),
                Watch::Thread,
            ),
            (
                format!("setsid {} & {WAIT_UP}; sleep 30", escapee(true)),
                Watch::Poll,
            ),
        ];
        // The cases run side by side: each waits out its late write.
        let threads: Vec<_> = cases
            .into_iter()
            .map(|(script, mode)| {
                std::thread::spawn(move || {
                    let dir = tempfile::tempdir().unwrap();
                    let running = sh(&script, dir.path());
                    let cookie = running.cookie.clone();
                    let finished = running.supervise_with(&limits(1_000), mode);
                    clean_up(&cookie);
                    assert_eq!(finished.cause, Some(Cause::TimedOut), "{script}");
                    assert_followed(dir.path(), &cookie);
                })
            })
            .collect();
        for case in threads {
            case.join().unwrap();
        }
    }

    #[test]
    fn a_cancel_follows_processes_that_left_the_group() {
        if !have_setsid() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = format!("setsid {} & {WAIT_UP}; sleep 30", escapee(true));
        let running = sh(&script, dir.path());
        let cookie = running.cookie.clone();
        let token = CancelToken::new();
        let canceller = {
            let (token, up) = (token.clone(), dir.path().join("up"));
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(10);
                while !up.exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
                token.cancel("stop");
            })
        };
        let limits = Limits {
            timeout: None,
            idle: None,
            cancel: Some(&token),
            ..limits(0)
        };
        let finished = running.supervise(&limits);
        canceller.join().unwrap();
        clean_up(&cookie);
        assert_eq!(finished.cause, Some(Cause::Cancelled("stop".into())));
        assert_followed(dir.path(), &cookie);
    }

    #[test]
    fn members_left_behind_by_the_leader_bring_their_escapees_down() {
        if !have_setsid() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "setsid {} & sleep 30 >/dev/null 2>&1 & {WAIT_UP}; echo done",
            escapee(false)
        );
        let running = sh(&script, dir.path());
        let cookie = running.cookie.clone();
        let finished = running.supervise(&limits(10_000));
        clean_up(&cookie);
        assert_eq!(finished.cause, None);
        assert!(finished.status.unwrap().success());
        assert_eq!(finished.stdout, "done\n");
        assert_followed(dir.path(), &cookie);
    }

    #[test]
    fn a_clean_exit_leaves_a_detached_process_alone() {
        // The common path: the group is empty once the leader exits, so
        // nothing is scanned and a daemon started on purpose survives.
        if !have_setsid() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = format!("setsid {} & {WAIT_UP}", escapee(false));
        let running = sh(&script, dir.path());
        let cookie = running.cookie.clone();
        let finished = running.supervise(&limits(10_000));
        // The escapee and its `sleep`.
        let survivors = clean_up(&cookie);
        assert!(finished.status.unwrap().success());
        assert!(survivors >= 1, "the detached process was not left alone");
    }

    #[test]
    fn a_process_that_cleared_its_environment_is_lost_but_the_run_ends() {
        // The OS limit: `env -i` drops the cookie, `setsid` the group.
        if !have_setsid() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!(
            "setsid env -i /bin/sh -c 'echo $$ > {pid}.tmp; mv {pid}.tmp {pid}; exec sleep 30' & \
             while [ ! -e {pid} ]; do sleep 0.01; done; sleep 30",
            pid = pid_file.display()
        );
        let finished = sh(&script, dir.path()).supervise(&limits(500));
        assert_eq!(finished.cause, Some(Cause::TimedOut));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // It survived, as documented; the test cleans up after it.
        let survived = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok();
        assert!(survived, "a process without the cookie was found after all");
    }
}
