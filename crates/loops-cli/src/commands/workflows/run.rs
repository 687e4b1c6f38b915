//! `workflows run <x> [--show-output] [--resume <runId>]` (SPEC §6.3,
//! §7.4).
//!
//! Departures from 0.3.1, on purpose:
//! - The command reports the run it started, never "the newest run of the
//!   workflow", which another process may have started meanwhile (SPEC §9
//!   item 38).
//! - It exits 0 only when the run succeeded, and 1 otherwise (the original
//!   exits 0 after a failed run).
//! - SIGINT and SIGTERM cancel the run (SPEC §9 item 19): the running steps'
//!   process groups are torn down, the run is recorded as cancelled and the
//!   command exits 1. The original left the child running and the run
//!   `running` forever.
//! - `--resume <runId>` continues a run whose runner died, after `workflows
//!   recover`, from its first unfinished step (SPEC §6.5: the original had
//!   no way to resume a manual run).
//! - `--json` prints the steps' output, and the summary's copy of it, only
//!   with `--show-output` (SPEC §9 item 26).
//!
//! Progress goes to stderr, one step line as each step starts and
//! finishes, so a long run shows what it is doing while stdout keeps the
//! original's lines for scripts.

use std::io::Write;
use std::sync::{Mutex, PoisonError};

use anyhow::{Context as _, Result, ensure};
use loops_core::{ExecutorStatus, StepRun, WorkflowRunId};
use loops_exec::{SignalCancel, SystemClock};
use loops_workflow::{WorkflowOutcome, WorkflowRunOptions, execute_workflow};
use serde_json::{Value, json};

use super::{id_width, print_steps, run_id, step_line};
use crate::args::workflow::RunArgs;
use crate::context::Context;
use crate::exit::Outcome;
use crate::redact::{self, Output};
use crate::render::{self, Printer};
use crate::request::{self, Document, Request, Warnings};

/// `workflows run`.
pub(super) fn run(ctx: &Context, args: &RunArgs, out: &mut Printer) -> Result<Outcome> {
    let json = out.json;
    request::serve(ctx, out, |_| {
        Ok(WorkflowRun {
            target: args.target.target.clone(),
            output: Output::from_flag(args.show_output),
            resume: args.resume.as_deref().map(run_id).transpose()?,
            progress: !json,
        })
    })
}

/// The typed request of `workflows run`: one run of a workflow, new or
/// resumed.
struct WorkflowRun {
    /// The workflow, by id or name.
    target: String,
    output: Output,
    /// The run to continue, after `workflows recover`.
    resume: Option<WorkflowRunId>,
    /// Human output: step lines on stderr as the steps start and finish,
    /// and a warning when recording the run has to be retried.
    progress: bool,
}

/// What `workflows run` returns: the run's outcome, and the signal that
/// interrupted it, if one did.
struct WorkflowRan {
    outcome: WorkflowOutcome,
    output: Output,
    interrupted: Option<String>,
}

impl Request for WorkflowRun {
    type Document = WorkflowRan;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<WorkflowRan> {
        let store = ctx.open_store()?;
        let workflow = store.require_workflow(&self.target)?;
        if let Some(id) = &self.resume {
            let run = store.require_workflow_run(id)?;
            ensure!(
                run.workflow_id == workflow.id,
                "workflow run {id} is a run of {} ({}), not of {} ({})",
                run.workflow_name,
                run.workflow_id,
                workflow.name,
                workflow.id
            );
        }
        let signals = SignalCancel::install().context("installing the SIGINT/SIGTERM handlers")?;
        let clock = SystemClock;
        let id_width = id_width(workflow.steps.iter().map(|s| s.id.as_str()));
        // Progress lines gather here and go to stderr whenever the runner
        // waits for its steps: one write for a burst of short steps. A closed
        // stderr only loses the progress. They are printed while the run
        // goes, so they cannot wait for the render step; human output only.
        let pending = Mutex::new(String::new());
        let progress = |step: &StepRun| {
            let mut lines = pending.lock().unwrap_or_else(PoisonError::into_inner);
            lines.push_str(&step_line(ctx, step, id_width));
            lines.push('\n');
        };
        // Issue 30 (Q2): a ready step whose pool is full waits, pending.
        let pool_wait = |step_id: &str, pool: &str, max_running: u32| {
            let mut lines = pending.lock().unwrap_or_else(PoisonError::into_inner);
            let sequence = workflow.steps.iter().position(|s| s.id == step_id);
            lines.push_str(&format!(
                "  {:02}  {:<10}  {:<id_width$}  waiting for pool {} ({max_running} running)\n",
                sequence.unwrap_or_default(),
                "pending",
                render::escape_controls(step_id, &[]),
                render::escape_controls(pool, &[]),
            ));
        };
        let flush = || {
            let mut lines = pending.lock().unwrap_or_else(PoisonError::into_inner);
            if !lines.is_empty() {
                let _ = std::io::stderr().lock().write_all(lines.as_bytes());
                lines.clear();
            }
        };
        // A write that failed on a transient store error (a full disk, a lock
        // held too long) is retried until it lands: said once per streak.
        let retrying = |e: &loops_store::StoreError| {
            flush();
            ctx.note(
                "warning",
                &format!("recording the workflow run failed, retrying until it succeeds: {e}"),
            );
        };
        let mut opts = WorkflowRunOptions::new(&clock);
        // Issue 25 §2: what the steps write never shows the database's
        // password.
        if let Some(location) = store.location() {
            loops_scheduler::mask_database_password(&mut opts.exec, &location);
        }
        opts.stop = Some(signals.token());
        opts.resume = self.resume;
        if self.progress {
            opts.on_step = Some(&progress);
            opts.on_idle = Some(&flush);
            opts.on_retry = Some(&retrying);
            opts.on_pool_wait = Some(&pool_wait);
        }
        let outcome = execute_workflow(&store, &workflow, &opts);
        flush();
        Ok(WorkflowRan {
            outcome: outcome?,
            output: self.output,
            interrupted: signals.token().reason(),
        })
    }
}

impl Document for WorkflowRan {
    /// Says on stderr, after the output, that a signal cut the workflow run short:
    /// an error, so said under `--quiet` too.
    fn notes(&self, ctx: &Context) {
        if let Some(reason) = &self.interrupted {
            ctx.note("error", &format!("workflow run interrupted ({reason})"));
        }
    }

    /// `{result, workflowRun, steps}`.
    fn json(&self, out: &mut Printer) -> Result<()> {
        let (outcome, output) = (&self.outcome, self.output);
        out.json(&json!({
            "result": redact::result_json(&outcome.result, output),
            "workflowRun": serde_json::to_value(&outcome.run)?,
            "steps": outcome
                .steps
                .iter()
                .map(|s| redact::step_json(s, output))
                .collect::<Value>(),
        }))?;
        Ok(())
    }

    /// `<runId> <mappedStatus>`, the run's error and the step lines with
    /// their output blocks.
    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let outcome = &self.outcome;
        out.line(&format!("{} {}", outcome.run.id, outcome.result.status))?;
        if let Some(error) = &outcome.result.error {
            let error = ctx.error_line(error);
            out.line(&format!("  error: {error}"))?;
        }
        print_steps(ctx, &outcome.steps, self.output == Output::Shown, out)?;
        Ok(())
    }

    /// 0 only when the run succeeded.
    fn outcome(&self) -> Outcome {
        if self.outcome.result.status == ExecutorStatus::Succeeded {
            Outcome::Success
        } else {
            Outcome::Failure
        }
    }
}
