//! `loops daemon …` (SPEC §7.6).
//!
//! The work is `loops_scheduler::run_daemon`'s and `service`'s (start,
//! stop, status, the log, the units); this module resolves the options, prints, and picks exit
//! codes. The daemon serves the one store the data directory or the
//! database URL selects: SQLite in `$LOOPS_DATA_DIR`, or PostgreSQL.
//!
//! Departures from 0.3.1, on purpose:
//! - `daemon status` prints a summary unless `--json` is given (the
//!   original always printed JSON); the JSON also has `nextRunAt` and
//!   `dataDir`.
//! - `daemon start` exits 1 when the daemon did not come up, and says why.
//! - `daemon stop --grace` and `daemon run --grace` bound how long runs in
//!   flight may take to finish (SPEC §9 item 17).
//! - `daemon logs -f` follows the log, across its rotation.
//! - `daemon uninstall` is new.
//! - `daemon stop` works without a readable database, through the pid
//!   file and the daemon's start time; `stop` and `status` never take a
//!   reused pid for the daemon.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use loops_core::{Clock, Timestamp};
use loops_exec::{SignalCancel, SystemClock};
use loops_scheduler::{
    ClockSync, DEFAULT_LEASE_TTL, DEFAULT_MAX_SLEEP, DaemonOptions, DaemonPaths, DatabaseClock,
    ProcessExecutor,
};
use serde_json::{Value, json};

use super::now;
use crate::args::daemon::{
    DEFAULT_GRACE_FLAG, Daemon, InstallArgs, LogsArgs, RunArgs, StopArgs, UninstallArgs,
};
use crate::context::Context;
use crate::exit::Outcome;
use crate::human;
use crate::render::Printer;
use crate::render::escape_controls;
use crate::resolve;
use crate::service::control::{self, DaemonStatus};
use crate::service::install::{self, Platform, ServiceSpec};
use crate::service::log::{self, DaemonLog, LogConfig};

/// Which binary runs, which decides how an executable is told to run the
/// daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binary {
    /// `loops`: `<exe> daemon run`.
    Loops,
    /// `loops-daemon`: `<exe> run`.
    LoopsDaemon,
}

impl Binary {
    /// The arguments that make this binary run the daemon in the foreground.
    pub(crate) fn daemon_run_args(self) -> &'static [&'static str] {
        match self {
            Binary::Loops => &["daemon", "run"],
            Binary::LoopsDaemon => &["run"],
        }
    }
}

/// SIGTERM-to-SIGKILL time for the process groups a dead daemon left.
const ORPHAN_GRACE: Duration = Duration::from_secs(2);
/// How often `daemon logs -f` looks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Runs one `daemon` subcommand.
/// `binary` says how this executable runs the daemon (`start`, `install`).
pub(crate) fn run(
    ctx: &Context,
    cmd: Daemon,
    out: &mut Printer,
    binary: Binary,
) -> Result<Outcome> {
    match cmd {
        Daemon::Run(args) => run_foreground(ctx, &args),
        Daemon::Start(args) => start(ctx, &args, out, binary),
        Daemon::Stop(args) => stop(ctx, &args, out),
        Daemon::Status => status(ctx, out),
        Daemon::Logs(args) => logs(ctx, &args, out),
        Daemon::Install(args) => install(ctx, &args, out, binary),
        Daemon::Uninstall(args) => uninstall(&args, out),
    }
}

fn daemon_paths(ctx: &Context) -> Result<DaemonPaths> {
    Ok(DaemonPaths::new(absolute(ctx.data_dir()?)?))
}

pub(super) fn absolute(path: PathBuf) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path);
    }
    Ok(std::env::current_dir()
        .context("reading the current directory")?
        .join(path))
}

/// The validated tuning of `daemon run` / `daemon start`.
struct Tuning {
    max_sleep: Duration,
    max_parallel: usize,
    lanes: loops_scheduler::Lanes,
    grace: Duration,
    gc: Option<loops_scheduler::GcSettings>,
    hooks: loops_scheduler::HookSettings,
}

fn tuning(ctx: &Context, args: &RunArgs) -> Result<Tuning> {
    let interval = match &args.interval_ms {
        Some(v) => Some(u64::from(resolve::positive_int(v, "--interval-ms")?)),
        // SPEC §7.6: the variable counts only when it is a number > 0.
        None => std::env::var("LOOPS_DAEMON_INTERVAL_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|v| *v > 0),
    };
    let max_sleep = interval
        .map_or(DEFAULT_MAX_SLEEP, Duration::from_millis)
        .min(DEFAULT_MAX_SLEEP);
    let max_parallel = resolve::positive_int(&args.max_parallel, "--max-parallel")?;
    let lane = |value: &Option<String>, flag: &str| -> Result<Option<usize>> {
        value
            .as_deref()
            .map(|v| Ok(usize::try_from(resolve::positive_int(v, flag)?).unwrap_or(usize::MAX)))
            .transpose()
    };
    Ok(Tuning {
        max_sleep,
        max_parallel: usize::try_from(max_parallel).unwrap_or(usize::MAX),
        lanes: loops_scheduler::Lanes {
            command: lane(&args.command_concurrency, "--command-concurrency")?,
            agent: lane(&args.agent_concurrency, "--agent-concurrency")?,
        },
        grace: grace(ctx, &args.grace)?,
        gc: super::gc::daemon_settings(ctx, &args.gc)?,
        hooks: super::execute::hook_settings(args.on_failure.as_deref())?,
    })
}

fn grace(ctx: &Context, value: &str) -> Result<Duration> {
    let mut warnings = crate::request::Warnings::default();
    let ms = crate::resolve::duration(&mut warnings, value, "--grace")?;
    ctx.queue_warnings(warnings.into_vec());
    Ok(Duration::from_millis(ms))
}

/// Whether stderr is a file (the log itself, under `daemon start` or
/// launchd): lines then go to the log only.
fn stderr_is_file() -> bool {
    use std::os::fd::AsFd;
    std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata())
        .is_ok_and(|m| m.is_file())
}

/// `daemon run`: the foreground daemon.
fn run_foreground(ctx: &Context, args: &RunArgs) -> Result<Outcome> {
    // First, so a stop that arrives while the daemon starts up is a clean
    // stop, not a death by the signal's default action.
    let signals = SignalCancel::install_daemon().context("installing the signal handlers")?;
    let tuning = tuning(ctx, args)?;
    let paths = daemon_paths(ctx)?;
    let store = ctx.open_store()?;
    let log_path = paths.log_file();
    let log = DaemonLog::open(&log_path, LogConfig::default(), !stderr_is_file())
        .with_context(|| format!("opening {}", log_path.display()))?;
    // On a shared database the daemon's clock is the database's.
    let clock = DatabaseClock::new(SystemClock);
    let write = |line: &str| log.line(clock.now(), line);
    let note = |line: &str| write(&format!("warning: {line}"));
    // Each run's output goes to logs/<run-id>.log as it is produced.
    let executor = ProcessExecutor::for_store(&clock, &store).with_logs(paths.dir(), Some(&note));
    let opts = DaemonOptions {
        paths: &paths,
        clock: &clock,
        executor: &executor,
        stop: signals.token(),
        log: &write,
        on_sleep: None,
        host: loops_exec::hostname(),
        pid: std::process::id(),
        max_parallel: tuning.max_parallel,
        lanes: tuning.lanes,
        hooks: tuning.hooks,
        grace: tuning.grace,
        max_sleep: tuning.max_sleep,
        lease_ttl: DEFAULT_LEASE_TTL,
        orphan_grace: ORPHAN_GRACE,
        gc: tuning.gc,
        clock_sync: store.is_shared().then_some(&clock as &dyn ClockSync),
        poll_only: args.poll_only,
    };
    match loops_scheduler::run_daemon(&store, &opts) {
        Ok(_) => Ok(Outcome::Success),
        Err(e) => {
            // Whoever started us in the background reads the log; stderr
            // gets the error from the exit code mapping.
            log.file_line(clock.now(), &format!("error: {e}"));
            Err(e.into())
        }
    }
}

/// The command line of `daemon run` with `args`' tuning, as `daemon start`
/// spawns it and `daemon install` writes it into the service.
fn run_command_line(binary: Binary, args: &RunArgs) -> Vec<String> {
    let mut line: Vec<String> = binary
        .daemon_run_args()
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
    // Defaults are left out, so an installed service reads `daemon run` as
    // the original writes it unless a value was given.
    if args.max_parallel != loops_scheduler::DEFAULT_MAX_PARALLEL.to_string() {
        line.extend(["--max-parallel".to_owned(), args.max_parallel.clone()]);
    }
    if args.grace != DEFAULT_GRACE_FLAG {
        line.extend(["--grace".to_owned(), args.grace.clone()]);
    }
    if let Some(ms) = &args.interval_ms {
        line.extend(["--interval-ms".to_owned(), ms.clone()]);
    }
    for (flag, value) in [
        ("--command-concurrency", &args.command_concurrency),
        ("--agent-concurrency", &args.agent_concurrency),
    ] {
        if let Some(n) = value {
            line.extend([flag.to_owned(), n.clone()]);
        }
    }
    if args.poll_only {
        line.push("--poll-only".to_owned());
    }
    if let Some(command) = &args.on_failure {
        // `=` keeps a command that begins with `-` one value.
        line.push(format!("--on-failure={command}"));
    }
    line.extend(super::gc::daemon_args(&args.gc));
    line
}

/// `daemon start`.
fn start(ctx: &Context, args: &RunArgs, out: &mut Printer, binary: Binary) -> Result<Outcome> {
    // Validated here, so a bad value fails now rather than in the child.
    tuning(ctx, args)?;
    let paths = daemon_paths(ctx)?;
    let store = ctx.open_store()?;
    let exe = std::env::current_exe().context("locating the loops executable")?;
    let child_args: Vec<OsString> = run_command_line(binary, args)
        .into_iter()
        .map(OsString::from)
        .collect();
    // A URL given with --database-url reaches the daemon through its
    // environment, as $LOOPS_DATABASE_URL would: never its command line.
    let env: Vec<(&str, &str)> = ctx
        .database_url_flag()
        .map(|url| (crate::paths::DATABASE_URL_VAR, url))
        .into_iter()
        .collect();
    let started = control::start_daemon(
        &store,
        &paths,
        &loops_exec::hostname(),
        &exe,
        &child_args,
        &env,
    )?;
    if out.json {
        out.json(&serde_json::to_value(&started)?)?;
    } else if started.already_running {
        out.line(&format!(
            "already running pid={}",
            started.pid.unwrap_or_default()
        ))?;
    } else if started.started {
        out.line(&format!("started pid={}", started.pid.unwrap_or_default()))?;
    } else {
        out.line("failed to start")?;
    }
    if !started.started && !started.already_running {
        if let Some(error) = &started.error {
            ctx.note("error", error);
        }
        return Ok(Outcome::Failure);
    }
    Ok(Outcome::Success)
}

/// `daemon stop`.
fn stop(ctx: &Context, args: &StopArgs, out: &mut Printer) -> Result<Outcome> {
    let grace = grace(ctx, &args.grace)?;
    let paths = daemon_paths(ctx)?;
    // An unreadable database must not keep a running daemon from stopping:
    // the pid file and its process's start time identify it then.
    // A data directory another user could write is refused outright: its
    // pid file could name any of our processes.
    let store = match ctx.open_store() {
        Ok(store) => Some(store),
        Err(e)
            if e.chain().any(|cause| {
                matches!(
                    crate::exit::open_error(cause),
                    Some(loops_store::OpenError::Unsafe { .. })
                )
            }) =>
        {
            return Err(e);
        }
        Err(e) => {
            ctx.note(
                "warning",
                &format!("{e:#}; stopping the daemon through its pid file"),
            );
            None
        }
    };
    let stopped = control::stop_daemon(
        store.as_ref(),
        &paths,
        &loops_exec::hostname(),
        grace,
        now(),
    )?;
    if out.json {
        out.json(&serde_json::to_value(stopped)?)?;
    } else if stopped.was_running {
        out.line(&format!("stopped pid={}", stopped.pid.unwrap_or_default()))?;
    } else {
        out.line("not running")?;
    }
    Ok(Outcome::Success)
}

/// `daemon status`.
fn status(ctx: &Context, out: &mut Printer) -> Result<Outcome> {
    let paths = daemon_paths(ctx)?;
    let store = ctx.open_store()?;
    let status = control::daemon_status(&store, &paths, &loops_exec::hostname(), now())?;
    if out.json {
        out.json(&serde_json::to_value(&status)?)?;
    } else {
        for line in status_lines(&status, human::display_now()) {
            out.line(&line)?;
        }
    }
    Ok(Outcome::Success)
}

/// The human lines of `daemon status`, with local and relative times
/// (issue 16); `--json` keeps the SPEC's UTC instants.
fn status_lines(s: &DaemonStatus, now: Timestamp) -> Vec<String> {
    let daemon = if s.running {
        let mut line = format!("daemon: running pid={}", s.pid.unwrap_or_default());
        if let Some(lease) = &s.lease {
            line.push_str(&format!(
                " on {} since {} (lease {} until {})",
                escape_controls(&lease.hostname, &[]),
                human::when(lease.created_at, now),
                lease.id,
                human::when(lease.expires_at, now)
            ));
        }
        line
    } else if s.stale {
        format!(
            "daemon: not running (stale pid file names pid {})",
            s.pid.unwrap_or_default()
        )
    } else {
        "daemon: not running".to_owned()
    };
    let l = &s.loops;
    let r = &s.runs;
    let next = s
        .next_run_at
        .map_or_else(|| "-".to_owned(), |t| human::when(t, now));
    let mut lines = vec![
        daemon,
        format!(
            "loops: {} total, {} active, {} paused, {} stopped, {} expired; next run {next}",
            l.total, l.active, l.paused, l.stopped, l.expired
        ),
        format!(
            "runs: {} total, {} running, {} succeeded, {} failed, {} abandoned",
            r.total, r.running, r.succeeded, r.failed, r.abandoned
        ),
        format!("log: {}", s.log_path),
    ];
    if let Some(daemons) = &s.daemons {
        lines.push(format!("database: {} {}", s.backend, s.database));
        if let Some(skew) = s.clock_skew_ms {
            lines.push(format!(
                "this host's clock: {} ms off the server's{}",
                skew,
                skew_warning(skew)
            ));
        }
        let live = daemons.iter().filter(|d| d.live).count();
        lines.push(format!(
            "daemons: {live} live of {} registered",
            daemons.len()
        ));
        for d in daemons {
            lines.push(format!(
                "  {} {} pid={} version {} since {}: {} run(s) in flight, clock {}{}",
                if d.live { "live" } else { "gone" },
                escape_controls(&d.hostname, &[]),
                d.pid,
                escape_controls(d.version.as_deref().unwrap_or("?"), &[]),
                human::when(d.started_at, now),
                d.running_runs,
                d.clock_skew_ms
                    .map_or_else(|| "not measured".to_owned(), |ms| format!("{ms} ms off")),
                d.clock_skew_ms.map_or("", skew_warning),
            ));
        }
    }
    lines
}

/// The warning a clock skew above the daemon's limit gets.
fn skew_warning(ms: i64) -> &'static str {
    if ms.abs() > loops_scheduler::SKEW_WARN_MS {
        " (warning: over 2000 ms; fix the host's time)"
    } else {
        ""
    }
}

/// `daemon logs [-n N] [-f]`.
fn logs(ctx: &Context, args: &LogsArgs, out: &mut Printer) -> Result<Outcome> {
    let lines: usize = args
        .lines
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--lines must be a non-negative integer"))?;
    let path = daemon_paths(ctx)?.log_file();
    let (text, read) =
        log::tail_lines(&path, lines).with_context(|| format!("reading {}", path.display()))?;
    out.line(&text)?;
    if !args.follow {
        return Ok(Outcome::Success);
    }
    out.flush()?;
    // Ends only when stdout closes (a broken pipe exits quietly) or on
    // Ctrl-C, which ends the process.
    let mut stdout = std::io::stdout().lock();
    log::follow(&path, read, FOLLOW_POLL, &mut |chunk| {
        stdout.write_all(chunk.as_bytes())?;
        stdout.flush()
    })?;
    Ok(Outcome::Success)
}

fn platform(flag: Option<&str>) -> Result<Platform> {
    match flag {
        Some(name) => Platform::parse(name)
            .with_context(|| format!("--platform must be linux or macos, not {name}")),
        None => Platform::current().with_context(|| {
            format!(
                "startup install is not implemented for {}",
                std::env::consts::OS
            )
        }),
    }
}

fn home() -> Result<PathBuf> {
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home)),
        None => bail!("HOME is not set; the service file goes under $HOME"),
    }
}

/// `daemon install [--enable]`.
fn install(
    ctx: &Context,
    args: &InstallArgs,
    out: &mut Printer,
    binary: Binary,
) -> Result<Outcome> {
    let platform = platform(args.platform.as_deref())?;
    // Validated here, so a bad value fails now rather than in the service.
    let tuning = tuning(ctx, &args.run)?;
    let home = home()?;
    let paths = daemon_paths(ctx)?;
    let exe = std::env::current_exe().context("locating the loops executable")?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let spec = ServiceSpec {
        exe: exe.canonicalize().unwrap_or(exe),
        args: run_command_line(binary, &args.run),
        path_env: loops_exec::normalize_path(&env),
        data_dir: paths.data_dir.clone(),
        log_file: paths.log_file(),
        grace: tuning.grace,
        // Checked before it is written into the service.
        database_url: ctx.database_url_with_text()?.map(|(text, _)| text),
    };
    let installed = install::install_startup(platform, &home, &spec)
        .with_context(|| format!("writing the service file under {}", home.display()))?;
    let enabled = args
        .enable
        .then(|| install::enable_startup(&installed.instructions));
    if out.json {
        let mut value = serde_json::to_value(&installed)?;
        if let (Some(results), Value::Object(map)) = (&enabled, &mut value) {
            map.insert("enableResults".to_owned(), serde_json::to_value(results)?);
        }
        out.json(&value)?;
    } else {
        out.line(&format!("wrote {}", installed.path))?;
        for instruction in &installed.instructions {
            out.line(&format!("  {instruction}"))?;
        }
        for result in enabled.iter().flatten() {
            out.line(&enable_line(&result.command, result.status))?;
        }
    }
    let failed = enabled.iter().flatten().any(|r| r.status != 0);
    Ok(if failed {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

fn enable_line(command: &str, status: i32) -> String {
    if status == 0 {
        format!("{command} -> ok")
    } else {
        format!("{command} -> exit {status}")
    }
}

/// `daemon uninstall [--disable]`.
fn uninstall(args: &UninstallArgs, out: &mut Printer) -> Result<Outcome> {
    let platform = platform(args.platform.as_deref())?;
    let home = home()?;
    let mut ran = Vec::new();
    let present = install::service_path(platform, &home).exists();
    if args.disable && present {
        ran.extend(install::enable_startup(&install::unload_instructions(
            platform, &home,
        )));
    }
    let removed = install::uninstall_startup(platform, &home)
        .with_context(|| format!("removing the service file under {}", home.display()))?;
    if args.disable && removed.removed {
        ran.extend(install::enable_startup(&removed.instructions));
    }
    let instructions = if args.disable {
        Vec::new()
    } else {
        unload_then(platform, &home, &removed.instructions)
    };
    if out.json {
        let mut value = serde_json::to_value(&removed)?;
        if let Value::Object(map) = &mut value {
            map.insert("instructions".to_owned(), json!(instructions));
            if args.disable {
                map.insert("disableResults".to_owned(), serde_json::to_value(&ran)?);
            }
        }
        out.json(&value)?;
    } else {
        if removed.removed {
            out.line(&format!("removed {}", removed.path))?;
        } else {
            out.line(&format!("nothing to remove at {}", removed.path))?;
        }
        if removed.removed && !instructions.is_empty() {
            out.line("if the service is still loaded, unload it:")?;
            for instruction in &instructions {
                out.line(&format!("  {instruction}"))?;
            }
        }
        for result in &ran {
            out.line(&enable_line(&result.command, result.status))?;
        }
    }
    Ok(if ran.iter().any(|r| r.status != 0) {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

fn unload_then(platform: Platform, home: &Path, after: &[String]) -> Vec<String> {
    let mut all = install::unload_instructions(platform, home);
    all.extend(after.iter().cloned());
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_takes_durations_including_zero() {
        assert_eq!(
            grace(&Context::default(), "30s").unwrap(),
            Duration::from_secs(30)
        );
        assert_eq!(grace(&Context::default(), "0").unwrap(), Duration::ZERO);
        assert!(grace(&Context::default(), "soon").is_err());
    }
}
