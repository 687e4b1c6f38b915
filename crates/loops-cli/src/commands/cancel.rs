//! `loops cancel <run | loop>` (issue 28), and the `--cancel` of `stop`
//! and `remove`.
//!
//! The request is written on the run's row (`Store::request_cancel`), so
//! it reaches the runner holding the run on any host; a local daemon is
//! woken at once through its socket, and PostgreSQL's notify wakes the
//! daemons of every host. That runner stops the run's process group
//! (SIGTERM, `--grace`, SIGKILL) and records it `cancelled`. This command
//! then waits, reading the run, until it has ended: a `stop --cancel` or
//! `remove --cancel` goes on only once no process of the loop is left.

use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use loops_core::{Loop, LoopRun, RunId, RunStatus};
use loops_store::{CancelOutcome, RunFilter, Store};
use serde_json::{Value, json};

use super::now;
use crate::args::cancel::{CancelArgs, CancelFlags};
use crate::context::Context;
use crate::exit::Outcome;
use crate::redact::{self, Output};
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// How long past its grace a cancelled run may take to be recorded: the
/// runner holding it must see the request (at once when woken, else at
/// its next turn) and finalize it.
const RECORD_SLACK: Duration = Duration::from_secs(15);

/// How often the wait reads the runs.
const READ_EVERY: Duration = Duration::from_millis(50);

/// `cancel`.
pub(crate) fn run(ctx: &Context, args: &CancelArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Cancel {
            target: args.target.clone(),
            grace_ms: resolve::duration(&args.grace, "--grace")?,
            by: args.by.clone().unwrap_or_else(requester),
        })
    })
}

/// Who cancels from this command line: `user@host`.
pub(crate) fn requester() -> String {
    let user = ["USER", "LOGNAME"]
        .into_iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{user}@{}", loops_exec::hostname())
}

/// The typed request of `cancel`: a run id, or a loop (its running runs).
pub(crate) struct Cancel {
    pub(crate) target: String,
    pub(crate) grace_ms: u64,
    pub(crate) by: String,
}

/// What `cancel` did: the runs it cancelled, as recorded, and those it
/// found not running.
pub(crate) struct Cancelled {
    cancelled: Vec<LoopRun>,
    not_running: Vec<LoopRun>,
    /// The loop, when the target was one with no running run.
    idle_loop: Option<Loop>,
}

impl Request for Cancel {
    type Document = Cancelled;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Cancelled> {
        let store = ctx.open_store()?;
        let run = match self.target.parse::<RunId>() {
            Ok(id) => store.get_run(&id)?,
            Err(_) => None,
        };
        let (requested, not_running, idle_loop) = match run {
            Some(run) => match store.request_cancel(&run.id, &self.by, self.grace_ms, now())? {
                Some(CancelOutcome::Requested(run)) => (vec![run], Vec::new(), None),
                Some(CancelOutcome::NotRunning(run)) => (Vec::new(), vec![run], None),
                None => bail!("run {} was deleted meanwhile", run.id),
            },
            None => {
                let lp = store.require_loop(&self.target).map_err(|e| {
                    anyhow::anyhow!("{e} (cancel takes a run id or a loop's id or name)")
                })?;
                let runs = store.request_cancel_loop(&lp.id, &self.by, self.grace_ms, now())?;
                let idle = runs.is_empty().then_some(lp);
                (runs, Vec::new(), idle)
            }
        };
        let cancelled = wake_and_wait(ctx, &store, requested, self.grace_ms)?;
        Ok(Cancelled {
            cancelled,
            not_running,
            idle_loop,
        })
    }
}

impl Document for Cancelled {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let runs = |runs: &[LoopRun]| -> Value {
            runs.iter()
                .map(|r| redact::run_json(r, Output::Redacted))
                .collect()
        };
        Ok(out.json(&json!({
            "cancelled": runs(&self.cancelled),
            "notRunning": runs(&self.not_running),
        }))?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        for run in &self.cancelled {
            out.line(&cancelled_line(run))?;
        }
        for run in &self.not_running {
            out.line(&format!(
                "{} not running (it is {}); nothing to cancel",
                run.id, run.status
            ))?;
        }
        if let Some(lp) = &self.idle_loop {
            out.line(&format!(
                "{} ({}) has no running run; nothing to cancel",
                lp.name, lp.id
            ))?;
        }
        Ok(())
    }
}

/// `<run> cancelled (<loop>, by <who>)`.
fn cancelled_line(run: &LoopRun) -> String {
    format!(
        "{} {} ({}, by {})",
        run.id,
        run.status,
        run.loop_name,
        run.cancelled_by.as_deref().unwrap_or("unknown")
    )
}

/// Wakes a local daemon, then waits until every run of `requested` has
/// ended, and returns them as recorded. Fails, naming the runs and their
/// hosts, when one still runs `RECORD_SLACK` past the grace: its runner
/// has not seen the request yet (it stops it at its next turn).
fn wake_and_wait(
    ctx: &Context,
    store: &Store,
    requested: Vec<LoopRun>,
    grace_ms: u64,
) -> Result<Vec<LoopRun>> {
    if requested.is_empty() {
        return Ok(requested);
    }
    if let Ok(dir) = ctx.data_dir() {
        loops_scheduler::notify_daemon(&dir);
    }
    let deadline = Instant::now() + Duration::from_millis(grace_ms) + RECORD_SLACK;
    let mut runs = requested;
    loop {
        for run in &mut runs {
            if run.status == RunStatus::Running
                && let Some(stored) = store.get_run(&run.id)?
            {
                *run = stored;
            }
        }
        let running: Vec<&LoopRun> = runs
            .iter()
            .filter(|r| r.status == RunStatus::Running)
            .collect();
        if running.is_empty() {
            return Ok(runs);
        }
        if Instant::now() >= deadline {
            let names: Vec<String> = running
                .iter()
                .map(|r| {
                    format!(
                        "{} (held by {})",
                        r.id,
                        r.claimed_host.as_deref().unwrap_or("an unknown host")
                    )
                })
                .collect();
            bail!(
                "cancel requested, but {} still running after {}s: its runner stops it at its \
                 next turn, or lease recovery does if that runner is gone",
                names.join(", "),
                (Duration::from_millis(grace_ms) + RECORD_SLACK).as_secs()
            );
        }
        thread::sleep(READ_EVERY);
    }
}

/// The running runs of `lp`.
fn running_runs(store: &Store, lp: &Loop) -> Result<Vec<LoopRun>> {
    Ok(store.list_runs(&RunFilter {
        loop_id: Some(lp.id),
        status: Some(RunStatus::Running),
        limit: Some(u32::MAX),
        offset: None,
    })?)
}

/// What `stop` and `remove` do about `lp`'s running runs before they go
/// on (issue 28). With `--cancel`: cancel them and wait until each has
/// been recorded, so no process is left untracked; a run that does not
/// end in time fails the command. Without: a warning naming each run and
/// `--cancel`, or, for `remove --purge`, which would leave the process
/// untracked, a refusal.
pub(crate) fn settle_running(
    ctx: &Context,
    store: &Store,
    lp: &Loop,
    flags: &CancelFlags,
    purge: bool,
    warnings: &mut Warnings,
) -> Result<()> {
    if flags.cancel {
        let grace_ms = resolve::duration(&flags.grace, "--grace")?;
        let requested = store.request_cancel_loop(&lp.id, &requester(), grace_ms, now())?;
        for run in wake_and_wait(ctx, store, requested, grace_ms)? {
            ctx.note("note", &cancelled_line(&run));
        }
        return Ok(());
    }
    let running = running_runs(store, lp)?;
    let Some(first) = running.first() else {
        return Ok(());
    };
    let ids: Vec<&str> = running.iter().map(|r| r.id.as_str()).collect();
    if purge {
        bail!(
            "{} has a running run ({}); use --cancel to cancel it first, or wait for it to end",
            lp.name,
            ids.join(", ")
        );
    }
    warnings.push(format!(
        "{} has a running run ({}), which goes on; add --cancel to cancel it \
         (or: loops cancel {})",
        lp.name,
        ids.join(", "),
        first.id
    ));
    Ok(())
}
