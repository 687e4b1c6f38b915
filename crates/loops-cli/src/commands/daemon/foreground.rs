//! `daemon run`: the foreground daemon, until SIGINT or SIGTERM (SPEC
//! §7.6).
//!
//! Unlike the other requests, this one's `run` is the whole life of the
//! daemon: it serves the store, writing its log as it goes, and returns
//! only when it stops. Its document is empty: everything the daemon has to
//! say went to its log (and to stderr, unless stderr is the log).

use std::time::Duration;

use anyhow::{Context as _, Result};
use loops_core::Clock;
use loops_exec::{SignalCancel, SystemClock};
use loops_scheduler::{
    ClockSync, DEFAULT_LEASE_TTL, DaemonOptions, DatabaseClock, ProcessExecutor,
};

use super::{Tuning, daemon_paths};
use crate::args::daemon::DaemonServeFlags;
use crate::context::Context;
use crate::render::Printer;
use crate::request::{Document, Request, Warnings};
use crate::service::log::{DaemonLog, LogConfig};

/// SIGTERM-to-SIGKILL time for the process groups a dead daemon left.
const ORPHAN_GRACE: Duration = Duration::from_secs(2);

/// The typed request of `daemon run`: the validated tuning.
pub(super) struct DaemonRun {
    pub(super) tuning: Tuning,
    /// `--poll-only`: no wake-ups through the socket.
    pub(super) poll_only: bool,
    /// `--serve`: the HTTP server to run beside the scheduler.
    pub(super) serve: Option<DaemonServeFlags>,
}

/// What `daemon run` returns once the daemon has stopped: nothing to
/// print.
pub(super) struct Served;

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

impl Request for DaemonRun {
    type Document = Served;

    /// Serves the store until a stop signal: the long-running daemon stays
    /// inside `run`, as a request's work, and logs as it goes.
    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Served> {
        // First of the effects, so a stop that arrives while the daemon
        // starts up is a clean stop, not a death by the signal's default
        // action.
        let signals = SignalCancel::install_daemon().context("installing the signal handlers")?;
        let tuning = self.tuning;
        let paths = daemon_paths(ctx)?;
        // Issue 30, P1: the store claims, and registers, with its labels.
        let store = ctx.open_store()?.with_labels(&tuning.labels);
        let log_path = paths.log_file();
        let log = DaemonLog::open(&log_path, LogConfig::default(), !stderr_is_file())
            .with_context(|| format!("opening {}", log_path.display()))?;
        // On a shared database the daemon's clock is the database's.
        let clock = DatabaseClock::new(SystemClock);
        let write = |line: &str| log.line(clock.now(), line);
        let note = |line: &str| write(&format!("warning: {line}"));
        // Each run's output goes to logs/<run-id>.log as it is produced.
        let executor =
            ProcessExecutor::for_store(&clock, &store).with_logs(paths.dir(), Some(&note));
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
            poll_only: self.poll_only,
        };
        // Started before the scheduler, so a taken port fails the start;
        // stopped once the scheduler has, and only then.
        let server = match &self.serve {
            Some(flags) => {
                let start = ctx
                    .start_server
                    .context("this program cannot serve HTTP: run loops daemon run --serve")?;
                let mut say = |line: &str| {
                    write(line);
                    Ok(())
                };
                Some(start(ctx, flags, &mut say)?)
            }
            None => None,
        };
        let ran = loops_scheduler::run_daemon(&store, &opts);
        if let Some(stop) = server
            && let Err(e) = stop()
        {
            write(&format!("warning: the HTTP server: {e:#}"));
        }
        match ran {
            Ok(_) => Ok(Served),
            Err(e) => {
                // Whoever started us in the background reads the log; stderr
                // gets the error from the exit code mapping.
                log.file_line(clock.now(), &format!("error: {e}"));
                Err(e.into())
            }
        }
    }
}

impl Document for Served {
    fn json(&self, _: &mut Printer) -> Result<()> {
        Ok(())
    }

    fn human(&self, _: &Context, _: &mut Printer) -> Result<()> {
        Ok(())
    }
}
