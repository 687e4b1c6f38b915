//! The daemon's files and socket under attack (issue 12 §3): a flood of
//! wake-up datagrams costs the daemon little CPU, a datagram from another
//! user is ignored, and links planted at the daemon's file names are never
//! followed, however often the daemon starts.
//!
//! The flood sends `wake` datagrams from four threads on blocking sockets
//! for 1 s (20 s in the long variant) to a daemon with 20 loops, and
//! measures the daemon's CPU time (all its threads, from
//! `/proc/<pid>/stat`) over that time: it stays under 20% of the
//! wall-clock time (about 4% measured), because wake-ups are coalesced and
//! forwarded at most every 20 ms. Without coalescing every datagram was
//! read and asked for a turn: 30% to 70% of a core here. The plants run 2
//! rounds (20 long); another user's datagram needs root (to send as uid
//! 65534 with `setpriv`) and is skipped otherwise.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use loops_tests::{Daemon, TestEnv, is_running};

use crate::support::{figure, pick, wait_for};

const DEADLINE: Duration = Duration::from_secs(20);

/// The largest share of the flood's wall-clock time the daemon may spend
/// on the CPU. Honest slack, not a benchmark: a share of time, not a time,
/// so a slow machine stretches both sides; it sits 5x above the ~4%
/// measured with coalescing and below the 30% to 70% measured without
/// it, so it catches losing the coalescing and nothing finer (the figure
/// is printed for `cargo xtask reliability` to track).
const CPU_SHARE: f64 = 0.2;

/// The CPU time of `pid` and all its threads so far, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    // After the command name: state is field 3, utime 14, stime 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

fn daemon_log(env: &TestEnv) -> String {
    std::fs::read_to_string(env.data_dir().join("daemon.log")).unwrap_or_default()
}

#[test]
fn a_datagram_flood_costs_the_daemon_little_cpu() {
    let test = "a_datagram_flood_costs_the_daemon_little_cpu";
    let env = TestEnv::new();
    for i in 0..20 {
        env.create_command(&format!("idle-{i}"), "true", &["--every", "1h"]);
    }
    let daemon = Daemon::start(&env, &[]);
    let socket = env.data_dir().join("daemon.sock");
    let flood = pick(Duration::from_secs(1), Duration::from_secs(20));
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let before = cpu_ticks(daemon.pid).expect("the daemon's CPU time");
    let started = Instant::now();
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let (stop, sent, socket) = (Arc::clone(&stop), Arc::clone(&sent), socket.clone());
            std::thread::spawn(move || {
                let sock = UnixDatagram::unbound().expect("a socket");
                // Blocking: the flood goes as fast as the daemon reads.
                sock.set_write_timeout(Some(Duration::from_millis(100)))
                    .expect("a write timeout");
                while !stop.load(Ordering::Relaxed) {
                    if sock.send_to(b"wake", &socket).is_ok() {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(flood);
    stop.store(true, Ordering::Relaxed);
    for sender in senders {
        sender.join().expect("a sender");
    }
    let wall = started.elapsed();
    let after = cpu_ticks(daemon.pid).expect("the daemon's CPU time");
    let cpu_ms = (after - before) * 1000 / clock_ticks_per_second();
    let share = cpu_ms as f64 / wall.as_millis().max(1) as f64;
    let sent = sent.load(Ordering::Relaxed);
    figure(
        test,
        &format!(
            "{sent} datagrams in {} ms; daemon CPU {cpu_ms} ms ({:.1}% of the time)",
            wall.as_millis(),
            share * 100.0
        ),
    );
    assert!(sent > 0, "no datagram was delivered");
    assert!(
        share < CPU_SHARE,
        "the daemon spent {cpu_ms} ms of CPU in {} ms of flood",
        wall.as_millis()
    );
    // The daemon still answers at once.
    assert!(is_running(daemon.pid));
    env.create_command("after", "true", &["--at", "2020-01-01T00:00:00Z"]);
    let ran = wait_for(DEADLINE, || {
        let runs = env.loops(["--json", "runs", "after"]).run().json();
        (runs[0]["status"] == "succeeded").then_some(())
    });
    assert!(ran.is_some(), "the daemon ran nothing after the flood");
}

#[test]
fn a_datagram_from_another_user_is_ignored() {
    let test = "a_datagram_from_another_user_is_ignored";
    let python = Path::new("/usr/bin/python3");
    let root = nix_uid() == Some(0);
    if !root || !python.exists() || Command::new("setpriv").arg("--help").output().is_err() {
        figure(test, "skipped: needs root, setpriv and /usr/bin/python3");
        return;
    }
    let env = TestEnv::new();
    let daemon = Daemon::start(&env, &[]);
    let socket = env.data_dir().join("daemon.sock");
    // Loosen what normally keeps other users out, so a datagram can reach
    // the socket at all.
    let top = env
        .data_dir()
        .parent()
        .expect("the test's directory")
        .to_owned();
    for (path, mode) in [(&top, 0o711), (&env.data_dir(), 0o711), (&socket, 0o666)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("a chmod");
    }
    let sent = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(python)
        .args([
            "-c",
            "import socket, sys\n\
             s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
             s.sendto(b'stop grace_ms=0', sys.argv[1])",
        ])
        .arg(&socket)
        .status()
        .expect("setpriv runs");
    assert!(sent.success(), "nobody's datagram was not sent");
    let logged = wait_for(DEADLINE, || {
        let log = daemon_log(&env);
        log.contains("ignored 1 datagram(s) on the wake-up socket from uid 65534")
            .then_some(log)
    });
    assert!(logged.is_some(), "{}", daemon_log(&env));
    assert!(is_running(daemon.pid), "another user stopped the daemon");
    assert!(!daemon_log(&env).contains("stop signal received"));
    figure(test, "a stop from uid 65534 was ignored and logged");
}

/// This process's uid, from `/proc/self/status`.
fn nix_uid() -> Option<u32> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[test]
fn links_planted_at_the_daemon_files_are_never_followed() {
    let test = "links_planted_at_the_daemon_files_are_never_followed";
    let env = TestEnv::new();
    env.make_data_dir();
    let target = env.home().join("precious");
    let rounds = pick(2, 20);
    for round in 0..rounds {
        std::fs::write(&target, "keep\n").expect("the target");
        for name in ["daemon.pid", "daemon.sock"] {
            let link = env.data_dir().join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&target, &link).expect("a planted link");
        }
        let daemon = Daemon::start(&env, &[]);
        // `daemon start` returns once the pid file is written; the socket
        // is bound just after, so it is waited for.
        for name in ["daemon.pid", "daemon.sock"] {
            let replaced = wait_for(Duration::from_secs(10), || {
                std::fs::symlink_metadata(env.data_dir().join(name))
                    .ok()
                    .filter(|meta| !meta.file_type().is_symlink())
            });
            assert!(
                replaced.is_some(),
                "round {round}: {name} is still the planted link (or missing)"
            );
        }
        drop(daemon);
        assert_eq!(
            std::fs::read_to_string(&target).expect("the target"),
            "keep\n",
            "round {round}"
        );
        // The log: refused, never appended to.
        let log = env.data_dir().join("daemon.log");
        let kept = env.data_dir().join("daemon.log.kept");
        std::fs::rename(&log, &kept).expect("the log");
        std::os::unix::fs::symlink(&target, &log).expect("a planted link");
        env.loops(["daemon", "start"])
            .code(1)
            .stderr_has("is a symbolic link")
            .run();
        assert_eq!(
            std::fs::read_to_string(&target).expect("the target"),
            "keep\n"
        );
        std::fs::remove_file(&log).expect("the link");
        std::fs::rename(&kept, &log).expect("the log");
    }
    figure(
        test,
        &format!("{rounds} rounds of planted links, none followed"),
    );
}
