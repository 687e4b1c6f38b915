//! `daemon start`, `daemon stop` and `daemon status` (SPEC §7.6).
//!
//! A daemon is *running* when its pid file names a live process that is
//! (or was) the database lease holder on this host, and that process is
//! the one that wrote the pid file and took the lease; a pid file naming
//! anything else is *stale*. The identity check is what tells a reused pid
//! from the daemon: the kernel may hand a dead daemon's pid to any later
//! process. The pid file records the daemon's boot id and start tick
//! (issue 32), which no wall-clock step moves; a pid file in the original's
//! format falls back to start times against the file's modification time
//! and the lease's creation. Stop signals only that lease holder (SPEC §10
//! item 99), and start spawns `<exe> daemon run` detached, through
//! `loops_exec::spawn_detached`.
//!
//! When the database cannot be read (its WAL deleted under a running
//! daemon, a disk I/O error), `stop` still stops the daemon: the pid file
//! and its identity check identify it, and the socket carries the stop
//! request before the SIGTERM.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use loops_core::{DaemonLease, LoopStatus, RunStatus, Timestamp};
use loops_exec::{ProcessSignal, SystemClock, is_running, signal_process, spawn_detached};
use loops_store::{DaemonMember, Store, StoreError};
use serde::Serialize;

use loops_scheduler::{
    ClockSync, DaemonPaths, DatabaseClock, PidRecord, read_pid, read_pid_record, remove_pid_if,
    request_stop,
};

/// How long `start` waits for the daemon's pid file (SPEC §7.6: 4000 ms).
const START_WAIT: Duration = Duration::from_secs(4);
/// How often `start` and `stop` look again.
const POLL: Duration = Duration::from_millis(20);
/// What `stop` waits beyond the grace period: the SIGTERM-to-SIGKILL time
/// of the runs it interrupts, plus recording them.
const STOP_MARGIN: Duration = Duration::from_secs(5);
/// How long `stop` waits after SIGKILL (SPEC §7.6: 150 ms).
const KILL_WAIT: Duration = Duration::from_millis(150);

/// Loop counts by status (SPEC §7.6 `daemon status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct LoopCounts {
    /// All loops.
    pub(crate) total: u64,
    /// Active loops.
    pub(crate) active: u64,
    /// Paused loops.
    pub(crate) paused: u64,
    /// Stopped loops.
    pub(crate) stopped: u64,
    /// Expired loops.
    pub(crate) expired: u64,
}

/// Run counts by status (SPEC §7.6 `daemon status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct RunCounts {
    /// All runs.
    pub(crate) total: u64,
    /// Running now.
    pub(crate) running: u64,
    /// Failed.
    pub(crate) failed: u64,
    /// Succeeded.
    pub(crate) succeeded: u64,
    /// Abandoned (including runs a shutdown interrupted).
    pub(crate) abandoned: u64,
}

/// What `daemon status` reports (SPEC §7.6, plus `dataDir`, `socketPath`,
/// `nextRunAt`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DaemonStatus {
    /// A daemon runs (see the module docs).
    pub(crate) running: bool,
    /// The pid file names a process that is not a running daemon.
    pub(crate) stale: bool,
    /// The pid the pid file names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pid: Option<u32>,
    /// The database lease, expired or not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) lease: Option<DaemonLease>,
    /// The labels of the lease's daemon, `host:<hostname>` first (issue
    /// 30, P1; new in loops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) labels: Option<Vec<String>>,
    /// This host.
    pub(crate) host: String,
    /// Loops by status.
    pub(crate) loops: LoopCounts,
    /// Runs by status.
    pub(crate) runs: RunCounts,
    /// The earliest next run of an active loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_run_at: Option<Timestamp>,
    /// The log file.
    pub(crate) log_path: String,
    /// The data directory.
    pub(crate) data_dir: String,
    /// `sqlite` or `postgresql` (new in loops).
    pub(crate) backend: &'static str,
    /// The database: the SQLite file, or the PostgreSQL URL with its
    /// password masked (new in loops).
    pub(crate) database: String,
    /// On PostgreSQL, every daemon registered on the database, on any
    /// host, with its runs in flight and its clock skew (new in loops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) daemons: Option<Vec<DaemonMember>>,
    /// On PostgreSQL, this host's clock against the server's (database
    /// minus host, ms) as `daemon status` measured it (new in loops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) clock_skew_ms: Option<i64>,
}

/// Whether the pid file names the lease holder's live process.
fn daemon_pid(paths: &DaemonPaths, lease: Option<&DaemonLease>, host: &str) -> (Option<u32>, bool) {
    let record = read_pid_record(&paths.pid_file());
    let running = record.is_some_and(|r| {
        r.is_daemon()
            && lease.is_some_and(|l| holds(l, r.pid, host) && r.took_lease_at(l.created_at))
    });
    (record.map(|r| r.pid), running)
}

fn holds(lease: &DaemonLease, pid: u32, host: &str) -> bool {
    lease.pid == pid && lease.hostname == host
}

/// Reads the daemon's state and the counts (SPEC §7.6 `daemon status`).
pub(crate) fn daemon_status(
    store: &Store,
    paths: &DaemonPaths,
    host: &str,
    now: Timestamp,
) -> Result<DaemonStatus, StoreError> {
    let lease = store.get_daemon_lease()?;
    let (pid, running) = daemon_pid(paths, lease.as_ref(), host);
    let loops = LoopCounts {
        total: store.count_loops(None)?,
        active: store.count_loops(Some(LoopStatus::Active))?,
        paused: store.count_loops(Some(LoopStatus::Paused))?,
        stopped: store.count_loops(Some(LoopStatus::Stopped))?,
        expired: store.count_loops(Some(LoopStatus::Expired))?,
    };
    let runs = RunCounts {
        total: store.count_runs(None)?,
        running: store.count_runs(Some(RunStatus::Running))?,
        failed: store.count_runs(Some(RunStatus::Failed))?,
        succeeded: store.count_runs(Some(RunStatus::Succeeded))?,
        abandoned: store.count_runs(Some(RunStatus::Abandoned))?,
    };
    let next_run_at = store.next_wake(now, "", &[])?.due;
    let kind = store.backend_kind();
    let (backend, database) = (kind.name(), kind.database());
    let members = store.list_daemons(now)?;
    let labels = lease.as_ref().and_then(|l| {
        members
            .iter()
            .find(|m| m.id == l.id)
            .map(|m| m.labels.clone())
    });
    let (daemons, clock_skew_ms) = if store.is_shared() {
        let clock = DatabaseClock::new(SystemClock);
        (Some(members), clock.sync(store)?)
    } else {
        (None, None)
    };
    Ok(DaemonStatus {
        running,
        stale: pid.is_some() && !running,
        pid,
        lease,
        labels,
        host: host.to_owned(),
        loops,
        runs,
        next_run_at,
        log_path: paths.log_file().display().to_string(),
        data_dir: paths.dir().display().to_string(),
        backend,
        database,
        daemons,
        clock_skew_ms,
    })
}

/// Whether a daemon serves this database: this host's (the pid file and
/// the lease, as [`daemon_status`] decides), or on a shared PostgreSQL
/// database a live daemon of any host. Reads no counts, for the hint of
/// `create`, `resume` and `list` (issue 16).
pub(crate) fn daemon_serves(
    store: &Store,
    paths: &DaemonPaths,
    host: &str,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let lease = store.get_daemon_lease()?;
    if daemon_pid(paths, lease.as_ref(), host).1 {
        return Ok(true);
    }
    Ok(store.is_shared() && store.list_daemons(now)?.iter().any(|d| d.live))
}

/// The pid of the daemon of the data directory of `paths`, from its pid
/// file alone: a live process that started before the file was written,
/// so not a reused pid. No database is read, so it answers for a database
/// that cannot be opened; `restore` and `gc --vacuum` refuse to go on
/// while it runs.
pub(crate) fn running_daemon_pid(paths: &DaemonPaths) -> Option<u32> {
    read_pid_record(&paths.pid_file())
        .filter(PidRecord::is_daemon)
        .map(|r| r.pid)
}

/// What `daemon start` did (SPEC §7.6: `{started, alreadyRunning, pid?}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StartOutcome {
    /// A new daemon is running.
    pub(crate) started: bool,
    /// A daemon was already running; nothing was started.
    pub(crate) already_running: bool,
    /// The daemon's pid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pid: Option<u32>,
    /// Why the new daemon did not come up (not part of the original JSON;
    /// set only when `started` is false and nothing was running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// Starts `<exe> <args…>` (normally `daemon run …`) detached, with its
/// output appended to the log, unless a daemon already runs; then waits up
/// to 4 s for its pid file (SPEC §7.6 `daemon start`).
pub(crate) fn start_daemon(
    store: &Store,
    paths: &DaemonPaths,
    host: &str,
    exe: &Path,
    args: &[OsString],
    env: &[(&str, &str)],
) -> Result<StartOutcome, StoreError> {
    let lease = store.get_daemon_lease()?;
    let (pid, running) = daemon_pid(paths, lease.as_ref(), host);
    if running {
        return Ok(StartOutcome {
            started: false,
            already_running: true,
            pid,
            error: None,
        });
    }
    if let Some(stale) = pid {
        remove_pid_if(&paths.pid_file(), stale);
    }
    let log = paths.log_file();
    let mut child = match spawn_detached(exe, args, env, &log) {
        Ok(child) => child,
        Err(e) => {
            return Ok(StartOutcome {
                started: false,
                already_running: false,
                pid: None,
                error: Some(format!("cannot start {}: {e}", exe.display())),
            });
        }
    };
    let deadline = Instant::now() + START_WAIT;
    loop {
        if let Some(pid) = read_pid(&paths.pid_file())
            && pid == child.pid()
            && is_running(pid)
        {
            return Ok(StartOutcome {
                started: true,
                already_running: false,
                pid: Some(pid),
                error: None,
            });
        }
        if let Some(code) = child.exited() {
            return Ok(StartOutcome {
                started: false,
                already_running: false,
                pid: None,
                error: Some(format!(
                    "the daemon exited with code {code}; see {}",
                    log.display()
                )),
            });
        }
        if Instant::now() >= deadline {
            return Ok(StartOutcome {
                started: false,
                already_running: false,
                pid: None,
                error: Some(format!(
                    "no daemon pid file after {}s; see {}",
                    START_WAIT.as_secs(),
                    log.display()
                )),
            });
        }
        std::thread::sleep(POLL);
    }
}

/// What `daemon stop` did (SPEC §7.6: `{wasRunning, stopped, forced, pid?}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StopOutcome {
    /// A daemon was running.
    pub(crate) was_running: bool,
    /// It is gone now.
    pub(crate) stopped: bool,
    /// SIGKILL was needed.
    pub(crate) forced: bool,
    /// The pid the pid file named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pid: Option<u32>,
}

/// Stops the daemon gracefully (SPEC §7.6 `daemon stop`, §9 item 17): asks
/// it to stop with `grace` for its runs in flight, sends SIGTERM, waits
/// `grace` plus a margin, and only then sends SIGKILL.
///
/// Only the lease holder is ever signalled: a pid file that names a dead
/// process, a process started after the file was written or after the
/// lease was taken (a reused pid), or a live process that is not the holder
/// of an unexpired lease on this host, is removed and nothing is signalled
/// (SPEC §10 item 99).
///
/// Without a `store`, or when the lease cannot be read, the pid file and
/// its identity check alone identify the daemon (see the module docs).
pub(crate) fn stop_daemon(
    store: Option<&Store>,
    paths: &DaemonPaths,
    host: &str,
    grace: Duration,
    now: Timestamp,
) -> Result<StopOutcome, StoreError> {
    let pid_path = paths.pid_file();
    let not_running = |pid: Option<u32>| StopOutcome {
        was_running: false,
        stopped: false,
        forced: false,
        pid,
    };
    let Some(record) = read_pid_record(&pid_path) else {
        return Ok(not_running(None));
    };
    let pid = record.pid;
    // An unreadable database leaves the pid file's own check. A pid file
    // with the daemon's identity proves it the holder whatever this
    // host's clock reads, so the lease's expiry by that clock is asked
    // only of a pid file in the original's format (issue 32).
    let holder = match store.map(Store::get_daemon_lease) {
        Some(Ok(lease)) => lease.as_ref().is_some_and(|l| {
            holds(l, pid, host)
                && (record.identity.is_some() || l.expires_at > now)
                && record.took_lease_at(l.created_at)
        }),
        Some(Err(_)) | None => true,
    };
    if !record.is_daemon() || !holder {
        remove_pid_if(&pid_path, pid);
        return Ok(not_running(Some(pid)));
    }
    request_stop(paths.dir(), grace);
    match signal_process(pid, ProcessSignal::Terminate) {
        Ok(true) => {}
        // Gone already, or not ours to signal: nothing left to stop.
        Ok(false) | Err(_) => {
            remove_pid_if(&pid_path, pid);
            return Ok(StopOutcome {
                was_running: true,
                stopped: true,
                forced: false,
                pid: Some(pid),
            });
        }
    }
    if wait_gone(pid, grace + STOP_MARGIN) {
        remove_pid_if(&pid_path, pid);
        return Ok(StopOutcome {
            was_running: true,
            stopped: true,
            forced: false,
            pid: Some(pid),
        });
    }
    let _ = signal_process(pid, ProcessSignal::Kill);
    let stopped = wait_gone(pid, KILL_WAIT);
    remove_pid_if(&pid_path, pid);
    Ok(StopOutcome {
        was_running: true,
        stopped,
        forced: true,
        pid: Some(pid),
    })
}

fn wait_gone(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if !is_running(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}
