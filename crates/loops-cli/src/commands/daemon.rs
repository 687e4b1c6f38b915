//! `loops daemon …` (SPEC §7.6).
//!
//! The work is `loops_scheduler::run_daemon`'s and `service`'s (start,
//! stop, status, the log, the units); this module and the ones under it
//! resolve the options into typed requests, run them to documents, and
//! render those. The daemon serves the one store the data directory or the
//! database URL selects: SQLite in `$LOOPS_DATA_DIR`, or PostgreSQL.
//!
//! - `foreground.rs`: `daemon run`, the long-running daemon itself.
//! - `background.rs`: `daemon start` and `daemon stop`.
//! - `status.rs`: `daemon status` and `daemon logs`.
//! - `install.rs`: `daemon install` and `daemon uninstall`.
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

mod background;
mod foreground;
mod install;
mod status;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result};
use loops_scheduler::{DEFAULT_MAX_SLEEP, DaemonPaths};

use crate::args::daemon::{DEFAULT_GRACE_FLAG, Daemon, RunArgs};
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::request;
use crate::resolve;

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

/// Runs one `daemon` subcommand: resolves its request, runs it, renders
/// the document. `binary` says how this executable runs the daemon
/// (`start`, `install`).
pub(crate) fn run(
    ctx: &Context,
    cmd: Daemon,
    out: &mut Printer,
    binary: Binary,
) -> Result<Outcome> {
    match cmd {
        Daemon::Run(args) => request::serve(ctx, out, |_| {
            Ok(foreground::DaemonRun {
                tuning: tuning(&args)?,
                poll_only: args.poll_only,
                serve: args.serve.serve.is_some().then(|| args.serve.clone()),
            })
        }),
        Daemon::Start(args) => request::serve(ctx, out, |_| {
            // Validated here, so a bad value fails now rather than in the
            // child, which gets the values as they were given.
            tuning(&args)?;
            Ok(background::DaemonStart {
                command_line: run_command_line(binary, &args),
            })
        }),
        Daemon::Stop(args) => request::serve(ctx, out, |_| {
            Ok(background::DaemonStop {
                grace: grace(&args.grace)?,
            })
        }),
        Daemon::Status => request::serve(ctx, out, |_| Ok(status::DaemonStatus)),
        Daemon::Logs(args) => request::serve(ctx, out, |_| {
            Ok(status::DaemonLogs {
                lines: args
                    .lines
                    .trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("--lines must be a non-negative integer"))?,
                follow: args.follow,
                loop_ref: args.loop_ref.clone(),
            })
        }),
        Daemon::Install(args) => request::serve(ctx, out, |_| {
            let platform = install::platform(args.platform.as_deref())?;
            // Validated here, so a bad value fails now rather than in the
            // service.
            let tuning = tuning(&args.run)?;
            Ok(install::DaemonInstall {
                platform,
                command_line: run_command_line(binary, &args.run),
                grace: tuning.grace,
                enable: args.enable,
            })
        }),
        Daemon::Uninstall(args) => request::serve(ctx, out, |_| {
            Ok(install::DaemonUninstall {
                platform: install::platform(args.platform.as_deref())?,
                disable: args.disable,
            })
        }),
    }
}

pub(super) fn daemon_paths(ctx: &Context) -> Result<DaemonPaths> {
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
    /// `--label`: the labels the daemon carries beside `host:<host>`
    /// (issue 30, P1).
    labels: Vec<String>,
}

fn tuning(args: &RunArgs) -> Result<Tuning> {
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
        grace: grace(&args.grace)?,
        gc: super::gc::daemon_settings(&args.gc)?,
        hooks: super::execute::hook_settings(args.on_failure.as_deref())?,
        labels: daemon_labels(&args.labels)?,
    })
    .and_then(|tuning| {
        if let Some(listen) = &args.serve.serve {
            // The address only: the certificate is read when serving.
            resolve::listen::address("--serve", listen, args.serve.tls_cert.is_some())?;
        }
        Ok(tuning)
    })
}

/// `--label` values of `daemon run|start|install`, repeated or
/// comma-separated, checked, in order, without duplicates (issue 30, P1).
/// A label never holds `*`, so no daemon carries `ANY_PLACEMENT`.
fn daemon_labels(values: &[String]) -> Result<Vec<String>> {
    resolve::policy::labels(values)
}

fn grace(value: &str) -> Result<Duration> {
    let ms = resolve::duration(value, "--grace")?;
    Ok(Duration::from_millis(ms))
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
    // Issue 30, P1: one `--label` with them all, as given.
    if let Ok(labels) = daemon_labels(&args.labels)
        && !labels.is_empty()
    {
        line.extend(["--label".to_owned(), labels.join(",")]);
    }
    if let Some(listen) = &args.serve.serve {
        line.extend(["--serve".to_owned(), listen.clone()]);
    }
    for (flag, path) in [
        ("--tls-cert", &args.serve.tls_cert),
        ("--tls-key", &args.serve.tls_key),
    ] {
        if let Some(path) = path {
            // Absolute, for a child or a service that runs elsewhere.
            let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            line.extend([flag.to_owned(), path.display().to_string()]);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_labels_split_and_refuse_bad_ones() {
        assert_eq!(
            daemon_labels(&["gpu,zone=eu".into(), "gpu".into()]).unwrap(),
            ["gpu", "zone=eu"]
        );
        assert!(daemon_labels(&["*".into()]).is_err());
        assert!(daemon_labels(&["bad label".into()]).is_err());
    }

    #[test]
    fn grace_takes_durations_including_zero() {
        assert_eq!(grace("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(grace("0").unwrap(), Duration::ZERO);
        assert!(grace("soon").is_err());
    }
}
