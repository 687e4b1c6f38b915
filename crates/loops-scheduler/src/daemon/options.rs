//! What [`run_daemon`](super::run_daemon) is given: the files of its data
//! directory, its collaborators and its tuning, with their defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use loops_core::Clock;
use loops_exec::CancelToken;
use loops_store::DB_FILE;

use super::database_clock::ClockSync;
use super::pidfile::PID_FILE;
use super::wake::SOCKET_FILE;
use crate::executor::RunExecutor;

/// The daemon log's name inside the data directory.
pub const LOG_FILE: &str = "daemon.log";

/// How long runs in flight may take to finish when the daemon stops.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// The longest the daemon sleeps without looking at the clock and the
/// database.
pub const DEFAULT_MAX_SLEEP: Duration = Duration::from_secs(60);
/// The longest sleep of a daemon on a shared database that does not
/// listen for wake-ups (`--poll-only`, for PgBouncer in transaction mode):
/// how late it notices a loop another host created or resumed.
pub const POLL_ONLY_MAX_SLEEP: Duration = Duration::from_secs(5);
/// How long the daemon lease lasts without a heartbeat (renewed every
/// third of it).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(60);

/// How many of each loop's newest runs the daemon's gc keeps when
/// `--gc-keep-per-loop` is not given.
pub const DEFAULT_GC_KEEP_PER_LOOP: u32 = 20;

/// The daemon's periodic gc (`--gc-max-age`, `--gc-keep-per-loop`): at
/// most once an hour, finished runs older than `max_age` are deleted,
/// beyond the newest `keep_per_loop` of each loop (see `daemon/gc.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcSettings {
    /// Runs created longer ago than this may go.
    pub max_age: Duration,
    /// The newest runs of each loop that always stay (at least one does).
    pub keep_per_loop: u32,
    /// Take an automatic backup (at most one an hour, as `gc --apply`
    /// does) before the daemon's first pass. Only the first: a backup
    /// before every hourly pass would copy the whole database every hour.
    /// The first pass is the one a mistaken `--gc-max-age` would hurt.
    pub backup_first: bool,
}

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

/// Everything [`run_daemon`](super::run_daemon) needs.
pub struct DaemonOptions<'a> {
    /// Where the pid file, socket and log live.
    pub paths: &'a DaemonPaths,
    /// Where "now" comes from.
    pub clock: &'a dyn Clock,
    /// Runs the claimed runs.
    pub executor: &'a dyn RunExecutor,
    /// Cancelled to stop the daemon (SIGINT, SIGTERM). `loops daemon stop`
    /// reaches the daemon on its socket instead (`wake.rs`).
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
    /// Most runs of one kind executing at once, within `max_parallel`
    /// (issue 17); the default limits neither kind.
    pub lanes: crate::Lanes,
    /// The default `onFailure` hook and the hooks' timeout (issue 17).
    pub hooks: crate::HookSettings,
    /// How long runs in flight may take to finish on stop, unless
    /// `loops daemon stop --grace` asks for another period.
    pub grace: Duration,
    /// The longest sleep without looking at the clock and the database.
    pub max_sleep: Duration,
    /// The daemon lease's time to live.
    pub lease_ttl: Duration,
    /// SIGTERM-to-SIGKILL time for an orphaned process group.
    pub orphan_grace: Duration,
    /// The periodic gc, or `None` (the default) for none: the original
    /// keeps every run.
    pub gc: Option<GcSettings>,
    /// On a database other hosts share, the clock (the same as `clock`)
    /// whose offset to the database's clock the daemon measures at start
    /// and with every lease renewal; `None` keeps `clock` as it is.
    pub clock_sync: Option<&'a dyn ClockSync>,
    /// On a shared database, do not listen for wake-ups (`LISTEN`, which
    /// PgBouncer in transaction mode does not carry): sleep at most
    /// [`POLL_ONLY_MAX_SLEEP`] instead.
    pub poll_only: bool,
}
