//! `daemon start` and `daemon stop` (SPEC §7.6): the daemon in the
//! background, through `service::control`.

use std::ffi::OsString;
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::daemon_paths;
use crate::commands::now;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::request::{Document, Request, Warnings};
use crate::service::control::{self, StartOutcome, StopOutcome};

/// The typed request of `daemon start`: the `daemon run` command line the
/// background daemon gets, its tuning already checked.
pub(super) struct DaemonStart {
    pub(super) command_line: Vec<String>,
}

/// What `daemon start` returns.
pub(super) struct Started(StartOutcome);

impl Request for DaemonStart {
    type Document = Started;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Started> {
        let paths = daemon_paths(ctx)?;
        let store = ctx.open_store()?;
        let exe = std::env::current_exe().context("locating the loops executable")?;
        let child_args: Vec<OsString> = self.command_line.into_iter().map(OsString::from).collect();
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
        Ok(Started(started))
    }
}

impl Started {
    /// Neither started nor running already.
    fn failed(&self) -> bool {
        !self.0.started && !self.0.already_running
    }
}

impl Document for Started {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json(&serde_json::to_value(&self.0)?)?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let started = &self.0;
        if started.already_running {
            out.line(&format!(
                "already running pid={}",
                started.pid.unwrap_or_default()
            ))?;
        } else if started.started {
            out.line(&format!("started pid={}", started.pid.unwrap_or_default()))?;
        } else {
            out.line("failed to start")?;
        }
        Ok(())
    }

    /// Why the daemon did not come up, in either format.
    fn notes(&self, ctx: &Context) {
        if self.failed()
            && let Some(error) = &self.0.error
        {
            ctx.note("error", error);
        }
    }

    fn outcome(&self) -> Outcome {
        if self.failed() {
            Outcome::Failure
        } else {
            Outcome::Success
        }
    }
}

/// The typed request of `daemon stop`: how long runs in flight may take
/// to finish.
pub(super) struct DaemonStop {
    pub(super) grace: Duration,
}

/// What `daemon stop` returns.
pub(super) struct Stopped(StopOutcome);

impl Request for DaemonStop {
    type Document = Stopped;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Stopped> {
        let paths = daemon_paths(ctx)?;
        // An unreadable database must not keep a running daemon from
        // stopping: the pid file and its process's start time identify it
        // then. A data directory another user could write is refused
        // outright: its pid file could name any of our processes.
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
                // Said now, as the stop begins, not with the output.
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
            self.grace,
            now(),
        )?;
        Ok(Stopped(stopped))
    }
}

impl Document for Stopped {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json(&serde_json::to_value(self.0)?)?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let stopped = &self.0;
        if stopped.was_running {
            out.line(&format!("stopped pid={}", stopped.pid.unwrap_or_default()))?;
        } else {
            out.line("not running")?;
        }
        Ok(())
    }
}
