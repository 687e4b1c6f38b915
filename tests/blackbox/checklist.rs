//! SPEC §10 checklist items that no other black-box test asserts: where
//! `LOOPS_DATA_DIR` puts the daemon's files (item 101), and a pid file that
//! names a live daemon refusing `daemon run` (item 96).

use std::time::Duration;

use loops_tests::{Daemon, TestEnv, kill, pid_file_pid, sqlite_only, wait_for};

const DEADLINE: Duration = Duration::from_secs(10);

// SPEC §10 item 101: the database, the pid file and the log all live in
// `$LOOPS_DATA_DIR`, and nothing is written under `$HOME`. On PostgreSQL
// the database is the server's, and the data directory holds the rest.
#[test]
fn loops_data_dir_holds_the_database_the_pid_file_and_the_log() {
    let env = TestEnv::new();
    let dir = env.data_dir();
    let daemon = Daemon::start(&env, &[]);
    let pid = daemon.pid;

    if env.on_postgres() {
        // The database is the server's: no SQLite file appears here.
        assert!(!dir.join("loops.db").exists(), "a SQLite file in {dir:?}");
    } else {
        assert!(dir.join("loops.db").is_file(), "no database in {dir:?}");
    }
    let pid_file = std::fs::read_to_string(dir.join("daemon.pid")).expect("a pid file");
    assert_eq!(pid_file_pid(&pid_file), Some(pid), "{pid_file:?}");
    // Issue 32: the daemon's identity follows on the second line, and the
    // file still starts with the pid, which the original reads.
    assert!(pid_file.starts_with(&format!("{pid}\n")), "{pid_file:?}");
    let identity = pid_file.lines().nth(1).unwrap_or_default();
    assert!(
        identity.starts_with("boot=") && identity.contains(" start="),
        "{pid_file:?}"
    );
    let log = wait_for("the daemon's first log line", DEADLINE, || {
        std::fs::read_to_string(dir.join("daemon.log"))
            .ok()
            .filter(|log| log.contains("[loops-daemon] started pid="))
    });
    assert!(
        log.contains(&format!("[loops-daemon] started pid={pid} ")),
        "{log}"
    );
    let status = env.loops(["--json", "daemon", "status"]).run().json();
    assert_eq!(
        status["logPath"].as_str(),
        dir.join("daemon.log").to_str(),
        "{status}"
    );
    assert!(
        !env.home().join(".hasna").exists(),
        "nothing is written under HOME"
    );

    env.loops(["daemon", "stop"])
        .stdout(&format!("stopped pid={pid}\n"))
        .run();
    let log = std::fs::read_to_string(dir.join("daemon.log")).expect("the log");
    assert!(log.trim_end().ends_with("[loops-daemon] stopped"), "{log}");
    assert!(!env.home().join(".hasna").exists());
    drop(daemon);
}

// SPEC §10 item 96: `daemon run` refuses while the pid file names a live
// process. loops refuses when that process is the daemon that holds the
// lease (here: suspended, with its lease expired, so only the pid file can
// tell it is there); a pid file that names an unrelated process is stale,
// as for `daemon stop` (SPEC §9 item 14).
#[test]
fn a_pid_file_naming_the_live_daemon_refuses_daemon_run_after_its_lease_expired() {
    sqlite_only!(
        "expires the single daemon_lease row; on PostgreSQL daemons register in `daemons`"
    );
    let env = TestEnv::new();
    let daemon = Daemon::start(&env, &[]);
    let pid = daemon.pid;
    // A suspended daemon renews nothing; its lease runs out.
    assert!(kill("-STOP", pid), "kill -STOP {pid}");
    let db = rusqlite::Connection::open(env.db_path()).expect("the database");
    db.busy_timeout(Duration::from_secs(5))
        .expect("a busy timeout");
    let expired = db
        .execute(
            "UPDATE daemon_lease SET expires_at = '2000-01-01T00:00:00.000Z' WHERE pid = ?1",
            [pid],
        )
        .expect("the lease row updates");
    assert_eq!(expired, 1, "the daemon holds the lease");
    drop(db);

    let mut second = env.spawn(&["daemon", "run"]);
    let exited = wait_for("`daemon run` to exit", DEADLINE, || {
        match second.try_wait().expect("try_wait") {
            Some(status) => Some(Some(status)),
            None if a_second_daemon_took_the_lease(&env) => Some(None),
            None => None,
        }
    });
    let Some(status) = exited else {
        let _ = second.kill();
        let _ = second.wait();
        panic!("a second daemon started beside the suspended one");
    };
    let out = second.wait_with_output().expect("its output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: another loops daemon holds the database lease: pid {pid} on "
        )),
        "{stderr}"
    );
    let pid_file = std::fs::read_to_string(env.data_dir().join("daemon.pid")).expect("a pid file");
    assert_eq!(
        pid_file_pid(&pid_file),
        Some(pid),
        "the pid file is untouched"
    );
    drop(daemon);
}

/// Whether a second daemon took the expired lease instead of refusing.
fn a_second_daemon_took_the_lease(env: &TestEnv) -> bool {
    let Ok(db) = rusqlite::Connection::open(env.db_path()) else {
        return false;
    };
    let holders: Result<i64, _> = db.query_row(
        "SELECT COUNT(*) FROM daemon_lease WHERE expires_at > '2000-01-01T00:00:00.000Z'",
        [],
        |r| r.get(0),
    );
    holders.is_ok_and(|n| n > 0)
}
