//! The `loops daemon` and `loops doctor` command lines (SPEC §7.5, §7.6),
//! stage one: raw values, resolved in `commands::daemon`.

use clap::{Args, Subcommand};

/// `--grace`'s default, as `RunArgs` spells it.
pub(crate) const DEFAULT_GRACE_FLAG: &str = "30s";

/// `loops daemon <command>`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Daemon {
    /// Run the scheduler in the foreground until SIGINT or SIGTERM (for
    /// systemd, launchd or a terminal). It logs to daemon.log in the data
    /// directory, and to stderr too unless stderr is a file.
    #[command(after_help = crate::args::help::DAEMON_RUN)]
    Run(RunArgs),
    /// Start the daemon in the background, with a pid file and a log file.
    #[command(after_help = crate::args::help::DAEMON_START)]
    Start(RunArgs),
    /// Stop the daemon: no new runs, runs in flight get --grace to finish,
    /// the rest are interrupted without counting as an attempt.
    #[command(after_help = crate::args::help::DAEMON_STOP)]
    Stop(StopArgs),
    /// Show whether the daemon runs, its lease, and loop and run counts.
    #[command(after_help = crate::args::help::DAEMON_STATUS)]
    Status,
    /// Print the end of the daemon's log.
    #[command(after_help = crate::args::help::DAEMON_LOGS)]
    Logs(LogsArgs),
    /// Install the daemon as a systemd user unit (Linux) or launchd agent
    /// (macOS).
    #[command(after_help = crate::args::help::DAEMON_INSTALL)]
    Install(InstallArgs),
    /// Remove the systemd user unit or launchd agent.
    #[command(after_help = crate::args::help::DAEMON_UNINSTALL)]
    Uninstall(UninstallArgs),
}

// The daemon's tuning, for `daemon run` and `daemon start`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Longest sleep, in ms, between two looks at the database when nothing
    /// is due (at most 60000). Slots, retries and CLI changes wake the
    /// daemon at once whatever this is [default: $LOOPS_DAEMON_INTERVAL_MS,
    /// else 60000].
    #[arg(long, value_name = "MS")]
    pub(crate) interval_ms: Option<String>,

    /// Most runs executing at once.
    #[arg(long, value_name = "N", default_value = "32")]
    pub(crate) max_parallel: String,

    /// Most command loops' runs executing at once, within --max-parallel
    /// [default: no limit but --max-parallel].
    #[arg(long, value_name = "N")]
    pub(crate) command_concurrency: Option<String>,

    /// Most agent loops' runs executing at once, within --max-parallel, so
    /// slow agents never hold up due commands [default: no limit but
    /// --max-parallel]. Workflow loops count in neither lane.
    #[arg(long, value_name = "N")]
    pub(crate) agent_concurrency: Option<String>,

    /// How long runs in flight may take to finish when the daemon stops.
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_GRACE_FLAG)]
    pub(crate) grace: String,

    /// On PostgreSQL, do not LISTEN for wake-ups from other hosts: look at
    /// the database every 5 s instead. For PgBouncer in transaction mode,
    /// which does not carry LISTEN (no effect on SQLite).
    #[arg(long)]
    pub(crate) poll_only: bool,

    /// Shell command run after the final failure of every loop without its
    /// own --on-failure, with the run's JSON on stdin [default: none].
    #[arg(long, value_name = "COMMAND", allow_hyphen_values = true)]
    pub(crate) on_failure: Option<String>,

    /// A label this daemon carries, so it runs the loops placed on it
    /// with `--runs-on` (repeatable, or comma-separated); `host:<hostname>`
    /// is always carried [default: that one only].
    #[arg(long = "label", value_name = "LABEL")]
    pub(crate) labels: Vec<String>,

    #[command(flatten)]
    pub(crate) gc: GcFlags,

    #[command(flatten)]
    pub(crate) serve: DaemonServeFlags,
}

// `loops serve` inside the daemon (issue 29), for `daemon run`, `daemon
// start` and `daemon install`.
#[derive(Debug, Clone, Args)]
pub(crate) struct DaemonServeFlags {
    /// Also serve the dashboard and HTTP API, as `loops serve --listen
    /// ADDR` does, on a thread of the daemon, until the daemon stops. The
    /// login URL goes to the daemon's log [default: not served].
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) serve: Option<String>,

    /// With --serve: the TLS certificate (PEM), needed for a non-loopback
    /// address.
    #[arg(long, value_name = "FILE", requires = "serve", requires = "tls_key")]
    pub(crate) tls_cert: Option<std::path::PathBuf>,

    /// With --serve: the TLS certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "serve", requires = "tls_cert")]
    pub(crate) tls_key: Option<std::path::PathBuf>,
}

// The daemon's periodic gc, for `daemon run`, `daemon start` and
// `daemon install`.
#[derive(Debug, Args)]
pub(crate) struct GcFlags {
    /// Delete finished runs older than this duration (such as 30d or 12h)
    /// at most once an hour, as `loops gc --apply` does [default: no gc;
    /// every run is kept].
    #[arg(long, value_name = "DURATION")]
    pub(crate) gc_max_age: Option<String>,

    /// With --gc-max-age: always keep the newest N runs of each loop
    /// [default: 20].
    #[arg(long, value_name = "N", requires = "gc_max_age")]
    pub(crate) gc_keep_per_loop: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct StopArgs {
    /// How long runs in flight may take to finish before they are
    /// interrupted.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub(crate) grace: String,
}

#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// Print the last N lines; 0 prints the whole log.
    #[arg(short = 'n', long = "lines", value_name = "N", default_value = "80")]
    pub(crate) lines: String,

    /// Keep printing new lines as they are written, across log rotation.
    #[arg(short = 'f', long)]
    pub(crate) follow: bool,

    /// Only the lines of this loop's runs (by id or name).
    #[arg(long = "loop", value_name = "LOOP", add = crate::complete::loops())]
    pub(crate) loop_ref: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct InstallArgs {
    /// Also load and start the service (runs the printed commands, except
    /// `loginctl`).
    #[arg(long)]
    pub(crate) enable: bool,

    /// Write the file of this platform (linux or macos) instead of this
    /// machine's; for tests and packaging.
    #[arg(
        long,
        value_name = "PLATFORM",
        hide = true,
        add = crate::complete::one_of(crate::service::install::Platform::ALL)
    )]
    pub(crate) platform: Option<String>,

    // The same tuning as `daemon run` and `daemon start`, written into the
    // service's command line.
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Debug, Args)]
pub(crate) struct UninstallArgs {
    /// Also stop and unload the service before removing its file.
    #[arg(long)]
    pub(crate) disable: bool,

    /// Remove the file of this platform (linux or macos); for tests.
    #[arg(
        long,
        value_name = "PLATFORM",
        hide = true,
        add = crate::complete::one_of(crate::service::install::Platform::ALL)
    )]
    pub(crate) platform: Option<String>,
}

// `loops doctor`.
#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {}
