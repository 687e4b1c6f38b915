//! A workflow loop's output as steps (issue 28): what `logs`, `run-now
//! --show-output`, `runs <run-id> --show-output` and `status` print of a
//! run whose target is a workflow, instead of the JSON summary the run
//! stores as its stdout (SPEC §6.7, `loops_workflow::workflow_result`).
//!
//! A run is taken for a workflow loop's run when its stdout is such a
//! summary (`{workflowRun, steps}`) of a workflow run linked to this very
//! loop run (`workflowRun.loopRunId`), and its stderr is empty. The steps
//! come from the store's step rows when the workflow run is still there
//! (whole output), else from the summary (each stream's last 4 KiB). Any
//! other stdout (a command that prints JSON, a summary cut to fit the cap)
//! is printed as it is.
//!
//! Each step, in the order it started (never started last, in declaration
//! order): `step <id> <status> in <duration>, exit <code>: <error>`, then
//! its stdout and its stderr as `  stdout:` and `  stderr:` blocks, each
//! line four spaces in with its control characters escaped, tabs aside.
//! `--json` output is unchanged: it keeps the stored text.

use loops_core::{LoopRun, StepRun, WorkflowRun};
use serde::Deserialize;

use crate::context::Context;
use crate::render;

/// The summary a workflow loop's run stores as its stdout.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    workflow_run: WorkflowRun,
    steps: Vec<StepRun>,
    #[serde(default)]
    omitted_steps: Option<usize>,
}

/// The lines of `run`'s output as steps when it is a workflow loop's run,
/// unescaped but for the step output (a printer escapes what is left);
/// `None` for any other run. The store `ctx` selects is opened only for a
/// workflow loop's run.
pub(crate) fn workflow_lines(ctx: &Context, run: &LoopRun) -> Option<Vec<String>> {
    let summary = summary_of(run)?;
    let stored = ctx.open_store().ok().and_then(|store| {
        let id = &summary.workflow_run.id;
        store.get_workflow_run(id).ok()??;
        store.list_step_runs(id).ok()
    });
    Some(match stored {
        Some(steps) => step_lines(ctx, steps, 0),
        None => step_lines(
            ctx,
            summary.steps,
            summary.omitted_steps.unwrap_or_default(),
        ),
    })
}

/// `run`'s stored output as text: its steps for a workflow loop's run,
/// else its stdout then its stderr, each ending in a line break.
pub(crate) fn stored_text(ctx: &Context, run: &LoopRun) -> String {
    let mut text = String::new();
    match workflow_lines(ctx, run) {
        Some(lines) => {
            for line in lines {
                text.push_str(&line);
                text.push('\n');
            }
        }
        None => {
            let parts = [&run.stdout, &run.stderr].into_iter().flatten();
            for part in parts.filter(|p| !p.is_empty()) {
                text.push_str(part);
                if !part.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
    }
    text
}

/// The output blocks of `run` (SPEC §7.2) for `--show-output`: its steps
/// for a workflow loop's run, else `render::output_blocks`.
pub(crate) fn output_blocks(ctx: &Context, run: &LoopRun) -> Vec<String> {
    workflow_lines(ctx, run).unwrap_or_else(|| render::output_blocks(run))
}

/// The summary in `run`'s stdout, when it is one of a workflow run of
/// this loop run.
fn summary_of(run: &LoopRun) -> Option<Summary> {
    if run.stderr.as_deref().is_some_and(|e| !e.is_empty()) {
        return None;
    }
    let stdout = run.stdout.as_deref()?.trim_start();
    if !stdout.starts_with('{') {
        return None;
    }
    let summary: Summary = serde_json::from_str(stdout).ok()?;
    (summary.workflow_run.loop_run_id == Some(run.id)).then_some(summary)
}

/// The lines of `steps` in the order they started, and a last line for
/// the `omitted` steps a summary left out.
fn step_lines(ctx: &Context, mut steps: Vec<StepRun>, omitted: usize) -> Vec<String> {
    steps.sort_by_key(|s| (s.started_at.is_none(), s.started_at, s.sequence));
    let mut lines = Vec::new();
    for step in &steps {
        lines.push(step_head(ctx, step));
        for (label, text) in [("stdout", &step.stdout), ("stderr", &step.stderr)] {
            let Some(text) = text.as_deref().filter(|t| !t.is_empty()) else {
                continue;
            };
            lines.push(format!("  {label}:"));
            let text = text.strip_suffix('\n').unwrap_or(text);
            for line in text.split('\n') {
                let line = line.strip_suffix('\r').unwrap_or(line);
                lines.push(format!("    {}", render::escape_controls(line, &['\t'])));
            }
        }
    }
    if omitted > 0 {
        let steps = if omitted == 1 { "step" } else { "steps" };
        lines.push(format!(
            "({omitted} more {steps} not shown; `loops workflows inspect` lists them)"
        ));
    }
    lines
}

/// `step <id> <status> in <duration>, exit <code>: <error>`, with what is
/// known of these.
fn step_head(ctx: &Context, step: &StepRun) -> String {
    let mut line = format!(
        "step {} {}",
        render::escape_controls(&step.step_id, &[]),
        step.status.as_str()
    );
    if let Some(ms) = step.duration_ms {
        line.push_str(&format!(" in {}", super::duration(ms)));
    }
    if let Some(code) = step.exit_code {
        line.push_str(&format!(", exit {code}"));
    }
    if let Some(error) = step.error.as_deref().filter(|e| !e.is_empty()) {
        line.push_str(&format!(": {}", ctx.error_line(error)));
    }
    line
}
