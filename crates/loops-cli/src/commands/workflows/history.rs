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
use loops_core::{WorkflowEvent, WorkflowRun};
use loops_store::WorkflowRunFilter;
use serde_json::{Value, json};

use super::{print_steps, run_id};
use crate::args::workflow::{CancelArgs, EventsArgs, InspectArgs, RecoverArgs, RunsArgs};
use crate::commands::now;
use crate::context::Context;
use crate::exit::Outcome;
use crate::redact::{self, Output};
use crate::render::{Column, Printer, Table};
use crate::resolve;

/// `workflows runs [x] [--limit 50]`.
pub(super) fn runs(ctx: &Context, args: &RunsArgs, out: &mut Printer) -> Result<Outcome> {
    let limit = resolve::positive_int(&args.limit, "--limit")?;
    let store = ctx.open_store()?;
    let workflow_id = args
        .target
        .as_deref()
        .map(|t| store.require_workflow(t).map(|w| w.id))
        .transpose()?;
    let runs = store.list_workflow_runs(&WorkflowRunFilter {
        workflow_id,
        loop_run_id: None,
        limit: Some(limit),
    })?;
    if out.json {
        out.json(&Value::from(
            runs.iter().map(serialize).collect::<Result<Vec<_>>>()?,
        ))?;
        return Ok(Outcome::Success);
    }
    let mut table = Table::new(vec![
        Column { header: "RUN" },
        Column { header: "STATUS" },
        Column { header: "WORKFLOW" },
        Column { header: "STARTED" },
    ]);
    for run in &runs {
        table.row(vec![
            run.id.to_string(),
            run.status.to_string(),
            run.workflow_name.clone(),
            run.started_at
                .map_or_else(|| "-".to_owned(), |t| t.to_string()),
        ]);
    }
    out.table(&table, |_| Vec::new())?;
    Ok(Outcome::Success)
}

/// `workflows inspect <runId> [--show-output]`.
pub(super) fn inspect(ctx: &Context, args: &InspectArgs, out: &mut Printer) -> Result<Outcome> {
    let id = run_id(&args.run.run)?;
    let output = Output::from_flag(args.show_output);
    let store = ctx.open_store()?;
    let run = store.require_workflow_run(&id)?;
    let steps = store.list_step_runs(&id)?;
    let events = store.list_events(&id, Some(u32::MAX))?;
    if out.json {
        out.json(&json!({
            "workflowRun": serialize(&run)?,
            "steps": steps.iter().map(|s| redact::step_json(s, output)).collect::<Value>(),
            "events": events.iter().map(serialize).collect::<Result<Vec<_>>>()?,
        }))?;
        return Ok(Outcome::Success);
    }
    out.line(&format!(
        "{}  {}  {}",
        run.id, run.status, run.workflow_name
    ))?;
    if let Some(error) = &run.error {
        let error = ctx.error_line(error);
        out.line(&format!("  error: {error}"))?;
    }
    print_steps(ctx, &steps, args.show_output, out)?;
    out.line(&format!("  events={}", events.len()))?;
    Ok(Outcome::Success)
}

/// `workflows events <runId> [--limit 200]`.
pub(super) fn events(ctx: &Context, args: &EventsArgs, out: &mut Printer) -> Result<Outcome> {
    let limit = resolve::positive_int(&args.limit, "--limit")?;
    let id = run_id(&args.run.run)?;
    let store = ctx.open_store()?;
    store.require_workflow_run(&id)?;
    let events = store.list_events(&id, Some(limit))?;
    if out.json {
        out.json(&Value::from(
            events.iter().map(serialize).collect::<Result<Vec<_>>>()?,
        ))?;
        return Ok(Outcome::Success);
    }
    print_events(&events, out)?;
    Ok(Outcome::Success)
}

/// `<seq padStart 3 "0">  <type>  <stepId or ->  <createdAt>`, aligned.
fn print_events(events: &[WorkflowEvent], out: &mut Printer) -> std::io::Result<()> {
    let mut table = Table::new(vec![
        Column { header: "SEQ" },
        Column { header: "EVENT" },
        Column { header: "STEP" },
        Column { header: "AT" },
    ]);
    for event in events {
        table.row(vec![
            format!("{:03}", event.sequence),
            event.event_type.clone(),
            event.step_id.clone().unwrap_or_else(|| "-".to_owned()),
            event.created_at.to_string(),
        ]);
    }
    out.table(&table, |_| Vec::new())
}

/// `workflows cancel <runId> [--reason]`: `<id> <status>`.
///
/// Cancelling only writes rows (SPEC §6.5): the process running the
/// workflow notices and stops its step's process group.
pub(super) fn cancel(ctx: &Context, args: &CancelArgs, out: &mut Printer) -> Result<Outcome> {
    let id = run_id(&args.run.run)?;
    let store = ctx.open_store()?;
    let run = store.cancel_workflow_run(&id, &args.reason, now())?;
    print_status(&run, out)?;
    Ok(Outcome::Success)
}

/// `workflows recover <runId> [--reason]`: `<id> recovered=<n>`.
///
/// Fails with the store's `… still alive: <stepId> pid=<pid>` while a
/// running step's process lives, and changes nothing then.
pub(super) fn recover(ctx: &Context, args: &RecoverArgs, out: &mut Printer) -> Result<Outcome> {
    let id = run_id(&args.run.run)?;
    let store = ctx.open_store()?;
    let recovered = store.recover_workflow_run(&id, &args.reason, now())?;
    if out.json {
        let steps: Value = recovered
            .recovered_steps
            .iter()
            .map(|s| redact::step_json(s, Output::Redacted))
            .collect();
        out.json(&json!({
            "workflowRun": serialize(&recovered.run)?,
            "recoveredSteps": steps,
        }))?;
    } else {
        out.line(&format!(
            "{} recovered={}",
            recovered.run.id,
            recovered.recovered_steps.len()
        ))?;
    }
    Ok(Outcome::Success)
}

/// `<id> <status>`, or the run as JSON.
fn print_status(run: &WorkflowRun, out: &mut Printer) -> Result<()> {
    if out.json {
        out.json(&serialize(run)?)?;
    } else {
        out.line(&format!("{} {}", run.id, run.status))?;
    }
    Ok(())
}

/// A record that carries no run output (a workflow run, an event) as JSON.
fn serialize<T: serde::Serialize>(record: &T) -> Result<Value> {
    Ok(serde_json::to_value(record)?)
}
