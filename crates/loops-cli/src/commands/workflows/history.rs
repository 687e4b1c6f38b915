//! Recorded workflow runs: `runs`, `inspect`, `events`, `cancel` and
//! `recover` (SPEC §6.5, §6.6, §7.4).
//!
//! Departures from 0.3.1, on purpose:
//! - `inspect --json` redacts the steps' output unless `--show-output` is
//!   given, as every other surface does (SPEC §9 item 26); `inspect` lists
//!   every event of the run, not only the first 200.
//! - `events` checks the run id and fails with
//!   `workflow run not found: <id>` instead of printing nothing.
//! - `recover --json` lists the recovered steps as step-run objects, as
//!   `inspect` prints them (the original returns the rows too); the
//!   `recovered` event keeps listing their ids.

use anyhow::Result;
use loops_core::{StepRun, WorkflowEvent, WorkflowRunId};
use loops_store::{RecoveredWorkflowRun, WorkflowRunFilter};
use serde_json::{Value, json};

use super::{print_steps, run_id};
use crate::args::workflow::{CancelArgs, EventsArgs, InspectArgs, RecoverArgs, RunsArgs};
use crate::commands::now;
use crate::context::Context;
use crate::exit::Outcome;
use crate::human;
use crate::redact::{self, Output};
use crate::render::{Column, Printer, Table};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// `workflows runs [x] [--limit 50]`.
pub(super) fn runs(ctx: &Context, args: &RunsArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(WorkflowRuns {
            limit: resolve::positive_int(&args.limit, "--limit")?,
            target: args.target.clone(),
        })
    })
}

/// The typed request of `workflows runs`: the newest runs of every
/// workflow or of one.
struct WorkflowRuns {
    /// A workflow by id or name; `None` for every workflow.
    target: Option<String>,
    limit: u32,
}

/// What `workflows runs` returns: the runs, newest first.
struct WorkflowRunsListed(Vec<loops_core::WorkflowRun>);

impl Request for WorkflowRuns {
    type Document = WorkflowRunsListed;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<WorkflowRunsListed> {
        let store = ctx.open_store()?;
        let workflow_id = self
            .target
            .as_deref()
            .map(|t| store.require_workflow(t).map(|w| w.id))
            .transpose()?;
        let runs = store.list_workflow_runs(&WorkflowRunFilter {
            workflow_id,
            loop_run_id: None,
            limit: Some(self.limit),
        })?;
        Ok(WorkflowRunsListed(runs))
    }
}

impl Document for WorkflowRunsListed {
    fn json(&self, out: &mut Printer) -> Result<()> {
        out.json(&Value::from(
            self.0.iter().map(serialize).collect::<Result<Vec<_>>>()?,
        ))?;
        Ok(())
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        // On a terminal the table fits its width (issue 28): WORKFLOW is
        // cut with `…`; nothing is dropped. Times are local (`--json`
        // keeps UTC).
        let now = human::display_now();
        let mut table = Table::new(vec![
            Column::keep("RUN"),
            Column::keep("STATUS"),
            Column::shrink("WORKFLOW"),
            Column::keep("STARTED"),
        ]);
        for run in &self.0 {
            table.row(vec![
                run.id.to_string(),
                run.status.to_string(),
                run.workflow_name.clone(),
                run.started_at
                    .map_or_else(|| "-".to_owned(), |t| human::when(t, now)),
            ]);
        }
        out.table(&table, |_| Vec::new())?;
        Ok(())
    }
}

/// `workflows inspect <runId> [--show-output]`.
pub(super) fn inspect(ctx: &Context, args: &InspectArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(WorkflowInspect {
            id: run_id(&args.run.run)?,
            output: Output::from_flag(args.show_output),
        })
    })
}

/// The typed request of `workflows inspect`: one run, its steps and its
/// events.
struct WorkflowInspect {
    id: WorkflowRunId,
    output: Output,
}

/// What `workflows inspect` returns.
struct Inspected {
    run: loops_core::WorkflowRun,
    steps: Vec<StepRun>,
    events: Vec<WorkflowEvent>,
    output: Output,
}

impl Request for WorkflowInspect {
    type Document = Inspected;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Inspected> {
        let store = ctx.open_store()?;
        let run = store.require_workflow_run(&self.id)?;
        let steps = store.list_step_runs(&self.id)?;
        let events = store.list_events(&self.id, Some(u32::MAX))?;
        Ok(Inspected {
            run,
            steps,
            events,
            output: self.output,
        })
    }
}

impl Document for Inspected {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let output = self.output;
        out.json(&json!({
            "workflowRun": serialize(&self.run)?,
            "steps": self.steps.iter().map(|s| redact::step_json(s, output)).collect::<Value>(),
            "events": self.events.iter().map(serialize).collect::<Result<Vec<_>>>()?,
        }))?;
        Ok(())
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let run = &self.run;
        out.line(&format!(
            "{}  {}  {}",
            run.id, run.status, run.workflow_name
        ))?;
        if let Some(error) = &run.error {
            let error = ctx.error_line(error);
            out.line(&format!("  error: {error}"))?;
        }
        print_steps(ctx, &self.steps, self.output == Output::Shown, out)?;
        out.line(&format!("  events={}", self.events.len()))?;
        Ok(())
    }
}

/// `workflows events <runId> [--limit 200]`.
pub(super) fn events(ctx: &Context, args: &EventsArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        let limit = resolve::positive_int(&args.limit, "--limit")?;
        Ok(WorkflowEvents {
            limit,
            id: run_id(&args.run.run)?,
        })
    })
}

/// The typed request of `workflows events`: the first events of one run.
struct WorkflowEvents {
    id: WorkflowRunId,
    limit: u32,
}

/// What `workflows events` returns: the events, in order.
struct Events(Vec<WorkflowEvent>);

impl Request for WorkflowEvents {
    type Document = Events;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Events> {
        let store = ctx.open_store()?;
        store.require_workflow_run(&self.id)?;
        Ok(Events(store.list_events(&self.id, Some(self.limit))?))
    }
}

impl Document for Events {
    fn json(&self, out: &mut Printer) -> Result<()> {
        out.json(&Value::from(
            self.0.iter().map(serialize).collect::<Result<Vec<_>>>()?,
        ))?;
        Ok(())
    }

    /// `<seq padStart 3 "0">  <type>  <stepId or ->  <createdAt>`, aligned,
    /// the instant in local time (issue 28).
    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let mut table = Table::new(vec![
            Column::keep("SEQ"),
            Column::keep("EVENT"),
            Column::keep("STEP"),
            Column::keep("AT"),
        ]);
        for event in &self.0 {
            table.row(vec![
                format!("{:03}", event.sequence),
                event.event_type.clone(),
                event.step_id.clone().unwrap_or_else(|| "-".to_owned()),
                human::local_seconds(event.created_at),
            ]);
        }
        out.table(&table, |_| Vec::new())?;
        Ok(())
    }
}

/// `workflows cancel <runId> [--reason]`: `<id> <status>`.
///
/// Cancelling only writes rows (SPEC §6.5): the process running the
/// workflow notices and stops its step's process group.
pub(super) fn cancel(ctx: &Context, args: &CancelArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(WorkflowCancel {
            id: run_id(&args.run.run)?,
            reason: args.reason.clone(),
        })
    })
}

/// The typed request of `workflows cancel`.
struct WorkflowCancel {
    id: WorkflowRunId,
    reason: String,
}

/// What `workflows cancel` returns: the cancelled run.
struct Cancelled(loops_core::WorkflowRun);

impl Request for WorkflowCancel {
    type Document = Cancelled;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Cancelled> {
        let store = ctx.open_store()?;
        Ok(Cancelled(store.cancel_workflow_run(
            &self.id,
            &self.reason,
            now(),
        )?))
    }
}

impl Document for Cancelled {
    fn json(&self, out: &mut Printer) -> Result<()> {
        out.json(&serialize(&self.0)?)?;
        Ok(())
    }

    /// `<id> <status>`.
    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        out.line(&format!("{} {}", self.0.id, self.0.status))?;
        Ok(())
    }
}

/// `workflows recover <runId> [--reason]`: `<id> recovered=<n>`.
///
/// Fails with the store's `… still alive: <stepId> pid=<pid>` while a
/// running step's process lives, and changes nothing then.
pub(super) fn recover(ctx: &Context, args: &RecoverArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(WorkflowRecover {
            id: run_id(&args.run.run)?,
            reason: args.reason.clone(),
        })
    })
}

/// The typed request of `workflows recover`.
struct WorkflowRecover {
    id: WorkflowRunId,
    reason: String,
}

/// What `workflows recover` returns: the run and the steps it recovered.
struct Recovered(RecoveredWorkflowRun);

impl Request for WorkflowRecover {
    type Document = Recovered;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Recovered> {
        let store = ctx.open_store()?;
        Ok(Recovered(store.recover_workflow_run(
            &self.id,
            &self.reason,
            now(),
        )?))
    }
}

impl Document for Recovered {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let steps: Value = self
            .0
            .recovered_steps
            .iter()
            .map(|s| redact::step_json(s, Output::Redacted))
            .collect();
        out.json(&json!({
            "workflowRun": serialize(&self.0.run)?,
            "recoveredSteps": steps,
        }))?;
        Ok(())
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        out.line(&format!(
            "{} recovered={}",
            self.0.run.id,
            self.0.recovered_steps.len()
        ))?;
        Ok(())
    }
}

/// A record that carries no run output (a workflow run, an event) as JSON.
fn serialize<T: serde::Serialize>(record: &T) -> Result<Value> {
    Ok(serde_json::to_value(record)?)
}
