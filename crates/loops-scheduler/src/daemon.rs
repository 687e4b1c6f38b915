//! The daemon: one long-lived scheduler per database (SPEC §7.6). The
//! commands around it (start, stop, status, logs, install) are the CLI's
//! (`loops-cli/src/service/`); they reach the daemon through the pid file,
//! the lease and the datagrams of `daemon.sock`, all defined here.
//!
//! [`run_daemon`] takes the database lease, writes the pid file, recovers
//! what a dead daemon of this host left behind, and then loops over named
//! steps: renew the lease, plan due slots, apply the overlap policy to
//! loops it is running, start runs, renew run leases, then sleep until the
//! next thing to do. It keeps one dispatcher (`dispatch.rs`) for its whole
//! life, so runs execute concurrently up to `max_parallel` and a long run
//! never delays another loop's slot (SPEC §9 item 1).
//!
//! **Wake-ups** (SPEC §9 item 6). There is no polling interval. The daemon
//! sleeps until the earliest of: the next due slot or retry of a loop it is
//! not already running, the next loop expiry, the next overlap slot of a
//! loop it is running, the next run-lease heartbeat, its own lease
//! heartbeat, the lease expiry of a run another runner holds, and
//! [`DaemonOptions::max_sleep`] (a minute at most, so a wall-clock jump or a
//! suspend is noticed within a minute; missed slots then go through each
//! loop's catch-up policy). Worker reports and the CLI's datagram on
//! `daemon.sock` (`wake.rs`) end the sleep at once.
//!
//! **Crash recovery** (SPEC §9 items 16 and 18). A daemon killed with
//! SIGKILL leaves its lease, its pid file and its runs behind. The next
//! daemon on the same host takes the lease over at once when the holder's
//! pid is gone or now belongs to a process started after the lease was
//! taken. It then abandons the dead daemon's runs at once (instead of
//! waiting out their run leases), after tearing down their orphaned
//! process groups, but only groups whose recorded identity (pid and start
//! time) still matches. The loops then retry or move on by their policy.
//! A slot never runs twice at the same time: claims are exclusive, and an
//! orphaned run is abandoned only once its processes are gone.
//!
//! **Stopping** (SPEC §9 item 17). SIGTERM, SIGINT or `loops daemon stop`
//! stop the daemon gracefully: it stops claiming (slots that were due but
//! not started stay due, unclaimed), lets runs in flight finish within the
//! grace period (`--grace`, 30 s by default), then cancels the rest. A run
//! cancelled that way is recorded as abandoned with the error
//! `interrupted by daemon shutdown; not counted as an attempt`, and its
//! slot is claimed again, under the same attempt number, by the next
//! daemon. Then the pid file is removed and the lease released.
//!
//! **Files, socket and identity** (issue 12 §3). `daemon.log` and
//! `daemon.pid` are never opened through a symbolic link (a planted log
//! link is refused, a pid-file link replaced), the pid file is written
//! under a random temporary name, and `daemon.sock` is 0600 whatever the
//! umask; on Linux a datagram from another user is ignored. `daemon stop`
//! and `daemon status` take the pid file's process for the daemon only if
//! it started before the file was written and before the lease was taken,
//! so a reused pid is never signalled; without a readable database, `stop`
//! relies on the pid file alone. Before every turn the daemon checks that
//! the database file and its WAL are still the files it opened, and stops
//! with an error in its log when one was deleted or replaced.
//!
//! **Commands on a loop with a run in flight** (SPEC §9 item 20).
//! - `pause`, `stop` and `remove` never kill a run in flight: it finishes
//!   and is recorded, but the loop is not advanced or rescheduled (the
//!   advance applies only to an active loop, and only to a loop that still
//!   exists). A paused loop that is resumed later continues after the slot
//!   that ran; `remove --purge` deletes the row under the run, whose result
//!   is then only logged.
//! - `run-now` of the slot the daemon is running is refused (`could not
//!   claim manual run`); a `run-now` of another slot runs beside it, and the
//!   daemon then applies the loop's overlap policy to its own next slot.
//! - `resume` of a loop the daemon is running changes nothing until the run
//!   is recorded.

mod pidfile;
mod recover;
mod run;
mod wake;

use std::path::{Path, PathBuf};
use std::time::Duration;

use loops_core::Timestamp;
use loops_exec::CancelToken;
use loops_store::{DB_FILE, StoreError};

use crate::executor::RunExecutor;
use loops_core::Clock;

pub use self::pidfile::{PID_FILE, PidRecord, read_pid, read_pid_record, remove_pid_if};
pub use self::run::run_daemon;
pub use self::wake::{SOCKET_FILE, notify_daemon, request_stop};

/// The daemon log's name inside the data directory.
pub const LOG_FILE: &str = "daemon.log";

/// How long runs in flight may take to finish when the daemon stops.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// The longest the daemon sleeps without looking at the clock and the
/// database.
pub const DEFAULT_MAX_SLEEP: Duration = Duration::from_secs(60);
/// How long the daemon lease lasts without a heartbeat (renewed every
/// third of it).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(60);

/// The files of a data directory the daemon uses (SPEC §7.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonPaths {
    /// The data directory.
    pub data_dir: PathBuf,
}

impl DaemonPaths {
    /// The paths under `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> DaemonPaths {
        DaemonPaths {
            data_dir: data_dir.into(),
        }
    }

    /// `loops.db`.
    pub fn database(&self) -> PathBuf {
        self.data_dir.join(DB_FILE)
    }

    /// `daemon.pid`.
    pub fn pid_file(&self) -> PathBuf {
        self.data_dir.join(PID_FILE)
    }

    /// `daemon.log`.
    pub fn log_file(&self) -> PathBuf {
        self.data_dir.join(LOG_FILE)
    }

    /// `daemon.sock`.
    pub fn socket(&self) -> PathBuf {
        self.data_dir.join(SOCKET_FILE)
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.data_dir
    }
}

/// Everything [`run_daemon`] needs.
pub struct DaemonOptions<'a> {
    /// Where the pid file, socket and log live.
    pub paths: &'a DaemonPaths,
    /// Where "now" comes from.
    pub clock: &'a dyn Clock,
    /// Runs the claimed runs.
    pub executor: &'a dyn RunExecutor,
    /// Cancelled to stop the daemon (SIGINT, SIGTERM, `loops daemon stop`).
    pub stop: &'a CancelToken,
    /// Receives every log line, without its timestamp.
    pub log: &'a dyn Fn(&str),
    /// Called with each sleep before the daemon blocks, so tests can check
    /// the wake-up plan and move a manual clock.
    pub on_sleep: Option<&'a dyn Fn(Duration)>,
    /// This host's name, for the lease and the runner id.
    pub host: String,
    /// This process's pid, for the lease and the runner id.
    pub pid: u32,
    /// Most runs executing at once.
    pub max_parallel: usize,
    /// How long runs in flight may take to finish on stop.
    pub grace: Duration,
    /// The longest sleep without looking at the clock and the database.
    pub max_sleep: Duration,
    /// The daemon lease's time to live.
    pub lease_ttl: Duration,
    /// SIGTERM-to-SIGKILL time for an orphaned process group.
    pub orphan_grace: Duration,
}

/// Why [`run_daemon`] could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Another daemon holds the database lease.
    #[error("another loops daemon holds the database lease: pid {pid} on {host} since {since}")]
    LeaseHeld {
        /// The holder's pid.
        pid: u32,
        /// The holder's host.
        host: String,
        /// When the holder took the lease.
        since: Timestamp,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A daemon file could not be written. The OS error is part of the
    /// message, not a `source`, so a printed chain does not repeat it.
    #[error("cannot write {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

/// How [`run_daemon`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonExit {
    /// Why it stopped: the stop token's reason, or `daemon lease lost`.
    pub reason: String,
    /// Runs cut short by the end of the grace period.
    pub interrupted: usize,
}
